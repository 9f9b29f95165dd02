#include "suite/comm/mpi_context.h"

#include <glob.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "drivers/cpu/blas_core.h"
#include "suite/comm/host_network.h"
#include "suite/errors.h"

namespace dlscale {

void mpi_fail(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(code, text, &len);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  throw MpiError(fmt::format("MPI call failed on rank {} ({}): {} at {}:{}: {}", rank, host, call, file, line,
                             std::string(text, static_cast<size_t>(len))));
}

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  // SERIALIZED: the bucketed all-reduce's communication thread calls MPI while the main thread
  // runs backward, never at the same time as another thread (suite/comm/gradient_allreduce.h). With
  // less, buckets progress only when the main thread calls MPI; /system/software records the
  // level provided.
  DLSCALE_CHECK_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
  // Errors come back as codes (DLSCALE_CHECK_MPI turns them into MpiError, which names the call
  // and the rank) instead of MPI's default of aborting the job without a word from dlscale.
  // Communicators derived from the world inherit it.
  DLSCALE_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
}

MpiSession::~MpiSession() { MPI_Finalize(); }

Communicator& Communicator::operator=(Communicator&& o) noexcept {
  if (this != &o) {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    comm_ = o.comm_;
    o.comm_ = MPI_COMM_NULL;
  }
  return *this;
}

Communicator::~Communicator() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

namespace {

std::vector<int> affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    throw std::runtime_error("sched_getaffinity failed: cannot read this rank's CPU set");
  }
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

int numa_node_of(int cpu) {
  glob_t g{};
  const std::string pattern = fmt::format("/sys/devices/system/cpu/cpu{}/node*", cpu);
  int node = -1;
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0 && g.gl_pathc > 0) {
    const std::string path = g.gl_pathv[0];
    node = std::atoi(path.substr(path.rfind("node") + 4).c_str());
  }
  globfree(&g);
  return node;
}

}  // namespace

MpiContext::MpiContext(MPI_Comm world) : world_(world) {
  DLSCALE_CHECK_MPI(MPI_Comm_rank(world, &rank_));
  DLSCALE_CHECK_MPI(MPI_Comm_size(world, &size_));
  MPI_Comm node = MPI_COMM_NULL;
  DLSCALE_CHECK_MPI(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
  node_ = Communicator(node);
  DLSCALE_CHECK_MPI(MPI_Comm_rank(node, &local_rank_));
  DLSCALE_CHECK_MPI(MPI_Comm_size(node, &local_size_));
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  DLSCALE_CHECK_MPI(MPI_Get_processor_name(name, &len));
  host_.assign(name, static_cast<size_t>(len));
  hosts_ = allgather_strings(world, host_);
  cpus_ = affinity_cpus();
}

RankInfo MpiContext::info() const {
  RankInfo r;
  r.rank = rank_;
  r.host = host_;
  r.local_rank = local_rank_;
  r.cpu_affinity = format_cpu_list(cpus_);
  r.numa_node = cpus_.empty() ? -1 : numa_node_of(cpus_.front());
  r.device = "cpu";
  r.threads = default_threads();
  r.network = describe_host_network();
  const BlasCore blas = blas_core();
  r.blas = blas.library.empty() ? "" : blas.library + " " + blas.used;
  return r;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + (i == j ? std::to_string(cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]));
    i = j + 1;
  }
  return out;
}

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t dash = item.find('-');
    const int lo = std::stoi(item.substr(0, dash));
    const int hi = dash == std::string::npos ? lo : std::stoi(item.substr(dash + 1));
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  return cpus;
}

namespace {

constexpr int kEveryRank = -1;

/// Every rank's string, on `root`, or on every rank for kEveryRank (empty elsewhere).
std::vector<std::string> collect_strings(MPI_Comm comm, const std::string& mine, int root) {
  int rank = 0, size = 0;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &size));
  const int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
  if (root == kEveryRank) {
    DLSCALE_CHECK_MPI(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, comm));
  } else {
    DLSCALE_CHECK_MPI(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, comm));
  }
  int total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[static_cast<size_t>(r)] = total;
    total += lens[static_cast<size_t>(r)];
  }
  std::string all(static_cast<size_t>(std::max(total, 1)), '\0');
  if (root == kEveryRank) {
    DLSCALE_CHECK_MPI(
        MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, comm));
  } else {
    DLSCALE_CHECK_MPI(
        MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, root, comm));
  }
  std::vector<std::string> out;
  if (root == kEveryRank || rank == root) {
    for (int r = 0; r < size; ++r) {
      out.push_back(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]),
                               static_cast<size_t>(lens[static_cast<size_t>(r)])));
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& mine, int root) {
  return collect_strings(comm, mine, root);
}

