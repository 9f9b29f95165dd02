// The oneDNN driver's layers: one class per layer kind of workloads/workload.h, each built on
// oneDNN primitives (inner product, convolution, pooling, eltwise, batch normalization) or, where
// oneDNN has no training primitive, on a plain loop (dropout, embedding). The composite layers
// (ResNet bottleneck, LSTM) live in their own files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "drivers/onednn/onednn_common.h"
#include "workloads/workload.h"

namespace dlscale::onednn {

/// y = x W^T + b over the last dimension, on the 2-D view [rows, in] of a plain input, so
/// [N, in], [N, T, in] (every step) and [N, C, 1, 1] all work. Three matmul primitives: forward
/// x [rows,in] . W^T, backward-data dy [rows,out] . W, backward-weights dy^T . x, where W^T and
/// dy^T are the row-major buffers read with swapped strides; db is a column sum of dy.
/// The canonical [out, in] weight slice is read, and its gradient slice written, in place.
/// Matmul rather than inner product: with plain weights oneDNN 2.6's inner product falls back
/// to its older jit sgemm, while matmul runs its brgemm kernels, which on FCN-5's shapes
/// (batch 64, 26752 x 2048) are up to 1.6x faster at two threads (bench/onednn_fcn5.cpp).
/// In bf16 (Env::compute) the GEMMs read bf16 copies of x, W and dy, made by one conversion
/// each (W's once per parameter change), and write f32 results.
class LinearLayer final : public NetLayer {
 public:
  LinearLayer(std::string name, int64_t in, int64_t out, ParamSlot weight, ParamSlot bias, ParamVersion version);
  void build(const Env& env, const Tensor& in, bool grad_out) override;
  void forward(const Env& env) override;
  void backward(const Env& env) override;

 private:
  int64_t in_features_, out_features_;
  ParamSlot weight_, bias_;  // bias_.value is null without a bias
  ParamVersion version_;
  uint64_t weights_seen_ = ~uint64_t{0};  // the parameter version w_op_ holds
  StagedTensor src_;                      // the input in plain layout
  Staged x_op_, w_op_, dy_op_;            // x, W and dy in the compute type (aliases in f32)
  dnnl::matmul fwd_, bwd_data_, bwd_weights_;
  Args fwd_args_, bwd_data_args_, bwd_weights_args_;
  memory dy_;  // [rows, out], for the bias gradient
  int64_t rows_ = 0;
};

/// Shape of a 2-D convolution (square kernel, symmetric zero padding).
struct ConvSpec {
  int64_t in = 0, out = 0, kernel = 1, stride = 1, padding = 0;
  bool bias = true;
};

/// Convolution with oneDNN's preferred (blocked) activation and weight layouts (`any`). The
/// canonical OIHW weights are reordered into the forward and backward-data layouts once per
/// parameter change, and the weight gradient is reordered into its OIHW slice once per step
/// when the backward-weights primitive chose a blocked layout. In bf16 (Env::compute) those
/// reorders also convert: the primitives read bf16 input, weights and output gradient and
/// write f32 output, input gradient and weight gradient.
class ConvLayer final : public NetLayer {
 public:
  ConvLayer(std::string name, ConvSpec spec, ParamSlot weight, ParamSlot bias, ParamVersion version);
  void build(const Env& env, const Tensor& in, bool grad_out) override;
  void forward(const Env& env) override;
  void backward(const Env& env) override;

 private:
  ConvSpec spec_;
  ParamSlot weight_, bias_;
  ParamVersion version_;
  uint64_t weights_seen_ = ~uint64_t{0};  // the parameter version the staged weights hold
  bool grad_in_ = false;
  StagedTensor src_;                     // the input in the forward primitive's layout, f32
  Staged src_op_;                        // src_ in the compute type (an alias in f32)
  Staged fwd_weights_, bwd_weights_in_;  // canonical weights -> primitive layouts
  Staged bwd_w_src_, bwd_w_diff_dst_, diff_weights_;
  Staged bwd_d_diff_dst_, diff_src_;
  dnnl::convolution_forward fwd_;
  dnnl::convolution_backward_data bwd_data_;
  dnnl::convolution_backward_weights bwd_weights_;
  Args fwd_args_, bwd_data_args_, bwd_weights_args_;
};

/// Max pooling with -inf padding (oneDNN's max pooling never selects a padded position), or
/// global average pooling ([N, C, H, W] -> [N, C, 1, 1]) when `global_average`.
class PoolLayer final : public NetLayer {
 public:
  PoolLayer(std::string name, int64_t kernel, int64_t stride, int64_t padding, bool global_average);
  void build(const Env& env, const Tensor& in, bool grad_out) override;
  void forward(const Env& env) override;
  void backward(const Env& env) override;

