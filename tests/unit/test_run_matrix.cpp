// Run-matrix parsing, expansion and validation: every bad input is a UsageError naming it.
#include <gtest/gtest.h>

#include <algorithm>

#include "suite/builtin_suites.h"
#include "suite/errors.h"
#include "suite/run_matrix.h"

namespace dlscale {
namespace {

Registry compiled_drivers() {
  Registry r;
  register_drivers(r);
  return r;
}

std::string usage_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(RunMatrix, ListFieldsExpandAsCartesianProduct) {
  const auto m = parse_matrix_toml(R"(
workload = ["fcn5", "mnist_fnn"]
driver = "libtorch"
batch = [8, 16, 32]
threads = [1, "auto"]
iterations = 7
)",
                                   "t.toml");
  ASSERT_EQ(m.size(), 1u);
  const auto cases = expand(m, 2);
  ASSERT_EQ(cases.size(), 2u * 3u * 2u);
  EXPECT_EQ(cases[0].workload, "fcn5");
  EXPECT_EQ(cases[0].batch, 8);
  EXPECT_EQ(cases[0].threads, 1);
  EXPECT_EQ(cases[1].threads, 0);  // auto
  EXPECT_EQ(cases[2].batch, 16);
  EXPECT_EQ(cases.back().workload, "mnist_fnn");
  EXPECT_EQ(cases.back().iterations, 7);
  EXPECT_EQ(cases.back().ranks, 2);
}

TEST(RunMatrix, WorkloadListsKeepMultiKeyOverridesTogether) {
  EXPECT_EQ(split_workload_list("fcn5:features=64,width=32,mnist_fnn,fcn8:width=8"),
            (std::vector<std::string>{"fcn5:features=64,width=32", "mnist_fnn", "fcn8:width=8"}));
  EXPECT_EQ(split_workload_list("fcn5"), (std::vector<std::string>{"fcn5"}));
}

TEST(RunMatrix, MatrixTablesInheritTopLevelKeys) {
  const auto m = parse_matrix_toml(R"(
iterations = 3
[[matrix]]
workload = "fcn5"
batch = 64
[[matrix]]
workload = "mnist_fnn"
batch = [80, 160]
)",
                                   "t.toml");
  const auto cases = expand(m, 1);
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0].batch, 64);
  EXPECT_EQ(cases[2].batch, 160);
  for (const auto& c : cases) EXPECT_EQ(c.iterations, 3);
}

TEST(RunMatrix, OverridesReplaceFieldsOfEveryMatrix) {
  auto m = parse_matrix_toml(find_suite("quick").toml, "quick");
  MatrixOverrides o;
  o.batches = std::vector<int64_t>{4};
  o.iterations = 2;
  for (auto& x : m) o.apply(x);
  for (const auto& c : expand(m, 1)) {
    EXPECT_EQ(c.batch, 4);
    EXPECT_EQ(c.iterations, 2);
  }
}

TEST(RunMatrix, RanksAxisGivesOneCasePerRankCount) {
  const auto cases = expand(parse_matrix_toml("workload = \"fcn5\"\nranks = [1, 2, 4]\n", "r.toml"), 4);
  ASSERT_EQ(cases.size(), 3u);
  EXPECT_EQ(cases[0].ranks, 1);
  EXPECT_EQ(cases[2].ranks, 4);
  EXPECT_EQ(expand(parse_matrix_toml("workload = \"fcn5\"\n", "r.toml"), 3).front().ranks, 3);  // default: all
}

TEST(RunMatrix, WeakAndStrongBatchArithmetic) {
  CaseSpec c;
  c.batch = 64;
  c.ranks = 4;
  c.scaling = "weak";
  EXPECT_EQ(c.batch_per_rank(), 64);
  EXPECT_EQ(c.global_batch(), 256);
  c.scaling = "strong";
  EXPECT_EQ(c.batch_per_rank(), 16);
  EXPECT_EQ(c.global_batch(), 64);
}

TEST(RunMatrix, MalformedTomlNamesTheLine) {
  const std::string e = usage_error_of([] { parse_matrix_toml("workload = \"fcn5\"\nbatch = [8, \n", "bad.toml"); });
  EXPECT_NE(e.find("bad.toml:"), std::string::npos) << e;
  const std::string e2 = usage_error_of([] { parse_matrix_toml("workload = \"fcn5\"\n\nbatch = = 3\n", "bad.toml"); });
  EXPECT_EQ(e2.rfind("bad.toml:3:", 0), 0u) << e2;
}

TEST(RunMatrix, UnknownKeyAndWrongTypeNameTheLine) {
  const std::string e = usage_error_of([] { parse_matrix_toml("workload = \"fcn5\"\nbatchsize = 3\n", "c.toml"); });
  EXPECT_EQ(e.rfind("c.toml:2: unknown key 'batchsize'", 0), 0u) << e;
  const std::string e2 = usage_error_of([] { parse_matrix_toml("batch = \"big\"\n", "c.toml"); });
  EXPECT_EQ(e2.rfind("c.toml:1: 'batch' must be an integer", 0), 0u) << e2;
}

CaseSpec good_case() {
  CaseSpec c;
  c.workload = "mnist_fnn";
  c.driver = "reference";  // compiled into every build
  c.device = "cpu";
  c.scaling = "weak";
  c.batch = 8;
  c.iterations = 2;
  return c;
}

