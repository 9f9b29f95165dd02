"""One table, four renderings: aligned text, CSV, JSON, HTML.

Every analysis command builds a Table. Text and HTML show rounded, combined
cells ("12.34 [12.10, 12.90]") and footer notes that state the method; CSV
has one machine-readable column per number at full precision (repr of the
float, so a reader gets back exactly the value that was computed) and no
notes, so that csv.DictReader reads it as is. JSON has the CSV's rows as an
array of objects (keys in CSV column order): numbers as JSON numbers, again
exact, and null where CSV has an empty field or nan.
"""

import csv
import html
import io
import json
import math
import numbers
import os
import textwrap
from dataclasses import dataclass, field


# Terminal output fits this many columns unless --wide asks for every column on one line each.
WIDTH = 120
# A text cell longer than this (a failure message, say) shows its start and a footnote number;
# the footnote under the table has it whole.
MAX_TEXT_CELL = 40


@dataclass
class Column:
    header: str
    cell: object               # row dict -> display string
    right: bool = True         # numbers right-aligned
    detail: int = 0            # > 0: left out of a text table wider than WIDTH, the highest first
    keep: bool = False         # shown even when every row has the same value (a table's key)
    words: bool = False        # a label of words: those in every row's label are said once
    path: bool = False         # a file path: the folder every row's path is in is said once


@dataclass
class Table:
    title: str
    columns: list              # Column, for text and HTML
    rows: list                 # dicts, one per displayed row
    csv_columns: tuple         # keys of the CSV output
    csv_rows: list = None      # defaults to rows (a pivoted display can have other rows)
    notes: list = field(default_factory=list)

    def text(self, width=WIDTH):
        """The aligned table. Within `width` columns (None: every column, lines as long as they
        come): a column with one value in every row becomes a line "every row: ..." under the
        title, long text cells end in a footnote, detail columns are left out from the right
        until a row fits (named in a note), and notes wrap."""
        columns = list(self.columns)
        cells = [[c.cell(r) for c in columns] for r in self.rows]
        lines = [self.title]
        footnotes, left_out = [], []
        if width:
            columns, cells, said = _said_once(columns, cells)
            if said:
                lines += wrap("every row: " + ", ".join(said), width, "  ")
            cells = _footnoted(columns, cells, footnotes)
            while _row_width(columns, cells) > width and any(c.detail for c in columns):
                # The highest detail first; of equal ones, the rightmost.
                i = max((c.detail, i) for i, c in enumerate(columns) if c.detail)[1]
                left_out.append(columns.pop(i).header)
                for line in cells:
                    del line[i]
            if _row_width(columns, cells) > width:
                # The last resort: long labels too end in a footnote (a table of one row says
                # nothing once, so its label stays whole until here).
                cells = _footnoted(columns, cells, footnotes, labels=True)
        widths = [max([len(c.header)] + [len(line[i]) for line in cells]) for i, c in enumerate(columns)]

        def fmt(values):
            return "  ".join(v.rjust(w) if c.right else v.ljust(w)
                             for v, w, c in zip(values, widths, columns)).rstrip()

        lines += [fmt([c.header for c in columns]), fmt(["-" * w for w in widths])]
        lines += [fmt(line) for line in cells]
        if not self.rows:
            lines.append("(no rows)")
        for k, text in enumerate(footnotes, 1):
            lines += wrap(f"[{k}] {text}", width, "    ")
        notes = list(self.notes)
        if left_out:
            notes.append(f"left out to fit {width} columns: {', '.join(reversed(left_out))} "
                         "(--wide shows every column; --format csv has every value)")
        for n in notes:
            lines += wrap(f"note: {n}", width, "  ")
        return "\n".join(lines) + "\n"

    def csv(self):
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(self.csv_columns)
        for r in self.rows if self.csv_rows is None else self.csv_rows:
            writer.writerow([csv_value(r.get(k)) for k in self.csv_columns])
        return out.getvalue()

    def json_rows(self):
        """The CSV's rows as dicts of JSON values (see json_value)."""
        return [{k: json_value(r.get(k)) for k in self.csv_columns}
                for r in (self.rows if self.csv_rows is None else self.csv_rows)]

    def html(self, detail=True, notes=True):
        """The table as HTML; without `detail`, its detail columns left out; without `notes`,
        its notes."""
        e = html.escape
        columns = [c for c in self.columns if detail or not c.detail]
        head = "".join(f'<th class="{"num" if c.right else "txt"}">{e(c.header)}</th>'
                       for c in columns)
        body = "".join(
            "<tr>" + "".join(f'<td class="{"num" if c.right else "txt"}">{e(c.cell(r))}</td>'
                             for c in columns) + "</tr>\n"
            for r in self.rows)
        if not self.rows:
            body = f'<tr><td colspan="{len(columns)}">(no rows)</td></tr>'
        notes = "".join(f"<li>{e(n)}</li>" for n in self.notes) if notes else ""
        return (f'<table>\n<caption>{e(self.title)}</caption>\n<thead><tr>{head}</tr></thead>\n'
                f'<tbody>\n{body}</tbody>\n</table>\n'
                + (f'<ul class="notes">{notes}</ul>\n' if notes else ""))


