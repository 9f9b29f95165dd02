// The oneDNN driver's single-primitive layers and its plain-loop layers (dropout, embedding).
// Every primitive descriptor, primitive, buffer and reorder is made in build(); forward() and
// backward() only execute prepared argument maps.
#include "drivers/onednn/onednn_layers.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>

#include "workloads/random.h"

namespace dlscale::onednn {

namespace {

using dnnl::algorithm;
using dnnl::prop_kind;

memory::desc any_md(const memory::dims& dims, memory::data_type type = memory::data_type::f32) {
  return {dims, type, memory::format_tag::any};
}

/// Output size of a window sweep with PyTorch's floor rule. oneDNN checks the same relation,
/// (in - kernel + pad_l + pad_r) / stride + 1 == out, with integer division, so the symmetric
/// padding can be passed as both pad_l and pad_r.
int64_t window_out(int64_t size, int64_t kernel, int64_t stride, int64_t padding) {
  return (size + 2 * padding - kernel) / stride + 1;
}

float* data(const memory& m) { return static_cast<float*>(m.get_data_handle()); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Linear

LinearLayer::LinearLayer(std::string name, int64_t in, int64_t out, ParamSlot weight, ParamSlot bias,
                         ParamVersion version)
    : NetLayer(std::move(name)),
      in_features_(in),
      out_features_(out),
      weight_(weight),
      bias_(bias),
      version_(version) {}

void LinearLayer::build(const Env& env, const Tensor& in, bool grad_out) {
  const memory::dims in_dims = in.value.get_desc().dims();
  const int64_t n = in_dims[0], rows = product(in_dims) / in_features_, width = in_features_, out = out_features_;
  src_ = StagedTensor(env, in, plain_md(in_dims));
  const auto op = env.compute;
  const memory::desc x_md = plain_md({rows, width}), y_md = plain_md({rows, out}), w_md = plain_md({out, width}),
                     b_md = plain_md({1, out});
  const memory::desc x_op = with_type(x_md, op), y_op = with_type(y_md, op), w_op = with_type(w_md, op);
  // The same buffers read transposed: W^T [in, out] and dy^T [out, rows].
  const memory::desc wt_op({width, out}, op, {1, width}), dyt_op({out, rows}, op, {1, out});
  const Tensor x = view(env, src_.tensor(), x_md);
  out_ = allocate_tensor(env, plain_md(rows == n ? memory::dims{n, out} : memory::dims{n, rows / n, out}), grad_out);
  const Tensor y = view(env, out_, y_md);
  const bool bias = bias_.value != nullptr;
  x_op_ = Staged(env, x.value, x_op, Flow::kIn);
  w_op_ = Staged(env, wrap(env, w_md, weight_.value), w_op, Flow::kIn);
  weights_seen_ = ~uint64_t{0};

  const dnnl::matmul::primitive_desc fwd_pd(
      bias ? dnnl::matmul::desc(x_op, wt_op, b_md, y_md) : dnnl::matmul::desc(x_op, wt_op, y_md), env.engine);
  fwd_ = dnnl::matmul(fwd_pd);
  fwd_args_ = {{DNNL_ARG_SRC, x_op_.mem()},
               {DNNL_ARG_WEIGHTS, wrap(env, wt_op, w_op_.mem().get_data_handle())},
               {DNNL_ARG_DST, y.value}};
  if (bias) fwd_args_[DNNL_ARG_BIAS] = wrap(env, b_md, bias_.value);
  if (!grad_out) return;  // below the first parameterised layer: no backward pass

  // dW and db land straight in their canonical slices of the flat gradient buffer.
  dy_op_ = Staged(env, y.grad, y_op, Flow::kIn);
  const dnnl::matmul::primitive_desc bwd_w_pd(dnnl::matmul::desc(dyt_op, x_op, w_md), env.engine);
  bwd_weights_ = dnnl::matmul(bwd_w_pd);
  bwd_weights_args_ = {{DNNL_ARG_SRC, wrap(env, dyt_op, dy_op_.mem().get_data_handle())},
                       {DNNL_ARG_WEIGHTS, x_op_.mem()},
                       {DNNL_ARG_DST, wrap(env, w_md, weight_.grad)}};
  dy_ = y.grad;
  rows_ = rows;

  // The first layer's input needs no gradient (nothing below it trains): no backward-data GEMM.
  if (!x.grad) return;
  const dnnl::matmul::primitive_desc bwd_d_pd(dnnl::matmul::desc(y_op, w_op, x_md), env.engine);
  bwd_data_ = dnnl::matmul(bwd_d_pd);
  bwd_data_args_ = {{DNNL_ARG_SRC, dy_op_.mem()}, {DNNL_ARG_WEIGHTS, w_op_.mem()}, {DNNL_ARG_DST, x.grad}};
}

void LinearLayer::forward(const Env& env) {
  src_.forward(env);
  x_op_.sync(env);
  if (*version_ != weights_seen_) {  // the canonical weights changed (update, load_parameters)
    w_op_.sync(env);
    weights_seen_ = *version_;
  }
  fwd_.execute(env.stream, fwd_args_);
}

void LinearLayer::backward(const Env& env) {
  dy_op_.sync(env);
  bwd_weights_.execute(env.stream, bwd_weights_args_);
  if (bias_.grad != nullptr) {
    // db = column sums of dy. A plain loop: oneDNN 2.6 runs this reduction with its reference
    // kernel (48 ms for 64 x 26752 on one thread, against 1 ms here). Threads split columns.
    const float* dy = data(dy_);
    float* db = bias_.grad;
    const int64_t rows = rows_, cols = out_features_;
#pragma omp parallel
    {
      const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t lo = cols * t / threads, hi = cols * (t + 1) / threads;
      for (int64_t c = lo; c < hi; ++c) db[c] = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = dy + r * cols;
        for (int64_t c = lo; c < hi; ++c) db[c] += row[c];
      }
    }
  }
  if (bwd_data_) {
    bwd_data_.execute(env.stream, bwd_data_args_);
    src_.backward(env);
  }
}

// ---------------------------------------------------------------------------------------------
// Conv2d

ConvLayer::ConvLayer(std::string name, ConvSpec spec, ParamSlot weight, ParamSlot bias, ParamVersion version)
    : NetLayer(std::move(name)), spec_(spec), weight_(weight), bias_(bias), version_(version) {}

void ConvLayer::build(const Env& env, const Tensor& in, bool grad_out) {
  const memory::dims in_dims = in.value.get_desc().dims();  // N, C, H, W
  const int64_t k = spec_.kernel, s = spec_.stride, p = spec_.padding;
  const memory::dims w_dims{spec_.out, spec_.in, k, k},
      out_dims{in_dims[0], spec_.out, window_out(in_dims[2], k, s, p), window_out(in_dims[3], k, s, p)};
  const memory::dims strides{s, s}, padding{p, p};
  // Operands (input, weights, output gradient) in the compute type; results in f32.
  const auto op = env.compute;
  const memory::desc src_any = any_md(in_dims, op), w_any = any_md(w_dims, op), dst_any = any_md(out_dims, op);
  const memory::desc src_f32 = any_md(in_dims), w_f32 = any_md(w_dims), dst_f32 = any_md(out_dims);
  const memory::desc b_md = spec_.bias ? plain_md({spec_.out}) : memory::desc();
  const memory user_w = wrap(env, plain_md(w_dims), weight_.value);
  grad_in_ = static_cast<bool>(in.grad);
  weights_seen_ = ~uint64_t{0};

  const dnnl::convolution_forward::primitive_desc fwd_pd({prop_kind::forward_training, algorithm::convolution_direct,
                                                          src_any, w_any, b_md, dst_f32, strides, padding, padding},
                                                         env.engine);
  src_ = StagedTensor(env, in, with_type(fwd_pd.src_desc(), memory::data_type::f32));
  src_op_ = Staged(env, src_.tensor().value, fwd_pd.src_desc(), Flow::kIn);
  fwd_weights_ = Staged(env, user_w, fwd_pd.weights_desc(), Flow::kIn);
  out_ = allocate_tensor(env, fwd_pd.dst_desc(), grad_out);
  fwd_ = dnnl::convolution_forward(fwd_pd);
  fwd_args_ = {{DNNL_ARG_SRC, src_op_.mem()}, {DNNL_ARG_WEIGHTS, fwd_weights_.mem()}, {DNNL_ARG_DST, out_.value}};
  if (spec_.bias) fwd_args_[DNNL_ARG_BIAS] = wrap(env, b_md, bias_.value);
  if (!grad_out) return;

  // Backward primitives choose their own layouts too (`any`): forcing the forward ones can push
  // oneDNN onto a slower implementation. Where they differ, a reorder made here bridges them.
  const dnnl::convolution_backward_weights::primitive_desc bwd_w_pd(
      {algorithm::convolution_direct, src_any, w_f32, b_md, dst_any, strides, padding, padding}, env.engine, fwd_pd);
  bwd_w_src_ = Staged(env, src_op_.mem(), bwd_w_pd.src_desc(), Flow::kIn);
  bwd_w_diff_dst_ = Staged(env, out_.grad, bwd_w_pd.diff_dst_desc(), Flow::kIn);
  diff_weights_ = Staged(env, wrap(env, plain_md(w_dims), weight_.grad), bwd_w_pd.diff_weights_desc(), Flow::kOut);
  bwd_weights_ = dnnl::convolution_backward_weights(bwd_w_pd);
  bwd_weights_args_ = {{DNNL_ARG_SRC, bwd_w_src_.mem()},
                       {DNNL_ARG_DIFF_DST, bwd_w_diff_dst_.mem()},
                       {DNNL_ARG_DIFF_WEIGHTS, diff_weights_.mem()}};
  if (spec_.bias) bwd_weights_args_[DNNL_ARG_DIFF_BIAS] = wrap(env, b_md, bias_.grad);

  if (!grad_in_) return;
  const dnnl::convolution_backward_data::primitive_desc bwd_d_pd(
      {algorithm::convolution_direct, src_f32, w_any, dst_any, strides, padding, padding}, env.engine, fwd_pd);
  // Staged from the forward weights and from the backward-weights output gradient: aliases (no
  // second reorder or conversion) when both want the same layout.
  bwd_weights_in_ = Staged(env, fwd_weights_.mem(), bwd_d_pd.weights_desc(), Flow::kIn);
  const bool same_dy = bwd_d_pd.diff_dst_desc() == bwd_w_diff_dst_.mem().get_desc();
  bwd_d_diff_dst_ = Staged(env, same_dy ? bwd_w_diff_dst_.mem() : out_.grad, bwd_d_pd.diff_dst_desc(), Flow::kIn);
  diff_src_ = Staged(env, src_.tensor().grad, bwd_d_pd.diff_src_desc(), Flow::kOut);
  bwd_data_ = dnnl::convolution_backward_data(bwd_d_pd);
  bwd_data_args_ = {{DNNL_ARG_DIFF_DST, bwd_d_diff_dst_.mem()},
                    {DNNL_ARG_WEIGHTS, bwd_weights_in_.mem()},
                    {DNNL_ARG_DIFF_SRC, diff_src_.mem()}};
}

void ConvLayer::forward(const Env& env) {
  src_.forward(env);
  src_op_.sync(env);
  if (*version_ != weights_seen_) {  // the canonical weights changed (update, load_parameters)
    fwd_weights_.sync(env);
    bwd_weights_in_.sync(env);
    weights_seen_ = *version_;
  }
  fwd_.execute(env.stream, fwd_args_);
}

void ConvLayer::backward(const Env& env) {
  bwd_w_src_.sync(env);
  bwd_w_diff_dst_.sync(env);
  bwd_weights_.execute(env.stream, bwd_weights_args_);
  diff_weights_.sync(env);
  if (!grad_in_) return;
  bwd_d_diff_dst_.sync(env);
  bwd_data_.execute(env.stream, bwd_data_args_);
  diff_src_.sync(env);
  src_.backward(env);
}

// ---------------------------------------------------------------------------------------------
// MaxPool2d and GlobalAvgPool

PoolLayer::PoolLayer(std::string name, int64_t kernel, int64_t stride, int64_t padding, bool global_average)
    : NetLayer(std::move(name)), kernel_(kernel), stride_(stride), padding_(padding), global_average_(global_average) {}

void PoolLayer::build(const Env& env, const Tensor& in, bool grad_out) {
  const memory::desc src_md = in.value.get_desc();
  const memory::dims d = src_md.dims();
  const algorithm alg = global_average_ ? algorithm::pooling_avg_exclude_padding : algorithm::pooling_max;
  const memory::dims kernel = global_average_ ? memory::dims{d[2], d[3]} : memory::dims{kernel_, kernel_};
  const memory::dims strides = global_average_ ? memory::dims{1, 1} : memory::dims{stride_, stride_};
  const memory::dims padding = global_average_ ? memory::dims{0, 0} : memory::dims{padding_, padding_};
  const memory::dims out_dims = global_average_ ? memory::dims{d[0], d[1], 1, 1}
                                                : memory::dims{d[0], d[1], window_out(d[2], kernel_, stride_, padding_),
                                                               window_out(d[3], kernel_, stride_, padding_)};
  const dnnl::pooling_forward::primitive_desc fwd_pd(
      {prop_kind::forward_training, alg, src_md, any_md(out_dims), strides, kernel, padding, padding}, env.engine);
  out_ = allocate_tensor(env, fwd_pd.dst_desc(), grad_out);
  fwd_ = dnnl::pooling_forward(fwd_pd);
  fwd_args_ = {{DNNL_ARG_SRC, in.value}, {DNNL_ARG_DST, out_.value}};
  if (!global_average_) fwd_args_[DNNL_ARG_WORKSPACE] = allocate(env, fwd_pd.workspace_desc());  // the argmaxes
  if (!in.grad) return;
  const dnnl::pooling_backward::primitive_desc bwd_pd(
      {alg, src_md, fwd_pd.dst_desc(), strides, kernel, padding, padding}, env.engine, fwd_pd);
  bwd_ = dnnl::pooling_backward(bwd_pd);
  bwd_args_ = {{DNNL_ARG_DIFF_DST, out_.grad}, {DNNL_ARG_DIFF_SRC, in.grad}};
  if (!global_average_) bwd_args_[DNNL_ARG_WORKSPACE] = fwd_args_[DNNL_ARG_WORKSPACE];
}

void PoolLayer::forward(const Env& env) { fwd_.execute(env.stream, fwd_args_); }

void PoolLayer::backward(const Env& env) {
  if (bwd_) bwd_.execute(env.stream, bwd_args_);
}

// ---------------------------------------------------------------------------------------------
// ReLU, Sigmoid, Tanh

ActivationLayer::ActivationLayer(std::string name, LayerKind kind)
    : NetLayer(std::move(name)),
      algorithm_(kind == LayerKind::kReLU      ? algorithm::eltwise_relu_use_dst_for_bwd
                 : kind == LayerKind::kSigmoid ? algorithm::eltwise_logistic_use_dst_for_bwd
                                               : algorithm::eltwise_tanh_use_dst_for_bwd) {}

void ActivationLayer::build(const Env& env, const Tensor& in, bool grad_out) {
  const dnnl::eltwise_forward::primitive_desc fwd_pd({prop_kind::forward_training, algorithm_, in.value.get_desc()},
                                                     env.engine);
  out_ = allocate_tensor(env, fwd_pd.dst_desc(), grad_out);
  fwd_ = dnnl::eltwise_forward(fwd_pd);
  fwd_args_ = {{DNNL_ARG_SRC, in.value}, {DNNL_ARG_DST, out_.value}};
  grad_in_ = static_cast<bool>(in.grad);
  if (!grad_in_) return;
  const dnnl::eltwise_backward::primitive_desc bwd_pd({algorithm_, fwd_pd.dst_desc(), fwd_pd.dst_desc()}, env.engine,
                                                      fwd_pd);
  bwd_ = dnnl::eltwise_backward(bwd_pd);
  bwd_args_ = {{DNNL_ARG_DST, out_.value}, {DNNL_ARG_DIFF_DST, out_.grad}, {DNNL_ARG_DIFF_SRC, in.grad}};
}

void ActivationLayer::forward(const Env& env) { fwd_.execute(env.stream, fwd_args_); }

void ActivationLayer::backward(const Env& env) {
  if (grad_in_) bwd_.execute(env.stream, bwd_args_);
}

// ---------------------------------------------------------------------------------------------
// BatchNorm2d

BatchNormLayer::BatchNormLayer(std::string name, int64_t channels, ParamSlot scale, ParamSlot shift, bool fuse_relu)
    : NetLayer(std::move(name)),
      channels_(channels),
      scale_(scale),
      shift_(shift),
      fuse_relu_(fuse_relu),
      running_mean_(static_cast<size_t>(channels), 0.0f),
      running_var_(static_cast<size_t>(channels), 1.0f) {}

// In place: the inference primitive's arguments point at these buffers.
void BatchNormLayer::reset_statistics() {
  std::fill(running_mean_.begin(), running_mean_.end(), 0.0f);
  std::fill(running_var_.begin(), running_var_.end(), 1.0f);
}

namespace {

constexpr int64_t kMaxChannelBlock = 64;

/// The channel layout of `md`, or nothing for a layout channel_stats() does not walk.
std::optional<ChannelLayout> channel_layout(const memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.ndims != 4 || d.format_kind != dnnl_blocked) return std::nullopt;
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  ChannelLayout l{{b.strides[0], b.strides[1], b.strides[2], b.strides[3]}, 1, d.offset0};
  if (b.inner_nblks == 1 && b.inner_idxs[0] == 1 && b.inner_blks[0] <= kMaxChannelBlock) {
    l.block = b.inner_blks[0];
  } else if (b.inner_nblks != 0) {
    return std::nullopt;
  }
  return l;
}

/// One pass over one group of `lanes` channels stored at consecutive addresses: the sums of
/// x - shift and of its square over (n, h, w), in double. Memory-bound (one read of the tensor);
/// the lane count is fixed for oneDNN's 16-channel blocks so that the accumulators stay in
/// registers, and the multiversioned clone keeps the double arithmetic under the memory time.
DLSCALE_ONEDNN_MULTIVERSION void group_moments(const float* x, const ChannelLayout& l, const memory::dims& dims,
                                               int64_t g, int64_t lanes, const double* shift, double* sum,
                                               double* squares) {
  constexpr int64_t kBlock = 16;
  auto sweep = [&](auto width, double* s1, double* s2) {
    for (int64_t n = 0; n < dims[0]; ++n) {
      for (int64_t h = 0; h < dims[2]; ++h) {
        const float* row = x + l.offset0 + n * l.stride[0] + g * l.stride[1] + h * l.stride[2];
        for (int64_t w = 0; w < dims[3]; ++w) {
          const float* p = row + w * l.stride[3];
          for (int64_t j = 0; j < static_cast<int64_t>(width); ++j) {
            const double v = static_cast<double>(p[j]) - shift[j];
            s1[j] += v;
            s2[j] += v * v;
          }
        }
      }
    }
  };
  if (lanes == kBlock) {
    double s1[kBlock] = {}, s2[kBlock] = {};
    sweep(std::integral_constant<int64_t, kBlock>(), s1, s2);
    std::copy(s1, s1 + kBlock, sum);
    std::copy(s2, s2 + kBlock, squares);
  } else {
    sweep(lanes, sum, squares);
  }
}

/// Per-channel mean and biased variance accumulated in double, as PyTorch does on CPU. oneDNN's
/// own statistics are float sums, off by about 1e-6 relative: enough to flip the sign of
/// normalised values within 1e-6 of zero, and with it the ReLU mask that follows, against the
/// float64 reference (the conformance test's ResNet-50 hits one such element). One pass of
/// shifted sums: var = E[(x-k)^2] - E[x-k]^2 with k a sample of the channel, so that the
/// subtraction does not cancel even when the mean is large against the spread.
void channel_stats(const float* x, const ChannelLayout& l, const memory::dims& dims, float* mean, float* variance) {
  const int64_t channels = dims[1], block = l.block, groups = (channels + block - 1) / block;
  const auto count = static_cast<double>(dims[0] * dims[2] * dims[3]);
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t lanes = std::min(block, channels - g * block);
    double shift[kMaxChannelBlock], sum[kMaxChannelBlock] = {}, squares[kMaxChannelBlock] = {};
    const float* first = x + l.offset0 + g * l.stride[1];  // (0, g, 0, 0)
    for (int64_t j = 0; j < lanes; ++j) shift[j] = first[j];
    group_moments(x, l, dims, g, lanes, shift, sum, squares);
    for (int64_t j = 0; j < lanes; ++j) {
      const double m = sum[j] / count;
      mean[g * block + j] = static_cast<float>(shift[j] + m);
      variance[g * block + j] = static_cast<float>(std::max(0.0, squares[j] / count - m * m));
    }
  }
}

}  // namespace

