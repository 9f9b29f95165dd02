"""Time to target at scale (docs/metrics.md, "Time to target at scale"), and the gradient noise
scale of every case that records one ("The gradient noise scale").

A time-to-target series is the accuracy cases with a target that differ only in their rank count P
and micro-batches K (--ranks, --accumulate), hence in their global batch B. Its baseline is the
smallest B (then the fewest ranks) whose repeats reached the target. Per point, over the repeats
that reached the target: T the mean time to target, S the mean steps to target, and tau = T/S the
run's own training time per step. The speedup T0/T splits exactly into

    (tau0 / tau)  x  (S0 / S)
    the hardware's   the statistical factor

each also shown as an efficiency against its ideal: the hardware's (B0/P0)/(B/P) (a step that
takes as long per sample and rank: 1 for weak scaling, P/P0 for strong), the statistics' B/B0
(steps that fall as the batch grows: P/P0 for weak scaling, 1 for strong). Beside them: the
statistical factor the baseline's noise scale predicts, (1 + B_simple/B0) / (1 + B_simple/B)
(the smallest global batch's B_simple that the series records: a baseline on one rank and one
micro-batch has none);
MLPerf's mean of the repeats without the fastest and the slowest (three repeats or more); the
coefficient of variation; and timing mode's median step at the same configuration where a file
holds one.
"""

import math
import statistics

from .study import describe, experiment_key, group_by
from .tables import Column, Table, key_cell, number, ratio

ACCURACY_KEYS = ("optimizer", "learning_rate", "lr_scaling", "lr_base_batch", "lr_warmup_epochs", "data",
                 "target_accuracy", "epochs", "validation_fraction", "eval_every")


def _finite(v):
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def _div(a, b):
    return a / b if _finite(a) and _finite(b) and b != 0 else None


def series_key(case):
    """What the points of one time-to-target series share: everything but P and K."""
    return (case.file,) + experiment_key(case) + tuple(case.attrs.get(k) for k in ACCURACY_KEYS)


def mlperf_mean(values):
    """MLPerf Training's score of several runs: the mean without the fastest and the slowest
    (needs three or more); None otherwise."""
    if len(values) < 3:
        return None
    kept = sorted(values)[1:-1]
    return sum(kept) / len(kept)


def predicted_statistical_factor(noise_scale, batch, baseline_batch):
    """S(B0)/S(B) from the empirical model S(B) = S_min (1 + B_simple/B)."""
    if not (_finite(noise_scale) and batch and baseline_batch):
        return None
    return (1 + noise_scale / baseline_batch) / (1 + noise_scale / batch)


def _timing_step(timing_cases, case):
    """Timing mode's median step (s) of the same configuration at the same P and K, or None."""
    for t in timing_cases:
        if (t.ok and t.summary and experiment_key(t) == experiment_key(case)
                and t.get("ranks") == case.get("ranks") and t.attrs.get("accumulate", 1) == case.attrs.get("accumulate", 1)
                and t.attrs.get("optimizer") == case.attrs.get("optimizer")):
            return t.summary.get("step_median_s")
    return None


def _point(case):
    """One case's figures over the repeats that reached the target."""
    reached = [r.attrs for r in case.repeats if r.attrs.get("target_reached")]
    times = [r["time_to_target_s"] for r in reached]
    steps = [r["steps_to_target"] for r in reached if "steps_to_target" in r]
    epochs = [r["epochs_to_target"] for r in reached if "epochs_to_target" in r]
    s = case.summary or {}
    mean_t = statistics.mean(times) if times else None
    return {"case": case, "label": describe(case, without=("ranks",)), "ranks": case.get("ranks"),
            "accumulate": case.attrs.get("accumulate", 1), "global_batch": case.get("global_batch"),
            "batch_per_rank": case.get("batch_per_rank"), "repeats": len(case.repeats), "reached": len(reached),
            "time_to_target_mean_s": mean_t, "time_to_target_ci95_low_s": s.get("time_to_target_ci95_low_s"),
            "time_to_target_ci95_high_s": s.get("time_to_target_ci95_high_s"),
            "time_to_target_mlperf_s": mlperf_mean(times),
            "time_to_target_cv": (statistics.stdev(times) / mean_t) if len(times) > 1 and mean_t else None,
            "steps_to_target_mean": statistics.mean(steps) if len(steps) == len(times) and steps else None,
            "epochs_to_target_mean": statistics.mean(epochs) if len(epochs) == len(times) and epochs else None,
            "noise_scale": (case.noise or {}).get("simple")}


