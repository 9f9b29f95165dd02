// Which drivers this build has and where their code is: the reference driver and the CPU drivers
// whose libraries load quickly (oneDNN, Kokkos) are linked in; LibTorch and CUDA are driver
// modules (drivers/driver_module.h), loaded on first use; a driver the build was configured
// without is a stand-in that says so.
#include "drivers/driver.h"

#include "drivers/reference/reference_driver.h"

#ifdef DLSCALE_WITH_ONEDNN
#include "drivers/onednn/onednn_driver.h"
#endif
#ifdef DLSCALE_WITH_KOKKOS
#include "drivers/kokkos/kokkos_driver.h"
#endif

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "drivers/driver_module.h"

namespace dlscale {

namespace {

/// A driver this build was configured without: it runs on no device, and says why. Every path
/// that runs a case asks device_available() first, so nothing creates a model of it.
class MissingDriver final : public Driver {
 public:
  MissingDriver(std::string name, DeviceType device, std::string why)
      : name_(std::move(name)), device_(device), why_(std::move(why)) {}
  std::string_view name() const override { return name_; }
  Support supports(const Workload&, DeviceType) const override { return Support::no(why_); }
  Support device_available(DeviceType) const override { return Support::no(why_); }
  DeviceType default_device() const override { return device_; }
  int device_count(DeviceType, std::string* why) const override {
    if (why != nullptr) *why = why_;
    return 0;
  }
  std::unique_ptr<Model> create(const Workload&, const DriverContext&) const override {
    throw std::logic_error(fmt::format("{}: {}", name_, why_));
  }
  Support supports_peak(PeakKind, DeviceType, Precision) const override { return Support::no(why_); }
  std::map<std::string, std::string> versions() const override { return {}; }

 private:
  std::string name_;
  DeviceType device_;
  std::string why_;
};

/// Where a driver module is: in lib/dlscale beside an installed dlscale's bin folder, else where
/// the build put it. (A path the loader cannot open gives its reason through dlerror().)
std::string module_path(const std::string& file) {
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    std::string installed(exe);
    installed = installed.substr(0, installed.rfind('/') + 1) + DLSCALE_DRIVER_MODULES_FROM_BINDIR + "/" + file;
    if (access(installed.c_str(), R_OK) == 0) return installed;
  }
  return std::string(DLSCALE_DRIVER_MODULES_BUILT) + "/" + file;
}

/// A driver in a module, loaded the first time anything but its name and default device is asked
/// of it (thread-safe) and kept loaded to the end of the process. A module that cannot be loaded
/// (a library it needs is missing on this host, say) leaves a stand-in that supports nothing and
/// gives the loader's reason, as a driver this build lacks does.
class ModuleDriver final : public Driver {
 public:
  ModuleDriver(std::string name, DeviceType device, std::string file)
      : name_(std::move(name)), device_(device), file_(std::move(file)) {}
  std::string_view name() const override { return name_; }
  DeviceType default_device() const override { return device_; }
  Support supports(const Workload& w, DeviceType device) const override { return loaded().supports(w, device); }
  Support supports_precision(const Workload& w, DeviceType device, Precision precision) const override {
    return loaded().supports_precision(w, device, precision);
  }
  ComputeIsa compute_isa(DeviceType device, Precision precision) const override {
    return loaded().compute_isa(device, precision);
  }
  Support supports_denormals(DeviceType device, Denormals mode) const override {
    return loaded().supports_denormals(device, mode);
  }
  Support device_available(DeviceType device) const override { return loaded().device_available(device); }
  int device_count(DeviceType device, std::string* why) const override { return loaded().device_count(device, why); }
  std::string describe_device(DeviceType device, int index) const override {
    return loaded().describe_device(device, index);
  }
  std::unique_ptr<GradientReducer> make_reducer(DeviceType device, int device_index, const RankGroup& ranks,
                                                Deadline deadline) const override {
    return loaded().make_reducer(device, device_index, ranks, deadline);
  }
  std::unique_ptr<Model> create(const Workload& w, const DriverContext& ctx) const override {
    return loaded().create(w, ctx);
  }
  Support supports_peak(PeakKind kind, DeviceType device, Precision precision) const override {
    return loaded().supports_peak(kind, device, precision);
  }
  std::unique_ptr<PeakKernel> make_peak_kernel(PeakKind kind, int64_t n, const DriverContext& ctx) const override {
    return loaded().make_peak_kernel(kind, n, ctx);
  }
  /// Only once loaded: the libraries of a driver that nothing used were never in the process.
  std::map<std::string, std::string> versions() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return driver_ != nullptr ? driver_->versions() : std::map<std::string, std::string>{};
  }

