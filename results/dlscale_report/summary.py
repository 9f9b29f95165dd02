"""One table row per case, across one or more results files.

Rows are plain dicts in SI-like report units (ms, samples/s, GFLOP/s) so the
same rows serve the aligned text table and the CSV and JSON output.
"""

import csv
import io
import math

from .conditions import allreduce_mechanism, case_conditions, short_flags
from .schema import load_results
from .stats import case_stats
from .study import hosts_count, placement_of
from .tables import COVERAGE_NOTE, WIDTH, Column, Table, few_samples, ms_ci, wrap

# (row key, text-table header, right-aligned?, detail): a terminal table wider than 120 columns
# leaves out the columns of detail > 0, the highest first (tables.Table.text; --wide shows them).
# The conditions go first: format_table lists them in full under the table.
COLUMNS = (
    ("file", "file", False, 0),
    ("case", "case", False, 0),
    ("workload", "workload", False, 0),
    ("driver", "driver", False, 0),
    ("device", "device", False, 0),
    ("precision", "precision", False, 0),
    ("isa", "isa", False, 5),
    ("denormals", "denormals", False, 5),
    ("scaling", "scaling", False, 0),
    ("ranks", "P", True, 0),
    ("hosts", "hosts", True, 0),
    ("placement", "placement", False, 0),
    ("batch_per_rank", "batch/rank", True, 0),
    ("global_batch", "global batch", True, 4),
    ("threads", "threads", True, 0),
    ("step_median_ms", "step ms [95% CI]", True, 0),
    ("samples_per_s", "samples/s", True, 0),
    ("achieved_gflops", "GFLOP/s", True, 1),
    ("exposed_allreduce_ms", "exposed all-reduce ms", True, 2),
    ("cpu_utilisation", "CPU util", True, 3),
    ("peak_pct", "% of peak", True, 1),
    ("host_peak_rss_mb", "host RSS MB", True, 6),
    ("device_peak_mb", "device MB", True, 7),
    ("energy_j_per_sample", "J/sample", True, 8),
    ("conditions", "conditions", False, 9),
    ("status", "status", False, 0),
)

# Shown in the text and HTML tables only where some case's ranks crossed hosts or were spread
# (a single-host file's table stays as it was); the CSV and JSON always have them.
HOST_COLUMNS = ("hosts", "placement")

HOSTS_NOTE = ("hosts: how many hosts the case's ranks spanned; placement: packed (the ranks fill "
              "one host before the next) or spread (one rank per host before a second on any); "
              "files without them ran packed, their hosts counted from the rank table")

# CSV keeps the CI bounds and the message as separate machine-readable columns.
CSV_COLUMNS = ("file", "case", "workload", "driver", "device", "precision", "isa", "denormals", "scaling",
               "ranks", "hosts", "placement", "batch_per_rank", "global_batch", "threads",
               "step_median_ms", "ci95_low_ms", "ci95_high_ms", "ci_coverage",
               "samples_per_s", "achieved_gflops", "exposed_allreduce_ms", "exposed_allreduce_least_ms",
               "cpu_utilisation", "busy_cores",
               "peak_gflops", "peak_pct", "peak_note", "host_peak_rss_mb", "device_peak_mb", "energy_j_per_step",
               "energy_j_per_sample", "energy_source", "user_ms_per_step", "system_ms_per_step", "kernel_pct",
               "faults_per_step", "major_faults_per_step",
               "cpu_wait_pct", "cpu_steal_pct", "contended", "allocator", "run", "allreduce_mechanism",
               "allreduce_buckets", "allreduce_segment_bytes", "mpi_allreduce_settings", "conditions", "status", "message")


