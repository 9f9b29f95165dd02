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
    names: list = None       # each row's name: "rank 3 (h)", or "h: ranks 8-15" (grouped_events)
    hosts: list = None       # each row's host (its first rank's)
    case_ranks: int = 0      # the case's ranks, which rows may group

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


def case_events(case, hosts=None):
    """Every event of every rank and timed iteration of `case`, one row per rank (None without a
    timeline); `hosts`: each case rank's host, for the rows' names."""
    if not has_timeline(case):
        return None
    tl, phases, steps = case.timeline, case.phase_time_s, case.iter_time_s
    ranks, iterations = steps.shape
    hosts = list(hosts) if hosts is not None else [""] * ranks
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
    return CaseEvents(ranks, iterations, events, flows, tl.bound_s, tl.drift_s, t0,
                      names=[f"rank {r} ({h})" if h else f"rank {r}" for r, h in enumerate(hosts)], hosts=hosts,
                      case_ranks=ranks)


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


# A timeline of more ranks than this shows hosts, not ranks: one row per host (or per run of
# consecutive hosts, at most ROW_LIMIT rows), so that Perfetto, Vampir and a figure stay usable
# at thousands of ranks. `dlscale-report trace --per-rank` still writes every rank's own file.
ROW_LIMIT = 256


def _rank_list(ranks):
    """"0-7", "3", "0-3,8-11": a sorted list of ranks, runs as ranges."""
    out, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        out.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return ",".join(out)


def host_rows(hosts, limit=ROW_LIMIT):
    """The rows of a timeline of ranks on `hosts` (each case rank's host, "" where unknown):
    (name, [case ranks]) per row. One rank a row up to `limit` ranks; beyond, one host a row, its
    ranks together, and beyond `limit` hosts consecutive hosts (in first-rank order) shared out
    evenly over `limit` rows."""
    if len(hosts) <= limit:
        return [(f"rank {r} ({h})" if h else f"rank {r}", [r]) for r, h in enumerate(hosts)]
    by_host = {}
    for r, h in enumerate(hosts):
        by_host.setdefault(h, []).append(r)
    groups = list(by_host.items())
    if len(groups) <= limit:
        return [(f"{h or 'host'}: ranks {_rank_list(rs)}", rs) for h, rs in groups]
    rows = []
    for k in range(limit):
        part = groups[len(groups) * k // limit:len(groups) * (k + 1) // limit]
        ranks = sorted(r for _, rs in part for r in rs)
        names = part[0][0] if len(part) == 1 else f"{part[0][0]}..{part[-1][0]} ({len(part)} hosts)"
        rows.append((f"{names}: ranks {_rank_list(ranks)}", ranks))
    return rows


def grouped_events(case, rows, hosts):
    """The timeline of `case` with one row per element of `rows` ((name, [case ranks]), from
    host_rows), each row the envelope of its ranks: a step from the first of its ranks' starts to
    the last of their ends (args: the slowest rank and the spread), in it the phases at the median
    of its ranks' times, one after the other; on the communication lane each bucket's reduction
    from the first start to the last end of its ranks'. No flows or waits: those are a rank's.
    Events carry the row's index as their `rank`; CaseEvents.names has the rows' names, and
    CaseEvents.hosts the host of each row's first rank."""
    tl, phases, steps = case.timeline, case.phase_time_s, case.iter_time_s
    ranks, iterations = steps.shape
    starts = np.stack([tl.on_rank0(r, tl.step_start_s[r]) for r in range(ranks)])   # rank 0's clock
    t0 = float(starts.min())
    starts = starts - t0
    ends = starts + steps
    bucketed = ranks > 1 and tl.bucket_reduction_s is not None and tl.bucket_ready_s is not None
    if bucketed:
        red = tl.bucket_reduction_s[:, :, ::-1, :] + starts[:, :, None, None]   # reduction order
    elif ranks > 1:
        backward_end = starts + phases[:, :, 0] + phases[:, :, 1]
        red = np.stack([backward_end, backward_end + phases[:, :, 2]], axis=2)[:, :, None, :]
    events = []
    for row, (_, members) in enumerate(rows):
        m = np.asarray(members)
        first, last = starts[m].min(axis=0), ends[m].max(axis=0)                 # [iterations]
        slowest = m[np.argmax(steps[m], axis=0)]
        median_phase = np.median(phases[m], axis=0)                              # [iterations, 4]
        median_step = np.median(steps[m], axis=0)
        if ranks > 1:
            red_first, red_last = red[m, :, :, 0].min(axis=0), red[m, :, :, 1].max(axis=0)  # [iterations, buckets]
        for i in range(iterations):
            s = float(first[i])
            events.append(Event(row, i, COMPUTE, f"step {i + 1}", s, float(last[i]) - s,
                                {"ranks": len(m), "slowest_rank": int(slowest[i]),
                                 "median_step_ms": round(float(median_step[i]) * 1e3, 3),
                                 "spread_ms": round((float(last[i]) - s - float(steps[m, i].min())) * 1e3, 3)}))
            begin = s
            for k, name in enumerate(PHASE_EVENTS):
                events.append(Event(row, i, COMPUTE, name, begin, float(median_phase[i, k]), {"median_of_ranks": len(m)}))
                begin += float(median_phase[i, k])
            if ranks > 1:
                buckets = red_first.shape[1]
                for b in range(buckets):
                    name = f"bucket {b + 1} of {buckets}" if bucketed else REDUCTION
                    start = float(red_first[i, b])
                    events.append(Event(row, i, COMMUNICATION, name, start, float(red_last[i, b]) - start,
                                        {"ranks": len(m)}))
    events.sort(key=lambda e: (e.rank, LANES.index(e.lane), e.start_s, -e.dur_s))
    return CaseEvents(len(rows), iterations, events, [], tl.bound_s, tl.drift_s, t0,
                      names=[name for name, _ in rows], hosts=[hosts[members[0]] for _, members in rows],
                      case_ranks=ranks)


def timeline_events(case, hosts, limit=ROW_LIMIT):
    """The events of `case`'s timeline as traces and figures show them: one row per rank up to
    `limit` ranks, else per host (host_rows); None without a timeline."""
    if not has_timeline(case):
        return None
    if case.iter_time_s.shape[0] <= limit:
        return case_events(case, hosts)
    return grouped_events(case, host_rows(hosts, limit), hosts)
