"""The rules MLPerf Training's compliance checker applies to every submission's log (the common
rules of its training rulesets: the submission fields, the run's intervals and the counts of its
keys), written for dlscale's tests: `check(lines)` returns what a log breaks, an empty list when it
keeps every rule. dlscale writes open-division research logs, so the closed division's benchmark
list is not checked."""

import json

TOKEN = ":::MLLOG "
FIELDS = ("namespace", "time_ms", "event_type", "key", "value", "metadata")
EXACTLY_ONE = ("submission_benchmark", "submission_org", "submission_division", "submission_status",
               "submission_platform", "init_start", "init_stop", "run_start", "run_stop", "train_samples",
               "eval_samples", "seed", "global_batch_size", "gradient_accumulation_steps", "opt_name",
               "opt_base_learning_rate")
AT_LEAST_ONE = ("cache_clear", "eval_start", "eval_stop", "eval_accuracy")
POINTS = ("submission_benchmark", "submission_org", "submission_division", "submission_status",
          "submission_platform", "cache_clear", "train_samples", "eval_samples", "seed", "global_batch_size",
          "gradient_accumulation_steps", "opt_name", "opt_base_learning_rate", "eval_accuracy")
STARTS = ("init_start", "run_start", "epoch_start", "block_start", "eval_start")
ENDS = ("init_stop", "run_stop", "epoch_stop", "block_stop", "eval_stop")


def parse(lines):
    """The events of a log's `:::MLLOG` lines (other lines are not the log's)."""
    return [json.loads(line[len(TOKEN):]) for line in lines if line.startswith(TOKEN)]


def check(lines):
    broken = []
    events = []
    for n, line in enumerate(lines, 1):
        if not line.startswith(TOKEN):
            continue
        try:
            e = json.loads(line[len(TOKEN):])
        except ValueError as error:
            broken.append(f"line {n}: not JSON ({error})")
            continue
        missing = [f for f in FIELDS if f not in e]
        if missing:
            broken.append(f"line {n}: lacks {', '.join(missing)}")
            continue
        if not isinstance(e["metadata"], dict) or not isinstance(e["time_ms"], (int, float)):
            broken.append(f"line {n}: metadata must be an object and time_ms a number")
        events.append(e)
    keys = [e["key"] for e in events]
    for key in EXACTLY_ONE:
        if keys.count(key) != 1:
            broken.append(f"{key}: {keys.count(key)} times, needs exactly one")
    for key in AT_LEAST_ONE:
        if keys.count(key) < 1:
            broken.append(f"{key}: missing, needs at least one")
    if not ("epoch_start" in keys or "block_start" in keys):
        broken.append("neither epoch_start nor block_start")
    times = [e["time_ms"] for e in events]
    if times != sorted(times):
        broken.append("time_ms goes backwards")
    by_key = {}
    for e in events:
        by_key.setdefault(e["key"], e)
        expected = ("POINT_IN_TIME" if e["key"] in POINTS else "INTERVAL_START" if e["key"] in STARTS
                    else "INTERVAL_END" if e["key"] in ENDS else None)
        if expected and e["event_type"] != expected:
            broken.append(f"{e['key']}: event_type {e['event_type']}, expected {expected}")
    value = lambda key: by_key[key]["value"] if key in by_key else None  # noqa: E731
    if value("submission_division") not in (None, "closed", "open"):
        broken.append(f"submission_division {value('submission_division')!r}")
    if value("submission_status") not in (None, "cloud", "onprem", "preview", "research"):
        broken.append(f"submission_status {value('submission_status')!r}")
    if "cache_clear" in by_key and value("cache_clear") is not True:
        broken.append("cache_clear must be true")
    accumulation = value("gradient_accumulation_steps")
    if "gradient_accumulation_steps" in by_key and not (isinstance(accumulation, int) and accumulation > 0):
        broken.append(f"gradient_accumulation_steps {accumulation!r}, must be a positive integer")
    # The run's order: init_start < init_stop <= run_start < every epoch and evaluation < run_stop.
    order = {k: keys.index(k) for k in ("init_start", "init_stop", "run_start", "run_stop") if k in keys}
    if len(order) == 4:
        if not order["init_start"] < order["init_stop"] < order["run_start"] < order["run_stop"]:
            broken.append("init_start, init_stop, run_start, run_stop out of order")
        if order["run_stop"] != len(keys) - 1:
            broken.append("events after run_stop")
        for i, k in enumerate(keys):
            if k in ("epoch_start", "epoch_stop", "block_start", "block_stop", "eval_start", "eval_stop",
                     "eval_accuracy") and not order["run_start"] < i < order["run_stop"]:
                broken.append(f"{k} outside run_start .. run_stop")
                break
        if by_key["run_stop"]["metadata"].get("status") not in ("success", "aborted"):
            broken.append(f"run_stop status {by_key['run_stop']['metadata'].get('status')!r}")
    for e in events:
        if e["key"] in ("epoch_start", "epoch_stop", "eval_start", "eval_stop", "eval_accuracy"):
            if "epoch_num" not in e["metadata"] and "samples_count" not in e["metadata"]:
                broken.append(f"{e['key']}: neither epoch_num nor samples_count in its metadata")
                break
    # Intervals pair up: every start is stopped before the next of its kind starts.
    for start, end in (("epoch_start", "epoch_stop"), ("eval_start", "eval_stop"), ("block_start", "block_stop")):
        depth = 0
        for k in keys:
            depth += (k == start) - (k == end)
            if depth not in (0, 1):
                broken.append(f"{start} and {end} do not pair up")
                break
        if depth != 0 and (start, end) != ("block_start", "block_stop"):
            broken.append(f"{start} left open")
    return broken
