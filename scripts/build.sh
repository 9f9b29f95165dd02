#!/usr/bin/env bash
# Installs what is missing and builds $DLSCALE_PRESET (scripts/env.sh: cuda where the CUDA
# toolkit is, else cpu) into build/$DLSCALE_PRESET: the common first half of quickstart.sh and
# test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

scripts/setup-deps.sh
echo "build.sh: preset $DLSCALE_PRESET"
cmake --preset "$DLSCALE_PRESET"
cmake --build --preset "$DLSCALE_PRESET" -j "$(nproc)"
# One path for the docs and for users whichever preset was built: build/current -> build/<preset>.
ln -sfn "$DLSCALE_PRESET" build/current
