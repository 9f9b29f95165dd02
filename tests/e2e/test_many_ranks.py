"""dlscale at 32 real ranks (oversubscribed: 16 per core on a 2-core machine), with the timeline
on: the case runs on every rank, its file holds every rank's rows, and the ranks, all on one host
and so on one clock, take rank 0's clock exactly (offset 0, bound 0) instead of each measuring it
in turn. dlscale-report reads the file back (summary, trace).

CTest sets DLSCALE_BIN, MPIEXEC, DLSCALE_SOURCE_DIR and PYTHONPATH (tests/README.md).
"""

import json
import os
import subprocess
import sys
import unittest

import h5py

import dlscale_test
from dlscale_test import Workdir

RANKS = 32
REPORT = os.path.join(dlscale_test.SOURCE, "results", "dlscale-report")


class ManyRanks(Workdir):
    def test_32_ranks_with_the_timeline(self):
        out = self.path("many.h5")
        # One thread per rank; the float64 reference driver, which loads no backend library in
        # each of the 32 processes; no peaks (each rank would measure its own, 16 to a core).
        proc = dlscale_test.dlscale(["run", "-w", "mnist_fnn:width=8", "-d", "reference", "--batch", "2",
                                     "--ranks", str(RANKS), "--threads", "1", "--warmup", "1", "--iterations", "2",
                                     "--phases", "--bucket-mb", "0.001", "--peak", "skip", "--format", "json", "--out", out],
                                    ranks=RANKS, timeout=900)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        case = json.loads(proc.stdout.splitlines()[0])
        # The 32 ranks share this machine's CPUs: one warning for them all, not one per pair.
        shared = [line for line in proc.stderr.splitlines() if "share CPUs" in line]
        self.assertEqual(len(shared), 1, shared[:3])
        self.assertIn(f"ranks 0-{RANKS - 1} on ", shared[0])
        self.assertEqual((case["status"], case["ranks"]), ("ok", RANKS))
        with h5py.File(out, "r") as f:
            c = f["cases/0000"]
            self.assertEqual(c.attrs["status"], "ok")
            self.assertEqual(c["iter_time_s"].shape, (RANKS, 2))
            self.assertEqual(len(f["system/ranks"]), RANKS)
            timeline = c["timeline"]
            self.assertEqual(timeline["clock_offset_s"].shape, (RANKS, 2))
            self.assertTrue((timeline["clock_offset_s"][()] == 0).all())
            self.assertTrue((timeline["clock_bound_s"][()] == 0).all())
            self.assertEqual(timeline["step_start_s"].shape, (RANKS, 2))
        summary = subprocess.run([sys.executable, REPORT, "summary", "--format", "csv", out], capture_output=True,
                                 text=True, timeout=300)
        self.assertEqual(summary.returncode, 0, summary.stderr)
        self.assertIn("mnist_fnn:width=8", summary.stdout)
        trace = subprocess.run([sys.executable, REPORT, "trace", out, "-o", self.path("trace")], capture_output=True,
                               text=True, timeout=300)
        self.assertEqual(trace.returncode, 0, trace.stderr)
        with open(os.path.join(self.path("trace"), "case-0000.json")) as f:
            doc = json.load(f)
        pids = {e["pid"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
        self.assertEqual(len(pids), RANKS)
        self.assertEqual(doc["otherData"]["clock_bound_us"], 0)


if __name__ == "__main__":
    unittest.main()
