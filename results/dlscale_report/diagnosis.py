"""Why a scaling series loses efficiency: the gap between the ideal and the measured step at each
rank count, split into named parts measured from the phases (docs/metrics.md, "Scaling diagnosis").

Per iteration i of a case run with --phases (fb[r, i] = forward + backward of rank r; every rank
starts the step together after a barrier, and the all-reduce ends on every rank when the last
rank has arrived at it):

  step      T_i = max_r iter_time_s[r, i]
  compute   C_i = mean_r fb[r, i]
  straggler S_i = max_r fb[r, i] - C_i        how long the average rank waits for the last one
  all-reduce A_i = max_r (fb[r, i] + allreduce[r, i]) - max_r fb[r, i]: from the last rank's
                  arrival to the last rank's result, the reduction itself; the earlier ranks'
                  longer all-reduce phases are waiting, in S_i. Over a network the ranks get
                  their results at different times (one direction of a link is slower, say):
                  the reduction is done when the last has it.
  other     O_i = T_i - max_r (fb[r, i] + allreduce[r, i])  the update, and ranks finishing it at
                  different times

so T_i = C_i + S_i + A_i + O_i. A case's parts are those of its median iteration (the mean of the
two middle ones for an even count), so they add up to its step median exactly. With k = P0/P
(strong scaling) or 1 (weak), the ideal step is k·T(P0) and each lost part is X(P) - k·X(P0);
the four add up to the gap T(P) - k·T(P0), and divided by T(P) to 1 - E(P).

Across hosts (issue 32) each point keeps the hosts its ranks spanned: its sentence names them
("at P=4 on 2 hosts, ..."), and the first point of a series on several hosts says when the
efficiency fell there ("...: the step crossed the network"). The projection's text quotes the
file's network_note: which network each projected rank count took its fit from.
"""

from dataclasses import dataclass, field

import numpy as np

from .conditions import allreduce_text, bucketed, contention_text, kernel_text
from .scaling import build_series, point_label, scaling_modes
from .study import hosts_text

PARTS = ("compute", "straggler", "allreduce", "other")
# What the loss in each part is called (the part itself, in the step: the second name).
LOSS_NAMES = {"compute": "compute inflation", "straggler": "straggler wait",
              "allreduce": "exposed all-reduce", "other": "update and other"}
STEP_NAMES = {"compute": "forward+backward", "straggler": "straggler wait",
              "allreduce": "exposed all-reduce", "other": "update and other"}
# Rank counts the sentence quotes the projection at, where the projection has them.
PROJECT_TO = (4, 8)


def iteration_parts(iter_time_s, phase_time_s):
    """The step of every iteration split into PARTS: dict of arrays [iterations], plus "step"."""
    t = np.asarray(iter_time_s, dtype=float)
    ph = np.asarray(phase_time_s, dtype=float)
    fb = ph[:, :, 0] + ph[:, :, 1]
    slowest = fb.max(axis=0)
    reduced = (fb + ph[:, :, 2]).max(axis=0)
    step = t.max(axis=0)
    compute = fb.mean(axis=0)
    return {"step": step, "compute": compute, "straggler": slowest - compute,
            "allreduce": reduced - slowest, "other": step - reduced}


