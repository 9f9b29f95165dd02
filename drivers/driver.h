// The interface between the harness and a backend. A Driver turns a Workload into a Model; a
// Model trains on one rank with its gradients in one contiguous buffer, so that the harness
// (not the backend) owns the all-reduce, the timing and the bookkeeping.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/data/synthetic.h"
#include "workloads/workload.h"

namespace dlscale {

enum class DeviceType { kCpu, kCuda };

/// The arithmetic of the matrix products and convolutions. fp32: IEEE single precision, no
/// tensor-core shortcuts. tf32: fp32 data, products on tensor cores with 10-bit mantissas.
/// bf16: mixed precision: bfloat16 operands with fp32 accumulation, fp32 master weights and
/// gradients (so the all-reduce and the update stay fp32).
enum class Precision { kFp32, kTf32, kBf16 };

/// "fp32", "tf32", "bf16".
const char* precision_name(Precision p);
/// The precision named `name`; throws std::invalid_argument for anything else.
Precision parse_precision(const std::string& name);

/// How the CPU threads of a case treat float denormals (values below 1.2e-38). kFlush: flush
/// results to zero and read denormal inputs as zero (x86 FTZ+DAZ), as oneDNN and TensorFlow do;
/// kIeee: gradual underflow, as IEEE 754 and PyTorch's default. Networks with saturated units
/// (FCN-5's sigmoids) produce many denormals, which microcode assists make several times slower,
/// so comparing drivers in different modes compares floating-point modes, not drivers: every
/// CPU case runs every driver in the same mode (docs/metrics.md, "Floating-point mode").
enum class Denormals { kFlush, kIeee };

/// "flush", "ieee".
const char* denormals_name(Denormals d);
/// The mode named `name`; throws std::invalid_argument for anything else.
Denormals parse_denormals(const std::string& name);
/// A case's mode when the user names none: kFlush on the CPU; kIeee on GPUs, whose libraries
/// (cuBLAS, cuDNN) keep IEEE arithmetic in fp32.
Denormals default_denormals(DeviceType device);

/// The instruction set a driver's library computes a precision with on a device, as the library
/// itself will choose it ("avx512_core_bf16" for oneDNN, say), and whether that instruction set
/// has the precision's arithmetic natively. A precision a library only emulates (bf16 through
/// fp32 instructions) runs several times slower than the hardware's own: such a case runs only
/// when the user asks for emulation (`--allow-emulation`), and is recorded as emulated.
struct ComputeIsa {
  std::string isa;           ///< empty where the driver cannot tell (code compiled for the build's baseline)
  bool native = true;        ///< false: the precision is emulated on `isa`
  std::string native_needs;  ///< for the message when not native: "avx512_core_bf16 or AMX"
};

/// Where a rank trains and how.
struct DriverContext {
  DeviceType device = DeviceType::kCpu;
  int device_index = 0;  ///< GPU ordinal for kCuda
  int threads = 1;       ///< CPU threads for the backend's math library
  uint64_t seed = 0;     ///< for any randomness inside the backend (dropout)
  Precision precision = Precision::kFp32;
  /// The floating-point mode of every CPU thread that computes for the model, applied by the
  /// driver for the length of each of its calls (drivers/cpu/denormal_scope.h).
  Denormals denormals = Denormals::kIeee;
};

/// A contiguous float buffer holding every gradient in the backend's own order.
struct GradBuffer {
  float* data = nullptr;
  size_t count = 0;
  bool on_device = false;  ///< true when `data` is a GPU pointer
};

enum class OptimizerKind {
  kSgd,   ///< p -= lr g: plain SGD without momentum, the timing runs' optimiser (Shi et al.)
  kAdam,  ///< Adam (Kingma & Ba), exactly as torch.optim.Adam with its defaults (below)
};

/// "sgd", "adam".
const char* optimizer_name(OptimizerKind k);
/// The optimiser named `name`; throws std::invalid_argument for anything else.
OptimizerKind parse_optimizer(const std::string& name);

/// How Model::update() applies the gradients. Adam keeps two fp32 state values per parameter,
/// m and v, zero when the model is made and after every load_parameters(), and counts its own
/// updates t (1 at the first update after making or loading). Per parameter p with gradient g,
/// the order of operations of torch.optim.Adam (amsgrad off, no weight decay):
///   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
///   p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + epsilon)
/// GPU models keep m and v in device memory and update there.
struct Optimizer {
  double learning_rate = 0.01;
  OptimizerKind kind = OptimizerKind::kSgd;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
};

/// What an inference pass over one batch gives (Model::evaluate): sums, so that the harness can
/// add them over batches and ranks before dividing.
struct Evaluation {
  double loss_sum = 0;      ///< the loss summed over every prediction (mean loss = loss_sum / predictions)
  int64_t correct = 0;      ///< predictions equal to their label
  int64_t predictions = 0;  ///< samples x labels_per_sample
};

struct MemoryStats {
  int64_t device_peak_bytes = 0;  ///< 0 on CPU; -1 where the backend cannot tell
  /// The bytes the optimiser's state takes now (Adam's m and v; 0 for SGD, and before Adam's
  /// first update): for a sharded update, of the shard's parameters only.
  int64_t optimizer_state_bytes = 0;
};

/// What each rank of a data-parallel case keeps of the training state (--sharding). kNone: every
/// rank keeps and updates all of it, as DDP. kOptimizer (ZeRO stage 1, as PyTorch's
/// ZeroRedundancyOptimizer): the gradients are reduce-scattered, each rank updates its share of
/// the parameters and keeps the optimiser's state for those only, and the parameters are then
/// all-gathered; the same bytes as the all-reduce, and the optimiser's memory falls as 1/P.
enum class Sharding { kNone, kOptimizer };

/// "none", "optimizer".
const char* sharding_name(Sharding s);
/// The sharding named `name`; throws std::invalid_argument for anything else.
Sharding parse_sharding(const std::string& name);

/// The parameters one update() applies the gradients to. `whole` (the default): every parameter.
/// Otherwise `ranges` of the flat layout of grad_buffer() and parameters(), ascending and
/// disjoint: with the optimiser sharded over the ranks (--sharding optimizer), each rank updates
/// its own share, and its optimiser state covers only those parameters, packed in range order.
/// The ranges of a model's updates stay the same from one update to the next until
/// load_parameters(), which starts the state afresh.
struct ParameterShard {
  bool whole = true;
  std::vector<ParamRange> ranges;
  /// Its ranges in a model of `total` parameters.
  std::vector<ParamRange> ranges_in(size_t total) const { return whole ? std::vector<ParamRange>{{0, total}} : ranges; }
  /// The parameters it covers in a model of `total`.
  size_t elements(size_t total) const {
    if (whole) return total;
    size_t n = 0;
    for (const ParamRange& r : ranges) n += r.count;
    return n;
  }
};

/// A model's parameters where the harness may write them (parameters()): `count` values of
/// `value_bytes` bytes each (4: float; 8: the reference driver's double), in the flat layout of
/// grad_buffer(), in host memory.
struct ParameterBuffer {
  void* data = nullptr;
  size_t count = 0;
  size_t value_bytes = sizeof(float);
};

/// What a measured peak times: a square matrix product of the backend's own library (FLOP/s), or
/// a memory-bound copy of the device (bytes/s).
enum class PeakKind { kGemm, kStream };

/// One unit of work of a backend, repeated to measure its sustained rate (`dlscale peak`,
/// docs/metrics.md "Measured peak"). Made outside any timed region; run() queues the work and
/// synchronize() waits for it, so that device work is timed like a training step.
class PeakKernel {
 public:
  virtual ~PeakKernel() = default;
  virtual void run() = 0;
  virtual void synchronize() = 0;
  /// FLOP (kGemm) or bytes moved (kStream) by one run().
  virtual double work() const = 0;
  /// How the work is done, for the results file: the library call, its types, the size.
  virtual std::string describe() const = 0;
};

/// Thrown by a driver when its device or host memory runs out; the case is recorded as `oom`
/// and a sweep goes on with the next case.
class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Thrown by a driver that gave up waiting for its device or its peers (a collective that did not
/// complete) because the case's Deadline passed; the case is recorded as `timeout`.
class Timeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// When a case stops waiting for its device and its peers (--case-timeout, counted from the start
/// of the case's set-up, then from the start of its training); Deadline::max() when it has no
/// limit. A GPU reducer polls its collectives until then instead of blocking in them.
using Deadline = std::chrono::steady_clock::time_point;

/// How a case ended, as drivers report it and the harness records it (`status` in the results
/// file). Ordered by how much one rank's outcome overrides another's when ranks disagree.
enum class Status { kOk = 0, kUnsupported = 1, kOom = 2, kTimeout = 3, kError = 4 };

/// "ok", "unsupported", "oom", "timeout", "error".
const char* status_name(Status s);

/// A driver's answer to "can you run this?": ok, or the reason it cannot (the `unsupported`
/// outcome). `Outcome::from` turns it into an outcome.
struct Support {
  bool ok = true;
  std::string reason;
  static Support yes() { return {}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
};

/// A status and why (empty when ok): the one outcome type of drivers and harness.
struct Outcome {
  Status status = Status::kOk;
  std::string message;
  bool ok() const { return status == Status::kOk; }
  static Outcome from(const Support& s) { return s.ok ? Outcome{} : Outcome{Status::kUnsupported, s.reason}; }
};

/// The ranks of one case as a backend sees them; the harness implements it over MPI, so that no
/// driver includes MPI (NCCL, say, bootstraps through it).
class RankGroup {
 public:
  virtual ~RankGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Copies `bytes` bytes at `data` on rank `root` to `data` on every rank; collective.
  virtual void broadcast(void* data, size_t bytes, int root) const = 0;
};

/// Times one training step: mark(0) at its start, mark(1..3) at the phase boundaries when phases
/// are timed, mark(last) at its end; seconds(from, to) once the step was marked to its end.
class StepTimer {
 public:
  virtual ~StepTimer() = default;
  virtual void mark(int i) = 0;
  virtual double seconds(int from, int to) = 0;
};

/// A float buffer summed in place over a case's ranks, as a training step reduces gradients:
/// the all-reduce microbenchmark measures the harness's or a driver's reduction through this.
class AllreduceTransport {
 public:
  virtual ~AllreduceTransport() = default;
  /// Sets the buffer to `values` (not timed).
  virtual void load(const std::vector<float>& values) = 0;
  /// Sums the buffer in place over the ranks; returns when the result is complete.
  virtual void reduce() = 0;
  virtual std::vector<float> read() = 0;
};

class Model;

/// Averages a model's gradients over a case's ranks where the backend keeps them (a GPU's memory
/// and NCCL, say). The harness's own reduction, MPI on host memory, serves every driver that
/// makes none.
class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  /// Reduces `model`'s gradients from now on (on its stream, for a GPU model); `model` comes from
  /// the driver that made this reducer. With `bucket_mb` > 0 the reducer cuts the gradients into
  /// buckets of about that many MB and queues each as soon as the model reports it final
  /// (Model::set_gradient_ready_callback, which bind() sets), so that the reduction overlaps the
  /// rest of backward. Returns whether it does: false when `bucket_mb` is 0 or the model cannot
  /// tell; its buckets then all start in average().
  virtual bool bind(Model& model, double bucket_mb) = 0;
  /// Before each step's forward pass: every bucket waits for its gradients again, and the
  /// step's reductions are given up at `deadline` (see wait()).
  virtual void start_step(Deadline deadline) { (void)deadline; }
  /// Replaces `grads` by their mean over the ranks, ordered after the work queued before it:
  /// after backward, every bucket not started yet, then the model's work waits for them all.
  /// Buckets start in one order on every rank (from the last to the first), whatever order the
  /// model reported them in, and also on a rank whose backward failed half-way.
  virtual void average(const GradBuffer& grads) = 0;
  /// Returns once the reductions queued since start_step() have completed. A reducer that queues
  /// them on a device polls them, and abandons them (its communicator aborted, so that the
  /// device's queue drains) when the step's deadline passes, throwing Timeout, or when the
  /// library reports a failure (a peer lost), throwing its error; it never blocks where a lost
  /// peer could hold it, also while queuing. The default: reductions complete inside average().
  virtual void wait() {}
  /// The same reduction, on a buffer of its own, for the all-reduce microbenchmark.
  virtual std::unique_ptr<AllreduceTransport> transport() = 0;
  /// What reduces the gradients since bind(), for the record (docs/schema.md,
  /// allreduce_mechanism): e.g. "nccl" (one all-reduce after backward), "nccl_buckets_stream";
  /// "none" where nothing is reduced (one rank without buckets). And into how many buckets.
  virtual std::string mechanism() const = 0;
  virtual size_t bucket_count() const = 0;
};

/// One trainable instance of a workload on one backend and device.
class Model {
 public:
  virtual ~Model() = default;
  /// Sets the parameters from the canonical flat layout (workloads/workload.h).
  virtual void load_parameters(const std::vector<float>& canonical) = 0;
  /// The parameters in the canonical layout (cross-checks only; may be slow).
  virtual std::vector<float> export_parameters() = 0;
  /// Copies a host batch in; called outside the timed region.
  virtual void set_batch(const Batch& batch) = 0;
  /// The forward pass and the loss; does not wait for queued device work.
  virtual void forward() = 0;
  /// The backward pass; gradients land in grad_buffer().
  virtual void backward() = 0;
  /// The loss of the last forward pass (waits for it).
  virtual double loss() = 0;
  /// The flat buffer the reducer averages: the canonical layout in host memory on the CPU; a GPU
  /// driver's own layout (padding, cuDNN's weight spaces), at least parameter_count() values.
  virtual GradBuffer grad_buffer() = 0;
  /// Applies the gradients in grad_buffer() to the parameters of `shard` (ParameterShard), keeping
  /// the optimiser's state for those only. A driver that cannot update part of its parameters
  /// (parameters() gives none) throws std::logic_error for a shard that is not whole.
  virtual void update(const Optimizer& opt, const ParameterShard& shard) = 0;
  /// Applies the gradients to every parameter.
  void update(const Optimizer& opt) { update(opt, ParameterShard{}); }
  /// The parameters in host memory in grad_buffer()'s layout, for the harness to write the ranks'
  /// updated shares into (an all-gather after a sharded update), then parameters_changed(). Empty
  /// (data nullptr, the default) where the driver keeps them otherwise (a GPU's memory, cuDNN's
  /// layouts): such a driver cannot shard its optimiser.
  virtual ParameterBuffer parameters() { return {}; }
  /// The harness wrote into parameters(): anything the driver derived from them (staged copies in
  /// its library's layouts) is stale.
  virtual void parameters_changed() {}
  /// Waits for all queued device work.
  virtual void synchronize() = 0;
  /// The gradients in the canonical layout (cross-checks only; may be slow).
  virtual std::vector<float> export_gradients() = 0;
  /// Inference on `batch` (testing, validation): the forward pass in inference mode, with dropout
  /// off and batch norm normalising with its running statistics (updated by every training
  /// forward() as PyTorch does: momentum 0.1, the unbiased batch variance; mean 0 and variance 1
  /// when the model is made), no gradients kept. A prediction is correct when the argmax of its
  /// logits is its label (softmax cross-entropy; the lowest index wins a tie) or, for binary
  /// cross-entropy, when (logit > 0) equals its label. Waits for the device, so the host clock
  /// around it times it. Changes no parameter, optimiser state or running statistic; the batch
  /// of set_batch() may be replaced: call set_batch() before training again.
  virtual Evaluation evaluate(const Batch& batch) = 0;
  virtual MemoryStats memory() const = 0;
  /// How the harness times this model's steps. nullptr (the default, for CPU models): the host
  /// clock read after synchronize(). GPU models return a timer on their own stream, so that a
  /// step holds no host synchronisation.
  virtual std::unique_ptr<StepTimer> make_step_timer() { return nullptr; }
  /// Asks the driver to call `ready(first, count)` during backward() whenever elements
  /// [first, first + count) of grad_buffer() hold their final values, so that the harness can
  /// reduce them while the rest of the backward pass runs; for a GPU model, once the work that
  /// computes them is queued on its stream (a reduction queued after it, in stream order, reads
  /// them final). Returns false when the driver cannot tell; its gradients are then complete only
  /// when backward() returns.
  virtual bool set_gradient_ready_callback(std::function<void(size_t first, size_t count)> ready) {
    (void)ready;
    return false;
  }
};

/// A backend.
class Driver {
 public:
  virtual ~Driver() = default;
  virtual std::string_view name() const = 0;
  virtual Support supports(const Workload& w, DeviceType device) const = 0;
  /// Whether the driver computes `w` on `device` in `precision`; only fp32 unless overridden.
  virtual Support supports_precision(const Workload& w, DeviceType device, Precision precision) const;
  /// The instruction set `precision` is computed with on `device` (ComputeIsa). The default: the
  /// driver cannot tell, and nothing is emulated.
  virtual ComputeIsa compute_isa(DeviceType device, Precision precision) const;
  /// Whether the driver runs `device` in `mode`. The default accepts kIeee only, the mode of a
  /// driver that leaves its threads' floating-point mode alone; CPU drivers that apply either
  /// mode (drivers/cpu/denormal_scope.h) override it.
  virtual Support supports_denormals(DeviceType device, Denormals mode) const;
  /// Whether `device` can be used at all on this machine (a GPU is visible, the library was built
  /// with it). Asking for a device that is not there is bad input, refused before any case runs.
  virtual Support device_available(DeviceType device) const;
  /// The device a case runs on when the user names none.
  virtual DeviceType default_device() const { return DeviceType::kCpu; }
  /// How many devices of this type the driver sees (GPUs with CUDA_VISIBLE_DEVICES applied); 0,
  /// with the reason in `why`, when none. The harness binds ranks to them (suite/case/device_binding.h).
  virtual int device_count(DeviceType device, std::string* why) const;
  /// A device for the results file: "cuda:0 NVIDIA H100 80GB HBM3 GPU-5f1c… bus 0000:1b:00.0 (79.1 GiB)".
  virtual std::string describe_device(DeviceType device, int index) const;
  /// The gradient reduction of a case on `device`, made before the model so that it takes its
  /// device memory first (NCCL's buffers); collective over `ranks`, and given up with Timeout
  /// when the ranks have not all joined by `deadline`. nullptr (the default): the harness's MPI
  /// on host memory, which needs grad_buffer() in host memory.
  virtual std::unique_ptr<GradientReducer> make_reducer(DeviceType device, int device_index, const RankGroup& ranks,
                                                        Deadline deadline) const;
  virtual std::unique_ptr<Model> create(const Workload& w, const DriverContext& ctx) const = 0;
  /// Whether make_peak_kernel can measure `kind` on `device` in `precision` here. The default:
  /// kStream on the CPU (the host triad every CPU driver shares), nothing else.
  virtual Support supports_peak(PeakKind kind, DeviceType device, Precision precision) const;
  /// The work a peak of `kind` times, of size `n` (the matrices' order for kGemm, elements per
  /// buffer for kStream), on `ctx`'s device and threads in `ctx.precision`; only after
  /// supports_peak said yes.
  virtual std::unique_ptr<PeakKernel> make_peak_kernel(PeakKind kind, int64_t n, const DriverContext& ctx) const;
  /// Library name -> version, recorded in /system/software.
  virtual std::map<std::string, std::string> versions() const = 0;
};

/// Whether `driver` computes `w` on `device` in `precision`: supports_precision(), and a native
/// instruction set for it (compute_isa()) unless `allow_emulation`.
Support precision_support(const Driver& driver, const Workload& w, DeviceType device, Precision precision,
                          bool allow_emulation);

/// The compiled drivers, by name, and dlscale's drivers that this build was configured without.
class Registry {
 public:
  void add(std::unique_ptr<Driver> driver);
  /// A driver of dlscale's that this build lacks, on `device` by default: `why` says so.
  void add_missing(std::string name, DeviceType device, std::string why);
  /// nullptr when no driver of that name was compiled in.
  const Driver* find(std::string_view name) const;
  /// A compiled driver, else a stand-in for one this build lacks, which supports nothing and says
  /// why (a case naming it is `unsupported`, as on a missing device); nullptr for a name dlscale
  /// has no driver of.
  const Driver* find_or_missing(std::string_view name) const;
  std::vector<std::string> names() const;
  const std::vector<std::unique_ptr<Driver>>& all() const { return drivers_; }
  /// The stand-ins of the drivers this build lacks.
  const std::vector<std::unique_ptr<Driver>>& missing() const { return missing_; }

 private:
  std::vector<std::unique_ptr<Driver>> drivers_;
  std::vector<std::unique_ptr<Driver>> missing_;
};

/// Registers every driver this build has (explicitly, one #ifdef'd call per backend: static
/// registration inside a static library is silently dropped by the linker), and the others as
/// missing.
void register_drivers(Registry& registry);

/// The driver `dlscale run` trains with where none is named: LibTorch where this build has it,
/// else the first CPU backend it has (oneDNN, then Kokkos), else the float64 reference driver,
/// which every build has.
const char* default_driver_name();

}  // namespace dlscale
