#!/usr/bin/env bash
# The whole first contact with a GPU machine in one command (docs/cuda.md):
#
#   scripts/gpu-check.sh OUTDIR           on the GPU machine
#   scripts/gpu-check.sh --no-gpu OUTDIR  anywhere: every step that needs no GPU
#
# 1. unpacks .gpu-bundle/ (scripts/gpu-bundle.sh: Open MPI, parallel HDF5, CLI11, toml++, fmt,
#    GoogleTest as Debian packages) into a prefix with dpkg -x, and makes that Open MPI relocatable;
# 2. configures with ninja and explicit hints: the bundle's libraries, and cuBLAS, cudart, cuDNN
#    and NCCL from the very files the machine's PyTorch loads, so that one process holds one copy
#    of each CUDA library; LibTorch from that PyTorch when it has CUDA;
# 3. builds on every core, then checks with ldd that each CUDA library resolves to that one file
#    and MPI and HDF5 to the bundle;
# 4. --no-gpu: runs a 2-rank CPU case through the bundle's mpirun and reads its file back;
#    otherwise runs the tests labelled gpu, then the step-time table (bench/gpu_step_table.py):
#    cuda, LibTorch CUDA and PyTorch eager on the same networks, batches and precisions.
#
# Everything it prints goes to OUTDIR/gpu-check.log too; OUTDIR also gets tests.log, ldd.txt,
# the results file, PyTorch's timings, table.txt and overlap.txt (at most 8 files, as a device run
# returns).
# Environment: GPU_BUNDLE (.gpu-bundle), GPU_PREFIX (/tmp/dlscale-gpu-prefix), BUILD_DIR
# (build/gpu), CUDA_HOME (/usr/local/cuda), PYTHON (the first of python3 and /usr/bin/python3 that has
# h5py and numpy), TABLE_CASES
# ("fcn5:64,512 alexnet:64,128 resnet50:64 lstm64:64,256": batch 64 and the largest of Shi et
# al.'s GPU sweep), PRECISIONS (fp32,tf32,bf16), MODES (eager: PyTorch's modes in the table;
# eager,compile adds torch.compile rows, minutes of compiling, done in the background during the
# tests when both stages run), WARMUP (5), ITERATIONS (20),
# TESTS_FILTER (a ctest -R regular expression: only those gpu tests), TEST_JOBS (8: gpu tests
# side by side), COMPILE_JOBS (6: background compiles at a time), TORCHINDUCTOR_CACHE_DIR
# (/tmp/dlscale-gpu-inductor), STAGES ("tests
# table overlap": what runs on the GPU after the build; naming some of them splits the work over
# several device calls, the later ones finding the build done while the machine is still warm;
# "overlap" is bench_overlap_vs_blocking on the GPU, into overlap.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

