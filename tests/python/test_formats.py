"""dlscale-report's --version, usage errors and missing modules.

Run: /usr/bin/python3 -m unittest discover -s tests/python

Everything runs the script with this interpreter (sys.executable), since its
`#!/usr/bin/env python3` may find a Python without h5py.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

from test_report import RESULTS_DIR, SCRIPT, make_case, write_results

SOURCE = os.path.dirname(RESULTS_DIR)


def run(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, SCRIPT] + [str(a) for a in args], capture_output=True,
                          text=True, env=env, cwd=cwd)



def cmake_project_version():
    with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
        m = re.search(r"project\(\s*dlscale\s+VERSION\s+([0-9.]+)", f.read())
    return m.group(1) if m else None


def git_describe(path):
    try:
        return subprocess.run(["git", "-C", path, "describe", "--always", "--dirty", "--abbrev=12"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


class UsageErrorTest(unittest.TestCase):
    def test_usage_errors_are_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "run.h5")
            write_results(path, [make_case(np.full((1, 5), 0.01))])
            for args in ([], ["bogus"], ["summary"], ["scaling", "--mode", "sideways", path],
                         ["summary", "--format", "yaml", path]):
                with self.subTest(args=args):
                    proc = run(*args)
                    self.assertEqual(proc.returncode, 2)
                    self.assertEqual(proc.stdout, "")
                    self.assertEqual(len(proc.stderr.splitlines()), 1, proc.stderr)
                    self.assertTrue(proc.stderr.startswith("dlscale-report: error: "), proc.stderr)


class VersionTest(unittest.TestCase):
    def test_version_line(self):
        proc = run("--version", cwd=tempfile.gettempdir())
        self.assertEqual((proc.returncode, proc.stderr), (0, ""))
        m = re.fullmatch(r"dlscale-report (\S+) \(commit (\S+)\)\n", proc.stdout)
        self.assertIsNotNone(m, proc.stdout)
        from dlscale_report import _version
        self.assertEqual(m.group(1), _version.__version__)
        # Python side and CMake project: one version.
        self.assertEqual(m.group(1), cmake_project_version())
        # Run from the checkout: the checkout's commit (or "unknown" outside git).
        self.assertEqual(m.group(2), git_describe(RESULTS_DIR) or "unknown")

    def test_copy_outside_checkout_uses_build_info(self):
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(os.path.join(RESULTS_DIR, "dlscale_report"),
                            os.path.join(tmp, "dlscale_report"),
                            ignore=shutil.ignore_patterns("__pycache__"))
            code = "from dlscale_report._version import commit; print(commit())"
            env = dict(os.environ, PYTHONPATH=tmp)

            def commit():
                return subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp,
                                      capture_output=True, text=True, check=True).stdout.strip()
            self.assertEqual(commit(), "unknown")
            with open(os.path.join(tmp, "dlscale_report", "_build_info.py"), "w") as f:
                f.write("COMMIT = '0123456789ab-dirty'\n")
            self.assertEqual(commit(), "0123456789ab-dirty")


class MissingModuleTest(unittest.TestCase):
    """A Python without h5py (or matplotlib): one line that names it, exit 2, no traceback.

    The module is hidden by a package of the same name earlier on PYTHONPATH that fails to
    import the way an absent one does.
    """

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_missing_")
        self.file = os.path.join(self.dir, "run.h5")
        write_results(self.file, [make_case(np.full((1, 5), 0.01))])

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def hide(self, *modules):
        shim = os.path.join(self.dir, "shim_" + "_".join(modules))
        for name in modules:
            os.makedirs(os.path.join(shim, name))
            with open(os.path.join(shim, name, "__init__.py"), "w") as f:
                message = f"No module named {name!r}"
                f.write(f"raise ModuleNotFoundError({message!r}, name={name!r})\n")
        return dict(os.environ, PYTHONPATH=shim)

    def assertNames(self, proc, modules, packages):
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertEqual(proc.stdout, "")
        lines = proc.stderr.splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertTrue(lines[0].startswith(f"dlscale-report: error: missing Python module(s) "
                                            f"{', '.join(modules)} "), lines[0])
        self.assertIn(f"install {' '.join(packages)} ", lines[0])

    def test_without_h5py(self):
        env = self.hide("h5py")
        for command in (["summary"], ["check"], ["scaling", "--format", "csv"]):
            with self.subTest(command=command):
                self.assertNames(run(*command, self.file, env=env), ["h5py"], ["python3-h5py"])
        # The module form too.
        proc = subprocess.run([sys.executable, "-m", "dlscale_report", "summary", self.file],
                              capture_output=True, text=True,
                              env=dict(env, PYTHONPATH=env["PYTHONPATH"] + os.pathsep + RESULTS_DIR))
        self.assertNames(proc, ["h5py"], ["python3-h5py"])
        # --version and --help need neither.
        proc = run("--version", env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertTrue(proc.stdout.startswith("dlscale-report "))
        self.assertEqual(run("--help", env=env).returncode, 0)

    def test_without_h5py_and_numpy(self):
        self.assertNames(run("summary", self.file, env=self.hide("h5py", "numpy")),
                         ["h5py", "numpy"], ["python3-h5py", "python3-numpy"])

    def test_without_matplotlib_only_plots_fail(self):
        env = self.hide("matplotlib")
        self.assertEqual(run("phases", self.file, env=env).returncode, 0)
        self.assertNames(run("phases", self.file, "-o", os.path.join(self.dir, "o"), env=env),
                         ["matplotlib"], ["python3-matplotlib"])
        self.assertNames(run("report", self.file, "-o", os.path.join(self.dir, "r"), env=env),
                         ["matplotlib"], ["python3-matplotlib"])


if __name__ == "__main__":
    unittest.main()
