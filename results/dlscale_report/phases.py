"""Where a step's time goes: forward, backward, all-reduce, update.

Only cases run with --phases have phase_time_s[ranks, iterations, 4]. Per
phase the table shows the median over iterations of the slowest rank's time
in that phase (stats.phase_medians, the <phase>_median_s of newer files):
the same statistic as the step median, so the columns are comparable with
it. Their sum can differ from the step median, because each phase's slowest
rank and median iteration can differ; the "sum" column shows by how much.
"""

from .stats import PHASES, case_phase_medians, case_stats
from .study import describe, hosts_count, placement_of
from .tables import Column, Table, key_cell, ms

CSV_COLUMNS = ("file", "case", "label", "workload", "driver", "device", "ranks", "hosts", "placement",
               "batch_per_rank", "threads") + tuple(f"{p}_ms" for p in PHASES) + (
               "sum_ms", "step_median_ms")

NOTE = ("per phase: median over iterations of the maximum over ranks of that phase's time "
        "(the same statistic as the step median); the phases' slowest ranks and median "
        "iterations can differ, so their sum need not equal the step median. The all-reduce "
        "phase includes waiting for slower ranks.")


def phase_rows(cases):
    rows = []
    for case in cases:
        med = case_phase_medians(case)
        if med is None:
            continue
        a = case.attrs
        row = {"file": case.file, "case": case.name, "label": describe(case),
               "workload": a.get("workload"), "driver": a.get("driver"),
               "device": a.get("device_type"), "ranks": a.get("ranks"),
               "hosts": hosts_count(case), "placement": placement_of(case),
               "batch_per_rank": a.get("batch_per_rank"), "threads": a.get("threads")}
        for p in PHASES:
            row[f"{p}_ms"] = med[f"{p}_median_s"] * 1e3
        # Added left to right in PHASES order, so a reader can recompute it exactly.
        row["sum_ms"] = sum(row[f"{p}_ms"] for p in PHASES)
        row["step_median_ms"] = case_stats(case)["step_median_s"] * 1e3
        rows.append(row)
    return rows


def phase_table(rows, show_file=False):
    columns = ([Column("file", key_cell("file"), right=False, path=True)] if show_file else []) + [
        Column("case", key_cell("case"), right=False, keep=True),
        Column("configuration", key_cell("label"), right=False, keep=True, words=True)]
    columns += [Column(f"{p} ms", (lambda p: lambda r: ms(r[f"{p}_ms"]))(p)) for p in PHASES]
    columns += [Column("sum ms", lambda r: ms(r["sum_ms"]), detail=1),
                Column("step ms", lambda r: ms(r["step_median_ms"]))]
    notes = [NOTE]
    if not rows:
        notes.append("no case has phase times (run dlscale with --phases)")
    return Table(title="phases", columns=columns, rows=rows, csv_columns=CSV_COLUMNS, notes=notes)
