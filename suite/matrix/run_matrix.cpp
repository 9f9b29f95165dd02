#include "suite/matrix/run_matrix.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "suite/data/datasets.h"
#include "suite/errors.h"
#include "workloads/catalog.h"

namespace dlscale {

const char* scaling_name(Scaling s) { return s == Scaling::kStrong ? "strong" : "weak"; }

const char* device_name(DeviceType d) { return d == DeviceType::kCuda ? "cuda" : "cpu"; }

const char* run_mode_name(RunMode m) { return m == RunMode::kAccuracy ? "accuracy" : "timing"; }

const char* lr_scaling_name(LrScaling s) {
  switch (s) {
    case LrScaling::kLinear:
      return "linear";
    case LrScaling::kSqrt:
      return "sqrt";
    case LrScaling::kNone:
      break;
  }
  return "none";
}

double CaseSpec::scaled_learning_rate() const {
  if (lr_scaling == LrScaling::kNone || lr_base_batch <= 0) return learning_rate;
  const double ratio = static_cast<double>(global_batch()) / static_cast<double>(lr_base_batch);
  return learning_rate * (lr_scaling == LrScaling::kLinear ? ratio : std::sqrt(ratio));
}

double default_learning_rate(OptimizerKind k) { return k == OptimizerKind::kAdam ? 0.001 : 0.01; }

namespace {

[[noreturn]] void bad(const std::string& what) { throw UsageError(what); }

constexpr int kMaxThreads = 4096;

/// A whole decimal integer in [min, max]; `what` names the field in the message as the user
/// wrote it (the CLI flag, or the TOML key).
int64_t parse_integer(const std::string& text, const std::string& what, int64_t min, int64_t max) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  // strtoll would skip leading white space: " 8" is not an integer here.
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])) || end != text.c_str() + text.size() ||
      errno == ERANGE) {
    bad(fmt::format("{} takes integers, got '{}'", what, text));
  }
  if (v < min || v > max) bad(fmt::format("{} must be from {} to {}, got {}", what, min, max, v));
  return v;
}

double parse_number(const std::string& text, const std::string& what) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])) || end != text.c_str() + text.size() ||
      errno == ERANGE || !std::isfinite(v)) {
    bad(fmt::format("{} takes numbers, got '{}'", what, text));
  }
  return v;
}

std::string parse_name(const std::string& text, const std::string& what) {
  if (text.empty()) bad(fmt::format("{}: an empty item", what));
  return text;
}

/// A parser of drivers/driver.h (parse_precision, …) with its std::invalid_argument as bad input
/// of the run matrix, naming the field as the user wrote it.
template <typename T, T (*parse)(const std::string&)>
T parse_as_usage(const std::string& text, const std::string& what) {
  try {
    return parse(text);
  } catch (const std::invalid_argument& e) {
    bad(fmt::format("{}: {}", what, e.what()));
  }
}

DeviceType parse_device(const std::string& text, const std::string& what) {
  if (text == "cpu") return DeviceType::kCpu;
  if (text == "cuda") return DeviceType::kCuda;
  bad(fmt::format("{}: unknown device '{}' (expected cpu or cuda)", what, text));
}

Scaling parse_scaling(const std::string& text, const std::string& what) {
  if (text == "weak") return Scaling::kWeak;
  if (text == "strong") return Scaling::kStrong;
  bad(fmt::format("{}: unknown scaling mode '{}' (expected weak or strong)", what, text));
}

Placement parse_placement(const std::string& text, const std::string& what) {
  if (text == "packed") return Placement::kPacked;
  if (text == "spread") return Placement::kSpread;
  bad(fmt::format("{}: unknown placement '{}' (expected packed or spread)", what, text));
}

int parse_threads(const std::string& text, const std::string& what) {
  if (text == "auto") return 0;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0])) || end != text.c_str() + text.size() ||
      errno == ERANGE || v <= 0) {
    bad(fmt::format("{} takes positive integers or auto, got '{}'", what, text));
  }
  // More threads than any node has cores would only make the backends try to start them.
  if (v > kMaxThreads) bad(fmt::format("{} must be at most {}, got {}", what, kMaxThreads, v));
  return static_cast<int>(v);
}

int64_t parse_batch(const std::string& text, const std::string& what) {
  const int64_t v = parse_integer(text, what, INT64_MIN, INT64_MAX);
  if (v <= 0) bad(fmt::format("{} must be positive, got {}", what, v));
  // Per-rank sample counts, and their products with the ranks, stay far from 64-bit overflow.
  if (v > INT_MAX) bad(fmt::format("{} must be at most {}, got {}", what, INT_MAX, v));
  return v;
}

double parse_bucket_mb(const std::string& text, const std::string& what) {
  const double v = parse_number(text, what);
  if (v < 0) bad(fmt::format("{} must be 0 or more, got {}", what, text));
  return v;
}

