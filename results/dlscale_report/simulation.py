"""The simulated projections dlscale-project writes (/cases/NNNN/simulations/KKKK), beside what
was measured.

For every timing case with simulations, the newest of each platform (schema.shown_simulations)
is shown: one sentence per simulation (the summary and the report), a table of its rank counts
and a figure (plots.simulation_plots). The measured points are the ok cases of the case's scaling
series (scaling.build_series: the same workload, driver, device, precision, batch as given,
threads and placement, from every file given), at their P. The error at a measured P is
simulated step / measured median − 1: at the case's own P as the file records it (attribute
error, against the case's step_median_s), at the series' other measured P from the recomputed
medians of the scaling table.
"""

import math
from dataclasses import dataclass, field

from .scaling import MODES, build_series
from .schema import SIMULATION_PARTS, shown_simulations
from .study import experiment_key
from .tables import Column, Table, key_cell, ms, ratio

# Efficiency below this is where a simulated series stops being worth its ranks; the sentence
# names the first P where the simulation falls below it.
EFFICIENCY_QUOTED = 0.5

# The diagnosis' names of the simulated parts (docs/metrics.md, Scaling diagnosis).
PART_NAMES = {"compute_s": "compute", "straggler_wait_s": "straggler wait",
              "exposed_allreduce_s": "exposed all-reduce", "update_s": "update and other"}


@dataclass
class SimulationView:
    """One shown simulation with the measured points of its case's series."""

    case: object                       # the Case that holds it
    sim: object                        # schema.Simulation
    label: str                         # the series label
    mode: str                          # weak or strong
    measured: list = field(default_factory=list)  # ok scaling rows of the series (dicts)
    errors: dict = field(default_factory=dict)    # {P: simulated / measured step - 1} where both
    own_error: float = math.nan        # at the case's own P (attribute error)
    several_files: bool = False

    @property
    def measured_ranks(self):
        return self.sim.measured_ranks or self.case.get("ranks")

    def ref(self):
        """"case 0001", or "case 0001 of X.h5" when the study has several files."""
        return f"case {self.case.name}" + (f" of {self.case.file}" if self.several_files else "")


def simulation_views(cases, several_files=False):
    """A SimulationView per shown simulation of every ok timing case, in case then KKKK order."""
    with_sims = [c for c in cases if c.ok and c.simulations]
    if not with_sims:
        return []
    series = {mode: build_series(cases, mode)[0] for mode in MODES if any(c.get("scaling") == mode for c in cases)}
    views = []
    for case in with_sims:
        key = experiment_key(case)
        mine = next((s for s in series.get(case.get("scaling"), []) if s.cases and experiment_key(s.cases[0]) == key),
                    None)
        for sim in shown_simulations(case):
            v = SimulationView(case=case, sim=sim, label=mine.label if mine else "", mode=case.get("scaling"),
                               measured=mine.ok_rows if mine else [], several_files=several_files)
            v.own_error = _own_error(case, sim)
            for r in v.measured:
                i = sim.at(r["ranks"])
                if i is None:
                    continue
                if r["ranks"] == v.measured_ranks and math.isfinite(v.own_error):
                    v.errors[r["ranks"]] = v.own_error
                elif r["step_median_ms"]:
                    v.errors[r["ranks"]] = float(sim.step_s[i]) * 1e3 / r["step_median_ms"] - 1
            if v.measured_ranks not in v.errors and math.isfinite(v.own_error):
                v.errors[v.measured_ranks] = v.own_error
            views.append(v)
    return views


def _own_error(case, sim):
    """The error at the case's own P: as recorded, else from the simulated step and the measured
    median, else nan."""
    error = sim.attrs.get("error")
    if isinstance(error, (int, float)) and math.isfinite(error):
        return float(error)
    i = sim.at(sim.measured_ranks or case.get("ranks"))
    measured = sim.attrs.get("measured_step_s") or (case.summary or {}).get("step_median_s")
    if i is None or not measured:
        return math.nan
    return float(sim.step_s[i]) / float(measured) - 1


