#include "suite/case/resolved_case.h"

#include <map>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "suite/data/accuracy_data.h"
#include "suite/data/datasets.h"
#include "suite/errors.h"
#include "workloads/catalog.h"

namespace dlscale {

namespace {

/// A rank's activations: far more than any memory holds is a typo, refused here rather than as an
/// allocation failure (or an overflowed size) inside the case.
void check_activations(const CaseSpec& c, const Workload& w) {
  const auto values =
      static_cast<long double>(c.batch_per_rank()) * static_cast<long double>(activation_elements_per_sample(w));
  if (values > static_cast<long double>(int64_t{1} << 44)) {
    throw UsageError(fmt::format("-w {} --batch {}: {:.3g} activation values per rank, more than 2^44", c.workload,
                                 c.batch, static_cast<double>(values)));
  }
}

}  // namespace

std::vector<ResolvedCase> resolve_cases(const std::vector<CaseSpec>& cases, const Registry& drivers,
                                        int default_threads, const std::vector<std::string>& hosts) {
  std::vector<ResolvedCase> resolved;
  resolved.reserve(cases.size());
  for (const CaseSpec& spec : cases) {
    ResolvedCase c;
    c.spec = spec;
    c.key = spec.command();
    c.driver = drivers.find_or_missing(spec.driver);
    try {
      c.workload = make_workload(spec.workload);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
    check_activations(spec, c.workload);
    c.threads = spec.threads > 0 ? spec.threads : default_threads;
    c.placed = case_ranks(hosts, spec.placement, spec.ranks);
    c.params = parameter_count(c.workload);
    c.train_flops_per_step = flops_per_sample(c.workload).train() * static_cast<double>(spec.global_batch());
    resolved.push_back(std::move(c));
  }
  return resolved;
}

void check_devices_and_data(const std::vector<ResolvedCase>& cases, bool devices_here) {
  std::map<std::string, std::unique_ptr<Dataset>> datasets;  // each read once, however many cases use it
  // Cases on a device this machine lacks, or of a driver this build lacks: an error when no case
  // is left (`-d cuda` without a GPU); otherwise a mixed suite runs what it can and records the
  // rest as unsupported.
  size_t runnable = 0;
  std::string unavailable;
  for (const ResolvedCase& resolved : cases) {
    const CaseSpec& c = resolved.spec;
    const Driver& driver = *resolved.driver;
    // A precision the driver cannot compute is not bad input: like a layer it cannot run, the
    // case is recorded `unsupported` (with the instruction set it lacks) and the rest run.
    Support available = driver.device_available(c.device);
    std::string refused_mode;  // named only when the floating-point mode is what the driver refuses
    if (available.ok) {
      available = driver.supports_denormals(c.device, c.denormals);
      if (!available.ok) refused_mode = std::string(" --denormals ") + denormals_name(c.denormals);
    }
    if (available.ok) {
      ++runnable;
    } else if (unavailable.empty()) {
      unavailable =
          fmt::format("-d {} --device {}{}: {}", c.driver, device_name(c.device), refused_mode, available.reason);
    }
    if (c.data == "synthetic") continue;
    try {
      std::unique_ptr<Dataset>& data = datasets[c.data];
      if (!data) data = open_dataset(c.data);
      check_fits(*data, resolved.workload);
      if (c.mode == RunMode::kAccuracy) {
        const std::string test_spec = test_dataset_spec(c.data);
        std::unique_ptr<Dataset>& test = datasets[test_spec];
        if (!test) test = open_dataset(test_spec);
        check_fits(*test, resolved.workload);
        // Both parts of the split must hold samples, and an epoch at least one global batch.
        const int64_t held = validation_count(data->size(), c.validation);
        const int64_t trained = data->size() - held;
        if (held < 1 || trained < c.global_batch()) {
          throw std::invalid_argument(fmt::format(
              "--validation {} of {} samples leaves {} to validate and {} to train on; an epoch needs at least "
              "one global batch ({}) and validation at least one sample",
              c.validation, data->size(), held, trained, c.global_batch()));
        }
        // More samples between evaluations than an epoch trains would evaluate less often than
        // once per epoch, which is the default: refused rather than silently capped.
        const int64_t epoch_samples = trained / c.global_batch() * c.global_batch();
        if (c.eval_every > epoch_samples) {
          throw UsageError(fmt::format(
              "--eval-every {}: more than an epoch's {} samples ({} steps of global batch {}); leave it out to "
              "evaluate once per epoch",
              c.eval_every, epoch_samples, trained / c.global_batch(), c.global_batch()));
        }
      }
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--data {}: {}", c.data, e.what()));
    }
  }
  if (runnable == 0 && devices_here) throw UsageError(unavailable);
}

}  // namespace dlscale
