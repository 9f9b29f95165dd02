"""The conditions a case's figures carry (results/dlscale_report/conditions.py): contention, the
kernel's share and page faults, a share above the peak with its reason, in summary, compare and
the diagnosis. Small files written with h5py (test_report.write_results); the summary attributes
are what dlscale/4 records (docs/schema.md).
"""

import os
import shutil
import tempfile
import unittest

import numpy as np

from test_report import make_case, write_results

import dlscale_report as dr  # noqa: E402  (test_report put results/ on sys.path)
from dlscale_report import conditions  # noqa: E402
from dlscale_report.compare import compare_rows, compare_table  # noqa: E402
from dlscale_report.diagnosis import diagnose, diagnosis_lines  # noqa: E402
from dlscale_report.summary import case_row, format_table  # noqa: E402

CALM = {"contended": 0, "cpu_wait_share": 0.01, "cpu_steal_share": 0.0, "system_share": 0.01,
        "page_faults_per_step": 3.0, "peak_share": 0.4, "peak_share_note": ""}


def case(step_s=0.01, allocator="glibc 2.36; --malloc keep: mallopt M_MMAP_MAX=0", **summary):
    return make_case(np.full((1, 6), step_s), extra_attrs={"allocator": allocator},
                     summary_extra=dict(CALM, **summary))


class Conditions(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_conditions_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def load(self, name, cases):
        path = os.path.join(self.dir, name)
        write_results(path, cases)
        return dr.load_results(path).cases

    def test_each_condition_in_words(self):
        calm, hog, churn, kept, above = self.load("a.h5", [
            case(),
            case(contended=1, cpu_wait_share=0.48),
            case(system_share=0.34, page_faults_per_step=1.2e6, allocator="glibc 2.36; --malloc system: as set"),
            case(page_faults_per_step=27597.0),
            case(peak_share=1.24, peak_share_note="the peak was measured with 2 ranks active at once; "
                                                  "this case ran on 1")])
        self.assertEqual(conditions.case_conditions(calm), [])
        self.assertEqual(conditions.short_flags(calm), [])
        self.assertEqual(conditions.contention_text(hog), "contended: 48% of runnable time waiting for a core")
        self.assertEqual(conditions.short_flags(hog), ["contended"])
        self.assertEqual(conditions.kernel_text(churn),
                         "34% of the CPU time in the kernel, 1.2 M page faults per step: the allocator returns "
                         "memory to the OS and faults it in again every step (run with --malloc keep); see "
                         "docs/metrics.md#the-allocator")
        # Under --malloc keep freed memory stays: the faults are first touches, not churn.
        self.assertIn("memory first touched during the timed steps", conditions.kernel_text(kept))
        self.assertNotIn("returns memory to the OS", conditions.kernel_text(kept))
        self.assertEqual(conditions.above_peak_text(above), "124% of peak: the peak was measured with 2 ranks "
                                                            "active at once; this case ran on 1")
        self.assertEqual(conditions.short_flags(above), ["above peak"])
        # The summary table flags them and spells them out below it.
        text = format_table([case_row(c) for c in (calm, hog, churn, kept, above)])
        self.assertIn("  0001: contended: 48% of runnable time waiting for a core", text)
        self.assertIn("  0004: 124% of peak: the peak was measured with 2 ranks", text)
        self.assertNotIn("  0000:", text)

    def test_files_before_dlscale_4_say_nothing(self):
        old = self.load("old.h5", [make_case(np.full((1, 6), 0.01))])[0]
        self.assertEqual(conditions.case_conditions(old), [])
        self.assertFalse(conditions.contended(old))

    def test_compare_marks_a_contended_side(self):
        a = self.load("a.h5", [case(0.010)])
        b = self.load("b.h5", [case(0.013, contended=1, cpu_wait_share=0.5)])
        rows, notes = compare_rows(a, b)
        self.assertEqual((rows[0]["contended_a"], rows[0]["contended_b"]), (0, 1))
        self.assertTrue(any(n.startswith("B ") and "contended: 50% of runnable time waiting for a core" in n
                            for n in notes), notes)
        self.assertIn("ok/ok (contended: B)", compare_table(rows, notes).text())

    def test_the_diagnosis_names_contention_and_the_kernel(self):
        cases = self.load("s.h5", [case(0.010), case(0.010, contended=1, cpu_wait_share=0.3)])
        cases[1].attrs["ranks"] = 2  # a second rank count for the series, as a 2-rank job would write
        lines = diagnosis_lines(diagnose(cases))
        self.assertTrue(any("P=2: contended: 30% of runnable time waiting for a core" in line for line in lines), lines)


if __name__ == "__main__":
    unittest.main()


class AllreduceMechanism(unittest.TestCase):
    """What reduced a case's gradients (docs/schema.md, allreduce_mechanism): as recorded, and for
    files written before it was, what that dlscale did."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_allreduce_")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_recorded_and_inferred(self):
        path = os.path.join(self.dir, "m.h5")
        two = np.full((2, 6), 0.01)
        settings = "coll_tuned_use_dynamic_rules=false coll_tuned_allreduce_algorithm=ignore"
        write_results(path, [
            make_case(two, extra_attrs={"bucket_mb": 25.0, "allreduce_mechanism": "mpi_allreduce_buckets_thread",
                                        "allreduce_buckets": 5, "allreduce_segment_bytes": 65472,
                                        "mpi_allreduce_settings": settings}),
            make_case(two, extra_attrs={"bucket_mb": 25.0}),  # older: MPI_Iallreduce buckets
            make_case(two, extra_attrs={"bucket_mb": 0.0}),   # older: one MPI_Allreduce
            make_case(np.full((1, 6), 0.01)),                 # one rank: nothing reduced
        ])
        thread, old_buckets, old_plain, alone = dr.load_results(path).cases
        self.assertEqual([conditions.allreduce_mechanism(c) for c in (thread, old_buckets, old_plain, alone)],
                         ["mpi_allreduce_buckets_thread", "mpi_iallreduce_buckets", "mpi_allreduce", "none"])
        self.assertEqual(conditions.allreduce_text(thread),
                         "all-reduce: one all-reduce per bucket on a communication thread, during backward "
                         f"(5 buckets of 25 MB), ring segments of 65472 bytes; MPI's settings: {settings}")
        self.assertIn("binomial tree", conditions.allreduce_text(old_buckets))
        self.assertEqual(conditions.allreduce_text(alone), "")
        # The buckets in a few words in the summary's conditions cell; one all-reduce says nothing.
        self.assertEqual([conditions.short_flags(c) for c in (thread, old_buckets, old_plain, alone)],
                         [["buckets on a thread"], ["MPI_Iallreduce buckets"], [], []])
        self.assertEqual(case_row(thread)["allreduce_mechanism"], "mpi_allreduce_buckets_thread")
        self.assertEqual(case_row(thread)["allreduce_segment_bytes"], 65472)
