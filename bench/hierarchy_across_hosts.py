#!/usr/bin/env python3
"""The host-level all-reduce against one flat ring, on the cluster test bed: H hosts x R ranks.

On the bed (tests/cluster/testbed.py; root): every host's link limited to RATE by tbf at both
ends (docs/cluster-testing.md). For each rate, in alternating rounds, one dlscale job runs the same
case with `--allreduce-hierarchy flat` and `host` (the order swapped every round), libtorch, one
thread per rank, 25 MB buckets during backward:

  sudo /usr/bin/python3 bench/hierarchy_across_hosts.py [--hosts 2] [--ranks-per-host 2]
      [--rates 200mbit,1gbit] [--workload resnet50:8] [--rounds 2] [--iterations 5] [--warmup 2]
      [--bucket-mb 25] [--dlscale build/current/dlscale]

Prints per rate the median step (slowest rank, per iteration: the summary's step_median_s) of
each, their ratio per round and the median ratio. No figure here is asserted by a test (timings
depend on the machine and its load): the note of the change that measured them quotes them with
this command. All ranks of all hosts share the machine's cores, so the compute is as crowded as
the hosts are many.
"""

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE, "tests", "cluster"))
import testbed  # noqa: E402


def steps(bed, args, workdir, order):
    """{hierarchy: step_median_s} of one job running the case with each hierarchy of `order`."""
    import h5py

    out = os.path.join(workdir, "hierarchy.h5")
    workload, batch = args.workload.split(":")
    r = bed.run(bed.hosts[0], bed.mpirun_args(args.ranks_per_host) + [
        args.dlscale, "run", "-d", "libtorch", "-w", workload, "--batch", batch, "--threads", "1",
        "--bucket-mb", str(args.bucket_mb), "--allreduce-hierarchy", order, "--warmup", str(args.warmup),
        "--iterations", str(args.iterations), "--peak", "skip", "--progress", "none", "--out", out, "--overwrite"],
        timeout=7200, cwd=workdir)
    if r.returncode != 0:
        raise RuntimeError(r.stdout + r.stderr)
    with h5py.File(out, "r") as f:
        return {str(c.attrs["allreduce_hierarchy"]): float(c["summary"].attrs["step_median_s"])
                for c in (f["cases"][n] for n in f["cases"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--ranks-per-host", type=int, default=2)
    ap.add_argument("--rates", default="200mbit,1gbit", help="tc rates of every host's link; none: unshaped")
    ap.add_argument("--workload", default="resnet50:8", help="WORKLOAD:BATCH per rank")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--bucket-mb", type=float, default=25)
    ap.add_argument("--dlscale", default=os.path.join(SOURCE, "build", "current", "dlscale"))
    args = ap.parse_args()
    reason = testbed.why_unavailable()
    if reason:
        sys.exit(f"hierarchy_across_hosts: {reason}")
    args.dlscale = os.path.abspath(args.dlscale)
    print(f"CPU: {testbed.machine_cpu()}; {args.hosts} hosts x {args.ranks_per_host} ranks, {args.workload}, "
          f"{args.bucket_mb:g} MB buckets", flush=True)
    bed = testbed.Cluster(hosts=args.hosts)
    try:
        workdir = os.path.join(bed.dir, "work")
        os.makedirs(workdir)
        for rate in args.rates.split(","):
            bed.shape_every_host(rate)
            rounds = [steps(bed, args, workdir, "flat,host" if k % 2 == 0 else "host,flat")
                      for k in range(args.rounds)]
            flat = statistics.median(r["flat"] for r in rounds)
            host = statistics.median(r["host"] for r in rounds)
            ratios = ", ".join(f"{r['host'] / r['flat']:.2f}" for r in rounds)
            print(f"{rate}: flat {flat:.3f} s, host {host:.3f} s, host/flat {host / flat:.2f} "
                  f"(per round {ratios})", flush=True)
    finally:
        bed.close()


if __name__ == "__main__":
    main()
