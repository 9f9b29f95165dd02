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
(matplotlib), report (the HTML page), cli.
"""

from .check import check_case, check_file, compare_summary
from .mannwhitney import MWU, mann_whitney
from .scaling import build_series
from .schema import (SCHEMA, AllReduce, Case, Projection, ReportError, ResultsFile, load_case,
                     load_results)
from .stats import (PHASE_SUMMARY_KEYS, PHASES, SUMMARY_KEYS, case_phase_medians, case_stats,
                    compute_stats, median, median_ci_order, percentile, phase_medians,
                    rank_medians, recompute_case, step_times, straggler_ratio)
from .study import Study, load_study
from .sweeps import build_panels

__all__ = [
    "SCHEMA", "SUMMARY_KEYS", "PHASES", "PHASE_SUMMARY_KEYS", "Case", "Projection", "AllReduce",
    "ReportError", "ResultsFile", "Study", "MWU",
    "load_results", "load_case", "load_study", "compute_stats", "case_stats", "recompute_case",
    "median", "percentile", "median_ci_order", "straggler_ratio", "step_times", "rank_medians",
    "phase_medians", "case_phase_medians", "compare_summary", "check_case", "check_file",
    "build_series", "build_panels", "mann_whitney",
]
