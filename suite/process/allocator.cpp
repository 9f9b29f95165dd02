#include "suite/process/allocator.h"

#include <dlfcn.h>
#include <gnu/libc-version.h>
#include <malloc.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "suite/errors.h"

extern char** environ;

namespace dlscale {

namespace {

/// What kKeep sets: no block is served by its own mmap (so none is unmapped when freed), and the
/// heap's top is trimmed only past 2 GiB of free memory (mallopt takes an int). glibc still maps
/// a block of a thread's arena larger than the arena's 64 MiB heap: no setting avoids that.
constexpr int kKeepTrimThreshold = INT_MAX;

/// The file of the library whose malloc this process calls.
std::string malloc_library() {
  Dl_info info{};
  void* const symbol = dlsym(RTLD_DEFAULT, "malloc");
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

bool is_glibc(const std::string& library) { return library.find("libc.so") != std::string::npos; }

}  // namespace

MallocPolicy parse_malloc_policy(const std::string& text) {
  if (text == "keep") return MallocPolicy::kKeep;
  if (text == "system") return MallocPolicy::kSystem;
  throw UsageError(fmt::format("--malloc: unknown policy '{}' (expected keep or system)", text));
}

const char* malloc_policy_name(MallocPolicy p) { return p == MallocPolicy::kKeep ? "keep" : "system"; }

void apply_malloc_policy(MallocPolicy policy) {
  if (policy != MallocPolicy::kKeep) return;
  // mallopt returns 1 on success, 0 on a refused value.
  if (mallopt(M_MMAP_MAX, 0) != 1) throw std::runtime_error("mallopt(M_MMAP_MAX, 0) was refused");
  if (mallopt(M_TRIM_THRESHOLD, kKeepTrimThreshold) != 1) {
    throw std::runtime_error(fmt::format("mallopt(M_TRIM_THRESHOLD, {}) was refused", kKeepTrimThreshold));
  }
}

void release_freed_memory() {
  malloc_trim(0);  // returns whether anything was released; nothing to do either way
}

std::string describe_allocator(MallocPolicy policy) {
  const std::string library = malloc_library();
  const bool glibc = library.empty() || is_glibc(library);
  std::string text = glibc ? fmt::format("glibc {}", gnu_get_libc_version()) : "malloc from " + library;
  if (policy == MallocPolicy::kKeep) {
    // mallopt changes glibc's malloc only: a preloaded allocator keeps its own behaviour.
    text += glibc ? fmt::format("; --malloc keep: mallopt M_MMAP_MAX=0 M_TRIM_THRESHOLD={}", kKeepTrimThreshold)
                  : "; --malloc keep has no effect on it (it sets glibc's malloc)";
  } else {
    text += "; --malloc system: as the environment set it";
  }
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    if (entry.rfind("MALLOC_", 0) == 0 || entry.rfind("GLIBC_TUNABLES=", 0) == 0 ||
        entry.rfind("LD_PRELOAD=", 0) == 0) {
      text += "; " + entry;
    }
  }
  return text;
}

}  // namespace dlscale
