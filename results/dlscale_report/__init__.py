"""dlscale_report: read dlscale/1 results files, recompute and report statistics.

Public API for scripts and end-to-end tests (needs h5py and numpy):
  load_results(path) -> ResultsFile     load_case(path, case) -> Case
  compute_stats(iter_time_s, global_batch, train_flops_per_step) -> dict
  case_stats(case) -> dict | None       recompute_case(path, case) -> dict | None
  compare_summary(recorded, recomputed) -> [str]
  check_case(case) -> [str]             check_file(path) -> [str]
  SUMMARY_KEYS, ReportError
"""

from .check import check_case, check_file, compare_summary
from .schema import SCHEMA, Case, ReportError, ResultsFile, load_case, load_results
from .stats import (SUMMARY_KEYS, case_stats, compute_stats, median, median_ci_order,
                    percentile, recompute_case, straggler_ratio)

__all__ = [
    "SCHEMA", "SUMMARY_KEYS", "Case", "ReportError", "ResultsFile",
    "load_results", "load_case", "compute_stats", "case_stats", "recompute_case",
    "median", "percentile", "median_ci_order", "straggler_ratio",
    "compare_summary", "check_case", "check_file",
]
