"""Accuracy cases (dlscale/3, mode "accuracy"): time to accuracy, training and testing time, test
accuracy, over the repeats of each configuration (docs/schema.md defines the recorded numbers).

Each accuracy case is one configuration (workload, driver, device, threads, optimiser, learning
rate, ...) trained `repeats` times from seeds seed, seed+1, .... The means and 95% confidence
intervals are the ones dlscale recorded in the case's accuracy_summary (Student t over the
repeats; with one repeat the interval is the mean itself); the counts (how many repeats reached
the target, epochs run) come from the repeats. Time to target is the mean over the repeats that
reached it only, so it is always read together with "reached k/n".

The curves: validation accuracy after each epoch against the cumulative training time (evaluation
excluded), one thin line per repeat, and their mean: at epoch e the mean accuracy and the mean
cumulative time of the repeats that ran e epochs (a repeat stopped at its target drops out).
"""

import math

from .schema import ACCURACY_SUMMARY_INTERVALS
from .study import describe, hosts_count, placement_of
from .tables import Column, Table, key_cell, number, text


def _finite(v):
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def label(case):
    """The configuration of an accuracy case: the timing label, the optimiser and the data."""
    a = case.attrs
    lr = a.get("learning_rate")
    optimiser = f"{a.get('optimizer', 'sgd')}" + (f" lr={lr:g}" if _finite(lr) else "")
    return f"{describe(case)} {optimiser}"


def seconds(v):
    """Seconds to three significant digits, or "-"."""
    return f"{v:.3g}" if _finite(v) else "-"


def seconds_ci(row, key):
    v = row.get(f"{key}_mean_s")
    if not _finite(v):
        return "-"
    lo, hi = row.get(f"{key}_ci95_low_s"), row.get(f"{key}_ci95_high_s")
    return seconds(v) if not (_finite(lo) and _finite(hi)) else f"{seconds(v)} [{seconds(lo)}, {seconds(hi)}]"


def fraction_ci(row, key):
    v = row.get(f"{key}_mean")
    if not _finite(v):
        return "-"
    lo, hi = row.get(f"{key}_ci95_low"), row.get(f"{key}_ci95_high")
    return f"{v:.4f}" if not (_finite(lo) and _finite(hi)) else f"{v:.4f} [{lo:.4f}, {hi:.4f}]"


def accuracy_rows(cases):
    """One row per accuracy case, ok or not; the summary's numbers and the repeats' counts."""
    rows = []
    for c in cases:
        a = c.attrs
        target = a.get("target_accuracy")
        row = {"label": label(c), "workload": a.get("workload"), "driver": a.get("driver"),
               "device": a.get("device_type"), "threads": a.get("threads"), "ranks": a.get("ranks"),
               "hosts": hosts_count(c), "placement": placement_of(c),
               "optimizer": a.get("optimizer"), "learning_rate": a.get("learning_rate"),
               "batch": a.get("batch_per_rank"), "data": a.get("data"), "status": c.status,
               "message": a.get("message", ""), "epochs": a.get("epochs"),
               "target_accuracy": target if _finite(target) else None,
               "repeats": len(c.repeats), "case": c}
        if c.ok:
            s = c.summary
            for key in ACCURACY_SUMMARY_INTERVALS:
                v = s.get(key)
                row[key] = float(v) if _finite(v) else None
            reached = [r for r in c.repeats if r.attrs["target_reached"]]
            row["targets_reached"] = len(reached)
            row["target_epoch_mean"] = (sum(r.attrs["target_epoch"] for r in reached) / len(reached)
                                        if reached else None)
            runs = [r.attrs["epochs_run"] for r in c.repeats]
            row["epochs_run_min"], row["epochs_run_max"] = min(runs), max(runs)
            accuracies = [r.attrs["test_accuracy"] for r in c.repeats]
            row["test_accuracy_min"], row["test_accuracy_max"] = min(accuracies), max(accuracies)
            row["test_samples"] = a.get("test_samples")
        rows.append(row)
    return rows


def _failed_notes(rows):
    return [f"{r['label']}: {r['status']}: {r['message']}" for r in rows if r["status"] != "ok"]


def _ok(rows):
    return [r for r in rows if r["status"] == "ok"]


