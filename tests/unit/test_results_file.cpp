// HDF5 round trip through io/: what the writer stores reads back identically, foreign or
// missing files are refused with a clear message, a change reaches the file only when it is
// committed, and a second writer is refused while the first holds the file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "io/results_file.h"

namespace dlscale {
namespace {

class ResultsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/dlscale_io_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/r.h5";
  }
  void TearDown() override {
    std::remove(path_.c_str());
    std::remove((path_ + ".lock").c_str());
    std::remove(ResultsFile::temp_path(path_).c_str());
    std::remove((dir_ + "/plain.txt").c_str());
    rmdir(dir_.c_str());
  }
  std::string dir_, path_;
};

CaseRecord sample_case() {
  CaseRecord r;
  r.attrs = {{"workload", std::string("fcn5")},
             {"ranks", int64_t{2}},
             {"status", std::string("ok")},
             {"train_flops_per_step", 1.5e12},
             {"run", int64_t{0}}};
  r.ranks = 2;
  r.iterations = 3;
  r.iter_time_s = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};
  r.phase_time_s.assign(2 * 3 * 4, 0.025);
  r.loss = {2.3, 2.2, 2.1};
  r.memory.columns = {Column::of_ints("host_peak_rss_bytes", {100, 200}), Column::of_ints("device_peak_bytes", {0, 0})};
  r.summary = {{"step_median_s", 0.5}, {"samples_per_s", 32.0}};
  return r;
}

TEST_F(ResultsFileTest, RoundTrip) {
  {
    ResultsFile f = ResultsFile::create(path_, false);
    ResultsFile::Update u = f.update();
    u.write_root(
        {{"schema", std::string(kSchemaVersion)}, {"world_size", int64_t{2}}, {"config", std::string("a = 1\n")}});
    Table ranks{{Column::of_ints("rank", {0, 1}), Column::of_strings("host", {"n1", "nödé-2"}),
                 Column::of_strings("cpu_affinity", {"0-3", "4-7,12"})}};
    u.write_system(ranks, {{"mpi", std::string("Open MPI v4.1.4")}}, {{"OMP_NUM_THREADS", std::string("4")}});
    EXPECT_EQ(u.write_case(sample_case()), "0000");
    u.commit();
    ResultsFile::Update second = f.update();
    EXPECT_EQ(second.write_case(sample_case()), "0001");
    second.commit();
  }
  const ResultsFile f = ResultsFile::open(path_, false);
  const Attrs root = f.read_root();
  EXPECT_EQ(std::get<std::string>(attr(root, "schema")), "dlscale/4");
  EXPECT_EQ(std::get<int64_t>(attr(root, "world_size")), 2);
  const Table ranks = f.read_ranks();
  ASSERT_EQ(ranks.rows(), 2u);
  EXPECT_EQ(ranks.column("host").strings[1], "nödé-2");
  EXPECT_EQ(ranks.column("cpu_affinity").strings[1], "4-7,12");
  EXPECT_EQ(ranks.column("rank").ints[1], 1);
  EXPECT_EQ(std::get<std::string>(attr(f.read_attrs("system/software"), "mpi")), "Open MPI v4.1.4");
  ASSERT_EQ(f.case_names(), (std::vector<std::string>{"0000", "0001"}));
  const CaseRecord expected = sample_case(), got = f.read_case("0001");
  EXPECT_EQ(got.ranks, 2);
  EXPECT_EQ(got.iterations, 3);
  EXPECT_EQ(got.iter_time_s, expected.iter_time_s);
  EXPECT_EQ(got.phase_time_s, expected.phase_time_s);
  EXPECT_EQ(got.loss, expected.loss);
  EXPECT_EQ(got.memory.column("host_peak_rss_bytes").ints, (std::vector<int64_t>{100, 200}));
  EXPECT_EQ(std::get<std::string>(attr(got.attrs, "workload")), "fcn5");
  EXPECT_DOUBLE_EQ(std::get<double>(attr(got.attrs, "train_flops_per_step")), 1.5e12);
  EXPECT_DOUBLE_EQ(std::get<double>(attr(got.summary, "step_median_s")), 0.5);
  // Attributes come back in the order they were written.
  EXPECT_EQ(got.attrs.front().first, "workload");
  EXPECT_EQ(got.attrs.back().first, "run");
}

