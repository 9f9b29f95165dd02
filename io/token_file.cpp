// Reader and writer of the token-sequence HDF5 layout (see token_file.h), on io/h5.h's RAII
// handles and checked calls.
#include "io/token_file.h"

#include <filesystem>
#include <stdexcept>

#include "io/h5.h"

namespace dlscale {

namespace {

const char* class_name(H5T_class_t cls) {
  switch (cls) {
    case H5T_INTEGER:
      return "integers";
    case H5T_FLOAT:
      return "floating-point numbers";
    case H5T_STRING:
      return "strings";
    default:
      return "a non-numeric type";
  }
}

/// Reads an integer dataset of rank 1 or 2 as int64; `what` describes the expected content for
/// messages. Format problems throw std::invalid_argument; HDF5 failures throw h5::H5Error.
std::vector<int64_t> read_int_dataset(hid_t file, const std::string& path, const std::string& name,
                                      const std::string& what, std::vector<hsize_t>* dims) {
  if (!h5::exists(file, name)) {
    throw std::invalid_argument(path + " has no dataset /" + name + " (expected " + what + ")");
  }
  h5::Dataset ds(DLSCALE_CHECK_H5(H5Dopen2(file, name.c_str(), H5P_DEFAULT)));
  h5::Datatype type(DLSCALE_CHECK_H5(H5Dget_type(ds.get())));
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls != H5T_INTEGER) {
    throw std::invalid_argument(path + ": /" + name + " holds " + class_name(cls) + ", expected " + what);
  }
  h5::Dataspace space(DLSCALE_CHECK_H5(H5Dget_space(ds.get())));
  const int rank = DLSCALE_CHECK_H5(H5Sget_simple_extent_ndims(space.get()));
  if (rank < 1 || rank > 2) {
    throw std::invalid_argument(path + ": /" + name + " has " + std::to_string(rank) + " dimensions, expected " + what);
  }
  dims->assign(static_cast<size_t>(rank), 0);
  DLSCALE_CHECK_H5(H5Sget_simple_extent_dims(space.get(), dims->data(), nullptr));
  std::string problem;
  const hsize_t n = h5::announced_values(ds.get(), *dims, sizeof(int64_t), &problem);
  if (!problem.empty()) {
    throw std::invalid_argument(path + ": /" + name + " announces " + h5::dims_text(*dims) + " values " + problem);
  }
  std::vector<int64_t> data(n);
  if (n > 0) DLSCALE_CHECK_H5(H5Dread(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()));
  return data;
}

int64_t read_vocab(hid_t file, const std::string& path) {
  if (!h5::has_attr(file, "vocab")) {
    throw std::invalid_argument(path + " has no root attribute 'vocab' (the vocabulary size)");
  }
  h5::Attribute a(DLSCALE_CHECK_H5(H5Aopen(file, "vocab", H5P_DEFAULT)));
  h5::Datatype type(DLSCALE_CHECK_H5(H5Aget_type(a.get())));
  h5::Dataspace space(DLSCALE_CHECK_H5(H5Aget_space(a.get())));
  // One value only: H5Aread would write every element of an array attribute into the int64.
  if (H5Tget_class(type.get()) != H5T_INTEGER || DLSCALE_CHECK_H5(H5Sget_simple_extent_npoints(space.get())) != 1) {
    throw std::invalid_argument(path + ": root attribute 'vocab' must be one integer");
  }
  int64_t vocab = 0;
  DLSCALE_CHECK_H5(H5Aread(a.get(), H5T_NATIVE_INT64, &vocab));
  if (vocab <= 0) throw std::invalid_argument(path + ": root attribute 'vocab' is " + std::to_string(vocab));
  return vocab;
}

void write_int_dataset(hid_t file, const std::string& name, const std::vector<hsize_t>& dims,
                       const std::vector<int64_t>& data) {
  h5::Dataspace space(DLSCALE_CHECK_H5(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
  h5::Dataset ds(DLSCALE_CHECK_H5(
      H5Dcreate2(file, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  if (!data.empty()) {
    DLSCALE_CHECK_H5(H5Dwrite(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()));
  }
}

}  // namespace

TokenData read_token_file(const std::string& path) {
  h5::silence_error_printing();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw std::invalid_argument("token file " + path + " does not exist");
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw std::invalid_argument(path + " is not an HDF5 file");
  }
  try {
    const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (id < 0) {
      H5Eclear2(H5E_DEFAULT);
      throw std::invalid_argument("cannot open " + path);
    }
    h5::File file(id);
    TokenData data;
    std::vector<hsize_t> token_dims, label_dims;
    data.tokens = read_int_dataset(file.get(), path, "tokens", "int64 [N, T] token ids", &token_dims);
    if (token_dims.size() != 2) {
      throw std::invalid_argument(path + ": /tokens is " + h5::dims_text(token_dims) + ", expected [N, T]");
    }
    data.samples = static_cast<int64_t>(token_dims[0]);
    data.seq_len = static_cast<int64_t>(token_dims[1]);
    if (data.samples == 0 || data.seq_len == 0) {
      throw std::invalid_argument(path + ": /tokens is " + h5::dims_text(token_dims) + ", it holds no sequences");
    }
    data.labels = read_int_dataset(file.get(), path, "labels", "int64 [N] or [N, T] labels", &label_dims);
    data.label_per_step = label_dims.size() == 2;
    if (label_dims[0] != token_dims[0] || (data.label_per_step && label_dims[1] != token_dims[1])) {
      throw std::invalid_argument(path + ": /labels is " + h5::dims_text(label_dims) + " but /tokens is " +
                                  h5::dims_text(token_dims) + " (expected [" + std::to_string(token_dims[0]) + "] or " +
                                  h5::dims_text(token_dims) + ")");
    }
    data.vocab = read_vocab(file.get(), path);
    return data;
  } catch (const h5::H5Error& e) {
    // A file that passes H5Fis_hdf5 but fails a call is damaged or of another layout: the
    // caller's contract is std::invalid_argument naming the file.
    throw std::invalid_argument(path + ": " + e.what());
  }
}

void write_token_file(const std::string& path, const TokenData& data) {
  const int64_t label_count = data.label_per_step ? data.samples * data.seq_len : data.samples;
  if (data.samples < 0 || data.seq_len < 0 || static_cast<int64_t>(data.tokens.size()) != data.samples * data.seq_len ||
      static_cast<int64_t>(data.labels.size()) != label_count) {
    throw std::invalid_argument("write_token_file(" + path + "): " + std::to_string(data.tokens.size()) +
                                " tokens and " + std::to_string(data.labels.size()) + " labels do not match " +
                                std::to_string(data.samples) + " sequences of " + std::to_string(data.seq_len));
  }
  h5::silence_error_printing();
  const hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (id < 0) {
    H5Eclear2(H5E_DEFAULT);
    throw h5::H5Error("cannot create token file " + path);
  }
  h5::File file(id);
  const auto n = static_cast<hsize_t>(data.samples), t = static_cast<hsize_t>(data.seq_len);
  write_int_dataset(file.get(), "tokens", {n, t}, data.tokens);
  write_int_dataset(file.get(), "labels", data.label_per_step ? std::vector<hsize_t>{n, t} : std::vector<hsize_t>{n},
                    data.labels);
  h5::set_attr(file.get(), "vocab", data.vocab);
  DLSCALE_CHECK_H5(H5Fflush(file.get(), H5F_SCOPE_LOCAL));
}

}  // namespace dlscale
