#include "project/isolated_run.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

namespace dlscale::project {
namespace {

[[noreturn]] void system_error(const char* what) {
  throw std::runtime_error(fmt::format("{} failed: {}", what, std::strerror(errno)));
}

/// A file descriptor closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);  // nothing to do about a failed close of a pipe end we are done with
    fd_ = -1;
  }

 private:
  int fd_;
};

/// Writes all of `data` (the child's side: returns false on failure, there is no one to throw to).
bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

std::string read_all(int fd) {
  std::string out;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) system_error("read from the simulation process");
    if (n == 0) return out;
    out.append(buffer, static_cast<size_t>(n));
  }
}

// The child's message: 'v' and the values' bytes, or 'e' and an error message.
[[noreturn]] void child_main(int fd, const std::function<std::vector<double>()>& work) {
  std::string message;
  try {
    const std::vector<double> values = work();
    message = "v";
    message.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
  } catch (const std::exception& e) {
    message = std::string("e") + e.what();
  } catch (...) {
    message = "eunknown exception";
  }
  // _exit: the parent's atexit handlers, static destructors and stdio buffers (copied by fork)
  // belong to the parent; the child must run none of them.
  ::_exit(write_all(fd, message.data(), message.size()) ? 0 : 3);
}

}  // namespace

IsolatedResult run_isolated(const std::function<std::vector<double>()>& work) {
  int ends[2];
  if (::pipe2(ends, O_CLOEXEC) != 0) system_error("pipe2");
  Fd read_end(ends[0]), write_end(ends[1]);
  // Whatever the parent has buffered would otherwise be printed twice, once by each process.
  if (std::fflush(nullptr) != 0) system_error("fflush");
  const pid_t pid = ::fork();
  if (pid < 0) system_error("fork");
  if (pid == 0) {
    read_end.reset();
    child_main(write_end.get(), work);
  }
  write_end.reset();  // so that read_all sees the end when the child exits
  const std::string message = read_all(read_end.get());

  int status = 0;
  struct rusage usage {};
  while (::wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) system_error("wait4 for the simulation process");
  }
  if (WIFSIGNALED(status)) {
    throw std::runtime_error(fmt::format("the simulation process died of signal {} ({}); its error is above",
                                         WTERMSIG(status), strsignal(WTERMSIG(status))));
  }
  if (message.empty() || (message[0] != 'v' && message[0] != 'e')) {
    throw std::runtime_error(fmt::format("the simulation process exited with status {} and no result",
                                         WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  if (message[0] == 'e') throw std::runtime_error(message.substr(1));
  IsolatedResult result;
  result.values.resize((message.size() - 1) / sizeof(double));
  std::memcpy(result.values.data(), message.data() + 1, result.values.size() * sizeof(double));
  result.peak_rss_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
  return result;
}

}  // namespace dlscale::project
