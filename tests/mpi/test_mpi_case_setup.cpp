// Case set-up under real ranks: when one rank's case is refused before the GPU checks, every rank
// still takes the same collectives and finishes the case with the same status (a rank refused
// early once went straight to the status agreement while the others waited in the shared-GPU
// gather: a hang). Needs no GPU: the refusal comes from a driver that only rank 1 may use. And
// when a driver's own reduction gives up on one rank (NCCL past the case's deadline), in its
// set-up or in a step, every rank records `timeout` and the next case runs.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <variant>

#include "drivers/driver.h"
#include "suite/case/progress.h"
#include "suite/case/resolved_case.h"
#include "suite/case/runner.h"
#include "suite/comm/mpi_context.h"
#include "tests/common/mpi_world.h"

namespace dlscale {
namespace {

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

/// How many ranks reached this call (collective): all of them, unless one hangs in a collective
/// the others left.
int ranks_here() {
  int here = 1, all = 0;
  MPI_Allreduce(&here, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

/// A small FCN-5 case of two ranks on `driver`: one warm-up step and `iterations` timed ones.
CaseSpec two_rank_case(const std::string& driver, int iterations) {
  CaseSpec spec;
  spec.workload = "fcn5:features=16,width=8";
  spec.driver = driver;
  spec.scaling = Scaling::kWeak;
  spec.batch = 2;
  spec.warmup = 1;
  spec.iterations = iterations;
  spec.ranks = 2;
  return spec;
}

TEST(MpiCaseSetup, ARankRefusedBeforeTheGpuCheckDoesNotHangTheOthers) {
  const int size = world_size();
  if (size < 2) GTEST_SKIP() << "needs two ranks";
  Registry registry;
  registry.add(std::make_unique<GpuOnRankOneDriver>());
  const MpiContext mpi(MPI_COMM_WORLD);
  Progress progress(false);
  Runner runner(mpi, progress);
  CaseSpec spec = two_rank_case("gpu_on_rank_1", 1);
  spec.device = DeviceType::kCuda;
  const std::vector<ResolvedCase> cases = resolve_cases({spec}, registry, mpi.default_threads(), mpi.hosts());
  const CaseResult outcome = runner.run(cases[0], 0, 1);

  // Every rank got here, each having seen the same agreed status; rank 0 records it.
  EXPECT_EQ(ranks_here(), size);
  if (world_rank() == 0) {
    EXPECT_STREQ(status_name(outcome.outcome.status), "unsupported");
    // The refusing rank named once, with its own reason.
    EXPECT_EQ(outcome.outcome.message, "rank 0: no GPU on this rank (test driver)");
  }
}

/// Where a driver's own gradient reduction gives up on rank 1 (as NCCL does past the case's
/// deadline, or on a lost peer): its collective set-up, queuing a bucket during the first step's
/// backward (after which every call fails again, as an abandoned communicator's does), or the
/// wait for the first step's reduction.
enum class GivesUp { kSetUp, kBackward, kWait };

/// Trains the reference driver's model on the CPU, but through a reducer of its own that throws
/// Timeout on rank 1 where `GivesUp` says, as a GPU driver's NCCL reducer does, so that the
/// harness's handling of it runs on real ranks without a GPU. The reducer averages nothing: the
/// test is about the case's outcome, not its numbers.
class ReducerGivesUpDriver final : public Driver {
 public:
  explicit ReducerGivesUpDriver(GivesUp where) : where_(where) { register_drivers(reference_); }
  std::string_view name() const override { return "reducer_gives_up"; }
  Support supports(const Workload&, DeviceType) const override { return Support::yes(); }
  Support supports_denormals(DeviceType, Denormals) const override { return Support::yes(); }
  std::unique_ptr<GradientReducer> make_reducer(DeviceType, int, const RankGroup& ranks,
                                                Deadline deadline) const override {
    if (deadline == Deadline::max()) throw std::logic_error("the set-up of a reduction was given no deadline");
    if (where_ == GivesUp::kSetUp && ranks.rank() == 1) throw Timeout("the others never joined (test reducer)");
    return std::make_unique<Reducer>(ranks.rank() == 1 ? where_ : GivesUp::kSetUp);
  }
  std::unique_ptr<Model> create(const Workload& w, const DriverContext& ctx) const override {
    return reference_.find("reference")->create(w, ctx);
  }
  std::map<std::string, std::string> versions() const override { return {}; }

 private:
  class Reducer final : public GradientReducer {
   public:
    /// Gives up where `where` says; kSetUp: never (it was made).
    explicit Reducer(GivesUp where) : where_(where) {}
    bool bind(Model& model, double) override {
      return model.set_gradient_ready_callback([this](size_t, size_t) {
        if (where_ == GivesUp::kBackward) {
          abandoned_ = true;
          throw Timeout("a bucket could not be queued (test reducer)");
        }
      });
    }
    void start_step(Deadline deadline) override { deadline_ = deadline; }
    void average(const GradBuffer&) override {
      if (abandoned_) throw std::runtime_error("the communicator was abandoned earlier (test reducer)");
    }
    void wait() override {
      if (deadline_ == Deadline::max()) throw std::logic_error("a step of a case with --case-timeout had no deadline");
      if (where_ == GivesUp::kWait) throw Timeout("the all-reduce never completed (test reducer)");
    }
    std::unique_ptr<AllreduceTransport> transport() override { return nullptr; }
    std::string mechanism() const override { return "test"; }
    size_t bucket_count() const override { return 1; }

   private:
    GivesUp where_;
    bool abandoned_ = false;
    Deadline deadline_ = Deadline::max();
  };
  GivesUp where_;
  Registry reference_;
};

class MpiReducerGivesUp : public ::testing::TestWithParam<GivesUp> {};

TEST_P(MpiReducerGivesUp, EveryRankRecordsTimeoutAndTheNextCaseRuns) {
  const int size = world_size();
  if (size < 2) GTEST_SKIP() << "needs two ranks";
  Registry registry;
  registry.add(std::make_unique<ReducerGivesUpDriver>(GetParam()));
  register_drivers(registry);
  const MpiContext mpi(MPI_COMM_WORLD);
  Progress progress(false);
  Runner runner(mpi, progress);
  CaseSpec spec = two_rank_case("reducer_gives_up", 2);
  spec.case_timeout = 60;
  CaseSpec next_spec = spec;
  next_spec.driver = "reference";
  const std::vector<ResolvedCase> cases =
      resolve_cases({spec, next_spec}, registry, mpi.default_threads(), mpi.hosts());
  const CaseResult given_up = runner.run(cases[0], 0, 2);
  const CaseResult next = runner.run(cases[1], 1, 2);

  EXPECT_EQ(ranks_here(), size);
  if (world_rank() == 0) {
    EXPECT_STREQ(status_name(given_up.outcome.status), "timeout");
    const std::string message = given_up.outcome.message;
    if (GetParam() == GivesUp::kSetUp) {
      EXPECT_EQ(message,
                "rank 1: set-up of the gradient reduction (given 60 s): the others never joined (test reducer)");
    } else if (GetParam() == GivesUp::kBackward) {
      // The first failure, not the abandoned communicator's later one in average().
      EXPECT_EQ(message, "rank 1: warm-up step 1: a bucket could not be queued (test reducer)");
    } else {
      EXPECT_EQ(message, "rank 1: warm-up step 1: the all-reduce never completed (test reducer)");
    }
    EXPECT_STREQ(status_name(next.outcome.status), "ok") << next.outcome.message;
  }
}

INSTANTIATE_TEST_SUITE_P(Where, MpiReducerGivesUp,
                         ::testing::Values(GivesUp::kSetUp, GivesUp::kBackward, GivesUp::kWait),
                         [](const auto& param_info) {
                           switch (param_info.param) {
                             case GivesUp::kSetUp:
                               return "SetUp";
                             case GivesUp::kBackward:
                               return "Backward";
                             default:
                               return "Wait";
                           }
                         });

}  // namespace
}  // namespace dlscale
