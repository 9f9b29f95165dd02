// What the Kokkos driver's sources share: the spaces every View lives in, the GEMM wrapper over
// KokkosBlas::gemm, and the layer interface. Only drivers/kokkos/*.cpp include this header (it
// includes Kokkos), so the rest of the build stays Kokkos-free.
//
// Everything is written for any execution space: buffers are Views in the default execution
// space's memory space, kernels are KOKKOS_LAMBDAs that capture Views and scalars by value, and
// data crosses to and from the host only through deep_copy. Kernels are launched from free
// functions with explicit return types (never from private members or local classes), which is
// what nvcc's extended lambdas require under Kokkos' CUDA backend.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "drivers/driver.h"
#include "workloads/workload.h"

namespace dlscale::kk {

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemSpace = ExecSpace::memory_space;
using Device = Kokkos::Device<ExecSpace, MemSpace>;

/// A flat float buffer (reference-counted; a slice of another one keeps the whole alive).
using Floats = Kokkos::View<float*, Kokkos::LayoutRight, Device>;
/// Token ids and labels, as the harness hands them over.
using Ids = Kokkos::View<int64_t*, Kokkos::LayoutRight, Device>;
using Doubles = Kokkos::View<double*, Kokkos::LayoutRight, Device>;
/// One double on the device: the loss, written by a reduction without waiting for it.
using Scalar = Kokkos::View<double, Device>;

/// A 1-D launch over [begin, end) with 64-bit indices (activations outgrow int).
using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<int64_t>>;
/// Teams for per-channel, per-feature and per-row reductions.
using Team = Kokkos::TeamPolicy<ExecSpace>;
using Member = Team::member_type;

/// The sum, in double, of `value(i)` over one channel of a [rows][channels][inner] tensor: the
/// team's threads over the rows, their vector lanes along the contiguous inner extent. Every
/// member of the team gets the sum.
template <class Value>
KOKKOS_INLINE_FUNCTION double channel_sum(const Member& m, int64_t rows, int64_t channels, int64_t channel,
                                          int64_t inner, const Value& value) {
  double sum = 0;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(m, rows),
      [&](int64_t r, double& s) {
        const int64_t base = (r * channels + channel) * inner;
        double part = 0;
        Kokkos::parallel_reduce(
            Kokkos::ThreadVectorRange(m, inner), [&](int64_t i, double& t) { t += value(base + i); }, part);
        s += part;
      },
      sum);
  return sum;
}

// The math functions moved from Kokkos::Experimental to Kokkos in 3.7.
#if KOKKOS_VERSION >= 30700
namespace math = Kokkos;
#else
namespace math = Kokkos::Experimental;
#endif

/// Whether the driver's buffers live where the host cannot read them (CUDA device memory).
constexpr bool kOnDevice = !Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible;

/// An uninitialised buffer of `count` floats: every buffer is written before it is read.
Floats make_floats(const std::string& label, int64_t count);

/// Elements [offset, offset + count) of `v`, without a copy.
Floats slice(const Floats& v, int64_t offset, int64_t count);

/// The logistic function. Below z = -88.7 exp(-z) overflows to +inf and the result is exactly 0
/// (IEEE), where the overflow-free form exp(z) / (1 + exp(z)) gives denormals down to -103:
/// FCN-5's saturated sigmoids would then fill its activations and gradients with denormals, on
/// which OpenBLAS's GEMMs slow down (1.7x on its weight gradients: microcode assists on x86).
KOKKOS_INLINE_FUNCTION float sigmoid(float z) { return 1.0f / (1.0f + math::exp(-z)); }

/// db[o] = the sum of dy[r, o, i] over r and i, for dy of shape [rows, out, inner] (Linear and
/// LSTM: inner 1; convolution: inner = H*W). Overwrites db.
void bias_grad(Floats dy, Floats db, int64_t rows, int64_t out, int64_t inner);

/// A row-major matrix stored at `data`.
struct Mat {
  float* data = nullptr;
  int64_t rows = 0, cols = 0;
};

