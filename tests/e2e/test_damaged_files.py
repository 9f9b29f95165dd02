"""Damaged results files: what a full disk, a cut copy, a killed or older writer or another
program leaves where a dlscale results file is expected, given to every dlscale-report command
and to `dlscale run --resume`.

What a command does depends on where the damage is (results/README.md, "Damaged files"):

- A file that is not a results file (empty, text, cut short, foreign HDF5, another schema, no
  readable root or /system/ranks, /cases not a group) is refused by every command: exit 2 and
  one line `dlscale-report: error: FILE: ...`, nothing on stdout.
- A results file whose root is intact but some of whose case, all-reduce or peak groups are
  damaged is read without them: `check` exits 2 with one line naming them; every other command
  prints one line `dlscale-report: warning: FILE: damaged, skipped: ...` naming them, reports
  the intact cases and exits 0.

Either way no Python traceback and no HDF5 diagnostics, and the file stays byte for byte the
same. `dlscale run --resume` refuses both kinds: exit 2, one line naming the file, nothing left
beside it.

The corpus: hand-made damage to a real file (DAMAGED), the real file cut at each eighth of its
length and just before its end, or with its tail zeroed from there as a file system that lost a
file's last blocks in a crash leaves it (cut_and_zeroed), and the file a full disk leaves under
a writer that updates the file in place (FullDisk).

CTest sets DLSCALE_BIN, MPIEXEC, DLSCALE_SOURCE_DIR and PYTHONPATH. Every (file, command) pair is
its own process, as a user runs it; they run side by side, one per core, and are checked
afterwards. The report commands are forked from one Python that has imported h5py, numpy,
matplotlib and the package (tests/common/report_processes.py): each runs the command line's own
main() in a process of its own, without the second of imports a fresh Python pays.
"""

import concurrent.futures
import csv
import io
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

from report_processes import run_reports

