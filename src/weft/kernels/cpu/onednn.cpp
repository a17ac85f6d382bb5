#include "weft/kernels/cpu/onednn.h"

#include <omp.h>

#include "weft/core/error.h"
#include "weft/core/threads.h"

namespace weft::kernels::cpu {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

int apply_thread_budget() {
  thread_local int applied = 0;
  int n = num_threads();
  if (n != applied) {
    omp_set_num_threads(n);
    applied = n;
  }
  return n;
}

dnnl::memory::data_type to_dnnl(DType t) {
  switch (t) {
    case DType::f32: return dnnl::memory::data_type::f32;
    case DType::bf16: return dnnl::memory::data_type::bf16;
    case DType::f16: return dnnl::memory::data_type::f16;
    case DType::i32: return dnnl::memory::data_type::s32;
    case DType::u8: return dnnl::memory::data_type::u8;
    default: WEFT_FAIL("oneDNN has no {} data type", dtype_name(t));
  }
}

}  // namespace weft::kernels::cpu