def median_iteration(parts):
    """The parts of the median iteration by step time (the mean of the two middle ones for an
    even count): they add up to the step median."""
    order = np.argsort(parts["step"], kind="stable")
    n = len(order)
    middle = order[[(n - 1) // 2, n // 2]]
    return {k: float(np.mean(v[middle])) for k, v in parts.items()}


def case_parts(case):
    """median_iteration of an ok case with phases, else None."""
    if not case.ok or case.phase_time_s is None or case.iter_time_s is None \
            or case.iter_time_s.size == 0:
        return None
    return median_iteration(iteration_parts(case.iter_time_s, case.phase_time_s))


@dataclass
class Point:
    """The diagnosis at one rank count P of a series."""
    ranks: int
    step_s: float
    ideal_s: float
    parts: dict                 # PARTS of the step at P, seconds
    lost: dict                  # PARTS' share of the gap, seconds: X(P) - k·X(P0)
    hosts: int = 1              # hosts the ranks spanned
    crossed: str = ""           # where the series first crossed hosts here and lost efficiency: why

    @property
    def gap_s(self):
        return self.step_s - self.ideal_s

    @property
    def efficiency(self):
        return self.ideal_s / self.step_s


@dataclass
class Diagnosis:
    label: str
    mode: str
    workload: str = ""
    driver: str = ""
    placement: str = "packed"
    baseline_ranks: object = None
    baseline_hosts: int = 1
    baseline_parts: dict = None
    points: list = field(default_factory=list)   # P > P0
    projection: str = ""
    note: str = ""                               # why there is no diagnosis, when there is none
    conditions: list = field(default_factory=list)  # "P=2: contended: ...", what shaped the cases

    def sentences(self):
        """One line per rank count, or the note; then one per condition of a case."""
        head = f"{self.label} ({self.mode})"
        if self.note:
            lines = [f"{head}: {self.note}"]
        else:
            lines = [f"{head}: {point_sentence(p)}" + (f"; {p.crossed}" if p.crossed else "") + (
                f"; {self.projection}" if self.projection and p is self.points[-1] else "")
                for p in self.points]
        return lines + [f"{head}: {c}" for c in self.conditions]


def where(ranks, hosts):
    """ "P=4", or "P=4 on 2 hosts" where the ranks spanned several."""
    return f"P={ranks}" + (f" on {hosts_text(hosts)}" if hosts > 1 else "")


def point_sentence(p):
    """"at P=2, efficiency 0.71: 22% exposed all-reduce, 5% straggler wait, ..." (percent of the
    step at P, largest first: together 1 - E); "at P=4 on 2 hosts, ..." across hosts."""
    shares = sorted(PARTS, key=lambda k: -abs(p.lost[k]))
    # round() first: a part of -0.3% reads "0%", not "-0%".
    text = ", ".join(f"{round(100 * p.lost[k] / p.step_s):d}% {LOSS_NAMES[k]}" for k in shares)
    return f"at {where(p.ranks, p.hosts)}, efficiency {p.efficiency:.2f}: {text}"


def crossing_text(before_ranks, before_hosts, before_efficiency, point):
    """The sentence for the point where a series first leaves one host, when efficiency falls
    there (to two decimals), else ""."""
    if round(point.efficiency, 2) >= round(before_efficiency, 2):
        return ""
    return (f"efficiency falls from {before_efficiency:.2f} at P={before_ranks} ({hosts_text(before_hosts)}) "
            f"to {point.efficiency:.2f} at P={point.ranks} ({hosts_text(point.hosts)}): "
            f"the step crossed the network")


def _projection_text(series):
    proj = series.projection
    if proj is None:
        return series.projection_withheld
    predicted = {int(p): float(e) for p, e in zip(proj.ranks, proj.efficiency)}
    measured = max(r["ranks"] for r in series.ok_rows)
    targets = [p for p in PROJECT_TO if p in predicted and p > measured]
    if not targets:
        return ""
    errors = [f"P={r['ranks']} {100 * (r['projected_step_ms'] / r['step_median_ms'] - 1):+.0f}%"
              for r in series.ok_rows if r["projected_step_ms"] is not None]
    fit = proj.attrs.get("fit_ranks")
    text = "projected efficiency " + ", ".join(f"{predicted[p]:.2f} at P={p}" for p in targets)
    text += f" (fitted at P={fit}"
    if errors:
        text += "; its step-time error where measured: " + ", ".join(errors)
    if proj.network_note:
        text += f"; network figures: {proj.network_note}"
    return text + ")"


def diagnose_series(series):
    first = series.rows[0]
    d = Diagnosis(label=series.label, mode=series.mode, workload=first["workload"],
                  driver=first["driver"], placement=first["placement"])
    # Buckets decide how much of the all-reduce is exposed, and contention and the kernel's share
    # shape the step times the diagnosis splits: say so; the buckets once where every rank count
    # reduced them alike.
    reductions = {row["ranks"]: allreduce_text(case) for row, case in zip(series.rows, series.cases)
                  if bucketed(case)}
    if len(set(reductions.values())) == 1:
        d.conditions = list(set(reductions.values()))
    else:
        d.conditions = [f"P={p}: {text}" for p, text in reductions.items()]
    d.conditions += [f"P={row['ranks']}: {text}" for row, case in zip(series.rows, series.cases)
                     for text in (contention_text(case), kernel_text(case)) if text]
    ok = [(row, case) for row, case in zip(series.rows, series.cases) if row["speedup"] is not None]
    if len({row["ranks"] for row, _ in ok}) < 2:
        have = ", ".join(f"P={row['ranks']}" for row, _ in ok) or "no rank count"
        d.note = f"needs two rank counts with ok cases (has {have})"
        return d
    base_row, base_case = ok[0]
    base = case_parts(base_case)
    if base is None:
        d.note = f"needs phases (run with --phases): P={base_row['ranks']} has none"
        return d
    p0 = base_row["ranks"]
    d.baseline_ranks, d.baseline_parts, d.baseline_hosts = p0, base, base_row["hosts"] or 1
    missing = []
    before = (p0, d.baseline_hosts, 1.0)          # the point before: P, hosts, efficiency
    crossed = d.baseline_hosts > 1
    for row, case in ok[1:]:
        parts = case_parts(case)
        if parts is None:
            missing.append(f"P={row['ranks']}")
            continue
        k = p0 / row["ranks"] if series.mode == "strong" else 1.0
        point = Point(ranks=row["ranks"], step_s=parts["step"], ideal_s=k * base["step"],
                      parts={x: parts[x] for x in PARTS},
                      lost={x: parts[x] - k * base[x] for x in PARTS}, hosts=row["hosts"] or 1)
        if not crossed and point.hosts > 1:
            # The first point on several hosts: its all-reduce went over the network.
            crossed = True
            point.crossed = crossing_text(*before, point)
        before = (point.ranks, point.hosts, point.efficiency)
        d.points.append(point)
    if not d.points:
        d.note = f"needs phases (run with --phases): {', '.join(missing)} has none"
        return d
    d.projection = _projection_text(series)
    return d


def diagnose(cases):
    """A Diagnosis per scaling series of every mode present, in mode order."""
    out = []
    for mode in scaling_modes(cases):
        series, _ = build_series(cases, mode)
        out += [diagnose_series(s) for s in series]
    return out


def diagnosis_lines(diagnoses):
    """The sentences of every series: those with a diagnosis first."""
    done = [line for d in diagnoses if not d.note for line in d.sentences()]
    return done + [line for d in diagnoses if d.note for line in d.sentences()]


CSV_COLUMNS = ("series", "scaling", "ranks", "hosts", "baseline_ranks", "baseline_hosts", "step_ms", "ideal_ms", "gap_ms",
               "efficiency") + tuple(f"{k}_ms" for k in PARTS) + tuple(
               f"{k}_lost_ms" for k in PARTS) + tuple(f"{k}_lost_share" for k in PARTS)


def diagnosis_rows(diagnoses):
    rows = []
    for d in diagnoses:
        for p in d.points:
            row = {"series": d.label, "scaling": d.mode, "ranks": p.ranks, "hosts": p.hosts,
                   "baseline_ranks": d.baseline_ranks, "baseline_hosts": d.baseline_hosts,
                   "step_ms": p.step_s * 1e3,
                   "ideal_ms": p.ideal_s * 1e3, "gap_ms": p.gap_s * 1e3,
                   "efficiency": p.efficiency}
            for k in PARTS:
                row[f"{k}_ms"] = p.parts[k] * 1e3
                row[f"{k}_lost_ms"] = p.lost[k] * 1e3
                # Share of the step at P: the parts add up to 1 - efficiency.
                row[f"{k}_lost_share"] = p.lost[k] / p.step_s
            rows.append(row)
    return rows


def diagnosis_table(rows):
    from .tables import Column, Table, key_cell, ms, ratio

    with_hosts = any(r["hosts"] > 1 or r["baseline_hosts"] > 1 for r in rows)
    columns = [Column("series", key_cell("series"), right=False),
               Column("scaling", key_cell("scaling"), right=False),
               Column("P", lambda r: point_label(r["ranks"], r["hosts"], with_hosts)),
               Column("step ms", lambda r: ms(r["step_ms"])),
               Column("ideal ms", lambda r: ms(r["ideal_ms"])),
               Column("gap ms", lambda r: ms(r["gap_ms"])),
               Column("efficiency", lambda r: ratio(r["efficiency"]))]
    columns += [Column(f"{LOSS_NAMES[k]} ms (% of step)",
                       (lambda k: lambda r: f"{ms(r[f'{k}_lost_ms'])} "
                                            f"({100 * r[f'{k}_lost_share']:.0f}%)")(k))
                for k in PARTS]
    notes = ["each part: its time in the median iteration at P minus k times the same at the "
             "baseline P0 (k = P0/P strong, 1 weak); the parts add up to the gap = step - ideal, "
             "and their shares of the step to 1 - efficiency (docs/metrics.md, Scaling diagnosis)"]
    return Table(title="scaling diagnosis", columns=columns, rows=rows, csv_columns=CSV_COLUMNS,
                 notes=notes)
