// The MPI library's own settings that shape dlscale's figures, read through the MPI tool
// interface (MPI_T control variables) after MPI_Init: how ranks on different hosts talk, and how
// MPI_Allreduce chooses its algorithm. Each names the library's variables it found; a library
// without them (or without the tool interface) is said to be so, and nothing fails.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dlscale {

/// "name=value name=value" for those of `names` that the library has, in the order of `names`
/// (enumerations by their item's name, booleans true/false); "" for none. `skip_empty` leaves
/// out variables whose value is the empty string. `*failed`, where given, is set when a tool
/// interface call failed. Never lowers the thread level MPI gave (Open MPI 4.1 takes
/// MPI_T_init_thread's as the process's).
std::string mpi_control_variables(const std::vector<std::string>& names, bool skip_empty = false,
                                  bool* failed = nullptr);

/// The transport settings: e.g. "pml=ob1 btl=tcp,self btl_tcp_if_include=10.77.0.0/24", or what
/// the library chose on its own where none is set.
std::string mpi_transport();

/// How MPI_Allreduce picks its algorithm: e.g. Open MPI's "coll_tuned_use_dynamic_rules=false
/// coll_tuned_allreduce_algorithm=ignore coll_tuned_allreduce_algorithm_segmentsize=0" (its fixed
/// rules by size and P), MPICH's "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=auto"; "" when the library
/// shows none of these variables. Read once per process.
std::string mpi_allreduce_settings();

/// The largest message, in bytes and header included, that the library's TCP transport sends
/// eagerly (without waiting for the receiver to have posted its receive): Open MPI's
/// `btl_tcp_eager_limit` (65536 by default in 4.1), MPICH's `MPIR_CVAR_CH3_EAGER_MAX_MSG_SIZE`;
/// 0 where the library shows neither through the tool interface. Read once per process.
size_t mpi_tcp_eager_limit();

}  // namespace dlscale
