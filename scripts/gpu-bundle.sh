#!/usr/bin/env bash
# Fills .gpu-bundle/ (git-ignored) with what a bare GPU machine lacks to build and test dlscale:
# Debian 12 packages of Open MPI, parallel HDF5, CLI11, toml++, fmt and GoogleTest with every
# run-time library they need beyond glibc and libstdc++, and the cuDNN and NCCL headers of this
# machine's CUDA (used there only where the machine's pip wheels ship none). scripts/gpu-check.sh
# unpacks it on the GPU machine; docs/cuda.md says how to carry it. Run it here, where Debian's
# archive is reachable. Idempotent: packages already in the bundle at their current version are
# kept, stale ones are removed, and MANIFEST (name, version, sha256) is rewritten.
set -euo pipefail
cd "$(dirname "$0")/.."

bundle=.gpu-bundle
limit_mib=40
cuda_include=${CUDA_HOME:-/usr/local/cuda}/include

# Development packages: taken alone (their own dependencies are Fortran, C++ and hl bindings,
# other -dev packages and documentation, none of which dlscale's build uses).
dev_packages=(libopenmpi-dev libhdf5-openmpi-dev libcli11-dev libtomlplusplus-dev libfmt-dev libgtest-dev)
# Run-time packages: taken with everything they depend on, recursively, except the base below.
runtime_packages=(openmpi-bin libopenmpi3 libhdf5-openmpi-103-1 libfmt9 libtomlplusplus3)
# The base every glibc Linux with a C++ compiler has; a second copy of these in one process would
# do harm, so the machine's own are used.
base_packages=(libc6 libgcc-s1 libstdc++6 zlib1g libcrypt1 debconf dpkg perl-base libzstd1 liblzma5
               libselinux1 libpcre2-8-0 libsystemd0 libudev1 libcap2 libgcrypt20 libgpg-error0 liblz4-1
               libdb5.3 libaudit1 libaudit-common libcap-ng0 tar gcc-12-base sensible-utils lsb-base
               openssh-client adduser passwd login libpam0g libpam-modules libpam-runtime)

if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
  echo "gpu-bundle: needs Debian's apt-get and dpkg-deb (run it on the Debian 12 development machine)" >&2
  exit 2
fi
if [ ! -f "$cuda_include/cudnn.h" ] || [ ! -f "$cuda_include/nccl.h" ]; then
  echo "gpu-bundle: no cudnn.h and nccl.h under $cuda_include (set CUDA_HOME)" >&2
  exit 2
