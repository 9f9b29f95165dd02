"""Consistency checks of a results file against its own raw samples.

The C++ side writes summary attributes; here they are compared with the
reference recomputation of stats.py, and the dataset shapes with the case
attributes. Used by `dlscale-report check` and by end-to-end tests.
"""

import math

import numpy as np

from .schema import load_results
from .stats import PHASE_SUMMARY_KEYS, SUMMARY_KEYS, case_phase_medians, case_stats

# Summation order differs between implementations (fsum here, a loop in C++),
# so equality is only expected to a few ulps times n; 1e-9 is far above that
# and far below anything that would change a reported number.
REL_TOL = 1e-9
ABS_TOL = 1e-12


def compare_summary(recorded, recomputed, rel_tol=REL_TOL, abs_tol=ABS_TOL):
    """Differences between two summary dicts, as readable lines (empty if equal)."""
    problems = []
    for key in SUMMARY_KEYS:
        if key not in recorded:
            problems.append(f"summary attribute {key} missing")
            continue
        a, b = float(recorded[key]), float(recomputed[key])
        tol = abs_tol
        if key == "step_std_s":
            # Made of the differences from the mean, the deviation inherits the mean's rounding (a
            # running sum in C++, fsum here): within rel_tol of the mean, not of itself (a few equal
            # steps of 1e15 s: 0.26 s in C++, 0 here).
            tol = max(abs_tol, rel_tol * abs(float(recomputed["step_mean_s"])))
        same = (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=rel_tol, abs_tol=tol)
        if not same:
            problems.append(f"{key} = {a!r}, recomputed {b!r}")
    return problems


def _compare_phase_medians(case, rel_tol, abs_tol):
    """<phase>_median_s are optional (newer writers, --phases only); check those present."""
    recorded = {k: case.summary[k] for k in PHASE_SUMMARY_KEYS if k in case.summary}
    if not recorded:
        return []
    recomputed = case_phase_medians(case)
    if recomputed is None:
        return [f"summary has {', '.join(recorded)} but the case has no phase_time_s"]
    problems = []
    for key, a in recorded.items():
        a, b = float(a), float(recomputed[key])
        if not math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol):
            problems.append(f"{key} = {a!r}, recomputed {b!r}")
    return problems


def exposed_allreduce_medians(case):
    """Medians over iterations of the slowest rank's and of the least rank's exposed all-reduce,
    or None without it."""
    e = case.exposed_allreduce_s
    if e is None or e.size == 0:
        return None
    return {"exposed_allreduce_median_s": float(np.median(e.max(axis=0))),
            "exposed_allreduce_least_median_s": float(np.median(e.min(axis=0)))}


def _compare_exposed(case, rel_tol, abs_tol):
    """exposed_allreduce_median_s (newer writers, P > 1) and exposed_allreduce_least_median_s
    (newer still) against their raw samples."""
    recorded = case.summary.get("exposed_allreduce_median_s")
    recomputed = exposed_allreduce_medians(case)
    if recorded is None and recomputed is None:
        return []
    if recorded is None or recomputed is None:
        return ["exposed_allreduce_median_s and exposed_allreduce_s must come together"]
    problems = []
    for key, value in recomputed.items():
        got = case.summary.get(key)
        if got is None:
            continue  # written before the least rank's was recorded
        if not math.isclose(float(got), value, rel_tol=rel_tol, abs_tol=abs_tol):
            problems.append(f"{key} = {float(got)!r}, recomputed {value!r}")
    return problems


def utilisation_of(case):
    """(mean CPU utilisation, mean busy cores) recomputed from the per-rank CPU and wall times of
    /cases/NNNN/utilisation (docs/metrics.md), or None for a case without that group."""
    u = case.utilisation
    if u is None or u.per_rank is None:
        return None
    cpu, wall = u.per_rank["cpu_time_s"], u.per_rank["wall_s"]
    threads = case.get("threads")
    return float(np.mean(cpu / (wall * threads))), float(np.mean(cpu / wall))


def _compare_utilisation(case, rel_tol, abs_tol):
    """cpu_utilisation, busy_cores and peak_share (dlscale/2) against what they are made of."""
    recomputed = utilisation_of(case)
    if recomputed is None:
        return []
    problems = []
    s = case.summary
    pairs = [("cpu_utilisation", recomputed[0]), ("busy_cores", recomputed[1])]
    if "peak_flops" in s:
        pairs.append(("peak_share", float(s["achieved_flops"]) / float(s["peak_flops"])))
    for key, b in pairs:
        a = float(s.get(key, math.nan))
        if not ((math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)):
            problems.append(f"{key} = {a!r}, recomputed {b!r}")
    return problems