void BatchNormLayer::build(const Env& env, const Tensor& in, bool grad_out) {
  constexpr float kEps = 1e-5f;
  using dnnl::normalization_flags;
  const memory::desc md = in.value.get_desc(), c_md = plain_md({channels_});
  layout_ = channel_layout(md);
  // With its own statistics the layer runs oneDNN's forward pass in use_global_stats mode (the
  // statistics are inputs); the backward pass is the full training one either way, reading the
  // same mean and variance.
  const normalization_flags flags = normalization_flags::use_scale | normalization_flags::use_shift |
                                    (fuse_relu_ ? normalization_flags::fuse_norm_relu : normalization_flags::none);
  const normalization_flags fwd_flags = layout_ ? flags | normalization_flags::use_global_stats : flags;
  const dnnl::batch_normalization_forward::primitive_desc fwd_pd({prop_kind::forward_training, md, kEps, fwd_flags},
                                                                 env.engine);
  out_ = allocate_tensor(env, fwd_pd.dst_desc(), grad_out);
  in_ = in;
  fwd_ = dnnl::batch_normalization_forward(fwd_pd);
  fwd_args_ = {{DNNL_ARG_SRC, in.value},
               {DNNL_ARG_DST, out_.value},
               {DNNL_ARG_MEAN, allocate(env, fwd_pd.mean_desc())},
               {DNNL_ARG_VARIANCE, allocate(env, fwd_pd.variance_desc())},
               {DNNL_ARG_SCALE, wrap(env, c_md, scale_.value)},
               {DNNL_ARG_SHIFT, wrap(env, c_md, shift_.value)}};
  if (fuse_relu_) fwd_args_[DNNL_ARG_WORKSPACE] = allocate(env, fwd_pd.workspace_desc());  // the ReLU mask

  const dnnl::batch_normalization_forward::primitive_desc inference_pd(
      {prop_kind::forward_inference, md, kEps, flags | normalization_flags::use_global_stats}, env.engine);
  inference_ = dnnl::batch_normalization_forward(inference_pd);
  inference_args_ = {{DNNL_ARG_SRC, in.value},
                     {DNNL_ARG_DST, out_.value},
                     {DNNL_ARG_MEAN, wrap(env, c_md, running_mean_.data())},
                     {DNNL_ARG_VARIANCE, wrap(env, c_md, running_var_.data())},
                     {DNNL_ARG_SCALE, fwd_args_[DNNL_ARG_SCALE]},
                     {DNNL_ARG_SHIFT, fwd_args_[DNNL_ARG_SHIFT]}};
  if (!grad_out) return;

  const dnnl::batch_normalization_backward::primitive_desc bwd_pd(
      {prop_kind::backward, fwd_pd.dst_desc(), md, kEps, flags}, env.engine, fwd_pd);
  bwd_ = dnnl::batch_normalization_backward(bwd_pd);
  bwd_args_ = fwd_args_;
  bwd_args_.erase(DNNL_ARG_DST);
  bwd_args_[DNNL_ARG_DIFF_DST] = out_.grad;
  // oneDNN always computes diff_src; below the first trainable layer it goes to a scratch buffer.
  bwd_args_[DNNL_ARG_DIFF_SRC] = in.grad ? in.grad : allocate(env, md);
  bwd_args_[DNNL_ARG_DIFF_SCALE] = wrap(env, c_md, scale_.grad);
  bwd_args_[DNNL_ARG_DIFF_SHIFT] = wrap(env, c_md, shift_.grad);
}

