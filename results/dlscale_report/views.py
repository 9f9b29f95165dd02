"""The analyses of a study, declared once (VIEWS): each view names its subcommand and turns a study
into sections, each with its tables, figures and lines of text.

The subcommands (cli.py) print a view's tables and, with -o DIR, write its CSV and figures; the
HTML report (report.py) gives each section its heading, table, CSV and figures, or one line in
its list of sections not shown when the section has nothing to show. A new analysis is one
function here and one row of VIEWS.
"""

from dataclasses import dataclass, field

# Heat maps and accuracy curves are one figure per case; the report draws the first ones only.
REPORT_FIGURE_LIMIT = 24


@dataclass
class Context:
    """What a view needs besides the study."""

    several: bool = False          # more than one file: rows name their file
    mode: str = None               # `scaling --mode`: that mode only
    baseline: object = None        # the Study compared with (report --compare-to)
    limit: int = None              # figures per section at most (the report's); None: all


@dataclass
class Section:
    """One part of a view: a heading of the report, a table of the subcommand."""

    anchor: str                    # the report's anchor, e.g. "scaling-weak"
    title: str
    tables: list                   # [(Table, CSV file name)], maybe none; after the first only with rows
    empty: str = ""                # why the first table has no rows (the report's "not shown" line)
    intro: str = None
    items: list = field(default_factory=list)   # lines shown as a list under the tables (without
    #                                             rows: why there are none, where a view can say)
    figures: object = None         # figures(outdir) -> [(path, caption)], drawn only when shown
    note: str = None               # one line under the figures
    always: bool = False           # shown without rows: the table says why
    grid: bool = False             # small figures side by side
    # The report shows the figures on its first screen, not in this section (the overview).
    figures_on_first_screen: bool = False

    @property
    def shown(self):
        return self.always or bool(self.tables and self.tables[0][0].rows)


@dataclass(frozen=True)
class View:
    name: str                      # the subcommand and the report's name for the view
    help: str                      # the subcommand's one line; "" for a view of the report only
    sections: object               # sections(study, context) -> [Section]


def _plots():
    """The figures' module, imported only to draw (it needs matplotlib, the tables do not)."""
    from . import plots
    return plots


def _cases(study, ctx):
    from .summary import case_row, summary_table
    return [Section("summary", "cases", [(summary_table([case_row(c) for c in study.cases]), "summary.csv")],
                    empty="the files hold no timing case")]


# A timeline figure of more ranks shows their hosts (timeline.host_rows): two lanes a row.
FIGURE_ROWS = 16


def _timelines(study, ctx):
    """The median iteration of every case with a timeline (--phases), in the order of the scaling
    series, then the cases of no series."""
    from .scaling import build_series, scaling_modes
    from .study import describe
    from .timeline import has_timeline, timeline_events
    series = [s for m in scaling_modes(study.cases) for s in build_series(study.cases, m)[0]]
    cases, seen = [], set()
    for case in [c for s in series for c in s.cases] + study.cases:
        if id(case) not in seen and has_timeline(case):    # cases compare by value: not hashable
            seen.add(id(case))
            cases.append(case)
    drawn = cases if ctx.limit is None else cases[:ctx.limit]

    def figures(outdir):
        figures = []
        for case in drawn:
            ce = timeline_events(case, study.case_hosts(case), limit=FIGURE_ROWS)
            figures += _plots().timeline_plot(case, ce, describe(case), outdir)
        return figures
    return [Section("timelines", "timelines", [], always=bool(cases),
                    empty="no case that trained with --phases recorded one",
                    intro="The median iteration of each --phases case, every rank on rank 0's clock: what each "
                          "rank computed and when each bucket of gradients was reduced (docs/timelines.md; "
                          "dlscale-report trace writes every iteration for Perfetto and Vampir).",
                    figures=figures,
                    note=f"timelines of the first {ctx.limit} of {len(cases)} cases; `dlscale-report trace FILE` "
                         "writes them all" if len(drawn) < len(cases) else None)]


def _scaling(study, ctx):
    from .scaling import build_series, scaling_modes, scaling_table
    modes = [ctx.mode] if ctx.mode else scaling_modes(study.cases)
    out = []
    for mode in modes or ["weak"]:
        series, notes = build_series(study.cases, mode)
        curve = any(len(s.ok_rows) > 1 for s in series)
        out.append(Section(
            f"scaling-{mode}", f"{mode} scaling", [(scaling_table(series, mode, notes), f"scaling_{mode}.csv")],
            empty="no case", always=bool(modes),
            figures=(lambda outdir, series=series, mode=mode: _plots().scaling_plots(series, mode, outdir)) if curve
            else None,
            note=None if curve else ("No series has ok cases at two or more rank counts, so there is no curve to "
                                     "plot; give the files of jobs with other rank counts too.")))
    return out


