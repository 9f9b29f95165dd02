"""Speedup and efficiency of scaling series, with confidence intervals.

A series is the cases of one experiment_key (workload, driver, device,
precision, scaling mode, batch as given, requested threads, placement) at
different rank counts, possibly from several files. A series never mixes packed
and spread placements; its label names the placement where the cases of the
mode have both, or where some case's ranks spanned several hosts. Each point
keeps the hosts its ranks spanned ("4 (2 hosts)"). Its baseline P0 is the smallest
rank count with an ok case; T(P) is the median step time recomputed from the
raw samples (stats.compute_stats), as docs/metrics.md defines them:

  speedup     S(P) = X(P)/X(P0), X = samples/s = global batch / T
                strong: S = T(P0)/T(P)     weak: S = (P/P0)·T(P0)/T(P) (scaled speedup)
  efficiency  E(P) = S(P)·P0/P
                strong: E = T(P0)·P0/(P·T(P))     weak: E = T(P0)/T(P)

Ideal: S = P/P0, E = 1.
"""

from dataclasses import dataclass, field

from .stats import _div, case_stats
from .study import (case_ref, dedupe, describe, experiment_key, group_by, hosts_count, hosts_text,
                    placement_of, requested_threads)
from .tables import COVERAGE_NOTE, Column, Table, few_samples, key_cell, ms, ms_ci, number, ratio, ratio_ci

MODES = ("weak", "strong")

CI_NOTE = ("95% CI of a median: the order-statistic interval [x_(k), x_(n-k+1)] of the case's "
           "step times (docs/metrics.md; for n <= 5 it is [min, max] with coverage < 0.95). "
           "CI of a ratio: from the ends of the two medians' intervals, e.g. speedup "
           "[c·T_low(P0)/T_high(P), c·T_high(P0)/T_low(P)] with c = P/P0 (weak) or 1 (strong); "
           "efficiency likewise times P0/P. Whenever both medians lie in their intervals the "
           "ratio lies in this one, so for independent runs its coverage is at least "
           "coverage(P0)·coverage(P) (column coverage_min). The baseline row is 1 by definition.")

DEFINITIONS = {
    "strong": "strong scaling (global batch fixed): speedup S(P) = T(P0)/T(P), efficiency "
              "E(P) = T(P0)·P0/(P·T(P)); T = median step time (max over ranks per iteration), "
              "P0 = the series' smallest rank count with an ok case; ideal S = P/P0, E = 1",
    "weak": "weak scaling (batch per rank fixed): efficiency E(P) = T(P0)/T(P); scaled speedup "
            "S(P) = samples/s(P) / samples/s(P0) = (P/P0)·E(P); T = median step time (max over "
            "ranks per iteration), P0 = the series' smallest rank count with an ok case; ideal "
            "S = P/P0, E = 1",
}

PROJECTION_NOTE = ("projected: the /projection of the series' smallest rank count that holds "
                   "one (compute time plus a ring all-reduce t = 2(P-1)α + 2(P-1)/P·n·β fitted "
                   "at fit_ranks; docs/metrics.md), listed where it predicts a measured rank "
                   "count; projected E is the projected step's efficiency against the measured "
                   "step at P0, as measured E is")

# A projection whose step time misses a measured point by more than this (either way) is not shown.
PROJECTION_MAX_ERROR = 0.25

CSV_COLUMNS = (
    "series", "workload", "driver", "device", "precision", "scaling", "batch", "threads",
    "ranks", "hosts", "placement", "batch_per_rank", "global_batch", "baseline_ranks", "file", "case", "status",
    "iterations", "step_median_ms", "ci95_low_ms", "ci95_high_ms", "ci_coverage",
    "samples_per_s", "speedup", "speedup_low", "speedup_high", "ideal_speedup",
    "efficiency", "efficiency_low", "efficiency_high", "coverage_min",
    "projected_step_ms", "projected_efficiency", "projection_fit_ranks", "projection_between_hosts",
)


@dataclass
class Series:
    label: str
    mode: str
    rows: list                         # one dict per case, sorted by ranks
    cases: list = field(default_factory=list)   # the Case of each row
    baseline_ranks: object = None      # P0, None when no case is ok
    projection: object = None          # Projection used for the projected columns
    projection_case: object = None     # the Case it comes from
    projection_withheld: str = ""      # why a recorded projection is not used, else ""
    projected_efficiency: dict = field(default_factory=dict)  # P -> projected_efficiency()
    notes: list = field(default_factory=list)

    @property
    def ok_rows(self):
        return [r for r in self.rows if r["speedup"] is not None]


