#!/usr/bin/env python3
"""The same networks in PyTorch, eager and compiled, on the same GPU or CPU: the yardsticks dlscale's
drivers are held to.

Each network is built from `dlscale list --json NAME`, so it is layer for layer the network dlscale
trains (workloads/workload.h). A step is what dlscale times: forward, loss, backward, plain SGD
update (no all-reduce: one device), timed after warm-up (CUDA events on a GPU, the host clock on
the CPU); the median is reported. fp32 means fp32: TF32 is switched off for cuBLAS and cuDNN
unless --precision tf32. bf16 is PyTorch's mixed precision: the forward pass under
torch.autocast(device, torch.bfloat16), fp32 parameters and SGD.

--modes eager,compile adds a torch.compile row per case: forward and loss compiled together
(torch.compile(..., dynamic=False), the default mode: TorchInductor), backward through the
compiled graph, the same SGD step. Its record also carries compile_s, the wall time of the
first step (tracing and compiling forward and backward), which is not part of the median.
Compiling takes from seconds (fcn5) to minutes (resnet50) per case.

  python3 bench/pytorch_eager.py --dlscale build/current/dlscale -w fcn5,alexnet,resnet50,lstm64 --batch 64,128
  python3 bench/pytorch_eager.py --dlscale build/gpu/dlscale --cases-from gpu.h5   # the GPU cases of a dlscale file
  python3 bench/pytorch_eager.py --device cpu --threads 2 -w resnet50 --batch 16 --precision fp32,bf16

Prints one JSON object per case and mode (workload, batch, precision, mode, step_median_s, tflops), after one per
precision with the device's measured matrix-product ceiling (gemm, device, tflops: torch.matmul of
two random square matrices, 8192 on a GPU, 2048 on the CPU), the yardstick for "share of peak"
(scripts/gpu-check.sh).
"""

