#!/usr/bin/env python3
"""Steps to a target accuracy against the global batch, measured and as the gradient noise scale
predicts them (docs/metrics.md, "The gradient noise scale" and "Time to target at scale").

One `dlscale run --mode accuracy` per global batch B = b x P x K, from B0 = 2b (one rank, two
micro-batches, so that the baseline too has a noise scale) to 16 x B0 (P up to --max-ranks, the
rest as micro-batches), each with --repeats repeats and an evaluation every --eval-every samples.
For each B it prints the measured steps to target (the mean over the repeats that reached it),
the prediction of McCandlish et al.'s model from the baseline's noise scale,
S(B) = S(B0) (1 + B_simple/B) / (1 + B_simple/B0), and the prediction's error, with the time to
target and its speedup over B0 split into the hardware's and the statistical factor.

  /usr/bin/python3 bench/time_to_accuracy.py --data mnist:data/mnist -w mnist_fnn --micro-batch 16 --repeats 3
  /usr/bin/python3 bench/time_to_accuracy.py --data cifar10:DIR -w cifar10_cnn ...   # where the data are

Needs the MNIST digits (scripts/fetch-mnist.sh) or CIFAR-10's binaries. Prints a table and, with
--json, one object per global batch.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
DLSCALE = os.environ.get("DLSCALE_BIN", os.path.join(HERE, "..", "build", "current", "dlscale"))


def plan(max_ranks, factors=(1, 2, 4, 8, 16)):
    """(P, K) for each multiple of B0 = 2 micro-batches: as many ranks as allowed, then micro-batches."""
    out = []
    for f in factors:
        units = 2 * f
        p = max(d for d in range(1, max_ranks + 1) if units % d == 0)
        out.append((p, units // p))
    return out


def run_case(args, ranks, accumulate, out):
    command = ["mpiexec", "-n", str(ranks), "--bind-to", "none", "--oversubscribe", DLSCALE, "run",
               "--mode", "accuracy", "-w", args.workload, "-d", args.driver, "--data", args.data,
               "--batch", str(args.micro_batch), "--accumulate", str(accumulate), "--ranks", str(ranks),
               "--threads", str(args.threads), "--optimizer", args.optimizer, "--lr", str(args.lr),
               "--lr-scaling", args.lr_scaling, "--lr-base-batch", str(2 * args.micro_batch),
               "--epochs", str(args.epochs), "--validation", str(args.validation),
               "--target-accuracy", str(args.target), "--repeats", str(args.repeats),
               "--eval-every", str(args.eval_every), "--peak", "skip", "--progress", "none", "--out", out]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"time_to_accuracy: {' '.join(command)} failed:\n{proc.stdout}{proc.stderr}")
    with h5py.File(out, "r") as f:
        case = f["cases/0000"]
        reached = [dict(r.attrs) for r in case["repeats"].values() if r.attrs["target_reached"]]
        noise = dict(case["noise_scale"].attrs) if "noise_scale" in case else {}
        return {"ranks": ranks, "accumulate": accumulate, "global_batch": int(case.attrs["global_batch"]),
                "repeats": len(case["repeats"]), "reached": len(reached),
                "steps": statistics.mean(float(r["steps_to_target"]) for r in reached) if reached else None,
                "time_s": statistics.mean(float(r["time_to_target_s"]) for r in reached) if reached else None,
                "noise_scale": float(noise.get("simple", float("nan"))),
                "noise_ci95": [float(noise.get("ci95_low", float("nan"))), float(noise.get("ci95_high", float("nan")))]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="mnist:" + os.path.join(HERE, "..", "data", "mnist"))
    p.add_argument("-w", "--workload", default="mnist_fnn")
    p.add_argument("-d", "--driver", default="libtorch")
    p.add_argument("--micro-batch", type=int, default=16, help="samples per micro-batch and rank (b)")
    p.add_argument("--max-ranks", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--optimizer", default="sgd")
    p.add_argument("--lr", type=float, default=0.05, help="the rate at B0")
    p.add_argument("--lr-scaling", default="sqrt")
    p.add_argument("--target", type=float, default=0.9)
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--validation", type=float, default=0.2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--eval-every", type=int, default=512)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (ranks, accumulate) in enumerate(plan(args.max_ranks)):
            rows.append(run_case(args, ranks, accumulate, os.path.join(tmp, f"b{i}.h5")))
    base = rows[0]
    b0, s0, t0, noise = base["global_batch"], base["steps"], base["time_s"], base["noise_scale"]
    print(f"# {args.workload} on {args.data}, {args.driver}, target {args.target}, {args.repeats} repeats, "
          f"lr {args.lr} at B0={b0} ({args.lr_scaling}); noise scale at B0: {noise:.4g} "
          f"[{base['noise_ci95'][0]:.4g}, {base['noise_ci95'][1]:.4g}]")
    print(f"{'B':>6} {'P':>3} {'K':>3} {'reached':>8} {'steps':>8} {'predicted':>9} {'error':>7} "
          f"{'TTT s':>8} {'speedup':>8} {'hardware':>8} {'statistical':>11} {'B_simple':>9}")
    for r in rows:
        b = r["global_batch"]
        r["predicted_steps"] = s0 * (1 + noise / b) / (1 + noise / b0) if s0 else None
        r["error"] = r["predicted_steps"] / r["steps"] - 1 if r["steps"] and r["predicted_steps"] else None
        if r["time_s"] and t0:
            r["speedup"] = t0 / r["time_s"]
            r["statistical"] = s0 / r["steps"]
            r["hardware"] = r["speedup"] / r["statistical"]
        nan = lambda v: float("nan") if v is None else v  # noqa: E731
        line = (f"{b:>6} {r['ranks']:>3} {r['accumulate']:>3} {r['reached']:>4}/{r['repeats']:<3} "
                f"{nan(r['steps']):>8.1f} {nan(r['predicted_steps']):>9.1f} "
                f"{nan(r['error']) * 100:>6.1f}% {nan(r['time_s']):>8.3f} "
                f"{r.get('speedup', float('nan')):>8.3f} {r.get('hardware', float('nan')):>8.3f} "
                f"{r.get('statistical', float('nan')):>11.3f} {r['noise_scale']:>9.4g}")
        print(line)
        if args.json:
            print(json.dumps(r))


if __name__ == "__main__":
    main()
