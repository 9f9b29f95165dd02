// Run-matrix parsing, expansion and validation: every bad input is a UsageError naming it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "drivers/reference/reference_driver.h"
#include "suite/case/resolved_case.h"
#include "suite/errors.h"
#include "suite/matrix/builtin_suites.h"
#include "suite/matrix/run_matrix.h"
#include "workloads/catalog.h"

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

/// Every check `dlscale run` makes before anything runs, in its order: the request, its cases
/// resolved (each workload built once), then devices and data.
void validate(const std::vector<CaseSpec>& cases, const Registry& drivers, int world_size) {
  validate_request(cases, drivers, world_size);
  check_devices_and_data(resolve_cases(cases, drivers, 1, std::vector<std::string>(world_size, "localhost")));
}

const Axis& axis(const std::string& name) {
  for (const Axis& a : axes()) {
    if (name == a.name) return a;
  }
  throw std::invalid_argument("no axis " + name);
}

/// The UsageError of giving `item` to axis `name` (as the command line and TOML do), or "".
std::string parse_error(const std::string& name, const std::string& item) {
  return usage_error_of([&] {
    MatrixOverrides o;
    o.set(axis(name), {item});
  });
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
  auto m = parse_matrix_toml(find_suite("smoke").toml, "smoke");
  MatrixOverrides o;
  o.set(axis("batch"), {"4"});
  o.set(axis("iterations"), {"2"});
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
  c.scaling = Scaling::kWeak;
  EXPECT_EQ(c.batch_per_rank(), 64);
  EXPECT_EQ(c.global_batch(), 256);
  c.scaling = Scaling::kStrong;
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
  c.device = DeviceType::kCpu;
  c.scaling = Scaling::kWeak;
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
              c.scaling = Scaling::kStrong;
              c.batch = 10;
              c.ranks = 3;
            }).find("does not divide by 3 ranks"),
            std::string::npos);
  // Names a typed field cannot hold are refused by the axis's parser, before any case exists.
  EXPECT_NE(parse_error("device", "tpu").find("unknown device 'tpu'"), std::string::npos);
  EXPECT_NE(parse_error("precision", "fp64").find("unknown precision 'fp64'"), std::string::npos);
  EXPECT_NE(parse_error("scaling", "weakest").find("unknown scaling mode 'weakest'"), std::string::npos);
  // A request nothing of which can run here is bad input; one runnable case makes it a sweep
  // that records the rest as unsupported.
  EXPECT_NE(bad([](CaseSpec& c) { c.device = DeviceType::kCuda; }).find("-d reference --device cuda: "),
            std::string::npos);
  // A precision the driver cannot compute is recorded `unsupported` when the case runs, not refused.
  EXPECT_EQ(bad([](CaseSpec& c) { c.precision = Precision::kBf16; }), "");
  CaseSpec gpu = good_case();
  gpu.device = DeviceType::kCuda;
  EXPECT_EQ(usage_error_of([&] { validate({good_case(), gpu}, drivers, 4); }), "");
  EXPECT_NE(bad([](CaseSpec& c) { c.iterations = 0; }).find("iterations must be positive"), std::string::npos);
  EXPECT_NE(usage_error_of([&] { validate({}, drivers, 4); }).find("nothing to run"), std::string::npos);
  EXPECT_NE(bad([](CaseSpec& c) { c.ranks = 5; }).find("this job has 4 ranks"), std::string::npos);
  EXPECT_NE(bad([](CaseSpec& c) { c.ranks = 0; }).find("--ranks 0"), std::string::npos);
}

