#!/usr/bin/env bash
# Fresh Debian 12 machine -> installed dependencies -> built dlscale -> the default benchmark
# (the built-in study suite: strong and weak scaling over 1 and 2 ranks with phases, every CPU
# driver, a thread sweep; about 3 minutes on 2 cores) on two MPI ranks -> its summary, with why
# each series scales as it does, and the HTML report. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

scripts/build.sh

# --bind-to none: the thread sweep's one-rank cases use both cores (the scaling cases run one
# thread per rank, so P ranks use P cores). dlscale warns that the ranks share CPUs.
mpirun -np 2 --bind-to none "build/$DLSCALE_PRESET/dlscale" run --suite study --out results/study.h5 --overwrite
echo
/usr/bin/python3 results/dlscale-report summary results/study.h5
echo
# The whole analysis as one HTML page: the overview figure and the diagnosis first, then the
# tables, plots and method notes; open it in a browser.
report=$(/usr/bin/python3 results/dlscale-report report results/study.h5 -o results/study-report)
echo "report: $report"
