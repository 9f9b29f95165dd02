"""Reading dlscale/1 to dlscale/4 results files.

This is the only module that touches HDF5. It checks that a file really is a
dlscale results file and turns it into plain Python objects (dicts of str/int/
float, numpy arrays), so the rest of the package never sees h5py types.
Files are read with plain serial h5py and closed before returning.

Optional parts that newer writers add are read when present and are None or
empty otherwise: /cases/NNNN/projection (Projection), /cases/NNNN/simulations/KKKK
(Simulation: every group, in KKKK order, as Case.simulations; shown_simulations() picks the
newest per platform, which is what the report shows), /allreduce/NNNN
(AllReduce), extra case attributes (participants, bucket_mb, overlap), and in
dlscale/2 /cases/NNNN/utilisation (Utilisation) and /peak/NNNN (Peak).

dlscale/3 adds accuracy cases (attribute mode "accuracy": epochs of training
to a validation accuracy, docs/schema.md). They hold no step times, so they
are kept apart: ResultsFile.accuracy (AccuracyCase), never in
ResultsFile.cases, which every timing analysis reads. A case without `mode`
(dlscale/1-2) is a timing case.

dlscale/4 adds one record per run of dlscale on the file (/runs/NNNN: Run, the first run and
each --resume, with its own rank table, software and environment), and each case names the run
that wrote it: ResultsFile.ranks_of(case) is the rank table a case really ran with.

Ranks that cross hosts add a case's `placement` ("packed" or "spread") and `hosts`
(how many hosts its ranks span), and `hosts` and `network` to all-reduce groups. Every loaded
case has .placement and .hosts, and every AllReduce .hosts and .network: as recorded, else
"packed" and the hosts its participants (or, for an all-reduce, ranks 0..P-1) have in the rank
table of the run that wrote it, which is 1 for a single-host job.

Damage is judged per group. A file whose root, /system/ranks or list of
cases cannot be read is not a results file: ReportError, which the CLI prints
as one line (exit 2). A group of /cases, /allreduce or /peak that cannot be
read, or lacks what every such group has, is skipped and named in
ResultsFile.damaged (DamagedGroup); the other groups are read. That is what a
writer that updates a file in place leaves on a full disk: its last case group
points past the end of the file, and h5py raises RuntimeError ("Error
iterating over attributes (addr overflow ...)") for that group only.
"""

import os
from dataclasses import dataclass, field

import h5py
import numpy as np

SCHEMA = "dlscale/4"
# Every schema this package reads: dlscale/2 only adds groups and summary attributes, dlscale/3
# accuracy cases and the optimiser attributes, dlscale/4 one record per run (/runs).
SCHEMAS = ("dlscale/1", "dlscale/2", "dlscale/3", "dlscale/4")
# The columns of /cases/NNNN/repeats/RR/epochs (dlscale/3): one row per evaluation. Every file has
# the first ones; newer writers add the steps and samples trained when the row was evaluated.
EPOCH_COLUMNS_REQUIRED = ("epoch", "train_loss", "train_time_s", "cumulative_train_time_s", "val_accuracy",
                          "val_loss", "eval_time_s")
EPOCH_COLUMNS = EPOCH_COLUMNS_REQUIRED + ("step", "samples")
# The attributes of /cases/NNNN/repeats/RR; newer writers add the evaluations' count (the epochs
# table's rows, which is epochs_run where it is absent), the steps and samples run, and the steps,
# samples and epochs to the target.
REPEAT_ATTRS_REQUIRED = ("seed", "epochs_run", "train_time_s", "test_time_s", "test_accuracy", "test_loss",
                         "time_to_target_s", "target_reached", "target_epoch")
REPEAT_ATTRS = REPEAT_ATTRS_REQUIRED + ("evaluations", "steps_run", "samples_run", "steps_to_target",
                                        "samples_to_target", "epochs_to_target")
# The attributes of /cases/NNNN/accuracy_summary: means and 95% intervals over the repeats, and
# how many repeats reached the target.
ACCURACY_SUMMARY_INTERVALS = ("test_accuracy_mean", "test_accuracy_ci95_low", "test_accuracy_ci95_high",
                              "train_time_mean_s", "train_time_ci95_low_s", "train_time_ci95_high_s",
                              "test_time_mean_s", "test_time_ci95_low_s", "test_time_ci95_high_s",
                              "time_to_target_mean_s", "time_to_target_ci95_low_s", "time_to_target_ci95_high_s")
ACCURACY_SUMMARY_KEYS = ACCURACY_SUMMARY_INTERVALS + ("targets_reached",)
# The attributes of /cases/NNNN/noise_scale (the gradient noise scale, newer files) besides its
# `definition`, and its two datasets of one value per step.
NOISE_SCALE_ATTRS = ("batch_small", "batch_big", "grad_sq", "trace", "simple", "ci95_low", "ci95_high", "steps")
NOISE_SCALE_DATASETS = ("small_sq", "big_sq")
# The datasets of /allreduce/NNNN and their types; time_s is [ranks, sizes, iterations], the
# others one value per size.
ALLREDUCE_DATASETS = (("bytes", np.int64), ("time_s", np.float64), ("algbw_gbps", np.float64),
                      ("busbw_gbps", np.float64), ("errors", np.int64))
# The datasets of /cases/NNNN/projection, one value per projected rank count (between_hosts
# optional: older files lack it).
PROJECTION_DATASETS = ("ranks", "step_s", "efficiency", "between_hosts")


class ReportError(Exception):
    """A problem with an input file; the CLI prints it as one line and exits 2."""


