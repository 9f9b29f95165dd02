"""End-to-end runs of the Kokkos driver through the dlscale binary under a real mpiexec: every
catalog network at full size trains one step at batch 2, on one rank and on two, and the results
file records status ok for each and the driver's own provenance. Bit-identical parameters across
ranks after training are checked by the MPI test beside this one (test_kokkos_mpi.cpp), which
can see the parameters.

CTest sets DLSCALE_BIN and MPIEXEC; run by hand with those exported. Timings are never asserted
(the machine is shared); bench/kokkos_vs_cpu_drivers.cpp holds the timing comparison.
"""

import os
import shutil
import subprocess
import tempfile
import unittest

import h5py

DLSCALE = os.environ["DLSCALE_BIN"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")

# Parameter counts of WORKLOADS.md (biases included).
CATALOG = {
    "fcn5": 117997696,
    "fcn8": 130586752,
    "alexnet": 61100840,
    "resnet50": 25557032,
    "lstm32": 6180624,
    "lstm64": 6180624,
    "mnist_cnn": 225034,
    "cifar10_cnn": 315722,
    "mnist_fnn": 669706,
    "vgg16_cifar": 33638218,
    "imdb_lstm": 213301,
    "mnist_cnn_nayak": 1669002,
}


class KokkosEndToEnd(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_kokkos_e2e_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_catalog(self, ranks):
        out = os.path.join(self.dir, f"all_{ranks}.h5")
        cmd = [MPIEXEC, "-n", str(ranks), DLSCALE, "run", "-w", ",".join(CATALOG), "-d", "kokkos", "--batch", "2",
               "--warmup", "0", "--iterations", "1", "--out", out]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with h5py.File(out, "r") as f:
            got = [dict(f["cases"][k].attrs) for k in sorted(f["cases"])]
            losses = [f["cases"][k]["loss"][()] for k in sorted(f["cases"])]
            software = dict(f["system/software"].attrs)
        self.assertEqual([c["workload"] for c in got], list(CATALOG))
        for c, loss in zip(got, losses):
            with self.subTest(workload=c["workload"], ranks=ranks):
                self.assertEqual(c["status"], "ok", c["message"])
                self.assertEqual(c["driver"], "kokkos")
                self.assertEqual(c["params"], CATALOG[c["workload"]])
                self.assertEqual(c["ranks"], ranks)
                self.assertEqual(c["batch_per_rank"], 2)
                self.assertEqual(loss.shape, (1,))
                self.assertTrue(loss[0] > 0)
        return software

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
