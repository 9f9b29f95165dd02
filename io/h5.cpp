#include "io/h5.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>

namespace dlscale::h5 {

namespace {

herr_t collect_message(unsigned n, const H5E_error2_t* err, void* data) {
  auto* out = static_cast<std::string*>(data);
  if (n == 0 && err->desc != nullptr) *out = err->desc;  // the innermost, most specific entry
  // Errors are one line: HDF5's own descriptions may hold newlines (a failed write's carries the
  // time as ctime() writes it, newline included).
  std::replace(out->begin(), out->end(), '\n', ' ');
  return 0;
}

}  // namespace

void fail(const char* call, const char* file, int line) {
  std::string detail;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_message, &detail);
  H5Eclear2(H5E_DEFAULT);
  throw H5Error(std::string("HDF5 call failed: ") + call + " at " + file + ":" + std::to_string(line) +
                (detail.empty() ? "" : " (" + detail + ")"));
}

namespace {

std::atomic<int64_t> last_progress_ns{0};  // steady clock

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void note_progress() noexcept { last_progress_ns.store(now_ns(), std::memory_order_relaxed); }

double seconds_since_progress() noexcept {
  return static_cast<double>(now_ns() - last_progress_ns.load(std::memory_order_relaxed)) / 1e9;
}

void silence_error_printing() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

std::string library_version() {
  unsigned major = 0, minor = 0, release = 0;
  DLSCALE_CHECK_H5(H5get_libversion(&major, &minor, &release));
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

Datatype string_type() {
  Datatype t(DLSCALE_CHECK_H5(H5Tcopy(H5T_C_S1)));
  DLSCALE_CHECK_H5(H5Tset_size(t.get(), H5T_VARIABLE));
  DLSCALE_CHECK_H5(H5Tset_cset(t.get(), H5T_CSET_UTF8));
  return t;
}

Group create_group(hid_t parent, const std::string& name) {
  PropList lcpl(DLSCALE_CHECK_H5(H5Pcreate(H5P_LINK_CREATE)));
  DLSCALE_CHECK_H5(H5Pset_create_intermediate_group(lcpl.get(), 1));
  PropList gcpl(DLSCALE_CHECK_H5(H5Pcreate(H5P_GROUP_CREATE)));
  // Track creation order so attributes read back in the order they were written.
  DLSCALE_CHECK_H5(H5Pset_attr_creation_order(gcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
  return Group(DLSCALE_CHECK_H5(H5Gcreate2(parent, name.c_str(), lcpl.get(), gcpl.get(), H5P_DEFAULT)));
}

Group open_group(hid_t parent, const std::string& name) {
  return Group(DLSCALE_CHECK_H5(H5Gopen2(parent, name.c_str(), H5P_DEFAULT)));
}

bool exists(hid_t parent, const std::string& path) {
  // H5Lexists needs every intermediate link to exist, so walk the path one link at a time.
  std::string prefix;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t end = path.find('/', pos);
    if (end == std::string::npos) end = path.size();
    prefix += (prefix.empty() ? "" : "/") + path.substr(pos, end - pos);
    if (DLSCALE_CHECK_H5(H5Lexists(parent, prefix.c_str(), H5P_DEFAULT)) <= 0) return false;
    pos = end + 1;
  }
  return true;
}

namespace {

Attribute create_attr(hid_t obj, const std::string& name, hid_t type) {
  if (DLSCALE_CHECK_H5(H5Aexists(obj, name.c_str())) > 0) DLSCALE_CHECK_H5(H5Adelete(obj, name.c_str()));
  Dataspace space(DLSCALE_CHECK_H5(H5Screate(H5S_SCALAR)));
  return Attribute(DLSCALE_CHECK_H5(H5Acreate2(obj, name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT)));
}

Attribute open_attr(hid_t obj, const std::string& name) {
  return Attribute(DLSCALE_CHECK_H5(H5Aopen(obj, name.c_str(), H5P_DEFAULT)));
}

}  // namespace

void set_attr(hid_t obj, const std::string& name, const std::string& value) {
  Datatype type = string_type();
  Attribute a = create_attr(obj, name, type.get());
  const char* ptr = value.c_str();
  DLSCALE_CHECK_H5(H5Awrite(a.get(), type.get(), &ptr));
}

void set_attr(hid_t obj, const std::string& name, int64_t value) {
  Attribute a = create_attr(obj, name, H5T_STD_I64LE);
  DLSCALE_CHECK_H5(H5Awrite(a.get(), H5T_NATIVE_INT64, &value));
}

void set_attr(hid_t obj, const std::string& name, double value) {
  Attribute a = create_attr(obj, name, H5T_IEEE_F64LE);
  DLSCALE_CHECK_H5(H5Awrite(a.get(), H5T_NATIVE_DOUBLE, &value));
}

bool has_attr(hid_t obj, const std::string& name) { return DLSCALE_CHECK_H5(H5Aexists(obj, name.c_str())) > 0; }

std::string get_string_attr(hid_t obj, const std::string& name) {
  Attribute a = open_attr(obj, name);
  Datatype file_type(DLSCALE_CHECK_H5(H5Aget_type(a.get())));
  if (H5Tget_class(file_type.get()) != H5T_STRING) throw H5Error("attribute " + name + " is not a string");
  if (DLSCALE_CHECK_H5(H5Tis_variable_str(file_type.get())) > 0) {
    Datatype mem = string_type();
    char* ptr = nullptr;
    DLSCALE_CHECK_H5(H5Aread(a.get(), mem.get(), &ptr));
    std::string value = ptr != nullptr ? ptr : "";
    Dataspace space(DLSCALE_CHECK_H5(H5Aget_space(a.get())));
#if H5_VERSION_GE(1, 12, 0)
    DLSCALE_CHECK_H5(H5Treclaim(mem.get(), space.get(), H5P_DEFAULT, &ptr));
#else
    DLSCALE_CHECK_H5(H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, &ptr));
#endif
    return value;
  }
  // Fixed-length strings (written by other tools): read the bytes and cut at the first NUL.
  const size_t size = H5Tget_size(file_type.get());
  std::string value(size, '\0');
  DLSCALE_CHECK_H5(H5Aread(a.get(), file_type.get(), value.data()));
  value.resize(value.find('\0') == std::string::npos ? size : value.find('\0'));
  return value;
}

int64_t get_int_attr(hid_t obj, const std::string& name) {
  Attribute a = open_attr(obj, name);
  int64_t value = 0;
  DLSCALE_CHECK_H5(H5Aread(a.get(), H5T_NATIVE_INT64, &value));
  return value;
}

double get_double_attr(hid_t obj, const std::string& name) {
  Attribute a = open_attr(obj, name);
  double value = 0;
  DLSCALE_CHECK_H5(H5Aread(a.get(), H5T_NATIVE_DOUBLE, &value));
  return value;
}

namespace {
herr_t collect_attr_name(hid_t, const char* name, const H5A_info_t*, void* names) {
  static_cast<std::vector<std::string>*>(names)->emplace_back(name);
  return 0;
}
}  // namespace

std::vector<std::string> attr_names(hid_t obj) {
  // H5Aiterate2 has the same signature in HDF5 1.10, 1.12 and 1.14 (H5Oget_info's changed).
  // Creation order where tracked (dlscale's groups); name order otherwise.
  std::vector<std::string> names;
  hsize_t at = 0;
  if (H5Aiterate2(obj, H5_INDEX_CRT_ORDER, H5_ITER_INC, &at, collect_attr_name, &names) < 0) {
    H5Eclear2(H5E_DEFAULT);
    names.clear();
    at = 0;
    DLSCALE_CHECK_H5(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &at, collect_attr_name, &names));
  }
  return names;
}

void write_doubles(hid_t parent, const std::string& name, const std::vector<hsize_t>& dims,
                   const std::vector<double>& data) {
  hsize_t n = 1;
  for (hsize_t d : dims) n *= d;
  if (n != data.size()) throw H5Error("write_doubles(" + name + "): shape does not match data size");
  Dataspace space(DLSCALE_CHECK_H5(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
  Dataset ds(DLSCALE_CHECK_H5(
      H5Dcreate2(parent, name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  if (n > 0) DLSCALE_CHECK_H5(H5Dwrite(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()));
}

void write_int64s(hid_t parent, const std::string& name, const std::vector<hsize_t>& dims,
                  const std::vector<int64_t>& data) {
  hsize_t n = 1;
  for (hsize_t d : dims) n *= d;
  if (n != data.size()) throw H5Error("write_int64s(" + name + "): shape does not match data size");
  Dataspace space(DLSCALE_CHECK_H5(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
  Dataset ds(DLSCALE_CHECK_H5(
      H5Dcreate2(parent, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  if (n > 0) DLSCALE_CHECK_H5(H5Dwrite(ds.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()));
}

std::string dims_text(const std::vector<hsize_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i > 0 ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

hsize_t announced_values(hid_t ds, const std::vector<hsize_t>& dims, size_t bytes_each, std::string* problem) {
  problem->clear();
  hsize_t n = 1;
  for (hsize_t d : dims) {
    if (d != 0 && n > std::numeric_limits<hsize_t>::max() / d) {
      *problem = "too many to count";
      return 0;
    }
    n *= d;
  }
  const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  if (static_cast<double>(n) * static_cast<double>(bytes_each) > memory) {
    *problem = "more than this machine's memory holds at " + std::to_string(bytes_each) + " bytes each";
    return 0;
  }
  Datatype type(DLSCALE_CHECK_H5(H5Dget_type(ds)));
  const size_t stored_each = H5Tget_size(type.get());
  if (stored_each == 0) throw H5Error("H5Tget_size failed");
  PropList create(DLSCALE_CHECK_H5(H5Dget_create_plist(ds)));
  if (DLSCALE_CHECK_H5(H5Pget_nfilters(create.get())) > 0) return n;  // compressed: any size may unpack
  // Unfiltered, the values take their bytes in the file: where the header says it stores them (a
  // damaged one may say anything), and within the file's own size unless they are kept outside
  // it (external storage).
  const double wanted = static_cast<double>(n) * static_cast<double>(stored_each);
  const hsize_t stored = H5Dget_storage_size(ds);
  if (static_cast<double>(stored) < wanted) {
    *problem = "of " + std::to_string(stored_each) + " bytes each, and the file stores " + std::to_string(stored) +
               " bytes of them: it is damaged";
    return 0;
  }
  if (DLSCALE_CHECK_H5(H5Pget_external_count(create.get())) == 0) {
    File file(DLSCALE_CHECK_H5(H5Iget_file_id(ds)));
    hsize_t file_bytes = 0;
    DLSCALE_CHECK_H5(H5Fget_filesize(file.get(), &file_bytes));
    if (static_cast<double>(file_bytes) < wanted) {
      *problem = "of " + std::to_string(stored_each) + " bytes each, more than the whole file's " +
                 std::to_string(file_bytes) + " bytes: it is damaged";
      return 0;
    }
  }
  return n;
}

std::vector<double> read_doubles(hid_t parent, const std::string& name, std::vector<hsize_t>* dims) {
  Dataset ds(DLSCALE_CHECK_H5(H5Dopen2(parent, name.c_str(), H5P_DEFAULT)));
  Dataspace space(DLSCALE_CHECK_H5(H5Dget_space(ds.get())));
  const int rank = DLSCALE_CHECK_H5(H5Sget_simple_extent_ndims(space.get()));
  std::vector<hsize_t> shape(static_cast<size_t>(rank));
  DLSCALE_CHECK_H5(H5Sget_simple_extent_dims(space.get(), shape.data(), nullptr));
  std::string problem;
  const hsize_t n = announced_values(ds.get(), shape, sizeof(double), &problem);
  if (!problem.empty()) throw H5Error(name + " announces " + dims_text(shape) + " values " + problem);
  std::vector<double> data(n);
  if (n > 0) DLSCALE_CHECK_H5(H5Dread(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data()));
  if (dims != nullptr) *dims = shape;
  return data;
}

std::vector<std::string> children(hid_t group) {
  H5G_info_t info;
  DLSCALE_CHECK_H5(H5Gget_info(group, &info));
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t len =
        DLSCALE_CHECK_H5(H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT));
    std::string name(static_cast<size_t>(len) + 1, '\0');
    DLSCALE_CHECK_H5(
        H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(), H5P_DEFAULT));
    name.resize(static_cast<size_t>(len));
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace dlscale::h5