import argparse
import itertools
import json
import statistics
import os
import subprocess
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blas_core  # noqa: E402  (the BLAS kernels dlscale runs on)
import malloc_policy  # noqa: E402  (dlscale's --malloc, for the same allocator)


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck, stride on the 3x3 (workloads/workload.h)."""

    def __init__(self, l):
        super().__init__()
        cin, mid, cout, s = l["in"], l["mid"], l["out"], l["stride"]
        self.main = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
            nn.Conv2d(mid, mid, 3, stride=s, padding=1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.down = None
        if s != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=s, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return torch.relu(self.main(x) + (self.down(x) if self.down is not None else x))


class GlobalAvgPool(nn.Module):
    def forward(self, x):
        return x.mean((2, 3))


class Lstm(nn.Module):
    def __init__(self, l):
        super().__init__()
        self.lstm = nn.LSTM(l["in"], l["out"], num_layers=l["num_layers"], batch_first=True)
        self.all_steps = l["all_steps"]

    def forward(self, x):
        y, _ = self.lstm(x)
        return y if self.all_steps else y[:, -1, :]


def layer(l):
    k = l["kind"]
    if k == "linear":
        return nn.Linear(l["in"], l["out"], bias=l["bias"])
    if k == "conv2d":
        return nn.Conv2d(l["in"], l["out"], l["kernel"], stride=l["stride"], padding=l["padding"], bias=l["bias"])
    if k == "maxpool2d":
        return nn.MaxPool2d(l["kernel"], stride=l["stride"], padding=l["padding"])
    if k == "global_avg_pool":
        return GlobalAvgPool()
    simple = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh}
    if k in simple:
        return simple[k]()
    if k == "dropout":
        return nn.Dropout(l["p"])
    if k == "batchnorm2d":
        return nn.BatchNorm2d(l["in"])
    if k == "bottleneck":
        return Bottleneck(l)
    if k == "flatten":
        return nn.Flatten()
    if k == "embedding":
        return nn.Embedding(l["in"], l["out"])
    if k == "lstm":
        return Lstm(l)
    raise SystemExit(f"pytorch_eager: unknown layer kind {k}")


def build(w):
    return nn.Sequential(*[layer(l) for l in w["layers"]])


def time_workload(w, batch, precision, warmup, iterations, device, mode):
    torch.manual_seed(0)
    model = build(w).to(device).train()
    # The same network: dlscale's parameter count, plus PyTorch's second LSTM bias (4H a layer),
    # which dlscale does not have.
    extra = sum(4 * l["out"] * l["num_layers"] for l in w["layers"] if l["kind"] == "lstm")
    have = sum(p.numel() for p in model.parameters())
    if have != w["params"] + extra:
        sys.exit(f"pytorch_eager: {w['name']} has {have} parameters here, dlscale's has {w['params']} (+{extra})")
    if w["input_kind"] == "tokens":
        x = torch.randint(0, w["vocab"], [batch] + w["input_shape"], device=device)
    else:
        x = torch.randn([batch] + w["input_shape"], device=device)
    steps = w["input_shape"][0] if w["label_per_step"] else 1
    if w["loss"] == "sigmoid_bce":
        y = torch.randint(0, 2, (batch,), device=device).float()
        loss_fn = lambda out: nn.functional.binary_cross_entropy_with_logits(out.reshape(-1), y)  # noqa: E731
    else:
        y = torch.randint(0, w["num_classes"], (batch * steps,), device=device)
        loss_fn = lambda out: nn.functional.cross_entropy(out.reshape(-1, w["num_classes"]), y)  # noqa: E731
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    autocast = torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16")

    def forward_loss():
        with autocast:
            return loss_fn(model(x))

    if mode == "compile":
        # Dynamo keeps its compiled graphs per code object, and every case compiles this same
        # forward_loss: past its cache limit (8) a later case would run eager without a word.
        # Each case starts afresh (the on-disk caches stay).
        import torch._dynamo  # noqa: E402  (PyTorch 2 only, as torch.compile)

        torch._dynamo.reset()
        forward_loss = torch.compile(forward_loss, dynamic=False)

    def step():
        opt.zero_grad(set_to_none=False)
        forward_loss().backward()
        opt.step()

    start = time.perf_counter()
    step()
    if device == "cuda":
        torch.cuda.synchronize()
    first = time.perf_counter() - start
    for _ in range(warmup - 1):
        step()
    median = statistics.median(timed(step, iterations, device))
    return median, w["train_flops_per_sample"] * batch / median / 1e12, first


def timed(f, iterations, device):
    """Seconds of each of `iterations` calls of f: CUDA events on a GPU, the host clock on the CPU."""
    times = []
    if device == "cpu":
        for _ in range(iterations):
            start = time.perf_counter()
            f()
            times.append(time.perf_counter() - start)
        return times
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(iterations):
        start.record()
        f()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return times


def set_precision(precision):
    """fp32 means fp32: TF32 only when asked for (PyTorch's default lets cuDNN use it)."""
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def gemm_ceiling(precision, device, warmup=3, iterations=10):
    """Median TFLOP/s of an n^3 matrix product on random data in `precision`."""
    set_precision(precision)
    n = 2048 if device == "cpu" else 8192
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    for _ in range(warmup):
        torch.matmul(a, b)
    return 2 * n**3 / statistics.median(timed(lambda: torch.matmul(a, b), iterations, device)) / 1e12


def cases_from(path):
    """(workload, batch per rank, precision) of every GPU case in a dlscale results file, in order."""
    import h5py

    seen = []
    with h5py.File(path, "r") as f:
        for name in f["cases"]:
            a = f["cases"][name].attrs
            if a["device_type"] == "cuda":
                case = (a["workload"], int(a["batch_per_rank"]), a["precision"])
                if case not in seen:
                    seen.append(case)
    return seen


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dlscale", default="build/current/dlscale", help="the dlscale binary (for `list --json`)")
    ap.add_argument("-w", "--workloads", default="fcn5,alexnet,resnet50,lstm64",
                    help="workloads without overrides, comma-separated")
    ap.add_argument("--batch", default="64", help="batch sizes, comma-separated")
    ap.add_argument("--precision", default="fp32", help="fp32, tf32, bf16, comma-separated")
    ap.add_argument("--cases-from", metavar="FILE", help="instead of -w/--batch/--precision: the GPU cases of FILE")
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (torch.set_num_threads); 0: PyTorch's choice")
    ap.add_argument("--modes", default="eager", help="eager, compile (torch.compile), comma-separated")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=20)
    malloc_policy.add_argument(ap)
    args = ap.parse_args()
    malloc_policy.apply(args.malloc)
    blas_core.apply(args.dlscale)
    if args.cases_from:
        cases = cases_from(args.cases_from)
    else:
        cases = list(itertools.product(args.workloads.split(","), [int(b) for b in args.batch.split(",")],
                                       args.precision.split(",")))
    device = args.device
    modes = args.modes.split(",")
    for mode in modes:
        if mode not in ("eager", "compile"):
            sys.exit(f"pytorch_eager: unknown mode {mode!r} (eager, compile)")
    if args.warmup < 1:
        sys.exit(f"pytorch_eager: --warmup {args.warmup}: at least 1 (the first step compiles and allocates)")
    for _, _, precision in cases:
        if precision not in ("fp32", "tf32", "bf16") or (device == "cpu" and precision == "tf32"):
            sys.exit(f"pytorch_eager: unknown precision {precision!r} on {device} (fp32, bf16; tf32 on cuda)")
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("pytorch_eager: this PyTorch sees no GPU")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.backends.cudnn.benchmark = True  # choose convolution algorithms by timing, as dlscale does
    name = torch.cuda.get_device_name() if device == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    for precision in dict.fromkeys(p for _, _, p in cases):
        print(json.dumps({"gemm": precision, "device": name, "tflops": gemm_ceiling(precision, device)}), flush=True)
    networks = {}
    for name, batch, precision in cases:
        if name not in networks:
            networks[name] = json.loads(subprocess.run([args.dlscale, "list", "--json", name], check=True,
                                                       capture_output=True, text=True).stdout)
        for mode in modes:
            set_precision(precision)
            record = {"workload": name, "batch": batch, "precision": precision, "mode": mode}
            try:
                median, tflops, first = time_workload(networks[name], batch, precision, args.warmup, args.iterations,
                                                      device, mode)
                record.update(step_median_s=median, tflops=tflops)
                if mode == "compile":
                    record.update(compile_s=first)
            except torch.cuda.OutOfMemoryError:
                record.update(status="oom")
            print(json.dumps(record), flush=True)
            if device == "cuda":
                torch.cuda.empty_cache()  # the next network gets the memory this one cached


if __name__ == "__main__":
    main()
