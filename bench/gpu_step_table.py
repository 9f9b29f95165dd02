#!/usr/bin/env python3
"""The GPU step-time table of scripts/gpu-check.sh: each GPU case of a dlscale results file on
every driver that ran it, beside PyTorch eager (and torch.compile, where it was timed) on the same
network, batch and precision (bench/pytorch_eager.py's JSON lines), with achieved TFLOP/s and its
share of the GPU's measured matrix-product ceiling in that precision.

  python3 bench/gpu_step_table.py gpu-check.h5 pytorch.jsonl

Columns: median step (ms) and TFLOP/s per driver; `%gemm` is the cuda driver's TFLOP/s over the
ceiling; `cuda/eager` and `cuda/compile` are the cuda driver's step time over PyTorch eager's and
torch.compile's (below 1: faster). A case that did not run shows its status (unsupported, oom,
error); `-` where it was not timed.
"""

import json
import sys

import h5py


def read_dlscale(path):
    """{(workload, batch, precision): {driver: (ms, tflops) or status}}, in the file's order."""
    rows = {}
    with h5py.File(path, "r") as f:
        for name in f["cases"]:
            group = f["cases"][name]
            a = group.attrs
            if a["device_type"] != "cuda":
                continue
            key = (a["workload"], int(a["batch_per_rank"]), a["precision"])
            if a["status"] == "ok":
                s = group["summary"].attrs
                cell = (s["step_median_s"] * 1e3, s["achieved_flops"] / 1e12)
            else:
                cell = str(a["status"])
            rows.setdefault(key, {})[a["driver"]] = cell
    return rows


def read_pytorch(path):
    """({(workload, batch, precision, mode): (ms, tflops) or status}, {precision: ceiling TFLOP/s}, device)."""
    cases, ceilings, device = {}, {}, ""
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        return cases, ceilings, device
    for line in lines:
        r = json.loads(line)
        if "gemm" in r:
            ceilings[r["gemm"]] = r["tflops"]
            device = r["device"]
        elif "step_median_s" in r:
            cases[(r["workload"], r["batch"], r["precision"], r.get("mode", "eager"))] = (r["step_median_s"] * 1e3,
                                                                                           r["tflops"])
        else:
            cases[(r["workload"], r["batch"], r["precision"], r.get("mode", "eager"))] = r.get("status", "error")
    return cases, ceilings, device


def cell(v):
    if isinstance(v, tuple):
        return f"{v[0]:9.2f} {v[1]:7.2f}"
    return f"{v or '-':>17}"


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: gpu_step_table.py DLSCALE.h5 PYTORCH.jsonl")
    rows = read_dlscale(sys.argv[1])
    pytorch, ceilings, device = read_pytorch(sys.argv[2])
    print(f"GPU: {device or 'unknown (no PyTorch records)'}")
    if ceilings:
        print("matrix-product ceiling (torch.matmul, 8192^3, random data): " +
              ", ".join(f"{p} {t:.1f} TFLOP/s" for p, t in ceilings.items()))
    print(f"{'workload':<10} {'batch':>5} {'prec':<5} {'cuda ms':>9} {'TFLOP/s':>7} {'%gemm':>5}  "
          f"{'libtorch ms':>9} {'TFLOP/s':>7}  {'eager ms':>9} {'TFLOP/s':>7}  {'compile ms':>9} {'TFLOP/s':>7}  "
          f"cuda/eager  cuda/compile")
    for key, drivers in rows.items():
        workload, batch, precision = key
        cuda, eager, compiled = drivers.get("cuda"), pytorch.get(key + ("eager",)), pytorch.get(key + ("compile",))
        share = f"{100 * cuda[1] / ceilings[precision]:5.1f}" if isinstance(cuda, tuple) and precision in ceilings else "    -"

        def ratio(other):
            return f"{cuda[0] / other[0]:.3f}" if isinstance(cuda, tuple) and isinstance(other, tuple) else "-"

        print(f"{workload:<10} {batch:>5} {precision:<5} {cell(cuda)} {share}  {cell(drivers.get('libtorch'))}  "
              f"{cell(eager)}  {cell(compiled)}  {ratio(eager):>10}  {ratio(compiled):>12}")


if __name__ == "__main__":
    main()
