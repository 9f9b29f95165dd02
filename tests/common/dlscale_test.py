"""What the Python tests that launch dlscale share (imported, not a test): the binary and the
launcher CTest names, one launch under mpiexec and its ranks' process ids, the GPUs dlscale sees,
a test case with its own temporary folder, real MNIST digits at a test's size, and how a
module's tests are loaded: the shard that CTest asks for, and the classes whose tests run side by
side.

CTest sets DLSCALE_BIN, MPIEXEC, DLSCALE_SOURCE_DIR and PYTHONPATH (this folder); by hand, export
them as tests/README.md shows.
"""

import atexit
import concurrent.futures
import functools
import itertools
import os
import re
import shutil
import struct
import subprocess
import tempfile
import threading
import unittest

DLSCALE = os.environ.get("DLSCALE_BIN", "dlscale")
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
SOURCE = os.environ.get("DLSCALE_SOURCE_DIR",
                        os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))


def dlscale(args, ranks=2, cwd=None, timeout=600, launcher=(), env=None):
    """dlscale with `args` on `ranks` ranks under mpiexec (`launcher`: its extra flags, `env`: the
    environment instead of this process's); the finished process, its output captured as text."""
    cmd = [MPIEXEC, "-n", str(ranks), *launcher, DLSCALE, *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


MNIST = os.path.join(SOURCE, "data", "mnist")
MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


@functools.lru_cache(maxsize=None)
def mnist_head(train, test):
    """A folder for `mnist:DIR` holding the first `train` training and `test` test digits of the
    real MNIST files in data/mnist (scripts/fetch-mnist.sh), in their order: real data at the
    size a short test trains on. Written once per process and removed when it exits; None when
    data/mnist lacks the files."""
    if not all(os.path.isfile(os.path.join(MNIST, f)) for f in MNIST_FILES):
        return None
    folder = tempfile.mkdtemp(prefix="dlscale_mnist_")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    for prefix, n in (("train", train), ("t10k", test)):
        with open(os.path.join(MNIST, f"{prefix}-images-idx3-ubyte"), "rb") as f:
            total = struct.unpack(">IIII", f.read(16))[1]
            if n > total:
                raise ValueError(f"data/mnist holds {total} {prefix} digits, not {n}")
            images = f.read(n * 28 * 28)
        with open(os.path.join(MNIST, f"{prefix}-labels-idx1-ubyte"), "rb") as f:
            labels = f.read(8 + n)[8:]
        write_idx(folder, images, labels, prefix)
    return folder


def write_idx(directory, images, labels, prefix="train"):
    """MNIST's IDX format, 28 x 28 images: big-endian magic, dimensions, then the bytes."""
    os.makedirs(directory, exist_ok=True)
    n = len(labels)
    with open(os.path.join(directory, f"{prefix}-images-idx3-ubyte"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes(images))
    with open(os.path.join(directory, f"{prefix}-labels-idx1-ubyte"), "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(labels))


def load_tests(loader, tests, pattern):
    """unittest's load_tests hook (a module takes it with `load_tests = dlscale_test.load_tests`):

    - In shards, when CTest runs the module so (dlscale_add_test's SHARDS, tests/CMakeLists.txt):
      every GTEST_TOTAL_SHARDS-th test of the module, in unittest's order, from the
      GTEST_SHARD_INDEX-th on, as GoogleTest shards a binary; every test without those variables.
    - Side by side: the tests of a class whose `side_by_side` is n > 1 run n at a time, each in a
      thread of its own (SideBySide). For tests that mostly wait on the processes they start
      (bad input that Open MPI's launcher takes a second to end), not for tests that measure.
    """
    shards = int(os.environ.get("GTEST_TOTAL_SHARDS", "1"))
    index = int(os.environ.get("GTEST_SHARD_INDEX", "0"))
    if not 0 <= index < shards:
        raise ValueError(f"GTEST_SHARD_INDEX={index} with GTEST_TOTAL_SHARDS={shards}")

    def flat(suite):
        for test in suite:
            if isinstance(test, unittest.TestSuite):
                yield from flat(test)
            else:
                yield test

    chosen = [test for i, test in enumerate(flat(tests)) if i % shards == index]
    suite = unittest.TestSuite()
    for cls, group in itertools.groupby(chosen, key=type):
        group = list(group)
        workers = getattr(cls, "side_by_side", 1)
        suite.addTests([SideBySide(group, workers)] if workers > 1 and len(group) > 1 else group)
    return suite


class SideBySide(unittest.TestSuite):
    """The tests of one class, `workers` at a time, each in a thread of its own, reported one after
    another as each ends: the class's fixtures run once around them, as unittest runs them. The
    tests must share no state but what setUpClass made (Workdir gives each its own folder)."""

    def __init__(self, tests, workers):
        super().__init__(tests)
        self.workers = workers

    def run(self, result, debug=False):
        tests = list(self)
        first = tests[0]
        self._tearDownPreviousClass(first, result)
        self._handleModuleFixture(first, result)
        self._handleClassSetUp(first, result)
        result._previousTestClass = type(first)
        if getattr(type(first), "_classSetupFailed", False) or getattr(result, "_moduleSetUpFailed", False):
            return result
        lock = threading.Lock()

        def one(test):
            recorded = _Recorded()
            test(recorded)
            with lock:
                recorded.replay(test, result)

        with concurrent.futures.ThreadPoolExecutor(max_workers=self.workers) as pool:
            list(pool.map(one, tests))
        return result


class _Recorded(unittest.TestResult):
    """What one test reported, kept to be passed on to the run's result in one piece."""

    def __init__(self):
        super().__init__()
        self.events = []

    def startTest(self, test):
        pass

    def stopTest(self, test):
        pass

    def __getattribute__(self, name):
        if name.startswith("add") and name != "addCleanup":
            events = object.__getattribute__(self, "events")
            return lambda *args: events.append((name, args))
        return object.__getattribute__(self, name)

    def replay(self, test, result):
        result.startTest(test)
        for name, args in self.events:
            getattr(result, name)(*args)
        result.stopTest(test)


def rank_pids(launcher):
    """The process ids of the ranks that the mpiexec process `launcher` started (its children)."""
    return sorted(int(p) for p in
                  subprocess.run(["pgrep", "-P", str(launcher.pid)], capture_output=True, text=True).stdout.split())


def error_lines(proc):
    """The lines of dlscale's stderr that report an error."""
    return [line for line in proc.stderr.splitlines() if line.startswith("dlscale: error:")]


def visible_gpus():
    """The GPUs dlscale itself sees (its `info` says; CUDA_VISIBLE_DEVICES applied)."""
    out = subprocess.run([DLSCALE, "info"], capture_output=True, text=True).stdout
    m = re.search(r"^GPUs: (\d+) visible", out, re.M)
    return int(m.group(1)) if m else 0


@functools.lru_cache(maxsize=None)
def list_section(heading, skip):
    """The lines of `dlscale list`'s section `heading` (its first `skip` lines left out), each
    split into words; [] without the section."""
    proc = subprocess.run([DLSCALE, "list"], capture_output=True, text=True)
    lines = proc.stdout.splitlines()
    if proc.returncode != 0 or heading not in lines:
        return []
    start = lines.index(heading) + 1 + skip
    end = lines.index("", start) if "" in lines[start:] else len(lines)
    return [line.split() for line in lines[start:end]]


def driver_devices():
    """Each driver this build of dlscale has, in `dlscale list`'s order, with the devices it runs
    on here ("cpu", "cuda", "-" for none), whatever this machine can run."""
    return {words[0]: words[1] for words in list_section("Drivers", 1)}


def missing_drivers():
    """dlscale's drivers that this build was configured without."""
    return [words[0] for words in list_section("Drivers not in this build", 0)]


def compiled_drivers():
    """The names of the drivers this build has."""
    return set(driver_devices())


def needs_drivers(*names):
    """Skips a test or test case where the build lacks one of the drivers `names` (the harness's
    own tests run on the reference driver, which every build has)."""
    missing = sorted(set(names) - compiled_drivers())
    return unittest.skipIf(missing, f"this build has no {', '.join(missing)} driver")


class Workdir(unittest.TestCase):
    """A test case with a temporary folder of its own for each test, removed after it."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix=f"dlscale_{type(self).__name__}_")
        # A cleanup, not tearDown: unittest skips tearDown when setUp raises (a subclass's
        # skipTest after this), but runs cleanups either way.
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def assert_usage_error(self, args, needle, ranks=2):
        """dlscale `args` in this folder ends with exit 2 and one error line naming `needle`,
        before any case starts."""
        proc = dlscale(args, ranks=ranks, cwd=self.dir)
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        lines = error_lines(proc)
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn(needle, lines[0])
        self.assertNotIn("# dlscale run", proc.stdout)  # no case started
        return proc
