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

A case of more than timeline.ROW_LIMIT ranks is shown per host in both (timeline.host_rows,
grouped_events): a process or location group per host, its steps and buckets the envelope of its
ranks', its phases their medians. --per-rank still writes each rank's own JSON file.

Timestamps: microseconds (JSON) or nanoseconds (OTF2) from the case's earliest step start, on the
case's rank 0's clock (timeline.py).
"""

import dataclasses
import json
import math
import os

from .timeline import COMMUNICATION, COMPUTE, LANES, ROW_LIMIT, case_events, timeline_events

TRACE_FORMAT = "dlscale timeline"
OTF2_PACKAGE = "python3-otf2"
OTF2_CHUNK = 256 * 1024


def _us(seconds):
    return round(seconds * 1e6, 3)


def _json_value(value):
    """A value JSON can hold: NaN and infinities (which Python would write as NaN and Infinity,
    not JSON, and which Perfetto refuses) become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _finite(*seconds):
    return all(math.isfinite(s) for s in seconds)


def chrome_trace(case, hosts, backend, ce=None, rank=None):
    """The Chrome trace-event document of `case` (every row of `ce`, timeline_events by default,
    or only `rank`'s, of the per-rank events); `hosts`: the host of each case rank."""
    ce = ce or timeline_events(case, hosts)
    rows = range(ce.ranks) if rank is None else [rank]
    wanted = set(rows)
    events = []
    for r in rows:
        events.append({"ph": "M", "name": "process_name", "pid": r, "tid": 0, "args": {"name": ce.names[r]}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": r, "tid": 0, "args": {"sort_index": r}})
        for tid, lane in enumerate(LANES):
            events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid, "args": {"name": lane}})
    # An event whose times are not finite (a damaged or overflowed record) has no place on the
    # timeline: left out, and counted in otherData.left_out_events.
    left_out = 0
    for e in ce.events:
        if e.rank in wanted and not _finite(e.start_s, e.dur_s):
            left_out += 1
        elif e.rank in wanted:
            events.append({"ph": "X", "name": e.name, "cat": e.lane, "pid": e.rank, "tid": LANES.index(e.lane),
                           "ts": _us(e.start_s), "dur": _us(e.dur_s),
                           "args": {"iteration": e.iteration + 1, **{k: _json_value(v) for k, v in e.args.items()}}})
    for n, f in enumerate(ce.flows):
        if f.rank in wanted and not _finite(f.ready_s, f.reduction_start_s):
            left_out += 1
        elif f.rank in wanted:
            common = {"name": "bucket ready", "cat": "bucket", "id": n, "pid": f.rank}
            events.append({**common, "ph": "s", "tid": LANES.index(COMPUTE), "ts": _us(f.ready_s)})
            events.append({**common, "ph": "f", "bp": "e", "tid": LANES.index(COMMUNICATION),
                           "ts": _us(f.reduction_start_s)})
    info = {"backend": backend, "rank": 0 if rank is None else rank, "world_size": ce.case_ranks}
    if rank is None:
        info["ranks"] = list(range(ce.case_ranks))
    return {"traceEvents": events, "displayTimeUnit": "ms", "distributedInfo": info,
            "otherData": {"format": TRACE_FORMAT, "file": case.file, "case": case.name,
                          "workload": case.attrs.get("workload"), "driver": case.attrs.get("driver"),
                          "bucket_mb": _json_value(case.attrs.get("bucket_mb")), "hosts": sorted(set(hosts)),
                          "layout": "rank" if ce.ranks == ce.case_ranks else "host",
                          "clock": "case rank 0's monotonic clock; the other ranks' mapped onto it by "
                                   "ping-pong offsets",
                          "clock_bound_us": _json_value(_us(ce.bound_s)),
                          "clock_drift_us": _json_value(_us(ce.drift_s)), "left_out_events": left_out}}


def otf2_missing():
    """Why no OTF2 archive can be written here (a line), or None."""
    try:
        import otf2  # noqa: F401
    except ImportError:
        return f"OTF2 archives need the Python module otf2 (Debian 12: {OTF2_PACKAGE})"
    return None