// A driver of dlscale's that this build was configured without is no typo: in a request with
// other cases its cases are recorded unsupported; a request with nothing else is refused, saying
// why. A name dlscale has no driver of is unknown.
TEST(RunMatrix, ADriverThisBuildLacksIsUnsupportedNotUnknown) {
  Registry drivers;
  register_reference(drivers);
  const std::string why = "this build of dlscale has no onednn driver (it was configured without oneDNN)";
  drivers.add_missing("onednn", DeviceType::kCpu, why);
  CaseSpec lacking = good_case();
  lacking.driver = "onednn";
  EXPECT_EQ(usage_error_of([&] { validate({good_case(), lacking}, drivers, 4); }), "");
  EXPECT_EQ(usage_error_of([&] { validate({lacking}, drivers, 4); }), "-d onednn --device cpu: " + why);
  lacking.driver = "caffe";
  EXPECT_EQ(usage_error_of([&] {
              validate({good_case(), lacking}, drivers, 4);
            }),
            "unknown driver 'caffe' (this build has: reference)");
  // The stand-in supports nothing and is not among the compiled drivers.
  EXPECT_EQ(drivers.find("onednn"), nullptr);
  EXPECT_EQ(drivers.names(), std::vector<std::string>{"reference"});
  const Driver* onednn = drivers.find_or_missing("onednn");
  ASSERT_NE(onednn, nullptr);
  EXPECT_EQ(onednn->supports(make_workload("fcn5"), DeviceType::kCpu).reason, why);
  EXPECT_FALSE(onednn->supports_peak(PeakKind::kGemm, DeviceType::kCpu, Precision::kFp32).ok);
}

// Every driver dlscale has is either in this build or named as missing, once.
TEST(RunMatrix, EveryDriverIsCompiledOrMissing) {
  const Registry drivers = compiled_drivers();
  std::vector<std::string> all = drivers.names();
  for (const auto& d : drivers.missing()) all.emplace_back(d->name());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (std::vector<std::string>{"cuda", "kokkos", "libtorch", "onednn", "reference"}));
  for (const auto& d : drivers.missing()) {
    EXPECT_FALSE(d->device_available(d->default_device()).ok) << d->name();
    EXPECT_NE(d->device_available(d->default_device()).reason.find("configured without"), std::string::npos);
  }
}

