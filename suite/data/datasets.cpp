// The dataset spec parser: kind, path, optional split; each kind goes to its reader.
#include "suite/data/datasets.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "io/token_file.h"
#include "suite/process/read_guard.h"
#include "workloads/catalog.h"
#include "workloads/data/cifar10.h"
#include "workloads/data/imdb.h"
#include "workloads/data/mnist.h"

namespace dlscale {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Splits "DIR[:test|:train]". Only a trailing split word is taken off, so a directory whose
/// name holds a colon elsewhere still works.
std::pair<std::string, DataSplit> split_suffix(const std::string& rest) {
  for (const auto& [suffix, split] : {std::pair{":test", DataSplit::kTest}, std::pair{":train", DataSplit::kTrain}}) {
    if (ends_with(rest, suffix)) return {rest.substr(0, rest.size() - std::string(suffix).size()), split};
  }
  return {rest, DataSplit::kTrain};
}

/// "imdb:DIR[:test][:vocab=V,seq=T]": the sizes default to the catalog's imdb_lstm, so that
/// `imdb:DIR` feeds `-w imdb_lstm` as it is; the options segment may stand before or after the
/// split word (a harness that derives the test set appends ":test").
std::unique_ptr<Dataset> open_imdb(const std::string& spec, std::string rest) {
  const Workload lstm = make_workload("imdb_lstm");
  int64_t vocab = lstm.vocab, seq = lstm.input_shape.at(0);
  auto [dir, split] = split_suffix(std::move(rest));
  const size_t colon = dir.rfind(':');
  if (colon != std::string::npos && dir.find('=', colon) != std::string::npos) {
    const std::string options = dir.substr(colon + 1);
    dir = dir.substr(0, colon);
    if (split == DataSplit::kTrain) {
      auto [bare, inner] = split_suffix(dir);
      dir = std::move(bare);
      split = inner;
    }
    size_t start = 0;
    while (start <= options.size()) {
      const size_t comma = std::min(options.find(',', start), options.size());
      const std::string item = options.substr(start, comma - start);
      const size_t eq = item.find('=');
      const std::string key = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
      int64_t parsed = 0;
      size_t used = 0;
      try {
        parsed = std::stoll(value, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if ((key != "vocab" && key != "seq") || value.empty() || used != value.size()) {
        throw std::invalid_argument(
            fmt::format("dataset '{}': option '{}' is not vocab=INTEGER or seq=INTEGER", spec, item));
      }
      (key == "vocab" ? vocab : seq) = parsed;
      start = comma + 1;
    }
  }
  if (dir.empty()) throw std::invalid_argument(fmt::format("dataset '{}' names no directory", spec));
  return read_imdb(dir, split, vocab, seq);
}

/// The kinds that ship a training and a test split (DIR[:test]): what open_dataset reads with a
/// split and what test_dataset_spec derives a test set for, kept as one list.
bool has_splits(const std::string& kind) { return kind == "mnist" || kind == "cifar10"; }

}  // namespace

std::unique_ptr<Dataset> open_dataset(const std::string& spec) {
  const size_t colon = spec.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size()) {
    throw std::invalid_argument(fmt::format("dataset '{}' is not KIND:PATH (accepted: {})", spec, kDatasetSpecHelp));
  }
  const std::string kind = spec.substr(0, colon), rest = spec.substr(colon + 1);
  if (has_splits(kind)) {
    const auto [dir, split] = split_suffix(rest);
    if (dir.empty()) throw std::invalid_argument(fmt::format("dataset '{}' names no directory", spec));
    return kind == "mnist" ? read_mnist(dir, split) : read_cifar10(dir, split);
  }
  if (kind == "imdb") return open_imdb(spec, rest);
  if (kind == "tokens") {
    // A damaged file can stop HDF5 inside one call for ever: the guard then ends the job, naming
    // the file, as bad input.
    const ReadGuard reading(fmt::format("dlscale: error: --data {}", spec), read_stall_seconds());
    TokenData data = read_token_file(rest);
    return std::make_unique<TokenDataset>("tokens:" + rest, std::move(data.tokens), std::move(data.labels), data.vocab,
                                          data.seq_len, data.label_per_step);
  }
  throw std::invalid_argument(
      fmt::format("unknown dataset kind '{}' in '{}' (accepted: {})", kind, spec, kDatasetSpecHelp));
}

std::string test_dataset_spec(const std::string& train_spec) {
  const size_t colon = train_spec.find(':');
  const std::string kind = colon == std::string::npos ? train_spec : train_spec.substr(0, colon);
  if (colon != std::string::npos && has_splits(kind)) {
    const auto [dir, split] = split_suffix(train_spec.substr(colon + 1));
    if (split == DataSplit::kTest) {
      throw std::invalid_argument(
          fmt::format("'{}' is a test set: give the training set ({}:{}), its test set is taken for testing",
                      train_spec, kind, dir));
    }
    return fmt::format("{}:{}:test", kind, dir);
  }
  if (kind == "imdb") {
    // imdb:DIR[:test][:vocab=V,seq=T] reads ":test" before or after its options.
    const bool ends_in_test = train_spec.size() >= 5 && train_spec.compare(train_spec.size() - 5, 5, ":test") == 0;
    if (ends_in_test || train_spec.find(":test:") != std::string::npos) {
      throw std::invalid_argument(
          fmt::format("'{}' is a test set: give the training set, its test set is taken for testing", train_spec));
    }
    return train_spec + ":test";
  }
  throw std::invalid_argument(fmt::format(
      "'{}' has no labelled test set to measure accuracy on (accuracy mode takes mnist:DIR, cifar10:DIR or imdb:DIR)",
      train_spec));
}

int64_t DatasetSizes::operator()(const std::string& spec) {
  auto it = sizes_.find(spec);
  if (it == sizes_.end()) it = sizes_.emplace(spec, open_dataset(spec)->size()).first;
  return it->second;
}

}  // namespace dlscale
