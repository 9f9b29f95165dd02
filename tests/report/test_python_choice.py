"""results/dlscale-report and slurm/study where the first python3 on PATH lacks h5py.

On a shared machine the first python3 on PATH is often a pyenv, conda or module Python without
h5py, numpy and matplotlib. Here it is a real one: a venv of the tests' own Python made without
--system-site-packages, so it sees none of the modules the tests' Python has. With it first on
PATH, the commands of the README must still work: dlscale-report runs itself again under a
Python that has the modules (results/dlscale_report/_interpreter.py), saying so in exactly one
line; slurm/study needs only the standard library and runs as it is, and the dlscale-report it
starts chooses for itself. The results file is a real one, written by the dlscale binary.

CTest sets DLSCALE_BIN, MPIEXEC, DLSCALE_SOURCE_DIR and DLSCALE_PYTHON (the build's, which has
the modules); run by hand with those exported.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.environ["DLSCALE_SOURCE_DIR"]
DLSCALE = os.environ["DLSCALE_BIN"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
PYTHON = os.environ.get("DLSCALE_PYTHON", sys.executable)
REPORT = os.path.join(SOURCE, "results", "dlscale-report")
STUDY = os.path.join(SOURCE, "slurm", "study")
WORKLOAD = "mnist_fnn:width=16"
CHOSEN = "dlscale-report: using "


def make_bare_venv(path):
    """A venv of this Python that sees none of its site packages; returns its python3."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", path], check=True,
                   capture_output=True, timeout=300)
    return os.path.join(path, "bin", "python3")


def chosen_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith(CHOSEN)]


