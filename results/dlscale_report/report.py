"""The whole analysis of a study as one self-contained HTML page.

DIR/index.html plus its PNG figures and one CSV per table, all in DIR and
referenced by relative file names, so the directory can be copied or
attached as it is. Plain HTML and CSS: no JavaScript, no fonts, styles or
images from the network.
"""

import datetime
import html
import os

from .check import check_case, damaged_lines
from .ranks import hosts_of
from .summary import run_rows
from .views import REPORT_FIGURE_LIMIT, VIEWS, Context


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
    diagnosis table; the consistency check follows, then one section per section of each view
    (views.py) in VIEWS' order. A section without data is left
    out, named in one line under the overview.

    baseline: an optional second Study; its cases are compared with `study`'s
    (A = baseline, B = study).
    """
    os.makedirs(outdir, exist_ok=True)
    page = Page(outdir)
    cases = study.cases
    context = Context(several=len(study.files) > 1, baseline=baseline, limit=REPORT_FIGURE_LIMIT)
    sections = [(view, s) for view in VIEWS for s in view.sections(study, context)]
    diagnosis = next(s for view, s in sections if view.name == "diagnosis")
    overview = _overview_html(diagnosis, outdir)

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
    omitted = []
    for _, section in sections:
        if section.shown:
            _section(page, section, outdir)
        else:
            omitted.append(f"{section.title}: {section.empty}")

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


def _section(page, section, outdir):
    """One shown section of a view: its heading, tables with their CSVs, list, figures, note."""
    page.section(section.anchor, section.title, section.intro)
    for i, (table, csv_name) in enumerate(section.tables):
        if i == 0 or table.rows:
            page.table(table, csv_name)
    if section.items:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in section.items)
        page.parts.append(f'<ul class="diagnosis">{items}</ul>\n')
    if section.figures and not section.figures_on_first_screen:
        page.figures(section.figures(outdir), grid=section.grid)
    if section.note:
        page.text(section.note)


def _overview_html(diagnosis, outdir):
    """The first screen: the overview figure, then the diagnosis table (its detail columns and
    notes in the diagnosis section)."""
    figures = diagnosis.figures(outdir)
    figure = "".join(f'<figure><img src="{html.escape(os.path.basename(p))}" '
                     f'alt="{html.escape(c)}"><figcaption>{html.escape(c)}</figcaption></figure>'
                     for p, c in figures)
    if not figure:
        figure = ("<p>No series has ok cases at two or more rank counts: no overview figure "
                  "(run with --ranks 1,2 or give the files of several jobs).</p>")
    table = diagnosis.tables[0][0]
    if table.rows:
        table = ('<p class="meta">Per series and rank count: the efficiency E and the time lost to each '
                 "part in percent of the step (together 1 − E); ~: within the run-to-run spread; "
                 '<a href="#diagnosis">notes and times</a>.</p>'
                 f'<div class="wide">{table.html(detail=False, notes=False)}</div>')
    else:
        # Why not: each series' note (one rank count, no phases).
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in diagnosis.items)
        table = ("<p>No scaling series has phases (--phases) at two rank counts: no diagnosis.</p>"
                 + (f'<ul class="diagnosis">{notes}</ul>' if notes else ""))
    return (f'<div class="overview-figure">{figure}</div>'
            f'<h2 id="why">Why it scales as it does</h2>{table}\n')
