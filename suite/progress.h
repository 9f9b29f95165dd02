// Rank 0's console output while a sweep runs: the pasteable command of each case, a progress
// line during it (rewritten in place on a terminal, throttled to one line every few seconds in a
// log file), and one summary line per case.
#pragma once

#include <chrono>
#include <string>

namespace dlscale {

class Progress {
 public:
  explicit Progress(bool enabled);
  void case_started(int index, int total, const std::string& description, const std::string& command);
  void iteration(const char* phase, int done, int total, double last_step_s);
  void case_finished(const std::string& summary_line);
  void warn(const std::string& message);

 private:
  bool enabled_;
  bool tty_;
  bool line_open_ = false;
  std::string prefix_;
  std::chrono::steady_clock::time_point last_print_;
};

}  // namespace dlscale
