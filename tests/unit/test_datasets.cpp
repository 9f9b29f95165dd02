// Datasets: small MNIST IDX, CIFAR-10 binary, aclImdb review folders and HDF5 token files written with the project's
// own writers into a temporary directory, read back through open_dataset; their normalisation, wrap-around batching,
// the fit check against catalog workloads, and every reader error. The MNIST files that scripts/fetch-mnist.sh
// fetches are checked when present.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/h5.h"
#include "io/token_file.h"
#include "suite/data/datasets.h"
#include "workloads/catalog.h"
#include "workloads/data/cifar10.h"
#include "workloads/data/dataset.h"
#include "workloads/data/imdb.h"
#include "workloads/data/mnist.h"

namespace dlscale {
namespace {

namespace fs = std::filesystem;

/// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "dlscale-datasets-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = tmpl;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

/// Expects `f` to throw std::invalid_argument whose message contains every one of `parts`.
template <typename F>
void expect_invalid(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one mentioning " << parts.front();
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

constexpr int64_t kMnistPixels = int64_t{28} * 28;

/// Sample i, pixel k of the test images: every byte value occurs, and samples differ.
uint8_t pixel(int64_t i, int64_t k) { return static_cast<uint8_t>((i * 37 + k * 11) % 256); }

std::vector<uint8_t> mnist_images(int64_t n) {
  std::vector<uint8_t> v(static_cast<size_t>(n * kMnistPixels));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < kMnistPixels; ++k) v[static_cast<size_t>(i * kMnistPixels + k)] = pixel(i, k);
  }
  return v;
}

std::vector<uint8_t> labels_mod10(int64_t n, int64_t offset = 0) {
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<uint8_t>((i + offset) % 10);
  return v;
}

float mnist_value(uint8_t byte) { return (static_cast<float>(byte) / 255.0f - 0.1307f) / 0.3081f; }

TEST(MnistDataset, ReadsBackShapesNormalisedValuesAndLabels) {
  TempDir dir;
  const int64_t n = 13;
  write_mnist_idx(dir.path(), mnist_images(n), labels_mod10(n, 3), "train");
  const auto data = open_dataset("mnist:" + dir.path());
  EXPECT_EQ(data->size(), n);
  EXPECT_EQ(data->input_kind(), InputKind::kDense);
  EXPECT_EQ(data->sample_shape(), (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(data->num_classes(), 10);
  EXPECT_EQ(data->labels_per_sample(), 1);
  EXPECT_NE(data->name().find(dir.path()), std::string::npos);

  const Batch b = data->batch(0, n);
  EXPECT_EQ(b.size, n);
  ASSERT_EQ(b.features.size(), static_cast<size_t>(n * kMnistPixels));
  EXPECT_TRUE(b.tokens.empty());
  ASSERT_EQ(b.labels.size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(b.labels[static_cast<size_t>(i)], (i + 3) % 10);
    for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{400}, kMnistPixels - 1}) {
      EXPECT_FLOAT_EQ(b.features[static_cast<size_t>(i * kMnistPixels + k)], mnist_value(pixel(i, k)));
    }
  }
  // The ends of the range, as documented in mnist.h.
  EXPECT_NEAR(mnist_value(0), -0.4242, 1e-4);
  EXPECT_NEAR(mnist_value(255), 2.8215, 1e-4);
}

TEST(MnistDataset, TestSuffixReadsTheT10kFiles) {
  TempDir dir;
  write_mnist_idx(dir.path(), mnist_images(5), labels_mod10(5), "train");
  write_mnist_idx(dir.path(), mnist_images(3), labels_mod10(3, 7), "t10k");
  const auto test = open_dataset("mnist:" + dir.path() + ":test");
  EXPECT_EQ(test->size(), 3);
  EXPECT_EQ(test->batch(0, 3).labels, (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(open_dataset("mnist:" + dir.path() + ":train")->size(), 5);
  EXPECT_EQ(open_dataset("mnist:" + dir.path())->size(), 5);
}

TEST(MnistDataset, BatchesWrapAroundTheEnd) {
  TempDir dir;
  const int64_t n = 13;
  write_mnist_idx(dir.path(), mnist_images(n), labels_mod10(n), "train");
  const auto data = open_dataset("mnist:" + dir.path());
  const Batch tail = data->batch(11, 5);  // samples 11, 12, 0, 1, 2
  EXPECT_EQ(tail.labels, (std::vector<int64_t>{1, 2, 0, 1, 2}));
  EXPECT_FLOAT_EQ(tail.features[2 * kMnistPixels + 5], mnist_value(pixel(0, 5)));
  EXPECT_FLOAT_EQ(tail.features[4 * kMnistPixels + 9], mnist_value(pixel(2, 9)));
  EXPECT_EQ(data->batch(-1, 2).labels, (std::vector<int64_t>{2, 0}));      // sample 12, then 0
  EXPECT_EQ(data->batch(n * 3 + 4, 1).labels, (std::vector<int64_t>{4}));  // first beyond the end
  const Batch twice = data->batch(0, 2 * n + 1);                           // more than the whole set
  EXPECT_EQ(twice.size, 2 * n + 1);
  EXPECT_EQ(twice.labels[static_cast<size_t>(n)], 0);
  EXPECT_EQ(twice.labels[static_cast<size_t>(2 * n)], 0);
  EXPECT_EQ(data->batch(5, 0).size, 0);
  EXPECT_THROW(data->batch(0, -1), std::invalid_argument);
}

TEST(MnistDataset, FitsTheMnistWorkloadsOnly) {
  TempDir dir;
  write_mnist_idx(dir.path(), mnist_images(4), labels_mod10(4), "train");
  const auto data = open_dataset("mnist:" + dir.path());
  for (const char* name : {"mnist_cnn", "mnist_fnn", "mnist_cnn_nayak"}) {
    EXPECT_NO_THROW(check_fits(*data, make_workload(name))) << name;
  }
  expect_invalid([&] { check_fits(*data, make_workload("cifar10_cnn")); }, {"cifar10_cnn", "1x28x28", "3x32x32"});
  expect_invalid([&] { check_fits(*data, make_workload("fcn5")); }, {"fcn5", "1x28x28", "26752"});
  expect_invalid([&] { check_fits(*data, make_workload("imdb_lstm")); }, {"imdb_lstm", "dense images", "token"});
}

TEST(MnistDataset, RejectsBadFilesNamingThem) {
  TempDir dir;
  write_mnist_idx(dir.path(), mnist_images(4), labels_mod10(4), "train");
  const std::string images = dir.file("train-images-idx3-ubyte"), labels = dir.file("train-labels-idx1-ubyte");
  const std::string spec = "mnist:" + dir.path();
  const std::vector<uint8_t> good_images = read_binary_file(images), good_labels = read_binary_file(labels);

  std::vector<uint8_t> bytes = good_images;
  bytes[3] = 0x01;  // a labels magic in an images file
  write_binary_file(images, bytes);
  expect_invalid([&] { open_dataset(spec); }, {images, "magic", "0x00000801", "0x00000803"});

  bytes = good_images;
  bytes[0] = 0x1f;
  bytes[1] = 0x8b;
  write_binary_file(images, bytes);
  expect_invalid([&] { open_dataset(spec); }, {images, "magic", "gzip"});

  bytes.assign(good_images.begin(), good_images.end() - 100);
  write_binary_file(images, bytes);
  expect_invalid([&] { open_dataset(spec); }, {images, "truncated"});

  bytes.assign(good_images.begin(), good_images.begin() + 10);
  write_binary_file(images, bytes);
  expect_invalid([&] { open_dataset(spec); }, {images, "truncated", "header"});

  bytes = good_images;
  bytes.push_back(0);
  write_binary_file(images, bytes);
  expect_invalid([&] { open_dataset(spec); }, {images, "1 bytes after"});
  write_binary_file(images, good_images);

  bytes.assign(good_labels.begin(), good_labels.end() - 1);
  write_binary_file(labels, bytes);
  expect_invalid([&] { open_dataset(spec); }, {labels, "truncated"});

  bytes = good_labels;
  bytes.back() = 10;
  write_binary_file(labels, bytes);
  expect_invalid([&] { open_dataset(spec); }, {labels, "label 10", "sample 3"});

  write_mnist_idx(dir.path(), mnist_images(3), labels_mod10(3), "train");
  write_binary_file(labels, {0, 0, 8, 1, 0, 0, 0, 2, 1, 2});  // a valid labels file of 2 labels
  expect_invalid([&] { open_dataset(spec); }, {images, labels, "3 images", "2 labels"});

  fs::remove(labels);
  expect_invalid([&] { open_dataset(spec); }, {"cannot open", labels});
  write_binary_file(labels + ".gz", good_labels);
  expect_invalid([&] { open_dataset(spec); }, {labels, "gunzip"});
  expect_invalid([&] { open_dataset(spec + ":test"); }, {"cannot open", dir.file("t10k-images-idx3-ubyte")});
}

/// The 3x32x32 test image i: the channel is visible in the value so plane order is checked.
std::vector<uint8_t> cifar_images(int64_t n, int64_t offset) {
  std::vector<uint8_t> v;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t k = 0; k < 1024; ++k) v.push_back(static_cast<uint8_t>((c * 80 + (i + offset) * 3 + k) % 256));
    }
  }
  return v;
}

