// MNIST in the IDX format of LeCun et al.: train-images-idx3-ubyte / train-labels-idx1-ubyte
// and the t10k-* pair for the test set. Pixels are scaled to [0, 1] and then normalised with
// MNIST's training-set mean 0.1307 and standard deviation 0.3081 (the values torchvision's
// examples use), so a sample is (byte / 255 - 0.1307) / 0.3081, in [-0.4242, 2.8215].
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workloads/data/dataset.h"

namespace dlscale {

/// MNIST's per-pixel normalisation (training set statistics of pixels scaled to [0, 1]).
inline constexpr float kMnistMean = 0.1307f;
inline constexpr float kMnistStd = 0.3081f;
inline constexpr int64_t kMnistClasses = 10;

/// Reads DIR/train-images-idx3-ubyte and DIR/train-labels-idx1-ubyte (kTrain) or the
/// t10k-images-idx3-ubyte / t10k-labels-idx1-ubyte pair (kTest) into a dataset of 1 x rows x
/// cols images (28 x 28 for MNIST) with labels 0-9. The files must be uncompressed. Throws
/// std::invalid_argument naming the file and the problem: a missing directory or file, a wrong
/// magic number, a truncated or over-long file, image and label counts that differ, a label
/// outside 0-9.
std::unique_ptr<Dataset> read_mnist(const std::string& dir, DataSplit split);

/// Writes DIR/PREFIX-images-idx3-ubyte (magic 0x00000803, dims N, rows, cols) from `images`
/// [N, rows, cols] and DIR/PREFIX-labels-idx1-ubyte (magic 0x00000801, dim N) from `labels`
/// [N]; PREFIX is "train" or "t10k" for files read_mnist finds. DIR must exist. Throws
/// std::invalid_argument when the sizes disagree, std::runtime_error when a file cannot be
/// written.
void write_mnist_idx(const std::string& dir, const std::vector<uint8_t>& images, const std::vector<uint8_t>& labels,
                     const std::string& prefix, int64_t rows = 28, int64_t cols = 28);

}  // namespace dlscale
