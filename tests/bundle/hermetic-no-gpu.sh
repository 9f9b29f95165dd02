#!/usr/bin/env bash
# Proves the GPU bundle hermetically, by hand (not in CI, which has no bundle): runs
# `scripts/gpu-check.sh --no-gpu OUTDIR` in a private mount namespace where this machine's own
# Open MPI, parallel HDF5, CLI11, toml++, fmt and GoogleTest are hidden (tmpfs over their
# folders, /dev/null over their files), as they are absent on a bare GPU machine. gpu-check then
# has only the bundle to build and run with, and its ldd check shows MPI and HDF5 resolving there.
#
#   scripts/gpu-bundle.sh && tests/bundle/hermetic-no-gpu.sh /tmp/gpu-check-no-gpu
#
# Needs root (unshare -m). BUILD_DIR defaults to build/gpu-hermetic here.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 1 ] || { echo "usage: tests/bundle/hermetic-no-gpu.sh OUTDIR" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "hermetic-no-gpu: needs root for unshare -m" >&2; exit 2; }

lib=/usr/lib/x86_64-linux-gnu
hide_dirs=(
  "$lib/openmpi" "$lib/pmix2" /usr/share/openmpi /etc/openmpi /usr/include/x86_64-linux-gnu/openmpi
  "$lib/hdf5/openmpi" /usr/include/hdf5/openmpi
  /usr/include/CLI /usr/share/cmake/CLI11
  /usr/include/toml++ "$lib/cmake/tomlplusplus"
  /usr/include/fmt "$lib/cmake/fmt"
  /usr/include/gtest /usr/include/gmock "$lib/cmake/GTest" /usr/src/googletest
)
hide_files=()
for pattern in "$lib"/libmpi* "$lib"/libopen-rte* "$lib"/libopen-pal* "$lib"/libpmix* "$lib"/libhdf5_openmpi* \
               "$lib"/libfmt* "$lib"/libtomlplusplus* "$lib"/libgtest* "$lib"/libgmock* \
               /usr/bin/mpi* /usr/bin/orte* /usr/bin/ompi* /usr/bin/h5pcc* /usr/bin/h5cc*; do
  [ -e "$pattern" ] && hide_files+=("$pattern")
done

export BUILD_DIR=${BUILD_DIR:-build/gpu-hermetic}
exec unshare -m bash -c '
  set -euo pipefail
  mount --make-rprivate /
  n=0
  for d in '"${hide_dirs[*]}"'; do
    if [ -d "$d" ]; then mount -t tmpfs none "$d"; n=$((n + 1)); fi
  done
  for f in '"${hide_files[*]}"'; do
    if [ -L "$f" ]; then continue; fi  # its target is hidden
    mount --bind /dev/null "$f"; n=$((n + 1))
  done
  echo "hermetic-no-gpu: hid $n folders and files of the system MPI, HDF5, CLI11, toml++, fmt, GoogleTest"
  exec scripts/gpu-check.sh --no-gpu "$1"
' hermetic "$1"
