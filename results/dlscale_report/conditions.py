"""What shaped a case's figures besides the backend: what reduced its gradients, contention, the
kernel's share and page faults, and a share of peak above 100% with its reason (docs/metrics.md,
"Bucketed, overlapped all-reduce", "Utilisation and energy", "The allocator", "Measured peak").
Read from the case and summary attributes; where older files have none, nothing is said of them,
except the all-reduce, which follows from what those versions did.
"""

import math

# Large enough to name in the diagnosis: a tenth of the CPU time in the kernel, or a thousand
# page faults a step (4 MB of memory faulted in again at every step).
KERNEL_SHARE_NOTED = 0.10
FAULTS_PER_STEP_NOTED = 1000


def _summary_value(case, key):
    s = case.summary or {}
    v = s.get(key)
    if v is None or isinstance(v, str):
        return v
    v = float(v)
    return None if math.isnan(v) else v


def contended(case):
    """Whether the case's ranks had less CPU than they asked for (summary attribute contended)."""
    return bool(_summary_value(case, "contended"))


def contention_text(case):
    """"contended: 31% of runnable time waiting for a core" or ""."""
    if not contended(case):
        return ""
    wait, steal = _summary_value(case, "cpu_wait_share"), _summary_value(case, "cpu_steal_share")
    parts = []
    if wait is not None:
        parts.append(f"{100 * wait:.0f}% of runnable time waiting for a core")
    if steal is not None and steal >= 0.05:
        parts.append(f"{100 * steal:.0f}% of the host's CPU stolen by the hypervisor")
    return "contended: " + (", ".join(parts) or "less CPU than asked for")


def kernel_text(case):
    """"34% of the CPU time in the kernel, 1.2 M page faults per step: ..." when either is large."""
    share, faults = _summary_value(case, "system_share"), _summary_value(case, "page_faults_per_step")
    big_share = share is not None and share >= KERNEL_SHARE_NOTED
    big_faults = faults is not None and faults >= FAULTS_PER_STEP_NOTED
    if not (big_share or big_faults):
        return ""
    parts = []
    if share is not None:
        parts.append(f"{100 * share:.0f}% of the CPU time in the kernel")
    if faults is not None:
        parts.append(f"{_count(faults)} page faults per step")
    text = ", ".join(parts)
    if big_faults:
        if "--malloc keep" in str(case.attrs.get("allocator", "")):
            # glibc keeps freed memory here: what still faults is memory first touched in the
            # timed steps, or a thread arena's blocks over its 64 MiB heap.
            why = ("memory first touched during the timed steps (more warm-up lowers it) or blocks over 64 MiB "
                   "of a thread's arena")
        else:
            why = ("the allocator returns memory to the OS and faults it in again every step (run with "
                   "--malloc keep)")
        text += f": {why}; see docs/metrics.md#the-allocator"
    return text


def above_peak_text(case):
    """"124% of peak: the peak was measured with ..." for a share above 100%, else ""."""
    share = _summary_value(case, "peak_share")
    if share is None or share <= 1:
        return ""
    reason = _summary_value(case, "peak_share_note") or "no reason recorded (a file before dlscale/4)"
    return f"{100 * share:.0f}% of peak: {reason}"


# What reduced the gradients (docs/schema.md, allreduce_mechanism).
MECHANISMS = {
    "mpi_allreduce": "one all-reduce over MPI after backward",
    "mpi_allreduce_buckets_thread": "one all-reduce per bucket on a communication thread, during backward",
    "mpi_allreduce_buckets_after_backward": "one all-reduce per bucket after backward (MPI gave no thread level "
                                            "for a communication thread)",
    "mpi_iallreduce_buckets": "one MPI_Iallreduce per bucket (Open MPI 4.1: a binomial tree and a broadcast)",
    "nccl": "one ncclAllReduce after backward",
    "nccl_buckets_stream": "one ncclAllReduce per bucket on a stream of its own, during backward",
}
# The bucketed ones, in a few words; one all-reduce after backward, the plain case, has none.
MECHANISM_FLAGS = {
    "mpi_allreduce_buckets_thread": "buckets on a thread",
    "mpi_allreduce_buckets_after_backward": "buckets after backward",
    "mpi_iallreduce_buckets": "MPI_Iallreduce buckets",
    "nccl_buckets_stream": "buckets on a stream",
}