RunMode parse_mode(const std::string& text, const std::string& what) {
  if (text == "timing") return RunMode::kTiming;
  if (text == "accuracy") return RunMode::kAccuracy;
  bad(fmt::format("{}: unknown mode '{}' (expected timing or accuracy)", what, text));
}

double parse_learning_rate(const std::string& text, const std::string& what) {
  const double v = parse_number(text, what);
  if (v <= 0) bad(fmt::format("{} must be positive, got {}", what, text));
  return v;
}

double parse_validation(const std::string& text, const std::string& what) {
  const double v = parse_number(text, what);
  // Both halves must keep samples: 0 leaves nothing to validate on, 1 nothing to train on.
  if (v <= 0 || v >= 1) bad(fmt::format("{} must be a fraction between 0 and 1 (exclusive), got {}", what, text));
  return v;
}

LrScaling parse_lr_scaling(const std::string& text, const std::string& what) {
  for (LrScaling s : {LrScaling::kNone, LrScaling::kLinear, LrScaling::kSqrt}) {
    if (text == lr_scaling_name(s)) return s;
  }
  bad(fmt::format("{}: unknown rule '{}' (expected none, linear or sqrt)", what, text));
}

/// "nan" (the printed form of "no target", as the results file records it) or an accuracy in (0, 1].
double parse_target_accuracy(const std::string& text, const std::string& what) {
  if (text == "nan" || text == "none") return std::numeric_limits<double>::quiet_NaN();
  const double v = parse_number(text, what);
  if (v <= 0 || v > 1) bad(fmt::format("{} must be in (0, 1], got {}", what, text));
  return v;
}

bool parse_bool(const std::string& text, const std::string& what) {
  if (text == "true") return true;
  if (text == "false") return false;
  bad(fmt::format("{} takes true or false, got '{}'", what, text));
}

using InCommand = std::function<bool(const CaseSpec&)>;

bool always(const CaseSpec&) { return true; }
/// Fields of one mode only: the other mode's case key leaves them out (they change nothing there).
bool timing_only(const CaseSpec& c) { return c.mode == RunMode::kTiming; }
bool accuracy_only(const CaseSpec& c) { return c.mode == RunMode::kAccuracy; }

/// What every axis has, list or not: its names, its place in the case key, its printer.
template <typename T>
Axis described_axis(const char* name, const char* flag, std::string help, TomlKind kind, bool list,
                    int command_position, T CaseSpec::*field, std::function<std::string(const T&)> print,
                    InCommand in_command) {
  Axis a;
  a.name = name;
  a.flag = flag;
  a.help = std::move(help);
  a.kind = kind;
  a.list = list;
  a.command_position = command_position;
  a.print = [field, print](const CaseSpec& c) { return print(c.*field); };
  a.in_command = std::move(in_command);
  return a;
}

/// Parses one item; the second argument names the field as the user wrote it (the CLI flag or
/// the TOML key), for the message of a bad item.
template <typename T>
using Parser = std::function<T(const std::string& item, const std::string& what)>;

/// A list axis over MatrixSpec::*values and CaseSpec::*field, with a parser and a printer.
template <typename T>
Axis list_axis(const char* name, const char* flag, std::string help, TomlKind kind, int command_position,
               std::vector<T> MatrixSpec::*values, T CaseSpec::*field, Parser<T> parse,
               std::function<std::string(const T&)> print, InCommand in_command = always) {
  Axis a = described_axis(name, flag, std::move(help), kind, true, command_position, field, print, in_command);
  a.set = [values, parse](MatrixSpec& m, const std::vector<std::string>& items, const std::string& what) {
    std::vector<T> parsed;
    for (const std::string& item : items) {
      parsed.push_back(parse(item, what));
      // The same value twice would run the same case twice under the same case key.
      for (size_t i = 0; i + 1 < parsed.size(); ++i) {
        if (parsed[i] == parsed.back()) bad(fmt::format("{}: '{}' is given twice", what, item));
      }
    }
    m.*values = parsed;
  };
  a.copy = [values](const MatrixSpec& from, MatrixSpec& to) { to.*values = from.*values; };
  a.count = [values](const MatrixSpec& m) { return (m.*values).size(); };
  a.pick = [values, field](const MatrixSpec& m, size_t i, CaseSpec& c) {
    if (i < (m.*values).size()) c.*field = (m.*values)[i];
  };
  return a;
}

/// A single-valued axis: one value for the whole matrix.
template <typename T>
Axis scalar_axis(const char* name, const char* flag, std::string help, TomlKind kind, int command_position,
                 T MatrixSpec::*value, T CaseSpec::*field, Parser<T> parse, std::function<std::string(const T&)> print,
                 InCommand in_command = always) {
  Axis a = described_axis(name, flag, std::move(help), kind, false, command_position, field, print, in_command);
  a.set = [value, parse](MatrixSpec& m, const std::vector<std::string>& items, const std::string& what) {
    if (items.size() != 1) bad(fmt::format("{} takes one value, got {}", what, items.size()));
    m.*value = parse(items.front(), what);
  };
  a.copy = [value](const MatrixSpec& from, MatrixSpec& to) { to.*value = from.*value; };
  a.count = [](const MatrixSpec&) { return size_t{1}; };
  a.pick = [value, field](const MatrixSpec& m, size_t, CaseSpec& c) { c.*field = m.*value; };
  return a;
}

