"""Case statistics recomputed from raw samples.

These are the reference definitions shared with the C++ side, which writes
the same numbers into /cases/NNNN/summary; check.py compares the two. The
code is written out in plain Python (no numpy statistics) so that every step
of each definition is visible and matches the documented formula.
"""

import math
from fractions import Fraction

import numpy as np

from .schema import ReportError, load_case

# Attribute names of the summary group, in the order the C++ side writes them (its field table
# kStepSummary in suite/record/case_fields.cpp; tests/unit/test_schema.cpp checks that they agree).
SUMMARY_KEYS = (
    "step_median_s", "step_p05_s", "step_p95_s", "step_mean_s", "step_std_s",
    "step_cv", "ci95_low_s", "ci95_high_s", "ci_coverage", "samples_per_s",
    "achieved_flops", "straggler_ratio",
)


def _div(a, b):
    # Degenerate samples (zero times) must not crash a report; IEEE semantics.
    if b == 0:
        return math.nan if a == 0 else math.copysign(math.inf, a)
    return a / b


def _sum(values):
    """math.fsum (correctly rounded), or where that overflows the IEEE sum: inf of the sign."""
    try:
        return math.fsum(values)
    except OverflowError:
        return sum(values)


def mean(values):
    """The arithmetic mean, kept within the values' minimum and maximum: dividing their correctly
    rounded sum can round a mean of equal values just past them, and a sum past the largest float
    would be inf, though no mean of floats is."""
    x = [float(v) for v in values]
    if not x:
        raise ValueError("mean of no samples")
    try:
        m = math.fsum(x) / len(x)
    except OverflowError:
        m = math.fsum(v / len(x) for v in x)
    return min(max(m, min(x)), max(x))


def median(values):
    """The usual median: mean of the two middle values when n is even."""
    x = sorted(values)
    n = len(x)
    if n == 0:
        raise ValueError("median of no samples")
    mid = n // 2
    return x[mid] if n % 2 else (x[mid - 1] + x[mid]) / 2


def percentile(sorted_x, q):
    """Linear interpolation, same as numpy.percentile(x, q) (default method).

    h = (n-1)*q/100, value = x[floor h] + (h - floor h)*(x[floor h + 1] - x[floor h]).
    """
    n = len(sorted_x)
    if n == 0:
        raise ValueError("percentile of no samples")
    h = (n - 1) * q / 100
    lo = math.floor(h)
    if lo + 1 >= n:                       # h == n-1: the maximum, nothing above it
        return sorted_x[n - 1]
    return sorted_x[lo] + (h - lo) * (sorted_x[lo + 1] - sorted_x[lo])


