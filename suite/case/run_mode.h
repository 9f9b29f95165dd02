// What a case measures, behind one interface (docs/adding-an-axis.md, "A new run mode"): the
// runner (suite/case/runner.h) describes and prepares every case the same way, then hands the
// prepared case to its mode, which trains and measures, and gathers and summarises what it
// measured into the typed result. Every method is collective over the case's ranks unless it
// says otherwise, and every rank calls the same collectives whatever its own status.
#pragma once

#include <memory>

#include "suite/case/case_result.h"
#include "suite/case/case_setup.h"
#include "suite/meters/peak.h"

namespace dlscale {

class CaseMode {
 public:
  virtual ~CaseMode() = default;
  /// Trains and measures; called only when the case was prepared ok on every rank.
  virtual void measure(PreparedCase& prepared) = 0;
  /// The outcome of measure(), agreed by every rank (ok when it was not called). Local.
  virtual Outcome outcome() const = 0;
  /// A stop signal reached a rank during measure(): every rank of the case knows. Local.
  virtual bool interrupted() const = 0;
  /// This rank's memory peaks over the case. Local.
  virtual RankMemory memory(const PreparedCase& prepared) const = 0;
  /// Gathers what was measured on the case's rank 0 and records it in `result` there, the
  /// mode's part of the summary included (which may turn result.outcome into a failure).
  virtual void record(PreparedCase& prepared, CaseResult& result) = 0;
};

/// Timing mode: warm-up and timed steps, per-rank samples, utilisation, and with --phases on
/// more than one rank the all-reduce microbenchmark and the projection (suite/case/timing_mode.cpp).
/// `reduction_skipped`: the fault-injection hook's one skipped reduction was taken.
/// The summary of a timing case that succeeded, from its gathered samples (docs/metrics.md):
/// what `dlscale-report check` recomputes.
StepSummary step_summary(const StepSamples& steps, const ResolvedCase& c);

std::unique_ptr<CaseMode> make_timing_mode(const CaseContext& ctx, const PeakLookup& peaks, bool& reduction_skipped);

/// Accuracy mode: repeats of epochs over real data (suite/case/accuracy_mode.h).
std::unique_ptr<CaseMode> make_accuracy_mode(const CaseContext& ctx);

}  // namespace dlscale
