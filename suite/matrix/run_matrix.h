// The run matrix: what a user asks for (CLI flags, a TOML file or a built-in suite) and its
// expansion into cases, the cartesian product of the list-valued fields. Every field is an axis
// declared once (run_matrix.cpp, `axes()`): its name (the TOML key), CLI flag, parser and printer,
// which the command line, the TOML reader, the expansion, the case key and the recorded config all
// use.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "drivers/driver.h"
#include "drivers/gradient_compression.h"
#include "suite/matrix/placement.h"

namespace dlscale {

enum class Scaling { kWeak, kStrong };

/// What a case measures: seconds per training step (timing), or how accurate the network gets
/// in how much time, over epochs of real data (accuracy; docs/running.md, "Accuracy runs").
enum class RunMode { kTiming, kAccuracy };

/// "timing", "accuracy".
const char* run_mode_name(RunMode m);
/// The learning rate a case gets when none is given: 0.01 for SGD, 0.001 for Adam (the
/// defaults of Keras and of torch.optim.Adam).
double default_learning_rate(OptimizerKind k);

/// The gradient bucket size a case gets when none is given, in MB (1e6 bytes): PyTorch DDP's
/// bucket_cap_mb, reduced during backward as DDP reduces them (docs/metrics.md).
constexpr double kDefaultBucketMb = 25;

/// How the learning rate follows the global batch (docs/running.md, "Accuracy runs"): none; linear,
/// lr x B / B_base (Goyal et al. 2017); sqrt, lr x sqrt(B / B_base) (Krizhevsky 2014; Hoffer et al.
/// 2017), B_base being --lr-base-batch.
enum class LrScaling { kNone, kLinear, kSqrt };
/// "none", "linear", "sqrt".
const char* lr_scaling_name(LrScaling s);

/// "weak", "strong".
const char* scaling_name(Scaling s);
/// "cpu", "cuda".
const char* device_name(DeviceType d);

/// One run matrix. List fields expand as a cartesian product; 0 threads means "the size of the
/// rank's CPU set".
struct MatrixSpec {
  std::vector<std::string> workloads;
  std::vector<std::string> drivers{default_driver_name()};
  std::vector<DeviceType> devices;  ///< empty: each driver's own device (cuda for cuda, else cpu)
  std::vector<Precision> precisions{Precision::kFp32};
  std::vector<Denormals> denormals;  ///< empty: each device's default (default_denormals)
  std::vector<Scaling> scalings{Scaling::kWeak};
  std::vector<int64_t> batches{64};
  std::vector<int> threads{0};
  std::vector<std::string> data{"synthetic"};             ///< "synthetic" or a dataset spec (suite/data/datasets.h)
  std::vector<int> ranks;                                 ///< ranks per case; empty: every rank of the job
  std::vector<Placement> placements{Placement::kPacked};  ///< which ranks (suite/matrix/placement.h)
  std::vector<double> bucket_mb;  ///< gradient bucket sizes; empty: kDefaultBucketMb (CaseSpec::bucket_mb_defaulted)
  std::vector<GradCompression> grad_compressions{GradCompression::kNone};
  std::vector<Hierarchy> allreduce_hierarchies{Hierarchy::kAuto};
  std::vector<Sharding> shardings{Sharding::kNone};
  std::vector<OptimizerKind> optimizers{OptimizerKind::kSgd};
  std::vector<double> learning_rates;  ///< empty: each optimiser's default (default_learning_rate)
  int warmup = 2;
  double case_timeout = 0;  ///< seconds a case may train; 0: no limit
  int iterations = 10;
  uint64_t seed = 42;
  bool phases = false;
  bool sparse_embedding = false;
  bool allow_emulation = false;
  RunMode mode = RunMode::kTiming;
  int epochs = 5;           ///< accuracy mode: the epoch limit
  double validation = 0.2;  ///< accuracy mode: the fraction of the training set held out
  double target_accuracy = std::numeric_limits<double>::quiet_NaN();  ///< NaN: no target
  int repeats = 1;                 ///< accuracy mode: independent repeats, seeds seed, seed + 1, …
  std::vector<int> accumulate{1};  ///< micro-batches per optimiser step (gradient accumulation)
  std::vector<LrScaling> lr_scalings{LrScaling::kNone};
  int64_t lr_base_batch = 0;    ///< the global batch --lr is meant for; 0: none given
  double lr_warmup_epochs = 0;  ///< accuracy mode: epochs of linear warm-up to the scaled rate
  int64_t eval_every = 0;       ///< accuracy mode: training samples between evaluations; 0: every epoch
};

/// One benchmark case: everything needed to run it and to rerun it.
struct CaseSpec {
  std::string workload, driver;
  DeviceType device = DeviceType::kCpu;
  bool device_from_driver = false;  ///< no device was asked for: assign_defaults() sets it
  Precision precision = Precision::kFp32;
  Denormals denormals = Denormals::kFlush;
  bool denormals_from_device = false;  ///< none was asked for: assign_defaults() sets the device's
  Scaling scaling = Scaling::kWeak;
  std::string data = "synthetic";  ///< or a dataset spec such as "mnist:data/mnist"
  int64_t batch = 0;               ///< per rank (weak) or global (strong), as the user gave it
  int threads = 0;                 ///< 0: the rank's CPU set size
  int warmup = 0, iterations = 0;
  double case_timeout = 0;  ///< seconds; 0: no limit (not part of the case key)
  uint64_t seed = 0;
  bool phases = false;
  /// An embedding's gradient summed as the rows touched (suite/comm/sparse_rows.h), in the buckets.
  bool sparse_embedding = false;
  /// Runs a precision the driver's library only emulates on this CPU (ComputeIsa), recorded as
  /// emulated; otherwise such a case is `unsupported`.
  bool allow_emulation = false;
  int ranks = 1;                             ///< ranks this case runs on
  Placement placement = Placement::kPacked;  ///< which of the job's ranks (suite/matrix/placement.h)
  double bucket_mb = kDefaultBucketMb;  ///< > 0: bucketed all-reduce, overlapped with backward; 0: one after backward
  /// No bucket size was asked for. One rank then reduces nothing; one that was asked for reduces
  /// its buckets even alone where the driver can (a GPU, over a one-rank communicator).
  bool bucket_mb_defaulted = true;
  /// The format gradients cross ranks in (drivers/gradient_compression.h): fp16 or bf16 halve the bytes.
  GradCompression grad_compression = GradCompression::kNone;
  /// How the MPI all-reduce crosses hosts (suite/matrix/placement.h); kAuto resolved per case.
  Hierarchy allreduce_hierarchy = Hierarchy::kAuto;
  /// What each rank keeps of the optimiser's state (drivers/driver.h): kOptimizer shards it.
  Sharding sharding = Sharding::kNone;
  OptimizerKind optimizer = OptimizerKind::kSgd;
  double learning_rate = 0.01;
  RunMode mode = RunMode::kTiming;
  int epochs = 5;
  double validation = 0.2;
  double target_accuracy = std::numeric_limits<double>::quiet_NaN();  ///< NaN: no target
  int repeats = 1;
  int accumulate = 1;  ///< micro-batches per optimiser step, each of batch_per_rank() samples per rank
  LrScaling lr_scaling = LrScaling::kNone;
  int64_t lr_base_batch = 0;    ///< 0: none given
  double lr_warmup_epochs = 0;  ///< accuracy mode
  int64_t eval_every = 0;       ///< accuracy mode; 0: once per epoch

