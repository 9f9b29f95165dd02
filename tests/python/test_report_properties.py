"""Property-based tests (hypothesis) of dlscale-report's reader and tables, on generated and on
mutated results files.

Run: /usr/bin/python3 -m unittest discover -s tests/python   (CTest report_unit)
     DLSCALE_HYPOTHESIS_EXAMPLES=10000 /usr/bin/python3 -m unittest test_report_properties
       (examples per property; then each property's figures are printed on stderr)

The other tests hold the files their authors thought of. Here hypothesis writes dlscale/1 to
dlscale/4 files as docs/schema.md lays them out (write_file: any number of ranks, cases and
iterations; step times from zero through subnormals to 1e300 s; every status; each optional group
present or absent as its schema version allows), and damages them as older writers, other
programs and failing disks do. What is asserted is what results/README.md promises a user:

1. A valid file (ValidFileTest): every case is read; `summary` (text and CSV) has one row per
   timing case; every median, percentile and interval that `summary`, `scaling`, `phases` and
   `ranks` print lies within its samples' minimum and maximum; `check` agrees with the summary
   the file records, which is written here as dlscale computes it (docs/metrics.md; where it is
   silent, suite/meters/statistics.cpp), not with the package's own code; `compare FILE FILE`
   finds every ok case the same (B/A = 1); every command exits 0 with nothing on stderr.
2. A file changed with h5py (MutatedFileTest): a dataset, group, link or attribute deleted,
   or replaced by one of another type, shape or dtype, or holding NaN, inf, a negative, huge or
   empty value, or text where a number belongs. Every command ends with exit 0 (at most one line
   `dlscale-report: warning: FILE: damaged, skipped: ...`), 1 (`check`: inconsistencies, on
   stdout) or 2 (one line `dlscale-report: error: FILE: ...`), never a traceback and never the
   CLI's last resort `unexpected ...` (a bug, README: "to be reported"); the file stays byte for
   byte the same. Commands run in process (cli.run, stdout and stderr captured): h5py-level
   changes leave HDF5's own structures sound, so nothing here crashes the library.
3. A file changed byte by byte (ByteDamageTest: bits flipped, cut short, a range zeroed), where
   HDF5 1.10 itself can crash or loop: the same promise, now including cli.main()'s lines for a
   crash or a stall. Each example runs the command line's own main() (its crash guard) in a
   child forked after the imports, so that not even a crash of main() itself takes the tests
   down. tests/e2e/test_damaged_files.py runs a fixed corpus of such files as separate processes.

Examples per property: DLSCALE_HYPOTHESIS_EXAMPLES, else a CI profile small enough that this
module takes well under 20 s on two cores. Nothing is written into the tree (database=None), no
example has a deadline (the machine's speed must not matter), and CI draws the same examples each
run (derandomize), so that a failure there is reproducible. Each failure hypothesis found is kept
below as a test of its own (Findings), with the fix it led to.
"""

import collections
import contextlib
import csv
import functools
import io
import math
import os
import shutil
import signal
import sys
import tempfile
import time
import unittest

import h5py
import numpy as np

# hypothesis keeps its caches (the Unicode tables text strategies draw from) in
# ./.hypothesis unless told: in the temporary folder instead, never in the tree.
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "dlscale-hypothesis"))
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from test_report import make_case, reference_ci, table_lines, write_results

from dlscale_report import cli, schema  # noqa: E402  (test_report put results/ on sys.path)

try:
    # Imported before any fork, as the command line's server in tests/common does: every child then
    # starts with matplotlib (report, figures) loaded instead of paying for it each time.
    import dlscale_report.plots  # noqa: F401
    HAVE_MPL = True
except ImportError:
    HAVE_MPL = False

# ---------------------------------------------------------------- settings

