"""A case's timeline as files other tools open (docs/timelines.md).

  Chrome trace-event JSON   Perfetto (ui.perfetto.dev) and chrome://tracing: one process per
                            rank named by rank and host, a thread per lane (compute,
                            communication), complete ("X") events, flow arrows from each bucket's
                            ready point to its reduction; distributedInfo at the top level, as
                            PyTorch's profiler writes it. --per-rank writes one file per rank,
                            each with its own distributedInfo rank, which is what Holistic Trace
                            Analysis reads (a folder of per-rank traces).
  OTF2 archive              Vampir and the Score-P tools (otf2-print): a location group per rank
                            under its host, a location per lane, the same regions as enter/leave
                            events; written with python3-otf2, skipped with one line without it.

Timestamps: microseconds (JSON) or nanoseconds (OTF2) from the case's earliest step start, on the
case's rank 0's clock (timeline.py).
"""

import json
import os

from .timeline import COMMUNICATION, COMPUTE, LANES, case_events

TRACE_FORMAT = "dlscale timeline"
OTF2_PACKAGE = "python3-otf2"


def _us(seconds):
    return round(seconds * 1e6, 3)


def _process_name(rank, host):
    return f"rank {rank} ({host})" if host else f"rank {rank}"


def chrome_trace(case, hosts, backend, ce=None, rank=None):
    """The Chrome trace-event document of `case` (all ranks, or only `rank`); `hosts`: the host of
    each case rank."""
    ce = ce or case_events(case)
    ranks = range(ce.ranks) if rank is None else [rank]
    events = []
    for r in ranks:
        events.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0,
                       "args": {"name": _process_name(r, hosts[r])}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0, "args": {"sort_index": r}})
        for tid, lane in enumerate(LANES):
            events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid, "args": {"name": lane}})
    for e in ce.events:
        if e.rank in ranks:
            events.append({"ph": "X", "name": e.name, "cat": e.lane, "pid": e.rank, "tid": LANES.index(e.lane),
                           "ts": _us(e.start_s), "dur": _us(e.dur_s),
                           "args": {"iteration": e.iteration + 1, **e.args}})
    for n, f in enumerate(ce.flows):
        if f.rank in ranks:
            common = {"name": "bucket ready", "cat": "bucket", "id": n, "pid": f.rank}
            events.append({**common, "ph": "s", "tid": LANES.index(COMPUTE), "ts": _us(f.ready_s)})
            events.append({**common, "ph": "f", "bp": "e", "tid": LANES.index(COMMUNICATION),
                           "ts": _us(f.reduction_start_s)})
    info = {"backend": backend, "rank": 0 if rank is None else rank, "world_size": ce.ranks}
    if rank is None:
        info["ranks"] = list(range(ce.ranks))
    return {"traceEvents": events, "displayTimeUnit": "ms", "distributedInfo": info,
            "otherData": {"format": TRACE_FORMAT, "file": case.file, "case": case.name,
                          "workload": case.attrs.get("workload"), "driver": case.attrs.get("driver"),
                          "bucket_mb": case.attrs.get("bucket_mb"), "hosts": sorted(set(hosts)),
                          "clock": "case rank 0's monotonic clock; the other ranks' mapped onto it by "
                                   "ping-pong offsets",
                          "clock_bound_us": _us(ce.bound_s), "clock_drift_us": _us(ce.drift_s)}}


def otf2_missing():
    """Why no OTF2 archive can be written here (a line), or None."""
    try:
        import otf2  # noqa: F401
    except ImportError:
        return f"OTF2 archives need the Python module otf2 (Debian 12: {OTF2_PACKAGE})"
    return None


def write_otf2(case, hosts, path, ce=None):
    """The OTF2 archive of `case` at `path` (a folder, with traces.otf2 in it)."""
    import otf2
    from otf2.enums import LocationType
    ce = ce or case_events(case)
    os.makedirs(path, exist_ok=True)
    with otf2.writer.open(path, timer_resolution=1_000_000_000) as archive:
        defs = archive.definitions
        machine = defs.system_tree_node("machine")
        nodes = {h: defs.system_tree_node(h or "host", parent=machine) for h in dict.fromkeys(hosts)}
        regions = {}
        for r in range(ce.ranks):
            group = defs.location_group(_process_name(r, hosts[r]), system_tree_parent=nodes[hosts[r]])
            for lane in LANES:
                mine = [e for e in ce.events if e.rank == r and e.lane == lane]
                if not mine:
                    continue
                writer = archive.event_writer(lane, group=group, type=LocationType.CPU_THREAD)
                _write_lane(writer, mine, regions, defs)
    return path


def _write_lane(writer, events, regions, defs):
    """Enter and leave events of one lane, nested and in time order (events: sorted by start,
    longest first among equals, as case_events gives them)."""
    open_ = []
    ns = lambda s: int(round(s * 1e9))    # noqa: E731

    def region(name):
        # One region per kind: "step 3" and "bucket 2 of 5" are instances of "step" and "bucket".
        kind = name.split(" ")[0] if name.startswith(("step ", "bucket ", "wait ")) else name
        if kind not in regions:
            regions[kind] = defs.region(kind)
        return regions[kind]

    last = 0

    def at(seconds):
        # Never earlier than the event before: a phase's end and its step's, summed apart, can
        # differ in the last bit.
        nonlocal last
        last = max(last, ns(seconds))
        return last

    for e in events:
        while open_ and ns(open_[-1].end_s) <= ns(e.start_s):
            done = open_.pop()
            writer.leave(at(done.end_s), region(done.name))
        writer.enter(at(e.start_s), region(e.name))
        open_.append(e)
    while open_:
        done = open_.pop()
        writer.leave(at(done.end_s), region(done.name))


def write_case_traces(case, hosts, backend, outdir, per_rank=False):
    """Every file of `case`'s timeline in `outdir`: (paths written, notes)."""
    ce = case_events(case)
    stem = os.path.join(outdir, f"case-{case.name}")
    paths, notes = [], []
    path = f"{stem}.json"
    with open(path, "w") as f:
        json.dump(chrome_trace(case, hosts, backend, ce), f)
    paths.append(path)
    if per_rank:
        for r in range(ce.ranks):
            path = f"{stem}-rank-{r}.json"
            with open(path, "w") as f:
                json.dump(chrome_trace(case, hosts, backend, ce, rank=r), f)
            paths.append(path)
    missing = otf2_missing()
    if missing:
        notes.append(f"no OTF2 archive: {missing}")
    else:
        paths.append(os.path.join(write_otf2(case, hosts, f"{stem}.otf2", ce), "traces.otf2"))
    return paths, notes
