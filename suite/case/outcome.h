// A case's outcome as its ranks agree on it: every rank learns the worst status any rank had,
// and the message of the first rank that had it.
#pragma once

#include <mpi.h>

#include <exception>

#include "drivers/driver.h"

namespace dlscale {

/// Agrees on the worst status over the ranks of `comm` and on the message of the first rank that
/// had it; collective.
Outcome agree(MPI_Comm comm, const Outcome& mine);

/// A failure inside a case as its outcome (Timeout: `timeout`; OutOfMemory and std::bad_alloc:
/// `oom`; anything else: `error`); an MPI failure is rethrown (nothing collective can follow it).
Outcome outcome_of(const std::exception_ptr& failure);

}  // namespace dlscale
