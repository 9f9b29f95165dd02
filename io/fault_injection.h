// Fault injection for the tests, in one place: each hook is read from an environment variable
// that only the tests set (docs/running.md, "Fault tests"), and does nothing when it is unset.
// In io/ because the results file's commit is one of the places a fault is injected, and every
// part of dlscale links io.
#pragma once

#include <string>

namespace dlscale::fault_injection {

/// DLSCALE_TEST_STALL=STAGE:N: stops the process for ten minutes at STAGE ("written", "synced"
/// or "renamed") of its results-file commit number N (0: the first), after saying so on stderr,
/// so that a fault test can kill it at that point. Any other value is ignored.
void stall_at_commit(const char* stage, int commit);

/// DLSCALE_TEST_SLEEP_RANK: the world rank that sleeps after each timed step for as long as the
/// step took (idle half of its timed region), to check the utilisation arithmetic on real
/// processes; -1 when unset.
int sleep_rank();

/// DLSCALE_TEST_SKIP_REDUCTION_RANK: the world rank that leaves out the first gradient reduction
/// of the run through a driver's reducer (NCCL), so that its peers wait for it as for a hung
/// peer; -1 when unset.
int skip_reduction_rank();

/// DLSCALE_TEST_BLAS_FALLBACK=best or =CORE: the OPENBLAS_CORETYPE in the environment stands for
/// OpenBLAS's own choice, not the user's, as if OpenBLAS had fallen back to those kernels on an
/// unknown CPU (drivers/cpu/blas_core.h), so that the tests see dlscale choose on any CPU; with
/// CORE, dlscale tries those kernels instead of the best for the CPU (one the CPU cannot run, to
/// see the check's child crash). "" when unset.
std::string blas_fallback();

}  // namespace dlscale::fault_injection
