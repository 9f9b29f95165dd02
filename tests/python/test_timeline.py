"""Unit tests of results/dlscale_report/timeline.py: the clock correction, the events and the
waits it derives, on hand-made timelines whose answers are known."""

import os
import sys
import types
import unittest

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "results"))
from dlscale_report import timeline  # noqa: E402
from dlscale_report.timeline import COMMUNICATION, COMPUTE, Timeline, case_events, median_iteration  # noqa: E402


def case_of(tl, phases):
    """A case as schema.py reads it, with what case_events uses."""
    phases = np.asarray(phases, dtype=float)
    return types.SimpleNamespace(ok=True, timeline=tl, phase_time_s=phases, iter_time_s=phases.sum(axis=2))


def two_ranks(bucketed):
    """Rank 1's clock runs 100 s ahead of rank 0's (offset −100 s, bound 50 µs). One iteration:
    both ranks start at rank 0's 1000.0; rank 0 computes 3 s (forward 1, backward 2), rank 1 2 s
    (1 + 1); the all-reduce ends at 3.5 s on both; update 0.5 s."""
    phases = [[[1.0, 2.0, 0.5, 0.5]], [[1.0, 1.0, 1.5, 0.5]]]
    tl = Timeline(step_start_s=np.array([[1000.0], [1100.0]]),
                  clock_at_s=np.array([[999.0, 1005.0], [1099.0, 1105.0]]),
                  clock_offset_s=np.array([[0.0, 0.0], [-100.0, -100.0]]),
                  clock_bound_s=np.array([[0.0, 0.0], [50e-6, 40e-6]]))
    if bucketed:
        # Two buckets (buffer order): the second is reduced first. Rank 0 has it ready at 2.0 s and
        # the first at 3.0 s; rank 1 at 1.5 s and 2.0 s. Each reduction waits for rank 0.
        tl.bucket_ready_s = np.array([[[3.0, 2.0]], [[2.0, 1.5]]])
        tl.bucket_reduction_s = np.array([[[[3.0, 3.5], [2.0, 2.6]]], [[[2.6, 3.5], [1.5, 2.6]]]])
    return case_of(tl, phases)


class ClockTest(unittest.TestCase):
    def test_offset_interpolates_between_the_two_measurements(self):
        tl = Timeline(step_start_s=np.zeros((2, 1)), clock_at_s=np.array([[0.0, 0.0], [10.0, 20.0]]),
                      clock_offset_s=np.array([[0.0, 0.0], [1.0, 1.002]]), clock_bound_s=np.zeros((2, 2)))
        self.assertAlmostEqual(tl.on_rank0(1, 15.0), 16.001, places=9)
        self.assertAlmostEqual(tl.on_rank0(0, 15.0), 15.0)
        self.assertAlmostEqual(tl.drift_s, 0.002)


class EventsTest(unittest.TestCase):
    def test_buckets_on_one_clock_with_waits_for_the_slowest_rank(self):
        ce = case_events(two_ranks(bucketed=True))
        self.assertEqual((ce.ranks, ce.iterations), (2, 1))
        self.assertAlmostEqual(ce.bound_s, 50e-6)
        by = {(e.rank, e.lane, e.name): e for e in ce.events}
        # Rank 1's step, 100 s off on its own clock, starts with rank 0's.
        self.assertAlmostEqual(by[(1, COMPUTE, "step 1")].start_s, 0.0)
        self.assertAlmostEqual(by[(0, COMPUTE, "backward")].end_s, 3.0)
        self.assertAlmostEqual(by[(1, COMPUTE, "all-reduce (exposed)")].start_s, 2.0)
        # Reduction order: bucket 1 is the buffer's last.
        self.assertAlmostEqual(by[(1, COMMUNICATION, "bucket 1 of 2")].start_s, 1.5)
        self.assertAlmostEqual(by[(1, COMMUNICATION, "bucket 2 of 2")].end_s, 3.5)
        # Rank 1 waits for rank 0, the last with each bucket ready: 1.5 → 2.0, then 2.6 → 3.0.
        waits = sorted((e.start_s, e.end_s) for e in ce.events if e.name == "wait for rank 0")
        self.assertEqual(len(waits), 2)
        for (start, end), want in zip(waits, [(1.5, 2.0), (2.6, 3.0)]):
            self.assertAlmostEqual(start, want[0])
            self.assertAlmostEqual(end, want[1])
        # Rank 0 was the last: it waits for no one.
        self.assertFalse([e for e in ce.events if e.rank == 0 and e.name.startswith("wait")])
        flows = sorted((f.rank, f.bucket, f.ready_s, f.reduction_start_s) for f in ce.flows)
        self.assertEqual(flows, [(0, 0, 2.0, 2.0), (0, 1, 3.0, 3.0), (1, 0, 1.5, 1.5), (1, 1, 2.0, 2.6)])

    def test_without_buckets_the_exposed_all_reduce_waits_for_the_last_backward(self):
        ce = case_events(two_ranks(bucketed=False))
        reductions = {e.rank: e for e in ce.events if e.name == timeline.REDUCTION}
        self.assertEqual(sorted(reductions), [0, 1])
        self.assertAlmostEqual(reductions[1].start_s, 2.0)
        self.assertAlmostEqual(reductions[1].end_s, 3.5)
        wait = [e for e in ce.events if e.name == "wait for rank 0"]
        self.assertEqual(len(wait), 1)
        self.assertAlmostEqual(wait[0].end_s, 3.0)
        self.assertEqual(ce.flows, [])

    def test_one_rank_has_no_communication_lane(self):
        tl = Timeline(step_start_s=np.array([[5.0, 6.0]]), clock_at_s=np.zeros((1, 2)),
                      clock_offset_s=np.zeros((1, 2)), clock_bound_s=np.zeros((1, 2)))
        ce = case_events(case_of(tl, [[[0.2, 0.3, 0.0, 0.1], [0.2, 0.4, 0.0, 0.1]]]))
        self.assertEqual({e.lane for e in ce.events}, {COMPUTE})
        self.assertEqual(len(ce.events), 2 * 5)

    def test_median_iteration_is_the_slowest_ranks_median_step(self):
        steps = np.array([[1.0, 5.0, 3.0, 2.0], [1.5, 1.0, 1.0, 2.5]])    # slowest: 1.5, 5, 3, 2.5
        self.assertEqual(median_iteration(types.SimpleNamespace(iter_time_s=steps)), 3)


