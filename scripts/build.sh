#!/usr/bin/env bash
# Installs what is missing and builds the cpu preset into build/cpu: the common first half of
# quickstart.sh and test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup-deps.sh
cmake --preset cpu
cmake --build --preset cpu -j "$(nproc)"