std::string text(const std::string& s) { return s; }
template <typename T>
std::string number(const T& v) {
  return fmt::format("{}", v);
}

}  // namespace

const std::vector<Axis>& axes() {
  // Expansion order; command_position orders the case key (dlscale run -w … -d … --device …).
  static const std::vector<Axis> table = [] {
    std::vector<Axis> t;
    t.push_back(list_axis<std::string>("workload", "-w,--workload", "workloads, comma-separated (see `dlscale list`)",
                                       TomlKind::kString, 0, &MatrixSpec::workloads, &CaseSpec::workload, parse_name,
                                       text));
    t.back().split = split_workload_list;  // a workload's own overrides contain commas
    t.push_back(list_axis<std::string>("driver", "-d,--driver", "drivers, comma-separated", TomlKind::kString, 1,
                                       &MatrixSpec::drivers, &CaseSpec::driver, parse_name, text));
    t.push_back(list_axis<DeviceType>("device", "--device",
                                      "cpu or cuda (default: the driver's own: cuda for -d cuda, else cpu)",
                                      TomlKind::kString, 2, &MatrixSpec::devices, &CaseSpec::device, parse_device,
                                      [](const DeviceType& d) { return std::string(device_name(d)); }));
    t.push_back(list_axis<Precision>(
        "precision", "--precision", "fp32, tf32 or bf16, comma-separated", TomlKind::kString, 5,
        &MatrixSpec::precisions, &CaseSpec::precision, parse_as_usage<Precision, parse_precision>,
        [](const Precision& p) { return std::string(precision_name(p)); },
        [](const CaseSpec& c) { return c.precision != Precision::kFp32; }));
    t.push_back(list_axis<Denormals>(
        "denormals", "--denormals",
        "flush or ieee, comma-separated: how the CPU threads treat float denormals, the same for every "
        "driver (default: flush on the CPU, ieee on GPUs; docs/metrics.md)",
        TomlKind::kString, 14, &MatrixSpec::denormals, &CaseSpec::denormals, parse_as_usage<Denormals, parse_denormals>,
        [](const Denormals& d) { return std::string(denormals_name(d)); },
        [](const CaseSpec& c) { return c.denormals != default_denormals(c.device); }));
    t.push_back(list_axis<Scaling>("scaling", "--scaling", "weak or strong", TomlKind::kString, 4,
                                   &MatrixSpec::scalings, &CaseSpec::scaling, parse_scaling,
                                   [](const Scaling& s) { return std::string(scaling_name(s)); }));
    t.push_back(list_axis<int64_t>(
        "batch", "--batch", "batch per rank (weak) or global batch (strong), comma-separated", TomlKind::kInteger, 3,
        &MatrixSpec::batches, &CaseSpec::batch, parse_batch, number<int64_t>));
    t.push_back(list_axis<int>("threads", "--threads", "backend threads per rank, comma-separated, or auto",
                               TomlKind::kIntegerOrAuto, 6, &MatrixSpec::threads, &CaseSpec::threads, parse_threads,
                               [](const int& n) { return n > 0 ? std::to_string(n) : std::string("auto"); }));
    t.push_back(list_axis<std::string>("data", "--data", std::string("training data: synthetic or ") + kDatasetSpecHelp,
                                       TomlKind::kString, 7, &MatrixSpec::data, &CaseSpec::data, parse_name, text,
                                       [](const CaseSpec& c) { return c.data != "synthetic"; }));
    // One dataset per --data (a folder name may hold a comma); TOML lists give several.
    t.back().split = [](const std::string& item) { return std::vector<std::string>{item}; };
    t.push_back(list_axis<int>(
        "ranks", "--ranks", "ranks per case, comma-separated: one job runs each case on P of its ranks (--placement)",
        TomlKind::kInteger, 9, &MatrixSpec::ranks, &CaseSpec::ranks,
        [](const std::string& s, const std::string& what) {
          return static_cast<int>(parse_integer(s, what, 1, INT_MAX));
        },
        number<int>));
    t.push_back(list_axis<Placement>(
        "placement", "--placement",
        "which ranks a case of P takes: packed (fill a host before the next) or spread (one rank per "
        "host first), comma-separated",
        TomlKind::kString, 24, &MatrixSpec::placements, &CaseSpec::placement, parse_placement,
        [](const Placement& p) { return std::string(placement_name(p)); },
        [](const CaseSpec& c) { return c.placement != Placement::kPacked; }));
    // Named in every key of more than one rank: keys written while one all-reduce after backward
    // was the default left it out, and --resume must not take those cases for today's default.
    t.push_back(list_axis<double>(
        "bucket_mb", "--bucket-mb",
        "gradient buckets of this many MB, reduced during backward (default 25, as PyTorch DDP; one rank reduces "
        "nothing unless given); 0: one all-reduce after backward",
        TomlKind::kNumber, 8, &MatrixSpec::bucket_mb, &CaseSpec::bucket_mb, parse_bucket_mb, number<double>,
        [](const CaseSpec& c) { return c.ranks > 1 || !c.bucket_mb_defaulted; }));
    t.back().defaulted = [](const CaseSpec& c) { return c.ranks == 1 && c.bucket_mb_defaulted; };
    t.push_back(list_axis<GradCompression>(
        "grad_compression", "--grad-compression",
        "none, fp16 or bf16, comma-separated: gradients divided by the ranks and summed in that format, half the "
        "bytes, as DDP's compression hooks (default none)",
        TomlKind::kString, 30, &MatrixSpec::grad_compressions, &CaseSpec::grad_compression,
        parse_as_usage<GradCompression, parse_grad_compression>,
        [](const GradCompression& c) { return std::string(grad_compression_name(c)); },
        [](const CaseSpec& c) { return c.grad_compression != GradCompression::kNone; }));
    t.push_back(list_axis<Hierarchy>(
        "allreduce_hierarchy", "--allreduce-hierarchy",
        "auto, flat or host, comma-separated: host reduces within each host, rings the hosts' leaders and "
        "broadcasts back; auto (the default) does so where a case spans hosts with several ranks on one",
        TomlKind::kString, 31, &MatrixSpec::allreduce_hierarchies, &CaseSpec::allreduce_hierarchy,
        parse_as_usage<Hierarchy, parse_hierarchy>, [](const Hierarchy& h) { return std::string(hierarchy_name(h)); },
        [](const CaseSpec& c) { return c.allreduce_hierarchy != Hierarchy::kAuto; }));
    t.push_back(list_axis<Sharding>(
        "sharding", "--sharding",
        "none or optimizer, comma-separated: optimizer shards the optimiser's state over the ranks (ZeRO stage 1): "
        "gradients reduce-scattered, each rank updating its share, parameters all-gathered (default none)",
        TomlKind::kString, 33, &MatrixSpec::shardings, &CaseSpec::sharding, parse_as_usage<Sharding, parse_sharding>,
        [](const Sharding& s) { return std::string(sharding_name(s)); },
        [](const CaseSpec& c) { return c.sharding != Sharding::kNone; }));
    t.push_back(scalar_axis<int>(
        "warmup", "--warmup", "untimed iterations before timing", TomlKind::kInteger, 10, &MatrixSpec::warmup,
        &CaseSpec::warmup,
        [](const std::string& s, const std::string& what) {
          return static_cast<int>(parse_integer(s, what, 0, INT_MAX));
        },
        number<int>, timing_only));
    t.push_back(scalar_axis<int>(
        "iterations", "--iterations", "timed iterations", TomlKind::kInteger, 11, &MatrixSpec::iterations,
        &CaseSpec::iterations,
        [](const std::string& s, const std::string& what) {
          return static_cast<int>(parse_integer(s, what, 1, INT_MAX));
        },
        number<int>, timing_only));
    t.push_back(scalar_axis<double>(
        "case_timeout", "--case-timeout",
        "seconds a case may train before it is recorded `timeout` (0: no limit; docs/running.md)", TomlKind::kNumber,
        15, &MatrixSpec::case_timeout, &CaseSpec::case_timeout,
        [](const std::string& s, const std::string& what) {
          const double v = parse_number(s, what);
          if (v < 0 || v > 1e7) bad(fmt::format("{} must be from 0 to 1e7 seconds, got {}", what, s));
          return v;
        },
        number<double>, [](const CaseSpec&) { return false; }));  // a limit, not what the case measures
    t.push_back(scalar_axis<uint64_t>(
        "seed", "--seed", "seed of parameters and synthetic data", TomlKind::kInteger, 12, &MatrixSpec::seed,
        &CaseSpec::seed,
        [](const std::string& s, const std::string& what) {
          if (!s.empty() && s[0] == '-') bad(fmt::format("{} must be zero or positive, got {}", what, s));
          return static_cast<uint64_t>(parse_integer(s, what, 0, INT64_MAX));
        },
        number<uint64_t>));
    t.push_back(scalar_axis<bool>(
        "phases", "--phases", "time forward, backward, all-reduce and update separately", TomlKind::kBoolean, 13,
        &MatrixSpec::phases, &CaseSpec::phases, parse_bool,
        [](const bool& b) { return std::string(b ? "true" : "false"); }, [](const CaseSpec& c) { return c.phases; }));
    t.back().flag_only = true;
    t.push_back(scalar_axis<bool>(
        "sparse_embedding", "--sparse-embedding",
        "sum an embedding's gradient as the rows the ranks touched (an allgather), or dense where that is "
        "smaller, in the buckets of the MPI all-reduce",
        TomlKind::kBoolean, 32, &MatrixSpec::sparse_embedding, &CaseSpec::sparse_embedding, parse_bool,
        [](const bool& b) { return std::string(b ? "true" : "false"); },
        [](const CaseSpec& c) { return c.sparse_embedding; }));
    t.back().flag_only = true;
    t.push_back(scalar_axis<bool>(
        "allow_emulation", "--allow-emulation",
        "run a precision that the driver's library only emulates on this CPU (bf16 without bf16 "
        "instructions), recorded as emulated; without it such cases are `unsupported`",
        TomlKind::kBoolean, 16, &MatrixSpec::allow_emulation, &CaseSpec::allow_emulation, parse_bool,
        [](const bool& b) { return std::string(b ? "true" : "false"); },
        [](const CaseSpec& c) { return c.allow_emulation; }));
    t.back().flag_only = true;
    t.push_back(scalar_axis<RunMode>(
        "mode", "--mode",
        "timing (seconds per training step) or accuracy (epochs of real data: accuracy, training, testing and "
        "time-to-accuracy; docs/running.md)",
        TomlKind::kString, 17, &MatrixSpec::mode, &CaseSpec::mode, parse_mode,
        [](const RunMode& m) { return std::string(run_mode_name(m)); }, accuracy_only));
    t.push_back(list_axis<OptimizerKind>(
        "optimizer", "--optimizer", "sgd or adam, comma-separated; timing mode times its update too", TomlKind::kString,
        18, &MatrixSpec::optimizers, &CaseSpec::optimizer, parse_as_usage<OptimizerKind, parse_optimizer>,
        [](const OptimizerKind& k) { return std::string(optimizer_name(k)); },
        [](const CaseSpec& c) { return c.optimizer != OptimizerKind::kSgd; }));
    t.push_back(list_axis<double>(
        "lr", "--lr", "learning rates, comma-separated (default: 0.01 for sgd, 0.001 for adam)", TomlKind::kNumber, 19,
        &MatrixSpec::learning_rates, &CaseSpec::learning_rate, parse_learning_rate, number<double>,
        [](const CaseSpec& c) { return c.learning_rate != default_learning_rate(c.optimizer); }));
    t.push_back(scalar_axis<int>(
        "epochs", "--epochs", "accuracy mode: the epoch limit", TomlKind::kInteger, 20, &MatrixSpec::epochs,
        &CaseSpec::epochs,
        [](const std::string& s, const std::string& what) {
          return static_cast<int>(parse_integer(s, what, 1, 1000000));
        },
        number<int>, accuracy_only));
    t.push_back(scalar_axis<double>(
        "validation", "--validation",
        "accuracy mode: the fraction of the training set held out for validation, in (0, 1)", TomlKind::kNumber, 21,
        &MatrixSpec::validation, &CaseSpec::validation, parse_validation, number<double>, accuracy_only));
    t.push_back(scalar_axis<double>(
        "target_accuracy", "--target-accuracy",
        "accuracy mode: stop at the first evaluation whose validation accuracy reaches this, in (0, 1] (default: none, "
        "train every epoch)",
        TomlKind::kNumber, 22, &MatrixSpec::target_accuracy, &CaseSpec::target_accuracy, parse_target_accuracy,
        number<double>, [](const CaseSpec& c) { return accuracy_only(c) && std::isfinite(c.target_accuracy); }));
    t.push_back(scalar_axis<int>(
        "repeats", "--repeats", "accuracy mode: independent repeats with seeds seed, seed+1, …", TomlKind::kInteger, 23,
        &MatrixSpec::repeats, &CaseSpec::repeats,
        [](const std::string& s, const std::string& what) { return static_cast<int>(parse_integer(s, what, 1, 100)); },
        number<int>, [](const CaseSpec& c) { return accuracy_only(c) && c.repeats != 1; }));
    t.push_back(list_axis<int>(
        "accumulate", "--accumulate",
        "micro-batches per optimiser step, comma-separated (gradient accumulation): each rank runs K forward and "
        "backward passes of --batch samples (weak) and the ranks average the summed gradients once, in the last "
        "one's backward; the global batch is batch x ranks x K",
        TomlKind::kInteger, 25, &MatrixSpec::accumulate, &CaseSpec::accumulate,
        [](const std::string& s, const std::string& what) {
          return static_cast<int>(parse_integer(s, what, 1, 1 << 20));
        },
        number<int>, [](const CaseSpec& c) { return c.accumulate != 1; }));
    t.push_back(list_axis<LrScaling>(
        "lr_scaling", "--lr-scaling",
        "none, linear or sqrt, comma-separated: the learning rate scaled by the global batch over --lr-base-batch "
        "(linear: lr x B / B_base, as Goyal et al.; sqrt: lr x sqrt(B / B_base))",
        TomlKind::kString, 26, &MatrixSpec::lr_scalings, &CaseSpec::lr_scaling, parse_lr_scaling,
        [](const LrScaling& r) { return std::string(lr_scaling_name(r)); },
        [](const CaseSpec& c) { return c.lr_scaling != LrScaling::kNone; }));
    t.push_back(scalar_axis<int64_t>(
        "lr_base_batch", "--lr-base-batch", "the global batch --lr is meant for (with --lr-scaling; 0: none given)",
        TomlKind::kInteger, 27, &MatrixSpec::lr_base_batch, &CaseSpec::lr_base_batch,
        [](const std::string& s, const std::string& what) { return parse_integer(s, what, 0, INT64_MAX / 2); },
        number<int64_t>, [](const CaseSpec& c) { return c.lr_scaling != LrScaling::kNone; }));
    t.push_back(scalar_axis<double>(
        "lr_warmup_epochs", "--lr-warmup-epochs",
        "accuracy mode: epochs over which the rate rises linearly from --lr to the scaled rate (Goyal et al.; "
        "default 0: none)",
        TomlKind::kNumber, 28, &MatrixSpec::lr_warmup_epochs, &CaseSpec::lr_warmup_epochs,
        [](const std::string& s, const std::string& what) {
          const double v = parse_number(s, what);
          if (!(v >= 0 && v <= 1e6)) bad(fmt::format("{} must be from 0 to 1e6 epochs, got {}", what, s));
          return v;
        },
        number<double>, [](const CaseSpec& c) { return accuracy_only(c) && c.lr_warmup_epochs > 0; }));
    t.push_back(scalar_axis<int64_t>(
        "eval_every", "--eval-every",
        "accuracy mode: evaluate on the validation set every N training samples (default 0: once per epoch)",
        TomlKind::kInteger, 29, &MatrixSpec::eval_every, &CaseSpec::eval_every,
        [](const std::string& s, const std::string& what) { return parse_integer(s, what, 0, INT64_MAX / 2); },
        number<int64_t>, [](const CaseSpec& c) { return accuracy_only(c) && c.eval_every > 0; }));
    return t;
  }();
  return table;
}