def case_row(case):
    """Table row of one loaded Case."""
    a = case.attrs
    row = {
        "file": case.file,
        "case": case.name,
        "workload": a.get("workload"),
        "driver": a.get("driver"),
        "device": a.get("device_type"),
        "precision": a.get("precision"),
        "isa": a.get("isa", ""),
        "denormals": a.get("denormals", ""),
        "scaling": a.get("scaling"),
        "ranks": a.get("ranks"),
        "hosts": hosts_count(case),
        "placement": placement_of(case),
        "batch_per_rank": a.get("batch_per_rank"),
        "global_batch": a.get("global_batch"),
        "threads": a.get("threads"),
        "status": case.status,
        "message": a.get("message", ""),
        "step_median_ms": None, "ci95_low_ms": None, "ci95_high_ms": None, "ci_coverage": None,
        "samples_per_s": None, "achieved_gflops": None, "exposed_allreduce_ms": None,
        "exposed_allreduce_least_ms": None,
        "cpu_utilisation": None, "busy_cores": None, "peak_gflops": None, "peak_pct": None,
        "host_peak_rss_mb": None, "device_peak_mb": None, "energy_j_per_step": None,
        "energy_j_per_sample": None, "energy_source": None, "peak_note": None, "kernel_pct": None,
        "user_ms_per_step": None, "system_ms_per_step": None,
        "faults_per_step": None, "major_faults_per_step": None, "cpu_wait_pct": None, "cpu_steal_pct": None,
        "contended": None, "allocator": a.get("allocator"), "run": a.get("run"),
        "allreduce_mechanism": allreduce_mechanism(case), "allreduce_buckets": a.get("allreduce_buckets"),
        "allreduce_segment_bytes": a.get("allreduce_segment_bytes"),
        "mpi_allreduce_settings": a.get("mpi_allreduce_settings", ""),
        "conditions": ", ".join(short_flags(case)), "conditions_text": case_conditions(case),
    }
    # Memory: the largest rank's peak (1 MB = 1e6 B); -1 (not measured) and 0 (a CPU case's
    # device) show as missing.
    m = case.memory
    if m is not None and len(m):
        for key, field in (("host_peak_rss_mb", "host_peak_rss_bytes"), ("device_peak_mb", "device_peak_bytes")):
            if field in m.dtype.names and m[field].max() > 0:
                row[key] = float(m[field].max()) / 1e6
    if case.utilisation is not None:
        row["energy_source"] = case.utilisation.attrs.get("energy")
    # Show what the benchmark recorded; fall back to recomputing when an ok
    # case somehow lacks its summary group.
    s = case.summary if case.summary is not None else case_stats(case)
    if case.ok and s:
        # .get: a partial summary group still shows what it has.
        for key, src, scale in (("step_median_ms", "step_median_s", 1e3),
                                ("ci95_low_ms", "ci95_low_s", 1e3),
                                ("ci95_high_ms", "ci95_high_s", 1e3),
                                ("ci_coverage", "ci_coverage", 1.0),
                                ("samples_per_s", "samples_per_s", 1.0),
                                ("achieved_gflops", "achieved_flops", 1e-9),
                                ("exposed_allreduce_ms", "exposed_allreduce_median_s", 1e3),
                                ("exposed_allreduce_least_ms", "exposed_allreduce_least_median_s", 1e3),
                                ("cpu_utilisation", "cpu_utilisation", 1.0),
                                ("busy_cores", "busy_cores", 1.0),
                                ("peak_gflops", "peak_flops", 1e-9),
                                ("peak_pct", "peak_share", 100.0),
                                ("energy_j_per_step", "energy_j_per_step", 1.0),
                                ("energy_j_per_sample", "energy_j_per_sample", 1.0),
                                ("user_ms_per_step", "user_s_per_step", 1e3),
                                ("system_ms_per_step", "system_s_per_step", 1e3),
                                ("kernel_pct", "system_share", 100.0),
                                ("faults_per_step", "page_faults_per_step", 1.0),
                                ("major_faults_per_step", "major_faults_per_step", 1.0),
                                ("cpu_wait_pct", "cpu_wait_share", 100.0),
                                ("cpu_steal_pct", "cpu_steal_share", 100.0),
                                ("contended", "contended", 1)):
            # dlscale/2 summaries; NaN (unavailable) shows as missing.
            if s.get(src) is not None and not math.isnan(float(s[src])):
                row[key] = float(s[src]) * scale if isinstance(scale, float) else int(s[src])
        row["peak_note"] = s.get("peak_share_note") or None
    return row


def run_rows(files):
    """One row per run record of each file that has more than one (a resumed file): when it
    started, first run or resume, its ranks and hosts, its build, its command and its cases."""
    from .ranks import hosts_of
    rows = []
    for f in files:
        if len(f.runs) < 2:
            continue
        for run in f.runs:
            a = run.attrs
            cases = [c.name for c in f.cases + f.accuracy if f.run_of(c) is run]
            rows.append({"file": f.path, "run": run.name, "started_utc": a.get("started_utc", ""),
                         "kind": "resumed" if a.get("resumed") else "created",
                         "world_size": a.get("world_size"), "hosts": sorted(set(hosts_of(run.ranks).values())),
                         "dlscale": a.get("dlscale_version", ""), "commit": a.get("git_commit", ""),
                         "cases": cases, "command_line": a.get("command_line", "")})
    return rows


def runs_text(files, width=WIDTH):
    """The runs of resumed files, for the text summary ("" when every file had one run)."""
    rows = run_rows(files)
    if not rows:
        return ""
    lines = ["", "runs (each case names the run that wrote it; docs/schema.md, /runs):"]
    for r in rows:
        cases = ", ".join(r["cases"]) or "none"
        line = (f"  {r['file']} run {r['run']}, {r['kind']} {r['started_utc']}: {r['world_size']} ranks on "
                f"{', '.join(r['hosts'])}; dlscale {r['dlscale']} ({r['commit']}); cases {cases}; "
                f"{r['command_line']}")
        lines += wrap(line, width, "      ")
    return "\n".join(lines) + "\n"


