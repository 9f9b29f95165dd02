// Runs one case on every rank: build the model from the canonical parameters, warm up, time
// the iterations (forward+backward -> gradient all-reduce -> update), and gather every rank's
// samples on rank 0 as a CaseRecord for the results file.
#pragma once

#include <mpi.h>

#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "drivers/driver.h"
#include "io/results_file.h"
#include "suite/comm/gradient_allreduce.h"
#include "suite/comm/mpi_context.h"
#include "suite/meters/peak.h"
#include "suite/matrix/placement.h"
#include "suite/record/progress.h"
#include "suite/matrix/run_matrix.h"
#include "workloads/data/dataset.h"

namespace dlscale {

/// Phase indices of phase_time_s.
enum Phase { kForward = 0, kBackward = 1, kAllreduce = 2, kUpdate = 3, kPhaseCount = 4 };

struct StepTimes {
  double total = 0;
  double phase[kPhaseCount] = {0, 0, 0, 0};  ///< only filled when phases are timed
  /// From the end of backward to the end of the gradient average: the all-reduce time the
  /// step did not hide (waiting for slower ranks included); 0 on one rank.
  double exposed_allreduce = 0;
};

/// One timed training step, the same on every backend: forward, backward, the gradient average,
/// the update, timed by `timer` (mark 0 at the start; with `time_phases` mark 1 after forward;
/// marks 2 and 3 around the gradient average whenever there is one to time; then the last). `timer` nullptr: the host
/// clock read after model.synchronize(), as CPU models are timed. The average is `reducer`'s (a driver's own, e.g. NCCL
/// on a GPU stream), else the MPI `buckets` (started during backward where the driver reports finished gradients), else
/// one blocking MPI all-reduce over `comm`. A reducer's queued reductions are waited for, once the whole step is
/// queued, until `deadline` (GradientReducer::wait: Timeout past it).
StepTimes training_step(Model& model, MPI_Comm comm, const Optimizer& opt, bool time_phases,
                        BucketedAllreduce* buckets = nullptr, StepTimer* timer = nullptr,
                        GradientReducer* reducer = nullptr, Deadline deadline = Deadline::max());

/// `seconds` from now, or Deadline::max() for 0 (no limit): how long a case's set-up, and then
/// its training, may wait for its devices and peers (--case-timeout).
Deadline deadline_after(double seconds);

/// Agrees on the worst status over the ranks of `comm` and on the message of the first rank that
/// had it; collective.
Outcome agree(MPI_Comm comm, const Outcome& mine);

/// A failure inside a case as its outcome (Timeout: `timeout`; OutOfMemory and std::bad_alloc:
/// `oom`; anything else: `error`); an MPI failure is rethrown (nothing collective can follow it).
Outcome outcome_of(const std::exception_ptr& failure);

/// The host clock after model.synchronize(): how CPU models are timed.
std::unique_ptr<StepTimer> make_host_step_timer(Model& model);

/// A finished case and what was measured alongside it.
struct CaseOutcome {
  CaseRecord record;
  /// A stop signal (SIGTERM, SIGINT) reached a rank of the case: it ended after the step in
  /// progress, and the record must not be written (a resume runs the case again).
  bool interrupted = false;
  /// With --phases on more than one rank: the all-reduce microbenchmark at the case's gradient
  /// size (and the powers of two below it, for the fit), and the projection built on it.
  std::optional<GroupRecord> allreduce, projection;
  /// For a case that trained: /cases/NNNN/utilisation (CPU time, energy, GPU, peak).
  std::optional<GroupRecord> utilisation;
};

class Runner {
 public:
  /// `stop_hint`: what to tell the user when a case hangs past its --case-timeout and the
  /// process must end (where the finished cases are, and how to run the rest). `peaks`: what
  /// rank 0 compares each case's achieved FLOP/s with.
  Runner(const MpiContext& mpi, const Registry& drivers, Progress& progress, std::string stop_hint = "",
         PeakLookup peaks = PeakLookup({}, "", "no peak was given to this run"))
      : mpi_(mpi), drivers_(drivers), progress_(progress), stop_hint_(std::move(stop_hint)), peaks_(std::move(peaks)) {}

  /// Runs `spec` on every rank of the world communicator. The returned record is complete on
  /// rank 0 only. A setup failure on any rank (unsupported, out of memory, error) is agreed
  /// on by all ranks and recorded; the sweep goes on.

  CaseOutcome run(const CaseSpec& spec, int index, int total);

 private:
  struct Setup;
  struct Samples;
  /// The stages of one case on the ranks of `comm`; every rank calls the same collectives in the
  /// same order whatever its own status.
  CaseOutcome run_on(const CaseSpec& spec, MPI_Comm comm, int index, int total);
  /// Builds the model and what reduces and times it; the ranks agree on the outcome.
  Setup prepare(const CaseSpec& spec, MPI_Comm comm);
  /// Warm-up and timed iterations (only when prepared ok).
  Samples measure(const CaseSpec& spec, MPI_Comm comm, Setup& setup);
  /// An accuracy case after prepare(): its repeats (suite/case/accuracy_mode.h) when prepared ok, then
  /// its record, which replaces the step samples by repeats and their summary.
  CaseOutcome finish_accuracy(const CaseSpec& spec, MPI_Comm comm, Setup& setup, CaseOutcome outcome,
                              std::chrono::steady_clock::time_point wall_start);

  const MpiContext& mpi_;
  const Registry& drivers_;
  Progress& progress_;
  std::string stop_hint_;
  PeakLookup peaks_;
  std::map<std::string, std::shared_ptr<const Dataset>> datasets_;  // by spec, read once per sweep
  CaseRanks placed_;                     // the current case's world ranks and hosts (run() sets it)
  bool test_reduction_skipped_ = false;  // DLSCALE_TEST_SKIP_REDUCTION_RANK's one skip was taken
};

/// The one-line summary rank 0 prints for a finished case.
std::string summary_line(const CaseRecord& record);

}  // namespace dlscale
