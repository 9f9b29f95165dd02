#!/usr/bin/env python3
"""What recording a timeline costs a step: the same case with and without --phases.

--phases records the timeline (docs/timelines.md): per step a host clock read and the phase
marks, per bucket two clock reads, and a clock-offset ping-pong before and after the timed steps,
outside the timed region. For each workload, in alternating rounds (with --phases first in odd
rounds), one `mpirun -np RANKS dlscale run` job each way; per round the ratio of their median
steps (dlscale's step_median_s: the slowest rank, per iteration), and the median of the ratios.

  /usr/bin/python3 bench/timeline_cost.py [--workloads cifar10_cnn:32,resnet50:8] [--ranks 2]
      [--bucket-mb 1] [--rounds 6] [--iterations 20] [--dlscale build/current/dlscale]

No figure here is asserted by a test (timings depend on the machine and its load): docs/timelines.md
quotes them with this command.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)


def step_median(dlscale, ranks, workload, batch, bucket_mb, iterations, phases, path):
    cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks), dlscale, "run", "-w", workload,
           "--batch", str(batch), "--threads", "1", "--bucket-mb", str(bucket_mb), "--warmup", "3",
           "--iterations", str(iterations), "--peak", "skip", "--out", path, "--overwrite"]
    if phases:
        cmd.append("--phases")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"timeline_cost: {' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    with h5py.File(path, "r") as f:
        case = f["cases/0000"]
        if phases and "timeline" not in case:
            sys.exit("timeline_cost: the --phases case recorded no timeline")
        return float(case["summary"].attrs["step_median_s"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workloads", default="cifar10_cnn:32,resnet50:8", help="WORKLOAD:BATCH,...")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--bucket-mb", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--dlscale", default=os.path.join(SOURCE, "build", "current", "dlscale"))
    a = p.parse_args()
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"CPU: {cpu}; {a.ranks} ranks, 1 thread each, --bucket-mb {a.bucket_mb}")
    print(f"{'workload':<16} {'without s':>10} {'with s':>10} {'with/without':>13}  per round")
    with tempfile.TemporaryDirectory(prefix="timeline_cost_") as tmp:
        for spec in a.workloads.split(","):
            workload, batch = spec.rsplit(":", 1)
            without, with_, ratios = [], [], []
            for r in range(a.rounds):
                got = {}
                for phases in ((True, False) if r % 2 else (False, True)):
                    got[phases] = step_median(a.dlscale, a.ranks, workload, int(batch), a.bucket_mb, a.iterations,
                                              phases, os.path.join(tmp, f"{phases}.h5"))
                without.append(got[False])
                with_.append(got[True])
                ratios.append(got[True] / got[False])
            print(f"{workload + ':' + batch:<16} {statistics.median(without):>10.4f} {statistics.median(with_):>10.4f} "
                  f"{statistics.median(ratios):>13.3f}  {', '.join(f'{x:.3f}' for x in sorted(ratios))}", flush=True)


if __name__ == "__main__":
    main()
