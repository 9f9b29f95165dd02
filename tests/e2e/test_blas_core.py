"""The BLAS kernels dlscale computes with (drivers/cpu/blas_core.h), on real processes and the
real OpenBLAS: where OpenBLAS fell back to generic kernels dlscale selects the CPU's, after a
child process's product agreed with float64, and records the choice and why; --blas-core keep
leaves the fallback; a user's own OPENBLAS_CORETYPE is respected; a core the CPU cannot run
crashes the child, not dlscale; two ranks under mpirun choose alike.

OpenBLAS recognises this machine's CPU, so the tests make it fall back the way an unknown CPU
would: OPENBLAS_CORETYPE=Prescott (its generic SSE3 kernels) with DLSCALE_TEST_BLAS_FALLBACK,
which tells dlscale to take it for OpenBLAS's own choice (io/fault_injection.h). Every kernel
runs for real. Skipped where this dlscale has no OpenBLAS loaded (a build without LibTorch and
Kokkos, or another BLAS).

CTest sets DLSCALE_BIN, MPIEXEC and DLSCALE_SOURCE_DIR; run by hand with those exported.
"""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

import h5py

DLSCALE = os.environ["DLSCALE_BIN"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
FALLBACK = {"OPENBLAS_CORETYPE": "Prescott", "DLSCALE_TEST_BLAS_FALLBACK": "best"}


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def best_core():
    """The OpenBLAS kernels for this CPU's instruction set, as dlscale chooses them."""
    flags = cpu_flags()
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return "Sandybridge" if "avx" in flags else ""


def info(env=None, args=()):
    """`dlscale info`'s software attributes, its warning lines and exit code."""
    e = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "DLSCALE_BLAS_CORE")}
    e.update(env or {})
    proc = subprocess.run([DLSCALE, "info"] + list(args), capture_output=True, text=True, env=e, timeout=120)
    software = {}
    for line in proc.stdout.split("\n\n")[1].splitlines()[1:]:
        name, _, value = line.strip().partition(" ")
        software[name] = value.strip()
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("dlscale: warning:") and "BLAS" in line]
    return software, warnings, proc.returncode


HAS_OPENBLAS = bool(info()[0].get("blas_core"))


@unittest.skipUnless(HAS_OPENBLAS, "no OpenBLAS in this dlscale")
@unittest.skipUnless(best_core(), "a CPU without AVX: no kernels better than the generic ones")
class BlasCore(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_blas_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_a_fallback_is_replaced_by_the_cpus_kernels(self):
        software, warnings, code = info(FALLBACK)
        self.assertEqual(code, 0)
        self.assertEqual((software["blas_core"], software["blas_core_chosen"]), (best_core(), "Prescott"))
        self.assertRegex(software["blas_core_reason"],
                         rf"^selected by dlscale for this CPU's AVX[-0-9A-Z]*: OpenBLAS chose Prescott on its own; "
                         rf"a product computed with {best_core()} agreed with float64$")
        self.assertEqual(warnings, [])

    def test_keep_leaves_the_fallback_and_says_so(self):
        for how in ({"args": ["--blas-core", "keep"]}, {"env": {"DLSCALE_BLAS_CORE": "keep"}}):
            with self.subTest(**how):
                env = dict(FALLBACK, **how.get("env", {}))
                software, warnings, code = info(env, how.get("args", ()))
                self.assertEqual(code, 0)
                self.assertEqual((software["blas_core"], software["blas_core_chosen"]), ("Prescott", "Prescott"))
                self.assertIn("kept as asked", software["blas_core_reason"])
                self.assertEqual(len(warnings), 1, warnings)
                self.assertIn("OpenBLAS runs its Prescott kernels, below what this CPU's instruction set allows",
                              warnings[0])

    def test_a_users_coretype_is_respected(self):
        software, warnings, code = info({"OPENBLAS_CORETYPE": "Prescott"})
        self.assertEqual(code, 0)
        self.assertEqual(software["blas_core"], "Prescott")
        self.assertEqual(software["blas_core_reason"], "OPENBLAS_CORETYPE=Prescott in the environment")
        self.assertEqual(len(warnings), 1, warnings)  # still below the CPU: said, not changed

    def test_kernels_the_cpu_cannot_run_crash_the_child_only(self):
        if "avx512f" in cpu_flags():
            self.skipTest("this CPU runs every x86 kernel OpenBLAS 0.3 has")
        software, warnings, code = info(dict(FALLBACK, DLSCALE_TEST_BLAS_FALLBACK="SkylakeX"))
        self.assertEqual(code, 0)
        self.assertEqual(software["blas_core"], "Prescott")
        self.assertRegex(software["blas_core_reason"], r"SkylakeX, tried for this CPU's .*, crashed a product")
        self.assertEqual(len(warnings), 1, warnings)

    def test_two_ranks_choose_alike_and_the_case_records_it(self):
        out = os.path.join(self.dir, "r.h5")
        env = dict(os.environ, **FALLBACK)
        proc = subprocess.run([MPIEXEC, "-n", "2", DLSCALE, "run", "-w", "fcn5:features=64,width=32", "-d",
                               "reference", "--batch", "8", "--iterations", "2", "--peak", "skip", "--out", out],
                              capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with h5py.File(out, "r") as f:
            ranks = [b.decode() if isinstance(b, bytes) else b for b in f["system/ranks"]["blas"]]
            self.assertEqual(ranks, [f"OpenBLAS {best_core()}"] * 2)
            a = f["cases/0000"].attrs
            self.assertEqual((a["blas_core"], a["blas_core_chosen"], a["blas_core_below_cpu"]),
                             (best_core(), "Prescott", 0))
            self.assertTrue(re.match("selected by dlscale", a["blas_core_reason"]))


if __name__ == "__main__":
    unittest.main()