def error_text(error):
    """"2.4% below the measured one", "3.0% above ...", "equal to ... (within 0.05%)"."""
    if round(100 * abs(error), 1) == 0:
        return "equal to the measured one (within 0.05%)"
    return f"{100 * abs(error):.1f}% {'below' if error < 0 else 'above'} the measured one"


def efficiency_points(sim):
    """[(P, efficiency, note)] the sentence quotes: the first P below EFFICIENCY_QUOTED (if any)
    and the largest P."""
    ranks, eff = sim.ranks.tolist(), sim.efficiency.tolist()
    below = next((i for i, e in enumerate(eff) if e < EFFICIENCY_QUOTED), None)
    last = len(ranks) - 1
    points = []
    if below is not None and below != last:
        points.append((ranks[below], eff[below], f"the first below {EFFICIENCY_QUOTED:g}"))
    points.append((ranks[last], eff[last], f"the first below {EFFICIENCY_QUOTED:g}" if below == last else ""))
    return points


def collectives_text(attrs):
    """What the simulation ran for the gradients: "ring all-reduce", "ring all-reduce in two levels"
    (within each node, then a ring of the nodes' first ranks), or for a sharded optimiser "ring
    reduce-scatter and all-gather (sharded optimiser)"; "" where the group does not say."""
    if not attrs.get("allreduce"):
        return ""
    if attrs.get("sharding") == "optimizer":
        return f"{attrs['allreduce']} reduce-scatter and all-gather (sharded optimiser)"
    if attrs.get("allreduce_hierarchy") == "host":
        return f"{attrs['allreduce']} all-reduce in two levels"
    return f"{attrs['allreduce']} all-reduce"


def simulation_sentence(v):
    """One line: where and how it was simulated, the efficiency at a few P, the error at the
    measured P, e.g. "mnist_fnn reference ... (weak), case 0001: simulated on
    cpu-2socket-100Gbps-nic (SimGrid 3.32.0, ring all-reduce, flow model, 3 steps; simulation 0001): P=1 to 1024,
    efficiency 0.40 at P=512 (the first below 0.5), 0.32 at P=1024; at the measured P=2 the
    simulated step (2.931 ms) is 48.6% below the measured one (5.702 ms)"."""
    sim, a = v.sim, v.sim.attrs
    how = ", ".join(x for x in (f"SimGrid {a['simgrid_version']}" if a.get("simgrid_version") else "",
                                collectives_text(a),
                                f"{a['model']} model" if a.get("model") else "",
                                f"{a['steps']} steps" if a.get("steps") else "") if x)
    head = f"{v.label} ({v.mode}), {v.ref()}" if v.label else v.ref()
    text = f"{head}: simulated on {sim.platform} ({how}; simulation {sim.name}): "
    text += f"P={int(sim.ranks[0])} to {int(sim.ranks[-1])}, efficiency " + ", ".join(
        f"{e:.2f} at P={p}" + (f" ({note})" if note else "") for p, e, note in efficiency_points(sim))
    p = v.measured_ranks
    i = sim.at(p)
    if math.isfinite(v.own_error) and i is not None:
        measured = float(sim.step_s[i]) / (1 + v.own_error)
        text += (f"; at the measured P={p} the simulated step ({1e3 * float(sim.step_s[i]):.3f} ms) is "
                 f"{error_text(v.own_error)} ({1e3 * measured:.3f} ms)")
    else:
        text += f"; no error at the measured P={p} (the file records no measured step to compare with)"
    others = [(q, e) for q, e in sorted(v.errors.items()) if q != p]
    if others:
        text += "; at the series' other measured P: " + ", ".join(f"P={q} {100 * e:+.1f}%" for q, e in others)
    return text


