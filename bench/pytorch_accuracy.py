#!/usr/bin/env python3
"""The yardstick of `dlscale run --mode accuracy` on MNIST: the same network trained the same way
in PyTorch eager mode on one process, for its test accuracy, training time and testing time.

The network comes from `dlscale list --json NAME` (bench/pytorch_eager.py builds it layer for
layer); the data are the IDX files of `mnist:DIR` and `mnist:DIR:test`, normalised as dlscale does
((byte / 255 - 0.1307) / 0.3081). Per repeat, as docs/metrics.md defines it for dlscale: a held-out
validation fraction drawn once from the seed, an epoch walks a new shuffle of the rest in batches
of --batch with the last incomplete batch dropped, Adam (or SGD) steps; the validation set is
evaluated after each epoch (timed apart), the test set after the last. Training time is the sum of
the epochs' wall times (host clock, the batch copies included), testing time the one inference
pass over the test set in batches of --batch. PyTorch's own initialisation and shuffles, so single
runs differ from dlscale's by chance: compare means over repeats.

  /usr/bin/python3 bench/pytorch_accuracy.py --data data/mnist -w mnist_cnn --batch 64 --epochs 5 --threads 2
  build/current/dlscale run --mode accuracy -w mnist_cnn --data mnist:data/mnist --optimizer adam --lr 0.001 \\
      --epochs 5 --batch 64 --threads 2 -d onednn,libtorch --peak skip        # the same on one rank

Prints one JSON object per repeat (test_accuracy, train_time_s, test_time_s, val_accuracy per
epoch) and a last one with the means.
"""

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import blas_core  # noqa: E402  (the BLAS kernels dlscale runs on)
import malloc_policy  # noqa: E402  (dlscale's --malloc, for the same allocator)
from pytorch_eager import build  # noqa: E402  (the same network, layer for layer)

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


def read_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def mnist(directory, split):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(directory, f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(os.path.join(directory, f"{prefix}-labels-idx1-ubyte"))
    x = (torch.from_numpy(images.astype(np.float32)) / 255 - MNIST_MEAN) / MNIST_STD
    return x.unsqueeze(1), torch.from_numpy(labels.astype(np.int64))


def evaluate(model, x, y, batch):
    """(accuracy, mean loss, seconds) of inference over (x, y) in batches of `batch`."""
    model.eval()
    start = time.perf_counter()
    correct, loss = 0, 0.0
    with torch.no_grad():
        for i in range(0, len(y), batch):
            out = model(x[i:i + batch])
            loss += nn.functional.cross_entropy(out, y[i:i + batch], reduction="sum").item()
            correct += (out.argmax(1) == y[i:i + batch]).sum().item()
    seconds = time.perf_counter() - start
    model.train()
    return correct / len(y), loss / len(y), seconds


def repeat(args, w, data, seed):
    (x, y), (x_test, y_test) = data
    split = torch.randperm(len(y), generator=torch.Generator().manual_seed(args.seed))
    held = round(args.validation * len(y))
    train, val = split[:len(y) - held], split[len(y) - held:]
    torch.manual_seed(seed)
    model = build(w).train()
    opt = (torch.optim.Adam(model.parameters(), lr=args.lr) if args.optimizer == "adam"
           else torch.optim.SGD(model.parameters(), lr=args.lr))
    train_s, val_acc = 0.0, []
    for epoch in range(args.epochs):
        order = train[torch.randperm(len(train), generator=torch.Generator().manual_seed(seed * 1000 + epoch))]
        start = time.perf_counter()
        for k in range(len(order) // args.batch):
            idx = order[k * args.batch:(k + 1) * args.batch]
            opt.zero_grad(set_to_none=False)
            nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
        train_s += time.perf_counter() - start
        val_acc.append(evaluate(model, x[val], y[val], args.batch)[0])
    test_acc, test_loss, test_s = evaluate(model, x_test, y_test, args.batch)
    return {"seed": seed, "test_accuracy": test_acc, "test_loss": test_loss, "train_time_s": train_s,
            "test_time_s": test_s, "val_accuracy": val_acc}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dlscale", default="build/current/dlscale", help="the dlscale binary (for `list --json`)")
    ap.add_argument("-w", "--workload", default="mnist_cnn", help="an MNIST workload of the catalog")
    ap.add_argument("--data", default="data/mnist", help="the directory of mnist:DIR")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--optimizer", choices=("adam", "sgd"), default="adam")
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--validation", type=float, default=0.2)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads; 0: PyTorch's choice")
    malloc_policy.add_argument(ap)
    args = ap.parse_args()
    malloc_policy.apply(args.malloc)
    blas_core.apply(args.dlscale)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    w = json.loads(subprocess.run([args.dlscale, "list", "--json", args.workload], check=True,
                                  capture_output=True, text=True).stdout)
    data = (mnist(args.data, "train"), mnist(args.data, "test"))
    runs = []
    for r in range(args.repeats):
        runs.append(repeat(args, w, data, args.seed + r))
        print(json.dumps(runs[-1]), flush=True)
    print(json.dumps({"workload": args.workload, "batch": args.batch, "epochs": args.epochs,
                      "threads": torch.get_num_threads(), "repeats": args.repeats,
                      "test_accuracy_mean": statistics.mean(r["test_accuracy"] for r in runs),
                      "train_time_mean_s": statistics.mean(r["train_time_s"] for r in runs),
                      "test_time_mean_s": statistics.mean(r["test_time_s"] for r in runs)}))


if __name__ == "__main__":
    main()
