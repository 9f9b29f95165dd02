"""How far apart two measurements of one configuration land: the run-to-run spread a study
shows wherever it measured the same configuration twice (a scaling series' one-rank case of
strong and of weak scaling, a rerun, a file given with its repeat), and the drifts between two
such measurements beyond their confidence intervals (docs/metrics.md, "Run-to-run spread").

A difference smaller than the spread between two figures of the study is within its noise: the
diagnosis marks the parts it reports within it.
"""

from dataclasses import dataclass, field

import numpy as np

from .stats import case_stats
from .study import case_ref, comm_key, describe, hosts_count, placement_of


def repeat_key(case):
    """What a measurement is of: two ok cases with one key measured the same thing. The scaling
    mode is not part of it: on one rank, strong and weak scaling of one batch run the same step."""
    return (case.get("workload"), case.get("driver"), case.get("device_type"), case.get("precision"),
            case.attrs.get("denormals"), case.get("ranks"), case.get("batch_per_rank"), case.get("threads"),
            hosts_count(case), placement_of(case)) + comm_key(case)


@dataclass
class Repeat:
    """One configuration measured more than once: each case's median and 95% interval, seconds."""
    label: str
    cases: list
    medians: list
    intervals: list

    @property
    def spread(self):
        """(largest - smallest median) / smallest."""
        return max(self.medians) / min(self.medians) - 1

    def measurements(self):
        """"76.55 ms [76.17, 77.04], 78.69 ms [78.09, 79.87]": each median with its interval."""
        return ", ".join(f"{1e3 * m:.2f} ms [{1e3 * lo:.2f}, {1e3 * hi:.2f}]"
                         for m, (lo, hi) in zip(self.medians, self.intervals))

    @property
    def drift(self):
        """Whether two of the intervals do not overlap: the configuration changed speed between
        the measurements by more than their own spread says."""
        return max(lo for lo, _ in self.intervals) > min(hi for _, hi in self.intervals)


@dataclass
class Noise:
    repeats: list = field(default_factory=list)

    @property
    def spread(self):
        """The largest spread of any repeated configuration, None where none was repeated."""
        return max((r.spread for r in self.repeats), default=None)

    def summary(self):
        """One sentence: the spread and where it was measured, and every drift; "" without
        repeats."""
        if not self.repeats:
            return ""
        worst = max(self.repeats, key=lambda r: r.spread)
        text = (f"run-to-run spread {100 * self.spread:.1f}%: the largest difference between two "
                f"medians of one configuration, of {len(self.repeats)} measured more than once "
                f"({worst.label}: {', '.join(case_ref(c) for c in worst.cases)})")
        drifts = [r for r in self.repeats if r.drift]
        if drifts:
            text += "; drift beyond the 95% intervals: " + "; ".join(f"{r.label} ({r.measurements()})" for r in drifts)
        return text


def measure_noise(cases):
    """The Noise of a study's ok timing cases."""
    groups = {}
    for case in cases:
        st = case_stats(case) if case.ok else None
        if st is None:
            continue
        group = groups.setdefault(repeat_key(case), [])
        # A copy of a case (one file given twice, or copied) is the same measurement, not a repeat.
        if not any(np.array_equal(case.iter_time_s, other.iter_time_s) for other, _ in group):
            group.append((case, st))
    repeats = [Repeat(label=describe(group[0][0], without=("scaling",)), cases=[c for c, _ in group],
                      medians=[st["step_median_s"] for _, st in group],
                      intervals=[(st["ci95_low_s"], st["ci95_high_s"]) for _, st in group])
               for group in groups.values() if len(group) > 1]
    return Noise(repeats=repeats)