std::string Axis::long_flag() const {
  const std::string flags(flag);  // "-w,--workload": the long form names it
  return flags.substr(flags.rfind(',') + 1);
}

void MatrixOverrides::set(const Axis& axis, const std::vector<std::string>& items) {
  axis.set(values, items, axis.long_flag());
  if (std::find(given.begin(), given.end(), &axis) == given.end()) given.push_back(&axis);
}

bool MatrixOverrides::has(const char* name) const {
  return std::any_of(given.begin(), given.end(), [&](const Axis* a) { return std::strcmp(a->name, name) == 0; });
}

void MatrixOverrides::apply(MatrixSpec& m) const {
  for (const Axis* axis : given) axis->copy(values, m);
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=+./:,@%") ==
                        std::string::npos) {
    return s;
  }
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string CaseSpec::command() const {
  std::vector<const Axis*> order;
  for (const Axis& a : axes()) order.push_back(&a);
  std::sort(order.begin(), order.end(),
            [](const Axis* x, const Axis* y) { return x->command_position < y->command_position; });
  std::string cmd = "dlscale run";
  for (const Axis* a : order) {
    if (!a->in_command(*this)) continue;
    const std::string flag(a->flag, std::find(a->flag, a->flag + std::strlen(a->flag), ','));
    cmd += a->flag_only ? " " + flag : fmt::format(" {} {}", flag, shell_quote(a->print(*this)));
  }
  return cmd;
}

