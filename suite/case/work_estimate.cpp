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

OutputFormat parse_output_format(const std::string& name) {
  if (name == "text") return OutputFormat::kText;
  if (name == "json") return OutputFormat::kJson;
  throw UsageError(fmt::format("--format {}: expected text or json", name));
}

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(static_cast<unsigned char>(c)));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string json_value(const AttrValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return json_string(*s);
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  const double d = std::get<double>(v);
  return std::isfinite(d) ? fmt::format("{}", d) : "null";  // {} is the shortest exact form
}

}  // namespace

std::string case_json(const std::string& name, const CaseRecord& r) {
  std::string out = "{\"case\": " + json_string(name);
  for (const Attrs* attrs : {&r.attrs, &r.summary, &r.accuracy_summary}) {
    for (const auto& [key, value] : *attrs) out += ", " + json_string(key) + ": " + json_value(value);
  }
  return out + "}";
}

double training_flops_per_rank(const CaseSpec& c, const DatasetSize& set_size) {
  const FlopCounts flops = flops_per_sample(make_workload(c.workload));
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

std::vector<CaseEstimate> estimate_cases(const std::vector<CaseSpec>& cases, const Registry& drivers,
                                         int default_threads, double given_gflops, const DatasetSize& set_size,
                                         std::vector<std::string>* notes) {
  using Key = std::tuple<std::string, DeviceType, Precision, Denormals, int>;
  std::map<Key, double> rates;  // FLOP/s per rank; 0: unknown
  std::vector<CaseEstimate> out;
  for (const CaseSpec& c : cases) {
    const int threads = c.threads > 0 ? c.threads : default_threads;
    const Key key{c.driver, c.device, c.precision, c.denormals, threads};
    auto it = rates.find(key);
    if (it == rates.end()) {
      double rate = given_gflops * 1e9;
      if (given_gflops <= 0) {
        const Driver& d = *drivers.find(c.driver);
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
    if (e.rate_flops > 0) e.seconds = training_flops_per_rank(c, set_size) / e.rate_flops;
    out.push_back(e);
  }
  return out;
}

}  // namespace dlscale
