// Gradient all-reduce overlapped with backward: every driver that reports finished gradients
// during backward (Model::set_gradient_ready_callback) must train to exactly the parameters of
// the blocking all-reduce after backward on two ranks (to the last bits of MPI's summation order
// on more), identical on every rank, with the communication thread running where MPI provides
// MPI_THREAD_SERIALIZED (this binary asks for it), also once the buckets have been merged after
// a step.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "drivers/driver.h"
#include "suite/case/training_step.h"
#include "suite/comm/gradient_allreduce.h"
#include "suite/comm/mpi_settings.h"
#include "tests/common/mpi_world.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace dlscale {
namespace {

std::unique_ptr<Model> make_model(const Driver& driver, const Workload& w) {
  auto model = driver.create(w, {DeviceType::kCpu, 0, 1, 7, Precision::kFp32, Denormals::kFlush});
  model->load_parameters(canonical_parameters(w, 7));
  model->set_batch(synthetic_batch(w, 4, 7, world_rank()));  // each rank its own data
  return model;
}

class OverlapEveryDriver : public ::testing::TestWithParam<std::string> {};

TEST_P(OverlapEveryDriver, TrainsToTheParametersOfTheBlockingAllreduce) {
  Registry reg;
  register_drivers(reg);
  const Driver& driver = *reg.find(GetParam());
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  for (const char* spec :
       {"mnist_cnn:width=4,fc=16", "fcn5:features=48,width=24", "lstm32:vocab=50,embed=8,hidden=8,seq=6"}) {
    SCOPED_TRACE(spec);
    const Workload w = without_dropout(make_workload(spec));
    auto blocking = make_model(driver, w), overlapped = make_model(driver, w);
    // Buckets of about 250 floats that begin where layers do, as a case cuts them: several in a
    // larger layer, started as the layers finish.
    BucketedAllreduce buckets(overlapped->grad_buffer(), MPI_COMM_WORLD, 0.001, layer_parameter_starts(w));
    ASSERT_TRUE(buckets.follow(*overlapped)) << GetParam() << " does not report finished gradients";
    EXPECT_EQ(buckets.progress_thread(), level >= MPI_THREAD_SERIALIZED);
    ASSERT_GT(buckets.bucket_count(), 2U);
    for (int step = 0; step < 3; ++step) {
      training_step(*blocking, MPI_COMM_WORLD, Optimizer{}, false);
      training_step(*overlapped, MPI_COMM_WORLD, Optimizer{}, step == 1, &buckets);
      // After the first step, as after a case's warm-up: whatever merges (that depends on this
      // step's times), it is the same on every rank, the buckets still tile the buffer, and the
      // steps after it train as the blocking path does.
      if (step == 0) buckets.merge_waiting_buckets();
    }
    unsigned long long cut = buckets.bucket_count();  // a hash of where the buckets begin
    size_t next = 0;
    for (const BucketRange& b : buckets.buckets()) {
      EXPECT_EQ(b.first, next);
      next += b.count;
      cut = cut * 1000003ULL + b.first;
    }
    EXPECT_EQ(next, overlapped->grad_buffer().count);
    unsigned long long root_cut = cut;
    MPI_Bcast(&root_cut, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    EXPECT_EQ(cut, root_cut) << "rank " << world_rank() << " merged other buckets than rank 0";
    const std::vector<float> want = blocking->export_parameters(), got = overlapped->export_parameters();
    ASSERT_EQ(got.size(), want.size());
    const int ranks = world_size();
    if (ranks <= 2) {
      // Each element is a + b in either path, whatever algorithm MPI picks: exactly equal.
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
          << "overlapped training differs from blocking on rank " << world_rank();
    } else {
      // MPI may sum a bucket in another order than the whole buffer (docs/metrics.md): the
      // last bits may differ, nothing more.
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, std::abs(double{got[i]} - want[i]) / std::max(1e-3, std::abs(double{want[i]})));
      }
      EXPECT_LT(worst, 1e-5) << "overlapped training departs from blocking on rank " << world_rank();
    }
    std::vector<float> root = got;
    MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    EXPECT_EQ(std::memcmp(got.data(), root.data(), got.size() * sizeof(float)), 0)
        << "rank " << world_rank() << " diverged from rank 0";
    EXPECT_NE(got, canonical_parameters(w, 7)) << "training did not change the parameters";
  }
}

std::vector<std::string> cpu_drivers() {
  Registry reg;
  register_drivers(reg);
  std::vector<std::string> names;
  for (const auto& d : reg.all()) {
    if (d->default_device() == DeviceType::kCpu) names.emplace_back(d->name());
  }
  return names;
}

INSTANTIATE_TEST_SUITE_P(CpuDrivers, OverlapEveryDriver, ::testing::ValuesIn(cpu_drivers()),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace dlscale

namespace dlscale {
namespace {

// Reading MPI's settings through its tool interface (the results file records them) must leave
// the thread level MPI gave: Open MPI 4.1 takes MPI_T_init_thread's level as the process's, and
// a lower one took the communication thread from every bucketed case of a `dlscale run`.
TEST(MpiSettings, ReadingThemKeepsTheThreadLevel) {
  int before = MPI_THREAD_SINGLE, after = MPI_THREAD_SINGLE;
  MPI_Query_thread(&before);
  EXPECT_FALSE(mpi_transport().empty());
  const std::string settings = mpi_allreduce_settings();
  MPI_Query_thread(&after);
  EXPECT_EQ(after, before);
  EXPECT_EQ(mpi_allreduce_settings(), settings) << "read once per process";
}

// A library without the variables asked for (as MPICH has none of Open MPI's) answers nothing,
// and nothing fails.
TEST(MpiSettings, VariablesTheLibraryLacksGiveNothing) {
  bool failed = true;
  EXPECT_EQ(mpi_control_variables({"dlscale_no_such_variable", "another_one"}, false, &failed), "");
  EXPECT_FALSE(failed);
}

}  // namespace
}  // namespace dlscale
