#include "suite/meters/utilisation.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>

namespace dlscale {

namespace {

double process_cpu_seconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) {
    throw std::runtime_error(fmt::format("clock_gettime(CLOCK_PROCESS_CPUTIME_ID): {}", std::strerror(errno)));
  }
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// The first line of a sysfs file as an unsigned number; false (and `why`) when it cannot be read.
bool read_counter(const std::string& path, uint64_t* value, std::string* why) {
  std::ifstream f(path);
  unsigned long long v = 0;  // NOLINT(runtime/int): what operator>> reads
  if (!(f >> v)) {
    *why = fmt::format("{} is not readable{}", path, errno != 0 ? fmt::format(" ({})", std::strerror(errno)) : "");
    return false;
  }
  *value = v;
  return true;
}

std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::getline(f, line);
  return line;
}

}  // namespace

namespace {

double seconds_of(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; }

/// Sums the run time and run-queue wait (ns) of every thread of this process from
/// /proc/self/task/*/schedstat; false where the kernel has no schedstat.
bool read_schedstat(double* run_s, double* wait_s) {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return false;
  double run_ns = 0, wait_ns = 0;
  bool any = false;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/schedstat");
    double run = 0, wait = 0;
    if (!(f >> run >> wait)) continue;  // a thread that ended meanwhile
    run_ns += run, wait_ns += wait, any = true;
  }
  closedir(dir);
  *run_s = run_ns * 1e-9;
  *wait_s = wait_ns * 1e-9;
  return any;
}

/// Steal and total ticks of the CPUs this process may run on (its affinity set), from their
/// cpuN lines of /proc/stat: steal elsewhere on a large VM says nothing about this rank's cores.
/// False where the kernel does not report steal (fewer than 8 fields) or no line matched.
bool read_steal(double* steal, double* total) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) return false;
  std::ifstream f("/proc/stat");
  *steal = 0, *total = 0;
  bool any = false;
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || !std::isdigit(static_cast<unsigned char>(line[3]))) continue;
    std::istringstream fields(line.substr(3));
    int cpu = -1;
    fields >> cpu;
    if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &mine)) continue;
    // user nice system idle iowait irq softirq steal [guest guest_nice: already in user and nice]
    double v = 0;
    int n = 0;
    for (; n < 8 && fields >> v; ++n) {
      *total += v;
      if (n == 7) *steal += v;
    }
    if (n < 8) return false;
    any = true;
  }
  return any;
}

}  // namespace

CpuMeter::Reading CpuMeter::read() {
  Reading r;
  r.cpu_s = process_cpu_seconds();
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) {
    throw std::runtime_error(fmt::format("getrusage(RUSAGE_SELF): {}", std::strerror(errno)));
  }
  r.user_s = seconds_of(u.ru_utime);
  r.system_s = seconds_of(u.ru_stime);
  r.minor_faults = static_cast<double>(u.ru_minflt);
  r.major_faults = static_cast<double>(u.ru_majflt);
  double run = 0, wait = 0, steal = 0, total = 0;
  if (read_schedstat(&run, &wait)) r.run_s = run, r.run_wait_s = wait;
  if (read_steal(&steal, &total)) r.steal_ticks = steal, r.total_ticks = total;
  return r;
}

void CpuMeter::start() {
  start_ = read();
  wall0_ = std::chrono::steady_clock::now();
}

CpuUsage CpuMeter::stop() const {
  const Reading end = read();
  CpuUsage u;
  u.cpu_s = end.cpu_s - start_.cpu_s;
  u.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0_).count();
  u.user_s = end.user_s - start_.user_s;
  u.system_s = end.system_s - start_.system_s;
  u.minor_faults = end.minor_faults - start_.minor_faults;
  u.major_faults = end.major_faults - start_.major_faults;
  // Threads that ended during the region take their share with them: a lower bound then.
  if (std::isfinite(start_.run_s) && std::isfinite(end.run_s)) {
    u.run_s = std::max(0.0, end.run_s - start_.run_s);
    u.run_wait_s = std::max(0.0, end.run_wait_s - start_.run_wait_s);
  }
  const double ticks = end.total_ticks - start_.total_ticks;
  u.steal_share = ticks > 0 ? (end.steal_ticks - start_.steal_ticks) / ticks : kNotMeasured;
  return u;
}

