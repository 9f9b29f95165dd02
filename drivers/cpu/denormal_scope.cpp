#include "drivers/cpu/denormal_scope.h"

#include <omp.h>
#if defined(__x86_64__) || defined(__i386__)
#include <pmmintrin.h>  // _MM_DENORMALS_ZERO_ON
#include <xmmintrin.h>
#define DLSCALE_HAS_MXCSR 1
#endif

namespace dlscale {

Support cpu_supports_denormals(Denormals mode) {
#ifdef DLSCALE_HAS_MXCSR
  (void)mode;
  return Support::yes();
#else
  if (mode == Denormals::kIeee) return Support::yes();
  return Support::no("denormals=flush: this build sets flush-to-zero through x86's MXCSR, which this CPU lacks");
#endif
}

DenormalScope::DenormalScope(Denormals mode, int threads) : threads_(threads < 1 ? 1 : threads) {
#ifdef DLSCALE_HAS_MXCSR
  constexpr unsigned kFlushBits = _MM_FLUSH_ZERO_ON | _MM_DENORMALS_ZERO_ON;
  saved_.assign(static_cast<size_t>(threads_), 0);
  // Thread 0 of the team is the calling thread.
#pragma omp parallel num_threads(threads_)
  {
    const auto t = static_cast<size_t>(omp_get_thread_num());
    saved_[t] = _mm_getcsr();
    _mm_setcsr(mode == Denormals::kFlush ? (saved_[t] | kFlushBits) : (saved_[t] & ~kFlushBits));
  }
#else
  (void)mode;  // IEEE is the only mode, and the CPU's default
#endif
}

DenormalScope::~DenormalScope() {
#ifdef DLSCALE_HAS_MXCSR
  if (saved_.empty()) return;
#pragma omp parallel num_threads(threads_)
  {
    const auto t = static_cast<size_t>(omp_get_thread_num());
    if (t < saved_.size()) _mm_setcsr(saved_[t]);
  }
#endif
}

}  // namespace dlscale
