#include "io/results_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <thread>

#include "io/fault_injection.h"

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

bool CaseRecord::accuracy() const {
  for (const auto& [key, value] : attrs) {
    if (key == "mode") return std::get<std::string>(value) == "accuracy";
  }
  return false;  // dlscale/1 and /2 cases: timing
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
  const int rank = DLSCALE_CHECK_H5(H5Sget_simple_extent_ndims(space.get()));
  if (rank != 1) throw H5Error("table " + name + " has " + std::to_string(rank) + " dimensions, expected 1");
  std::vector<hsize_t> dims(1);
  DLSCALE_CHECK_H5(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr));
  std::string problem;
  const hsize_t rows = h5::announced_values(ds.get(), dims, static_cast<size_t>(cols) * 8, &problem);
  if (!problem.empty()) throw H5Error("table " + name + " announces " + h5::dims_text(dims) + " rows " + problem);
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

std::string errno_text() { return std::strerror(errno); }

/// A POSIX file descriptor, closed on destruction (a close whose result matters is checked by
/// the caller through close_checked()).
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int close_checked() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// Copies `src` to `dst` (created or truncated) with the permissions of `src`.
void copy_file(const std::string& src, const std::string& dst) {
  Fd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) throw WriteError("cannot read " + src + ": " + errno_text());
  struct stat st {};
  if (::fstat(in.get(), &st) != 0) throw WriteError("cannot stat " + src + ": " + errno_text());
  Fd out(::open(dst.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, st.st_mode & 07777));
  if (out.get() < 0) throw WriteError("cannot create " + dst + ": " + errno_text());
  std::vector<char> buffer(1 << 20);
  for (;;) {
    const ssize_t n = ::read(in.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw WriteError("cannot read " + src + ": " + errno_text());
    if (n == 0) break;
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out.get(), buffer.data() + done, static_cast<size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) throw WriteError("cannot write " + dst + ": " + errno_text());
      done += w;
    }
  }
  if (out.close_checked() != 0) throw WriteError("cannot write " + dst + ": " + errno_text());
}

/// fsync of a file or a directory (a directory's makes a rename in it durable). Some file
/// systems cannot sync a directory (EINVAL): their renames are durable by other means.
void sync_path(const std::string& path, bool directory) {
  Fd fd(::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC));
  if (fd.get() < 0) throw WriteError("cannot open " + path + " to sync it: " + errno_text());
  if (::fsync(fd.get()) != 0 && !(directory && errno == EINVAL)) {
    throw WriteError("cannot sync " + path + " to the disk: " + errno_text());
  }
}

int g_commits = 0;  // commits made by this process, for fault_injection::stall_at_commit

/// Removes the copy a killed job left (none is the usual case).
void remove_stale_copy(const std::string& tmp) {
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) {
    throw H5Error("cannot remove " + tmp + ", left by an earlier run: " + errno_text());
  }
}

h5::PropList file_create_props() {
  h5::PropList fcpl(DLSCALE_CHECK_H5(H5Pcreate(H5P_FILE_CREATE)));
  DLSCALE_CHECK_H5(H5Pset_link_creation_order(fcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
  DLSCALE_CHECK_H5(H5Pset_attr_creation_order(fcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED));
  return fcpl;
}

}  // namespace

FileLock::FileLock(const std::string& target) : path_(target + ".lock") {
  // flock's lock belongs to the open file, not the name: a holder that unlinks the lock file
  // as it ends may do so between our open and our flock, so after locking, the name must still
  // lead to the file we locked, else we try again with the new one.
  for (;;) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0) throw h5::H5Error("cannot create the lock file " + path_ + ": " + errno_text());
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      std::string holder;
      if (err == EWOULDBLOCK) {
        char text[256] = {};
        const ssize_t n = ::pread(fd_, text, sizeof text - 1, 0);
        holder = n > 0 ? std::string(text, static_cast<size_t>(n)) : std::string();
        while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
      }
      ::close(fd_);
      fd_ = -1;
      if (err != EWOULDBLOCK) {
        throw h5::H5Error("cannot lock " + path_ + " (" + std::strerror(err) +
                          "): the file system must support flock (Lustre: mount with -o flock)");
      }
      throw FileBusy(target + " is being written by another dlscale (" +
                     (holder.empty() ? std::string("a process that holds ") + path_ : holder + ", holding " + path_) +
                     "); wait for it to end or choose another --out");
    }
    struct stat locked {
    }, named{};
    if (::fstat(fd_, &locked) == 0 && ::stat(path_.c_str(), &named) == 0 && locked.st_ino == named.st_ino &&
        locked.st_dev == named.st_dev) {
      break;
    }
    ::close(fd_);
    fd_ = -1;
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "unknown host");
  const std::string holder = "pid " + std::to_string(::getpid()) + " on " + host + "\n";
  // Only for the message of a refused second writer: a failure here costs that message only.
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, holder.data(), holder.size(), 0) < 0) {
    std::fprintf(stderr, "dlscale: warning: cannot write the holder into %s: %s\n", path_.c_str(),
                 errno_text().c_str());
  }
}

