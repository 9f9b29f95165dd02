"""Command line of dlscale-report.

  dlscale-report summary FILE... [--format text|csv]   one row per case
  dlscale-report check FILE...                          recorded vs recomputed stats

Exit codes: 0 success, 1 `check` found inconsistencies, 2 unusable input
(missing/foreign file, wrong schema, bad usage).
"""

import argparse
import sys

from .check import check_file
from .schema import ReportError
from .summary import format_csv, format_table, summary_rows

PROG = "dlscale-report"


def _parser():
    p = argparse.ArgumentParser(prog=PROG, description="Report on dlscale benchmark results files.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("summary", help="print a table of every case")
    s.add_argument("files", nargs="+", metavar="FILE", help="dlscale results file (.h5)")
    s.add_argument("--format", choices=("text", "csv"), default="text",
                   help="aligned text table (default) or CSV")

    c = sub.add_parser("check", help="compare recorded summary statistics with a recomputation")
    c.add_argument("files", nargs="+", metavar="FILE", help="dlscale results file (.h5)")
    return p


def _error(message):
    # Exactly one line, whatever h5py put into the exception text.
    print(f"{PROG}: error: {' '.join(str(message).split())}", file=sys.stderr)
    return 2


def main(argv=None):
    args = _parser().parse_args(argv)   # usage errors exit 2 via argparse
    try:
        if args.command == "summary":
            rows = summary_rows(args.files)
            text = format_csv(rows) if args.format == "csv" else format_table(rows, len(args.files) > 1)
            sys.stdout.write(text)
            return 0
        problems = []
        for path in args.files:
            problems += check_file(path)
        for line in problems:
            print(line)
        if not problems:
            print(f"{len(args.files)} file(s) consistent")
        return 1 if problems else 0
    except ReportError as e:
        return _error(e)


if __name__ == "__main__":
    sys.exit(main())
