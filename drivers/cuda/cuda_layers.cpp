#include "drivers/cuda/cuda_layers.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "drivers/cuda/cuda_kernels.h"
#include "drivers/cuda/cuda_lstm.h"
#include "drivers/cuda/linear_gemms.h"

namespace dlscale::cuda {

namespace {

const float kOne = 1.0f, kZero = 0.0f;

int to_int(int64_t v) {
  if (v > INT32_MAX) throw std::invalid_argument(fmt::format("cuda driver: dimension {} exceeds the int range", v));
  return static_cast<int>(v);
}

/// An NCHW float tensor descriptor; shapes of fewer dimensions pad with ones ([n, f] -> [n, f, 1, 1]).
gpu::TensorDesc nchw(int64_t n, int64_t c, int64_t h = 1, int64_t w = 1, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  gpu::TensorDesc d;
  DLSCALE_CHECK_CUDA(
      cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, type, to_int(n), to_int(c), to_int(h), to_int(w)));
  return d;
}

gpu::TensorDesc nchw_of(int64_t n, const std::vector<int64_t>& per_sample) {
  if (per_sample.size() == 3) return nchw(n, per_sample[0], per_sample[1], per_sample[2]);
  return nchw(n, shape_elements(per_sample));
}

/// The descriptor of an element-wise layer's activations: their real shape (cuDNN kernels may
/// put N on a grid dimension, so it must not be the element count), with any sequence axis
/// folded into the batch ([n, T, f] -> [n*T, f, 1, 1]).
gpu::TensorDesc activation_desc(int64_t n, const std::vector<int64_t>& per_sample) {
  if (per_sample.size() == 2) return nchw(n * per_sample[0], per_sample[1]);
  return nchw_of(n, per_sample);
}

// ---------------------------------------------------------------------------------------------
// Linear: the three GEMMs of drivers/cuda/linear_gemms.h (which explains the operand orders).
class LinearLayer final : public GpuLayer {
 public:
  LinearLayer(LayerContext& ctx, const Layer& l, int64_t rows, const LayerParams& p)
      : ctx_(ctx), rows_(rows), in_(l.in), out_(l.out), p_(p), bias_(l.bias), gemms_(linear_gemms(rows, l.in, l.out)) {
    if (ctx.precision == Precision::kBf16) {
      x16_ = gpu::DeviceBuffer(static_cast<size_t>(rows * in_) * 2, ctx.memory);
      dy16_ = gpu::DeviceBuffer(static_cast<size_t>(rows * out_) * 2, ctx.memory);
    }
  }

  void forward(const float* x, float* y) override {
    if (bf16()) {
      to_bf16(x, x16_.get(), rows_ * in_, ctx_.stream);
      gemm(gemms_.forward, p_.bf16[0], x16_.get(), y);
    } else {
      gemm(gemms_.forward, p_.value[0], x, y);
    }
    if (bias_) add_bias_rows(y, p_.value[1], rows_, out_, ctx_.stream);
  }

  void backward(const float* x, const float*, const float* dy, float* dx) override {
    const void* dy_in = dy;
    const void* x_in = x;
    if (bf16()) {
      to_bf16(dy, dy16_.get(), rows_ * out_, ctx_.stream);
      dy_in = dy16_.get();
      x_in = x16_.get();  // converted in forward
    }
    gemm(gemms_.grad_weight, x_in, dy_in, p_.grad[0]);
    if (bias_) bias_grad_rows(dy, p_.grad[1], rows_, out_, ctx_.stream);
    if (dx != nullptr) gemm(gemms_.grad_input, bf16() ? p_.bf16[0] : p_.value[0], dy_in, dx);
  }

 private:
  bool bf16() const { return ctx_.precision == Precision::kBf16; }

