"""One table row per case, across one or more results files.

Rows are plain dicts in SI-like report units (ms, samples/s, GFLOP/s) so the
same rows serve the aligned text table and the CSV and JSON output.
"""

import csv
import io
import math
from dataclasses import dataclass

from .conditions import allreduce_mechanism, case_conditions, short_flags
from .schema import load_results
from .stats import case_stats
from .study import hosts_count, placement_of
from .tables import COVERAGE_NOTE, WIDTH, Column, Table, few_samples, ms_ci, wrap

@dataclass(frozen=True)
class SummaryColumn:
    """One column of the cases table, declared once: text, CSV, JSON and the HTML report all read
    SUMMARY_COLUMNS. A column's value comes from the case's attribute `attr`, or its summary's
    `summary` key times `scale` (recorded values only: NaN, unavailable, stays missing), or
    `compute(case)`; `fmt` formats it in the text and HTML tables ('-' where missing)."""

    key: str
    header: str = None         # the text and HTML tables' header; None: CSV and JSON only
    attr: str = None
    summary: str = None
    scale: float = 1.0
    compute: object = None     # case -> value
    fmt: str = "{}"
    right: bool = True
    detail: int = 0            # > 0: left out of a text table wider than 120 columns, the highest first
    csv: bool = True           # in the CSV and JSON
    shown: object = None       # rows -> whether the text and HTML tables show it; None: always


def _memory_mb(field):
    """The largest rank's peak in MB (1 MB = 1e6 B); -1 (not measured) and 0 (a CPU case's device)
    are missing."""
    def value(case):
        m = case.memory
        if m is not None and len(m) and field in m.dtype.names and m[field].max() > 0:
            return float(m[field].max()) / 1e6
        return None
    return value


def _noise(key):
    def value(case):
        n = getattr(case, "noise", None)
        if not n or n.get("simple") is None or not math.isfinite(float(n["simple"])):
            return None
        simple = float(n["simple"])
        return simple if key == "simple" else 1 + simple / float(case.get("global_batch"))
    return value


# In the order of the CSV; the text and HTML tables show the columns with a header in the same
# order. The conditions go last but one: format_table lists them in full under the table.
SUMMARY_COLUMNS = (
    SummaryColumn("file", "file", compute=lambda c: c.file, right=False),
    SummaryColumn("case", "case", compute=lambda c: c.name, right=False),
    SummaryColumn("workload", "workload", attr="workload", right=False),
    SummaryColumn("driver", "driver", attr="driver", right=False),
    SummaryColumn("device", "device", attr="device_type", right=False),
    SummaryColumn("precision", "precision", attr="precision", right=False),
    SummaryColumn("isa", "isa", compute=lambda c: c.attrs.get("isa", ""), right=False, detail=5),
    SummaryColumn("denormals", "denormals", compute=lambda c: c.attrs.get("denormals", ""), right=False, detail=5),
    SummaryColumn("scaling", "scaling", attr="scaling", right=False),
    SummaryColumn("ranks", "P", attr="ranks"),
    SummaryColumn("hosts", "hosts", compute=hosts_count, shown=lambda rows: show_hosts(rows)),
    SummaryColumn("placement", "placement", compute=placement_of, right=False, shown=lambda rows: show_hosts(rows)),
    SummaryColumn("batch_per_rank", "batch/rank", attr="batch_per_rank"),
    SummaryColumn("accumulate", "K", compute=lambda c: c.attrs.get("accumulate", 1), detail=4,
                  shown=lambda rows: any(r["accumulate"] != 1 for r in rows)),
    SummaryColumn("global_batch", "global batch", attr="global_batch", detail=4),
    SummaryColumn("threads", "threads", attr="threads"),
    SummaryColumn("step_median_ms", "step ms [95% CI]", summary="step_median_s", scale=1e3),
    SummaryColumn("ci95_low_ms", summary="ci95_low_s", scale=1e3),
    SummaryColumn("ci95_high_ms", summary="ci95_high_s", scale=1e3),
    SummaryColumn("ci_coverage", summary="ci_coverage"),
    SummaryColumn("samples_per_s", "samples/s", summary="samples_per_s", fmt="{:.1f}"),
    SummaryColumn("achieved_gflops", "GFLOP/s", summary="achieved_flops", scale=1e-9, fmt="{:.2f}", detail=1),
    SummaryColumn("exposed_allreduce_ms", "exposed all-reduce ms", summary="exposed_allreduce_median_s", scale=1e3,
                  fmt="{:.2f}", detail=2),
    SummaryColumn("exposed_allreduce_least_ms", summary="exposed_allreduce_least_median_s", scale=1e3),
    SummaryColumn("noise_scale", "B_simple", compute=_noise("simple"), fmt="{:.3g}", detail=6,
                  shown=lambda rows: any(r["noise_scale"] is not None for r in rows)),
    SummaryColumn("noise_steps_factor", compute=_noise("factor")),
    SummaryColumn("cpu_utilisation", "CPU util", summary="cpu_utilisation", fmt="{:.2f}", detail=3),
    SummaryColumn("busy_cores", summary="busy_cores"),
    SummaryColumn("peak_gflops", summary="peak_flops", scale=1e-9),
    SummaryColumn("peak_pct", "% of peak", summary="peak_share", scale=100.0, fmt="{:.1f}", detail=1),
    SummaryColumn("peak_note", compute=lambda c: (c.summary or {}).get("peak_share_note") or None if c.ok else None),
    SummaryColumn("host_peak_rss_mb", "host RSS MB", compute=_memory_mb("host_peak_rss_bytes"), fmt="{:.1f}",
                  detail=6),
    SummaryColumn("device_peak_mb", "device MB", compute=_memory_mb("device_peak_bytes"), fmt="{:.1f}", detail=7),
    SummaryColumn("optimizer_state_mb", "opt state MB", compute=_memory_mb("optimizer_state_bytes"), fmt="{:.1f}",
                  detail=7, shown=lambda rows: any(r["optimizer_state_mb"] is not None for r in rows)),
    SummaryColumn("energy_j_per_step", summary="energy_j_per_step"),
    SummaryColumn("energy_j_per_sample", "J/sample", summary="energy_j_per_sample", fmt="{:.3g}", detail=8),
    SummaryColumn("energy_source", compute=lambda c: c.utilisation.attrs.get("energy") if c.utilisation else None),
    SummaryColumn("user_ms_per_step", summary="user_s_per_step", scale=1e3),
    SummaryColumn("system_ms_per_step", summary="system_s_per_step", scale=1e3),
    SummaryColumn("kernel_pct", summary="system_share", scale=100.0),
    SummaryColumn("faults_per_step", summary="page_faults_per_step"),
    SummaryColumn("major_faults_per_step", summary="major_faults_per_step"),
    SummaryColumn("cpu_wait_pct", summary="cpu_wait_share", scale=100.0),
    SummaryColumn("cpu_steal_pct", summary="cpu_steal_share", scale=100.0),
    SummaryColumn("contended", summary="contended", scale=None),
    SummaryColumn("allocator", attr="allocator"),
    SummaryColumn("run", attr="run"),
    SummaryColumn("allreduce_mechanism", compute=allreduce_mechanism),
    SummaryColumn("allreduce_buckets", attr="allreduce_buckets"),
    SummaryColumn("allreduce_segment_bytes", attr="allreduce_segment_bytes"),
    SummaryColumn("mpi_allreduce_settings", compute=lambda c: c.attrs.get("mpi_allreduce_settings", "")),
    SummaryColumn("conditions", "conditions", compute=lambda c: ", ".join(short_flags(c)), right=False, detail=9),
    SummaryColumn("status", "status", compute=lambda c: c.status, right=False),
    SummaryColumn("message", compute=lambda c: c.attrs.get("message", "")),
)