class FirstPythonLacksModules(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="dlscale_python_choice_")
        cls.bare = make_bare_venv(os.path.join(cls.tmp, "bare"))
        # PATH as a user's shell has it with pyenv or conda: the bare python3 first. Nothing
        # from this process that would point a Python at other modules or choose for it.
        cls.env = {k: v for k, v in os.environ.items()
                   if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV")
                   and not k.startswith("DLSCALE_")}
        cls.env["PATH"] = os.path.dirname(cls.bare) + os.pathsep + "/usr/bin:/bin"
        probe = subprocess.run(["python3", "-c", "import sys, importlib.util as u; print(sys.executable); "
                                "print(*[m for m in ('h5py', 'numpy', 'matplotlib') if u.find_spec(m) is None])"],
                               env=cls.env, capture_output=True, text=True, check=True)
        cls.bare_executable, lacks = probe.stdout.splitlines()
        # The premise: the first python3 is the bare one, and it lacks all three.
        assert cls.bare_executable == cls.bare, probe.stdout
        assert lacks.split() == ["h5py", "numpy", "matplotlib"], lacks

        cls.file = os.path.join(cls.tmp, "x.h5")
        proc = subprocess.run([MPIEXEC, "-n", "1", DLSCALE, "run", "-w", WORKLOAD, "-d", "reference",
                               "--batch", "4", "--warmup", "1", "--iterations", "2", "--out", cls.file],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_bare(self, cmd, env=None):
        # No timeout needed for speed: it guards against a loop of re-executions only.
        return subprocess.run(cmd, env=env or self.env, cwd=self.tmp, capture_output=True, text=True,
                              timeout=300)

    def assertChose(self, proc, python, origin=None):
        """Exactly one line naming the Python chosen and what the bare one lacks."""
        lines = chosen_lines(proc.stderr)
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn(f"{CHOSEN}{python} ", lines[0])
        if origin:
            self.assertIn(f"({origin})", lines[0])
        self.assertTrue(lines[0].endswith(f": {self.bare} lacks h5py, numpy, matplotlib"), lines[0])

    def test_summary_runs_under_a_python_with_the_modules(self):
        # results/dlscale-report summary x.h5, as the README has it.
        proc = self.run_bare([REPORT, "summary", self.file])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(WORKLOAD.split(":")[0], proc.stdout)
        self.assertIn("reference", proc.stdout)
        # DLSCALE_PYTHON is not set here, so the build's (from build/current, when that is this
        # build) or /usr/bin/python3; both have the modules.
        lines = chosen_lines(proc.stderr)
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertRegex(lines[0], r"^dlscale-report: using \S+ \((the build's DLSCALE_PYTHON|the system Python)\): ")
        self.assertChose(proc, lines[0][len(CHOSEN):].split(" ")[0])
        # The same output as under the right Python named explicitly, which chooses nothing.
        direct = subprocess.run([PYTHON, REPORT, "summary", self.file], env=self.env, cwd=self.tmp,
                                capture_output=True, text=True, timeout=300)
        self.assertEqual(direct.returncode, 0, direct.stderr)
        self.assertEqual(chosen_lines(direct.stderr), [])
        self.assertEqual(proc.stdout, direct.stdout)

    def test_dlscale_python_comes_first(self):
        # A second real venv, this one seeing the tests' Python's packages, named by the user.
        seeing = os.path.join(self.tmp, "seeing")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", seeing],
                       check=True, capture_output=True, timeout=300)
        python = os.path.join(seeing, "bin", "python3")
        proc = self.run_bare([REPORT, "summary", "--format", "json", self.file],
                             env=dict(self.env, DLSCALE_PYTHON=python))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertChose(proc, python, "$DLSCALE_PYTHON")
        self.assertEqual(json.loads(proc.stdout)[0]["workload"], WORKLOAD)

    def test_arguments_and_exit_codes_are_kept(self):
        odd = os.path.join(self.tmp, "a b -é.h5")   # spaces, a dash, non-ASCII: one argument
        shutil.copy(self.file, odd)
        for args, rc in ((["summary", "--format", "csv", odd], 0),
                         (["check", odd], 0),
                         (["check", os.path.join(self.tmp, "missing file.h5")], 2),
                         (["summary", "--format", "yaml", odd], 2)):
            with self.subTest(args=args):
                proc = self.run_bare([REPORT] + args)
                direct = subprocess.run([PYTHON, REPORT] + args, env=self.env, cwd=self.tmp,
                                        capture_output=True, text=True, timeout=300)
                self.assertEqual((proc.returncode, direct.returncode), (rc, rc), proc.stderr)
                self.assertEqual(proc.stdout, direct.stdout)
                # The tool's own stderr follows the one line of the choice, unchanged.
                lines = proc.stderr.splitlines()
                self.assertEqual(len(chosen_lines(proc.stderr)), 1, proc.stderr)
                self.assertTrue(lines[0].startswith(CHOSEN), proc.stderr)
                self.assertEqual(lines[1:], direct.stderr.splitlines())
        self.assertIn(odd, self.run_bare([REPORT, "summary", "--format", "csv", odd]).stdout)

    def test_a_python_that_only_looks_right_is_not_chosen_twice(self):
        # A candidate whose answer to the probe is wrong (a wrapper, a broken install): it says it
        # has the modules, then runs the bare Python, in its own process (exec) or as a child.
        # The re-executed script must not choose again (it would start itself forever) but name
        # what is missing and exit 2.
        for name, run in (("exec", "exec"), ("child", "")):
            with self.subTest(wrapper=name):
                liar = os.path.join(self.tmp, f"liar-{name}-python3")
                with open(liar, "w") as f:
                    f.write(f'#!/bin/sh\nif [ "$1" = -c ]; then exit 0; fi\n{run} {self.bare} "$@"\n')
                os.chmod(liar, 0o755)
                proc = self.run_bare([REPORT, "summary", self.file], env=dict(self.env, DLSCALE_PYTHON=liar))
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertEqual(proc.stdout, "")
                lines = proc.stderr.splitlines()
                self.assertEqual(len(lines), 2, proc.stderr)
                self.assertChose(proc, liar, "$DLSCALE_PYTHON")
                self.assertTrue(lines[1].startswith("dlscale-report: error: missing Python module(s) h5py, numpy "),
                                lines[1])

    def test_study_runs_as_it_is_and_its_report_chooses_for_itself(self):
        # slurm/study needs only the standard library: no choice, no line.
        proc = self.run_bare([STUDY, "--help"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("usage: slurm/study", proc.stdout)
        self.assertEqual(chosen_lines(proc.stderr), [])
        proc = self.run_bare([STUDY, "--ranks", "1,2", "-w", WORKLOAD, "--batch", "4", "--bin", DLSCALE,
                              "--dry-run"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(len([line for line in proc.stdout.splitlines() if line.startswith("sbatch ")]), 2)
        # --collect of a study whose one job has finished: the study runs dlscale-report summary
        # on its file, which must find a Python with h5py on its own.
        study_dir = os.path.join(self.tmp, "study")
        os.mkdir(study_dir)
        shutil.copy(self.file, os.path.join(study_dir, "dlscale-101.h5"))
        with open(os.path.join(study_dir, "study.json"), "w") as f:
            json.dump({"schema": "dlscale-study/1", "name": "choice", "study_dir": study_dir,
                       "points": [{"label": "ranks-1", "job_id": "101", "state": "COMPLETED",
                                   "exit_code": "0:0", "file": os.path.join(study_dir, "dlscale-101.h5"),
                                   "output": os.path.join(study_dir, "slurm-101.out")}]}, f)
        proc = self.run_bare([STUDY, "--collect", study_dir])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(f"{REPORT} summary {study_dir}/dlscale-101.h5", proc.stdout)
        self.assertIn(WORKLOAD.split(":")[0], proc.stdout.split("\n", 1)[1])  # the table itself
        self.assertNotIn("error", proc.stderr)


if __name__ == "__main__":
    unittest.main()