TEST(RunMatrix, ValidateRejectsEachBadInput) {
  const Registry drivers = compiled_drivers();
  EXPECT_EQ(usage_error_of([&] { validate({good_case()}, drivers, 4); }), "");
  auto bad = [&](auto mutate) {
    CaseSpec c = good_case();
    mutate(c);
    return usage_error_of([&] { validate({c}, drivers, 4); });
  };
  EXPECT_NE(bad([](CaseSpec& c) { c.workload = "resnet9000"; }).find("unknown workload 'resnet9000'"),
            std::string::npos);
  EXPECT_NE(bad([](CaseSpec& c) { c.workload = "fcn5:depth=3"; }).find("no override 'depth'"), std::string::npos);
  EXPECT_NE(bad([](CaseSpec& c) { c.driver = "tensorflow"; }).find("unknown driver 'tensorflow'"), std::string::npos);
  EXPECT_NE(bad([](CaseSpec& c) { c.batch = 0; }).find("batch must be positive"), std::string::npos);
  EXPECT_NE(bad([](CaseSpec& c) { c.batch = -4; }).find("batch must be positive"), std::string::npos);
  EXPECT_NE(bad([](CaseSpec& c) {
              c.scaling = "strong";
              c.batch = 10;
              c.ranks = 3;
            }).find("does not divide by 3 ranks"),
            std::string::npos);
  EXPECT_NE(bad([](CaseSpec& c) { c.device = "tpu"; }).find("unknown device 'tpu'"), std::string::npos);
  EXPECT_NE(bad([](CaseSpec& c) { c.precision = "fp64"; }).find("unknown precision 'fp64'"), std::string::npos);
  // A request nothing of which can run here is bad input; one runnable case makes it a sweep
  // that records the rest as unsupported.
  EXPECT_NE(bad([](CaseSpec& c) { c.device = "cuda"; }).find("-d reference --device cuda: "), std::string::npos);
  EXPECT_NE(bad([](CaseSpec& c) { c.precision = "bf16"; }).find("--precision bf16: reference driver: only fp32"),
            std::string::npos);
  CaseSpec gpu = good_case();
  gpu.device = "cuda";
  EXPECT_EQ(usage_error_of([&] { validate({good_case(), gpu}, drivers, 4); }), "");
  EXPECT_NE(bad([](CaseSpec& c) { c.iterations = 0; }).find("iterations must be positive"), std::string::npos);
  EXPECT_NE(usage_error_of([&] { validate({}, drivers, 4); }).find("nothing to run"), std::string::npos);
  EXPECT_NE(bad([](CaseSpec& c) { c.ranks = 5; }).find("this job has 4 ranks"), std::string::npos);
  EXPECT_NE(bad([](CaseSpec& c) { c.ranks = 0; }).find("--ranks 0"), std::string::npos);
}

TEST(RunMatrix, EveryBuiltinSuiteParsesAndValidates) {
  const Registry drivers = compiled_drivers();
  if (drivers.find("libtorch") == nullptr) GTEST_SKIP() << "the built-in suites use the LibTorch driver";
  for (const BuiltinSuite& s : builtin_suites()) {
    const auto cases = expand(parse_matrix_toml(s.toml, s.name), 1);
    EXPECT_FALSE(cases.empty()) << s.name;
    const std::string problem = usage_error_of([&] { validate(cases, drivers, 1); });
    // A suite that runs on GPUs only is refused, with the reason, where the device is missing;
    // mixed suites run their CPU cases and record the rest.
    const bool gpu_only = std::all_of(cases.begin(), cases.end(), [](const CaseSpec& c) { return c.device == "cuda"; });
    if (gpu_only && !drivers.find("libtorch")->device_available(DeviceType::kCuda).ok) {
      EXPECT_NE(problem.find("--device cuda"), std::string::npos) << s.name << ": " << problem;
    } else {
      EXPECT_EQ(problem, "") << s.name;
    }
  }
  // The seeds' batch sizes: Shi et al. use 64 (FCN), 16 (CNN), 128 (RNN) on CPU.
  for (const CaseSpec& c : expand(parse_matrix_toml(find_suite("shi2016-cpu").toml, "shi"), 1)) {
    const int64_t expected = c.workload.rfind("fcn", 0) == 0 ? 64 : c.workload.rfind("lstm", 0) == 0 ? 128 : 16;
    EXPECT_EQ(c.batch, expected) << c.workload;
  }
}

TEST(RunMatrix, UnknownSuiteIsAUsageError) {
  EXPECT_NE(usage_error_of([] { find_suite("nope"); }).find("unknown suite 'nope' (known: quick"), std::string::npos);
}

TEST(RunMatrix, ExpandedCasesAreRecordedAsToml) {
  const auto cases = expand(parse_matrix_toml(find_suite("quick").toml, "quick"), 2);
  const std::string text = cases_to_toml(cases);
  size_t tables = 0;
  for (size_t p = text.find("[[case]]"); p != std::string::npos; p = text.find("[[case]]", p + 1)) ++tables;
  EXPECT_EQ(tables, cases.size());
  EXPECT_NE(text.find("workload = 'fcn8'"), std::string::npos) << text;
  EXPECT_NE(text.find("ranks = 2"), std::string::npos) << text;
}

TEST(RunMatrix, CommandLineRerunsTheCase) {
  CaseSpec c = good_case();
  c.threads = 2;
  c.phases = true;
  EXPECT_EQ(c.command(),
            "dlscale run -w mnist_fnn -d reference --device cpu --batch 8 --scaling weak --threads 2 --ranks 1 "
            "--warmup 0 --iterations 2 --seed 0 --phases");
}

}  // namespace
}  // namespace dlscale
