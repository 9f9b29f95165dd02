#include "suite/case/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "suite/errors.h"

namespace dlscale {

namespace {

// Often enough to show a log is alive, rarely enough that a long sweep's log stays readable.
constexpr std::chrono::seconds kLogInterval{10};

std::string clock_text(double s) {
  const auto whole = static_cast<long long>(std::lround(s));
  if (whole >= 3600) return fmt::format("{}:{:02}:{:02}", whole / 3600, whole / 60 % 60, whole % 60);
  return fmt::format("{}:{:02}", whole / 60, whole % 60);
}

}  // namespace

ProgressMode parse_progress_mode(const std::string& name) {
  if (name == "none") return ProgressMode::kNone;
  if (name == "plain") return ProgressMode::kPlain;
  if (name == "bar") return ProgressMode::kBar;
  throw UsageError(fmt::format("--progress {}: expected none, plain or bar", name));
}

ProgressMode default_progress_mode() { return isatty(STDERR_FILENO) == 1 ? ProgressMode::kBar : ProgressMode::kPlain; }

Progress::Progress(bool enabled, ProgressMode mode, std::FILE* out)
    : enabled_(enabled), mode_(mode), out_(out), run_start_(std::chrono::steady_clock::now()) {}

void Progress::run_started(std::vector<double> case_work) {
  work_ = std::move(case_work);
  run_start_ = last_print_ = std::chrono::steady_clock::now();
}

void Progress::case_started(int index, int total, const std::string& description, const std::string& command) {
  if (!enabled_) return;
  index_ = index;
  total_ = total;
  description_ = description;
  fmt::print(out_, "# {}\n", command);
  std::fflush(out_);
}

std::string Progress::overall(double case_fraction) const {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start_).count();
  std::string line = fmt::format("{} elapsed", clock_text(elapsed));
  const double total = std::accumulate(work_.begin(), work_.end(), 0.0);
  const double current = static_cast<size_t>(index_) < work_.size() ? work_[static_cast<size_t>(index_)] : 0.0;
  const double done = work_done_ + case_fraction * current;
  // The rate of the work done so far (set-up and the all-reduce microbenchmarks included) over
  // the work left; no estimate before the first step finished.
  if (done > 0 && elapsed > 0) line += fmt::format(", about {} left", clock_text((total - done) * elapsed / done));
  return line;
}

void Progress::iteration(const char* phase, int done, int total, double last_step_s, double case_fraction) {
  if (!enabled_ || mode_ == ProgressMode::kNone) return;
  const auto now = std::chrono::steady_clock::now();
  if (mode_ == ProgressMode::kPlain && now - last_print_ < kLogInterval) return;
  last_print_ = now;
  // The case's steps so far, warm-up first: its share of the case's work.
  const bool warm = std::string(phase) == "warm-up";
  const double fraction = case_fraction >= 0 ? case_fraction
                          : warm             ? 0.0
                                             : static_cast<double>(done) / std::max(total, 1);
  const std::string line = fmt::format("[case {}/{}] {} | {}: {} {}/{} ({:.3f} s/step)", index_ + 1, total_,
                                       overall(fraction), description_, phase, done, total, last_step_s);
  if (mode_ == ProgressMode::kBar) {
    fmt::print(stderr, "\r\033[K{}", line);
    line_open_ = true;
  } else {
    fmt::print(stderr, "progress: {}\n", line);
  }
  std::fflush(stderr);
}

void Progress::case_finished() {
  if (!enabled_) return;
  if (line_open_) fmt::print(stderr, "\r\033[K");
  line_open_ = false;
  std::fflush(stderr);
  if (static_cast<size_t>(index_) < work_.size()) work_done_ += work_[static_cast<size_t>(index_)];
}

void Progress::note(const std::string& line) {
  if (!enabled_ || mode_ == ProgressMode::kNone) return;
  if (line_open_) fmt::print(stderr, "\r\033[K");
  line_open_ = false;
  fmt::print(stderr, "{}\n", line);
  std::fflush(stderr);
}

void Progress::warn(const std::string& message) {
  if (!enabled_) return;
  fmt::print(stderr, "dlscale: warning: {}\n", message);
  std::fflush(stderr);
}

}  // namespace dlscale
