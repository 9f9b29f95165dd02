// The BLAS kernels chosen before a program's libraries start (blas_core_early.cpp), as
// blas_core.cpp reads them to record the choice: internal to drivers/cpu/.
#pragma once

namespace dlscale::blas_early {

/// The environment variables of the choice: what dlscale set before starting again with other
/// kernels, and the user's policy.
inline constexpr const char* kChosenVar = "DLSCALE_BLAS_CORE_CHOSEN";  ///< the core OpenBLAS chose on its own
inline constexpr const char* kPolicyVar = "DLSCALE_BLAS_CORE";         ///< "keep": leave the library's choice
inline constexpr const char* kFallbackVar = "DLSCALE_TEST_BLAS_FALLBACK";  ///< io/fault_injection.h

/// What became of the kernels tried, when they did not replace OpenBLAS's own.
enum class Outcome : int {
  kNotTried = 0,   ///< nothing was tried (nothing to choose, or a restart replaced the process)
  kNoProgram,      ///< dlscale-blas-check is not where the build or install put it
  kSpawnFailed,    ///< the checking child could not be started (detail: errno)
  kTimedOut,       ///< the child did not finish its product in time
  kCrashed,        ///< the child died by a signal (detail: the signal)
  kDisagreed,      ///< its product disagrees with float64
  kNoSgemm,        ///< the library has no sgemm_
  kNoLoad,         ///< the library does not load in the child
  kOtherExit,      ///< the child exited otherwise (detail: its exit code)
  kRestartFailed,  ///< the kernels passed, but starting the program again failed (detail: errno)
};

struct Decision {
  Outcome outcome;
  int detail;
  char candidate[32];  ///< the kernels tried, e.g. "SkylakeX"
  char library[512];   ///< the BLAS library file they were tried on
};

/// The decision of this process's start (zeroed: kNotTried, where none was needed or made).
const Decision& decision();

/// How many seconds the checking child may take.
inline constexpr int kChildSeconds = 60;

/// The instruction set an OpenBLAS core's kernels use (3 AVX-512, 2 AVX2 and FMA, 1 AVX, 0
/// older), case-insensitively; the best core for this CPU's instruction set (cpuid), "" where
/// none beats generic kernels; whether `--blas-core keep` or DLSCALE_BLAS_CORE=keep asks for
/// the library's own choice. Usable before the C library has started (no allocation).
int isa_level(const char* core);
const char* best_core(bool avx512, bool avx2_fma, bool avx);
const char* best_core_here();
bool keep_requested(char** argv, char** envp);

}  // namespace dlscale::blas_early