void BatchNormLayer::forward(const Env& env) {
  if (!env.training) {
    inference_.execute(env.stream, inference_args_);
    return;
  }
  if (layout_) {
    channel_stats(static_cast<const float*>(in_.value.get_data_handle()), *layout_, in_.value.get_desc().dims(),
                  data(fwd_args_[DNNL_ARG_MEAN]), data(fwd_args_[DNNL_ARG_VARIANCE]));
  }
  fwd_.execute(env.stream, fwd_args_);
  update_running_statistics();
}

void BatchNormLayer::update_running_statistics() {
  constexpr double kMomentum = 0.1;  // PyTorch's default
  const memory::dims d = in_.value.get_desc().dims();
  const auto count = static_cast<double>(d[0] * d[2] * d[3]);
  // The unbiased variance, as PyTorch folds it in; one value per channel has none (the
  // reference driver keeps the biased one there too).
  const double unbias = count > 1 ? count / (count - 1) : 1.0;
  const float* mean = data(fwd_args_[DNNL_ARG_MEAN]);
  const float* var = data(fwd_args_[DNNL_ARG_VARIANCE]);
  for (size_t c = 0; c < running_mean_.size(); ++c) {
    running_mean_[c] = static_cast<float>((1 - kMomentum) * running_mean_[c] + kMomentum * mean[c]);
    running_var_[c] = static_cast<float>((1 - kMomentum) * running_var_[c] + kMomentum * var[c] * unbias);
  }
}

