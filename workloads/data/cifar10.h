// CIFAR-10 in its binary version (Krizhevsky's cifar-10-batches-bin): data_batch_1.bin …
// data_batch_5.bin for training, test_batch.bin for testing, each a sequence of 3073-byte
// records: one label byte (0-9), then the 32x32 red, green and blue planes, row-major. Pixels
// are scaled to [0, 1] and normalised per channel with the usual CIFAR-10 training-set means
// (0.4914, 0.4822, 0.4465) and standard deviations (0.2470, 0.2435, 0.2616).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workloads/data/dataset.h"

namespace dlscale {

/// Per-channel (R, G, B) normalisation of CIFAR-10 pixels scaled to [0, 1].
inline constexpr float kCifar10Mean[3] = {0.4914f, 0.4822f, 0.4465f};
inline constexpr float kCifar10Std[3] = {0.2470f, 0.2435f, 0.2616f};
inline constexpr int64_t kCifar10Classes = 10;
/// Bytes of one record: the label, then 3 x 32 x 32 pixels.
inline constexpr int64_t kCifar10RecordBytes = 1 + 3 * 32 * 32;

/// Reads the training batches DIR/data_batch_1.bin … data_batch_5.bin that exist, in that order
/// (at least one must; a partial download still trains), or DIR/test_batch.bin for kTest, into
/// a dataset of 3x32x32 images. Throws std::invalid_argument naming the file and the problem: a
/// missing directory or file, an empty file or one that is not a whole number of records
/// (truncated), a label outside 0-9.
std::unique_ptr<Dataset> read_cifar10(const std::string& dir, DataSplit split);

/// Writes one CIFAR-10 binary batch file at `path` from `images` [N, 3, 32, 32] and `labels`
/// [N]. Throws std::invalid_argument when the sizes disagree, std::runtime_error when the file
/// cannot be written.
void write_cifar10_batch(const std::string& path, const std::vector<uint8_t>& images,
                         const std::vector<uint8_t>& labels);

}  // namespace dlscale
