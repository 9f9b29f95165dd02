#include "drivers/cpu/blas_core.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "io/fault_injection.h"

namespace dlscale {

namespace {

constexpr const char* kChosenVar = "DLSCALE_BLAS_CORE_CHOSEN";  // set before dlscale starts itself again:
                                                                // the core the library chose on its own
constexpr const char* kPolicyVar = "DLSCALE_BLAS_CORE";         // "keep": leave the library's choice
constexpr double kChildSeconds = 60;

BlasCore g_core;  // this process's, set once by select_blas_core() before any thread starts

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

/// The instruction set an OpenBLAS core's kernels use: 3 AVX-512, 2 AVX2 and FMA, 1 AVX, 0 older.
int isa_level(const std::string& core) {
  const std::string c = lower(core);
  for (const char* k : {"skylakex", "cooperlake", "sapphirerapids"}) {
    if (c == k) return 3;
  }
  for (const char* k : {"haswell", "zen"}) {
    if (c == k) return 2;
  }
  for (const char* k : {"sandybridge", "bulldozer", "piledriver", "steamroller", "excavator"}) {
    if (c == k) return 1;
  }
  return 0;
}

const char* isa_name(int level) {
  switch (level) {
    case 3:
      return "AVX-512";
    case 2:
      return "AVX2";
    case 1:
      return "AVX";
    default:
      return "SSE";
  }
}

std::string openblas_core_name() {
  using CoreNameFn = char* (*)();
  const auto fn = reinterpret_cast<CoreNameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  return fn != nullptr ? std::string(fn()) : std::string();
}

/// The best core this CPU's instruction set runs, from cpuid.
std::string best_core_here() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return best_openblas_core(avx512, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"),
                            __builtin_cpu_supports("avx"));
#else
  return "";  // other architectures: the library's own choice
#endif
}

/// The file the loaded OpenBLAS came from, "" where none is loaded.
std::string openblas_library_path() {
  void* const fn = dlsym(RTLD_DEFAULT, "openblas_get_corename");
  Dl_info where{};
  if (fn == nullptr || dladdr(fn, &where) == 0 || where.dli_fname == nullptr) return "";
  return where.dli_fname;
}

/// The program that checks a core in a child (blas_check.cpp), where this build or install put
/// it: an installed dlscale finds it in libexec beside its bin folder, a program of the build
/// tree (dlscale, the test binaries, the benchmarks) where the build put it.
std::string check_program() {
  std::vector<char> exe(4096);
  const ssize_t n = readlink("/proc/self/exe", exe.data(), exe.size() - 1);
  if (n > 0) {
    std::string dir(exe.data(), static_cast<size_t>(n));
    dir.erase(dir.find_last_of('/') + 1);
    const std::string installed = dir + DLSCALE_BLAS_CHECK_FROM_BINDIR;
    if (access(installed.c_str(), X_OK) == 0) return installed;
  }
  return access(DLSCALE_BLAS_CHECK_BUILT, X_OK) == 0 ? DLSCALE_BLAS_CHECK_BUILT : "";
}

/// Runs dlscale-blas-check on `library` with `core` selected; "" when its product agreed, else
/// why not.
std::string check_in_child(const std::string& core, const std::string& library) {
  const std::string program = check_program();
  if (program.empty()) return "could not be checked (dlscale-blas-check is not installed beside dlscale)";
  const pid_t pid = fork();
  if (pid < 0) return fmt::format("could not be checked (fork: {})", std::strerror(errno));
  if (pid == 0) {
    setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
    char* const args[] = {const_cast<char*>(program.c_str()), const_cast<char*>(library.c_str()), nullptr};
    execv(program.c_str(), args);
    _exit(127);
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kChildSeconds);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return fmt::format("did not finish a product in {:.0f} s", kChildSeconds);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (WIFSIGNALED(status)) return fmt::format("crashed a product ({})", strsignal(WTERMSIG(status)));
  if (!WIFEXITED(status)) return "ended a product oddly";
  switch (WEXITSTATUS(status)) {
    case 0:
      return "";
    case 1:
      return "computed a product that disagrees with float64";
    case 2:
      return fmt::format("could not be checked (no sgemm_ in {})", library);
    case 3:
      return fmt::format("could not be checked ({} does not load in the checking child)", library);
    default:
      return fmt::format("could not be checked (the child exited {})", WEXITSTATUS(status));
  }
}

/// Whether the user asked for the library's own choice: DLSCALE_BLAS_CORE=keep, or the option
/// --blas-core keep anywhere on the command line (it is read here, before the command line is
/// parsed, because the choice must come before MPI starts).
bool keep_requested(char** argv) {
  if (const char* v = std::getenv(kPolicyVar); v != nullptr && std::string(v) == "keep") return true;
  for (char** a = argv + 1; *a != nullptr; ++a) {
    const std::string arg = *a;
    if (arg == "--blas-core=keep") return true;
    if (arg == "--blas-core" && a[1] != nullptr && std::string(a[1]) == "keep") return true;
  }
  return false;
}

}  // namespace

