// The in-memory datasets (images as bytes, token sequences), the compatibility check between a
// dataset and a workload, and the small file helpers the format readers share.
#include "workloads/data/dataset.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

namespace dlscale {

namespace {

/// Closes a FILE* on scope exit; writers close explicitly first so they can check the result.
struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

/// The index of sample `first + j` wrapped into [0, n): `first` may be any value, negative too.
int64_t wrap_base(int64_t first, int64_t n) { return ((first % n) + n) % n; }

void check_count(const std::string& name, int64_t count) {
  if (count < 0) throw std::invalid_argument(fmt::format("{}: batch of {} samples requested", name, count));
}

}  // namespace

ImageDataset::ImageDataset(std::string name, std::vector<int64_t> shape, std::vector<uint8_t> pixels,
                           std::vector<int64_t> labels, int64_t num_classes, const std::vector<float>& mean,
                           const std::vector<float>& stddev)
    : name_(std::move(name)),
      shape_(std::move(shape)),
      pixels_(std::move(pixels)),
      labels_(std::move(labels)),
      num_classes_(num_classes) {
  if (shape_.size() != 3 || shape_[0] <= 0 || shape_[1] <= 0 || shape_[2] <= 0) {
    throw std::invalid_argument(fmt::format("{}: image shape {} is not C x H x W", name_, shape_text(shape_)));
  }
  plane_elems_ = shape_[1] * shape_[2];
  sample_elems_ = shape_[0] * plane_elems_;
  if (labels_.empty()) throw std::invalid_argument(fmt::format("{}: holds no images", name_));
  if (static_cast<int64_t>(pixels_.size()) != static_cast<int64_t>(labels_.size()) * sample_elems_) {
    throw std::invalid_argument(fmt::format("{}: {} pixel bytes do not make {} images of {}", name_, pixels_.size(),
                                            labels_.size(), shape_text(shape_)));
  }
  if (static_cast<int64_t>(mean.size()) != shape_[0] || static_cast<int64_t>(stddev.size()) != shape_[0]) {
    throw std::invalid_argument(fmt::format("{}: normalisation needs {} channel means and stds", name_, shape_[0]));
  }
  for (size_t i = 0; i < labels_.size(); ++i) {
    if (labels_[i] < 0 || labels_[i] >= num_classes_) {
      throw std::invalid_argument(
          fmt::format("{}: label {} of sample {} is outside [0, {})", name_, labels_[i], i, num_classes_));
    }
  }
  lut_.resize(mean.size());
  for (size_t c = 0; c < mean.size(); ++c) {
    for (int b = 0; b < 256; ++b) {
      lut_[c][static_cast<size_t>(b)] = (static_cast<float>(b) / 255.0f - mean[c]) / stddev[c];
    }
  }
}

Batch ImageDataset::batch(int64_t first, int64_t count) const {
  check_count(name_, count);
  Batch b;
  b.size = count;
  b.features.resize(static_cast<size_t>(count * sample_elems_));
  b.labels.resize(static_cast<size_t>(count));
  const int64_t n = size(), base = wrap_base(first, n);
  for (int64_t j = 0; j < count; ++j) {
    const int64_t i = (base + j) % n;
    const uint8_t* src = pixels_.data() + i * sample_elems_;
    float* dst = b.features.data() + j * sample_elems_;
    for (const std::array<float, 256>& lut : lut_) {  // one plane per channel
      for (int64_t k = 0; k < plane_elems_; ++k) *dst++ = lut[*src++];
    }
    b.labels[static_cast<size_t>(j)] = labels_[static_cast<size_t>(i)];
  }
  return b;
}

TokenDataset::TokenDataset(std::string name, std::vector<int64_t> tokens, std::vector<int64_t> labels, int64_t vocab,
                           int64_t seq_len, bool label_per_step)
    : name_(std::move(name)),
      tokens_(std::move(tokens)),
      labels_(std::move(labels)),
      vocab_(vocab),
      seq_len_(seq_len),
      label_per_step_(label_per_step) {
  if (seq_len_ <= 0) {
    throw std::invalid_argument(fmt::format("{}: sequence length {} is not positive", name_, seq_len_));
  }
  if (vocab_ <= 0) throw std::invalid_argument(fmt::format("{}: vocabulary size {} is not positive", name_, vocab_));
  if (tokens_.empty()) throw std::invalid_argument(fmt::format("{}: holds no sequences", name_));
  if (tokens_.size() % static_cast<size_t>(seq_len_) != 0) {
    throw std::invalid_argument(
        fmt::format("{}: {} token ids do not make whole sequences of {}", name_, tokens_.size(), seq_len_));
  }
  const size_t n = tokens_.size() / static_cast<size_t>(seq_len_);
  const size_t want = label_per_step_ ? tokens_.size() : n;
  if (labels_.size() != want) {
    throw std::invalid_argument(fmt::format("{}: {} labels for {} sequences of {} steps (expected {}, {})", name_,
                                            labels_.size(), n, seq_len_, want,
                                            label_per_step_ ? "one per step" : "one per sequence"));
  }
  const auto where = [&](size_t flat) {
    return fmt::format("sequence {}, step {}", flat / static_cast<size_t>(seq_len_),
                       flat % static_cast<size_t>(seq_len_));
  };
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i] < 0 || tokens_[i] >= vocab_) {
      throw std::invalid_argument(
          fmt::format("{}: token id {} at {} is outside [0, vocab {})", name_, tokens_[i], where(i), vocab_));
    }
  }
  for (size_t i = 0; i < labels_.size(); ++i) {
    const int64_t l = labels_[i];
    if (label_per_step_ && (l < 0 || l >= vocab_)) {
      throw std::invalid_argument(
          fmt::format("{}: label {} at {} is outside [0, vocab {})", name_, l, where(i), vocab_));
    }
    if (!label_per_step_ && l < 0) {
      throw std::invalid_argument(fmt::format("{}: label {} of sequence {} is negative", name_, l, i));
    }
    if (!label_per_step_ && l == std::numeric_limits<int64_t>::max()) {
      throw std::invalid_argument(fmt::format("{}: label {} of sequence {} is too large for a class", name_, l, i));
    }
    if (!label_per_step_) num_classes_ = std::max(num_classes_, l + 1);
  }
  if (label_per_step_) num_classes_ = vocab_;
}