# The CI profile: about 7 s for the whole module on this project's 2-core test machine.
CI_EXAMPLES = 30
EXAMPLES = int(os.environ.get("DLSCALE_HYPOTHESIS_EXAMPLES") or 0)
settings.register_profile(
    "dlscale", max_examples=EXAMPLES or CI_EXAMPLES, database=None, deadline=None,
    derandomize=not EXAMPLES, print_blob=True,
    # Writing an HDF5 file per example is slow by hypothesis's measure, and a file's arrays are
    # large draws: both are what these tests are made of, not a mistake in the strategies.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
settings.load_profile("dlscale")

# Time per example of each property, printed (with DLSCALE_HYPOTHESIS_EXAMPLES only) after the
# module: what a long run reports.
TIMES = collections.defaultdict(list)


def timed(test):
    """The test body, its time per example recorded in TIMES (hypothesis calls it per example)."""
    @functools.wraps(test)
    def body(*args, **kwargs):
        start = time.perf_counter()
        try:
            return test(*args, **kwargs)
        finally:
            TIMES[test.__name__].append(time.perf_counter() - start)
    return body


def tearDownModule():
    if EXAMPLES:
        for name, times in sorted(TIMES.items()):
            print(f"{name}: {len(times)} examples run, slowest {max(times):.3f} s, "
                  f"total {sum(times):.1f} s", file=sys.stderr)


# ---------------------------------------------------------------- what dlscale records

def writer_median(x):
    """The median as dlscale computes it (suite/meters/statistics.cpp): the middle value, or the
    mean of the two middle values."""
    x = sorted(x)
    n = len(x)
    return x[n // 2] if n % 2 else (x[n // 2 - 1] + x[n // 2]) / 2


def writer_percentile(x, q):
    """docs/metrics.md's percentile: linear interpolation between order statistics."""
    x = sorted(x)
    h = (len(x) - 1) * q / 100
    lo = math.floor(h)
    hi = min(lo + 1, len(x) - 1)
    return x[lo] + (h - lo) * (x[hi] - x[lo])


def ieee_div(a, b):
    """a / b in IEEE arithmetic, as C++ divides (inf, NaN), where Python would raise."""
    with np.errstate(all="ignore"):
        return float(np.float64(a) / np.float64(b))


def writer_summary(t, global_batch, flops):
    """The summary attributes of a case with samples t[ranks, iterations], computed as dlscale does
    (docs/metrics.md, "Step time"): IEEE arithmetic throughout, the mean a running sum, step_cv 0
    when the mean is 0, and straggler_ratio 1 when the median rank's median is 0 (the C++ writer;
    the docs do not say)."""
    steps = [float(v) for v in t.max(axis=0)]
    n = len(steps)
    x = sorted(steps)
    median = writer_median(x)
    total = 0.0
    for v in steps:
        total += v                      # overflows to inf, as a C++ std::accumulate
    mean = total / n
    ss = 0.0
    for v in steps:
        ss += (v - mean) * (v - mean)
    std = math.sqrt(ss / (n - 1)) if n > 1 else 0.0
    low, high, coverage = reference_ci(x)
    rank_medians = [writer_median(row) for row in t.tolist()]
    typical = writer_median(rank_medians)
    return {
        "step_median_s": median, "step_p05_s": writer_percentile(x, 5), "step_p95_s": writer_percentile(x, 95),
        "step_mean_s": mean, "step_std_s": std, "step_cv": ieee_div(std, mean) if mean > 0 else 0.0,
        "ci95_low_s": low, "ci95_high_s": high, "ci_coverage": coverage,
        "samples_per_s": ieee_div(global_batch, median), "achieved_flops": ieee_div(flops, median),
        "straggler_ratio": ieee_div(max(rank_medians), typical) if typical > 0 else 1.0,
    }


# ---------------------------------------------------------------- strategies

# Step times, seconds: realistic ones, and anything from 0 through subnormals to 1e300. The bound
# keeps the sum of a case's samples finite (its mean is recorded); beyond ~1e307 even the median of
# two samples, (a + b) / 2, overflows in dlscale's own arithmetic.
MAX_TIME = 1e300
TIMES_S = st.one_of(st.floats(1e-4, 1.0), st.floats(0.0, MAX_TIME), st.just(0.0))
FRACTIONS = st.floats(0.0, 1.0)
MAX_WORLD, MAX_CASES, MAX_ITERATIONS = 4, 4, 12
# Few names, so that cases share a configuration: scaling series, sweeps, duplicates to dedupe and
# matches for compare. One name needs CSV quoting, one is not ASCII.
WORKLOADS = ("mnist_fnn:width=16", "cnn", "mlp, wide", "réseau")
DRIVERS = ("reference", "onednn")
FAILED = ("unsupported", "oom", "timeout", "error")
HOSTS = ("nodeA", "nodeB")
PHASE_NAMES = "forward,backward,allreduce,update"


def samples(ranks, iterations):
    return hnp.arrays(np.float64, (ranks, iterations), elements=TIMES_S)


@st.composite
def split(draw, t, parts):
    """t split into `parts` shares along a new last axis (phases, a step's parts)."""
    weights = draw(hnp.arrays(np.float64, (parts,), elements=st.floats(0.0, 1.0)))
    weights = weights / weights.sum() if weights.sum() > 0 else np.full(parts, 1.0 / parts)
    return t[..., None] * weights


def participants_text(world_ranks):
    if world_ranks == list(range(len(world_ranks))):
        return f"0-{len(world_ranks) - 1}" if len(world_ranks) > 1 else "0"
    return ",".join(map(str, world_ranks))


@st.composite
def timing_case(draw, schema_version, recent, hosts, runs):
    """One /cases/NNNN timing case as a dict for write_case()."""
    world = len(hosts)
    ranks = draw(st.integers(1, world))
    iterations = draw(st.integers(1, MAX_ITERATIONS))
    status = draw(st.sampled_from(("ok",) * 3 + FAILED))
    # An "error" case whose all-reduce benchmark found wrong sums keeps its samples, but no summary.
    keeps_samples = status == "ok" or (status == "error" and draw(st.booleans()))
    phases = draw(st.booleans())
    scaling = draw(st.sampled_from(("weak", "strong")))
    batch = draw(st.sampled_from((4, 32)))
    threads = draw(st.sampled_from((1, 2)))
    world_ranks = list(range(ranks)) if not recent or draw(st.booleans()) else \
        draw(st.permutations(range(world)))[:ranks]
    t = draw(samples(ranks, iterations)) if keeps_samples else np.zeros((ranks, 0))
    c = {
        "kind": "timing", "status": status, "ranks": ranks, "iterations": iterations, "phases": phases,
        "iter_time_s": t, "workload": draw(st.sampled_from(WORKLOADS)), "driver": draw(st.sampled_from(DRIVERS)),
        "scaling": scaling, "batch_per_rank": batch if scaling == "weak" else max(1, batch // ranks),
        "global_batch": batch * ranks if scaling == "weak" else batch, "threads": threads,
        "flops": draw(st.sampled_from((0.0, 1.2e9, 3.5e15))), "world_ranks": world_ranks,
        "placement": draw(st.sampled_from(("packed", "spread"))) if recent else None,
        "run": draw(st.integers(0, runs - 1)) if runs else None,
        "message": "" if status == "ok" else f"rank {ranks - 1}: iteration 3: {status}",
    }
    # With --threads N the case asked for N threads; without it for `auto` (study.requested_threads).
    c["case_key"] = (f"dlscale run -w '{c['workload']}' -d {c['driver']} --batch {batch} --scaling {scaling}"
                     + (f" --threads {threads}" if draw(st.booleans()) else "") + f" --ranks {ranks}")
    if not keeps_samples:
        return c
    if phases:
        c["phase_time_s"] = draw(split(t, 4))
    if ranks > 1 and (recent or draw(st.booleans())):
        c["exposed_allreduce_s"] = t * draw(FRACTIONS)
        if recent and draw(st.booleans()):
            buckets = draw(st.integers(1, 3))
            c["bucket_start_s"] = np.repeat((t * draw(FRACTIONS))[:, :, None], buckets, axis=2)
            c["bucket_bytes"] = np.full(buckets, 4096.0)
    if status != "ok":
        return c
    c["summary"] = writer_summary(t, c["global_batch"], c["flops"])
    if phases and draw(st.booleans()):
        p = c["phase_time_s"]
        c["summary"].update({f"{name}_median_s": writer_median(p[:, :, j].max(axis=0).tolist())
                             for j, name in enumerate(PHASE_NAMES.split(","))})
    if "exposed_allreduce_s" in c:
        # Its medians come with it (docs/schema.md); the least rank's only from newer writers.
        e = c["exposed_allreduce_s"]
        c["summary"]["exposed_allreduce_median_s"] = writer_median(e.max(axis=0).tolist())
        if recent:
            c["summary"]["exposed_allreduce_least_median_s"] = writer_median(e.min(axis=0).tolist())
    if schema_version >= 2 and draw(st.booleans()):
        cpu = draw(hnp.arrays(np.float64, (ranks,), elements=st.floats(0.0, 100.0)))
        wall = draw(hnp.arrays(np.float64, (ranks,), elements=st.floats(1e-3, 100.0)))
        c["per_rank"] = (cpu, wall)
        peak = draw(st.sampled_from((math.nan, 1e9, 3e12)))
        c["summary"].update(cpu_utilisation=float(np.mean(cpu / (wall * threads))),
                            busy_cores=float(np.mean(cpu / wall)),
                            peak_flops=peak, peak_share=ieee_div(c["summary"]["achieved_flops"], peak),
                            energy_j_per_step=math.nan, energy_j_per_sample=math.nan)
        if schema_version >= 4:
            c["summary"].update(user_s_per_step=0.01, system_s_per_step=draw(st.sampled_from((0.0, 0.02))),
                                system_share=draw(FRACTIONS), page_faults_per_step=draw(st.sampled_from((3.0, 5e4))),
                                major_faults_per_step=0.0, cpu_wait_share=draw(FRACTIONS),
                                cpu_steal_share=draw(st.sampled_from((math.nan, 0.0, 0.2))),
                                contended=draw(st.integers(0, 1)), peak_share_note="")
    if phases and ranks > 1 and draw(st.booleans()):
        k = draw(st.integers(1, 5))
        c["projection"] = {"ranks": np.array([1, 2, 4, 8, 16][:k], dtype=np.int64),
                           "step_s": draw(hnp.arrays(np.float64, (k,), elements=TIMES_S)),
                           "efficiency": draw(hnp.arrays(np.float64, (k,), elements=FRACTIONS)),
                           "between_hosts": np.zeros(k, dtype=np.int8) if recent else None}
    if phases and recent and draw(st.booleans()):
        start = np.cumsum(t, axis=1) - t + 1000.0
        c["timeline"] = {"step_start_s": start, "clock_at_s": np.full((ranks, 2), 999.0),
                         "clock_offset_s": np.zeros((ranks, 2)), "clock_bound_s": np.zeros((ranks, 2))}
        if "bucket_start_s" in c:
            ready = c["bucket_start_s"]
            c["timeline"]["bucket_reduction_s"] = np.stack([ready, ready + t[:, :, None] * 0.1], axis=-1)
    if recent and (ranks > 1) and draw(st.booleans()):
        steps = draw(st.integers(1, 3))
        c["noise_scale"] = {"simple": draw(st.sampled_from((math.nan, 916.3, 0.0))), "steps": steps}
    if phases and recent and draw(st.booleans()):
        c["simulations"] = [draw(simulation(c)) for _ in range(draw(st.integers(1, 2)))]
    return c


@st.composite
def simulation(draw, case):
    """A /cases/NNNN/simulations/KKKK that `check` finds consistent with itself and its case."""
    p = case["ranks"]
    ranks = sorted({1, p} | set(draw(st.lists(st.sampled_from((2, 4, 8, 1024)), max_size=2))))
    k = len(ranks)
    step = draw(hnp.arrays(np.float64, (k,), elements=st.floats(1e-6, 1e3)))
    parts = draw(split(step, 3))
    update = step - parts.sum(axis=1)
    base = step[0]
    strong = case["scaling"] == "strong"
    efficiency = np.array([base / (q * s) if strong else base / s for q, s in zip(ranks, step)])
    measured = case["summary"]["step_median_s"]
    return {"platform": draw(st.sampled_from(("cpu-2socket-100Gbps-nic", "measured-case-0000"))),
            "ranks": np.array(ranks, dtype=np.int64), "step_s": step, "efficiency": efficiency,
            "compute_s": parts[:, 0], "straggler_wait_s": parts[:, 1], "exposed_allreduce_s": parts[:, 2],
            "update_s": update, "scaling": case["scaling"], "measured_ranks": p, "measured_step_s": measured,
            "error": ieee_div(step[ranks.index(p)], measured) - 1}


@st.composite
def accuracy_case(draw, recent, hosts, runs):
    """An accuracy case (dlscale/3 and later): repeats of training to a target, no step times."""
    status = draw(st.sampled_from(("ok", "ok", "oom")))
    repeats = []
    if status == "ok":
        for _ in range(draw(st.integers(1, 2))):
            epochs = draw(st.integers(1, 3))
            times = draw(hnp.arrays(np.float64, (epochs,), elements=st.floats(0.0, 1e3)))
            accuracy = draw(hnp.arrays(np.float64, (epochs,), elements=FRACTIONS))
            repeats.append((times, accuracy))
    return {"kind": "accuracy", "status": status, "ranks": 1, "repeats": repeats, "recent": recent,
            "target": draw(st.sampled_from((0.5, math.nan))), "threads": draw(st.sampled_from((1, 2))),
            "run": draw(st.integers(0, runs - 1)) if runs else None, "world_ranks": [0]}


@st.composite
def allreduce_group(draw, recent, hosts, runs):
    ranks = draw(st.integers(1, len(hosts)))
    sizes = draw(st.integers(1, 3))
    iterations = draw(st.integers(1, 4))
    return {"ranks": ranks, "bytes": 1024 * 2 ** np.arange(sizes, dtype=np.int64),
            "time_s": draw(hnp.arrays(np.float64, (ranks, sizes, iterations), elements=TIMES_S)),
            "errors": np.array(draw(st.lists(st.sampled_from((0, 0, 3)), min_size=sizes, max_size=sizes)),
                               dtype=np.int64),
            "iterations": iterations, "recent": recent, "run": draw(st.integers(0, runs - 1)) if runs else None}


@st.composite
def results_files(draw, max_cases=MAX_CASES):
    """A results file as a dict for write_file(): dlscale/1 to /4, the parts each version has."""
    version = draw(st.sampled_from((1, 2, 3, 4, 4, 4)))
    # "recent": the optional parts that newer dlscale/4 writers add (placement, timelines, ...).
    recent = version == 4 and draw(st.booleans())
    world = draw(st.integers(1, MAX_WORLD))
    hosts = [draw(st.sampled_from(HOSTS)) for _ in range(world)] if recent else ["nodeA"] * world
    runs = draw(st.integers(1, 2)) if version == 4 else 0
    kinds = st.one_of(timing_case(version, recent, hosts, runs),
                      accuracy_case(recent, hosts, runs)) if version >= 3 else timing_case(version, recent, hosts, runs)
    cases = draw(st.lists(kinds, max_size=max_cases))
    allreduce = draw(st.lists(allreduce_group(recent, hosts, runs), max_size=2))
    return {"version": version, "recent": recent, "hosts": hosts, "runs": runs, "cases": cases,
            "allreduce": allreduce, "peak": version >= 2 and draw(st.booleans())}


# ---------------------------------------------------------------- writer (docs/schema.md)

STR = h5py.string_dtype()


def table(rows, fields):
    """A 1-D compound dataset's data: int64, float64 or variable-length UTF-8 string fields."""
    kinds = {int: "<i8", float: "<f8", str: STR}
    return np.array([tuple(r) for r in rows], dtype=[(name, kinds[kind]) for name, kind in fields])


RANK_FIELDS = (("rank", int), ("host", str), ("local_rank", int), ("cpu_affinity", str), ("numa_node", int),
               ("device", str), ("threads", int))
RECENT_RANK_FIELDS = RANK_FIELDS + (("network", str), ("blas", str))
PER_RANK_FIELDS = (("rank", int), ("cpu_time_s", float), ("wall_s", float), ("cpu_utilisation", float),
                   ("busy_cores", float), ("cpu_energy_j", float), ("cpu_energy_source", str),
                   ("gpu_energy_j", float), ("gpu_utilisation_pct", float), ("gpu_sm_clock_mhz", float),
                   ("gpu_power_w", float), ("gpu_samples", int), ("gpu_source", str))
RECENT_PER_RANK_FIELDS = PER_RANK_FIELDS + (("user_s", float), ("system_s", float), ("minor_faults", float),
                                            ("major_faults", float), ("run_wait_s", float), ("run_s", float),
                                            ("steal_share", float), ("contended", int))
RATE_FIELDS = (("kind", str), ("driver", str), ("device_type", str), ("precision", str), ("threads", int),
               ("rank", int), ("size", int), ("runs", int), ("seconds", float), ("rate", float),
               ("status", str), ("method", str))
SCHEMA_NAME = {v: f"dlscale/{v}" for v in (1, 2, 3, 4)}


def set_attrs(obj, attrs):
    """Attributes in the types of docs/schema.md: int64, float64, UTF-8 strings."""
    for name, value in attrs.items():
        if isinstance(value, bool) or isinstance(value, (int, np.integer)):
            obj.attrs[name] = np.int64(value)
        elif isinstance(value, (float, np.floating)):
            obj.attrs[name] = np.float64(value)
        else:
            obj.attrs[name] = value


def group(parent, name):
    # dlscale tracks the creation order of links and attributes (docs/schema.md, "How it is written").
    return parent.create_group(name, track_order=True)


def rank_table(spec):
    fields = RECENT_RANK_FIELDS if spec["recent"] else RANK_FIELDS
    rows = [(r, h, spec["hosts"][:r].count(h), f"{2 * r}-{2 * r + 1}", 0, "cpu", 2) +
            (("eth0 10.0.0.1/24 up 10000Mb/s", "OpenBLAS Haswell") if spec["recent"] else ())
            for r, h in enumerate(spec["hosts"])]
    return table(rows, fields)


def write_file(path, spec):
    """Write `spec` (results_files()) as dlscale writes a results file (docs/schema.md)."""
    v, recent, world = spec["version"], spec["recent"], len(spec["hosts"])
    with h5py.File(path, "w", track_order=True) as f:
        set_attrs(f, {"schema": SCHEMA_NAME[v], "dlscale_version": "0.1.0", "git_commit": "d529b47d7c3a",
                      "created_utc": "2026-12-02T17:09:40Z", "command_line": "dlscale run -w cnn --batch 4,32",
                      "world_size": world, "config": "[[case]]\nbatch = 4\nthreads = \"auto\"\n"})
        system = group(f, "system")
        system.create_dataset("ranks", data=rank_table(spec))
        set_attrs(group(system, "software"), {"dlscale": "0.1.0", "compiler": "GNU 12.2.0", "hdf5": "1.10.8",
                                              "mpi_thread_level": "MPI_THREAD_SERIALIZED"})
        set_attrs(group(system, "environment"), {"OMP_NUM_THREADS": "2"})
        for i in range(spec["runs"]):
            run = group(f, f"runs/{i:04d}")
            set_attrs(run, {"started_utc": f"2026-12-02T1{i}:00:00Z", "resumed": int(i > 0),
                            "command_line": "dlscale run --resume" if i else "dlscale run -w cnn",
                            "config": "[[case]]\n", "world_size": world, "dlscale_version": "0.1.0",
                            "git_commit": "d529b47d7c3a"})
            run.create_dataset("ranks", data=rank_table(spec))
            set_attrs(group(run, "software"), {"dlscale": "0.1.0", "compiler": "GNU 12.2.0"})
            set_attrs(group(run, "environment"), {})
        cases = group(f, "cases")
        for i, c in enumerate(spec["cases"]):
            g = group(cases, f"{i:04d}")
            (write_timing_case if c["kind"] == "timing" else write_accuracy_case)(g, c, spec)
        for i, ar in enumerate(spec["allreduce"]):
            g = group(f, f"allreduce/{i:04d}")
            p = ar["ranks"]
            attrs = {"backend": "mpi", "ranks": p, "warmup": 2, "iterations": ar["iterations"], "dtype": "float32",
                     "case": "", "alpha_s": 1e-5 if p > 1 else 0.0, "beta_s_per_byte": 1e-9 if p > 1 else 0.0}
            if recent:
                h = len(set(spec["hosts"][:p]))
                attrs.update(hosts=h, network="between hosts" if h > 1 else "within one host",
                             segment_bytes=1048576 if p > 1 else 0)
            if ar["run"] is not None:
                attrs["run"] = ar["run"]
            set_attrs(g, attrs)
            step = ar["time_s"].max(axis=0)
            with np.errstate(all="ignore"):         # a zero time: inf, as dlscale records it
                algbw = ar["bytes"] / np.median(step, axis=1) / 1e9
                busbw = algbw * (2 * (p - 1) / p)
            g.create_dataset("bytes", data=ar["bytes"])
            g.create_dataset("time_s", data=ar["time_s"])
            g.create_dataset("algbw_gbps", data=algbw)
            g.create_dataset("busbw_gbps", data=busbw)
            g.create_dataset("errors", data=ar["errors"])
        if spec["peak"]:
            g = group(f, "peak/0000")
            set_attrs(g, {"source": "measured by this run", "seconds": 0.2, "measured_utc": "2026-12-02T17:09:43Z",
                          **({"run": 0} if spec["runs"] else {})})
            rows = [("gemm", d, "cpu", "fp32", t, r, 512, 10, 0.1, 3e10 * t, "ok", "cblas_sgemm")
                    for d in DRIVERS for t in (1, 2) for r in range(world)]
            rows.append(("stream", "reference", "cpu", "fp32", 2, 0, 1 << 24, 10, 0.1, math.nan, "unavailable",
                         "no STREAM here"))
            g.create_dataset("rates", data=table(rows, RATE_FIELDS))


def common_case_attrs(c, spec):
    """The attributes every case has, in docs/schema.md's order (recent ones where `recent`)."""
    v, recent = spec["version"], spec["recent"]
    ranks, world_ranks = c["ranks"], c["world_ranks"]
    a = {"workload": c.get("workload", "mnist_cnn"), "driver": c.get("driver", "reference"), "device_type": "cpu",
         "precision": "fp32"}
    if recent:
        a.update(isa="", denormals="flush")
    a.update(scaling=c.get("scaling", "weak"), ranks=ranks, participants=participants_text(world_ranks))
    if recent:
        a.update(placement=c.get("placement") or "packed", hosts=len({spec["hosts"][w] for w in world_ranks}))
    a.update(batch_per_rank=c.get("batch_per_rank", 32), global_batch=c.get("global_batch", 32 * ranks),
             threads=c["threads"], warmup=2 if c["kind"] == "timing" else 0,
             iterations=c.get("iterations", 0) if c["kind"] == "timing" else 0, seed=42, params=13002,
             train_flops_per_step=float(c.get("flops", 0.0)), grad_bytes=52008, phases=int(c.get("phases", False)),
             data="synthetic", bucket_mb=25.0,
             case_key=c.get("case_key") or f"dlscale run --mode accuracy -w mnist_cnn --threads {c['threads']}",
             started_utc="2026-12-02T17:09:43Z")
    if v >= 3:
        a.update(mode=c["kind"], optimizer="sgd", learning_rate=0.01)
    return a


def write_timing_case(g, c, spec):
    v, recent = spec["version"], spec["recent"]
    ranks, t = c["ranks"], c["iter_time_s"]
    a = common_case_attrs(c, spec)
    if recent:
        a.update(accumulate=1, lr_scaling="none", lr_base_batch=0, scaled_learning_rate=0.01, overlap=0,
                 progress_thread=int(ranks > 1), allreduce_mechanism="mpi_allreduce" if ranks > 1 else "none",
                 allreduce_buckets=int(ranks > 1), allreduce_lanes=1,
                 allreduce_segment_bytes=1048576 if ranks > 1 else 0, mpi_allreduce_settings="")
    a.update(status=c["status"], message=c["message"], wall_s=1.5)
    if v >= 4:
        a["allocator"] = "glibc 2.36; --malloc keep: mallopt M_MMAP_MAX=0"
    if c["run"] is not None:
        a["run"] = c["run"]
    set_attrs(g, a)
    g.create_dataset("iter_time_s", data=t)
    if "phase_time_s" in c:
        g.create_dataset("phase_time_s", data=c["phase_time_s"]).attrs["phases"] = PHASE_NAMES
    for name in ("exposed_allreduce_s", "bucket_start_s", "bucket_bytes"):
        if name in c:
            g.create_dataset(name, data=c[name])
    g.create_dataset("loss", data=np.linspace(2.0, 1.0, t.shape[1]))
    g.create_dataset("memory", data=np.array([(1 << 20, 0)] * ranks, dtype=[("host_peak_rss_bytes", "<i8"),
                                                                            ("device_peak_bytes", "<i8")]))
    if "summary" in c:
        set_attrs(group(g, "summary"), c["summary"])
    if "per_rank" in c:
        u = group(g, "utilisation")
        set_attrs(u, {"threads": c["threads"], "peak": "/peak/0000 of this file: GEMM of reference cpu fp32",
                      "energy": "unavailable: no powercap"})
        cpu, wall = c["per_rank"]
        fields = RECENT_PER_RANK_FIELDS if v >= 4 else PER_RANK_FIELDS
        rows = [(r, cpu[r], wall[r], cpu[r] / (wall[r] * c["threads"]), cpu[r] / wall[r], math.nan,
                 "unavailable: no powercap", math.nan, math.nan, math.nan, math.nan, 0, "unavailable: no GPU")
                + ((cpu[r] * 0.9, cpu[r] * 0.1, 100.0, 0.0, 0.0, cpu[r], 0.0, 0) if v >= 4 else ())
                for r in range(ranks)]
        u.create_dataset("per_rank", data=table(rows, fields))
    if "projection" in c:
        p = c["projection"]
        pg = group(g, "projection")
        attrs = {"model": "ring", "alpha_s": 1e-5, "beta_s_per_byte": 1e-9, "fit_ranks": ranks, "compute_s": 0.01,
                 "grad_bytes": 52008.0, "scaling": c["scaling"]}
        if recent:
            attrs.update(hosts=a["hosts"], ranks_per_host=ranks, within_alpha_s=1e-5, within_beta_s_per_byte=1e-9,
                         between_alpha_s=math.nan, between_beta_s_per_byte=math.nan,
                         network_note=f"P <= {ranks}: within-host fit")
        set_attrs(pg, attrs)
        for name in ("ranks", "step_s", "efficiency", "between_hosts"):
            if p[name] is not None:
                pg.create_dataset(name, data=p[name])
    if "timeline" in c:
        tg = group(g, "timeline")
        set_attrs(tg, {"clock": "monotonic", "clock_sync": "each host's first rank by ping-pong"})
        for name, data in c["timeline"].items():
            tg.create_dataset(name, data=data)
    if "noise_scale" in c:
        n = c["noise_scale"]
        ng = group(g, "noise_scale")
        set_attrs(ng, {"batch_small": float(c["batch_per_rank"]), "batch_big": float(c["global_batch"]),
                       "grad_sq": 0.02, "trace": 18.5, "simple": n["simple"], "ci95_low": n["simple"] * 0.9,
                       "ci95_high": n["simple"] * 1.1, "steps": n["steps"],
                       "definition": "simple noise scale B_simple = tr(Sigma) / |G|^2"})
        ng.create_dataset("small_sq", data=np.full(n["steps"], 18.0))
        ng.create_dataset("big_sq", data=np.full(n["steps"], 0.3))
    for k, sim in enumerate(c.get("simulations", [])):
        sg = group(g, f"simulations/{k:04d}")
        set_attrs(sg, {"source": "dlscale-project", "simgrid_version": "3.32.0", "platform": sim["platform"],
                       "platform_toml": "", "platform_xml": "", "placement": "block", "allreduce": "ring",
                       "allreduce_source": "recorded", "model": "flow", "steps": 3, "seed": 1, "overlap": 0,
                       "progress": "polling", "scaling": sim["scaling"], "measured_ranks": sim["measured_ranks"],
                       "measured_step_s": sim["measured_step_s"], "error": sim["error"],
                       "bucket_readiness": "estimated"})
        for name in schema.SIMULATION_DATASETS:
            sg.create_dataset(name, data=sim[name])
        sg.create_dataset("bucket_bytes", data=np.array([52008.0]))
        sg.create_dataset("bucket_ready_fraction", data=np.array([1.0]))


EPOCH_FIELDS = (("epoch", int), ("train_loss", float), ("train_time_s", float), ("cumulative_train_time_s", float),
                ("val_accuracy", float), ("val_loss", float), ("eval_time_s", float))


def write_accuracy_case(g, c, spec):
    a = common_case_attrs(c, spec)
    target = c["target"]
    a.update(epochs=3, validation_fraction=0.2, target_accuracy=target, repeats=max(1, len(c["repeats"])),
             train_samples=6400, validation_samples=1600, test_samples=2004, test_data="mnist:data/mnist:test")
    if c["recent"]:
        a.update(lr_warmup_epochs=0.0, eval_every=0)
    a.update(status=c["status"], message="" if c["status"] == "ok" else "rank 0: out of memory", wall_s=9.0)
    if c["run"] is not None:
        a["run"] = c["run"]
    set_attrs(g, a)
    g.create_dataset("memory", data=np.array([(1 << 20, 0)], dtype=[("host_peak_rss_bytes", "<i8"),
                                                                    ("device_peak_bytes", "<i8")]))
    if c["status"] != "ok":
        return
    for r, (times, accuracy) in enumerate(c["repeats"]):
        rg = group(g, f"repeats/{r:02d}")
        cumulative = np.cumsum(times)
        reached = [e for e, acc in enumerate(accuracy) if acc >= target]
        set_attrs(rg, {"seed": 42 + r, "epochs_run": len(times), "train_time_s": float(cumulative[-1]),
                       "test_time_s": 0.5, "test_accuracy": float(accuracy[-1]), "test_loss": 0.3,
                       "time_to_target_s": float(cumulative[reached[0]]) if reached else math.nan,
                       "target_reached": int(bool(reached)), "target_epoch": reached[0] + 1 if reached else 0})
        rg.create_dataset("epochs", data=table(
            [(e + 1, 1.0 / (e + 1), times[e], cumulative[e], accuracy[e], 0.5, 0.01) for e in range(len(times))],
            EPOCH_FIELDS))
    keys = schema.ACCURACY_SUMMARY_INTERVALS
    set_attrs(group(g, "accuracy_summary"), {**{k: 0.5 for k in keys}, "targets_reached": 0})


# ---------------------------------------------------------------- running the command line

def run_cli(args):
    """cli.run(args) in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.run(list(args))
        except SystemExit as e:          # argparse: never expected here
            code = e.code
    return code, out.getvalue(), err.getvalue()


# Every command of the command line (cli.py), as run on FILE; GOOD is an intact file for compare,
# DIR a folder for report's and trace's output.
COMMANDS = (
    ("summary", "FILE"), ("summary", "--format", "csv", "FILE"), ("summary", "--format", "json", "FILE"),
    ("summary", "--wide", "FILE"), ("check", "FILE"), ("scaling", "FILE"), ("scaling", "--format", "csv", "FILE"),
    ("threads", "FILE"), ("batch", "FILE"), ("phases", "FILE"), ("ranks", "FILE"), ("allreduce", "FILE"),
    ("diagnosis", "FILE"), ("compare", "GOOD", "FILE"), ("trace", "FILE", "-o", "DIR"),
) + ((("report", "FILE", "-o", "DIR"),) if HAVE_MPL else ())


def command_line(command, path, good, outdir):
    return [{"FILE": path, "GOOD": good, "DIR": outdir}.get(word, word) for word in command]


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class PromiseMixin:
    """What results/README.md promises of every command on any input."""

    def assertPromised(self, command, path, code, out, err, crash_lines=False):
        where = f"{' '.join(command)}: exit {code}\nstdout: {out[-2000:]}\nstderr: {err[-3000:]}"
        for banned in ("Traceback", "HDF5-DIAG", "Segmentation fault"):
            self.assertNotIn(banned, err, where)
        lines = err.splitlines()
        if command[0] == "trace":
            # trace names what it could not write (no OTF2 library) in notes of its own.
            lines = [line for line in lines if not line.startswith("dlscale-report: note: ")]
        self.assertLessEqual(len(lines), 1, where)
        if code == 0:
            if lines:
                self.assertTrue(lines[0].startswith(f"dlscale-report: warning: {path}: damaged, skipped: "), where)
                self.assertRegex(lines[0], r"; \d+ case\(s\) read$", where)
        elif code == 1:
            # check: the inconsistencies on stdout, one line each, naming the file and case.
            self.assertEqual(command[0], "check", where)
            self.assertEqual(lines, [], where)
            self.assertTrue(out.splitlines(), where)
            for line in out.splitlines():
                self.assertTrue(line.startswith(f"{path}: case "), where)
        else:
            self.assertEqual(code, 2, where)
            self.assertEqual(len(lines), 1, where)
            self.assertTrue(lines[0].startswith(f"dlscale-report: error: {path}: "), where)
            # The CLI's last resort: an error schema.py did not expect, which README asks to report.
            self.assertNotIn(": unexpected ", lines[0], where)
            if not crash_lines:
                self.assertNotIn("the HDF5 library", lines[0], where)


class Files(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dlscale_properties_")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def fresh(self, name):
        """A path in this test's folder, with nothing there (each example starts afresh)."""
        path = os.path.join(self.dir, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
        return path


# ---------------------------------------------------------------- 1. valid files

def csv_rows(text):
    return list(csv.DictReader(io.StringIO(text)))


def number(text):
    return float(text) if text not in ("", None) else None


class ValidFileTest(Files, PromiseMixin):
    """Property 1: what a user reads off a sound file agrees with its samples."""

    def assertWithin(self, value, low, high, what):
        """value (a CSV field) lies in [low, high]; an empty field (not computed) passes."""
        v = number(value)
        if v is not None:
            self.assertTrue(low <= v <= high, f"{what} = {v!r} outside [{low!r}, {high!r}]")

    @given(spec=results_files(), with_report=st.integers(0, 7))
    @timed
    def test_tables_agree_with_the_samples(self, spec, with_report):
        path = self.fresh("run.h5")
        write_file(path, spec)
        before = file_bytes(path)
        cases = spec["cases"]
        names = [f"{i:04d}" for i in range(len(cases))]
        timing = [(n, c) for n, c in zip(names, cases) if c["kind"] == "timing"]
        ok = {n: c for n, c in timing if c["status"] == "ok"}

        # The reader reads every case, and nothing is damaged.
        loaded = schema.load_results(path)
        self.assertEqual([c.name for c in loaded.cases], [n for n, _ in timing])
        self.assertEqual(len(loaded.accuracy), len(cases) - len(timing))
        self.assertEqual(loaded.damaged, [])

        results = {}
        commands = [c for c in COMMANDS if c[0] != "report" or with_report == 0] + [
            ("phases", "--format", "csv", "FILE"), ("ranks", "--format", "csv", "FILE"),
            ("compare", "FILE", "FILE", "--format", "csv")]
        for command in commands:
            args = command_line(command, path, path, self.fresh("out"))
            code, out, err = results[command] = run_cli(args)
            self.assertPromised(args, path, code, out, err)
            if command[0] == "trace" and not any("timeline" in c for _, c in timing):
                # Documented: trace of a file without a timeline is an error.
                self.assertEqual(code, 2, err)
                self.assertIn("no case has a timeline", err)
                continue
            if command[0] == "trace":
                err = "".join(line + "\n" for line in err.splitlines()
                              if not line.startswith("dlscale-report: note: "))
            self.assertEqual((code, err), (0, ""), f"{' '.join(args)}\n{out[-2000:]}")
        self.assertEqual(file_bytes(path), before)

        # summary: one row per timing case, recorded medians and intervals within the samples.
        rows = csv_rows(results[("summary", "--format", "csv", "FILE")][1])
        self.assertEqual([r["case"] for r in rows], [n for n, _ in timing])
        for r in rows:
            c = ok.get(r["case"])
            if c is None:
                self.assertEqual(r["step_median_ms"], "")
                continue
            steps = c["iter_time_s"].max(axis=0)
            low, high = steps.min() * 1e3, steps.max() * 1e3
            for key in ("step_median_ms", "ci95_low_ms", "ci95_high_ms"):
                self.assertWithin(r[key], low, high, f"summary case {r['case']} {key}")
            self.assertTrue(float(r["ci95_low_ms"]) <= float(r["step_median_ms"]) <= float(r["ci95_high_ms"]), r)
        text = results[("summary", "FILE")][1]
        if timing:
            body = [line for line in table_lines(text)[2:] if line.strip()]
            self.assertEqual(len(body), len(timing), text)

        # scaling recomputes from the samples: the same bounds.
        for r in csv_rows(results[("scaling", "--format", "csv", "FILE")][1]):
            c = ok.get(r["case"])
            if c is None or r["status"] != "ok":
                continue
            steps = c["iter_time_s"].max(axis=0)
            for key in ("step_median_ms", "ci95_low_ms", "ci95_high_ms"):
                self.assertWithin(r[key], steps.min() * 1e3, steps.max() * 1e3, f"scaling case {r['case']} {key}")

        # phases: each phase's median within that phase's slowest-rank times.
        phase_rows = csv_rows(results[("phases", "--format", "csv", "FILE")][1])
        self.assertEqual([r["case"] for r in phase_rows], [n for n, c in ok.items() if c["phases"]])
        for r in phase_rows:
            p = ok[r["case"]]["phase_time_s"]
            for j, name in enumerate(PHASE_NAMES.split(",")):
                slowest = p[:, :, j].max(axis=0)
                self.assertWithin(r[f"{name}_ms"], slowest.min() * 1e3, slowest.max() * 1e3,
                                  f"phases case {r['case']} {name}")

        # ranks: each rank's median, mean and maximum within its own samples.
        rank_rows = csv_rows(results[("ranks", "--format", "csv", "FILE")][1])
        self.assertEqual(len(rank_rows), sum(c["ranks"] for c in ok.values()))
        for r in rank_rows:
            own = ok[r["case"]]["iter_time_s"][int(r["rank"])]
            low, high = own.min() * 1e3, own.max() * 1e3
            for key in ("median_ms", "mean_ms", "max_ms"):
                self.assertWithin(r[key], low, high, f"ranks case {r['case']} rank {r['rank']} {key}")
            self.assertEqual(float(r["max_ms"]), high)

        # check: the recorded summaries are what the samples give.
        self.assertEqual(results[("check", "FILE")][1], "1 file(s) consistent\n")

        # compare FILE FILE: every case matched with itself; an ok case's B/A is 1 where its median
        # is a positive number.
        compared = csv_rows(results[("compare", "FILE", "FILE", "--format", "csv")][1])
        for r in compared:
            c = ok.get(r["case_a"])
            if c is not None and r["median_a_ms"] and 0 < float(r["median_a_ms"]) < math.inf:
                self.assertEqual(float(r["ratio_b_a"]), 1.0, r)


# ---------------------------------------------------------------- 2. h5py-level changes

def members(path):
    """Every object of the file as (kind, path, attribute): ("group"|"dataset"|"table", path,
    None) and ("attr", path of its object, name)."""
    found = []

    def visit(name, obj):
        kind = "group" if isinstance(obj, h5py.Group) else "table" if obj.dtype.names else "dataset"
        found.append((kind, name, None))
        found.extend(("attr", name, key) for key in obj.attrs)

    with h5py.File(path, "r") as f:
        found.extend(("attr", "/", key) for key in f.attrs)
        f.visititems(visit)
    return found


# Values that a number, a string or an array can be replaced with: the specials of IEEE floats and
# int64, text where a number is expected (and numbers where text is), and what h5py can store but
# dlscale never writes (fixed-length bytes, arrays, a null dataspace, other widths and signs).
SPECIAL_FLOATS = (math.nan, math.inf, -math.inf, -1.0, 0.0, -0.0, 1e308, -1e308, 5e-324, 0.5)
SPECIAL_INTS = (0, -1, 1, 2 ** 63 - 1, -2 ** 63, 10 ** 6)
SPECIAL_TEXT = ("", "text", "1.5", "ok", "0000", "nan", "weak", "strong", "auto", "-1", "0-999", "3,1,0",
                "accuracy", "timing", "packed", "spread", "dlscale/4")


def odd_value(kind):
    return {"bytes": np.bytes_(b"\xff\xfeok"), "float array": np.array([1.0, 2.0]),
            "int array": np.array([1, 2], dtype=np.int64), "empty array": np.zeros(0),
            "null": h5py.Empty("f8"), "bool": np.bool_(True), "float32": np.float32(0.5), "int8": np.int8(-3),
            "uint64": np.uint64(2 ** 64 - 1), "2-D": np.zeros((2, 2)),
            "text array": np.array(["a", "b"], dtype=STR),
            "compound": np.array((1, 2.0), dtype=[("a", "<i8"), ("b", "<f8")])}[kind]


ODD_KINDS = ("bytes", "float array", "int array", "empty array", "null", "bool", "float32", "int8", "uint64",
             "2-D", "text array", "compound")
ATTR_VALUES = st.one_of(
    st.sampled_from(SPECIAL_FLOATS).map(np.float64), st.sampled_from(SPECIAL_INTS).map(np.int64),
    st.sampled_from(SPECIAL_TEXT), st.text(max_size=12), st.sampled_from(ODD_KINDS).map(odd_value),
    st.floats().map(np.float64), st.integers(-2 ** 63, 2 ** 63 - 1).map(np.int64))


@st.composite
def new_dataset(draw, shape, dtype):
    """A dataset's replacement: the same shape and type holding specials, or another shape, type or
    dtype."""
    how = draw(st.sampled_from(("fill", "one", "negative", "shape", "dtype", "value", "odd")))
    size = int(np.prod(shape)) if shape else 1
    numeric = dtype.kind in "fiub"
    if how == "fill" and numeric:
        return np.full(shape, draw(st.sampled_from(SPECIAL_FLOATS)))
    if how == "one" and numeric and size:
        data = np.zeros(shape) if dtype.kind != "f" else np.ones(shape)
        data.flat[draw(st.integers(0, size - 1))] = draw(st.sampled_from(SPECIAL_FLOATS))
        return data
    if how == "negative" and numeric:
        return -np.ones(shape)
    if how == "shape":
        shapes = [(), (0,), tuple(shape) + (2,), (3,) * len(shape)]
        if shape:
            shapes += [tuple(shape[:-1]) + (shape[-1] + 1,), tuple(shape[1:]), (0,) + tuple(shape[1:]),
                       tuple(shape[:-1]) + (0,), tuple(reversed(shape))]
        new = draw(st.sampled_from(shapes))
        return np.ones(new, dtype=dtype if numeric else np.float64)
    if how == "dtype":
        kind = draw(st.sampled_from(("<i8", "<i1", "<f4", "?", "S4", "text", "<u8")))
        if kind == "text":
            return np.full(shape, "1.5", dtype=object).astype(STR) if shape else np.array("1.5", dtype=STR)
        return np.ones(shape, dtype=kind)
    if how == "value":
        return draw(st.sampled_from(SPECIAL_FLOATS + ("text",)))
    return odd_value(draw(st.sampled_from(ODD_KINDS)))


@st.composite
def new_table(draw, data):
    """A table's replacement: a field dropped or of another type, no rows, or no table at all."""
    names = data.dtype.names
    how = draw(st.sampled_from(("drop field", "retype field", "no rows", "plain", "special")))
    if how == "drop field" and len(names) > 1:
        keep = [n for n in names if n != draw(st.sampled_from(names))]
        return data[keep].copy() if keep else np.zeros(len(data))
    if how == "retype field":
        field = draw(st.sampled_from(names))
        kind = draw(st.sampled_from((STR, np.dtype("<f8"), np.dtype("<i8"), np.dtype("S3"))))
        dtype = [(n, kind if n == field else data.dtype[n]) for n in names]
        out = np.zeros(len(data), dtype=dtype)
        for n in names:
            if n != field:
                out[n] = data[n]
            elif kind is STR:
                out[n] = "x"
        return out
    if how == "no rows":
        return data[:0].copy()
    if how == "special":
        # Every number of a row the same special value.
        out = data.copy()
        value = draw(st.sampled_from(SPECIAL_FLOATS))
        for n in names:
            if out.dtype[n].kind == "f" and len(out):
                out[n][draw(st.integers(0, len(out) - 1))] = value
            elif out.dtype[n].kind == "i" and len(out):
                out[n][draw(st.integers(0, len(out) - 1))] = draw(st.sampled_from(SPECIAL_INTS))
        return out
    return np.zeros(max(1, len(data)))


def replace(f, path, value):
    """Put `value` where `path` was: a dataset, a group (None: an empty one) or a link."""
    del f[path]
    if isinstance(value, (h5py.SoftLink, h5py.ExternalLink)):
        f[path] = value
    elif value is None:
        f.create_group(path)
    elif isinstance(value, h5py.Empty):
        f.create_dataset(path, data=value)
    else:
        f.create_dataset(path, data=value)


@st.composite
def mutation(draw, path):
    """One change to the file at `path`, drawn from its members; applies it and says what it did.
    What HDF5 refuses to do is left undone (deleting an attribute that replaced another one of a
    group that tracks their order: "record is not in B-tree", HDF5 1.10)."""
    found = members(path)
    kind, where, attr = draw(st.sampled_from(found))
    try:
        return change(draw, path, found, kind, where, attr)
    except (KeyError, RuntimeError, OSError, ValueError, TypeError) as e:
        return f"h5py refused to change {where}@{attr}: {e}"


def change(draw, path, found, kind, where, attr):
    with h5py.File(path, "r+") as f:
        if kind == "attr":
            obj = f[where]
            if draw(st.booleans()):
                del obj.attrs[attr]
                return f"delete attribute {where}@{attr}"
            value = draw(ATTR_VALUES)
            obj.attrs[attr] = value
            return f"attribute {where}@{attr} = {value!r}"
        if where == "/":
            return "nothing (the root)"
        how = draw(st.sampled_from(("delete", "replace", "link", "stray") if kind == "group" else
                                   ("delete", "replace", "replace", "replace", "link")))
        if how == "delete":
            del f[where]
            return f"delete {where}"
        if how == "link":
            targets = [p for k, p, a in found if k != "attr"] + ["/nowhere"]
            target = draw(st.sampled_from(targets))
            if target != "/nowhere" and draw(st.booleans()):
                obj = f[target]         # a hard link: the same object twice
                del f[where]
                f[where] = obj
                return f"{where} hard-linked to {target}"
            link = h5py.SoftLink("/" + target.lstrip("/")) if draw(st.booleans()) else \
                h5py.ExternalLink("missing.h5", "/" + target.lstrip("/"))
            replace(f, where, link)
            return f"{where} linked to {link}"
        if kind == "group":
            if how == "stray":
                # A member dlscale never writes: the next number, a name of another pattern, a dataset.
                name = draw(st.sampled_from(("0000", "0001", "0099", "extra", "00", "0004")))
                if name in f[where]:
                    del f[where][name]
                if draw(st.booleans()):
                    f[where].create_group(name)
                else:
                    f[where].create_dataset(name, data=np.zeros(2))
                return f"stray {where}/{name}"
            replace(f, where, np.zeros(2))
            return f"group {where} replaced by a dataset"
        data = f[where][()]
        if kind == "table":
            value = draw(new_table(data))
        elif draw(st.integers(0, 5)) == 0:
            value = None                # a group where a dataset was
        else:
            value = draw(new_dataset(np.shape(data), np.asarray(data).dtype))
        replace(f, where, value)
        return f"dataset {where} replaced by {value!r}"[:300]


class MutatedFileTest(Files, PromiseMixin):
    """Property 2: whatever h5py can do to a file, every command ends as README promises."""

    @given(spec=results_files(max_cases=3), changes=st.integers(1, 3), data=st.data(),
           commands=st.lists(st.sampled_from(COMMANDS), min_size=1, max_size=2, unique=True))
    @timed
    def test_every_command_keeps_its_promise(self, spec, changes, data, commands):
        good, path = self.fresh("good.h5"), self.fresh("run.h5")
        write_file(good, spec)
        shutil.copy(good, path)
        done = [data.draw(mutation(path), label="change") for _ in range(changes)]
        before, good_before = file_bytes(path), file_bytes(good)
        for command in commands:
            args = command_line(command, path, good, self.fresh("out"))
            code, out, err = run_cli(args)
            self.assertPromised(args, path, code, out, err)
        self.assertEqual(file_bytes(path), before, done)
        self.assertEqual(file_bytes(good), good_before)


# ---------------------------------------------------------------- 3. bytes damaged

# How long main()'s guard lets HDF5 read one group before taking it to be stuck (README, "HDF5
# stuck in a loop"): a group of these small files reads in milliseconds; either way the command
# ends with one of the promised lines, so this bounds only the time such an example takes.
STALL_S = 20
# A child still running after this long is killed and the example fails: main() must end.
CHILD_LIMIT_S = 600


def run_forked(args, directory):
    """`dlscale-report ARGS` as the script runs it (cli.main(), which forks its own guarded child)
    in a child of this process forked after the imports: (exit status, stdout, stderr)."""
    paths = [os.path.join(directory, name) for name in ("stdout", "stderr")]
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            os.setpgid(0, 0)            # its own process group: killed whole if it hangs
            signal.alarm(CHILD_LIMIT_S)
            for fd, path in zip((1, 2), paths):
                target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.dup2(target, fd)
                os.close(target)
            sys.stdout = open(1, "w", closefd=False, encoding="utf-8")
            sys.stderr = open(2, "w", closefd=False, encoding="utf-8", buffering=1)
            os.environ["DLSCALE_REPORT_STALL_S"] = str(STALL_S)
            code = cli.main(args)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:       # noqa: BLE001  (nothing may keep the child alive)
                    pass
            os._exit(code if isinstance(code, int) else 3)
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)  # a guarded child left behind by a failure
    streams = []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            streams.append(f.read())
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
    return code, streams[0], streams[1]


@st.composite
def byte_damage(draw, size):
    """(what, change(bytes) -> bytes): bits flipped, the file cut short, or a range zeroed."""
    kind = draw(st.sampled_from(("flip", "cut", "zero")))
    if kind == "flip":
        flips = draw(st.lists(st.tuples(st.integers(0, size - 1), st.integers(0, 7)), min_size=1, max_size=8))

        def change(data):
            data = bytearray(data)
            for at, bit in flips:
                data[at] ^= 1 << bit
            return bytes(data)
        return f"bits flipped at {flips}", change
    if kind == "cut":
        at = draw(st.integers(0, size - 1))
        return f"cut at {at} of {size}", lambda data: data[:at]
    start = draw(st.integers(0, size - 1))
    length = draw(st.integers(1, max(1, size - start)))
    return f"zeroed {start}..{start + length} of {size}", \
        lambda data: data[:start] + bytes(len(data[start:start + length])) + data[start + length:]


class ByteDamageTest(Files, PromiseMixin):
    """Property 3: byte damage, where HDF5 itself may crash or loop, through main()'s guard."""

    @given(spec=results_files(max_cases=2), data=st.data(), command=st.sampled_from(COMMANDS))
    @timed
    def test_every_command_keeps_its_promise(self, spec, data, command):
        good, path = self.fresh("good.h5"), self.fresh("run.h5")
        write_file(good, spec)
        intact = file_bytes(good)
        what, change = data.draw(byte_damage(len(intact)), label="damage")
        with open(path, "wb") as f:
            f.write(change(intact))
        before = file_bytes(path)
        args = command_line(command, path, good, self.fresh("out"))
        code, out, err = run_forked(args, self.dir)
        self.assertPromised(args, path, code, out, err, crash_lines=True)
        self.assertEqual(file_bytes(path), before, what)


if __name__ == "__main__":
    unittest.main()


# ---------------------------------------------------------------- what hypothesis found

class Findings(Files, PromiseMixin):
    """Each failure the properties above found, reduced to the input that showed it and kept with
    the fix it led to (results/dlscale_report)."""

    def write(self, name, cases, **kw):
        path = self.fresh(name)
        write_results(path, cases, **kw)
        return path

    def test_sums_past_the_largest_float(self):
        # math.fsum raised OverflowError where dlscale's own IEEE sum is inf (stats._sum, mean).
        from dlscale_report import stats
        s = stats.compute_stats(np.full((1, 3), 1e308), 4, 0.0)
        self.assertEqual(s["step_median_s"], 1e308)
        self.assertEqual(s["step_mean_s"], math.inf)
        self.assertEqual(stats.mean([1e308, 1e308]), 1e308)

    def test_a_mean_of_equal_values_is_that_value(self):
        # fsum([0.1] * 3) / 3 rounds past 0.1; `ranks` printed a mean above the maximum.
        from dlscale_report import stats
        self.assertEqual(stats.mean([0.1] * 3), 0.1)

    def test_steps_of_zero_seconds(self):
        # step_cv divided by a mean of 0 (dlscale records 0, docs/metrics.md), compare divided by
        # A's median of 0, and numpy's RuntimeWarning lines reached stderr.
        from dlscale_report import stats
        self.assertEqual(stats.compute_stats(np.zeros((1, 3)), 4, 0.0)["step_cv"], 0.0)
        zero, one = self.write("zero.h5", [make_case(np.ones((1, 4)))]), self.write("one.h5", [make_case(np.ones((1, 4)))])
        with h5py.File(zero, "r+") as f:            # zeros, with the summary dlscale records for them
            f["cases/0000/iter_time_s"][...] = 0.0
            for key, value in writer_summary(np.zeros((1, 4)), 32, 1.2e9).items():
                f["cases/0000/summary"].attrs[key] = value
        for command in (["summary", zero], ["compare", zero, one], ["ranks", zero], ["check", zero]):
            code, out, err = run_cli(command)
            self.assertEqual((code, err), (0, ""), command)

    def test_an_attribute_of_another_type_damages_its_group(self):
        # A summary attribute written as text reached the tables' arithmetic (TypeError, the CLI's
        # "unexpected"); schema.ATTR_TYPES now names it and skips the case.
        path = self.write("typed.h5", [make_case([[0.01, 0.02]]), make_case([[0.01, 0.03]])])
        with h5py.File(path, "r+") as f:
            f["cases/0001/summary"].attrs["step_median_s"] = "fast"
        for command in (["summary", path], ["diagnosis", path]):
            code, out, err = run_cli(command)
            self.assertPromised(command, path, code, out, err)
            self.assertEqual(code, 0)
            self.assertIn("case 0001 (attribute 'step_median_s' is str 'fast', not a number)", err)

    def test_a_projected_step_of_zero_seconds(self):
        # The scaling table's projected efficiency divided by the projected step (the CLI's
        # "unexpected ZeroDivisionError"); now IEEE division, as the measured columns'.
        projection = {"attrs": {"model": "ring", "alpha_s": 1e-5, "beta_s_per_byte": 1e-9, "fit_ranks": 3,
                                "compute_s": 0.01, "grad_bytes": 52008.0, "scaling": "weak"},
                      "ranks": [1, 2, 4], "step_s": [0.01, 0.0, 0.02], "efficiency": [1.0, 1.0, 1.0]}
        path = self.write("projected.h5", [make_case(np.full((3, 4), 0.01), projection=projection)])
        for command in (["summary", path], ["diagnosis", path]):
            code, out, err = run_cli(command)
            self.assertPromised(command, path, code, out, err)
            self.assertEqual((code, err), (0, ""), command)

    def test_a_memory_record_that_is_not_a_rank_table(self):
        # The summary's memory columns read a field of /cases/NNNN/memory (TypeError on a plain
        # array, the CLI's "unexpected"); such a record now damages its case, named.
        path = self.write("memory.h5", [make_case([[0.01, 0.02]]), make_case([[0.01, 0.03]])])
        with h5py.File(path, "r+") as f:
            del f["cases/0001/memory"]
            f["cases/0001/memory"] = np.array([0.0])
        code, out, err = run_cli(["summary", path])
        self.assertPromised(["summary", path], path, code, out, err)
        self.assertEqual(code, 0)
        self.assertIn("case 0001 (memory is not a table of one row per rank)", err)

    def test_a_host_name_that_is_not_utf8(self):
        # /system/ranks' host names were decoded strictly (UnicodeDecodeError, the CLI's
        # "unexpected"); a flipped bit there now reads as a replacement character, as attributes do.
        path = self.write("host.h5", [make_case([[0.01, 0.02], [0.01, 0.02]])])
        with h5py.File(path, "r+") as f:
            del f["system/ranks"]
            f["system/ranks"] = np.array([(0, b"\xeenode"), (1, b"node1")], dtype=[("rank", "i8"), ("host", "S6")])
        for command in (["summary", path], ["ranks", path]):
            code, out, err = run_cli(command)
            self.assertPromised(command, path, code, out, err)
            self.assertEqual((code, err), (0, ""), command)

    def test_a_rank_table_with_text_ranks(self):
        # hosts_of() looked hosts up by a `rank` field of strings: now no rank table, refused.
        path = self.write("ranks.h5", [make_case([[0.01, 0.02]])])
        with h5py.File(path, "r+") as f:
            del f["system/ranks"]
            f["system/ranks"] = np.array([(b"zero", b"node0")], dtype=[("rank", "S4"), ("host", "S5")])
        code, out, err = run_cli(["summary", path])
        self.assertPromised(["summary", path], path, code, out, err)
        self.assertEqual(code, 2)
        self.assertIn("no /system/ranks table", err)

    @unittest.skipUnless(HAVE_MPL, "matplotlib is not installed")
    def test_an_allreduce_plot_of_one_rank(self):
        # One rank's bus bandwidth is 0 everywhere: matplotlib refused a log axis with nothing
        # above 0.
        ar = dict(attrs={"backend": "mpi", "ranks": np.int64(1), "dtype": "float32", "iterations": np.int64(2),
                         "warmup": np.int64(0), "case": ""},
                  bytes=np.array([8, 16]), time_s=np.full((1, 2, 2), 1e-6), algbw_gbps=np.array([0.008, 0.016]),
                  busbw_gbps=np.zeros(2), errors=np.zeros(2, dtype=np.int64))
        path = self.write("ar.h5", [make_case([[0.01, 0.02]])], allreduce=[ar])
        plots = self.fresh("plots")
        code, out, err = run_cli(["allreduce", path, "-o", plots])
        self.assertEqual(code, 0, err)
        self.assertEqual([line for line in err.splitlines() if not line.startswith("dlscale-report: wrote ")], [])
        self.assertTrue(os.path.getsize(os.path.join(plots, "allreduce_bandwidth.png")) > 0)

    def test_a_failure_after_a_warning_is_one_line(self):
        # A damaged group's warning and then an error made two lines; now the error names both.
        path = self.write("both.h5", [make_case([[0.01, 0.02]]), make_case([[0.01, 0.03]])])
        with h5py.File(path, "r+") as f:
            del f["cases/0001/iter_time_s"]
        outdir = os.path.join(self.dir, "not_a_folder")
        with open(outdir, "w"):
            pass
        command = ["phases", path, "-o", outdir]
        code, out, err = run_cli(command)
        self.assertEqual(code, 2, err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("damaged, skipped: case 0001", err)

