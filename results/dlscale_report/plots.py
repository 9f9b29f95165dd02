"""Figures of the report, as PNG files (matplotlib, Agg backend, no display).

Each function takes the rows or series the table modules built, so a figure
always shows exactly the numbers of its table, writes its PNGs into a
directory and returns [(path, caption)]. matplotlib is imported here only, so
`summary` and `check` keep working on machines without it.
"""

import math
import os
import textwrap

import matplotlib

matplotlib.use("Agg")                     # files only; never look for a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402
from matplotlib.ticker import MaxNLocator, NullFormatter, ScalarFormatter  # noqa: E402

from .stats import PHASES, rank_medians  # noqa: E402

DPI = 110
PHASE_COLORS = ("#4C72B0", "#DD8452", "#C44E52", "#55A868")
plt.rcParams.update({"font.size": 9, "axes.grid": True, "grid.alpha": 0.3,
                     "legend.fontsize": 7.5, "axes.titlesize": 9.5})


def _save(fig, outdir, name):
    path = os.path.join(outdir, name)
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return path


def _colors(n):
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return [cycle[i % len(cycle)] for i in range(n)]


def _log2_ranks(ax, ranks):
    """log2 x axis with the rank counts themselves as tick labels."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(set(ranks)))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())


def _wrap(text, width=60):
    return "\n".join(textwrap.wrap(text, width)) or text


def _legend(ax, n_entries):
    # Long series labels: under the axes once there are several of them.
    if n_entries > 3:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, frameon=False)
    else:
        ax.legend(loc="best")


def _annotate_hosts(ax, series, colors, y_of):
    """Where some point spanned several hosts: next to each series' first point on a new number
    of hosts, that number ("2 hosts"), so that the figure shows where the series crossed hosts."""
    if not any((r["hosts"] or 1) > 1 for s in series for r in s.ok_rows):
        return
    for s, color in zip(series, colors):
        last = None
        for r in s.ok_rows:
            hosts = r["hosts"] or 1
            if hosts != last:
                ax.annotate(f"{hosts} host{'' if hosts == 1 else 's'}", (r["ranks"], y_of(r)),
                            textcoords="offset points", xytext=(4, 5), fontsize=6.5, color=color)
            last = hosts


def _yerr(rows, key, low, high):
    return [[r[key] - r[low] for r in rows], [r[high] - r[key] for r in rows]]


# ---------------------------------------------------------------- scaling

def scaling_plots(series, mode, outdir):
    """Speedup, efficiency (linear and log2 ranks) and step time against ranks."""
    plotted = [s for s in series if s.ok_rows]
    if not plotted:
        return []
    colors = _colors(len(plotted))
    all_ranks = [r["ranks"] for s in plotted for r in s.ok_rows]
    out = []
    speedup_name = "scaled speedup" if mode == "weak" else "speedup"

    # Speedup against ranks, with the ideal P/P0 of each baseline.
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for s, color in zip(plotted, colors):
        rows = s.ok_rows
        ax.errorbar([r["ranks"] for r in rows], [r["speedup"] for r in rows],
                    yerr=_yerr(rows, "speedup", "speedup_low", "speedup_high"),
                    marker="o", capsize=3, color=color, label=s.label)
    _annotate_hosts(ax, plotted, colors, lambda r: r["speedup"])
    for p0 in sorted({s.baseline_ranks for s in plotted}):
        xs = sorted({p for p in all_ranks if p >= p0})
        ax.plot(xs, [p / p0 for p in xs], "k--", lw=1, label=f"ideal (P0={p0})")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("ranks P")
    ax.set_ylabel(f"{speedup_name} vs P0")
    ax.set_title(f"{mode} scaling: {speedup_name} (95% CI)")
    _legend(ax, len(plotted) + 1)
    out.append((_save(fig, outdir, f"scaling_{mode}_speedup.png"),
                f"{mode} scaling: {speedup_name} against ranks; dashed: ideal P/P0"))

    # Efficiency, on a linear and on a log2 rank axis.
    for log2 in (False, True):
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        for s, color in zip(plotted, colors):
            rows = s.ok_rows
            ax.errorbar([r["ranks"] for r in rows], [r["efficiency"] for r in rows],
                        yerr=_yerr(rows, "efficiency", "efficiency_low", "efficiency_high"),
                        marker="o", capsize=3, color=color, label=s.label)
        _annotate_hosts(ax, plotted, colors, lambda r: r["efficiency"])
        _projection_lines(ax, plotted, colors, "efficiency", max(all_ranks))
        ax.axhline(1.0, color="k", ls="--", lw=1, label="ideal")
        ax.set_ylim(bottom=0)
        if log2:
            _log2_ranks(ax, all_ranks)
        else:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("ranks P" + (" (log2)" if log2 else ""))
        ax.set_ylabel("efficiency E(P)")
        ax.set_title(f"{mode} scaling: efficiency (95% CI)")
        _legend(ax, len(plotted) + 1)
        name = f"scaling_{mode}_efficiency{'_log2' if log2 else ''}.png"
        out.append((_save(fig, outdir, name),
                    f"{mode} scaling: efficiency against ranks"
                    + (" on a log2 axis" if log2 else "") + "; dashed: ideal 1"))

    # Step time, measured and projected.
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for s, color in zip(plotted, colors):
        rows = s.ok_rows
        ax.errorbar([r["ranks"] for r in rows], [r["step_median_ms"] / 1e3 for r in rows],
                    yerr=[[(r["step_median_ms"] - r["ci95_low_ms"]) / 1e3 for r in rows],
                          [(r["ci95_high_ms"] - r["step_median_ms"]) / 1e3 for r in rows]],
                    marker="o", capsize=3, color=color, label=s.label)
        base = rows[0]
        xs = sorted({r["ranks"] for r in rows})
        ideal = [base["step_median_ms"] / 1e3 * (1 if mode == "weak" else base["ranks"] / p)
                 for p in xs]
        ax.plot(xs, ideal, "--", color=color, lw=0.8, alpha=0.7)
    _projection_lines(ax, plotted, colors, "step_s", max(all_ranks))
    _log2_ranks(ax, all_ranks)
    ax.set_yscale("log")
    ax.set_xlabel("ranks P (log2)")
    ax.set_ylabel("median step time (s)")
    ax.set_title(f"{mode} scaling: step time (95% CI); dashed: ideal")
    _legend(ax, len(plotted))
    out.append((_save(fig, outdir, f"scaling_{mode}_step_time.png"),
                f"{mode} scaling: median step time against ranks; dashed: ideal "
                + ("(constant)" if mode == "weak" else "(T(P0)·P0/P)")
                + "; dotted: projection"))

    if any(s.projection is not None for s in plotted):
        out.append(_projection_plot(plotted, colors, mode, outdir))
    return out


def _projection_lines(ax, series, colors, what, max_ranks):
    """Projected curves (dotted, in the series' colour) over the measured rank range.

    Projections often reach P = 1024; drawn in full they would squeeze the
    measured points into one corner, so here they stop at the largest measured
    P and the projection figure shows them whole.
    """
    labelled = False
    for s, color in zip(series, colors):
        if s.projection is None:
            continue
        values = (s.projection.step_s.tolist() if what == "step_s"
                  else [s.projected_efficiency[int(p)] for p in s.projection.ranks.tolist()])
        pts = [(p, v) for p, v in zip(s.projection.ranks.tolist(), values) if p <= max_ranks]
        if pts:
            ax.plot([p for p, _ in pts], [v for _, v in pts], ":", color=color, lw=1.5,
                    label="_nolegend_" if labelled else "projected (dotted, series colour)")
            labelled = True


def _projection_plot(series, colors, mode, outdir):
    """Measured points and the whole projected curves: step time and efficiency."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.4))
    ranks = []
    for s, color in zip(series, colors):
        rows = s.ok_rows
        ranks += [r["ranks"] for r in rows]
        ax1.plot([r["ranks"] for r in rows], [r["step_median_ms"] / 1e3 for r in rows], "o",
                 color=color, label=s.label)
        ax2.plot([r["ranks"] for r in rows], [r["efficiency"] for r in rows], "o", color=color,
                 label=s.label)
        if s.projection is not None:
            pr = s.projection.ranks.tolist()
            ranks += pr
            fit = s.projection.attrs.get("fit_ranks")
            name = f"projected, fit P={fit}"
            if s.projection.between_hosts is not None and s.projection.between_hosts.any():
                # Which network's figures the curve used, from where.
                first = min(p for p, b in zip(pr, s.projection.between_hosts.tolist()) if b)
                name += f"; between-host fit from P={first}"
            ax1.plot(pr, s.projection.step_s.tolist(), ":", color=color, label=name)
            ax2.plot(pr, [s.projected_efficiency[int(p)] for p in pr], ":", color=color, label=name)
    top = max(ranks)
    ticks = [1 << k for k in range(0, top.bit_length()) if 1 << k <= top]
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("ranks P (log2)")
    ax1.set_yscale("log")
    ax1.set_ylabel("step time (s)")
    ax1.set_title(f"{mode} scaling: measured (dots) and projected step time")
    ax2.axhline(1.0, color="k", ls="--", lw=1)
    ax2.set_ylim(bottom=0)
    ax2.set_ylabel("efficiency")
    ax2.set_title("efficiency; measured vs P0 of the series, projected as recorded")
    handles, labels = ax1.get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=2, frameon=False)
    fig.tight_layout()
    return (_save(fig, outdir, f"scaling_{mode}_projection.png"),
            f"{mode} scaling: measured points and the projections over their whole range "
            "(ring all-reduce α–β model)")