 private:
  int64_t kernel_, stride_, padding_;
  bool global_average_;
  dnnl::pooling_forward fwd_;
  dnnl::pooling_backward bwd_;
  Args fwd_args_, bwd_args_;
};

/// ReLU, sigmoid or tanh, in whatever layout its input has. The *_use_dst_for_bwd algorithms
/// let the backward pass read the output instead of keeping the input alive.
class ActivationLayer final : public NetLayer {
 public:
  ActivationLayer(std::string name, LayerKind kind);
  void build(const Env& env, const Tensor& in, bool grad_out) override;
  void forward(const Env& env) override;
  void backward(const Env& env) override;

 private:
  dnnl::algorithm algorithm_;
  dnnl::eltwise_forward fwd_;
  dnnl::eltwise_backward bwd_;
  Args fwd_args_, bwd_args_;
  bool grad_in_ = false;
};

/// Where the channels of an [N, C, H, W] descriptor live: element (n, c, h, w) is at
/// offset0 + n s0 + (c / block) s1 + h s2 + w s3 + c % block. Covers plain layouts (block 1:
/// nchw, nhwc) and oneDNN's channel-blocked ones (nChw8c, nChw16c).
struct ChannelLayout {
  int64_t stride[4] = {0, 0, 0, 0};
  int64_t block = 1;
  int64_t offset0 = 0;
};

/// Batch normalization (eps 1e-5) with separate scale and shift, which are the canonical weight
/// and bias slices; optionally fused with the ReLU that follows it (the bottleneck's first two).
/// Training passes normalise with the batch statistics (biased variance) and fold them into the
/// running statistics as PyTorch does (momentum 0.1, the unbiased variance); inference passes
/// normalise with the running statistics, through a forward_inference primitive of their own.
class BatchNormLayer final : public NetLayer {
 public:
  BatchNormLayer(std::string name, int64_t channels, ParamSlot scale, ParamSlot shift, bool fuse_relu);
  void build(const Env& env, const Tensor& in, bool grad_out) override;
  void forward(const Env& env) override;
  void backward(const Env& env) override;
  bool rebind_output_grad(const memory& grad) override;
  void reset_statistics() override;

 private:
  /// running = 0.9 running + 0.1 batch, from the statistics the training pass just used.
  void update_running_statistics();

  int64_t channels_;
  ParamSlot scale_, shift_;
  bool fuse_relu_;
  Tensor in_;
  std::optional<ChannelLayout> layout_;  // set when the layer computes the statistics itself
  // Outside build(): a batch-size change rebuilds the primitives but keeps the statistics.
  std::vector<float> running_mean_, running_var_;
  dnnl::batch_normalization_forward fwd_, inference_;
  dnnl::batch_normalization_backward bwd_;
  Args fwd_args_, inference_args_, bwd_args_;
};

/// Inverted dropout with its own mask: element i of step s is dropped when a counter-based
/// uniform draw (seed, s, layer) is below p. oneDNN has no dropout primitive in v2. Works on
/// the physical buffer, so any layout (blocked padding stays zero) is fine. Inference passes
/// copy the input and draw nothing, so the training steps' masks do not depend on them.
class DropoutLayer final : public NetLayer {
 public:
  DropoutLayer(std::string name, double p, uint64_t seed, uint64_t stream);
  void build(const Env& env, const Tensor& in, bool grad_out) override;
  void forward(const Env& env) override;
  void backward(const Env& env) override;

 private:
  double p_;
  uint64_t seed_, stream_, step_ = 0;
  Tensor in_;
  std::vector<float> mask_;  // 0 or 1/(1-p) per physical element
};

/// [N, C, H, W] -> [N, C*H*W]: a view of a plain input, or a reorder to plain first when the
/// input is blocked.
class FlattenLayer final : public NetLayer {
 public:
  explicit FlattenLayer(std::string name);
  void build(const Env& env, const Tensor& in, bool grad_out) override;
  void forward(const Env& env) override;
  void backward(const Env& env) override;

 private:
  StagedTensor plain_;
};

/// Token ids [N, T] -> rows of the [vocab, dim] table: [N, T, dim]. A gather forward and a
/// scatter-add backward, as plain loops (oneDNN has no embedding primitive).
class EmbeddingLayer final : public NetLayer {
 public:
  EmbeddingLayer(std::string name, int64_t vocab, int64_t dim, int64_t steps, ParamSlot weight,
                 const std::vector<int64_t>* tokens);
  void build(const Env& env, const Tensor& in, bool grad_out) override;
  void forward(const Env& env) override;
  void backward(const Env& env) override;

 private:
  int64_t vocab_, dim_, steps_;
  ParamSlot weight_;
  const std::vector<int64_t>* tokens_;  // the model's batch, [N, T]
};

}  // namespace dlscale::onednn
