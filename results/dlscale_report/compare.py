"""Two runs of the same cases side by side: B/A ratio and a significance test.

Cases are matched on study.match_key (workload, driver, device, precision,
scaling, ranks, batch per rank, threads, and the bucket size when recorded, and
the hosts the ranks spanned and their placement: P=4 on one host and P=4 on two
are different measurements).
The ratio is median(B)/median(A) of the step times recomputed from the raw
samples; > 1 means B is slower. The test is a two-sided Mann–Whitney U test
on the two sets of raw step times T_i (max over ranks per iteration). A side that was
contended (docs/metrics.md) is marked in its row and named in a note.
"""

from .conditions import contended, contention_text
from .mannwhitney import mann_whitney
from .stats import _div, case_stats, step_times
from .study import case_ref, dedupe, describe, hosts_count, match_key, placement_of
from .tables import Column, Table, key_cell, ms, ratio

CSV_COLUMNS = ("label", "workload", "driver", "device", "precision", "scaling", "ranks",
               "hosts", "placement", "batch_per_rank", "threads", "file_a", "case_a", "file_b", "case_b",
               "n_a", "n_b", "median_a_ms", "median_b_ms", "ratio_b_a", "u_b", "p_value",
               "test_method", "status_a", "status_b", "contended_a", "contended_b")


def compare_rows(cases_a, cases_b):
    """Rows for cases present in both runs; notes for the rest."""
    a_kept, notes = dedupe(cases_a, match_key)
    b_kept, notes_b = dedupe(cases_b, match_key)
    notes += notes_b
    b_by_key = {match_key(c): c for c in b_kept}
    rows, matched = [], set()
    for ca in a_kept:
        key = match_key(ca)
        cb = b_by_key.get(key)
        if cb is None:
            notes.append(f"only in A: {case_ref(ca)} ({describe(ca)})")
            continue
        matched.add(key)
        a = ca.attrs
        row = {"label": describe(ca), "workload": a.get("workload"), "driver": a.get("driver"),
               "device": a.get("device_type"), "precision": a.get("precision"),
               "scaling": a.get("scaling"), "ranks": a.get("ranks"),
               "hosts": hosts_count(ca), "placement": placement_of(ca),
               "batch_per_rank": a.get("batch_per_rank"), "threads": a.get("threads"),
               "file_a": ca.file, "case_a": ca.name, "file_b": cb.file, "case_b": cb.name,
               "n_a": None, "n_b": None, "median_a_ms": None, "median_b_ms": None,
               "ratio_b_a": None, "u_b": None, "p_value": None, "test_method": None,
               "status_a": ca.status, "status_b": cb.status,
               "contended_a": int(contended(ca)), "contended_b": int(contended(cb))}
        # A contended side's step times measure the machine's load as much as the backend.
        for side, case in (("A", ca), ("B", cb)):
            if contended(case):
                notes.append(f"{side} {case_ref(case)} ({describe(case)}) was {contention_text(case)}: "
                             f"B/A compares the load on the machine as much as the runs")
        sa, sb = case_stats(ca), case_stats(cb)
        if sa is not None and sb is not None:
            xa, xb = step_times(ca.iter_time_s), step_times(cb.iter_time_s)
            test = mann_whitney(xb, xa)
            row.update(n_a=len(xa), n_b=len(xb), median_a_ms=sa["step_median_s"] * 1e3,
                       median_b_ms=sb["step_median_s"] * 1e3,
                       ratio_b_a=_div(sb["step_median_s"], sa["step_median_s"]),  # A's median may be 0
                       u_b=test.u, p_value=test.p,
                       test_method=f"{test.method} ({test.implementation})")
        rows.append(row)
    notes += [f"only in B: {case_ref(c)} ({describe(c)})" for c in b_kept
              if match_key(c) not in matched]
    return rows, notes


def _contended_mark(row):
    sides = "".join(side for side in ("A", "B") if row[f"contended_{side.lower()}"])
    return f" (contended: {'/'.join(sides)})" if sides else ""


def compare_table(rows, notes=()):
    columns = [
        Column("configuration", key_cell("label"), right=False, keep=True, words=True),
        Column("A ms", lambda r: ms(r["median_a_ms"])),
        Column("B ms", lambda r: ms(r["median_b_ms"])),
        Column("B/A", lambda r: ratio(r["ratio_b_a"])),
        Column("p", lambda r: "-" if r["p_value"] is None else f"{r['p_value']:.3g}"),
        Column("n A/B", lambda r: "-" if r["n_a"] is None else f"{r['n_a']}/{r['n_b']}"),
        Column("status A/B", lambda r: f"{r['status_a']}/{r['status_b']}" + _contended_mark(r), right=False),
    ]
    method = ("B/A = ratio of median step times (max over ranks per iteration); p = two-sided "
              "Mann-Whitney U test of the two sets of raw step times (u_b = U of B: pairs with "
              "B slower, ties counted half); exact distribution when a sample has <= 8 values "
              "and no ties, else normal approximation with tie and continuity correction")
    return Table(title="comparison B vs A", columns=columns, rows=rows,
                 csv_columns=CSV_COLUMNS, notes=[method] + list(notes))
