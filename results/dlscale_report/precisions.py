"""The drivers split by precision: the same case in fp32 and in a reduced precision (bf16, tf32).

A pair is two cases that agree on everything (workload, driver, device, floating-point mode,
scaling, ranks, batch, threads, seed, data) but the precision. The table gives both step times,
the speed-up of the reduced precision, the ratio of the two precisions' measured peaks (the
speed-up the CPU or GPU and its library allow a step bound by its products), the instruction set
each ran on (`isa`), and the loss of their last timed iteration side by side: both start from
the same parameters and data (the same seed), so the losses differ only by what the precision
changed (docs/metrics.md, "Mixed precision"). The plot draws the two loss curves over the timed
iterations.
"""

from .study import describe, rank_key
from .tables import Column, Table, key_cell, ms, number, summary_value

CSV_COLUMNS = ("label", "workload", "driver", "device", "precision", "fp32_ms", "reduced_ms", "speedup",
               "peak_ratio", "fp32_isa", "reduced_isa", "fp32_final_loss", "reduced_final_loss", "loss_gap")


def _pair_key(case):
    a = case.attrs
    return (a.get("workload"), a.get("driver"), a.get("device_type"), a.get("denormals"), a.get("scaling"),
            a.get("ranks"), a.get("batch_per_rank"), a.get("threads"), a.get("seed"), a.get("data"),
            a.get("bucket_mb"), a.get("iterations")) + rank_key(case)


def _median_ms(case):
    if not case.ok or case.summary is None or "step_median_s" not in case.summary:
        return None
    return case.summary["step_median_s"] * 1e3


def _final_loss(case):
    if not case.ok or case.loss is None or len(case.loss) == 0:
        return None
    return float(case.loss[-1])


def precision_pairs(cases):
    """(fp32 case, reduced-precision case) pairs, in the order the fp32 cases appear."""
    fp32 = {}
    pairs = []
    for c in cases:
        if c.attrs.get("precision") == "fp32":
            fp32.setdefault(_pair_key(c), c)
    for c in cases:
        p = c.attrs.get("precision")
        if p != "fp32" and _pair_key(c) in fp32:
            pairs.append((fp32[_pair_key(c)], c))
    return pairs


def precision_rows(pairs):
    rows = []
    for base, low in pairs:
        t32, t16 = _median_ms(base), _median_ms(low)
        l32, l16 = _final_loss(base), _final_loss(low)
        p32, p16 = (summary_value(c.summary if c.ok else None, "peak_flops") for c in (base, low))
        rows.append({
            "label": describe(base, without=("precision",)),
            "workload": base.attrs.get("workload"), "driver": base.attrs.get("driver"),
            "device": base.attrs.get("device_type"), "precision": low.attrs.get("precision"),
            "fp32_ms": t32, "reduced_ms": t16,
            "reduced_status": low.status, "reduced_message": low.attrs.get("message", ""),
            "speedup": t32 / t16 if t32 and t16 else None,
            "peak_ratio": p16 / p32 if p32 and p16 else None,
            "fp32_isa": base.attrs.get("isa", ""), "reduced_isa": low.attrs.get("isa", ""),
            "fp32_final_loss": l32, "reduced_final_loss": l16,
            "loss_gap": abs(l16 - l32) / abs(l32) if l32 and l16 is not None else None,
            "fp32_loss": base.loss if base.ok else None, "reduced_loss": low.loss if low.ok else None,
        })
    return rows


def precision_table(rows):
    def reduced(r):
        return ms(r["reduced_ms"]) if r["reduced_status"] == "ok" else r["reduced_status"]

    columns = [Column("configuration", key_cell("label"), right=False, keep=True, words=True),
               Column("precision", key_cell("precision"), right=False),
               Column("fp32 ms", lambda r: ms(r["fp32_ms"])),
               Column("reduced ms", reduced),
               Column("speed-up", lambda r: number(r["speedup"], "{:.2f}")),
               Column("peak ratio", lambda r: number(r["peak_ratio"], "{:.2f}")),
               Column("isa (reduced)", lambda r: r["reduced_isa"] or "-", right=False),
               Column("final loss fp32", lambda r: number(r["fp32_final_loss"], "{:.5f}")),
               Column("final loss reduced", lambda r: number(r["reduced_final_loss"], "{:.5f}")),
               Column("loss gap", lambda r: number(r["loss_gap"], "{:.1e}"))]
    notes = ["pairs of cases identical but for the precision; speed-up = fp32 step median / reduced-precision "
             "step median; peak ratio = the reduced precision's measured peak / fp32's (the peaks of the two "
             "cases' share of peak): the most the reduced precision can speed up a step bound by its products on "
             "this hardware and library (below 1: they compute it more slowly than fp32); loss gap = "
             "|reduced - fp32| / fp32 of the last timed iteration's loss (same seed, same data)"]
    notes += [f"{r['label']} {r['precision']}: {r['reduced_status']}: {r['reduced_message']}"
              for r in rows if r["reduced_status"] != "ok"]
    return Table("precisions", columns, rows, CSV_COLUMNS, notes=notes)
