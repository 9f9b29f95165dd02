"""End-to-end runs of the oneDNN driver through the dlscale binary under a real mpiexec: every
catalog network at full size trains one step, and a thread sweep records what it ran with. The
results files are read back with plain h5py.

CTest sets DLSCALE_BIN, MPIEXEC and PYTHONPATH; by hand, see tests/README.md. Timings are never asserted
here (the machine is shared); bench/bench_onednn and its notes hold the timing expectations.
"""

import os
import re
import subprocess
import sys
import unittest

import h5py
import json

from catalog_runs import train_catalog
from dlscale_test import DLSCALE, Workdir, dlscale


def cases(path):
    with h5py.File(path, "r") as f:
        return [dict(f["cases"][k].attrs) for k in sorted(f["cases"])]


class OnednnEndToEnd(Workdir):
    def test_every_catalog_workload_trains_at_batch_2_on_two_ranks(self):
        software = train_catalog(self, "onednn", 2, self.path("all.h5"))
        # The driver reports its library itself, once: version with hash, ISA, threading runtime.
        self.assertRegex(software["onednn"], r"^\d+\.\d+\.\d+ \(.+\)$")
        self.assertTrue(software["onednn_isa"])
        self.assertIn(software["onednn_cpu_runtime"], ("OpenMP", "sequential"))

    def test_thread_sweep_records_each_thread_count(self):
        out = self.path("threads.h5")
        workload = "fcn5:features=2048,width=1024"
        # Unbound, so that the 2-thread case can use two cores (Open MPI binds one rank to one
        # core by default, where two threads only take turns).
        proc = dlscale(["run", "-w", workload, "-d", "onednn", "--batch", "64", "--threads", "1,2", "--warmup", "1",
                        "--iterations", "3", "--out", out], ranks=1, launcher=["--bind-to", "none"], timeout=900)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        got = cases(out)
        self.assertEqual([c["threads"] for c in got], [1, 2])
        for c in got:
            self.assertEqual(c["status"], "ok", c["message"])
            self.assertEqual(c["workload"], workload)
        # The printed summary names the thread count of each case too (t=1, t=2).
        self.assertEqual(re.findall(r" t=(\d+) ", proc.stdout), ["1", "2"])
        # For the log only (the machine may be shared): two threads should take roughly 0.55-0.7x
        # the time of one on this GEMM-bound network (see bench/onednn_fcn5.cpp).
        with h5py.File(out, "r") as f:
            medians = [f["cases"][k]["summary"].attrs["step_median_s"] for k in sorted(f["cases"])]
        sys.stderr.write(f"\nthread sweep medians: 1 thread {medians[0] * 1e3:.1f} ms, "
                         f"2 threads {medians[1] * 1e3:.1f} ms (ratio {medians[1] / medians[0]:.2f})\n")


if __name__ == "__main__":
    unittest.main()


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


class Bf16OnTheCpu(Workdir):
    """bf16 where the CPU has it, `unsupported` naming the ISA where it does not; the float64
    reference in the same matrix records `unsupported` and the rest runs. oneDNN's ISA can be
    lowered with ONEDNN_MAX_CPU_ISA, so one machine shows every kind of CPU for oneDNN."""

    WORKLOAD = "fcn5:features=64,width=32"

    def setUp(self):
        super().setUp()
        info = subprocess.run([DLSCALE, "info"], capture_output=True, text=True).stdout
        backends = re.search(r"^\s*backends\s+(.*)$", info, re.M)
        self.drivers = [d for d in ("onednn", "libtorch") if backends and d in backends.group(1).split()]

    def run_bf16(self, drivers, extra=(), env=None):
        out = self.path("bf16.h5")
        cmd = [DLSCALE, "run", "-w", self.WORKLOAD, "-d", ",".join(drivers), "--precision", "fp32,bf16", "--batch",
               "8", "--warmup", "1", "--iterations", "3", "--threads", "1", "--out", out, "--overwrite"] + list(extra)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ, **(env or {})))
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return {(c["driver"], c["precision"]): c for c in cases(out)}

    def test_native_where_the_cpu_has_it_and_the_reference_refuses(self):
        native = bool({"avx512_bf16", "amx_bf16"} & cpu_flags())
        print(f"\nthis CPU {'has' if native else 'lacks'} AVX512-BF16/AMX: checking the {'ok' if native else 'unsupported'} path")
        got = self.run_bf16(self.drivers + ["reference"])
        for d in self.drivers:
            self.assertEqual(got[(d, "fp32")]["status"], "ok")
            bf16 = got[(d, "bf16")]
            if native:
                self.assertEqual(bf16["status"], "ok", bf16["message"])
                self.assertRegex(bf16["isa"], r"bf16|BF16|amx|AMX")
            else:
                self.assertEqual(bf16["status"], "unsupported")
                self.assertIn(bf16["isa"].split(" ")[0], bf16["message"])
        if "onednn" in self.drivers:  # fp32 kernels never run on the BF16/VNNI/AMX extensions
            self.assertRegex(got[("onednn", "fp32")]["isa"], r"^(avx512_core|avx2|avx|sse41)$")
        self.assertEqual(got[("reference", "bf16")]["status"], "unsupported")
        self.assertIn("only fp32", got[("reference", "bf16")]["message"])
        self.assertEqual(got[("reference", "fp32")]["status"], "ok")

    def test_onednn_emulation_only_when_asked_and_none_below_avx512(self):
        if "onednn" not in self.drivers or "avx512bw" not in cpu_flags():
            self.skipTest("needs an AVX-512 CPU, on which oneDNN can be held to avx512_core")
        emulated = {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}
        refused = self.run_bf16(["onednn"], env=emulated)[("onednn", "bf16")]
        self.assertEqual(refused["status"], "unsupported")
        self.assertIn("avx512_core is emulated", refused["message"])
        self.assertIn("--allow-emulation", refused["message"])
        ran = self.run_bf16(["onednn"], extra=["--allow-emulation"], env=emulated)[("onednn", "bf16")]
        self.assertEqual(ran["status"], "ok", ran["message"])
        self.assertEqual(ran["isa"], "avx512_core (bf16 emulated)")
        avx2 = self.run_bf16(["onednn"], extra=["--allow-emulation"], env={"ONEDNN_MAX_CPU_ISA": "AVX2"})
        self.assertEqual(avx2[("onednn", "fp32")]["status"], "ok")
        self.assertEqual(avx2[("onednn", "bf16")]["status"], "unsupported")
        self.assertIn("no bf16 kernels for ISA avx2", avx2[("onednn", "bf16")]["message"])

    def test_report_sets_the_precisions_side_by_side(self):
        if not {"avx512_bf16", "amx_bf16"} & cpu_flags():
            self.skipTest("this CPU has no native bf16: no bf16 case runs to compare")
        self.run_bf16(self.drivers)
        report = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "results", "dlscale-report")
        path = self.path("bf16.h5")
        rows = json.loads(subprocess.run([sys.executable, report, "summary", "--format", "json", path],
                                         capture_output=True, text=True, check=True).stdout)
        self.assertTrue(all(r["isa"] for r in rows if r["driver"] == "onednn"))
        outdir = self.path("report")
        subprocess.run([sys.executable, report, "report", path, "-o", outdir], capture_output=True, check=True)
        with open(os.path.join(outdir, "precisions.csv")) as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines) - 1, len(self.drivers))  # one fp32/bf16 pair per driver
        self.assertTrue(os.path.getsize(os.path.join(outdir, "precision_loss.png")) > 0)
