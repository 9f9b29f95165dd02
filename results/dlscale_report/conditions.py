"""What shaped a case's figures besides the backend: contention, the kernel's share and page
faults, and a share of peak above 100% with its reason (docs/metrics.md, "Utilisation and
energy", "The allocator", "Measured peak"). Read from the summary attributes dlscale/4 records;
older files have none, and nothing is said of them.
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


def case_conditions(case):
    """Every condition of the case worth saying, as sentences (possibly none)."""
    return [t for t in (contention_text(case), kernel_text(case), above_peak_text(case)) if t]


def short_flags(case):
    """The same, in a few words for a table cell: "contended", "kernel 34%", "1.2 M faults/step",
    "above peak"."""
    flags = []
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