void BatchNormLayer::backward(const Env& env) { bwd_.execute(env.stream, bwd_args_); }

bool BatchNormLayer::rebind_output_grad(const memory& grad) {
  if (!bwd_ || grad.get_desc() != out_.value.get_desc()) return false;
  out_.grad = grad;
  bwd_args_[DNNL_ARG_DIFF_DST] = grad;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Dropout

DropoutLayer::DropoutLayer(std::string name, double p, uint64_t seed, uint64_t stream)
    : NetLayer(std::move(name)), p_(p), seed_(seed), stream_(stream) {}

void DropoutLayer::build(const Env& env, const Tensor& in, bool grad_out) {
  in_ = in;
  out_ = allocate_tensor(env, in.value.get_desc(), grad_out);
  mask_.assign(in.value.get_desc().get_size() / sizeof(float), 0.0f);
}

void DropoutLayer::forward(const Env& env) {
  const float* x = data(in_.value);
  float* y = data(out_.value);
  const auto n = static_cast<int64_t>(mask_.size());
  if (!env.training) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i];
    return;
  }
  ++step_;  // every training pass draws a new mask
  const CounterRng rng(mix64(seed_) ^ mix64(step_), stream_);
  const float keep_scale = p_ < 1 ? static_cast<float>(1.0 / (1.0 - p_)) : 0.0f;  // p = 1 drops everything
  float* mask = mask_.data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float m = rng.uniform(static_cast<uint64_t>(i)) < p_ ? 0.0f : keep_scale;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