  /// The optimiser training_step() applies, at the scaled rate (scaled_learning_rate()).
  Optimizer make_optimizer() const {
    Optimizer o;
    o.kind = optimizer;
    o.learning_rate = scaled_learning_rate();
    return o;
  }
  /// --lr scaled to the global batch by --lr-scaling (the rate after any warm-up).
  double scaled_learning_rate() const;

  /// The samples of one forward pass on one rank (a micro-batch with --accumulate).
  int64_t batch_per_rank() const { return scaling == Scaling::kStrong ? batch / (int64_t{ranks} * accumulate) : batch; }
  /// The samples of one optimiser step over all ranks and micro-batches.
  int64_t global_batch() const { return scaling == Scaling::kStrong ? batch : batch * ranks * accumulate; }
  /// A `dlscale run …` command line that reruns exactly this case (also its key for --resume).
  std::string command() const;
};

/// What TOML value one item of an axis must be.
enum class TomlKind { kString, kInteger, kNumber, kBoolean, kIntegerOrAuto };

/// One field of the run matrix, declared once: how it is named, asked for, parsed and printed.
struct Axis {
  const char* name;  ///< the TOML key and the CaseSpec field ("bucket_mb")
  const char* flag;  ///< the CLI option(s), CLI11 syntax ("--bucket-mb", "-w,--workload")
  std::string help;
  TomlKind kind;
  bool list;                 ///< several values expand into several cases; else one value for the matrix
  bool flag_only = false;    ///< a CLI flag without a value (--phases)
  int command_position = 0;  ///< where the case's command line names it (the case key's order)
  /// How one CLI item splits into values; nullptr: at commas (workloads keep their overrides'
  /// commas: split_workload_list; a --data item stays whole).
  std::function<std::vector<std::string>(const std::string& item)> split;
  /// Sets the field of `m` from its textual items (a CLI list, or TOML values as text); throws
  /// UsageError naming a bad item and the field as `what` (the flag, or the TOML key as written).
  std::function<void(MatrixSpec& m, const std::vector<std::string>& items, const std::string& what)> set;
  /// Copies the field from one matrix to another (command-line overrides).
  std::function<void(const MatrixSpec& from, MatrixSpec& to)> copy;
  /// List axes: how many values `m` holds (0: one case with the field's "unset" meaning).
  std::function<size_t(const MatrixSpec& m)> count;
  /// Puts value `i` (scalars: the value) of `m` into a case.
  std::function<void(const MatrixSpec& m, size_t i, CaseSpec& c)> pick;
  /// The case's value as text (command line, recorded config).
  std::function<std::string(const CaseSpec& c)> print;
  /// Whether the case's command line names this axis (defaults such as fp32 are left out).
  std::function<bool(const CaseSpec& c)> in_command;
  /// Whether the case took this axis's value by default where that differs from asking for it
  /// (bucket_mb on one rank); the recorded config then leaves it out. nullptr: never.
  std::function<bool(const CaseSpec& c)> defaulted;
  /// The long CLI option ("--workload" of "-w,--workload").
  std::string long_flag() const;
};

/// Every axis, in expansion order (the first varies slowest).
const std::vector<Axis>& axes();

/// Fields given explicitly on the command line; they override every matrix of a config file or
/// suite.
struct MatrixOverrides {
  MatrixSpec values;
  std::vector<const Axis*> given;
  /// Parses `items` for `axis` into the overrides; throws UsageError naming a bad item.
  void set(const Axis& axis, const std::vector<std::string>& items);
  /// Whether the axis named `name` (its TOML key, "ranks") was given.
  bool has(const char* name) const;
  void apply(MatrixSpec& m) const;
};

/// `s` as one word for a POSIX shell: as it is when it holds only characters no shell treats
/// specially, else in single quotes.
std::string shell_quote(const std::string& s);

/// Splits a comma-separated workload list where a workload may carry several overrides:
/// "fcn5:features=64,width=32,mnist_fnn" -> {"fcn5:features=64,width=32", "mnist_fnn"} (an
/// item with '=' but no ':' continues the previous workload's overrides).
std::vector<std::string> split_workload_list(const std::string& text);
/// "a,,b" -> {"a", "", "b"}: every comma separates, so that an empty item can be refused.
std::vector<std::string> split_at_commas(const std::string& text);

/// Parses a TOML run matrix: top-level keys form one matrix, or the defaults of each
/// [[matrix]] table when there are some. Throws UsageError "SOURCE:LINE: problem".
std::vector<MatrixSpec> parse_matrix_toml(const std::string& text, const std::string& source);

/// Expands matrices into cases for a job of `world_size` ranks, in matrix order, then axis order.
std::vector<CaseSpec> expand(const std::vector<MatrixSpec>& matrices, int world_size);

/// Gives every case without a device its driver's default device (cases of unknown drivers are
/// left for validate_request() to report), then every case without a floating-point mode its device's.
void assign_defaults(std::vector<CaseSpec>& cases, const Registry& drivers);

/// Checks what the request alone decides (drivers, sizes, ranks against the job's); throws
/// UsageError naming the first problem. Builds no workload, reads no file and touches no device:
/// what needs the workload is checked on the resolved cases (suite/case/resolved_case.h).
void validate_request(const std::vector<CaseSpec>& cases, const Registry& drivers, int world_size);

/// The expanded cases as TOML (one [[case]] table each), stored in the results file.
std::string cases_to_toml(const std::vector<CaseSpec>& cases);

}  // namespace dlscale
