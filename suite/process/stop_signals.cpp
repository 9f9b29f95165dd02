#include "suite/process/stop_signals.h"

#include <semaphore.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "suite/exit_code.h"
#include "suite/process/crash_report.h"

namespace dlscale {

namespace {
volatile std::sig_atomic_t g_signal = 0;
// Wakes a StopDeadline's thread: sem_post is async-signal-safe, a condition variable is not.
sem_t g_wake;

extern "C" void remember_signal(int signal) {
  g_signal = signal;
  sem_post(&g_wake);
}
}  // namespace

void install_stop_signals() {
  if (sem_init(&g_wake, 0, 0) != 0) {
    std::fprintf(stderr, "dlscale: fatal: sem_init: %s\n", std::strerror(errno));
    std::exit(exit_code(ExitCode::kFatal));
  }
  struct sigaction action {};
  action.sa_handler = remember_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // MPI's and the backends' blocking calls go on
  if (sigaction(SIGTERM, &action, nullptr) != 0 || sigaction(SIGINT, &action, nullptr) != 0) {
    std::fprintf(stderr, "dlscale: fatal: sigaction: %s\n", std::strerror(errno));
    std::exit(exit_code(ExitCode::kFatal));
  }
}

int stop_signal() { return static_cast<int>(g_signal); }

const char* stop_signal_name(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return "a signal";
  }
}

StopDeadline::StopDeadline(int rank, std::string host, double grace_s)
    : rank_(rank), host_(std::move(host)), grace_s_(grace_s) {
  // A small stack: the default 8 MB of address space can be what a rank under `ulimit -v` lacks
  // for its backend's threads (LibTorch's thread pool then waits forever for a thread that
  // could not start).
  constexpr size_t kStackBytes = 256 * 1024;
  pthread_attr_t attr;
  int rc = pthread_attr_init(&attr);
  if (rc == 0) {
    rc = pthread_attr_setstacksize(&attr, kStackBytes);
    if (rc == 0) rc = pthread_create(&thread_, &attr, &StopDeadline::run, this);
    pthread_attr_destroy(&attr);
  }
  if (rc != 0) throw std::runtime_error(std::string("cannot start the stop-deadline thread: ") + std::strerror(rc));
  set_crash_context(rank_, host_, doing_, hint_);
}

void* StopDeadline::run(void* self) {
  static_cast<StopDeadline*>(self)->watch();
  return nullptr;
}

StopDeadline::~StopDeadline() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  changed_.notify_all();
  sem_post(&g_wake);
  pthread_join(thread_, nullptr);  // cannot fail: a joinable thread of ours, joined once
}

void StopDeadline::set_doing(std::string doing) {
  const std::lock_guard<std::mutex> lock(mutex_);
  doing_ = std::move(doing);
  set_crash_context(rank_, host_, doing_, hint_);
}

void StopDeadline::set_hint(std::string hint) {
  const std::lock_guard<std::mutex> lock(mutex_);
  hint_ = std::move(hint);
  set_crash_context(rank_, host_, doing_, hint_);
}

void StopDeadline::watch() {
  // A wake-up with no signal is a destructor's (this one's, or an earlier deadline's).
  for (;;) {
    while (sem_wait(&g_wake) != 0 && errno == EINTR) {
    }
    const std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;
    if (stop_signal() != 0) break;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (changed_.wait_for(lock, std::chrono::duration<double>(grace_s_), [this] { return done_; })) return;
  const std::string line = fmt::format(
      "dlscale: rank {} ({}): {} arrived during {} and this rank could not stop at the end of a step within {} s: "
      "it is blocked where MPI cannot interrupt it (another rank was lost, or a collective does not end). {}\n",
      rank_, host_, stop_signal_name(stop_signal()), doing_, grace_s_, hint_);
  lock.unlock();
  const std::lock_guard<std::mutex> writing(writing_);  // a commit in progress ends first
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  std::_Exit(exit_code(ExitCode::kStopped));
}

}  // namespace dlscale