FileLock::~FileLock() {
  if (fd_ < 0) return;
  // Before the unlock, so that no one can lock a name we then remove. Best effort: a lock file
  // that stays is unlocked and harmless (the next writer takes it).
  ::unlink(path_.c_str());
  ::close(fd_);
}

ResultsFile ResultsFile::create(const std::string& path, bool overwrite) {
  h5::silence_error_printing();
  FileLock lock(path);
  // Checked under the lock: no other dlscale can create the file between the check and our
  // first commit.
  if (!overwrite && file_exists(path)) throw H5Error(path + " already exists (use --overwrite or --resume)");
  // A copy left by a job that was killed before its rename is of no use to anyone.
  remove_stale_copy(temp_path(path));
  return ResultsFile(path, std::move(lock), false);
}

ResultsFile ResultsFile::open(const std::string& path, bool writable) {
  h5::silence_error_printing();
  std::optional<FileLock> lock;
  if (writable) lock.emplace(path);
  ResultsFile f(path, std::move(lock), true);
  const h5::File file = f.open_read();  // checks that it is a dlscale file of a schema we read
  // Written files keep one layout: only the current schema is resumed; older ones are read.
  const std::string schema = h5::get_string_attr(file.get(), "schema");
  if (writable && schema != kSchemaVersion) {
    throw H5Error(path + ": schema '" + schema + "' is not supported for writing (expected " + kSchemaVersion + ")");
  }
  if (writable) remove_stale_copy(temp_path(path));
  return f;
}

h5::File ResultsFile::open_read() const {
  if (!file_exists(path_)) throw H5Error(path_ + ": no such file");
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) throw H5Error(path_ + ": not a regular file");
  if (H5Fis_hdf5(path_.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw H5Error(path_ + ": not an HDF5 file");
  }
  const hid_t id = H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) {
    H5Eclear2(H5E_DEFAULT);
    throw H5Error(path_ + ": cannot be opened as HDF5 (truncated or damaged)");
  }
  h5::File file(id);
  if (!h5::has_attr(file.get(), "schema")) throw H5Error(path_ + ": not a dlscale results file (no schema attribute)");
  std::string schema;
  try {
    schema = h5::get_string_attr(file.get(), "schema");
  } catch (const H5Error& e) {
    throw H5Error(path_ + ": not a dlscale results file (" + e.what() + ")");
  }
  if (std::find(std::begin(kReadableSchemas), std::end(kReadableSchemas), schema) == std::end(kReadableSchemas)) {
    throw H5Error(path_ + ": schema '" + schema + "' is not supported (expected " + kSchemaVersion + ")");
  }
  return file;
}

Attrs ResultsFile::read_root() const { return read_all_attrs(open_read().get()); }

Table ResultsFile::read_ranks() const { return read_table_at(open_read().get(), "system/ranks"); }

Attrs ResultsFile::read_attrs(const std::string& group_path) const {
  const h5::File file = open_read();
  h5::Group g = h5::open_group(file.get(), group_path);
  return read_all_attrs(g.get());
}

namespace {

std::vector<std::string> case_names_in(hid_t file) {
  if (!h5::exists(file, "cases")) return {};
  h5::Group cases = h5::open_group(file, "cases");
  return h5::children(cases.get());
}

}  // namespace

