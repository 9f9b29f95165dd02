// Turns a dataset spec (command line, run matrix) into a Dataset. It lives in suite/ because it
// joins both sides: the image readers of workloads/data and the HDF5 token reader of io/, which
// workloads/ may not include.
#pragma once

#include <memory>
#include <string>

#include "workloads/data/dataset.h"

namespace dlscale {

/// The accepted spec forms, for help texts and messages.
inline constexpr const char* kDatasetSpecHelp = "mnist:DIR[:test], cifar10:DIR[:test], tokens:FILE.h5";

/// Opens a dataset and reads all of it into memory:
///  - "mnist:DIR": DIR/train-images-idx3-ubyte and DIR/train-labels-idx1-ubyte (IDX, uncompressed);
///    "mnist:DIR:test": the t10k-* pair;
///  - "cifar10:DIR": DIR/data_batch_1.bin … data_batch_5.bin, those that exist (at least one);
///    "cifar10:DIR:test": DIR/test_batch.bin;
///  - "tokens:FILE.h5": token sequences in the HDF5 layout of io/token_file.h.
/// A ":train" suffix is accepted as well and means the default. Throws std::invalid_argument
/// naming the file and the problem for an unknown kind, a malformed spec, a missing directory
/// or file, or a file that is not in its format.
std::unique_ptr<Dataset> open_dataset(const std::string& spec);

/// The labelled test set that goes with a training set, for accuracy runs: "mnist:DIR" (or
/// "mnist:DIR:train") -> "mnist:DIR:test", and likewise for every kind that ships a test split.
/// Throws std::invalid_argument naming the spec for a kind without a test set (tokens:FILE.h5)
/// and for a spec that already names the test split (the user gives the training set).
std::string test_dataset_spec(const std::string& train_spec);

}  // namespace dlscale