std::vector<std::string> split_at_commas(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t end = text.find(',', pos);
    out.push_back(text.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    if (end == std::string::npos) return out;
    pos = end + 1;
  }
}

std::vector<std::string> split_workload_list(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    const bool continues = item.find('=') != std::string::npos && item.find(':') == std::string::npos;
    if (continues && !out.empty() && out.back().find(':') != std::string::npos) {
      out.back() += "," + item;
    } else {
      out.push_back(item);
    }
    pos = end + 1;
  }
  return out;
}

namespace {

[[noreturn]] void toml_fail(const std::string& source, const toml::node& node, const std::string& what) {
  throw UsageError(fmt::format("{}:{}: {}", source, node.source().begin.line, what));
}

/// One TOML value of `axis` as the text its parser takes, after checking its type.
std::string toml_item(const toml::node& item, const Axis& axis, const std::string& source) {
  switch (axis.kind) {
    case TomlKind::kString:
      if (!item.is_string()) toml_fail(source, item, fmt::format("'{}' must be a string", axis.name));
      return *item.value<std::string>();
    case TomlKind::kInteger:
      if (!item.is_integer()) toml_fail(source, item, fmt::format("'{}' must be an integer", axis.name));
      return std::to_string(*item.value<int64_t>());
    case TomlKind::kNumber:
      if (!item.is_number()) toml_fail(source, item, fmt::format("'{}' must be a number", axis.name));
      return fmt::format("{}", *item.value<double>());
    case TomlKind::kBoolean:
      if (!item.is_boolean()) toml_fail(source, item, fmt::format("'{}' must be true or false", axis.name));
      return *item.value<bool>() ? "true" : "false";
    case TomlKind::kIntegerOrAuto:
      if (item.is_integer()) return std::to_string(*item.value<int64_t>());
      if (item.is_string() && *item.value<std::string>() == "auto") return "auto";
      toml_fail(source, item, fmt::format("'{}' must be a positive integer or \"auto\"", axis.name));
  }
  toml_fail(source, item, fmt::format("'{}': unknown kind", axis.name));
}

/// Applies the keys of one TOML table on top of `m`.
void read_matrix(const toml::table& table, MatrixSpec& m, const std::string& source, bool allow_matrix_key) {
  for (const auto& [key_view, node] : table) {
    const std::string key(key_view.str());
    if (key == "matrix" && allow_matrix_key) continue;  // handled by the caller
    const auto& all = axes();
    const auto axis = std::find_if(all.begin(), all.end(), [&](const Axis& a) { return key == a.name; });
    if (axis == all.end()) {
      std::string known;
      for (const Axis& a : all) known += fmt::format("{}{}", known.empty() ? "" : ", ", a.name);
      toml_fail(source, node,
                fmt::format("unknown key '{}' (known: {}{})", key, known, allow_matrix_key ? ", [[matrix]]" : ""));
    }
    std::vector<std::string> items;
    const toml::array* arr = axis->list ? node.as_array() : nullptr;
    if (arr != nullptr) {
      if (arr->empty()) toml_fail(source, node, fmt::format("'{}' is an empty list", key));
      for (const toml::node& item : *arr) items.push_back(toml_item(item, *axis, source));
    } else {
      items.push_back(toml_item(node, *axis, source));
    }
    try {
      axis->set(m, items, key);  // a bad value is named by its key as written in the file
    } catch (const UsageError& e) {
      toml_fail(source, node, e.what());
    }
  }
}

}  // namespace

