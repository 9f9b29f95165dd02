// `dlscale peak`: the measured peaks on their own (each backend's sustained GEMM rate per
// device, precision and thread count, and the memory bandwidth), written to /peak/NNNN of a
// results file with the same provenance as a training run; `dlscale run --peak FILE` reuses it.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "suite/case/device_binding.h"
#include "suite/cli/commands.h"
#include "suite/cli/lifecycle.h"
#include "suite/errors.h"
#include "suite/exit_code.h"
#include "suite/meters/peak.h"
#include "suite/process/stop_signals.h"
#include "suite/record/peak_fields.h"
#include "suite/record/provenance.h"
#include "suite/record/results_access.h"

namespace dlscale {

namespace {

std::vector<std::string> items(const std::vector<std::string>& given, const char* flag) {
  std::vector<std::string> out;
  for (const std::string& g : given) {
    for (const std::string& part : split_at_commas(g)) {
      if (part.empty()) throw UsageError(fmt::format("{}: an empty item in '{}'", flag, g));
      out.push_back(part);
    }
  }
  return out;
}

/// --driver's backends, every one of this build where none is given.
std::vector<const Driver*> chosen_drivers(const PeakArgs& args, const Registry& drivers) {
  std::vector<const Driver*> chosen;
  for (const std::string& name : items(args.drivers, "--driver")) {
    const Driver* d = drivers.find(name);
    if (d == nullptr) {
      std::string known;
      for (const std::string& n : drivers.names()) known += (known.empty() ? "" : ", ") + n;
      throw UsageError(fmt::format("--driver {}: unknown backend (this build has {})", name, known));
    }
    chosen.push_back(d);
  }
  if (chosen.empty()) {
    for (const auto& d : drivers.all()) chosen.push_back(d.get());
  }
  return chosen;
}

/// --threads' counts ("auto": `default_threads`, also where none is given).
std::vector<int> requested_threads(const PeakArgs& args, int default_threads) {
  std::vector<int> threads;
  for (const std::string& name : items(args.threads, "--threads")) {
    char* end = nullptr;
    const long v = name == "auto" ? default_threads : std::strtol(name.c_str(), &end, 10);
    if (v < 1 || v > 4096 || (name != "auto" && *end != '\0')) {
      throw UsageError(fmt::format("--threads {}: expected a positive integer or auto", name));
    }
    threads.push_back(static_cast<int>(v));
  }
  if (threads.empty()) threads.push_back(default_threads);
  return threads;
}

/// The peaks `args` asks for, each once: every driver, device, precision and thread count given
/// (a driver's own device, each device's usual precisions, `default_threads` where not given).
/// Throws UsageError.
std::vector<PeakKey> requested_peaks(const PeakArgs& args, const Registry& drivers, int default_threads) {
  std::vector<PeakKey> keys;
  const std::vector<const Driver*> chosen = chosen_drivers(args, drivers);
  std::vector<std::optional<DeviceType>> devices;
  for (const std::string& name : items(args.devices, "--device")) {
    if (name != "cpu" && name != "cuda") throw UsageError(fmt::format("--device {}: expected cpu or cuda", name));
    devices.emplace_back(name == "cpu" ? DeviceType::kCpu : DeviceType::kCuda);
  }
  if (devices.empty()) devices.emplace_back(std::nullopt);  // each driver's own
  std::vector<Precision> precisions;
  for (const std::string& name : items(args.precisions, "--precision")) {
    try {
      precisions.push_back(parse_precision(name));
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--precision {}: {}", name, e.what()));
    }
  }
  const std::vector<int> threads = requested_threads(args, default_threads);
  if (!(args.seconds > 0 && std::isfinite(args.seconds))) {
    throw UsageError(fmt::format("--seconds must be a positive number, got {}", args.seconds));
  }
  std::set<PeakKey> unique;
  for (const Driver* d : chosen) {
    for (const std::optional<DeviceType>& given : devices) {
      const DeviceType device = given.value_or(d->default_device());
      std::vector<Precision> ps = precisions;
      if (ps.empty()) {
        ps = device == DeviceType::kCuda ? std::vector<Precision>{Precision::kFp32, Precision::kTf32, Precision::kBf16}
                                         : std::vector<Precision>{Precision::kFp32, Precision::kBf16};
      }
      for (Precision p : ps) {
        for (int t : threads) {
          const PeakKey key{std::string(d->name()), device, p, t};
          if (unique.insert(key).second) keys.push_back(key);
        }
      }
    }
  }
  return keys;
}

}  // namespace

int peak_command(const MpiContext& mpi, const PeakArgs& args) {
  // SIGTERM and SIGINT have no step boundary to wait for here: each rank ends within the grace.
  StopDeadline deadline(mpi.rank(), mpi.host());
  deadline.set_doing("the peak measurements");
  Registry drivers;
  register_drivers(drivers);
  const bool root = mpi.rank() == 0;
  std::vector<PeakKey> keys;
  const Recording recording{args.out.value_or("results/peak.h5"), args.command_line, false};
  const auto check = [&] { keys = requested_peaks(args, drivers, mpi.default_threads()); };
  if (usage_refused(mpi.world(), check)) return exit_code(ExitCode::kUsage);
  std::optional<ResultsFile> file;
  if (usage_refused(mpi.world(), [&] {
        if (root) file.emplace(open_results(recording.out_path, args.overwrite, false, !args.out, mpi.size()));
      })) {
    return exit_code(ExitCode::kUsage);
  }

  const bool gpu_keys =
      std::any_of(keys.begin(), keys.end(), [](const PeakKey& k) { return k.device == DeviceType::kCuda; });
  const int gpus = gpu_keys ? visible_gpus(drivers) : 0;
  const int gpu = gpus > 0 ? gpu_index_for(mpi.local_rank(), gpus) : 0;
  RankInfo mine = mpi.info();
  if (gpus > 0) mine.device = describe_gpu(drivers, gpu);
  const std::vector<RankInfo> table = gather_rank_table(mpi.world(), mine);
  if (root) {
    for (const std::string& w : provenance_warnings(detect_loaded_math()))
      fmt::print(stderr, "dlscale: warning: {}\n", w);
  }
  const std::vector<PeakRow> rows = measure_peaks(mpi.world(), keys, drivers, args.seconds, gpu);
  std::string name;
  if (!commit_measurement(mpi, root ? &*file : nullptr, deadline, table, drivers, recording,
                          [&](ResultsFile::Update& update, int64_t run) {
                            name = update.append_group("peak", peak_group(rows, "dlscale peak", args.seconds, run));
                          })) {
    return exit_code(ExitCode::kWriteFailed);
  }
  if (!root) return 0;
  fmt::print("dlscale peak: {} rank(s), {} s per measurement -> {} /peak/{}\n", mpi.size(), args.seconds,
             recording.out_path, name);
  print_peaks(stdout, rows);
  return 0;
}

}  // namespace dlscale