void write_new(const std::string& path, const std::string& schema, int cases) {
  ResultsFile f = ResultsFile::create(path, true);
  ResultsFile::Update u = f.update();
  u.write_root({{"schema", schema}});
  for (int i = 0; i < cases; ++i) u.write_case(sample_case());
  u.commit();
}

TEST_F(ResultsFileTest, CreateRefusesExistingFileWithoutOverwrite) {
  write_new(path_, kSchemaVersion, 0);
  EXPECT_THROW(ResultsFile::create(path_, false), h5::H5Error);
  EXPECT_NO_THROW(ResultsFile::create(path_, true));
}

TEST_F(ResultsFileTest, AChangeReachesTheFileOnlyWhenCommitted) {
  write_new(path_, kSchemaVersion, 1);
  {
    ResultsFile f = ResultsFile::open(path_, true);
    ResultsFile::Update u = f.update();
    u.write_case(sample_case());
    EXPECT_EQ(ResultsFile::open(path_, false).case_names(), (std::vector<std::string>{"0000"}));
  }  // dropped without commit
  EXPECT_EQ(ResultsFile::open(path_, false).case_names(), (std::vector<std::string>{"0000"}));
  EXPECT_NE(access(ResultsFile::temp_path(path_).c_str(), F_OK), 0) << "the uncommitted copy is removed";
  // --overwrite: the old file stays until the new one is committed.
  {
    ResultsFile f = ResultsFile::create(path_, true);
    EXPECT_EQ(ResultsFile::open(path_, false).case_names(), (std::vector<std::string>{"0000"}));
    ResultsFile::Update u = f.update();
    u.write_root({{"schema", std::string(kSchemaVersion)}});
    u.commit();
  }
  EXPECT_TRUE(ResultsFile::open(path_, false).case_names().empty());
  EXPECT_NE(access((path_ + ".lock").c_str(), F_OK), 0) << "the lock file goes with its holder";
}