std::vector<std::string> ResultsFile::case_names() const { return case_names_in(open_read().get()); }

std::vector<std::string> ResultsFile::group_names(const std::string& parent) const {
  const h5::File file = open_read();
  if (!h5::exists(file.get(), parent)) return {};
  return h5::children(h5::open_group(file.get(), parent).get());
}

Table ResultsFile::read_table(const std::string& path) const { return read_table_at(open_read().get(), path); }

CaseRecord ResultsFile::read_case(const std::string& name) const {
  const h5::File file = open_read();
  h5::Group g = h5::open_group(file.get(), "cases/" + name);
  CaseRecord r;
  r.attrs = read_all_attrs(g.get());
  if (r.accuracy()) {
    r.ranks = std::get<int64_t>(attr(r.attrs, "ranks"));
    if (h5::exists(g.get(), "repeats")) {
      h5::Group repeats = h5::open_group(g.get(), "repeats");
      for (const std::string& rep_name : h5::children(repeats.get())) {
        h5::Group one = h5::open_group(repeats.get(), rep_name);
        GroupRecord rep;
        rep.attrs = read_all_attrs(one.get());
        rep.tables.emplace_back("epochs", read_table_at(one.get(), "epochs"));
        r.repeats.push_back(std::move(rep));
      }
    }
    if (h5::exists(g.get(), "accuracy_summary")) {
      h5::Group s = h5::open_group(g.get(), "accuracy_summary");
      r.accuracy_summary = read_all_attrs(s.get());
    }
    if (h5::exists(g.get(), "memory")) r.memory = read_table_at(g.get(), "memory");
    return r;
  }
  std::vector<hsize_t> dims;
  r.iter_time_s = h5::read_doubles(g.get(), "iter_time_s", &dims);
  r.ranks = static_cast<int64_t>(dims.at(0));
  r.iterations = static_cast<int64_t>(dims.at(1));
  if (h5::exists(g.get(), "phase_time_s")) r.phase_time_s = h5::read_doubles(g.get(), "phase_time_s", nullptr);
  if (h5::exists(g.get(), "exposed_allreduce_s")) {
    r.exposed_allreduce_s = h5::read_doubles(g.get(), "exposed_allreduce_s", nullptr);
  }
  if (h5::exists(g.get(), "parameter_gather_s")) {
    r.parameter_gather_s = h5::read_doubles(g.get(), "parameter_gather_s", nullptr);
  }
  if (h5::exists(g.get(), "bucket_start_s")) {
    std::vector<hsize_t> bucket_dims;
    r.bucket_start_s = h5::read_doubles(g.get(), "bucket_start_s", &bucket_dims);
    r.buckets = static_cast<int64_t>(bucket_dims.at(2));
  }
  if (h5::exists(g.get(), "bucket_bytes")) r.bucket_bytes = h5::read_doubles(g.get(), "bucket_bytes", nullptr);
  r.loss = h5::read_doubles(g.get(), "loss", nullptr);
  if (h5::exists(g.get(), "memory")) r.memory = read_table_at(g.get(), "memory");
  if (h5::exists(g.get(), "summary")) {
    h5::Group s = h5::open_group(g.get(), "summary");
    r.summary = read_all_attrs(s.get());
  }
  return r;
}