float cifar_value(uint8_t byte, int c) {
  const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, stddev[3] = {0.2470f, 0.2435f, 0.2616f};
  return (static_cast<float>(byte) / 255.0f - mean[c]) / stddev[c];
}

TEST(Cifar10Dataset, ReadsTheBatchesThatExistInOrder) {
  TempDir dir;
  // Batches 1 and 3 only: the reader takes whichever exist.
  write_cifar10_batch(dir.file("data_batch_1.bin"), cifar_images(3, 0), labels_mod10(3, 0));
  write_cifar10_batch(dir.file("data_batch_3.bin"), cifar_images(2, 3), labels_mod10(2, 3));
  write_cifar10_batch(dir.file("test_batch.bin"), cifar_images(4, 10), labels_mod10(4, 5));
  const auto data = open_dataset("cifar10:" + dir.path());
  EXPECT_EQ(data->size(), 5);
  EXPECT_EQ(data->sample_shape(), (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(data->num_classes(), 10);
  const Batch b = data->batch(3, 3);  // samples 3, 4, 0
  EXPECT_EQ(b.labels, (std::vector<int64_t>{3, 4, 0}));
  ASSERT_EQ(b.features.size(), size_t{3} * 3072);
  const std::vector<uint8_t> raw = cifar_images(5, 0);
  for (int64_t j = 0; j < 3; ++j) {
    const int64_t i = (3 + j) % 5;
    for (int c = 0; c < 3; ++c) {
      for (int64_t k : {int64_t{0}, int64_t{517}, int64_t{1023}}) {
        const uint8_t byte = raw[static_cast<size_t>(i * 3072 + int64_t{c} * 1024 + k)];
        EXPECT_FLOAT_EQ(b.features[static_cast<size_t>(j * 3072 + int64_t{c} * 1024 + k)], cifar_value(byte, c));
      }
    }
  }
  const auto test = open_dataset("cifar10:" + dir.path() + ":test");
  EXPECT_EQ(test->size(), 4);
  EXPECT_EQ(test->batch(0, 4).labels, (std::vector<int64_t>{5, 6, 7, 8}));

  for (const char* name : {"cifar10_cnn", "vgg16_cifar"}) EXPECT_NO_THROW(check_fits(*data, make_workload(name)));
  expect_invalid([&] { check_fits(*data, make_workload("mnist_cnn")); }, {"mnist_cnn", "3x32x32", "1x28x28"});
  expect_invalid([&] { check_fits(*data, make_workload("alexnet:classes=5")); }, {"3x224x224"});
}

TEST(Cifar10Dataset, RejectsBadFilesNamingThem) {
  TempDir dir;
  const std::string spec = "cifar10:" + dir.path();
  expect_invalid([&] { open_dataset(spec); }, {dir.path(), "data_batch_1.bin"});
  const std::string batch = dir.file("data_batch_2.bin");
  write_cifar10_batch(batch, cifar_images(2, 0), labels_mod10(2));
  std::vector<uint8_t> bytes = read_binary_file(batch);
  bytes.resize(bytes.size() - 5);
  write_binary_file(batch, bytes);
  expect_invalid([&] { open_dataset(spec); }, {batch, "truncated", "3073"});
  write_binary_file(batch, {});
  expect_invalid([&] { open_dataset(spec); }, {batch, "empty"});
  write_cifar10_batch(batch, cifar_images(2, 0), std::vector<uint8_t>{4, 11});
  expect_invalid([&] { open_dataset(spec); }, {batch, "record 1", "label 11"});
  expect_invalid([&] { open_dataset(spec + ":test"); }, {"cannot open", dir.file("test_batch.bin")});
}

TEST(MnistDataset, GatheredSamplesComeInTheOrderAsked) {
  TempDir dir;
  const int64_t n = 13;
  write_mnist_idx(dir.path(), mnist_images(n), labels_mod10(n), "train");
  const auto data = open_dataset("mnist:" + dir.path());
  const std::vector<int64_t> picks = {12, 0, 7, 7};
  const Batch b = gather_samples(*data, picks.data(), picks.size());
  EXPECT_EQ(b.size, 4);
  EXPECT_EQ(b.labels, (std::vector<int64_t>{2, 0, 7, 7}));
  ASSERT_EQ(b.features.size(), 4 * static_cast<size_t>(kMnistPixels));
  for (size_t i = 0; i < picks.size(); ++i) {
    const Batch one = data->batch(picks[i], 1);
    EXPECT_TRUE(std::equal(one.features.begin(), one.features.end(), b.features.begin() + i * kMnistPixels)) << i;
  }
  EXPECT_THROW(gather_samples(*data, picks.data(), 0), std::invalid_argument);
}

TEST(OpenDataset, TheTestSetIsDerivedFromTheTrainingSet) {
  EXPECT_EQ(test_dataset_spec("mnist:data/mnist"), "mnist:data/mnist:test");
  EXPECT_EQ(test_dataset_spec("cifar10:/d/x:train"), "cifar10:/d/x:test");
  expect_invalid([] { test_dataset_spec("mnist:data/mnist:test"); }, {"is a test set", "mnist:data/mnist"});
  expect_invalid([] { test_dataset_spec("tokens:f.h5"); }, {"'tokens:f.h5' has no labelled test set"});
  // IMDB's options may stand before the split word, so the derived spec appends it.
  EXPECT_EQ(test_dataset_spec("imdb:/d/aclImdb"), "imdb:/d/aclImdb:test");
  EXPECT_EQ(test_dataset_spec("imdb:/d/aclImdb:vocab=100,seq=20"), "imdb:/d/aclImdb:vocab=100,seq=20:test");
  expect_invalid([] { test_dataset_spec("imdb:/d/aclImdb:test"); }, {"is a test set"});
  expect_invalid([] { test_dataset_spec("imdb:/d/aclImdb:test:seq=20"); }, {"is a test set"});
}

TEST(OpenDataset, RejectsUnknownKindsMalformedSpecsAndMissingDirectories) {
  expect_invalid([] { open_dataset("imagenet:/data"); }, {"unknown dataset kind 'imagenet'", "mnist:DIR"});
  expect_invalid([] { open_dataset("mnist"); }, {"'mnist'", "KIND:PATH"});
  expect_invalid([] { open_dataset("mnist:"); }, {"KIND:PATH"});
  expect_invalid([] { open_dataset("mnist::test"); }, {"names no directory"});
  TempDir dir;
  const std::string missing = dir.file("no-such-dir");
  expect_invalid([&] { open_dataset("mnist:" + missing); }, {missing, "does not exist"});
  expect_invalid([&] { open_dataset("cifar10:" + missing + ":test"); }, {missing, "does not exist"});
  write_binary_file(dir.file("plain"), {1, 2, 3});
  expect_invalid([&] { open_dataset("mnist:" + dir.file("plain")); }, {dir.file("plain"), "not a directory"});
}

/// N sequences of T tokens with ids (i * 7 + t) % vocab.
TokenData token_data(int64_t n, int64_t t, int64_t vocab, bool per_step) {
  TokenData d;
  d.samples = n;
  d.seq_len = t;
  d.vocab = vocab;
  d.label_per_step = per_step;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t s = 0; s < t; ++s) d.tokens.push_back((i * 7 + s) % vocab);
  }
  if (per_step) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t s = 0; s < t; ++s) d.labels.push_back((i * 7 + s + 1) % vocab);  // the next token
    }
  } else {
    for (int64_t i = 0; i < n; ++i) d.labels.push_back(i % 2);
  }
  return d;
}

