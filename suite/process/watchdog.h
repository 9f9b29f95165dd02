// A deadline on a thread of its own: calls `on_expiry` (which ends the process) unless it is
// destroyed first. For what no step boundary can catch: a case stuck in a collective, a read
// stuck inside HDF5 (read_guard.h).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace dlscale {

class Watchdog {
 public:
  /// Expires `seconds` after it is made.
  Watchdog(double seconds, std::function<void()> on_expiry)
      : Watchdog(
            [deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds)] {
              return std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
            },
            std::move(on_expiry)) {}
  /// Expires once `seconds_left` answers 0 or less: asked again each time the seconds it last
  /// gave have passed, so a deadline that moves later (progress) keeps it waiting.
  Watchdog(std::function<double()> seconds_left, std::function<void()> on_expiry)
      : thread_([this, left = std::move(seconds_left), expire = std::move(on_expiry)] {
          std::unique_lock<std::mutex> lock(mutex_);
          for (double wait = left(); wait > 0; wait = left()) {
            if (stopped_.wait_for(lock, std::chrono::duration<double>(wait), [this] { return done_; })) return;
          }
          expire();
        }) {}
  ~Watchdog() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    stopped_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable stopped_;
  bool done_ = false;
  std::thread thread_;  // last: it starts once the members above exist
};

}  // namespace dlscale
