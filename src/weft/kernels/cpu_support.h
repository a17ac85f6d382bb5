// What this processor and oneDNN can run, found once per process: the CPU's
// vector features, the ISA oneDNN dispatches to (which ONEDNN_MAX_CPU_ISA or
// DNNL_MAX_CPU_ISA may cap), the ISA weft's own hand-vectorized kernels run on
// (which WEFT_MAX_CPU_ISA may cap), and for each dtype whether GEMMs run
// natively or are emulated. Emulated bf16 keeps bf16 semantics exactly — bf16 operands,
// f32 accumulation, outputs rounded to bf16 — by widening the operands to f32
// and running the f32 kernel.
#pragma once

#include <string>

#include "weft/core/dtype.h"

namespace weft::kernels {

// The builds of weft's hand-vectorized kernels (the casts, kernels/cpu/cast_simd.h):
// avx512 needs AVX-512 F, BW, VL and DQ; avx2 needs AVX2; baseline is the
// compiler's code for the x86-64 (or other) baseline.
enum class VectorIsa { baseline, avx2, avx512 };

// "baseline", "avx2", "avx512".
const char* vector_isa_name(VectorIsa isa);

// The widest build this processor runs, capped by WEFT_MAX_CPU_ISA
// (avx512, avx2 or baseline, any case; an unknown value throws weft::Error).
// Read once per process; cheaper than cpu_support() (no oneDNN probe).
VectorIsa vector_isa();

// Whether the processor runs `isa`'s build, whatever the cap.
bool processor_runs(VectorIsa isa);

struct CpuSupport {
  bool avx2 = false, avx512 = false, avx512_bf16 = false, amx = false;
  std::string onednn_version;  // "2.6.3"
  std::string onednn_isa;      // "avx512_core_amx", "avx2", ...
  // oneDNN builds bf16 matmul and eltwise primitives on this ISA.
  bool native_bf16 = false;
  VectorIsa vector_isa = VectorIsa::baseline;  // vector_isa()
};

const CpuSupport& cpu_support();

// "native" or "emulated (f32 kernels on bf16 values)" for a GEMM input dtype.
std::string gemm_path(DType dtype);

// One line: the CPU features, oneDNN's version and ISA, weft's vector ISA and
// each dtype's path.
std::string describe_cpu_support();

}  // namespace weft::kernels
