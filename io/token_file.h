// Token sequences (PTB, IMDB, …) in one HDF5 file: the documented layout dlscale reads for real
// token data. HDF5 is io/'s to touch, so this reader hands plain vectors to workloads/'
// TokenDataset (suite/data/datasets.cpp joins the two).
//
//   /tokens              int64 [N, T]  token ids in [0, vocab)
//   /labels              int64 [N]     one class per sequence (IMDB: 0 negative, 1 positive), or
//                        int64 [N, T]  one label per step (language models: the next token's id)
//   root attribute vocab integer       the vocabulary size
//
// Any integer type is accepted for the datasets and the attribute (h5py writes int32 as readily
// as int64); values are converted to int64 on reading. Ranges (ids < vocab, labels >= 0) are
// checked by TokenDataset, which every reader of this file goes through.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlscale {

/// The content of a token file.
struct TokenData {
  int64_t samples = 0;          ///< N
  int64_t seq_len = 0;          ///< T
  int64_t vocab = 0;            ///< the root attribute `vocab`
  bool label_per_step = false;  ///< /labels is [N, T] rather than [N]
  std::vector<int64_t> tokens;  ///< [N, T] row-major
  std::vector<int64_t> labels;  ///< [N], or [N, T] when label_per_step
};

/// Reads a token file. Throws std::invalid_argument naming the file and the problem: no such
/// file, not HDF5, /tokens or /labels missing, not integers or of the wrong rank or shape, the
/// `vocab` attribute missing or not one positive integer, no sequences.
TokenData read_token_file(const std::string& path);

/// Writes `data` in the layout above, replacing any file at `path`. Throws
/// std::invalid_argument when the vectors do not match samples, seq_len and label_per_step, and
/// h5::H5Error when HDF5 fails. Value ranges are not checked, so tests can write bad files.
void write_token_file(const std::string& path, const TokenData& data);

}  // namespace dlscale
