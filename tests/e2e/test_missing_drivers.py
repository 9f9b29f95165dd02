"""A build without some of dlscale's drivers (configured without LibTorch, oneDNN, Kokkos or CUDA,
as clusters build it): `dlscale list` names what it lacks, a case of a missing driver is recorded
`unsupported` beside the others, a request of nothing else is one clear error, and the default
study runs the cases it can. Skipped in a build with every driver: scripts/test.sh runs it on
the reference preset, which has none but the reference driver.

CTest sets DLSCALE_BIN, MPIEXEC, DLSCALE_SOURCE_DIR and PYTHONPATH; by hand, see tests/README.md.
"""

import os
import re
import unittest

import h5py

from dlscale_test import Workdir, dlscale, missing_drivers

SMALL = "mnist_fnn:width=16"


class DriverThisBuildLacks(Workdir):
    """A driver of dlscale's that this build was configured without (as the built-in suites name
    every CPU driver): its cases are recorded unsupported beside the others, and a request of
    nothing else is one clear error."""

    def setUp(self):
        super().setUp()
        lacking = missing_drivers()
        if not lacking:
            self.skipTest("this build has every driver")
        self.lacking = lacking[0]

    def test_its_cases_are_unsupported_and_the_others_run(self):
        out = self.path("m.h5")
        proc = dlscale(["run", "-w", SMALL, "-d", f"reference,{self.lacking}", "--device", "cpu", "--iterations", "1",
                        "--out", out])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with h5py.File(out, "r") as f:
            cases = [dict(f["cases"][n].attrs) for n in sorted(f["cases"])]
        self.assertEqual([(c["driver"], c["status"]) for c in cases], [("reference", "ok"), (self.lacking, "unsupported")])
        # (the ranks' agreed outcome names the first rank that gave it)
        self.assertRegex(cases[1]["message"],
                         rf"^rank 0: this build of dlscale has no {self.lacking} driver \(it was configured without ")

    def test_the_study_plans_every_case_and_estimates_those_it_can_run(self):
        lacking = [d for d in missing_drivers() if d in ("libtorch", "onednn", "kokkos")]
        if not lacking:
            self.skipTest("this build has every CPU driver the study names")
        proc = dlscale(["run", "--dry-run"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        planned = set(re.findall(r"^\d{4} dlscale run .* -d (\S+) ", proc.stdout, re.M))
        self.assertLessEqual({lacking[0], "reference"}, planned)
        self.assertIn(f"no rate (this build of dlscale has no {lacking[0]} driver", proc.stdout + proc.stderr)

    def test_alone_it_is_one_clear_error(self):
        self.assert_usage_error(["run", "-w", SMALL, "-d", self.lacking, "--out", self.path("a.h5")],
                                f"this build of dlscale has no {self.lacking} driver")
        self.assertFalse(os.path.exists(self.path("a.h5")))


if __name__ == "__main__":
    unittest.main()
