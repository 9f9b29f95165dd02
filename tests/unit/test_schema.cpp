// The schema is declared once on each side: the C++ field tables (schema/, and
// suite/record/case_fields.cpp for the tables made from the harness's own types) and the Python
// reader's key lists (results/dlscale_report/schema.py, stats.py, timeline.py). This test fails,
// naming both lists, when they disagree; and it holds the field tables' reading to their writing.
#include <gtest/gtest.h>

#include <cmath>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "schema/accuracy_record.h"
#include "schema/allreduce_record.h"
#include "schema/case_record.h"
#include "schema/noise_record.h"
#include "schema/projection_record.h"
#include "schema/run_record.h"
#include "schema/simulation_record.h"
#include "suite/record/case_fields.h"

namespace dlscale {
namespace {

/// The words the Python expression `expr` prints (one per line), with `module` imported from
/// dlscale_report.
std::vector<std::string> python_keys(const std::string& expr, const std::string& module = "stats") {
  const std::string command = std::string("PYTHONPATH='") + DLSCALE_SOURCE_DIR + "/results' '" + DLSCALE_PYTHON +
                              "' -c 'from dlscale_report import " + module + "; print(\"\\n\".join(" + expr + "))'";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return {};
  std::string text;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe.get())) > 0;) text.append(buffer, n);
  std::vector<std::string> keys;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) keys.push_back(line);
  }
  return keys;
}

TEST(Schema, TheReaderRecomputesTheStepSummaryTheWriterWrites) {
  EXPECT_EQ(python_keys("stats.SUMMARY_KEYS"), step_summary_keys());
}

TEST(Schema, TheReaderKnowsThePhaseMediansTheWriterWrites) {
  EXPECT_EQ(python_keys("stats.PHASE_SUMMARY_KEYS"), phase_summary_keys());
}

TEST(Schema, TheReaderKnowsTheTimelineTheWriterWrites) {
  EXPECT_EQ(python_keys("timeline.DATASETS", "timeline"), timeline_dataset_names());
}

/// The names of a table of DatasetFields, in order.
template <class Datasets>
std::vector<std::string> dataset_names(const Datasets& datasets) {
  std::vector<std::string> names;
  for (const auto& d : datasets) names.emplace_back(d.name);
  return names;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

/// The first element of each pair of a Python sequence of (name, type) pairs.
std::vector<std::string> python_names(const std::string& pairs) {
  return python_keys("(k for k, _ in schema." + pairs + ")", "schema");
}

TEST(Schema, TheReaderKnowsTheRepeatsAndEpochsTheWriterWrites) {
  EXPECT_EQ(python_keys("schema.REPEAT_ATTRS", "schema"), field_names(kRepeatFields));
  EXPECT_EQ(python_keys("schema.EPOCH_COLUMNS", "schema"), field_names(kEpochColumns));
  EXPECT_EQ(python_keys("schema.ACCURACY_SUMMARY_KEYS", "schema"), field_names(kAccuracySummaryFields));
  EXPECT_EQ(python_keys("schema.NOISE_SCALE_ATTRS", "schema"), field_names(kNoiseScaleFields));
}

TEST(Schema, TheReaderKnowsTheAllreduceProjectionAndSimulationDatasets) {
  EXPECT_EQ(python_names("ALLREDUCE_DATASETS"), dataset_names(kAllreduceDatasets));
  EXPECT_EQ(python_keys("schema.PROJECTION_DATASETS", "schema"), dataset_names(kProjectionDatasets));
  EXPECT_EQ(
      python_keys("schema.SIMULATION_DATASETS + schema.SIMULATION_BUCKET_DATASETS + schema.SIMULATION_PATTERN_DATASETS",
                  "schema"),
      dataset_names(kSimulationDatasets));
}

TEST(Schema, EveryCaseAttributeTheReaderRequiresIsWritten) {
  std::vector<std::string> written = field_names(kCaseDescriptionFields);
  for (const std::string& name : field_names(kCaseOutcomeFields)) written.push_back(name);
  const std::vector<std::string> required = python_names("REQUIRED_CASE_ATTRS + schema.REQUIRED_OK_ATTRS");
  ASSERT_FALSE(required.empty());
  for (const std::string& name : required) EXPECT_TRUE(contains(written, name)) << name;
}

TEST(Schema, NoGroupNamesAnAttributeTwice) {
  std::vector<std::vector<std::string>> groups = {field_names(kCaseDescriptionFields),
                                                  field_names(kCaseAccuracyRequestFields),
                                                  field_names(kCaseOutcomeFields),
                                                  field_names(kStepStatisticsFields),
                                                  field_names(kRepeatFields),
                                                  field_names(kAccuracySummaryFields),
                                                  field_names(kAllreduceFields),
                                                  field_names(kProjectionFields),
                                                  field_names(kSimulationFields),
                                                  field_names(kRootFields),
                                                  field_names(kRunFields),
                                                  field_names(kSoftwareFields)};
  // The case group's three tables write into one set of attributes.
  for (size_t i = 1; i < 3; ++i) groups[0].insert(groups[0].end(), groups[i].begin(), groups[i].end());
  for (const std::vector<std::string>& names : groups) {
    std::vector<std::string> sorted = names;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << ::testing::PrintToString(names);
  }
}

TEST(Schema, ARecordReadsBackAsItWasWritten) {
  SimulationRecord written;
  written.platform = "measured-case-0001";
  written.steps = 20;
  written.overlap = true;
  written.measured_step_s = 0.25;
  SimulationRecord read;
  EXPECT_TRUE(read_fields(attrs_of(written, kSimulationFields), kSimulationFields, read).empty());
  EXPECT_EQ(read.platform, written.platform);
  EXPECT_EQ(read.steps, 20);
  EXPECT_TRUE(read.overlap);
  EXPECT_EQ(read.measured_step_s, 0.25);
  // A flag is an integer in the file, 0 or 1, as h5py and the Python reader see it.
  EXPECT_EQ(std::get<int64_t>(attr(attrs_of(written, kSimulationFields), "overlap")), 1);
}

TEST(Schema, ReadingNamesWhatAFileLacksAndRefusesAnotherType) {
  CaseOutcome outcome;
  const std::vector<std::string> missing =
      read_fields(Attrs{{"status", std::string("ok")}, {"wall_s", int64_t{3}}}, kCaseOutcomeFields, outcome);
  EXPECT_EQ(outcome.status, "ok");
  EXPECT_EQ(outcome.wall_s, 3.0);  // an integer widens to a number
  EXPECT_TRUE(contains(missing, "allreduce_mechanism")) << ::testing::PrintToString(missing);
  EXPECT_FALSE(contains(missing, "status")) << ::testing::PrintToString(missing);
  EXPECT_EQ(missing.size(), std::size(kCaseOutcomeFields) - 2);
  CaseDescription description;
  try {
    read_fields(Attrs{{"hosts", std::string("two")}}, kCaseDescriptionFields, description);
    FAIL() << "a text where an integer belongs was read";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "attribute hosts holds the text 'two', not an integer");
  }
}

TEST(Schema, AMemberIsFoundUnderItsName) {
  EXPECT_STREQ(name_of<&CaseOutcome::progress_thread>(kCaseOutcomeFields), "progress_thread");
  EXPECT_STREQ(name_of<&AllreduceRecord::for_case>(kAllreduceFields), "case");
  EXPECT_THROW(name_of<&CaseOutcome::status>(kRunFields), std::logic_error);
}

}  // namespace
}  // namespace dlscale
