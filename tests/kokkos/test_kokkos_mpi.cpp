// Real ranks under mpiexec: every catalog workload, at full size and batch 2, trains two steps
// with the Kokkos driver through the harness's training step (MPI all-reduce of its gradient
// buffer), each rank on its own data; afterwards every rank must hold bit-identical parameters,
// changed by the training. Compared by a 64-bit hash of the parameter bytes, so FCN-5's 472 MB
// need not travel.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "drivers/driver.h"
#include "suite/case/training_step.h"
#include "tests/common/mpi_world.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace dlscale {
namespace {

constexpr uint64_t kSeed = 19;

/// FNV-1a over the 32-bit words of `values` (their bit patterns: equal hashes, equal bits). A
/// word at a time, not a byte: FCN-5's 118 million parameters are hashed in a fraction of the
/// time, also under the sanitizers.
uint64_t hash_of(const std::vector<float>& values) {
  uint64_t h = 1469598103934665603ull;
  for (float v : values) {
    uint32_t word = 0;
    std::memcpy(&word, &v, sizeof word);
    h = (h ^ word) * 1099511628211ull;
  }
  return h;
}

class EveryCatalogWorkload : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryCatalogWorkload, ParametersBitIdenticalAcrossRanksAfterTwoSteps) {
  Registry reg;
  register_drivers(reg);
  const Driver* kokkos = reg.find("kokkos");
  ASSERT_NE(kokkos, nullptr);
  const Workload w = make_workload(GetParam());
  auto model = kokkos->create(w, {kokkos->default_device(), 0, 1, kSeed});
  if (model->grad_buffer().on_device) GTEST_SKIP() << "device gradients: the MPI all-reduce needs host memory";
  model->load_parameters(canonical_parameters(w, kSeed));
  // Each rank trains on its own data, so only the all-reduce can keep them in step.
  model->set_batch(synthetic_batch(w, 2, kSeed, world_rank()));
  const uint64_t initial = hash_of(model->export_parameters());
  for (int step = 0; step < 2; ++step) {
    training_step(*model, MPI_COMM_WORLD, Optimizer{}, false);
    EXPECT_TRUE(std::isfinite(model->loss())) << "step " << step;
  }
  const uint64_t mine = hash_of(model->export_parameters());
  uint64_t root = mine;
  MPI_Bcast(&root, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  EXPECT_EQ(mine, root) << GetParam() << ": rank " << world_rank() << " diverged from rank 0";
  EXPECT_NE(mine, initial) << GetParam() << ": training did not change the parameters";
}

std::vector<std::string> catalog_names() {
  std::vector<std::string> names;
  for (const CatalogEntry& e : catalog()) names.push_back(e.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(KokkosMpi, EveryCatalogWorkload, ::testing::ValuesIn(catalog_names()),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace dlscale