# The text and HTML tables' columns, and the CSV's (the CI bounds and the message apart).
COLUMNS = tuple(c for c in SUMMARY_COLUMNS if c.header)
CSV_COLUMNS = tuple(c.key for c in SUMMARY_COLUMNS if c.csv)

HOSTS_NOTE = ("hosts: how many hosts the case's ranks spanned; placement: packed (the ranks fill "
              "one host before the next) or spread (one rank per host before a second on any); "
              "files without them ran packed, their hosts counted from the rank table")


def _value(column, case, summary):
    if column.compute is not None:
        return column.compute(case)
    if column.attr is not None:
        return case.attrs.get(column.attr)
    # Show what the benchmark recorded (.get: a partial summary group still shows what it has);
    # NaN (unavailable) shows as missing.
    v = summary.get(column.summary) if case.ok and summary else None
    if v is None or math.isnan(float(v)):
        return None
    return int(v) if column.scale is None else float(v) * column.scale


def case_row(case):
    """Table row of one loaded Case: every column's value, and the conditions in full."""
    # An ok case somehow lacking its summary group falls back to recomputing it.
    summary = case.summary if case.summary is not None else case_stats(case)
    row = {c.key: _value(c, case, summary) for c in SUMMARY_COLUMNS}
    row["conditions_text"] = case_conditions(case)
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


def _cell(row, column):
    key, v = column.key, row.get(column.key)
    if key == "step_median_ms":
        return ms_ci(row, "step_median_ms", "ci95_low_ms", "ci95_high_ms", "ci_coverage")
    if key == "status":
        # Messages may be multi-line (exception texts); one table row stays one line.
        msg = " ".join(str(row.get("message") or "").split())
        return f"{v}: {msg}" if v != "ok" and msg else str(v)
    return "-" if v is None else column.fmt.format(v)


def show_hosts(rows):
    """Whether a table of these rows shows where the ranks ran: some case spanned several hosts
    or was placed other than packed."""
    return any((r.get("hosts") or 1) > 1 or (r.get("placement") or "packed") != "packed" for r in rows)


def _columns(rows, show_file):
    # Where the ranks ran only where some case crossed hosts or was spread (a single-host file's
    # table stays as it was), K only with accumulation, B_simple only where a case has one; the
    # CSV and JSON always have them.
    return [c for c in COLUMNS if (show_file or c.key != "file") and (c.shown is None or c.shown(rows))]


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
    cols = [Column(c.header, (lambda column: lambda r: _cell(r, column))(c), c.right, detail=c.detail,
                   keep=c.key in ("case", "step_median_ms"), path=c.key == "file")
            for c in _columns(rows, show_file)]
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
