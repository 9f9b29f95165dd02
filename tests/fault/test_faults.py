"""Faults with real processes.

A failure inside a case: the case that fails is recorded with its status and the sweep goes on
with the next case, on every rank, with exit code 0.

SIGTERM (Slurm's time limit) sent to every rank in the middle of a sweep: dlscale finishes the
step in progress, exits with code 3 on every rank, leaves a file h5py reads with every finished
case, and prints the command that runs the rest; that command (--resume) runs exactly the
missing cases.

Out of memory: an address-space limit (ulimit -v) that a small case fits in and a large one
does not, found by trying limits on this machine (the baseline differs with the libraries
loaded). The large LibTorch case runs out in its first forward pass (LibTorch allocates
activations as it goes), the large oneDNN case while building its buffers at set-up; both are
`oom`, and the small cases after them are `ok`.

CTest sets DLSCALE_BIN and MPIEXEC.
"""

import os
import re
import shlex
import shutil
import signal
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


class StopSignal(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_fault_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_sigterm_keeps_finished_cases_and_resume_runs_the_rest(self):
        out = os.path.join(self.dir, "s.h5")
        batches = ["4", "8", "16", "32", "64", "128"]
        args = ["run", "-w", "mnist_fnn:width=64", "-d", "reference", "--batch", ",".join(batches),
                "--warmup", "1", "--iterations", "300", "--out", out]
        launcher = subprocess.Popen([MPIEXEC, "-n", "2", DLSCALE, *args], cwd=self.dir, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        # Once the first case has finished (its summary line, printed after it is in the file),
        # SIGTERM to every rank, as srun delivers Slurm's.
        first = []
        for line in launcher.stdout:
            first.append(line)
            if "| ok" in line:
                break
        ranks = subprocess.run(["pgrep", "-P", str(launcher.pid)], capture_output=True, text=True).stdout.split()
        self.assertEqual(len(ranks), 2, "the two ranks are the launcher's children")
        for pid in ranks:
            os.kill(int(pid), signal.SIGTERM)
        stdout, stderr = launcher.communicate(timeout=120)
        stdout = "".join(first) + stdout
        self.assertEqual(launcher.returncode, 3, stderr)
        hint = re.search(r"dlscale: stopped by SIGTERM after (\d+) finished case\(s\).*\n  (.*--resume)\n", stderr)
        self.assertIsNotNone(hint, stderr)
        finished = int(hint.group(1))
        self.assertGreaterEqual(finished, 1)
        self.assertLess(finished, len(batches), "the sweep was not interrupted")
        with h5py.File(out, "r") as f:
            kept = [(f["cases"][n].attrs["status"], int(f["cases"][n].attrs["batch_per_rank"])) for n in sorted(f["cases"])]
        self.assertEqual(kept, [("ok", int(b)) for b in batches[:finished]])

        resume = shlex.split(hint.group(2))
        self.assertEqual(os.path.realpath(resume[0]), os.path.realpath(DLSCALE))
        proc = subprocess.run([MPIEXEC, "-n", "2", *resume], cwd=self.dir, capture_output=True, text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(out, "r") as f:
            every = [int(f["cases"][n].attrs["batch_per_rank"]) for n in sorted(f["cases"])]
            statuses = {f["cases"][n].attrs["status"] for n in f["cases"]}
        self.assertEqual(sorted(every), sorted(int(b) for b in batches), "each case exactly once")
        self.assertEqual(statuses, {"ok"})


class CaseTimeout(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_fault_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_a_slow_case_is_recorded_timeout_and_the_next_runs(self):
        out = os.path.join(self.dir, "t.h5")
        proc = subprocess.run([MPIEXEC, "-n", "2", DLSCALE, "run", "-w", "mnist_fnn:width=64,mnist_fnn:width=16",
                               "-d", "reference", "--batch", "64", "--iterations", "100000", "--case-timeout", "1",
                               "--out", out], cwd=self.dir, capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(out, "r") as f:
            cases = [dict(f["cases"][n].attrs) for n in sorted(f["cases"])]
        self.assertEqual([c["status"] for c in cases], ["timeout", "timeout"])
        self.assertIn("still training after --case-timeout 1 s", cases[0]["message"])
        self.assertNotIn("--case-timeout", cases[0]["case_key"], "a limit is not part of what the case measures")

    def test_a_case_stuck_in_a_collective_ends_the_job_with_a_message(self):
        # Rank 1 stopped (SIGSTOP) in the middle of a case: rank 0 waits in the step's all-reduce,
        # where MPI cannot interrupt it; its watchdog ends it 2 x 1 + 30 s after the case began.
        out = os.path.join(self.dir, "h.h5")
        launcher = subprocess.Popen([MPIEXEC, "-n", "2", DLSCALE, "run", "-w", "mnist_fnn:width=16", "-d", "reference",
                                     "--batch", "64", "--iterations", "100000", "--case-timeout", "1", "--out", out],
                                    cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = launcher.stdout.readline()
        while first and "# dlscale run" not in first:
            first = launcher.stdout.readline()
        ranks = sorted(int(p) for p in
                       subprocess.run(["pgrep", "-P", str(launcher.pid)], capture_output=True, text=True).stdout.split())
        self.assertEqual(len(ranks), 2)
        os.kill(ranks[1], signal.SIGSTOP)
        try:
            stdout, stderr = launcher.communicate(timeout=120)
        finally:
            for pid in ranks:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.assertEqual(launcher.returncode, 4, stderr)
        self.assertRegex(stderr, r"dlscale: rank 0 \(.*\): case dlscale run -w mnist_fnn:width=16 .* is still running "
                                 r"32 s after it started, past its --case-timeout 1 s")
        self.assertIn(f"Every finished case is in {out}; to run the rest, under the same launcher:", stderr)
        self.assertIn("--resume", stderr)
        with h5py.File(out, "r") as f:  # readable, with no half-written case
            self.assertEqual(len(f.get("cases", {})), 0)


if __name__ == "__main__":
    unittest.main()
