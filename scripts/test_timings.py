#!/usr/bin/env python3
"""The wall time of each stage of scripts/test.sh and of each test its ctest runs ran, as
scripts/test.sh --timings prints them at its end.

    scripts/test_timings.py DIR [--top N]

DIR holds what scripts/test.sh wrote while it ran: `stages.tsv` (one line per stage: name,
seconds, exit status, 1 for a stage that ran in the background beside the others, else 0) and
one CTest JUnit report per ctest run, `<stage>.xml`
(`ctest --output-junit`). Tests are listed slowest first, each with its stage; --top N keeps
the N slowest (all by default). Standard library only: it runs before anything is installed.
"""

import argparse
import os
import sys
import xml.etree.ElementTree as ET


def stages(directory):
    """[(stage, seconds, status, background)] in the order they ended."""
    path = os.path.join(directory, "stages.tsv")
    if not os.path.exists(path):
        return []
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            name, seconds, status, background = line.rstrip("\n").split("\t")
            rows.append((name, float(seconds), status, background == "1"))
    return rows


def tests(directory, stage_names):
    """[(seconds, stage, test, status)] of every JUnit report in `directory`."""
    rows = []
    for stage in stage_names:
        path = os.path.join(directory, f"{stage}.xml")
        if not os.path.exists(path):
            continue
        for case in ET.parse(path).getroot().iter("testcase"):
            status = "passed"
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
    # The background stages overlap the others: the run's wall time is the rest's sum.
    total = sum(seconds for _, seconds, _, background in ran if not background)
    print(f"{'stage':<28} {'wall s':>8}  status")
    for name, seconds, status, background in ran:
        label = name + (" (background)" if background else "")
        print(f"{label:<28} {seconds:8.0f}  {'ok' if status == '0' else 'exit ' + status}")
    print(f"{'total':<28} {total:8.0f}  ({total / 60:.1f} min; background stages overlap the others)")
    rows = tests(args.directory, [name for name, _, _, _ in ran])
    if rows:
        shown = rows[:args.top] if args.top > 0 else rows
        print()
        print(f"{'test':<40} {'stage':<26} {'wall s':>8}  status")
        for seconds, stage, name, status in shown:
            print(f"{name:<40} {stage:<26} {seconds:8.1f}  {status}")
        print(f"{len(rows)} tests, {sum(r[0] for r in rows):.0f} s of test time in all "
              "(ctest -j runs several at once)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
