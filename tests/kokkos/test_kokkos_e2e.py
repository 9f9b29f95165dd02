"""End-to-end runs of the Kokkos driver through the dlscale binary under a real mpiexec: every
catalog network at full size trains one step at batch 2, on one rank and on two, and the results
file records status ok for each and the driver's own provenance. Bit-identical parameters across
ranks after training are checked by the MPI test beside this one (test_kokkos_mpi.cpp), which
can see the parameters.

CTest sets DLSCALE_BIN, MPIEXEC and PYTHONPATH; by hand, see tests/README.md. Timings are never asserted
(the machine is shared); bench/kokkos_vs_cpu_drivers.cpp holds the timing comparison.
"""

import unittest

from catalog_runs import train_catalog
from dlscale_test import Workdir


class KokkosEndToEnd(Workdir):
    def run_catalog(self, ranks):
        return train_catalog(self, "kokkos", ranks, self.path(f"all_{ranks}.h5"))

    def test_every_catalog_workload_trains_at_batch_2_on_one_rank(self):
        software = self.run_catalog(1)
        # The driver reports its libraries and how it maps threads, once.
        self.assertRegex(software["kokkos"], r"^\d+\.\d+\.\d+")
        for key in ("kokkos_kernels", "kokkos_kernels_tpls", "kokkos_execution_space", "kokkos_concurrency",
                    "kokkos_blas_threads"):
            self.assertTrue(software[key], key)

    def test_every_catalog_workload_trains_at_batch_2_on_two_ranks(self):
        self.run_catalog(2)


if __name__ == "__main__":
    unittest.main()