 private:
  const Driver& loaded() const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (driver_ == nullptr) driver_ = load();
    return *driver_;
  }
  std::unique_ptr<Driver> load() const {
    const std::string path = module_path(file_);
    // Never closed: its models, reducers and the libraries' own threads may outlive any caller.
    void* module = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
    const char* error = module == nullptr ? dlerror() : nullptr;
    if (module != nullptr) {
      using Create = Driver* (*)();
      if (auto create = reinterpret_cast<Create>(dlsym(module, DLSCALE_DRIVER_MODULE_ENTRY)); create != nullptr) {
        return std::unique_ptr<Driver>(create());
      }
      error = dlerror();
    }
    return std::make_unique<MissingDriver>(
        name_, device_,
        fmt::format("the {} driver could not be loaded ({})", name_, error != nullptr ? error : path.c_str()));
  }

  std::string name_;
  DeviceType device_;
  std::string file_;
  mutable std::mutex mutex_;
  mutable std::unique_ptr<Driver> driver_;
};

const Driver* named(const std::vector<std::unique_ptr<Driver>>& drivers, std::string_view name) {
  for (const auto& d : drivers) {
    if (d->name() == name) return d.get();
  }
  return nullptr;
}

}  // namespace

void Registry::add(std::unique_ptr<Driver> driver) { drivers_.push_back(std::move(driver)); }

void Registry::add_missing(std::string name, DeviceType device, std::string why) {
  missing_.push_back(std::make_unique<MissingDriver>(std::move(name), device, std::move(why)));
}

const Driver* Registry::find(std::string_view name) const { return named(drivers_, name); }

const Driver* Registry::find_or_missing(std::string_view name) const {
  const Driver* d = find(name);
  return d != nullptr ? d : named(missing_, name);
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> n;
  for (const auto& d : drivers_) n.emplace_back(d->name());
  return n;
}

void register_drivers(Registry& registry) {
  register_reference(registry);  // no dependencies: always compiled in
#ifdef DLSCALE_WITH_TORCH
  registry.add(std::make_unique<ModuleDriver>("libtorch", DeviceType::kCpu, "dlscale-libtorch.so"));
#else
  registry.add_missing("libtorch", DeviceType::kCpu,
                       "this build of dlscale has no libtorch driver (it was configured without LibTorch)");
#endif
#ifdef DLSCALE_WITH_ONEDNN
  register_onednn(registry);
#else
  registry.add_missing("onednn", DeviceType::kCpu,
                       "this build of dlscale has no onednn driver (it was configured without oneDNN)");
#endif
#ifdef DLSCALE_WITH_CUDA
  registry.add(std::make_unique<ModuleDriver>("cuda", DeviceType::kCuda, "dlscale-cuda.so"));
#else
  registry.add_missing("cuda", DeviceType::kCuda,
                       "this build of dlscale has no cuda driver (it was configured without CUDA, cuDNN and NCCL)");
#endif
#ifdef DLSCALE_WITH_KOKKOS
  register_kokkos(registry);
#else
  registry.add_missing("kokkos", DeviceType::kCpu,
                       "this build of dlscale has no kokkos driver (it was configured without Kokkos)");
#endif
}

const char* default_driver_name() {
#if defined(DLSCALE_WITH_TORCH)
  return "libtorch";
#elif defined(DLSCALE_WITH_ONEDNN)
  return "onednn";
#elif defined(DLSCALE_WITH_KOKKOS)
  return "kokkos";
#else
  return "reference";
#endif
}

}  // namespace dlscale
