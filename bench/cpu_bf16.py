#!/usr/bin/env python3
"""CPU bf16 against fp32 (issue 22): dlscale's oneDNN and LibTorch drivers in both precisions, side
by side with PyTorch eager in fp32 and under CPU autocast (bench/pytorch_eager.py), on the same
networks, batches and threads.

  /usr/bin/python3 bench/cpu_bf16.py --dlscale build/current/dlscale --threads 2

Runs every dlscale case in one job (`dlscale run`, one rank), then PyTorch eager in a second
process, and prints a Markdown table: median step seconds per (workload, batch) and column, with
the two ratios the issue sets goals for (oneDNN fp32 / oneDNN bf16: at least 1.5 on resnet50 and
fcn5; PyTorch autocast / oneDNN bf16: at least 1 everywhere), then the CPU's own bf16/fp32 ceiling
(bench_cpu_bf16_ceiling, built beside dlscale). Run it by hand on a quiet machine; `lscpu` names
the CPU the figures belong to.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import malloc_policy  # noqa: E402  (dlscale's --malloc, for both sides)

CASES = (("fcn5", 64), ("alexnet", 16), ("resnet50", 16), ("lstm32", 128))
HERE = os.path.dirname(os.path.abspath(__file__))


def dlscale_steps(binary, threads, warmup, iterations, malloc):
    """(workload, batch, driver, precision) -> (median step s, status, isa) from one dlscale job."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for workload, batch in CASES:
            path = os.path.join(tmp, f"{workload}.h5")
            subprocess.run([binary, "run", "-w", workload, "-d", "onednn,libtorch", "--precision", "fp32,bf16",
                            "--batch", str(batch), "--threads", str(threads), "--warmup", str(warmup),
                            "--iterations", str(iterations), "--malloc", malloc, "--out", path], check=True)
            with h5py.File(path, "r") as f:
                for name in f["cases"]:
                    g = f["cases"][name]
                    a = g.attrs
                    key = (a["workload"], int(a["batch_per_rank"]), a["driver"], a["precision"])
                    median = g["summary"].attrs["step_median_s"] if a["status"] == "ok" else None
                    out[key] = (median, a["status"], a.get("isa", ""))
    return out


def eager_steps(binary, threads, warmup, iterations, malloc):
    """(workload, batch, precision) -> median step s of PyTorch eager on the CPU."""
    out = {}
    for workload, batch in CASES:
        proc = subprocess.run([sys.executable, os.path.join(HERE, "pytorch_eager.py"), "--dlscale", binary,
                               "--device", "cpu", "--threads", str(threads), "-w", workload, "--batch", str(batch),
                               "--precision", "fp32,bf16", "--warmup", str(warmup), "--iterations", str(iterations),
                               "--malloc", malloc],
                              check=True, capture_output=True, text=True)
        for line in proc.stdout.splitlines():
            r = json.loads(line)
            if "workload" in r and "step_median_s" in r:
                out[(r["workload"], r["batch"], r["precision"])] = r["step_median_s"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dlscale", default="build/current/dlscale")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=10)
    malloc_policy.add_argument(ap)
    args = ap.parse_args()
    ours = dlscale_steps(args.dlscale, args.threads, args.warmup, args.iterations, args.malloc)
    eager = eager_steps(args.dlscale, args.threads, args.warmup, args.iterations, args.malloc)

    def cell(v):
        return f"{v:.3f}" if v else "—"

    print("| workload | batch | oneDNN fp32 | oneDNN bf16 | LibTorch fp32 | LibTorch bf16 | eager fp32 | eager autocast "
          "| oneDNN fp32/bf16 | autocast/oneDNN bf16 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    isas, problems = set(), []
    for workload, batch in CASES:
        d = {(drv, p): ours.get((workload, batch, drv, p), (None, "missing", "")) for drv in ("onednn", "libtorch")
             for p in ("fp32", "bf16")}
        isas.update(f"{drv} {p}: {v[2]}" for (drv, p), v in d.items() if v[2])
        problems += [f"{workload} {drv} {p}: {v[1]}" for (drv, p), v in d.items() if v[1] != "ok"]
        o32, o16 = d[("onednn", "fp32")][0], d[("onednn", "bf16")][0]
        e32, e16 = eager.get((workload, batch, "fp32")), eager.get((workload, batch, "bf16"))
        speedup = f"{o32 / o16:.2f}" if o32 and o16 else "—"
        versus = f"{e16 / o16:.2f}" if e16 and o16 else "—"
        print(f"| {workload} | {batch} | {cell(o32)} | {cell(o16)} | {cell(d[('libtorch', 'fp32')][0])} "
              f"| {cell(d[('libtorch', 'bf16')][0])} | {cell(e32)} | {cell(e16)} | {speedup} | {versus} |")
    for line in problems:
        print(line)
    print("instruction sets: " + "; ".join(sorted(isas)))
    ceiling = os.path.join(os.path.dirname(os.path.abspath(args.dlscale)), "bench", "bench_cpu_bf16_ceiling")
    if os.path.exists(ceiling):  # what the CPU itself allows bf16 against fp32 (one core, registers only)
        print(subprocess.run([ceiling], check=True, capture_output=True, text=True).stdout.rstrip())
    else:
        print(f"no {ceiling}: build the bench target bench_cpu_bf16_ceiling for the CPU's own bf16/fp32 ratio")


if __name__ == "__main__":
    main()
