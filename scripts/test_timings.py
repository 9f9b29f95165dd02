#!/usr/bin/env python3
"""The wall time of each stage of scripts/test.sh and of each test its ctest runs ran, as
scripts/test.sh --timings prints them at its end.

    scripts/test_timings.py DIR [--top N]

DIR holds what scripts/test.sh wrote while it ran: `stages.tsv` (one line per stage: name,
seconds, exit status) and one CTest JUnit report per ctest run, `<stage>.xml`
(`ctest --output-junit`). Tests are listed slowest first, each with its stage; --top N keeps
the N slowest (all by default). Standard library only: it runs before anything is installed.
"""

import argparse
import os
import sys
import xml.etree.ElementTree as ET


def stages(directory):
    """[(stage, seconds, status)] in the order they ran."""
    path = os.path.join(directory, "stages.tsv")
    if not os.path.exists(path):
        return []
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            name, seconds, status = line.rstrip("\n").split("\t")
            rows.append((name, float(seconds), status))
    return rows


def tests(directory, stage_names):
    """[(seconds, stage, test, status)] of every JUnit report in `directory`."""
    rows = []
    for stage in stage_names:
        path = os.path.join(directory, f"{stage}.xml")
        if not os.path.exists(path):
            continue
        for case in ET.parse(path).getroot().iter("testcase"):
            status = case.get("status") or "run"
            if case.find("failure") is not None:
                status = "failed"
            elif case.find("skipped") is not None:
                status = "skipped"
            rows.append((float(case.get("time") or 0), stage, case.get("name"), status))
    return sorted(rows, reverse=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory")
    parser.add_argument("--top", type=int, default=0, help="the N slowest tests only (default: all)")
    args = parser.parse_args(argv)
    ran = stages(args.directory)
    if not ran:
        print(f"test_timings: no stages recorded in {args.directory}", file=sys.stderr)
        return 2
    total = sum(seconds for _, seconds, _ in ran)
    print(f"{'stage':<24} {'wall s':>8}  status")
    for name, seconds, status in ran:
        print(f"{name:<24} {seconds:8.0f}  {'ok' if status == '0' else 'exit ' + status}")
    print(f"{'total':<24} {total:8.0f}  ({total / 60:.1f} min)")
    rows = tests(args.directory, [name for name, _, _ in ran])
    if rows:
        shown = rows[:args.top] if args.top > 0 else rows
        print()
        print(f"{'test':<40} {'stage':<20} {'wall s':>8}  status")
        for seconds, stage, name, status in shown:
            print(f"{name:<40} {stage:<20} {seconds:8.1f}  {status}")
        print(f"{len(rows)} tests, {sum(r[0] for r in rows):.0f} s of test time in all "
              "(ctest -j runs several at once)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