  /// C = op(A) op(B) as `g` says, fp32 output; A and B are fp32, or bf16 under bf16.
  void gemm(const GemmCall& g, const void* a, const void* b, float* c) {
    const cublasOperation_t ta = g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (bf16()) {
      DLSCALE_CHECK_CUDA(cublasGemmEx(ctx_.cublas, ta, tb, to_int(g.m), to_int(g.n), to_int(g.k), &kOne, a, CUDA_R_16BF,
                                      to_int(g.lda), b, CUDA_R_16BF, to_int(g.ldb), &kZero, c, CUDA_R_32F,
                                      to_int(g.ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    } else {
      DLSCALE_CHECK_CUDA(cublasSgemm(ctx_.cublas, ta, tb, to_int(g.m), to_int(g.n), to_int(g.k), &kOne,
                                     static_cast<const float*>(a), to_int(g.lda), static_cast<const float*>(b),
                                     to_int(g.ldb), &kZero, c, to_int(g.ldc)));
    }
  }

  LayerContext& ctx_;
  int64_t rows_, in_, out_;
  LayerParams p_;
  bool bias_;
  LinearGemms gemms_;
  gpu::DeviceBuffer x16_, dy16_;  // bf16 copies of the input (kept for backward) and of dy
};

// ---------------------------------------------------------------------------------------------
// Convolution (cuDNN), algorithms chosen by cuDNN's find API on the real buffers.
class ConvLayer final : public GpuLayer {
 public:
  ConvLayer(LayerContext& ctx, int64_t n, int64_t c, int64_t h, int64_t w, int64_t out, int64_t k, int64_t stride,
            int64_t pad, bool bias, float* weight, float* dweight, void* weight16, float* b, float* db)
      : ctx_(ctx), n_(n), c_(c), out_(out), bias_(bias), w_(weight), dw_(dweight), w16_(weight16), b_(b), db_(db) {
    const cudnnDataType_t type = bf16() ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    x_desc_ = nchw(n, c, h, w, type);
    DLSCALE_CHECK_CUDA(
        cudnnSetFilter4dDescriptor(w_desc_, type, CUDNN_TENSOR_NCHW, to_int(out), to_int(c), to_int(k), to_int(k)));
    DLSCALE_CHECK_CUDA(cudnnSetConvolution2dDescriptor(conv_, to_int(pad), to_int(pad), to_int(stride), to_int(stride),
                                                       1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    int yn = 0, yc = 0, yh = 0, yw = 0;
    DLSCALE_CHECK_CUDA(cudnnGetConvolution2dForwardOutputDim(conv_, x_desc_, w_desc_, &yn, &yc, &yh, &yw));
    oh_ = yh;
    ow_ = yw;
    y_desc_ = nchw(n, out, yh, yw, type);
    x_elems_ = n * c * h * w;
    y_elems_ = n * out * oh_ * ow_;
    w_elems_ = out * c * k * k;
    if (bias) {
      bias_splits_ = bias_grad_splits(n, out);
      bias_scratch_ = gpu::DeviceBuffer(static_cast<size_t>(out * bias_splits_) * 4, ctx.memory);
    }
    key_ =
        fmt::format("{}x{}x{}x{} k{} o{} s{} p{} {}", n, c, h, w, k, out, stride, pad, precision_name(ctx.precision));
    if (bf16()) {
      // cuDNN's bf16 convolutions take bf16 in and out (fp32 accumulation); the model's
      // activations and gradients stay fp32, so they are converted at the layer's edges.
      x16_ = gpu::DeviceBuffer(static_cast<size_t>(x_elems_) * 2, ctx.memory);
      y16_ = gpu::DeviceBuffer(static_cast<size_t>(y_elems_) * 2, ctx.memory);
      dx16_ = gpu::DeviceBuffer(static_cast<size_t>(x_elems_) * 2, ctx.memory);
      dw16_ = gpu::DeviceBuffer(static_cast<size_t>(w_elems_) * 2, ctx.memory);
      dx32_ = gpu::DeviceBuffer(static_cast<size_t>(x_elems_) * 4, ctx.memory);
    }
  }

  int64_t out_height() const { return oh_; }
  int64_t out_width() const { return ow_; }

  size_t prepare(const float* x, float* y, float* dx, float* dy) override {
    auto found = ctx_.conv_algorithms->find(key_ + (dx != nullptr ? " dx" : ""));
    if (found == ctx_.conv_algorithms->end()) {
      found = ctx_.conv_algorithms->emplace(key_ + (dx != nullptr ? " dx" : ""), search(x, y, dx, dy)).first;
    }
    algo_ = found->second;
    return algo_.workspace_bytes;
  }

  void forward(const float* x, float* y) override { forward_to(x, y); }

  void backward(const float* x, const float*, const float* dy, float* dx) override { backward_into(x, dy, dx, false); }

  /// Backward that adds the input gradient to dx instead of overwriting it (ResNet shortcuts).
  void backward_into(const float* x, const float* dy, float* dx, bool accumulate) {
    const void* xin = x;
    const void* dyin = dy;
    if (bf16()) {
      to_bf16(dy, y16_.get(), y_elems_, ctx_.stream);  // y16_ is free after forward: reuse for dy
      dyin = y16_.get();
      xin = x16_.get();
    }
    set_math(algo_.backward_filter_math);
    void* dw = bf16() ? dw16_.get() : static_cast<void*>(dw_);
    DLSCALE_CHECK_CUDA(cudnnConvolutionBackwardFilter(ctx_.cudnn, &kOne, x_desc_, xin, y_desc_, dyin, conv_,
                                                      algo_.backward_filter, ctx_.workspace, ctx_.workspace_bytes,
                                                      &kZero, w_desc_, dw));
    if (bf16()) from_bf16(dw16_.get(), dw_, w_elems_, ctx_.stream);
    if (bias_) bias_grad_channels(dy, db_, n_, out_, oh_ * ow_, bias_scratch_.as(), bias_splits_, ctx_.stream);
    if (dx == nullptr) return;
    set_math(algo_.backward_data_math);
    if (bf16()) {
      DLSCALE_CHECK_CUDA(cudnnConvolutionBackwardData(ctx_.cudnn, &kOne, w_desc_, w16_, y_desc_, dyin, conv_,
                                                      algo_.backward_data, ctx_.workspace, ctx_.workspace_bytes, &kZero,
                                                      x_desc_, dx16_.get()));
      if (accumulate) {
        from_bf16(dx16_.get(), dx32_.as(), x_elems_, ctx_.stream);
        add_in_place(dx, dx32_.as(), x_elems_, ctx_.stream);
      } else {
        from_bf16(dx16_.get(), dx, x_elems_, ctx_.stream);
      }
      return;
    }
    const float beta = accumulate ? 1.0f : 0.0f;
    DLSCALE_CHECK_CUDA(cudnnConvolutionBackwardData(ctx_.cudnn, &kOne, w_desc_, w_, y_desc_, dy, conv_,
                                                    algo_.backward_data, ctx_.workspace, ctx_.workspace_bytes, &beta,
                                                    x_desc_, dx));
  }

 private:
  bool bf16() const { return ctx_.precision == Precision::kBf16; }

  void forward_to(const float* x, float* y) {
    set_math(algo_.forward_math);
    if (bf16()) {
      to_bf16(x, x16_.get(), x_elems_, ctx_.stream);
      DLSCALE_CHECK_CUDA(cudnnConvolutionForward(ctx_.cudnn, &kOne, x_desc_, x16_.get(), w_desc_, w16_, conv_,
                                                 algo_.forward, ctx_.workspace, ctx_.workspace_bytes, &kZero, y_desc_,
                                                 y16_.get()));
      from_bf16(y16_.get(), y, y_elems_, ctx_.stream);
    } else {
      DLSCALE_CHECK_CUDA(cudnnConvolutionForward(ctx_.cudnn, &kOne, x_desc_, x, w_desc_, w_, conv_, algo_.forward,
                                                 ctx_.workspace, ctx_.workspace_bytes, &kZero, y_desc_, y));
    }
    if (bias_) add_bias_channels(y, b_, n_, out_, oh_ * ow_, ctx_.stream);
  }

  void set_math(cudnnMathType_t math) { DLSCALE_CHECK_CUDA(cudnnSetConvolutionMathType(conv_, math)); }

  /// fp32 must not use tensor cores (TF32 would change the arithmetic); CUDNN_DEFAULT_MATH
  /// allows TF32 on fp32 data, as PyTorch's allow_tf32 does; bf16 data runs on tensor cores.
  cudnnMathType_t requested_math() const {
    switch (ctx_.precision) {
      case Precision::kFp32:
        return CUDNN_FMA_MATH;
      case Precision::kTf32:
        return CUDNN_DEFAULT_MATH;
      case Precision::kBf16:
        break;
    }
    return CUDNN_TENSOR_OP_MATH;
  }

  /// The math type to run a found algorithm with: under fp32 always FMA, whatever the search
  /// reports (CUDNN_DEFAULT_MATH would allow TF32 on Ampere and later).
  cudnnMathType_t math_for(cudnnMathType_t reported) const {
    return ctx_.precision == Precision::kFp32 ? CUDNN_FMA_MATH : reported;
  }

  bool acceptable(cudnnStatus_t status, cudnnMathType_t math) const {
    if (status != CUDNN_STATUS_SUCCESS) return false;
    return ctx_.precision != Precision::kFp32 ||
           (math != CUDNN_TENSOR_OP_MATH && math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
  }

  ConvAlgorithms search(const float* x, float* y, float* dx, float* dy) {
    ConvAlgorithms a;
    const void* xin = bf16() ? x16_.get() : static_cast<const void*>(x);
    void* yout = bf16() ? y16_.get() : static_cast<void*>(y);
    const void* w = bf16() ? w16_ : static_cast<const void*>(w_);
    void* dw = bf16() ? dw16_.get() : static_cast<void*>(dw_);
    const void* dyin = bf16() ? y16_.get() : static_cast<const void*>(dy);
    void* dxout = bf16() ? dx16_.get() : static_cast<void*>(dx);
    void* ws = ctx_.search_workspace;
    const size_t ws_bytes = ctx_.search_workspace_bytes;
    a.forward = choose<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
        "forward",
        [&](cudnnConvolutionFwdAlgoPerf_t* perf, int* count) {
          DLSCALE_CHECK_CUDA(cudnnFindConvolutionForwardAlgorithmEx(ctx_.cudnn, x_desc_, xin, w_desc_, w, conv_,
                                                                    y_desc_, yout, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                                    count, perf, ws, ws_bytes));
        },
        [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
          DLSCALE_CHECK_CUDA(
              cudnnGetConvolutionForwardWorkspaceSize(ctx_.cudnn, x_desc_, w_desc_, conv_, y_desc_, algo, bytes));
        },
        &a.forward_math, &a.workspace_bytes);
    a.backward_filter = choose<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
        "backward-filter",
        [&](cudnnConvolutionBwdFilterAlgoPerf_t* perf, int* count) {
          DLSCALE_CHECK_CUDA(cudnnFindConvolutionBackwardFilterAlgorithmEx(
              ctx_.cudnn, x_desc_, xin, y_desc_, dyin, conv_, w_desc_, dw, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
              count, perf, ws, ws_bytes));
        },
        [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
          DLSCALE_CHECK_CUDA(cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx_.cudnn, x_desc_, y_desc_, conv_,
                                                                            w_desc_, algo, bytes));
        },
        &a.backward_filter_math, &a.workspace_bytes);
    if (dx != nullptr) {
      a.backward_data = choose<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
          "backward-data",
          [&](cudnnConvolutionBwdDataAlgoPerf_t* perf, int* count) {
            DLSCALE_CHECK_CUDA(cudnnFindConvolutionBackwardDataAlgorithmEx(
                ctx_.cudnn, w_desc_, w, y_desc_, dyin, conv_, x_desc_, dxout, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                count, perf, ws, ws_bytes));
          },
          [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
            DLSCALE_CHECK_CUDA(cudnnGetConvolutionBackwardDataWorkspaceSize(ctx_.cudnn, w_desc_, y_desc_, conv_,
                                                                            x_desc_, algo, bytes));
          },
          &a.backward_data_math, &a.workspace_bytes);
    }
    return a;
  }

  /// One pass's search: `find(perf, &count)` runs cuDNN's find, the fastest usable result is
  /// kept, and `size(algo, &bytes)` sizes its workspace under the math type it will run with
  /// (which under fp32 may differ from the one the search reported). Grows `*workspace`.
  template <class Perf, int kCount, class Find, class Size>
  decltype(Perf::algo) choose(const char* pass, Find find, Size size, cudnnMathType_t* math, size_t* workspace) {
    Perf perf[kCount];
    int count = 0;
    set_math(requested_math());
    find(perf, &count);
    const Perf* best = pick(perf, count, pass);
    *math = math_for(best->mathType);
    size_t bytes = best->memory;
    set_math(*math);
    size(best->algo, &bytes);
    *workspace = std::max({*workspace, best->memory, bytes});
    return best->algo;
  }

  /// The fastest result cuDNN could run (results come sorted by time).
  template <class Perf>
  const Perf* pick(const Perf* perf, int count, const char* pass) const {
    for (int i = 0; i < count; ++i) {
      if (acceptable(perf[i].status, perf[i].mathType)) return &perf[i];
    }
    throw std::runtime_error(fmt::format("cuda driver: cuDNN found no usable {} algorithm for convolution {} ({})",
                                         pass, key_, precision_name(ctx_.precision)));
  }

  LayerContext& ctx_;
  int64_t n_, c_, out_, oh_ = 0, ow_ = 0, x_elems_ = 0, y_elems_ = 0, w_elems_ = 0;
  bool bias_;
  float* w_;
  float* dw_;
  void* w16_;
  float* b_;
  float* db_;
  std::string key_;
  gpu::TensorDesc x_desc_, y_desc_;
  gpu::FilterDesc w_desc_;
  gpu::ConvDesc conv_;
  ConvAlgorithms algo_;
  gpu::DeviceBuffer x16_, y16_, dx16_, dw16_;
  gpu::DeviceBuffer dx32_;  // bf16: the input gradient in fp32 before it is added to a shortcut's
  int64_t bias_splits_ = 1;
  gpu::DeviceBuffer bias_scratch_;  // per-slice partial sums of the bias gradient
};

// ---------------------------------------------------------------------------------------------
class MaxPoolLayer final : public GpuLayer {
 public:
  MaxPoolLayer(LayerContext& ctx, const Layer& l, int64_t n, const std::vector<int64_t>& in,
               const std::vector<int64_t>& out)
      : ctx_(ctx), x_desc_(nchw_of(n, in)), y_desc_(nchw_of(n, out)) {
    // Deterministic: on ties the gradient goes to one fixed input, run after run.
    DLSCALE_CHECK_CUDA(cudnnSetPooling2dDescriptor(pool_, CUDNN_POOLING_MAX_DETERMINISTIC, CUDNN_NOT_PROPAGATE_NAN,
                                                   to_int(l.kernel), to_int(l.kernel), to_int(l.padding),
                                                   to_int(l.padding), to_int(l.stride), to_int(l.stride)));
    int yn = 0, yc = 0, yh = 0, yw = 0;
    DLSCALE_CHECK_CUDA(cudnnGetPooling2dForwardOutputDim(pool_, x_desc_, &yn, &yc, &yh, &yw));
    if (yh != out[1] || yw != out[2]) {
      throw std::runtime_error(
          fmt::format("cuda driver: cuDNN pools to {}x{}, the workload expects {}x{}", yh, yw, out[1], out[2]));
    }
  }
  void forward(const float* x, float* y) override {
    DLSCALE_CHECK_CUDA(cudnnPoolingForward(ctx_.cudnn, pool_, &kOne, x_desc_, x, &kZero, y_desc_, y));
  }
  void backward(const float* x, const float* y, const float* dy, float* dx) override {
    if (dx == nullptr) return;
    DLSCALE_CHECK_CUDA(
        cudnnPoolingBackward(ctx_.cudnn, pool_, &kOne, y_desc_, y, y_desc_, dy, x_desc_, x, &kZero, x_desc_, dx));
  }

 private:
  LayerContext& ctx_;
  gpu::TensorDesc x_desc_, y_desc_;
  gpu::PoolDesc pool_;
};

class GlobalAvgPoolLayer final : public GpuLayer {
 public:
  GlobalAvgPoolLayer(LayerContext& ctx, int64_t n, const std::vector<int64_t>& in)
      : ctx_(ctx), channels_(n * in[0]), plane_(in[1] * in[2]) {}
  void forward(const float* x, float* y) override { global_avg_pool_forward(x, y, channels_, plane_, ctx_.stream); }
  void backward(const float*, const float*, const float* dy, float* dx) override {
    if (dx != nullptr) global_avg_pool_backward(dy, dx, channels_, plane_, ctx_.stream);
  }

 private:
  LayerContext& ctx_;
  int64_t channels_, plane_;
};

class ActivationLayer final : public GpuLayer {
 public:
  ActivationLayer(LayerContext& ctx, cudnnActivationMode_t mode, gpu::TensorDesc desc)
      : ctx_(ctx), desc_(std::move(desc)) {
    DLSCALE_CHECK_CUDA(cudnnSetActivationDescriptor(act_, mode, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  }
  void forward(const float* x, float* y) override {
    DLSCALE_CHECK_CUDA(cudnnActivationForward(ctx_.cudnn, act_, &kOne, desc_, x, &kZero, desc_, y));
  }
  void backward(const float* x, const float* y, const float* dy, float* dx) override {
    if (dx == nullptr) return;
    DLSCALE_CHECK_CUDA(
        cudnnActivationBackward(ctx_.cudnn, act_, &kOne, desc_, y, desc_, dy, desc_, x, &kZero, desc_, dx));
  }

 private:
  LayerContext& ctx_;
  gpu::TensorDesc desc_;
  gpu::ActivationDesc act_;
};

/// Inverted dropout (cuDNN scales kept elements by 1/(1-p)); each forward draws a new mask from
/// the generator state in `stream` (seeded per rank at the first build, carried on by later ones),
/// and backward reuses it (reserve space).
class DropoutLayer final : public GpuLayer {
 public:
  DropoutLayer(LayerContext& ctx, double p, gpu::TensorDesc desc, uint64_t seed, DropoutStream& stream)
      : ctx_(ctx), desc_(std::move(desc)) {
    size_t state_bytes = 0, reserve_bytes = 0;
    DLSCALE_CHECK_CUDA(cudnnDropoutGetStatesSize(ctx.cudnn, &state_bytes));
    DLSCALE_CHECK_CUDA(cudnnDropoutGetReserveSpaceSize(desc_, &reserve_bytes));
    reserve_ = gpu::DeviceBuffer(reserve_bytes, ctx.memory);
    if (stream.states.get() == nullptr) {
      stream.states = gpu::DeviceBuffer(state_bytes, ctx.memory);
      DLSCALE_CHECK_CUDA(cudnnSetDropoutDescriptor(dropout_, ctx.cudnn, static_cast<float>(p), stream.states.get(),
                                                   state_bytes, seed));
    } else {  // the generator as the last build left it, not seeded again
      DLSCALE_CHECK_CUDA(cudnnRestoreDropoutDescriptor(dropout_, ctx.cudnn, static_cast<float>(p), stream.states.get(),
                                                       state_bytes, seed));
    }
  }
  void forward(const float* x, float* y) override {
    DLSCALE_CHECK_CUDA(cudnnDropoutForward(ctx_.cudnn, dropout_, desc_, x, desc_, y, reserve_.get(), reserve_.bytes()));
  }
  /// The identity, drawing no mask (the generator's state is left for the next training step).
  void infer(const float* x, float* y) override {
    size_t bytes = 0;
    DLSCALE_CHECK_CUDA(cudnnGetTensorSizeInBytes(desc_, &bytes));
    DLSCALE_CHECK_CUDA(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, ctx_.stream));
  }
  void backward(const float*, const float*, const float* dy, float* dx) override {
    if (dx == nullptr) return;
    DLSCALE_CHECK_CUDA(
        cudnnDropoutBackward(ctx_.cudnn, dropout_, desc_, dy, desc_, dx, reserve_.get(), reserve_.bytes()));
  }

 private:
  LayerContext& ctx_;
  gpu::TensorDesc desc_;
  gpu::DropoutDesc dropout_;
  gpu::DeviceBuffer reserve_;
};

/// Batch norm over (N, H, W), eps 1e-5. Training normalises with the batch's statistics and
/// moves the running ones (the model's, at `running_mean`/`running_var`) towards them with
/// momentum 0.1 and the unbiased variance, as PyTorch (which calls the same cuDNN function);
/// inference normalises with the running ones.
class BatchNormLayer final : public GpuLayer {
 public:
  BatchNormLayer(LayerContext& ctx, int64_t n, int64_t c, int64_t h, int64_t w, float* scale, float* bias,
                 float* dscale, float* dbias, float* running_mean, float* running_var)
      : ctx_(ctx),
        x_desc_(nchw(n, c, h, w)),
        scale_(scale),
        bias_(bias),
        dscale_(dscale),
        dbias_(dbias),
        running_mean_(running_mean),
        running_var_(running_var),
        saved_mean_(static_cast<size_t>(c) * 4, ctx.memory),
        saved_inv_var_(static_cast<size_t>(c) * 4, ctx.memory) {
    DLSCALE_CHECK_CUDA(cudnnDeriveBNTensorDescriptor(param_desc_, x_desc_, CUDNN_BATCHNORM_SPATIAL));
  }
  void forward(const float* x, float* y) override {
    DLSCALE_CHECK_CUDA(cudnnBatchNormalizationForwardTraining(
        ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_desc_, x, x_desc_, y, param_desc_, scale_, bias_,
        kMomentum, running_mean_, running_var_, kEps, saved_mean_.get(), saved_inv_var_.get()));
  }
  void infer(const float* x, float* y) override {
    DLSCALE_CHECK_CUDA(cudnnBatchNormalizationForwardInference(ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero,
                                                               x_desc_, x, x_desc_, y, param_desc_, scale_, bias_,
                                                               running_mean_, running_var_, kEps));
  }
  void backward(const float* x, const float*, const float* dy, float* dx) override {
    // cuDNN always computes dx here; a batch norm is never a network's first layer.
    DLSCALE_CHECK_CUDA(cudnnBatchNormalizationBackward(
        ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero, x_desc_, x, x_desc_, dy, x_desc_, dx,
        param_desc_, scale_, dscale_, dbias_, kEps, saved_mean_.get(), saved_inv_var_.get()));
  }

 private:
  static constexpr double kEps = 1e-5, kMomentum = 0.1;
  LayerContext& ctx_;
  gpu::TensorDesc x_desc_, param_desc_;
  float *scale_, *bias_, *dscale_, *dbias_;
  float *running_mean_, *running_var_;  // the model's
  gpu::DeviceBuffer saved_mean_, saved_inv_var_;
};

/// ResNet v1.5 bottleneck (workloads/workload.h), built from the layers above. It keeps every
/// intermediate activation for backward, as autograd does.
class BottleneckLayer final : public GpuLayer {
 public:
  BottleneckLayer(LayerContext& ctx, const Layer& l, int64_t n, const std::vector<int64_t>& in,
                  const std::vector<int64_t>& out, const LayerParams& p)
      : ctx_(ctx), n_(n), in_elems_(n * shape_elements(in)), out_elems_(n * shape_elements(out)) {
    const int64_t h = in[1], w = in[2], oh = out[1], ow = out[2];
    const auto bf = [&](size_t i) { return p.bf16.empty() ? nullptr : p.bf16[i]; };
    conv1_ = std::make_unique<ConvLayer>(ctx, n, l.in, h, w, l.mid, 1, 1, 0, false, p.value[0], p.grad[0], bf(0),
                                         nullptr, nullptr);
    bn1_ = std::make_unique<BatchNormLayer>(ctx, n, l.mid, h, w, p.value[1], p.value[2], p.grad[1], p.grad[2],
                                            p.running[0], p.running[1]);
    conv2_ = std::make_unique<ConvLayer>(ctx, n, l.mid, h, w, l.mid, 3, l.stride, 1, false, p.value[3], p.grad[3],
                                         bf(3), nullptr, nullptr);
    bn2_ = std::make_unique<BatchNormLayer>(ctx, n, l.mid, oh, ow, p.value[4], p.value[5], p.grad[4], p.grad[5],
                                            p.running[2], p.running[3]);
    conv3_ = std::make_unique<ConvLayer>(ctx, n, l.mid, oh, ow, l.out, 1, 1, 0, false, p.value[6], p.grad[6], bf(6),
                                         nullptr, nullptr);
    bn3_ = std::make_unique<BatchNormLayer>(ctx, n, l.out, oh, ow, p.value[7], p.value[8], p.grad[7], p.grad[8],
                                            p.running[4], p.running[5]);
    relu_mid1_ = std::make_unique<ActivationLayer>(ctx, CUDNN_ACTIVATION_RELU, nchw(n, l.mid, h, w));
    relu_mid2_ = std::make_unique<ActivationLayer>(ctx, CUDNN_ACTIVATION_RELU, nchw(n, l.mid, oh, ow));
    relu_out_ = std::make_unique<ActivationLayer>(ctx, CUDNN_ACTIVATION_RELU, nchw(n, l.out, oh, ow));
    if (p.value.size() > 9) {
      down_ = std::make_unique<ConvLayer>(ctx, n, l.in, h, w, l.out, 1, l.stride, 0, false, p.value[9], p.grad[9],
                                          bf(9), nullptr, nullptr);
      down_bn_ = std::make_unique<BatchNormLayer>(ctx, n, l.out, oh, ow, p.value[10], p.value[11], p.grad[10],
                                                  p.grad[11], p.running[6], p.running[7]);
    }
    const auto buffer = [&](int64_t elems) { return gpu::DeviceBuffer(static_cast<size_t>(elems) * 4, ctx.memory); };
    const int64_t mid1 = n * l.mid * h * w, mid2 = n * l.mid * oh * ow;
    for (gpu::DeviceBuffer* b : {&c1_, &b1_, &r1_, &dc1_, &db1_, &dr1_}) *b = buffer(mid1);
    for (gpu::DeviceBuffer* b : {&c2_, &b2_, &r2_, &dc2_, &db2_, &dr2_}) *b = buffer(mid2);
    for (gpu::DeviceBuffer* b : {&c3_, &b3_, &sum_, &dsum_, &dc3_}) *b = buffer(out_elems_);
    if (down_) {
      for (gpu::DeviceBuffer* b : {&cd_, &bd_, &dcd_}) *b = buffer(out_elems_);
    }
  }

  size_t prepare(const float* x, float*, float* dx, float*) override {
    // Without a dx (a block as a network's first layer) the backward-data searches are skipped.
    size_t ws = conv1_->prepare(x, c1_.as(), dx, dc1_.as());
    ws = std::max(ws, conv2_->prepare(r1_.as(), c2_.as(), dr1_.as(), dc2_.as()));
    ws = std::max(ws, conv3_->prepare(r2_.as(), c3_.as(), dr2_.as(), dc3_.as()));
    if (down_) ws = std::max(ws, down_->prepare(x, cd_.as(), dx, dcd_.as()));
    return ws;
  }

  void forward(const float* x, float* y) override { run(x, y, true); }
  void infer(const float* x, float* y) override { run(x, y, false); }

  void backward(const float* x, const float* y, const float* dy, float* dx) override {
    relu_out_->backward(sum_.as(), y, dy, dsum_.as());
    // Main branch; dsum is also bn3's output gradient.
    bn3_->backward(c3_.as(), b3_.as(), dsum_.as(), dc3_.as());
    conv3_->backward(r2_.as(), c3_.as(), dc3_.as(), dr2_.as());
    relu_mid2_->backward(b2_.as(), r2_.as(), dr2_.as(), db2_.as());
    bn2_->backward(c2_.as(), b2_.as(), db2_.as(), dc2_.as());
    conv2_->backward(r1_.as(), c2_.as(), dc2_.as(), dr1_.as());
    relu_mid1_->backward(b1_.as(), r1_.as(), dr1_.as(), db1_.as());
    bn1_->backward(c1_.as(), b1_.as(), db1_.as(), dc1_.as());
    conv1_->backward(x, c1_.as(), dc1_.as(), dx);
    // Shortcut: its gradient adds to the main branch's.
    if (down_) {
      down_bn_->backward(cd_.as(), bd_.as(), dsum_.as(), dcd_.as());
      down_->backward_into(x, dcd_.as(), dx, /*accumulate=*/true);
    } else if (dx != nullptr) {
      add_in_place(dx, dsum_.as(), in_elems_, ctx_.stream);
    }
  }

 private:
  /// The block's forward pass; only its batch norms differ between training and inference.
  void run(const float* x, float* y, bool training) {
    const auto norm = [training](BatchNormLayer& bn, const float* in, float* out) {
      if (training) {
        bn.forward(in, out);
      } else {
        bn.infer(in, out);
      }
    };
    conv1_->forward(x, c1_.as());
    norm(*bn1_, c1_.as(), b1_.as());
    relu_mid1_->forward(b1_.as(), r1_.as());
    conv2_->forward(r1_.as(), c2_.as());
    norm(*bn2_, c2_.as(), b2_.as());
    relu_mid2_->forward(b2_.as(), r2_.as());
    conv3_->forward(r2_.as(), c3_.as());
    norm(*bn3_, c3_.as(), b3_.as());
    const float* shortcut = x;
    if (down_) {
      down_->forward(x, cd_.as());
      norm(*down_bn_, cd_.as(), bd_.as());
      shortcut = bd_.as();
    }
    DLSCALE_CHECK_CUDA(cudaMemcpyAsync(sum_.get(), b3_.get(), static_cast<size_t>(out_elems_) * 4,
                                       cudaMemcpyDeviceToDevice, ctx_.stream));
    add_in_place(sum_.as(), shortcut, out_elems_, ctx_.stream);
    relu_out_->forward(sum_.as(), y);
  }

  LayerContext& ctx_;
  int64_t n_, in_elems_, out_elems_;
  std::unique_ptr<ConvLayer> conv1_, conv2_, conv3_, down_;
  std::unique_ptr<BatchNormLayer> bn1_, bn2_, bn3_, down_bn_;
  std::unique_ptr<ActivationLayer> relu_mid1_, relu_mid2_, relu_out_;
  // Forward activations (c: conv out, b: batch-norm out, r: ReLU out) and their gradients.
  gpu::DeviceBuffer c1_, b1_, r1_, c2_, b2_, r2_, c3_, b3_, cd_, bd_, sum_;
  gpu::DeviceBuffer dc1_, db1_, dr1_, dc2_, db2_, dr2_, dc3_, dcd_, dsum_;
};

/// Token ids -> rows of the table. The ids come from the model's token buffer.
class EmbeddingLayer final : public GpuLayer {
 public:
  EmbeddingLayer(LayerContext& ctx, const Layer& l, int64_t count, const int64_t* tokens, const LayerParams& p)
      : ctx_(ctx), count_(count), dim_(l.out), table_elems_(l.in * l.out), tokens_(tokens), p_(p) {}
  void forward(const float*, float* y) override {
    embedding_forward(tokens_, p_.value[0], y, count_, dim_, ctx_.stream);
  }
  void backward(const float*, const float*, const float* dy, float*) override {
    DLSCALE_CHECK_CUDA(cudaMemsetAsync(p_.grad[0], 0, static_cast<size_t>(table_elems_) * 4, ctx_.stream));
    embedding_backward(tokens_, dy, p_.grad[0], count_, dim_, ctx_.stream);
  }

 private:
  LayerContext& ctx_;
  int64_t count_, dim_, table_elems_;
  const int64_t* tokens_;
  LayerParams p_;
};

}  // namespace

std::unique_ptr<GpuLayer> make_layer(LayerContext& ctx, const Layer& l, int64_t n, const std::vector<int64_t>& in,
                                     const std::vector<int64_t>& out, const LayerParams& params, const int64_t* tokens,
                                     uint64_t seed, DropoutStream& dropout) {
  switch (l.kind) {
    case LayerKind::kLinear:
      // Over the last dimension: every leading dimension (batch, steps) is a row.
      return std::make_unique<LinearLayer>(ctx, l, n * shape_elements(in) / l.in, params);
    case LayerKind::kConv2d:
      return std::make_unique<ConvLayer>(ctx, n, in[0], in[1], in[2], l.out, l.kernel, l.stride, l.padding, l.bias,
                                         params.value[0], params.grad[0],
                                         params.bf16.empty() ? nullptr : params.bf16[0],
                                         l.bias ? params.value[1] : nullptr, l.bias ? params.grad[1] : nullptr);
    case LayerKind::kMaxPool2d:
      return std::make_unique<MaxPoolLayer>(ctx, l, n, in, out);
    case LayerKind::kGlobalAvgPool:
      return std::make_unique<GlobalAvgPoolLayer>(ctx, n, in);
    case LayerKind::kReLU:
      return std::make_unique<ActivationLayer>(ctx, CUDNN_ACTIVATION_RELU, activation_desc(n, in));
    case LayerKind::kSigmoid:
      return std::make_unique<ActivationLayer>(ctx, CUDNN_ACTIVATION_SIGMOID, activation_desc(n, in));
    case LayerKind::kTanh:
      return std::make_unique<ActivationLayer>(ctx, CUDNN_ACTIVATION_TANH, activation_desc(n, in));
    case LayerKind::kDropout:
      return std::make_unique<DropoutLayer>(ctx, l.p, activation_desc(n, in), seed, dropout);
    case LayerKind::kBatchNorm2d:
      return std::make_unique<BatchNormLayer>(ctx, n, in[0], in[1], in[2], params.value[0], params.value[1],
                                              params.grad[0], params.grad[1], params.running[0], params.running[1]);
    case LayerKind::kBottleneck:
      return std::make_unique<BottleneckLayer>(ctx, l, n, in, out, params);
    case LayerKind::kEmbedding:
      return std::make_unique<EmbeddingLayer>(ctx, l, n * shape_elements(in), tokens, params);
    case LayerKind::kLstm:
      return make_lstm_layer(ctx, l, n, in[0], params);
    case LayerKind::kFlatten:
      break;  // the model aliases its buffers; no layer runs
  }
  throw std::logic_error("cuda driver: make_layer called for a layer without work");
}

}  // namespace dlscale::cuda