class HostRowsTest(unittest.TestCase):
    """Beyond a row limit a timeline shows hosts, each row the envelope of its ranks."""

    def test_rows_per_rank_then_per_host_then_per_run_of_hosts(self):
        hosts = ["a"] * 4 + ["b"] * 4
        self.assertEqual(timeline.host_rows(hosts, limit=8), [(f"rank {r} ({h})", [r]) for r, h in enumerate(hosts)])
        self.assertEqual(timeline.host_rows(hosts, limit=4), [("a: ranks 0-3", [0, 1, 2, 3]),
                                                              ("b: ranks 4-7", [4, 5, 6, 7])])
        six = [f"h{k}" for k in range(6) for _ in range(2)]     # 6 hosts of 2 ranks, 3 rows
        rows = timeline.host_rows(six, limit=3)
        self.assertEqual([members for _, members in rows], [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]])
        self.assertEqual(rows[0][0], "h0..h1 (2 hosts): ranks 0-3")
        # Ranks of a host need not be consecutive (mpirun --map-by node).
        self.assertEqual(timeline.host_rows(["a", "b", "a", "b"], limit=2), [("a: ranks 0,2", [0, 2]),
                                                                            ("b: ranks 1,3", [1, 3])])

    def test_a_host_row_is_the_envelope_of_its_ranks(self):
        # Both ranks start at rank 0's 1000.0 and take 4 s; phases 1+2+0.5+0.5 and 1+1+1.5+0.5.
        ce = timeline.grouped_events(two_ranks(bucketed=True), [("h: ranks 0-1", [0, 1])], ["h", "h"])
        self.assertEqual((ce.ranks, ce.case_ranks, ce.names, ce.hosts, ce.flows), (1, 2, ["h: ranks 0-1"], ["h"], []))
        compute = [(e.name, e.start_s, e.dur_s) for e in ce.events if e.lane == COMPUTE]
        expected = [("step 1", 0.0, 4.0), ("forward", 0.0, 1.0), ("backward", 1.0, 1.5),
                    ("all-reduce (exposed)", 2.5, 1.0), ("update", 3.5, 0.5)]
        for got, want in zip(compute, expected):
            self.assertEqual(got[0], want[0])
            self.assertAlmostEqual(got[1], want[1], places=9)
            self.assertAlmostEqual(got[2], want[2], places=9)
        step = next(e for e in ce.events if e.name == "step 1")
        self.assertEqual((step.args["ranks"], step.args["slowest_rank"]), (2, 0))
        # Buckets in reduction order: the second first, from the first rank's start to the last's end.
        reductions = [(e.name, round(e.start_s, 9), round(e.end_s, 9)) for e in ce.events if e.lane == COMMUNICATION]
        self.assertEqual(reductions, [("bucket 1 of 2", 1.5, 2.6), ("bucket 2 of 2", 2.6, 3.5)])

    def test_timeline_events_switches_at_the_limit(self):
        case = two_ranks(bucketed=False)
        self.assertEqual(timeline.timeline_events(case, ["h", "h"], limit=2).names, ["rank 0 (h)", "rank 1 (h)"])
        grouped = timeline.timeline_events(case, ["h", "h"], limit=1)
        self.assertEqual((grouped.names, grouped.case_ranks), (["h: ranks 0-1"], 2))
        # Without buckets the communication lane is the exposed all-reduce's envelope.
        (reduction,) = [e for e in grouped.events if e.lane == COMMUNICATION]
        self.assertEqual(reduction.name, "all-reduce")


class Otf2LimitTest(unittest.TestCase):
    def test_times_past_otf2s_timestamps_are_named_not_written(self):
        # OTF2 counts unsigned 64-bit nanoseconds (584 years): the library wrapped later times round
        # and printed an error per event on stderr; trace now writes no archive and says why.
        from dlscale_report import trace
        case = two_ranks(bucketed=True)
        self.assertIsNone(trace._beyond_otf2(timeline.timeline_events(case, ["h", "h"])))
        case.phase_time_s = case.phase_time_s * 1e10
        case.iter_time_s = case.phase_time_s.sum(axis=2)
        self.assertIn("64-bit nanosecond", trace._beyond_otf2(timeline.timeline_events(case, ["h", "h"])))


if __name__ == "__main__":
    unittest.main()