def check_case(case, rel_tol=REL_TOL, abs_tol=ABS_TOL):
    """Problems found in one loaded Case, each prefixed with file and case."""
    where = f"{case.file}: case {case.name}"
    problems = []
    if case.ok:
        ranks, iterations = case.get("ranks"), case.get("iterations")
        t = case.iter_time_s
        if t is None or t.shape != (ranks, iterations):
            shape = None if t is None else t.shape
            problems.append(f"iter_time_s has shape {shape}, expected ({ranks}, {iterations})")
        if case.get("phases") == 1:
            p = case.phase_time_s
            if p is None or p.shape != (ranks, iterations, 4):
                shape = None if p is None else p.shape
                problems.append(f"phase_time_s has shape {shape}, expected ({ranks}, {iterations}, 4)")
        elif case.phase_time_s is not None:
            problems.append("phase_time_s present although phases == 0")
        e = case.exposed_allreduce_s
        if e is not None and e.shape != (ranks, iterations):
            problems.append(f"exposed_allreduce_s has shape {e.shape}, expected ({ranks}, {iterations})")
        if case.summary is None:
            problems.append("summary group missing")
        elif not problems:
            problems += compare_summary(case.summary, case_stats(case), rel_tol, abs_tol)
            problems += _compare_phase_medians(case, rel_tol, abs_tol)
            problems += _compare_exposed(case, rel_tol, abs_tol)
            problems += _compare_utilisation(case, rel_tol, abs_tol)
    elif case.summary is not None:
        problems.append(f"summary group present although status is {case.status}")
    for sim in case.simulations:
        problems += [f"simulation {sim.name}: {p}" for p in check_simulation(case, sim, rel_tol)]
    return [f"{where}: {p}" for p in problems]


# dlscale-project's parts add up to its step to within rounding of seconds summed in a
# different order; 1e-9 s is far below any reported figure.
SIMULATION_ABS_TOL = 1e-9


def check_simulation(case, sim, rel_tol=REL_TOL):
    """Problems of one /cases/NNNN/simulations/KKKK against itself and its case (docs/schema.md):
    ranks ascending with 1 and the measured P among them, the parts adding up to the step, a
    sharded optimiser's all-gather within its update and other, efficiency from the steps, measured_step_s the case's step_median_s and error the simulated
    step there over it − 1."""
    problems = []
    ranks, step = sim.ranks.tolist(), sim.step_s
    if ranks != sorted(set(ranks)):
        problems.append(f"ranks {ranks} are not ascending")
    p = sim.measured_ranks
    missing = [q for q in (1, p) if q not in ranks]
    if missing:
        problems.append(f"ranks {ranks} lack P={', '.join(map(str, missing))}")
    total = sum(getattr(sim, part) for part in ("compute_s", "straggler_wait_s", "exposed_allreduce_s", "update_s"))
    worst = int(np.argmax(np.abs(total - step)))
    if not math.isclose(total[worst], step[worst], rel_tol=rel_tol, abs_tol=SIMULATION_ABS_TOL):
        problems.append(f"its parts add up to {total[worst]!r} s at P={ranks[worst]}, step_s is {step[worst]!r}")
    gather = sim.parameter_gather_s
    if gather is not None:
        # The all-gather after the last update is part of the update and other.
        outside = np.flatnonzero(~np.isfinite(gather) | (gather < -SIMULATION_ABS_TOL)
                                 | (gather > sim.update_s * (1 + rel_tol) + SIMULATION_ABS_TOL))
        if outside.size:
            i = int(outside[0])
            problems.append(f"parameter_gather_s {gather[i]!r} at P={ranks[i]} is not within 0 and update_s "
                            f"{sim.update_s[i]!r}")
    if 1 in ranks:
        base = step[ranks.index(1)]
        strong = sim.attrs.get("scaling") == "strong"
        for i, q in enumerate(ranks):
            want = base / (q * step[i]) if strong else base / step[i]
            if not math.isclose(sim.efficiency[i], want, rel_tol=rel_tol, abs_tol=ABS_TOL):
                problems.append(f"efficiency {sim.efficiency[i]!r} at P={q}, its steps give {want!r}")
                break
    measured = sim.attrs.get("measured_step_s")
    recorded = (case.summary or {}).get("step_median_s")
    if measured is not None and recorded is not None and not math.isclose(measured, recorded, rel_tol=rel_tol):
        problems.append(f"measured_step_s = {measured!r}, the case's step_median_s is {recorded!r}")
    error = sim.attrs.get("error")
    if error is not None and measured and p in ranks:
        want = step[ranks.index(p)] / measured - 1
        if not math.isclose(error, want, rel_tol=rel_tol, abs_tol=ABS_TOL):
            problems.append(f"error = {error!r}, its step at P={p} over measured_step_s gives {want!r}")
    return problems


def damaged_lines(results):
    """One line per group of a loaded ResultsFile that was skipped as damaged."""
    return [f"{results.path}: {d.kind} {d.name}: damaged, not read ({d.reason})" for d in results.damaged]


def check_file(path, rel_tol=REL_TOL, abs_tol=ABS_TOL):
    """Problems found in every case of a results file, and its damaged groups (empty list:
    consistent)."""
    results = load_results(path)
    problems = []
    for case in results.cases:
        problems += check_case(case, rel_tol, abs_tol)
    return problems + damaged_lines(results)