class _Damaged(Exception):
    """Why one group cannot be used, raised while reading it; the caller adds the file and the
    group's name (DamagedGroup) or, for a group asked for by name, turns it into ReportError."""


# What h5py, and numpy under it, raise for bytes that are not what the metadata says: HDF5's own
# errors arrive as OSError, KeyError, ValueError, TypeError or RuntimeError (an attribute heap past
# the end of the file: RuntimeError "Error iterating over attributes (addr overflow ...)"), a
# damaged dataspace can ask numpy for more memory than there is, a damaged string fails to decode
# (UnicodeDecodeError is a ValueError). Anything else is a bug here, left to the CLI's last resort.
H5_ERRORS = (OSError, RuntimeError, KeyError, ValueError, TypeError, IndexError, OverflowError,
             MemoryError)


def _one_line(error):
    """An exception's text on one line (HDF5's messages hold newlines; str() of a KeyError quotes
    its text)."""
    text = error.args[0] if isinstance(error, KeyError) and error.args else error
    return " ".join(str(text).split()) or type(error).__name__


@dataclass
class DamagedGroup:
    """A group of a results file that could not be read, so was skipped."""

    kind: str                  # "case", "allreduce", "peak" or "run": its parent (/cases, /runs, ...)
    name: str                  # "0003"
    reason: str                # one line, e.g. "lacks iter_time_s" or "unreadable: ..."

    def __str__(self):
        return f"{self.kind} {self.name} ({self.reason})"


def describe_damaged(damaged):
    """One line naming damaged groups, those with the same reason together:
    "case 0012, case 0013 (unreadable: ...); allreduce 0000 (lacks dataset(s) time_s)"."""
    by_reason = {}
    for d in damaged:
        by_reason.setdefault(d.reason, []).append(f"{d.kind} {d.name}")
    return "; ".join(f"{', '.join(names)} ({reason})" for reason, names in by_reason.items())


def decode(value):
    """Turn an h5py attribute value into plain Python.

    h5py returns variable-length strings as str but fixed-length ones as
    bytes (np.bytes_ is a bytes subclass), and numbers as numpy scalars.
    """
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return [decode(v) for v in value.tolist()]
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def attrs_dict(obj):
    """All attributes of an h5py object, decoded."""
    return {key: decode(value) for key, value in obj.attrs.items()}


# The type of each attribute of the groups docs/schema.md lays out, by name (a name has one type
# wherever it appears): str, int, or a number (float64; an integer passes, as where a writer gave a
# count). Every attribute dlscale writes is a scalar of one of these; others may be any scalar.
_NUMBER, _SCALAR = (int, float), (str, int, float)
ATTR_TYPES = {
    **dict.fromkeys((
        # cases
        "workload", "driver", "device_type", "precision", "isa", "denormals", "scaling", "participants",
        "placement", "data", "case_key", "started_utc", "status", "allreduce_mechanism",
        "mpi_allreduce_settings", "blas_core", "blas_core_chosen", "blas_core_reason", "message", "mode",
        "optimizer", "lr_scaling", "allocator", "test_data", "grad_compression",
        "allreduce_hierarchy", "sharding",
        # summary, utilisation, projection, timeline, noise_scale, simulations, /allreduce, /peak, /runs
        "peak_share_note", "peak", "energy", "model", "network_note", "clock", "clock_sync", "definition",
        "source", "simgrid_version", "platform", "platform_toml", "platform_xml", "allreduce",
        "allreduce_source", "progress", "bucket_readiness", "backend", "dtype", "case", "network",
        "measured_utc", "command_line", "config", "dlscale_version", "git_commit"), str),
    **dict.fromkeys((
        "ranks", "hosts", "batch_per_rank", "global_batch", "threads", "warmup", "iterations", "seed",
        "params", "phases", "overlap", "progress_thread", "allreduce_buckets", "allreduce_lanes",
        "allreduce_segment_bytes", "blas_core_below_cpu", "accumulate", "lr_base_batch", "run", "epochs",
        "repeats", "train_samples", "validation_samples", "test_samples", "eval_every", "contended",
        "fit_ranks", "ranks_per_host", "steps", "measured_ranks", "segment_bytes", "resumed", "world_size",
        "epochs_run", "target_reached", "target_epoch", "evaluations", "steps_run", "samples_run",
        "steps_to_target", "samples_to_target", "targets_reached"), int),
    **dict.fromkeys((
        "train_flops_per_step", "grad_bytes", "bucket_mb", "wall_s", "learning_rate", "scaled_learning_rate",
        "validation_fraction", "target_accuracy", "lr_warmup_epochs",
        "step_median_s", "step_p05_s", "step_p95_s", "step_mean_s", "step_std_s", "step_cv", "ci95_low_s",
        "ci95_high_s", "ci_coverage", "sparse_embedding_rows_share", "sparse_embedding_crossover_share", "samples_per_s", "achieved_flops", "straggler_ratio", "cpu_utilisation",
        "busy_cores", "user_s_per_step", "system_s_per_step", "system_share", "page_faults_per_step",
        "major_faults_per_step", "cpu_wait_share", "cpu_steal_share", "peak_flops", "peak_share",
        "energy_j_per_step", "energy_j_per_sample", "exposed_allreduce_median_s",
        "exposed_allreduce_least_median_s", "forward_median_s", "backward_median_s", "allreduce_median_s",
        "update_median_s",
        "alpha_s", "beta_s_per_byte", "compute_s", "sharded_update_s", "within_alpha_s", "within_beta_s_per_byte",
        "between_alpha_s", "between_beta_s_per_byte", "measured_step_s", "error", "seconds",
        "batch_small", "batch_big", "grad_sq", "trace", "simple", "ci95_low", "ci95_high",
        "train_time_s", "test_time_s", "test_accuracy", "test_loss", "time_to_target_s", "epochs_to_target")
        + ACCURACY_SUMMARY_INTERVALS, _NUMBER),
}