usage() { echo "usage: scripts/gpu-check.sh [--no-gpu] OUTDIR" >&2; exit 2; }
no_gpu=0
if [ "${1:-}" = --no-gpu ]; then no_gpu=1; shift; fi
[ $# -eq 1 ] && [ -n "$1" ] || usage
mkdir -p "$1"
out=$(cd "$1" && pwd)
exec > >(tee "$out/gpu-check.log") 2>&1
tee_pid=$!
# The log is complete only once tee has read everything: close its pipe and wait at exit.
trap 'exec >&- 2>&-; wait "$tee_pid"' EXIT

bundle=${GPU_BUNDLE:-$repo/.gpu-bundle}
prefix=${GPU_PREFIX:-/tmp/dlscale-gpu-prefix}
build=${BUILD_DIR:-build/gpu}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
table_cases=${TABLE_CASES:-fcn5:64,512 alexnet:64,128 resnet50:64 lstm64:64,256}
precisions=${PRECISIONS:-fp32,tf32,bf16}
modes=${MODES:-eager}
warmup=${WARMUP:-5}
iterations=${ITERATIONS:-20}
stages=${STAGES:-tests table overlap}
multiarch=x86_64-linux-gnu
started=$SECONDS

step() { echo "== gpu-check [$((SECONDS - started)) s]: $*"; }
fail() { echo "gpu-check: $*" >&2; exit 1; }

# --- What the machine must have -------------------------------------------------------------
step "checking the machine"
[ -f "$bundle/MANIFEST" ] || fail "no bundle at $bundle: run scripts/gpu-bundle.sh where Debian's archive is reachable, and carry .gpu-bundle"
for tool in cmake ninja dpkg-deb ldd objdump; do
  command -v "$tool" >/dev/null || fail "$tool is not on PATH"
done
[ -x "$cuda_home/bin/nvcc" ] || fail "no nvcc at $cuda_home/bin/nvcc (set CUDA_HOME)"
# The bundle's libraries come from Debian 12, built against glibc 2.36.
glibc=$(ldd --version | awk 'NR == 1 {print $NF}')
[ "$(printf '%s\n2.36\n' "$glibc" | sort -V | head -1)" = 2.36 ] || fail "glibc $glibc is older than the bundle's 2.36"
# The Python for the tests, the table and PyTorch eager: the first with h5py and numpy (on a GPU,
# and with torch too where one has it).
python=""
for needs in "h5py, numpy, torch" "h5py, numpy"; do
  [ "$no_gpu" -eq 1 ] && [ "$needs" != "h5py, numpy" ] && continue
  for candidate in ${PYTHON:-python3 /usr/bin/python3}; do
    if "$candidate" -c "import $needs" 2>/dev/null; then python=$(command -v "$candidate"); break 2; fi
  done
done
[ -n "$python" ] || fail "no Python with h5py and numpy among: ${PYTHON:-python3 /usr/bin/python3} (set PYTHON)"
if [ "$no_gpu" -eq 0 ]; then
  nvidia-smi -L || fail "no GPU here (nvidia-smi -L fails); scripts/gpu-check.sh --no-gpu runs the rest"
fi
echo "glibc $glibc, $(cmake --version | head -1), ninja $(ninja --version), $("$cuda_home/bin/nvcc" --version | tail -1), python $python, $(nproc) cores"

# --- 1. Unpack the bundle and relocate Open MPI ---------------------------------------------
step "unpacking $bundle into $prefix"
stamp="$prefix/.manifest"
if ! cmp -s "$bundle/MANIFEST" "$stamp"; then
  rm -rf "$prefix"
  mkdir -p "$prefix"
  for deb in "$bundle"/debs/*.deb; do dpkg-deb -x "$deb" "$prefix"; done
  # A dependency only where this machine lacks one of its libraries: the machine's own copies of
  # common libraries (libssl, libcurl, …) stay the ones every process loads. A dependency with no
  # library of its own (openmpi-common's wrapper data and help texts, plugins, data files) is always
  # taken: the relocated tree looks for those files under its own prefix, not under the machine's.
  taken=0
  for deb in "$bundle"/deps/*.deb; do
    libs=$(dpkg-deb -c "$deb" | awk '{print $6}' | { grep -E '^\./usr/lib/[^/]+/lib[^/]*\.so\.[0-9]+$' || true; } |
             xargs -rn1 basename)
    take=""
    [ -n "$libs" ] || take=1
    for lib in $libs; do
      found=""
      for dir in /usr/lib/$multiarch /lib/$multiarch /usr/lib64 /lib64 /usr/lib /lib; do
        if [ -s "$dir/$lib" ]; then found=1; break; fi
      done
      [ -n "$found" ] || { take=1; break; }
    done
    if [ -n "$take" ]; then dpkg-deb -x "$deb" "$prefix"; taken=$((taken + 1)); fi
  done
  echo "unpacked $(ls "$bundle"/debs/*.deb | wc -l) packages and $taken of $(ls "$bundle"/deps/*.deb | wc -l) dependencies (the others' libraries are all on this machine)"
  # What Debian's maintainer scripts would do (dpkg -x runs none): the update-alternatives links.
  for tool in mpicc mpicxx mpic++ mpiexec mpirun; do ln -sfn "$tool.openmpi" "$prefix/usr/bin/$tool"; done
  cp "$bundle/MANIFEST" "$stamp"
fi
usr=$prefix/usr
# Open MPI finds its plugins, help texts and orted relative to OPAL_PREFIX. Debian's PMIx has its
# plugin and help folders configured as absolute paths, so they are named one by one: the bundle's
# where its libpmix was taken, else those of the machine's own libpmix, which is then the one loaded.
pmix=$usr/lib/$multiarch/pmix2
[ -d "$pmix" ] || pmix=/usr/lib/$multiarch/pmix2
export OPAL_PREFIX=$usr PMIX_PKGLIBDIR=$pmix/lib/pmix PMIX_PKGDATADIR=$pmix/share/pmix
# The toolkit chosen here is the one every CUDA lookup finds, LibTorch's CMake files' included.
export CUDA_HOME=$cuda_home PATH=$usr/bin:$cuda_home/bin:$PATH
# The bundle's run-time libraries (MPI's own dependencies, HDF5's) for every process started below.
export LD_LIBRARY_PATH=$usr/lib/$multiarch/openmpi/lib:$usr/lib/$multiarch:$usr/lib/$multiarch/hdf5/openmpi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Only the shared-memory and loopback transports on one machine, quietly.
export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_mca_base_component_show_load_errors=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpirun --version | head -1

# --- 2. Configure ---------------------------------------------------------------------------
step "finding the CUDA libraries PyTorch loads"
cmake_args=(-G Ninja -S . -DCMAKE_BUILD_TYPE=Release -DDLSCALE_WITH_CUDA=ON
            -DDLSCALE_WITH_ONEDNN=OFF -DDLSCALE_WITH_KOKKOS=OFF -DDLSCALE_BUILD_BENCH=OFF
            "-DCUDAToolkit_ROOT=$cuda_home" "-DCMAKE_CUDA_COMPILER=$cuda_home/bin/nvcc"
            "-DCMAKE_PREFIX_PATH=$usr"
            "-DMPI_C_COMPILER=$usr/bin/mpicc.openmpi" "-DMPI_CXX_COMPILER=$usr/bin/mpicxx.openmpi"
            "-DMPIEXEC_EXECUTABLE=$usr/bin/mpiexec.openmpi"
            "-DHDF5_ROOT=$usr/lib/$multiarch/hdf5/openmpi" -DHDF5_NO_FIND_PACKAGE_CONFIG_FILE=ON
            "-DDLSCALE_PYTHON=$python"
)
# RPATH, not RUNPATH: searched before LD_LIBRARY_PATH, so that a CUDA folder there cannot put a
# second copy of a CUDA library into the process.
linker_flags=-Wl,--disable-new-dtags
if [ "$no_gpu" -eq 0 ]; then
  cmake_args+=(-DCMAKE_CUDA_ARCHITECTURES=native)
  # LibTorch's CMake files replace CMAKE_CUDA_ARCHITECTURES with their own -gencode list, taken
  # from TORCH_CUDA_ARCH_LIST: name this GPU's capability (9.0 on an H100) rather than leave
  # them to guess.
  TORCH_CUDA_ARCH_LIST=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)
  export TORCH_CUDA_ARCH_LIST
fi

# PyTorch's own copies (its libraries carry an RPATH into the pip wheels nvidia/*): when dlscale
# links the same files, the loader keeps that one copy of each soname for both.
torch_lib=$("$python" -c 'import os, torch
ok = torch.version.cuda is not None and torch.compiled_with_cxx11_abi()
print(os.path.join(os.path.dirname(torch.__file__), "lib") if ok else "")' 2>"$out/torch-probe.err" || true)
if [ -s "$out/torch-probe.err" ]; then
  echo "python's torch could not be asked (building without LibTorch):"
  cat "$out/torch-probe.err"
fi
rm -f "$out/torch-probe.err"
declare -A want=()  # CUDA soname -> the file every part of the process must load
if [ -n "$torch_lib" ] && [ -f "$torch_lib/libtorch_cuda.so" ]; then
  # A library LibTorch itself cannot find shows first here, named, rather than only in the ldd
  # check after the build (which dlscale's own run path may still pass, so this only warns).
  if ldd "$torch_lib/libtorch_cuda.so" | grep 'not found'; then
    echo "gpu-check: warning: PyTorch's libtorch_cuda.so has unresolved libraries (above)"
  fi
  torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
  echo "LibTorch (CUDA) from $torch_prefix"
  cmake_args+=(-DDLSCALE_WITH_TORCH=ON "-DCMAKE_PREFIX_PATH=$usr;$torch_prefix")
  while read -r soname arrow path _; do
    case "$soname" in libcudart.so.* | libcublas.so.* | libcublasLt.so.* | libcudnn.so.* | libnccl.so.*)
      [ "$arrow" = "=>" ] && [ -f "$path" ] || fail "PyTorch's $soname is not found ($soname $arrow $path)"
      want[$soname]=$(readlink -f "$path") ;;
    esac
  done < <(ldd "$torch_lib/libtorch_cuda.so")
  for soname in "${!want[@]}"; do
    path=${want[$soname]}
    case "$soname" in
      libcudart.so.*) cmake_args+=("-DCUDA_cudart_LIBRARY=$path") ;;
      libcublas.so.*) cmake_args+=("-DCUDA_cublas_LIBRARY=$path") ;;
      libcublasLt.so.*) cmake_args+=("-DCUDA_cublasLt_LIBRARY=$path") ;;
      libcudnn.so.*) cmake_args+=("-DCUDNN_LIBRARY=$path") ;;
      libnccl.so.*) cmake_args+=("-DNCCL_LIBRARY=$path") ;;
    esac
  done
  # Headers beside the wheels' libraries; else the bundle's (scripts/gpu-bundle.sh copies them).
  for lib in cudnn nccl; do
    soname=$(printf '%s\n' "${!want[@]}" | grep "^lib$lib\.so\." || true)
    [ -n "$soname" ] || fail "PyTorch loads no lib$lib; dlscale needs it"
    include=$(dirname "$(dirname "${want[$soname]}")")/include
    [ -f "$include/$lib.h" ] || include=$bundle/cuda-headers/$lib/include
    echo "$lib: ${want[$soname]}, headers from $include"
    cmake_args+=("-D${lib^^}_INCLUDE_DIR=$include")
  done
else
  # No CUDA LibTorch here: the libtorch column stays empty and the CUDA libraries are the
  # toolkit's (cuDNN and NCCL where CMake finds them; docs/building.md).
  echo "python3's torch has no CUDA (or is missing): building without LibTorch"
  cmake_args+=(-DDLSCALE_WITH_TORCH=OFF)
fi

# The folders of the files chosen above lead the RPATH. CMake orders its own RPATH from the
# libraries it links, and LibTorch's targets name the toolkit's cuBLAS beside the wheels': that
# order has a cycle, which a reconfigure was seen to break the toolkit's way (two cuBLAS).
declare -A rpath_seen=()
for path in "${want[@]}"; do
  dir=$(dirname "$path")
  [ -n "${rpath_seen[$dir]:-}" ] || { linker_flags+=" -Wl,-rpath,$dir"; rpath_seen[$dir]=1; }
done
cmake_args+=("-DCMAKE_EXE_LINKER_FLAGS=$linker_flags")

step "configuring $build"
cmake -B "$build" "${cmake_args[@]}"
if [ ${#want[@]} -eq 0 ]; then  # the toolkit's files CMake chose are the ones to expect
  for var in CUDA_cudart_LIBRARY CUDA_cublas_LIBRARY CUDA_cublasLt_LIBRARY CUDNN_LIBRARY NCCL_LIBRARY; do
    path=$(sed -n "s/^$var:[A-Z]*=//p" "$build/CMakeCache.txt")
    [ -n "$path" ] && [ -f "$path" ] || fail "configure chose no file for $var"
    path=$(readlink -f "$path")
    want[$(objdump -p "$path" | awk '/SONAME/ {print $2}')]=$path
  done
fi

# --- 3. Build and check what the binary loads -----------------------------------------------
step "building on $(nproc) cores"
build_started=$SECONDS
# -k 0: every translation unit that fails shows in this one log, not only the first.
build_status=0
cmake --build "$build" -j "$(nproc)" -- -k 0 || build_status=$?
echo "build: $((SECONDS - build_started)) s, exit $build_status"
if [ "$build_status" -ne 0 ] && [[ " ${cmake_args[*]} " == *" -DDLSCALE_WITH_TORCH=ON "* ]]; then
  # A LibTorch newer than the one this was written against may not compile; the cuda driver
  # still gets its tests and its table column, and the run still ends as a failure.
  build=$build-without-torch
  step "building again without LibTorch in $build"
  cmake -B "$build" "${cmake_args[@]}" -DDLSCALE_WITH_TORCH=OFF
  cmake --build "$build" -j "$(nproc)" -- -k 0 || fail "the build without LibTorch fails too (above)"
elif [ "$build_status" -ne 0 ]; then
  fail "the build fails (above)"
fi

step "checking which libraries dlscale and its driver modules load"
# dlscale links MPI and HDF5; the LibTorch and CUDA drivers are modules (lib/dlscale/*.so) that
# link the CUDA libraries. One ldd listing per file, "== FILE" before each.
for file in "$build/dlscale" "$build"/lib/dlscale/*.so; do
  echo "== $file"
  ldd "$file"
done > "$out/ldd.txt"
! grep 'not found' "$out/ldd.txt" || fail "dlscale or a driver module has unresolved libraries (above; all of ldd in $out/ldd.txt)"
# loaded SONAME: every file that loads it, as "FILE PATH" lines
loaded() { awk -v s="$1" '$1 == "==" {file = $2} $1 == s {print file, $3}' "$out/ldd.txt"; }
for soname in "${!want[@]}"; do
  [ -n "$(loaded "$soname")" ] || fail "neither dlscale nor a driver module loads $soname"
  while read -r file got; do
    [ "$(readlink -f "$got")" = "${want[$soname]}" ] ||
      fail "$file loads $soname from $got, PyTorch's is ${want[$soname]}: two copies in one process"
  done < <(loaded "$soname")
  echo "one copy: $soname -> ${want[$soname]}"
done
for soname in libmpi.so.40 libhdf5_openmpi.so.103; do
  got=$(loaded "$soname" | awk -v f="$build/dlscale" '$1 == f {print $2}')
  case "$(readlink -f "$got")" in "$prefix"/*) echo "bundle: $soname -> $got" ;;
    *) fail "dlscale loads $soname from '${got}', not from the bundle in $prefix" ;; esac
done
"$build/dlscale" list | sed -n '/^Drivers/,/^$/p'

# --- 4a. Without a GPU: two ranks through the bundle's mpirun -------------------------------
if [ "$no_gpu" -eq 1 ]; then
  step "a 2-rank CPU case through the bundle's mpirun"
  rm -f "$out/no-gpu.h5"
  mpirun -np 2 "$build/dlscale" run -d reference -w fcn5:features=64,width=32 --batch 4 --warmup 1 \
    --iterations 3 --out "$out/no-gpu.h5"
  "$python" - "$out/no-gpu.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    cases = [f["cases"][k] for k in f["cases"]]
    assert len(cases) == 1 and cases[0].attrs["status"] == "ok", [dict(c.attrs) for c in cases]
    assert cases[0]["iter_time_s"].shape == (2, 3), cases[0]["iter_time_s"].shape
    print(f"read back: {f.attrs['world_size']} ranks, status ok, median step {cases[0]['summary'].attrs['step_median_s'] * 1e3:.3f} ms")
PY
  step "done: --no-gpu passed in $((SECONDS - started)) s"
  exit 0
fi

# --- 4b. On the GPU: the gpu tests, then the step-time table --------------------------------
tests_status=0 run_status=0 pytorch_status=0 table_status=0 overlap_status=0

# torch.compile's caches on disk (compiled FX graphs, AOTAutograd's joint graphs, Triton
# kernels), shared by every process of this run and kept while the machine is: the table's
# compiled rows then load what an earlier process compiled instead of compiling for minutes.
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/dlscale-gpu-inductor}
export TORCHINDUCTOR_FX_GRAPH_CACHE=1 TORCHINDUCTOR_AUTOGRAD_CACHE=1
warm_pid=""
warm_log=$prefix/compile-warm-up.log
if [[ " $stages " == *" tests "* && " $stages " == *" table "* && ",$modes," == *",compile,"* ]]; then
  # While the tests run (nothing is timed then), one process per table case and precision
  # compiles its network once (COMPILE_JOBS at a time, 2 compile workers each, so that they and
  # the tests share the cores; each at most 900 s), filling the caches. The table waits for them
  # before it times.
  step "compiling the table's networks with torch.compile in the background"
  for case in $table_cases; do
    for precision in ${precisions//,/ }; do echo "${case%%:*} ${case#*:} $precision"; done
  done | TORCHINDUCTOR_COMPILE_THREADS=2 xargs -P "${COMPILE_JOBS:-6}" -L 1 sh -c 'timeout 900 "$0" \
    bench/pytorch_eager.py --dlscale "$1" -w "$2" --batch "$3" --precision "$4" --modes compile --warmup 1 \
    --iterations 1 2>&1 | grep -v "\"gemm\""' "$python" "$build/dlscale" > "$warm_log" &
  warm_pid=$!
fi

if [[ " $stages " == *" tests "* ]]; then
  step "tests labelled gpu"
  # Side by side (the slow tests are split into shards: tests/CMakeLists.txt; one GPU shared by
  # several processes needs the GPU's compute mode Default, as machines come), the fault tests
  # apart. Each test at most its own TIMEOUT (tests/CMakeLists.txt: the conformance shards 600 s,
  # gpu_e2e's 900, the others 300), so that one stuck test cannot take the whole device call.
  ctest --test-dir "$build" -L gpu ${TESTS_FILTER:+-R "$TESTS_FILTER"} -j "${TEST_JOBS:-8}" --output-on-failure \
    > "$out/tests.log" 2>&1 || tests_status=$?
  tail -n 25 "$out/tests.log"
fi

if [ -n "$warm_pid" ]; then
  step "waiting for the background compiles"
  wait "$warm_pid" || true
  # Each case's first compiled step with the caches empty, on cores and a GPU shared with the
  # tests; the table's own compile_s are then what a warm cache costs.
  cat "$warm_log"
  # Kept: the compiled code. Dropped: the Triton launch configurations Inductor chose by timing
  # its kernels on the GPU the tests were using, so that the table chooses them on a quiet one.
  find "$TORCHINDUCTOR_CACHE_DIR" -name '*.best_config' -delete
fi

if [[ " $stages " == *" table "* ]]; then
step "step times: cuda, LibTorch CUDA, PyTorch eager"
drivers=$("$build/dlscale" list | awk '/^Drivers/ {on = 1; next} /^$/ {on = 0} on && $2 ~ /cuda/ {print $1}' | paste -sd, -)
config=$out/gpu-check.toml
{
  echo "driver = [$(echo "$drivers" | sed 's/[^,]*/"&"/g')]"
  echo "device = \"cuda\""
  echo "precision = [$(echo "$precisions" | sed 's/[^,]*/"&"/g')]"
  echo "warmup = $warmup"
  echo "iterations = $iterations"
  for case in $table_cases; do
    printf '[[matrix]]\nworkload = "%s"\nbatch = [%s]\n' "${case%%:*}" "${case#*:}"
  done
} > "$config"
"$build/dlscale" run --config "$config" --out "$out/gpu-check.h5" --overwrite || run_status=$?
"$python" bench/pytorch_eager.py --dlscale "$build/dlscale" --cases-from "$out/gpu-check.h5" \
  --modes "$modes" --warmup "$warmup" --iterations "$iterations" > "$out/pytorch.jsonl" || pytorch_status=$?
