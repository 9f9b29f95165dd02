// Real ranks under mpiexec: after gradient averaging every rank must hold bit-identical
// parameters, and the all-reduced gradient must be the mean of the ranks' own gradients.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "drivers/driver.h"
#include "drivers/gradient_compression.h"
#include "suite/case/training_step.h"
#include "suite/comm/gradient_allreduce.h"
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
  StepGradients step;
  allreduce_gradients(model->grad_buffer(), MPI_COMM_WORLD, {}, step);
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

/// The parameters after one SGD step that averages `micro` micro-batches of 4 samples on each rank
/// (each rank's micro-batch j is synthetic batch rank x micro + j), through training_step() with
/// the blocking all-reduce, or with `bucket_mb` buckets when it is positive.
std::vector<float> accumulated_step(const Driver& driver, const Workload& w, int micro, double bucket_mb,
                                    const Optimizer& opt) {
  auto model = driver.create(w, {DeviceType::kCpu, 0, 1, 3});
  model->load_parameters(canonical_parameters(w, 3));
  const int first = world_rank() * micro;
  model->set_batch(synthetic_batch(w, 4, 3, first));
  std::vector<float> earlier(model->grad_buffer().count);
  MicroBatches batches;
  batches.count = micro;
  batches.earlier = &earlier;
  batches.load = [&](int j) { model->set_batch(synthetic_batch(w, 4, 3, first + j)); };
  if (bucket_mb > 0) {
    BucketedAllreduce buckets(model->grad_buffer(), MPI_COMM_WORLD, bucket_mb, {});
    training_step(*model, MPI_COMM_WORLD, opt, false, &buckets, nullptr, nullptr, Deadline::max(), batches);
  } else {
    training_step(*model, MPI_COMM_WORLD, opt, false, nullptr, nullptr, nullptr, Deadline::max(), batches);
  }
  return model->export_parameters();
}

