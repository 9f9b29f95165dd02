// main() of the GoogleTest binaries that run under mpiexec: the BLAS kernels and MPI started as
// dlscale chooses and starts them (drivers/cpu/blas_core.h; MPI_THREAD_SERIALIZED, which the
// bucketed all-reduce's communication thread needs), only rank 0 prints gtest's report, and a
// failure on any rank fails every rank's exit code.
#include <gtest/gtest.h>
#include <mpi.h>

#include "drivers/cpu/blas_core.h"

int main(int argc, char** argv) {
  dlscale::select_blas_core(argv);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0, any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed;
}
