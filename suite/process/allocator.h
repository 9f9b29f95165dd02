// How the C allocator treats freed memory while cases run, and what allocator is in effect.
// glibc's defaults hand every freed block above its mmap threshold (128 KiB, rising to at most
// 32 MiB) back to the kernel and trim the heap's top, so a training step whose tensors are
// larger faults its memory in again at every step: on the development machines that cost up to
// 2.5x of a LibTorch step, in the kernel (docs/metrics.md, "The allocator"). Production CPU
// training keeps freed memory (jemalloc, tcmalloc, or these settings): dlscale does too by
// default, within each case (between cases it hands freed memory back, so that no case's memory
// figures carry another's), and records the choice with every case.
#pragma once

#include <string>

namespace dlscale {

enum class MallocPolicy {
  kKeep,    ///< glibc keeps freed memory: no mmap for large blocks of the main heap, no trimming (the default)
  kSystem,  ///< the allocator as the process found it (its environment included), untouched
};

/// "keep" or "system"; throws UsageError naming the value otherwise.
MallocPolicy parse_malloc_policy(const std::string& text);
const char* malloc_policy_name(MallocPolicy p);

/// Applies `policy` to glibc's malloc (kKeep: mallopt M_MMAP_MAX 0 and M_TRIM_THRESHOLD 2 GiB;
/// kSystem: nothing). Throws std::runtime_error when glibc refuses a setting.
void apply_malloc_policy(MallocPolicy policy);

/// Hands the memory freed so far back to the kernel (glibc's malloc_trim): between cases, so that
/// `keep` holds memory within a case only, and no case's peak RSS or address space carries an
/// earlier case's.
void release_freed_memory();

/// The allocator in effect, for provenance: which library provides malloc (an LD_PRELOADed
/// jemalloc, tcmalloc or mimalloc, or glibc), the policy and what it set, and the MALLOC_* and
/// GLIBC_TUNABLES variables of the environment, e.g. "glibc 2.36; --malloc keep: mallopt
/// M_MMAP_MAX=0 M_TRIM_THRESHOLD=2147483647".
std::string describe_allocator(MallocPolicy policy);

}  // namespace dlscale
