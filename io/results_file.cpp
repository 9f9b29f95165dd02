#include "io/results_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <stdexcept>

namespace dlscale {

using h5::Dataset;
using h5::Dataspace;
using h5::Datatype;
using h5::H5Error;

const AttrValue& attr(const Attrs& attrs, const std::string& name) {
  for (const auto& [key, value] : attrs) {
    if (key == name) return value;
  }
  throw std::out_of_range("no attribute '" + name + "'");
}

const Column& Table::column(const std::string& name) const {
  for (const Column& c : columns) {
    if (c.name == name) return c;
  }
  throw std::out_of_range("no column '" + name + "'");
}

namespace {

constexpr const char* kPhaseNames = "forward,backward,allreduce,update";

void write_attrs(hid_t obj, const Attrs& attrs) {
  for (const auto& [name, value] : attrs) {
    std::visit([&, n = name](const auto& v) { h5::set_attr(obj, n, v); }, value);
  }
}

Attrs read_all_attrs(hid_t obj) {
  Attrs attrs;
  for (const std::string& name : h5::attr_names(obj)) {
    h5::Attribute a(DLSCALE_CHECK_H5(H5Aopen(obj, name.c_str(), H5P_DEFAULT)));
    Datatype t(DLSCALE_CHECK_H5(H5Aget_type(a.get())));
    switch (H5Tget_class(t.get())) {
      case H5T_STRING:
        attrs.emplace_back(name, h5::get_string_attr(obj, name));
        break;
      case H5T_INTEGER:
        attrs.emplace_back(name, h5::get_int_attr(obj, name));
        break;
      default:
        attrs.emplace_back(name, h5::get_double_attr(obj, name));
        break;
    }
  }
  return attrs;
}

// Tables are packed as records of 8-byte fields: int64, float64 or a char* for a variable-length
// string.
Datatype record_type(const Table& table) {
  Datatype t(DLSCALE_CHECK_H5(H5Tcreate(H5T_COMPOUND, 8 * table.columns.size())));
  Datatype str = h5::string_type();
  for (size_t c = 0; c < table.columns.size(); ++c) {
    const Column& col = table.columns[c];
    const hid_t member = col.is_string ? str.get() : col.is_double ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64;
    DLSCALE_CHECK_H5(H5Tinsert(t.get(), col.name.c_str(), 8 * c, member));
  }
  return t;
}

void write_table(hid_t parent, const std::string& name, const Table& table) {
  const size_t rows = table.rows(), cols = table.columns.size();
  for (const Column& c : table.columns) {
    if (c.size() != rows) throw std::invalid_argument("table " + name + ": column " + c.name + " has the wrong length");
  }
  std::vector<unsigned char> buffer(rows * cols * 8);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      unsigned char* dst = buffer.data() + (r * cols + c) * 8;
      const Column& col = table.columns[c];
      if (col.is_string) {
        const char* ptr = col.strings[r].c_str();
        std::memcpy(dst, &ptr, sizeof ptr);
      } else if (col.is_double) {
        std::memcpy(dst, &col.doubles[r], 8);
      } else {
        std::memcpy(dst, &col.ints[r], 8);
      }
    }
  }
  Datatype type = record_type(table);
  const hsize_t dims[1] = {rows};
  Dataspace space(DLSCALE_CHECK_H5(H5Screate_simple(1, dims, nullptr)));
  Dataset ds(DLSCALE_CHECK_H5(
      H5Dcreate2(parent, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  if (rows > 0) DLSCALE_CHECK_H5(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()));
}

Table read_table_at(hid_t parent, const std::string& name) {
  Dataset ds(DLSCALE_CHECK_H5(H5Dopen2(parent, name.c_str(), H5P_DEFAULT)));
  Datatype file_type(DLSCALE_CHECK_H5(H5Dget_type(ds.get())));
  const int cols = DLSCALE_CHECK_H5(H5Tget_nmembers(file_type.get()));
  Table table;
  for (int c = 0; c < cols; ++c) {
    char* member = H5Tget_member_name(file_type.get(), static_cast<unsigned>(c));
    if (member == nullptr) throw H5Error("table " + name + ": unreadable member name");
    Column col;
    col.name = member;
    H5free_memory(member);
    const H5T_class_t cls = H5Tget_member_class(file_type.get(), static_cast<unsigned>(c));
    col.is_string = cls == H5T_STRING;
    col.is_double = cls == H5T_FLOAT;
    table.columns.push_back(col);
  }
  Datatype mem = record_type(table);
  Dataspace space(DLSCALE_CHECK_H5(H5Dget_space(ds.get())));
  hsize_t rows = 0;
  DLSCALE_CHECK_H5(H5Sget_simple_extent_dims(space.get(), &rows, nullptr));
  std::vector<unsigned char> buffer(rows * static_cast<size_t>(cols) * 8);
  if (rows > 0) DLSCALE_CHECK_H5(H5Dread(ds.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()));
  for (hsize_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < table.columns.size(); ++c) {
      const unsigned char* src = buffer.data() + (r * cols + c) * 8;
      Column& col = table.columns[c];
      if (col.is_string) {
        char* ptr = nullptr;
        std::memcpy(&ptr, src, sizeof ptr);
        col.strings.emplace_back(ptr != nullptr ? ptr : "");
      } else if (col.is_double) {
        double v = 0;
        std::memcpy(&v, src, 8);
        col.doubles.push_back(v);
      } else {
        int64_t v = 0;
        std::memcpy(&v, src, 8);
        col.ints.push_back(v);
      }
    }
  }
  if (rows > 0) {
#if H5_VERSION_GE(1, 12, 0)
    DLSCALE_CHECK_H5(H5Treclaim(mem.get(), space.get(), H5P_DEFAULT, buffer.data()));
#else
    DLSCALE_CHECK_H5(H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, buffer.data()));
#endif
  }
  return table;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

ResultsFile ResultsFile::create(const std::string& path, bool overwrite) {
  h5::silence_error_printing();
  if (!overwrite && file_exists(path)) throw H5Error(path + " already exists (use --overwrite or --resume)");
  h5::PropList fcpl(DLSCALE_CHECK_H5(H5Pcreate(H5P_FILE_CREATE)));
  DLSCALE_CHECK_H5(H5Pset_link_creation_order(fcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
  DLSCALE_CHECK_H5(H5Pset_attr_creation_order(fcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
  const hid_t id = H5Fcreate(path.c_str(), overwrite ? H5F_ACC_TRUNC : H5F_ACC_EXCL, fcpl.get(), H5P_DEFAULT);
  if (id < 0) {
    H5Eclear2(H5E_DEFAULT);
    throw H5Error("cannot create results file " + path);
  }
  return ResultsFile(path, h5::File(id));
}

ResultsFile ResultsFile::open(const std::string& path, bool writable) {
  h5::silence_error_printing();
  if (!file_exists(path)) throw H5Error(path + ": no such file");
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw H5Error(path + ": not an HDF5 file");
  }
  const hid_t id = H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) {
    H5Eclear2(H5E_DEFAULT);
    throw H5Error("cannot open " + path + (writable ? " for writing" : ""));
  }
  ResultsFile f(path, h5::File(id));
  if (!h5::has_attr(f.file_.get(), "schema"))
    throw H5Error(path + ": not a dlscale results file (no schema attribute)");
  const std::string schema = h5::get_string_attr(f.file_.get(), "schema");
  // Written files keep one layout: only the current schema is resumed; older ones are read.
  const bool readable =
      std::find(std::begin(kReadableSchemas), std::end(kReadableSchemas), schema) != std::end(kReadableSchemas);
  if (schema != kSchemaVersion && (writable || !readable)) {
    throw H5Error(path + ": schema '" + schema + "' is not supported" + (writable ? " for writing" : "") +
                  " (expected " + kSchemaVersion + ")");
  }
  return f;
}

void ResultsFile::write_root(const Attrs& attrs) { write_attrs(file_.get(), attrs); }

Attrs ResultsFile::read_root() const { return read_all_attrs(file_.get()); }

void ResultsFile::write_system(const Table& ranks, const Attrs& software, const Attrs& environment) {
  h5::Group system = h5::create_group(file_.get(), "system");
  write_table(system.get(), "ranks", ranks);
  h5::Group sw = h5::create_group(system.get(), "software");
  write_attrs(sw.get(), software);
  h5::Group env = h5::create_group(system.get(), "environment");
  write_attrs(env.get(), environment);
}

Table ResultsFile::read_ranks() const { return read_table_at(file_.get(), "system/ranks"); }

Attrs ResultsFile::read_attrs(const std::string& group_path) const {
  h5::Group g = h5::open_group(file_.get(), group_path);
  return read_all_attrs(g.get());
}

std::vector<std::string> ResultsFile::case_names() const {
  if (!h5::exists(file_.get(), "cases")) return {};
  h5::Group cases = h5::open_group(file_.get(), "cases");
  return h5::children(cases.get());
}

std::string ResultsFile::append_group(const std::string& parent, const GroupRecord& group) {
  const size_t existing =
      h5::exists(file_.get(), parent) ? h5::children(h5::open_group(file_.get(), parent).get()).size() : 0;
  char name[16];
  std::snprintf(name, sizeof name, "%04zu", existing);
  write_group(parent + "/" + name, group);
  return name;
}

void ResultsFile::write_group(const std::string& path, const GroupRecord& group) {
  h5::Group g = h5::create_group(file_.get(), path);
  write_attrs(g.get(), group.attrs);
  for (const DatasetRecord& d : group.datasets) {
    const std::vector<hsize_t> dims(d.dims.begin(), d.dims.end());
    if (d.is_int) {
      h5::write_int64s(g.get(), d.name, dims, d.ints);
    } else {
      h5::write_doubles(g.get(), d.name, dims, d.doubles);
    }
  }
  for (const auto& [name, table] : group.tables) write_table(g.get(), name, table);
  flush();
}

std::vector<std::string> ResultsFile::group_names(const std::string& parent) const {
  if (!h5::exists(file_.get(), parent)) return {};
  return h5::children(h5::open_group(file_.get(), parent).get());
}

Table ResultsFile::read_table(const std::string& path) const { return read_table_at(file_.get(), path); }

std::string ResultsFile::write_case(const CaseRecord& r) {
  char name[16];
  std::snprintf(name, sizeof name, "%04zu", case_names().size());
  h5::Group g = h5::create_group(file_.get(), std::string("cases/") + name);
  write_attrs(g.get(), r.attrs);
  const auto ranks = static_cast<hsize_t>(r.ranks), iters = static_cast<hsize_t>(r.iterations);
  h5::write_doubles(g.get(), "iter_time_s", {ranks, iters}, r.iter_time_s);
  if (!r.phase_time_s.empty()) {
    h5::write_doubles(g.get(), "phase_time_s", {ranks, iters, 4}, r.phase_time_s);
    Dataset ds(DLSCALE_CHECK_H5(H5Dopen2(g.get(), "phase_time_s", H5P_DEFAULT)));
    h5::set_attr(ds.get(), "phases", std::string(kPhaseNames));
  }
  if (!r.exposed_allreduce_s.empty()) {
    h5::write_doubles(g.get(), "exposed_allreduce_s", {ranks, iters}, r.exposed_allreduce_s);
  }
  h5::write_doubles(g.get(), "loss", {static_cast<hsize_t>(r.loss.size())}, r.loss);
  if (!r.memory.columns.empty()) write_table(g.get(), "memory", r.memory);
  if (!r.summary.empty()) {
    h5::Group s = h5::create_group(g.get(), "summary");
    write_attrs(s.get(), r.summary);
  }
  flush();
  return name;
}

CaseRecord ResultsFile::read_case(const std::string& name) const {
  h5::Group g = h5::open_group(file_.get(), "cases/" + name);
  CaseRecord r;
  r.attrs = read_all_attrs(g.get());
  std::vector<hsize_t> dims;
  r.iter_time_s = h5::read_doubles(g.get(), "iter_time_s", &dims);
  r.ranks = static_cast<int64_t>(dims.at(0));
  r.iterations = static_cast<int64_t>(dims.at(1));
  if (h5::exists(g.get(), "phase_time_s")) r.phase_time_s = h5::read_doubles(g.get(), "phase_time_s", nullptr);
  if (h5::exists(g.get(), "exposed_allreduce_s")) {
    r.exposed_allreduce_s = h5::read_doubles(g.get(), "exposed_allreduce_s", nullptr);
  }
  r.loss = h5::read_doubles(g.get(), "loss", nullptr);
  if (h5::exists(g.get(), "memory")) r.memory = read_table_at(g.get(), "memory");
  if (h5::exists(g.get(), "summary")) {
    h5::Group s = h5::open_group(g.get(), "summary");
    r.summary = read_all_attrs(s.get());
  }
  return r;
}

void ResultsFile::flush() { DLSCALE_CHECK_H5(H5Fflush(file_.get(), H5F_SCOPE_GLOBAL)); }

}  // namespace dlscale
