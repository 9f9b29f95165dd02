// The dataset spec parser: kind, path, optional split; each kind goes to its reader.
#include "suite/datasets.h"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "io/token_file.h"
#include "workloads/data/cifar10.h"
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
  if (kind == "tokens") {
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
  throw std::invalid_argument(
      fmt::format("'{}' has no labelled test set to measure accuracy on (accuracy mode takes mnist:DIR or cifar10:DIR)",
                  train_spec));
}

}  // namespace dlscale
