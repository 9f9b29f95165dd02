// Real training data in host memory behind one interface. A Dataset hands out batches in the
// same Batch form as the synthetic generator, so the runner and the drivers cannot tell the two
// apart. The file-format readers live beside it (mnist.h, cifar10.h); token files are HDF5 and
// so are read by io/ (io/token_file.h), which workloads/ may not include: suite/data/datasets.h turns
// a spec string such as "mnist:data/mnist" into a Dataset.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "workloads/data/synthetic.h"
#include "workloads/workload.h"

namespace dlscale {

/// Which half of a dataset that ships a training and a test set.
enum class DataSplit { kTrain, kTest };

/// A finite set of labelled samples held in host memory. Every sample is read once when the
/// dataset is opened, so batch() does no I/O and cannot fail on a bad file halfway through a run.
class Dataset {
 public:
  Dataset() = default;
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;
  virtual ~Dataset() = default;

  /// Where the data came from, for messages, e.g. "mnist:data/mnist (train)".
  virtual std::string name() const = 0;
  /// Number of samples; always at least 1.
  virtual int64_t size() const = 0;
  /// Dense float features (images) or int64 token ids.
  virtual InputKind input_kind() const = 0;
  /// The shape of one sample: {C, H, W} for images, {T} for token sequences.
  virtual std::vector<int64_t> sample_shape() const = 0;
  /// Every label is in [0, num_classes()).
  virtual int64_t num_classes() const = 0;
  /// Labels per sample: 1, or T when every time step has its own label (language models).
  virtual int64_t labels_per_sample() const = 0;
  /// Token data: its vocabulary size, every id is in [0, vocab()). 0 for dense data.
  virtual int64_t vocab() const = 0;
  /// The `count` samples first, first + 1, …, each index taken modulo size(): any `first`
  /// (negative included) works, and a count above size() repeats samples, so a runner can walk
  /// an epoch in fixed-size batches without special-casing its end. Throws
  /// std::invalid_argument when count < 0.
  virtual Batch batch(int64_t first, int64_t count) const = 0;
};

/// Images kept as the bytes they were stored in and normalised per channel when a batch is
/// made, x = (byte / 255 - mean[c]) / stddev[c]. Bytes take a quarter of the memory of floats
/// (CIFAR-10's 50,000 training images: 154 MB instead of 614 MB).
class ImageDataset final : public Dataset {
 public:
  /// `shape` is {C, H, W}; `pixels` [N, C, H, W] row-major; `labels` [N], each in
  /// [0, num_classes); `mean` and `stddev` have C entries. Throws std::invalid_argument, naming
  /// `name`, when the sizes disagree, the set is empty or a label is out of range.
  ImageDataset(std::string name, std::vector<int64_t> shape, std::vector<uint8_t> pixels, std::vector<int64_t> labels,
               int64_t num_classes, const std::vector<float>& mean, const std::vector<float>& stddev);

  std::string name() const override { return name_; }
  int64_t size() const override { return static_cast<int64_t>(labels_.size()); }
  InputKind input_kind() const override { return InputKind::kDense; }
  std::vector<int64_t> sample_shape() const override { return shape_; }
  int64_t num_classes() const override { return num_classes_; }
  int64_t labels_per_sample() const override { return 1; }
  int64_t vocab() const override { return 0; }
  Batch batch(int64_t first, int64_t count) const override;

 private:
  std::string name_;
  std::vector<int64_t> shape_;
  std::vector<uint8_t> pixels_;
  std::vector<int64_t> labels_;
  int64_t num_classes_;
  int64_t sample_elems_;
  int64_t plane_elems_;
  /// Per channel, the normalised value of each of the 256 byte values.
  std::vector<std::array<float, 256>> lut_;
};

/// Token sequences with one label per sequence (classification, e.g. IMDB's 0/1) or one label
/// per time step (language models: the next token's id).
class TokenDataset final : public Dataset {
 public:
  /// `tokens` [N, seq_len], ids in [0, vocab); `labels` [N] (>= 0) or, with `label_per_step`,
  /// [N, seq_len] (ids in [0, vocab)). Throws std::invalid_argument, naming `name`, when the
  /// sizes disagree, the set is empty, or an id or a label is out of range.
  TokenDataset(std::string name, std::vector<int64_t> tokens, std::vector<int64_t> labels, int64_t vocab,
               int64_t seq_len, bool label_per_step);

  std::string name() const override { return name_; }
  int64_t size() const override { return static_cast<int64_t>(tokens_.size()) / seq_len_; }
  InputKind input_kind() const override { return InputKind::kTokens; }
  std::vector<int64_t> sample_shape() const override { return {seq_len_}; }
  /// Per-step labels: vocab(). Per-sequence labels: the largest label + 1 (the file does not
  /// declare a class count; this is the smallest one that covers the data).
  int64_t num_classes() const override { return num_classes_; }
  int64_t labels_per_sample() const override { return label_per_step_ ? seq_len_ : 1; }
  int64_t vocab() const override { return vocab_; }
  Batch batch(int64_t first, int64_t count) const override;

 private:
  std::string name_;
  std::vector<int64_t> tokens_;
  std::vector<int64_t> labels_;
  int64_t vocab_;
  int64_t seq_len_;
  bool label_per_step_;
  int64_t num_classes_ = 0;
};

/// The samples `indices[0..count)` of `data`, in that order, as one batch: how an accuracy run
/// walks a shuffled epoch and a shard of a held-out set. Throws std::invalid_argument when
/// `count` is 0.
Batch gather_samples(const Dataset& data, const int64_t* indices, size_t count);

/// Throws std::invalid_argument, naming both, when `data` cannot feed `w`: dense images for a
/// token model or the reverse, a sample shape other than w.input_shape (MNIST is 1x28x28,
/// CIFAR-10 3x32x32; token sequences must be input_shape[0] long), labels per sequence for a
/// per-step model or the reverse, labels the workload's classes do not cover (binary
/// cross-entropy takes 0/1 only), or a token vocabulary larger than the workload's.
void check_fits(const Dataset& data, const Workload& w);

/// The whole content of a binary file. Throws std::invalid_argument naming the file and the
/// system's reason when it cannot be opened or read.
std::vector<uint8_t> read_binary_file(const std::string& path);

/// Writes `bytes` to `path`, replacing it. Throws std::runtime_error naming the file and the
/// system's reason on failure.
void write_binary_file(const std::string& path, const std::vector<uint8_t>& bytes);

/// Throws std::invalid_argument ("<what>: directory '<dir>' does not exist" or "… is not a
/// directory") unless `dir` is a directory; readers call it first so that a mistyped path is
/// reported as such rather than as the first file that could not be opened.
void require_directory(const std::string& dir, const std::string& what);

}  // namespace dlscale