def _group_attrs(obj):
    """attrs_dict() of a group dlscale writes, its attributes checked against ATTR_TYPES: one of
    another type, or not a scalar (an array, a null dataspace), makes the group damaged."""
    attrs = attrs_dict(obj)
    for key, kind in ((key, ATTR_TYPES.get(key, _SCALAR)) for key in attrs):
        _check_type(key, attrs[key], kind)
    return attrs


def _check_type(key, value, kind):
    if not isinstance(value, kind) or isinstance(value, bool):
        name = {str: "str", int: "int", _NUMBER: "a number", _SCALAR: "a scalar"}[kind]
        raise _Damaged(f"attribute '{key}' is {type(value).__name__} {_short(value)}, not {name}")


def _short(value, width=40):
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


class CaseAttrs:
    """What timing and accuracy cases share: their attributes, read the same way. The subclasses
    hold `file`, `name` and `attrs`."""

    def get(self, key):
        """A required case attribute; a missing one is a malformed file."""
        if key not in self.attrs:
            raise ReportError(f"{self.file}: case {self.name}: lacks attribute '{key}'")
        return self.attrs[key]

    @property
    def status(self):
        return str(self.attrs.get("status", "unknown"))

    @property
    def ok(self):
        return self.status == "ok"

    @property
    def multi_host(self):
        """Whether the case's ranks spanned more than one host."""
        return self.hosts > 1


@dataclass
class Case(CaseAttrs):
    """One benchmark case (/cases/NNNN) loaded into memory."""

    file: str
    name: str                  # "0000", "0001", ...
    attrs: dict
    iter_time_s: object        # float64 [ranks, iterations] or None
    phase_time_s: object       # float64 [ranks, iterations, 4] or None
    loss: object               # float64 [iterations] or None
    memory: object             # structured array [ranks] or None
    summary: object            # dict of the summary group's attrs, or None
    projection: object = None  # Projection, when the case holds /projection
    exposed_allreduce_s: object = None  # float64 [ranks, iterations] (P > 1, newer files) or None
    index: int = 0             # position in a Study (all files together); 0 when loaded alone
    utilisation: object = None  # Utilisation (dlscale/2, cases that trained) or None
    placement: str = "packed"  # attribute placement; "packed" where not recorded
    hosts: int = 1             # attribute hosts; where not recorded, from participants and ranks_of()
    timeline: object = None    # timeline.Timeline (--phases, newer files) or None
    noise: object = None       # dict of noise_scale's NOISE_SCALE_ATTRS (newer files, P > 1 or K > 1) or None
    simulations: list = field(default_factory=list)  # Simulation, every readable KKKK in order
    damaged_simulations: list = field(default_factory=list)  # (KKKK, reason) of those skipped


@dataclass
class Repeat:
    """/cases/NNNN/repeats/RR of an accuracy case: one training run from its own seed."""

    name: str                  # "00", "01", ...
    attrs: dict                # REPEAT_ATTRS (older files: REPEAT_ATTRS_REQUIRED)
    epochs: object             # structured array, one row per evaluation, with EPOCH_COLUMNS


@dataclass
class AccuracyCase(CaseAttrs):
    """An accuracy case (mode "accuracy", dlscale/3): repeats of training, no step times."""

    file: str
    name: str
    attrs: dict                # every case's attributes + optimizer, learning_rate, epochs, ...
    repeats: list              # Repeat, in group order; empty unless status is ok
    summary: object            # dict of accuracy_summary's attrs, or None
    index: int = 0             # position among a Study's accuracy cases
    placement: str = "packed"  # as Case
    hosts: int = 1
    noise: object = None       # as Case


@dataclass
class Projection:
    """/cases/NNNN/projection: a model's predicted step time at other rank counts."""

    attrs: dict                # model, alpha_s, beta_s_per_byte, fit_ranks, compute_s, ...,
                               # and with hosts: hosts, ranks_per_host, within_/between_alpha_s,
                               # within_/between_beta_s_per_byte, network_note
    ranks: object              # int64 [k]
    step_s: object             # float64 [k]
    efficiency: object         # float64 [k]
    between_hosts: object = None  # int8 [k]: 1 where the point used the between-host fit; None in older files

    @property
    def network_note(self):
        """Which network figures the projection used (the writer's own words), or ""."""
        return str(self.attrs.get("network_note") or "")


# The datasets of /cases/NNNN/simulations/KKKK, one value per simulated rank count; the four parts
# are the diagnosis' (update_s: its update and other) and add up to step_s.
SIMULATION_PARTS = ("compute_s", "straggler_wait_s", "exposed_allreduce_s", "update_s")
SIMULATION_DATASETS = ("ranks", "step_s", "efficiency") + SIMULATION_PARTS
# One value per gradient bucket (optional: older files lack them).
SIMULATION_BUCKET_DATASETS = ("bucket_bytes", "bucket_ready_fraction")
# One value per simulated rank count, optional (older files lack them): the part of update_s that is
# the parameters' all-gather of a sharded optimiser (0 for the others), and the bytes of an
# embedding's rows all-gathered (0 where it went dense, or there is none).
SIMULATION_PATTERN_DATASETS = ("parameter_gather_s", "embedding_rows_bytes")


