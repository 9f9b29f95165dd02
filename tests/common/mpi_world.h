// This process's place in MPI_COMM_WORLD, for the tests that run under mpiexec (their main() is
// tests/common/mpi_gtest_main.cpp).
#pragma once

#include <mpi.h>

#include <stdexcept>

namespace dlscale {

inline int world_rank() {
  int rank = 0;
  if (MPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS) throw std::runtime_error("MPI_Comm_rank failed");
  return rank;
}

inline int world_size() {
  int size = 0;
  if (MPI_Comm_size(MPI_COMM_WORLD, &size) != MPI_SUCCESS) throw std::runtime_error("MPI_Comm_size failed");
  return size;
}

}  // namespace dlscale
