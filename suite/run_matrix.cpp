#include "suite/run_matrix.h"

#include <climits>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "suite/datasets.h"
#include "suite/errors.h"
#include "workloads/catalog.h"

namespace dlscale {

void MatrixOverrides::apply(MatrixSpec& m) const {
  if (workloads) m.workloads = *workloads;
  if (drivers) m.drivers = *drivers;
  if (devices) m.devices = *devices;
  if (precisions) m.precisions = *precisions;
  if (scalings) m.scalings = *scalings;
  if (batches) m.batches = *batches;
  if (threads) m.threads = *threads;
  if (data) m.data = *data;
  if (ranks) m.ranks = *ranks;
  if (bucket_mb) m.bucket_mb = *bucket_mb;
  if (warmup) m.warmup = *warmup;
  if (iterations) m.iterations = *iterations;
  if (seed) m.seed = *seed;
  if (phases) m.phases = *phases;
}

std::string CaseSpec::command() const {
  std::string cmd = fmt::format("dlscale run -w {} -d {} --device {} --batch {} --scaling {}", workload, driver, device,
                                batch, scaling);
  if (precision != "fp32") cmd += fmt::format(" --precision {}", precision);
  cmd += threads > 0 ? fmt::format(" --threads {}", threads) : std::string(" --threads auto");
  if (data != "synthetic") cmd += fmt::format(" --data {}", data);
  if (bucket_mb > 0) cmd += fmt::format(" --bucket-mb {}", bucket_mb);
  cmd += fmt::format(" --ranks {} --warmup {} --iterations {} --seed {}", ranks, warmup, iterations, seed);
  if (phases) cmd += " --phases";
  return cmd;
}

std::vector<std::string> split_workload_list(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    const bool continues = item.find('=') != std::string::npos && item.find(':') == std::string::npos;
    if (continues && !out.empty() && out.back().find(':') != std::string::npos) {
      out.back() += "," + item;
    } else {
      out.push_back(item);
    }
    pos = end + 1;
  }
  return out;
}

namespace {

[[noreturn]] void toml_fail(const std::string& source, const toml::node& node, const std::string& what) {
  throw UsageError(fmt::format("{}:{}: {}", source, node.source().begin.line, what));
}

/// A scalar or an array of scalars of one type, as a list.
template <typename T>
std::vector<T> list_of(const toml::node& node, const std::string& key, const std::string& source) {
  std::vector<T> out;
  auto take = [&](const toml::node& item) {
    if (auto v = item.value<T>(); v && item.is<T>()) {
      out.push_back(*v);
    } else {
      toml_fail(source, item,
                fmt::format("'{}' must be {}", key, std::is_same_v<T, std::string> ? "a string" : "an integer"));
    }
  };
  if (const toml::array* arr = node.as_array()) {
    if (arr->empty()) toml_fail(source, node, fmt::format("'{}' is an empty list", key));
    for (const toml::node& item : *arr) take(item);
  } else {
    take(node);
  }
  return out;
}

/// threads: integers, or "auto" for the rank's CPU set size.
std::vector<int> threads_of(const toml::node& node, const std::string& source) {
  std::vector<int> out;
  auto take = [&](const toml::node& item) {
    if (item.is_integer() && *item.value<int64_t>() > 0) {
      out.push_back(static_cast<int>(*item.value<int64_t>()));
    } else if (item.is_string() && *item.value<std::string>() == "auto") {
      out.push_back(0);
    } else {
      toml_fail(source, item, "'threads' must be a positive integer or \"auto\"");
    }
  };
  if (const toml::array* arr = node.as_array()) {
    if (arr->empty()) toml_fail(source, node, "'threads' is an empty list");
    for (const toml::node& item : *arr) take(item);
  } else {
    take(node);
  }
  return out;
}

template <typename T>
T scalar_of(const toml::node& node, const std::string& key, const std::string& source) {
  if (!node.is<T>()) {
    toml_fail(source, node,
              fmt::format("'{}' must be {}", key, std::is_same_v<T, bool> ? "true or false" : "an integer"));
  }
  return *node.value<T>();
}

/// Applies the keys of one TOML table on top of `m`.
void read_matrix(const toml::table& table, MatrixSpec& m, const std::string& source, bool allow_matrix_key) {
  for (const auto& [key_view, node] : table) {
    const std::string key(key_view.str());
    if (key == "workload") {
      m.workloads = list_of<std::string>(node, key, source);
    } else if (key == "driver") {
      m.drivers = list_of<std::string>(node, key, source);
    } else if (key == "device") {
      m.devices = list_of<std::string>(node, key, source);
    } else if (key == "precision") {
      m.precisions = list_of<std::string>(node, key, source);
    } else if (key == "scaling") {
      m.scalings = list_of<std::string>(node, key, source);
    } else if (key == "batch") {
      m.batches = list_of<int64_t>(node, key, source);
    } else if (key == "threads") {
      m.threads = threads_of(node, source);
    } else if (key == "bucket_mb") {
      m.bucket_mb.clear();
      const auto take = [&](const toml::node& item) {
        if (!item.is_number() || *item.value<double>() < 0)
          toml_fail(source, item, "'bucket_mb' must be a number >= 0");
        m.bucket_mb.push_back(*item.value<double>());
      };
      if (const toml::array* arr = node.as_array()) {
        for (const toml::node& item : *arr) take(item);
      } else {
        take(node);
      }
    } else if (key == "ranks") {
      for (int64_t r : list_of<int64_t>(node, key, source)) m.ranks.push_back(static_cast<int>(r));
    } else if (key == "data") {
      m.data = list_of<std::string>(node, key, source);
    } else if (key == "warmup") {
      m.warmup = static_cast<int>(scalar_of<int64_t>(node, key, source));
    } else if (key == "iterations") {
      m.iterations = static_cast<int>(scalar_of<int64_t>(node, key, source));
    } else if (key == "seed") {
      const int64_t seed = scalar_of<int64_t>(node, key, source);
      if (seed < 0) toml_fail(source, node, "'seed' must be zero or positive");
      m.seed = static_cast<uint64_t>(seed);
    } else if (key == "phases") {
      m.phases = scalar_of<bool>(node, key, source);
    } else if (key == "matrix" && allow_matrix_key) {
      continue;  // handled by the caller
    } else {
      toml_fail(source, node,
                fmt::format("unknown key '{}' (known: workload, driver, device, precision, scaling, batch, threads, "
                            "data, ranks, bucket_mb, "
                            "warmup, iterations, seed, phases{})",
                            key, allow_matrix_key ? ", [[matrix]]" : ""));
    }
  }
}

}  // namespace

