"""Every rank's timed steps on one clock: the events of a timeline (docs/timelines.md).

With --phases dlscale records, per rank and timed step, the step's start on the host's monotonic
clock (timeline/step_start_s), its phase times (phase_time_s), when each gradient bucket was
handed to the reduction (bucket_start_s) and when that reduction started and ended on the rank
(timeline/bucket_reduction_s), and each rank's clock offset to the case's rank 0, measured by
ping-pong before and after the timed steps (timeline/clock_*). case_events() puts all of it on
rank 0's clock, the offset interpolated linearly between the two measurements, in seconds from
the earliest step start of the case:

  compute lane        step N, and in it forward, backward, all-reduce (exposed: from the end of
                      backward until the gradients were averaged), update
  communication lane  each bucket's reduction as this rank saw it (one "all-reduce" without
                      buckets: the exposed all-reduce), and in it the wait for the slowest rank:
                      from the start of the reduction until the last rank had that bucket ready,
                      which no rank's reduction can finish before
  flows               from a bucket's ready point on the compute lane to its reduction

trace.py writes them as Chrome trace-event JSON and OTF2; plots.timeline_plot draws them.
"""

from dataclasses import dataclass, field

import numpy as np

# /cases/NNNN/timeline's data sets, in the writer's order (suite/record/case_fields.cpp; the
# schema test compares the two).
DATASETS = ("step_start_s", "bucket_reduction_s", "clock_at_s", "clock_offset_s", "clock_bound_s")

COMPUTE, COMMUNICATION = "compute", "communication"
LANES = (COMPUTE, COMMUNICATION)
# The compute lane's events, in phase_time_s order.
PHASE_EVENTS = ("forward", "backward", "all-reduce (exposed)", "update")
REDUCTION, WAIT = "all-reduce", "wait"


@dataclass
class Timeline:
    """/cases/NNNN/timeline as read (schema.py), with the case's bucket_start_s."""

    step_start_s: np.ndarray          # [ranks, iterations]: each rank's own clock
    clock_at_s: np.ndarray            # [ranks, 2]: when each offset was measured (own clock)
    clock_offset_s: np.ndarray        # [ranks, 2]: add to the own clock to get rank 0's
    clock_bound_s: np.ndarray         # [ranks, 2]: each offset's error bound either way
    bucket_ready_s: np.ndarray = None      # [ranks, iterations, buckets] from the step start
    bucket_reduction_s: np.ndarray = None  # [ranks, iterations, buckets, 2] from the step start

    def on_rank0(self, rank, t):
        """Rank `rank`'s clock reading(s) `t` on rank 0's clock: the offset interpolated between
        the two measurements (constant when they coincide)."""
        (a0, a1), (o0, o1) = self.clock_at_s[rank], self.clock_offset_s[rank]
        slope = (o1 - o0) / (a1 - a0) if a1 != a0 else 0.0
        return t + o0 + slope * (np.asarray(t) - a0)

    @property
    def bound_s(self):
        """The largest offset error bound of any rank."""
        return float(np.max(self.clock_bound_s))

    @property
    def drift_s(self):
        """How far any rank's offset moved between the two measurements."""
        return float(np.max(np.abs(self.clock_offset_s[:, 1] - self.clock_offset_s[:, 0])))


@dataclass
class Event:
    """One slice of a lane: seconds from the case's earliest step start, on rank 0's clock."""

    rank: int
    iteration: int           # 0-based timed iteration
    lane: str                # COMPUTE or COMMUNICATION
    name: str
    start_s: float
    dur_s: float
    args: dict = field(default_factory=dict)

    @property
    def end_s(self):
        return self.start_s + self.dur_s


@dataclass
class Flow:
    """A bucket's ready point (compute lane) to the start of its reduction (communication)."""

    rank: int
    iteration: int
    bucket: int              # reduction order, 0 first
    ready_s: float
    reduction_start_s: float


