// Which OpenBLAS kernels dlscale takes for a CPU (drivers/cpu/blas_core.h): the best its
// instruction set runs, and whether the library's own choice falls below it. The choice on real
// processes, the child's check and the restart are tests/e2e/test_blas_core.py's.
#include <gtest/gtest.h>

#include "drivers/cpu/blas_core.h"

namespace dlscale {
namespace {

TEST(BlasCore, TheBestKernelsForAnInstructionSet) {
  EXPECT_EQ(best_openblas_core(true, true, true), "SkylakeX");
  EXPECT_EQ(best_openblas_core(false, true, true), "Haswell");
  EXPECT_EQ(best_openblas_core(false, false, true), "Sandybridge");
  EXPECT_EQ(best_openblas_core(false, false, false), "");
}

TEST(BlasCore, AFallbackIsBelowTheCpuAndTheLibrarysOwnChoicesAreNot) {
  // The generic kernels OpenBLAS falls back to on a CPU it does not know.
  for (const char* generic : {"Prescott", "Core2", "Nehalem", "Katmai", "Barcelona"}) {
    EXPECT_TRUE(openblas_core_below(generic, "SkylakeX")) << generic;
    EXPECT_TRUE(openblas_core_below(generic, "Haswell")) << generic;
  }
  // AVX2 kernels on an AVX-512 CPU (an OpenBLAS that predates it): below.
  EXPECT_TRUE(openblas_core_below("Haswell", "SkylakeX"));
  EXPECT_TRUE(openblas_core_below("Zen", "SkylakeX"));
  // The library's own kernels at the CPU's level (AMD's Zen, Intel's Cooperlake): kept, whatever
  // the spelling.
  EXPECT_FALSE(openblas_core_below("Zen", "Haswell"));
  EXPECT_FALSE(openblas_core_below("COOPERLAKE", "SkylakeX"));
  EXPECT_FALSE(openblas_core_below("SkylakeX", "SkylakeX"));
  // Nothing better than generic kernels: nothing is below it.
  EXPECT_FALSE(openblas_core_below("Prescott", ""));
}

}  // namespace
}  // namespace dlscale
