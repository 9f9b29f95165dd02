#!/usr/bin/env bash
# Usage: tests/e2e/capture_fixed_run.sh OUTDIR
#
# Runs one fixed, small, deterministic 2-rank `dlscale run --phases --format json` and keeps
# its stdout (OUTDIR/run.jsonl) and results file (OUTDIR/run.h5), so that two builds of the
# harness can be compared with tests/e2e/same_output.py. The run covers, in about 30 seconds on
# 2 cores: two networks on the reference and LibTorch drivers on 1 and 2 ranks, strong scaling
# with a bucketed all-reduce on oneDNN, a measured peak, a case recorded `unsupported`, and an
# accuracy-mode case on a tiny MNIST-format data set written here.
#
# DLSCALE_BIN (default build/current/dlscale), MPIEXEC (default mpiexec) and PYTHON (default
# python3) name the programs. OUTDIR is created; an existing run.h5 in it is replaced.
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
bin=$(realpath "${DLSCALE_BIN:-build/current/dlscale}")
mpiexec=${MPIEXEC:-mpiexec}
python=${PYTHON:-python3}
mkdir -p "$1"
out=$(realpath "$1")

# The results file records the command line and every case its data path: the binary is
# called by the bare name `dlscale` (a link on PATH) and every path is relative to OUTDIR, so
# two builds, or two OUTDIRs, record the same text.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$bin" "$tmp/dlscale"
cd "$out"
rm -rf run.h5 run.jsonl mnist fixed.toml

# 64 training and 32 test images in the MNIST file format, the same bytes every time; the
# label decides the pattern, so there is something to learn.
"$python" - <<'EOF'
import os, struct
os.makedirs("mnist")
for prefix, n in (("train", 64), ("t10k", 32)):
    labels = [(i * 7) % 10 for i in range(n)]
    pixels = bytes((p * (label + 1) * 13 + i) % 256 for i, label in enumerate(labels) for p in range(784))
    with open(f"mnist/{prefix}-images-idx3-ubyte", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + pixels)
    with open(f"mnist/{prefix}-labels-idx1-ubyte", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(labels))
EOF

cat >fixed.toml <<'EOF'
# Top-level keys: the defaults of every matrix below.
seed = 42
threads = 1
batch = 4

# Two networks, two drivers, 1 and 2 ranks: losses, parameter counts, phases, and the
# all-reduce microbenchmark of the 2-rank cases.
[[matrix]]
workload = ["mnist_fnn:width=16", "lstm32:vocab=50,embed=8,hidden=8,seq=4"]
driver = ["reference", "libtorch"]
ranks = [1, 2]
warmup = 1
iterations = 2

# Strong scaling on oneDNN, with one all-reduce and with buckets reduced during backward.
[[matrix]]
workload = "mnist_cnn:width=4,fc=8"
driver = "onednn"
scaling = "strong"
batch = 8
bucket_mb = [0, 0.001]
warmup = 1
iterations = 2

# The test machines' LibTorch has no CUDA: recorded `unsupported` with the reason.
[[matrix]]
workload = "mnist_fnn:width=16"
driver = "libtorch"
device = "cuda"

# Accuracy mode: epochs, repeats, validation and test accuracy, time to target.
[[matrix]]
mode = "accuracy"
workload = "mnist_fnn:width=16"
driver = "reference"
data = "mnist:mnist"
optimizer = "adam"
lr = 0.001
batch = 8
epochs = 2
validation = 0.25
repeats = 2
target_accuracy = 0.2
EOF

PATH="$tmp:$PATH" "$mpiexec" -n 2 dlscale run --config fixed.toml --phases --format json \
  --progress none --peak measure --peak-seconds 0.01 --out run.h5 >run.jsonl
echo "$0: $out/run.jsonl and $out/run.h5" >&2
