"""Faults inside a case, with real processes: the case that fails is recorded with its status and
the sweep goes on with the next case, on every rank, with exit code 0.

Out of memory: an address-space limit (ulimit -v) that a small case fits in and a large one
does not, found by trying limits on this machine (the baseline differs with the libraries
loaded). The large LibTorch case runs out in its first forward pass (LibTorch allocates
activations as it goes), the large oneDNN case while building its buffers at set-up; both are
`oom`, and the small cases after them are `ok`.

CTest sets DLSCALE_BIN and MPIEXEC.
"""

import os
import shutil
import subprocess
import tempfile
import unittest

import h5py

DLSCALE = os.environ["DLSCALE_BIN"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
GIB = 1024 * 1024  # ulimit -v counts KiB


def limited(kib, args, cwd):
    """dlscale under `ulimit -v kib` (the launcher and every rank)."""
    cmd = "ulimit -v {} && exec \"$@\"".format(kib)
    return subprocess.run(["bash", "-c", cmd, "limited", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


class OutOfMemoryInsideACase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_fault_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def smallest_working_limit(self):
        for gib in (1, 2, 3, 4, 6, 8, 12):
            out = os.path.join(self.dir, f"probe{gib}.h5")
            proc = limited(gib * GIB, [DLSCALE, "run", "-w", "mnist_fnn:width=16", "-d", "libtorch,onednn",
                                       "--batch", "8", "--warmup", "0", "--iterations", "1", "--out", out], self.dir)
            if proc.returncode == 0:
                return gib * GIB
        self.skipTest("no address-space limit up to 12 GiB lets a small case run here")

    def test_oom_case_is_recorded_and_the_sweep_goes_on(self):
        # 1 GiB above what a small case needs; the large cases need several (activations of
        # 65536 samples x 4096 units are 1 GiB per layer).
        limit = self.smallest_working_limit() + GIB
        out = os.path.join(self.dir, "oom.h5")
        proc = limited(limit, [MPIEXEC, "-n", "2", DLSCALE, "run", "-w", "mnist_fnn:width=4096,mnist_fnn:width=16",
                               "-d", "libtorch,onednn", "--batch", "65536", "--warmup", "1", "--iterations", "2",
                               "--out", out], self.dir)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertNotIn("MPI_ABORT", proc.stderr)
        with h5py.File(out, "r") as f:
            cases = [dict(f["cases"][n].attrs) for n in sorted(f["cases"])]
        status = [(c["workload"], c["driver"], c["status"]) for c in cases]
        self.assertEqual(status, [("mnist_fnn:width=4096", "libtorch", "oom"), ("mnist_fnn:width=4096", "onednn", "oom"),
                                  ("mnist_fnn:width=16", "libtorch", "ok"), ("mnist_fnn:width=16", "onednn", "ok")])
        # LibTorch ran out inside the loop (its first forward pass), not at set-up.
        self.assertIn("warm-up step 1:", cases[0]["message"])
        self.assertIn("can't allocate memory", cases[0]["message"])
        self.assertIn("out_of_memory", cases[1]["message"])


if __name__ == "__main__":
    unittest.main()
