// The IDX reader and writer. IDX: a 4-byte big-endian magic number (0, 0, type 0x08 = unsigned
// byte, number of dimensions), one 4-byte big-endian size per dimension, then the data.
#include "workloads/data/mnist.h"

#include <filesystem>
#include <limits>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace dlscale {

namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension

uint32_t read_be32(const std::vector<uint8_t>& b, size_t at) {
  return (uint32_t{b[at]} << 24) | (uint32_t{b[at + 1]} << 16) | (uint32_t{b[at + 2]} << 8) | uint32_t{b[at + 3]};
}

void append_be32(std::vector<uint8_t>& b, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<uint8_t>(v >> shift));
}

/// Reads one IDX file of unsigned bytes and checks its magic number and its length against the
/// header; returns the dimensions and leaves only the data in `bytes`.
std::vector<int64_t> read_idx(const std::string& path, uint32_t magic, std::vector<uint8_t>& bytes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && std::filesystem::exists(path + ".gz", ec)) {
    throw std::invalid_argument(
        fmt::format("cannot open {}: only {}.gz exists; decompress it first (gunzip)", path, path));
  }
  bytes = read_binary_file(path);
  const size_t ndims = magic & 0xff;
  const size_t header = 4 * (1 + ndims);
  if (bytes.size() < 4) throw std::invalid_argument(fmt::format("{}: truncated: {} bytes", path, bytes.size()));
  const uint32_t found = read_be32(bytes, 0);
  if (found != magic) {
    // gzip starts with 1f 8b: the usual mistake is a compressed file renamed or half-extracted.
    const bool gzip = bytes[0] == 0x1f && bytes[1] == 0x8b;
    throw std::invalid_argument(
        fmt::format("{}: wrong magic number 0x{:08x} (expected 0x{:08x}: IDX, unsigned bytes, {} dimensions){}", path,
                    found, magic, ndims, gzip ? "; the file is gzip-compressed, gunzip it first" : ""));
  }
  if (bytes.size() < header) {
    throw std::invalid_argument(
        fmt::format("{}: truncated: {} bytes, shorter than its {}-byte header", path, bytes.size(), header));
  }
  std::vector<int64_t> dims;
  int64_t expected = 1;
  for (size_t d = 0; d < ndims; ++d) {
    dims.push_back(read_be32(bytes, 4 * (1 + d)));
    // Saturate: a corrupt header can announce more than int64 holds; any such file is truncated.
    const int64_t limit = std::numeric_limits<int64_t>::max();
    expected = dims.back() != 0 && expected > limit / dims.back() ? limit : expected * dims.back();
  }
  const auto have = static_cast<int64_t>(bytes.size() - header);
  if (have < expected) {
    throw std::invalid_argument(
        fmt::format("{}: truncated: the header promises {} data bytes, the file holds {}", path, expected, have));
  }
  if (have > expected) {
    throw std::invalid_argument(
        fmt::format("{}: {} bytes after the {} data bytes its header announces", path, have - expected, expected));
  }
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(header));
  return dims;
}

}  // namespace

std::unique_ptr<Dataset> read_mnist(const std::string& dir, DataSplit split) {
  const bool test = split == DataSplit::kTest;
  require_directory(dir, test ? "mnist (test)" : "mnist");
  const std::string prefix = test ? "t10k" : "train";
  const std::string images_path = (std::filesystem::path(dir) / (prefix + "-images-idx3-ubyte")).string();
  const std::string labels_path = (std::filesystem::path(dir) / (prefix + "-labels-idx1-ubyte")).string();
  std::vector<uint8_t> pixels, label_bytes;
  const std::vector<int64_t> image_dims = read_idx(images_path, kImagesMagic, pixels);
  const std::vector<int64_t> label_dims = read_idx(labels_path, kLabelsMagic, label_bytes);
  if (image_dims[0] != label_dims[0]) {
    throw std::invalid_argument(fmt::format("{} holds {} images but {} holds {} labels", images_path, image_dims[0],
                                            labels_path, label_dims[0]));
  }
  if (image_dims[0] == 0) throw std::invalid_argument(fmt::format("{}: holds no images", images_path));
  std::vector<int64_t> labels(label_bytes.size());
  for (size_t i = 0; i < label_bytes.size(); ++i) {
    labels[i] = label_bytes[i];
    if (labels[i] >= kMnistClasses) {
      throw std::invalid_argument(fmt::format("{}: label {} of sample {} is outside 0-9", labels_path, labels[i], i));
    }
  }
  return std::make_unique<ImageDataset>(fmt::format("mnist:{} ({})", dir, test ? "test" : "train"),
                                        std::vector<int64_t>{1, image_dims[1], image_dims[2]}, std::move(pixels),
                                        std::move(labels), kMnistClasses, std::vector<float>{kMnistMean},
                                        std::vector<float>{kMnistStd});
}

void write_mnist_idx(const std::string& dir, const std::vector<uint8_t>& images, const std::vector<uint8_t>& labels,
                     const std::string& prefix, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0 ||
      static_cast<int64_t>(images.size()) != static_cast<int64_t>(labels.size()) * rows * cols) {
    throw std::invalid_argument(fmt::format("write_mnist_idx: {} pixel bytes are not {} images of {}x{}", images.size(),
                                            labels.size(), rows, cols));
  }
  std::vector<uint8_t> out;
  out.reserve(16 + images.size());
  append_be32(out, kImagesMagic);
  append_be32(out, static_cast<uint32_t>(labels.size()));
  append_be32(out, static_cast<uint32_t>(rows));
  append_be32(out, static_cast<uint32_t>(cols));
  out.insert(out.end(), images.begin(), images.end());
  write_binary_file((std::filesystem::path(dir) / (prefix + "-images-idx3-ubyte")).string(), out);
  out.clear();
  append_be32(out, kLabelsMagic);
  append_be32(out, static_cast<uint32_t>(labels.size()));
  out.insert(out.end(), labels.begin(), labels.end());
  write_binary_file((std::filesystem::path(dir) / (prefix + "-labels-idx1-ubyte")).string(), out);
}

}  // namespace dlscale
