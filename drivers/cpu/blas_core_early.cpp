// The BLAS kernels chosen before a program's libraries start: a function in the program's
// .preinit_array, which the dynamic loader runs after it has mapped and relocated every library
// and before any of them runs its initialisers (LibTorch's and CUDA's take most of a second). So
// where OpenBLAS would fall back below the CPU, the program starts again with OPENBLAS_CORETYPE
// set at the cost of a relocation, not of a second start of LibTorch. Every program that links
// the drivers gets it (dlscale, the test binaries, the benchmarks): blas_core.cpp, which every
// one of them calls first thing in main(), reads decision().
//
// Nothing has been initialised when it runs: it calls only system calls and the dynamic
// loader's dl_iterate_phdr, reads the environment from its third argument, allocates nothing,
// and is not instrumented by the sanitizers (whose own start may come after it).
#include "drivers/cpu/blas_core_early.h"

#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#define DLSCALE_EARLY __attribute__((no_sanitize("address", "undefined")))

namespace dlscale::blas_early {

namespace {

Decision g_decision;  // zero-initialised data: no constructor runs over what the early choice wrote

DLSCALE_EARLY bool same(const char* a, const char* b) {
  while (*a != 0 && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

DLSCALE_EARLY char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

DLSCALE_EARLY bool same_ignoring_case(const char* a, const char* b) {
  while (*a != 0 && lower(*a) == lower(*b)) {
    ++a;
    ++b;
  }
  return lower(*a) == lower(*b);
}

DLSCALE_EARLY bool contains(const char* text, const char* part) {
  for (; *text != 0; ++text) {
    const char* t = text;
    const char* p = part;
    while (*p != 0 && *t == *p) {
      ++t;
      ++p;
    }
    if (*p == 0) return true;
  }
  return false;
}

/// Copies `src` into `dst` of `size` bytes, cut to fit; returns the bytes copied.
DLSCALE_EARLY size_t copy(char* dst, size_t size, const char* src) {
  size_t n = 0;
  while (src[n] != 0 && n + 1 < size) {
    dst[n] = src[n];
    ++n;
  }
  dst[n] = 0;
  return n;
}

/// The value of `name` in `envp`, nullptr where it is not set.
DLSCALE_EARLY const char* env_value(char** envp, const char* name) {
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    const char* v = *e;
    const char* n = name;
    while (*n != 0 && *v == *n) {
      ++v;
      ++n;
    }
    if (*n == 0 && *v == '=') return v + 1;
  }
  return nullptr;
}

/// Whether environment entry `entry` ("NAME=value") sets `name`.
DLSCALE_EARLY bool sets(const char* entry, const char* name) {
  while (*name != 0 && *entry == *name) {
    ++entry;
    ++name;
  }
  return *name == 0 && *entry == '=';
}

DLSCALE_EARLY int find_blas(dl_phdr_info* info, size_t, void* out) {
  const char* name = info->dlpi_name;
  if (name != nullptr && (contains(name, "libblas.so") || contains(name, "libopenblas"))) {
    copy(static_cast<char*>(out), sizeof(Decision::library), name);
    return 1;
  }
  return 0;
}

/// The checking program, where an installed dlscale has it (libexec beside its bin folder) or
/// where the build put it; false when neither has it.
DLSCALE_EARLY bool find_check_program(char* out, size_t size) {
  char exe[1024];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    size_t dir = static_cast<size_t>(n);
    while (dir > 0 && exe[dir - 1] != '/') --dir;
    exe[dir] = 0;  // the folder, with its '/'
    const size_t used = copy(out, size, exe);
    copy(out + used, size - used, DLSCALE_BLAS_CHECK_FROM_BINDIR);
    if (dir > 0 && access(out, X_OK) == 0) return true;
  }
  copy(out, size, DLSCALE_BLAS_CHECK_BUILT);
  return access(out, X_OK) == 0;
}

DLSCALE_EARLY double now_s() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

/// Runs `program library` in a child with `env`; the core it names on its stdout goes into
/// `core` (size bytes). Returns the outcome of its product (kNotTried: it agreed).
DLSCALE_EARLY Outcome run_check(const char* program, const char* library, char** env, char* core, size_t size,
                                int& detail) {
  core[0] = 0;
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    detail = errno;
    return Outcome::kSpawnFailed;
  }
  char* const args[] = {const_cast<char*>(program), const_cast<char*>(library), nullptr};
  const pid_t pid = vfork();
  if (pid == 0) {
    dup2(out[1], 1);
    execve(program, args, env);
    _exit(127);
  }
  close(out[1]);
  if (pid < 0) {
    detail = errno;
    close(out[0]);
    return Outcome::kSpawnFailed;
  }
  int status = 0;
  const double deadline = now_s() + kChildSeconds;
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 && now_s() < deadline) {
    const timespec pause{0, 1000000};
    nanosleep(&pause, nullptr);
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    close(out[0]);
    return Outcome::kTimedOut;
  }
  size_t got = 0;
  ssize_t n = 0;
  while (got + 1 < size && (n = read(out[0], core + got, size - 1 - got)) > 0) got += static_cast<size_t>(n);
  close(out[0]);
  core[got] = 0;
  for (size_t i = 0; i < got; ++i) {
    if (core[i] == '\n') core[i] = 0;
  }
  if (WIFSIGNALED(status)) {
    detail = WTERMSIG(status);
    return Outcome::kCrashed;
  }
  switch (WIFEXITED(status) ? WEXITSTATUS(status) : -1) {
    case 0:
      return Outcome::kNotTried;
    case 1:
      return Outcome::kDisagreed;
    case 2:
      return Outcome::kNoSgemm;
    case 3:
      return Outcome::kNoLoad;
    default:
      detail = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      return Outcome::kOtherExit;
  }
}