void ResultsFile::check_complete() const {
  try {
    const h5::File file = open_read();
    const Attrs root = read_all_attrs(file.get());
    const auto* world_size = std::get_if<int64_t>(&attr(root, "world_size"));
    if (world_size == nullptr) throw H5Error("the root attribute world_size is not an integer");
    if (read_table_at(file.get(), "system/ranks").rows() != static_cast<size_t>(*world_size)) {
      throw H5Error("/system/ranks does not have world_size rows");
    }
    // Every run's record (the current schema has one per run), and every case naming one.
    const size_t runs =
        h5::exists(file.get(), "runs") ? h5::children(h5::open_group(file.get(), "runs").get()).size() : 0;
    if (runs == 0) throw H5Error("no /runs record");
    for (const std::string& name : case_names_in(file.get())) {
      const CaseRecord r = read_case(name);
      const auto text = [&](const char* key) { return std::get<std::string>(attr(r.attrs, key)); };
      const auto number = [&](const char* key) { return std::get<int64_t>(attr(r.attrs, key)); };
      const bool ok = text("status") == "ok";
      text("case_key");
      if (number("run") < 0 || static_cast<size_t>(number("run")) >= runs) {
        throw H5Error("case " + name + " names run " + std::to_string(number("run")) + ", which /runs lacks");
      }
      if (r.accuracy()) {
        // Every repeat with its epochs (at least one), and the summary over them.
        if (ok && (r.repeats.size() != static_cast<size_t>(number("repeats")) || r.accuracy_summary.empty() ||
                   std::any_of(r.repeats.begin(), r.repeats.end(), [](const GroupRecord& rep) {
                     return rep.tables.empty() || rep.tables.front().second.rows() == 0;
                   }))) {
          throw H5Error("case " + name + " is not whole");
        }
        continue;
      }
      const bool phases = std::any_of(r.attrs.begin(), r.attrs.end(), [](const auto& a) {
        return a.first == "phases" && std::get<int64_t>(a.second) != 0;
      });
      if (r.ranks != number("ranks") || (ok && (r.iterations != number("iterations") || r.iterations == 0 ||
                                                r.loss.size() != static_cast<size_t>(r.iterations) ||
                                                r.summary.empty() || (phases && r.phase_time_s.empty())))) {
        throw H5Error("case " + name + " is not whole");
      }
    }
    if (h5::exists(file.get(), "allreduce")) {
      h5::Group groups = h5::open_group(file.get(), "allreduce");
      for (const std::string& name : h5::children(groups.get())) {
        for (const char* d : {"bytes", "time_s", "algbw_gbps", "busbw_gbps", "errors"}) {
          if (!h5::exists(groups.get(), name + "/" + d)) throw H5Error("allreduce " + name + " lacks " + d);
        }
      }
    }
  } catch (const std::out_of_range& e) {  // a missing attribute, a dataset of too few dimensions
    throw H5Error(path_ + ": not a complete dlscale file (" + e.what() + ")");
  } catch (const std::bad_variant_access&) {
    throw H5Error(path_ + ": not a complete dlscale file (an attribute of the wrong type)");
  } catch (const H5Error& e) {
    const std::string what = e.what();
    throw H5Error(what.rfind(path_ + ":", 0) == 0 ? what : path_ + ": not a complete dlscale file (" + what + ")");
  }
}

ResultsFile::Update ResultsFile::update() {
  if (!lock_) throw WriteError(path_ + ": opened for reading only");
  const std::string tmp = temp_path(path_);
  hid_t id = H5I_INVALID_HID;
  if (exists_) {
    try {
      copy_file(path_, tmp);
    } catch (const WriteError&) {
      ::unlink(tmp.c_str());  // a partial copy: of no use, and it takes the room that ran out
      throw;
    }
    id = H5Fopen(tmp.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  } else {
    const h5::PropList fcpl = file_create_props();
    id = H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, fcpl.get(), H5P_DEFAULT);
  }
  if (id < 0) {
    std::string detail;
    try {
      h5::fail("H5Fopen", __FILE__, __LINE__);
    } catch (const H5Error& e) {
      detail = e.what();
    }
    ::unlink(tmp.c_str());
    throw WriteError("cannot write " + tmp + ": " + detail);
  }
  return Update(*this, h5::File(id));
}

ResultsFile::Update::~Update() {
  if (owner_ == nullptr || committed_) return;
  // Abandoned (an error while writing): best effort, as a destructor cannot report; a copy
  // that stays is removed by the next run on the file.
  file_.reset();
  ::unlink(temp_path(owner_->path_).c_str());
}

void ResultsFile::Update::write_root(const Attrs& attrs) { write_attrs(file_.get(), attrs); }

namespace {

/// The layout /system and each /runs/NNNN share: the rank table and the software and
/// environment attributes.
void write_ranks_software_environment(hid_t group, const Table& ranks, const Attrs& software,
                                      const Attrs& environment) {
  write_table(group, "ranks", ranks);
  h5::Group sw = h5::create_group(group, "software");
  write_attrs(sw.get(), software);
  h5::Group env = h5::create_group(group, "environment");
  write_attrs(env.get(), environment);
}

}  // namespace

