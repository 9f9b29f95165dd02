// The oneDNN driver's own promises: the OpenMP thread count follows the context even when
// models alternate; it refuses devices other than the CPU; versions() reports its version, ISA
// and threading runtime. What every driver promises (agreement with the float64 reference, the
// training, inference and Adam contracts) is tests/conformance's, which runs the oneDNN driver
// like every other.
#include <gtest/gtest.h>
#include <omp.h>

#include <regex>
#include <stdexcept>
#include <string>

#include "drivers/driver.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace dlscale {
namespace {

constexpr uint64_t kSeed = 7;

const Driver& onednn() {
  static const Registry registry = [] {
    Registry r;
    register_drivers(r);
    return r;
  }();
  const Driver* d = registry.find("onednn");
  if (d == nullptr) throw std::logic_error("the onednn driver is not registered");
  return *d;
}

std::unique_ptr<Model> make_model(const Workload& w, int64_t batch, int threads) {
  auto m = onednn().create(w, {DeviceType::kCpu, 0, threads, kSeed});
  m->load_parameters(canonical_parameters(w, kSeed));
  m->set_batch(synthetic_batch(w, batch, kSeed, 0));
  return m;
}

TEST(OnednnDriver, ThreadsFollowTheContextWhenModelsAlternate) {
  const Workload w = make_workload("fcn5:features=40,width=16");
  auto one = make_model(w, 4, 1), two = make_model(w, 4, 2);
  for (int round = 0; round < 2; ++round) {
    one->forward();
    EXPECT_EQ(omp_get_max_threads(), 1);
    two->forward();
    two->backward();
    EXPECT_EQ(omp_get_max_threads(), 2);
    one->update(Optimizer{});
    EXPECT_EQ(omp_get_max_threads(), 1);
  }
}

TEST(OnednnDriver, RefusesWhatItCannotRun) {
  const Workload w = make_workload("mnist_fnn:width=16");
  EXPECT_FALSE(onednn().supports(w, DeviceType::kCuda).ok);
  EXPECT_TRUE(onednn().supports(w, DeviceType::kCpu).ok);
  EXPECT_THROW(onednn().create(w, {DeviceType::kCuda, 0, 1, kSeed}), std::invalid_argument);
}

TEST(OnednnDriver, ReportsItsVersionIsaAndRuntime) {
  const auto v = onednn().versions();
  ASSERT_TRUE(v.count("onednn"));
  EXPECT_TRUE(std::regex_match(v.at("onednn"), std::regex(R"(\d+\.\d+\.\d+ \(.+\))"))) << v.at("onednn");
  ASSERT_TRUE(v.count("onednn_isa"));
  EXPECT_FALSE(v.at("onednn_isa").empty());
  ASSERT_TRUE(v.count("onednn_cpu_runtime"));
  // The driver sets threads through OpenMP; supports() refuses other threaded runtimes.
  EXPECT_TRUE(v.at("onednn_cpu_runtime") == "OpenMP" || v.at("onednn_cpu_runtime") == "sequential")
      << v.at("onednn_cpu_runtime");
}

}  // namespace
}  // namespace dlscale
