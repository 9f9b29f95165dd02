"""results/ installed with pip, offline, and the installed dlscale-report used from elsewhere.

What docs/install.md tells users to do, in a temporary directory:

  DLSCALE_PYTHON -m venv --system-site-packages VENV
  VENV/bin/python -m pip install --no-index --no-build-isolation SOURCE/results

with the PIP_* variables and every pip configuration file set aside (PIP_CONFIG_FILE=/dev/null),
so nothing but this machine's packages can satisfy it: the build backend (setuptools, wheel) and
numpy come from the system's site-packages. Then, from a directory that is neither the source
tree nor the venv, VENV/bin/dlscale-report --version and summary --format json of a file that
the real binary writes (2 ranks under mpiexec).

The install builds in SOURCE/results (pip builds in tree): what it leaves there (build/,
*.egg-info) must be ignored by git, and is removed again when this test created it.

CTest sets DLSCALE_BIN, MPIEXEC, DLSCALE_SOURCE_DIR and DLSCALE_PROJECT_VERSION; by hand:

  cd tests/packaging && DLSCALE_BIN=/path/to/dlscale MPIEXEC=mpiexec DLSCALE_SOURCE_DIR=$PWD/../.. \\
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 /usr/bin/python3 -m unittest -v test_pip_install
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py

SOURCE = os.path.abspath(os.environ["DLSCALE_SOURCE_DIR"])
DLSCALE = os.environ["DLSCALE_BIN"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
RESULTS = os.path.join(SOURCE, "results")
# What an in-tree setuptools build writes next to pyproject.toml.
BUILD_LITTER = [os.path.join(RESULTS, "build"), os.path.join(RESULTS, "dlscale_report.egg-info")]


def clean_env(**extra):
    """This environment without pip's settings or anything that adds to Python's path."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIP_") and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_CONFIG_FILE"] = os.devnull          # no pip.conf (no find-links, no index)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.update(extra)
    return env


def git(*args):
    """Output of git in SOURCE, or None when it is not a checkout (or git is missing)."""
    try:
        return subprocess.run(["git", "-C", SOURCE, *args], capture_output=True, text=True,
                              check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None


class PipInstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dlscale_pip_")
        cls.venv = os.path.join(cls.tmp, "venv")
        cls.elsewhere = os.path.join(cls.tmp, "elsewhere")
        os.makedirs(cls.elsewhere)
        cls.created = [p for p in BUILD_LITTER if not os.path.exists(p)]
        cls.status_before = git("status", "--porcelain", "--untracked-files=all")
        cls.commit_at_build = (git("describe", "--always", "--dirty", "--abbrev=12") or "").strip()

        proc = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", cls.venv],
                              capture_output=True, text=True, env=clean_env(), timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"{sys.executable} -m venv failed (Debian: apt-get install "
                               f"python3-venv): {proc.stderr.strip()}")
        cls.python = os.path.join(cls.venv, "bin", "python")
        cls.install = subprocess.run(
            [cls.python, "-m", "pip", "install", "--no-index", "--no-build-isolation", RESULTS],
            capture_output=True, text=True, env=clean_env(), cwd=cls.elsewhere, timeout=300)
        cls.status_after = git("status", "--porcelain", "--untracked-files=all")

    @classmethod
    def tearDownClass(cls):
        for path in cls.created:                 # only what this test made
            shutil.rmtree(path, ignore_errors=True)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.assertEqual(self.install.returncode, 0,
                         f"pip install failed:\n{self.install.stdout}\n{self.install.stderr}")

    def installed(self, *args):
        """The venv's console script, from a directory that is not the source tree, with a
        PATH on which `python3` is not the venv's and no PYTHONPATH."""
        script = os.path.join(self.venv, "bin", "dlscale-report")
        return subprocess.run([script, *args], capture_output=True, text=True, timeout=300,
                              cwd=self.elsewhere, env=clean_env(PATH="/usr/bin:/bin"))

    def test_installed_copy_is_used(self):
        out = subprocess.run([self.python, "-c", "import dlscale_report; print(dlscale_report.__file__)"],
                             capture_output=True, text=True, cwd=self.elsewhere, env=clean_env(),
                             check=True).stdout.strip()
        self.assertTrue(os.path.realpath(out).startswith(os.path.realpath(self.venv) + os.sep), out)
        meta = subprocess.run([self.python, "-m", "pip", "show", "dlscale-report"], capture_output=True,
                              text=True, env=clean_env(), check=True).stdout
        self.assertIn(f"Version: {os.environ.get('DLSCALE_PROJECT_VERSION', '0.1.0')}\n", meta)

    def test_version(self):
        proc = self.installed("--version")
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))
        m = re.fullmatch(r"dlscale-report (\S+) \(commit (\S+)\)\n", proc.stdout)
        self.assertIsNotNone(m, proc.stdout)
        # pyproject's dynamic version is dlscale_report/_version.py's, which is CMake's.
        self.assertEqual(m.group(1), os.environ.get("DLSCALE_PROJECT_VERSION", "0.1.0"))
        # The installed copy is no checkout: the commit is the one recorded when it was built.
        self.assertEqual(m.group(2), self.commit_at_build or "unknown")

    def test_no_litter_that_git_sees(self):
        if self.status_before is None:
            self.skipTest(f"{SOURCE} is not a git checkout")
        self.assertEqual(self.status_after, self.status_before)
        for path in BUILD_LITTER:
            if os.path.exists(path):
                self.assertIsNotNone(git("check-ignore", "-q", path), f"{path} is not ignored")

    def test_summary_json_equals_recorded_summary(self):
        path = os.path.join(self.tmp, "run.h5")
        run = subprocess.run([MPIEXEC, "-n", "2", DLSCALE, "run", "-w", "mnist_fnn:width=16",
                              "-d", "reference", "--batch", "4", "--warmup", "1", "--iterations", "2",
                              "--out", path], capture_output=True, text=True, timeout=600)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        proc = self.installed("summary", "--format", "json", path)
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))
        rows = json.loads(proc.stdout)
        with h5py.File(path, "r") as f:
            cases = [(name, dict(g.attrs), dict(g["summary"].attrs)) for name, g in f["cases"].items()]
        self.assertEqual(len(rows), len(cases))
        self.assertEqual(len(rows), 1)
        for row, (name, attrs, summary) in zip(rows, cases):
            self.assertEqual((row["file"], row["case"], row["status"]), (path, name, "ok"))
            self.assertEqual((row["workload"], row["driver"]), ("mnist_fnn:width=16", "reference"))
            self.assertEqual((row["ranks"], row["batch_per_rank"], row["global_batch"]), (2, 4, 8))
            # Exactly the recorded numbers, in the report's units.
            for key, src, scale in (("step_median_ms", "step_median_s", 1e3),
                                    ("ci95_low_ms", "ci95_low_s", 1e3),
                                    ("ci95_high_ms", "ci95_high_s", 1e3),
                                    ("samples_per_s", "samples_per_s", 1.0),
                                    ("achieved_gflops", "achieved_flops", 1e-9),
                                    ("exposed_allreduce_ms", "exposed_allreduce_median_s", 1e3)):
                self.assertIn(src, summary)
                self.assertEqual(row[key], float(summary[src]) * scale, key)

    def test_bad_format_and_missing_file(self):
        proc = self.installed("summary", "--format", "yaml", "x.h5")
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)
        proc = self.installed("summary", "missing.h5")
        self.assertEqual((proc.returncode, proc.stderr), (2, "dlscale-report: error: missing.h5: no such file\n"))


if __name__ == "__main__":
    unittest.main()
