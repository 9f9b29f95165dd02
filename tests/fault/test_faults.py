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

The results file is never lost (docs/schema.md, "How it is written"): SIGKILL of both ranks of
a sweep at six points (before the first commit, in the middle of a case's training, while the
case is being written into the copy of the file, after the copy is synced but before its rename,
just after the rename, and in the first commit of a resumed run) leaves a file that h5py and
`dlscale-report summary`/`check` read, with every finished case intact; `--resume` then completes
exactly the missing cases. The points inside a commit are reached with the test-only hook
DLSCALE_TEST_STALL (io/results_file.cpp), which stops rank 0 there until it is killed.

A lost rank (SIGKILL of one rank, no --case-timeout): the other rank is gone within 30 s, after
one dlscale line naming the case, its rank and host, and the resume command. A crashed rank
(SIGSEGV): its line names the signal, the case and the resume command, then Open MPI's handler
prints its backtrace and the rank ends by the signal.

A full disk (a small tmpfs, mounted where the test may mount): one error line, exit code 5 on
every rank, and a file the report reads with every case finished before. A second run on a file
another run is writing (`--overwrite`, `--resume`): refused with exit code 2, naming the holder;
the running job's file comes out whole.

CTest sets DLSCALE_BIN, MPIEXEC, DLSCALE_SOURCE_DIR and PYTHONPATH (tests/README.md).
"""

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import h5py

import dlscale_test
from dlscale_test import needs_drivers, rank_pids

load_tests = dlscale_test.load_tests  # CTest runs the module in shards (tests/fault/CMakeLists.txt)

DLSCALE = os.environ["DLSCALE_BIN"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
REPORT = os.path.join(os.environ["DLSCALE_SOURCE_DIR"], "results", "dlscale-report")
GIB = 1024 * 1024  # ulimit -v counts KiB


def limited(kib, args, cwd, timeout=600):
    """dlscale under `ulimit -v kib` (the launcher and every rank)."""
    cmd = "ulimit -v {} && exec \"$@\"".format(kib)
    return subprocess.run(["bash", "-c", cmd, "limited", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@needs_drivers("libtorch", "onednn")  # how each backend runs out of memory
class OutOfMemoryInsideACase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_fault_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def smallest_working_limit(self):
        # From 2 GiB: the large cases need several GiB more than any of these limits, so a smaller
        # start would test nothing more, and each limit too small to start the threads costs a
        # probe's whole timeout.
        for gib in (2, 3, 4, 6, 8, 12):
            out = os.path.join(self.dir, f"probe{gib}.h5")
            # A limit that leaves too little for a thread LibTorch's thread pool starts makes the
            # pool wait forever (it does not check pthread_create): such a limit does not work.
            # The small case takes a few seconds, so 20 s tells a hang from a loaded machine; a
            # probe cut short by load only makes the limit larger, which the test allows.
            try:
                proc = limited(int(gib * GIB), [DLSCALE, "run", "-w", "mnist_fnn:width=16", "-d", "libtorch,onednn",
                                                "--batch", "8", "--warmup", "0", "--iterations", "1", "--out", out],
                               self.dir, timeout=20)
            except subprocess.TimeoutExpired:
                continue
            if proc.returncode == 0:
                return int(gib * GIB)
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
        ranks = rank_pids(launcher)
        self.assertEqual(len(ranks), 2, "the two ranks are the launcher's children")
        for pid in ranks:
            os.kill(pid, signal.SIGTERM)
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
        # Cases no machine finishes (2e9 steps), so both reach their --case-timeout however fast it is.
        proc = subprocess.run([MPIEXEC, "-n", "2", DLSCALE, "run", "-w", "mnist_fnn:width=64,mnist_fnn:width=16",
                               "-d", "reference", "--batch", "64", "--iterations", "2000000000", "--case-timeout", "1",
                               "--out", out], cwd=self.dir, capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(out, "r") as f:
            cases = [dict(f["cases"][n].attrs) for n in sorted(f["cases"])]
        self.assertEqual([c["status"] for c in cases], ["timeout", "timeout"])
        self.assertIn("still training after --case-timeout 1 s", cases[0]["message"])
        self.assertNotIn("--case-timeout", cases[0]["case_key"], "a limit is not part of what the case measures")

    def test_a_case_stuck_in_a_collective_or_a_bucket_ends_the_job_with_a_message(self):
        # Rank 1 stopped (SIGSTOP) in the middle of a case: rank 0 waits in the step's all-reduce,
        # where MPI cannot interrupt it; its watchdog ends it 2 x 5 + 30 s after the case began.
        # The stop must come before the case's --case-timeout ends it at a step boundary: 5 s
        # leaves room for a loaded machine (with 1 s, the stop sometimes came after the case had
        # ended, and rank 1 was gone or stopped outside any case).
        # The same with gradient buckets (--bucket-mb 0.01): rank 0's communication thread waits
        # in a bucket's MPI_Allreduce and its main thread for that thread. The two jobs wait out
        # their deadlines side by side.
        jobs = [self.start_and_stop_rank_1(bucket_mb) for bucket_mb in ("0", "0.01")]
        for out, launcher, ranks in jobs:
            with self.subTest(out=out):
                self.ends_with_the_watchdogs_message(out, launcher, ranks)

    def start_and_stop_rank_1(self, bucket_mb):
        out = os.path.join(self.dir, f"h{bucket_mb}.h5")
        launcher = subprocess.Popen([MPIEXEC, "-n", "2", DLSCALE, "run", "-w", "mnist_fnn:width=16", "-d", "reference",
                                     "--batch", "64", "--iterations", "100000", "--case-timeout", "5", "--bucket-mb",
                                     bucket_mb, "--out", out],
                                    cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(kill_all, launcher)
        first = launcher.stdout.readline()
        while first and "# dlscale run" not in first:
            first = launcher.stdout.readline()
        ranks = rank_pids(launcher)
        self.assertEqual(len(ranks), 2)
        os.kill(ranks[1], signal.SIGSTOP)
        return out, launcher, ranks

    def ends_with_the_watchdogs_message(self, out, launcher, ranks):
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
                                 r"40 s after it started, past its --case-timeout 5 s")
        self.assertIn(f"Every finished case is in {out}; to run the rest, under the same launcher:", stderr)
        self.assertIn("--resume", stderr)
        with h5py.File(out, "r") as f:  # readable, with no half-written case
            self.assertEqual(len(f.get("cases", {})), 0)


def kill_all(launcher):
    """SIGKILL to every rank (as a node failure or scancel --signal=KILL would), then reap."""
    for pid in rank_pids(launcher):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        launcher.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        launcher.kill()
        launcher.communicate()


def wait_for(stream, text, seen):
    """Reads lines of `stream` into `seen` until one contains `text`; False at the end."""
    for line in stream:
        seen.append(line)
        if text in line:
            return True
    return False


class FileIntegrity(unittest.TestCase):
    """Kill points in the life of one sweep, one after the other on the same file."""

    BATCHES = ["4", "8", "16", "32", "64", "128"]

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_fault_")
        self.out = os.path.join(self.dir, "k.h5")
        self.args = [DLSCALE, "run", "-w", "mnist_fnn:width=64", "-d", "reference", "--batch", ",".join(self.BATCHES),
                     "--warmup", "1", "--iterations", "1000", "--out", self.out,
                     "--peak", "skip"]  # no peak commit: the stalls below count the commits of cases
        self.keys = set()  # the case keys the file held after the last check

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, extra=(), stall=None):
        env = dict(os.environ)
        env.pop("DLSCALE_TEST_STALL", None)
        if stall:
            env["DLSCALE_TEST_STALL"] = stall
        return subprocess.Popen([MPIEXEC, "-n", "2", *self.args, *extra], cwd=self.dir, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)

    def kill_at_stall(self, extra, stall):
        launcher = self.start(extra, stall)
        seen = []
        try:
            self.assertTrue(wait_for(launcher.stderr, "dlscale: test stall: ", seen), "".join(seen))
        finally:
            kill_all(launcher)

    def check_file(self, at_least):
        """Readable by h5py and the report, every case whole and there once; returns their keys."""
        with h5py.File(self.out, "r") as f:
            keys = []
            for name in sorted(f["cases"]) if "cases" in f else []:
                g = f["cases"][name]
                self.assertEqual(g.attrs["status"], "ok", name)
                self.assertEqual(g["iter_time_s"].shape, (2, 1000), name)
                self.assertEqual(g["loss"].shape, (1000,), name)
                self.assertIn("step_median_s", g["summary"].attrs, name)
                keys.append(g.attrs["case_key"])
        self.assertEqual(len(keys), len(set(keys)), f"a case is there twice: {keys}")
        self.assertGreaterEqual(len(keys), at_least)
        self.assertTrue(self.keys <= set(keys), "a finished case was lost")
        for command in ("summary", "check"):
            proc = subprocess.run([sys.executable, REPORT, command, self.out], capture_output=True, text=True,
                                  timeout=300)
            self.assertEqual(proc.returncode, 0, f"dlscale-report {command}: {proc.stdout}{proc.stderr}")
        self.keys = set(keys)
        return self.keys

    def test_sigkill_at_six_points_then_resume_runs_each_case_once(self):
        # 1. Before the first commit (the file's provenance): there is no file yet, only the copy
        #    that was being written; the same command starts again and removes it.
        self.kill_at_stall((), "written:0")
        self.assertFalse(os.path.exists(self.out))
        # 2. In the middle of the training of the second case (0.2 s into its 1000 steps).
        launcher = self.start()
        seen = []
        try:
            self.assertTrue(wait_for(launcher.stdout, "| ok", seen), "".join(seen))
            self.assertTrue(wait_for(launcher.stdout, "# dlscale run", seen), "".join(seen))
            time.sleep(0.2)
        finally:
            kill_all(launcher)
        self.assertFalse(os.path.exists(self.out + ".dlscale-tmp"), "the next run removed the old copy")
        self.assertEqual(len(self.check_file(1)), 1)
        # 3-5. Inside the commit of the second case a resumed run finishes (commit 0 of a run is its
        #    provenance): written into the copy, synced, renamed.
        for stall, gained in (("written:2", 1), ("synced:2", 1), ("renamed:2", 2)):
            before = len(self.keys)
            self.kill_at_stall(["--resume"], stall)
            self.assertEqual(len(self.check_file(before)), before + gained, stall)
        # 6. In the first commit of a resumed run (its provenance).
        before = len(self.keys)
        self.kill_at_stall(["--resume"], "written:0")
        self.assertEqual(len(self.check_file(before)), before)

        proc = subprocess.run([MPIEXEC, "-n", "2", *self.args, "--resume"], cwd=self.dir, capture_output=True,
                              text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        keys = self.check_file(len(self.BATCHES))
        self.assertEqual(len(keys), len(self.BATCHES), "every case exactly once")
        self.assertEqual(sorted(os.listdir(self.dir)), ["k.h5"], "no copy or lock file left")


class LostRank(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_fault_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def signal_rank_1_in_a_case(self, out, batches, signum):
        """Two ranks in the timed loop of the first case of `batches`: `signum` to rank 1. The
        ranks' pids, when the signal was sent, and the job's stderr once it ended (30 s at most)."""
        launcher = subprocess.Popen([MPIEXEC, "-n", "2", DLSCALE, "run", "-w", "mnist_fnn:width=64", "-d", "reference",
                                     "--batch", batches, "--iterations", "100000", "--out", out], cwd=self.dir,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = []
        self.assertTrue(wait_for(launcher.stdout, "# dlscale run", seen), "".join(seen))
        time.sleep(0.5)  # in the timed loop
        ranks = rank_pids(launcher)
        self.assertEqual(len(ranks), 2)
        os.kill(ranks[1], signum)
        sent = time.monotonic()
        try:
            _, stderr = launcher.communicate(timeout=30)  # the bound
        finally:
            kill_all(launcher)
        return ranks, sent, launcher.returncode, stderr

    def test_the_other_ranks_end_within_30_s_with_a_dlscale_line(self):
        out = os.path.join(self.dir, "l.h5")
        ranks, killed, _, stderr = self.signal_rank_1_in_a_case(out, "8,16", signal.SIGKILL)
        print(f"\nlost rank: the job ended {time.monotonic() - killed:.1f} s after SIGKILL of rank 1",
              file=sys.stderr)
        for pid in ranks:
            self.assertFalse(os.path.exists(f"/proc/{pid}") and
                             open(f"/proc/{pid}/stat").read().split()[2] != "Z", f"rank {pid} is still there")
        lines = [line for line in stderr.splitlines() if line.startswith("dlscale: ")]
        lines = [line for line in lines if "warning" not in line and not line.startswith("dlscale: peak:")]
        self.assertEqual(len(lines), 1, stderr)
        self.assertRegex(lines[0], r"^dlscale: rank \d \(.+\): SIGTERM arrived during case dlscale run -w "
                                   r"mnist_fnn:width=64 -d reference .*--batch 8 ")
        self.assertIn(f"Every finished case is in {out}; to run the rest, under the same launcher:", lines[0])
        self.assertTrue(lines[0].endswith("--resume"), lines[0])
        with h5py.File(out, "r") as f:  # readable, no half-written case
            self.assertEqual(len(f.get("cases", {})), 0)

    def test_a_crashed_rank_names_its_case_and_the_resume_then_dies_by_the_signal(self):
        # SIGSEGV sent to rank 1 in the middle of a case: the handler cannot tell it from a real
        # fault but by its sender, and prints the same line (the faults themselves are in
        # tests/unit/test_crash_report.cpp).
        out = os.path.join(self.dir, "c.h5")
        _, _, returncode, stderr = self.signal_rank_1_in_a_case(out, "8", signal.SIGSEGV)
        crashed = [line for line in stderr.splitlines() if ": crashed: " in line]
        self.assertEqual(len(crashed), 1, stderr)
        self.assertRegex(crashed[0], rf"^dlscale: rank 1 \(.+\): crashed: SIGSEGV \(sent by process {os.getpid()}\) "
                                     r"during case dlscale run -w mnist_fnn:width=64 -d reference .*--batch 8 .*\. "
                                     rf"Every finished case is in {re.escape(out)}; to run the rest, under the same "
                                     r"launcher: .* --resume$")
        # Open MPI's handler ran after it (its backtrace), and the launcher saw the signal.
        self.assertIn("Signal: Segmentation fault (11)", stderr)
        self.assertRegex(stderr, r"exited on signal 11 \(Segmentation fault\)")
        self.assertNotEqual(returncode, 0)


class FullDisk(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_fault_")
        self.mounted = False
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", self.dir], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            self.skipTest(f"cannot mount a tmpfs to fill (needs root): {proc.stderr.strip()}")
        self.mounted = True

    def tearDown(self):
        if self.mounted:
            subprocess.run(["umount", self.dir], check=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_a_full_disk_ends_the_job_with_one_error_and_keeps_the_finished_cases(self):
        out = os.path.join(self.dir, "d.h5")
        args = [DLSCALE, "run", "-w", "mnist_fnn:width=64", "-d", "reference", "--batch", "4,8,16",
                "--warmup", "1", "--iterations", "500", "--out", out]
        launcher = subprocess.Popen([MPIEXEC, "-n", "2", *args], cwd=self.dir, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        seen = []
        try:
            self.assertTrue(wait_for(launcher.stdout, "| ok", seen), "".join(seen))
            # The disk fills while the second case trains.
            try:  # closing the filler on the full disk fails too
                with open(os.path.join(self.dir, "filler"), "wb") as f:
                    while True:
                        f.write(b"\0" * 65536)
                        f.flush()
            except OSError:
                pass
            stdout, stderr = launcher.communicate(timeout=300)
        finally:
            kill_all(launcher)
        self.assertEqual(launcher.returncode, 5, stderr)
        errors = [line for line in stderr.splitlines() if line.startswith("dlscale: error:")]
        self.assertEqual(len(errors), 1, stderr)
        self.assertIn("No space left on device", errors[0])
        self.assertIn(f"{out} is as it was before, with every case finished before", errors[0])
        self.assertTrue(errors[0].endswith("--resume"), errors[0])
        self.assertNotIn("MPI_ABORT", stderr)
        proc = subprocess.run([sys.executable, REPORT, "summary", out], capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(out, "r") as f:
            self.assertEqual([int(f["cases"][n].attrs["batch_per_rank"]) for n in sorted(f["cases"])], [4])
        self.assertFalse(os.path.exists(out + ".dlscale-tmp"))

        os.remove(os.path.join(self.dir, "filler"))
        proc = subprocess.run([MPIEXEC, "-n", "2", *args, "--resume"], cwd=self.dir, capture_output=True, text=True,
                              timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(out, "r") as f:
            self.assertEqual(sorted(int(f["cases"][n].attrs["batch_per_rank"]) for n in f["cases"]), [4, 8, 16])


class ConcurrentWriter(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_fault_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_a_second_run_cannot_touch_a_file_being_written(self):
        out = os.path.join(self.dir, "c.h5")
        # The running job finishes a short case, then trains a case that never ends by itself:
        # it is still writing the file whatever the machine's speed or load, until the test
        # stops it (SIGTERM to every rank, as Slurm's time limit would).
        config = os.path.join(self.dir, "c.toml")
        with open(config, "w") as f:
            f.write('driver = "reference"\nwarmup = 0\n'
                    '[[matrix]]\nworkload = "mnist_fnn:width=16"\nbatch = 4\niterations = 2\n'
                    '[[matrix]]\nworkload = "mnist_fnn:width=64"\nbatch = 8\niterations = 2000000000\n')
        args = ["run", "--config", config, "--out", out]
        launcher = subprocess.Popen([MPIEXEC, "-n", "2", DLSCALE, *args], cwd=self.dir, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        seen = []
        try:
            self.assertTrue(wait_for(launcher.stdout, "| ok", seen), "".join(seen))
            holder = r"is being written by another dlscale \(pid (\d+) on "
            running = rank_pids(launcher)
            # Both at once, while the first job trains its endless case. Each is refused before
            # it measures a peak or reads anything, so it ends on its own, quickly.
            seconds = [subprocess.Popen([MPIEXEC, "-n", "2", DLSCALE, *args, extra], cwd=self.dir,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                       for extra in ("--overwrite", "--resume")]
            for second in seconds:
                _, second_err = second.communicate(timeout=300)
                self.assertEqual(second.returncode, 2, second_err)
                # (mpiexec adds its banner about the exit code)
                errors = [line for line in second_err.splitlines() if line.startswith("dlscale")]
                self.assertEqual(len(errors), 1, second_err)
                found = re.search(f"dlscale: error: {re.escape(out)} {holder}", errors[0])
                self.assertIsNotNone(found, errors[0])
                self.assertIn(int(found.group(1)), running, "the holder named is the running job's rank 0")
                self.assertNotIn("peak", second_err)
            self.assertIsNone(launcher.poll(), "the first job was still running throughout")
            for pid in running:
                os.kill(pid, signal.SIGTERM)
            stdout, stderr = launcher.communicate(timeout=300)
        finally:
            kill_all(launcher)
        self.assertEqual(launcher.returncode, 3, stderr)
        self.assertIn("stopped by SIGTERM after 1 finished case(s)", stderr)
        with h5py.File(out, "r") as f:
            # The running job's file, written by it alone: its finished case, one run record.
            self.assertEqual([(f["cases"][n].attrs["status"], int(f["cases"][n].attrs["batch_per_rank"]))
                              for n in sorted(f["cases"])], [("ok", 4)])
            self.assertEqual(list(f["runs"]), ["0000"])
            self.assertNotIn("--overwrite", f.attrs["command_line"])
        proc = subprocess.run([sys.executable, REPORT, "check", out], capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)


if __name__ == "__main__":
    unittest.main()
