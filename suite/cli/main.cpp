// dlscale's entry point: MPI start-up, the command line (CLI11), dispatch to a subcommand.
#include <CLI/CLI.hpp>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "suite/cli/commands.h"
#include "suite/data/datasets.h"
#include "suite/errors.h"
#include "suite/record/provenance.h"
#include "suite/process/stop_signals.h"

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

int dispatch(const dlscale::MpiContext& mpi, int argc, char** argv) {
  using dlscale::RunArgs;
  CLI::App app{"dlscale: deep-learning training benchmarks on MPI ranks"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version",
                       fmt::format("dlscale {} (commit {})", dlscale::dlscale_version(), dlscale::git_commit()));

  RunArgs args;
  for (int i = 0; i < argc; ++i) args.command_line += (i ? " " : "") + shell_quote(argv[i]);
  std::string config, suite, out, format = "text", progress;

  CLI::App* run = app.add_subcommand("run", "run benchmark cases (default: the built-in study suite)");
  // One option per run-matrix axis (suite/matrix/run_matrix.cpp declares them), its values kept as
  // text for the axis's own parser.
  const std::vector<dlscale::Axis>& axes = dlscale::axes();
  std::vector<std::vector<std::string>> axis_items(axes.size());
  std::vector<CLI::Option*> axis_options;
  for (size_t k = 0; k < axes.size(); ++k) {
    const dlscale::Axis& a = axes[k];
    CLI::Option* o = a.flag_only ? run->add_flag(a.flag, a.help) : run->add_option(a.flag, axis_items[k], a.help);
    // One word per occurrence (lists are comma-separated): a stray word after a value is then
    // refused as itself instead of being taken as the option's second value.
    if (!a.flag_only) o->allow_extra_args(false);
    if (!a.list && !a.flag_only) o->expected(1);
    axis_options.push_back(o);
  }
  auto* o_out = run->add_option("--out", out, "results file (HDF5)");
  run->add_flag("--overwrite", args.overwrite, "replace an existing results file");
  run->add_flag("--resume", args.resume, "add the cases an existing results file lacks");
  auto* o_cfg = run->add_option("--config", config, "TOML run matrix");
  auto* o_suite = run->add_option("--suite", suite, "built-in run matrix (see `dlscale list`)");
  o_cfg->excludes(o_suite);
  run->add_option("--format", format,
                  "finished cases on stdout: text (one summary line) or json (one object per line)");
  auto* o_progress =
      run->add_option("--progress", progress,
                      "none, plain (a line every 10 s) or bar (one line rewritten in place); default: bar "
                      "when stderr is a terminal, else plain");
  run->add_flag("--dry-run", args.dry_run,
                "print the cases and an estimate of their duration, then exit without running or writing anything");
  auto* o_gflops = run->add_option("--assume-gflops", args.assume_gflops,
                                   "--dry-run: estimate with this training rate per rank instead of measuring one");

  auto* o_peak = run->add_option("--peak", args.peak,
                                 "peaks to compare each case with: measure (once per job, before the cases), skip, "
                                 "or a results file holding /peak (from dlscale peak)");
  auto* o_peak_s = run->add_option("--peak-seconds", args.peak_seconds, "seconds per measured peak (--peak measure)");
  std::string malloc_policy = "keep";
  run->add_option("--malloc", malloc_policy,
                  "keep (glibc keeps freed memory, as production CPU training does; the default) or system (the "
                  "allocator as the environment set it); docs/metrics.md");

  dlscale::AllreduceArgs ar;
  std::string ar_out;
  CLI::App* allreduce = app.add_subcommand("allreduce", "all-reduce microbenchmark (nccl-tests conventions)");
  allreduce->add_option("--backend", ar.backend, "mpi (CPU buffers) or nccl (GPU buffers)");
  auto* o_min = allreduce->add_option("--min-bytes", ar.min_bytes, "smallest size (powers of two up to --max-bytes)");
  auto* o_max = allreduce->add_option("--max-bytes", ar.max_bytes, "largest size");
  std::vector<std::string> ar_sizes;
  allreduce->add_option("--sizes", ar_sizes, "extra sizes in bytes, comma-separated (multiples of 4)");
  allreduce->add_option("--iterations", ar.iterations, "timed iterations per size");
  allreduce->add_option("--warmup", ar.warmup, "untimed iterations per size");
  auto* o_ar_out = allreduce->add_option("--out", ar_out, "results file (default results/allreduce.h5)");
  allreduce->add_flag("--overwrite", ar.overwrite, "replace an existing results file");
  allreduce->add_flag("--resume", ar.resume, "add to an existing results file");

  dlscale::PeakArgs pk;
  std::string pk_out;
  CLI::App* peak = app.add_subcommand("peak", "measure each backend's sustained GEMM rate and the memory bandwidth");
  peak->add_option("-d,--driver", pk.drivers, "drivers, comma-separated (default: every compiled one)");
  peak->add_option("--device", pk.devices, "cpu or cuda (default: each driver's own)");
  peak->add_option("--precision", pk.precisions, "fp32, tf32 or bf16, comma-separated (default: fp32,bf16)");
  peak->add_option("--threads", pk.threads, "backend threads per rank: positive integers or auto (default: auto)");
  peak->add_option("--seconds", pk.seconds, "seconds per measurement");
  auto* o_pk_out = peak->add_option("--out", pk_out, "results file (default results/peak.h5)");
  peak->add_flag("--overwrite", pk.overwrite, "replace an existing results file");

  CLI::App* list = app.add_subcommand("list", "list workloads, drivers and suites");
  std::string list_json;
  list->add_option("--json", list_json, "print one workload's layers as JSON (e.g. --json resnet50:width=32)");
  CLI::App* info = app.add_subcommand("info", "print the provenance a results file would record");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    if (mpi.rank() == 0) app.exit(e);
    return 0;
  } catch (const CLI::CallForVersion& e) {
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
    std::string problem;
    try {
      for (const std::string& item : ar_sizes) {
        for (const std::string& part : dlscale::split_at_commas(item)) {
          errno = 0;
          char* end = nullptr;
          const long long v = part.empty() || !std::isdigit(static_cast<unsigned char>(part[0]))
                                  ? -1
                                  : std::strtoll(part.c_str(), &end, 10);
          if (v < 0 || errno == ERANGE || end != part.c_str() + part.size()) {
            throw dlscale::UsageError(fmt::format("--sizes: '{}' in '{}' is not a size in bytes", part, item));
          }
          ar.sizes.push_back(v);
        }
      }
      if (o_ar_out->count() && ar_out.empty()) throw dlscale::UsageError("--out: an empty path");
    } catch (const dlscale::UsageError& e) {
      problem = e.what();
    }
    if (dlscale::report_usage_error(mpi.world(), problem)) return 2;
    if (!ar_out.empty()) ar.out = ar_out;
    return dlscale::allreduce_command(mpi, ar);
  }
  if (*info) return dlscale::info_command(mpi);
  if (*peak) {
    pk.command_line = args.command_line;
    if (o_pk_out->count() && pk_out.empty()) {
      dlscale::report_usage_error(mpi.world(), "--out: an empty path");
      return 2;
    }
    if (!pk_out.empty()) pk.out = pk_out;
    return dlscale::peak_command(mpi, pk);
  }

  std::string problem;
  try {
    for (size_t k = 0; k < axes.size(); ++k) {
      const dlscale::Axis& a = axes[k];
      if (axis_options[k]->count() == 0) continue;
      std::vector<std::string> items;
      if (a.flag_only) {
        items = {"true"};
      } else if (a.list) {
        // Split here, not by CLI11, which silently drops empty items ("8,,16").
        const std::string flag(a.flag, std::find(a.flag, a.flag + std::strlen(a.flag), ','));
        for (const std::string& item : axis_items[k]) {
          const std::vector<std::string> parts = a.split ? a.split(item) : dlscale::split_at_commas(item);
          for (const std::string& part : parts) {
            if (part.empty()) throw dlscale::UsageError(fmt::format("{}: an empty item in '{}'", flag, item));
            items.push_back(part);
          }
        }
      } else {
        items = axis_items[k];
      }
      args.overrides.set(a, items);
    }
    if (o_cfg->count()) args.config = config;
    if (o_suite->count()) args.suite = suite;
    if (o_out->count() && out.empty()) throw dlscale::UsageError("--out: an empty path");
    if (!out.empty()) args.out = out;
    args.format = dlscale::parse_output_format(format);
    args.malloc = dlscale::parse_malloc_policy(malloc_policy);
    args.progress = o_progress->count() ? dlscale::parse_progress_mode(progress) : dlscale::default_progress_mode();
    if (o_gflops->count() && !(args.assume_gflops > 0 && std::isfinite(args.assume_gflops))) {
      throw dlscale::UsageError(fmt::format("--assume-gflops must be a positive number, got {}", args.assume_gflops));
    }
    if (o_gflops->count() && !args.dry_run) throw dlscale::UsageError("--assume-gflops goes with --dry-run");
    if (o_peak_s->count() && o_peak->count() && args.peak != "measure") {
      throw dlscale::UsageError("--peak-seconds goes with --peak measure");
    }
  } catch (const dlscale::UsageError& e) {
    problem = e.what();
  }
  if (dlscale::report_usage_error(mpi.world(), problem)) return 2;
  return dlscale::run_command(mpi, args);
}

}  // namespace

int main(int argc, char** argv) {
  dlscale::MpiSession session(&argc, &argv);
  dlscale::install_stop_signals();
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