# ---------------------------------------------------------------- simulated projections

def simulation_plots(views, outdir):
    """Per shown simulation (simulation.SimulationView): left, the simulated step against P split
    into the diagnosis' parts (stacked) with the series' measured medians (95% CI) on it and the
    error at each; right, the simulated efficiency. The caption is the simulation's sentence."""
    from .diagnosis import PARTS, STEP_NAMES
    from .simulation import EFFICIENCY_QUOTED, simulation_sentence
    out = []
    # The simulation's datasets in the diagnosis' order (update_s is its update and other).
    datasets = dict(zip(PARTS, ("compute_s", "straggler_wait_s", "exposed_allreduce_s", "update_s")))
    for v in views:
        sim = v.sim
        ranks = sim.ranks.tolist()
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.4))
        ax1.stackplot(ranks, *[getattr(sim, datasets[k]) * 1e3 for k in PARTS],
                      colors=[PART_COLORS[k] for k in PARTS], alpha=0.85,
                      labels=[f"simulated {STEP_NAMES[k]}" for k in PARTS])
        ax1.plot(ranks, sim.step_s * 1e3, color="k", lw=1, label="simulated step")
        measured = v.measured
        if measured:
            ax1.errorbar([r["ranks"] for r in measured], [r["step_median_ms"] for r in measured],
                         yerr=[[r["step_median_ms"] - r["ci95_low_ms"] for r in measured],
                               [r["ci95_high_ms"] - r["step_median_ms"] for r in measured]],
                         fmt="o", color="k", mfc="white", capsize=3, zorder=5,
                         label="measured median (95% CI)")
            for r in measured:
                if r["ranks"] in v.errors:
                    ax1.annotate(f"{100 * v.errors[r['ranks']]:+.1f}%", (r["ranks"], r["step_median_ms"]),
                                 textcoords="offset points", xytext=(6, 4), fontsize=7)
        ax2.plot(ranks, sim.efficiency, "o-", color=PART_COLORS["compute"], ms=3.5, label="simulated")
        ax2.axhline(1.0, color="k", ls="--", lw=1, label="ideal")
        ax2.axhline(EFFICIENCY_QUOTED, color="#888", ls=":", lw=1)
        ax2.set_ylim(0, 1.1)
        ticks = sorted(set(ranks) | {r["ranks"] for r in measured})
        for ax in (ax1, ax2):
            _log2_ranks(ax, ticks)
            if len(ticks) > 12:
                ax.tick_params(axis="x", labelrotation=45, labelsize=7)
            ax.set_xlabel("ranks P (log2)")
        ax1.set_ylim(bottom=0)
        ax1.set_ylabel("step time (ms)")
        ax1.set_title(_wrap(f"{v.label} ({v.mode}): simulated on {sim.platform}, parts stacked; "
                            "dots: measured", 80))
        ax2.set_ylabel("efficiency (vs the simulated P = 1)")
        ax2.set_title(f"simulated efficiency (dotted: {EFFICIENCY_QUOTED:g})")
        fig.tight_layout()
        handles, labels = ax1.get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, frameon=False)
        name = f"simulation_{v.case.index:04d}_{sim.name}.png"
        out.append((_save(fig, outdir, name),
                    "simulated step by part (stacked) and efficiency against P, the series' measured "
                    "medians with their 95% CI and the step-time error at each: " + simulation_sentence(v)))
    return out