fi
if [ -z "$(apt-cache policy libopenmpi3 | awk '/Candidate:/ {print $2}' | grep -v none)" ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
fi

is_root() {
  local p
  for p in "${dev_packages[@]}" "${runtime_packages[@]}"; do [ "$1" = "$p" ] && return 0; done
  return 1
}

is_base() {
  local p
  for p in "${base_packages[@]}"; do [ "$1" = "$p" ] && return 0; done
  return 1
}

# The run-time closure: breadth first over Depends and Pre-Depends, one apt-cache call per level,
# the first of each group of alternatives, virtual packages (<name>) skipped.
declare -A wanted=()
for p in "${dev_packages[@]}"; do wanted[$p]=dev; done
frontier=("${runtime_packages[@]}")
while [ ${#frontier[@]} -gt 0 ]; do
  for p in "${frontier[@]}"; do wanted[$p]=run; done
  next=()
  alternative=0
  while read -r kind dep; do
    case "$kind" in
      "|Depends:" | "|PreDepends:") first=$((alternative == 0)); alternative=1 ;;
      Depends: | PreDepends:) first=$((alternative == 0)); alternative=0 ;;
      *) alternative=0; continue ;;  # the next package's name
    esac
    [ "$first" -eq 1 ] || continue
    case "$dep" in "<"*) continue ;; esac
    dep=${dep%%:*}  # libfoo:any -> libfoo
    if ! is_base "$dep" && [ "${wanted[$dep]:-}" != run ]; then next+=("$dep"); fi
  done < <(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
             --no-enhances "${frontier[@]}")
  frontier=()
  if [ ${#next[@]} -gt 0 ]; then mapfile -t frontier < <(printf '%s\n' "${next[@]}" | sort -u); fi
done

# Candidate versions, in one call.
declare -A candidate=()
while read -r p v; do candidate[$p]=$v; done < <(apt-cache policy "${!wanted[@]}" |
  awk '/^[^ ]/ {sub(":$", "", $1); p = $1} /^  Candidate:/ {print p, $2}')

mkdir -p "$bundle/debs"
declare -A keep=()  # folder/file names of the current versions
missing=()          # "folder name=version" of those not downloaded yet
# The packages asked for go to debs/, what they depend on to deps/: gpu-check.sh unpacks a deps/
# package only where the machine lacks one of its libraries, so that the machine's own (usually
# newer) copies of common libraries (libssl, libcurl, libxml2, …) stay the ones it loads.
mkdir -p "$bundle/deps"
for p in "${!wanted[@]}"; do
  version=${candidate[$p]:-}
  if [ -z "$version" ] || [ "$version" = "(none)" ]; then
    echo "gpu-bundle: Debian has no package $p" >&2
    exit 1
  fi
  folder=deps
  is_root "$p" && folder=debs
  present=""
  for arch in amd64 all; do
    file="$folder/${p}_${version//:/%3a}_$arch.deb"
    keep[$file]=1
    [ -f "$bundle/$file" ] && present=1
  done
  [ -n "$present" ] || missing+=("$folder $p=$version")
done
for folder in debs deps; do  # one download per folder
  mapfile -t get < <(printf '%s\n' "${missing[@]}" | awk -v f="$folder" '$1 == f {print $2}')
  if [ ${#get[@]} -gt 0 ]; then (cd "$bundle/$folder" && apt-get download -qq "${get[@]}"); fi
done
for f in "$bundle"/debs/*.deb "$bundle"/deps/*.deb; do
  [ -n "${keep[$(basename "$(dirname "$f")")/$(basename "$f")]:-}" ] || rm -f "$f"
done

# cuDNN and NCCL headers, as a fallback for wheels that ship none.
rm -rf "$bundle/cuda-headers"
mkdir -p "$bundle/cuda-headers/cudnn/include" "$bundle/cuda-headers/nccl/include"
cp "$cuda_include"/cudnn*.h "$bundle/cuda-headers/cudnn/include/"
cp "$cuda_include/nccl.h" "$bundle/cuda-headers/nccl/include/"
cudnn_version=$(awk '/define CUDNN_(MAJOR|MINOR|PATCHLEVEL) / {printf "%s%s", sep, $3; sep="."}' "$cuda_include/cudnn_version.h")
nccl_version=$(awk '/define NCCL_(MAJOR|MINOR|PATCH) / {printf "%s%s", sep, $3; sep="."}' "$cuda_include/nccl.h")

{
  echo "# dlscale GPU bundle, made by scripts/gpu-bundle.sh on $(date -u +%Y-%m-%dT%H:%MZ) from $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "# name version sha256 (cuda-headers: version of the headers, sha256 of their concatenation)"
  for f in "$bundle"/debs/*.deb "$bundle"/deps/*.deb; do
    echo "$(dpkg-deb -f "$f" Package) $(dpkg-deb -f "$f" Version) $(sha256sum "$f" | cut -d' ' -f1)"
  done
  echo "cudnn-headers $cudnn_version $(cat "$bundle"/cuda-headers/cudnn/include/*.h | sha256sum | cut -d' ' -f1)"
  echo "nccl-headers $nccl_version $(sha256sum "$bundle/cuda-headers/nccl/include/nccl.h" | cut -d' ' -f1)"
} > "$bundle/MANIFEST"

size_kib=$(du -sk "$bundle" | cut -f1)
echo "gpu-bundle: $(ls "$bundle"/debs/*.deb | wc -l) packages and $(ls "$bundle"/deps/*.deb | wc -l) dependencies, cuDNN $cudnn_version and NCCL $nccl_version headers," \
     "$((size_kib / 1024)) MiB in $bundle (MANIFEST lists them)"
if [ "$size_kib" -gt $((limit_mib * 1024)) ]; then
  echo "gpu-bundle: $((size_kib / 1024)) MiB is over the ${limit_mib} MiB that may travel beside the tree" >&2
  exit 1
fi
