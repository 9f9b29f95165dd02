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

Across hosts each point keeps the hosts its ranks spanned: its sentence names them
("at P=4 on 2 hosts, ..."), and the first point of a series on several hosts says when the
efficiency fell there ("...: the step crossed the network"). The projection's text quotes the
file's network_note: which network each projected rank count took its fit from.
"""

import math
from dataclasses import dataclass, field

import numpy as np

from .conditions import allreduce_text, bucketed, contention_text, kernel_text
from .scaling import build_series, point_label, scaling_modes
from .study import hosts_text
from .tables import Column, Table, common_words, ms, percent, ratio

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
    global_batch: int = None    # B
    noise_factor: float = None  # 1 + B_simple/B where the case records a gradient noise scale
    predicted_statistical: float = None  # (1 + B_simple/B0)/(1 + B_simple/B), B_simple of this case

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
    projection: dict = field(default_factory=dict)  # P -> (efficiency, above the measured), _projection
    projection_errors: dict = field(default_factory=dict)  # P -> the projected step's error there
    projection_fit: object = None                # the rank count the projection was fitted at
    projection_withheld: str = ""                # why the file's projection is not shown
    network_note: str = ""                       # which network figures the projection took
    note: str = ""                               # why there is no diagnosis, when there is none
    conditions: list = field(default_factory=list)  # "P=2: contended: ...", what shaped the cases

    def sentences(self):
        """One line per rank count, or the note; then one per condition of a case."""
        head = f"{self.label} ({self.mode})"
        if self.note:
            lines = [f"{head}: {self.note}"]
        else:
            lines = [f"{head}: {point_sentence(p)}" + (f"; {p.crossed}" if p.crossed else "") + (
                f"; {self.projection_sentence()}" if self.projection and p is self.points[-1] else "")
                for p in self.points]
        return lines + [f"{head}: {c}" for c in self.conditions]

    def projection_sentence(self):
        errors = ", ".join(f"P={p} {percent(e, signed=True)}" for p, e in sorted(self.projection_errors.items()))
        network = f"; network figures: {self.network_note}" if self.network_note else ""
        return (f"projected efficiency {projected_text(self.projection)} (fitted at P={self.projection_fit}"
                + (f"; its step-time error where measured: {errors}" if errors else "") + f"{network})")


def where(ranks, hosts):
    """ "P=4", or "P=4 on 2 hosts" where the ranks spanned several."""
    return f"P={ranks}" + (f" on {hosts_text(hosts)}" if hosts > 1 else "")


def point_sentence(p):
    """"at P=2, efficiency 0.71: 3% compute inflation, 5% straggler wait, 22% exposed all-reduce,
    1% update and other" (percent of the step at P, in PARTS order: together 1 - E); "at P=4 on 2
    hosts, ..." across hosts."""
    text = ", ".join(f"{_share(p.lost[k] / p.step_s)}% {LOSS_NAMES[k]}" for k in PARTS)
    return f"at {where(p.ranks, p.hosts)}, efficiency {p.efficiency:.2f}: {text}"


def crossing_text(before_ranks, before_hosts, before_efficiency, point):
    """The sentence for the point where a series first leaves one host, when efficiency falls
    there (to two decimals), else ""."""
    if round(point.efficiency, 2) >= round(before_efficiency, 2):
        return ""
    return (f"efficiency falls from {before_efficiency:.2f} at P={before_ranks} ({hosts_text(before_hosts)}) "
            f"to {point.efficiency:.2f} at P={point.ranks} ({hosts_text(point.hosts)}): "
            f"the step crossed the network")


def _projection(series):
    """(projected, errors) of the series' projection: {P: (efficiency, above the last measured
    one)} at the PROJECT_TO rank counts beyond the measured ones, and {P: relative error of the
    projected step} where measured; ({}, {}) without a projection or one beyond them."""
    if series.projection is None:
        return {}, {}
    predicted = series.projected_efficiency
    last = series.ok_rows[-1]
    targets = [p for p in PROJECT_TO if p in predicted and p > last["ranks"]]
    if not targets:
        return {}, {}
    errors = {r["ranks"]: r["projected_step_ms"] / r["step_median_ms"] - 1
              for r in series.ok_rows if r["projected_step_ms"] is not None}
    return {p: (predicted[p], round(predicted[p], 2) > round(last["efficiency"], 2)) for p in targets}, errors