# ---------------------------------------------------------------- sweeps

def sweep_plot(panels, knob, outdir):
    """One panel per configuration, seconds per mini-batch vs the knob, one line per driver."""
    if not panels:
        return []
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.3 * ncols, 3.4 * nrows), squeeze=False)
    drivers = list(dict.fromkeys(d for p in panels for d in p.drivers))
    color_of = dict(zip(drivers, _colors(len(drivers))))
    for ax, p in zip(axes.flat, panels):
        for d in p.drivers:
            rows = [r for r in p.rows if r["driver"] == d and r["step_median_ms"] is not None]
            if not rows:
                continue
            ax.errorbar([r["x"] for r in rows], [r["step_median_ms"] / 1e3 for r in rows],
                        yerr=[[(r["step_median_ms"] - r["ci95_low_ms"]) / 1e3 for r in rows],
                              [(r["ci95_high_ms"] - r["step_median_ms"]) / 1e3 for r in rows]],
                        marker="o", capsize=3, color=color_of[d], label=d)
        _log2_ranks(ax, p.xs)
        ax.set_yscale("log")
        ax.set_xlabel(("threads per rank" if knob == "threads" else "mini-batch size") + " (log2)")
        ax.set_ylabel("seconds per mini-batch")
        ax.set_title(_wrap(p.label, 48))
        ax.legend(loc="best")
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    fig.tight_layout()
    what = "CPU threads" if knob == "threads" else "mini-batch size"
    return [(_save(fig, outdir, f"{knob}_sweep.png"),
             f"seconds per mini-batch against {what} (median, 95% CI), one line per driver")]


