#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] [TARGET...]: builds the fuzz preset (clang's libFuzzer with
# AddressSanitizer and UBSan; needs clang-14 and libfuzzer-14-dev) and runs each fuzz target of
# tests/fuzz for SECONDS (default 60), one per core at a time, every target when none is named.
#
# Each starts from its seed corpus, tests/fuzz/corpus/TARGET (every input there runs first: the
# findings kept as regression tests among them), and keeps the inputs it finds that reach new code
# in build/fuzz/corpus/TARGET, which the next run starts from too. A finding (a crash, a sanitizer
# report, an input that takes over 1 s, or DLSCALE_FUZZ_INPUT_TIMEOUT_S, or over 2 GiB) is saved as
# build/fuzz/findings/TARGET-*, the log as build/fuzz/logs/TARGET.log; the script then exits 1. One line per target says how many
# inputs ran. docs/fuzzing.md says how to reproduce and keep a finding.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

seconds=${1:-60}
# The limit on one input's time: DLSCALE_FUZZ_INPUT_TIMEOUT_S, else 1 s. scripts/test.sh gives 10
# where the targets run beside the tests, whose load slows every input.
input_timeout=${DLSCALE_FUZZ_INPUT_TIMEOUT_S:-1}
shift || true
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "fuzz.sh: SECONDS '$seconds': not a whole number of seconds >= 1" >&2
  exit 2
fi
if ! [[ "$input_timeout" =~ ^[0-9]+$ ]] || [ "$input_timeout" -lt 1 ]; then
  echo "fuzz.sh: DLSCALE_FUZZ_INPUT_TIMEOUT_S '$input_timeout': not a whole number of seconds >= 1" >&2
  exit 2
fi

# Counted before OMP_NUM_THREADS is set below: nproc honours it.
cores=$(nproc)
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$cores" >/dev/null

bin=build/fuzz/tests/fuzz
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for seeds in tests/fuzz/corpus/*/; do targets+=("$(basename "$seeds")"); done
fi
for t in "${targets[@]}"; do
  if [ ! -x "$bin/$t" ] || [ ! -d "tests/fuzz/corpus/$t" ]; then
    echo "fuzz.sh: no fuzz target '$t' (targets: $(ls tests/fuzz/corpus | tr '\n' ' '))" >&2
    exit 2
  fi
done
mkdir -p build/fuzz/corpus build/fuzz/findings build/fuzz/logs

# Leaks are checked where the sanitizers check them (the sanitizer job's tests): the HDF5 and
# Open MPI libraries keep allocations for the process's life, which would fail every input here.
# A C library's malloc of more than 1.5 GiB returns NULL, as one beyond what the machine has does
# outside the sanitizer (HDF5 asks for such sizes from a damaged header, and fails cleanly);
# dlscale's own C++ allocations of that size are still reported, and so is any allocation that
# takes the process past 2 GiB. One thread per target: an OpenMP team would spin beside it.
# These settings, not the environment's: the sanitizer job's (scripts/test.sh) checks leaks.
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:max_allocation_size_mb=1536
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export OMP_NUM_THREADS=1

# inputs_run LOG: the inputs one run of a target executed: its final statistics, or where it
# ended early, the count of its last status line (#N ...).
inputs_run() {
  local n
  n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$1" | tail -1)
  [ -n "$n" ] || n=$(grep -ao '^#[0-9]*' "$1" | tail -1 | tr -d '#')
  echo "${n:-0}"
}

# fuzz_one TARGET: runs it until SECONDS have passed. The HDF5 library itself crashes or loops
# on some damaged files; a target that ended on one of those (tests/fuzz/fuzz_support.h: its own
# line and exit status 86, or dlscale's ReadGuard's line and exit 2) is started again for the
# time left, from the corpus it has grown. Anything else that ends it early is a finding.
fuzz_one() {
  local t=$1 log=build/fuzz/logs/$1.log
  mkdir -p "build/fuzz/corpus/$t"
  : >"$log"
  local end=$((SECONDS + seconds)) runs=0 contained=0 status=0
  while [ "$SECONDS" -lt "$end" ]; do
    local part=build/fuzz/logs/$t.part
    status=0
    rm -rf "build/fuzz/scratch/$t"
    DLSCALE_FUZZ_SCRATCH="build/fuzz/scratch/$t" \
      "$bin/$t" "build/fuzz/corpus/$t" "tests/fuzz/corpus/$t" -max_total_time=$((end - SECONDS)) -timeout="$input_timeout" \
      -rss_limit_mb=2048 -artifact_prefix="build/fuzz/findings/$t-" -print_final_stats=1 >"$part" 2>&1 || status=$?
    cat "$part" >>"$log"
    runs=$((runs + $(inputs_run "$part")))
    if [ "$status" = 86 ] || { [ "$status" = 2 ] && grep -aq "the HDF5 library made no progress reading it" "$part"; }; then
      # The input it ended on (its files in the scratch folder) leaves the grown corpus, where
      # libFuzzer names each input by its SHA-1, so that the next run does not end on it again;
      # it is kept in build/fuzz/contained/ for the record.
      contained=$((contained + 1))
      for f in "build/fuzz/scratch/$t"/*; do
        [ -f "$f" ] || continue
        local sum
        sum=$(sha1sum "$f" | cut -d' ' -f1)
        rm -f "build/fuzz/corpus/$t/$sum"
        mkdir -p build/fuzz/contained
        cp "$f" "build/fuzz/contained/$t-$sum"
      done
      status=0
      continue
    fi
    break
  done
  rm -rf "build/fuzz/logs/$t.part" "build/fuzz/scratch/$t"
  local held=""
  [ "$contained" = 0 ] || held=" ($contained crash(es) or stall(s) of the HDF5 library itself, contained)"
  if [ "$status" = 0 ]; then
    echo "fuzz.sh: $t: $runs inputs in $seconds s, no finding$held"
  else
    echo "fuzz.sh: $t: FINDING after $runs inputs (exit $status): $log, build/fuzz/findings/$t-*" >&2
    grep -a -m 3 -E "ERROR|SUMMARY|runtime error|fuzz: " "$log" >&2 || true
  fi
  return "$status"
}

failed=0
running=0
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$cores" ]; then
    wait -n || failed=1
    running=$((running - 1))
  fi
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=1
  running=$((running - 1))
done
exit "$failed"
