// The aclImdb reader: the vocabulary file gives each word its rank, every review is read whole
// into memory and turned into a fixed-length id sequence, so that batches do no I/O.
#include "workloads/data/imdb.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

namespace dlscale {

namespace {

namespace fs = std::filesystem;

bool word_byte(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '\'' || c >= 0x80; }

/// Word -> rank (1-based line number). A word listed twice keeps its first (higher) rank.
std::unordered_map<std::string, int64_t> read_vocab(const std::string& path) {
  const std::vector<uint8_t> bytes = read_binary_file(path);
  std::unordered_map<std::string, int64_t> ranks;
  int64_t line = 0;
  size_t start = 0;
  while (start < bytes.size()) {
    size_t end = start;
    while (end < bytes.size() && bytes[end] != '\n') ++end;
    std::string word(bytes.begin() + static_cast<std::ptrdiff_t>(start),
                     bytes.begin() + static_cast<std::ptrdiff_t>(end));
    if (!word.empty() && word.back() == '\r') word.pop_back();
    ++line;
    ranks.emplace(std::move(word), line);
    start = end + 1;
  }
  if (ranks.empty()) throw std::invalid_argument(fmt::format("imdb: {} lists no words", path));
  return ranks;
}

/// The *.txt files of one label folder, in byte order of their names.
std::vector<fs::path> review_files(const fs::path& folder) {
  require_directory(folder.string(), "imdb");
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".txt" && it->is_regular_file(ec)) files.push_back(it->path());
  }
  if (ec) throw std::invalid_argument(fmt::format("imdb: cannot list {}: {}", folder.string(), ec.message()));
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename().string() < b.filename().string(); });
  return files;
}

}  // namespace

std::vector<std::string> imdb_words(const std::string& text) {
  static const std::string kBreak = "<br />";
  std::string lowered;
  lowered.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, kBreak.size(), kBreak) == 0) {
      lowered += ' ';
      i += kBreak.size();
      continue;
    }
    const auto c = static_cast<unsigned char>(text[i++]);
    lowered += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  std::vector<std::string> words;
  for (size_t i = 0; i < lowered.size();) {
    if (!word_byte(static_cast<unsigned char>(lowered[i]))) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < lowered.size() && word_byte(static_cast<unsigned char>(lowered[end]))) ++end;
    size_t first = i, last = end;
    while (first < last && lowered[first] == '\'') ++first;
    while (last > first && lowered[last - 1] == '\'') --last;
    if (first < last) words.push_back(lowered.substr(first, last - first));
    i = end;
  }
  return words;
}

std::unique_ptr<Dataset> read_imdb(const std::string& dir, DataSplit split, int64_t num_words, int64_t seq_len) {
  const bool test = split == DataSplit::kTest;
  if (num_words < kImdbIndexFrom) {
    throw std::invalid_argument(
        fmt::format("imdb: vocabulary limit {} leaves no room for ids 0-2 (padding, start, unknown)", num_words));
  }
  if (seq_len < 1) throw std::invalid_argument(fmt::format("imdb: sequence length {} is not positive", seq_len));
  require_directory(dir, "imdb");
  const auto ranks = read_vocab((fs::path(dir) / "imdb.vocab").string());
  const fs::path split_dir = fs::path(dir) / (test ? "test" : "train");
  require_directory(split_dir.string(), "imdb");

  std::vector<int64_t> tokens, labels;
  std::vector<int64_t> ids;
  for (const auto& [folder, label] : {std::pair{"neg", int64_t{0}}, std::pair{"pos", int64_t{1}}}) {
    for (const fs::path& file : review_files(split_dir / folder)) {
      const std::vector<uint8_t> bytes = read_binary_file(file.string());
      ids.assign(1, kImdbStart);
      for (const std::string& w : imdb_words(std::string(bytes.begin(), bytes.end()))) {
        const auto found = ranks.find(w);
        const int64_t id = found == ranks.end() ? kImdbOutOfVocabulary : found->second + kImdbIndexFrom;
        ids.push_back(id < num_words ? id : kImdbOutOfVocabulary);
      }
      // pad_sequences' defaults: pad and truncate at the front.
      const auto n = static_cast<int64_t>(ids.size());
      tokens.insert(tokens.end(), static_cast<size_t>(std::max<int64_t>(seq_len - n, 0)), kImdbPadding);
      tokens.insert(tokens.end(), ids.end() - std::min(n, seq_len), ids.end());
      labels.push_back(label);
    }
  }
  if (labels.empty()) {
    throw std::invalid_argument(
        fmt::format("imdb: {}/neg and {}/pos hold no *.txt review", split_dir.string(), split_dir.string()));
  }
  return std::make_unique<TokenDataset>(
      fmt::format("imdb:{} ({}, vocab {}, seq {})", dir, test ? "test" : "train", num_words, seq_len),
      std::move(tokens), std::move(labels), num_words, seq_len, /*label_per_step=*/false);
}

}  // namespace dlscale
