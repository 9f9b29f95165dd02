"""`cmake --install` of the build tree into a temporary prefix P, then everything from P only,
run from another directory: `P/bin/dlscale --version`, a 2-rank run of the installed binary,
`P/bin/dlscale-report summary` on its file, and the installed `slurm/study` finding the
installed binary and template (its --dry-run; tests/slurm runs the installed template under a
real Slurm). With a python3 first on PATH that lacks h5py (a venv made without
--system-site-packages), P/bin/dlscale-report runs itself with the Python the build was
configured with, which the install recorded. The module files the install writes are loaded
with the real Lmod (Debian's lmod), the Lua one and the Tcl one, and a DESTDIR install puts
the files under DESTDIR with the prefix, not DESTDIR, written into them.

CTest sets DLSCALE_BUILD_DIR, DLSCALE_SOURCE_DIR, DLSCALE_PYTHON, DLSCALE_PROJECT_VERSION and
MPIEXEC.
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

BUILD = os.environ["DLSCALE_BUILD_DIR"]
SOURCE = os.environ["DLSCALE_SOURCE_DIR"]
PYTHON = os.environ.get("DLSCALE_PYTHON", "/usr/bin/python3")
VERSION = os.environ["DLSCALE_PROJECT_VERSION"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
# Where Debian's lmod package puts the shell set-up a login shell sources (/etc/profile.d/lmod.sh).
LMOD_INIT = "/usr/share/lmod/lmod/init/bash"


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

    def run_here(self, cmd, timeout=300, env=None):
        return subprocess.run(cmd, cwd=self.elsewhere, env=env or self.env, capture_output=True, text=True,
                              timeout=timeout)

    def test_layout(self):
        for path in (("bin", "dlscale"), ("bin", "dlscale-report"), ("share", "dlscale", "slurm", "study"),
                     ("share", "dlscale", "slurm", "dlscale-cpu.sbatch"),
                     ("share", "dlscale", "slurm", "dlscale-gpu.sbatch"),
                     ("share", "dlscale", "python", "dlscale_report", "cli.py"),
                     ("share", "modulefiles", "dlscale", f"{VERSION}.lua"),
                     ("share", "modulefiles-tcl", "dlscale", VERSION),
                     ("share", "doc", "dlscale", "running.md"), ("share", "doc", "dlscale", "README.md")):
            self.assertTrue(os.path.isfile(self.p(*path)), os.path.join(*path))
        for exe in (("bin", "dlscale"), ("libexec", "dlscale", "dlscale-blas-check"), ("bin", "dlscale-report"),
                    ("share", "dlscale", "slurm", "study"),
                    ("share", "dlscale", "slurm", "dlscale-cpu.sbatch")):
            self.assertTrue(os.access(self.p(*exe), os.X_OK), os.path.join(*exe))
        # The installed templates and study know the prefix; the source ones stay untouched.
        with open(self.p("share", "dlscale", "slurm", "dlscale-cpu.sbatch")) as f:
            self.assertIn(f'installed_prefix="{self.prefix}"', f.read())
        with open(self.p("share", "dlscale", "slurm", "study")) as f:
            self.assertIn(f'INSTALLED_PREFIX = "{self.prefix}"', f.read())
        with open(os.path.join(SOURCE, "slurm", "dlscale-cpu.sbatch")) as f:
            self.assertIn('installed_prefix=""', f.read())
        # The module files: filled in, nothing of the template left.
        for path, line in ((("share", "modulefiles", "dlscale", f"{VERSION}.lua"), f'local prefix = "{self.prefix}"'),
                           (("share", "modulefiles-tcl", "dlscale", VERSION), f'set prefix "{self.prefix}"')):
            with open(self.p(*path)) as f:
                text = f.read()
            self.assertIsNone(re.search(r"@[A-Z_]+@", text), os.path.join(*path))
            self.assertIn(line, text.splitlines())
            self.assertIn(f"dlscale {VERSION}:", text)

    def test_version(self):
        proc = self.run_here([self.p("bin", "dlscale"), "--version"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertRegex(proc.stdout.strip(), r"^dlscale \d+\.\d+\.\d+ \(commit ")
        proc = self.run_here([PYTHON, self.p("bin", "dlscale-report"), "--version"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertRegex(proc.stdout.strip(), r"^dlscale-report \d+\.\d+\.\d+")

    def test_the_installed_blas_check(self):
        """The installed child that checks BLAS kernels runs a product on the BLAS the installed
        dlscale loaded, and dlscale selects with it where OpenBLAS fell back (as on a CPU it does
        not know: tests/e2e/test_blas_core.py)."""
        env = dict(self.env, OPENBLAS_CORETYPE="Prescott", DLSCALE_TEST_BLAS_FALLBACK="best")
        proc = subprocess.run([self.p("bin", "dlscale"), "info"], cwd=self.elsewhere, env=env, capture_output=True,
                              text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        path = re.search(r"^  blas_path +(\S+)$", proc.stdout, re.M)
        if not path:
            self.skipTest("no OpenBLAS in this dlscale")
        check = self.run_here([self.p("libexec", "dlscale", "dlscale-blas-check"), path.group(1)])
        self.assertEqual(check.returncode, 0, check.stderr)
        self.assertRegex(proc.stdout, r"blas_core_reason +selected by dlscale .* agreed with float64")

    def test_the_installed_driver_modules(self):
        """Every driver module of the build is installed, and the installed dlscale loads its own
        copy (not the build tree's, which it would fall back on) when a case needs it."""
        built = sorted(os.listdir(os.path.join(BUILD, "lib", "dlscale")))
        # lib/dlscale, or lib/<multiarch>/dlscale where the build was configured for /usr
        installed_dir = next(os.path.join(root, "dlscale") for root, dirs, _ in os.walk(self.p("lib"))
                             if "dlscale" in dirs)
        self.assertEqual(sorted(os.listdir(installed_dir)), built)
        if "dlscale-libtorch.so" not in built:
            self.skipTest("this build has no LibTorch driver")
        proc = self.run_here([self.p("bin", "dlscale"), "run", "-w", "mnist_fnn:width=16", "-d", "libtorch",
                              "--batch", "4", "--warmup", "1", "--iterations", "1", "--format", "json",
                              "--out", os.path.join(self.elsewhere, "module.h5")],
                             env=dict(self.env, LD_DEBUG="files"))
        self.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
        self.assertEqual(json.loads(proc.stdout.splitlines()[0])["status"], "ok")
        opened = re.findall(r"file=(\S*dlscale-libtorch\.so) \[0\];\s+dynamically loaded", proc.stderr)
        self.assertEqual([os.path.normpath(p) for p in opened], [os.path.join(installed_dir, "dlscale-libtorch.so")])

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

    def test_report_with_a_python_without_h5py_first_on_path(self):
        # A real Python without h5py, numpy and matplotlib, as a pyenv or conda one on a shared
        # machine: a venv of this Python without --system-site-packages.
        venv = os.path.join(self.tmp, "bare")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, capture_output=True)
        bare = os.path.join(venv, "bin", "python3")
        env = dict(self.env, PATH=os.path.join(venv, "bin") + os.pathsep + self.env["PATH"])
        lacks = subprocess.run(["python3", "-c", "import importlib.util as u; print(u.find_spec('h5py'))"],
                               env=env, capture_output=True, text=True, check=True).stdout.strip()
        self.assertEqual(lacks, "None", "the venv must not see h5py")
        out = os.path.join(self.elsewhere, "bare-python.h5")
        proc = self.run_here([MPIEXEC, "-n", "1", self.p("bin", "dlscale"), "run", "-w", "mnist_fnn:width=16",
                              "-d", "reference", "--batch", "4", "--warmup", "1", "--iterations", "2", "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        # The installed script knows the build's DLSCALE_PYTHON (no DLSCALE_* variable is set
        # here, and it comes before /usr/bin/python3), so it runs that one and says so once.
        proc = subprocess.run([self.p("bin", "dlscale-report"), "summary", "--format", "csv", out],
                              cwd=self.elsewhere, env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("mnist_fnn:width=16", proc.stdout)
        chosen = [line for line in proc.stderr.splitlines() if line.startswith("dlscale-report: using ")]
        self.assertEqual(chosen, [f"dlscale-report: using {os.path.abspath(shutil.which(PYTHON))} (the build's "
                                  f"DLSCALE_PYTHON): {bare} lacks h5py, numpy, matplotlib"], proc.stderr)
        # The installed study needs only the standard library: it runs under the bare Python.
        proc = subprocess.run([self.p("share", "dlscale", "slurm", "study"), "--help"],
                              cwd=self.elsewhere, env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("usage: slurm/study", proc.stdout)

    def test_destdir_moves_the_files_not_the_prefix_written_into_them(self):
        # What a distribution package build does: install into a staging tree for /opt/...
        stage = os.path.join(self.tmp, "stage")
        prefix = "/opt/dlscale-destdir-test"
        proc = subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix], capture_output=True, text=True,
                              env=dict(os.environ, DESTDIR=stage))
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertFalse(os.path.exists(prefix))
        staged = stage + prefix
        with open(os.path.join(staged, "share", "modulefiles", "dlscale", f"{VERSION}.lua")) as f:
            self.assertIn(f'local prefix = "{prefix}"', f.read())
        with open(os.path.join(staged, "share", "modulefiles-tcl", "dlscale", VERSION)) as f:
            self.assertIn(f'set prefix "{prefix}"', f.read())
        with open(os.path.join(staged, "share", "dlscale", "slurm", "study")) as f:
            self.assertIn(f'INSTALLED_PREFIX = "{prefix}"', f.read())

    @unittest.skipUnless(os.path.isfile(LMOD_INIT), "Lmod is not installed (Debian: lmod, scripts/setup-deps.sh)")
    def test_lmod_loads_the_installed_module_files(self):
        # Lmod reads both files: the Lua one, and the Tcl one written for environment-modules
        # (which conflicts with lmod as a Debian package, so it is tested through Lmod here).
        # A shell as a user's would be after its profile sourced Lmod's set-up, but with nothing
        # else on MODULEPATH and its own HOME (Lmod keeps caches there).
        home = os.path.join(self.tmp, "home")
        os.makedirs(home, exist_ok=True)
        env = {k: v for k, v in self.env.items()
               if not k.startswith(("LMOD", "MODULE", "_ModuleTable", "__LMOD", "BASH_FUNC_"))}
        env["HOME"] = home
        script = rf"""
            source {LMOD_INIT}
            module use "$1"
            module load dlscale || exit 3
            printf 'which=%s\n' "$(command -v dlscale)"
            printf 'loaded=%s\n' "$(module --terse list 2>&1 | tr '\n' ' ')"
            printf 'share=%s\n' "$DLSCALE_SHARE"
            dlscale --version || exit 4
            module unload dlscale || exit 5
            printf 'after_share=%s\n' "${{DLSCALE_SHARE-unset}}"
            printf 'after_path=%s\n' "$PATH"
        """
        for directory in ("modulefiles", "modulefiles-tcl"):
            with self.subTest(directory=directory):
                proc = subprocess.run(["bash", "--noprofile", "--norc", "-c", script, "bash",
                                       self.p("share", directory)],
                                      cwd=self.elsewhere, env=env, capture_output=True, text=True, timeout=300)
                self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
                lines = proc.stdout.splitlines()
                values = dict(line.split("=", 1) for line in lines if re.match(r"^[a-z_]+=", line))
                self.assertEqual(values["which"], self.p("bin", "dlscale"))
                self.assertEqual(values["loaded"].split(), [f"dlscale/{VERSION}"])
                self.assertEqual(values["share"], self.p("share", "dlscale"))
                self.assertTrue(os.path.isfile(os.path.join(values["share"], "slurm", "dlscale-cpu.sbatch")))
                self.assertEqual(len([line for line in lines if line.startswith("dlscale ")]), 1, proc.stdout)
                self.assertRegex(proc.stdout, rf"(?m)^dlscale {re.escape(VERSION)} \(commit ")
                # Unloading takes back what loading did.
                self.assertEqual(values["after_share"], "unset")
                self.assertEqual(values["after_path"], env["PATH"])


if __name__ == "__main__":
    unittest.main()
