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

gpu::TensorDesc nchw_of(int64_t n, const std::vector<int64_t>& per_sample, cudnnDataType_t type) {
  if (per_sample.size() == 3) return nchw(n, per_sample[0], per_sample[1], per_sample[2], type);
  return nchw(n, shape_elements(per_sample), 1, 1, type);
}

/// The descriptor of an element-wise layer's activations: their real shape (cuDNN kernels may
/// put N on a grid dimension, so it must not be the element count), with any sequence axis
/// folded into the batch ([n, T, f] -> [n*T, f, 1, 1]).
gpu::TensorDesc activation_desc(int64_t n, const std::vector<int64_t>& per_sample, cudnnDataType_t type) {
  if (per_sample.size() == 2) return nchw(n * per_sample[0], per_sample[1], 1, 1, type);
  return nchw_of(n, per_sample, type);
}

// ---------------------------------------------------------------------------------------------
// Linear: the three GEMMs of drivers/cuda/linear_gemms.h (which explains the operand orders).
// Under bf16 the products take bf16 operands (the step's bf16 copy of W, the bf16 activations)
// and accumulate in fp32; Y and dX are written as bf16, dW straight into the fp32 gradient.
class LinearLayer final : public GpuLayer {
 public:
  LinearLayer(LayerContext& ctx, const Layer& l, int64_t rows, const LayerParams& p)
      : ctx_(ctx), rows_(rows), in_(l.in), out_(l.out), p_(p), bias_(l.bias), gemms_(linear_gemms(rows, l.in, l.out)) {}

  void forward(const void* x, void* y) override {
    gemm(gemms_.forward, weight(), x, y, ctx_.act);
    if (bias_) add_bias_rows(ctx_.act, y, p_.value[1], rows_, out_, ctx_.stream);
  }

  void backward(const void* x, const void*, const void* dy, void* dx) override {
    gemm(gemms_.grad_weight, x, dy, p_.grad[0], Act::kFloat);
    if (bias_) bias_grad_rows(ctx_.act, dy, p_.grad[1], rows_, out_, ctx_.stream);
    if (dx != nullptr) gemm(gemms_.grad_input, weight(), dy, dx, ctx_.act);
  }

 private:
  bool bf16() const { return ctx_.precision == Precision::kBf16; }
  const void* weight() const { return bf16() ? p_.bf16[0] : static_cast<const void*>(p_.value[0]); }