@dataclass
class CaseEvents:
    ranks: int
    iterations: int
    events: list
    flows: list
    bound_s: float           # the clock offsets' largest error bound
    drift_s: float           # how far an offset moved over the timed steps
    t0: float                # the earliest step start, rank 0's clock (seconds)

    def of_iteration(self, iteration):
        """The events and flows of one timed iteration."""
        return ([e for e in self.events if e.iteration == iteration],
                [f for f in self.flows if f.iteration == iteration])


def has_timeline(case):
    """Whether `case` recorded a timeline (--phases, a newer dlscale, a case that trained)."""
    return case.ok and getattr(case, "timeline", None) is not None and case.phase_time_s is not None


def median_iteration(case):
    """The timed iteration whose step (the slowest rank's) is the median one: the lower middle."""
    slowest = np.max(case.iter_time_s, axis=0)
    order = np.argsort(slowest, kind="stable")
    return int(order[(len(order) - 1) // 2])


def case_events(case):
    """Every event of every rank and timed iteration of `case` (None without a timeline)."""
    if not has_timeline(case):
        return None
    tl, phases, steps = case.timeline, case.phase_time_s, case.iter_time_s
    ranks, iterations = steps.shape
    starts = np.stack([tl.on_rank0(r, tl.step_start_s[r]) for r in range(ranks)])
    t0 = float(starts.min())
    starts = starts - t0
    ends = np.cumsum(phases, axis=2) + starts[:, :, None]      # each phase's end
    events, flows = [], []
    for r in range(ranks):
        for i in range(iterations):
            s = float(starts[r, i])
            events.append(Event(r, i, COMPUTE, f"step {i + 1}", s, float(steps[r, i])))
            begin = s
            for k, name in enumerate(PHASE_EVENTS):
                events.append(Event(r, i, COMPUTE, name, begin, float(phases[r, i, k])))
                begin = float(ends[r, i, k])
    if ranks > 1:
        _reductions(tl, starts, ends, events, flows)
    events.sort(key=lambda e: (e.rank, LANES.index(e.lane), e.start_s, -e.dur_s))
    return CaseEvents(ranks, iterations, events, flows, tl.bound_s, tl.drift_s, t0)


def _reductions(tl, starts, ends, events, flows):
    """The communication lane: each bucket's reduction and its wait for the slowest rank; one
    reduction, the exposed all-reduce, where the case had no buckets."""
    ranks, iterations = starts.shape
    bucketed = tl.bucket_reduction_s is not None and tl.bucket_ready_s is not None
    if bucketed:
        # Buffer order in the file; reduced from the last bucket to the first.
        ready = tl.bucket_ready_s[:, :, ::-1] + starts[:, :, None]
        red = tl.bucket_reduction_s[:, :, ::-1, :] + starts[:, :, None, None]
    else:
        backward_end, reduced = ends[:, :, 1], ends[:, :, 2]
        ready = backward_end[:, :, None]
        red = np.stack([backward_end, reduced], axis=2)[:, :, None, :]
    buckets = ready.shape[2]
    last_ready = ready.max(axis=0)          # [iterations, buckets]
    slowest = ready.argmax(axis=0)
    for r in range(ranks):
        for i in range(iterations):
            for b in range(buckets):
                start, end = float(red[r, i, b, 0]), float(red[r, i, b, 1])
                name = f"bucket {b + 1} of {buckets}" if bucketed else REDUCTION
                events.append(Event(r, i, COMMUNICATION, name, start, end - start,
                                    {"ready_ms": round((float(ready[r, i, b]) - float(starts[r, i])) * 1e3, 3)}))
                if bucketed:
                    flows.append(Flow(r, i, b, float(ready[r, i, b]), start))
                # Until the last rank had the bucket ready no rank can have its sum.
                wait_end = min(end, float(last_ready[i, b]))
                if int(slowest[i, b]) != r and wait_end > start:
                    events.append(Event(r, i, COMMUNICATION, f"{WAIT} for rank {int(slowest[i, b])}", start,
                                        wait_end - start))