def summary_rows(paths):
    """Rows for every case of every file, in file order then case order."""
    return [case_row(c) for p in paths for c in load_results(p).cases]


def _cell(row, key):
    v = row.get(key)
    if key == "step_median_ms":
        return ms_ci(row, "step_median_ms", "ci95_low_ms", "ci95_high_ms", "ci_coverage")
    if key == "status":
        # Messages may be multi-line (exception texts); one table row stays one line.
        msg = " ".join(str(row.get("message") or "").split())
        return f"{v}: {msg}" if v != "ok" and msg else str(v)
    if v is None:
        return "-"
    if key == "samples_per_s":
        return f"{v:.1f}"
    if key in ("achieved_gflops", "exposed_allreduce_ms", "cpu_utilisation"):
        return f"{v:.2f}"
    if key in ("peak_pct", "host_peak_rss_mb", "device_peak_mb"):
        return f"{v:.1f}"
    if key == "energy_j_per_sample":
        return f"{v:.3g}"
    return str(v)


def show_hosts(rows):
    """Whether a table of these rows shows where the ranks ran: some case spanned several hosts
    or was placed other than packed."""
    return any((r.get("hosts") or 1) > 1 or (r.get("placement") or "packed") != "packed" for r in rows)


def _columns(rows, show_file):
    hosts = show_hosts(rows)
    return [c for c in COLUMNS if (show_file or c[0] != "file") and (hosts or c[0] not in HOST_COLUMNS)]


def format_table(rows, show_file=None, width=WIDTH):
    """The aligned plain-text table (summary_table), then each flagged case's conditions in
    full; within `width` columns (None: no limit)."""
    if show_file is None:
        show_file = len({r["file"] for r in rows}) > 1
    text = summary_table(rows, show_file, definitions=False).text(width)
    flagged = [r for r in rows if r.get("conditions_text")]
    if flagged:
        # The conditions column in full: what shaped each flagged case's figures.
        lines = ["", "conditions (docs/metrics.md, \"Utilisation and energy\"):"]
        for r in flagged:
            for line in r["conditions_text"]:
                line = f"  {r['case']}{' of ' + r['file'] if show_file else ''}: {line}"
                lines += wrap(line, width, "      ")
        text += "\n".join(lines) + "\n"
    return text


def format_csv(rows):
    """CSV with full-precision numbers and empty fields for missing values."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in rows:
        writer.writerow(["" if r.get(k) is None else (repr(r[k]) if isinstance(r[k], float) else r[k])
                         for k in CSV_COLUMNS])
    return out.getvalue()


def format_json(rows):
    """The CSV's rows as a JSON array of objects: exact numbers, null where a value is missing."""
    from .tables import json_text, json_value
    return json_text([{k: json_value(r.get(k)) for k in CSV_COLUMNS} for r in rows])


def summary_table(rows, show_file=None, definitions=True):
    """The rows as a tables.Table: the HTML report's, with the definitions and each flagged case's
    conditions as notes; without `definitions`, the text table's (format_table)."""
    if show_file is None:
        show_file = len({r["file"] for r in rows}) > 1
    cols = [Column(h, (lambda key: lambda r: _cell(r, key))(key), right, detail=detail,
                   keep=key in ("case", "step_median_ms"), path=key == "file")
            for key, h, right, detail in _columns(rows, show_file)]
    notes = []
    if definitions:
        notes.append(DEFINITIONS)
    if few_samples(rows):
        notes.append(COVERAGE_NOTE)
    if show_hosts(rows):
        notes.append(HOSTS_NOTE)
    if definitions:
        # Each flagged case's conditions in full, a share above the peak with its reason among them.
        notes += [f"{r['case']}{' of ' + r['file'] if show_file else ''}: {text}"
                  for r in rows for text in r.get("conditions_text", [])]
    return Table(title="cases", columns=cols, rows=rows, csv_columns=CSV_COLUMNS, notes=notes)


DEFINITIONS = (
    "as recorded in each file's summary group; step = max over ranks per iteration, "
    "median over iterations, with its order-statistic 95% CI; samples/s = global batch "
    "/ median; GFLOP/s = analytic training FLOP per step / median (1 GFLOP = 1e9 FLOP); "
    "CPU util = process CPU time / (wall time x threads) over the timed region, mean over "
    "ranks; % of peak = achieved / the measured GEMM peak of the case's driver, device, "
    "precision and threads summed over ranks; RSS and device MB: the largest rank's peak "
    "(1 MB = 1e6 B); J/sample = the case's device energy (CPU packages or GPUs) over the "
    "timed region / samples; '-' = unavailable (see the CSV's energy_source); conditions: "
    "contended (a rank waited for a core >= 10% of its runnable time, or lost >= 5% to steal), "
    "kernel N% (of the CPU time, when >= 10%), N faults/step (when >= 1000), above peak (a share "
    "over 100%, the CSV's peak_note says why); docs/metrics.md")
