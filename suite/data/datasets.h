// Turns a dataset spec (command line, run matrix) into a Dataset. It lives in suite/ because it
// joins both sides: the image readers of workloads/data and the HDF5 token reader of io/, which
// workloads/ may not include.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "workloads/data/dataset.h"

namespace dlscale {

/// The accepted spec forms, for help texts and messages.
inline constexpr const char* kDatasetSpecHelp =
    "mnist:DIR[:test], cifar10:DIR[:test], imdb:DIR[:test][:vocab=V,seq=T], tokens:FILE.h5";

/// Opens a dataset and reads all of it into memory:
///  - "mnist:DIR": DIR/train-images-idx3-ubyte and DIR/train-labels-idx1-ubyte (IDX, uncompressed);
///    "mnist:DIR:test": the t10k-* pair;
///  - "cifar10:DIR": DIR/data_batch_1.bin … data_batch_5.bin, those that exist (at least one);
///    "cifar10:DIR:test": DIR/test_batch.bin;
///  - "imdb:DIR": Stanford's aclImdb directory, DIR/imdb.vocab and DIR/train/{neg,pos}/*.txt;
///    "imdb:DIR:test": DIR/test/{neg,pos}/*.txt. Reviews become ids as Keras's imdb.load_data
///    (workloads/data/imdb.h) with the vocabulary limit and sequence length of the catalog's
///    imdb_lstm (5000 words, 500 tokens) unless a ":vocab=V,seq=T" segment (either or both)
///    says otherwise, before or after ":test": `-w imdb_lstm:seq=200` takes `imdb:DIR:seq=200`;
///  - "tokens:FILE.h5": token sequences in the HDF5 layout of io/token_file.h.
/// A ":train" suffix is accepted as well and means the default. Throws std::invalid_argument
/// naming the file and the problem for an unknown kind, a malformed spec, a missing directory
/// or file, or a file that is not in its format.
std::unique_ptr<Dataset> open_dataset(const std::string& spec);

/// The labelled test set that goes with a training set, for accuracy runs: "mnist:DIR" (or
/// "mnist:DIR:train") -> "mnist:DIR:test", and likewise for every kind that ships a test split
/// (cifar10; imdb, whose ":test" is appended after any options).
/// Throws std::invalid_argument naming the spec for a kind without a test set (tokens:FILE.h5)
/// and for a spec that already names the test split (the user gives the training set).
std::string test_dataset_spec(const std::string& train_spec);

/// The number of samples of each data set a spec names, each read once (open_dataset) and only
/// its size kept: for the estimates of accuracy cases (suite/case/work_estimate.h), made before the
/// runner reads the data it trains on.
class DatasetSizes {
 public:
  int64_t operator()(const std::string& spec);

 private:
  std::map<std::string, int64_t> sizes_;
};

}  // namespace dlscale
