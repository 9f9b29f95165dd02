"""A results file of 2,048 ranks on 512 hosts (4 to a host), one --phases case of 20 steps,
written through dlscale's own writer (dlscale_synthetic_results), read back by every tool that
takes it: `summary` and `check` see every rank, `trace` writes 256 rows of two hosts each (and says
so), the HTML report draws the case's timeline by host, and dlscale-project simulates it.

CTest sets DLSCALE_BIN, DLSCALE_SOURCE_DIR, DLSCALE_SYNTHETIC_RESULTS and PYTHONPATH.
"""

import csv
import io
import json
import os
import subprocess
import sys
import unittest

import h5py

import dlscale_test
from dlscale_test import Workdir

RANKS, ITERATIONS, PER_HOST = 2048, 20, 4
REPORT = os.path.join(dlscale_test.SOURCE, "results", "dlscale-report")
PROJECT = os.path.join(os.path.dirname(dlscale_test.DLSCALE), "dlscale-project")


def tool(args, timeout=600):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


class ManyRanksFile(Workdir):
    def setUp(self):
        super().setUp()
        self.file = self.path("many.h5")
        proc = tool([os.environ["DLSCALE_SYNTHETIC_RESULTS"], self.file, str(RANKS), str(ITERATIONS), str(PER_HOST)])
        self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_every_tool_reads_it(self):
        with h5py.File(self.file, "r") as f:
            self.assertEqual(f["cases/0000/iter_time_s"].shape, (RANKS, ITERATIONS))
            self.assertEqual(len(f["system/ranks"]), RANKS)

        summary = tool([sys.executable, REPORT, "summary", "--format", "csv", self.file])
        self.assertEqual(summary.returncode, 0, summary.stderr)
        (row,) = list(csv.DictReader(io.StringIO(summary.stdout)))
        self.assertEqual(int(row["ranks"]), RANKS)
        check = tool([sys.executable, REPORT, "check", self.file])
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)

        trace = tool([sys.executable, REPORT, "trace", self.file, "-o", self.path("trace")])
        self.assertEqual(trace.returncode, 0, trace.stderr)
        self.assertIn(f"{RANKS} ranks shown as 256 rows of hosts", trace.stderr)
        with open(os.path.join(self.path("trace"), "case-0000.json")) as f:
            doc = json.load(f)
        self.assertEqual(doc["otherData"]["layout"], "host")
        self.assertEqual(doc["distributedInfo"]["world_size"], RANKS)
        names = [e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
        self.assertEqual(len(names), 256)
        self.assertEqual(names[0], "node00000..node00001 (2 hosts): ranks 0-7")
        steps = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["name"].startswith("step ")]
        self.assertEqual(len(steps), 256 * ITERATIONS)
        self.assertTrue(all(e["args"]["ranks"] == 2 * PER_HOST for e in steps))

        report = tool([sys.executable, REPORT, "report", self.file, "-o", self.path("html")])
        self.assertEqual(report.returncode, 0, report.stderr)
        with open(os.path.join(self.path("html"), "index.html"), encoding="utf-8") as f:
            page = f.read()
        self.assertIn("timeline_0000.png", page)

        if not os.path.exists(PROJECT):
            self.skipTest("dlscale-project not built (no SimGrid)")
        project = tool([PROJECT, self.file, "--case", "0000", "--platform", "cpu-2socket-100Gbps-nic",
                        "--ranks", "2048,4096"])
        self.assertEqual(project.returncode, 0, project.stderr)


if __name__ == "__main__":
    unittest.main()
