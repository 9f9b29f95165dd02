// Rank 0's console output while a sweep runs: the pasteable command of each case, a progress
// line during it (rewritten in place on a terminal, throttled to one line every few seconds in a
// log file), and one summary line per case.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace dlscale {

class Progress {
 public:
  /// `out` receives each case's pasteable command (stdout, or stderr when stdout is kept for
  /// machine-readable output).
  Progress(bool enabled, std::FILE* out = stdout);
  void case_started(int index, int total, const std::string& description, const std::string& command);
  void iteration(const char* phase, int done, int total, double last_step_s);
  /// Ends the progress line and prints `line` (the summary line, or the case as JSON) to `to`.
  void case_finished(const std::string& line, std::FILE* to);
  void warn(const std::string& message);

 private:
  bool enabled_;
  std::FILE* out_;
  bool tty_;
  bool line_open_ = false;
  std::string prefix_;
  std::chrono::steady_clock::time_point last_print_;
};

}  // namespace dlscale