def _row(case, label):
    a = case.attrs
    return {
        "series": label, "workload": a.get("workload"), "driver": a.get("driver"),
        "device": a.get("device_type"), "precision": a.get("precision"),
        "scaling": a.get("scaling"),
        "batch": a.get("global_batch") if a.get("scaling") == "strong" else a.get("batch_per_rank"),
        "threads": requested_threads(case), "ranks": a.get("ranks"),
        "hosts": hosts_count(case), "placement": placement_of(case),
        "batch_per_rank": a.get("batch_per_rank"), "global_batch": a.get("global_batch"),
        "baseline_ranks": None, "file": case.file, "case": case.name, "status": case.status,
        "iterations": None, "step_median_ms": None, "ci95_low_ms": None, "ci95_high_ms": None,
        "ci_coverage": None, "samples_per_s": None, "speedup": None, "speedup_low": None,
        "speedup_high": None, "ideal_speedup": None, "efficiency": None, "efficiency_low": None,
        "efficiency_high": None, "coverage_min": None, "projected_step_ms": None,
        "projected_efficiency": None, "projection_fit_ranks": None, "projection_between_hosts": None,
    }


def build_series(cases, mode):
    """Series of the given mode, each with its rows computed; plus notes on dropped cases."""
    if mode not in MODES:
        raise ValueError(f"scaling mode must be one of {MODES}, not {mode!r}")
    chosen = [c for c in cases if c.attrs.get("scaling") == mode]
    chosen, notes = dedupe(chosen, lambda c: experiment_key(c) + (c.get("ranks"),))
    name_placement = (len({placement_of(c) for c in chosen}) > 1
                      or any(hosts_count(c) > 1 for c in chosen))
    series = []
    for group in group_by(chosen, experiment_key).values():
        group = sorted(group, key=lambda c: c.get("ranks"))
        series.append(_series(group, mode, name_placement))
    return series, notes


def point_label(ranks, hosts, with_hosts=True):
    """A point of a series: "4 (2 hosts)", or "4" without hosts."""
    return f"{ranks} ({hosts_text(hosts)})" if with_hosts else str(ranks)


def _series(group, mode, name_placement=False):
    label = describe(group[0], without=("ranks", "scaling", "placement"))
    if name_placement:
        label += f" {placement_of(group[0])}"
    # Recomputed from the raw samples (not the recorded summary): every number
    # here then follows from iter_time_s alone.
    stats = {c.index: case_stats(c) for c in group}
    ok = [c for c in group if stats[c.index] is not None]
    s = Series(label=label, mode=mode, rows=[_row(c, label) for c in group], cases=list(group))
    if not ok:
        return s
    base = ok[0]
    p0, b = base.get("ranks"), stats[base.index]
    s.baseline_ranks = p0
    for row, case in zip(s.rows, group):
        st = stats[case.index]
        row["baseline_ranks"] = p0
        if st is None:
            continue
        p = case.get("ranks")
        t, lo, hi, cov = (st["step_median_s"], st["ci95_low_s"], st["ci95_high_s"],
                          st["ci_coverage"])
        row.update(iterations=case.iter_time_s.shape[1], step_median_ms=t * 1e3,
                   ci95_low_ms=lo * 1e3, ci95_high_ms=hi * 1e3, ci_coverage=cov,
                   samples_per_s=st["samples_per_s"], ideal_speedup=p / p0)
        if case is base:
            # The same samples on both sides: exactly 1, no interval to propagate.
            row.update(speedup=1.0, speedup_low=1.0, speedup_high=1.0, efficiency=1.0,
                       efficiency_low=1.0, efficiency_high=1.0, coverage_min=1.0)
            continue
        # Speedup is the throughput ratio; for weak scaling the global batch grows with P.
        c = p / p0 if mode == "weak" else 1.0
        t0, lo0, hi0, cov0 = (b["step_median_s"], b["ci95_low_s"], b["ci95_high_s"],
                              b["ci_coverage"])
        speedup, s_lo, s_hi = c * _div(t0, t), c * _div(lo0, hi), c * _div(hi0, lo)
        e = p0 / p
        row.update(speedup=speedup, speedup_low=s_lo, speedup_high=s_hi,
                   efficiency=speedup * e, efficiency_low=s_lo * e, efficiency_high=s_hi * e,
                   coverage_min=cov0 * cov)
    _attach_projection(s, [c for c in ok if c.projection is not None])
    return s


def projection_errors(series_rows, predicted):
    """{P: relative step-time error of the projection} at every measured rank count it predicts."""
    return {r["ranks"]: predicted[r["ranks"]][0] * 1e3 / r["step_median_ms"] - 1 for r in series_rows
            if r["step_median_ms"] and r["ranks"] in predicted}