  /// C = op(A) op(B) as `g` says, C of type `c_type`; A and B are fp32, or bf16 under bf16.
  void gemm(const GemmCall& g, const void* a, const void* b, void* c, Act c_type) {
    const cublasOperation_t ta = g.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = g.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (bf16()) {
      const cudaDataType c_data = c_type == Act::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
      DLSCALE_CHECK_CUDA(cublasGemmEx(ctx_.cublas, ta, tb, to_int(g.m), to_int(g.n), to_int(g.k), &kOne, a, CUDA_R_16BF,
                                      to_int(g.lda), b, CUDA_R_16BF, to_int(g.ldb), &kZero, c, c_data, to_int(g.ldc),
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    } else {
      DLSCALE_CHECK_CUDA(cublasSgemm(ctx_.cublas, ta, tb, to_int(g.m), to_int(g.n), to_int(g.k), &kOne,
                                     static_cast<const float*>(a), to_int(g.lda), static_cast<const float*>(b),
                                     to_int(g.ldb), &kZero, static_cast<float*>(c), to_int(g.ldc)));
    }
  }

  LayerContext& ctx_;
  int64_t rows_, in_, out_;
  LayerParams p_;
  bool bias_;
  LinearGemms gemms_;
};

// ---------------------------------------------------------------------------------------------
// Convolution (cuDNN), algorithms chosen by cuDNN's find API on the real buffers. Under bf16 the
// activations, their gradients and the step's weight copy are bf16 (fp32 accumulation); cuDNN
// writes the weight gradient in the filter's type, bf16, which is then widened into the fp32
// gradient buffer.
class ConvLayer final : public GpuLayer {
 public:
  ConvLayer(LayerContext& ctx, int64_t n, int64_t c, int64_t h, int64_t w, int64_t out, int64_t k, int64_t stride,
            int64_t pad, bool bias, float* weight, float* dweight, void* weight16, float* b, float* db)
      : ctx_(ctx), n_(n), out_(out), bias_(bias), w_(weight), dw_(dweight), w16_(weight16), b_(b), db_(db) {
    const cudnnDataType_t type = ctx.act_cudnn;
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
    w_elems_ = out * c * k * k;
    if (bias) {
      bias_splits_ = channel_splits(n, out);
      bias_scratch_ = gpu::DeviceBuffer(static_cast<size_t>(out * bias_splits_) * 4, ctx.memory);
    }
    key_ =
        fmt::format("{}x{}x{}x{} k{} o{} s{} p{} {}", n, c, h, w, k, out, stride, pad, precision_name(ctx.precision));
    if (bf16()) dw16_ = gpu::DeviceBuffer(static_cast<size_t>(w_elems_) * 2, ctx.memory);
  }

  int64_t out_height() const { return oh_; }
  int64_t out_width() const { return ow_; }

  size_t prepare(const void* x, void* y, void* dx, void* dy) override {
    auto found = ctx_.conv_algorithms->find(key_ + (dx != nullptr ? " dx" : ""));
    if (found == ctx_.conv_algorithms->end()) {
      found = ctx_.conv_algorithms->emplace(key_ + (dx != nullptr ? " dx" : ""), search(x, y, dx, dy)).first;
    }
    algo_ = found->second;
    return algo_.workspace_bytes;
  }

  void forward(const void* x, void* y) override {
    set_math(algo_.forward_math);
    DLSCALE_CHECK_CUDA(cudnnConvolutionForward(ctx_.cudnn, &kOne, x_desc_, x, w_desc_, weight(), conv_, algo_.forward,
                                               ctx_.workspace, ctx_.workspace_bytes, &kZero, y_desc_, y));
    if (bias_) add_bias_channels(ctx_.act, y, b_, n_, out_, oh_ * ow_, ctx_.stream);
  }

  void backward(const void* x, const void*, const void* dy, void* dx) override { backward_into(x, dy, dx, false); }

  /// Backward that adds the input gradient to dx instead of overwriting it (ResNet shortcuts).
  void backward_into(const void* x, const void* dy, void* dx, bool accumulate) {
    set_math(algo_.backward_filter_math);
    DLSCALE_CHECK_CUDA(cudnnConvolutionBackwardFilter(ctx_.cudnn, &kOne, x_desc_, x, y_desc_, dy, conv_,
                                                      algo_.backward_filter, ctx_.workspace, ctx_.workspace_bytes,
                                                      &kZero, w_desc_, weight_gradient()));
    if (bf16()) from_bf16(dw16_.get(), dw_, w_elems_, ctx_.stream);
    if (bias_) {
      bias_grad_channels(ctx_.act, dy, db_, n_, out_, oh_ * ow_, bias_scratch_.as(), bias_splits_, ctx_.stream);
    }
    if (dx == nullptr) return;
    set_math(algo_.backward_data_math);
    const float beta = accumulate ? 1.0f : 0.0f;
    DLSCALE_CHECK_CUDA(cudnnConvolutionBackwardData(ctx_.cudnn, &kOne, w_desc_, weight(), y_desc_, dy, conv_,
                                                    algo_.backward_data, ctx_.workspace, ctx_.workspace_bytes, &beta,
                                                    x_desc_, dx));
  }

 private:
  bool bf16() const { return ctx_.precision == Precision::kBf16; }
  /// The weights the products read: the step's bf16 copy under bf16, else the fp32 values.
  const void* weight() const { return bf16() ? w16_ : static_cast<const void*>(w_); }
  /// Where cuDNN writes the weight gradient: in the filter's type.
  void* weight_gradient() const { return bf16() ? dw16_.get() : static_cast<void*>(dw_); }

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

  ConvAlgorithms search(const void* xin, void* yout, void* dxout, void* dyin) {
    ConvAlgorithms a;
    const void* w = weight();
    void* dw = weight_gradient();
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
    if (dxout != nullptr) {
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
  int64_t n_, out_, oh_ = 0, ow_ = 0, w_elems_ = 0;
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
  gpu::DeviceBuffer dw16_;  // bf16: the weight gradient as cuDNN writes it, before it is widened
  int64_t bias_splits_ = 1;
  gpu::DeviceBuffer bias_scratch_;  // per-slice partial sums of the bias gradient
};

// ---------------------------------------------------------------------------------------------
class MaxPoolLayer final : public GpuLayer {
 public:
  MaxPoolLayer(LayerContext& ctx, const Layer& l, int64_t n, const std::vector<int64_t>& in,
               const std::vector<int64_t>& out)
      : ctx_(ctx), x_desc_(nchw_of(n, in, ctx.act_cudnn)), y_desc_(nchw_of(n, out, ctx.act_cudnn)) {
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
  void forward(const void* x, void* y) override {
    DLSCALE_CHECK_CUDA(cudnnPoolingForward(ctx_.cudnn, pool_, &kOne, x_desc_, x, &kZero, y_desc_, y));
  }
  void backward(const void* x, const void* y, const void* dy, void* dx) override {
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
  void forward(const void* x, void* y) override {
    global_avg_pool_forward(ctx_.act, x, y, channels_, plane_, ctx_.stream);
  }
  void backward(const void*, const void*, const void* dy, void* dx) override {
    if (dx != nullptr) global_avg_pool_backward(ctx_.act, dy, dx, channels_, plane_, ctx_.stream);
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
  void forward(const void* x, void* y) override {
    DLSCALE_CHECK_CUDA(cudnnActivationForward(ctx_.cudnn, act_, &kOne, desc_, x, &kZero, desc_, y));
  }
  void backward(const void* x, const void* y, const void* dy, void* dx) override {
    if (dx == nullptr) return;
    DLSCALE_CHECK_CUDA(
        cudnnActivationBackward(ctx_.cudnn, act_, &kOne, desc_, y, desc_, dy, desc_, x, &kZero, desc_, dx));
  }

 private:
  LayerContext& ctx_;
  gpu::TensorDesc desc_;
  gpu::ActivationDesc act_;
};

/// Inverted dropout (kept elements scaled by 1/(1-p)) with the driver's own counter-based
/// generator: cuDNN's dropout refuses bf16 data, and one generator for every precision keeps the
/// masks a function of (seed, step) alone. Each training forward draws the next mask of the
/// layer's stream (the model's, so that a rebuild goes on where the last build left off) and
/// keeps it for backward.
class DropoutLayer final : public GpuLayer {
 public:
  DropoutLayer(LayerContext& ctx, double p, int64_t elements, DropoutStream& stream)
      : ctx_(ctx),
        p_(static_cast<float>(p)),
        n_(elements),
        stream_(stream),
        mask_(static_cast<size_t>(elements), ctx.memory) {}
  void forward(const void* x, void* y) override {
    dropout_forward(ctx_.act, x, y, mask_.as<uint8_t>(), n_, p_, stream_.seed, stream_.draws++, ctx_.stream);
  }
  /// The identity, drawing no mask (the stream is left for the next training step).
  void infer(const void* x, void* y) override {
    DLSCALE_CHECK_CUDA(
        cudaMemcpyAsync(y, x, static_cast<size_t>(n_) * bytes_of(ctx_.act), cudaMemcpyDeviceToDevice, ctx_.stream));
  }
  void backward(const void*, const void*, const void* dy, void* dx) override {
    if (dx != nullptr) dropout_backward(ctx_.act, dy, dx, mask_.as<uint8_t>(), n_, p_, ctx_.stream);
  }

 private:
  LayerContext& ctx_;
  float p_;
  int64_t n_;
  DropoutStream& stream_;
  gpu::DeviceBuffer mask_;  // one byte per element: 1 where the last forward kept it
};

/// Batch norm over (N, H, W), eps 1e-5, momentum 0.1. Training normalises with the batch's
/// statistics and moves the running ones (the model's, at `running_mean`/`running_var`) towards
/// them with the unbiased variance, as PyTorch; inference normalises with the running ones.
struct BatchNormParams {
  float *scale, *bias, *dscale, *dbias, *running_mean, *running_var;
};
constexpr double kBatchNormEps = 1e-5, kBatchNormMomentum = 0.1;

/// fp32 activations: cuDNN's batch norm (the function PyTorch calls for fp32).
class CudnnBatchNormLayer final : public GpuLayer {
 public:
  CudnnBatchNormLayer(LayerContext& ctx, int64_t n, int64_t c, int64_t h, int64_t w, const BatchNormParams& p)
      : ctx_(ctx),
        x_desc_(nchw(n, c, h, w)),
        p_(p),
        saved_mean_(static_cast<size_t>(c) * 4, ctx.memory),
        saved_inv_var_(static_cast<size_t>(c) * 4, ctx.memory) {
    DLSCALE_CHECK_CUDA(cudnnDeriveBNTensorDescriptor(param_desc_, x_desc_, CUDNN_BATCHNORM_SPATIAL));
  }
  void forward(const void* x, void* y) override {
    DLSCALE_CHECK_CUDA(cudnnBatchNormalizationForwardTraining(
        ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_desc_, x, x_desc_, y, param_desc_, p_.scale, p_.bias,
        kBatchNormMomentum, p_.running_mean, p_.running_var, kBatchNormEps, saved_mean_.get(), saved_inv_var_.get()));
  }
  void infer(const void* x, void* y) override {
    DLSCALE_CHECK_CUDA(cudnnBatchNormalizationForwardInference(ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero,
                                                               x_desc_, x, x_desc_, y, param_desc_, p_.scale, p_.bias,
                                                               p_.running_mean, p_.running_var, kBatchNormEps));
  }
  void backward(const void* x, const void*, const void* dy, void* dx) override {
    // cuDNN always computes dx here; a batch norm is never a network's first layer.
    DLSCALE_CHECK_CUDA(cudnnBatchNormalizationBackward(
        ctx_.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero, x_desc_, x, x_desc_, dy, x_desc_, dx,
        param_desc_, p_.scale, p_.dscale, p_.dbias, kBatchNormEps, saved_mean_.get(), saved_inv_var_.get()));
  }

 private:
  LayerContext& ctx_;
  gpu::TensorDesc x_desc_, param_desc_;
  BatchNormParams p_;
  gpu::DeviceBuffer saved_mean_, saved_inv_var_;
};

/// bf16 activations: the driver's kernels (cuDNN 9's legacy batch norm returned NaN on bf16 data
/// on an H200, and PyTorch does not call it for bf16 either). Statistics, scale and bias in fp32.
class KernelBatchNormLayer final : public GpuLayer {
 public:
  KernelBatchNormLayer(LayerContext& ctx, int64_t n, int64_t c, int64_t h, int64_t w, const BatchNormParams& p)
      : ctx_(ctx),
        shape_{n, c, h * w, channel_splits(n, c)},
        p_(p),
        saved_mean_(static_cast<size_t>(c) * 4, ctx.memory),
        saved_inv_std_(static_cast<size_t>(c) * 4, ctx.memory),
        scratch_(static_cast<size_t>(2 * c * shape_.splits) * 4, ctx.memory),
        coefficients_(static_cast<size_t>(3 * c) * 4, ctx.memory) {}
  void forward(const void* x, void* y) override {
    batch_norm_forward_training(ctx_.act, shape_, x, y, p_.scale, p_.bias, p_.running_mean, p_.running_var,
                                static_cast<float>(kBatchNormMomentum), static_cast<float>(kBatchNormEps),
                                saved_mean_.as(), saved_inv_std_.as(), scratch_.as(), coefficients_.as(), ctx_.stream);
  }
  void infer(const void* x, void* y) override {
    batch_norm_forward_inference(ctx_.act, shape_, x, y, p_.scale, p_.bias, p_.running_mean, p_.running_var,
                                 static_cast<float>(kBatchNormEps), coefficients_.as(), ctx_.stream);
  }
  void backward(const void* x, const void*, const void* dy, void* dx) override {
    // dx always: a batch norm is never a network's first layer.
    batch_norm_backward(ctx_.act, shape_, x, dy, dx, p_.scale, p_.dscale, p_.dbias, saved_mean_.as(),
                        saved_inv_std_.as(), scratch_.as(), coefficients_.as(), ctx_.stream);
  }

 private:
  LayerContext& ctx_;
  BatchNormShape shape_;
  BatchNormParams p_;
  gpu::DeviceBuffer saved_mean_, saved_inv_std_, scratch_, coefficients_;
};

std::unique_ptr<GpuLayer> make_batch_norm(LayerContext& ctx, int64_t n, int64_t c, int64_t h, int64_t w,
                                          const BatchNormParams& p) {
  if (ctx.act == Act::kBf16) return std::make_unique<KernelBatchNormLayer>(ctx, n, c, h, w, p);
  return std::make_unique<CudnnBatchNormLayer>(ctx, n, c, h, w, p);
}

/// ResNet v1.5 bottleneck (workloads/workload.h), built from the layers above. It keeps every
/// intermediate activation for backward, as autograd does.
class BottleneckLayer final : public GpuLayer {
 public:
  BottleneckLayer(LayerContext& ctx, const Layer& l, int64_t n, const std::vector<int64_t>& in,
                  const std::vector<int64_t>& out, const LayerParams& p)
      : ctx_(ctx), in_elems_(n * shape_elements(in)), out_elems_(n * shape_elements(out)) {
    const int64_t h = in[1], w = in[2], oh = out[1], ow = out[2];
    const auto bf = [&](size_t i) { return p.bf16.empty() ? nullptr : p.bf16[i]; };
    // A batch norm of the block: its scale at tensor `scale` of the layer, its bias next; its
    // running statistics are the block's k-th pair.
    const auto norm = [&](size_t scale, size_t k) {
      return BatchNormParams{p.value[scale],    p.value[scale + 1], p.grad[scale],
                             p.grad[scale + 1], p.running[2 * k],   p.running[2 * k + 1]};
    };
    conv1_ = std::make_unique<ConvLayer>(ctx, n, l.in, h, w, l.mid, 1, 1, 0, false, p.value[0], p.grad[0], bf(0),
                                         nullptr, nullptr);
    bn1_ = make_batch_norm(ctx, n, l.mid, h, w, norm(1, 0));
    conv2_ = std::make_unique<ConvLayer>(ctx, n, l.mid, h, w, l.mid, 3, l.stride, 1, false, p.value[3], p.grad[3],
                                         bf(3), nullptr, nullptr);
    bn2_ = make_batch_norm(ctx, n, l.mid, oh, ow, norm(4, 1));
    conv3_ = std::make_unique<ConvLayer>(ctx, n, l.mid, oh, ow, l.out, 1, 1, 0, false, p.value[6], p.grad[6], bf(6),
                                         nullptr, nullptr);
    bn3_ = make_batch_norm(ctx, n, l.out, oh, ow, norm(7, 2));
    const cudnnDataType_t type = ctx.act_cudnn;
    relu_mid1_ = std::make_unique<ActivationLayer>(ctx, CUDNN_ACTIVATION_RELU, nchw(n, l.mid, h, w, type));
    relu_mid2_ = std::make_unique<ActivationLayer>(ctx, CUDNN_ACTIVATION_RELU, nchw(n, l.mid, oh, ow, type));
    relu_out_ = std::make_unique<ActivationLayer>(ctx, CUDNN_ACTIVATION_RELU, nchw(n, l.out, oh, ow, type));
    if (p.value.size() > 9) {
      down_ = std::make_unique<ConvLayer>(ctx, n, l.in, h, w, l.out, 1, l.stride, 0, false, p.value[9], p.grad[9],
                                          bf(9), nullptr, nullptr);
      down_bn_ = make_batch_norm(ctx, n, l.out, oh, ow, norm(10, 3));
    }
    const auto buffer = [&](int64_t elems) {
      return gpu::DeviceBuffer(static_cast<size_t>(elems) * bytes_of(ctx.act), ctx.memory);
    };
    const int64_t mid1 = n * l.mid * h * w, mid2 = n * l.mid * oh * ow;
    for (gpu::DeviceBuffer* b : {&c1_, &b1_, &r1_, &dc1_, &db1_, &dr1_}) *b = buffer(mid1);
    for (gpu::DeviceBuffer* b : {&c2_, &b2_, &r2_, &dc2_, &db2_, &dr2_}) *b = buffer(mid2);
    for (gpu::DeviceBuffer* b : {&c3_, &b3_, &sum_, &dsum_, &dc3_}) *b = buffer(out_elems_);
    if (down_) {
      for (gpu::DeviceBuffer* b : {&cd_, &bd_, &dcd_}) *b = buffer(out_elems_);
    }
  }

  size_t prepare(const void* x, void*, void* dx, void*) override {
    // Without a dx (a block as a network's first layer) the backward-data searches are skipped.
    size_t ws = conv1_->prepare(x, c1_.get(), dx, dc1_.get());
    ws = std::max(ws, conv2_->prepare(r1_.get(), c2_.get(), dr1_.get(), dc2_.get()));
    ws = std::max(ws, conv3_->prepare(r2_.get(), c3_.get(), dr2_.get(), dc3_.get()));
    if (down_) ws = std::max(ws, down_->prepare(x, cd_.get(), dx, dcd_.get()));
    return ws;
  }

  void forward(const void* x, void* y) override { run(x, y, true); }
  void infer(const void* x, void* y) override { run(x, y, false); }

  void backward(const void* x, const void* y, const void* dy, void* dx) override {
    relu_out_->backward(sum_.get(), y, dy, dsum_.get());
    // Main branch; dsum is also bn3's output gradient.
    bn3_->backward(c3_.get(), b3_.get(), dsum_.get(), dc3_.get());
    conv3_->backward(r2_.get(), c3_.get(), dc3_.get(), dr2_.get());
    relu_mid2_->backward(b2_.get(), r2_.get(), dr2_.get(), db2_.get());
    bn2_->backward(c2_.get(), b2_.get(), db2_.get(), dc2_.get());
    conv2_->backward(r1_.get(), c2_.get(), dc2_.get(), dr1_.get());
    relu_mid1_->backward(b1_.get(), r1_.get(), dr1_.get(), db1_.get());
    bn1_->backward(c1_.get(), b1_.get(), db1_.get(), dc1_.get());
    conv1_->backward(x, c1_.get(), dc1_.get(), dx);
    // Shortcut: its gradient adds to the main branch's.
    if (down_) {
      down_bn_->backward(cd_.get(), bd_.get(), dsum_.get(), dcd_.get());
      down_->backward_into(x, dcd_.get(), dx, /*accumulate=*/true);
    } else if (dx != nullptr) {
      add_in_place(ctx_.act, dx, dsum_.get(), in_elems_, ctx_.stream);
    }
  }

 private:
  /// The block's forward pass; only its batch norms differ between training and inference.
  void run(const void* x, void* y, bool training) {
    const auto norm = [training](GpuLayer& bn, const void* in, void* out) {
      if (training) {
        bn.forward(in, out);
      } else {
        bn.infer(in, out);
      }
    };
    conv1_->forward(x, c1_.get());
    norm(*bn1_, c1_.get(), b1_.get());
    relu_mid1_->forward(b1_.get(), r1_.get());
    conv2_->forward(r1_.get(), c2_.get());
    norm(*bn2_, c2_.get(), b2_.get());
    relu_mid2_->forward(b2_.get(), r2_.get());
    conv3_->forward(r2_.get(), c3_.get());
    norm(*bn3_, c3_.get(), b3_.get());
    const void* shortcut = x;
    if (down_) {
      down_->forward(x, cd_.get());
      norm(*down_bn_, cd_.get(), bd_.get());
      shortcut = bd_.get();
    }
    DLSCALE_CHECK_CUDA(cudaMemcpyAsync(sum_.get(), b3_.get(), static_cast<size_t>(out_elems_) * bytes_of(ctx_.act),
                                       cudaMemcpyDeviceToDevice, ctx_.stream));
    add_in_place(ctx_.act, sum_.get(), shortcut, out_elems_, ctx_.stream);
    relu_out_->forward(sum_.get(), y);
  }

  LayerContext& ctx_;
  int64_t in_elems_, out_elems_;
  std::unique_ptr<ConvLayer> conv1_, conv2_, conv3_, down_;
  std::unique_ptr<GpuLayer> bn1_, bn2_, bn3_, down_bn_;
  std::unique_ptr<ActivationLayer> relu_mid1_, relu_mid2_, relu_out_;
  // Forward activations (c: conv out, b: batch-norm out, r: ReLU out) and their gradients.
  gpu::DeviceBuffer c1_, b1_, r1_, c2_, b2_, r2_, c3_, b3_, cd_, bd_, sum_;
  gpu::DeviceBuffer dc1_, db1_, dr1_, dc2_, db2_, dr2_, dc3_, dcd_, dsum_;
};

/// Token ids -> rows of the (fp32) table, in the activation type. The ids come from the model's
/// token buffer.
class EmbeddingLayer final : public GpuLayer {
 public:
  EmbeddingLayer(LayerContext& ctx, const Layer& l, int64_t count, const int64_t* tokens, const LayerParams& p)
      : ctx_(ctx), count_(count), dim_(l.out), table_elems_(l.in * l.out), tokens_(tokens), p_(p) {}
  void forward(const void*, void* y) override {
    embedding_forward(ctx_.act, tokens_, p_.value[0], y, count_, dim_, ctx_.stream);
  }
  void backward(const void*, const void*, const void* dy, void*) override {
    DLSCALE_CHECK_CUDA(cudaMemsetAsync(p_.grad[0], 0, static_cast<size_t>(table_elems_) * 4, ctx_.stream));
    embedding_backward(ctx_.act, tokens_, dy, p_.grad[0], count_, dim_, ctx_.stream);
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
                                     DropoutStream& dropout) {
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
      return std::make_unique<ActivationLayer>(ctx, CUDNN_ACTIVATION_RELU, activation_desc(n, in, ctx.act_cudnn));
    case LayerKind::kSigmoid:
      return std::make_unique<ActivationLayer>(ctx, CUDNN_ACTIVATION_SIGMOID, activation_desc(n, in, ctx.act_cudnn));
    case LayerKind::kTanh:
      return std::make_unique<ActivationLayer>(ctx, CUDNN_ACTIVATION_TANH, activation_desc(n, in, ctx.act_cudnn));
    case LayerKind::kDropout:
      return std::make_unique<DropoutLayer>(ctx, l.p, n * shape_elements(in), dropout);
    case LayerKind::kBatchNorm2d:
      return make_batch_norm(
          ctx, n, in[0], in[1], in[2],
          {params.value[0], params.value[1], params.grad[0], params.grad[1], params.running[0], params.running[1]});
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
