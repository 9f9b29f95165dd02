#include "drivers/cpu/blas_core.h"

#include <dlfcn.h>
#include <signal.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "drivers/cpu/blas_core_early.h"
#include "io/fault_injection.h"

extern char** environ;

namespace dlscale {

namespace {

BlasCore g_core;  // this process's, set once by select_blas_core() before any thread starts

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

/// Why the kernels the early choice tried did not replace OpenBLAS's own.
std::string why_not(const blas_early::Decision& d) {
  using blas_early::Outcome;
  switch (d.outcome) {
    case Outcome::kNotTried:
      return "";
    case Outcome::kNoProgram:
      return "could not be checked (dlscale-blas-check is not installed beside dlscale)";
    case Outcome::kSpawnFailed:
      return fmt::format("could not be checked (starting the child: {})", std::strerror(d.detail));
    case Outcome::kTimedOut:
      return fmt::format("did not finish a product in {} s", blas_early::kChildSeconds);
    case Outcome::kCrashed:
      return fmt::format("crashed a product ({})", strsignal(d.detail));
    case Outcome::kDisagreed:
      return "computed a product that disagrees with float64";
    case Outcome::kNoSgemm:
      return fmt::format("could not be checked (no sgemm_ in {})", d.library);
    case Outcome::kNoLoad:
      return fmt::format("could not be checked ({} does not load in the checking child)", d.library);
    case Outcome::kOtherExit:
      return fmt::format("could not be checked (the child exited {})", d.detail);
    case Outcome::kRestartFailed:
      return fmt::format("passed, but starting again with them failed ({})", std::strerror(d.detail));
  }
  return "could not be checked";
}

}  // namespace

std::string best_openblas_core(bool avx512, bool avx2_fma, bool avx) {
  return blas_early::best_core(avx512, avx2_fma, avx);
}

bool openblas_core_below(const std::string& core, const std::string& best) {
  return !best.empty() && blas_early::isa_level(core.c_str()) < blas_early::isa_level(best.c_str());
}

void select_blas_core(char** argv) {
  const std::string own = openblas_core_name();
  if (own.empty()) {
    g_core = {"", "", "", "no OpenBLAS in the process: nothing to choose"};
    return;
  }
  g_core = {"OpenBLAS", own, own, ""};
  const std::string best = blas_early::best_core_here();
  const int cpu = blas_early::isa_level(best.c_str());
  if (const char* chosen = std::getenv(blas_early::kChosenVar)) {
    // The early choice started this program again with these kernels.
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
  if (!openblas_core_below(own, best)) {
    g_core.reason = fmt::format("OpenBLAS's own choice, which uses this CPU's {}", isa_name(cpu));
    return;
  }
  g_core.below_cpu = true;
  const std::string candidate = simulated.empty() || simulated == "best" ? best : simulated;
  if (blas_early::keep_requested(argv, environ)) {
    g_core.reason = fmt::format(
        "OpenBLAS's own choice, kept as asked (--blas-core keep or DLSCALE_BLAS_CORE=keep); "
        "{} would use this CPU's {}",
        candidate, isa_name(cpu));
    return;
  }
  const blas_early::Decision& early = blas_early::decision();
  g_core.reason = fmt::format("OpenBLAS's own choice: {}, tried for this CPU's {}, {}",
                              early.candidate[0] != 0 ? early.candidate : candidate.c_str(), isa_name(cpu),
                              early.outcome != blas_early::Outcome::kNotTried
                                  ? why_not(early)
                                  : "was not tried (the program started without its early choice)");
}

BlasCore blas_core() { return g_core; }

}  // namespace dlscale