def allreduce_mechanism(case):
    """The recorded allreduce_mechanism; for files written before it, what that dlscale did:
    buckets of a CPU case on several ranks were MPI_Iallreduce calls."""
    a = case.attrs
    recorded = a.get("allreduce_mechanism")
    if recorded is not None:
        return str(recorded)
    ranks, bucket_mb = int(a.get("ranks", 1)), float(a.get("bucket_mb", 0) or 0)
    gpu = a.get("device_type") == "cuda"
    if ranks <= 1 and not (gpu and bucket_mb > 0):
        return "none"
    if gpu:
        return "nccl_buckets_stream" if bucket_mb > 0 else "nccl"
    return "mpi_iallreduce_buckets" if bucket_mb > 0 else "mpi_allreduce"


def bucketed(case):
    """Whether the case reduced its gradients in buckets."""
    return allreduce_mechanism(case) in MECHANISM_FLAGS


def allreduce_text(case):
    """"all-reduce: one all-reduce per bucket on a communication thread, during backward (5
    buckets of 25 MB), ring segments of 65472 bytes; MPI's settings: coll_tuned_..." for a case
    whose gradients were reduced, else ""."""
    mechanism = allreduce_mechanism(case)
    if mechanism == "none":
        return ""
    a = case.attrs
    text = "all-reduce: " + MECHANISMS.get(mechanism, mechanism)
    buckets, bucket_mb = a.get("allreduce_buckets"), float(a.get("bucket_mb", 0) or 0)
    if bucket_mb > 0:
        count = f"{int(buckets)} bucket{'s' if int(buckets) != 1 else ''}" if buckets is not None else "buckets"
        text += f" ({count} of {bucket_mb:g} MB)"
    segment = int(a.get("allreduce_segment_bytes", 0) or 0)  # absent in older files
    if segment > 0:
        text += f", ring segments of {segment} bytes"
    settings = str(a.get("mpi_allreduce_settings", "") or "")
    if settings:
        text += f"; MPI's settings: {settings}"
    return text


def allreduce_flag(case):
    """A few words for the conditions cell where buckets reduced the gradients ("buckets on a
    thread"), else ""."""
    return MECHANISM_FLAGS.get(allreduce_mechanism(case), "")


def blas_text(case):
    """"BLAS kernels SkylakeX (OpenBLAS chose Prescott): selected by dlscale ..." where dlscale chose
    other kernels than the BLAS would have, or the ones in use are below the CPU's instruction set;
    else "" (also for files without blas_core_reason)."""
    a = case.attrs
    used, chosen, reason = (str(a.get(k, "") or "") for k in ("blas_core", "blas_core_chosen", "blas_core_reason"))
    if not reason or not (used != chosen or int(a.get("blas_core_below_cpu", 0))):
        return ""
    return f"BLAS kernels {used}: {reason}"


def case_conditions(case):
    """Every condition of the case worth saying, as sentences (possibly none)."""
    return [t for t in (blas_text(case), contention_text(case), kernel_text(case), above_peak_text(case)) if t]


def short_flags(case):
    """The same, in a few words for a table cell: "buckets on a thread", "contended", "kernel 34%",
    "1.2 M faults/step", "above peak"."""
    flags = [allreduce_flag(case)] if allreduce_flag(case) else []
    if blas_text(case):
        a = case.attrs
        flags.append(f"BLAS {a.get('blas_core')}" + (" (below the CPU)" if int(a.get("blas_core_below_cpu", 0)) else ""))
    if contended(case):
        flags.append("contended")
    share, faults = _summary_value(case, "system_share"), _summary_value(case, "page_faults_per_step")
    if share is not None and share >= KERNEL_SHARE_NOTED:
        flags.append(f"kernel {100 * share:.0f}%")
    if faults is not None and faults >= FAULTS_PER_STEP_NOTED:
        flags.append(f"{_count(faults)} faults/step")
    if above_peak_text(case):
        flags.append("above peak")
    return flags


def _count(n):
    return f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n / 1e3:.1f} k" if n >= 1e3 else f"{n:.0f}"