CSV_COLUMNS = ("file", "case", "simulation", "platform", "simgrid_version", "allreduce", "model", "steps", "seed",
               "placement", "scaling", "measured_ranks", "ranks", "step_ms", "efficiency", "compute_ms",
               "straggler_wait_ms", "exposed_allreduce_ms", "update_ms", "measured_step_ms", "error", "sharding",
               "allreduce_hierarchy", "parameter_gather_ms", "embedding_rows_bytes")


def simulation_rows(views):
    """One row per simulated rank count of every view; measured_step_ms and error where the
    series was measured at that P."""
    rows = []
    for v in views:
        sim, a = v.sim, v.sim.attrs
        measured = {r["ranks"]: r["step_median_ms"] for r in v.measured}
        for i, p in enumerate(sim.ranks.tolist()):
            row = {"file": v.case.file, "case": v.case.name, "simulation": sim.name, "platform": sim.platform,
                   "simgrid_version": a.get("simgrid_version"), "allreduce": a.get("allreduce"), "model": a.get("model"), "steps": a.get("steps"),
                   "seed": a.get("seed"), "placement": a.get("placement"), "scaling": v.mode,
                   "measured_ranks": v.measured_ranks, "ranks": p, "step_ms": float(sim.step_s[i]) * 1e3,
                   "efficiency": float(sim.efficiency[i]),
                   "measured_step_ms": None, "error": v.errors.get(p), "sharding": a.get("sharding"),
                   "allreduce_hierarchy": a.get("allreduce_hierarchy"),
                   "parameter_gather_ms": (float(sim.parameter_gather_s[i]) * 1e3
                                           if sim.parameter_gather_s is not None else None),
                   "embedding_rows_bytes": (float(sim.embedding_rows_bytes[i])
                                            if sim.embedding_rows_bytes is not None else None)}
            for part in SIMULATION_PARTS:
                row[part[:-2] + "_ms"] = float(getattr(sim, part)[i]) * 1e3
            if p == v.measured_ranks and p in v.errors:
                # The recorded error is against the case's own median: quote that one.
                row["measured_step_ms"] = row["step_ms"] / (1 + v.errors[p])
            elif p in v.errors:
                row["measured_step_ms"] = measured[p]
            rows.append(row)
    return rows


def simulation_table(rows, several_files=False):
    columns = ([Column("file", key_cell("file"), right=False, path=True)] if several_files else []) + [
        Column("case", key_cell("case"), right=False, keep=True),
        Column("sim", key_cell("simulation"), right=False),
        Column("platform", key_cell("platform"), right=False),
        Column("all-reduce", key_cell("allreduce"), right=False),
        Column("model", key_cell("model"), right=False),
        Column("P", key_cell("ranks")),
        Column("step ms", lambda r: ms(r["step_ms"])),
        Column("efficiency", lambda r: ratio(r["efficiency"])),
        Column("compute ms", lambda r: ms(r["compute_ms"])),
        Column("straggler wait ms", lambda r: ms(r["straggler_wait_ms"])),
        Column("exposed all-reduce ms", lambda r: ms(r["exposed_allreduce_ms"])),
        Column("update and other ms", lambda r: ms(r["update_ms"])),
        Column("measured ms", lambda r: ms(r["measured_step_ms"])),
        Column("error", lambda r: "-" if r["error"] is None else f"{100 * r['error']:+.1f}%"),
    ]
    notes = ["simulated by dlscale-project with SimGrid (docs/projection.md): the case's measured compute "
             "resampled per rank and step, the gradient all-reduce simulated on the platform; the newest "
             "simulation of each platform per case; step = mean over the simulated steps, efficiency against "
             "the simulated P = 1 (weak T(1)/T(P), strong T(1)/(P·T(P))); the four parts are the diagnosis' and "
             "add up to the step; measured ms = the median step of the series' ok case at that P; error = "
             "simulated / measured − 1 (at the case's own P as the file records it)"]
    return Table(title="simulated projections", columns=columns, rows=rows, csv_columns=CSV_COLUMNS,
                 notes=notes)
