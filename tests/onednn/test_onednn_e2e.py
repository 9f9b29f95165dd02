"""End-to-end runs of the oneDNN driver through the dlscale binary under a real mpiexec: every
catalog network at full size trains one step, and a thread sweep records what it ran with. The
results files are read back with plain h5py.

CTest sets DLSCALE_BIN and MPIEXEC; run by hand with those exported. Timings are never asserted
here (the machine is shared); bench/bench_onednn and its notes hold the timing expectations.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from catalog_runs import train_catalog  # noqa: E402

DLSCALE = os.environ["DLSCALE_BIN"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")


def dlscale(args, ranks, launcher_flags=(), timeout=900):
    cmd = [MPIEXEC, "-n", str(ranks)] + list(launcher_flags) + [DLSCALE] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def cases(path):
    with h5py.File(path, "r") as f:
        return [dict(f["cases"][k].attrs) for k in sorted(f["cases"])]


class OnednnEndToEnd(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_onednn_e2e_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_every_catalog_workload_trains_at_batch_2_on_two_ranks(self):
        software = train_catalog(self, "onednn", 2, os.path.join(self.dir, "all.h5"))
        # The driver reports its library itself, once: version with hash, ISA, threading runtime.
        self.assertRegex(software["onednn"], r"^\d+\.\d+\.\d+ \(.+\)$")
        self.assertTrue(software["onednn_isa"])
        self.assertIn(software["onednn_cpu_runtime"], ("OpenMP", "sequential"))

    def test_thread_sweep_records_each_thread_count(self):
        out = os.path.join(self.dir, "threads.h5")
        workload = "fcn5:features=2048,width=1024"
        # Unbound, so that the 2-thread case can use two cores (Open MPI binds one rank to one
        # core by default, where two threads only take turns).
        proc = dlscale(["run", "-w", workload, "-d", "onednn", "--batch", "64", "--threads", "1,2", "--warmup", "1",
                        "--iterations", "3", "--out", out], ranks=1, launcher_flags=["--bind-to", "none"])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        got = cases(out)
        self.assertEqual([c["threads"] for c in got], [1, 2])
        for c in got:
            self.assertEqual(c["status"], "ok", c["message"])
            self.assertEqual(c["workload"], workload)
        # The printed summary names the thread count of each case too (t=1, t=2).
        self.assertEqual(re.findall(r" t=(\d+) ", proc.stdout), ["1", "2"])
        # For the log only (the machine may be shared): two threads should take roughly 0.55-0.7x
        # the time of one on this GEMM-bound network (see bench/onednn_fcn5.cpp).
        with h5py.File(out, "r") as f:
            medians = [f["cases"][k]["summary"].attrs["step_median_s"] for k in sorted(f["cases"])]
        sys.stderr.write(f"\nthread sweep medians: 1 thread {medians[0] * 1e3:.1f} ms, "
                         f"2 threads {medians[1] * 1e3:.1f} ms (ratio {medians[1] / medians[0]:.2f})\n")


if __name__ == "__main__":
    unittest.main()