# ---------------------------------------------------------------- phases

def phase_plot(rows, outdir):
    """Stacked bars per case: absolute ms, and the share of each phase."""
    if not rows:
        return []
    labels = [f"{r['case']} {r['label']}" if len({x["file"] for x in rows}) == 1
              else f"{os.path.basename(r['file'])}:{r['case']} {r['label']}" for r in rows]
    height = 1.6 + 0.32 * len(rows)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, height), sharey=True,
                                   gridspec_kw={"width_ratios": [3, 2]})
    y = list(range(len(rows)))
    left_abs = [0.0] * len(rows)
    left_rel = [0.0] * len(rows)
    for p, color in zip(PHASES, PHASE_COLORS):
        v = [r[f"{p}_ms"] for r in rows]
        share = [100 * x / r["sum_ms"] if r["sum_ms"] > 0 else 0 for x, r in zip(v, rows)]
        ax1.barh(y, v, left=left_abs, color=color, label=p)
        ax2.barh(y, share, left=left_rel, color=color, label=p)
        left_abs = [a + b for a, b in zip(left_abs, v)]
        left_rel = [a + b for a, b in zip(left_rel, share)]
    ax1.plot([r["step_median_ms"] for r in rows], y, "k|", ms=12, mew=2, label="step median")
    ax1.set_yticks(y)
    ax1.set_yticklabels(labels)
    ax1.invert_yaxis()
    ax1.set_xlabel("ms (per phase: median over iterations of the max over ranks)")
    ax2.set_xlabel("share of the sum of phases (%)")
    ax2.set_xlim(0, 100)
    ax1.legend(loc="lower right")
    fig.suptitle("time per phase")
    fig.tight_layout()
    return [(_save(fig, outdir, "phases.png"),
             "forward / backward / all-reduce / update per case; bar: per-phase medians of "
             "the slowest rank; tick: step median")]


# ---------------------------------------------------------------- precisions

