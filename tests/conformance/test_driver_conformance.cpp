// Driver conformance, written once and instantiated for every compiled driver: from the same
// canonical parameters and the same batch, each driver must compute what the float64 reference
// driver computes — initial loss, the full gradient vector, and the loss after three SGD steps —
// on small variants of every catalog workload. Dropout is removed (no two backends can share
// its random masks). Built twice: for the CPU drivers on the CPU, and (DLSCALE_CONFORMANCE_ON_GPU,
// label gpu) for every driver that can run on a GPU, on the GPU; a driver that cannot use the
// device on this machine is skipped, saying why.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>

#include "drivers/driver.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace dlscale {
namespace {

// Small variants with the structure of every catalog network.
const std::vector<std::string> kVariants = {
    "fcn5:features=40,width=16",
    "fcn8:features=24,width=8",
    "alexnet:image=63,width=2,fc=16,classes=10",
    "resnet50:image=224,width=2,classes=10",  // full-size images keep every batch norm well fed
    "lstm32:vocab=50,embed=8,hidden=8,seq=6",
    "lstm64:vocab=50,embed=8,hidden=8,seq=9",
    "mnist_cnn:width=4,fc=16",
    "cifar10_cnn:width=4,fc=16",
    "mnist_fnn:width=16",
    "vgg16_cifar:width=2,fc=16",
    "imdb_lstm:vocab=50,embed=8,hidden=6,seq=12",
    "mnist_cnn_nayak:width=4,fc=16",
};

#ifdef DLSCALE_CONFORMANCE_ON_GPU
constexpr DeviceType kDevice = DeviceType::kCuda;
#else
constexpr DeviceType kDevice = DeviceType::kCpu;
#endif

constexpr int64_t kBatch = 4;
constexpr uint64_t kSeed = 2024;

const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    register_drivers(reg);
    return reg;
  }();
  return r;
}