def wrap(text, width, indent=""):
    """`text` as lines of at most `width` characters (words longer than that stay whole), the
    continuation lines indented; one line as it is where `width` is None (--wide)."""
    if not width:
        return [text]
    return textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False) or [""]


def _footnoted(columns, cells, footnotes, labels=False):
    """cells with every text cell longer than MAX_TEXT_CELL cut short and numbered (a key's
    cells stay whole, unless `labels` and it is a label of words); the whole texts appended to
    footnotes, one per distinct text."""
    out = []
    for line in cells:
        row = []
        for c, v in zip(columns, line):
            if not c.right and (not c.keep or labels and c.words) and len(v) > MAX_TEXT_CELL:
                if v not in footnotes:
                    footnotes.append(v)
                mark = f" [{footnotes.index(v) + 1}]"
                v = v[:MAX_TEXT_CELL - len(mark) - 1].rstrip() + "…" + mark
            row.append(v)
        out.append(row)
    return out


def _said_once(columns, cells):
    """(columns, cells, said): what every row shows alike taken out of the table and said once
    ("header value"): a column with one value in every row (unless it is a key), and the words
    that every label of a words column has."""
    if len(cells) < 2:
        return columns, cells, []
    same = [i for i, c in enumerate(columns) if not c.keep and len({line[i] for line in cells}) == 1]
    # Nothing to say of a column that every row leaves empty or unavailable.
    said = [f"{columns[i].header} {cells[0][i]}" for i in same if cells[0][i] not in ("", "-")]
    columns = [c for i, c in enumerate(columns) if i not in same]
    cells = [[v for i, v in enumerate(line) if i not in same] for line in cells]
    for i, c in enumerate(columns):
        common = common_words([line[i] for line in cells]) if c.words else []
        if common:
            said.append(f"{c.header} {' '.join(common)}")
            for line in cells:
                line[i] = " ".join(w for w in line[i].split() if w not in common)
        folder = _common_folder([line[i] for line in cells]) if c.path else ""
        if folder:
            folder = folder.rstrip("/") + "/"
            said.append(f"{c.header} in {folder}")
            for line in cells:
                line[i] = line[i][len(folder):]
    return columns, cells, said


def _common_folder(paths):
    """The folder all `paths` are in ("" where they have none in common)."""
    try:
        folder = os.path.commonpath(paths)
    except ValueError:          # absolute and relative paths mixed
        return ""
    return folder if folder and all(p.startswith(folder.rstrip("/") + "/") for p in paths) else ""


def common_words(labels):
    """The words of the first label that every label has, in its order; none where taking them
    out would leave some label empty."""
    sets = [set(label.split()) for label in labels]
    common = [w for w in labels[0].split() if all(w in s for s in sets)]
    return common if all(s - set(common) for s in sets) else []


