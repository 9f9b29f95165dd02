"""Per-rank view of a case: which rank is slow, and when.

The step time is the slowest rank's time, so one slow rank (a busy core, a
remote NUMA node, a shared GPU) slows every step. Per rank the table shows
the median, mean and maximum of its own iteration times; the straggler is the
rank with the largest median (ties: the lowest rank), as in straggler_ratio.
"""

from .stats import mean, median, rank_medians, straggler_ratio
from .study import describe
from .tables import Column, Table, key_cell, ms, ratio

CSV_COLUMNS = ("file", "case", "label", "rank", "world_rank", "host", "median_ms", "mean_ms",
               "max_ms", "straggler", "straggler_ratio")

NOTE = ("per rank: median, mean and maximum of that rank's own iteration times; straggler "
        "(*) = the rank with the largest median; straggler ratio = that median / the median "
        "of the per-rank medians")


def parse_participants(text, ranks):
    """World ranks of a case's ranks from "0-3" or "0,2,5-7"; 0..ranks-1 when absent."""
    if not text:
        return list(range(ranks))
    out = []
    try:
        for part in str(text).split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = part.split("-", 1)
                out += range(int(lo), int(hi) + 1)
            elif part:
                out.append(int(part))
    except ValueError:
        return list(range(ranks))
    return out if len(out) == ranks else list(range(ranks))


def straggler_rank(iter_time_s):
    per_rank = rank_medians(iter_time_s)
    return per_rank.index(max(per_rank))


def hosts_of(ranks_table):
    """world rank -> host name, from /system/ranks (bytes or str fields)."""
    if ranks_table is None or "rank" not in (ranks_table.dtype.names or ()):
        return {}
    out = {}
    for rec in ranks_table:
        host = rec["host"] if "host" in ranks_table.dtype.names else ""
        out[int(rec["rank"])] = host.decode("utf-8", errors="replace") if isinstance(host, bytes) else str(host)
    return out


def rank_rows(cases, hosts_for):
    """One row per (ok case, rank); hosts_for(case) -> {world rank: host} of the run that wrote it."""
    rows = []
    for case in cases:
        t = case.iter_time_s
        if not case.ok or t is None or t.size == 0:
            continue
        world = parse_participants(case.attrs.get("participants"), t.shape[0])
        hosts = hosts_for(case)
        slow = straggler_rank(t)
        ratio_ = straggler_ratio(t)
        for r, samples in enumerate(t.tolist()):
            rows.append({"file": case.file, "case": case.name, "label": describe(case),
                         "rank": r, "world_rank": world[r], "host": hosts.get(world[r], ""),
                         "median_ms": median(samples) * 1e3,
                         "mean_ms": mean(samples) * 1e3,
                         "max_ms": max(samples) * 1e3, "straggler": int(r == slow),
                         "straggler_ratio": ratio_})
    return rows


def rank_table(rows, show_file=False):
    columns = ([Column("file", key_cell("file"), right=False, path=True)] if show_file else []) + [
        Column("case", key_cell("case"), right=False, keep=True),
        Column("configuration", key_cell("label"), right=False, keep=True, words=True),
        Column("rank", lambda r: f"{r['rank']}{' *' if r['straggler'] else ''}"),
        Column("host", key_cell("host"), right=False),
        Column("median ms", lambda r: ms(r["median_ms"])),
        Column("mean ms", lambda r: ms(r["mean_ms"])),
        Column("max ms", lambda r: ms(r["max_ms"])),
        Column("straggler ratio", lambda r: ratio(r["straggler_ratio"]) if r["straggler"] else ""),
    ]
    return Table(title="ranks", columns=columns, rows=rows, csv_columns=CSV_COLUMNS, notes=[NOTE])