@dataclass
class Simulation:
    """/cases/NNNN/simulations/KKKK (dlscale-project): the step simulated with SimGrid at each rank
    count on a described platform (docs/schema.md, docs/projection.md)."""

    name: str                  # "0000", "0001", ...: the order dlscale-project wrote them in
    attrs: dict                # source, simgrid_version, platform, platform_toml, platform_xml, placement,
                               # allreduce, sharding, allreduce_hierarchy, model, steps, seed, overlap, progress, scaling, measured_ranks,
                               # measured_step_s, error
    ranks: object              # int64 [k], ascending
    step_s: object             # float64 [k]
    efficiency: object         # float64 [k]: against the simulated P = 1
    compute_s: object          # float64 [k], and the other SIMULATION_PARTS
    straggler_wait_s: object
    exposed_allreduce_s: object
    update_s: object
    bucket_bytes: object = None          # float64 [buckets], or None
    bucket_ready_fraction: object = None
    parameter_gather_s: object = None    # float64 [k], or None
    embedding_rows_bytes: object = None  # float64 [k], or None

    @property
    def platform(self):
        return str(self.attrs.get("platform") or "unnamed platform")

    @property
    def measured_ranks(self):
        value = self.attrs.get("measured_ranks")
        return int(value) if isinstance(value, int) else None

    def at(self, ranks):
        """Index of rank count `ranks` in the datasets, or None."""
        hits = np.flatnonzero(self.ranks == ranks)
        return int(hits[0]) if hits.size else None


def shown_simulations(case):
    """The simulations of a case that the report shows: the newest (highest KKKK) of each
    platform, in KKKK order. dlscale-project never replaces a group (it adds the next KKKK), so
    an earlier run on the same platform is taken to be superseded."""
    newest = {}
    for sim in case.simulations:
        newest[sim.platform] = sim
    return sorted(newest.values(), key=lambda s: s.name)


@dataclass
class Utilisation:
    """/cases/NNNN/utilisation: CPU time, energy and GPU readings over the timed region."""

    attrs: dict                # threads, peak (where the peak came from), energy (its source)
    per_rank: object           # structured array [ranks]: cpu_utilisation, busy_cores, ...


@dataclass
class Peak:
    """/peak/NNNN: measured GEMM rates and memory bandwidths, one row per rank."""

    name: str
    attrs: dict                # source, seconds, measured_utc
    rates: object              # structured array: kind, driver, device_type, precision, ...


@dataclass
class AllReduce:
    """/allreduce/NNNN: one all-reduce microbenchmark (a sweep over message sizes)."""

    file: str
    name: str
    attrs: dict                # backend, ranks, dtype, iterations, warmup, case, alpha_s, ...
    bytes: object              # int64 [n]
    time_s: object             # float64 [ranks, n, iterations]
    algbw_gbps: object         # float64 [n]
    busbw_gbps: object         # float64 [n]
    errors: object             # int64 [n]
    hosts: int = 1             # attribute hosts; where not recorded, those of ranks 0..P-1
    network: str = "within one host"   # attribute network; where not recorded, from hosts


@dataclass
class Run:
    """/runs/NNNN (dlscale/4): one run of dlscale on the file, the first or a --resume."""

    name: str
    attrs: dict                # started_utc, resumed, command_line, config, world_size, ...
    ranks: object              # structured array: this run's rank table, as /system/ranks
    software: dict             # its /runs/NNNN/software attributes
    environment: dict          # its /runs/NNNN/environment attributes


@dataclass
class ResultsFile:
    """A whole results file: root attributes, per-rank system info, cases."""

    path: str
    attrs: dict
    ranks: object              # structured array of /system/ranks, or None
    cases: list
    software: dict = field(default_factory=dict)     # /system/software attributes
    allreduce: list = field(default_factory=list)    # AllReduce, in group order
    peaks: list = field(default_factory=list)        # Peak, in group order (dlscale/2)
    accuracy: list = field(default_factory=list)     # AccuracyCase, in case order (dlscale/3)
    damaged: list = field(default_factory=list)      # DamagedGroup: skipped, in group order
    runs: list = field(default_factory=list)         # Run, in group order (dlscale/4)

    def run_of(self, case):
        """The Run that wrote a case (its attribute run), or None (older files, a damaged run)."""
        number = case.attrs.get("run")
        if number is None:
            return None
        return next((r for r in self.runs if int(r.name) == int(number)), None)

    def ranks_of(self, case):
        """The rank table a case ran with: its run's, else /system/ranks (the first run's)."""
        run = self.run_of(case)
        return run.ranks if run is not None and run.ranks is not None else self.ranks


def _get(group, name):
    """group[name], or None when there is no such link. Unlike h5py's group.get(), which answers
    None for a member it cannot open too, an unreadable member raises (H5_ERRORS), so that it is
    reported as unreadable rather than as missing."""
    return group[name] if name in group else None


def _dataset(group, name, dtype=None):
    """Read a dataset fully, or None when absent (it is optional for failed cases)."""
    obj = _get(group, name)
    if not isinstance(obj, h5py.Dataset):
        return None
    data = obj[()]
    return np.asarray(data, dtype=dtype) if dtype is not None else data


