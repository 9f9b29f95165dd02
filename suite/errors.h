// Error kinds of the harness and the MPI check macro. A UsageError is bad input: it is found
// before any benchmark work, printed as one line, and exits with code 2 on every rank.
#pragma once

#include <mpi.h>

#include <stdexcept>
#include <string>

namespace dlscale {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A failed MPI call. MPI_COMM_WORLD returns errors instead of aborting (MpiSession), so this is
/// what a lost rank or a broken communicator looks like; nothing collective can follow it.
class MpiError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws MpiError naming the MPI call, its location, the rank and MPI's message.
[[noreturn]] void mpi_fail(int code, const char* call, const char* file, int line);

#define DLSCALE_CHECK_MPI(call)                                                                          \
  do {                                                                                                   \
    const int dlscale_mpi_rc_ = (call);                                                                  \
    if (dlscale_mpi_rc_ != MPI_SUCCESS) ::dlscale::mpi_fail(dlscale_mpi_rc_, #call, __FILE__, __LINE__); \
  } while (0)

}  // namespace dlscale