def time_to_accuracy_table(rows):
    """Configurations with a target: how many repeats reached it and how long it took."""
    shown = [r for r in _ok(rows) if r["target_accuracy"] is not None]
    columns = [Column("configuration", key_cell("label"), right=False, keep=True, words=True),
               Column("target", lambda r: f"{r['target_accuracy']:.4g}"),
               Column("reached", lambda r: f"{r['targets_reached']}/{r['repeats']}"),
               Column("time to target s [95% CI]", lambda r: seconds_ci(r, "time_to_target")),
               Column("epochs to target", lambda r: number(r["target_epoch_mean"], "{:.1f}")),
               Column("epoch limit", lambda r: text(r["epochs"]))]
    csv = ("label", "workload", "driver", "device", "threads", "ranks", "hosts", "placement", "optimizer", "learning_rate", "batch",
           "target_accuracy", "repeats", "targets_reached", "time_to_target_mean_s", "time_to_target_ci95_low_s",
           "time_to_target_ci95_high_s", "target_epoch_mean", "epochs")
    notes = ["time to target = training time (evaluation excluded) summed over epochs 1..the first epoch whose "
             "validation accuracy reached the target; mean and Student-t 95% CI over the repeats that reached it "
             "(with one such repeat the interval is the mean); '-': no repeat reached it within the epoch limit"]
    return Table("time to accuracy", columns, shown, csv, notes=notes)


def time_table(rows):
    """Training time and testing time (inference over the whole test set) per configuration; a
    case that failed shows its status, its message in the notes."""
    def ok_only(cell):
        return lambda r: cell(r) if r["status"] == "ok" else "-"

    columns = [Column("configuration", key_cell("label"), right=False, keep=True, words=True),
               Column("status", key_cell("status"), right=False),
               Column("repeats", ok_only(lambda r: text(r["repeats"]))),
               Column("epochs run", ok_only(lambda r: text(r["epochs_run_min"])
                                            if r["epochs_run_min"] == r["epochs_run_max"]
                                            else f"{r['epochs_run_min']}-{r['epochs_run_max']}")),
               Column("training s [95% CI]", ok_only(lambda r: seconds_ci(r, "train_time"))),
               Column("testing s [95% CI]", ok_only(lambda r: seconds_ci(r, "test_time"))),
               Column("test samples", ok_only(lambda r: text(r["test_samples"])))]
    csv = ("label", "workload", "driver", "device", "threads", "ranks", "hosts", "placement", "optimizer", "learning_rate", "batch",
           "status", "repeats", "epochs_run_min", "epochs_run_max", "train_time_mean_s", "train_time_ci95_low_s",
           "train_time_ci95_high_s", "test_time_mean_s", "test_time_ci95_low_s", "test_time_ci95_high_s",
           "test_samples")
    notes = ["training = the sum of the epochs' training times (max over ranks); testing = inference over the "
             "whole test set after the last epoch, max over ranks; mean and Student-t 95% CI over the repeats"]
    return Table("training and testing time", columns, rows, csv, notes=notes + _failed_notes(rows))


def test_accuracy_table(rows):
    """Test accuracy after the last epoch, per configuration."""
    columns = [Column("configuration", key_cell("label"), right=False, keep=True, words=True),
               Column("repeats", lambda r: text(r["repeats"])),
               Column("test accuracy [95% CI]", lambda r: fraction_ci(r, "test_accuracy")),
               Column("min", lambda r: number(r["test_accuracy_min"], "{:.4f}")),
               Column("max", lambda r: number(r["test_accuracy_max"], "{:.4f}"))]
    csv = ("label", "workload", "driver", "device", "threads", "ranks", "hosts", "placement", "optimizer", "learning_rate", "batch",
           "data", "repeats", "test_accuracy_mean", "test_accuracy_ci95_low", "test_accuracy_ci95_high",
           "test_accuracy_min", "test_accuracy_max")
    notes = ["share of the test set classified correctly after the last epoch run (global over ranks); mean and "
             "Student-t 95% CI over the repeats, min and max of the repeats"]
    return Table("test accuracy", columns, _ok(rows), csv, notes=notes)


def curve(case):
    """(repeat curves, mean curve) of an ok accuracy case: lists of (cumulative s, val accuracy)."""
    repeats = [list(zip(r.epochs["cumulative_train_time_s"].tolist(), r.epochs["val_accuracy"].tolist()))
               for r in case.repeats]
    mean = []
    for e in range(max((len(r) for r in repeats), default=0)):
        points = [r[e] for r in repeats if len(r) > e]
        mean.append((sum(p[0] for p in points) / len(points), sum(p[1] for p in points) / len(points)))
    return repeats, mean