def _sweep(knob):
    def sections(study, ctx):
        from .sweeps import build_panels, sweep_table
        panels, notes = build_panels(study.cases, knob)
        return [Section(f"{knob}-sweep", f"{knob.replace('threads', 'thread')} sweep",
                        [(sweep_table(panels, knob, notes), f"{knob}_sweep.csv")],
                        empty=f"no series of ok cases that differ only in {knob}",
                        figures=lambda outdir: _plots().sweep_plot(panels, knob, outdir))]
    return sections


def _phases(study, ctx):
    from .phases import phase_rows, phase_table
    rows = phase_rows(study.cases)
    return [Section("phases", "phases", [(phase_table(rows, ctx.several), "phases.csv")],
                    empty="no case has phase times (run dlscale with --phases)",
                    figures=lambda outdir: _plots().phase_plot(rows, outdir))]


def _ranks(study, ctx):
    from .ranks import rank_rows, rank_table
    # Heat maps of the cases on more than one rank; of every ok case where none is.
    multi = [c for c in study.cases if c.ok and c.iter_time_s is not None and c.iter_time_s.shape[0] > 1]
    shown = multi or [c for c in study.cases if c.ok]
    capped = ctx.limit is not None and len(shown) > ctx.limit
    return [Section("ranks", "ranks and stragglers",
                    [(rank_table(rank_rows(study.cases, study.hosts_for), ctx.several), "ranks.csv")],
                    empty="no ok case", grid=True,
                    figures=lambda outdir: _plots().rank_heatmaps(shown, outdir, limit=ctx.limit),
                    note=f"heat maps of the first {ctx.limit} of {len(shown)} cases; "
                         "`dlscale-report ranks FILES -o DIR` draws them all" if capped else None)]


def _allreduce(study, ctx):
    from .allreduce import allreduce_rows, allreduce_table
    benchmarks = [b for f in study.files for b in f.allreduce]
    return [Section("allreduce", "all-reduce microbenchmark", [(allreduce_table(allreduce_rows(benchmarks)),
                                                               "allreduce.csv")],
                    empty="no all-reduce microbenchmark in the files (dlscale allreduce, or --phases on two or "
                          "more ranks)",
                    figures=lambda outdir: _plots().allreduce_plot(benchmarks, outdir))]


def _diagnosis(study, ctx):
    from .diagnosis import diagnose, diagnosis_lines, diagnosis_notes, study_diagnosis_table
    from .noise import measure_noise
    from .scaling import build_series, scaling_modes
    series = [s for m in scaling_modes(study.cases) for s in build_series(study.cases, m)[0]]
    diagnoses = diagnose(study.cases)
    table = study_diagnosis_table(diagnoses, measure_noise(study.cases))
    return [Section("diagnosis", "scaling diagnosis", [(table, "diagnosis.csv")],
                    empty="no scaling series has phases (--phases) at two rank counts",
                    intro="Each part's time in ms beside its share of the step, and the diagnosis in words.",
                    items=diagnosis_lines(diagnoses) if table.rows else diagnosis_notes(diagnoses),
                    figures=lambda outdir: _plots().overview_plot(series, diagnoses, outdir),
                    figures_on_first_screen=True)]


def _drivers(study, ctx):
    from .drivers import driver_rows, driver_table
    return [Section("drivers", "drivers compared", [(driver_table(driver_rows(study.cases)), "drivers.csv")],
                    empty="no configuration ran on more than one driver",
                    intro="Each configuration that more than one driver ran: throughput, share of each driver's "
                          "own measured peak, CPU utilisation and energy per sample.")]


def _precisions(study, ctx):
    from .precisions import precision_pairs, precision_rows, precision_table
    rows = precision_rows(precision_pairs(study.cases))
    return [Section("precisions", "drivers by precision", [(precision_table(rows), "precisions.csv")],
                    empty="no case ran in fp32 and in a reduced precision with everything else the same",
                    figures=lambda outdir: _plots().precision_loss_plot(rows, outdir))]