DLSCALE = os.environ["DLSCALE_BIN"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
REPORT = os.path.join(os.environ["DLSCALE_SOURCE_DIR"], "results", "dlscale-report")
W = "mnist_fnn:width=16"
# Generous: the limits only stop a hung process, whatever the machine's speed or load.
TIMEOUT = 600
BANNED = ("Traceback", "MPI_ABORT", "terminate called", "HDF5-DIAG", "Segmentation fault")
REPORT_COMMANDS = ["summary", "summary-csv", "check", "scaling", "threads", "batch", "phases", "ranks",
                   "allreduce", "diagnosis", "compare", "report"]
# Expected outcomes besides a list of the groups named as damaged: every command refuses the
# file; either outcome, found by running the file (for damage whose effect depends on where HDF5
# put the groups).
REFUSED, EITHER = "refused", "either"


def edited(name, edit, damaged):
    """A damaged copy of the good file: h5py's `edit(f)` applied to it."""
    def make(good, path):
        shutil.copy(good, path)
        with h5py.File(path, "r+") as f:
            edit(f)
    return name, make, damaged


def raw(name, data_of, damaged=REFUSED):
    """A file whose bytes are `data_of(bytes of the good file)`."""
    def make(good, path):
        with open(good, "rb") as f:
            data = data_of(f.read())
        with open(path, "wb") as f:
            f.write(data)
    return name, make, damaged


def h5new(name, fill):
    def make(good, path):
        with h5py.File(path, "w") as f:
            fill(f)
    return name, make, REFUSED


def replace(path, value):
    def edit(f):
        del f[path]
        if value is not None:
            f[path] = value
    return edit


def half_written_case(f):
    g = f.create_group("cases/%04d" % len(f["cases"]))
    g.attrs["workload"] = W
    g.attrs["status"] = "ok"


# What a killed or broken writer or another program could leave where a results file is
# expected: (name, make(good, path), the groups named as damaged, or REFUSED). The good file
# has cases 0000 and 0001. (A case's raw samples damaged in place read as numbers: not here.)
DAMAGED = [
    raw("empty.h5", lambda good: b""),
    raw("text.h5", lambda good: b"workload = mnist_fnn\n"),
    raw("truncated_half.h5", lambda good: good[:len(good) // 2]),
    raw("truncated_superblock.h5", lambda good: good[:600]),
    h5new("foreign.h5", lambda f: f.create_dataset("data", data=np.arange(4))),
    h5new("schema_only.h5", lambda f: f.attrs.__setitem__("schema", "dlscale/1")),
    h5new("other_schema.h5", lambda f: f.attrs.__setitem__("schema", "dlscale/2")),
    h5new("numeric_schema.h5", lambda f: f.attrs.__setitem__("schema", 1)),
    edited("no_system.h5", replace("system", None), REFUSED),
    edited("ranks_not_a_table.h5", replace("system/ranks", np.zeros(2)), REFUSED),
    edited("cases_not_a_group.h5", replace("cases", np.zeros(2)), REFUSED),
    # The root is intact: the other case is read.
    edited("case_not_a_group.h5", replace("cases/0000", np.zeros(2)), ["case 0000"]),
    edited("half_written_case.h5", half_written_case, ["case 0002"]),
    edited("case_without_samples.h5", replace("cases/0000/iter_time_s", None), ["case 0000"]),
    edited("case_without_summary.h5", replace("cases/0000/summary", None), ["case 0000"]),
    edited("case_without_loss.h5", replace("cases/0000/loss", None), ["case 0000"]),
    edited("samples_wrong_shape.h5", replace("cases/0000/iter_time_s", np.zeros(5)), ["case 0000"]),
    edited("samples_cut_short.h5", replace("cases/0000/iter_time_s", np.zeros((1, 1))), ["case 0000"]),
    edited("ranks_as_text.h5", lambda f: f["cases/0000"].attrs.__setitem__("ranks", "one"), ["case 0000"]),
    edited("status_missing.h5", lambda f: f["cases/0000"].attrs.__delitem__("status"), ["case 0000"]),
    edited("allreduce_partial.h5", lambda f: f.create_group("allreduce/0000").create_dataset(
        "bytes", data=np.arange(2)), ["allreduce 0000"]),
]


def cut_and_zeroed():
    """The good file cut at each eighth of its length and one byte before its end, and with its
    bytes zeroed from each eighth on (the length kept). HDF5 refuses a file shorter than its
    superblock says; zeroed metadata is an error of the groups it held, or of the whole file
    when it held the root or /system, depending on where HDF5 put them (EITHER)."""
    files = [raw(f"cut_{k}_of_8.h5", lambda good, k=k: good[:len(good) * k // 8]) for k in range(1, 8)]
    files.append(raw("cut_before_end.h5", lambda good: good[:-1]))
    files += [raw(f"zeroed_from_{k}_of_8.h5",
                  lambda good, k=k: good[:len(good) * k // 8] + bytes(len(good) - len(good) * k // 8), EITHER)
              for k in range(1, 8)]
    return files


def report_args(command, path, good, outdir):
    """The command line after `dlscale-report` of one of REPORT_COMMANDS on `path`."""
    args = {"compare": [good, path], "report": [path, "-o", outdir],
            "summary-csv": ["--format", "csv", path]}.get(command, [path])
    return [command.split("-")[0]] + args


def resume_args(path):
    return [DLSCALE, "run", "-w", W, "-d", "reference", "--batch", "4", "--iterations", "3", "--resume",
            "--out", path]


def run_all(jobs):
    """subprocess.run of every (args, cwd) in `jobs`, one per core at a time; in job order. A job
    still running after TIMEOUT is killed and has returncode None, its stderr saying so."""
    def one(job):
        args, cwd = job
        try:
            # A reader of a damaged file may print bytes that are not UTF-8 (the HDF5 library
            # quotes names from the file): shown escaped, so that a test names them instead of
            # failing to decode them.
            return subprocess.run(args, cwd=cwd, capture_output=True, text=True, errors="backslashreplace",
                                  timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(args, None, "", f"killed: still running after {TIMEOUT} s")
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(one, jobs))


def csv_cases(text):
    """The `case` column of `summary --format csv`."""
    return [row["case"] for row in csv.DictReader(io.StringIO(text))]


def make_good(directory):
    """A real results file: one rank, cases 0000 and 0001, and the measured peaks (/peak/0000)."""
    good = os.path.join(directory, "good.h5")
    proc = subprocess.run([MPIEXEC, "-n", "1", DLSCALE, "run", "-w", W, "-d", "reference", "--batch", "4,8",
                           "--warmup", "0", "--iterations", "3", "--out", good], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr
    return good


class FileRun:
    """One file of a corpus and what every command did with it."""

    def __init__(self, name, path, expected):
        self.name, self.path, self.expected = name, path, expected
        with open(path, "rb") as f:
            self.before = f.read()
        # --resume gets its own copy in a folder of its own: what it leaves there is all its own.
        self.resume_dir = os.path.join(os.path.dirname(path), "resume")
        os.makedirs(self.resume_dir)
        shutil.copy(path, os.path.join(self.resume_dir, name))
        self.procs = {}                       # command -> CompletedProcess


def run_corpus(directory, good, files):
    """Makes each file of `files` ((name, make(good, path), expected)) in a folder of its own under
    `directory`, then runs every report command and `dlscale run --resume` on it, side by side;
    returns {name: FileRun}."""
    runs, reports, report_where, resumes = {}, [], [], []
    for i, (name, make, expected) in enumerate(files):
        d = os.path.join(directory, f"f{i}")
        os.makedirs(d)
        path = os.path.join(d, name)
        make(good, path)
        runs[name] = run = FileRun(name, path, expected)
        for command in REPORT_COMMANDS:
            reports.append((report_args(command, path, good, os.path.join(d, "html")), d))
            report_where.append((run, command))
        resumes.append((resume_args(os.path.join(run.resume_dir, name)), run.resume_dir))
    for (run, command), proc in zip(report_where, run_reports(reports, timeout=TIMEOUT)):
        run.procs[command] = proc
    for run, proc in zip(runs.values(), run_all(resumes)):
        run.procs["resume"] = proc
    return runs


class Corpus(unittest.TestCase):
    """Checks of what the commands did with the files of a corpus (run_corpus)."""

    def assertOneLine(self, proc, code, prefix):
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        self.assertEqual(proc.returncode, code, proc.stdout + proc.stderr)
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertTrue(lines[0].startswith(prefix), lines[0])
        for banned in BANNED:
            self.assertNotIn(banned, proc.stderr)
        return lines

    def assertUnchanged(self, run):
        """No command changed the file, and --resume left its copy as it was and nothing beside it."""
        with open(run.path, "rb") as f:
            self.assertEqual(f.read(), run.before, f"{run.name}: a report command changed the file")
        with open(os.path.join(run.resume_dir, run.name), "rb") as f:
            self.assertEqual(f.read(), run.before, f"{run.name}: --resume changed the file")
        self.assertEqual(os.listdir(run.resume_dir), [run.name], "--resume left files beside it")

    def assertResumeRefused(self, run, names_it=True):
        """dlscale run --resume: exit 2 and one line, which names the file it was given."""
        line = self.assertOneLine(run.procs["resume"], 2, "dlscale: error: --resume")[0]
        if names_it:
            self.assertIn(os.path.join(run.resume_dir, run.name), line)

    def assertRefusedByEveryCommand(self, run):
        for command in REPORT_COMMANDS:
            with self.subTest(file=run.name, command=command):
                proc = run.procs[command]
                line = self.assertOneLine(proc, 2, f"dlscale-report: error: {run.path}: ")[0]
                self.assertNotIn("unexpected", line)    # schema.py's refusal, not the CLI's last resort
                self.assertEqual(proc.stdout, "", "a refused file printed output")

    def assertDamagedGroupsNamed(self, run, cases):
        """Every command reads the file without its damaged groups and names them, the same ones
        for every command; returns them ("case 0003", ...). cases: the good file's case names."""
        prefix = f"dlscale-report: warning: {run.path}: damaged, skipped: "
        line = self.assertOneLine(run.procs["summary"], 0, prefix)[0]
        named = re.findall(r"\b(case|allreduce|peak) (\d{4})\b", line[len(prefix):])
        named = [f"{kind} {number}" for kind, number in named]
        self.assertTrue(named, line)
        for command in REPORT_COMMANDS:
            with self.subTest(file=run.name, command=command):
                proc = run.procs[command]
                if command == "check":
                    # The same groups, as the reason to exit 2.
                    error = f"dlscale-report: error: {run.path}: damaged, not checked: "
                    self.assertEqual(self.assertOneLine(proc, 2, error),
                                     [error + line[len(prefix):].rsplit("; ", 1)[0]])
                else:
                    self.assertEqual(self.assertOneLine(proc, 0, prefix), [line])
        # The intact cases are read and shown, the damaged ones are not, and none is lost unnamed.
        shown = csv_cases(run.procs["summary-csv"].stdout)
        damaged_cases = [n.split()[1] for n in named if n.startswith("case ")]
        self.assertEqual(sorted(shown + damaged_cases), sorted(set(cases) | set(damaged_cases)), line)
        self.assertTrue(line.endswith(f"; {len(shown)} case(s) read"), line)
        return named


class DamagedFiles(Corpus):
    """DAMAGED and cut_and_zeroed(), made from one real file and run as one batch."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="dlscale_damaged_")
        cls.good = make_good(cls.dir)
        cls.cut = cut_and_zeroed()
        cls.good_procs = dict(zip(REPORT_COMMANDS, run_reports(
            [(report_args(command, cls.good, cls.good, os.path.join(cls.dir, "html")), cls.dir)
             for command in REPORT_COMMANDS], timeout=TIMEOUT)))
        cls.runs = run_corpus(cls.dir, cls.good, DAMAGED + cls.cut)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_corpus_size(self):
        self.assertGreaterEqual(len(DAMAGED), 20)
        self.assertGreaterEqual(len(self.cut), 15)

    def test_the_good_file_reads(self):
        for command, proc in self.good_procs.items():
            with self.subTest(command=command):
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(proc.stderr, "")       # no warning: nothing is damaged
        self.assertEqual(csv_cases(self.good_procs["summary-csv"].stdout), ["0000", "0001"])

    def test_every_damaged_file(self):
        for name, _, expected in DAMAGED:
            run = self.runs[name]
            with self.subTest(file=name):
                self.assertUnchanged(run)
                self.assertResumeRefused(run)
                if expected == REFUSED:
                    self.assertRefusedByEveryCommand(run)
                else:
                    self.assertEqual(self.assertDamagedGroupsNamed(run, ["0000", "0001"]), expected)

    def test_cut_and_zeroed_copies(self):
        outcomes = {}
        for name, _, expected in self.cut:
            run = self.runs[name]
            with self.subTest(file=name):
                self.assertUnchanged(run)
                self.assertResumeRefused(run, names_it=False)   # see the expected failure below
                if expected == REFUSED or run.procs["summary"].returncode == 2:
                    self.assertRefusedByEveryCommand(run)
                    outcomes[name] = REFUSED
                else:
                    outcomes[name] = self.assertDamagedGroupsNamed(run, ["0000", "0001"])
        # Zeroing the last eighth leaves the root and /system; it damages groups, not the file.
        self.assertNotEqual(outcomes.get("zeroed_from_7_of_8.h5"), REFUSED, outcomes)

    def test_resume_names_each_cut_or_zeroed_file(self):
        """Also where HDF5 fails on a zeroed copy's root attributes ("HDF5 call failed:
        H5Aexists(...)"), `dlscale run --resume` names the file."""
        for name, _, _ in self.cut:
            with self.subTest(file=name):
                self.assertResumeRefused(self.runs[name])


# An in-place writer: it appends copies of the file's first case group, flushing after each as a
# writer that keeps the file open does, until the disk is full; then it stops dead (os._exit),
# as a job killed at the error would, without the close that might write more.
IN_PLACE_WRITER = r'''
import os, sys, h5py
f = h5py.File(sys.argv[1], "r+")
def clone(src, dst):
    for key, value in src.attrs.items():
        dst.attrs[key] = value
    for key, obj in src.items():
        if isinstance(obj, h5py.Dataset):
            dst.create_dataset(key, data=obj[()])
        else:
            clone(obj, dst.create_group(key, track_order=True))
n = len(f["cases"])
try:
    while True:
        clone(f["cases/0000"], f.create_group("cases/%04d" % n, track_order=True))
        f.flush()
        n += 1
except Exception as e:
    print("stopped at case %04d: %s" % (n, " ".join(str(e).split())[:300]), flush=True)
    os._exit(0)
'''

# The reported failure, with plain h5py: each case group looked up by name (iterating over the
# groups of such a file can crash HDF5 1.10) and read; one line per group that raises.
RAW_READER = r'''
import sys, h5py
cases = h5py.File(sys.argv[1], "r")["cases"]
try:
    count = len(cases)
except Exception:
    # The disk ran out while the index of /cases itself grew: its count is past the file's end.
    # Look the groups up by name until one fails, which is counted (and reported below).
    count = 0
    while True:
        try:
            cases["%04d" % count]
        except KeyError:
            break
        except Exception:
            count += 1
            break
        count += 1
print(count)
for i in range(count):
    name = "%04d" % i
    try:
        group = cases[name]
        dict(group.attrs)
        for key in group:
            if isinstance(group[key], h5py.Dataset):
                group[key][()]
    except Exception as e:
        print(name, type(e).__name__, " ".join(str(e).split()), flush=True)
'''


class FullDisk(Corpus):
    """A real 2-rank run of many short cases fills a small tmpfs. dlscale commits each case by
    writing a copy and renaming it (io/results_file.cpp; it has no in-place mode), so the full
    disk leaves its file whole; an in-place writer (an older one, or another tool appending to
    the file) then fills the disk, and leaves its last case group pointing past the end of the
    file: h5py raises RuntimeError "Error iterating over attributes (addr overflow ...)" or the
    like for that group alone."""

    SIZES = ("320k", "448k", "576k")  # tmpfs sizes to try until the writer leaves a damaged group

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_full_disk_")
        self.mnt = os.path.join(self.dir, "mnt")
        os.makedirs(self.mnt)
        self.mounted = False

    def tearDown(self):
        self.unmount()
        shutil.rmtree(self.dir, ignore_errors=True)

    def mount(self, size):
        if os.geteuid() != 0:
            self.skipTest("mounting a tmpfs to fill needs root")
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", self.mnt],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            self.skipTest(f"cannot mount a tmpfs to fill: {proc.stderr.strip()}")
        self.mounted = True

    def unmount(self):
        if self.mounted:
            subprocess.run(["umount", self.mnt], check=True)
            self.mounted = False

    def fill(self, size):
        """(the file a tmpfs of `size` is left holding, the file as dlscale left it, the number of
        cases dlscale committed, the number of case groups, the raw h5py reading's lines for the
        groups that fail, what the in-place writer said), both files copied out; None when the
        tmpfs was too small for dlscale's first case."""
        self.mount(size)
        out = os.path.join(self.mnt, "full.h5")
        # 60 cases of about 20 kB: more than the tmpfs holds twice over (each commit copies the file).
        batches = ",".join(str(b) for b in range(1, 61))
        run = subprocess.run([MPIEXEC, "-n", "2", "--oversubscribe", DLSCALE, "run", "-w", W, "-d", "reference",
                              "--batch", batches, "--warmup", "0", "--iterations", "1", "--peak", "skip",
                              "--out", out], capture_output=True, text=True, timeout=TIMEOUT)
        errors = [line for line in run.stderr.splitlines() if line.startswith("dlscale: error:")]
        self.assertNotEqual(run.returncode, 0, "the tmpfs did not fill")
        self.assertTrue(errors and "No space left on device" in errors[0], run.stderr)
        # dlscale's own commits leave the file whole: every case it finished, consistent.
        check = subprocess.run([sys.executable, REPORT, "check", out], capture_output=True, text=True,
                               timeout=TIMEOUT)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        with h5py.File(out, "r") as f:
            committed = len(f.get("cases", {}))
        if not committed:
            self.unmount()
            return None
        intact = os.path.join(self.dir, f"intact_{size}.h5")
        shutil.copy(out, intact)
        writer = subprocess.run([sys.executable, "-c", IN_PLACE_WRITER, out], capture_output=True, text=True,
                                timeout=TIMEOUT)
        kept = os.path.join(self.dir, f"full_disk_{size}.h5")
        shutil.copy(out, kept)
        self.unmount()
        reader = subprocess.run([sys.executable, "-c", RAW_READER, kept], capture_output=True, text=True,
                                timeout=TIMEOUT)
        self.assertEqual(reader.returncode, 0, reader.stderr)
        lines = reader.stdout.splitlines()
        return kept, intact, committed, int(lines[0]), lines[1:], writer.stdout + writer.stderr

    def test_a_file_a_full_disk_left(self):
        tried = []
        for size in self.SIZES:
            filled = self.fill(size)
            if filled is None:
                tried.append(f"{size}: too small for dlscale's first case")
                continue
            path, intact, committed, count, failing, writer = filled
            tried.append(f"{size}: {count} cases, {committed} committed by dlscale; writer: {writer.strip()}")
            if failing:
                break
        else:
            self.fail("no tmpfs size left both a case dlscale committed and a damaged group:\n"
                      + "\n".join(tried))
        # The reported failure: h5py raises for the last group the in-place writer added (and for
        # more, where the disk ran out while the index of /cases itself grew).
        self.assertTrue(all(re.match(r"\d{4} (RuntimeError|KeyError|OSError|ValueError) ", line)
                            for line in failing), failing)
        raw_damaged = [line.split()[0] for line in failing]
        self.assertIn(f"{count - 1:04d}", raw_damaged, failing)

        # The intact file dlscale left is the good file: `compare`'s baseline.
        name = os.path.basename(path)
        run = run_corpus(os.path.join(self.dir, "corpus"), intact,
                         [(name, lambda good, dst: shutil.copy(path, dst), EITHER)])[name]
        self.assertUnchanged(run)
        self.assertResumeRefused(run)
        named = self.assertDamagedGroupsNamed(run, [f"{i:04d}" for i in range(count)])
        # Every group h5py cannot read is named (assertDamagedGroupsNamed: and every other one is
        # shown).
        self.assertLessEqual(set(raw_damaged), {n.split()[1] for n in named}, (failing, named))


# Reads every object of a file as h5py can (every attribute, every dataset whole): whether HDF5
# itself survives the file, as a bare reader without dlscale-report's child process.
READ_EVERYTHING = r"""
import sys, h5py
def visit(name, obj):
    for key in obj.attrs:
        obj.attrs[key]
    if isinstance(obj, h5py.Dataset):
        obj[()]
try:
    with h5py.File(sys.argv[1], "r") as f:
        f.visititems(visit)
except Exception:
    pass
"""


class BitFlips(unittest.TestCase):
    """Files with bits flipped at random (8 per file, seeded): what a bad disk or memory leaves.
    HDF5 1.10 crashes (SIGSEGV) inside its metadata on a few of them, and on a few loops forever;
    `summary` must still end with exit 0 or 2 and at most one line on stderr, never as a dead or
    hung process, and a crash or a hang names the file."""

    FILES = 80

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="dlscale_bitflips_")
        good = make_good(cls.dir)
        with open(good, "rb") as f:
            data = f.read()
        cls.paths, jobs = [], []
        for seed in range(cls.FILES):
            rng = random.Random(seed)
            flipped = bytearray(data)
            for _ in range(8):
                flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
            path = os.path.join(cls.dir, f"flipped_{seed}.h5")
            with open(path, "wb") as f:
                f.write(flipped)
            cls.paths.append(path)
            jobs += [([sys.executable, REPORT, "summary", path], cls.dir),
                     ([sys.executable, "-c", READ_EVERYTHING, path], cls.dir)]
        # Fresh processes, not report_processes's forks: where memory that HDF5 corrupted makes a
        # process die depends on its heap's layout, and this is the layout a user's process has.
        procs = run_all(jobs)
        cls.summary, cls.bare = procs[0::2], procs[1::2]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_summary_never_dies(self):
        crashed, hung = [], []
        for path, proc in zip(self.paths, self.summary):
            with self.subTest(file=path):
                self.assertIn(proc.returncode, (0, 2), proc.stderr[-2000:])
                lines = [line for line in proc.stderr.splitlines() if line.strip()]
                self.assertLessEqual(len(lines), 1, proc.stderr)
                for banned in BANNED:
                    self.assertNotIn(banned, proc.stderr)
                if proc.returncode == 2:
                    self.assertTrue(lines and lines[0].startswith(f"dlscale-report: error: {path}: "), lines)
                    if "crashed" in lines[0]:
                        self.assertIn("the HDF5 library crashed reading it (SIG", lines[0])
                        crashed.append(path)
                    if "no progress" in lines[0]:
                        hung.append(path)
        # How often HDF5 itself dies or hangs on these files, for the log: the guards are
        # exercised where it does.
        bare = sum(1 for proc in self.bare if proc.returncode is not None and proc.returncode < 0)
        bare_hung = sum(1 for proc in self.bare if proc.returncode is None)
        print(f"\nbit flips: {len(crashed)} of {self.FILES} files crashed HDF5 inside summary and {len(hung)} hung "
              f"it; {bare} crashed a bare h5py reader and {bare_hung} hung it", file=sys.stderr)


class EndlessLoop(unittest.TestCase):
    """A file on which HDF5 1.10 loops forever: every global heap collection (where the file's
    strings live) with its first object's header zeroed, which HDF5 reads as a free-space object
    of size 0 and so never steps past. dlscale-report kills the reader after
    DLSCALE_REPORT_STALL_S seconds without progress and names the file; `dlscale run --resume`
    and dlscale-project end themselves after DLSCALE_READ_STALL_S seconds without an HDF5 call
    returning, with one line naming the file and exit code 2."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="dlscale_loop_")
        with open(make_good(cls.dir), "rb") as f:
            data = bytearray(f.read())
        at = data.find(b"GCOL")
        assert at >= 0, "no global heap collection in the file"
        while at >= 0:
            data[at + 16:at + 32] = bytes(16)  # after the collection's 16-byte header
            at = data.find(b"GCOL", at + 4)
        cls.path = os.path.join(cls.dir, "loops.h5")
        with open(cls.path, "wb") as f:
            f.write(data)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def summary(self, stall):
        return subprocess.run([sys.executable, REPORT, "summary", self.path], capture_output=True, text=True,
                              timeout=TIMEOUT, env=dict(os.environ, DLSCALE_REPORT_STALL_S=stall))

    def test_a_reader_stuck_in_hdf5_ends_as_one_line(self):
        proc = self.summary("2")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(proc.stderr, f"dlscale-report: error: {self.path}: the HDF5 library made no progress "
                                      "reading it for 2 s: the file is damaged\n")
        self.assertEqual(proc.stdout, "")

    def test_the_limit_must_be_seconds(self):
        for bad in ("abc", "0", "-1", "inf"):
            proc = self.summary(bad)
            self.assertEqual(proc.returncode, 2, bad)
            self.assertEqual(proc.stderr, f"dlscale-report: error: DLSCALE_REPORT_STALL_S {bad!r}: not a number "
                                          "of seconds > 0\n")
            proc = self.resume(bad)
            self.assertEqual(proc.returncode, 2, bad)
            self.assertEqual(dlscale_lines(proc), [f"dlscale: error: DLSCALE_READ_STALL_S '{bad}': not a number of "
                                                   "seconds > 0"])

    def resume(self, stall):
        """`dlscale run --resume` on a copy of the file, in a folder of its own, as a job of one rank."""
        d = tempfile.mkdtemp(dir=self.dir)
        copy = shutil.copy(self.path, d)
        proc = subprocess.run([MPIEXEC, "-n", "1", *resume_args(copy)], cwd=d, capture_output=True, text=True,
                              timeout=TIMEOUT, env=dict(os.environ, DLSCALE_READ_STALL_S=stall))
        with open(copy, "rb") as f, open(self.path, "rb") as g:
            self.assertEqual(f.read(), g.read(), "the file was changed")
        return proc

    def test_resume_stuck_in_hdf5_ends_as_one_line(self):
        proc = self.resume("2")
        self.assertEqual(proc.returncode, 2, proc.stderr)
        copy = os.path.join(os.path.dirname(proc.args[-1]), "loops.h5")
        self.assertEqual(dlscale_lines(proc), [f"dlscale: error: --resume: {copy}: the HDF5 library made no progress "
                                               "reading it for 2 s: the file is damaged"])

    def test_dlscale_project_stuck_in_hdf5_ends_as_one_line(self):
        project = os.path.join(os.path.dirname(DLSCALE), "dlscale-project")
        if not os.path.exists(project):
            self.skipTest("dlscale-project not built (no SimGrid)")
        for stall, line in (("2", f"dlscale-project: error: {self.path}: the HDF5 library made no progress reading it "
                                  "for 2 s: the file is damaged"),
                            ("abc", "dlscale-project: error: DLSCALE_READ_STALL_S 'abc': not a number of seconds > 0")):
            proc = subprocess.run([project, self.path, "--dry-run"], capture_output=True, text=True, timeout=TIMEOUT,
                                  env=dict(os.environ, DLSCALE_READ_STALL_S=stall))
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertEqual(proc.stderr, line + "\n")


def dlscale_lines(proc):
    """The lines dlscale printed on stderr (mpiexec adds its banner about the exit code)."""
    return [line for line in proc.stderr.splitlines() if line.startswith("dlscale")]


if __name__ == "__main__":
    unittest.main()
