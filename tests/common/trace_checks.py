"""Checks of `dlscale-report trace` output shared by the report and cluster tests: the Chrome
trace-event format, the timeline's structure against the results file, and the OTF2 archive read
back by otf2-print."""

import collections
import re
import shutil
import subprocess

# The trace-event format (Chrome's "Trace Event Format" document): the fields each phase needs.
_NEEDS = {"X": ("name", "ph", "pid", "tid", "ts", "dur"), "M": ("name", "ph", "pid", "args"),
          "s": ("name", "ph", "pid", "tid", "ts", "id", "cat"), "f": ("name", "ph", "pid", "tid", "ts", "id", "cat")}
_METADATA = {"process_name", "process_sort_index", "thread_name", "thread_sort_index", "process_labels"}
LANES = ("compute", "communication")
PHASES = ("forward", "backward", "all-reduce (exposed)", "update")


def validate_trace_format(test, doc):
    """`doc` is a trace-event JSON object document: traceEvents, each event with the fields of
    its phase and the right types, metadata events named as the format defines, every flow
    start paired with one end of the same id and category."""
    test.assertIsInstance(doc, dict)
    test.assertIsInstance(doc.get("traceEvents"), list)
    test.assertIn(doc.get("displayTimeUnit", "ms"), ("ms", "ns"))
    flows = collections.defaultdict(list)
    for e in doc["traceEvents"]:
        test.assertIn(e.get("ph"), _NEEDS, e)
        for key in _NEEDS[e["ph"]]:
            test.assertIn(key, e, e)
        test.assertIsInstance(e["name"], str)
        test.assertIsInstance(e["pid"], int)
        if e["ph"] == "M":
            test.assertIn(e["name"], _METADATA, e)
            test.assertIsInstance(e["args"], dict)
            continue
        test.assertIsInstance(e["tid"], int)
        test.assertIsInstance(e["ts"], (int, float))
        if e["ph"] == "X":
            test.assertIsInstance(e["dur"], (int, float))
            test.assertGreaterEqual(e["dur"], 0, e)
        else:
            flows[(e["cat"], e["id"])].append(e)
    for key, pair in flows.items():
        test.assertEqual(sorted(e["ph"] for e in pair), ["f", "s"], key)
        end = next(e for e in pair if e["ph"] == "f")
        test.assertEqual(end.get("bp"), "e", end)
    info = doc["distributedInfo"]
    test.assertIsInstance(info["rank"], int)
    test.assertIsInstance(info["world_size"], int)
    test.assertIn(info["backend"], ("mpi", "nccl"))


def slices(doc):
    """{(rank, lane): [X events]} in time order."""
    out = collections.defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            out[(e["pid"], LANES[e["tid"]])].append(e)
    for events in out.values():
        events.sort(key=lambda e: (e["ts"], -e["dur"]))
    return out


def check_timeline(test, doc, phase_time_s, eps_us=2.0):
    """Per rank and iteration: the phases nest inside their step and add up to it and to the
    recorded phase times (phase_time_s [ranks, iterations, 4], s) within 1%; every reduction and
    wait lies inside its step; no reduction starts before its bucket's ready point (the flows).
    Returns the number of reductions seen per rank and iteration."""
    lanes = slices(doc)
    ranks, iterations, _ = phase_time_s.shape
    reductions = collections.Counter()
    for r in range(ranks):
        steps = {e["args"]["iteration"]: e for e in lanes[(r, "compute")] if e["name"].startswith("step ")}
        test.assertEqual(sorted(steps), list(range(1, iterations + 1)), f"rank {r}")
        for it, step in steps.items():
            lo, hi = step["ts"] - eps_us, step["ts"] + step["dur"] + eps_us
            phases = {e["name"]: e for e in lanes[(r, "compute")]
                      if e["args"]["iteration"] == it and e["name"] in PHASES}
            test.assertEqual(sorted(phases), sorted(PHASES), f"rank {r} iteration {it}")
            for k, name in enumerate(PHASES):
                e = phases[name]
                test.assertTrue(lo <= e["ts"] and e["ts"] + e["dur"] <= hi, (r, it, e, step))
                recorded = phase_time_s[r, it - 1, k] * 1e6
                test.assertLessEqual(abs(e["dur"] - recorded), 0.01 * recorded + eps_us, (r, it, name))
            total = sum(phases[n]["dur"] for n in PHASES)
            test.assertLessEqual(abs(total - step["dur"]), 0.01 * step["dur"] + eps_us, (r, it))
            for e in lanes[(r, "communication")]:
                if e["args"]["iteration"] == it:
                    test.assertTrue(lo <= e["ts"] and e["ts"] + e["dur"] <= hi, (r, it, e, step))
                    if not e["name"].startswith("wait"):
                        reductions[(r, it)] += 1
    starts = {(e["cat"], e["id"]): e for e in doc["traceEvents"] if e["ph"] == "s"}
    for e in doc["traceEvents"]:
        if e["ph"] == "f":
            ready = starts[(e["cat"], e["id"])]
            test.assertEqual(ready["pid"], e["pid"])
            test.assertGreaterEqual(e["ts"], ready["ts"], (ready, e))
    return reductions


def region_of(name):
    """The OTF2 region an event's name is an instance of (trace.py)."""
    return name.split(" ")[0] if name.startswith(("step ", "bucket ", "wait ")) else name


def otf2_print():
    """The otf2-print command (Debian 12: otf2-tools), or None where it is missing."""
    return shutil.which("otf2-print")


def check_otf2(test, doc, archive):
    """otf2-print reads `archive` (…/traces.otf2) and lists, per region, as many ENTER and LEAVE
    events as the JSON has slices of it."""
    proc = subprocess.run([otf2_print(), archive], capture_output=True, text=True, timeout=120)
    test.assertEqual(proc.returncode, 0, proc.stderr[-2000:])
    want = collections.Counter(region_of(e["name"]) for e in doc["traceEvents"] if e["ph"] == "X")
    counts = {kind: collections.Counter() for kind in ("ENTER", "LEAVE")}
    for line in proc.stdout.splitlines():
        m = re.match(r"(ENTER|LEAVE)\s.*Region:\s*\"([^\"]*)\"", line)
        if m:
            counts[m.group(1)][m.group(2)] += 1
    test.assertEqual(dict(counts["ENTER"]), dict(want), proc.stdout[:3000])
    test.assertEqual(dict(counts["LEAVE"]), dict(want))