def projected_text(projected, with_ranks=True):
    """"0.90 at P=4, 0.93* at P=8" ("*": above the last measured efficiency), or "0.90/0.93*"."""
    cells = [f"{e:.2f}{'*' if above else ''}" for e, above in projected.values()]
    if not with_ranks:
        return "/".join(cells)
    return ", ".join(f"{c} at P={p}" for c, p in zip(cells, projected))


def _add_noise(point, case, base_case):
    """What the case's gradient noise scale says of its global batch: the factor 1 + B_simple/B on
    the steps to a target, and the statistical factor it predicts over the baseline's batch
    (docs/metrics.md, "The gradient noise scale")."""
    from .time_to_target import predicted_statistical_factor
    point.global_batch = case.get("global_batch")
    noise = getattr(case, "noise", None)
    simple = (noise or {}).get("simple")
    if simple is not None and math.isfinite(simple) and point.global_batch:
        point.noise_factor = 1 + simple / point.global_batch
        point.predicted_statistical = predicted_statistical_factor(simple, point.global_batch,
                                                                   base_case.get("global_batch"))


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
        _add_noise(point, case, base_case)
        if not crossed and point.hosts > 1:
            # The first point on several hosts: its all-reduce went over the network.
            crossed = True
            point.crossed = crossing_text(*before, point)
        before = (point.ranks, point.hosts, point.efficiency)
        d.points.append(point)
    if not d.points:
        d.note = f"needs phases (run with --phases): {', '.join(missing)} has none"
        return d
    d.projection, d.projection_errors = _projection(series)
    d.projection_withheld = series.projection_withheld
    if d.projection:
        d.projection_fit = series.projection.attrs.get("fit_ranks")
        d.network_note = series.projection.network_note or ""
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
               f"{k}_lost_ms" for k in PARTS) + tuple(f"{k}_lost_share" for k in PARTS) + (
               "global_batch", "noise_steps_factor", "predicted_statistical_factor")


def diagnosis_notes(diagnoses):
    """The diagnosis table's notes: why a series has no diagnosis; what shaped the cases, each
    text once with the series it applies to; how the projections were made, once. Series are
    named by the words that tell them apart (those all of them share are said once)."""
    done = [d for d in diagnoses if not d.note]
    common = set(common_words([d.label for d in done])) if len(done) > 1 else set()

    def name(d):
        return " ".join(w for w in d.label.split() if w not in common) + f" ({d.mode})"

    notes = [f"{name(d)}: {d.note}" for d in diagnoses if d.note]
    # Where a series first left its host and lost efficiency there.
    notes += [f"{name(d)}: {p.crossed}" for d in done for p in d.points if p.crossed]
    said = {}
    for d in done:
        for c in d.conditions:
            said.setdefault(c, []).append(name(d))
    for text, where_ in said.items():
        notes.append(f"{text} ({'every series' if len(where_) == len(done) > 1 else '; '.join(where_)})")
    projected = [d for d in done if d.projection]
    if projected:
        fits = sorted({str(d.projection_fit) for d in projected})
        notes.append(f"projected E: the step projected from a fit at P={', '.join(fits)} (the file's "
                     "/projection), its efficiency against the measured step at P0; proj. err: the "
                     "projected step against the measured one at P; *: above the last measured "
                     "efficiency, the projected step there being below the measured one "
                     "(docs/metrics.md#projection)")
    notes += [f"{name(d)}: {d.projection_withheld}" for d in done if d.projection_withheld]
    networks = sorted({d.network_note for d in projected if d.network_note})
    notes += [f"projections' network figures: {n}" for n in networks]
    return notes


def diagnosis_rows(diagnoses):
    rows = []
    for d in diagnoses:
        for p in d.points:
            row = {"series": d.label, "scaling": d.mode, "ranks": p.ranks, "hosts": p.hosts,
                   "baseline_ranks": d.baseline_ranks, "baseline_hosts": d.baseline_hosts,
                   "step_ms": p.step_s * 1e3,
                   "ideal_ms": p.ideal_s * 1e3, "gap_ms": p.gap_s * 1e3,
                   "efficiency": p.efficiency, "projection": d.projection if p is d.points[-1] else {},
                   "projection_error": d.projection_errors.get(p.ranks), "global_batch": p.global_batch,
                   "noise_steps_factor": p.noise_factor, "predicted_statistical_factor": p.predicted_statistical}
            for k in PARTS:
                row[f"{k}_ms"] = p.parts[k] * 1e3
                row[f"{k}_lost_ms"] = p.lost[k] * 1e3
                # Share of the step at P: the parts add up to 1 - efficiency.
                row[f"{k}_lost_share"] = p.lost[k] / p.step_s
            rows.append(row)
    return rows


