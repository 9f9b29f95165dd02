// What the conformance test files share: the device of this build (the CPU, or with
// DLSCALE_CONFORMANCE_ON_GPU the GPU), the compiled drivers, which of them are under test on that
// device, gtest-safe names for their parameters, and what the contract tests (inference and
// training) build their models from and compare them with.
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "drivers/driver.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace dlscale::conformance {

#ifdef DLSCALE_CONFORMANCE_ON_GPU
constexpr DeviceType kDevice = DeviceType::kCuda;
#else
constexpr DeviceType kDevice = DeviceType::kCpu;
#endif

inline const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    register_drivers(reg);
    return reg;
  }();
  return r;
}

/// On the CPU, the drivers whose home is the CPU; on the GPU, every driver. Never the oracle.
inline std::vector<std::string> drivers_under_test() {
  std::vector<std::string> names;
  for (const auto& d : registry().all()) {
    if (d->name() == "reference") continue;
    if (kDevice == DeviceType::kCpu && d->default_device() != DeviceType::kCpu) continue;
    names.emplace_back(d->name());
  }
  return names;
}

/// `text` with every character gtest does not allow in a test name replaced by '_'.
inline std::string test_name(std::string text) {
  for (char& c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return text;
}

/// The seed of the contract tests' parameters, batches and dropout masks.
constexpr uint64_t kSeed = 7;

/// One small variant per code path, for the contract tests: inner product; convolution with
/// staged weights, pooling and dropout (mnist_cnn); convolution through im2col and overlapping
/// padded max-pooling (alexnet); batch norm and the bottleneck; embedding with an LSTM over every
/// step (two stacked); a last-step LSTM with binary cross-entropy.
inline const std::vector<std::string> kPathVariants = {"fcn5:features=40,width=16",
                                                       "mnist_cnn:width=4,fc=16",
                                                       "alexnet:image=63,width=2,fc=16,classes=10",
                                                       "resnet50:image=64,width=2,classes=10",
                                                       "lstm32:vocab=50,embed=8,hidden=8,seq=6",
                                                       "imdb_lstm:vocab=50,embed=8,hidden=6,seq=12"};

/// `driver`'s model of `w` on this build's device with `threads` CPU threads and dropout seed
/// `seed`, loaded with the canonical parameters and holding a synthetic batch of `batch` samples.
inline std::unique_ptr<Model> make_model(const std::string& driver, const Workload& w, int64_t batch, int threads = 1,
                                         uint64_t seed = kSeed) {
  auto m = registry().find(driver)->create(w, {kDevice, 0, threads, seed});
  m->load_parameters(canonical_parameters(w, kSeed));
  m->set_batch(synthetic_batch(w, batch, kSeed, 0));
  return m;
}

// Two models that run the same steps agree bitwise on the CPU. On the GPU they agree to the
// rounding of sums taken in another order: each model chooses its own cuDNN and cuBLAS algorithms,
// and some of those sum with atomics, so a second model's results differ from the first's in their
// last bits (seen on an H200 in ResNet's parameters after three steps: 2e-6 relative). What these
// tests guard against (a mask drawn anew, Adam's moments or the running statistics kept) moves the
// results by 1e-3 relative and more.
#ifdef DLSCALE_CONFORMANCE_ON_GPU
constexpr double kModelToModel = 1e-4;
#else
constexpr double kModelToModel = 0;
#endif

/// got == want elementwise where kModelToModel is 0; else ‖got − want‖ ≤ kModelToModel ‖want‖.
template <class T>
::testing::AssertionResult same_results(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " values against " << want.size();
  }
  double diff = 0, norm = 0;
  size_t first = got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - static_cast<double>(want[i]);
    if (d != 0 && first == got.size()) first = i;
    diff += d * d;
    norm += static_cast<double>(want[i]) * want[i];
  }
  if (first == got.size() || std::sqrt(diff) <= kModelToModel * std::sqrt(norm)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "relative difference " << std::sqrt(diff / norm) << " (allowed "
                                       << kModelToModel << "); first at " << first << ": " << got[first] << " against "
                                       << want[first];
}

template <class T>
::testing::AssertionResult same_results(T got, T want) {
  return same_results(std::vector<T>{got}, std::vector<T>{want});
}

}  // namespace dlscale::conformance

/// Skips the test when `driver` cannot use this build's device on this machine.
#define SKIP_WITHOUT_DEVICE(driver)                                                                         \
  do {                                                                                                      \
    const ::dlscale::Support available =                                                                    \
        ::dlscale::conformance::registry().find(driver)->device_available(::dlscale::conformance::kDevice); \
    if (!available.ok) GTEST_SKIP() << (driver) << ": " << available.reason;                                \
  } while (false)