Batch TokenDataset::batch(int64_t first, int64_t count) const {
  check_count(name_, count);
  Batch b;
  b.size = count;
  const int64_t lps = labels_per_sample();
  b.tokens.resize(static_cast<size_t>(count * seq_len_));
  b.labels.resize(static_cast<size_t>(count * lps));
  const int64_t n = size(), base = wrap_base(first, n);
  for (int64_t j = 0; j < count; ++j) {
    const int64_t i = (base + j) % n;
    std::copy_n(tokens_.begin() + i * seq_len_, seq_len_, b.tokens.begin() + j * seq_len_);
    std::copy_n(labels_.begin() + i * lps, lps, b.labels.begin() + j * lps);
  }
  return b;
}

Batch gather_samples(const Dataset& data, const int64_t* indices, size_t count) {
  if (count == 0) throw std::invalid_argument(fmt::format("{}: a batch of no samples requested", data.name()));
  Batch out;
  out.size = static_cast<int64_t>(count);
  for (size_t i = 0; i < count; ++i) {
    // batch() of one sample is the one place that knows how a sample is stored and normalised.
    const Batch one = data.batch(indices[i], 1);
    if (i == 0) {
      out.features.reserve(one.features.size() * count);
      out.tokens.reserve(one.tokens.size() * count);
      out.labels.reserve(one.labels.size() * count);
    }
    out.features.insert(out.features.end(), one.features.begin(), one.features.end());
    out.tokens.insert(out.tokens.end(), one.tokens.begin(), one.tokens.end());
    out.labels.insert(out.labels.end(), one.labels.begin(), one.labels.end());
  }
  return out;
}

void check_fits(const Dataset& data, const Workload& w) {
  const auto refuse = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("dataset {} does not fit workload '{}': {}", data.name(), w.name, why));
  };
  const auto kind_text = [](InputKind k) { return k == InputKind::kDense ? "dense images" : "token sequences"; };
  if (data.input_kind() != w.input_kind) {
    refuse(fmt::format("it holds {}, the workload takes {}", kind_text(data.input_kind()), kind_text(w.input_kind)));
  }
  const std::vector<int64_t> shape = data.sample_shape();
  if (data.input_kind() == InputKind::kTokens) {
    if (w.input_shape.size() != 1 || shape.at(0) != w.input_shape[0]) {
      refuse(fmt::format("its sequences are {} tokens long, the workload takes {}", shape.at(0),
                         shape_text(w.input_shape)));
    }
    if (data.vocab() > w.vocab) {
      refuse(fmt::format("its vocabulary has {} ids, the workload's only {}", data.vocab(), w.vocab));
    }
  } else if (shape != w.input_shape) {
    refuse(fmt::format("its samples are {}, the workload takes {}", shape_text(shape), shape_text(w.input_shape)));
  }
  if (data.labels_per_sample() != w.labels_per_sample()) {
    refuse(w.label_per_step ? "it has one label per sequence, the workload needs one per time step"
                            : "it has one label per time step, the workload needs one per sample");
  }
  if (w.loss == LossKind::kSigmoidBinaryCrossEntropy) {
    if (data.num_classes() > 2) {
      refuse(fmt::format("binary cross-entropy takes labels 0 and 1, the data has labels up to {}",
                         data.num_classes() - 1));
    }
  } else if (data.num_classes() > w.num_classes) {
    refuse(fmt::format("its labels go up to {}, the workload has {} classes", data.num_classes() - 1, w.num_classes));
  }
}

std::vector<uint8_t> read_binary_file(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "rb"));
  if (!f) throw std::invalid_argument(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  std::vector<uint8_t> bytes;
  uint8_t chunk[1 << 16];
  for (;;) {
    const size_t got = std::fread(chunk, 1, sizeof chunk, f.get());
    bytes.insert(bytes.end(), chunk, chunk + got);
    if (got < sizeof chunk) break;
  }
  if (std::ferror(f.get()) != 0) {
    throw std::invalid_argument(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  return bytes;
}

void write_binary_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  FilePtr f(std::fopen(path.c_str(), "wb"));
  if (!f) throw std::runtime_error(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  // (fwrite's buffer must not be null, which an empty vector's data() may be)
  if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f.get()) != bytes.size()) {
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
  // fclose flushes, so a full disk may only show up here.
  if (std::fclose(f.release()) != 0) {
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
}

void require_directory(const std::string& dir, const std::string& what) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(dir, ec);
  if (st.type() == std::filesystem::file_type::not_found) {
    throw std::invalid_argument(fmt::format("{}: directory '{}' does not exist", what, dir));
  }
  if (ec) throw std::invalid_argument(fmt::format("{}: cannot access '{}': {}", what, dir, ec.message()));
  if (!std::filesystem::is_directory(st)) {
    throw std::invalid_argument(fmt::format("{}: '{}' is not a directory", what, dir));
  }
}

}  // namespace dlscale
