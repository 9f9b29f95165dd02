#!/usr/bin/env bash
# Installs the Debian 12 packages dlscale needs that are missing, and nothing when all are
# present (so a second run touches nothing). Needs root or sudo only when something is missing.
set -euo pipefail

packages=(
  # toolchain
  cmake g++ make git pkg-config ccache
  # MPI and parallel HDF5
  openmpi-bin libopenmpi-dev libhdf5-openmpi-dev
  # backends; LibTorch runs whatever libblas.so.3 is selected: OpenBLAS (OpenMP) instead of the
  # reference BLAS, which is ~19x slower on FCN-5
  libtorch-dev libopenblas0-openmp libdnnl-dev ocl-icd-opencl-dev libtrilinos-kokkos-dev
  libtrilinos-kokkos-kernels-dev
  # C++ libraries
  libcli11-dev libtomlplusplus-dev libfmt-dev libgtest-dev libbenchmark-dev
  # results/ (use /usr/bin/python3, which sees these)
  python3 python3-h5py python3-numpy
  # pip install ./results into a venv with --system-site-packages, offline (docs/install.md,
  # tests/packaging): venv brings pip; setuptools and wheel build the package
  python3-venv python3-setuptools python3-wheel
  # results/dlscale-report: plots and the Mann-Whitney test; chromium renders the HTML
  # report headless in its end-to-end test (skipped without it)
  python3-matplotlib python3-scipy chromium
  # dlscale-report trace: OTF2 archives for Vampir (python3-otf2), read back in tests (otf2-print)
  python3-otf2 otf2-tools
  # slurm/ templates and study, and their test (tests/slurm: a single-node Slurm)
  slurm-wlm munge
  # tests/cluster: hosts made of network namespaces (ip, tc) and UTS namespaces (nsenter, unshare)
  iproute2 util-linux
  # project/: the step projected on a simulated cluster (docs/projection.md)
  libsimgrid-dev
  # the module files cmake --install writes, loaded in tests/install (Lmod reads the Tcl one too)
  lmod
  # scripts/fuzz.sh: libFuzzer targets built with clang (docs/fuzzing.md); dlscale-report's
  # property tests (tests/python/test_report_properties.py)
  clang-14 libfuzzer-14-dev python3-hypothesis
)
# Debian's lmod and environment-modules conflict: where a machine has environment-modules, keep
# it (apt would remove it for lmod) and let tests/install skip its Lmod test.
if dpkg-query -W -f='${Status}' environment-modules 2>/dev/null | grep -q "install ok installed"; then
  kept=()
  for p in "${packages[@]}"; do [ "$p" = lmod ] || kept+=("$p"); done
  packages=("${kept[@]}")
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: all ${#packages[@]} packages are installed"
else
  echo "setup-deps: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Report which BLAS libblas.so.3 resolves to; dlscale records and warns about it at run time too.
blas=$(readlink -f /usr/lib/"$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)"/libblas.so.3 || true)
case "$blas" in
  *openblas*) echo "setup-deps: libblas.so.3 -> $blas" ;;
  *) echo "setup-deps: WARNING: libblas.so.3 -> ${blas:-nothing}; select OpenBLAS with" \
          "'update-alternatives --config libblas.so.3-x86_64-linux-gnu'" >&2 ;;
esac
