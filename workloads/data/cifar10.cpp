// The CIFAR-10 binary reader and writer: fixed-size records, no header and no magic number, so
// the only structural checks are the record size and the label range.
#include "workloads/data/cifar10.h"

#include <filesystem>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace dlscale {

namespace {

constexpr int64_t kImageBytes = kCifar10RecordBytes - 1;

/// Appends the records of one batch file to `pixels` and `labels`.
void read_batch_file(const std::string& path, std::vector<uint8_t>& pixels, std::vector<int64_t>& labels) {
  const std::vector<uint8_t> bytes = read_binary_file(path);
  const auto size = static_cast<int64_t>(bytes.size());
  if (size == 0) throw std::invalid_argument(fmt::format("{}: empty file", path));
  if (size % kCifar10RecordBytes != 0) {
    throw std::invalid_argument(
        fmt::format("{}: truncated: {} bytes are not a whole number of {}-byte records ({} full records and {} bytes)",
                    path, size, kCifar10RecordBytes, size / kCifar10RecordBytes, size % kCifar10RecordBytes));
  }
  const int64_t records = size / kCifar10RecordBytes;
  pixels.reserve(pixels.size() + static_cast<size_t>(records * kImageBytes));
  for (int64_t r = 0; r < records; ++r) {
    const auto record = bytes.begin() + r * kCifar10RecordBytes;
    const int64_t label = *record;
    if (label >= kCifar10Classes) {
      throw std::invalid_argument(fmt::format("{}: record {} has label {}, outside 0-9", path, r, label));
    }
    labels.push_back(label);
    pixels.insert(pixels.end(), record + 1, record + kCifar10RecordBytes);
  }
}

}  // namespace

std::unique_ptr<Dataset> read_cifar10(const std::string& dir, DataSplit split) {
  const bool test = split == DataSplit::kTest;
  require_directory(dir, test ? "cifar10 (test)" : "cifar10");
  std::vector<std::string> files;
  if (test) {
    files.push_back((std::filesystem::path(dir) / "test_batch.bin").string());
  } else {
    for (int i = 1; i <= 5; ++i) {
      const std::string path = (std::filesystem::path(dir) / fmt::format("data_batch_{}.bin", i)).string();
      std::error_code ec;
      if (std::filesystem::exists(path, ec)) files.push_back(path);
    }
    if (files.empty()) {
      throw std::invalid_argument(fmt::format(
          "cifar10: {} holds none of data_batch_1.bin … data_batch_5.bin (the binary version, cifar-10-batches-bin)",
          dir));
    }
  }
  std::vector<uint8_t> pixels;
  std::vector<int64_t> labels;
  for (const std::string& path : files) read_batch_file(path, pixels, labels);
  return std::make_unique<ImageDataset>(
      fmt::format("cifar10:{} ({})", dir, test ? "test" : "train"), std::vector<int64_t>{3, 32, 32}, std::move(pixels),
      std::move(labels), kCifar10Classes, std::vector<float>(std::begin(kCifar10Mean), std::end(kCifar10Mean)),
      std::vector<float>(std::begin(kCifar10Std), std::end(kCifar10Std)));
}

void write_cifar10_batch(const std::string& path, const std::vector<uint8_t>& images,
                         const std::vector<uint8_t>& labels) {
  if (static_cast<int64_t>(images.size()) != static_cast<int64_t>(labels.size()) * kImageBytes) {
    throw std::invalid_argument(
        fmt::format("write_cifar10_batch: {} pixel bytes are not {} images of 3x32x32", images.size(), labels.size()));
  }
  std::vector<uint8_t> out;
  out.reserve(labels.size() * static_cast<size_t>(kCifar10RecordBytes));
  for (size_t i = 0; i < labels.size(); ++i) {
    out.push_back(labels[i]);
    const auto image = images.begin() + static_cast<std::ptrdiff_t>(i * static_cast<size_t>(kImageBytes));
    out.insert(out.end(), image, image + kImageBytes);
  }
  write_binary_file(path, out);
}

}  // namespace dlscale