std::vector<MatrixSpec> parse_matrix_toml(const std::string& text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw UsageError(fmt::format("{}:{}: {}", source, e.source().begin.line, e.description()));
  }
  MatrixSpec defaults;
  read_matrix(root, defaults, source, true);
  const toml::node* matrix = root.get("matrix");
  if (matrix == nullptr) return {defaults};
  const toml::array* entries = matrix->as_array();
  if (entries == nullptr || entries->empty())
    toml_fail(source, *matrix, "'matrix' must be a list of tables ([[matrix]])");
  std::vector<MatrixSpec> out;
  for (const toml::node& entry : *entries) {
    const toml::table* t = entry.as_table();
    if (t == nullptr) toml_fail(source, entry, "each [[matrix]] entry must be a table");
    MatrixSpec m = defaults;
    read_matrix(*t, m, source, false);
    // A [[matrix]] without a workload would silently add nothing: a mistake, not a request.
    if (m.workloads.empty())
      toml_fail(source, entry, "this [[matrix]] has no workload (give `workload` in it or at the top level)");
    out.push_back(m);
  }
  return out;
}

std::vector<CaseSpec> expand(const std::vector<MatrixSpec>& matrices, int world_size) {
  std::vector<CaseSpec> cases;
  const std::vector<Axis>& all = axes();
  for (const MatrixSpec& m : matrices) {
    // An odometer over the axes, the last varying fastest; an empty list gives one case with
    // the field's "unset" meaning (below).
    std::vector<size_t> counts, at(all.size(), 0);
    bool none = false;
    for (const Axis& a : all) {
      counts.push_back(std::max<size_t>(a.count(m), 1));
      none |= a.list && a.count(m) == 0 && std::string(a.name) == "workload";  // no workload, no case
    }
    if (none) continue;
    for (bool more = true; more;) {
      CaseSpec c;
      for (size_t k = 0; k < all.size(); ++k) all[k].pick(m, at[k], c);
      if (m.ranks.empty()) c.ranks = world_size;  // every rank of the job
      if (m.learning_rates.empty()) c.learning_rate = default_learning_rate(c.optimizer);
      c.bucket_mb_defaulted = m.bucket_mb.empty();
      c.device_from_driver = m.devices.empty();  // assign_defaults() knows the drivers
      c.denormals_from_device = m.denormals.empty();
      cases.push_back(c);
      more = false;
      for (size_t k = all.size(); k-- > 0;) {
        if (++at[k] < counts[k]) {
          more = true;
          break;
        }
        at[k] = 0;
      }
    }
  }
  return cases;
}

