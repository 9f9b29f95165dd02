// The kernels the system BLAS runs every backend's matrix products on (LibTorch's and the Kokkos
// driver's go through libblas.so.3). OpenBLAS built with DYNAMIC_ARCH, as distributions ship it,
// chooses its kernels from the CPU's family and model when it is loaded; on a CPU it does not
// know (cloud VMs present many) it falls back to old generic kernels, at a fraction of what the
// CPU's vector units do. dlscale then chooses the kernels that match the CPU's instruction set
// itself, before any product runs and before the program's libraries start
// (blas_core_early.cpp): it checks, in a child process (dlscale-blas-check), that a product
// computed with them agrees with float64, sets OPENBLAS_CORETYPE and starts the program again
// (the same process: mpirun and srun see no difference). A user's own OPENBLAS_CORETYPE, or
// DLSCALE_BLAS_CORE=keep, leaves the library's choice alone. docs/metrics.md ("The BLAS
// kernels") says more.
#pragma once

#include <string>

namespace dlscale {

/// What the process computes its BLAS products with, for the record (/system/software, every
/// case, `dlscale info`).
struct BlasCore {
  std::string library;  ///< "OpenBLAS"; "" where no BLAS with selectable kernels is loaded
  std::string chosen;   ///< the kernels the library chose on its own, e.g. "Prescott"
  std::string used;     ///< the kernels in use, e.g. "SkylakeX"
  std::string reason;   ///< why these: one sentence
  /// The kernels in use take less of the CPU than its instruction set allows (kept as asked, or
  /// the better ones failed their check).
  bool below_cpu = false;
};

/// Called first thing in main(), before MPI_Init and before any thread starts: records the
/// kernels the program's start chose (blas_core()) and why. The choice itself, and the restart
/// with better kernels, came before main(), in every program that calls this (calling it links
/// the early choice in). Silent: where the kernels stay below the CPU, dlscale's warnings say
/// why (provenance_warnings).
void select_blas_core(char** argv);

/// The kernels this process runs on, and why.
BlasCore blas_core();

/// The OpenBLAS core for a CPU's instruction set ("SkylakeX", "Haswell", "Sandybridge"), or ""
/// where none is better than generic kernels; and whether `core` (an openblas_get_corename()
/// answer) uses less of the CPU than `best` does. Exposed for the tests.
std::string best_openblas_core(bool avx512, bool avx2_fma, bool avx);
bool openblas_core_below(const std::string& core, const std::string& best);

}  // namespace dlscale
