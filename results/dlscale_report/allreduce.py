"""All-reduce microbenchmarks (/allreduce/NNNN): bandwidth against message size.

algbw and busbw are shown as the file records them (nccl-tests convention,
GB = 1e9 B: algbw = bytes/t, busbw = algbw·2(P-1)/P). Next to them: the
median over iterations of the slowest rank's time, recomputed from time_s,
and the time of the file's α–β fit of a ring all-reduce,
t = 2(P-1)·α + 2(P-1)/P·n·β, so the fit can be judged against the data.
Each benchmark names the hosts its ranks spanned and so the network it measured
("within one host" or "between hosts"): as recorded, or for older files from
the rank table (schema.py).
"""

import os

from .stats import median
from .tables import Column, Table, key_cell, ms, number

CSV_COLUMNS = ("file", "group", "backend", "ranks", "hosts", "network", "dtype", "case", "bytes", "iterations",
               "time_median_us", "model_us", "algbw_gbps", "busbw_gbps", "errors",
               "alpha_s", "beta_s_per_byte")

NOTE = ("time: median over iterations of the maximum over ranks; algbw = bytes/time and busbw = "
        "algbw·2(P-1)/P as recorded (GB = 1e9 B); model: the recorded α–β fit of a ring "
        "all-reduce, 2(P-1)·α + 2(P-1)/P·n·β")


def ring_time(n_bytes, ranks, alpha, beta):
    """α–β time of a ring all-reduce of n_bytes over `ranks` ranks."""
    return 2 * (ranks - 1) * alpha + 2 * (ranks - 1) / ranks * n_bytes * beta


def label(ar, show_file=False):
    """ "mpi P=4 for case 0003", with the file name in front when files differ."""
    a = ar.attrs
    case = f" for case {a['case']}" if a.get("case") else ""
    where = f"{os.path.basename(ar.file)}: " if show_file else ""
    hosts = getattr(ar, "hosts", 1) or 1
    on = f" on {hosts} hosts" if hosts > 1 else ""
    return f"{where}{a.get('backend', '?')} P={a.get('ranks', '?')}{on}{case}"


def allreduce_rows(benchmarks):
    rows = []
    several = len({ar.file for ar in benchmarks}) > 1
    for ar in benchmarks:
        a = ar.attrs
        ranks = a.get("ranks", ar.time_s.shape[0])
        alpha, beta = a.get("alpha_s"), a.get("beta_s_per_byte")
        for j, n in enumerate(ar.bytes.tolist()):
            t = ar.time_s[:, j, :]
            med = median(t.max(axis=0).tolist()) if t.size else None
            model = (ring_time(n, ranks, alpha, beta)
                     if alpha is not None and beta is not None and ranks else None)
            rows.append({"file": ar.file, "group": ar.name, "label": label(ar, several),
                         "backend": a.get("backend"), "ranks": ranks, "hosts": ar.hosts,
                         "network": ar.network, "dtype": a.get("dtype"),
                         "case": a.get("case", ""), "bytes": int(n), "iterations": t.shape[1],
                         "time_median_us": None if med is None else med * 1e6,
                         "model_us": None if model is None else model * 1e6,
                         "algbw_gbps": float(ar.algbw_gbps[j]),
                         "busbw_gbps": float(ar.busbw_gbps[j]), "errors": int(ar.errors[j]),
                         "alpha_s": alpha, "beta_s_per_byte": beta})
    return rows


def _size(n):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def allreduce_table(rows):
    columns = [
        Column("benchmark", key_cell("label"), right=False, keep=True, words=True),
    ]
    if any(r["hosts"] > 1 for r in rows):
        # Where some benchmark crossed hosts: which network each measured.
        columns += [Column("hosts", key_cell("hosts")), Column("network", key_cell("network"), right=False)]
    columns += [
        Column("size", lambda r: _size(r["bytes"])),
        Column("time us", lambda r: ms(r["time_median_us"])),
        Column("model us", lambda r: ms(r["model_us"])),
        Column("algbw GB/s", lambda r: number(r["algbw_gbps"], "{:.3f}")),
        Column("busbw GB/s", lambda r: number(r["busbw_gbps"], "{:.3f}")),
        Column("errors", key_cell("errors")),
    ]
    notes = [NOTE]
    if not rows:
        notes.append("no all-reduce microbenchmark in these files")
    elif any(r["errors"] for r in rows):
        notes.append("ERRORS: some sizes returned wrong sums (errors > 0); their times are suspect")
    return Table(title="all-reduce", columns=columns, rows=rows, csv_columns=CSV_COLUMNS,
                 notes=notes)

