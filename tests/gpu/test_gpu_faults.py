"""GPU faults (label gpu, two GPUs): the fault tests of tests/fault on the NCCL path. A reduction a
peer never joins ends at the case's deadline (the communicator aborted) and is recorded `timeout`;
a lost rank ends the job within 30 s with one dlscale line.

With fewer than two GPUs the module exits 77, which CTest reports as skipped. CTest runs it apart
from the other tests (RUN_SERIAL: GPUs busy with them would stretch its deadlines) and sets
DLSCALE_BIN, MPIEXEC and PYTHONPATH (tests/README.md).
"""

import os
import signal
import subprocess
import sys
import time
import unittest

import dlscale_test
from dlscale_test import DLSCALE, MPIEXEC, Workdir, rank_pids, visible_gpus

# Fewer than two GPUs: exit 77 for CTest's "skipped", rather than a pass of skipped tests.
GPUS = visible_gpus()
if GPUS < 2:
    print(f"test_gpu_faults: dlscale sees {GPUS} GPU(s), NCCL needs one per rank: skipped")
    sys.exit(77)

import h5py  # noqa: E402


class GpuFaults(Workdir):

    def test_a_hung_nccl_reduction_is_recorded_timeout_and_the_next_case_runs(self):
        out = self.path("timeout.h5")
        env = dict(os.environ, DLSCALE_TEST_SKIP_REDUCTION_RANK="1")
        started = time.monotonic()
        proc = dlscale_test.dlscale(["run", "-d", "cuda", "-w", "fcn5:features=256,width=128", "--batch", "8,16",
                                     "--iterations", "5", "--case-timeout", "20", "--out", out], ranks=2, timeout=300,
                                    launcher=["-x", "DLSCALE_TEST_SKIP_REDUCTION_RANK"], env=env)
        print(f"\nhung NCCL reduction: the job took {time.monotonic() - started:.1f} s", file=sys.stderr)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with h5py.File(out, "r") as f:
            first, second = (f["cases"][n].attrs for n in sorted(f["cases"]))
        self.assertEqual(first["status"], "timeout", first["message"])
        # Rank 0's first collective waits for rank 1 while NCCL connects them, or in the kernel.
        self.assertRegex(first["message"], r"NCCL: still (queuing ncclAllReduce|waiting for the all-reduce) when the "
                                           r"case's deadline \(--case-timeout\) passed")
        self.assertEqual(second["status"], "ok", second["message"])

    def test_a_lost_rank_ends_the_job_within_30_s_with_a_dlscale_line(self):
        out = self.path("lost.h5")
        launcher = subprocess.Popen([MPIEXEC, "-n", "2", DLSCALE, "run", "-d", "cuda", "-w",
                                     "fcn5:features=1024,width=512", "--batch", "16", "--iterations", "1000000",
                                     "--out", out], cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
        line = launcher.stdout.readline()
        while line and "# dlscale run" not in line:
            line = launcher.stdout.readline()
        time.sleep(3)  # set up, in the timed loop
        ranks = rank_pids(launcher)
        self.assertEqual(len(ranks), 2)
        os.kill(ranks[1], signal.SIGKILL)
        killed = time.monotonic()
        try:
            _, stderr = launcher.communicate(timeout=30)
        finally:
            for pid in rank_pids(launcher):
                os.kill(pid, signal.SIGKILL)
        print(f"\nlost GPU rank: the job ended {time.monotonic() - killed:.1f} s after SIGKILL of rank 1",
              file=sys.stderr)
        lines = [x for x in stderr.splitlines() if x.startswith("dlscale: ") and "warning" not in x]
        self.assertEqual(len(lines), 1, stderr)
        self.assertRegex(lines[0], r"^dlscale: rank \d \(.+\): SIGTERM arrived during case dlscale run ")
        self.assertTrue(lines[0].endswith("--resume"), lines[0])
        with h5py.File(out, "r") as f:  # readable, no half-written case
            self.assertEqual(len(f.get("cases", {})), 0)


if __name__ == "__main__":
    unittest.main()