def study_diagnosis_table(diagnoses, noise, spread_note=True):
    """The diagnosis table of a study: its rows and notes, the parts within the study's
    run-to-run spread (noise.Noise) marked, and the spread's sentence among the notes unless
    the caller says it elsewhere."""
    notes = diagnosis_notes(diagnoses)
    if spread_note and noise.repeats:
        notes.append(noise.summary())
    return diagnosis_table(diagnosis_rows(diagnoses), notes, noise.spread)


# The parts' columns of the diagnosis table, in PARTS order.
PART_HEADERS = {"compute": "compute", "straggler": "straggler", "allreduce": "all-reduce",
                "other": "other"}


def diagnosis_table(rows, notes=(), spread=None):
    """The diagnosis as a table: per series and rank count the efficiency and each part's loss in
    percent of the step, in one fixed order, and the projection at the series' last point; the
    times in ms are detail (CSV, --wide)."""
    with_hosts = any(r["hosts"] > 1 or r["baseline_hosts"] > 1 for r in rows)
    columns = [Column("series", lambda r: f"{r['series']} {r['scaling']}", right=False, keep=True, words=True),
               Column("P", lambda r: point_label(r["ranks"], r["hosts"], with_hosts)),
               Column("E", lambda r: ratio(r["efficiency"], 2))]
    columns += [Column(PART_HEADERS[k], (lambda k: lambda r: _share(r[f"{k}_lost_share"], spread))(k))
                for k in PARTS]
    targets = {tuple(r["projection"]) for r in rows if r["projection"]}
    if targets:
        columns.append(Column("proj. err", lambda r: "" if r["projection_error"] is None
                              else percent(r["projection_error"], signed=True), detail=1))
        # One rank count per projected column where every series projects to the same ones.
        uniform = len(targets) == 1
        header = f"proj. E P={'/'.join(str(p) for p in next(iter(targets)))}" if uniform else "projected E"
        columns.append(Column(header, lambda r: projected_text(r["projection"], not uniform),
                              right=False))
    if any(r["noise_steps_factor"] is not None for r in rows):
        columns += [Column("B", lambda r: str(r["global_batch"]), detail=1),
                    Column("1 + B_simple/B", lambda r: ratio(r["noise_steps_factor"], 2)
                           if r["noise_steps_factor"] is not None else "-", detail=1),
                    Column("pred. stat. x", lambda r: ratio(r["predicted_statistical_factor"], 2)
                           if r["predicted_statistical_factor"] is not None else "-", detail=1)]
        all_noise = ("B: the global batch; 1 + B_simple/B: the factor by which the gradient noise multiplies "
                     "the steps to a target at B; pred. stat. x: the steps to target at P0's batch over those at "
                     "P's, (1 + B_simple/B0)/(1 + B_simple/B) from the case's noise scale (docs/metrics.md, "
                     "The gradient noise scale): what the step-time efficiency leaves out of time to train")
    else:
        all_noise = None
    columns += [Column("step ms", lambda r: ms(r["step_ms"]), detail=2),
                Column("ideal ms", lambda r: ms(r["ideal_ms"]), detail=2),
                Column("gap ms", lambda r: ms(r["gap_ms"]), detail=2)]
    all_notes = ["E: efficiency; compute (inflation), straggler (wait), all-reduce (exposed), other "
                 "(update and the rest): the time lost to each part in percent of the step at P, its "
                 "time in the median iteration at P minus k times the same at the baseline P0 (k = "
                 "P0/P strong, 1 weak); together 1 - E (docs/metrics.md, Scaling diagnosis)"]
    if all_noise:
        all_notes.append(all_noise)
    if spread is not None:
        all_notes.append(f"~: within the study's run-to-run spread ({100 * spread:.1f}%), not told apart "
                         "from noise")
    all_notes += list(notes)
    return Table(title="scaling diagnosis: percent of the step lost to each part", columns=columns, rows=rows, csv_columns=CSV_COLUMNS,
                 notes=all_notes)


def _share(share, spread=None):
    """A part's share of the step in whole percent, "~" before it where it is within the
    run-to-run spread."""
    text = percent(share)[:-1]
    return f"~{text}" if spread is not None and abs(share) < spread else text
