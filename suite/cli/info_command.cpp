// `dlscale info`: the provenance a results file would record.
#include <variant>

#include <fmt/format.h>

#include "suite/case/device_binding.h"
#include "suite/cli/commands.h"
#include "suite/record/provenance.h"

namespace dlscale {

int info_command(const MpiContext& mpi) {
  Registry drivers;
  register_drivers(drivers);
  const std::vector<RankInfo> table = gather_rank_table(mpi.world(), mpi.info());
  if (mpi.rank() != 0) return 0;
  // What rank 0 sees (CUDA_VISIBLE_DEVICES applied); scripts and tests read the count from the
  // line below. Asking every driver loads each one's libraries, so that the software list names
  // all their versions.
  std::string why;
  const int gpus = visible_gpus(drivers, &why);
  const auto print_attrs = [](const char* title, const Attrs& attrs) {
    fmt::print("{}\n", title);
    for (const auto& [name, value] : attrs) {
      std::string text = std::visit([](const auto& v) { return fmt::format("{}", v); }, value);
      for (size_t p = text.find('\n'); p != std::string::npos; p = text.find('\n', p)) text.replace(p, 1, " | ");
      fmt::print("  {:<22} {}\n", name, text);
    }
  };
  fmt::print("dlscale {} ({})\n\n", dlscale_version(), git_commit());
  print_attrs("Software (/system/software)", software_attributes(drivers));
  fmt::print("\n");
  print_attrs("Environment (/system/environment, allow-listed)", environment_attributes());
  fmt::print("\nRanks (/system/ranks)\n  {:>4} {:<20} {:>5} {:<14} {:>4} {:<8} {:>7}  {}\n", "rank", "host", "local",
             "cpus", "numa", "device", "threads", "blas");
  for (const RankInfo& r : table) {
    fmt::print("  {:>4} {:<20} {:>5} {:<14} {:>4} {:<8} {:>7}  {}\n", r.rank, r.host, r.local_rank, r.cpu_affinity,
               r.numa_node, r.device, r.threads, r.blas);
  }
  // One line per host: the ranks there and its interfaces (the network between hosts).
  fmt::print("\nHosts\n");
  std::vector<std::string> listed;
  for (const RankInfo& r : table) {
    if (std::find(listed.begin(), listed.end(), r.host) != listed.end()) continue;
    listed.push_back(r.host);
    int ranks = 0;
    for (const RankInfo& o : table) ranks += o.host == r.host ? 1 : 0;
    fmt::print("  {:<20} {} rank{}  {}\n", r.host, ranks, ranks == 1 ? "" : "s",
               r.network.empty() ? "(no interface but the loopback)" : r.network);
  }
  fmt::print("\nGPUs: {} visible{}\n", gpus, gpus == 0 ? fmt::format(" ({})", why) : "");
  for (int g = 0; g < gpus; ++g) fmt::print("  {}\n", describe_gpu(drivers, g));
  for (const std::string& w : provenance_warnings(detect_loaded_math()))
    fmt::print(stderr, "dlscale: warning: {}\n", w);
  for (const std::string& w : shared_core_warnings(table)) fmt::print(stderr, "dlscale: warning: {}\n", w);
  return 0;
}

}  // namespace dlscale
