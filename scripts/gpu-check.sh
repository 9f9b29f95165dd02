#!/usr/bin/env bash
# On a machine with a GPU: builds dlscale with the CUDA driver (and against the machine's own
# CUDA LibTorch when python3's torch has one), runs the GPU tests (label gpu), then prints the
# step time and achieved TFLOP/s of every catalog workload at one batch size on the cuda driver,
# on LibTorch (CUDA) and on PyTorch eager in Python (bench/pytorch_eager.py), same GPU, same
# networks. Environment: BATCH (64), WARMUP (5), ITERATIONS (20), PRECISION (fp32), BUILD_DIR
# (build/gpu), CUDA_HOME (/usr/local/cuda); MPI and parallel HDF5 must be findable by CMake
# (MPI_HOME, HDF5_ROOT; docs/building.md).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

batch=${BATCH:-64}
warmup=${WARMUP:-5}
iterations=${ITERATIONS:-20}
precision=${PRECISION:-fp32}
build=${BUILD_DIR:-build/gpu}

if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no GPU on this machine (nvidia-smi -L fails); run it where there is one" >&2
  exit 2
fi
nvidia-smi -L

cmake_args=(-S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDLSCALE_WITH_CUDA=ON
            "-DCUDAToolkit_ROOT=${CUDA_HOME:-/usr/local/cuda}" -DCMAKE_CUDA_ARCHITECTURES=native)
# The machine's LibTorch when it has CUDA (pip's torch ships its CMake config); otherwise the
# libtorch driver is whatever CMake finds (Debian's CPU-only one records its GPU cases unsupported).
# Only a LibTorch with the C++11 string ABI links with the rest of dlscale (pip's wheels before
# PyTorch 2.7 were built without it: use the cxx11-ABI LibTorch download for those).
torch_prefix=$(python3 -c 'import torch
ok = torch.cuda.is_available() and torch.compiled_with_cxx11_abi()
print(torch.utils.cmake_prefix_path if ok else "")' 2>/dev/null || true)
if [ -n "$torch_prefix" ]; then
  echo "gpu-check: LibTorch from $torch_prefix"
  cmake_args+=("-DCMAKE_PREFIX_PATH=$torch_prefix")
fi
cmake "${cmake_args[@]}"
cmake --build "$build" -j "$(nproc)"

tests_status=0
ctest --test-dir "$build" -L gpu --output-on-failure || tests_status=$?

mkdir -p results
workloads=$("$build/dlscale" list | awk '/^Workloads/ {on = 1; getline; next} /^$/ {on = 0} on {print $1}' | paste -sd, -)
run_status=0
"$build/dlscale" run -d cuda,libtorch --device cuda --precision "$precision" -w "$workloads" --batch "$batch" \
  --warmup "$warmup" --iterations "$iterations" --out results/gpu-check.h5 --overwrite | tee results/gpu-check.log ||
  run_status=$?
pytorch_status=0
python3 bench/pytorch_eager.py --dlscale "$build/dlscale" -w "$workloads" --batch "$batch" --precision "$precision" \
  --warmup "$warmup" --iterations "$iterations" > results/gpu-check-pytorch.jsonl || pytorch_status=$?

python3 - "$batch" "$precision" <<'PY'
import json, re, sys
batch, precision = sys.argv[1], sys.argv[2]
rows = {}
pattern = re.compile(r"^\d{4} (\S+)\s+(\S+)\s+cuda .*?\| (?:step ([\d.]+) ms .*\| ([\d.]+) GFLOP/s \| ok|(\w+): (.*))$")
for line in open("results/gpu-check.log"):
    m = pattern.match(line.strip())
    if m:
        workload, driver, ms, gflops, status, why = m.groups()
        rows.setdefault(workload, {})[driver] = (float(ms), float(gflops) / 1e3) if ms else status
try:
    for line in open("results/gpu-check-pytorch.jsonl"):
        r = json.loads(line)
        rows.setdefault(r["workload"], {})["pytorch"] = (r["step_median_s"] * 1e3, r["tflops"])
except FileNotFoundError:
    pass
def cell(v):
    return f"{v[0]:10.2f} {v[1]:7.2f}" if isinstance(v, tuple) else f"{str(v or '-'):>18}"
print(f"\nbatch {batch}, {precision}: median step (ms) and achieved TFLOP/s")
print(f"{'workload':<16} {'cuda ms':>10} {'TFLOP/s':>7} {'libtorch ms':>10} {'TFLOP/s':>7} {'pytorch ms':>10} {'TFLOP/s':>7}  cuda/pytorch")
for w, r in rows.items():
    ratio = ""
    if isinstance(r.get("cuda"), tuple) and isinstance(r.get("pytorch"), tuple):
        ratio = f"{r['cuda'][0] / r['pytorch'][0]:.3f}"
    print(f"{w:<16} {cell(r.get('cuda'))} {cell(r.get('libtorch'))} {cell(r.get('pytorch'))}  {ratio}")
PY

if [ "$tests_status" -ne 0 ] || [ "$run_status" -ne 0 ] || [ "$pytorch_status" -ne 0 ]; then
  echo "gpu-check: GPU tests exit $tests_status, dlscale run exit $run_status, PyTorch comparison exit $pytorch_status" >&2
  exit 1
fi
