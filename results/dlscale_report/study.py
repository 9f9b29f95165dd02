"""Several results files as one study, and the keys that group its cases.

A scaling study is usually a series of jobs (sbatch or mpirun -n 1, 2, 4, ...),
each writing its own file. Every file is loaded and validated on its own (a
foreign or wrong-schema file is an error for the whole study; a damaged case
group is left out, and named in Study.damaged); their cases are then pooled,
and grouped by the attributes that define "the same experiment".
"""

import shlex
from dataclasses import dataclass, field

from .schema import load_results


@dataclass
class Study:
    files: list                # ResultsFile, in command-line order
    cases: list                # every timing Case of every file; case.index = position here
    accuracy: list = field(default_factory=list)  # every AccuracyCase (dlscale/3), same order

    @property
    def paths(self):
        return [f.path for f in self.files]

    def hosts_for(self, case):
        """{world rank: host} of the run that wrote `case` (docs/schema.md, /runs)."""
        from .ranks import hosts_of
        f = next((f for f in self.files if f.path == case.file), None)
        return hosts_of(f.ranks_of(case)) if f is not None else {}

    def case_hosts(self, case):
        """The host of each of `case`'s ranks, in case-rank order ("" where unknown)."""
        from .ranks import parse_participants
        hosts = self.hosts_for(case)
        return [hosts.get(w, "") for w in parse_participants(case.attrs.get("participants"),
                                                             case.iter_time_s.shape[0])]

    @property
    def damaged(self):
        """Every group skipped as damaged: (file path, DamagedGroup) pairs."""
        return [(f.path, d) for f in self.files for d in f.damaged]


def load_study(paths):
    """Load every file; cases keep file order then case order."""
    files = [load_results(p) for p in paths]
    cases = [c for f in files for c in f.cases]
    for i, case in enumerate(cases):
        case.index = i
    accuracy = [c for f in files for c in f.accuracy]
    for i, case in enumerate(accuracy):
        case.index = i
    return Study(files=files, cases=cases, accuracy=accuracy)


def requested_threads(case):
    """The --threads the case was asked for: an integer, or "auto".

    The `threads` attribute holds the resolved count, which under `auto`
    follows each job's CPU binding and so differs between an `mpirun -n 1`
    and an `-n 4` job; grouping on it would split one scaling series. The
    case_key (the command that reruns the case) says what was asked; it has
    no --threads for auto. Files without case_key fall back to the count.
    """
    key = case.attrs.get("case_key")
    if not key:
        return case.attrs.get("threads")
    try:
        words = shlex.split(str(key))
    except ValueError:
        return case.attrs.get("threads")
    for i, word in enumerate(words):
        if word == "--threads" and i + 1 < len(words):
            value = words[i + 1]
        elif word.startswith("--threads="):
            value = word.split("=", 1)[1]
        else:
            continue
        return int(value) if value.isdigit() else value
    return "auto"


def batch_as_given(case):
    """The batch a user typed: per rank for weak scaling, global for strong."""
    if case.get("scaling") == "strong":
        return case.get("global_batch")
    return case.get("batch_per_rank")


def comm_key(case):
    """Gradient-communication settings (newer files): the bucket size, None when not recorded, the
    format the gradients were summed in ("none" in files from before compression), the
    all-reduce's hierarchy ("flat" in files from before it) and what the ranks shard ("none" in
    files from before sharding). Whether the
    buckets overlapped backward is not part of it: that follows from the driver and the rank count
    (one rank reduces nothing), and a series holds its one-rank case beside the rest."""
    return (case.attrs.get("bucket_mb"), case.attrs.get("grad_compression") or "none",
            case.attrs.get("allreduce_hierarchy") or "flat", case.attrs.get("sharding") or "none")


def placement_of(case):
    """How the case's ranks were placed on hosts: "packed" (also a file from before placements were recorded) or "spread"."""
    return getattr(case, "placement", None) or "packed"


