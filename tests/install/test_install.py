"""`cmake --install` of the build tree into a temporary prefix P, then everything from P only,
run from another directory: `P/bin/dlscale --version`, a 2-rank run of the installed binary,
`P/bin/dlscale-report summary` on its file, and the installed `slurm/study` finding the
installed binary and template (its --dry-run; tests/slurm runs the installed template under a
real Slurm).

CTest sets DLSCALE_BUILD_DIR, DLSCALE_SOURCE_DIR, DLSCALE_PYTHON and MPIEXEC.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import h5py

BUILD = os.environ["DLSCALE_BUILD_DIR"]
SOURCE = os.environ["DLSCALE_SOURCE_DIR"]
PYTHON = os.environ.get("DLSCALE_PYTHON", "/usr/bin/python3")
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")


class InstalledTree(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dlscale_install_")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        cls.elsewhere = os.path.join(cls.tmp, "elsewhere")  # neither the source nor the build tree
        os.mkdir(cls.elsewhere)
        proc = subprocess.run(["cmake", "--install", BUILD, "--prefix", cls.prefix], capture_output=True, text=True)
        if proc.returncode != 0:
            raise AssertionError(f"cmake --install failed:\n{proc.stdout}\n{proc.stderr}")
        # Only what is installed: no build tree, no source tree, no dlscale on PATH.
        cls.env = {k: v for k, v in os.environ.items() if not k.startswith("DLSCALE_")}
        cls.env["PATH"] = "/usr/bin:/bin"

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def p(self, *parts):
        return os.path.join(self.prefix, *parts)

    def run_here(self, cmd, timeout=300):
        return subprocess.run(cmd, cwd=self.elsewhere, env=self.env, capture_output=True, text=True, timeout=timeout)

    def test_layout(self):
        for path in (("bin", "dlscale"), ("bin", "dlscale-report"), ("share", "dlscale", "slurm", "study"),
                     ("share", "dlscale", "slurm", "dlscale-cpu.sbatch"),
                     ("share", "dlscale", "slurm", "dlscale-gpu.sbatch"),
                     ("share", "dlscale", "python", "dlscale_report", "cli.py"),
                     ("share", "doc", "dlscale", "running.md"), ("share", "doc", "dlscale", "README.md")):
            self.assertTrue(os.path.isfile(self.p(*path)), os.path.join(*path))
        for exe in (("bin", "dlscale"), ("bin", "dlscale-report"), ("share", "dlscale", "slurm", "study"),
                    ("share", "dlscale", "slurm", "dlscale-cpu.sbatch")):
            self.assertTrue(os.access(self.p(*exe), os.X_OK), os.path.join(*exe))
        # The installed templates and study know the prefix; the source ones stay untouched.
        with open(self.p("share", "dlscale", "slurm", "dlscale-cpu.sbatch")) as f:
            self.assertIn(f'installed_prefix="{self.prefix}"', f.read())
        with open(self.p("share", "dlscale", "slurm", "study")) as f:
            self.assertIn(f'INSTALLED_PREFIX = "{self.prefix}"', f.read())
        with open(os.path.join(SOURCE, "slurm", "dlscale-cpu.sbatch")) as f:
            self.assertIn('installed_prefix=""', f.read())

    def test_version(self):
        proc = self.run_here([self.p("bin", "dlscale"), "--version"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertRegex(proc.stdout.strip(), r"^dlscale \d+\.\d+\.\d+ \(commit ")
        proc = self.run_here([PYTHON, self.p("bin", "dlscale-report"), "--version"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertRegex(proc.stdout.strip(), r"^dlscale-report \d+\.\d+\.\d+")

    def test_two_rank_run_and_report(self):
        out = os.path.join(self.elsewhere, "installed.h5")
        proc = self.run_here([MPIEXEC, "-n", "2", self.p("bin", "dlscale"), "run", "-w", "mnist_fnn:width=16",
                              "-d", "reference", "--batch", "4", "--warmup", "1", "--iterations", "2",
                              "--format", "json", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        case = json.loads(proc.stdout.splitlines()[0])
        self.assertEqual((case["status"], case["ranks"]), ("ok", 2))
        with h5py.File(out, "r") as f:
            self.assertEqual(f["cases/0000/iter_time_s"].shape, (2, 2))
        proc = self.run_here([PYTHON, self.p("bin", "dlscale-report"), "summary", "--format", "csv", out])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("mnist_fnn:width=16", proc.stdout)
        self.assertIn(str(case["step_median_s"] * 1e3)[:6], proc.stdout)

    def test_installed_study_finds_the_installed_binary_and_template(self):
        proc = self.run_here([PYTHON, self.p("share", "dlscale", "slurm", "study"), "--ranks", "1,2",
                              "-w", "mnist_fnn:width=16", "--batch", "4,8", "--dry-run"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        template = self.p("share", "dlscale", "slurm", "dlscale-cpu.sbatch")
        self.assertEqual(len([l for l in proc.stdout.splitlines() if l.startswith("sbatch ") and template in l]), 2)
        self.assertIn(f"checked with {self.p('bin', 'dlscale')} run --dry-run", proc.stderr)
        self.assertEqual(len(re.findall(r"^study:   dlscale run ", proc.stderr, re.M)), 2)
        bad = self.run_here([PYTHON, self.p("share", "dlscale", "slurm", "study"), "--ranks", "1",
                             "-w", "resnet9000", "--dry-run"])
        self.assertEqual(bad.returncode, 2, bad.stderr)
        self.assertIn("unknown workload 'resnet9000'", bad.stderr)
        self.assertEqual(bad.stdout, "")  # nothing would be submitted


if __name__ == "__main__":
    unittest.main()