void assign_defaults(std::vector<CaseSpec>& cases, const Registry& drivers) {
  for (CaseSpec& c : cases) {
    const Driver* d = drivers.find_or_missing(c.driver);
    if (c.device_from_driver && d != nullptr) {
      c.device = d->default_device();
      c.device_from_driver = false;
    }
    if (c.denormals_from_device) {
      c.denormals = default_denormals(c.device);
      c.denormals_from_device = false;
    }
  }
}

void validate_request(const std::vector<CaseSpec>& cases, const Registry& drivers, int world_size) {
  if (cases.empty()) throw UsageError("nothing to run: no workload given (use -w NAME, --config FILE or --suite NAME)");
  for (const CaseSpec& c : cases) {
    // A driver this build lacks is no typo: its cases are unsupported (check_devices_and_data).
    if (drivers.find_or_missing(c.driver) == nullptr) {
      std::string known;
      for (const std::string& n : drivers.names()) known += (known.empty() ? "" : ", ") + n;
      throw UsageError(
          fmt::format("unknown driver '{}' (this build has: {})", c.driver, known.empty() ? "none" : known));
    }
    if (c.ranks <= 0 || c.ranks > world_size) {
      throw UsageError(fmt::format(
          "--ranks {}: this job has {} rank{} (a case runs on 1 to {}){}", c.ranks, world_size,
          world_size == 1 ? "" : "s", world_size,
          c.ranks > world_size ? fmt::format(": launch it with `mpirun -np {}` or more", c.ranks) : std::string()));
    }
    if (c.bucket_mb < 0) throw UsageError(fmt::format("--bucket-mb must be 0 or more, got {}", c.bucket_mb));
    if (c.batch <= 0) throw UsageError(fmt::format("batch must be positive, got {}", c.batch));
    if (c.scaling == Scaling::kStrong && c.batch % c.ranks != 0) {
      throw UsageError(fmt::format("strong scaling: global batch {} does not divide by {} ranks", c.batch, c.ranks));
    }
    if (c.scaling == Scaling::kStrong && c.batch % (int64_t{c.ranks} * c.accumulate) != 0) {
      throw UsageError(fmt::format("strong scaling: global batch {} does not divide by {} ranks x {} micro-batches",
                                   c.batch, c.ranks, c.accumulate));
    }
    if (c.lr_scaling != LrScaling::kNone && c.lr_base_batch <= 0) {
      throw UsageError(fmt::format("--lr-scaling {} needs --lr-base-batch: the global batch --lr is meant for",
                                   lr_scaling_name(c.lr_scaling)));
    }
    if (c.threads < 0) throw UsageError(fmt::format("threads must be positive or auto, got {}", c.threads));
    if (c.iterations <= 0) throw UsageError(fmt::format("iterations must be positive, got {}", c.iterations));
    if (c.seed > static_cast<uint64_t>(INT64_MAX))
      throw UsageError(fmt::format("seed must be below 2^63, got {}", c.seed));
    if (c.warmup < 0) throw UsageError(fmt::format("warmup must be zero or more, got {}", c.warmup));
    if (c.mode == RunMode::kAccuracy && c.data == "synthetic") {
      throw UsageError(
          "--mode accuracy needs labelled data with a test set (--data mnist:DIR, cifar10:DIR or imdb:DIR); "
          "synthetic data has nothing to learn");
    }
    if (c.mode == RunMode::kAccuracy) {
      try {
        // Whether the kind has a test set at all is known from the spec alone: said before any file is read.
        test_dataset_spec(c.data);
      } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("--data {}: {}", c.data, e.what()));
      }
    }
  }
}

std::string cases_to_toml(const std::vector<CaseSpec>& cases) {
  toml::table root;
  toml::array list;
  for (const CaseSpec& c : cases) {
    toml::table t;
    for (const Axis& a : axes()) {
      if (a.defaulted && a.defaulted(c)) continue;
      const std::string value = a.print(c);
      switch (a.kind) {
        case TomlKind::kString:
          t.insert(a.name, value);
          break;
        case TomlKind::kInteger:
          t.insert(a.name, static_cast<int64_t>(std::stoll(value)));
          break;
        case TomlKind::kNumber:
          t.insert(a.name, std::stod(value));
          break;
        case TomlKind::kBoolean:
          t.insert(a.name, value == "true");
          break;
        case TomlKind::kIntegerOrAuto:
          if (value == "auto") {
            t.insert(a.name, value);
          } else {
            t.insert(a.name, static_cast<int64_t>(std::stoll(value)));
          }
          break;
      }
    }
    list.push_back(std::move(t));
  }
  root.insert("case", std::move(list));
  std::ostringstream out;
  out << toml::toml_formatter(root);
  return out.str();
}

}  // namespace dlscale
