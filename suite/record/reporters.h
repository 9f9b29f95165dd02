// Where a finished case goes: one Reporter interface, fed the typed result on world rank 0, in
// order — the results file first (so that nothing printed is missing from it), then the progress
// display, then the case's line on stdout (text or JSON), then the tally of the run.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "io/results_file.h"
#include "suite/case/case_result.h"
#include "suite/case/progress.h"
#include "suite/process/stop_signals.h"

namespace dlscale {

class Reporter {
 public:
  virtual ~Reporter() = default;
  /// `r` finished (world rank 0 only); r.group names its group in the results file.
  virtual void case_finished(const CaseResult& r) = 0;
};

/// The case, its all-reduce microbenchmark, projection and utilisation, written and committed
/// together: a kill leaves either all of them or none (and a resume runs the case again).
/// Throws what the results file throws (WriteError: the file is as it was).
class ResultsFileReporter final : public Reporter {
 public:
  /// `file` must have been committed once (it holds the run's provenance): the cases it holds
  /// are counted then, and each case this reporter commits adds one.
  ResultsFileReporter(ResultsFile& file, StopDeadline& deadline)
      : file_(file), deadline_(deadline), cases_(file.case_names().size()) {}
  /// The group name the next case will get ("0003").
  std::string next_group() const;
  void case_finished(const CaseResult& r) override;

 private:
  ResultsFile& file_;
  StopDeadline& deadline_;  ///< held off while a case is committed
  size_t cases_;            ///< the case groups the file holds
};

/// Ends the progress line and counts the case's work as done.
class ProgressReporter final : public Reporter {
 public:
  explicit ProgressReporter(Progress& progress) : progress_(progress) {}
  void case_finished(const CaseResult&) override { progress_.case_finished(); }

 private:
  Progress& progress_;
};

/// How `dlscale run` reports finished cases on stdout.
enum class OutputFormat { kText, kJson };
/// "text" or "json"; throws UsageError naming anything else.
OutputFormat parse_output_format(const std::string& name);

/// "GROUP SUMMARY-LINE" (text) or one JSON object (json) per case, on `out`.
class CaseLineReporter final : public Reporter {
 public:
  CaseLineReporter(OutputFormat format, std::FILE* out) : format_(format), out_(out) {}
  void case_finished(const CaseResult& r) override;

 private:
  OutputFormat format_;
  std::FILE* out_;
};

/// Counts the cases of a run by status, for its closing tally line and its exit code.
class Tally final : public Reporter {
 public:
  void case_finished(const CaseResult& r) override { ++counts_[static_cast<int>(r.outcome.status)]; }
  void skipped() { ++skipped_; }
  /// Whether a case ended with status error (exit code 1).
  bool any_error() const { return counts_[static_cast<int>(Status::kError)] > 0; }
  /// "dlscale: 5 case(s): 3 ok, 1 unsupported, 0 oom, 0 timeout, 1 error" (and ", 2 skipped"
  /// under --resume).
  std::string line() const;

 private:
  int64_t counts_[5] = {0, 0, 0, 0, 0};  ///< by Status
  int64_t skipped_ = 0;
};

/// The one-line summary of a finished case.
std::string summary_line(const CaseResult& r);

/// A finished case as one line of JSON: "case" (its group name), every case attribute and every
/// summary attribute (an accuracy case's accuracy_summary), as the results file holds them
/// (non-finite numbers as null).
std::string case_json(const CaseResult& r);

}  // namespace dlscale