"$python" bench/gpu_step_table.py "$out/gpu-check.h5" "$out/pytorch.jsonl" | tee "$out/table.txt" ||
  table_status=$?
fi

if [[ " $stages " == *" overlap "* ]]; then
  step "gradient buckets on the NCCL side stream against one all-reduce after backward (one GPU)"
  drivers=$("$build/dlscale" list | awk '/^Drivers/ {on = 1; next} /^$/ {on = 0} on && $2 ~ /cuda/ {print $1}' | paste -sd, -)
  # The benchmarks are off in the build above (step 4), so that none of them can fail it: this
  # one is built now, on its own, and its failure fails this stage alone.
  if cmake -DDLSCALE_BUILD_BENCH=ON "$build" > /dev/null && cmake --build "$build" --target bench_overlap_vs_blocking; then
    "$build/bench/bench_overlap_vs_blocking" --device cuda --drivers "$drivers" \
      --cases "fcn5:features=8192;width=2048:32,resnet50:64" --warmup 3 --iterations 10 | tee "$out/overlap.txt" ||
      overlap_status=$?
  else
    overlap_status=1
  fi
fi

step "done in $((SECONDS - started)) s"
if [ "$build_status" -ne 0 ] || [ "$tests_status" -ne 0 ] || [ "$run_status" -ne 0 ] || [ "$pytorch_status" -ne 0 ] || [ "$table_status" -ne 0 ] ||
  [ "$overlap_status" -ne 0 ]; then
  fail "build exit $build_status, gpu tests exit $tests_status, dlscale run exit $run_status, PyTorch eager exit $pytorch_status, table exit $table_status, overlap bench exit $overlap_status"
fi