TEST(TokenDataset, ClassificationFileFitsImdbLstm) {
  TempDir dir;
  const std::string path = dir.file("imdb.h5");
  const int64_t n = 6, t = 5, vocab = 11;
  write_token_file(path, token_data(n, t, vocab, false));
  const auto data = open_dataset("tokens:" + path);
  EXPECT_EQ(data->size(), n);
  EXPECT_EQ(data->input_kind(), InputKind::kTokens);
  EXPECT_EQ(data->sample_shape(), (std::vector<int64_t>{t}));
  EXPECT_EQ(data->vocab(), vocab);
  EXPECT_EQ(data->num_classes(), 2);
  EXPECT_EQ(data->labels_per_sample(), 1);
  const Batch b = data->batch(4, 3);  // sequences 4, 5, 0
  EXPECT_EQ(b.size, 3);
  EXPECT_TRUE(b.features.empty());
  ASSERT_EQ(b.tokens.size(), size_t{15});
  EXPECT_EQ(std::vector<int64_t>(b.tokens.begin(), b.tokens.begin() + 5), (std::vector<int64_t>{6, 7, 8, 9, 10}));
  EXPECT_EQ(std::vector<int64_t>(b.tokens.begin() + 5, b.tokens.begin() + 10), (std::vector<int64_t>{2, 3, 4, 5, 6}));
  EXPECT_EQ(std::vector<int64_t>(b.tokens.begin() + 10, b.tokens.end()), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(b.labels, (std::vector<int64_t>{0, 1, 0}));

  EXPECT_NO_THROW(check_fits(*data, make_workload("imdb_lstm:seq=5,vocab=11")));
  EXPECT_NO_THROW(check_fits(*data, make_workload("imdb_lstm:seq=5,vocab=50")));
  expect_invalid([&] { check_fits(*data, make_workload("lstm32:seq=5,vocab=11")); }, {"one label per sequence"});
  expect_invalid([&] { check_fits(*data, make_workload("imdb_lstm:seq=6,vocab=11")); }, {"5 tokens long", "6"});
  expect_invalid([&] { check_fits(*data, make_workload("imdb_lstm:seq=5,vocab=10")); }, {"11 ids", "10"});
  expect_invalid([&] { check_fits(*data, make_workload("mnist_cnn")); }, {"token sequences", "dense images"});

  TokenData three = token_data(n, t, vocab, false);
  three.labels[2] = 2;  // not binary any more
  write_token_file(path, three);
  expect_invalid([&] { check_fits(*open_dataset("tokens:" + path), make_workload("imdb_lstm:seq=5,vocab=11")); },
                 {"binary cross-entropy", "up to 2"});
}

TEST(TokenDataset, PerStepLabelsFitTheLanguageModel) {
  TempDir dir;
  const std::string path = dir.file("ptb.h5");
  const int64_t n = 4, t = 6, vocab = 13;
  write_token_file(path, token_data(n, t, vocab, true));
  const auto data = open_dataset("tokens:" + path);
  EXPECT_EQ(data->size(), n);
  EXPECT_EQ(data->labels_per_sample(), t);
  EXPECT_EQ(data->num_classes(), vocab);
  const Batch b = data->batch(3, 2);  // sequences 3, 0
  ASSERT_EQ(b.labels.size(), size_t{12});
  EXPECT_EQ(b.tokens[0], 21 % vocab);
  EXPECT_EQ(b.labels[0], 22 % vocab);
  EXPECT_EQ(b.labels[6], 1);
  EXPECT_NO_THROW(check_fits(*data, make_workload("lstm32:seq=6,vocab=13")));
  expect_invalid([&] { check_fits(*data, make_workload("imdb_lstm:seq=6,vocab=13")); }, {"one label per time step"});
  expect_invalid([&] { check_fits(*data, make_workload("lstm64:seq=5,vocab=13")); }, {"6 tokens long"});
}

TEST(TokenDataset, RejectsBadFilesNamingThem) {
  TempDir dir;
  const std::string path = dir.file("bad.h5");
  expect_invalid([&] { open_dataset("tokens:" + path); }, {path, "does not exist"});
  write_binary_file(path, {'n', 'o', 't', ' ', 'h', 'd', 'f', '5'});
  expect_invalid([&] { open_dataset("tokens:" + path); }, {path, "not an HDF5 file"});

  TokenData d = token_data(3, 4, 9, false);
  d.tokens[5] = 9;  // == vocab
  write_token_file(path, d);
  expect_invalid([&] { open_dataset("tokens:" + path); }, {path, "token id 9", "sequence 1, step 1", "vocab 9"});
  d = token_data(3, 4, 9, false);
  d.labels[1] = -1;
  write_token_file(path, d);
  expect_invalid([&] { open_dataset("tokens:" + path); }, {path, "label -1", "negative"});
  d = token_data(3, 4, 9, true);
  d.labels[11] = 20;
  write_token_file(path, d);
  expect_invalid([&] { open_dataset("tokens:" + path); }, {path, "label 20", "sequence 2, step 3"});
  d = token_data(3, 4, 9, false);
  d.vocab = 0;
  write_token_file(path, d);
  expect_invalid([&] { open_dataset("tokens:" + path); }, {path, "'vocab' is 0"});
}

TEST(TokenDataset, RejectsFilesOfAnotherLayoutNamingThem) {
  TempDir dir;
  const std::string path = dir.file("bad.h5");
  // Files of another layout, written with the HDF5 API directly.
  h5::silence_error_printing();
  {
    h5::File f(DLSCALE_CHECK_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
    h5::write_doubles(f.get(), "tokens", {2, 3}, {0, 1, 2, 3, 4, 5});
  }
  expect_invalid([&] { open_dataset("tokens:" + path); }, {path, "/tokens holds floating-point"});
  { h5::File f(DLSCALE_CHECK_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT))); }
  expect_invalid([&] { open_dataset("tokens:" + path); }, {path, "no dataset /tokens"});

  // A valid file with one part removed or reshaped.
  const auto without = [&](const char* name) {
    write_token_file(path, token_data(3, 4, 9, false));
    h5::File f(DLSCALE_CHECK_H5(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
    if (std::string(name) == "vocab") {
      DLSCALE_CHECK_H5(H5Adelete(f.get(), name));
    } else {
      DLSCALE_CHECK_H5(H5Ldelete(f.get(), name, H5P_DEFAULT));
    }
  };
  without("labels");
  expect_invalid([&] { open_dataset("tokens:" + path); }, {path, "no dataset /labels"});
  without("vocab");
  expect_invalid([&] { open_dataset("tokens:" + path); }, {path, "no root attribute 'vocab'"});
  {
    TokenData mismatched = token_data(3, 4, 9, false);
    write_token_file(path, mismatched);
    h5::File f(DLSCALE_CHECK_H5(H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)));
    DLSCALE_CHECK_H5(H5Ldelete(f.get(), "labels", H5P_DEFAULT));
    const hsize_t dims[1] = {2};
    h5::Dataspace space(DLSCALE_CHECK_H5(H5Screate_simple(1, dims, nullptr)));
    h5::Dataset ds(DLSCALE_CHECK_H5(
        H5Dcreate2(f.get(), "labels", H5T_STD_I32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
    const int32_t labels[2] = {0, 1};
    DLSCALE_CHECK_H5(H5Dwrite(ds.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels));
  }
  expect_invalid([&] { open_dataset("tokens:" + path); }, {path, "/labels is [2]", "/tokens is [3, 4]"});
}

TEST(TokenDataset, Int32FilesAreAccepted) {
  // h5py users often write int32; the reader converts.
  TempDir dir;
  const std::string path = dir.file("int32.h5");
  h5::silence_error_printing();
  {
    h5::File f(DLSCALE_CHECK_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
    const int32_t tokens[2][3] = {{1, 2, 3}, {4, 5, 6}}, labels[2] = {1, 0};
    const hsize_t tdims[2] = {2, 3}, ldims[1] = {2};
    h5::Dataspace ts(DLSCALE_CHECK_H5(H5Screate_simple(2, tdims, nullptr)));
    h5::Dataspace ls(DLSCALE_CHECK_H5(H5Screate_simple(1, ldims, nullptr)));
    h5::Dataset td(DLSCALE_CHECK_H5(
        H5Dcreate2(f.get(), "tokens", H5T_STD_I32LE, ts.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
    h5::Dataset ld(DLSCALE_CHECK_H5(
        H5Dcreate2(f.get(), "labels", H5T_STD_I32LE, ls.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
    DLSCALE_CHECK_H5(H5Dwrite(td.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, tokens));
    DLSCALE_CHECK_H5(H5Dwrite(ld.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels));
    h5::set_attr(f.get(), "vocab", int64_t{7});
  }
  const TokenData d = read_token_file(path);
  EXPECT_EQ(d.samples, 2);
  EXPECT_EQ(d.seq_len, 3);
  EXPECT_EQ(d.vocab, 7);
  EXPECT_FALSE(d.label_per_step);
  EXPECT_EQ(d.tokens, (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(d.labels, (std::vector<int64_t>{1, 0}));
}

TEST(TokenDataset, RefusesSizesTheFileCannotHold) {
  // A damaged header may announce any dims: nothing is allocated for them until they are
  // checked against the machine's memory and, stored unfiltered, against the bytes the file has.
  TempDir dir;
  const std::string path = dir.file("announced.h5");
  h5::silence_error_printing();
  const auto announce = [&](hsize_t rows) {
    h5::File f(DLSCALE_CHECK_H5(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)));
    const hsize_t tdims[2] = {rows, 4}, ldims[1] = {rows}, tchunk[2] = {1, 4}, lchunk[1] = {1};
    h5::Dataspace ts(DLSCALE_CHECK_H5(H5Screate_simple(2, tdims, nullptr)));
    h5::Dataspace ls(DLSCALE_CHECK_H5(H5Screate_simple(1, ldims, nullptr)));
    h5::PropList tcreate(DLSCALE_CHECK_H5(H5Pcreate(H5P_DATASET_CREATE)));
    h5::PropList lcreate(DLSCALE_CHECK_H5(H5Pcreate(H5P_DATASET_CREATE)));
    DLSCALE_CHECK_H5(H5Pset_chunk(tcreate.get(), 2, tchunk));
    DLSCALE_CHECK_H5(H5Pset_chunk(lcreate.get(), 1, lchunk));
    // Chunked and never written: the header has the dims, the file none of the values.
    h5::Dataset td(DLSCALE_CHECK_H5(
        H5Dcreate2(f.get(), "tokens", H5T_STD_I64LE, ts.get(), H5P_DEFAULT, tcreate.get(), H5P_DEFAULT)));
    h5::Dataset ld(DLSCALE_CHECK_H5(
        H5Dcreate2(f.get(), "labels", H5T_STD_I64LE, ls.get(), H5P_DEFAULT, lcreate.get(), H5P_DEFAULT)));
    h5::set_attr(f.get(), "vocab", int64_t{7});
  };
  announce(hsize_t{1} << 60);
  expect_invalid([&] { open_dataset("tokens:" + path); },
                 {path, "/tokens announces", "more than this machine's memory"});
  announce(1000);
  expect_invalid([&] { open_dataset("tokens:" + path); },
                 {path, "/tokens announces [1000, 4] values of 8 bytes each", "stores 0 bytes of them", "damaged"});
}

TEST(TokenDataset, RefusesValuesStoredBeyondTheFile) {
  // A fuzzer's finding: a 2 KB file whose damaged /labels header announces 606 M contiguous int64
  // values and 227 GB of storage for them, which fit this machine's memory and the storage the
  // header claims; the file itself holds 2 KB. Refused before 4.8 GB are allocated.
  const std::string path =
      std::string(DLSCALE_SOURCE_DIR) + "/tests/fuzz/corpus/fuzz_token_file/finding-labels-stored-beyond-the-file";
  expect_invalid(
      [&] { open_dataset("tokens:" + path); },
      {path, "/labels announces [16382978, 37] values of 8 bytes each", "more than the whole file's", "damaged"});
}

// IMDB: a tiny aclImdb-shaped directory. Vocabulary ranks the=1 … café=7 give ids 4 … 10.
void write_text(const std::string& path, const std::string& text) {
  write_binary_file(path, std::vector<uint8_t>(text.begin(), text.end()));
}

void make_acl_imdb(const std::string& dir) {
  write_text(dir + "/imdb.vocab", "the\nmovie\nwas\ngood\nbad\ndon't\ncaf\xc3\xa9\n");
  for (const char* sub : {"train/neg", "train/pos", "test/neg", "test/pos"}) fs::create_directories(dir + "/" + sub);
  // Byte order of names: "10_1.txt" before "1_2.txt" ('0' < '_'), not the numeric order.
  write_text(dir + "/train/neg/1_2.txt", "The movie was BAD.<br /><br />Don't watch");
  write_text(dir + "/train/neg/10_1.txt", "bad");
  write_text(dir + "/train/pos/3_9.txt", "'Good' caf\xc3\xa9, good!");
  write_text(dir + "/train/pos/urls.md", "not a review");
  write_text(dir + "/test/neg/0_1.txt", "was");
  write_text(dir + "/test/pos/0_8.txt", "Movie<br />movie");
}

std::vector<int64_t> row(const Batch& b, int64_t i, int64_t t) {
  return {b.tokens.begin() + i * t, b.tokens.begin() + (i + 1) * t};
}

TEST(ImdbDataset, WordsAreLowercasedWithBreaksAsSpacesAndQuotesDropped) {
  EXPECT_EQ(imdb_words("Don't <br />stop 'em!"), (std::vector<std::string>{"don't", "stop", "em"}));
  EXPECT_EQ(imdb_words("A<br /><br />B-movie, 10/10"), (std::vector<std::string>{"a", "b", "movie", "10", "10"}));
  EXPECT_EQ(imdb_words("Caf\xc3\xa9 ''"), (std::vector<std::string>{"caf\xc3\xa9"}));
  EXPECT_TRUE(imdb_words(" ... ").empty());
}

TEST(ImdbDataset, IdsFollowKerasLoadDataAndPadSequences) {
  TempDir dir;
  make_acl_imdb(dir.path());
  // vocab 9: ids 9 (don't) and 10 (café) are at or above the limit and become 2, as unknown
  // words (watch) do; every review starts with 1; short ones are padded with 0 at the front,
  // long ones lose their front.
  const auto data = open_dataset("imdb:" + dir.path() + ":vocab=9,seq=6");
  EXPECT_EQ(data->name(), "imdb:" + dir.path() + " (train, vocab 9, seq 6)");
  ASSERT_EQ(data->size(), 3);
  EXPECT_EQ(data->input_kind(), InputKind::kTokens);
  EXPECT_EQ(data->sample_shape(), (std::vector<int64_t>{6}));
  EXPECT_EQ(data->vocab(), 9);
  EXPECT_EQ(data->num_classes(), 2);
  const Batch b = data->batch(0, 3);
  EXPECT_EQ(row(b, 0, 6), (std::vector<int64_t>{0, 0, 0, 0, 1, 8}));  // neg/10_1: "bad"
  EXPECT_EQ(row(b, 1, 6), (std::vector<int64_t>{4, 5, 6, 8, 2, 2}));  // neg/1_2: 1 4 5 6 8 2 2, front cut
  EXPECT_EQ(row(b, 2, 6), (std::vector<int64_t>{0, 0, 1, 7, 2, 7}));  // pos/3_9: good café good
  EXPECT_EQ(b.labels, (std::vector<int64_t>{0, 0, 1}));
  EXPECT_NO_THROW(check_fits(*data, make_workload("imdb_lstm:seq=6,vocab=9")));

  // The test split, with the options before or after ":test".
  for (const std::string spec : {":vocab=11,seq=3:test", ":test:seq=3,vocab=11"}) {
    const auto test = open_dataset("imdb:" + dir.path() + spec);
    EXPECT_EQ(test->name(), "imdb:" + dir.path() + " (test, vocab 11, seq 3)") << spec;
    const Batch t = test->batch(0, 2);
    EXPECT_EQ(t.tokens, (std::vector<int64_t>{0, 1, 6, 1, 5, 5})) << spec;  // "was"; "Movie<br />movie"
    EXPECT_EQ(t.labels, (std::vector<int64_t>{0, 1})) << spec;
  }
}

TEST(ImdbDataset, DefaultsFitTheCatalogImdbLstm) {
  TempDir dir;
  make_acl_imdb(dir.path());
  for (const std::string suffix : {"", ":train", ":test"}) {
    const auto data = open_dataset("imdb:" + dir.path() + suffix);
    EXPECT_EQ(data->sample_shape(), (std::vector<int64_t>{500})) << suffix;
    EXPECT_EQ(data->vocab(), 5000) << suffix;
    EXPECT_NO_THROW(check_fits(*data, make_workload("imdb_lstm"))) << suffix;
  }
  const Batch b = open_dataset("imdb:" + dir.path())->batch(2, 1);
  EXPECT_EQ(std::vector<int64_t>(b.tokens.end() - 5, b.tokens.end()), (std::vector<int64_t>{0, 1, 7, 10, 7}));
  EXPECT_EQ(std::count(b.tokens.begin(), b.tokens.end(), 0), 496);
  expect_invalid([&] { check_fits(*open_dataset("imdb:" + dir.path()), make_workload("imdb_lstm:seq=200")); },
                 {"500 tokens long", "200"});
}

TEST(ImdbDataset, MissingFilesAndBadOptionsAreNamed) {
  TempDir dir;
  make_acl_imdb(dir.path());
  const std::string spec = "imdb:" + dir.path();
  fs::remove_all(dir.file("test/pos"));
  expect_invalid([&] { open_dataset(spec + ":test"); }, {dir.file("test/pos"), "does not exist"});
  EXPECT_EQ(open_dataset(spec)->size(), 3);  // the training set does not need test/
  fs::remove_all(dir.file("train"));
  expect_invalid([&] { open_dataset(spec); }, {dir.file("train"), "does not exist"});
  fs::remove(dir.file("imdb.vocab"));
  expect_invalid([&] { open_dataset(spec); }, {"cannot open", dir.file("imdb.vocab")});
  expect_invalid([&] { open_dataset(spec + ":seq=x"); }, {"'seq=x'", "vocab=INTEGER"});
  expect_invalid([&] { open_dataset(spec + ":width=3"); }, {"'width=3'"});
  expect_invalid([&] { open_dataset(spec + ":seq=0"); }, {"sequence length 0"});
  expect_invalid([&] { open_dataset(spec + ":vocab=2"); }, {"vocabulary limit 2"});
  const std::string missing = dir.file("no-such-dir");
  expect_invalid([&] { open_dataset("imdb:" + missing); }, {missing, "does not exist"});

  TempDir empty;
  make_acl_imdb(empty.path());
  for (const char* f : {"train/neg/1_2.txt", "train/neg/10_1.txt", "train/pos/3_9.txt"}) fs::remove(empty.file(f));
  expect_invalid([&] { open_dataset("imdb:" + empty.path()); }, {"no *.txt review"});
}

// The MNIST files that scripts/fetch-mnist.sh puts in data/mnist: LeCun's 60,000 training and
// 10,000 test digits, in the original order.
TEST(RealMnist, OriginalFilesAreComplete) {
  const std::string dir = std::string(DLSCALE_SOURCE_DIR) + "/data/mnist";
  if (!fs::is_directory(dir)) GTEST_SKIP() << dir << " absent; run scripts/fetch-mnist.sh";
  const auto train = open_dataset("mnist:" + dir);
  const auto test = open_dataset("mnist:" + dir + ":test");
  EXPECT_EQ(train->size(), 60000);
  EXPECT_EQ(test->size(), 10000);
  // The first labels of each file, as the original files have them.
  const std::vector<std::pair<const Dataset*, std::vector<int64_t>>> first_labels = {
      {train.get(), {5, 0, 4, 1, 9, 2, 1, 3, 1, 4}}, {test.get(), {7, 2, 1, 0, 4, 1, 4, 9, 5, 9}}};
  for (const auto& [data, labels] : first_labels) {
    EXPECT_NO_THROW(check_fits(*data, make_workload("mnist_cnn")));
    const Batch b = data->batch(0, data->size());
    EXPECT_EQ(std::set<int64_t>(b.labels.begin(), b.labels.end()).size(), size_t{10});
    EXPECT_EQ(std::vector<int64_t>(b.labels.begin(), b.labels.begin() + 10), labels);
    // Real handwriting: mostly background, with the full range of ink.
    const auto [lo, hi] = std::minmax_element(b.features.begin(), b.features.end());
    EXPECT_NEAR(*lo, -0.4242f, 1e-3);
    EXPECT_NEAR(*hi, 2.8215f, 1e-3);
  }
}

}  // namespace
}  // namespace dlscale
