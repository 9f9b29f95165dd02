#include "tests/fuzz/fuzz_support.h"

#include <dlfcn.h>
#include <hdf5.h>
#include <sanitizer/asan_interface.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "suite/case/resolved_case.h"

namespace dlscale::fuzz {

namespace {

struct sigaction previous[NSIG];

/// Whether the instruction the signal interrupted lies in the HDF5 library.
bool inside_hdf5(void* context) {
  const auto* uc = static_cast<const ucontext_t*>(context);
  Dl_info info{};
  const auto pc = reinterpret_cast<void*>(uc->uc_mcontext.gregs[REG_RIP]);
  return dladdr(pc, &info) != 0 && info.dli_fname != nullptr && std::strstr(info.dli_fname, "libhdf5") != nullptr;
}

/// A crash: HDF5's ends the process with kHdf5Crashed; any other goes on to the handler that was
/// there before (the sanitizer's report).
void on_crash(int sig, siginfo_t* info, void* context) {
  if (inside_hdf5(context)) {
    static const char line[] = "fuzz: the HDF5 library crashed on this input (contained: not dlscale's)\n";
    (void)!write(2, line, sizeof line - 1);
    _exit(kHdf5Crashed);
  }
  const struct sigaction& before = previous[sig];
  if ((before.sa_flags & SA_SIGINFO) && before.sa_sigaction != nullptr) {
    before.sa_sigaction(sig, info, context);
  } else if (before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN) {
    before.sa_handler(sig);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

/// The first frame of a stack in an AddressSanitizer report that is neither the sanitizer's own
/// (its interceptors of the C library's memory and string functions, which it names as those)
/// nor the C library's.
std::string_view first_own_frame(std::string_view stack) {
  static constexpr std::string_view kSanitizers[] = {
      "/sysdeps/",   "libc.so",      "__interceptor_",      "__asan_",      "__sanitizer::", " in malloc ",
      " in calloc ", " in realloc ", " in posix_memalign ", " in free ",    " in memcpy ",   " in memmove ",
      " in memset ", " in memcmp ",  " in strlen ",         " in strnlen ", " in strcmp ",   " in strncmp ",
      " in strcpy ", " in strncpy ", " in strdup "};
  while (!stack.empty()) {
    const size_t end = stack.find('\n');
    const std::string_view line = stack.substr(0, end);
    stack = end == std::string_view::npos ? std::string_view() : stack.substr(end + 1);
    if (line.find(" #") == std::string_view::npos) continue;
    bool sanitizer = false;
    for (std::string_view name : kSanitizers) sanitizer = sanitizer || line.find(name) != std::string_view::npos;
    if (!sanitizer) return line;
  }
  return {};
}

/// An AddressSanitizer report of the HDF5 library's own memory (HDF5 1.10 reads past a block of
/// its global heap, or a block it freed, on some damaged files): the access made from libhdf5
/// into a block libhdf5 allocated (and, for a block already freed, freed), so that neither the
/// code nor the memory is dlscale's. Ends the process as a crash inside libhdf5 does; any other
/// report goes on to end it as a finding.
void on_asan_report(const char* report) {
  const std::string_view text(report);
  const auto in_hdf5 = [](std::string_view frame) { return frame.find("libhdf5") != std::string_view::npos; };
  const size_t allocated = text.find("allocated by thread");  // also "previously allocated by thread"
  if (allocated == std::string_view::npos) {
    // A crash the sanitizer reports (its handler runs where on_crash saw the faulting instruction
    // in its own copy of memmove and the like, called from libhdf5), or an access through a wild
    // pointer, near no block: contained where the first frame past the sanitizer's is libhdf5's.
    if (text.find("AddressSanitizer: SEGV") == std::string_view::npos &&
        text.find("AddressSanitizer: BUS") == std::string_view::npos &&
        text.find("is a wild pointer") == std::string_view::npos) {
      return;
    }
    if (!in_hdf5(first_own_frame(text))) return;
    static const char crashed[] = "fuzz: the HDF5 library crashed on this input (contained: not dlscale's)\n";
    (void)!write(2, crashed, sizeof crashed - 1);
    _exit(kHdf5Crashed);
  }
  const size_t freed = text.find("freed by thread");
  const size_t access_end = std::min(freed, allocated);
  if (!in_hdf5(first_own_frame(text.substr(0, access_end)))) return;
  if (freed != std::string_view::npos && !in_hdf5(first_own_frame(text.substr(freed, allocated - freed)))) return;
  if (!in_hdf5(first_own_frame(text.substr(allocated)))) return;
  static const char line[] = "fuzz: the HDF5 library misused its own memory on this input (contained: not dlscale's)\n";
  (void)!write(2, line, sizeof line - 1);
  _exit(kHdf5Crashed);
}

}  // namespace

const Registry& drivers() {
  static const Registry registry = [] {
    Registry r;
    register_drivers(r);
    return r;
  }();
  return registry;
}

void resolve(const std::vector<CaseSpec>& cases) {
  (void)resolve_cases(cases, drivers(), 1, std::vector<std::string>(kWorldSize, "localhost"));
}

const std::string& scratch_dir() {
  static const std::string dir = [] {
    // scripts/fuzz.sh names it, to find the input a run ended on (the files of the input it
    // was reading stay there when the process ends on a crash or a stall).
    const char* named = std::getenv("DLSCALE_FUZZ_SCRATCH");
    if (named != nullptr && *named != '\0') {
      std::filesystem::create_directories(named);
      return std::string(named);
    }
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/dlscale-fuzz-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("fuzz: mkdtemp");
      std::abort();
    }
    static const std::string made = pattern;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(made, ec);
    });
    return pattern;
  }();
  return dir;
}

std::string write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  const std::filesystem::path path = std::filesystem::path(scratch_dir()) / name;
  std::filesystem::create_directories(path.parent_path());
  // A new file each time, not the old one rewritten: HDF5 recognises a file it still holds (one
  // whose close failed on damage) by its inode, and would read the new bytes through the old
  // file's cached metadata, which no dlscale process, reading each file once, ever does.
  std::error_code ec;
  std::filesystem::remove(path, ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path.string();
}

std::string write_scratch(const std::string& name, std::string_view text) {
  return write_scratch(name, reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

void finish_hdf5_input() {
  const ssize_t open = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
  if (open != 0) {
    std::fprintf(stderr, "fuzz: %zd HDF5 object(s) left open (files %zd, groups %zd, datasets %zd, attributes %zd)\n",
                 open, H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_FILE), H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_GROUP),
                 H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_DATASET), H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ATTR));
    std::abort();
  }
  if (H5close() < 0) {
    std::fprintf(stderr, "fuzz: H5close failed\n");
    std::abort();
  }
}

void contain_hdf5_crashes() {
  // On a stack of their own: HDF5 can crash by overflowing the thread's.
  static char alt[1 << 16];
  stack_t ss{};
  ss.ss_sp = alt;
  ss.ss_size = sizeof alt;
  sigaltstack(&ss, nullptr);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) {
    struct sigaction sa {};
    sa.sa_sigaction = on_crash;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, &previous[sig]);
  }
  __asan_set_error_report_callback(on_asan_report);
}

}  // namespace dlscale::fuzz
