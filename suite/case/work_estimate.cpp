#include "suite/case/work_estimate.h"

#include <chrono>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "suite/data/accuracy_data.h"
#include "suite/data/datasets.h"
#include "suite/errors.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace dlscale {

double training_flops_per_rank(const ResolvedCase& rc, const DatasetSize& set_size) {
  const CaseSpec& c = rc.spec;
  const FlopCounts flops = flops_per_sample(rc.workload);
  const auto batch = static_cast<double>(c.batch_per_rank());
  if (c.mode == RunMode::kTiming) return flops.train() * batch * (c.warmup + c.iterations);
  // What suite/case/accuracy_mode.cpp does: full global batches of the samples not held out, every
  // epoch; each rank evaluates its shard of the validation set after each epoch and of the test
  // set once.
  const int64_t samples = set_size(c.data), held_out = validation_count(samples, c.validation);
  const auto steps_per_epoch = static_cast<double>((samples - held_out) / c.global_batch());
  const double evaluated_per_rank =
      std::ceil(static_cast<double>(c.epochs * held_out + set_size(test_dataset_spec(c.data))) / c.ranks);
  return c.repeats * (flops.train() * batch * steps_per_epoch * c.epochs + flops.forward * evaluated_per_rank);
}

namespace {

/// The probe: FCN layers of 1024 units at batch 64, about 2 GFLOP per training step, small
/// enough to build in a moment on any device.
constexpr const char* kProbeWorkload = "fcn5:features=1024,width=1024";
constexpr int64_t kProbeBatch = 64;

double measure_rate(const Driver& driver, const DriverContext& ctx) {
  const Workload w = make_workload(kProbeWorkload);
  auto model = driver.create(w, ctx);
  model->load_parameters(canonical_parameters(w, 1));
  model->set_batch(synthetic_batch(w, kProbeBatch, 1, 0));
  const Optimizer opt;
  const auto step = [&] {
    model->forward();
    model->backward();
    model->update(opt);
    model->synchronize();
  };
  step();  // warm-up: first-touch allocations, kernel selection
  const int steps = 3;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return flops_per_sample(w).train() * static_cast<double>(kProbeBatch) * steps / s;
}

}  // namespace

std::vector<CaseEstimate> estimate_cases(const std::vector<ResolvedCase>& cases, double given_gflops,
                                         const DatasetSize& set_size, std::vector<std::string>* notes) {
  using Key = std::tuple<std::string, DeviceType, Precision, Denormals, int>;
  std::map<Key, double> rates;  // FLOP/s per rank; 0: unknown
  std::vector<CaseEstimate> out;
  for (const ResolvedCase& rc : cases) {
    const CaseSpec& c = rc.spec;
    const int threads = rc.threads;
    const Key key{c.driver, c.device, c.precision, c.denormals, threads};
    auto it = rates.find(key);
    if (it == rates.end()) {
      double rate = given_gflops * 1e9;
      if (given_gflops <= 0) {
        const Driver& d = *rc.driver;
        const std::string what = fmt::format("{} {} {} {} t={}", c.driver, device_name(c.device),
                                             precision_name(c.precision), denormals_name(c.denormals), threads);
        try {
          const Workload probe = make_workload(kProbeWorkload);
          Support s = d.device_available(c.device);
          if (s.ok) s = d.supports(probe, c.device);
          if (s.ok) s = precision_support(d, probe, c.device, c.precision, c.allow_emulation);
          if (s.ok) s = d.supports_denormals(c.device, c.denormals);
          if (!s.ok) throw std::runtime_error(s.reason);
          rate = measure_rate(d, {c.device, 0, threads, 1, c.precision, c.denormals});
          notes->push_back(fmt::format("{}: {:.1f} GFLOP/s measured ({} at batch {})", what, rate / 1e9, kProbeWorkload,
                                       kProbeBatch));
        } catch (const std::exception& e) {
          rate = 0;
          notes->push_back(fmt::format("{}: no rate ({})", what, e.what()));
        }
      }
      it = rates.emplace(key, rate).first;
    }
    CaseEstimate e;
    e.rate_flops = it->second;
    if (e.rate_flops > 0) e.seconds = training_flops_per_rank(rc, set_size) / e.rate_flops;
    out.push_back(e);
  }
  return out;
}

}  // namespace dlscale
