// Who this rank is: world and node-local rank, host, the CPU set its launcher gave it, and the
// small collective helpers the harness needs (agreeing on an outcome, gathering strings).
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "drivers/driver.h"

namespace dlscale {

/// MPI_Init_thread / MPI_Finalize for the process's lifetime.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
};

/// Owns a communicator created by the harness (never MPI_COMM_WORLD itself).
class Communicator {
 public:
  Communicator() = default;
  explicit Communicator(MPI_Comm comm) : comm_(comm) {}
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  Communicator(Communicator&& o) noexcept : comm_(o.comm_) { o.comm_ = MPI_COMM_NULL; }
  Communicator& operator=(Communicator&& o) noexcept;
  ~Communicator();
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

/// One row of /system/ranks.
struct RankInfo {
  int rank = 0;
  std::string host;
  int local_rank = 0;
  std::string cpu_affinity;  ///< e.g. "0-3,8"
  int numa_node = -1;        ///< of the first CPU in the set; -1 when unknown
  std::string device;        ///< "cpu" or the GPU's description
  int threads = 0;           ///< default backend threads: the CPU set's size
  std::string network;       ///< the host's interfaces (suite/comm/host_network.h)
  std::string blas;          ///< the BLAS kernels this rank computes with (drivers/cpu/blas_core.h)
};

class MpiContext {
 public:
  explicit MpiContext(MPI_Comm world);

  MPI_Comm world() const { return world_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  const std::string& host() const { return host_; }
  /// Every world rank's host, on every rank (hosts()[r] is world rank r's).
  const std::vector<std::string>& hosts() const { return hosts_; }
  const std::vector<int>& cpus() const { return cpus_; }
  /// Backend threads when the case does not say: the size of this rank's CPU set.
  int default_threads() const { return static_cast<int>(cpus_.size()); }
  RankInfo info() const;

 private:
  MPI_Comm world_;
  Communicator node_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  std::string host_;
  std::vector<std::string> hosts_;
  std::vector<int> cpus_;
};

/// "0-3,8,10-11"
std::string format_cpu_list(const std::vector<int>& cpus);
std::vector<int> parse_cpu_list(const std::string& text);

/// Every rank's string, on `root` (empty elsewhere).
std::vector<std::string> gather_strings(MPI_Comm comm, const std::string& mine, int root = 0);
/// Every rank's string, on every rank.
std::vector<std::string> allgather_strings(MPI_Comm comm, const std::string& mine);
/// Every rank's RankInfo, on rank 0 (empty elsewhere).
std::vector<RankInfo> gather_rank_table(MPI_Comm comm, const RankInfo& mine);
/// Ranks on the same host whose CPU sets overlap, as readable warnings: one per group of ranks
/// linked by shared CPUs ("ranks 0 and 1 on h share CPUs 0-3", "ranks 0-31 on h share CPUs 0-1").
std::vector<std::string> shared_core_warnings(const std::vector<RankInfo>& table);

/// The maximum of `value` over all ranks.
int allreduce_max(MPI_Comm comm, int value);

/// A barrier over `comm` that waits asleep, testing every `poll_us` microseconds: a blocking
/// barrier busy-polls, and on a node with more ranks than cores the spinning ranks would steal
/// the cores a case or a probe is timed on.
void sleeping_barrier(MPI_Comm comm, unsigned poll_us);

/// The ranks of `comm` as drivers see them (drivers/driver.h), so that a backend's own
/// communicator (NCCL) bootstraps over MPI without the driver including MPI.
class MpiRankGroup final : public RankGroup {
 public:
  explicit MpiRankGroup(MPI_Comm comm);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void broadcast(void* data, size_t bytes, int root) const override;

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

}  // namespace dlscale