# OTF2 timestamps are unsigned 64-bit nanoseconds: 584 years from the case's first step.
OTF2_LAST_S = (2 ** 64 - 1) / 1e9


def _beyond_otf2(ce):
    """Why ce's times cannot be OTF2 timestamps (a line), or None: a time past OTF2_LAST_S, or not
    a number, which a damaged or hand-made file can hold; the library would wrap it round and
    complain on stderr for every event after it."""
    last = max((e.end_s for e in ce.events), default=0.0)
    if not all(math.isfinite(e.start_s) and math.isfinite(e.end_s) for e in ce.events) or not last < OTF2_LAST_S:
        return "its times do not fit OTF2's 64-bit nanosecond timestamps"
    return None


def write_otf2(case, hosts, path, ce=None):
    """The OTF2 archive of `case` at `path` (a folder, with traces.otf2 in it): a location group
    per row of `ce` (timeline_events by default) under its host."""
    import otf2
    from otf2.enums import LocationType
    ce = ce or timeline_events(case, hosts)
    lanes = {}                                      # (row, lane) -> its events, in ce's order
    for e in ce.events:
        lanes.setdefault((e.rank, e.lane), []).append(e)
    os.makedirs(path, exist_ok=True)
    # OTF2's smallest chunks (256 KiB): it holds a chunk of events and one of definitions per
    # location in memory, 5 MiB each by default, 2.5 GB for the 512 locations of 256 rows.
    with otf2.writer.open(path, timer_resolution=1_000_000_000, chunk_size_events=OTF2_CHUNK,
                          chunk_size_definitions=OTF2_CHUNK) as archive:
        defs = archive.definitions
        machine = defs.system_tree_node("machine")
        nodes = {h: defs.system_tree_node(h or "host", parent=machine) for h in dict.fromkeys(ce.hosts)}
        regions = {}
        for r in range(ce.ranks):
            group = defs.location_group(ce.names[r], system_tree_parent=nodes[ce.hosts[r]])
            for lane in LANES:
                if (r, lane) not in lanes:
                    continue
                writer = archive.event_writer(lane, group=group, type=LocationType.CPU_THREAD)
                _write_lane(writer, lanes[(r, lane)], regions, defs)
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
    ce = timeline_events(case, hosts)
    stem = os.path.join(outdir, f"case-{case.name}")
    paths, notes = [], []
    path = f"{stem}.json"
    doc = chrome_trace(case, hosts, backend, ce)
    with open(path, "w") as f:
        json.dump(doc, f, allow_nan=False)
    paths.append(path)
    if doc["otherData"]["left_out_events"]:
        notes.append(f"case {case.name}: {doc['otherData']['left_out_events']} event(s) whose times are not finite "
                     "(a damaged or overflowed record) left out of the JSON trace")
    if ce.ranks < ce.case_ranks:
        notes.append(f"case {case.name}: {ce.case_ranks} ranks shown as {ce.ranks} rows of hosts "
                     f"(more than {ROW_LIMIT} ranks){'' if per_rank else '; --per-rank writes each rank its own file'}")
    if per_rank:
        every = ce if ce.ranks == ce.case_ranks else case_events(case, hosts)
        events, flows = {}, {}             # each rank's, sorted out once rather than once per file
        for e in every.events:
            events.setdefault(e.rank, []).append(e)
        for fl in every.flows:
            flows.setdefault(fl.rank, []).append(fl)
        for r in range(every.ranks):
            path = f"{stem}-rank-{r}.json"
            mine = dataclasses.replace(every, events=events.get(r, []), flows=flows.get(r, []))
            with open(path, "w") as f:
                json.dump(chrome_trace(case, hosts, backend, mine, rank=r), f, allow_nan=False)
            paths.append(path)
    missing = otf2_missing() or _beyond_otf2(ce)
    if missing:
        notes.append(f"no OTF2 archive{'' if missing.startswith('OTF2') else f' of case {case.name}'}: {missing}")
    else:
        paths.append(os.path.join(write_otf2(case, hosts, f"{stem}.otf2", ce), "traces.otf2"))
    return paths, notes