void DropoutLayer::backward(const Env&) {
  if (!in_.grad) return;
  const float* dy = data(out_.grad);
  const float* mask = mask_.data();
  float* dx = data(in_.grad);
  const auto n = static_cast<int64_t>(mask_.size());
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * mask[i];
}

// ---------------------------------------------------------------------------------------------
// Flatten

FlattenLayer::FlattenLayer(std::string name) : NetLayer(std::move(name)) {}

void FlattenLayer::build(const Env& env, const Tensor& in, bool grad_out) {
  const memory::dims dims = in.value.get_desc().dims();
  plain_ = StagedTensor(env, in, plain_md(dims));
  out_ = view(env, plain_.tensor(), plain_md({dims[0], product(dims) / dims[0]}));
  if (grad_out && !out_.grad) out_.grad = allocate(env, out_.value.get_desc());
}

void FlattenLayer::forward(const Env& env) { plain_.forward(env); }

void FlattenLayer::backward(const Env& env) { plain_.backward(env); }

// ---------------------------------------------------------------------------------------------
// Embedding

EmbeddingLayer::EmbeddingLayer(std::string name, int64_t vocab, int64_t dim, int64_t steps, ParamSlot weight,
                               const std::vector<int64_t>* tokens)
    : NetLayer(std::move(name)), vocab_(vocab), dim_(dim), steps_(steps), weight_(weight), tokens_(tokens) {}

