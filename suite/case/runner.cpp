#include "suite/case/runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include "suite/case/run_mode.h"
#include "suite/comm/mpi_settings.h"
#include "suite/comm/ring_allreduce.h"
#include "suite/comm/sparse_rows.h"
#include "suite/errors.h"
#include "suite/exit_code.h"
#include "suite/matrix/placement.h"
#include "suite/meters/wall_clock.h"
#include "suite/process/watchdog.h"

namespace dlscale {

namespace {

using Clock = std::chrono::steady_clock;

/// "avx512_core_bf16", "avx512_core (bf16 emulated)" when emulation runs, or "" where the driver
/// cannot tell.
std::string describe_isa(const ResolvedCase& c) {
  if (c.driver == nullptr) return "";
  const ComputeIsa isa = c.driver->compute_isa(c.spec.device, c.spec.precision);
  if (isa.native || isa.isa.empty() || !c.spec.allow_emulation) return isa.isa;  // unsupported unless allowed
  return fmt::format("{} ({} emulated)", isa.isa, precision_name(c.spec.precision));
}

/// Every rank's memory peaks on the case's rank 0 of `comm` (collective).
std::vector<RankMemory> gather_memory(MPI_Comm comm, int ranks, const RankMemory& mine) {
  int rank = 0;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  constexpr int kFields = 5;
  const int64_t local[kFields] = {mine.host_peak_rss_bytes, mine.device_peak_bytes, mine.parameter_bytes,
                                  mine.gradient_bytes, mine.optimizer_state_bytes};
  std::vector<int64_t> all(rank == 0 ? static_cast<size_t>(ranks) * kFields : 0);
  DLSCALE_CHECK_MPI(MPI_Gather(local, kFields, MPI_INT64_T, all.data(), kFields, MPI_INT64_T, 0, comm));
  std::vector<RankMemory> memory;
  for (size_t r = 0; r < all.size(); r += kFields)
    memory.push_back({all[r], all[r + 1], all[r + 2], all[r + 3], all[r + 4]});
  return memory;
}

}  // namespace

CaseResult Runner::run(const ResolvedCase& c, int index, int total) {
  // A case of P ranks runs on the first P world ranks in its placement's order, world rank 0
  // first (it writes the file); the others wait at the closing barrier. One job can so give a
  // whole scaling curve, within a host and across hosts.
  const std::vector<int>& world = c.placed.world;
  const auto me = std::find(world.begin(), world.end(), mpi_.rank());
  const bool member = me != world.end();
  MPI_Comm sub = MPI_COMM_NULL;
  DLSCALE_CHECK_MPI(
      MPI_Comm_split(mpi_.world(), member ? 0 : MPI_UNDEFINED, static_cast<int>(me - world.begin()), &sub));
  const Communicator comm(sub);
  CaseResult result;
  result.c = &c;
  if (member) result = run_on(c, comm.get(), index, total);
  sleeping_barrier(mpi_.world(), member ? 100 : 2000);
  return result;
}

CaseResult Runner::run_on(const ResolvedCase& c, MPI_Comm comm, int index, int total) {
  const Clock::time_point wall_start = Clock::now();
  // Describe: what the case is, before anything can fail.
  progress_.case_started(index, total,
                         fmt::format("{} {} {} b{}/rank t{}", c.spec.workload, c.spec.driver,
                                     device_name(c.spec.device), c.spec.batch_per_rank(), c.threads),
                         c.key);
  CaseResult r;
  r.c = &c;
  r.started_utc = utc_now();
  r.isa = describe_isa(c);
  // A case that outlives its --case-timeout ends at the next step boundary (recorded `timeout`);
  // one that reaches no step boundary long after it (a hung collective, a lost rank) cannot be
  // interrupted by MPI, so the watchdog ends the process, saying why.
  std::optional<Watchdog> watchdog;
  if (c.spec.case_timeout > 0) {
    const double limit = 2 * c.spec.case_timeout + 30;
    watchdog.emplace(limit, [this, &c, limit] {
      fmt::print(stderr,
                 "dlscale: rank {} ({}): case {} is still running {:.0f} s after it started, past its --case-timeout "
                 "{} s: it is stuck where MPI cannot interrupt it (a hung collective or a lost rank). {}\n",
                 mpi_.rank(), mpi_.host(), c.key, limit, c.spec.case_timeout, stop_hint_);
      std::fflush(stderr);
      std::_Exit(exit_code(ExitCode::kStuck));
    });
  }
  int case_rank = 0;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &case_rank));
  const CaseContext ctx{c, comm, case_rank, mpi_, progress_};
  // Prepare, then measure and record in the case's run mode.
  PreparedCase prepared = prepare_case(ctx, datasets_);
  const std::unique_ptr<CaseMode> mode =
      c.accuracy() ? make_accuracy_mode(ctx) : make_timing_mode(ctx, peaks_, test_reduction_skipped_);
  if (prepared.outcome.ok()) mode->measure(prepared);
  if (mode->interrupted()) {  // every rank of the case knows
    r.interrupted = true;
    return r;
  }
  // Agreed on every rank: set-up's, else the mode's.
  r.outcome = prepared.outcome.ok() ? mode->outcome() : prepared.outcome;
  r.memory = gather_memory(comm, c.spec.ranks, mode->memory(prepared));
  mode->record(prepared, r);
  // Finish.
  r.overlap = prepared.overlap;
  r.progress_thread = prepared.progress_thread();
  r.allreduce_mechanism = prepared.allreduce_mechanism(c.spec.ranks);
  r.allreduce_buckets = prepared.allreduce_buckets(c.spec.ranks);
  r.allreduce_lanes = prepared.allreduce_lanes();
  if (prepared.buckets && prepared.buckets->sparse_embedding()) {
    r.sparse_embedding_rows_share = prepared.buckets->embedding_rows_share();
    r.sparse_embedding_crossover_share = sparse_crossover_share(prepared.mpi.sparse_width, c.spec.ranks);
  }
  if (r.allreduce_mechanism.rfind("mpi_", 0) == 0) {  // agreed: every rank of the case or none
    r.mpi_allreduce_settings = mpi_allreduce_settings();
    r.allreduce_segment_bytes = static_cast<int64_t>(ring_segment_bytes(comm));
  }
  r.blas = blas_core();
  r.wall_s = std::chrono::duration<double>(Clock::now() - wall_start).count();
  return r;
}

}  // namespace dlscale
