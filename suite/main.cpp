// dlscale's entry point: MPI start-up, the command line (CLI11), dispatch to a subcommand.
#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include "suite/commands.h"
#include "suite/datasets.h"
#include "suite/errors.h"

namespace {

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=+./:,@%") ==
                        std::string::npos) {
    return s;
  }
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::vector<int> parse_threads(const std::vector<std::string>& items) {
  std::vector<int> out;
  for (const std::string& t : items) {
    if (t == "auto") {
      out.push_back(0);
      continue;
    }
    size_t used = 0;
    int v = -1;
    try {
      v = std::stoi(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != t.size() || v <= 0)
      throw dlscale::UsageError("--threads takes positive integers or auto, got '" + t + "'");
    out.push_back(v);
  }
  return out;
}

int dispatch(const dlscale::MpiContext& mpi, int argc, char** argv) {
  using dlscale::RunArgs;
  CLI::App app{"dlscale: deep-learning training benchmarks on MPI ranks"};
  app.require_subcommand(0, 1);

  RunArgs args;
  for (int i = 0; i < argc; ++i) args.command_line += (i ? " " : "") + shell_quote(argv[i]);
  std::vector<std::string> workloads, drivers, devices, precisions, scalings, threads, data;
  std::vector<int64_t> batches;
  std::vector<int> rank_counts;
  std::vector<double> bucket_mb;
  int warmup = 0, iterations = 0;
  uint64_t seed = 0;
  std::string config, suite, out;

  CLI::App* run = app.add_subcommand("run", "run benchmark cases (default: the built-in quick suite)");
  // Not split by CLI11: a workload's own overrides contain commas (fcn5:features=64,width=32).
  auto* o_w = run->add_option("-w,--workload", workloads, "workloads, comma-separated (see `dlscale list`)");
  auto* o_d = run->add_option("-d,--driver", drivers, "drivers, comma-separated")->delimiter(',');
  auto* o_dev =
      run->add_option("--device", devices, "cpu or cuda (default: the driver's own: cuda for -d cuda, else cpu)")
          ->delimiter(',');
  auto* o_prec =
      run->add_option("--precision", precisions, "fp32 (default), tf32 or bf16, comma-separated")->delimiter(',');
  auto* o_b = run->add_option("--batch", batches, "batch per rank (weak) or global batch (strong), comma-separated")
                  ->delimiter(',');
  auto* o_t =
      run->add_option("--threads", threads, "backend threads per rank, comma-separated, or auto")->delimiter(',');
  auto* o_s = run->add_option("--scaling", scalings, "weak or strong")->delimiter(',');
  auto* o_ranks = run->add_option("--ranks", rank_counts,
                                  "ranks per case, comma-separated: one job runs each case on world ranks 0..P-1")
                      ->delimiter(',');
  auto* o_bucket = run->add_option("--bucket-mb", bucket_mb,
                                   "gradient buckets of this many MB, reduced during backward where the driver "
                                   "allows (0: one all-reduce after backward)")
                       ->delimiter(',');
  auto* o_data = run->add_option("--data", data,
                                 std::string("training data: synthetic (default) or ") + dlscale::kDatasetSpecHelp);
  auto* o_wu = run->add_option("--warmup", warmup, "untimed iterations before timing");
  auto* o_it = run->add_option("--iterations", iterations, "timed iterations");
  auto* o_seed = run->add_option("--seed", seed, "seed of parameters and synthetic data");
  auto* o_ph = run->add_flag("--phases", "time forward, backward, all-reduce and update separately");
  run->add_option("--out", out, "results file (HDF5)");
  run->add_flag("--overwrite", args.overwrite, "replace an existing results file");
  run->add_flag("--resume", args.resume, "add the cases an existing results file lacks");
  auto* o_cfg = run->add_option("--config", config, "TOML run matrix");
  auto* o_suite = run->add_option("--suite", suite, "built-in run matrix (see `dlscale list`)");
  o_cfg->excludes(o_suite);

  dlscale::AllreduceArgs ar;
  std::string ar_out;
  CLI::App* allreduce = app.add_subcommand("allreduce", "all-reduce microbenchmark (nccl-tests conventions)");
  allreduce->add_option("--backend", ar.backend, "mpi (CPU buffers) or nccl (GPU buffers)");
  auto* o_min = allreduce->add_option("--min-bytes", ar.min_bytes, "smallest size (powers of two up to --max-bytes)");
  auto* o_max = allreduce->add_option("--max-bytes", ar.max_bytes, "largest size");
  allreduce->add_option("--sizes", ar.sizes, "extra sizes in bytes, comma-separated (multiples of 4)")->delimiter(',');
  allreduce->add_option("--iterations", ar.iterations, "timed iterations per size");
  allreduce->add_option("--warmup", ar.warmup, "untimed iterations per size");
  allreduce->add_option("--out", ar_out, "results file (default results/allreduce.h5)");
  allreduce->add_flag("--overwrite", ar.overwrite, "replace an existing results file");
  allreduce->add_flag("--resume", ar.resume, "add to an existing results file");

  CLI::App* list = app.add_subcommand("list", "list workloads, drivers and suites");
  std::string list_json;
  list->add_option("--json", list_json, "print one workload's layers as JSON (e.g. --json resnet50:width=32)");
  CLI::App* info = app.add_subcommand("info", "print the provenance a results file would record");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    if (mpi.rank() == 0) app.exit(e);
    return 0;
  } catch (const CLI::ParseError& e) {
    dlscale::report_usage_error(mpi.world(), e.what());
    return 2;
  }

  if (*list) return dlscale::list_command(mpi, list_json);
  if (*allreduce) {
    ar.command_line = args.command_line;
    ar.min_max_given = o_min->count() > 0 || o_max->count() > 0;
    if (!ar_out.empty()) ar.out = ar_out;
    return dlscale::allreduce_command(mpi, ar);
  }
  if (*info) return dlscale::info_command(mpi);

  std::string problem;
  try {
    auto& ov = args.overrides;
    if (o_w->count()) {
      ov.workloads.emplace();
      for (const std::string& item : workloads) {
        for (const std::string& w : dlscale::split_workload_list(item)) ov.workloads->push_back(w);
      }
    }
    if (o_d->count()) ov.drivers = drivers;
    if (o_dev->count()) ov.devices = devices;
    if (o_prec->count()) ov.precisions = precisions;
    if (o_b->count()) ov.batches = batches;
    if (o_t->count()) ov.threads = parse_threads(threads);
    if (o_s->count()) ov.scalings = scalings;
    if (o_data->count()) ov.data = data;
    if (o_ranks->count()) ov.ranks = rank_counts;
    if (o_bucket->count()) ov.bucket_mb = bucket_mb;
    if (o_wu->count()) ov.warmup = warmup;
    if (o_it->count()) ov.iterations = iterations;
    if (o_seed->count()) ov.seed = seed;
    if (o_ph->count()) ov.phases = true;
    if (o_cfg->count()) args.config = config;
    if (o_suite->count()) args.suite = suite;
    if (!out.empty()) args.out = out;
  } catch (const dlscale::UsageError& e) {
    problem = e.what();
  }
  if (dlscale::report_usage_error(mpi.world(), problem)) return 2;
  return dlscale::run_command(mpi, args);
}

}  // namespace

int main(int argc, char** argv) {
  dlscale::MpiSession session(&argc, &argv);
  try {
    dlscale::MpiContext mpi(MPI_COMM_WORLD);
    return dispatch(mpi, argc, argv);
  } catch (const std::exception& e) {
    // Unexpected failures outside a case: say what happened, then take the whole job down so
    // that no rank waits forever in a collective.
    fmt::print(stderr, "dlscale: fatal: {}\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}