TEST(MpiTraining, AccumulatedMicroBatchesTrainAsTheirUnionDoes) {
  // K micro-batches on each of P ranks are one step over their union of P x K x 4 samples: the
  // mean loss's gradient is the mean of the micro-batches' own (equal sizes), so the parameters
  // after the step are the initial ones less lr times that mean, computed here from each
  // micro-batch's gradient alone. Every CPU driver, the blocking and the bucketed reduction.
  Registry reg;
  register_drivers(reg);
  const Workload w = make_workload("mnist_fnn:width=16");
  const int micro = 3;
  Optimizer opt;
  opt.learning_rate = 0.5;  // a large step: a wrong scale of the average shows far above rounding
  for (const std::string& name : reg.names()) {
    const Driver& driver = *reg.find(name);
    if (!driver.device_available(DeviceType::kCpu).ok) continue;
    SCOPED_TRACE(name);
    auto model = driver.create(w, {DeviceType::kCpu, 0, 1, 3});
    model->load_parameters(canonical_parameters(w, 3));
    const std::vector<float> initial = model->export_parameters();
    std::vector<double> sum(initial.size());
    for (int j = 0; j < micro; ++j) {
      model->set_batch(synthetic_batch(w, 4, 3, world_rank() * micro + j));
      model->forward();
      model->backward();
      const std::vector<float> g = model->export_gradients();
      for (size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
    }
    std::vector<double> total(sum.size());
    MPI_Allreduce(sum.data(), total.data(), static_cast<int>(sum.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    const double n = static_cast<double>(world_size()) * micro;
    std::vector<double> expected(initial.size());
    double largest_update = 0;
    for (size_t i = 0; i < initial.size(); ++i) {
      const double update = opt.learning_rate * total[i] / n;
      expected[i] = initial[i] - update;
      largest_update = std::max(largest_update, std::abs(update));
    }
    ASSERT_GT(largest_update, 1e-3);
    for (const double bucket_mb : {0.0, 0.002}) {
      const std::vector<float> got = accumulated_step(driver, w, micro, bucket_mb, opt);
      ASSERT_EQ(got.size(), expected.size());
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - expected[i]));
      EXPECT_LT(worst, 1e-4 * largest_update) << (bucket_mb > 0 ? "bucketed" : "blocking");
    }
  }
}

/// The unit roundoff of a 16-bit gradient format, and the absolute rounding of its smallest values.
double unit_roundoff(GradCompression c) { return c == GradCompression::kFp16 ? 0x1p-11 : 0x1p-8; }
double least_step(GradCompression c) { return c == GradCompression::kFp16 ? 0x1p-25 : 0x1p-134; }

/// Whether every rank holds the same bytes in `v`.
bool identical_on_every_rank(std::vector<float> v) {
  std::vector<float> root = v;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  int same = std::memcmp(root.data(), v.data(), v.size() * sizeof(float)) == 0 ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return same == 1;
}

/// Over every rank, per element: the sum of `local`, and the sum of its magnitudes (in double).
struct RankSums {
  std::vector<double> sum, abs_sum;
};
RankSums sums_over_ranks(const std::vector<float>& local) {
  std::vector<double> mine(local.begin(), local.end()), mine_abs(local.size());
  for (size_t i = 0; i < local.size(); ++i) mine_abs[i] = std::abs(mine[i]);
  RankSums out{std::vector<double>(local.size()), std::vector<double>(local.size())};
  MPI_Allreduce(mine.data(), out.sum.data(), static_cast<int>(local.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(mine_abs.data(), out.abs_sum.data(), static_cast<int>(local.size()), MPI_DOUBLE, MPI_SUM,
                MPI_COMM_WORLD);
  return out;
}

/// `grads` set to `local` and averaged as `how` says: one all-reduce (`bucket_mb` 0) or buckets
/// of `bucket_mb` started after backward; returns the averages.
std::vector<float> average(const GradBuffer& grads, const std::vector<float>& local, double bucket_mb,
                           const MpiReduction& how) {
  std::copy(local.begin(), local.end(), grads.data);
  StepGradients step;
  if (bucket_mb > 0) {
    BucketedAllreduce buckets(grads, MPI_COMM_WORLD, bucket_mb, {}, how);
    EXPECT_GT(buckets.bucket_count(), 3u);
    buckets.start_step(std::chrono::steady_clock::now(), step);
    buckets.finish();
  } else {
    allreduce_gradients(grads, MPI_COMM_WORLD, how, step);
  }
  return {grads.data, grads.data + grads.count};
}

TEST(MpiTraining, CompressedGradientsAreTheMeanWithinTheFormatsRounding) {
  // Each rank's gradient divided by P and rounded (one rounding), then P - 1 sums each rounded:
  // |error| <= P u (sum over ranks of |g| / P) + P x the format's least step, per element.
  Registry reg;
  register_drivers(reg);
  const Workload w = make_workload("fcn5:features=300,width=256");  // ~160k gradients: the ring, not MPI_Allreduce
  auto model = make_model(reg, w, 5);
  model->forward();
  model->backward();
  const std::vector<float> local = model->export_gradients();
  const GradBuffer grads = model->grad_buffer();
  const auto [sum, abs_sum] = sums_over_ranks(local);
  const double p = world_size();
  for (const MpiReduction how :
       {MpiReduction{GradCompression::kFp16, Hierarchy::kFlat}, MpiReduction{GradCompression::kBf16, Hierarchy::kFlat},
        MpiReduction{GradCompression::kFp16, Hierarchy::kHost}}) {
    const GradCompression c = how.compression;
    for (double bucket_mb : {0.0, 0.1}) {  // one all-reduce after backward; buckets of 25,000
      SCOPED_TRACE(std::string(grad_compression_name(c)) + " " + hierarchy_name(how.hierarchy) +
                   (bucket_mb > 0 ? " bucketed" : " whole"));
      const std::vector<float> averaged = average(grads, local, bucket_mb, how);
      size_t rounded = 0;
      for (size_t i = 0; i < averaged.size(); ++i) {
        const double error = std::abs(averaged[i] - sum[i] / p);
        const double bound = p * unit_roundoff(c) * abs_sum[i] / p + p * least_step(c);
        ASSERT_LE(error, bound) << "element " << i;
        if (averaged[i] != static_cast<float>(sum[i] / p)) ++rounded;
      }
      if (p > 1) {
        EXPECT_GT(rounded, averaged.size() / 10) << "the sum was not made in 16 bits";
      }
      EXPECT_TRUE(identical_on_every_rank(averaged));
    }
  }
}

TEST(MpiTraining, CompressedTrainingFollowsTheFloat32OneOnEveryCpuDriver) {
  // Five SGD steps with bucketed gradients summed in fp16 and in bf16 against float32: the same
  // parameters on every rank, and within the format's rounding of float32's (docs/metrics.md,
  // "Gradient compression": each step's gradient within P u of it, so the parameters within
  // 2 P u of how far training moved them; factor 2 for what the steps make of the differences).
  Registry reg;
  register_drivers(reg);
  const Workload w = make_workload("fcn5:features=48,width=24");
  const double p = world_size();
  for (const std::string& name : reg.names()) {
    const Driver* driver = reg.find(name);
    if (driver == nullptr || driver->default_device() != DeviceType::kCpu ||
        !driver->supports(w, DeviceType::kCpu).ok) {
      continue;
    }
    const auto train = [&](GradCompression c) {
      auto model = driver->create(w, {DeviceType::kCpu, 0, 1, 7});
      model->load_parameters(canonical_parameters(w, 7));
      model->set_batch(synthetic_batch(w, 8, 7, world_rank()));
      BucketedAllreduce buckets(model->grad_buffer(), MPI_COMM_WORLD, 0.001, layer_parameter_starts(w),
                                MpiReduction{c, Hierarchy::kFlat});
      buckets.follow(*model);
      Optimizer sgd;
      sgd.learning_rate = 0.05;
      for (int step = 0; step < 5; ++step) training_step(*model, MPI_COMM_WORLD, sgd, false, &buckets);
      return model->export_parameters();
    };
    const std::vector<float> initial = canonical_parameters(w, 7), exact = train(GradCompression::kNone);
    double moved = 0;
    for (size_t i = 0; i < exact.size(); ++i) moved = std::max(moved, std::abs(double{exact[i]} - initial[i]));
    ASSERT_GT(moved, 0.0) << name;
    for (GradCompression c : {GradCompression::kFp16, GradCompression::kBf16}) {
      SCOPED_TRACE(name + " " + grad_compression_name(c));
      const std::vector<float> got = train(c);
      double diff = 0;
      for (size_t i = 0; i < got.size(); ++i) diff = std::max(diff, std::abs(double{got[i]} - exact[i]));
      EXPECT_LE(diff, 2 * p * unit_roundoff(c) * moved);
      if (p > 1) {
        EXPECT_GT(diff, 0.0) << "compression changed nothing";
      }
      EXPECT_TRUE(identical_on_every_rank(got));
    }
  }
}

TEST(MpiTraining, HostHierarchyGivesTheFlatRingsSums) {
  // Reduced within the host, summed round the leaders' ring (here one host: its leader alone),
  // broadcast back: float32 sums equal the flat ring's up to summation order, on every path
  // (whole, buckets on the thread's two lanes, buckets under the ring's minimum), bit-identical
  // on every rank.
  Registry reg;
  register_drivers(reg);
  const Workload w = make_workload("fcn5:features=300,width=256");
  auto model = make_model(reg, w, 9);
  model->forward();
  model->backward();
  const std::vector<float> local = model->export_gradients();
  const GradBuffer grads = model->grad_buffer();
  const auto [sum, abs_sum] = sums_over_ranks(local);
  const double p = world_size();
  EXPECT_EQ(host_groups(MPI_COMM_WORLD).hosts, 1);
  for (double bucket_mb : {0.0, 0.1, 0.01}) {
    SCOPED_TRACE(bucket_mb);
    const std::vector<float> averaged = average(grads, local, bucket_mb, {GradCompression::kNone, Hierarchy::kHost});
    for (size_t i = 0; i < averaged.size(); ++i) {
      // Float sums in some order: within P float roundings of the magnitudes summed.
      ASSERT_NEAR(averaged[i], sum[i] / p, (p + 1) * 0x1p-24 * abs_sum[i] / p) << "element " << i;
    }
    EXPECT_TRUE(identical_on_every_rank(averaged));
  }
}

TEST(MpiTraining, SparseEmbeddingRowsTrainAsTheDenseSum) {
  // Five bucketed SGD steps of a small PTB model whose embedding gradient is summed as the rows
  // the ranks touched: the parameters of the dense sum's training up to float rounding, the same
  // on every rank, and fewer rows sent than the block has. A vocabulary of 40 that every batch
  // touches whole goes dense on two or more ranks (the gathered rows would be the larger).
  Registry reg;
  register_drivers(reg);
  const double p = world_size();
  for (const char* spec : {"lstm32:vocab=2000,embed=16,hidden=16,seq=4", "lstm32:vocab=40,embed=16,hidden=16,seq=32"}) {
    SCOPED_TRACE(spec);
    const Workload w = make_workload(spec);
    ASSERT_EQ(w.layers.front().kind, LayerKind::kEmbedding);
    const auto train = [&](bool sparse, double* share, bool* dense) {
      auto model = make_model(reg, w, 3);
      MpiReduction how;
      if (sparse) {
        how.sparse_rows = static_cast<size_t>(w.layers.front().in);
        how.sparse_width = static_cast<size_t>(w.layers.front().out);
      }
      BucketedAllreduce buckets(model->grad_buffer(), MPI_COMM_WORLD, 0.01, layer_parameter_starts(w), how);
      buckets.follow(*model);
      Optimizer sgd;
      sgd.learning_rate = 0.1;
      for (int step = 0; step < 5; ++step) {
        model->set_batch(synthetic_batch(w, 8, 100 + static_cast<uint64_t>(step), world_rank()));
        training_step(*model, MPI_COMM_WORLD, sgd, false, &buckets);
      }
      if (share != nullptr) *share = buckets.embedding_rows_share();
      if (dense != nullptr) *dense = buckets.embedding_went_dense();
      return model->export_parameters();
    };
    double share = 0;
    bool dense = false;
    const std::vector<float> exact = train(false, nullptr, nullptr), got = train(true, &share, &dense);
    double diff = 0, scale = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      diff = std::max(diff, std::abs(double{got[i]} - exact[i]));
      scale = std::max(scale, std::abs(double{exact[i]}));
    }
    EXPECT_LE(diff, 1e-5 * scale);
    EXPECT_TRUE(identical_on_every_rank(got));
    if (p > 1) {
      const bool small_vocabulary = w.layers.front().in == 40;
      EXPECT_EQ(dense, small_vocabulary) << "share " << share;
      if (!small_vocabulary) {
        EXPECT_GT(share, 0.0);
        EXPECT_LT(share, 0.5);
      }
    } else {
      EXPECT_TRUE(std::isnan(share)) << "one rank sums nothing";
    }
  }
}

TEST(MpiTraining, RingHalvesMakeTheAllreduce) {
  // The reduce-scatter leaves each rank its own chunk of the all-reduce's sum, bit for bit, and
  // the all-gather of the chunks leaves every rank the whole of it; floats round the ring and
  // under its minimum (one MPI call each), doubles all-gathered as a sharded reference model's
  // parameters are.
  const auto p = static_cast<size_t>(world_size());
  const auto r = static_cast<size_t>(world_rank());
  for (size_t count : {size_t{100'003}, size_t{1'000}, size_t{1}}) {
    SCOPED_TRACE(count);
    std::vector<float> mine(count);
    for (size_t i = 0; i < count; ++i) mine[i] = static_cast<float>(std::sin(0.37 * i + r)) * 0x1p-3f + 0.1f * r;
    std::vector<float> whole = mine, scattered = mine;
    allreduce_sum_in_place(whole.data(), count, GradCompression::kNone, MPI_COMM_WORLD);
    RingSum half(scattered.data(), count, GradCompression::kNone, MPI_COMM_WORLD, 0, RingPart::kReduceScatter);
    while (!half.done()) half.progress();
    const ParamRange own = ring_owned_chunk(count, p, r);
    EXPECT_EQ(std::memcmp(scattered.data() + own.first, whole.data() + own.first, own.count * sizeof(float)), 0);
    const std::unique_ptr<RingSum> gather =
        RingSum::all_gather(scattered.data(), count, sizeof(float), MPI_COMM_WORLD, 1);
    while (!gather->done()) gather->progress();
    EXPECT_EQ(std::memcmp(scattered.data(), whole.data(), count * sizeof(float)), 0);
    // Doubles: each rank writes only its own chunk, the all-gather fills in the rest.
    std::vector<double> values(count, -1.0);
    for (size_t i = own.first; i < own.first + own.count; ++i) values[i] = 0.5 * static_cast<double>(i) + 1e-12;
    const std::unique_ptr<RingSum> doubles =
        RingSum::all_gather(values.data(), count, sizeof(double), MPI_COMM_WORLD, 0);
    while (!doubles->done()) doubles->progress();
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(values[i], 0.5 * static_cast<double>(i) + 1e-12) << "element " << i;
  }
  // The owned chunks partition the buffer: each element in exactly one rank's.
  for (size_t count : {size_t{10}, size_t{2}, size_t{0}}) {
    std::vector<int> owners(count, 0);
    const ParamRange own = ring_owned_chunk(count, p, r);
    for (size_t i = own.first; i < own.first + own.count; ++i) owners[i] = 1;
    MPI_Allreduce(MPI_IN_PLACE, owners.data(), static_cast<int>(count), MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (size_t i = 0; i < count; ++i) EXPECT_EQ(owners[i], 1) << count << " element " << i;
  }
}

/// One configuration of the sharded-optimiser test.
struct ShardingVariant {
  const char* workload;
  double bucket_mb;
  GradCompression compression;
  bool sparse;  ///< the embedding's gradient summed as rows
};

/// What five steps of one configuration left on this rank.
struct ShardedRun {
  std::vector<float> parameters;
  int64_t state_bytes = 0;    ///< the optimiser's
  size_t shard_elements = 0;  ///< the parameters this rank updated
  size_t buckets = 0;
};

ShardedRun train_five_steps(const Driver& driver, const Workload& w, const ShardingVariant& v, const Optimizer& opt,
                            Sharding sharding) {
  auto model = driver.create(w, {DeviceType::kCpu, 0, 1, 7});
  model->load_parameters(canonical_parameters(w, 7));
  MpiReduction how{v.compression, Hierarchy::kFlat};
  how.sharding = sharding;
  if (v.sparse) {
    how.sparse_rows = static_cast<size_t>(w.layers.front().in);
    how.sparse_width = static_cast<size_t>(w.layers.front().out);
  }
  BucketedAllreduce buckets(model->grad_buffer(), MPI_COMM_WORLD, v.bucket_mb, layer_parameter_starts(w), how);
  buckets.follow(*model);
  for (int step = 0; step < 5; ++step) {
    model->set_batch(synthetic_batch(w, 8, 7 + static_cast<uint64_t>(step), world_rank()));
    training_step(*model, MPI_COMM_WORLD, opt, false, &buckets);
  }
  EXPECT_EQ(buckets.sharded(), sharding == Sharding::kOptimizer && world_size() > 1);
  return {model->export_parameters(), model->memory().optimizer_state_bytes,
          buckets.shard().elements(model->grad_buffer().count), buckets.bucket_count()};
}

TEST(MpiTraining, ShardedOptimizerTrainsAsTheUnshardedOneOnEveryCpuDriver) {
  // Five steps with the optimiser sharded (ZeRO stage 1: reduce-scatter, each rank's update of
  // its share, all-gather) against the unsharded all-reduce, SGD and Adam, one bucket and many
  // (some under the ring's minimum), float32 and fp16 sums, an embedding summed as rows: the same
  // parameters within 1e-6 of their magnitude (each share's update is the same arithmetic on the
  // same averaged gradient), the same on every rank; and Adam's state on each rank is its share
  // alone, the shares partitioning the parameters.
  Registry reg;
  register_drivers(reg);
  const double p = world_size();
  const ShardingVariant variants[] = {{"fcn5:features=48,width=24", 0.0, GradCompression::kNone, false},
                                      {"fcn5:features=48,width=24", 0.001, GradCompression::kNone, false},
                                      {"fcn5:features=48,width=24", 0.001, GradCompression::kFp16, false},
                                      {"lstm32:vocab=300,embed=8,hidden=8,seq=4", 0.001, GradCompression::kNone, true}};
  for (const std::string& name : reg.names()) {
    const Driver* driver = reg.find(name);
    if (driver == nullptr || driver->default_device() != DeviceType::kCpu) continue;
    for (const ShardingVariant& v : variants) {
      const Workload w = make_workload(v.workload);
      if (!driver->supports(w, DeviceType::kCpu).ok) continue;
      for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
        SCOPED_TRACE(name + " " + v.workload + " bucket_mb " + std::to_string(v.bucket_mb) + " " +
                     grad_compression_name(v.compression) + " " + optimizer_name(kind));
        Optimizer opt;
        opt.kind = kind;
        opt.learning_rate = kind == OptimizerKind::kSgd ? 0.05 : 0.01;
        const ShardedRun whole = train_five_steps(*driver, w, v, opt, Sharding::kNone);
        const ShardedRun shared = train_five_steps(*driver, w, v, opt, Sharding::kOptimizer);
        const std::vector<float>&unsharded = whole.parameters, &sharded = shared.parameters;
        const std::vector<float> initial = canonical_parameters(w, 7);
        double diff = 0, scale = 0, moved = 0;
        for (size_t i = 0; i < sharded.size(); ++i) {
          diff = std::max(diff, std::abs(double{sharded[i]} - unsharded[i]));
          scale = std::max(scale, std::abs(double{unsharded[i]}));
          moved = std::max(moved, std::abs(double{unsharded[i]} - initial[i]));
        }
        ASSERT_GT(moved, 0.0) << "training changed nothing";
        EXPECT_LE(diff, 1e-6 * scale);
        EXPECT_TRUE(identical_on_every_rank(sharded));
        // The shares partition the parameters, and Adam keeps state for this rank's alone: at
        // most 1/P of the unsharded state, plus one value per bucket (uneven chunks).
        long long elements = static_cast<long long>(shared.shard_elements);
        MPI_Allreduce(MPI_IN_PLACE, &elements, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        EXPECT_EQ(elements, static_cast<long long>(sharded.size()));
        if (kind == OptimizerKind::kAdam) {
          const int64_t value_bytes = whole.state_bytes / 2 / static_cast<int64_t>(sharded.size());
          EXPECT_EQ(shared.state_bytes, 2 * value_bytes * static_cast<int64_t>(shared.shard_elements));
          EXPECT_LE(
              static_cast<double>(shared.state_bytes),
              static_cast<double>(whole.state_bytes) / p + 2.0 * value_bytes * static_cast<double>(shared.buckets));
        } else {
          EXPECT_EQ(shared.state_bytes, 0);
        }
      }
    }
  }
}

}  // namespace
}  // namespace dlscale