std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& mine) {
  return collect_strings(comm, mine, kEveryRank);
}

std::vector<RankInfo> gather_rank_table(MPI_Comm comm, const RankInfo& mine) {
  // Fields joined by a byte that cannot occur in host names, CPU lists or device names.
  const char sep = '\x1f';
  const std::string packed = fmt::format("{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}{}", mine.rank, sep, mine.host, sep,
                                         mine.local_rank, sep, mine.cpu_affinity, sep, mine.numa_node, sep, mine.device,
                                         sep, mine.threads, sep, mine.network, sep, mine.blas);
  std::vector<RankInfo> table;
  for (const std::string& row : gather_strings(comm, packed)) {
    std::vector<std::string> f;
    std::stringstream ss(row);
    std::string item;
    while (std::getline(ss, item, sep)) f.push_back(item);
    f.resize(9);
    table.push_back({std::stoi(f[0]), f[1], std::stoi(f[2]), f[3], std::stoi(f[4]), f[5], std::stoi(f[6]), f[7], f[8]});
  }
  return table;
}

std::vector<std::string> shared_core_warnings(const std::vector<RankInfo>& table) {
  // Per host, the ranks on each CPU; ranks linked by a CPU they share form one group, named once
  // with the CPUs shared (linear in the CPU lists: one host's 32 ranks on 2 cores give one line,
  // not one per pair).
  std::map<std::string, std::map<int, std::vector<size_t>>> ranks_on_cpu;  // host -> cpu -> rows
  for (size_t i = 0; i < table.size(); ++i) {
    for (int cpu : parse_cpu_list(table[i].cpu_affinity)) ranks_on_cpu[table[i].host][cpu].push_back(i);
  }
  std::vector<size_t> group(table.size());  // union-find over rows: each row's group's first row
  for (size_t i = 0; i < group.size(); ++i) group[i] = i;
  const auto root = [&group](size_t i) {
    while (group[i] != i) i = group[i] = group[group[i]];
    return i;
  };
  for (const auto& [host, cpus] : ranks_on_cpu) {
    for (const auto& [cpu, rows] : cpus) {
      for (size_t row : rows) {
        const size_t a = root(rows.front()), b = root(row);
        group[std::max(a, b)] = std::min(a, b);
      }
    }
  }
  std::map<size_t, std::pair<std::vector<int>, std::vector<int>>> shared;  // group -> ranks, CPUs shared
  for (size_t i = 0; i < table.size(); ++i) shared[root(i)].first.push_back(table[i].rank);
  for (const auto& [host, cpus] : ranks_on_cpu) {
    for (const auto& [cpu, rows] : cpus) {
      if (rows.size() > 1) shared[root(rows.front())].second.push_back(cpu);
    }
  }
  std::vector<std::string> warnings;
  for (auto& [first, ranks_cpus] : shared) {
    auto& [ranks, cpus] = ranks_cpus;
    if (ranks.size() < 2) continue;
    std::sort(ranks.begin(), ranks.end());
    std::sort(cpus.begin(), cpus.end());
    const std::string who = ranks.size() == 2 ? fmt::format("{} and {}", ranks[0], ranks[1]) : format_cpu_list(ranks);
    warnings.push_back(fmt::format("ranks {} on {} share CPUs {}: their timings interfere", who, table[first].host,
                                   format_cpu_list(cpus)));
  }
  return warnings;
}

MpiRankGroup::MpiRankGroup(MPI_Comm comm) : comm_(comm) {
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank_));
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &size_));
}

void MpiRankGroup::broadcast(void* data, size_t bytes, int root) const {
  if (bytes > static_cast<size_t>(INT_MAX)) throw std::invalid_argument("MpiRankGroup::broadcast: over 2 GiB");
  DLSCALE_CHECK_MPI(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_));
}

int allreduce_max(MPI_Comm comm, int value) {
  int out = 0;
  DLSCALE_CHECK_MPI(MPI_Allreduce(&value, &out, 1, MPI_INT, MPI_MAX, comm));
  return out;
}

void sleeping_barrier(MPI_Comm comm, unsigned poll_us) {
  MPI_Request barrier = MPI_REQUEST_NULL;
  DLSCALE_CHECK_MPI(MPI_Ibarrier(comm, &barrier));
  for (int done = 0; !done;) {
    DLSCALE_CHECK_MPI(MPI_Test(&barrier, &done, MPI_STATUS_IGNORE));
    if (!done) usleep(poll_us);
  }
}

}  // namespace dlscale
