"""The drivers side by side: for each configuration run on more than one driver (the same
workload, device, precision, floating-point mode, scaling, ranks, batch and threads), each
driver's throughput, share of its measured peak and energy per sample.

Values are the recorded summaries (docs/metrics.md); a dlscale/1 file, or a machine without the
counters, shows '-' for what it lacks.
"""

from .study import case_ref, describe
from .tables import Column, Table, key_cell, number, summary_value

CSV_COLUMNS = ("configuration", "driver", "file", "case", "samples_per_s", "achieved_gflops", "peak_pct",
               "cpu_utilisation", "energy_j_per_sample", "status")


def _config(case):
    return describe(case, without=("driver",))


def driver_rows(cases):
    """One row per case of a configuration that more than one driver ran, grouped by it."""
    groups = {}
    for c in cases:
        groups.setdefault(_config(c), []).append(c)
    rows = []
    for config, members in groups.items():
        if len({c.get("driver") for c in members}) < 2:
            continue
        for c in sorted(members, key=lambda c: c.get("driver")):
            s = c.summary if c.ok else None
            rows.append({"configuration": config, "driver": c.get("driver"), "file": c.file, "case": c.name,
                         "samples_per_s": summary_value(s, "samples_per_s"),
                         "achieved_gflops": summary_value(s, "achieved_flops", 1e-9),
                         "peak_pct": summary_value(s, "peak_share", 100.0),
                         "cpu_utilisation": summary_value(s, "cpu_utilisation"),
                         "energy_j_per_sample": summary_value(s, "energy_j_per_sample"),
                         "status": c.status, "ref": case_ref(c)})
    return rows


def driver_table(rows):
    columns = [
        Column("configuration", key_cell("configuration"), right=False, keep=True, words=True),
        Column("driver", key_cell("driver"), right=False),
        Column("samples/s", lambda r: number(r["samples_per_s"])),
        Column("GFLOP/s", lambda r: number(r["achieved_gflops"], "{:.2f}")),
        Column("% of peak", lambda r: number(r["peak_pct"])),
        Column("CPU util", lambda r: number(r["cpu_utilisation"], "{:.2f}")),
        Column("J/sample", lambda r: number(r["energy_j_per_sample"], "{:.3g}")),
        Column("status", key_cell("status"), right=False),
    ]
    notes = ["configurations run on more than one driver; % of peak = achieved FLOP/s / the measured GEMM "
             "peak of that driver, device, precision and threads (each driver against its own library); "
             "J/sample = the device's energy over the timed region / samples; '-' = not recorded or "
             "unavailable on that machine"]
    return Table(title="drivers compared", columns=columns, rows=rows, csv_columns=CSV_COLUMNS, notes=notes)
