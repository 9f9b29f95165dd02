"""Utilisation, energy and the measured peak, on real processes under mpiexec.

- A rank that sleeps after each timed step for as long as the step took (the test-only knob
  DLSCALE_TEST_SLEEP_RANK) is idle half of its timed region: its recorded CPU time cannot exceed
  the region minus its sleep, and the recorded utilisation and busy cores are exactly the
  arithmetic of docs/metrics.md on the recorded times.
- Every CPU driver's case records CPU utilisation, a share of a peak measured in the same job,
  host peak RSS, and energy and GPU fields that are either measured or "unavailable: why".
- `dlscale peak` writes a file that `dlscale run --peak FILE` uses; `--peak skip` gives no share.
- A case beside a CPU hog on its core is marked contended; kernel time, page faults and the
  allocator are recorded, the summary being their arithmetic.

No assertion is on how fast anything ran.
CTest sets DLSCALE_BIN, MPIEXEC, DLSCALE_SOURCE_DIR and PYTHONPATH (tests/README.md).
"""

import csv
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.environ["DLSCALE_SOURCE_DIR"], "results"))
from dlscale_report.check import check_file  # noqa: E402
from dlscale_report.drivers import driver_rows  # noqa: E402
from dlscale_report.schema import load_results  # noqa: E402
from dlscale_test import driver_devices, needs_drivers  # noqa: E402

DLSCALE = os.environ["DLSCALE_BIN"]
MPIEXEC = os.environ.get("MPIEXEC", "mpiexec")
REPORT = os.path.join(os.environ["DLSCALE_SOURCE_DIR"], "results", "dlscale-report")


def compiled_cpu_drivers():
    return [name for name, devices in driver_devices().items() if "cpu" in devices]


