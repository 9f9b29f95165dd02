// dlscale-project's reading of a case (project/cli/case_inputs.h) on hand-made records: the
// buckets as dlscale cuts them, the measured ready fractions, the progress mode. The e2e test
// (tests/e2e/test_project.py) does the same on a real run's file.
#include "project/cli/case_inputs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "schema/case_record.h"
#include "schema/run_record.h"

namespace dlscale::project {
namespace {

TEST(ProjectCaseInputs, BucketsAsDlscaleCutsThem) {
  // One bucket after backward.
  std::vector<GradientBucket> one = estimated_buckets(52008, 0);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].bytes, 52008);
  EXPECT_EQ(one[0].ready_fraction, 1);
  // 13002 floats in buckets of 5000 (0.02 MB = 20000 bytes), cut from the buffer's end: the
  // buffer's last bucket first, ready once backward has produced the floats from its start to the
  // buffer's end; the remainder, the first layers', last.
  std::vector<GradientBucket> three = estimated_buckets(52008, 0.02);
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[0].bytes, 20000);
  EXPECT_EQ(three[1].bytes, 20000);
  EXPECT_EQ(three[2].bytes, 12008);
  EXPECT_DOUBLE_EQ(three[0].ready_fraction, 5000.0 / 13002);
  EXPECT_DOUBLE_EQ(three[1].ready_fraction, 10000.0 / 13002);
  EXPECT_DOUBLE_EQ(three[2].ready_fraction, 1);
  EXPECT_THROW(estimated_buckets(0, 1), std::invalid_argument);
  EXPECT_THROW(estimated_buckets(1e6, -1), std::invalid_argument);
  EXPECT_THROW(estimated_buckets(1e9, 1e-6), std::invalid_argument);  // 250 million buckets
}

TEST(ProjectCaseInputs, RecordedBucketsInTheOrderTheyBecomeReady) {
  // Sizes in buffer order; the last is ready first, after the share of the buffer from its start
  // to the end.
  const std::vector<GradientBucket> b = recorded_buckets({4000, 30000, 6000});
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].bytes, 6000);
  EXPECT_DOUBLE_EQ(b[0].ready_fraction, 0.15);
  EXPECT_EQ(b[1].bytes, 30000);
  EXPECT_DOUBLE_EQ(b[1].ready_fraction, 0.9);
  EXPECT_EQ(b[2].bytes, 4000);
  EXPECT_EQ(b[2].ready_fraction, 1);
  EXPECT_THROW(recorded_buckets({4000, 0}), std::invalid_argument);
  EXPECT_THROW(recorded_buckets({std::nan("")}), std::invalid_argument);
  EXPECT_THROW(recorded_buckets(std::vector<double>(5000, 1.0)), std::invalid_argument);
}

/// Two ranks, two iterations, three buckets; forward 10 ms and backward 20 ms everywhere.
CaseRecord bucketed_record(const std::vector<double>& starts) {
  CaseRecord r;
  r.ranks = 2;
  r.iterations = 2;
  r.buckets = 3;
  for (int i = 0; i < 4; ++i) r.phase_time_s.insert(r.phase_time_s.end(), {0.010, 0.020, 0.005, 0.001});
  r.bucket_start_s = starts;
  return r;
}

TEST(ProjectCaseInputs, MeasuredReadinessIsTheMedianNeverFalling) {
  // bucket_start_s[rank][iteration][bucket], the buffer's first bucket first; readiness order
  // is the last first. Bucket 2 starts 5 ms into backward (0.25) in every rank and iteration;
  // bucket 1 at 0.5, 0.5, 0.5, 1.0 (median 0.5); bucket 0 at 0.1 (before bucket 1: never falling).
  const CaseRecord r = bucketed_record({0.012, 0.020, 0.015,  //
                                        0.012, 0.020, 0.015,  //
                                        0.012, 0.020, 0.015,  //
                                        0.012, 0.030, 0.015});
  std::vector<GradientBucket> buckets = estimated_buckets(52008, 0.02);
  ASSERT_TRUE(apply_measured_readiness(r, buckets));
  EXPECT_DOUBLE_EQ(buckets[0].ready_fraction, 0.25);
  EXPECT_DOUBLE_EQ(buckets[1].ready_fraction, 0.5);
  EXPECT_DOUBLE_EQ(buckets[2].ready_fraction, 0.5);
  // Another bucket count than the file's: the estimate stays.
  std::vector<GradientBucket> one = estimated_buckets(52008, 0);
  EXPECT_FALSE(apply_measured_readiness(r, one));
  EXPECT_EQ(one[0].ready_fraction, 1);
}