RaplMeter::RaplMeter(std::string root) {
  DIR* dir = opendir(root.c_str());
  if (dir == nullptr) {
    why_ = fmt::format("{} cannot be opened ({}): no powercap interface", root, std::strerror(errno));
    return;
  }
  std::vector<std::string> names;
  while (const dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    // Packages are intel-rapl:N; intel-rapl:N:M are their sub-zones (cores, DRAM), which the
    // package counter already includes.
    if (name.rfind("intel-rapl:", 0) == 0 && name.find(':', 11) == std::string::npos) names.push_back(name);
  }
  closedir(dir);
  if (names.empty()) {
    why_ = fmt::format("{} has no intel-rapl package zone (no RAPL driver, or a container without it)", root);
    return;
  }
  for (const std::string& name : names) {
    Zone z;
    z.path = root + "/" + name;
    z.name = read_line(z.path + "/name");
    uint64_t probe = 0;
    if (!read_counter(z.path + "/max_energy_range_uj", &z.range_uj, &why_) ||
        !read_counter(z.path + "/energy_uj", &probe, &why_)) {
      why_ += " (since Linux 5.10 only root may read energy_uj)";
      zones_.clear();
      return;
    }
    zones_.push_back(z);
  }
}

void RaplMeter::start() {
  for (Zone& z : zones_) {
    if (!read_counter(z.path + "/energy_uj", &z.start_uj, &why_)) return;
  }
}

Energy RaplMeter::stop() const {
  if (!available()) return {kNotMeasured, "unavailable: " + why_};
  double joules = 0;
  std::string names;
  for (const Zone& z : zones_) {
    uint64_t now = 0;
    std::string why;
    if (!read_counter(z.path + "/energy_uj", &now, &why)) return {kNotMeasured, "unavailable: " + why};
    // The counter wraps at max_energy_range_uj; a region is far shorter than one wrap.
    const uint64_t used = now >= z.start_uj ? now - z.start_uj : now + z.range_uj - z.start_uj;
    joules += static_cast<double>(used) * 1e-6;
    names += (names.empty() ? "" : ", ") + z.name + " (" + z.path + ")";
  }
  return {joules, "powercap: " + names};
}

// ---------------------------------------------------------------------------------------------
// NVML: the few entry points used, with the types of nvml.h (which a build need not have).

namespace {
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlUtilization {
  unsigned int gpu, memory;
};
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;
}  // namespace

struct NvmlLibrary::Api {
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  int (*total_energy)(NvmlDevice, unsigned long long*) = nullptr;  // NOLINT(runtime/int)
  int (*power)(NvmlDevice, unsigned int*) = nullptr;
  int (*utilisation)(NvmlDevice, NvmlUtilization*) = nullptr;
  int (*clock)(NvmlDevice, int, unsigned int*) = nullptr;
};

NvmlLibrary::NvmlLibrary(const std::string& name) {
  handle_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    const char* err = dlerror();
    why_ = fmt::format("NVML: cannot load {} ({})", name, err != nullptr ? err : "dlopen failed");
    return;
  }
  api_ = new Api;
  const auto find = [&](auto* fn, const char* symbol) {
    *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(dlsym(handle_, symbol));
    if (*fn == nullptr && why_.empty()) why_ = fmt::format("NVML: {} lacks {}", name, symbol);
  };
  find(&api_->init, "nvmlInit_v2");
  find(&api_->shutdown, "nvmlShutdown");
  find(&api_->error_string, "nvmlErrorString");
  find(&api_->by_pci_bus_id, "nvmlDeviceGetHandleByPciBusId_v2");
  find(&api_->total_energy, "nvmlDeviceGetTotalEnergyConsumption");
  find(&api_->power, "nvmlDeviceGetPowerUsage");
  find(&api_->utilisation, "nvmlDeviceGetUtilizationRates");
  find(&api_->clock, "nvmlDeviceGetClockInfo");
  if (!why_.empty()) return;
  const int rc = api_->init();
  if (rc != kNvmlSuccess) {
    why_ = fmt::format("NVML: nvmlInit_v2 failed: {}", error(rc));
    return;
  }
  initialised_ = true;
}

NvmlLibrary::~NvmlLibrary() {
  if (initialised_) api_->shutdown();  // nothing useful to do with its failure at exit
  delete api_;
  if (handle_ != nullptr) dlclose(handle_);
}

