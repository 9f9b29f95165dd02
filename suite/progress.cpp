#include "suite/progress.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace dlscale {

namespace {
constexpr std::chrono::seconds kLogInterval{5};
}

Progress::Progress(bool enabled, std::FILE* out) : enabled_(enabled), out_(out), tty_(isatty(STDERR_FILENO) == 1) {}

void Progress::case_started(int index, int total, const std::string& description, const std::string& command) {
  if (!enabled_) return;
  prefix_ = fmt::format("[{}/{}] {}", index + 1, total, description);
  fmt::print(out_, "# {}\n", command);
  std::fflush(out_);
  last_print_ = std::chrono::steady_clock::now();
}

void Progress::iteration(const char* phase, int done, int total, double last_step_s) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!tty_ && now - last_print_ < kLogInterval) return;
  last_print_ = now;
  const std::string line = fmt::format("{}: {} {}/{} ({:.3f} s/step)", prefix_, phase, done, total, last_step_s);
  if (tty_) {
    fmt::print(stderr, "\r\033[K{}", line);
    line_open_ = true;
  } else {
    fmt::print(stderr, "{}\n", line);
  }
  std::fflush(stderr);
}

void Progress::case_finished(const std::string& line, std::FILE* to) {
  if (!enabled_) return;
  if (line_open_) fmt::print(stderr, "\r\033[K");
  line_open_ = false;
  std::fflush(stderr);
  fmt::print(to, "{}\n", line);
  std::fflush(to);
}

void Progress::warn(const std::string& message) {
  if (!enabled_) return;
  fmt::print(stderr, "dlscale: warning: {}\n", message);
  std::fflush(stderr);
}

}  // namespace dlscale