/// A 2-rank bucketed case as a file from before the all-reduce mechanism was recorded holds it:
/// its outcome has neither allreduce_mechanism nor progress_thread, so the run's thread level
/// decides how its buckets progressed.
CaseRecord usable_record() {
  CaseRecord r = bucketed_record(std::vector<double>(12, 0.015));
  CaseDescription d;
  d.hosts = 1;
  d.scaling = "weak";
  d.grad_bytes = 52008;
  d.bucket_mb = 0.02;
  d.phases = true;
  CaseOutcome o;
  o.overlap = true;
  o.status = "ok";
  r.attrs = attrs_of(d, kCaseDescriptionFields);
  for (const auto& [name, value] : attrs_of(o, kCaseOutcomeFields)) {
    if (name != name_of<&CaseOutcome::allreduce_mechanism>(kCaseOutcomeFields) &&
        name != name_of<&CaseOutcome::progress_thread>(kCaseOutcomeFields)) {
      r.attrs.emplace_back(name, value);
    }
  }
  StepStatistics summary;
  summary.step_median_s = 0.040;
  r.summary = attrs_of(summary, kStepStatisticsFields);
  return r;
}

/// /system/software of a run whose MPI gave `level` ("": a file that does not say).
Attrs software(const char* level) {
  SoftwareRecord s;
  s.mpi_thread_level = level;
  Attrs a = attrs_of(s, kSoftwareFields);
  if (level[0] == 0) a.clear();
  return a;
}

TEST(ProjectCaseInputs, ProgressModeFromTheThreadLevel) {
  const CaseRecord r = usable_record();
  ASSERT_EQ(unusable_reason(r), "");
  for (const char* level : {"", "MPI_THREAD_SERIALIZED", "MPI_THREAD_MULTIPLE"}) {
    const CaseInputs c = case_inputs("0001", r, software(level));
    EXPECT_TRUE(c.progressed_by_thread) << level;
    EXPECT_TRUE(c.overlap) << level;
  }
  for (const char* level : {"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED"}) {
    const CaseInputs c = case_inputs("0001", r, software(level));
    EXPECT_FALSE(c.progressed_by_thread) << level;
    EXPECT_FALSE(c.overlap) << level;  // the buckets move in the wait after backward
  }
  const CaseInputs c = case_inputs("0001", r, software("MPI_THREAD_MULTIPLE"));
  EXPECT_EQ(c.samples.size(), 4u);
  EXPECT_EQ(c.samples[0].forward_s, 0.010);
  EXPECT_EQ(c.samples[0].update_s, 0.001);  // the all-reduce phase is what the simulation replaces
  EXPECT_TRUE(c.readiness_measured);
}

void set_attr(Attrs& attrs, const std::string& name, AttrValue value) {
  for (auto& [key, v] : attrs) {
    if (key == name) {
      v = std::move(value);
      return;
    }
  }
  attrs.emplace_back(name, std::move(value));
}