std::string NvmlLibrary::error(int code) const {
  const char* text = api_ != nullptr && api_->error_string != nullptr ? api_->error_string(code) : nullptr;
  return text != nullptr ? fmt::format("{} (NVML return code {})", text, code)
                         : fmt::format("NVML return code {}", code);
}

std::string nvml_library_name() {
  const char* env = std::getenv("DLSCALE_NVML_LIBRARY");
  return env != nullptr && *env != '\0' ? env : "libnvidia-ml.so.1";
}

const NvmlLibrary& process_nvml() {
  static const NvmlLibrary nvml(nvml_library_name());
  return nvml;
}

std::string pci_bus_id_of(const std::string& description) {
  const size_t at = description.find(" bus ");
  if (at == std::string::npos) return "";
  const size_t begin = at + 5, end = description.find(' ', begin);
  return description.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

GpuMonitor::GpuMonitor(const NvmlLibrary& nvml, const std::string& pci_bus_id, double interval_s)
    : bus_(pci_bus_id), interval_s_(interval_s) {
  if (!nvml.available()) {
    why_ = nvml.why();
    return;
  }
  if (pci_bus_id.empty()) {
    why_ = "NVML: the GPU's PCI bus id is unknown";
    return;
  }
  NvmlDevice device = nullptr;
  const int rc = nvml.api().by_pci_bus_id(pci_bus_id.c_str(), &device);
  if (rc != kNvmlSuccess) {
    why_ = fmt::format("NVML: no device at bus {}: {}", pci_bus_id, nvml.error(rc));
    return;
  }
  nvml_ = &nvml;
  device_ = device;
}

GpuMonitor::~GpuMonitor() {
  if (sampler_.joinable()) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    sampler_.join();
  }
}

void GpuMonitor::sample() {
  const NvmlLibrary::Api& api = nvml_->api();
  const auto dev = static_cast<NvmlDevice>(device_);
  NvmlUtilization u{};
  unsigned int clock = 0, power_mw = 0;
  // A query NVML does not support on this GPU leaves its mean NaN; none of them is an error.
  if (api.utilisation(dev, &u) == kNvmlSuccess) util_sum_ += u.gpu, ++util_n_;
  if (api.clock(dev, kNvmlClockSm, &clock) == kNvmlSuccess) clock_sum_ += clock, ++clock_n_;
  if (api.power(dev, &power_mw) == kNvmlSuccess) power_sum_ += power_mw * 1e-3, ++power_n_;
}

void GpuMonitor::start() {
  if (nvml_ == nullptr) return;
  const int rc = nvml_->api().total_energy(static_cast<NvmlDevice>(device_), &energy0_mj_);
  energy_ok_ = rc == kNvmlSuccess;
  if (!energy_ok_) energy_why_ = "nvmlDeviceGetTotalEnergyConsumption: " + nvml_->error(rc);
  stop_ = false;
  sampler_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      sample();
      wake_.wait_for(lock, std::chrono::duration<double>(interval_s_), [this] { return stop_; });
    }
  });
}

GpuUsage GpuMonitor::stop() {
  GpuUsage g;
  if (nvml_ == nullptr) {
    g.source = "unavailable: " + why_;
    return g;
  }
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (sampler_.joinable()) sampler_.join();
  sample();                       // the region's end, so that a region shorter than the interval has two samples
  unsigned long long end_mj = 0;  // NOLINT(runtime/int)
  if (energy_ok_) {
    const int rc = nvml_->api().total_energy(static_cast<NvmlDevice>(device_), &end_mj);
    energy_ok_ = rc == kNvmlSuccess;
    if (!energy_ok_) energy_why_ = "nvmlDeviceGetTotalEnergyConsumption: " + nvml_->error(rc);
  }
  if (energy_ok_) g.energy_j = static_cast<double>(end_mj - energy0_mj_) * 1e-3;
  if (util_n_ > 0) g.utilisation_pct = util_sum_ / static_cast<double>(util_n_);
  if (clock_n_ > 0) g.sm_clock_mhz = clock_sum_ / static_cast<double>(clock_n_);
  if (power_n_ > 0) g.power_w = power_sum_ / static_cast<double>(power_n_);
  g.samples = std::max({util_n_, clock_n_, power_n_});
  g.source = fmt::format("nvml: GPU at bus {}, sampled every {} s{}", bus_, interval_s_,
                         energy_ok_ ? "" : "; energy unavailable: " + energy_why_);
  return g;
}

}  // namespace dlscale
