// `dlscale`'s command line: one CLI11 app with a subcommand per command, and the checks of each
// subcommand's values that CLI11 does not make.
#include "suite/cli/command_line.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>

#include "suite/errors.h"
#include "suite/record/provenance.h"

namespace dlscale {

namespace {

/// `dlscale run`'s command line: one option per run-matrix axis (suite/matrix/run_matrix.cpp
/// declares them), its values kept as text for the axis's own parser, and the run's own options.
struct RunCli {
  CLI::App* app = nullptr;
  std::vector<std::vector<std::string>> axis_items;
  std::vector<CLI::Option*> axis_options;
  std::string config, suite, out, format = "text", progress, malloc_policy = "keep", mllog;
  CLI::Option *out_option = nullptr, *config_option = nullptr, *suite_option = nullptr, *progress_option = nullptr,
              *gflops_option = nullptr, *peak_option = nullptr, *peak_seconds_option = nullptr, *mllog_option = nullptr;
};

/// What `--help` names an axis's values.
const char* value_name(const Axis& a) {
  switch (a.kind) {
    case TomlKind::kInteger:
      return "INT";
    case TomlKind::kNumber:
      return "NUMBER";
    case TomlKind::kBoolean:
      return "BOOL";
    case TomlKind::kIntegerOrAuto:
      return "INT|auto";
    case TomlKind::kString:
      break;
  }
  return "TEXT";
}

/// An axis's default as `--help` shows it: the value a matrix that names nothing gives a case;
/// "" where that depends on other axes or the job (the help text then says it).
std::string default_text(const Axis& a) {
  const MatrixSpec m;
  if (a.list && a.count(m) == 0) return "";
  CaseSpec c;
  a.pick(m, 0, c);
  const std::string text = a.print(c);
  return text == "nan" ? "" : text;  // no target accuracy
}

void add_run(CLI::App& app, RunCli& cli, RunArgs& args) {
  CLI::App* run = cli.app = app.add_subcommand("run", "run benchmark cases (default: the built-in study suite)");
  const std::vector<Axis>& axes = dlscale::axes();
  cli.axis_items.resize(axes.size());
  for (size_t k = 0; k < axes.size(); ++k) {
    const Axis& a = axes[k];
    CLI::Option* o = a.flag_only ? run->add_flag(a.flag, a.help) : run->add_option(a.flag, cli.axis_items[k], a.help);
    // One word per occurrence (lists are comma-separated): a stray word after a value is then
    // refused as itself instead of being taken as the option's second value.
    if (!a.flag_only) o->allow_extra_args(false)->type_name(value_name(a))->default_str(default_text(a));
    if (!a.list && !a.flag_only) o->expected(1);
    cli.axis_options.push_back(o);
  }
  cli.out_option = run->add_option("--out", cli.out, "results file (HDF5)");
  run->add_flag("--overwrite", args.overwrite, "replace an existing results file");
  run->add_flag("--resume", args.resume, "add the cases an existing results file lacks");
  cli.config_option = run->add_option("--config", cli.config, "TOML run matrix");
  cli.suite_option = run->add_option("--suite", cli.suite, "built-in run matrix (see `dlscale list`)");
  cli.config_option->excludes(cli.suite_option);
  run->add_option("--format", cli.format,
                  "finished cases on stdout: text (one summary line) or json (one object per line)");
  cli.progress_option =
      run->add_option("--progress", cli.progress,
                      "none, plain (a line every 10 s) or bar (one line rewritten in place); default: bar "
                      "when stderr is a terminal, else plain");
  run->add_flag("--dry-run", args.dry_run,
                "print the cases and an estimate of their duration, then exit without running or writing anything");
  cli.gflops_option = run->add_option("--assume-gflops", args.assume_gflops,
                                      "--dry-run: estimate with this training rate per rank instead of measuring one");
  cli.peak_option = run->add_option("--peak", args.peak,
                                    "peaks to compare each case with: measure (once per job, before the cases), skip, "
                                    "or a results file holding /peak (from dlscale peak)");
  cli.peak_seconds_option =
      run->add_option("--peak-seconds", args.peak_seconds, "seconds per measured peak (--peak measure)");
  cli.mllog_option = run->add_option(
      "--mllog", cli.mllog,
      "an existing directory: each accuracy case's repeats are also written there as MLPerf Training logs, one "
      "file per case and repeat");
  run->add_option("--malloc", cli.malloc_policy,
                  "keep (glibc keeps freed memory, as production CPU training does; the default) or system (the "
                  "allocator as the environment set it); docs/metrics.md");
}

/// The axes' items as their parsers take them: lists split at commas here, not by CLI11, which
/// silently drops empty items ("8,,16").
std::vector<std::string> axis_values(const Axis& a, const std::vector<std::string>& given) {
  if (a.flag_only) return {"true"};
  if (!a.list) return given;
  const std::string flag(a.flag, std::find(a.flag, a.flag + std::strlen(a.flag), ','));
  std::vector<std::string> items;
  for (const std::string& item : given) {
    for (const std::string& part : a.split ? a.split(item) : split_at_commas(item)) {
      if (part.empty()) throw UsageError(fmt::format("{}: an empty item in '{}'", flag, item));
      items.push_back(part);
    }
  }
  return items;
}

/// --out as given (every subcommand that writes a file has one): none when not given; throws
/// UsageError for an empty path.
std::optional<std::string> out_path(const CLI::Option* option, const std::string& value) {
  if (option->count() == 0) return std::nullopt;
  if (value.empty()) throw UsageError("--out: an empty path");
  return value;
}

/// Checks and completes `args` from what `cli` parsed; throws UsageError.
void finish_run(const RunCli& cli, RunArgs& args) {
  const std::vector<Axis>& axes = dlscale::axes();
  for (size_t k = 0; k < axes.size(); ++k) {
    if (cli.axis_options[k]->count() > 0) args.overrides.set(axes[k], axis_values(axes[k], cli.axis_items[k]));
  }
  if (cli.config_option->count()) args.config = cli.config;
  if (cli.suite_option->count()) args.suite = cli.suite;
  args.out = out_path(cli.out_option, cli.out);
  args.format = parse_output_format(cli.format);
  args.malloc = parse_malloc_policy(cli.malloc_policy);
  if (cli.mllog_option->count()) {
    // A directory, or a new one in an existing directory (created by the first log written).
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::path(cli.mllog).lexically_normal();
    if (!dir.has_filename()) dir = dir.parent_path();  // "logs/" names "logs"
    const std::filesystem::path parent = dir.has_parent_path() ? dir.parent_path() : std::filesystem::path(".");
    if (!std::filesystem::is_directory(dir, ec) &&
        (std::filesystem::exists(dir, ec) || !std::filesystem::is_directory(parent, ec))) {
      throw UsageError(
          fmt::format("--mllog {}: neither a directory nor a new one in an existing directory", cli.mllog));
    }
    args.mllog_dir = cli.mllog;
  }
  args.progress = cli.progress_option->count() ? parse_progress_mode(cli.progress) : default_progress_mode();
  if (cli.gflops_option->count() && !(args.assume_gflops > 0 && std::isfinite(args.assume_gflops))) {
    throw UsageError(fmt::format("--assume-gflops must be a positive number, got {}", args.assume_gflops));
  }
  if (cli.gflops_option->count() && !args.dry_run) throw UsageError("--assume-gflops goes with --dry-run");
  if (cli.peak_seconds_option->count() && cli.peak_option->count() && args.peak != "measure") {
    throw UsageError("--peak-seconds goes with --peak measure");
  }
}

/// `dlscale allreduce`'s command line.
struct AllreduceCli {
  CLI::App* app = nullptr;
  std::vector<std::string> sizes;
  std::string out;
  CLI::Option *min_option = nullptr, *max_option = nullptr, *out_option = nullptr;
};

void add_allreduce(CLI::App& app, AllreduceCli& cli, AllreduceArgs& ar) {
  CLI::App* allreduce = cli.app = app.add_subcommand("allreduce", "all-reduce microbenchmark (nccl-tests conventions)");
  allreduce->add_option("--backend", ar.backend, "mpi (CPU buffers) or nccl (GPU buffers)");
  cli.min_option =
      allreduce->add_option("--min-bytes", ar.min_bytes, "smallest size (powers of two up to --max-bytes)");
  cli.max_option = allreduce->add_option("--max-bytes", ar.max_bytes, "largest size");
  allreduce->add_option("--sizes", cli.sizes, "extra sizes in bytes, comma-separated (multiples of 4)");
  allreduce->add_option("--iterations", ar.iterations, "timed iterations per size");
  allreduce->add_option("--warmup", ar.warmup, "untimed iterations per size");
  cli.out_option = allreduce->add_option("--out", cli.out, "results file (default results/allreduce.h5)");
  allreduce->add_flag("--overwrite", ar.overwrite, "replace an existing results file");
  allreduce->add_flag("--resume", ar.resume, "add to an existing results file");
}

/// Checks and completes `ar` from what `cli` parsed; throws UsageError.
void finish_allreduce(const AllreduceCli& cli, AllreduceArgs& ar) {
  ar.min_max_given = cli.min_option->count() > 0 || cli.max_option->count() > 0;
  for (const std::string& item : cli.sizes) {
    for (const std::string& part : split_at_commas(item)) {
      errno = 0;
      char* end = nullptr;
      const long long v = part.empty() || !std::isdigit(static_cast<unsigned char>(part[0]))
                              ? -1
                              : std::strtoll(part.c_str(), &end, 10);
      if (v < 0 || errno == ERANGE || end != part.c_str() + part.size()) {
        throw UsageError(fmt::format("--sizes: '{}' in '{}' is not a size in bytes", part, item));
      }
      ar.sizes.push_back(v);
    }
  }
  ar.out = out_path(cli.out_option, cli.out);
}

/// `dlscale peak`'s command line.
struct PeakCli {
  CLI::App* app = nullptr;
  std::string out;
  CLI::Option* out_option = nullptr;
};

void add_peak(CLI::App& app, PeakCli& cli, PeakArgs& pk) {
  CLI::App* peak = cli.app =
      app.add_subcommand("peak", "measure each backend's sustained GEMM rate and the memory bandwidth");
  peak->add_option("-d,--driver", pk.drivers, "drivers, comma-separated (default: every compiled one)");
  peak->add_option("--device", pk.devices, "cpu or cuda (default: each driver's own)");
  peak->add_option("--precision", pk.precisions, "fp32, tf32 or bf16, comma-separated (default: fp32,bf16)");
  peak->add_option("--threads", pk.threads, "backend threads per rank: positive integers or auto (default: auto)");
  peak->add_option("--seconds", pk.seconds, "seconds per measurement");
  cli.out_option = peak->add_option("--out", cli.out, "results file (default results/peak.h5)");
  peak->add_flag("--overwrite", pk.overwrite, "replace an existing results file");
}

/// --blas-core, read before MPI starts (drivers/cpu/blas_core.h): declared here so that it is
/// checked, and accepted after any subcommand.
void add_blas_core(CLI::App& app, std::string& blas_core) {
  app.add_option("--blas-core", blas_core,
                 "auto (default): dlscale selects the BLAS kernels of this CPU's instruction set where the BLAS "
                 "fell back below it; keep: the BLAS's own choice")
      ->check(CLI::IsMember({"auto", "keep"}))
      ->capture_default_str();
}

}  // namespace

ParsedCommandLine parse_command_line(int argc, const char* const* argv) {
  CLI::App app{"dlscale: deep-learning training benchmarks on MPI ranks"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", fmt::format("dlscale {} (commit {})", dlscale_version(), git_commit()));
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + shell_quote(argv[i]);
  CommandLine c;
  RunCli run;
  add_run(app, run, c.run);
  AllreduceCli allreduce;
  add_allreduce(app, allreduce, c.allreduce);
  PeakCli peak;
  add_peak(app, peak, c.peak);
  CLI::App* list = app.add_subcommand("list", "list workloads, drivers and suites");
  list->add_option("--json", c.list_json, "print one workload's layers as JSON (e.g. --json resnet50:width=32)");
  CLI::App* info = app.add_subcommand("info", "print the provenance a results file would record");
  std::string blas_core = "auto";
  add_blas_core(app, blas_core);
  for (CLI::App* sub : app.get_subcommands({})) sub->fallthrough();
  ParsedCommandLine parsed;
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help or --version: their text
    std::ostringstream out, err;
    app.exit(e, out, err);
    parsed.print = out.str();
    return parsed;
  } catch (const CLI::ParseError& e) {
    parsed.error = e.what();
    return parsed;
  }
  c.run.command_line = c.allreduce.command_line = c.peak.command_line = command_line;
  try {
    if (*list) {
      c.subcommand = Subcommand::kList;
    } else if (*info) {
      c.subcommand = Subcommand::kInfo;
    } else if (*allreduce.app) {
      c.subcommand = Subcommand::kAllreduce;
      finish_allreduce(allreduce, c.allreduce);
    } else if (*peak.app) {
      c.subcommand = Subcommand::kPeak;
      c.peak.out = out_path(peak.out_option, peak.out);
    } else {
      finish_run(run, c.run);
    }
  } catch (const UsageError& e) {
    parsed.error = e.what();
    return parsed;
  }
  parsed.command.emplace(std::move(c));
  return parsed;
}

}  // namespace dlscale