std::vector<MatrixSpec> parse_matrix_toml(const std::string& text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw UsageError(fmt::format("{}:{}: {}", source, e.source().begin.line, e.description()));
  }
  MatrixSpec defaults;
  read_matrix(root, defaults, source, true);
  const toml::node* matrix = root.get("matrix");
  if (matrix == nullptr) return {defaults};
  const toml::array* entries = matrix->as_array();
  if (entries == nullptr || entries->empty())
    toml_fail(source, *matrix, "'matrix' must be a list of tables ([[matrix]])");
  std::vector<MatrixSpec> out;
  for (const toml::node& entry : *entries) {
    const toml::table* t = entry.as_table();
    if (t == nullptr) toml_fail(source, entry, "each [[matrix]] entry must be a table");
    MatrixSpec m = defaults;
    read_matrix(*t, m, source, false);
    out.push_back(m);
  }
  return out;
}

std::vector<CaseSpec> expand(const std::vector<MatrixSpec>& matrices, int world_size) {
  std::vector<CaseSpec> cases;
  for (const MatrixSpec& m : matrices) {
    const std::vector<int> rank_counts = m.ranks.empty() ? std::vector<int>{world_size} : m.ranks;
    // "" stands for the driver's own device until assign_default_devices() knows the drivers.
    const std::vector<std::string> devices = m.devices.empty() ? std::vector<std::string>{""} : m.devices;
    for (const std::string& workload : m.workloads)
      for (const std::string& driver : m.drivers)
        for (const std::string& device : devices)
          for (const std::string& precision : m.precisions)
            for (const std::string& scaling : m.scalings)
              for (int64_t batch : m.batches)
                for (int threads : m.threads)
                  for (const std::string& data : m.data)
                    for (int ranks : rank_counts)
                      for (double bucket_mb : m.bucket_mb) {
                        CaseSpec c;
                        c.data = data;
                        c.workload = workload;
                        c.driver = driver;
                        c.device = device;
                        c.precision = precision;
                        c.scaling = scaling;
                        c.batch = batch;
                        c.threads = threads;
                        c.warmup = m.warmup;
                        c.iterations = m.iterations;
                        c.seed = m.seed;
                        c.phases = m.phases;
                        c.ranks = ranks;
                        c.bucket_mb = bucket_mb;
                        cases.push_back(c);
                      }
  }
  return cases;
}

