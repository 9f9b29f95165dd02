// Driver conformance, written once and instantiated for every compiled driver: from the same
// canonical parameters and the same batch, each driver must compute what the float64 reference
// driver computes — initial loss, the full gradient vector, and the loss after three SGD steps —
// on small variants of every catalog workload. Dropout is removed (no two backends can share
// its random masks). Built twice: for the CPU drivers on the CPU, and (DLSCALE_CONFORMANCE_ON_GPU,
// label gpu) for every driver that can run on a GPU, on the GPU; a driver that cannot use the
// device on this machine is skipped, saying why.
#include <gtest/gtest.h>

#include <cmath>
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

}  // namespace
}  // namespace dlscale