std::vector<std::string> drivers_under_test() {
  std::vector<std::string> names;
  for (const auto& d : registry().all()) {
    // On the CPU, the drivers whose home is the CPU; on the GPU, every driver but the oracle.
    if (d->name() == "reference") continue;
    if (kDevice == DeviceType::kCpu && d->default_device() != DeviceType::kCpu) continue;
    names.emplace_back(d->name());
  }
  return names;
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    diff += d * d;
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

/// The parameter tensor whose gradient disagrees most, to point a failing driver at its layer.
std::string worst_tensor(const Workload& w, const std::vector<float>& got, const std::vector<float>& want) {
  std::string name;
  double worst = -1;
  for (const ParamSpec& p : parameter_layout(w)) {
    const auto first = static_cast<std::ptrdiff_t>(p.offset), last = first + static_cast<std::ptrdiff_t>(p.count);
    const double err = relative_error(std::vector<float>(got.begin() + first, got.begin() + last),
                                      std::vector<float>(want.begin() + first, want.begin() + last));
    if (err > worst) {
      worst = err;
      name = p.name;
    }
  }
  return name + " (relative error " + std::to_string(worst) + ")";
}

std::unique_ptr<Model> build(const std::string& driver, const Workload& w) {
  const DeviceType device = driver == "reference" ? DeviceType::kCpu : kDevice;
  auto model = registry().find(driver)->create(w, {device, 0, 1, kSeed});
  model->load_parameters(canonical_parameters(w, kSeed));
  model->set_batch(synthetic_batch(w, kBatch, kSeed, 0));
  return model;
}

class DriverConformance : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(DriverConformance, AgreesWithTheReference) {
  const auto& [driver, variant] = GetParam();
  const Workload w = without_dropout(make_workload(variant));
  const Support available = registry().find(driver)->device_available(kDevice);
  if (!available.ok) GTEST_SKIP() << driver << ": " << available.reason;
  ASSERT_TRUE(registry().find(driver)->supports(w, kDevice).ok);
  auto model = build(driver, w), oracle = build("reference", w);

  model->forward();
  oracle->forward();
  const double loss = model->loss(), want = oracle->loss();
  EXPECT_LT(std::abs(loss - want) / std::abs(want), 1e-5) << "initial loss " << loss << " vs " << want;

  model->backward();
  oracle->backward();
  const std::vector<float> grads = model->export_gradients(), want_grads = oracle->export_gradients();
  ASSERT_EQ(grads.size(), want_grads.size());
  EXPECT_LT(relative_error(grads, want_grads), 1e-4)
      << "gradient vector; worst tensor: " << worst_tensor(w, grads, want_grads);

  // The step size is set so that a step lowers the loss by about 1% to first order
  // (lr * |g|^2 = 0.01 * loss): large enough for three steps to change the loss visibly, small
  // enough that the comparison stays about arithmetic. Tiny networks with batch norm have
  // gradients of norm 100 and more, where a fixed rate such as 0.01 throws both drivers into a
  // regime in which float32 and float64 round-off alone move the loss by percents.
  double norm2 = 0;
  for (float g : want_grads) norm2 += static_cast<double>(g) * g;
  const Optimizer sgd{0.01 * want / norm2};
  for (int step = 0; step < 3; ++step) {
    if (step > 0) {
      for (Model* m : {model.get(), oracle.get()}) {
        m->forward();
        m->backward();
      }
    }
    model->update(sgd);
    oracle->update(sgd);
  }
  model->forward();
  oracle->forward();
  const double after = model->loss(), want_after = oracle->loss();
  EXPECT_LT(std::abs(after - want_after) / std::abs(want_after), 1e-4) << "loss after 3 steps";
  EXPECT_LT(want_after, want) << "three small gradient steps did not lower the loss";
}

INSTANTIATE_TEST_SUITE_P(EveryDriver, DriverConformance,
                         ::testing::Combine(::testing::ValuesIn(drivers_under_test()), ::testing::ValuesIn(kVariants)),
                         [](const auto& param_info) {
                           std::string name = std::get<0>(param_info.param) + "_" + std::get<1>(param_info.param);
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

#ifndef DLSCALE_CONFORMANCE_ON_GPU
// Every CPU driver computes in the floating-point mode its case asks for, on every thread it
// computes on (two here). The input is all denormal (1e-39): flushing reads it as zero (DAZ), so
// the first layer's weight gradient, the outer product of its output gradient and the input, is
// exactly zero; IEEE arithmetic keeps the denormal products, and some of them are not zero.
class DenormalsMode : public ::testing::TestWithParam<std::string> {};

std::vector<std::string> cpu_drivers() {
  std::vector<std::string> names;
  for (const auto& d : registry().all()) {
    if (d->default_device() == DeviceType::kCpu) names.emplace_back(d->name());
  }
  return names;
}

TEST_P(DenormalsMode, FirstLayerGradientOfADenormalInput) {
  const Driver& driver = *registry().find(GetParam());
  const Workload w = make_workload("mnist_fnn:width=16");
  Batch batch = synthetic_batch(w, 8, kSeed, 0);
  for (float& x : batch.features) x = 1e-39f;
  const ParamSpec first = parameter_layout(w).front();
  for (Denormals mode : {Denormals::kFlush, Denormals::kIeee}) {
    SCOPED_TRACE(denormals_name(mode));
    const Support support = driver.supports_denormals(DeviceType::kCpu, mode);
    if (!support.ok) {
      EXPECT_EQ(mode, Denormals::kFlush) << "every CPU driver computes in IEEE mode";
      continue;
    }
    auto model = driver.create(w, {DeviceType::kCpu, 0, 2, kSeed, Precision::kFp32, mode});
    model->load_parameters(canonical_parameters(w, kSeed));
    model->set_batch(batch);
    model->forward();
    model->backward();
    const std::vector<float> grads = model->export_gradients();
    size_t nonzero = 0;
    const auto begin = static_cast<size_t>(first.offset), end = begin + static_cast<size_t>(first.count);
    for (size_t i = begin; i < end; ++i) nonzero += grads[i] != 0.0f;
    if (mode == Denormals::kFlush) {
      EXPECT_EQ(nonzero, 0U) << "a flushed input must give an exactly zero weight gradient";
    } else {
      EXPECT_GT(nonzero, 0U) << "IEEE keeps denormal products";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryCpuDriver, DenormalsMode, ::testing::ValuesIn(cpu_drivers()),
                         [](const auto& param_info) { return param_info.param; });

// A driver that reports finished gradients during backward (what lets the harness overlap the
// all-reduce with it) reports every element exactly once per backward pass, and only once it
// holds its final value: the value seen at the report equals the one after backward.
class GradientReadiness : public ::testing::TestWithParam<std::string> {};

TEST_P(GradientReadiness, EachGradientOnceAndFinalWhenReported) {
  const Driver& driver = *registry().find(GetParam());
  for (const std::string& variant : kVariants) {
    SCOPED_TRACE(variant);
    const Workload w = without_dropout(make_workload(variant));
    auto model = driver.create(w, {DeviceType::kCpu, 0, 1, kSeed});
    model->load_parameters(canonical_parameters(w, kSeed));
    model->set_batch(synthetic_batch(w, kBatch, kSeed, 0));
    const GradBuffer grads = model->grad_buffer();
    std::vector<int> reports(grads.count, 0);
    std::vector<float> seen(grads.count, 0.0f);
    const bool reports_ready = model->set_gradient_ready_callback([&](size_t first, size_t count) {
      ASSERT_LE(first + count, grads.count);
      for (size_t i = first; i < first + count; ++i) {
        ++reports[i];
        seen[i] = grads.data[i];
      }
    });
    if (!reports_ready) GTEST_SKIP() << GetParam() << " reports no finished gradients";
    for (int pass = 1; pass <= 2; ++pass) {  // the second pass overwrites the first's gradients
      model->forward();
      model->backward();
      const std::vector<float> final_grads(grads.data, grads.data + grads.count);
      size_t wrong_count = 0, stale = 0;
      for (size_t i = 0; i < grads.count; ++i) {
        wrong_count += reports[i] != pass;
        stale += std::memcmp(&seen[i], &final_grads[i], sizeof(float)) != 0;
      }
      EXPECT_EQ(wrong_count, 0U) << "pass " << pass << ": elements not reported exactly once";
      EXPECT_EQ(stale, 0U) << "pass " << pass << ": elements reported before their final value";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryCpuDriver, GradientReadiness, ::testing::ValuesIn(cpu_drivers()),
                         [](const auto& param_info) { return param_info.param; });
#endif

}  // namespace
}  // namespace dlscale
