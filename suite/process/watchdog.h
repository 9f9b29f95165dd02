// A deadline on a thread of its own: calls `on_expiry` (which ends the process) unless it is
// destroyed first. For what no step boundary can catch: a case stuck in a collective.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace dlscale {

class Watchdog {
 public:
  Watchdog(double seconds, std::function<void()> on_expiry)
      : thread_([this, seconds, expire = std::move(on_expiry)] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!stopped_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) expire();
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
