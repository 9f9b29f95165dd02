// Case set-up under real ranks: when one rank's case is refused before the GPU checks, every rank
// still takes the same collectives and finishes the case with the same status (a rank refused
// early once went straight to the status agreement while the others waited in the shared-GPU
// gather: a hang). Needs no GPU: the refusal comes from a driver that only rank 1 may use.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <variant>

#include "drivers/driver.h"
#include "suite/mpi_context.h"
#include "suite/progress.h"
#include "suite/runner.h"

namespace dlscale {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

/// Claims a GPU on world rank 1 only and refuses the case on every other rank; never builds a
/// model (the case must not get that far).
class GpuOnRankOneDriver final : public Driver {
 public:
  std::string_view name() const override { return "gpu_on_rank_1"; }
  Support supports(const Workload&, DeviceType) const override { return Support::yes(); }
  Support supports_precision(const Workload&, DeviceType, Precision) const override { return Support::yes(); }
  Support device_available(DeviceType) const override {
    return world_rank() == 1 ? Support::yes() : Support::no("no GPU on this rank (test driver)");
  }
  std::unique_ptr<Model> create(const Workload&, const DriverContext&) const override {
    throw std::logic_error("a refused case built a model");
  }
  std::map<std::string, std::string> versions() const override { return {}; }
};

std::string attr(const Attrs& attrs, const std::string& name) {
  for (const auto& [key, value] : attrs) {
    if (key == name) return std::get<std::string>(value);
  }
  return "";
}

TEST(MpiCaseSetup, ARankRefusedBeforeTheGpuCheckDoesNotHangTheOthers) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) GTEST_SKIP() << "needs two ranks";
  Registry registry;
  registry.add(std::make_unique<GpuOnRankOneDriver>());
  const MpiContext mpi(MPI_COMM_WORLD);
  Progress progress(false);
  Runner runner(mpi, registry, progress);
  CaseSpec spec;
  spec.workload = "fcn5:features=16,width=8";
  spec.driver = "gpu_on_rank_1";
  spec.device = DeviceType::kCuda;
  spec.scaling = Scaling::kWeak;
  spec.batch = 2;
  spec.warmup = 1;
  spec.iterations = 1;
  spec.ranks = 2;
  const CaseOutcome outcome = runner.run(spec, 0, 1);

  // Every rank got here, each having seen the same agreed status; rank 0 records it.
  int reached = 1, all_reached = 0;
  MPI_Allreduce(&reached, &all_reached, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(all_reached, size);
  if (world_rank() == 0) {
    EXPECT_EQ(attr(outcome.record.attrs, "status"), "unsupported");
    // The refusing rank named once, with its own reason.
    EXPECT_EQ(attr(outcome.record.attrs, "message"), "rank 0: no GPU on this rank (test driver)");
  }
}

}  // namespace
}  // namespace dlscale