def _row_width(columns, cells):
    return sum(max([len(c.header)] + [len(line[i]) for line in cells]) for i, c in enumerate(columns)) \
        + 2 * (len(columns) - 1)


def summary_value(summary, key, scale=1.0):
    """A case's recorded summary attribute times `scale`, or None where the summary, the attribute
    or its value (NaN: unavailable, docs/schema.md) is missing."""
    v = None if summary is None else summary.get(key)
    return None if v is None or math.isnan(float(v)) else float(v) * scale


def csv_value(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    return v


def json_value(v):
    """A row value for JSON: numpy scalars become Python numbers, NaN/inf null (strict JSON
    has no NaN), anything else that is not a JSON type its text, as csv.writer writes it."""
    if isinstance(v, bytes):
        v = v.decode("utf-8", errors="replace")
    if v is None or isinstance(v, (str, bool)):
        return v
    if getattr(v, "dtype", None) is not None and v.dtype.kind == "b":    # numpy.bool_
        return bool(v)
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        v = float(v)
        return v if math.isfinite(v) else None
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    return str(v)


def json_text(rows):
    """A JSON array of row objects, one row per line; float repr keeps every digit."""
    if not rows:
        return "[]\n"
    return "[\n" + ",\n".join(json.dumps(r, allow_nan=False) for r in rows) + "\n]\n"


# ---------------------------------------------------------------- cell formats

def ms(v):
    """Milliseconds to about four significant digits ("0.1234", "12.34", "123.4", "1234"); the
    CSV and JSON have every digit."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if abs(v) >= 1000:
        return f"{v:.0f}"
    if abs(v) >= 100:
        return f"{v:.1f}"
    return f"{v:.2f}" if abs(v) >= 1 else f"{v:.4g}"


# Step times' intervals are 95% ones where a case has enough iterations; with fewer, the widest
# order-statistic interval covers less, and the cell says how much.
COVERAGE_NOTE = ("(N%) after an interval: its true coverage, below 95% because the case has too few "
                 "timed iterations for a 95% interval of the median (docs/metrics.md)")


def few_samples(rows, key="ci_coverage"):
    """Whether some row's interval covers less than 95% (COVERAGE_NOTE applies)."""
    return any(r.get(key) is not None and r[key] < 0.95 for r in rows)


def ms_ci(row, key, low, high, coverage=None):
    """ "median [low, high]" in ms, "median [low, high] (88%)" where the interval covers less than
    95% (the row's `coverage`), or "-"."""
    v = row.get(key)
    if v is None:
        return "-"
    lo, hi = row.get(low), row.get(high)
    if lo is None or hi is None:
        return ms(v)
    cov = row.get(coverage) if coverage else None
    return f"{ms(v)} [{ms(lo)}, {ms(hi)}]" + (f" ({100 * cov:.0f}%)" if cov is not None and cov < 0.95 else "")


def percent(share, signed=False):
    """A share as a whole percentage, "12%" ("+12%" signed); rounded first, so that -0.3% reads
    "0%", never "-0%"."""
    if share is None:
        return "-"
    value = round(100 * share)
    return f"{value:+d}%" if signed and value else f"{value:d}%"


def ratio(v, digits=3):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.{digits}f}"


def ratio_ci(row, key, low, high, digits=3):
    v = row.get(key)
    if v is None:
        return "-"
    lo, hi = row.get(low), row.get(high)
    if lo is None or hi is None:
        return ratio(v, digits)
    return f"{ratio(v, digits)} [{ratio(lo, digits)}, {ratio(hi, digits)}]"


def number(v, fmt="{:.1f}"):
    return "-" if v is None else fmt.format(v)


def text(v):
    return "-" if v is None else str(v)


def key_cell(key):
    """Column cell function that shows row[key] as text."""
    return lambda r: text(r.get(key))
