// What a rank used over a case's timed region besides time: its CPU time (utilisation and busy
// cores, the kernel's share, page faults, waiting for a core, steal), the CPU packages' energy
// from Linux powercap (RAPL), and its GPU's energy, utilisation,
// SM clock and power from NVML, which is loaded at run time so that the binary runs where the
// NVIDIA driver is absent. Each meter reads counters at the start and end of the region; the GPU
// is also sampled by a thread that wakes every 100 ms, so nothing is read inside a step. What a
// machine does not expose is recorded as unavailable, with why (docs/metrics.md, "Utilisation
// and energy").
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dlscale {

inline constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

/// A case is `contended` when its ranks had less CPU than they asked for: a rank's threads
/// waited for a core (runnable, not running) for at least this share of their runnable time...
inline constexpr double kContendedWaitShare = 0.10;
/// ... or the hypervisor took at least this share of its CPUs' time (steal) while it ran.
inline constexpr double kContendedStealShare = 0.05;

/// The process's CPU time (every thread: the backend's, MPI's) and the wall time of a region,
/// with what shaped it: the kernel's share (getrusage), page faults, how long the threads
/// waited for a core (/proc/self/task/*/schedstat) and the steal on its CPUs (/proc/stat).
struct CpuUsage {
  double cpu_s = 0, wall_s = 0;
  double user_s = 0, system_s = 0;            ///< getrusage(RUSAGE_SELF): cpu_s split by mode
  double minor_faults = 0, major_faults = 0;  ///< page faults (major: read from disk)
  /// Seconds the process's threads were runnable but waited for a core, and ran, summed over
  /// threads (schedstat); NaN when the kernel has no schedstat.
  double run_wait_s = kNotMeasured, run_s = kNotMeasured;
  /// Of the time of the CPUs in the process's affinity set, the share the hypervisor gave to
  /// other guests; NaN where the kernel does not report steal.
  double steal_share = kNotMeasured;
  /// cpu_s / (wall_s x threads): 1 when every thread given to the backend computed throughout.
  double utilisation(int threads) const { return cpu_s / (wall_s * threads); }
  /// cpu_s / wall_s: how many cores were busy on average.
  double busy_cores() const { return cpu_s / wall_s; }
  /// Of the CPU time, the share spent in the kernel (page faults, system calls).
  double system_share() const { return system_s / (user_s + system_s); }
  /// Of the threads' runnable time, the share spent waiting for a core: other work took it.
  double wait_share() const { return run_wait_s / (run_wait_s + run_s); }
  /// Whether the rank had less CPU than it asked for (kContendedWaitShare, kContendedStealShare).
  bool contended() const { return wait_share() >= kContendedWaitShare || steal_share >= kContendedStealShare; }
};

class CpuMeter {
 public:
  void start();
  CpuUsage stop() const;

 private:
  struct Reading {
    double cpu_s = 0, user_s = 0, system_s = 0, minor_faults = 0, major_faults = 0;
    double run_wait_s = kNotMeasured, run_s = kNotMeasured;
    double steal_ticks = kNotMeasured, total_ticks = kNotMeasured;
  };
  static Reading read();
  Reading start_;
  std::chrono::steady_clock::time_point wall0_;
};

/// Energy over a region in joules (NaN when unavailable) and where it came from, or
/// "unavailable: why".
struct Energy {
  double joules = kNotMeasured;
  std::string source;
};

/// The CPU packages' energy counters of Linux powercap (`<root>/intel-rapl:N/energy_uj`, also
/// on AMD), summed over packages; a counter that wrapped during the region is unwrapped with its
/// max_energy_range_uj. The counters cover the whole package, other processes included.
class RaplMeter {
 public:
  explicit RaplMeter(std::string root = "/sys/class/powercap");
  /// Whether every package counter could be read, else why not.
  bool available() const { return why_.empty(); }
  const std::string& why() const { return why_; }
  void start();
  Energy stop() const;

 private:
  struct Zone {
    std::string path, name;
    uint64_t range_uj = 0, start_uj = 0;
  };
  std::vector<Zone> zones_;
  std::string why_;
};

/// The NVIDIA Management Library, opened with dlopen: `available()` false, with why, when the
/// library or its initialisation is missing; nothing else changes then.
class NvmlLibrary {
 public:
  /// `name`: what dlopen looks for; nvml_library_name() by default.
  explicit NvmlLibrary(const std::string& name);
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  bool available() const { return why_.empty(); }
  const std::string& why() const { return why_; }

  struct Api;
  const Api& api() const { return *api_; }
  /// NVML's text for a return code.
  std::string error(int code) const;

 private:
  void* handle_ = nullptr;
  Api* api_ = nullptr;
  bool initialised_ = false;
  std::string why_;
};

/// DLSCALE_NVML_LIBRARY when set (test and deployment knob, docs/running.md), else
/// libnvidia-ml.so.1, the name the NVIDIA driver installs.
std::string nvml_library_name();
/// The process's NVML, opened on first use (the GPU cases of a run share it).
const NvmlLibrary& process_nvml();

/// A GPU over a region: energy from its total-energy counter, and the means of utilisation, SM
/// clock and power over the samples; NaN for what NVML does not give, `source` says which.
struct GpuUsage {
  double energy_j = kNotMeasured, utilisation_pct = kNotMeasured, sm_clock_mhz = kNotMeasured, power_w = kNotMeasured;
  int64_t samples = 0;
  std::string source;
};

class GpuMonitor {
 public:
  /// The GPU at PCI bus id `pci_bus_id` (e.g. "0000:1b:00.0") through `nvml`; unavailable, with
  /// why, when NVML is or the GPU is not found.
  GpuMonitor(const NvmlLibrary& nvml, const std::string& pci_bus_id, double interval_s = 0.1);
  /// A monitor that records `why` (a CPU case).
  explicit GpuMonitor(std::string why) : why_(std::move(why)) {}
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  void start();
  GpuUsage stop();

 private:
  void sample();
  const NvmlLibrary* nvml_ = nullptr;
  void* device_ = nullptr;
  std::string why_, bus_;
  double interval_s_ = 0.1;
  unsigned long long energy0_mj_ = 0;  // NOLINT(runtime/int): NVML's type
  bool energy_ok_ = false;
  std::string energy_why_;
  std::thread sampler_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  double util_sum_ = 0, clock_sum_ = 0, power_sum_ = 0;
  int64_t util_n_ = 0, clock_n_ = 0, power_n_ = 0;
};

/// The PCI bus id in a device description of Driver::describe_device ("… bus 0000:1b:00.0 …"),
/// or empty.
std::string pci_bus_id_of(const std::string& device_description);

}  // namespace dlscale