constexpr size_t kMaxEnv = 4096;

/// The environment `envp` without OPENBLAS_CORETYPE and the chosen-core variable, plus `extra`
/// (nullptr-terminated), in `out` (kMaxEnv entries); false where it does not fit.
DLSCALE_EARLY bool environment_with(char** envp, char* const* extra, char** out) {
  size_t n = 0;
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    if (sets(*e, "OPENBLAS_CORETYPE") || sets(*e, kChosenVar)) continue;
    if (n + 3 >= kMaxEnv) return false;
    out[n++] = *e;
  }
  for (char* const* x = extra; *x != nullptr; ++x) {
    if (n + 1 >= kMaxEnv) return false;
    out[n++] = *x;
  }
  out[n] = nullptr;
  return true;
}

DLSCALE_EARLY void choose(int, char** argv, char** envp) {
  Decision& d = g_decision;
  if (env_value(envp, kChosenVar) != nullptr) return;  // started again with the chosen kernels already
  const char* fallback = env_value(envp, kFallbackVar);
  if (env_value(envp, "OPENBLAS_CORETYPE") != nullptr && fallback == nullptr) return;  // the user's choice
  if (keep_requested(argv, envp)) return;
  if (dl_iterate_phdr(find_blas, d.library) == 0) return;  // no OpenBLAS loaded: nothing to choose
  const char* best = best_core_here();
  if (best[0] == 0) return;
  char program[1024];
  if (!find_check_program(program, sizeof program)) {
    d.outcome = Outcome::kNoProgram;
    copy(d.candidate, sizeof d.candidate, best);
    return;
  }
  // OpenBLAS's own choice: the core it names when started as this process was.
  char own[64];
  const Outcome asked = run_check(program, d.library, envp, own, sizeof own, d.detail);
  if (own[0] == 0) {
    // A library without openblas_get_corename is another BLAS, which chooses its own kernels.
    if (asked != Outcome::kNotTried) {
      d.outcome = asked;
      copy(d.candidate, sizeof d.candidate, best);
    }
    return;
  }
  if (isa_level(own) >= isa_level(best)) return;  // nothing better to choose
  copy(d.candidate, sizeof d.candidate, fallback != nullptr && !same(fallback, "best") ? fallback : best);
  static char* env[kMaxEnv];
  static char coretype[64] = "OPENBLAS_CORETYPE=";
  static char chosen[96];
  copy(coretype + 18, sizeof coretype - 18, d.candidate);
  const size_t at = copy(chosen, sizeof chosen, kChosenVar);
  chosen[at] = '=';
  copy(chosen + at + 1, sizeof chosen - at - 1, own);
  char* const with_candidate[] = {coretype, nullptr};
  if (!environment_with(envp, with_candidate, env)) return;
  char core[64];
  d.outcome = run_check(program, d.library, env, core, sizeof core, d.detail);
  if (d.outcome != Outcome::kNotTried) return;
  char* const restart[] = {coretype, chosen, nullptr};
  if (!environment_with(envp, restart, env)) return;
  execve("/proc/self/exe", argv, env);
  d.outcome = Outcome::kRestartFailed;
  d.detail = errno;
}

}  // namespace

const Decision& decision() { return g_decision; }

DLSCALE_EARLY int isa_level(const char* core) {
  static const char* const avx512[] = {"skylakex", "cooperlake", "sapphirerapids"};
  static const char* const avx2[] = {"haswell", "zen"};
  static const char* const avx[] = {"sandybridge", "bulldozer", "piledriver", "steamroller", "excavator"};
  for (const char* k : avx512) {
    if (same_ignoring_case(core, k)) return 3;
  }
  for (const char* k : avx2) {
    if (same_ignoring_case(core, k)) return 2;
  }
  for (const char* k : avx) {
    if (same_ignoring_case(core, k)) return 1;
  }
  return 0;
}

DLSCALE_EARLY const char* best_core(bool avx512, bool avx2_fma, bool avx) {
  if (avx512) return "SkylakeX";
  if (avx2_fma) return "Haswell";
  if (avx) return "Sandybridge";
  return "";
}

DLSCALE_EARLY const char* best_core_here() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return best_core(avx512, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"),
                   __builtin_cpu_supports("avx"));
#else
  return "";  // other architectures: the library's own choice
#endif
}

DLSCALE_EARLY bool keep_requested(char** argv, char** envp) {
  const char* policy = env_value(envp, kPolicyVar);
  if (policy != nullptr && same(policy, "keep")) return true;
  for (char** a = argv + 1; *a != nullptr; ++a) {
    if (same(*a, "--blas-core=keep")) return true;
    if (same(*a, "--blas-core") && a[1] != nullptr && same(a[1], "keep")) return true;
  }
  return false;
}

}  // namespace dlscale::blas_early

// The dynamic loader calls the functions of the program's .preinit_array with (argc, argv, envp)
// before any library's initialisers; a static library's object contributes its entry when the
// program links it, which every caller of blas_core.h does.
__attribute__((section(".preinit_array"), used)) static void (*dlscale_choose_blas_core)(int, char**, char**) =
    dlscale::blas_early::choose;
