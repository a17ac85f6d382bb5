#include "weft/kernels/cpu_support.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "weft/core/error.h"
#include "weft/kernels/cpu/onednn.h"

namespace weft::kernels {

namespace {

std::string cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) return line + " ";
  return {};
}

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::sse41: return "sse41";
    default: return "unknown";
  }
}

// Whether oneDNN builds the bf16 primitives weft uses: matmul with bf16 and
// f32 outputs and the sum post-op, and GELU forward and backward. oneDNN 2.6
// has none of them below AVX-512.
bool probe_native_bf16() {
  using dnnl::memory;
  try {
    const auto bf16 = memory::data_type::bf16, f32 = memory::data_type::f32;
    dnnl::primitive_attr sum;
    dnnl::post_ops po;
    po.append_sum(1.0f);
    sum.set_post_ops(po);
    for (auto out : {bf16, f32}) {
      memory::desc a({8, 8}, bf16, memory::format_tag::ab), b({8, 8}, bf16, memory::format_tag::ba),
          c({8, 8}, out, memory::format_tag::ab);
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), sum, cpu::engine());
    }
    memory::desc md({64}, bf16, memory::format_tag::a);
    auto alg = dnnl::algorithm::eltwise_gelu_tanh;
    dnnl::eltwise_forward::primitive_desc fpd(
        {dnnl::prop_kind::forward_training, alg, md, 0.f, 0.f}, cpu::engine());
    dnnl::eltwise_backward::primitive_desc({alg, md, md, 0.f, 0.f}, cpu::engine(), fpd);
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

CpuSupport detect() {
  CpuSupport s;
  const std::string flags = cpu_flags();
  auto has = [&](const char* f) {
    return flags.find(std::string(" ") + f + " ") != std::string::npos;
  };
  s.avx2 = has("avx2");
  s.avx512 = has("avx512f");
  s.avx512_bf16 = has("avx512_bf16");
  s.amx = has("amx_bf16") && has("amx_tile");
  const dnnl_version_t* v = dnnl::version();
  s.onednn_version =
      std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  s.onednn_isa = isa_name(dnnl::get_effective_cpu_isa());
  s.native_bf16 = probe_native_bf16();
  s.vector_isa = vector_isa();
  return s;
}

VectorIsa capped_isa() {
  VectorIsa isa = VectorIsa::baseline;
  if (processor_runs(VectorIsa::avx512)) {
    isa = VectorIsa::avx512;
  } else if (processor_runs(VectorIsa::avx2)) {
    isa = VectorIsa::avx2;
  }
  const char* env = std::getenv("WEFT_MAX_CPU_ISA");
  if (env == nullptr || *env == '\0') return isa;
  std::string cap(env);
  std::transform(cap.begin(), cap.end(), cap.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (VectorIsa v : {VectorIsa::baseline, VectorIsa::avx2, VectorIsa::avx512}) {
    if (cap == vector_isa_name(v)) return std::min(isa, v);
  }
  WEFT_FAIL("WEFT_MAX_CPU_ISA is '{}': set it to avx512, avx2 or baseline, or unset it", env);
}

}  // namespace

const char* vector_isa_name(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::avx512: return "avx512";
    case VectorIsa::avx2: return "avx2";
    default: return "baseline";
  }
}

bool processor_runs(VectorIsa isa) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  switch (isa) {
    case VectorIsa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    case VectorIsa::avx2: return __builtin_cpu_supports("avx2");
    default: return true;
  }
#else
  return isa == VectorIsa::baseline;
#endif
}

VectorIsa vector_isa() {
  static const VectorIsa isa = capped_isa();
  return isa;
}

const CpuSupport& cpu_support() {
  static const CpuSupport s = detect();
  return s;
}

std::string gemm_path(DType dtype) {
  if (dtype == DType::bf16 && !cpu_support().native_bf16)
    return "emulated (bf16 values, f32 kernels)";
  return "native";
}

std::string describe_cpu_support() {
  const CpuSupport& s = cpu_support();
  auto yn = [](bool b) { return b ? "yes" : "no"; };
  std::ostringstream out;
  out << "AVX2: " << yn(s.avx2) << ", AVX-512: " << yn(s.avx512)
      << ", AVX-512-BF16: " << yn(s.avx512_bf16) << ", AMX: " << yn(s.amx) << "; oneDNN "
      << s.onednn_version << " uses " << s.onednn_isa << "; weft's vector kernels "
      << vector_isa_name(s.vector_isa) << "; f32 " << gemm_path(DType::f32) << ", bf16 "
      << gemm_path(DType::bf16);
  return out.str();
}

}  // namespace weft::kernels