class Utilisation(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="dlscale_util_")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_dlscale(self, *args, ranks=2, env=None):
        e = dict(os.environ, **(env or {}))
        cmd = [MPIEXEC, "-n", str(ranks)] + [a for k in (env or {}) for a in ("-x", k)] + [DLSCALE, *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=self.tmp, env=e, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return proc

    def test_a_case_beside_a_cpu_hog_on_its_core_is_marked_contended(self):
        # The hog and the rank share one core, so the rank waits for it about half of its
        # runnable time, whatever the machine's speed.
        out = os.path.join(self.tmp, "hog.h5")
        core = str(min(os.sched_getaffinity(0)))  # a core this test may use (cpusets, Slurm)
        hog = subprocess.Popen(["taskset", "-c", core, "sh", "-c", "while :; do :; done"])
        try:
            proc = subprocess.run(["taskset", "-c", core, MPIEXEC, "-n", "1", "--bind-to", "none", DLSCALE, "run",
                                   "-w", "mnist_fnn:width=64", "-d", "reference", "--threads", "1", "--batch", "16",
                                   "--warmup", "1", "--iterations", "20", "--peak", "skip", "--format", "json",
                                   "--out", out], capture_output=True, text=True, cwd=self.tmp, timeout=600)
        finally:
            hog.kill()
            hog.wait()
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        line = json.loads(proc.stdout.splitlines()[-1])
        self.assertEqual(line["contended"], 1, line)
        self.assertGreaterEqual(line["cpu_wait_share"], 0.10)
        with h5py.File(out, "r") as f:
            case = f["cases/0000"]
            self.assertEqual(int(case["summary"].attrs["contended"]), 1)
            per_rank = case["utilisation/per_rank"][:]
            self.assertEqual(list(per_rank["contended"]), [1])
            self.assertGreater(per_rank["run_wait_s"][0], 0)
            # The summary's wait share is the per-rank table's arithmetic.
            wait, run = per_rank["run_wait_s"][0], per_rank["run_s"][0]
            self.assertAlmostEqual(case["summary"].attrs["cpu_wait_share"], wait / (wait + run))
        summary = subprocess.run([sys.executable, REPORT, "summary", out], capture_output=True, text=True, timeout=300)
        self.assertEqual(summary.returncode, 0, summary.stderr)
        self.assertIn("contended", summary.stdout)

    @needs_drivers("libtorch")
    def test_kernel_time_page_faults_and_the_allocator_are_recorded(self):
        out = os.path.join(self.tmp, "faults.h5")
        self.run_dlscale("run", "-w", "fcn5:features=512,width=512", "-d", "libtorch,reference", "--threads", "1",
                         "--batch", "64", "--warmup", "1", "--iterations", "3", "--peak", "skip", "--malloc", "system",
                         "--out", out, ranks=1)
        with h5py.File(out, "r") as f:
            for name in sorted(f["cases"]):
                case = f["cases"][name]
                per_rank, summary = case["utilisation/per_rank"][:], case["summary"].attrs
                with self.subTest(driver=case.attrs["driver"]):
                    self.assertIn("--malloc system", case.attrs["allocator"])
                    self.assertTrue(case.attrs["allocator"].startswith("glibc "), case.attrs["allocator"])
                    # Every CPU second is the user's or the kernel's; the summary is their arithmetic.
                    self.assertAlmostEqual(per_rank["user_s"][0] + per_rank["system_s"][0], per_rank["cpu_time_s"][0],
                                           delta=0.03 + 0.05 * per_rank["cpu_time_s"][0])
                    self.assertAlmostEqual(summary["page_faults_per_step"],
                                           (per_rank["minor_faults"][0] + per_rank["major_faults"][0]) / 3)
                    share = per_rank["system_s"][0] / (per_rank["user_s"][0] + per_rank["system_s"][0])
                    self.assertAlmostEqual(summary["system_share"], share)
                    self.assertAlmostEqual(summary["system_s_per_step"], per_rank["system_s"][0] / 3)
                    self.assertAlmostEqual(summary["user_s_per_step"], per_rank["user_s"][0] / 3)
        keep = os.path.join(self.tmp, "keep.h5")
        self.run_dlscale("run", "-w", "mnist_fnn:width=16", "-d", "reference", "--iterations", "2", "--peak", "skip",
                         "--out", keep, ranks=1)
        with h5py.File(keep, "r") as f:
            self.assertIn("--malloc keep: mallopt M_MMAP_MAX=0", f["cases/0000"].attrs["allocator"])

    def test_a_rank_idle_half_of_each_step(self):
        out = os.path.join(self.tmp, "sleep.h5")
        proc = self.run_dlscale("run", "-w", "mnist_fnn", "-d", "reference", "--threads", "1", "--batch", "16",
                                "--warmup", "1", "--iterations", "12", "--peak", "skip", "--out", out,
                                env={"DLSCALE_TEST_SLEEP_RANK": "1"})
        m = re.search(r"rank 1 slept ([0-9.]+) s of its ([0-9.]+) s timed region", proc.stderr)
        self.assertIsNotNone(m, proc.stderr)
        slept = float(m.group(1))
        with h5py.File(out, "r") as f:
            case = f["cases/0000"]
            per_rank = case["utilisation/per_rank"][()]
            summary = dict(case["summary"].attrs)
            threads = int(case["utilisation"].attrs["threads"])
        self.assertEqual(threads, 1)
        cpu, wall = per_rank["cpu_time_s"], per_rank["wall_s"]
        self.assertTrue(np.all(cpu > 0) and np.all(wall > 0))
        # The arithmetic, exactly as docs/metrics.md defines it, on the recorded times.
        np.testing.assert_allclose(per_rank["cpu_utilisation"], cpu / (wall * threads), rtol=1e-12)
        np.testing.assert_allclose(per_rank["busy_cores"], cpu / wall, rtol=1e-12)
        self.assertAlmostEqual(summary["cpu_utilisation"], float(np.mean(cpu / (wall * threads))), places=12)
        self.assertAlmostEqual(summary["busy_cores"], float(np.mean(cpu / wall)), places=12)
        # The sleeping rank: sleep takes no CPU time, so its CPU time is at most the region less
        # the sleep (plus the timer's resolution), whatever else ran on the machine.
        self.assertAlmostEqual(wall[1], float(m.group(2)), places=5)
        self.assertGreater(slept, 0.3 * wall[1], "the knob slept for much less than half the region")
        self.assertLessEqual(cpu[1], wall[1] - slept + 1e-3)
        self.assertLessEqual(per_rank["cpu_utilisation"][1], 1 - slept / wall[1] + 1e-3)
        self.assertEqual(check_file(out), [])

    def test_every_cpu_driver_records_utilisation_peak_memory_and_energy(self):
        drivers = compiled_cpu_drivers()
        self.assertIn("reference", drivers)
        out = os.path.join(self.tmp, "all.h5")
        self.run_dlscale("run", "-w", "mnist_fnn:width=32", "-d", ",".join(drivers), "--batch", "8",
                         "--threads", "1", "--warmup", "1", "--iterations", "3", "--peak-seconds", "0.05",
                         "--out", out)
        self.assertEqual(check_file(out), [])
        # The report's columns and its driver comparison carry the same numbers.
        report = os.path.join(os.environ["DLSCALE_SOURCE_DIR"], "results", "dlscale-report")
        text = subprocess.run([sys.executable, report, "summary", "--format", "csv", out], capture_output=True,
                              text=True, check=True).stdout
        for row in csv.DictReader(io.StringIO(text)):
            self.assertTrue(float(row["cpu_utilisation"]) > 0 and float(row["peak_pct"]) > 0, row)
            self.assertTrue(float(row["host_peak_rss_mb"]) > 0, row)
        rows = driver_rows(load_results(out).cases)
        # The driver comparison compares two drivers or more: a build with one has none.
        self.assertEqual(sorted(r["driver"] for r in rows), sorted(drivers) if len(drivers) > 1 else [])
        self.assertTrue(all(r["peak_pct"] > 0 for r in rows))
        with h5py.File(out, "r") as f:
            rates = f["peak/0000/rates"][()]
            self.assertEqual(sorted({r.decode() for r in rates["driver"][rates["kind"] == b"gemm"]}), sorted(drivers))
            self.assertEqual(sorted(set(rates["rank"])), [0, 1])
            self.assertIn(b"stream", set(rates["kind"]))
            for name in f["cases"]:
                case = f["cases"][name]
                a, s = case.attrs, dict(case["summary"].attrs)
                with self.subTest(driver=a["driver"]):
                    self.assertEqual(a["status"], "ok", a["message"])
                    self.assertTrue(0 < s["cpu_utilisation"] and 0 < s["busy_cores"])
                    self.assertTrue(math.isfinite(s["peak_flops"]) and s["peak_flops"] > 0)
                    self.assertAlmostEqual(s["peak_share"], s["achieved_flops"] / s["peak_flops"])
                    # A share above the peak always carries its reason, and only such a share.
                    self.assertEqual(bool(s["peak_share_note"]), s["peak_share"] > 1, s["peak_share_note"])
                    self.assertIn("/peak/0000 of this file", case["utilisation"].attrs["peak"])
                    self.assertTrue(np.all(case["memory"]["host_peak_rss_bytes"] > 0))
                    per_rank = case["utilisation/per_rank"][()]
                    for value, source in (("cpu_energy_j", "cpu_energy_source"), ("gpu_energy_j", "gpu_source")):
                        for v, why in zip(per_rank[value], per_rank[source]):
                            why = why.decode()
                            # Measured, or NaN with the reason; never a silent zero.
                            self.assertTrue(why.startswith("unavailable: ") if math.isnan(v) else v >= 0, why)
                    self.assertEqual(per_rank["gpu_source"][0].decode(), "unavailable: a CPU case has no GPU")
                    self.assertTrue(np.all(np.isnan(per_rank["gpu_utilisation_pct"])))
                    energy = case["utilisation"].attrs["energy"]
                    if math.isnan(s["energy_j_per_sample"]):
                        self.assertTrue(energy.startswith("unavailable: "), energy)
                    else:
                        self.assertAlmostEqual(s["energy_j_per_sample"] * a["global_batch"], s["energy_j_per_step"])

    @needs_drivers("onednn")
    def test_peak_file_reused_and_skipped(self):
        peak = os.path.join(self.tmp, "peak.h5")
        proc = self.run_dlscale("peak", "-d", "reference,onednn", "--threads", "1", "--precision", "fp32",
                                "--seconds", "0.05", "--out", peak, ranks=1)
        self.assertIn("gemm   reference", proc.stdout)
        out = os.path.join(self.tmp, "reuse.h5")
        self.run_dlscale("run", "-w", "mnist_fnn:width=16", "-d", "reference", "--threads", "1", "--batch", "4",
                         "--warmup", "1", "--iterations", "2", "--peak", peak, "--out", out)
        with h5py.File(peak, "r") as f:
            rates = f["peak/0000/rates"][()]
            ref = rates[(rates["driver"] == b"reference") & (rates["kind"] == b"gemm")]
            self.assertEqual(len(ref), 1)  # one rank measured
        with h5py.File(out, "r") as f:
            self.assertNotIn("peak", f)  # nothing measured in this job
            case = f["cases/0000"]
            self.assertIn(f"/peak/0000 of {peak}", case["utilisation"].attrs["peak"])
            # Two ranks, one row: rank 0's stands for both.
            self.assertAlmostEqual(case["summary"].attrs["peak_flops"], 2 * ref["rate"][0])
        skipped = os.path.join(self.tmp, "skip.h5")
        self.run_dlscale("run", "-w", "mnist_fnn:width=16", "-d", "reference", "--batch", "4", "--warmup", "1",
                         "--iterations", "2", "--peak", "skip", "--out", skipped, ranks=1)
        with h5py.File(skipped, "r") as f:
            case = f["cases/0000"]
            self.assertTrue(math.isnan(case["summary"].attrs["peak_share"]))
            self.assertTrue(case["utilisation"].attrs["peak"].startswith("unavailable: --peak skip"))


if __name__ == "__main__":
    unittest.main()