void EmbeddingLayer::build(const Env& env, const Tensor&, bool grad_out) {
  out_ = allocate_tensor(env, plain_md({env.batch, steps_, dim_}), grad_out);
}

void EmbeddingLayer::forward(const Env&) {
  const int64_t* tokens = tokens_->data();
  const auto rows = static_cast<int64_t>(tokens_->size());
  const float* table = weight_.value;
  float* y = data(out_.value);
  const auto row_bytes = static_cast<size_t>(dim_) * sizeof(float);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) std::memcpy(y + r * dim_, table + tokens[r] * dim_, row_bytes);
}

void EmbeddingLayer::backward(const Env&) {
  const int64_t* tokens = tokens_->data();
  const auto rows = static_cast<int64_t>(tokens_->size());
  const float* dy = data(out_.grad);
  float* dtable = weight_.grad;
  std::memset(dtable, 0, static_cast<size_t>(vocab_ * dim_) * sizeof(float));
  // Repeated tokens add into the same row, so threads split the columns, not the rows: each
  // owns a band of every row and no two ever write the same element.
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lo = dim_ * t / threads, hi = dim_ * (t + 1) / threads;
    for (int64_t r = 0; r < rows; ++r) {
      float* dst = dtable + tokens[r] * dim_;
      const float* src = dy + r * dim_;
      for (int64_t c = lo; c < hi; ++c) dst[c] += src[c];
    }
  }
}

}  // namespace dlscale::onednn
