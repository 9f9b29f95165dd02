// main() of the GoogleTest binaries that run without MPI: the BLAS kernels chosen as dlscale
// chooses them (drivers/cpu/blas_core.h), so that the tests compute with what dlscale computes
// with, then GoogleTest.
#include <gtest/gtest.h>

#include "drivers/cpu/blas_core.h"

int main(int argc, char** argv) {
  dlscale::select_blas_core(argv);
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  // CTest runs a binary as one test (tests/CMakeLists.txt): one whose every case skipped, as the
  // GPU cases do without a GPU, exits 77 so that CTest reports it skipped rather than passed.
  const ::testing::UnitTest& run = *::testing::UnitTest::GetInstance();
  if (failed == 0 && run.successful_test_count() == 0 && run.skipped_test_count() > 0) return 77;
  return failed;
}
