// The schema is declared once on each side: the C++ writer's field tables
// (suite/record/case_fields.cpp) and the Python reader's key lists
// (results/dlscale_report/stats.py, timeline.py). This test fails, naming both lists, when they disagree.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

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

}  // namespace
}  // namespace dlscale
