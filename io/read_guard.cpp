#include "io/read_guard.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "io/h5.h"

namespace dlscale {

namespace {

using Clock = std::chrono::steady_clock;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

std::atomic<int64_t> last_progress_ns{0};

}  // namespace

namespace h5 {

void note_progress() noexcept { last_progress_ns.store(now_ns(), std::memory_order_relaxed); }

}  // namespace h5

double read_stall_seconds() {
  const char* text = std::getenv("DLSCALE_READ_STALL_S");
  if (text == nullptr) return 120;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0) || !std::isfinite(seconds)) {
    throw std::invalid_argument(std::string("DLSCALE_READ_STALL_S '") + text + "': not a number of seconds > 0");
  }
  return seconds;
}

ReadGuard::ReadGuard(std::string subject, double seconds)
    : thread_([this, subject = std::move(subject), seconds] {
        h5::note_progress();  // the guard's start counts as progress
        std::unique_lock<std::mutex> lock(mutex_);
        while (!stopped_.wait_for(lock, std::chrono::milliseconds(100), [this] { return done_; })) {
          const double idle = static_cast<double>(now_ns() - last_progress_ns.load(std::memory_order_relaxed)) / 1e9;
          if (idle < seconds) continue;
          std::fprintf(stderr, "%s: the HDF5 library made no progress reading it for %g s: the file is damaged\n",
                       subject.c_str(), seconds);
          std::fflush(stderr);
          std::_Exit(2);
        }
      }) {}

ReadGuard::~ReadGuard() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  stopped_.notify_all();
  thread_.join();
}

}  // namespace dlscale