TEST(RunMatrix, EveryBuiltinSuiteParsesAndValidates) {
  const Registry drivers = compiled_drivers();
  for (const BuiltinSuite& s : builtin_suites()) {
    const auto cases = expand(parse_matrix_toml(s.toml, s.name), 2);
    EXPECT_FALSE(cases.empty()) << s.name;
    const std::string problem = usage_error_of([&] { validate(cases, drivers, 2); });
    // The accuracy suites name real data under data/, relative to where dlscale runs (the
    // repository's top, not this test's folder): refused, naming it, where it is missing.
    const bool real_data =
        std::any_of(cases.begin(), cases.end(), [](const CaseSpec& c) { return c.data != "synthetic"; });
    if (real_data && problem.find("--data") != std::string::npos) {
      EXPECT_NE(problem.find("does not exist"), std::string::npos) << s.name << ": " << problem;
      continue;
    }
    // A suite none of whose drivers this build has is refused, saying which it lacks; one with
    // some of them runs those (the study in a build without LibTorch: its reference cases).
    const bool none_built =
        std::none_of(cases.begin(), cases.end(), [&](const CaseSpec& c) { return drivers.find(c.driver) != nullptr; });
    if (none_built) {
      EXPECT_NE(problem.find("configured without"), std::string::npos) << s.name << ": " << problem;
      continue;
    }
    // A suite that runs on GPUs only is refused, with the reason, where the device is missing;
    // mixed suites run their CPU cases and record the rest.
    const bool gpu_only =
        std::all_of(cases.begin(), cases.end(), [](const CaseSpec& c) { return c.device == DeviceType::kCuda; });
    if (gpu_only && !drivers.find_or_missing("libtorch")->device_available(DeviceType::kCuda).ok) {
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

/// What axis `name` prints for case `c`, as the results file's config and the command line do.
std::string value_of(const CaseSpec& c, const std::string& name) { return axis(name).print(c); }

TEST(RunMatrix, AccuracySuitesCarryThePapersSettings) {
  // Kabakus's Tables 2, 3, 5: Adam, 20 % validation, 10 repeats, batch/epochs/lr per network.
  struct Expected {
    std::string workload, data, batch, epochs, lr;
  };
  const std::vector<Expected> kabakus = {{"mnist_fnn", "mnist:data/mnist", "80", "20", "0.001"},
                                         {"vgg16_cifar", "cifar10:data/cifar10", "80", "20", "0.01"},
                                         {"imdb_lstm", "imdb:data/aclImdb", "500", "10", "0.01"}};
  const auto k = expand(parse_matrix_toml(find_suite("kabakus2020_accuracy").toml, "k"), 1);
  ASSERT_EQ(k.size(), kabakus.size());
  for (size_t i = 0; i < k.size(); ++i) {
    EXPECT_EQ(k[i].workload, kabakus[i].workload);
    EXPECT_EQ(k[i].data, kabakus[i].data);
    EXPECT_EQ(std::to_string(k[i].batch), kabakus[i].batch);
    EXPECT_EQ(value_of(k[i], "epochs"), kabakus[i].epochs);
    EXPECT_DOUBLE_EQ(std::stod(value_of(k[i], "lr")), std::stod(kabakus[i].lr));
    EXPECT_EQ(k[i].device, DeviceType::kCuda);
    EXPECT_EQ(value_of(k[i], "mode"), "accuracy");
    EXPECT_EQ(value_of(k[i], "optimizer"), "adam");
    EXPECT_DOUBLE_EQ(std::stod(value_of(k[i], "validation")), 0.2);
    EXPECT_EQ(value_of(k[i], "repeats"), "10");
  }
  // Shatnawi: time to a target accuracy over CPU threads 1-32 and one GPU, per dataset.
  const auto s = expand(parse_matrix_toml(find_suite("shatnawi2018_accuracy").toml, "s"), 1);
  EXPECT_EQ(s.size(), size_t{14});
  for (const CaseSpec& c : s) {
    const bool mnist = c.workload == "mnist_cnn";
    EXPECT_EQ(c.data, mnist ? "mnist:data/mnist" : "cifar10:data/cifar10");
    EXPECT_DOUBLE_EQ(std::stod(value_of(c, "target_accuracy")), mnist ? 0.95 : 0.65);
    EXPECT_EQ(value_of(c, "epochs"), mnist ? "12" : "30");
    EXPECT_EQ(value_of(c, "mode"), "accuracy");
    EXPECT_EQ(c.batch, 128);
  }
  // Nayak: Adam at 0.001, batch 128, 20 epochs, CPU and GPU.
  const auto n = expand(parse_matrix_toml(find_suite("nayak2019_accuracy").toml, "n"), 1);
  ASSERT_EQ(n.size(), size_t{2});
  for (const CaseSpec& c : n) {
    EXPECT_EQ(c.workload, "mnist_cnn_nayak");
    EXPECT_EQ(value_of(c, "optimizer"), "adam");
    EXPECT_DOUBLE_EQ(std::stod(value_of(c, "lr")), 0.001);
    EXPECT_EQ(value_of(c, "epochs"), "20");
    EXPECT_EQ(c.batch, 128);
  }
  // The timing suites stay timing runs.
  for (const char* name : {"kabakus2020", "shatnawi2018", "nayak2019"}) {
    for (const CaseSpec& c : expand(parse_matrix_toml(find_suite(name).toml, name), 1)) {
      EXPECT_EQ(value_of(c, "mode"), "timing") << name;
    }
  }
}

TEST(RunMatrix, UnknownSuiteIsAUsageError) {
  EXPECT_NE(usage_error_of([] { find_suite("nope"); }).find("unknown suite 'nope' (known: study"), std::string::npos);
}

TEST(RunMatrix, ExpandedCasesAreRecordedAsToml) {
  const auto cases = expand(parse_matrix_toml(find_suite("smoke").toml, "smoke"), 2);
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

TEST(RunMatrix, CommandLineQuotesWhatAShellWouldSplit) {
  // The line is printed for users to paste: a value with spaces or shell characters is one word.
  CaseSpec c = good_case();
  c.data = "mnist:/data/my digits/it's";
  EXPECT_NE(c.command().find(" --data 'mnist:/data/my digits/it'\\''s'"), std::string::npos) << c.command();
  EXPECT_EQ(shell_quote("mnist:/data/digits"), "mnist:/data/digits");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a;b"), "'a;b'");
}

TEST(RunMatrix, BucketsOf25MbByDefaultNamedInEveryKeyOfSeveralRanks) {
  const auto cases = expand(parse_matrix_toml("workload = \"fcn5\"\nranks = [1, 2]\n", "b.toml"), 2);
  ASSERT_EQ(cases.size(), 2u);
  for (const CaseSpec& c : cases) {
    EXPECT_EQ(c.bucket_mb, kDefaultBucketMb);
    EXPECT_TRUE(c.bucket_mb_defaulted);
  }
  // One rank reduces nothing by default: its key and recorded config leave the size out, as keys
  // did when one all-reduce after backward was the default; several ranks always name it, so that
  // --resume never takes such an older key's case for a bucketed one.
  EXPECT_EQ(cases[0].command().find("--bucket-mb"), std::string::npos) << cases[0].command();
  EXPECT_NE(cases[1].command().find(" --bucket-mb 25 --ranks 2"), std::string::npos) << cases[1].command();
  const std::string toml = cases_to_toml(cases);
  EXPECT_EQ(toml.find("bucket_mb"), toml.rfind("bucket_mb")) << "named for the 2-rank case only:\n" << toml;
  EXPECT_NE(toml.find("bucket_mb = 25"), std::string::npos) << toml;
  // Asked for, a size is named on one rank too, and is no longer the default.
  const auto given = expand(parse_matrix_toml("workload = \"fcn5\"\nranks = 1\nbucket_mb = [0, 25]\n", "b.toml"), 1);
  ASSERT_EQ(given.size(), 2u);
  EXPECT_FALSE(given[1].bucket_mb_defaulted);
  EXPECT_NE(given[0].command().find("--bucket-mb 0"), std::string::npos) << given[0].command();
  EXPECT_NE(given[1].command().find("--bucket-mb 25"), std::string::npos) << given[1].command();
}

TEST(RunMatrix, EveryAxisParsesWhatItPrints) {
  // A case through every axis's printer and back through its parser: the command line, the TOML
  // config and the case key all use these, so each must read what it writes.
  CaseSpec c = good_case();
  c.precision = Precision::kBf16;
  c.scaling = Scaling::kStrong;
  c.threads = 0;  // auto
  c.bucket_mb = 2.5;
  c.seed = 9007199254740993ULL;  // above 2^53: stays exact as text
  c.phases = true;
  c.mode = RunMode::kAccuracy;
  c.optimizer = OptimizerKind::kAdam;
  c.learning_rate = 3e-4;
  c.epochs = 20;
  c.validation = 0.25;
  c.repeats = 10;
  c.accumulate = 4;
  c.lr_scaling = LrScaling::kSqrt;
  c.lr_base_batch = 64;
  c.lr_warmup_epochs = 2.5;
  c.eval_every = 1000;
  // Every axis prints the case's value as text it parses back to the same value.
  auto round_trips = [&](const char* what) {
    SCOPED_TRACE(what);
    for (const Axis& a : axes()) {
      MatrixSpec m;
      a.set(m, {a.print(c)}, a.name);
      CaseSpec back;
      a.pick(m, 0, back);
      EXPECT_EQ(a.print(back), a.print(c)) << a.name;
    }
  };
  c.target_accuracy = std::nan("");
  round_trips("accuracy, no target");
  c.target_accuracy = 0.95;
  round_trips("accuracy with a target");
  c.mode = RunMode::kTiming;
  round_trips("timing");
}

TEST(RunMatrix, AccuracyAxesAndTheirDefaults) {
  const auto cases = expand(parse_matrix_toml("workload = \"mnist_fnn\"\nmode = \"accuracy\"\n"
                                              "optimizer = [\"sgd\", \"adam\"]\ntarget_accuracy = 0.9\n",
                                              "a.toml"),
                            2);
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].mode, RunMode::kAccuracy);
  // Each optimiser's own default rate when none is given.
  EXPECT_EQ(cases[0].learning_rate, 0.01);
  EXPECT_EQ(cases[1].learning_rate, 0.001);
  EXPECT_EQ(cases[1].epochs, 5);
  EXPECT_EQ(cases[1].validation, 0.2);
  EXPECT_EQ(cases[1].repeats, 1);
  EXPECT_EQ(cases[1].target_accuracy, 0.9);
  // An accuracy case's key names its mode and schedule, not the timing loop's warm-up and iterations.
  EXPECT_EQ(cases[1].command(),
            std::string("dlscale run -w mnist_fnn -d ") + default_driver_name() +
                " --device cpu --batch 64 --scaling weak --threads auto --bucket-mb 25 --ranks 2 --seed 42 "
                "--mode accuracy --optimizer adam --epochs 5 --validation 0.2 --target-accuracy 0.9");
  // A timing case's key is as before unless it names a non-default optimiser or rate.
  CaseSpec t = good_case();
  EXPECT_EQ(t.command().find("--optimizer"), std::string::npos);
  t.optimizer = OptimizerKind::kAdam;
  t.learning_rate = 0.001;
  EXPECT_NE(t.command().find("--optimizer adam"), std::string::npos);
  EXPECT_EQ(t.command().find("--lr"), std::string::npos);
  EXPECT_EQ(t.make_optimizer().kind, OptimizerKind::kAdam);
}

TEST(RunMatrix, AccuracyModeNeedsLabelledDataWithATestSet) {
  const Registry drivers = compiled_drivers();
  CaseSpec c = good_case();
  c.mode = RunMode::kAccuracy;
  EXPECT_NE(usage_error_of([&] { validate({c}, drivers, 4); }).find("--mode accuracy needs labelled data"),
            std::string::npos);
  // Refused from the spec alone, before any file is read.
  c.data = "mnist:/no/such/dir:test";
  EXPECT_NE(usage_error_of([&] { validate({c}, drivers, 4); }).find("is a test set: give the training set"),
            std::string::npos);
  c.data = "tokens:/no/such/file.h5";
  EXPECT_NE(usage_error_of([&] { validate({c}, drivers, 4); }).find("has no labelled test set"), std::string::npos);
}

TEST(RunMatrix, BadAxisItemsAreUsageErrorsNamingThem) {
  EXPECT_NE(parse_error("mode", "training").find("unknown mode 'training'"), std::string::npos);
  EXPECT_NE(parse_error("optimizer", "rmsprop").find("rmsprop"), std::string::npos);
  EXPECT_NE(parse_error("lr", "-0.1").find("--lr must be positive, got -0.1"), std::string::npos);
  EXPECT_NE(parse_error("lr", "0").find("--lr must be positive, got 0"), std::string::npos);
  EXPECT_NE(parse_error("validation", "1").find("--validation must be a fraction"), std::string::npos);
  EXPECT_NE(parse_error("validation", "0").find("--validation must be a fraction"), std::string::npos);
  EXPECT_NE(parse_error("target_accuracy", "1.5").find("--target-accuracy must be in (0, 1], got 1.5"),
            std::string::npos);
  EXPECT_NE(parse_error("target_accuracy", "0").find("--target-accuracy must be in (0, 1]"), std::string::npos);
  EXPECT_EQ(parse_error("target_accuracy", "1"), "");
  EXPECT_NE(parse_error("epochs", "0").find("epochs must be from 1"), std::string::npos);
  EXPECT_NE(parse_error("repeats", "0").find("repeats must be from 1"), std::string::npos);
  EXPECT_NE(parse_error("batch", "big").find("batch takes integers, got 'big'"), std::string::npos);
  EXPECT_NE(parse_error("batch", "-4").find("batch must be positive, got -4"), std::string::npos);
  // 2^32 + 1 iterations would wrap to 1 in a 32-bit int: refused instead.
  EXPECT_NE(parse_error("iterations", "4294967297").find("iterations must be"), std::string::npos);
  EXPECT_NE(parse_error("batch", "99999999999999999999").find("batch takes integers"), std::string::npos);
  EXPECT_NE(parse_error("threads", "0").find("--threads takes positive integers or auto, got '0'"), std::string::npos);
  EXPECT_NE(parse_error("bucket_mb", "nan").find("--bucket-mb takes numbers, got 'nan'"), std::string::npos);
  EXPECT_NE(parse_error("seed", "-1").find("seed must be zero or positive"), std::string::npos);
  EXPECT_NE(parse_error("driver", "").find("driver: an empty item"), std::string::npos);
  EXPECT_NE(usage_error_of([] {
              parse_matrix_toml("workload = \"fcn5\"\niterations = 4294967297\n", "w.toml");
            }).rfind("w.toml:2: iterations must be", 0),
            std::string::npos);
  // A bad value in a file is named by its key as written there, never by the command-line flag.
  for (const auto& [line, said] : std::vector<std::pair<std::string, std::string>>{
           {"bucket_mb = -1", "m.toml:2: bucket_mb must be 0 or more, got -1"},
           {"threads = 0", "m.toml:2: threads takes positive integers or auto, got '0'"},
           {"lr = 0.0", "m.toml:2: lr must be positive"},
           {"case_timeout = -2.0", "m.toml:2: case_timeout must be from 0"},
           {"precision = \"fp64\"", "m.toml:2: precision: unknown precision 'fp64'"}}) {
    const std::string error =
        usage_error_of([&] { parse_matrix_toml("workload = \"fcn5\"\n" + line + "\n", "m.toml"); });
    EXPECT_EQ(error.rfind(said, 0), 0u) << error;
    EXPECT_EQ(error.find("--"), std::string::npos) << error;
  }
}

TEST(RunMatrix, AccumulationMultipliesTheGlobalBatchAndTheRateFollowsIt) {
  CaseSpec c = good_case();
  c.batch = 32;
  c.ranks = 4;
  c.accumulate = 2;
  c.scaling = Scaling::kWeak;
  EXPECT_EQ(c.batch_per_rank(), 32);
  EXPECT_EQ(c.global_batch(), 32 * 4 * 2);
  c.scaling = Scaling::kStrong;
  EXPECT_EQ(c.batch_per_rank(), 4);  // 32 samples over 4 ranks x 2 micro-batches
  EXPECT_EQ(c.global_batch(), 32);
  // The rate scales by the global batch over the base batch: none, linear, sqrt.
  c.scaling = Scaling::kWeak;
  c.learning_rate = 0.01;
  c.lr_base_batch = 64;
  EXPECT_DOUBLE_EQ(c.scaled_learning_rate(), 0.01);
  c.lr_scaling = LrScaling::kLinear;
  EXPECT_DOUBLE_EQ(c.scaled_learning_rate(), 0.01 * 256 / 64);
  EXPECT_DOUBLE_EQ(c.make_optimizer().learning_rate, 0.04);
  c.lr_scaling = LrScaling::kSqrt;
  EXPECT_DOUBLE_EQ(c.scaled_learning_rate(), 0.01 * 2);
}

TEST(RunMatrix, AccumulationAndRateScalingRefuseWhatCannotRun) {
  const Registry drivers = compiled_drivers();
  CaseSpec c = good_case();
  c.scaling = Scaling::kStrong;
  c.batch = 12;
  c.ranks = 2;
  c.accumulate = 4;
  EXPECT_EQ(usage_error_of([&] { validate_request({c}, drivers, 2); }),
            "strong scaling: global batch 12 does not divide by 2 ranks x 4 micro-batches");
  c.accumulate = 3;
  EXPECT_EQ(usage_error_of([&] { validate_request({c}, drivers, 2); }), "");
  c.lr_scaling = LrScaling::kLinear;
  EXPECT_EQ(usage_error_of([&] { validate_request({c}, drivers, 2); }),
            "--lr-scaling linear needs --lr-base-batch: the global batch --lr is meant for");
  EXPECT_NE(parse_error("accumulate", "0"), "");
  EXPECT_NE(parse_error("lr_scaling", "cubic"), "");
  EXPECT_NE(parse_error("eval_every", "-1"), "");
}

}  // namespace
}  // namespace dlscale
