#include "suite/process/crash_report.h"

#include <fcntl.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "suite/exit_code.h"

namespace dlscale {

namespace {

struct Crash {
  int signal;
  const char* name;
};
constexpr Crash kCrashes[] = {
    {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"}, {SIGILL, "SIGILL"}, {SIGFPE, "SIGFPE"}, {SIGABRT, "SIGABRT"}};

// The context in two copies: set_crash_context fills the one the handler is not reading, then
// publishes it, so that a crash in the middle of an update prints the previous one whole.
struct Context {
  int rank;
  char host[256];
  char doing[2048];
  char hint[4096];
};
Context g_context[2];
std::atomic<int> g_current{-1};
std::mutex g_update;

struct sigaction g_previous[NSIG];
// end_crashes_with's exit status; -1: crashes are reported.
std::atomic<int> g_crash_exit{-1};
// Where the handler runs when the main thread's stack is what overflowed.
alignas(16) char g_alternate_stack[64 * 1024];

void copy(char* to, size_t size, const std::string& from) {
  const size_t n = from.size() < size - 1 ? from.size() : size - 1;
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

// -- what the handler calls: write(2), open(2), read(2) and close(2), nothing that allocates --

/// The line, put together on the handler's stack and written at once: under mpirun every rank's
/// stderr reaches the same terminal, and pieces written one by one could interleave with theirs.
class Line {
 public:
  void add(const char* text, size_t size) {
    const size_t room = sizeof(text_) - 1 - size_;  // one byte kept for the newline
    const size_t n = size < room ? size : room;
    std::memcpy(text_ + size_, text, n);
    size_ += n;
  }
  void add(const char* text) { add(text, std::strlen(text)); }
  void add_number(uintptr_t value, unsigned base) {
    char digits[24];  // "0x" and 16 hex digits, or 20 decimal ones
    size_t at = sizeof(digits);
    do {
      digits[--at] = "0123456789abcdef"[value % base];
      value /= base;
    } while (value != 0);
    if (base == 16) {
      digits[--at] = 'x';
      digits[--at] = '0';
    }
    add(digits + at, sizeof(digits) - at);
  }
  void write_out() {
    text_[size_++] = '\n';
    const char* at = text_;
    while (size_ > 0) {
      const ssize_t n = write(STDERR_FILENO, at, size_);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      at += n;
      size_ -= static_cast<size_t>(n);
    }
  }

 private:
  char text_[8192];
  size_t size_ = 0;
};

uintptr_t parse_hex(const char*& p) {
  uintptr_t value = 0;
  for (;; ++p) {
    const char c = *p;
    if (c >= '0' && c <= '9') {
      value = value * 16 + static_cast<uintptr_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      value = value * 16 + static_cast<uintptr_t>(c - 'a' + 10);
    } else {
      return value;
    }
  }
}

/// " in FILE at offset 0x…" from the line of /proc/self/maps that maps `address` ("start-end
/// perms offset dev inode path"); nothing where no line does.
bool add_mapping_line(Line& out, const char* line, uintptr_t address) {
  const char* p = line;
  const uintptr_t start = parse_hex(p);
  if (*p++ != '-') return false;
  const uintptr_t end = parse_hex(p);
  if (address < start || address >= end) return false;
  const auto skip_field = [&p] {
    while (*p == ' ') ++p;
    while (*p != '\0' && *p != ' ') ++p;
  };
  skip_field();  // perms
  while (*p == ' ') ++p;
  const uintptr_t offset = parse_hex(p);
  skip_field();  // dev
  skip_field();  // inode
  while (*p == ' ') ++p;
  out.add(" in ");
  out.add(*p != '\0' ? p : "an anonymous mapping");
  out.add(" at offset ");
  out.add_number(address - start + offset, 16);
  return true;
}

void add_mapping(Line& out, uintptr_t address) {
  const int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buffer[4096];
  size_t held = 0;
  for (;;) {
    const ssize_t n = read(fd, buffer + held, sizeof(buffer) - 1 - held);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    held += static_cast<size_t>(n);
    buffer[held] = '\0';
    char* line = buffer;
    for (char* newline = std::strchr(line, '\n'); newline != nullptr; newline = std::strchr(line, '\n')) {
      *newline = '\0';
      if (add_mapping_line(out, line, address)) {
        close(fd);
        return;
      }
      line = newline + 1;
    }
    held = static_cast<size_t>(buffer + held - line);
    std::memmove(buffer, line, held);
    if (held == sizeof(buffer) - 1) held = 0;  // a line longer than the buffer: not a library's
  }
  close(fd);
}

const char* signal_name(int signal) {
  for (const Crash& c : kCrashes) {
    if (c.signal == signal) return c.name;
  }
  return "a signal";
}

/// The fault's details: the address and the instruction; for an instruction at address 0 (a call
/// through a null function pointer), where the call came from: the return address it pushed.
void add_fault(Line& out, int signal, const siginfo_t* info, const void* context) {
  if (signal == SIGABRT) return;  // abort(): the library or runtime that called it said why
  if (info->si_code == SI_USER || info->si_code == SI_TKILL) {
    out.add(" (sent by process ");
    out.add_number(static_cast<uintptr_t>(info->si_pid), 10);
    out.add(")");
    return;
  }
  out.add(" at address ");
  out.add_number(reinterpret_cast<uintptr_t>(info->si_addr), 16);
#if defined(__x86_64__)
  const mcontext_t& machine = static_cast<const ucontext_t*>(context)->uc_mcontext;
  const auto instruction = static_cast<uintptr_t>(machine.gregs[REG_RIP]);
  out.add(", instruction ");
  out.add_number(instruction, 16);
  add_mapping(out, instruction);
  if (instruction == 0) {
    const auto called_from = *reinterpret_cast<const uintptr_t*>(machine.gregs[REG_RSP]);
    out.add(", called from ");
    out.add_number(called_from, 16);
    add_mapping(out, called_from);
  }
#else
  (void)context;
#endif
}

extern "C" void report_crash(int signal, siginfo_t* info, void* context) {
  if (const int status = g_crash_exit.load(std::memory_order_acquire); status >= 0) _exit(status);
  const int current = g_current.load(std::memory_order_acquire);
  const Context* c = current >= 0 ? &g_context[current] : nullptr;
  Line line;
  line.add("dlscale");
  if (c != nullptr) {
    line.add(": rank ");
    line.add_number(static_cast<uintptr_t>(c->rank), 10);
    line.add(" (");
    line.add(c->host);
    line.add(")");
  }
  line.add(": crashed: ");
  line.add(signal_name(signal));
  add_fault(line, signal, info, context);
  if (c != nullptr) {
    line.add(" during ");
    line.add(c->doing);
    line.add(".");
    if (c->hint[0] != '\0') {
      line.add(" ");
      line.add(c->hint);
    }
  }
  line.write_out();
  // Then what was there: Open MPI's handler prints a backtrace and raises the signal again.
  const struct sigaction& before = g_previous[signal];
  if ((before.sa_flags & SA_SIGINFO) != 0) {
    if (before.sa_sigaction != nullptr) before.sa_sigaction(signal, info, context);
  } else if (before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN) {
    before.sa_handler(signal);
  }
  // The default action: the process ends by the signal, and its exit status names it.
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(signal, &fallback, nullptr);
  raise(signal);
}

}  // namespace

void install_crash_report() {
  // Once: a second time would record these handlers as the ones to run after themselves.
  static std::once_flag once;
  std::call_once(once, [] {
    stack_t alternate{};
    alternate.ss_sp = g_alternate_stack;
    alternate.ss_size = sizeof(g_alternate_stack);
    bool ok = sigaltstack(&alternate, nullptr) == 0;
    struct sigaction action {};
    action.sa_sigaction = report_crash;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    for (const Crash& c : kCrashes) ok = ok && sigaction(c.signal, &action, &g_previous[c.signal]) == 0;
    if (!ok) {
      std::fprintf(stderr, "dlscale: fatal: installing the crash report: %s\n", std::strerror(errno));
      std::exit(exit_code(ExitCode::kFatal));
    }
  });
}

void end_crashes_with(int exit_status) { g_crash_exit.store(exit_status, std::memory_order_release); }

void set_crash_context(int rank, const std::string& host, const std::string& doing, const std::string& hint) {
  const std::lock_guard<std::mutex> lock(g_update);
  const int next = g_current.load(std::memory_order_relaxed) == 0 ? 1 : 0;
  g_context[next].rank = rank;
  copy(g_context[next].host, sizeof(g_context[next].host), host);
  copy(g_context[next].doing, sizeof(g_context[next].doing), doing);
  copy(g_context[next].hint, sizeof(g_context[next].hint), hint);
  g_current.store(next, std::memory_order_release);
}

}  // namespace dlscale
