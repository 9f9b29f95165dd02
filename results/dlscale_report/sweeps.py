"""Thread sweeps and batch sweeps: time per mini-batch against one varied knob.

In the manner of Shi et al. (Fig. 1: seconds per mini-batch vs CPU threads;
Fig. 2: vs mini-batch size), one line per driver, and of Shatnawi et al.'s
Table III (time per configuration, one column per framework).

A panel is every case that agrees on everything but the swept knob and the
driver; only panels where the knob takes at least two values are a sweep.
Times are medians of the step time recomputed from the raw samples.
"""

from dataclasses import dataclass

from .stats import case_stats
from .study import (batch_as_given, comm_key, dedupe, describe, group_by, hosts_count, placement_of, rank_key,
                    requested_threads)
from .tables import Column, Table, key_cell, ms

CSV_COLUMNS = ("panel", "workload", "driver", "device", "precision", "scaling", "ranks", "hosts", "placement",
               "batch_per_rank", "global_batch", "threads", "file", "case", "status",
               "step_median_ms", "ci95_low_ms", "ci95_high_ms", "samples_per_s")

# knob -> (x value of a case, panel key without the knob, parts of describe() to drop, x name)
KNOBS = {
    "threads": (lambda c: c.get("threads"),
                lambda c: (c.get("workload"), c.get("device_type"), c.get("precision"),
                           c.get("scaling"), batch_as_given(c)) + rank_key(c) + comm_key(c),
                ("driver", "threads"), "threads"),
    "batch": (batch_as_given,
              lambda c: (c.get("workload"), c.get("device_type"), c.get("precision"),
                         c.get("scaling"), requested_threads(c)) + rank_key(c) + comm_key(c),
              ("driver", "batch"), "batch"),
}


@dataclass
class Panel:
    label: str
    knob: str
    rows: list                 # one dict per case, sorted by (driver order, x)
    drivers: list              # in first-appearance order
    xs: list                   # sorted distinct x values


def _row(case, label):
    a = case.attrs
    st = case_stats(case)
    row = {"panel": label, "workload": a.get("workload"), "driver": a.get("driver"),
           "device": a.get("device_type"), "precision": a.get("precision"),
           "scaling": a.get("scaling"), "ranks": a.get("ranks"),
           "hosts": hosts_count(case), "placement": placement_of(case),
           "batch_per_rank": a.get("batch_per_rank"), "global_batch": a.get("global_batch"),
           "threads": a.get("threads"), "file": case.file, "case": case.name,
           "status": case.status, "step_median_ms": None, "ci95_low_ms": None,
           "ci95_high_ms": None, "samples_per_s": None}
    if st is not None:
        row.update(step_median_ms=st["step_median_s"] * 1e3, ci95_low_ms=st["ci95_low_s"] * 1e3,
                   ci95_high_ms=st["ci95_high_s"] * 1e3, samples_per_s=st["samples_per_s"])
    return row


def build_panels(cases, knob):
    """Panels of a sweep over `knob` ("threads" or "batch"), and notes on dropped cases."""
    x_of, panel_key, drop, _ = KNOBS[knob]
    chosen, notes = dedupe(cases, lambda c: panel_key(c) + (c.get("driver"), x_of(c)))
    panels = []
    for group in group_by(chosen, panel_key).values():
        xs = sorted({x_of(c) for c in group})
        if len(xs) < 2:
            continue                    # one value of the knob: not a sweep
        drivers = list(dict.fromkeys(c.get("driver") for c in group))
        group = sorted(group, key=lambda c: (drivers.index(c.get("driver")), x_of(c)))
        label = describe(group[0], without=drop)
        rows = [_row(c, label) for c in group]
        for row, c in zip(rows, group):
            row["x"] = x_of(c)
        panels.append(Panel(label=label, knob=knob, rows=rows, drivers=drivers, xs=xs))
    return panels, notes


def sweep_table(panels, knob, notes=()):
    """Pivot: one row per (panel, x), one column per driver (median ms or status)."""
    drivers = list(dict.fromkeys(d for p in panels for d in p.drivers))
    display = []
    for p in panels:
        for x in p.xs:
            row = {"panel": p.label, "x": x}
            for r in p.rows:
                if r["x"] == x:
                    row[r["driver"]] = ms(r["step_median_ms"]) if r["status"] == "ok" else r["status"]
            display.append(row)
    columns = [Column("configuration", key_cell("panel"), right=False, keep=True, words=True),
               Column(KNOBS[knob][3], key_cell("x"))]
    columns += [Column(f"{d} ms", (lambda d: lambda r: r.get(d, "-"))(d)) for d in drivers]
    what = "CPU threads per rank" if knob == "threads" else \
        "batch (per rank for weak scaling, global for strong)"
    all_notes = [f"median step time in ms (max over ranks per iteration, median over iterations) "
                 f"against {what}; one column per driver"]
    if not panels:
        all_notes.append(f"no {knob} sweep: every configuration ran with a single {knob} value")
    all_notes += list(notes)
    return Table(title=f"{knob} sweep", columns=columns, rows=display,
                 csv_columns=CSV_COLUMNS, csv_rows=[r for p in panels for r in p.rows],
                 notes=all_notes)
