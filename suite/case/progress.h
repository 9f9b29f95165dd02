// Rank 0's console output while a sweep runs: the pasteable command of each case, a progress
// line (the case count, the elapsed time, an estimate of the time left and the step in progress),
// and one summary line per case. The progress line is rewritten in place on a terminal, or
// printed as a plain line every few seconds into a log file (Slurm's output), or left out.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace dlscale {

enum class ProgressMode { kNone, kPlain, kBar };

/// "none", "plain" or "bar"; throws UsageError naming anything else.
ProgressMode parse_progress_mode(const std::string& name);
/// bar when stderr (where the progress line goes) is a terminal, else plain.
ProgressMode default_progress_mode();

class Progress {
 public:
  /// `enabled`: this rank prints (rank 0). `out` receives each case's pasteable command (stdout,
  /// or stderr when stdout is kept for machine-readable output); the progress line goes to stderr.
  Progress(bool enabled, ProgressMode mode = ProgressMode::kNone, std::FILE* out = stdout);
  /// The work of every case of the run, in the same unit for all (analytic FLOP per rank,
  /// training_flops_per_rank in suite/case/work_estimate.h); the time left is the work not done over the rate of the
  /// work done so far. A case skipped by --resume counts as 0.
  void run_started(std::vector<double> case_work);
  void case_started(int index, int total, const std::string& description, const std::string& command);
  /// Step `done` of `total` of `phase` ("warm-up", "iteration", an accuracy run's "repeat r/R
  /// epoch e/E"). `case_fraction`: the share of the case's work done, when the steps shown are not
  /// the whole case (an accuracy run's epoch); by default 0 during warm-up, else done / total.
  void iteration(const char* phase, int done, int total, double last_step_s, double case_fraction = -1);
  /// Ends the progress line (the case's line follows it, suite/record/reporters.h) and counts
  /// the case's work as done.
  void case_finished();
  void warn(const std::string& message);
  /// A line of progress that stays (an accuracy run's epoch: its loss, accuracy and times) on
  /// stderr, above the progress line; left out with ProgressMode::kNone.
  void note(const std::string& line);

 private:
  /// "0:41 elapsed, about 2:10 left", `case_fraction` of the current case done.
  std::string overall(double case_fraction) const;

  bool enabled_;
  ProgressMode mode_;
  std::FILE* out_;
  bool line_open_ = false;
  std::string description_;
  std::vector<double> work_;
  double work_done_ = 0;  ///< of the finished cases
  int index_ = 0, total_ = 0;
  std::chrono::steady_clock::time_point run_start_, last_print_;
};

}  // namespace dlscale
