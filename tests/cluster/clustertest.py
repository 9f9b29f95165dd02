"""What the cluster tests share: paths, the skip rule (exit 77), a module-wide test bed."""

import os
import shutil
import signal
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import testbed  # noqa: E402

SKIP = 77
SOURCE = os.environ.get("DLSCALE_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
DLSCALE = os.environ.get("DLSCALE_BIN", os.path.join(SOURCE, "build", "cpu", "dlscale"))
SMALL = ["-w", "mnist_fnn:width=16", "--batch", "8", "--iterations", "3", "--warmup", "1"]


def main(needs_slurm=False, needs_dlscale=True):
    """unittest.main with the skip rule: exit 77 and one line when the bed cannot be made here."""
    reason = testbed.why_unavailable()
    if reason is None and needs_slurm:
        missing = testbed.slurm_setup.missing_commands()
        if missing:
            reason = f"Slurm/munge not installed (missing {', '.join(missing)}): apt-get install slurm-wlm munge"
    if reason is None and needs_dlscale and not os.access(DLSCALE, os.X_OK):
        print(f"error: {DLSCALE} (DLSCALE_BIN) is not executable", file=sys.stderr)
        return 1
    if reason is not None:
        print(f"SKIP: {reason}", file=sys.stderr)
        return SKIP
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # run atexit's teardown
    started = time.monotonic()
    result = unittest.main(argv=[sys.argv[0]] + sys.argv[1:], exit=False).result
    print(f"{os.path.basename(sys.argv[0])} took {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0 if result.wasSuccessful() else 1


def netns_of(name):
    return [n for n in testbed._netns_list() if n.startswith(name)]


class OnTwoHosts(unittest.TestCase):
    """Tests that run dlscale under mpirun on a bed of two hosts, made once for the class; each
    test has a temporary folder of its own (self.dir), where mpirun runs."""
    bed = None

    @classmethod
    def setUpClass(cls):
        cls.bed = testbed.Cluster(hosts=2)

    @classmethod
    def tearDownClass(cls):
        if cls.bed is not None:
            cls.bed.close()

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_bed_")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def mpirun(self, args, ranks_per_host=2, timeout=300, env=None):
        """dlscale ARGS on ranks_per_host ranks of each host, launched from the first (with `env`
        added to mpirun's environment, whose OMPI_MCA_* variables reach every rank); exit 0."""
        bed = self.bed
        r = bed.run(bed.hosts[0], bed.mpirun_args(ranks_per_host) + [DLSCALE] + args, timeout=timeout, cwd=self.dir,
                    env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r

