// `dlscale allreduce`: the all-reduce microbenchmark on its own, written to /allreduce/NNNN of a
// results file with the same provenance as a training run.
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "suite/case/device_binding.h"
#include "suite/cli/commands.h"
#include "suite/cli/lifecycle.h"
#include "suite/comm/mpi_context.h"
#include "suite/errors.h"
#include "suite/exit_code.h"
#include "suite/matrix/placement.h"
#include "suite/meters/allreduce_microbenchmark.h"
#include "suite/process/stop_signals.h"
#include "suite/record/provenance.h"
#include "suite/record/results_access.h"

namespace dlscale {

namespace {

/// The driver whose reduction `--backend nccl` measures: the GPU driver's (NCCL on GPU memory).
const Driver* gpu_driver(const Registry& drivers) {
  for (const auto& d : drivers.all()) {
    if (d->default_device() == DeviceType::kCuda) return d.get();
  }
  return nullptr;
}

/// The sizes and iterations `args` asks for; for --backend nccl also the GPUs there are, in
/// `gpus`. Throws UsageError.
AllreduceOptions allreduce_options(const AllreduceArgs& args, const Driver* nccl_driver, int& gpus) {
  AllreduceOptions options;
  if (args.backend == "nccl") {
    if (nccl_driver == nullptr) {
      throw UsageError("--backend nccl: this build has no NCCL (configure with the cuda preset)");
    }
    std::string why;
    gpus = nccl_driver->device_count(DeviceType::kCuda, &why);
    if (gpus == 0) throw UsageError("--backend nccl: no usable CUDA GPU here (" + why + ")");
  } else if (args.backend != "mpi") {
    throw UsageError(fmt::format("unknown backend '{}' (expected mpi or nccl)", args.backend));
  }
  if (args.min_bytes < 4 || args.max_bytes < args.min_bytes || args.min_bytes % 4 != 0) {
    throw UsageError(
        fmt::format("sizes: need 4 <= --min-bytes <= --max-bytes, --min-bytes a multiple of 4, got {} "
                    "and {}",
                    args.min_bytes, args.max_bytes));
  }
  // The benchmark holds one buffer of the largest size (and MPI as much again): a size this
  // node cannot hold would end in an allocation failure after the file was written.
  const int64_t memory = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  const int64_t largest = std::max(args.sizes.empty() || args.min_max_given ? args.max_bytes : 0,
                                   args.sizes.empty() ? 0 : *std::max_element(args.sizes.begin(), args.sizes.end()));
  if (memory > 0 && largest > memory / 2) {
    throw UsageError(
        fmt::format("sizes: {} bytes per rank, more than half of this node's {} bytes of memory", largest, memory));
  }
  for (int64_t s : args.sizes) {
    if (s <= 0 || s % 4 != 0) throw UsageError(fmt::format("--sizes {}: sizes are positive multiples of 4 bytes", s));
  }
  if (args.iterations <= 0 || args.warmup < 0) throw UsageError("--iterations must be positive, --warmup not negative");
  options.sizes_bytes = args.sizes.empty() || args.min_max_given
                            ? allreduce_sizes(args.min_bytes, args.max_bytes, args.sizes)
                            : allreduce_sizes(0, -1, args.sizes);
  options.iterations = args.iterations;
  options.warmup = args.warmup;
  return options;
}

/// Rank 0's table of one microbenchmark, as nccl-tests prints it; returns its wrong elements.
int64_t print_allreduce(const AllreduceResult& x, const std::string& where, const std::string& backend,
                        const std::string& out_path, const std::string& group) {
  fmt::print(
      "dlscale allreduce: {} ranks {}, {} backend, {} warm-up + {} timed iterations per size -> {} /allreduce/{}\n",
      x.ranks, where, backend, x.warmup, x.iterations, out_path, group);
  fmt::print("{:>14} {:>12} {:>12} {:>12} {:>8}\n", "bytes", "time_us", "algbw_GB/s", "busbw_GB/s", "errors");
  int64_t wrong = 0;
  for (size_t s = 0; s < x.bytes.size(); ++s) {
    fmt::print("{:>14} {:>12.2f} {:>12.3f} {:>12.3f} {:>8}\n", x.bytes[s], x.median_s[s] * 1e6, x.algbw_gbps[s],
               x.busbw_gbps[s], x.errors[s]);
    wrong += x.errors[s];
  }
  if (x.ranks > 1)
    fmt::print("ring fit: alpha {:.3f} us, beta {:.4f} ns/byte\n", x.alpha_s * 1e6, x.beta_s_per_byte * 1e9);
  return wrong;
}

/// The microbenchmark over all ranks and, across hosts, within each host.
struct Measured {
  AllreduceResult across;
  std::optional<AllreduceResult> within;  ///< this rank's host's, where ranks share hosts across several
};

/// Over `world` through NCCL on GPU `device` (`nccl_driver`) or MPI (nullptr). Across hosts the
/// figures are the network's; then each host's ranks also measure their own links, all hosts at
/// once (the groups are disjoint), and rank 0's host is recorded.
Measured measure(MPI_Comm world, const AllreduceOptions& options, const Driver* nccl_driver, int device,
                 const CaseRanks& everyone) {
  const auto run = [&](MPI_Comm comm) {
    std::unique_ptr<GradientReducer> reducer;  // owns the communicator the transport uses
    std::unique_ptr<AllreduceTransport> transport;
    if (nccl_driver != nullptr) {
      reducer = nccl_driver->make_reducer(DeviceType::kCuda, device, MpiRankGroup(comm), Deadline::max());
      transport = reducer->transport();
    }
    return run_allreduce_benchmark(comm, options, transport.get());
  };
  Measured m{run(world), std::nullopt};
  if (everyone.hosts > 1 && everyone.max_per_host > 1) {
    MPI_Comm node = MPI_COMM_NULL;
    DLSCALE_CHECK_MPI(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    const Communicator host_comm(node);
    m.within = run(host_comm.get());
  }
  return m;
}

/// Rank 0 prints the figures (`groups`: the names of the job's group and its host's); every rank
/// exits with the same code: 1 when any element came back wrong. Rank 0 knows the job's figures
/// and its host's; each other host's first rank knows its host's.
int print_and_agree(const MpiContext& mpi, const Measured& m, int hosts, const std::string& backend,
                    const std::string& out, const std::pair<std::string, std::string>& groups) {
  int64_t host_wrong = 0;
  if (m.within) {
    for (int64_t e : m.within->errors) host_wrong += e;
  }
  if (mpi.rank() != 0) return allreduce_max(mpi.world(), host_wrong == 0 ? 0 : 1);
  int64_t wrong = 0;
  const std::string where = hosts > 1 ? fmt::format("on {} hosts", hosts) : std::string("on one host");
  wrong += print_allreduce(m.across, where, backend, out, groups.first);
  if (m.within && m.within->ranks > 1) {
    wrong += print_allreduce(*m.within, fmt::format("within host {}", mpi.host()), backend, out, groups.second);
  }
  return allreduce_max(mpi.world(), wrong == 0 ? 0 : 1);
}

}  // namespace

int allreduce_command(const MpiContext& mpi, const AllreduceArgs& args) {
  // SIGTERM and SIGINT have no step boundary to wait for here: each rank ends within the grace.
  StopDeadline deadline(mpi.rank(), mpi.host());
  deadline.set_doing("the all-reduce microbenchmark");
  const bool root = mpi.rank() == 0;
  AllreduceOptions options;
  const Recording recording{args.out.value_or("results/allreduce.h5"), args.command_line, args.resume};
  Registry drivers;
  register_drivers(drivers);
  const Driver* nccl_driver = gpu_driver(drivers);
  int gpus = 0;
  const auto check = [&] { options = allreduce_options(args, nccl_driver, gpus); };
  if (usage_refused(mpi.world(), check)) return exit_code(ExitCode::kUsage);
  std::optional<ResultsFile> file;
  if (usage_refused(mpi.world(), [&] {
        if (root) file.emplace(open_results(recording.out_path, args.overwrite, args.resume, !args.out, mpi.size()));
      })) {
    return exit_code(ExitCode::kUsage);
  }

  RankInfo mine = mpi.info();
  const bool nccl = args.backend == "nccl";
  const int device = nccl ? gpu_index_for(mpi.local_rank(), gpus) : 0;
  if (nccl) mine.device = nccl_driver->describe_device(DeviceType::kCuda, device);
  if (usage_refused(mpi.world(), [&] {
        if (nccl && gpus_shared(mpi.world(), mpi.host(), mine.device)) {
          throw UsageError(
              "--backend nccl: two ranks on one host would share a GPU, which NCCL refuses (one GPU per rank; "
              "see CUDA_VISIBLE_DEVICES and the launcher's GPU binding)");
        }
      })) {
    return exit_code(ExitCode::kUsage);
  }
  const std::vector<RankInfo> table = gather_rank_table(mpi.world(), mine);
  const CaseRanks everyone = case_ranks(mpi.hosts(), Placement::kPacked, mpi.size());
  const Measured m = measure(mpi.world(), options, nccl ? nccl_driver : nullptr, device, everyone);
  const AllreduceResult& r = m.across;
  const std::optional<AllreduceResult>& within = m.within;
  std::string name, within_name;
  const bool written = commit_measurement(
      mpi, root ? &*file : nullptr, deadline, table, drivers, recording, [&](ResultsFile::Update& update, int64_t run) {
        name = update.append_group("allreduce", allreduce_group(r, args.backend, "", everyone.hosts, run));
        if (within && within->ranks > 1) {
          within_name = update.append_group("allreduce", allreduce_group(*within, args.backend, "", 1, run));
        }
      });
  if (!written) return exit_code(ExitCode::kWriteFailed);
  return print_and_agree(mpi, m, everyone.hosts, args.backend, recording.out_path, {name, within_name});
}

}  // namespace dlscale
