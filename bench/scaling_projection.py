#!/usr/bin/python3
"""How well does dlscale's projection predict step times at rank counts it was not fitted on?

Runs one job of --ranks 1,2,3,4 with --phases several times, takes the projection stored with the
2-rank case (compute time measured at 2 ranks + the ring all-reduce fitted on the 2-rank
microbenchmark) and compares it with the measured median steps at 3 and 4 ranks. Run by hand on an
otherwise idle machine; it prints each run's ratios and the median error.

    bench/scaling_projection.py [--repeats 5] [--workload fcn5:features=1024,width=512] [--batch 32]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import h5py

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--repeats", type=int, default=5)
parser.add_argument("--workload", default="fcn5:features=1024,width=512")
parser.add_argument("--batch", default="32")
parser.add_argument("--dlscale", default=os.path.join(root, "build", "cpu", "dlscale"))
args = parser.parse_args()

env = dict(os.environ, OMPI_MCA_rmaps_base_oversubscribe="1")
if os.geteuid() == 0:
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
errors = {3: [], 4: []}
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "p.h5")
    for rep in range(args.repeats):
        subprocess.run(["mpiexec", "-n", "4", args.dlscale, "run", "-w", args.workload, "--batch", args.batch,
                        "--threads", "1", "--ranks", "1,2,3,4", "--phases", "--warmup", "3", "--iterations", "30",
                        "--out", out, "--overwrite"], check=True, env=env, capture_output=True)
        with h5py.File(out, "r") as f:
            measured = {int(f["cases"][n].attrs["ranks"]): f["cases"][n]["summary"].attrs["step_median_s"]
                        for n in f["cases"]}
            proj = f["cases/0001/projection"]
            projected = dict(zip(proj["ranks"][()].tolist(), proj["step_s"][()].tolist()))
        row = []
        for p in (3, 4):
            ratio = projected[p] / measured[p]
            errors[p].append(abs(ratio - 1))
            row.append(f"{p} ranks: projected {projected[p] * 1e3:.1f} ms, measured {measured[p] * 1e3:.1f} ms "
                       f"(ratio {ratio:.3f})")
        print(f"run {rep + 1}: " + "; ".join(row))
for p, e in errors.items():
    print(f"{p} ranks: median |error| {statistics.median(e) * 100:.1f}%, max {max(e) * 100:.1f}% over {len(e)} runs")
sys.exit(0)
