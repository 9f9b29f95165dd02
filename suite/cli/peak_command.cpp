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
#include "suite/errors.h"
#include "suite/exit_code.h"
#include "suite/meters/peak.h"
#include "suite/process/stop_signals.h"
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

}  // namespace

int peak_command(const MpiContext& mpi, const PeakArgs& args) {
  // SIGTERM and SIGINT have no step boundary to wait for here: each rank ends within the grace.
  StopDeadline deadline(mpi.rank(), mpi.host());
  deadline.set_doing("the peak measurements");
  Registry drivers;
  register_drivers(drivers);
  const bool root = mpi.rank() == 0;
  std::vector<PeakKey> keys;
  std::string problem;
  const std::string out_path = args.out.value_or("results/peak.h5");
  try {
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
    std::vector<int> threads;
    for (const std::string& name : items(args.threads, "--threads")) {
      char* end = nullptr;
      const long v = name == "auto" ? mpi.default_threads() : std::strtol(name.c_str(), &end, 10);
      if (v < 1 || v > 4096 || (name != "auto" && *end != '\0')) {
        throw UsageError(fmt::format("--threads {}: expected a positive integer or auto", name));
      }
      threads.push_back(static_cast<int>(v));
    }
    if (threads.empty()) threads.push_back(mpi.default_threads());
    if (!(args.seconds > 0 && std::isfinite(args.seconds))) {
      throw UsageError(fmt::format("--seconds must be a positive number, got {}", args.seconds));
    }
    std::set<PeakKey> unique;
    for (const Driver* d : chosen) {
      for (const std::optional<DeviceType>& given : devices) {
        const DeviceType device = given.value_or(d->default_device());
        std::vector<Precision> ps = precisions;
        if (ps.empty()) {
          ps = device == DeviceType::kCuda
                   ? std::vector<Precision>{Precision::kFp32, Precision::kTf32, Precision::kBf16}
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
  } catch (const UsageError& e) {
    problem = e.what();
  }
  if (report_usage_error(mpi.world(), problem)) return exit_code(ExitCode::kUsage);

  std::optional<ResultsFile> file;
  try {
    if (root) file.emplace(open_results(out_path, args.overwrite, false, !args.out.has_value(), mpi.size()));
  } catch (const UsageError& e) {
    problem = e.what();
  }
  if (report_usage_error(mpi.world(), problem)) return exit_code(ExitCode::kUsage);

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
  // The provenance and the peaks go into the file in one commit: until it, the file is as it was.
  std::string name, error;
  if (root) {
    const auto writing = deadline.hold_off();
    try {
      ResultsFile::Update update = file->update();
      write_provenance(update, table, drivers, mpi.size(), args.command_line, "", false);
      name = update.append_group("peak", peak_group(rows, "dlscale peak", args.seconds));
      update.commit();
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (write_failed(mpi.world(), error, out_path, args.command_line)) return exit_code(ExitCode::kWriteFailed);
  if (!root) return 0;
  fmt::print("dlscale peak: {} rank(s), {} s per measurement -> {} /peak/{}\n", mpi.size(), args.seconds, out_path,
             name);
  print_peaks(stdout, rows);
  return 0;
}

}  // namespace dlscale