def projected_efficiency(series, proj):
    """{P: efficiency of the projected step against the measured baseline}: k·T(P0)/T_proj(P),
    k = P0/P strong, 1 weak, T(P0) the series' measured step at P0. The file's efficiency is
    against the model's own one-rank step, which misses the measured one by the model's error
    there: against it a projection can seem to scale better than the measurement it comes from."""
    base = series.ok_rows[0]
    p0, t0 = base["ranks"], base["step_median_ms"] / 1e3
    # IEEE division, as the measured columns': a projected step of 0 s (a damaged file) gives inf.
    return {int(p): _div((p0 / int(p) if series.mode == "strong" else 1.0) * t0, float(t))
            for p, t in zip(proj.ranks, proj.step_s)}


def _attach_projection(series, with_projection):
    """Projected columns from the smallest-P case that has a projection, unless it misses.

    A projection fitted on a small run predicts the larger ones, which is the
    question a scaling study asks; the measured rows then test it. One that misses a
    measured point by more than PROJECTION_MAX_ERROR is withheld: a curve through
    points it does not fit would be a guess presented as a result.
    """
    if not with_projection:
        return
    case = with_projection[0]
    proj = case.projection
    fit = proj.attrs.get("fit_ranks")
    predicted = {int(p): (float(t), float(e))
                 for p, t, e in zip(proj.ranks, proj.step_s, proj.efficiency)}
    errors = projection_errors(series.rows, predicted)
    missed = {p: e for p, e in errors.items() if abs(e) > PROJECTION_MAX_ERROR}
    if missed:
        series.projection_withheld = (
            f"projection withheld: its step-time error where measured exceeds "
            f"{100 * PROJECTION_MAX_ERROR:.0f}% ("
            + ", ".join(f"P={p} {100 * e:+.0f}%" for p, e in sorted(errors.items()))
            + f"; fitted at P={fit}; docs/metrics.md#projection)")
        series.notes.append(f"{series.label}: {series.projection_withheld}")
        return
    series.projection, series.projection_case = proj, case
    series.projected_efficiency = projected_efficiency(series, proj)
    between = ({} if proj.between_hosts is None else
               {int(p): int(b) for p, b in zip(proj.ranks, proj.between_hosts)})
    for row in series.rows:
        if row["ranks"] in predicted:
            t, e = predicted[row["ranks"]]
            row.update(projected_step_ms=t * 1e3, projected_efficiency=series.projected_efficiency[row["ranks"]],
                       projection_fit_ranks=fit, projection_between_hosts=between.get(row["ranks"]))
    network = f"; network figures: {proj.network_note}" if proj.network_note else ""
    series.notes.append(f"{series.label}: projection from {case_ref(case)} "
                        f"(model {proj.attrs.get('model', '?')}, fit at P={fit}{network})")


def scaling_table(series, mode, notes=()):
    rows = [r for s in series for r in s.rows]
    speedup = "scaled speedup" if mode == "weak" else "speedup"
    # Points name their hosts once any case of the table spanned several.
    with_hosts = any((r["hosts"] or 1) > 1 for r in rows)
    columns = [
        Column("series", key_cell("series"), right=False, keep=True, words=True),
        Column("P", lambda r: point_label(r["ranks"], r["hosts"], with_hosts)),
        Column("global batch", key_cell("global_batch"), detail=2),
        Column("step ms [95% CI]", lambda r: ms_ci(r, "step_median_ms", "ci95_low_ms", "ci95_high_ms",
                                                   "ci_coverage")),
        Column("samples/s", lambda r: number(r["samples_per_s"])),
        Column(f"{speedup} [CI]", lambda r: ratio_ci(r, "speedup", "speedup_low", "speedup_high", 2), detail=4),
        Column("ideal", lambda r: ratio(r["ideal_speedup"], 2), detail=3),
        Column("efficiency [CI]", lambda r: ratio_ci(r, "efficiency", "efficiency_low",
                                                     "efficiency_high")),
    ]
    if any(r["projected_step_ms"] is not None for r in rows):
        columns += [Column("projected ms", lambda r: ms(r["projected_step_ms"]), detail=1),
                    Column("projected E", lambda r: ratio(r["projected_efficiency"]))]
    columns.append(Column("status", key_cell("status"), right=False))
    all_notes = [DEFINITIONS[mode], CI_NOTE] + ([COVERAGE_NOTE] if few_samples(rows) else [])
    if any(s.projection is not None for s in series):
        all_notes.append(PROJECTION_NOTE)
    if any(r["projection_between_hosts"] for r in rows):
        all_notes.append("a projection across hosts takes some rank counts from a within-host fit and "
                         "others from a between-host fit (the CSV's projection_between_hosts: 1 where a "
                         "point used the between-host fit); each projection's note says which figures "
                         "were measured")
    all_notes += [n for s in series for n in s.notes] + list(notes)
    return Table(title=f"{mode} scaling", columns=columns, rows=rows,
                 csv_columns=CSV_COLUMNS, notes=all_notes)


def scaling_modes(cases):
    """The scaling modes that occur, in MODES order."""
    present = {c.attrs.get("scaling") for c in cases}
    return [m for m in MODES if m in present]
