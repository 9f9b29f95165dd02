#!/usr/bin/env python3
"""Many 2-node Slurm starts of dlscale in a row, to catch a crash as a job starts (docs/at-scale.md).

    /usr/bin/python3 bench/slurm_starts.py [--jobs 200] [--rate 20mbit] [--driver reference] [--out DIR]

As root, on a machine with slurm-wlm and munge: a 2-host test bed (tests/cluster/testbed.py) with
its Slurm, the second host's link shaped as tests/cluster/test_network_faults.py shapes it, then
JOBS jobs of slurm/dlscale-cpu.sbatch on 2 nodes (one rank each, `srun --mpi=pmix`, a case of a
few steps), submitted one after the other, each waited for. Run it beside a load (another job,
scripts/fuzz.sh) to start the jobs under load. Core files, if the kernel writes them, land in each
job's folder (ulimit -c unlimited). For every job, one line: its exit code, its time, and any
line of its output that tells of a crash (dlscale's crash line names the rank, the signal and the
faulting address; Open MPI's and Slurm's name the signal); then the count of jobs that ended
otherwise than with exit 0. Exit status 1 when any did.
"""

import argparse
import os
import re
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE, "tests", "cluster"))
import testbed  # noqa: E402

CRASH = re.compile(r"signal|SIGSEGV|SIGBUS|SIGABRT|Segmentation|core dumped|crash|terminated|error:", re.I)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--rate", default="20mbit", help="the second host's link (tc tbf rate); 'none' leaves it")
    p.add_argument("--driver", default="reference")
    p.add_argument("--out", default="/tmp/dlscale-slurm-starts")
    p.add_argument("--dlscale", default=os.path.join(SOURCE, "build", "current", "dlscale"))
    a = p.parse_args()
    reason = testbed.why_unavailable() or (", ".join(testbed.slurm_setup.missing_commands()) or None)
    if reason:
        print(f"slurm_starts: cannot make the test bed here: {reason}", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    os.chmod(a.out, 0o755)
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    sbatch = os.path.join(SOURCE, "slurm", "dlscale-cpu.sbatch")
    failed = 0
    with testbed.Cluster(hosts=2) as bed:
        if a.rate != "none":
            bed.shape(bed.hosts[1], a.rate)
        with bed.slurm() as slurm:
            env = {"DLSCALE_BIN": os.path.abspath(a.dlscale), "DLSCALE_THREADS": "1"}
            for i in range(a.jobs):
                d = os.path.join(a.out, f"job{i:03d}")
                os.makedirs(d, exist_ok=True)
                os.chmod(d, 0o777)
                start = time.monotonic()
                r = slurm.run(["bash", "-c", "ulimit -c unlimited; exec \"$@\"", "sbatch",
                               "sbatch", "--wait", "--nodes=2", "--ntasks-per-node=1", "--no-requeue",
                               f"--output={d}/slurm-%j.out", sbatch, "-w", "mnist_fnn:width=16", "-d", a.driver,
                               "--batch", "8", "--warmup", "1", "--iterations", "2", "--peak", "skip",
                               "--out", f"{d}/run.h5"], env=env, cwd=d, timeout=600)
                took = time.monotonic() - start
                out = "".join(open(os.path.join(d, f), errors="replace").read()
                              for f in sorted(os.listdir(d)) if f.startswith("slurm-"))
                suspicious = [line for line in out.splitlines() if CRASH.search(line)]
                cores = [f for f in os.listdir(d) if f.startswith("core")]
                ok = r.returncode == 0 and not cores and os.path.exists(os.path.join(d, "run.h5"))
                failed += not ok
                print(f"job {i:3d}: exit {r.returncode}, {took:5.1f} s{'' if ok else ', FAILED'}"
                      + "".join(f"\n    {line}" for line in suspicious[:5] + cores + ([r.stderr.strip()] if not ok else [])),
                      flush=True)
    print(f"slurm_starts: {a.jobs - failed} of {a.jobs} 2-node starts ended with exit 0 and a results file; "
          f"{failed} did not")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
