// main() of the GoogleTest binaries that run without MPI: the BLAS kernels chosen as dlscale
// chooses them (drivers/cpu/blas_core.h), so that the tests compute with what dlscale computes
// with, then GoogleTest.
#include <gtest/gtest.h>

#include "drivers/cpu/blas_core.h"

int main(int argc, char** argv) {
  dlscale::select_blas_core(argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
