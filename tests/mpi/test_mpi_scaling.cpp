// Scaling machinery under real ranks: the all-reduce microbenchmark's exactness at odd sizes,
// and the bucketed (overlapped) gradient all-reduce against the single blocking one.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "drivers/driver.h"
#include "suite/case/training_step.h"
#include "suite/comm/gradient_allreduce.h"
#include "suite/meters/allreduce_microbenchmark.h"
#include "tests/common/mpi_world.h"
#include "workloads/catalog.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace dlscale {
namespace {

TEST(MpiScaling, AllreduceBenchmarkIsExactAtOddSizes) {
  AllreduceOptions options;
  options.sizes_bytes = {4, 12, 4100, 1000004, 4 * 1048583};  // odd element counts, one above 2^20
  options.warmup = 1;
  options.iterations = 3;
  const AllreduceResult r = run_allreduce_benchmark(MPI_COMM_WORLD, options);
  if (world_rank() != 0) return;
  ASSERT_EQ(r.errors.size(), options.sizes_bytes.size());
  for (size_t s = 0; s < r.errors.size(); ++s) EXPECT_EQ(r.errors[s], 0) << r.bytes[s] << " bytes";
  ASSERT_EQ(r.time_s.size(), static_cast<size_t>(r.ranks) * options.sizes_bytes.size() * 3);
  for (double t : r.time_s) EXPECT_GT(t, 0.0);
  for (size_t s = 0; s < r.bytes.size(); ++s) {
    EXPECT_NEAR(r.busbw_gbps[s], r.algbw_gbps[s] * 2.0 * (r.ranks - 1) / r.ranks, 1e-12);
  }
}

std::unique_ptr<Model> make_model(const Registry& reg, const Workload& w) {
  auto model = reg.find(default_driver_name())->create(w, {DeviceType::kCpu, 0, 1, 3});
  model->load_parameters(canonical_parameters(w, 3));
  model->set_batch(synthetic_batch(w, 8, 3, world_rank()));
  return model;
}

TEST(MpiScaling, BucketedOverlappedAllreduceMatchesTheBlockingOne) {
  Registry reg;
  register_drivers(reg);
  const Workload w = make_workload("fcn5:features=300,width=64");
  auto plain = make_model(reg, w), bucketed = make_model(reg, w);
  // Buckets of 0.01 MB (2,500 floats) cut the ~60k gradients into many pieces, across tensors.
  BucketedAllreduce buckets(bucketed->grad_buffer(), MPI_COMM_WORLD, 0.01, {});
  ASSERT_GT(buckets.bucket_count(), 10u);
  size_t reported = 0;
  ASSERT_TRUE(bucketed->set_gradient_ready_callback([&](size_t first, size_t count) {
    reported += count;
    buckets.ready(first, count);
  }));
  for (int step = 0; step < 3; ++step) {
    reported = 0;
    training_step(*plain, MPI_COMM_WORLD, Optimizer{}, false);
    training_step(*bucketed, MPI_COMM_WORLD, Optimizer{}, step == 1, &buckets);
    // Every gradient element was reported final exactly once during backward.
    EXPECT_EQ(reported, bucketed->grad_buffer().count);
  }
  const std::vector<float> a = plain->export_parameters(), b = bucketed->export_parameters();
  double max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::abs(static_cast<double>(a[i]) - b[i]));
  EXPECT_LT(max_diff, 1e-6);
  std::vector<float> root = b;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  EXPECT_EQ(std::memcmp(root.data(), b.data(), b.size() * sizeof(float)), 0) << "ranks diverged";
}

TEST(MpiScaling, BucketsWithoutReadinessReportsStartAfterBackward) {
  // A driver that cannot report finished ranges (none is installed here): every bucket starts
  // in finish().
  Registry reg;
  register_drivers(reg);
  const Workload w = make_workload("mnist_fnn:width=8");
  auto model = reg.find("reference")->create(w, {DeviceType::kCpu, 0, 1, 3});
  model->load_parameters(canonical_parameters(w, 3));
  model->set_batch(synthetic_batch(w, 4, 3, world_rank()));
  BucketedAllreduce buckets(model->grad_buffer(), MPI_COMM_WORLD, 0.004, {});
  model->forward();
  model->backward();
  const std::vector<float> local = model->export_gradients();
  StepGradients step, expected_step;
  buckets.start_step(std::chrono::steady_clock::now(), step);
  buckets.finish();
  std::vector<float> expected = local;
  allreduce_gradients({expected.data(), expected.size(), false}, MPI_COMM_WORLD, {}, expected_step);
  // Equal up to summation order: MPI picks its reduction algorithm by message size, and float
  // addition over three or more ranks depends on the order.
  const std::vector<float> got = model->export_gradients();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i], 1e-6 * (1 + std::abs(expected[i]))) << i;
}