def precision_loss_plot(rows, outdir, limit=6):
    """Loss over the timed iterations, fp32 solid and the reduced precision dashed, per pair."""
    rows = [r for r in rows if r["fp32_loss"] is not None and r["reduced_loss"] is not None][:limit]
    if not rows:
        return []
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    for r, color in zip(rows, _colors(len(rows))):
        ax.plot(range(1, len(r["fp32_loss"]) + 1), r["fp32_loss"], "-", color=color,
                label=_wrap(f"{r['label']} fp32", 70))
        ax.plot(range(1, len(r["reduced_loss"]) + 1), r["reduced_loss"], "--", color=color,
                label=_wrap(f"{r['label']} {r['precision']}", 70))
    ax.set_xlabel("timed iteration")
    ax.set_ylabel("loss (mean over ranks)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("loss by precision, same seed and data")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, frameon=False)
    fig.tight_layout()
    return [(_save(fig, outdir, "precision_loss.png"),
             f"loss per timed iteration: fp32 solid, reduced precision dashed (first {len(rows)} pairs)")]


# ---------------------------------------------------------------- accuracy

def accuracy_curves(rows, outdir, limit=None):
    """Validation accuracy against cumulative training time, one figure per ok configuration:
    each repeat a thin line, their mean (accuracy.curve) a thick one, the target dashed."""
    from .accuracy import curve
    out = []
    for i, r in enumerate(row for row in rows if row["status"] == "ok"):
        if limit is not None and len(out) >= limit:
            break
        repeats, mean = curve(r["case"])
        fig, ax = plt.subplots(figsize=(4.6, 3.1))
        for k, points in enumerate(repeats):
            ax.plot([p[0] for p in points], [p[1] for p in points], "-", lw=0.8, alpha=0.45, color="#4C72B0",
                    label="repeats" if k == 0 else None)
        ax.plot([p[0] for p in mean], [p[1] for p in mean], "o-", lw=2, ms=3, color="#C44E52", label="mean")
        if r["target_accuracy"] is not None:
            ax.axhline(r["target_accuracy"], ls="--", lw=1, color="#555", label=f"target {r['target_accuracy']:g}")
        ax.set_xlabel("cumulative training time (s)")
        ax.set_ylabel("validation accuracy")
        ax.set_title(_wrap(r["label"], 55))
        ax.legend(loc="lower right")
        fig.tight_layout()
        out.append((_save(fig, outdir, f"accuracy_{i:03d}.png"),
                    f"{r['label']}: validation accuracy after each epoch, {r['repeats']} repeat(s) and their mean"))
    return out


def time_to_target_plots(rows, outdir):
    """Per time-to-target series (time_to_target.time_to_target_rows): time to target against the
    global batch with its 95% CI, and beside it the speedup, its hardware and statistical factors,
    the statistical factor the noise scale predicts, and the two ideals."""
    from .time_to_target import series_key
    series = {}
    for r in rows:
        if r.get("speedup") is not None:
            series.setdefault(series_key(r["case"]), []).append(r)
    out = []
    for i, points in enumerate(series.values()):
        batches = [p["global_batch"] for p in points]
        fig, (left, right) = plt.subplots(1, 2, figsize=(9.2, 3.3))
        t = [p["time_to_target_mean_s"] for p in points]
        low = [p["time_to_target_mean_s"] - (p["time_to_target_ci95_low_s"] or p["time_to_target_mean_s"])
               for p in points]
        high = [(p["time_to_target_ci95_high_s"] or p["time_to_target_mean_s"]) - p["time_to_target_mean_s"]
                for p in points]
        left.errorbar(batches, t, yerr=[low, high], fmt="o-", color="#4C72B0", capsize=3)
        left.set_xscale("log", base=2)
        left.set_xlabel("global batch B")
        left.set_ylabel("time to target (s)")
        for p in points:
            left.annotate(f"P={p['ranks']} K={p['accumulate']}", (p["global_batch"], p["time_to_target_mean_s"]),
                          textcoords="offset points", xytext=(4, 4), fontsize=7)
        for key, style, label in (("speedup", "o-", "speedup"), ("hardware_factor", "s-", "hardware"),
                                  ("statistical_factor", "^-", "statistical"),
                                  ("predicted_statistical_factor", "^:", "statistical, predicted by B_simple"),
                                  ("hardware_ideal", "--", "hardware ideal"),
                                  ("statistical_ideal", "--", "statistical ideal")):
            values = [p.get(key) for p in points]
            if any(v is not None for v in values):
                right.plot(batches, [v if v is not None else float("nan") for v in values], style, lw=1.2, ms=4,
                           label=label, alpha=0.6 if "ideal" in key else 1)
        right.set_xscale("log", base=2)
        right.set_yscale("log", base=2)
        right.set_xlabel("global batch B")
        right.set_ylabel("factor over the smallest B")
        right.legend(fontsize=7)
        fig.suptitle(_wrap(points[0]["label"], 90), fontsize=9)
        fig.tight_layout()
        out.append((_save(fig, outdir, f"time_to_target_{i:03d}.png"),
                    f"{points[0]['label']}: time to target against the global batch, and its speedup split into "
                    "the hardware's and the statistical factor"))
    return out


# ---------------------------------------------------------------- ranks

HEATMAP_ROWS = 64


def rank_heatmaps(cases, outdir, limit=None):
    """One heat map (rank × iteration, ms) per ok case; the straggler row outlined."""
    out = []
    for case in cases:
        t = case.iter_time_s
        if not case.ok or t is None or t.size == 0:
            continue
        if limit is not None and len(out) >= limit:
            break
        medians = rank_medians(t)
        slow = medians.index(max(medians))
        ranks, iters = t.shape
        # A row of its own per rank up to HEATMAP_ROWS ranks; beyond, the figure keeps that height
        # (a rank a pixel row or less) and labels a few ranks and the straggler.
        fig, ax = plt.subplots(figsize=(min(12, 3 + 0.18 * iters), 1.4 + 0.3 * min(ranks, HEATMAP_ROWS)))
        im = ax.imshow(t * 1e3, aspect="auto", interpolation="nearest", cmap="viridis",
                       extent=(0.5, iters + 0.5, ranks - 0.5, -0.5))
        ax.add_patch(Rectangle((0.5, slow - 0.5), iters, 1, fill=False, ec="red", lw=2))
        labelled = range(ranks) if ranks <= HEATMAP_ROWS else sorted(
            {r for r in range(0, ranks, -(-ranks // 16)) if abs(r - slow) > ranks // 40} | {slow})
        ax.set_yticks(list(labelled))
        ax.set_yticklabels([f"{r}{' straggler' if r == slow else ''}" for r in labelled])
        ax.set_xlabel("timed iteration")
        ax.set_ylabel("rank")
        ax.grid(False)
        ax.set_title(_wrap(f"{os.path.basename(case.file)}:{case.name} {case.attrs.get('workload')}"
                           f" {case.attrs.get('driver')} P={ranks} — straggler: rank {slow}", 80))
        fig.colorbar(im, ax=ax, label="iteration time (ms)", pad=0.01)
        name = f"ranks_{case.index:04d}.png"
        out.append((_save(fig, outdir, name),
                    f"{case.file}:{case.name}: per-rank iteration times; red: the straggler "
                    f"(rank {slow}, largest median)"))
    return out


# ---------------------------------------------------------------- all-reduce

def allreduce_plot(benchmarks, outdir):
    """algbw and busbw against message size, log-log, one line per benchmark."""
    if not benchmarks:
        return []
    from .allreduce import label
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    several = len({ar.file for ar in benchmarks}) > 1
    shown = {ax1: 0, ax2: 0}
    for ar, color in zip(benchmarks, _colors(len(benchmarks))):
        for ax, bw in ((ax1, ar.algbw_gbps), (ax2, ar.busbw_gbps)):
            # A log axis cannot show 0 (busbw is 0 on one rank) or inf (a time of 0); leave such
            # points out.
            pts = [(n, b) for n, b in zip(ar.bytes.tolist(), bw.tolist()) if n > 0 and 0 < b < math.inf]
            ax.plot([n for n, _ in pts], [b for _, b in pts], "o-", color=color, ms=3,
                    label=label(ar, several))
            shown[ax] += len(pts)
    for ax, what in ((ax1, "algbw"), (ax2, "busbw")):
        if not shown[ax]:
            # Nothing to draw (every benchmark on one rank: busbw 0): matplotlib refuses log axes
            # without a positive value.
            ax.text(0.5, 0.5, f"no {what} above 0", ha="center", va="center", transform=ax.transAxes)
            ax.set_title(f"all-reduce {what}")
            continue
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes, log2)")
        ax.set_ylabel(f"{what} (GB/s, 1 GB = 1e9 B)")
        ax.set_title(f"all-reduce {what}")
    handles, labels = ax1.get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=min(3, len(labels)), frameon=False)
    fig.tight_layout()
    return [(_save(fig, outdir, "allreduce_bandwidth.png"),
             "all-reduce bandwidth against message size (algbw = bytes/time, busbw = "
             "algbw·2(P-1)/P)")]


# ---------------------------------------------------------------- overview

PART_COLORS = {"compute": "#4C72B0", "straggler": "#DD8452", "allreduce": "#C44E52",
               "other": "#8C8C8C"}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def overview_plot(series, diagnoses, outdir):
    """The report's first figure: speedup and efficiency against P for every series (colour:
    network, marker: driver, line: scaling mode), and below them the step's parts at each P,
    relative to the ideal step there, the drivers of a network side by side."""
    from matplotlib.lines import Line2D
    from .diagnosis import PARTS, STEP_NAMES

    plotted = [s for s in series if len(s.ok_rows) > 1]
    bars = [d for d in diagnoses if d.points]
    if not plotted:
        return []
    workloads = sorted({s.rows[0]["workload"] for s in plotted} | {d.workload for d in bars})
    drivers = sorted({s.rows[0]["driver"] for s in plotted} | {d.driver for d in bars})
    color = dict(zip(workloads, _colors(len(workloads))))
    marker = {d: MARKERS[i % len(MARKERS)] for i, d in enumerate(drivers)}
    style = {"strong": "-", "weak": "--"}

    fig = plt.figure(figsize=(7.6, 6.6) if bars else (7.6, 3.4))
    grid = fig.add_gridspec(2 if bars else 1, 2, height_ratios=[1, 1.15] if bars else [1],
                            hspace=0.55, wspace=0.3)
    ax_s, ax_e = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1])
    ranks = sorted({r["ranks"] for s in plotted for r in s.ok_rows})
    for s in plotted:
        rows, first = s.ok_rows, s.rows[0]
        kw = dict(color=color[first["workload"]], marker=marker[first["driver"]],
                  ls=style[s.mode], lw=1.3, ms=5)
        if first["placement"] == "spread":
            kw["markerfacecolor"] = "none"           # spread: hollow markers
        ax_s.plot([r["ranks"] for r in rows], [r["speedup"] for r in rows], **kw)
        ax_e.plot([r["ranks"] for r in rows], [r["efficiency"] for r in rows], **kw)
    p0 = min(s.baseline_ranks for s in plotted)
    ax_s.plot(ranks, [p / p0 for p in ranks], color="k", ls=":", lw=1.2)
    ax_e.axhline(1.0, color="k", ls=":", lw=1.2)
    for ax in (ax_s, ax_e):
        ax.set_xticks(ranks)
        ax.set_xlabel("ranks P")
    ax_s.set_ylabel("speedup S(P)")
    ax_s.set_title("speedup (dotted: ideal P/P0)")
    ax_e.set_ylabel("efficiency E(P)")
    ax_e.set_ylim(0, 1.15)
    ax_e.set_title("efficiency (dotted: ideal 1)")
    handles = ([Line2D([], [], color=color[w], lw=3, label=w) for w in workloads]
               + [Line2D([], [], color="k", marker=marker[d], ls="", label=d) for d in drivers]
               + [Line2D([], [], color="k", ls=style[m], label=m)
                  for m in ("strong", "weak") if any(s.mode == m for s in plotted)])
    if any(s.rows[0]["placement"] == "spread" for s in plotted):
        handles += [Line2D([], [], color="k", marker="o", ls="", label="packed"),
                    Line2D([], [], color="k", marker="o", markerfacecolor="none", ls="", label="spread")]
    ax_e.legend(handles=handles, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False,
                fontsize=7.5)

    if bars:
        ax_b = fig.add_subplot(grid[1, :])
        bars = sorted(bars, key=lambda d: (d.mode, d.workload, d.driver, d.placement))
        x, ticks, labels, groups = 0.0, [], [], {}
        for d in bars:
            k0 = d.baseline_parts["step"]
            columns = [(d.baseline_ranks, d.baseline_parts, k0)] + [
                (p.ranks, p.parts, p.ideal_s) for p in d.points]
            hosts = [d.baseline_hosts] + [p.hosts for p in d.points]
            for i, (p, parts, ideal) in enumerate(columns):
                bottom = 0.0
                for part in PARTS:
                    h = max(parts[part], 0.0) / ideal
                    ax_b.bar(x + i * 0.42, h, 0.38, bottom=bottom, color=PART_COLORS[part])
                    bottom += h
                # P over the bar, and under it the hosts where the ranks spanned several.
                ax_b.text(x + i * 0.42, bottom + 0.02, f"{p}" + (f"\n{hosts[i]}h" if hosts[i] > 1 else ""),
                          ha="center", va="bottom", fontsize=6.5)
            ticks.append(x + 0.21 * (len(columns) - 1))
            labels.append(d.driver + (f" {d.placement}" if len({b.placement for b in bars}) > 1 else ""))
            groups.setdefault((d.mode, d.workload), []).append(x)
            x += 0.42 * len(columns) + 0.35
        ax_b.axhline(1.0, color="k", ls=":", lw=1.2)
        ax_b.set_xticks(ticks)
        ax_b.set_xticklabels(labels, rotation=30, ha="right", fontsize=7.5)
        ax_b.grid(axis="x", visible=False)
        top = ax_b.get_ylim()[1] * 1.12
        ax_b.set_ylim(0, top)
        for (mode, workload), xs in groups.items():
            # The network's name without its size overrides: the legend above has them.
            ax_b.text((min(xs) + max(xs)) / 2 + 0.2, top * 0.97, f"{workload.split(':')[0]}\n{mode}",
                      ha="center", va="top", fontsize=7)
            ax_b.axvline(min(xs) - 0.3, color="#bbb", lw=0.6)
        ax_b.set_ylabel("step time / ideal step")
        ax_b.set_title("parts of the step at each P (number over the bar"
                       + ("; Nh: on N hosts" if any(p.hosts > 1 for d in bars for p in d.points) else "")
                       + "), relative to the ideal step (dotted)")
        ax_b.legend([Rectangle((0, 0), 1, 1, color=PART_COLORS[k]) for k in reversed(PARTS)],
                    [STEP_NAMES[k] for k in reversed(PARTS)], loc="center left",
                    bbox_to_anchor=(1.01, 0.5), frameon=False, fontsize=7.5)
    return [(_save(fig, outdir, "overview.png"),
             "speedup and efficiency against ranks for every series (colour: network, marker: "
             "driver, hollow: spread placement, line: scaling mode); below, the median iteration's parts at each P over the "
             "ideal step there: a bar above 1 lost that much")]


# ---------------------------------------------------------------- timelines

# The communication lane's colours; the compute lane's are PHASE_COLORS.
REDUCTION_COLORS = ("#8172B2", "#B3A8D9")   # buckets alternate, so that neighbours stay apart
WAIT_COLOR = "#9A9A9A"


def timeline_plot(case, ce, label, outdir):
    """The median iteration of `case` (timeline.timeline_events `ce`), one pair of rows per rank
    (or per host, beyond ce's row limit): compute (the phases) and communication (each bucket's
    reduction, grey where it waited for the slowest rank); arrows from each bucket's ready point
    to its reduction."""
    from .timeline import COMMUNICATION, PHASE_EVENTS, WAIT, median_iteration
    iteration = median_iteration(case)
    events, flows = ce.of_iteration(iteration)
    t0 = min(e.start_s for e in events)
    ms = lambda s: (s - t0) * 1e3    # noqa: E731
    fig, ax = plt.subplots(figsize=(10, 1.0 + 0.55 * ce.ranks))
    y = lambda rank, lane: 2 * rank + (1 if lane == COMMUNICATION else 0)   # noqa: E731
    drawn = set()

    def bar(e, color, name, hatch=None):
        ax.broken_barh([(ms(e.start_s), e.dur_s * 1e3)], (y(e.rank, e.lane) - 0.38, 0.76),
                       facecolors=color, edgecolor="white", linewidth=0.4, hatch=hatch,
                       label=None if name in drawn else name)
        drawn.add(name)

    for e in events:
        if e.name in PHASE_EVENTS:
            bar(e, PHASE_COLORS[PHASE_EVENTS.index(e.name)], e.name)
        elif e.lane == COMMUNICATION and e.name.startswith(WAIT):
            bar(e, WAIT_COLOR, "wait for the slowest rank", hatch="//")
        elif e.lane == COMMUNICATION:
            k = int(e.name.split()[1]) - 1 if e.name.startswith("bucket") else 0
            bar(e, REDUCTION_COLORS[k % 2], "reduction (bucket)" if e.name.startswith("bucket") else "all-reduce")
    for f in flows:
        ax.annotate("", xy=(ms(f.reduction_start_s), y(f.rank, COMMUNICATION) - 0.38),
                    xytext=(ms(f.ready_s), y(f.rank, COMMUNICATION) - 1 + 0.38),
                    arrowprops={"arrowstyle": "->", "color": "#333", "lw": 0.6})
    ticks = [y(r, lane) for r in range(ce.ranks) for lane in ("compute", COMMUNICATION)]
    ax.set_yticks(ticks)
    ax.set_yticklabels([f"{ce.names[r]} · {lane}" if lane == "compute" else "communication"
                        for r in range(ce.ranks) for lane in ("compute", COMMUNICATION)])
    ax.set_ylim(2 * ce.ranks - 0.5, -0.5)
    ax.set_xlabel(f"ms from the iteration's first step start (rank 0's clock; ranks' offsets within "
                  f"{ce.bound_s * 1e3:.3g} ms)")
    ax.grid(True, axis="x")
    ax.grid(False, axis="y")
    grouped = "" if ce.ranks == ce.case_ranks else f"; {ce.case_ranks} ranks by host: each row their envelope"
    ax.set_title(_wrap(f"{label}: timed iteration {iteration + 1} of {ce.iterations} (the median step{grouped})",
                       110))
    # Under the axis label, whatever the figure's height: about 0.5 inch below the axes.
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.5 / (0.55 * ce.ranks + 0.3)), ncol=4, frameon=False)
    name = f"timeline_{case.index:04d}.png"
    return [(_save(fig, outdir, name),
             f"{case.file}:{case.name} {label}: the median iteration per rank; colours: forward, backward, "
             "exposed all-reduce, update; purple: each bucket's reduction, grey where it waited for the "
             "slowest rank; arrows: a bucket ready to its reduction")]