def median_ci_order(n, level=0.95):
    """Order statistic k and coverage of the distribution-free CI of the median.

    coverage(k) = 1 - 2*P(B <= k-1), B ~ Binomial(n, 1/2). Returns the largest
    k in 1..floor((n+1)/2) with coverage(k) >= level, or k = 1 when none
    qualifies (n <= 5 at 95%). Binomial sums are kept as exact integers
    (scaled by 2^n) so the threshold test cannot suffer from rounding.
    """
    if n < 1:
        raise ValueError("confidence interval of no samples")
    total = 1 << n                        # 2^n
    # Exact 1 - level (e.g. 1/20): a float 1 - 0.95 is not exactly 0.05.
    alpha = 1 - Fraction(str(level))
    num, den = alpha.numerator, alpha.denominator
    best_k, best_cdf = 1, 1               # cdf(k) = sum_{j<k} C(n, j); cdf(1) = C(n, 0)
    cdf, term = 0, 1                      # term = C(n, k-1)
    for k in range(1, (n + 1) // 2 + 1):
        cdf += term
        term = term * (n - k + 1) // k
        # coverage >= level  <=>  2*cdf/2^n <= 1-level  <=>  2*cdf*den <= num*2^n
        if 2 * cdf * den > num * total:
            break                         # coverage only shrinks as k grows
        best_k, best_cdf = k, cdf
    # Integer true division is correctly rounded in Python, even for huge n.
    return best_k, (total - 2 * best_cdf) / total


def straggler_ratio(iter_time_s):
    """Slowest rank's median iteration time over the median of per-rank medians."""
    per_rank = rank_medians(iter_time_s)
    typical = median(per_rank)
    # 1 where the median rank's median is 0 (or less), as dlscale records it
    # (suite/meters/statistics.cpp): no rank is typically slower than the others there.
    return max(per_rank) / typical if typical > 0 else 1.0


def step_times(iter_time_s):
    """T_i = max over ranks of iter_time_s[r, i]: the step time of each iteration."""
    return np.asarray(iter_time_s, dtype=np.float64).max(axis=0).tolist()


def rank_medians(iter_time_s):
    """Each rank's median over its own iterations (the straggler's is the largest)."""
    return [median(row) for row in np.asarray(iter_time_s, dtype=np.float64).tolist()]


# Last axis of phase_time_s, and the summary attributes that hold their medians.
PHASES = ("forward", "backward", "allreduce", "update")
PHASE_SUMMARY_KEYS = tuple(f"{p}_median_s" for p in PHASES)


def phase_medians(phase_time_s):
    """Per phase: median over iterations of the slowest rank's time in that phase.

    The same definition as step_median_s, applied to one phase; the C++ side
    records it as <phase>_median_s. The four need not add up to the step
    median: a different rank or iteration can be the slowest in each phase.
    """
    p = np.asarray(phase_time_s, dtype=np.float64)
    if p.ndim != 3 or p.shape[2] != len(PHASES) or p.shape[0] == 0 or p.shape[1] == 0:
        raise ValueError(f"need phase_time_s of shape [ranks>0, iterations>0, 4], got {p.shape}")
    return {f"{name}_median_s": median(p[:, :, j].max(axis=0).tolist())
            for j, name in enumerate(PHASES)}


def compute_stats(iter_time_s, global_batch, train_flops_per_step):
    """All summary statistics from raw samples iter_time_s[ranks, iterations].

    Returns a dict keyed like the summary group's attributes (SUMMARY_KEYS).
    """
    t = np.asarray(iter_time_s, dtype=np.float64)
    if t.ndim != 2 or t.shape[0] == 0 or t.shape[1] == 0:
        raise ValueError(f"need iter_time_s of shape [ranks>0, iterations>0], got {t.shape}")
    if not np.all(np.isfinite(t)):
        raise ValueError("iter_time_s contains non-finite samples")

    # A synchronous step is as slow as its slowest rank.
    steps = step_times(t)
    x = sorted(steps)
    n = len(x)
    step_median = median(x)
    # Past the largest float a sum is inf, as in dlscale's own IEEE arithmetic, where fsum and **
    # would raise OverflowError: sum() then, and (v - mean) * (v - mean).
    mean = _sum(x) / n
    std = math.sqrt(_sum([(v - mean) * (v - mean) for v in x]) / (n - 1)) if n > 1 else 0.0
    k, coverage = median_ci_order(n)
    return {
        "step_median_s": step_median,
        "step_p05_s": percentile(x, 5),
        "step_p95_s": percentile(x, 95),
        "step_mean_s": mean,
        "step_std_s": std,
        "step_cv": std / mean if mean > 0 else 0.0,   # docs/metrics.md: 0 when the mean is 0
        "ci95_low_s": x[k - 1],           # 1-based x_(k)
        "ci95_high_s": x[n - k],          # 1-based x_(n-k+1)
        "ci_coverage": coverage,
        "samples_per_s": _div(float(global_batch), step_median),
        "achieved_flops": _div(float(train_flops_per_step), step_median),
        "straggler_ratio": straggler_ratio(t),
    }


def case_stats(case):
    """Recomputed statistics of a loaded Case, or None when it has no samples.

    Only status "ok" cases carry timing samples worth summarising.
    """
    t = case.iter_time_s
    if not case.ok or t is None or t.size == 0:
        return None
    try:
        return compute_stats(t, case.get("global_batch"), case.get("train_flops_per_step"))
    except ValueError as e:
        raise ReportError(f"{case.file}: case {case.name}: {e}") from e


def case_phase_medians(case):
    """phase_medians() of a loaded Case, or None when it has no phase samples."""
    p = case.phase_time_s
    if not case.ok or p is None or p.size == 0:
        return None
    return phase_medians(p)


def recompute_case(path, case):
    """Load case `case` (name "0003" or index 3) of file `path` and recompute its stats."""
    return case_stats(load_case(path, case))
