#include "io/fault_injection.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace dlscale::fault_injection {

namespace {

/// An integer environment variable naming a rank, -1 when unset or empty.
int rank_from(const char* variable) {
  const char* v = std::getenv(variable);
  return v != nullptr && *v != '\0' ? std::atoi(v) : -1;
}

}  // namespace

void stall_at_commit(const char* stage, int commit) {
  const char* want = std::getenv("DLSCALE_TEST_STALL");
  if (want == nullptr || std::string(want) != std::string(stage) + ":" + std::to_string(commit)) return;
  std::fprintf(stderr, "dlscale: test stall: %s, commit %d (DLSCALE_TEST_STALL)\n", stage, commit);
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::minutes(10));
}

int sleep_rank() { return rank_from("DLSCALE_TEST_SLEEP_RANK"); }

int skip_reduction_rank() { return rank_from("DLSCALE_TEST_SKIP_REDUCTION_RANK"); }

std::string blas_fallback() {
  const char* v = std::getenv("DLSCALE_TEST_BLAS_FALLBACK");
  return v != nullptr ? v : "";
}

}  // namespace dlscale::fault_injection