def time_to_target_rows(accuracy_cases, timing_cases=()):
    """One row per ok accuracy case with a target in a series of two cases or more, ordered by
    global batch, with the speedup over the series' baseline and its two factors."""
    rows = []
    candidates = [c for c in accuracy_cases if c.ok and _finite(c.attrs.get("target_accuracy"))]
    for cases in group_by(candidates, series_key).values():
        if len(cases) < 2:
            continue  # one point: nothing scales
        points = sorted((_point(c) for c in cases), key=lambda p: (p["global_batch"], p["ranks"]))
        base = next((p for p in points if p["steps_to_target_mean"]), None)
        # The noise scale the prediction uses: the baseline's, or where its one rank and one
        # micro-batch have none, that of the smallest global batch that records one.
        noise = next((p["noise_scale"] for p in points if _finite(p["noise_scale"])), None)
        for p in points:
            p["timing_step_s"] = _timing_step(timing_cases, p["case"])
            p["step_time_s"] = _div(p["time_to_target_mean_s"], p["steps_to_target_mean"])
            if base is None:
                rows.append(p)
                continue
            p["baseline_global_batch"], p["baseline_ranks"] = base["global_batch"], base["ranks"]
            p["speedup"] = _div(base["time_to_target_mean_s"], p["time_to_target_mean_s"])
            p["hardware_factor"] = _div(base["step_time_s"], p["step_time_s"])
            p["statistical_factor"] = _div(base["steps_to_target_mean"], p["steps_to_target_mean"])
            # Ideals: the same time per sample and rank; steps that fall as the batch grows.
            p["hardware_ideal"] = _div(base["global_batch"] / base["ranks"], p["global_batch"] / p["ranks"])
            p["statistical_ideal"] = _div(p["global_batch"], base["global_batch"])
            p["hardware_efficiency"] = _div(p["hardware_factor"], p["hardware_ideal"])
            p["statistical_efficiency"] = _div(p["statistical_factor"], p["statistical_ideal"])
            p["predicted_statistical_factor"] = predicted_statistical_factor(
                base["noise_scale"] if _finite(base["noise_scale"]) else noise, p["global_batch"],
                base["global_batch"])
            rows.append(p)
    return rows


def _seconds(v):
    return f"{v:.3g}" if _finite(v) else "-"


def _ttt(r):
    v, lo, hi = r["time_to_target_mean_s"], r["time_to_target_ci95_low_s"], r["time_to_target_ci95_high_s"]
    if not _finite(v):
        return "-"
    return _seconds(v) if not (_finite(lo) and _finite(hi)) else f"{_seconds(v)} [{_seconds(lo)}, {_seconds(hi)}]"


CSV_COLUMNS = ("label", "ranks", "accumulate", "global_batch", "batch_per_rank", "repeats", "reached",
               "time_to_target_mean_s", "time_to_target_ci95_low_s", "time_to_target_ci95_high_s",
               "time_to_target_mlperf_s", "time_to_target_cv", "steps_to_target_mean", "epochs_to_target_mean",
               "step_time_s", "timing_step_s", "baseline_global_batch", "baseline_ranks", "speedup",
               "hardware_factor", "hardware_ideal", "hardware_efficiency", "statistical_factor", "statistical_ideal",
               "statistical_efficiency", "predicted_statistical_factor", "noise_scale")


def time_to_target_table(rows):
    def efficiency(key, ideal):
        return lambda r: ratio(_div(r.get(key), r.get(ideal)), 2) if _div(r.get(key), r.get(ideal)) else "-"

    columns = [Column("configuration", key_cell("label"), right=False, keep=True, words=True),
               Column("P", lambda r: str(r["ranks"]), keep=True),
               Column("K", lambda r: str(r["accumulate"]), keep=True),
               Column("B", lambda r: str(r["global_batch"]), keep=True),
               Column("reached", lambda r: f"{r['reached']}/{r['repeats']}"),
               Column("TTT s [95% CI]", _ttt),
               Column("MLPerf mean s", lambda r: _seconds(r["time_to_target_mlperf_s"]), detail=3),
               Column("CV", lambda r: number(r["time_to_target_cv"], "{:.2f}"), detail=3),
               Column("steps", lambda r: number(r["steps_to_target_mean"], "{:.1f}")),
               Column("epochs", lambda r: number(r["epochs_to_target_mean"], "{:.2f}"), detail=2),
               Column("s/step", lambda r: number(r["step_time_s"] and r["step_time_s"] * 1e3, "{:.2f}ms"), detail=2),
               Column("timing s/step", lambda r: number(r["timing_step_s"] and r["timing_step_s"] * 1e3,
                                                       "{:.2f}ms"), detail=2),
               Column("speedup", lambda r: number(r.get("speedup"), "{:.3g}")),
               Column("hw x", lambda r: number(r.get("hardware_factor"), "{:.3g}")),
               Column("hw eff", efficiency("hardware_factor", "hardware_ideal"), detail=1),
               Column("stat. x", lambda r: number(r.get("statistical_factor"), "{:.3g}")),
               Column("stat eff", efficiency("statistical_factor", "statistical_ideal"), detail=1),
               Column("pred. stat. x", lambda r: number(r.get("predicted_statistical_factor"), "{:.3g}"), detail=1),
               Column("B_simple", lambda r: number(r["noise_scale"], "{:.3g}"), detail=2)]
    notes = ["over the repeats that reached the target: time to target T (mean, Student-t 95% CI), steps S; "
             "TTT: time to target; s/step = T/S, the accuracy run's own training time per step; speedup = T0/T = hardware x statistical, "
             "hardware = (T0/S0)/(T/S), statistical = S0/S, against the series' smallest global batch B0; "
             "hw x: the hardware factor, stat. x: the statistical factor; hw eff and stat eff: each over its ideal, hardware (B0/P0)/(B/P), statistical B/B0; "
             "pred. stat. x = (1 + B_simple/B0)/(1 + B_simple/B) from the gradient noise scale of the smallest B that records one "
             "(docs/metrics.md); "
             "MLPerf mean: without the fastest and slowest repeat (3 or more); CV = std/mean of T"]
    return Table("time to target at scale", columns, rows, CSV_COLUMNS, notes=notes)


