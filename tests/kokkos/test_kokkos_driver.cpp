// The Kokkos driver's own promises: the BLAS thread count follows the context even when models
// alternate; it refuses the devices other than its Kokkos space's and workloads it cannot build;
// versions() reports what the driver runs on. What every driver promises (agreement with the
// float64 reference, the training, inference and Adam contracts) is tests/conformance's, which
// runs the Kokkos driver like every other.
#include <dlfcn.h>
#include <gtest/gtest.h>

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

const Driver& kokkos() {
  static const Registry registry = [] {
    Registry r;
    register_drivers(r);
    return r;
  }();
  const Driver* d = registry.find("kokkos");
  if (d == nullptr) throw std::logic_error("the kokkos driver is not registered");
  return *d;
}

DeviceType home() { return kokkos().default_device(); }

std::unique_ptr<Model> make_model(const Workload& w, int64_t batch, int threads) {
  auto m = kokkos().create(w, {home(), 0, threads, kSeed});
  m->load_parameters(canonical_parameters(w, kSeed));
  m->set_batch(synthetic_batch(w, batch, kSeed, 0));
  return m;
}

/// OpenBLAS' current thread count, or -1 when no OpenBLAS is loaded.
int openblas_threads() {
  auto get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  auto parallel = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  return get != nullptr && parallel != nullptr && parallel() != 0 ? get() : -1;
}

TEST(KokkosDriver, BlasThreadsFollowTheContextWhenModelsAlternate) {
  if (home() != DeviceType::kCpu) GTEST_SKIP() << "the BLAS is not used on a device";
  if (openblas_threads() < 0) GTEST_SKIP() << "no threaded OpenBLAS in this process";
  const Workload w = make_workload("fcn5:features=40,width=16");
  std::unique_ptr<Model> one, two;
  try {
    one = make_model(w, 4, 1);
    two = make_model(w, 4, 2);
  } catch (const std::invalid_argument& e) {
    GTEST_SKIP() << e.what();  // an OpenMP or Threads space keeps its first thread count
  }
  for (int round = 0; round < 2; ++round) {
    one->forward();
    EXPECT_EQ(openblas_threads(), 1);
    two->forward();
    two->backward();
    EXPECT_EQ(openblas_threads(), 2);
    one->backward();
    EXPECT_EQ(openblas_threads(), 1);
  }
}

TEST(KokkosDriver, RefusesWhatItCannotRun) {
  const Workload w = make_workload("mnist_fnn:width=16");
  const DeviceType elsewhere = home() == DeviceType::kCpu ? DeviceType::kCuda : DeviceType::kCpu;
  EXPECT_TRUE(kokkos().supports(w, home()).ok);
  EXPECT_FALSE(kokkos().supports(w, elsewhere).ok);
  EXPECT_THROW(kokkos().create(w, {elsewhere, 0, 1, kSeed}), std::invalid_argument);
  Workload broken = w;
  broken.num_classes = 11;  // the last layer gives 10
  EXPECT_FALSE(kokkos().supports(broken, home()).ok);
}

TEST(KokkosDriver, ReportsWhatItRunsOn) {
  const auto v = kokkos().versions();
  ASSERT_TRUE(v.count("kokkos"));
  EXPECT_TRUE(std::regex_match(v.at("kokkos"), std::regex(R"(\d+\.\d+\.\d+)"))) << v.at("kokkos");
  for (const char* key : {"kokkos_kernels", "kokkos_kernels_tpls", "kokkos_execution_space", "kokkos_memory_space",
                          "kokkos_concurrency", "kokkos_blas_threads"}) {
    ASSERT_TRUE(v.count(key)) << key;
    EXPECT_FALSE(v.at(key).empty()) << key;
  }
}

}  // namespace
}  // namespace dlscale