TEST(ProjectCaseInputs, SparseEmbeddingRowsGatheredUpToTheCrossover) {
  // An embedding of 1000 rows of 16 floats (64000 bytes) is the buffer's first bucket; each rank
  // touched a tenth of its rows; on 2 ranks the crossover share was 2 x 16 / (2 x 17).
  CaseRecord r = usable_record();
  r.bucket_bytes = {64000, 30000, 6000};
  set_attr(r.attrs, "sparse_embedding_rows_share", 0.1);
  set_attr(r.attrs, "sparse_embedding_crossover_share", 32.0 / 34.0);
  set_attr(r.attrs, "grad_compression", std::string("fp16"));
  const CaseInputs c = case_inputs("0001", r, software(""));
  ASSERT_TRUE(c.sparse.has_value());
  EXPECT_EQ(c.sparse->width, 16);
  EXPECT_EQ(c.sparse->block_bytes, 64000);
  EXPECT_EQ(c.sparse->rows_share, 0.1);
  // The embedding is ready last and goes in float32; the other buckets in 16 bits.
  ASSERT_EQ(c.buckets.size(), 3u);
  EXPECT_EQ(c.buckets[0].bytes, 3000);
  EXPECT_EQ(c.buckets[1].bytes, 15000);
  EXPECT_EQ(c.buckets[2].bytes, 64000);
  // Weak scaling: every rank's 100 rows of 17 floats (the index with them) from every rank, up to
  // the crossover 2 x 16 / (P x 17), which P = 32 passes: dense there.
  EXPECT_DOUBLE_EQ(gathered_rows_bytes(*c.sparse, 2, 2, false), 2 * 100 * 17 * 4);
  EXPECT_DOUBLE_EQ(gathered_rows_bytes(*c.sparse, 2, 16, false), 16 * 100 * 17 * 4);
  EXPECT_EQ(gathered_rows_bytes(*c.sparse, 2, 32, false), 0);
  // Strong scaling: a rank's batch, and its rows, 2/32 of the measured one's.
  EXPECT_DOUBLE_EQ(gathered_rows_bytes(*c.sparse, 2, 32, true), 32 * 100 * 2 / 32.0 * 17 * 4);
  // A case without an embedding's rows has none; a share without the crossover describes none.
  EXPECT_FALSE(case_inputs("0001", usable_record(), software("")).sparse.has_value());
  set_attr(r.attrs, "sparse_embedding_crossover_share", std::nan(""));
  EXPECT_THROW(case_inputs("0001", r, software("")), std::invalid_argument);
}

TEST(ProjectCaseInputs, ShardedParametersAllGatheredAtTheirOwnWidth) {
  // A sharded case on a driver with float64 parameters (memory rows: parameter bytes twice the
  // gradient bytes) and fp16 gradients: the reduce-scatter sends 16 bits, the all-gather 64.
  CaseRecord r = usable_record();
  r.bucket_bytes = {16000, 30000, 6008};
  set_attr(r.attrs, "sharding", std::string("optimizer"));
  set_attr(r.attrs, "grad_compression", std::string("fp16"));
  r.parameter_gather_s = std::vector<double>(4, 0.0004);
  r.memory.columns = {Column::of_ints("parameter_bytes", {104016, 104016}),
                      Column::of_ints("gradient_bytes", {52008, 52008})};
  ASSERT_EQ(unusable_reason(r), "");
  const CaseInputs c = case_inputs("0001", r, software(""));
  EXPECT_TRUE(c.sharded);
  ASSERT_EQ(c.buckets.size(), 3u);
  EXPECT_EQ(c.buckets[0].bytes, 3004);
  EXPECT_EQ(c.buckets[0].parameter_bytes, 12016);
  EXPECT_EQ(c.buckets[2].parameter_bytes, 32000);
  EXPECT_DOUBLE_EQ(c.samples[0].update_s, 0.0006);  // the update phase less its all-gather
  // An all-gather longer than its update phase, or none at all, is refused.
  r.parameter_gather_s[3] = 0.002;
  EXPECT_THROW(case_inputs("0001", r, software("")), std::invalid_argument);
  r.parameter_gather_s[3] = std::nan("");
  EXPECT_THROW(case_inputs("0001", r, software("")), std::invalid_argument);
  // Without the all-gather recorded apart it cannot be projected; one rank gathered nothing.
  r.parameter_gather_s.clear();
  EXPECT_NE(unusable_reason(r).find("without parameter_gather_s"), std::string::npos);
  r.ranks = 1;
  r.iterations = 4;
  r.bucket_start_s.clear();
  EXPECT_EQ(unusable_reason(r), "");
  EXPECT_DOUBLE_EQ(case_inputs("0001", r, software("")).samples[0].update_s, 0.001);
}

}  // namespace
}  // namespace dlscale::project