def _simulations(study, ctx):
    from .simulation import simulation_rows, simulation_sentence, simulation_table, simulation_views
    views = simulation_views(study.cases, ctx.several)
    return [Section("simulations", "simulated projections",
                    [(simulation_table(simulation_rows(views), ctx.several), "simulations.csv")],
                    empty="no case holds a simulation (dlscale-project, docs/projection.md)",
                    intro="What dlscale-project simulated with SimGrid from each case's measured compute on a "
                          "described platform (docs/projection.md), the newest simulation of each platform per "
                          "case, against the measured points of the case's scaling series.",
                    items=[simulation_sentence(v) for v in views],
                    figures=lambda outdir: _plots().simulation_plots(views, outdir))]


def _accuracy(study, ctx):
    from .accuracy import accuracy_rows, test_accuracy_table, time_table, time_to_accuracy_table
    from .time_to_target import time_to_target_rows, time_to_target_table
    rows = accuracy_rows(study.accuracy)
    ok = sum(r["status"] == "ok" for r in rows)
    capped = ctx.limit is not None and ok > ctx.limit
    at_scale = time_to_target_rows(study.accuracy, study.cases)
    at_scale_table = time_to_target_table(at_scale)
    return [Section("accuracy", "accuracy",
                    [(time_table(rows), "accuracy_time.csv"), (time_to_accuracy_table(rows), "time_to_accuracy.csv"),
                     (test_accuracy_table(rows), "test_accuracy.csv")],
                    empty="no accuracy case (dlscale run --mode accuracy)", grid=True,
                    intro="Accuracy-mode cases: training over epochs to a validation accuracy, each configuration "
                          "repeated from seeds seed, seed+1, ...; means with Student-t 95% confidence intervals "
                          "over the repeats as recorded (docs/schema.md).",
                    figures=lambda outdir: _plots().accuracy_curves(rows, outdir, limit=ctx.limit),
                    note=f"curves of the first {ctx.limit} of {ok} configurations" if capped else None),
            Section("time-to-target", "time to target at scale", [(at_scale_table, "time_to_target_scaling.csv")],
                    empty="no accuracy series with a target reached at two global batches or more "
                          "(--ranks, --accumulate with --target-accuracy)",
                    intro="How much sooner training reaches its target at each rank count and global batch, and "
                          "why: the speedup over the smallest global batch is the hardware's factor (time per "
                          "step) times the statistical factor (steps to target), each against its ideal "
                          "(docs/metrics.md, \"Time to target at scale\").",
                    figures=lambda outdir: _plots().time_to_target_plots(at_scale, outdir)),
            Section("noise-scale", "gradient noise scale", [(_noise_table(study), "noise_scale.csv")],
                    empty="no case records a gradient noise scale (it needs 2 or more ranks or micro-batches)",
                    intro="The gradient noise scale of each case on several ranks or micro-batches, and the factor "
                          "by which it predicts the steps to a target grow at the case's global batch "
                          "(docs/metrics.md, \"The gradient noise scale\").")]


def _noise_table(study):
    from .time_to_target import noise_rows, noise_table
    return noise_table(noise_rows(study.cases + study.accuracy))


def _compare(study, ctx):
    from .compare import compare_rows, compare_table
    if ctx.baseline is None:
        return []
    rows, notes = compare_rows(ctx.baseline.cases, study.cases)
    return [Section("compare", "comparison with a baseline run", [(compare_table(rows, notes), "compare.csv")],
                    empty="no case matches one of the baseline's",
                    intro=f"A = {', '.join(ctx.baseline.paths)}; B = the files of this report.")]


# Every view, in the order of the report's sections (after its consistency check).
VIEWS = (
    View("cases", "", _cases),
    View("diagnosis", "lost efficiency of each scaling series by part, from the phases", _diagnosis),
    View("timelines", "", _timelines),
    View("drivers", "", _drivers),
    View("scaling", "speedup and efficiency against the smallest rank count", _scaling),
    View("simulations", "", _simulations),
    View("threads", "thread sweep: time per mini-batch against threads", _sweep("threads")),
    View("batch", "batch sweep: time per mini-batch against batch size", _sweep("batch")),
    View("precisions", "", _precisions),
    View("phases", "forward/backward/all-reduce/update time per case", _phases),
    View("ranks", "per-rank times, straggler, heat maps", _ranks),
    View("accuracy", "", _accuracy),
    View("allreduce", "all-reduce microbenchmark bandwidth", _allreduce),
    View("compare", "", _compare),
)
VIEW = {v.name: v for v in VIEWS}
# The views that are subcommands of their own (scaling's --mode is its own).
COMMANDS = tuple(v for v in VIEWS if v.help)
