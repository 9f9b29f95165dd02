"""The whole analysis of a study as one self-contained HTML page.

DIR/index.html plus its PNG figures and one CSV per table, all in DIR and
referenced by relative file names, so the directory can be copied or
attached as it is. Plain HTML and CSS: no JavaScript, no fonts, styles or
images from the network.
"""

import datetime
import html
import os

from . import plots
from .accuracy import accuracy_rows, test_accuracy_table, time_table, time_to_accuracy_table
from .allreduce import allreduce_rows, allreduce_table
from .check import check_case, damaged_lines
from .compare import compare_rows, compare_table
from .diagnosis import diagnose_series, diagnosis_lines, diagnosis_notes, study_diagnosis_table
from .drivers import driver_rows, driver_table
from .noise import measure_noise
from .precisions import precision_pairs, precision_rows, precision_table
from .phases import phase_rows, phase_table
from .ranks import hosts_of, rank_rows, rank_table
from .scaling import build_series, scaling_modes, scaling_table
from .simulation import simulation_rows, simulation_sentence, simulation_table, simulation_views
from .summary import case_row, run_rows, summary_table
from .sweeps import build_panels, sweep_table
from .study import describe
from .timeline import case_events, has_timeline

# Heat maps are one figure per case; a large study would make the page huge.
MAX_HEATMAPS = 24

CSS = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1250px; color: #222;
       padding: 0 1em; line-height: 1.4; }
