// Thin RAII over the HDF5 C API: every hid_t is owned by an H5Handle that closes it with the
// right function, and every call goes through DLSCALE_CHECK_H5 so a failure names the call,
// the file and line, and HDF5's own message. Only io/ includes this.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/hdf5_progress.h"

namespace dlscale::h5 {

class H5Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws H5Error for a negative return (HDF5's failure convention).
[[noreturn]] void fail(const char* call, const char* file, int line);

template <typename T>
T check(T result, const char* call, const char* file, int line) {
  note_progress();
  if (result < 0) fail(call, file, line);
  return result;
}

#define DLSCALE_CHECK_H5(call) ::dlscale::h5::check((call), #call, __FILE__, __LINE__)

/// Owns one HDF5 identifier and closes it with `Close`.
template <herr_t (*Close)(hid_t)>
class H5Handle {
 public:
  H5Handle() = default;
  explicit H5Handle(hid_t id) : id_(id) {}
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  H5Handle(H5Handle&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  H5Handle& operator=(H5Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  ~H5Handle() { reset(); }
  hid_t get() const { return id_; }
  /// Gives up ownership (for a close whose result must be checked).
  hid_t release() {
    const hid_t id = id_;
    id_ = H5I_INVALID_HID;
    return id;
  }
  void reset() {
    if (id_ >= 0) Close(id_);
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

using File = H5Handle<H5Fclose>;
using Group = H5Handle<H5Gclose>;
using Dataset = H5Handle<H5Dclose>;
using Dataspace = H5Handle<H5Sclose>;
using Datatype = H5Handle<H5Tclose>;
using Attribute = H5Handle<H5Aclose>;
using PropList = H5Handle<H5Pclose>;

/// Stops HDF5 from printing its error stack to stderr; errors become H5Error instead.
void silence_error_printing();

/// "1.10.8"
std::string library_version();

/// A variable-length UTF-8 string type (h5py reads it as str).
Datatype string_type();

Group create_group(hid_t parent, const std::string& name);
Group open_group(hid_t parent, const std::string& name);
bool exists(hid_t parent, const std::string& path);

void set_attr(hid_t obj, const std::string& name, const std::string& value);
void set_attr(hid_t obj, const std::string& name, int64_t value);
void set_attr(hid_t obj, const std::string& name, double value);
bool has_attr(hid_t obj, const std::string& name);
std::string get_string_attr(hid_t obj, const std::string& name);
int64_t get_int_attr(hid_t obj, const std::string& name);
double get_double_attr(hid_t obj, const std::string& name);
/// Names of all attributes of `obj`, in creation order.
std::vector<std::string> attr_names(hid_t obj);

/// Writes a float64 dataset of the given shape (row-major data).
void write_doubles(hid_t parent, const std::string& name, const std::vector<hsize_t>& dims,
                   const std::vector<double>& data);
/// Writes an int64 dataset of the given shape (row-major data).
void write_int64s(hid_t parent, const std::string& name, const std::vector<hsize_t>& dims,
                  const std::vector<int64_t>& data);
/// Reads a float64 dataset; `dims` receives its shape. Throws H5Error naming `name` when its
/// shape is one no file could hold (announced_size_problem).
std::vector<double> read_doubles(hid_t parent, const std::string& name, std::vector<hsize_t>* dims);

/// The values dataset `ds` announces (`dims` multiplied), checked before anything is allocated
/// for them, as a damaged header may announce any dims: `*problem` is left empty, or says what is
/// wrong ("too many to count", "more than this machine's memory holds at N bytes each"; for an
/// unfiltered dataset "of N bytes each, and the file stores M bytes of them: it is damaged", or,
/// stored in the file, "of N bytes each, more than the whole file's M bytes: it is damaged") to
/// follow "NAME announces [dims] values", and 0 is returned.
hsize_t announced_values(hid_t ds, const std::vector<hsize_t>& dims, size_t bytes_each, std::string* problem);
/// "[2, 3]"
std::string dims_text(const std::vector<hsize_t>& dims);

/// Names of the direct children of a group, sorted.
std::vector<std::string> children(hid_t group);

}  // namespace dlscale::h5
