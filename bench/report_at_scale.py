#!/usr/bin/env python3
"""The report tools on a results file of thousands of ranks: writes one with
dlscale_synthetic_results (dlscale's own writer; tests/scale/synthetic_results.cpp: RANKS ranks,
8 to a host, one --phases case of ITERATIONS steps and 4 buckets), then runs `dlscale-report
summary`, `check`, `report`, `trace` and `dlscale-project` on it (at the file's ranks, on the
cpu-2socket-100Gbps-nic preset grown to hold them), one at a time, and prints each one's wall time
and peak memory (the process and its children, GNU time's maximum resident set).

  /usr/bin/python3 bench/report_at_scale.py [--ranks 16384] [--iterations 100] [--build build/current]

No figure here is asserted by a test: docs/at-scale.md quotes them with this command.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)


def timed(cmd):
    """(wall seconds, peak RSS in MB, exit status) of `cmd`, under GNU time."""
    start = time.monotonic()
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True)
    wall = time.monotonic() - start
    rss_kb = int(proc.stderr.strip().splitlines()[-1])
    if proc.returncode != 0:
        print(f"report_at_scale: {' '.join(cmd)} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
    return wall, rss_kb / 1024, proc.returncode


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=16384)
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--build", default=os.path.join(SOURCE, "build", "current"))
    args = p.parse_args()
    report = [sys.executable, os.path.join(SOURCE, "results", "dlscale-report")]
    with tempfile.TemporaryDirectory(prefix="dlscale_scale_") as d:
        path = os.path.join(d, "many.h5")
        steps = [("write", [os.path.join(args.build, "tests", "scale", "dlscale_synthetic_results"), path,
                            str(args.ranks), str(args.iterations)]),
                 ("summary", [*report, "summary", path]),
                 ("check", [*report, "check", path]),
                 ("report", [*report, "report", path, "-o", os.path.join(d, "html")]),
                 ("trace", [*report, "trace", path, "-o", os.path.join(d, "trace")])]
        project = os.path.join(args.build, "dlscale-project")
        if os.path.exists(project):
            # The preset's cluster, with nodes enough for the case's ranks (two to a node).
            with open(os.path.join(SOURCE, "project", "platforms", "cpu-2socket-100Gbps-nic.toml")) as f:
                platform = re.sub(r"(?m)^nodes = \d+$", f"nodes = {max(4096, -(-args.ranks // 2))}", f.read())
            platform_path = os.path.join(d, "platform.toml")
            with open(platform_path, "w") as f:
                f.write(platform)
            steps.append(("dlscale-project", [project, path, "--case", "0000", "--platform", platform_path,
                                              "--ranks", str(args.ranks)]))
        print(f"{args.ranks} ranks, {args.iterations} timed steps, 8 ranks a host")
        for name, cmd in steps:
            wall, rss, status = timed(cmd)
            size = f", file {os.path.getsize(path) / 1e6:.0f} MB" if name == "write" else ""
            print(f"  {name:<16} {wall:7.1f} s  {rss:7.0f} MB{'' if status == 0 else f'  exit {status}'}{size}")


if __name__ == "__main__":
    main()