h1 { font-size: 1.6em; border-bottom: 2px solid #456; padding-bottom: .2em; }
h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #aab; }
h3 { font-size: 1.05em; }
.wide { overflow-x: auto; }
table { border-collapse: collapse; margin: .6em 0; font-size: .82em; }
caption { text-align: left; font-weight: bold; padding: .2em 0; }
th, td { border: 1px solid #ccd; padding: .2em .5em; }
th { background: #eef1f6; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.txt { text-align: left; }
td.cmd { font-family: monospace; font-size: .9em; word-break: break-all; min-width: 18em; }
tbody tr:nth-child(even) { background: #f8f9fb; }
ul.notes { font-size: .8em; color: #555; margin-top: .2em; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #dde; }
figcaption { font-size: .82em; color: #444; }
.grid figure { display: inline-block; vertical-align: top; margin: .5em 1em .5em 0;
               max-width: 48%; }
nav ul { columns: 3; font-size: .9em; }
.ok { color: #176317; } .bad { color: #a01010; font-weight: bold; }
.csv { font-size: .8em; }
code, pre { background: #f3f3f6; padding: 0 .2em; }
.meta { font-size: .85em; color: #444; margin: .3em 0; }
.overview-figure figure { margin: 0; max-width: 900px; }
ul.diagnosis { padding-left: 1.1em; font-size: .88em; }
ul.diagnosis li { margin-bottom: .45em; }
ul.omitted { font-size: .82em; color: #555; }
pre { padding: .5em; overflow-x: auto; font-size: .8em; }
"""


class Page:
    """Accumulates sections; knows the output directory for figures and CSVs."""

    def __init__(self, outdir):
        self.outdir = outdir
        self.parts = []
        self.toc = []

    def section(self, anchor, title, intro=None):
        self.toc.append((anchor, title))
        self.parts.append(f'<h2 id="{anchor}">{html.escape(title)}</h2>\n')
        if intro:
            self.parts.append(f"<p>{html.escape(intro)}</p>\n")

    def text(self, text, cls=None):
        c = f' class="{cls}"' if cls else ""
        self.parts.append(f"<p{c}>{html.escape(text)}</p>\n")

    def table(self, table, csv_name):
        with open(os.path.join(self.outdir, csv_name), "w") as f:
            f.write(table.csv())
        self.parts.append(f'<div class="wide">{table.html()}</div>\n')
        self.parts.append(f'<p class="csv">data: <a href="{html.escape(csv_name)}">'
                          f'{html.escape(csv_name)}</a></p>\n')

    def figures(self, figures, grid=False):
        """<figure>s of the PNGs (in outdir); grid: small ones side by side."""
        if grid:
            self.parts.append('<div class="grid">\n')
        for path, caption in figures:
            name = os.path.basename(path)
            self.parts.append(f'<figure><img src="{html.escape(name)}" alt="{html.escape(caption)}">'
                              f"<figcaption>{html.escape(caption)}</figcaption></figure>\n")
        if grid:
            self.parts.append("</div>\n")

    def render(self, title, top, header):
        """top: the first screen (the overview); header: what precedes the table of contents."""
        toc = "".join(f'<li><a href="#{a}">{html.escape(t)}</a></li>' for a, t in self.toc)
        return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
                f"<h1>{html.escape(title)}</h1>\n{top}{header}<nav><ul>{toc}</ul></nav>\n"
                + "".join(self.parts) + "</body>\n</html>\n")


def _files_html(study):
    rows = []
    for f in study.files:
        a = f.attrs
        hosts = sorted(set(hosts_of(f.ranks).values()))
        cells = [f"<td class=\"txt\">{html.escape(str(v))}</td>" for v in (
            f.path, a.get("created_utc", ""), a.get("world_size", ""), ", ".join(hosts),
            a.get("dlscale_version", ""), a.get("git_commit", ""),
            f.software.get("blas", ""), len(f.cases) + len(f.accuracy), len(f.allreduce))]
        cells.append(f"<td class=\"cmd\">{html.escape(str(a.get('command_line', '')))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>\n")
    head = "".join(f"<th>{h}</th>" for h in ("file", "created (UTC)", "ranks", "hosts",
                                             "dlscale", "commit", "BLAS", "cases",
                                             "all-reduce", "command line"))
    out = (f'<div class="wide"><table><caption>input files</caption><thead><tr>{head}</tr>'
           f"</thead><tbody>{''.join(rows)}</tbody></table></div>\n")
    # A resumed file's runs: each with its own hosts and build; its cases name it.
    runs = run_rows(study.files)
    if runs:
        head = "".join(f"<th>{h}</th>" for h in ("file", "run", "started (UTC)", "", "ranks", "hosts",
                                                 "dlscale", "commit", "cases", "command line"))
        body = "".join("<tr>" + "".join(f"<td class=\"txt\">{html.escape(str(v))}</td>" for v in (
            r["file"], r["run"], r["started_utc"], r["kind"], r["world_size"], ", ".join(r["hosts"]),
            r["dlscale"], r["commit"], ", ".join(r["cases"]) or "none"))
            + f"<td class=\"cmd\">{html.escape(str(r['command_line']))}</td></tr>\n" for r in runs)
        out += (f'<div class="wide"><table><caption>runs of resumed files (each case names the run that '
                f"wrote it)</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>\n")
    return out


def write_report(study, outdir, baseline=None, title=None):
    """Write outdir/index.html (and figures, CSVs); returns its path.

    The first screen answers why the study scales as it does: the overview figure, then the
    diagnosis table; the detail sections follow. A section without data is
    left out, named in one line under the overview.

    baseline: an optional second Study; its cases are compared with `study`'s
    (A = baseline, B = study).
    """
    os.makedirs(outdir, exist_ok=True)
    page = Page(outdir)
    cases = study.cases
    omitted = []

    def section(anchor, title_, table, csv_name, empty, figures=(), intro=None, grid=False):
        """A detail section, or one line in `omitted` when its table has no rows."""
        if not table.rows:
            omitted.append(f"{title_}: {empty}")
            return False
        page.section(anchor, title_, intro)
        page.table(table, csv_name)
        page.figures(figures() if callable(figures) else figures, grid=grid)
        return True

    series_by_mode = {mode: build_series(cases, mode) for mode in scaling_modes(cases)}
    all_series = [s for series, _ in series_by_mode.values() for s in series]
    diagnoses = [diagnose_series(s) for s in all_series]
    diagnosis = study_diagnosis_table(diagnoses, measure_noise(cases))
    overview = _overview_html(all_series, diagnoses, diagnosis, outdir)

    page.section("consistency", "consistency check",
                 "Every ok case's recorded summary recomputed from its raw samples "
                 "(dlscale-report check); groups of the files that could not be read are left "
                 "out of every section and listed here.")
    problems = [p for c in cases for p in check_case(c)] + [p for f in study.files for p in damaged_lines(f)]
    if problems:
        page.text(f"{len(problems)} problem(s):", cls="bad")
        page.parts.append("<pre>" + html.escape("\n".join(problems)) + "</pre>\n")
    else:
        page.text(f"all {len(cases)} case(s) consistent", cls="ok")

    section("summary", "cases", summary_table([case_row(c) for c in cases]), "summary.csv",
            "the files hold no timing case")

    if section("diagnosis", "scaling diagnosis", diagnosis, "diagnosis.csv",
               "no scaling series has phases (--phases) at two rank counts",
               intro="Each part's time in ms beside its share of the step, and the diagnosis in words."):
        items = "".join(f"<li>{html.escape(line)}</li>" for line in diagnosis_lines(diagnoses))
        page.parts.append(f'<ul class="diagnosis">{items}</ul>\n')
    _timelines(page, study, all_series, omitted)

    section("drivers", "drivers compared", driver_table(driver_rows(cases)), "drivers.csv",
            "no configuration ran on more than one driver",
            intro="Each configuration that more than one driver ran: throughput, share of each "
                  "driver's own measured peak, CPU utilisation and energy per sample.")

    for mode, (series, notes) in series_by_mode.items():
        page.section(f"scaling-{mode}", f"{mode} scaling")
        page.table(scaling_table(series, mode, notes), f"scaling_{mode}.csv")
        if any(len(s.ok_rows) > 1 for s in series):
            page.figures(plots.scaling_plots(series, mode, outdir))
        else:
            page.text("No series has ok cases at two or more rank counts, so there is no "
                      "curve to plot; give the files of jobs with other rank counts too.")
    if not series_by_mode:
        omitted.append("scaling: no case")

    # dlscale-project's simulations: a sentence, a figure and the rows of each, with the
    # measured points of its case's series.
    views = simulation_views(cases, len(study.files) > 1)
    if views:
        page.section("simulations", "simulated projections",
                     "What dlscale-project simulated with SimGrid from each case's measured compute on a "
                     "described platform (docs/projection.md), the newest simulation of each platform per "
                     "case, against the measured points of the case's scaling series.")
        items = "".join(f"<li>{html.escape(simulation_sentence(v))}</li>" for v in views)
        page.parts.append(f'<ul class="diagnosis">{items}</ul>\n')
        page.figures(plots.simulation_plots(views, outdir))
        page.table(simulation_table(simulation_rows(views), len(study.files) > 1), "simulations.csv")
    else:
        omitted.append("simulated projections: no case holds a simulation (dlscale-project, "
                       "docs/projection.md)")

    for knob, title_ in (("threads", "thread sweep"), ("batch", "batch sweep")):
        panels, notes = build_panels(cases, knob)
        section(f"{knob}-sweep", title_, sweep_table(panels, knob, notes), f"{knob}_sweep.csv",
                f"no series of ok cases that differ only in {knob}",
                lambda: plots.sweep_plot(panels, knob, outdir))

    rows = precision_rows(precision_pairs(cases))
    section("precisions", "drivers by precision", precision_table(rows), "precisions.csv",
            "no case ran in fp32 and in a reduced precision with everything else the same",
            lambda: plots.precision_loss_plot(rows, outdir))

    rows = phase_rows(cases)
    section("phases", "phases", phase_table(rows, len(study.files) > 1), "phases.csv",
            "no case has phase times (run dlscale with --phases)",
            lambda: plots.phase_plot(rows, outdir))

    multi = [c for c in cases if c.ok and c.iter_time_s is not None and c.iter_time_s.shape[0] > 1]
    shown = multi or [c for c in cases if c.ok]
    if section("ranks", "ranks and stragglers", rank_table(rank_rows(cases, study.hosts_for),
                                                           len(study.files) > 1),
               "ranks.csv", "no ok case",
               lambda: plots.rank_heatmaps(shown, outdir, limit=MAX_HEATMAPS), grid=True) \
            and len(shown) > MAX_HEATMAPS:
        page.text(f"heat maps of the first {MAX_HEATMAPS} of {len(shown)} cases; "
                  "`dlscale-report ranks FILES -o DIR` draws them all")

    rows = accuracy_rows(study.accuracy)
    if rows:
        page.section("accuracy", "accuracy",
                     "Accuracy-mode cases: training over epochs to a validation accuracy, each "
                     "configuration repeated from seeds seed, seed+1, ...; means with Student-t 95% "
                     "confidence intervals over the repeats as recorded (docs/schema.md).")
        page.table(time_table(rows), "accuracy_time.csv")
        for table, csv_name in ((time_to_accuracy_table(rows), "time_to_accuracy.csv"),
                                (test_accuracy_table(rows), "test_accuracy.csv")):
            if table.rows:
                page.table(table, csv_name)
        page.figures(plots.accuracy_curves(rows, outdir, limit=MAX_HEATMAPS), grid=True)
        shown_ok = sum(r["status"] == "ok" for r in rows)
        if shown_ok > MAX_HEATMAPS:
            page.text(f"curves of the first {MAX_HEATMAPS} of {shown_ok} configurations")
    else:
        omitted.append("accuracy: no accuracy case (dlscale run --mode accuracy)")

    benchmarks = [b for f in study.files for b in f.allreduce]
    section("allreduce", "all-reduce microbenchmark", allreduce_table(allreduce_rows(benchmarks)),
            "allreduce.csv", "no all-reduce microbenchmark in the files (dlscale allreduce, or "
            "--phases on two or more ranks)", lambda: plots.allreduce_plot(benchmarks, outdir))

    if baseline is not None:
        rows, notes = compare_rows(baseline.cases, cases)
        section("compare", "comparison with a baseline run", compare_table(rows, notes),
                "compare.csv", "no case matches one of the baseline's",
                intro=f"A = {', '.join(baseline.paths)}; B = the files of this report.")

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    damaged = study.damaged
    skipped = (f" ({len(damaged)} damaged group(s) left out: "
               '<a href="#consistency">consistency check</a>)' if damaged else "")
    intro = (f"<p class=\"meta\">Generated {now} by dlscale-report from {len(study.files)} "
             f"file(s), {len(cases)} case(s){skipped}. Times in ms unless stated (1 ms = 1e-3 s); SI "
             "prefixes. Definitions: docs/metrics.md.</p>\n")
    left_out = ("" if not omitted else
                '<ul class="omitted">' + "".join(f"<li>not shown, no data: {html.escape(o)}</li>"
                                                 for o in omitted) + "</ul>\n")
    path = os.path.join(outdir, "index.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page.render(title or "dlscale report", overview + intro,
                            _files_html(study) + left_out))
    return path


def _timelines(page, study, series, omitted):
    """A timeline of the median iteration of every case with one (--phases), in the order of the
    scaling series (the diagnosis above), then the cases of no series."""
    cases, seen = [], set()
    for case in [c for s in series for c in s.cases] + study.cases:
        if id(case) not in seen and has_timeline(case):    # cases compare by value: not hashable
            seen.add(id(case))
            cases.append(case)
    if not cases:
        omitted.append("timelines: no case that trained with --phases recorded one")
        return
    page.section("timelines", "timelines",
                 "The median iteration of each --phases case, every rank on rank 0's clock: what each "
                 "rank computed and when each bucket of gradients was reduced (docs/timelines.md; "
                 "dlscale-report trace writes every iteration for Perfetto and Vampir).")
    figures = []
    for case in cases[:MAX_HEATMAPS]:
        figures += plots.timeline_plot(case, case_events(case), study.case_hosts(case), describe(case),
                                       page.outdir)
    page.figures(figures)
    if len(cases) > MAX_HEATMAPS:
        page.text(f"timelines of the first {MAX_HEATMAPS} of {len(cases)} cases; "
                  "`dlscale-report trace FILE` writes them all")


def _overview_html(series, diagnoses, diagnosis, outdir):
    """The first screen: the overview figure, then the diagnosis table (its detail columns and
    notes in the diagnosis section)."""
    figures = plots.overview_plot(series, diagnoses, outdir)
    figure = "".join(f'<figure><img src="{html.escape(os.path.basename(p))}" '
                     f'alt="{html.escape(c)}"><figcaption>{html.escape(c)}</figcaption></figure>'
                     for p, c in figures)
    if not figure:
        figure = ("<p>No series has ok cases at two or more rank counts: no overview figure "
                  "(run with --ranks 1,2 or give the files of several jobs).</p>")
    if diagnosis.rows:
        table = ('<p class="meta">Per series and rank count: the efficiency E and the time lost to each '
                 "part in percent of the step (together 1 − E); ~: within the run-to-run spread; "
                 '<a href="#diagnosis">notes and times</a>.</p>'
                 f'<div class="wide">{diagnosis.html(detail=False, notes=False)}</div>')
    else:
        # Why not: each series' note (one rank count, no phases).
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in diagnosis_notes(diagnoses))
        table = ("<p>No scaling series has phases (--phases) at two rank counts: no diagnosis.</p>"
                 + (f'<ul class="diagnosis">{notes}</ul>' if notes else ""))
    return (f'<div class="overview-figure">{figure}</div>'
            f'<h2 id="why">Why it scales as it does</h2>{table}\n')
