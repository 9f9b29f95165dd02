// Real ranks under mpiexec: after gradient averaging every rank must hold bit-identical
// parameters, and the all-reduced gradient must be the mean of the ranks' own gradients.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>

#include "drivers/driver.h"
#include "suite/case/training_step.h"
#include "tests/common/mpi_world.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace dlscale {
namespace {

std::unique_ptr<Model> make_model(const Registry& reg, const Workload& w, uint64_t seed) {
  auto model = reg.find(default_driver_name())->create(w, {DeviceType::kCpu, 0, 1, seed});
  model->load_parameters(canonical_parameters(w, seed));
  // Each rank trains on its own data, so only the all-reduce can keep them in step.
  model->set_batch(synthetic_batch(w, 8, seed, world_rank()));
  return model;
}

TEST(MpiTraining, ParametersBitIdenticalAcrossRanksAfterThreeSteps) {
  Registry reg;
  register_drivers(reg);
  for (const char* spec : {"fcn5:features=48,width=24", "mnist_fnn:width=32"}) {
    const Workload w = make_workload(spec);
    auto model = make_model(reg, w, 11);
    const std::vector<float> initial = model->export_parameters();
    for (int step = 0; step < 3; ++step) training_step(*model, MPI_COMM_WORLD, Optimizer{}, step == 1);
    std::vector<float> mine = model->export_parameters();
    std::vector<float> root = mine;
    MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    EXPECT_EQ(std::memcmp(mine.data(), root.data(), mine.size() * sizeof(float)), 0)
        << spec << ": rank " << world_rank() << " diverged from rank 0";
    EXPECT_NE(mine, initial) << spec << ": training did not change the parameters";
  }
}

TEST(MpiTraining, AllreduceAveragesTheRanksGradients) {
  Registry reg;
  register_drivers(reg);
  const Workload w = make_workload("mnist_fnn:width=16");
  auto model = make_model(reg, w, 5);
  model->forward();
  model->backward();
  const std::vector<float> local = model->export_gradients();
  allreduce_gradients(model->grad_buffer(), MPI_COMM_WORLD);
  const std::vector<float> averaged = model->export_gradients();
  std::vector<double> local_d(local.begin(), local.end()), sum(local.size());
  MPI_Allreduce(local_d.data(), sum.data(), static_cast<int>(sum.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const double p = world_size();
  double max_err = 0, max_abs = 0;
  for (size_t i = 0; i < sum.size(); ++i) {
    max_err = std::max(max_err, std::abs(averaged[i] - sum[i] / p));
    max_abs = std::max(max_abs, std::abs(sum[i] / p));
  }
  EXPECT_GT(max_abs, 0.0);
  EXPECT_LT(max_err, 1e-6 * max_abs);
  // Different data per rank: the local gradients really differ, so the test is not vacuous.
  std::vector<float> root_local = local;
  MPI_Bcast(root_local.data(), static_cast<int>(root_local.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  if (world_rank() != 0) {
    EXPECT_NE(root_local, local);
  }
}

}  // namespace
}  // namespace dlscale
