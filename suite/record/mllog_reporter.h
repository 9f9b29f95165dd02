// `dlscale run --mllog DIR` (docs/running.md, "MLPerf logs"): each finished accuracy case's
// repeats as MLPerf Training logs, one file per case and repeat, written by world rank 0 after
// the case is in the results file.
#pragma once

#include <string>

#include "suite/case/mlperf_log.h"
#include "suite/record/reporters.h"

namespace dlscale {

class MllogReporter final : public Reporter {
 public:
  /// Logs go to `dir`, named after the results file's `stem` ("study" for study.h5).
  MllogReporter(std::string dir, std::string stem) : dir_(std::move(dir)), stem_(std::move(stem)) {}
  /// Writes `<dir>/<stem>_case_<group>_repeat_<R>.log` for each repeat of an accuracy case (R from
  /// 1), creating `dir` if it is not there; nothing for a timing case. A log that cannot be written is reported on
  /// stderr in one line and the run goes on: the results file already holds the case.
  void case_finished(const CaseResult& r) override;

 private:
  std::string dir_, stem_;
};

/// One event as MLPerf's `:::MLLOG {json}` line, without the newline.
std::string mllog_line(const MllogEvent& e);

}  // namespace dlscale
