#!/usr/bin/env bash
# Fresh Debian 12 machine -> installed dependencies -> built dlscale -> the default benchmark
# (the built-in quick suite) on two MPI ranks -> its summary. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

scripts/build.sh

mpirun -np 2 "build/$DLSCALE_PRESET/dlscale" run --suite quick --out results/quick.h5 --overwrite
echo
/usr/bin/python3 results/dlscale-report summary results/quick.h5
echo
# The whole analysis as one HTML page (tables, plots, method notes); open it in a browser.
report=$(/usr/bin/python3 results/dlscale-report report results/quick.h5 -o results/quick-report)
echo "report: $report"