/// C = alpha op(A) op(B) + beta C on row-major matrices (KokkosBlas::gemm, whose BLAS TPL on the
/// host and cuBLAS TPL on CUDA it reaches for contiguous LayoutRight Views). A and B are given
/// as stored; op transposes when `trans_*` is set. Throws std::invalid_argument on mismatched
/// shapes, so a layer bug surfaces at set-up instead of as garbage.
void gemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b, float beta, const Mat& c);

/// A batch of activations: a flat buffer and its shape, batch first.
struct Activation {
  Floats data;
  std::vector<int64_t> shape;
  int64_t count() const;
};

/// A parameter tensor and its gradient: slices of the model's flat buffers (canonical layout).
struct ParamSlot {
  Floats value, grad;
};

/// What a forward pass is for. kTraining: batch norm normalises with the batch statistics and
/// folds them into its running ones, dropout draws masks. kInference (Model::evaluate): batch
/// norm normalises with its running statistics, dropout passes its input through, and no layer
/// changes any state.
enum class Pass { kTraining, kInference };

/// One layer of the network. Each layer owns its output and the gradient with respect to it;
/// the layer above writes that gradient (as its input gradient), the loss writes the last one.
class NetLayer {
 public:
  explicit NetLayer(std::string name) : name_(std::move(name)) {}
  virtual ~NetLayer() = default;
  NetLayer(const NetLayer&) = delete;
  NetLayer& operator=(const NetLayer&) = delete;

  const std::string& name() const { return name_; }
  /// Allocates the buffers for input `x` (batch first). `dx` is where backward() writes the
  /// input gradient; an empty View when nothing below needs it.
  virtual void build(const Activation& x, const Floats& dx) = 0;
  virtual void forward(Pass pass) = 0;
  /// Writes (never accumulates) the parameter gradients and, when requested, the input gradient;
  /// only after a kTraining forward pass.
  virtual void backward() = 0;
  /// Forgets what training passes accumulated (batch norm's running statistics), as a model
  /// does when it is loaded with new parameters.
  virtual void reset_statistics() {}
  const Activation& out() const { return y_; }
  const Floats& out_grad() const { return dy_; }

 protected:
  Activation y_;
  Floats dy_;

 private:
  std::string name_;
};

/// Builds the layer for `l` (any kind but kLstm). `slots` are its parameters in canonical order;
/// `tokens` is the model's token buffer (Embedding), updated by set_batch(); `seed` and `index`
/// seed the layer's random numbers (Dropout).
std::unique_ptr<NetLayer> make_layer(const std::string& name, const Layer& l, const std::vector<ParamSlot>& slots,
                                     const Ids* tokens, uint64_t seed, size_t index);

/// Builds the stacked LSTM `l` over a [N, T, l.in] input; `slots` hold w_ih, w_hh, bias per layer.
std::unique_ptr<NetLayer> make_lstm_layer(const std::string& name, const Layer& l, const std::vector<ParamSlot>& slots);

/// The loss over the network's output: softmax cross-entropy or sigmoid binary cross-entropy.
class Loss {
 public:
  Loss(LossKind kind, int64_t classes);
  /// `logits` is the network's output, `d_logits` the buffer its gradient goes to.
  void build(const Activation& logits, const Floats& d_logits, const Ids& labels);
  /// Queues the loss computation; value() waits for it.
  void forward();
  void backward();
  double value() const;
  /// The loss summed over the rows and the correct predictions among them (Model::evaluate);
  /// waits for them.
  Evaluation evaluate();

 private:
  /// Queues the loss, scaled by `scale` per row, into loss_.
  void queue_loss(double scale);

  LossKind kind_;
  int64_t classes_, rows_ = 0;
  Floats logits_, d_logits_;
  Ids labels_;
  Doubles log_sum_exp_;  // per row, softmax only
  Scalar loss_;
};

/// p -= lr g over the whole buffer.
void sgd(Floats params, Floats grads, float lr);

/// One Adam step (drivers/driver.h, Optimizer) over the whole buffer, with the moments `m`, `v`
/// of the same length; `t` counts the updates, 1 at the first.
void adam(Floats params, Floats grads, Floats m, Floats v, const Optimizer& opt, int64_t t);

}  // namespace dlscale::kk