void ResultsFile::Update::write_system(const Table& ranks, const Attrs& software, const Attrs& environment) {
  h5::Group system = h5::create_group(file_.get(), "system");
  write_ranks_software_environment(system.get(), ranks, software, environment);
}

std::string ResultsFile::Update::append_run(const Attrs& attrs, const Table& ranks, const Attrs& software,
                                            const Attrs& environment) {
  const std::string name = append_group("runs", GroupRecord{attrs, {}, {}});
  h5::Group run = h5::open_group(file_.get(), "runs/" + name);
  write_ranks_software_environment(run.get(), ranks, software, environment);
  return name;
}

std::string ResultsFile::Update::append_group(const std::string& parent, const GroupRecord& group) {
  const size_t existing =
      h5::exists(file_.get(), parent) ? h5::children(h5::open_group(file_.get(), parent).get()).size() : 0;
  char name[16];
  std::snprintf(name, sizeof name, "%04zu", existing);
  write_group(parent + "/" + name, group);
  return name;
}

void ResultsFile::Update::write_group(const std::string& path, const GroupRecord& group) {
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
}

std::string ResultsFile::Update::write_case(const CaseRecord& r) {
  char name[16];
  std::snprintf(name, sizeof name, "%04zu", case_names_in(file_.get()).size());
  h5::Group g = h5::create_group(file_.get(), std::string("cases/") + name);
  write_attrs(g.get(), r.attrs);
  if (r.accuracy()) {
    // No step samples: the epochs of each repeat say what was measured.
    for (size_t i = 0; i < r.repeats.size(); ++i) {
      const std::string rep = (i < 10 ? "0" : "") + std::to_string(i);  // 00, 01, …: at most 100 repeats
      write_group(std::string("cases/") + name + "/repeats/" + rep, r.repeats[i]);
    }
    if (!r.accuracy_summary.empty()) {
      h5::Group s = h5::create_group(g.get(), "accuracy_summary");
      write_attrs(s.get(), r.accuracy_summary);
    }
    if (!r.memory.columns.empty()) write_table(g.get(), "memory", r.memory);
    return name;
  }
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
  if (!r.parameter_gather_s.empty()) {
    h5::write_doubles(g.get(), "parameter_gather_s", {ranks, iters}, r.parameter_gather_s);
  }
  if (!r.bucket_start_s.empty()) {
    h5::write_doubles(g.get(), "bucket_start_s", {ranks, iters, static_cast<hsize_t>(r.buckets)}, r.bucket_start_s);
  }
  if (!r.bucket_bytes.empty()) {
    h5::write_doubles(g.get(), "bucket_bytes", {static_cast<hsize_t>(r.bucket_bytes.size())}, r.bucket_bytes);
  }
  h5::write_doubles(g.get(), "loss", {static_cast<hsize_t>(r.loss.size())}, r.loss);
  if (!r.memory.columns.empty()) write_table(g.get(), "memory", r.memory);
  if (!r.summary.empty()) {
    h5::Group s = h5::create_group(g.get(), "summary");
    write_attrs(s.get(), r.summary);
  }
  return name;
}

void ResultsFile::Update::commit() {
  if (owner_ == nullptr || committed_) throw WriteError("a results-file update committed twice");
  const std::string& path = owner_->path_;
  const std::string tmp = temp_path(path);
  const int commit = g_commits++;
  fault_injection::stall_at_commit("written", commit);
  // HDF5 writes what it still caches when the file closes: a full disk shows here.
  if (H5Fclose(file_.release()) < 0) {
    std::string detail;
    try {
      h5::fail("H5Fclose", __FILE__, __LINE__);
    } catch (const H5Error& e) {
      detail = e.what();
    }
    throw WriteError("cannot write " + tmp + ": " + detail);
  }
  sync_path(tmp, false);
  fault_injection::stall_at_commit("synced", commit);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    throw WriteError("cannot rename " + tmp + " to " + path + ": " + errno_text());
  }
  committed_ = true;
  owner_->exists_ = true;
  sync_path(parent_of(path), true);
  fault_injection::stall_at_commit("renamed", commit);
}

}  // namespace dlscale