def hosts_count(case):
    """How many hosts the case's ranks spanned (1 unless recorded or computed otherwise)."""
    return getattr(case, "hosts", None) or 1


def hosts_text(hosts):
    """ "1 host", "2 hosts"."""
    return f"{hosts} host{'' if hosts == 1 else 's'}"


def rank_key(case):
    """Where a case ran: rank count, hosts and placement; what every key that holds the rank
    count holds with it."""
    return (case.get("ranks"), hosts_count(case), placement_of(case))


def experiment_key(case):
    """Everything but the rank count (and so the hosts it spans): the cases of one scaling series
    share it. The placement is part of it: a series never mixes packed and spread cases."""
    return (case.get("workload"), case.get("driver"), case.get("device_type"),
            case.get("precision"), case.attrs.get("denormals"), case.get("scaling"), batch_as_given(case),
            requested_threads(case)) + comm_key(case) + (placement_of(case),)


def match_key(case):
    """Cases of two runs that are the same measurement (used by `compare`): the same rank count
    on as many hosts, placed alike."""
    return (case.get("workload"), case.get("driver"), case.get("device_type"),
            case.get("precision"), case.attrs.get("denormals"), case.get("scaling"), case.get("ranks"),
            case.get("batch_per_rank"), case.get("threads")) + comm_key(case) + rank_key(case)[1:]


def describe(case, without=()):
    """Short human label of a case's configuration, e.g. "fcn5 libtorch cpu fp32 flush weak b=8 t=1".

    `without` drops parts that a table shows in their own column (e.g. "ranks"; "placement").
    The rank count names its hosts when there are several ("P=4 on 2 hosts"); the placement is
    named when it is "spread" (packed is what every single-host file ran).
    """
    ranks = f"P={case.get('ranks')}"
    if hosts_count(case) > 1:
        ranks += f" on {hosts_text(hosts_count(case))}"
    parts = [("workload", case.get("workload")), ("driver", case.get("driver")),
             ("device", case.get("device_type")), ("precision", case.get("precision")),
             ("denormals", case.attrs.get("denormals", "")),
             ("scaling", case.get("scaling")), ("ranks", ranks),
             ("placement", "" if placement_of(case) == "packed" else placement_of(case)),
             ("batch", f"b={batch_as_given(case)}"), ("threads", f"t={requested_threads(case)}")]
    # Shown only when set (0: one all-reduce after backward), to keep labels short; the grouping
    # keys above always include it.
    bucket, compression, hierarchy, sharding = comm_key(case)
    if bucket:
        parts.append(("bucket", f"bucket={bucket:g}MB"))
    if compression != "none":
        parts.append(("compression", f"grads={compression}"))
    if hierarchy != "flat":
        parts.append(("hierarchy", f"allreduce={hierarchy}"))
    if sharding != "none":
        parts.append(("sharding", f"sharded={sharding}"))
    return " ".join(str(v) for k, v in parts if k not in without and v != "")


def case_ref(case):
    """Where a case comes from, for notes: "file.h5:0003"."""
    return f"{case.file}:{case.name}"


def dedupe(cases, key):
    """Keep the first case per key (an ok one over a failed one); notes name the rest.

    Two files holding the same configuration (a rerun, or a file given twice)
    would otherwise give two points at one x value of a curve.
    """
    first, notes = {}, []
    for case in cases:
        k = key(case)
        if k not in first:
            first[k] = case
        elif case.ok and not first[k].ok:
            # A rerun that succeeded replaces a failed attempt.
            notes.append(f"{case_ref(case)} replaces {case_ref(first[k])} ({first[k].status}) "
                         f"for {describe(case)}")
            first[k] = case
        else:
            notes.append(f"{case_ref(case)} repeats {case_ref(first[k])} ({describe(case)}); "
                         "the first is used")
    return list(first.values()), notes


def group_by(cases, key):
    """Ordered dict key -> cases, in first-appearance order."""
    groups = {}
    for case in cases:
        groups.setdefault(key(case), []).append(case)
    return groups
