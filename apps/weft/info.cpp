// `weft info`: what this machine gives weft — the CPU's features, the ISA
// oneDNN dispatches to, which path each compute dtype takes, threads, and
// the communication backends built in.
#include <cstdlib>
#include <iostream>
#include <string>

#include "cli.h"
#include "weft/comm/world.h"
#include "weft/core/cuda.h"
#include "weft/core/threads.h"
#include "weft/kernels/attention.h"
#include "weft/kernels/cpu_support.h"
#include "weft/parallel/gemm_quantizer.h"

namespace weft {
namespace {

// How OpenMP threads wait: weft's default (main.cpp) or what the user set.
std::string openmp_wait() {
  auto env = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
  };
  const char* mine = env("WEFT_OMP_WAIT");
  const char* spin = env("GOMP_SPINCOUNT");
  const char* policy = env("OMP_WAIT_POLICY");
  if (mine && spin) return std::string("GOMP_SPINCOUNT=") + spin + " (weft's default)";
  std::string out;
  if (policy) out += std::string("OMP_WAIT_POLICY=") + policy;
  if (spin) out += std::string(out.empty() ? "" : ", ") + "GOMP_SPINCOUNT=" + spin;
  return out.empty() ? "libgomp's default wait" : out + " (set by the user)";
}

cli::Options info_options() {
  cli::Options opts("weft info [options]",
                    "Prints the CPU features weft found, the instruction set oneDNN uses\n"
                    "(ONEDNN_MAX_CPU_ISA caps it), the one weft's own vector kernels use (the\n"
                    "FP8/MXFP8/NVFP4 casts; WEFT_MAX_CPU_ISA=avx512|avx2|baseline caps it),\n"
                    "whether f32 and bf16 GEMMs run natively or\n"
                    "are emulated (bf16 values on f32 kernels: exact bf16 semantics, f32 speed,\n"
                    "on CPUs without AVX-512), the threads each rank's kernels use\n"
                    "(WEFT_NUM_THREADS, else OMP_NUM_THREADS, else the cores divided among the\n"
                    "ranks of the process), the backends built in, the GPUs, and whether\n"
                    "cuDNN's fused attention runs on them (WEFT_CUDNN=off turns it off), and\n"
                    "whether the FP8 recipes' GEMMs multiply FP8 natively or emulate it\n"
                    "(WEFT_FP8_GEMM=emulate|native overrides the choice).");
  opts.flag("json", "print one JSON object");
  return opts;
}

int info(const std::vector<std::string>& args) {
  cli::Options opts = info_options();
  opts.parse(args);
  const kernels::CpuSupport& s = kernels::cpu_support();
#ifdef WEFT_HAVE_MPI
  const bool mpi = true;
#else
  const bool mpi = false;
#endif
#if WEFT_HAVE_NCCL
  const bool nccl = true;
#else
  const bool nccl = false;
#endif
  std::vector<std::string> gpus;
  for (int i = 0; i < cuda::device_count(); ++i) gpus.push_back(cuda::device_description(i));
  // cuDNN's fused attention on the GPUs: its version, or why it is off.
  const std::string cudnn =
      gpus.empty() ? "no GPU" : kernels::attention_cudnn_status(Device::cuda(0));
  // The per-tensor FP8 recipes' GEMMs on the CPU and the first GPU.
  const std::string fp8_cpu =
      parallel::quantized_gemm_path(Device::cpu(), parallel::Recipe::fp8_delayed).text;
  const std::string fp8_gpu =
      gpus.empty()
          ? "no GPU"
          : parallel::quantized_gemm_path(Device::cuda(0), parallel::Recipe::fp8_delayed).text;
  auto yn = [](bool b) { return b ? "yes" : "no"; };
  auto tf = [](bool b) { return b ? "true" : "false"; };
  if (opts.flag_set("json")) {
    std::cout << "{\"version\":\"" << WEFT_VERSION << "\",\"avx2\":" << tf(s.avx2)
              << ",\"avx512\":" << tf(s.avx512) << ",\"avx512_bf16\":" << tf(s.avx512_bf16)
              << ",\"amx\":" << tf(s.amx) << ",\"onednn\":\"" << s.onednn_version
              << "\",\"onednn_isa\":\"" << s.onednn_isa << "\",\"bf16\":\""
              << (s.native_bf16 ? "native" : "emulated") << "\",\"vector_isa\":\""
              << kernels::vector_isa_name(s.vector_isa) << "\",\"threads\":" << num_threads()
              << ",\"cores\":" << available_cores() << ",\"openmp_wait\":\"" << openmp_wait()
              << "\",\"backends\":[\"local\"" << (mpi ? ",\"mpi\"" : "")
              << (nccl ? ",\"nccl\"" : "") << "],\"cuda\":" << tf(cuda::built()) << ",\"gpus\":[";
    for (size_t i = 0; i < gpus.size(); ++i) std::cout << (i ? "," : "") << '"' << gpus[i] << '"';
    std::cout << "],\"cudnn_attention\":\"" << cudnn << "\",\"fp8_gemm_cpu\":\"" << fp8_cpu
              << "\",\"fp8_gemm_gpu\":\"" << fp8_gpu << "\"}\n";
    return 0;
  }
  std::cout << "weft " << WEFT_VERSION << "\n"
            << "cpu:      AVX2 " << yn(s.avx2) << ", AVX-512 " << yn(s.avx512) << ", AVX-512-BF16 "
            << yn(s.avx512_bf16) << ", AMX " << yn(s.amx) << "\n"
            << "oneDNN:   " << s.onednn_version << ", uses " << s.onednn_isa << "\n"
            << "vectors:  " << kernels::vector_isa_name(s.vector_isa)
            << " (weft's own kernels: the casts)\n"
            << "f32 GEMM: " << kernels::gemm_path(DType::f32) << "\n"
            << "bf16 GEMM: " << kernels::gemm_path(DType::bf16) << "\n"
            << "threads:  " << num_threads() << " per rank (" << available_cores()
            << " cores available)\n"
            << "openmp:   " << openmp_wait() << "\n"
            << "backends: local" << (mpi ? ", mpi" : "") << (nccl ? ", nccl" : "")
            << " (launched by mpirun: " << yn(comm::launched_by_mpi()) << ")\n"
            << "fp8 GEMM: fp8-delayed/current on the CPU " << fp8_cpu
            << "; fp8-block, mxfp8 and nvfp4 always emulated\n";
  if (gpus.empty()) {
    std::cout << "gpu:      none (" << cuda::unavailable_reason() << ")\n";
  }
  for (size_t i = 0; i < gpus.size(); ++i)
    std::cout << "gpu:      cuda:" << i << " " << gpus[i] << "\n";
  if (!gpus.empty()) {
    std::cout << "fp8 GEMM: fp8-delayed/current on cuda:0 " << fp8_gpu << "\n";
    std::cout << "attention: " << cudnn
              << (cudnn.starts_with("off") ? "; weft's own kernels run every call"
                                           : " fused attention for bf16 calls it takes (no "
                                             "dropout, MHA or MQA, head widths 8k <= 128); "
                                             "weft's own kernels otherwise")
              << "\n";
  }
  return 0;
}

cli::Register reg("info",
                  "print the CPU features, the kernel path of each dtype, threads, the GPUs",
                  info_options, info);

}  // namespace
}  // namespace weft
