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
from dataclasses import dataclass, field


@dataclass
class Column:
    header: str
    cell: object               # row dict -> display string
    right: bool = True         # numbers right-aligned


@dataclass
class Table:
    title: str
    columns: list              # Column, for text and HTML
    rows: list                 # dicts, one per displayed row
    csv_columns: tuple         # keys of the CSV output
    csv_rows: list = None      # defaults to rows (a pivoted display can have other rows)
    notes: list = field(default_factory=list)

    def text(self):
        cells = [[c.cell(r) for c in self.columns] for r in self.rows]
        widths = [max([len(c.header)] + [len(line[i]) for line in cells])
                  for i, c in enumerate(self.columns)]

        def fmt(values):
            return "  ".join(v.rjust(w) if c.right else v.ljust(w)
                             for v, w, c in zip(values, widths, self.columns)).rstrip()

        lines = [self.title, fmt([c.header for c in self.columns]), fmt(["-" * w for w in widths])]
        lines += [fmt(line) for line in cells]
        if not self.rows:
            lines.append("(no rows)")
        lines += [f"note: {n}" for n in self.notes]
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

    def html(self):
        e = html.escape
        head = "".join(f'<th class="{"num" if c.right else "txt"}">{e(c.header)}</th>'
                       for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f'<td class="{"num" if c.right else "txt"}">{e(c.cell(r))}</td>'
                             for c in self.columns) + "</tr>\n"
            for r in self.rows)
        if not self.rows:
            body = f'<tr><td colspan="{len(self.columns)}">(no rows)</td></tr>'
        notes = "".join(f"<li>{e(n)}</li>" for n in self.notes)
        return (f'<table>\n<caption>{e(self.title)}</caption>\n<thead><tr>{head}</tr></thead>\n'
                f'<tbody>\n{body}</tbody>\n</table>\n'
                + (f'<ul class="notes">{notes}</ul>\n' if notes else ""))


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
        v = v.decode()
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
    """Milliseconds: two decimals from 1 ms up, four significant digits below."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.2f}" if abs(v) >= 1 else f"{v:.4g}"


def ms_ci(row, key, low, high):
    """ "median [low, high]" in ms, or "-"."""
    v = row.get(key)
    if v is None:
        return "-"
    lo, hi = row.get(low), row.get(high)
    return ms(v) if lo is None or hi is None else f"{ms(v)} [{ms(lo)}, {ms(hi)}]"


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