void assign_default_devices(std::vector<CaseSpec>& cases, const Registry& drivers) {
  for (CaseSpec& c : cases) {
    const Driver* d = drivers.find(c.driver);
    if (c.device.empty() && d != nullptr) c.device = d->default_device() == DeviceType::kCuda ? "cuda" : "cpu";
  }
}

void validate(const std::vector<CaseSpec>& cases, const Registry& drivers, int world_size) {
  if (cases.empty()) throw UsageError("nothing to run: no workload given (use -w NAME, --config FILE or --suite NAME)");
  std::map<std::string, std::unique_ptr<Dataset>> datasets;  // each read once, however many cases use it
  // Cases on a device this machine lacks: an error when no case is left (`-d cuda` without a
  // GPU); otherwise a mixed suite runs what it can and records the rest as unsupported.
  size_t runnable = 0;
  std::string unavailable;
  for (const CaseSpec& c : cases) {
    try {
      make_workload(c.workload);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    if (drivers.find(c.driver) == nullptr) {
      std::string known;
      for (const std::string& n : drivers.names()) known += (known.empty() ? "" : ", ") + n;
      throw UsageError(
          fmt::format("unknown driver '{}' (this build has: {})", c.driver, known.empty() ? "none" : known));
    }
    if (c.device != "cpu" && c.device != "cuda") {
      throw UsageError(fmt::format("unknown device '{}' (expected cpu or cuda)", c.device));
    }
    Precision precision = Precision::kFp32;
    try {
      precision = parse_precision(c.precision);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    const DeviceType device = c.device == "cuda" ? DeviceType::kCuda : DeviceType::kCpu;
    const Driver& driver = *drivers.find(c.driver);
    Support available = driver.device_available(device);
    if (available.ok) available = driver.supports_precision(make_workload(c.workload), device, precision);
    if (available.ok) {
      ++runnable;
    } else if (unavailable.empty()) {
      unavailable = fmt::format("-d {} --device {}{}: {}", c.driver, c.device,
                                c.precision == "fp32" ? "" : " --precision " + c.precision, available.reason);
    }
    if (c.scaling != "weak" && c.scaling != "strong") {
      throw UsageError(fmt::format("unknown scaling mode '{}' (expected weak or strong)", c.scaling));
    }
    if (c.ranks <= 0 || c.ranks > world_size) {
      throw UsageError(
          fmt::format("--ranks {}: this job has {} ranks (a case runs on 1 to {})", c.ranks, world_size, world_size));
    }
    if (c.bucket_mb < 0) throw UsageError(fmt::format("--bucket-mb must be 0 or more, got {}", c.bucket_mb));
    if (c.batch <= 0) throw UsageError(fmt::format("batch must be positive, got {}", c.batch));
    if (c.scaling == "strong" && c.batch % c.ranks != 0) {
      throw UsageError(fmt::format("strong scaling: global batch {} does not divide by {} ranks", c.batch, c.ranks));
    }
    if (c.threads < 0) throw UsageError(fmt::format("threads must be positive or auto, got {}", c.threads));
    if (c.iterations <= 0) throw UsageError(fmt::format("iterations must be positive, got {}", c.iterations));
    if (c.seed > static_cast<uint64_t>(INT64_MAX))
      throw UsageError(fmt::format("seed must be below 2^63, got {}", c.seed));
    if (c.warmup < 0) throw UsageError(fmt::format("warmup must be zero or more, got {}", c.warmup));
    if (c.data != "synthetic") {
      try {
        std::unique_ptr<Dataset>& data = datasets[c.data];
        if (!data) data = open_dataset(c.data);
        check_fits(*data, make_workload(c.workload));
      } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("--data {}: {}", c.data, e.what()));
      }
    }
  }
  if (runnable == 0) throw UsageError(unavailable);
}

std::string cases_to_toml(const std::vector<CaseSpec>& cases) {
  toml::table root;
  toml::array list;
  for (const CaseSpec& c : cases) {
    toml::table t{{"workload", c.workload},     {"driver", c.driver},
                  {"device", c.device},         {"precision", c.precision},
                  {"scaling", c.scaling},       {"batch", c.batch},
                  {"ranks", c.ranks},           {"warmup", c.warmup},
                  {"iterations", c.iterations}, {"seed", static_cast<int64_t>(c.seed)},
                  {"phases", c.phases},         {"data", c.data},
                  {"bucket_mb", c.bucket_mb}};
    if (c.threads > 0) {
      t.insert("threads", c.threads);
    } else {
      t.insert("threads", "auto");
    }
    list.push_back(std::move(t));
  }
  root.insert("case", std::move(list));
  std::ostringstream out;
  out << toml::toml_formatter(root);
  return out.str();
}

}  // namespace dlscale
