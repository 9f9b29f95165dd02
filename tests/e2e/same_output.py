#!/usr/bin/env python3
"""Usage: same_output.py BEFORE_DIR AFTER_DIR

Compares two captures of tests/e2e/capture_fixed_run.sh: their run.jsonl (the same objects,
keys in the same order, the same values) and run.h5 (the same groups, datasets with the same
names, shapes and dtypes, the same attribute names and types, the same values). Measured values
(MEASURED below) must be present in both with the same type and shape, but their values may
differ; everything else, from losses and parameter counts to case keys, statuses, messages and
the config text, must be equal exactly (NaN equals NaN).

Exit 0 when the two agree, 1 with one line per difference otherwise.
"""

import fnmatch
import json
import math
import sys

import h5py
import numpy as np

# Names whose values are measured, so differ between two runs of one binary or, for the
# commit, between the two builds compared: fnmatch patterns of a JSON key, an HDF5 attribute or
# dataset name, or a compound dataset's field name; DATASET.FIELD names one field of one
# dataset only (the peak table's `seconds` are measured, the /peak group's `seconds` attribute
# is the requested --peak-seconds).
MEASURED = (
    # When the run, a case, a peak began.
    "*_utc",
    # The commit the binary was built from.
    "git_commit",
    # Seconds and rates per second: step, phase, wall, CPU, all-reduce and accuracy-mode
    # training and test times, samples_per_s, the all-reduce fits (alpha_s, beta_s_per_byte)
    # and the projection's step times; CPU seconds per step.
    "*_s",
    "*_s_per_*",
    # Measured FLOP/s and bandwidths: achieved_flops, peak_flops (not train_flops_per_step, an
    # analytic count), the all-reduce's algbw_gbps/busbw_gbps, the peak table's rate and the
    # seconds its products took, the share of peak, and the projection's parallel efficiency.
    "*_flops",
    "*_gbps",
    "rate",
    "rates.seconds",
    # How many times a peak's product ran: as many as fit in --peak-seconds.
    "rates.runs",
    "peak_share",
    # Why a share of peak is above 1, or empty: chosen by the measured share.
    "peak_share_note",
    "efficiency",
    # Ratios of measured step times.
    "step_cv",
    "straggler_ratio",
    # CPU accounting (getrusage, schedstat): depends on what else the machine runs; a steal
    # share is NaN when the kernel saw no run-queue wait and a number when it did.
    "cpu_utilisation",
    "busy_cores",
    "system_share",
    "cpu_wait_share",
    "*steal_share",
    "contended",
    # Memory and page faults: what the allocator and the kernel hand out varies, and a major
    # fault depends on what the page cache still holds.
    "host_peak_rss_bytes",
    "page_faults_per_step",
    "minor_faults",
    "major_faults",
    "major_faults_per_step",
)


def measured(name, dataset=None):
    names = (name,) if dataset is None else (name, f"{dataset}.{name}")
    return any(fnmatch.fnmatchcase(n, pattern) for n in names for pattern in MEASURED)


def same_value(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "fc" and b.dtype.kind in "fc":
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))
    return a.shape == b.shape and bool(np.array_equal(a, b))


def show(value):
    text = repr(value.tolist() if isinstance(value, np.ndarray) else value)
    return text if len(text) <= 120 else text[:117] + "..."


class Comparison:
    def __init__(self):
        self.differences = []

    def differ(self, where, what):
        self.differences.append(f"{where}: {what}")

    def names(self, where, kind, a, b):
        """Compares the names of keys, attributes or members, order included."""
        a, b = list(a), list(b)
        if a == b:
            return
        missing, extra = [n for n in a if n not in b], [n for n in b if n not in a]
        if missing or extra:
            self.differ(where, f"{kind} only before {missing}, only after {extra}")
        else:
            first = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
            self.differ(where, f"{kind} in another order from position {first}: {show(a[first:])} != {show(b[first:])}")

    # --- JSON lines ---

    def json_value(self, where, name, a, b):
        if isinstance(a, dict) and isinstance(b, dict):
            self.json_object(f"{where}.{name}", a, b)
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                self.json_value(where, f"{name}[{i}]", x, y)
        elif measured(name):
            return  # a measured value may even be null in one run (no steal seen) and not in the other
        elif type(a) is not type(b) or (a != b and not (isinstance(a, float) and math.isnan(a) and math.isnan(b))):
            self.differ(f"{where}.{name}", f"{show(a)} != {show(b)}")

    def json_object(self, where, a, b):
        self.names(where, "keys", a, b)
        for key in a:
            if key in b:
                self.json_value(where, key, a[key], b[key])

    def jsonl(self, path_a, path_b):
        lines = []
        for path in (path_a, path_b):
            with open(path, encoding="utf-8") as f:
                lines.append([json.loads(line) for line in f])
        a, b = lines
        if len(a) != len(b):
            self.differ("run.jsonl", f"{len(a)} lines != {len(b)}")
        for number, (x, y) in enumerate(zip(a, b), 1):
            self.json_object(f"run.jsonl:{number}", x, y)

    # --- HDF5 ---

    def attributes(self, where, a, b):
        self.names(where, "attributes", a.attrs, b.attrs)
        for name in a.attrs:
            if name not in b.attrs:
                continue
            x, y = a.attrs[name], b.attrs[name]
            kind_x, kind_y = (type(x).__name__, np.shape(x)), (type(y).__name__, np.shape(y))
            if kind_x != kind_y:
                self.differ(f"{where}@{name}", f"type {kind_x} != {kind_y}")
            elif not measured(name) and not same_value(x, y):
                self.differ(f"{where}@{name}", f"{show(x)} != {show(y)}")

    def dataset(self, where, a, b):
        if a.shape != b.shape or a.dtype != b.dtype:
            self.differ(where, f"shape {a.shape} {a.dtype} != {b.shape} {b.dtype}")
            return
        name = where.rsplit("/", 1)[-1]
        x, y = a[()], b[()]
        for field in a.dtype.names or (None,):
            fx, fy = (x, y) if field is None else (x[field], y[field])
            if not (measured(name) if field is None else measured(field, name)) and not same_value(fx, fy):
                index = np.argwhere(~(fx == fy)).tolist()[:1] if np.shape(fx) else []
                at = f" at {index[0]}" if index else ""
                self.differ(where if field is None else f"{where}.{field}", f"differs{at}: {show(fx)} != {show(fy)}")

    def node(self, where, a, b):
        self.attributes(where, a, b)
        if isinstance(a, h5py.Dataset) != isinstance(b, h5py.Dataset):
            self.differ(where, "a dataset in one file, a group in the other")
        elif isinstance(a, h5py.Dataset):
            self.dataset(where, a, b)
        else:
            self.names(where, "members", a, b)
            for name in a:
                if name in b:
                    self.node(f"{where.rstrip('/')}/{name}", a[name], b[name])

    def h5(self, path_a, path_b):
        with h5py.File(path_a, "r") as a, h5py.File(path_b, "r") as b:
            self.node("run.h5:/", a, b)


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    before, after = argv[1], argv[2]
    comparison = Comparison()
    comparison.jsonl(f"{before}/run.jsonl", f"{after}/run.jsonl")
    comparison.h5(f"{before}/run.h5", f"{after}/run.h5")
    for line in comparison.differences:
        print(line)
    return 1 if comparison.differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
