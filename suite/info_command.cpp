// `dlscale list` (what can be run) and `dlscale info` (what would be recorded as provenance).
#include <variant>

#include <fmt/format.h>

#include "suite/builtin_suites.h"
#include "suite/commands.h"
#include "suite/provenance.h"
#include "workloads/catalog.h"

namespace dlscale {

int list_command(const MpiContext& mpi) {
  if (mpi.rank() != 0) return 0;
  Registry drivers;
  register_drivers(drivers);
  fmt::print("Workloads\n  {:<16} {:>11} {:>16}  {:<21} {}\n", "name", "params", "train GFLOP/smp", "source",
             "overrides");
  for (const CatalogEntry& e : catalog()) {
    const Workload w = make_workload(e.name);
    fmt::print("  {:<16} {:>11} {:>16.3f}  {:<21} {}\n", e.name, parameter_count(w), flops_per_sample(w).train() / 1e9,
               e.source, e.overrides);
  }
  fmt::print("\nDrivers\n");
  for (const auto& d : drivers.all()) fmt::print("  {}\n", d->name());
  fmt::print("\nSuites\n");
  for (const BuiltinSuite& s : builtin_suites()) fmt::print("  {:<12} {}\n", s.name, s.description);
  return 0;
}

int info_command(const MpiContext& mpi) {
  Registry drivers;
  register_drivers(drivers);
  const std::vector<RankInfo> table = gather_rank_table(mpi.world(), mpi.info());
  if (mpi.rank() != 0) return 0;
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
  fmt::print("\nRanks (/system/ranks)\n  {:>4} {:<20} {:>5} {:<14} {:>4} {:<8} {:>7}\n", "rank", "host", "local",
             "cpus", "numa", "device", "threads");
  for (const RankInfo& r : table) {
    fmt::print("  {:>4} {:<20} {:>5} {:<14} {:>4} {:<8} {:>7}\n", r.rank, r.host, r.local_rank, r.cpu_affinity,
               r.numa_node, r.device, r.threads);
  }
  for (const std::string& w : provenance_warnings(detect_loaded_math()))
    fmt::print(stderr, "dlscale: warning: {}\n", w);
  for (const std::string& w : shared_core_warnings(table)) fmt::print(stderr, "dlscale: warning: {}\n", w);
  return 0;
}

}  // namespace dlscale
