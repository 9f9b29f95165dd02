// The Large Movie Review Dataset of Maas et al. (Stanford's aclImdb directory): DIR/imdb.vocab,
// one word a line, most frequent first; DIR/train/{neg,pos}/*.txt and DIR/test/{neg,pos}/*.txt,
// one review a file. Reviews become token ids as Keras's imdb.load_data numbers them, so that a
// network trained here sees the input Kabakus's Keras and PyTorch models saw:
//   0 padding, 1 the start of a review, 2 a word out of the vocabulary, rank + 3 a word of rank
//   `rank` (1-based line number in imdb.vocab); an id at or above the vocabulary limit becomes 2.
// Each sequence is then padded or truncated at the front to a fixed length, as Keras's
// pad_sequences does by default (padding="pre", truncating="pre": a long review keeps its end).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workloads/data/dataset.h"

namespace dlscale {

/// Keras's reserved ids (imdb.load_data's start_char, oov_char, index_from).
inline constexpr int64_t kImdbPadding = 0;
inline constexpr int64_t kImdbStart = 1;
inline constexpr int64_t kImdbOutOfVocabulary = 2;
inline constexpr int64_t kImdbIndexFrom = 3;

/// The words of one review, as imdb.vocab spells them: ASCII letters lowercased, every "<br />"
/// (the files' line breaks) read as a space, and a word is a maximal run of letters, digits,
/// apostrophes and non-ASCII bytes (UTF-8 letters such as "é" stay inside their word); any other
/// character separates words, and apostrophes at either end of a word are dropped (quotes), so
/// "Don't <br />stop 'em!" gives don't, stop, em.
std::vector<std::string> imdb_words(const std::string& text);

/// Reads DIR/imdb.vocab and the reviews of DIR/train (kTrain) or DIR/test (kTest): neg/ first
/// (label 0), then pos/ (label 1), each folder's *.txt files in byte order of their names, so the
/// order is the same on every machine. Ids follow the header comment with vocabulary limit
/// `num_words` (ids in [0, num_words)) and every sequence `seq_len` long. Throws
/// std::invalid_argument naming the missing or unreadable path (a missing DIR, imdb.vocab,
/// split or label folder), and when num_words < 3 (ids 0-2 are reserved), seq_len < 1 or the split holds
/// no review.
std::unique_ptr<Dataset> read_imdb(const std::string& dir, DataSplit split, int64_t num_words, int64_t seq_len);

}  // namespace dlscale
