"""Two-sided Mann–Whitney U test: are two sets of step times from one distribution?

Step times are skewed and heavy-tailed (a preempted iteration is 10x slower),
so a rank test suits them better than a t-test. scipy.stats.mannwhitneyu is
used when scipy is installed; otherwise the same computation is done here.
Either way the method is chosen by scipy's rule (exact distribution when one
sample has at most 8 values and there are no ties, else the normal
approximation with tie correction and continuity correction), so the p-value
does not depend on whether scipy is present.
"""

import functools
import math
from dataclasses import dataclass
from fractions import Fraction


@functools.lru_cache(maxsize=None)
def _scipy_mwu():
    """scipy.stats.mannwhitneyu, or None without scipy: imported on the first test, since importing
    scipy.stats takes about half a second and most commands never compare two sets."""
    try:
        from scipy.stats import mannwhitneyu
    except ImportError:                   # pragma: no cover - depends on the machine
        return None
    return mannwhitneyu


@dataclass
class MWU:
    u: float                   # U of the first sample: #(x > y) + #(x == y)/2
    p: float                   # two-sided p-value
    method: str                # "exact" or "asymptotic"
    implementation: str        # "scipy" or "dlscale_report"


def average_ranks(values):
    """1-based ranks, ties getting the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def tie_sizes(values):
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    return [t for t in counts.values() if t > 1]


def choose_method(n1, n2, has_ties):
    """scipy's 'auto' rule (scipy/stats/_mannwhitneyu.py: _mwu_choose_method)."""
    if n1 > 8 and n2 > 8:
        return "asymptotic"
    return "asymptotic" if has_ties else "exact"


def u_statistic(x, y):
    ranks = average_ranks(list(x) + list(y))
    n1 = len(x)
    return math.fsum(ranks[:n1]) - n1 * (n1 + 1) / 2


def exact_sf(u, n1, n2):
    """P(U >= u) under H0 for untied samples of sizes n1, n2, exactly.

    The counts of arrangements by U are the coefficients of the Gaussian
    binomial [n1+n2 choose m]_q, m = min(n1, n2) = prod_{i=1..m} (1-q^(n+i))/(1-q^i),
    built with integer polynomial steps (exact, O(m·n1·n2)).
    """
    m, n = min(n1, n2), max(n1, n2)
    size = m * n + 1
    coef = [0] * size
    coef[0] = 1
    for i in range(1, m + 1):
        # multiply by (1 - q^(n+i)), highest degree first so coef[k - s] is still old
        s = n + i
        for k in range(size - 1, s - 1, -1):
            coef[k] -= coef[k - s]
        # divide by (1 - q^i): a running sum with stride i
        for k in range(i, size):
            coef[k] += coef[k - i]
    total = sum(coef)                    # = C(n1+n2, m)
    u = math.ceil(u)
    tail = sum(coef[max(u, 0):])
    return float(Fraction(tail, total))


def asymptotic_sf(u, n1, n2, tie_sizes_):
    """P(U >= u) from the normal approximation with tie and continuity correction."""
    n = n1 + n2
    mu = n1 * n2 / 2
    tie_term = sum(t ** 3 - t for t in tie_sizes_)
    var = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if var <= 0:
        return 1.0                       # every value tied: no evidence of a difference
    z = (u - mu - 0.5) / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2))


def mann_whitney(x, y, use_scipy=True):
    """Two-sided test of samples x and y (at least one value each)."""
    x, y = [float(v) for v in x], [float(v) for v in y]
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise ValueError("Mann-Whitney U test needs at least one sample on each side")
    ties = tie_sizes(x + y)
    method = choose_method(n1, n2, bool(ties))
    if use_scipy and _scipy_mwu() is not None:
        r = _scipy_mwu()(x, y, alternative="two-sided", method=method)
        return MWU(u=float(r.statistic), p=float(r.pvalue), method=method, implementation="scipy")
    u1 = u_statistic(x, y)
    u = max(u1, n1 * n2 - u1)            # two-sided: the larger tail, doubled
    sf = exact_sf(u, n1, n2) if method == "exact" else asymptotic_sf(u, n1, n2, ties)
    return MWU(u=u1, p=min(1.0, 2 * sf), method=method, implementation="dlscale_report")


def have_scipy():
    return _scipy_mwu() is not None