TEST(MpiScaling, BucketsStartInOneOrderWhateverEachRankReports) {
  // One float a bucket, six buckets. Rank 0 reports them as a layer-by-layer backward does, a
  // layer of two buckets at a time from the end (one report: 4 and 5 together); the last rank
  // reports nothing, as a rank whose backward failed, and starts them all in finish(). Collectives
  // started in different orders would pair different buckets: each element must come back as its
  // own sum over the ranks.
  const int size = world_size();
  const int rank = world_rank();
  std::vector<float> values(6);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(10 * (i + 1) + rank);
  BucketedAllreduce buckets({values.data(), values.size(), false}, MPI_COMM_WORLD, 4e-6, {});
  ASSERT_EQ(buckets.bucket_count(), 6u);
  StepGradients step;
  buckets.start_step(std::chrono::steady_clock::now(), step);
  if (rank != size - 1 || size == 1) {
    buckets.ready(4, 2);
    buckets.ready(2, 2);
    buckets.ready(0, 2);
  }
  buckets.finish();
  const float rank_sum = static_cast<float>(size * (size - 1) / 2);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_FLOAT_EQ(values[i], (static_cast<float>(10 * (i + 1) * size) + rank_sum) / static_cast<float>(size))
        << "element " << i << ", rank " << rank;
  }
  // What a timeline draws: each bucket's reduction started once the bucket was handed over, and
  // ended after it started.
  const std::vector<double>& ready = buckets.start_times();
  const std::vector<double>& reduced = buckets.reduction_times();
  ASSERT_EQ(reduced.size(), 2 * values.size());
  for (size_t b = 0; b < values.size(); ++b) {
    EXPECT_GE(reduced[2 * b], ready[b]) << "bucket " << b;
    EXPECT_GE(reduced[2 * b + 1], reduced[2 * b]) << "bucket " << b;
  }
}

}  // namespace
}  // namespace dlscale

namespace dlscale {
namespace {

// dlscale's ring (suite/comm/ring_allreduce.h) at sizes round it and below it, counts that do not
// divide by P: the sum agrees with MPI_Allreduce's to float32 rounding, is exact where the values
// are integers, and is bit-identical on every rank.
TEST(RingAllreduce, AgreesWithMpiAndIsTheSameOnEveryRank) {
  const int ranks = world_size();
  const int me = world_rank();
  for (size_t count :
       {size_t{7}, kRingMinBytes / 4 - 1, kRingMinBytes / 4, size_t{3} * kRingSegmentBytes / 4 + 5, size_t{5000011}}) {
    SCOPED_TRACE(count);
    std::vector<float> ring(count), mpi(count), exact(count);
    for (size_t i = 0; i < count; ++i) {
      // Values whose sums round differently in different orders, and integers whose sums cannot.
      ring[i] = mpi[i] = std::sin(0.001f * static_cast<float>(i) + static_cast<float>(me)) * 1e3f + 1e-3f * me;
      exact[i] = static_cast<float>((i + static_cast<size_t>(me)) % 97);
    }
    allreduce_sum_in_place(ring.data(), count, GradCompression::kNone, MPI_COMM_WORLD);
    allreduce_sum_in_place(exact.data(), count, GradCompression::kNone, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, mpi.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double diff = 0, norm = 0;
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      diff += (double{ring[i]} - mpi[i]) * (double{ring[i]} - mpi[i]);
      norm += double{mpi[i]} * mpi[i];
      size_t want = 0;
      for (int r = 0; r < ranks; ++r) want += (i + static_cast<size_t>(r)) % 97;
      wrong += exact[i] == static_cast<float>(want) ? 0 : 1;
    }
    EXPECT_LT(std::sqrt(diff / norm), 4 * ranks * 0x1p-24);
    EXPECT_EQ(wrong, 0u);
    // Rank 0's result, broadcast, against every rank's own.
    std::vector<float> first(ring);
    MPI_Bcast(first.data(), static_cast<int>(count), MPI_FLOAT, 0, MPI_COMM_WORLD);
    EXPECT_EQ(std::memcmp(first.data(), ring.data(), count * sizeof(float)), 0) << "rank " << me;
  }
}

// Segments under the eager limit between hosts, with room for MPI's headers, within the floor and
// the ceiling; 1 MiB within one host or where MPI shows no limit.
TEST(RingAllreduce, SegmentsStayUnderTheEagerLimitBetweenHosts) {
  EXPECT_EQ(ring_segment_bytes_for(true, 65536), 65536 - kEagerHeaderBytes);
  EXPECT_EQ(ring_segment_bytes_for(true, 65535 + kEagerHeaderBytes), 65532u);  // whole floats
  EXPECT_EQ(ring_segment_bytes_for(false, 65536), kRingSegmentBytes);
  EXPECT_EQ(ring_segment_bytes_for(true, 0), kRingSegmentBytes);
  EXPECT_EQ(ring_segment_bytes_for(true, 16), kRingMinSegmentBytes);
  EXPECT_EQ(ring_segment_bytes_for(true, size_t{64} << 20), kRingSegmentBytes);
  // These ranks share one host: the communicator agrees on 1 MiB, and keeps it.
  EXPECT_EQ(ring_segment_bytes(MPI_COMM_WORLD), kRingSegmentBytes);
  EXPECT_EQ(ring_segment_bytes(MPI_COMM_WORLD), kRingSegmentBytes);
}

}  // namespace
}  // namespace dlscale