TEST_F(ResultsFileTest, ASecondWriterIsRefusedWhileTheFirstHoldsTheFile) {
  write_new(path_, kSchemaVersion, 1);
  ResultsFile writer = ResultsFile::open(path_, true);
  for (const bool overwrite : {false, true}) {
    try {
      overwrite ? ResultsFile::create(path_, true) : ResultsFile::open(path_, true);
      FAIL() << "a second writer got the file";
    } catch (const FileBusy& e) {
      EXPECT_NE(std::string(e.what()).find("is being written by another dlscale (pid " + std::to_string(getpid())),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(ResultsFile::open(path_, false).case_names(), (std::vector<std::string>{"0000"})) << "readers are welcome";
}

TEST_F(ResultsFileTest, CheckCompleteAcceptsWhatWasCommittedAndNamesWhatIsMissing) {
  {
    ResultsFile f = ResultsFile::create(path_, false);
    ResultsFile::Update u = f.update();
    u.write_root({{"schema", std::string(kSchemaVersion)}, {"world_size", int64_t{2}}});
    u.write_system({{Column::of_ints("rank", {0, 1})}}, {}, {});
    CaseRecord c = sample_case();
    c.attrs.emplace_back("iterations", int64_t{3});
    c.attrs.emplace_back("case_key", std::string("dlscale run -w fcn5"));
    u.write_case(c);
    u.commit();
  }
  try {
    ResultsFile::open(path_, false).check_complete();
    FAIL() << "a file without its run record passed";
  } catch (const h5::H5Error& e) {
    EXPECT_NE(std::string(e.what()).find("no /runs record"), std::string::npos) << e.what();
  }
  {
    ResultsFile f = ResultsFile::open(path_, true);
    ResultsFile::Update u = f.update();
    const Table ranks{{Column::of_ints("rank", {0, 1}), Column::of_strings("host", {"a", "b"})}};
    EXPECT_EQ(u.append_run({{"command_line", std::string("dlscale run -w fcn5")}}, ranks,
                           {{"mpi", std::string("Open MPI v4.1.4")}}, {{"OMP_NUM_THREADS", std::string("2")}}),
              "0000");
    u.commit();
  }
  {
    // A run record is laid out as /system: its attributes, rank table, software, environment.
    const ResultsFile f = ResultsFile::open(path_, false);
    EXPECT_NO_THROW(f.check_complete());
    EXPECT_EQ(std::get<std::string>(attr(f.read_attrs("runs/0000"), "command_line")), "dlscale run -w fcn5");
    EXPECT_EQ(f.read_table("runs/0000/ranks").column("host").strings, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(std::get<std::string>(attr(f.read_attrs("runs/0000/software"), "mpi")), "Open MPI v4.1.4");
    EXPECT_EQ(std::get<std::string>(attr(f.read_attrs("runs/0000/environment"), "OMP_NUM_THREADS")), "2");
  }
  {
    ResultsFile f = ResultsFile::open(path_, true);
    ResultsFile::Update u = f.update();
    CaseRecord c = sample_case();
    c.attrs.emplace_back("iterations", int64_t{3});
    c.attrs.emplace_back("case_key", std::string("dlscale run -w fcn5 --batch 8"));
    std::get<int64_t>(c.attrs[4].second) = 1;  // "run": a record the file lacks
    u.write_case(c);
    u.commit();
  }
  try {
    ResultsFile::open(path_, false).check_complete();
    FAIL() << "a case naming a missing run passed";
  } catch (const h5::H5Error& e) {
    EXPECT_NE(std::string(e.what()).find("case 0001 names run 1, which /runs lacks"), std::string::npos) << e.what();
  }
  {
    // Back to a complete file: the check below is about the half-written case alone.
    ResultsFile f = ResultsFile::open(path_, true);
    ResultsFile::Update u = f.update();
    u.append_run({}, Table{{Column::of_ints("rank", {0, 1})}}, {}, {});
    u.commit();
  }
  EXPECT_NO_THROW(ResultsFile::open(path_, false).check_complete());
  {
    ResultsFile f = ResultsFile::open(path_, true);
    ResultsFile::Update u = f.update();
    CaseRecord half = sample_case();  // no case_key, no iterations: not what dlscale writes
    half.summary.clear();
    u.write_case(half);
    u.commit();
  }
  try {
    ResultsFile::open(path_, false).check_complete();
    FAIL() << "a case without its summary passed";
  } catch (const h5::H5Error& e) {
    EXPECT_NE(std::string(e.what()).find(path_ + ": not a complete dlscale file"), std::string::npos) << e.what();
  }
}

TEST_F(ResultsFileTest, OpenRefusesForeignFiles) {
  write_new(path_, "other/7", 0);
  try {
    ResultsFile::open(path_, false);
    FAIL() << "opened a file of another schema";
  } catch (const h5::H5Error& e) {
    EXPECT_NE(std::string(e.what()).find("schema 'other/7' is not supported"), std::string::npos) << e.what();
  }
  std::ofstream(dir_ + "/plain.txt") << "not hdf5";
  EXPECT_THROW(ResultsFile::open(dir_ + "/plain.txt", false), h5::H5Error);
  EXPECT_THROW(ResultsFile::open(dir_ + "/missing.h5", false), h5::H5Error);
}

TEST_F(ResultsFileTest, OlderSchemaIsReadButNotWritten) {
  {
    ResultsFile f = ResultsFile::create(path_, false);
    ResultsFile::Update u = f.update();
    u.write_root({{"schema", std::string("dlscale/1")}});
    u.commit();
  }
  EXPECT_NO_THROW(ResultsFile::open(path_, false));
  try {
    ResultsFile::open(path_, true);
    FAIL() << "opened a dlscale/1 file for writing";
  } catch (const h5::H5Error& e) {
    EXPECT_NE(std::string(e.what()).find("schema 'dlscale/1' is not supported for writing"), std::string::npos)
        << e.what();
  }
}

TEST_F(ResultsFileTest, OlderSchemaCasesReadAsTiming) {
  write_new(path_, "dlscale/2", 1);
  const CaseRecord r = ResultsFile::open(path_, false).read_case("0000");
  EXPECT_FALSE(r.accuracy());  // no mode attribute: a timing case
  EXPECT_EQ(r.iterations, 3);
}

CaseRecord accuracy_case(int repeats) {
  CaseRecord r;
  r.attrs = {{"workload", std::string("mnist_fnn")},
             {"ranks", int64_t{2}},
             {"mode", std::string("accuracy")},
             {"repeats", int64_t{repeats}},
             {"status", std::string("ok")},
             {"case_key", std::string("k")},
             {"run", int64_t{0}}};
  r.ranks = 2;
  for (int i = 0; i < repeats; ++i) {
    GroupRecord rep;
    rep.attrs = {{"seed", int64_t{42 + i}}, {"test_accuracy", 0.9 + 0.01 * i}, {"time_to_target_s", std::nan("")}};
    rep.tables.emplace_back("epochs", Table{{Column::of_ints("epoch", {1, 2}),
                                             Column::of_doubles("val_accuracy", {0.8, 0.85 + 0.01 * i})}});
    r.repeats.push_back(rep);
  }
  r.accuracy_summary = {{"test_accuracy_mean", 0.905}, {"targets_reached", int64_t{0}}};
  r.memory.columns = {Column::of_ints("host_peak_rss_bytes", {100, 200}), Column::of_ints("device_peak_bytes", {0, 0})};
  return r;
}

TEST_F(ResultsFileTest, AccuracyCasesKeepTheirRepeatsAndNoStepSamples) {
  {
    ResultsFile f = ResultsFile::create(path_, false);
    ResultsFile::Update u = f.update();
    u.write_root({{"schema", std::string(kSchemaVersion)}, {"world_size", int64_t{2}}});
    u.write_system(Table{{Column::of_ints("rank", {0, 1})}}, {}, {});
    u.append_run({}, Table{{Column::of_ints("rank", {0, 1})}}, {}, {});
    u.write_case(accuracy_case(2));
    u.commit();
  }
  const ResultsFile f = ResultsFile::open(path_, false);
  EXPECT_NO_THROW(f.check_complete());
  const CaseRecord r = f.read_case("0000");
  EXPECT_TRUE(r.accuracy());
  EXPECT_EQ(r.ranks, 2);
  EXPECT_TRUE(r.iter_time_s.empty());
  EXPECT_TRUE(r.summary.empty());
  ASSERT_EQ(r.repeats.size(), 2u);
  EXPECT_EQ(std::get<int64_t>(attr(r.repeats[1].attrs, "seed")), 43);
  EXPECT_TRUE(std::isnan(std::get<double>(attr(r.repeats[0].attrs, "time_to_target_s"))));
  EXPECT_EQ(r.repeats[1].tables.front().second.column("val_accuracy").doubles, (std::vector<double>{0.8, 0.86}));
  EXPECT_DOUBLE_EQ(std::get<double>(attr(r.accuracy_summary, "test_accuracy_mean")), 0.905);
  EXPECT_EQ(f.group_names("cases/0000/repeats"), (std::vector<std::string>{"00", "01"}));
}

TEST_F(ResultsFileTest, CheckCompleteWantsEveryRepeatOfAnAccuracyCase) {
  {
    ResultsFile f = ResultsFile::create(path_, false);
    ResultsFile::Update u = f.update();
    u.write_root({{"schema", std::string(kSchemaVersion)}, {"world_size", int64_t{2}}});
    u.write_system(Table{{Column::of_ints("rank", {0, 1})}}, {}, {});
    u.append_run({}, Table{{Column::of_ints("rank", {0, 1})}}, {}, {});
    CaseRecord r = accuracy_case(2);
    r.repeats.pop_back();  // says 2 repeats, holds 1
    u.write_case(r);
    u.commit();
  }
  try {
    ResultsFile::open(path_, false).check_complete();
    FAIL() << "a case missing a repeat passed";
  } catch (const h5::H5Error& e) {
    EXPECT_NE(std::string(e.what()).find("case 0000 is not whole"), std::string::npos) << e.what();
  }
}

TEST_F(ResultsFileTest, GroupTablesWithFloatColumnsRoundTrip) {
  ResultsFile f = ResultsFile::create(path_, false);
  ResultsFile::Update u = f.update();
  u.write_root({{"schema", std::string(kSchemaVersion)}});
  GroupRecord g;
  g.attrs = {{"source", std::string("test")}};
  g.tables.emplace_back("rates",
                        Table{{Column::of_strings("kind", {"gemm", "stream"}),
                               Column::of_doubles("rate", {1.5e11, std::nan("")}), Column::of_ints("rank", {0, 1})}});
  EXPECT_EQ(u.append_group("peak", g), "0000");
  u.commit();
  EXPECT_EQ(f.group_names("peak"), std::vector<std::string>{"0000"});
  EXPECT_TRUE(f.group_names("absent").empty());
  const Table t = f.read_table("peak/0000/rates");
  ASSERT_EQ(t.rows(), 2u);
  EXPECT_TRUE(t.column("rate").is_double);
  EXPECT_DOUBLE_EQ(t.column("rate").doubles[0], 1.5e11);
  EXPECT_TRUE(std::isnan(t.column("rate").doubles[1]));
  EXPECT_EQ(t.column("kind").strings[1], "stream");
  EXPECT_EQ(t.column("rank").ints[1], 1);
}

}  // namespace
}  // namespace dlscale
