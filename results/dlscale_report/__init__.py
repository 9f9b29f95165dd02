"""dlscale_report: read dlscale/1 results files, recompute and report statistics.

Public API for scripts and end-to-end tests (needs h5py and numpy; the plots
and the HTML report also need matplotlib):
  load_results(path) -> ResultsFile     load_case(path, case) -> Case
  load_study(paths) -> Study            (several files as one scaling study)
  compute_stats(iter_time_s, global_batch, train_flops_per_step) -> dict
  case_stats(case) -> dict | None       recompute_case(path, case) -> dict | None
  phase_medians(phase_time_s) -> dict   step_times(iter_time_s) -> [float]
  compare_summary(recorded, recomputed) -> [str]
  check_case(case) -> [str]             check_file(path) -> [str]
  build_series(cases, mode)             build_panels(cases, "threads" | "batch")
  mann_whitney(x, y) -> MWU
  SUMMARY_KEYS, ReportError

Modules, one role each: schema (HDF5 reading), stats (definitions), check,
study (several files, grouping keys), tables (text/CSV/HTML), summary,
scaling, sweeps, phases, ranks, allreduce, compare + mannwhitney, plots
(matplotlib), views (every analysis: its subcommand and its report sections), report (the HTML
page), cli; _version (version and commit).

The names below are imported on first use (PEP 562), not when the package is: the command
line (cli, _version) must start without h5py and numpy, to print --version and to name
the missing modules instead of failing with a traceback.
"""

import importlib

from ._version import __version__

# name -> module of the package that defines it
_EXPORTS = {
    "check_case": "check", "check_file": "check", "compare_summary": "check",
    "MWU": "mannwhitney", "mann_whitney": "mannwhitney",
    "build_series": "scaling",
    "SCHEMA": "schema", "AccuracyCase": "schema", "AllReduce": "schema", "Case": "schema",
    "Projection": "schema", "Repeat": "schema", "Simulation": "schema", "shown_simulations": "schema",
    "ReportError": "schema", "ResultsFile": "schema", "load_case": "schema",
    "load_results": "schema",
    "PHASE_SUMMARY_KEYS": "stats", "PHASES": "stats", "SUMMARY_KEYS": "stats",
    "case_phase_medians": "stats", "case_stats": "stats", "compute_stats": "stats",
    "median": "stats", "median_ci_order": "stats", "percentile": "stats",
    "phase_medians": "stats", "rank_medians": "stats", "recompute_case": "stats",
    "step_times": "stats", "straggler_ratio": "stats",
    "Study": "study", "load_study": "study",
    "build_panels": "sweeps",
}

__all__ = [
    "SCHEMA", "SUMMARY_KEYS", "PHASES", "PHASE_SUMMARY_KEYS", "Case", "AccuracyCase", "Repeat", "Projection",
    "Simulation", "shown_simulations", "AllReduce",
    "ReportError", "ResultsFile", "Study", "MWU",
    "load_results", "load_case", "load_study", "compute_stats", "case_stats", "recompute_case",
    "median", "percentile", "median_ci_order", "straggler_ratio", "step_times", "rank_medians",
    "phase_medians", "case_phase_medians", "compare_summary", "check_case", "check_file",
    "build_series", "build_panels", "mann_whitney", "__version__",
]


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value            # later lookups do not come here again
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