std::string best_openblas_core(bool avx512, bool avx2_fma, bool avx) {
  if (avx512) return "SkylakeX";
  if (avx2_fma) return "Haswell";
  if (avx) return "Sandybridge";
  return "";
}

bool openblas_core_below(const std::string& core, const std::string& best) {
  return !best.empty() && isa_level(core) < isa_level(best);
}

void select_blas_core(char** argv) {
  const std::string own = openblas_core_name();
  if (own.empty()) {
    g_core = {"", "", "", "no OpenBLAS in the process: nothing to choose"};
    return;
  }
  g_core = {"OpenBLAS", own, own, ""};
  const std::string best = best_core_here();
  const int cpu = isa_level(best);
  if (const char* chosen = std::getenv(kChosenVar)) {
    // dlscale started itself again with this core (below).
    g_core.chosen = chosen;
    g_core.reason = fmt::format(
        "selected by dlscale for this CPU's {}: OpenBLAS chose {} on its own; a product "
        "computed with {} agreed with float64",
        isa_name(cpu), chosen, own);
    g_core.below_cpu = openblas_core_below(own, best);  // an OpenBLAS that ignored OPENBLAS_CORETYPE
    return;
  }
  const std::string simulated = fault_injection::blas_fallback();
  if (const char* user = std::getenv("OPENBLAS_CORETYPE"); user != nullptr && simulated.empty()) {
    g_core.reason = fmt::format("OPENBLAS_CORETYPE={} in the environment", user);
    g_core.below_cpu = openblas_core_below(own, best);
    return;
  }
  const std::string candidate = simulated.empty() || simulated == "best" ? best : simulated;
  if (!openblas_core_below(own, best)) {
    g_core.reason = fmt::format("OpenBLAS's own choice, which uses this CPU's {}", isa_name(cpu));
    return;
  }
  g_core.below_cpu = true;  // unless the restart below replaces this process
  if (keep_requested(argv)) {
    g_core.reason = fmt::format(
        "OpenBLAS's own choice, kept as asked (--blas-core keep or DLSCALE_BLAS_CORE=keep); "
        "{} would use this CPU's {}",
        candidate, isa_name(cpu));
    return;
  }
  const std::string why = check_in_child(candidate, openblas_library_path());
  if (!why.empty()) {
    g_core.reason =
        fmt::format("OpenBLAS's own choice: {}, tried for this CPU's {}, {}", candidate, isa_name(cpu), why);
    return;
  }
  setenv("OPENBLAS_CORETYPE", candidate.c_str(), 1);
  setenv(kChosenVar, own.c_str(), 1);
  std::fflush(nullptr);
  execv("/proc/self/exe", argv);
  // Still here: the restart failed; the library's own kernels stay.
  const std::string error = std::strerror(errno);
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv(kChosenVar);
  g_core.reason = fmt::format("OpenBLAS's own choice: starting again with {} failed ({})", candidate, error);
}

BlasCore blas_core() { return g_core; }

}  // namespace dlscale