# Case attributes every analysis relies on, with their types; a case without
# them is a malformed file, reported when it is read rather than as a
# confusing failure deep in some table.
REQUIRED_CASE_ATTRS = (("workload", str), ("driver", str), ("device_type", str),
                       ("precision", str), ("scaling", str), ("ranks", int),
                       ("batch_per_rank", int), ("global_batch", int), ("threads", int),
                       ("status", str))
REQUIRED_OK_ATTRS = (("iterations", int), ("train_flops_per_step", (int, float)))


def _check_attrs(attrs):
    required = REQUIRED_CASE_ATTRS + (REQUIRED_OK_ATTRS if attrs.get("status") == "ok" else ())
    for key, kind in required:
        if key not in attrs:
            raise _Damaged(f"lacks attribute '{key}'")
        value = attrs[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise _Damaged(f"attribute '{key}' is {type(value).__name__} {value!r}, "
                           f"not {getattr(kind, '__name__', 'a number')}")


def _read_case(path, name, group):
    attrs = _group_attrs(group)
    _check_attrs(attrs)
    ok = attrs["status"] == "ok"
    # dlscale writes a case whole (docs/schema.md): a part missing is a damaged case, reported
    # here rather than as a confusing failure deep in some table.
    required = ["iter_time_s"] + (["loss"] + (["phase_time_s"] if attrs.get("phases") else []) if ok else [])
    missing = [key for key in required if not isinstance(_get(group, key), h5py.Dataset)]
    if ok and not isinstance(_get(group, "summary"), h5py.Group):
        missing.append("summary")
    if missing:
        raise _Damaged(f"lacks {', '.join(missing)}")
    iter_time = _dataset(group, "iter_time_s", np.float64)
    phase_time = _dataset(group, "phase_time_s", np.float64)
    # Shape checks here so that stats code can rely on the layout.
    expected = (attrs["ranks"], attrs["iterations"] if ok else (iter_time.shape or [None])[-1])
    if iter_time.ndim != 2 or iter_time.shape != expected or (ok and iter_time.shape[1] == 0):
        raise _Damaged(f"iter_time_s has shape {iter_time.shape}, "
                       f"expected [ranks, iterations] = {list(expected)}")
    if phase_time is not None and (phase_time.ndim != 3 or phase_time.shape[2] != 4):
        raise _Damaged(f"phase_time_s has shape {phase_time.shape}, expected [ranks, iterations, 4]")
    exposed = _dataset(group, "exposed_allreduce_s", np.float64)
    if exposed is not None and exposed.ndim != 2:
        raise _Damaged(f"exposed_allreduce_s has shape {exposed.shape}, expected [ranks, iterations]")
    summary = _get(group, "summary")
    projection = _get(group, "projection")
    utilisation = _get(group, "utilisation")
    # Tables of one row per rank where the case has them; anything else there is damage.
    memory = _dataset(group, "memory")
    per_rank = _dataset(utilisation, "per_rank") if isinstance(utilisation, h5py.Group) else None
    for table, value in (("memory", memory), ("utilisation/per_rank", per_rank)):
        if value is not None and not _is_rank_table(value):
            raise _Damaged(f"{table} is not a table of one row per rank")
    simulations, damaged_simulations = _read_simulations(_get(group, "simulations"))
    return Case(
        file=path,
        name=name,
        attrs=attrs,
        iter_time_s=iter_time,
        phase_time_s=phase_time,
        loss=_dataset(group, "loss", np.float64),
        memory=memory,
        summary=_group_attrs(summary) if isinstance(summary, h5py.Group) else None,
        projection=_read_projection(projection)
        if isinstance(projection, h5py.Group) else None,
        exposed_allreduce_s=exposed,
        utilisation=Utilisation(attrs=_group_attrs(utilisation), per_rank=per_rank)
        if isinstance(utilisation, h5py.Group) else None,
        timeline=_read_timeline(group, iter_time.shape),
        noise=_read_noise(group),
        simulations=simulations,
        damaged_simulations=damaged_simulations,
    )


def _read_noise(group):
    """/cases/NNNN/noise_scale's attributes (docs/schema.md), or None where the case has none."""
    noise = _get(group, "noise_scale")
    if not isinstance(noise, h5py.Group):
        return None
    attrs = _group_attrs(noise)
    missing = [k for k in NOISE_SCALE_ATTRS if k not in attrs]
    if missing:
        raise _Damaged(f"noise_scale lacks attribute(s) {', '.join(missing)}")
    return {k: attrs[k] for k in NOISE_SCALE_ATTRS}


def _read_timeline(group, steps_shape):
    """/cases/NNNN/timeline with the case's bucket_start_s (docs/timelines.md), or None."""
    from .timeline import DATASETS, Timeline
    tl = _get(group, "timeline")
    if not isinstance(tl, h5py.Group):
        return None
    data = {name: _dataset(tl, name, np.float64) for name in DATASETS}
    ranks, iterations = steps_shape
    expected = {"step_start_s": (ranks, iterations), "clock_at_s": (ranks, 2), "clock_offset_s": (ranks, 2),
                "clock_bound_s": (ranks, 2)}
    for name, shape in expected.items():
        if data[name] is None or data[name].shape != shape:
            found = "absent" if data[name] is None else f"shape {data[name].shape}"
            raise _Damaged(f"timeline/{name} is {found}, expected {list(shape)}")
    ready, reduction = _dataset(group, "bucket_start_s", np.float64), data["bucket_reduction_s"]
    if reduction is not None and (ready is None or reduction.shape != ready.shape + (2,)):
        raise _Damaged(f"timeline/bucket_reduction_s has shape {reduction.shape}, expected "
                       f"bucket_start_s's and 2")
    return Timeline(step_start_s=data["step_start_s"], clock_at_s=data["clock_at_s"],
                    clock_offset_s=data["clock_offset_s"], clock_bound_s=data["clock_bound_s"],
                    bucket_ready_s=ready if reduction is not None else None, bucket_reduction_s=reduction)


def _read_accuracy_case(path, name, group):
    """An accuracy case: its attributes, and for an ok case every repeat and the summary."""
    attrs = _group_attrs(group)
    for key, kind in REQUIRED_CASE_ATTRS:
        if key not in attrs:
            raise _Damaged(f"lacks attribute '{key}'")
    if attrs["status"] != "ok":
        return AccuracyCase(file=path, name=name, attrs=attrs, repeats=[], summary=None)
    repeats_group, summary = _get(group, "repeats"), _get(group, "accuracy_summary")
    if not isinstance(repeats_group, h5py.Group) or not isinstance(summary, h5py.Group):
        raise _Damaged("an accuracy case lacking repeats or accuracy_summary")
    repeats = []
    names, damaged = _members(repeats_group, 2)
    if damaged:
        raise _Damaged(f"repeat {damaged[0][0]} unreadable ({damaged[0][1]})")
    for rname in names:
        rgroup = repeats_group[rname]
        if not isinstance(rgroup, h5py.Group):
            continue
        rattrs = _group_attrs(rgroup)
        missing = [k for k in REPEAT_ATTRS_REQUIRED if k not in rattrs]
        if missing:
            raise _Damaged(f"repeat {rname} lacks attribute(s) {', '.join(missing)}")
        epochs = _dataset(rgroup, "epochs")
        if epochs is None or epochs.dtype.names is None or epochs.ndim != 1:
            raise _Damaged(f"repeat {rname}: no epochs table")
        absent = [c for c in EPOCH_COLUMNS_REQUIRED if c not in epochs.dtype.names]
        if absent:
            raise _Damaged(f"repeat {rname}: epochs table lacks column(s) {', '.join(absent)}")
        rows_key = "evaluations" if "evaluations" in rattrs else "epochs_run"
        if len(epochs) != rattrs[rows_key]:
            raise _Damaged(f"repeat {rname}: epochs table has {len(epochs)} rows, "
                           f"{rows_key} is {rattrs[rows_key]}")
        repeats.append(Repeat(name=rname, attrs=rattrs, epochs=epochs))
    if not repeats:
        raise _Damaged("an accuracy case with no repeat")
    return AccuracyCase(file=path, name=name, attrs=attrs, repeats=repeats, summary=_group_attrs(summary),
                        noise=_read_noise(group))


def is_accuracy(group):
    """Whether /cases/NNNN is an accuracy case; files without `mode` hold timing cases."""
    return isinstance(group, h5py.Group) and decode(group.attrs.get("mode", "timing")) == "accuracy"


def _read_projection(group):
    ranks, step, eff, between = (_dataset(group, key, np.int64 if key in ("ranks", "between_hosts") else np.float64)
                                 for key in PROJECTION_DATASETS)
    if ranks is None or step is None or eff is None:
        raise _Damaged("projection lacks one of the datasets ranks, step_s, efficiency")
    if not (ranks.ndim == step.ndim == eff.ndim == 1 and len(ranks) == len(step) == len(eff)):
        raise _Damaged(f"projection datasets have shapes {ranks.shape}, {step.shape}, "
                       f"{eff.shape}; expected three of the same length")
    if between is not None and between.shape != ranks.shape:
        raise _Damaged(f"projection dataset between_hosts has shape {between.shape}, expected {ranks.shape}")
    return Projection(attrs=_group_attrs(group), ranks=ranks, step_s=step, efficiency=eff,
                      between_hosts=between)


def _read_simulation(path, name, group):
    data = {key: _dataset(group, key, np.int64 if key == "ranks" else np.float64) for key in SIMULATION_DATASETS}
    missing = [key for key, value in data.items() if value is None]
    if missing:
        raise _Damaged(f"lacks dataset(s) {', '.join(missing)}")
    k = data["ranks"].shape
    if len(k) != 1 or k[0] == 0 or any(v.shape != k for v in data.values()):
        raise _Damaged(f"datasets {', '.join(SIMULATION_DATASETS)} must be of one length k > 0, are "
                       + ", ".join(str(v.shape) for v in data.values()))
    buckets = {key: _dataset(group, key, np.float64) for key in SIMULATION_BUCKET_DATASETS}
    patterns = {key: _dataset(group, key, np.float64) for key in SIMULATION_PATTERN_DATASETS}
    for key, value in patterns.items():
        if value is not None and value.shape != k:
            raise _Damaged(f"dataset {key} has shape {value.shape}, not that of ranks {k}")
    return Simulation(name=name, attrs=_group_attrs(group), **data, **buckets, **patterns)


def _read_simulations(parent):
    """([Simulation], [(KKKK, reason)]) of a case's simulations group (absent: none)."""
    if parent is None:
        return [], []
    if not isinstance(parent, h5py.Group):
        return [], [("simulations", "not a group")]
    names, damaged = _members(parent)
    simulations = []
    for name in names:
        item = _read_member(None, "simulation", parent, name, _read_simulation)
        if isinstance(item, DamagedGroup):
            damaged.append((name, item.reason))
        else:
            simulations.append(item)
    return simulations, sorted(damaged)


def _read_allreduce(path, name, group):
    data = {key: _dataset(group, key, dtype) for key, dtype in ALLREDUCE_DATASETS}
    missing = [key for key, value in data.items() if value is None]
    if missing:
        raise _Damaged(f"lacks dataset(s) {', '.join(missing)}")
    n = data["bytes"].shape
    if len(n) != 1 or data["time_s"].ndim != 3 or data["time_s"].shape[1] != n[0] or any(
            data[key].shape != n for key in ("algbw_gbps", "busbw_gbps", "errors")):
        raise _Damaged(f"dataset shapes do not match bytes[{n[0] if n else '?'}] "
                       "(time_s must be [ranks, sizes, iterations])")
    return AllReduce(file=path, name=name, attrs=_group_attrs(group), **data)


def _read_peak(path, name, group):
    return Peak(name=name, attrs=_group_attrs(group), rates=_dataset(group, "rates"))


def _is_rank_table(ranks):
    """Whether a dataset read is a rank table (docs/schema.md): one row per rank, its `rank`
    field, where it has one, an integer (ranks.hosts_of looks hosts up by it)."""
    names = ranks.dtype.names if isinstance(ranks, np.ndarray) else None
    return names is not None and ranks.ndim == 1 and ("rank" not in names or ranks.dtype["rank"].kind in "iu")


def _read_run(path, name, group):
    ranks = _dataset(group, "ranks")
    if not _is_rank_table(ranks):
        raise _Damaged("no rank table")
    software, environment = _get(group, "software"), _get(group, "environment")
    return Run(name=name, attrs=_group_attrs(group), ranks=ranks,
               software=_group_attrs(software) if isinstance(software, h5py.Group) else {},
               environment=_group_attrs(environment) if isinstance(environment, h5py.Group) else {})


def _members(parent, width=4):
    """(names, [(name, reason)]) of the members of a group of numbered groups, sorted by name:
    the names that can be looked up, and those whose link cannot be read.

    dlscale numbers them 0000, 0001, ... (repeats 00, 01, ...; docs/schema.md), so when every
    member has such a name, each is looked up by name and the group is never iterated: HDF5 1.10
    can crash (SIGSEGV, nothing to catch) iterating over the links of a group that a full disk
    left half written, where looking one up by name raises an error for that one. Members with
    other names (a file another tool wrote) are listed by iterating, which reads a sound file.
    When even the number of members is unreadable (the group's index points past the end of the
    file), names are looked up from 0000 to the first that is absent or unreadable; what may
    follow that one cannot be listed. Other errors are the file's (ReportError from the caller).
    """
    if not isinstance(parent, h5py.Group):
        return [], []
    try:
        count = len(parent)                  # from the group's link info, not its links
    except H5_ERRORS as e:
        count, unknown = None, e
    names, damaged = [], []
    for i in range(10 ** width if count is None else count):
        name = f"{i:0{width}d}"
        try:
            present = name in parent
        except H5_ERRORS as e:
            if count is None:
                damaged.append((name, f"unreadable link: {_one_line(e)}; the list of the groups after it "
                                      "is unreadable too"))
                break
            damaged.append((name, f"unreadable link: {_one_line(e)}"))
            continue
        if not present:
            if count is None:
                break
            return sorted(parent.keys()), []  # not numbered as dlscale numbers them: list them
        names.append(name)
    if count is None and not names and not damaged:
        raise unknown                         # nothing numbered to find: the group is unreadable
    return names, damaged


def _read_member(path, kind, parent, name, read):
    """read(path, name, group) of parent[name], or a DamagedGroup saying why it cannot be."""
    if reading:
        reading(path)  # progress: the group before this one was read
    try:
        group = parent[name]
        if not isinstance(group, h5py.Group):
            raise _Damaged("not a group")
        return read(path, name, group)
    except _Damaged as e:
        return DamagedGroup(kind, name, str(e))
    except H5_ERRORS as e:
        return DamagedGroup(kind, name, f"unreadable: {_one_line(e)}")


def _read_any_case(path, name, group):
    return (_read_accuracy_case if is_accuracy(group) else _read_case)(path, name, group)


def _close(f):
    """Close a file opened read-only; HDF5 may still complain about a damaged one, but nothing of
    ours is left to write."""
    try:
        f.close()
    except H5_ERRORS:
        pass


def _open(path):
    """Open a results file read-only after checking it is HDF5 with our schema."""
    if not os.path.exists(path):
        raise ReportError(f"{path}: no such file")
    if os.path.isdir(path):
        raise ReportError(f"{path}: is a directory, not a results file")
    try:
        if not h5py.is_hdf5(path):
            raise ReportError(f"{path}: not an HDF5 file")
        f = h5py.File(path, "r")
    except H5_ERRORS as e:
        # e.g. a file cut short: HDF5 1.10 refuses it whole ("truncated file: eof = ...").
        raise ReportError(f"{path}: cannot be opened as HDF5 ({_one_line(e)})") from e
    try:
        schema = f.attrs.get("schema")
    except H5_ERRORS as e:
        # A damaged attribute heap: HDF5 opens the superblock but cannot read the root.
        _close(f)
        raise ReportError(f"{path}: malformed results file ({_one_line(e)})") from e
    if schema is None:
        _close(f)
        raise ReportError(f"{path}: not a dlscale results file (schema attribute missing)")
    schema = decode(schema)
    if schema not in SCHEMAS:
        _close(f)
        raise ReportError(f"{path}: schema {schema!r} is not supported (expected {', '.join(SCHEMAS[:-1])} or {SCHEMAS[-1]})")
    return f


def case_name(case):
    """Accept a case as its group name ("0003") or its index (3)."""
    return f"{case:04d}" if isinstance(case, int) else str(case)


# The numbered groups of a file: (kind, parent group, reader), in the order of ResultsFile.damaged.
_NUMBERED = (("case", "cases", _read_any_case), ("allreduce", "allreduce", _read_allreduce),
             ("peak", "peak", _read_peak), ("run", "runs", _read_run))


# Called with a file's path before it is read, again before each of its groups, and with None
# after: the command line's process learns which file HDF5 was reading if it crashes, and that
# it is not stuck in one (cli.main).
reading = None


def load_results(path, only=None):
    """Load a results file; `only` restricts loading to one case (name or index).

    A file that is not a results file raises ReportError. A damaged group is skipped and listed
    in .damaged, except a damaged case asked for by `only`, which raises ReportError.
    """
    path = os.fspath(path)
    if reading:
        reading(path)
    f = _open(path)
    try:
        return _load(f, path, only)
    finally:
        _close(f)
        if reading:
            reading(None)


def _load(f, path, only):
    try:
        attrs = attrs_dict(f)
        ranks = _dataset(f, "system/ranks")
        if not _is_rank_table(ranks):
            raise ReportError(f"{path}: no /system/ranks table (not a complete dlscale file)")
        software = _get(f, "system/software")
        software = attrs_dict(software) if isinstance(software, h5py.Group) else {}
        if "cases" in f and not isinstance(f["cases"], h5py.Group):
            raise ReportError(f"{path}: /cases is not a group (not a complete dlscale file)")
        # /allreduce and /peak are newer than some files; absent means none ran.
        parents = {kind: _get(f, group) for kind, group, _ in _NUMBERED}
        members = {kind: _members(parents[kind]) for kind in parents}
    except H5_ERRORS as e:
        # The root, /system or the list of a numbered group's members: nothing can be trusted.
        raise ReportError(f"{path}: malformed results file ({_one_line(e)})") from e
    if only is not None:
        wanted = case_name(only)
        names, unreadable = members["case"]
        for name, reason in unreadable:
            if name == wanted:
                raise ReportError(f"{path}: case {wanted}: {reason}")
        if wanted not in names:
            raise ReportError(f"{path}: no case {wanted} (cases: {', '.join(names) or 'none'})")
        members = {"case": ([wanted], []), "allreduce": ([], []), "peak": ([], []), "run": members["run"]}
    loaded, damaged = {}, []
    for kind, _, read in _NUMBERED:
        names, unreadable = members[kind]
        items = [_read_member(path, kind, parents[kind], name, read) for name in names]
        loaded[kind] = [item for item in items if not isinstance(item, DamagedGroup)]
        damaged += sorted([DamagedGroup(kind, name, reason) for name, reason in unreadable]
                          + [item for item in items if isinstance(item, DamagedGroup)],
                          key=lambda d: d.name)
    # A damaged simulation group leaves its case readable: named on its own.
    damaged += [DamagedGroup("simulation", f"{c.name}/{name}", reason)
                for c in loaded["case"] if isinstance(c, Case) for name, reason in c.damaged_simulations]
    damaged_cases = [d for d in damaged if d.kind == "case"]
    if only is not None and damaged_cases:
        raise ReportError(f"{path}: case {damaged_cases[0].name}: {damaged_cases[0].reason}")
    result = ResultsFile(path=path, attrs=attrs, ranks=ranks,
                         cases=[c for c in loaded["case"] if isinstance(c, Case)],
                         software=software, allreduce=loaded["allreduce"], peaks=loaded["peak"],
                         accuracy=[c for c in loaded["case"] if isinstance(c, AccuracyCase)],
                         damaged=damaged, runs=loaded["run"])
    _place(result)
    return result


def _recorded_int(attrs, key):
    """An int64 attribute as int, or None where absent or not an integer."""
    value = attrs.get(key)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _count_hosts(ranks_table, world_ranks):
    """How many distinct hosts the rank table gives the world ranks (at least 1)."""
    from .ranks import hosts_of
    hosts = hosts_of(ranks_table)
    return max(1, len({hosts[r] for r in world_ranks if r in hosts}))


def _place(result):
    """Set every case's placement and hosts, and every all-reduce's hosts and network
    (docs/schema.md): as recorded; where a file predates them, "packed" and the hosts the rank
    table of the run that wrote it gives the ranks."""
    from .ranks import parse_participants
    for case in result.cases + result.accuracy:
        a = case.attrs
        case.placement = str(a.get("placement") or "packed")
        hosts = _recorded_int(a, "hosts")
        if hosts is None:
            ranks = _recorded_int(a, "ranks") or 0
            hosts = _count_hosts(result.ranks_of(case), parse_participants(a.get("participants"), ranks))
        case.hosts = max(1, hosts)
    for ar in result.allreduce:
        a = ar.attrs
        hosts = _recorded_int(a, "hosts")
        if hosts is None:
            ranks = _recorded_int(a, "ranks") or ar.time_s.shape[0]
            hosts = _count_hosts(result.ranks_of(ar), range(ranks))
        ar.hosts = max(1, hosts)
        ar.network = str(a.get("network") or ("between hosts" if ar.hosts > 1 else "within one host"))


def load_case(path, case):
    """Load one timing case (name "0003" or index 3) of a results file."""
    loaded = load_results(path, only=case)
    if not loaded.cases:
        raise ReportError(f"{loaded.path}: case {case_name(case)} is an accuracy case; it has no step times "
                          "(dlscale-report report shows it)")
    return loaded.cases[0]