def noise_rows(cases):
    """Every case (timing or accuracy) that records a gradient noise scale, with the factor
    1 + B_simple/B by which it multiplies the steps to a target at its global batch B, and the
    statistical factor it predicts against the smallest global batch of its series."""
    rows = []
    with_noise = [c for c in cases if getattr(c, "noise", None)]
    key = lambda c: (c.file, c.attrs.get("mode", "timing")) + experiment_key(c)  # noqa: E731
    for cases_of_series in group_by(with_noise, key).values():
        ordered = sorted(cases_of_series, key=lambda c: (c.get("global_batch"), c.get("ranks")))
        b0 = ordered[0].get("global_batch")
        for c in ordered:
            n, b = c.noise, c.get("global_batch")
            simple = n.get("simple")
            rows.append({"label": describe(c, without=("ranks",)), "mode": c.attrs.get("mode", "timing"),
                         "ranks": c.get("ranks"), "accumulate": c.attrs.get("accumulate", 1), "global_batch": b,
                         "batch_small": n.get("batch_small"), "noise_scale": simple,
                         "noise_scale_ci95_low": n.get("ci95_low"), "noise_scale_ci95_high": n.get("ci95_high"),
                         "steps": n.get("steps"),
                         "steps_factor": 1 + simple / b if _finite(simple) and b else None,
                         "baseline_global_batch": b0,
                         "predicted_statistical_factor": predicted_statistical_factor(simple, b, b0)})
    return rows


def noise_table(rows):
    columns = [Column("configuration", key_cell("label"), right=False, keep=True, words=True),
               Column("mode", key_cell("mode"), right=False, detail=2),
               Column("P", lambda r: str(r["ranks"]), keep=True),
               Column("K", lambda r: str(r["accumulate"]), keep=True),
               Column("B", lambda r: str(r["global_batch"]), keep=True),
               Column("B_simple [95% CI]", lambda r: "-" if not _finite(r["noise_scale"]) else
                      f"{r['noise_scale']:.3g} [{number(r['noise_scale_ci95_low'], '{:.3g}')}, "
                      f"{number(r['noise_scale_ci95_high'], '{:.3g}')}]"),
               Column("steps", lambda r: str(r["steps"]), detail=1),
               Column("1+Bs/B", lambda r: number(r["steps_factor"], "{:.3g}")),
               Column("pred. stat. x", lambda r: number(r["predicted_statistical_factor"], "{:.3g}"), detail=1)]
    csv = ("label", "mode", "ranks", "accumulate", "global_batch", "batch_small", "noise_scale",
           "noise_scale_ci95_low", "noise_scale_ci95_high", "steps", "steps_factor", "baseline_global_batch",
           "predicted_statistical_factor")
    notes = ["B_simple = tr(Sigma)/|G|^2 from each step's micro-batch and averaged gradients (McCandlish et al. "
             "2018; docs/metrics.md), jackknife 95% CI over steps; 1+Bs/B = 1 + B_simple/B, the factor by which the noise "
             "multiplies the steps to a target at global batch B; pred. stat. x = (1 + B_simple/B0)/"
             "(1 + B_simple/B) against the series' smallest global batch B0 (ideal: B/B0)"]
    return Table("gradient noise scale", columns, rows, csv, notes=notes)

