// What every part of the oneDNN driver shares: the engine and stream, activations paired with
// their gradients, parameter slices of the flat buffers, layout staging through reorders made
// once, error context, and the NetLayer interface the model chains (named so as not to clash
// with dlscale::Layer, the workload's description of a layer).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>

/// Compiles a plain loop once per x86 vector width and picks the widest the CPU has when the
/// library loads (GCC/Clang function multiversioning), so that the driver's own memory-bound
/// loops are not held back by the baseline SSE2 code of a portable build.
#if defined(__GNUC__) && defined(__x86_64__)
#define DLSCALE_ONEDNN_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DLSCALE_ONEDNN_MULTIVERSION
#endif

namespace dlscale::onednn {

using dnnl::memory;
using Args = std::unordered_map<int, memory>;

/// The engine and stream every primitive of one model runs on, the batch being built, and the
/// kind of forward pass running.
struct Env {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  int64_t batch = 0;
  /// true: a training pass (batch norm on batch statistics, folding them into its running ones;
  /// dropout draws masks). false: inference (Model::evaluate): batch norm on its running
  /// statistics, dropout passes its input through, and no layer changes any state.
  bool training = true;
  /// The operand type of the layers that do a model's arithmetic (matmul, convolution, LSTM):
  /// f32, or bf16 for mixed precision. Everything else stays f32: activations between layers,
  /// their gradients, the products' results (fp32 accumulation), parameters, loss and softmax.
  memory::data_type compute = memory::data_type::f32;
};

/// An activation and its gradient, both in the activation's memory descriptor. `grad` is empty
/// where no gradient flows (the network's input, layers below the first parameterised one).
struct Tensor {
  memory value;
  memory grad;
};

/// One parameter tensor's slices of the model's flat parameter and gradient buffers, which hold
/// the canonical layout (workloads/workload.h).
struct ParamSlot {
  float* value = nullptr;
  float* grad = nullptr;
};

/// Counts parameter changes (load_parameters, update), so that a layer keeping a reordered copy
/// of its weights redoes the reorder only when the canonical weights have changed.
using ParamVersion = const uint64_t*;

/// Row-major f32 descriptor of `dims` (the canonical layout of parameters and plain activations).
memory::desc plain_md(const memory::dims& dims);
/// `md` with its elements of type `type`, in the same layout (strides and blocking count elements).
memory::desc with_type(const memory::desc& md, memory::data_type type);
/// Elements of `dims`.
int64_t product(const memory::dims& dims);
/// A memory of `md` over an existing buffer (oneDNN does not take ownership).
memory wrap(const Env& env, const memory::desc& md, void* data);
/// A library-owned memory of `md`.
memory allocate(const Env& env, const memory::desc& md);
/// A fresh output tensor of `md`, with a gradient buffer when `with_grad`.
Tensor allocate_tensor(const Env& env, const memory::desc& md, bool with_grad);
/// `t` seen through another descriptor of the same size over the same buffers (a reshape of a
/// plain tensor); the original must outlive the view.
Tensor view(const Env& env, const Tensor& t, const memory::desc& md);
/// Fills a memory's whole buffer (padding included) with zeros.
void zero(const memory& m);

/// Runs `make`, prefixing any oneDNN error with `what` (the layer and the primitive), and turning
/// oneDNN's out-of-memory status into dlscale's OutOfMemory.
[[noreturn]] void rethrow_with_context(const std::string& what, const dnnl::error& e);
template <class F>
auto with_context(const std::string& what, F&& make) {
  try {
    return make();
  } catch (const dnnl::error& e) {
    rethrow_with_context(what, e);
  }
}

/// Which way a Staged memory copies: into the primitive's layout before it reads (kIn), or out
/// of it after it wrote (kOut).
enum class Flow { kIn, kOut };

/// A memory in the layout a primitive wants, connected to the memory the rest of the network
/// (or the flat parameter buffer) uses: the same object when the descriptors agree, otherwise a
/// private buffer and one reorder, created once, that copies in or out.
class Staged {
 public:
  Staged() = default;
  Staged(const Env& env, const memory& outer, const memory::desc& want, Flow flow);
  const memory& mem() const { return inner_; }
  bool copies() const { return static_cast<bool>(reorder_); }
  /// kIn: outer -> inner; kOut: inner -> outer. Nothing when the two are the same memory.
  void sync(const Env& env) const;

 private:
  memory inner_;
  dnnl::reorder reorder_;
  Args args_;
};

/// An activation staged into a primitive's layout: its value is copied in before the forward
/// pass and its gradient copied back after the backward pass.
class StagedTensor {
 public:
  StagedTensor() = default;
  StagedTensor(const Env& env, const Tensor& outer, const memory::desc& want);
  const Tensor& tensor() const { return inner_; }
  void forward(const Env& env) const { value_.sync(env); }
  void backward(const Env& env) const { grad_.sync(env); }

 private:
  Staged value_, grad_;
  Tensor inner_;
};

/// One layer of the network (or a piece of a composite layer). build() creates every primitive
/// and buffer for one batch size and allocates the output; forward() and backward() only
/// execute. backward() reads out().grad and, when the input tensor given to build() has a
/// gradient, overwrites it (gradients of parameters are overwritten too, never accumulated).
class NetLayer {
 public:
  explicit NetLayer(std::string name) : name_(std::move(name)) {}
  virtual ~NetLayer() = default;
  NetLayer(const NetLayer&) = delete;
  NetLayer& operator=(const NetLayer&) = delete;

  /// Creates the primitives for `in` (re-run when the batch size changes). The output gets a
  /// gradient buffer when `grad_out`.
  virtual void build(const Env& env, const Tensor& in, bool grad_out) = 0;
  virtual void forward(const Env& env) = 0;
  virtual void backward(const Env& env) = 0;
  /// Makes backward() read its output gradient from `grad` (same descriptor as out().value)
  /// instead of its own buffer, so that a composite layer can hand one gradient to two
  /// consumers without copying it. Returns false where the layer cannot (the default).
  virtual bool rebind_output_grad(const memory& /*grad*/) { return false; }
  /// Forgets what training passes accumulated (batch norm's running statistics), as a model
  /// does when it is loaded with new parameters.
  virtual void reset_statistics() {}

  const Tensor& out() const { return out_; }
  const std::string& name() const { return name_; }

 protected:
  Tensor out_;

 private:
  std::string name_;
};

}  // namespace dlscale::onednn
