// The CUDA driver's layers. Each layer owns its cuDNN descriptors and any state it keeps between
// forward and backward; activations and gradients are buffers the model owns and passes in, of
// the context's activation type (fp32, or bf16 under bf16 precision: `Act`). Every call queues
// work on the model's stream and returns without waiting.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "drivers/cuda/cuda_kernels.h"
#include "drivers/driver.h"
#include "drivers/gpu/cuda_resources.h"
#include "workloads/workload.h"

namespace dlscale::cuda {

/// The convolution algorithms chosen for one shape, and the workspace each needs.
struct ConvAlgorithms {
  cudnnConvolutionFwdAlgo_t forward{};
  cudnnConvolutionBwdDataAlgo_t backward_data{};
  cudnnConvolutionBwdFilterAlgo_t backward_filter{};
  cudnnMathType_t forward_math{}, backward_data_math{}, backward_filter_math{};
  size_t workspace_bytes = 0;
};

/// What every layer of one model shares.
struct LayerContext {
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  cudaStream_t stream = nullptr;
  gpu::MemoryTracker* memory = nullptr;
  Precision precision = Precision::kFp32;
  /// The element type of activations and their gradients: bf16 under bf16 precision (they stay
  /// bf16 between layers, as under autocast), else fp32.
  Act act = Act::kFloat;
  cudnnDataType_t act_cudnn = CUDNN_DATA_FLOAT;
  /// Algorithms found per convolution shape, so that ResNet's repeated blocks search once.
  std::map<std::string, ConvAlgorithms>* conv_algorithms = nullptr;
  /// Scratch for algorithm searches (prepare) and the shared workspace of the timed steps.
  void* search_workspace = nullptr;
  size_t search_workspace_bytes = 0;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

/// A layer's parameters and their gradients: pointers into the model's flat buffers (driver
/// layout), plus the bf16 copy of the parameters under bf16 precision.
struct LayerParams {
  std::vector<float*> value, grad;
  std::vector<void*> bf16;        ///< empty unless precision is bf16
  size_t weight_space_bytes = 0;  ///< LSTM: its cuDNN weight space starts at value[0] (grad[0])
  /// Batch norm: running mean and running variance of each of the layer's batch norms in order
  /// (mean, variance, mean, …), in the model's memory, so that they outlive a rebuild of the
  /// layers for another batch size.
  std::vector<float*> running;
};

/// A dropout layer's generator: its seed and how many masks it has drawn, in the model's keeping
/// like the running statistics, so that a network rebuilt for another batch size (an
/// evaluation's) goes on with the masks where the last build left them: training draws the same
/// masks whether or not an evaluation came between its steps.
struct DropoutStream {
  uint64_t seed = 0;
  uint64_t draws = 0;  ///< training forward passes so far: the next mask is draw number `draws`
};

class GpuLayer {
 public:
  virtual ~GpuLayer() = default;
  /// Runs the searches that choose algorithms, with real buffers, before any timed step; returns
  /// the workspace the layer needs during training.
  virtual size_t prepare(const void* x, void* y, void* dx, void* dy) {
    (void)x, (void)y, (void)dx, (void)dy;
    return 0;
  }
  virtual void forward(const void* x, void* y) = 0;
  /// The forward pass in inference mode (evaluation): dropout passes its input through, batch
  /// norm normalises with its running statistics; nothing the layer keeps changes. The same as
  /// forward() for every other layer.
  virtual void infer(const void* x, void* y) { forward(x, y); }
  /// Computes the parameter gradients and, unless dx is nullptr, the input gradient.
  virtual void backward(const void* x, const void* y, const void* dy, void* dx) = 0;
};

/// Builds the layer `l` for a batch of `n` with per-sample input shape `in` and output `out`.
/// `tokens` is the model's device token buffer (Embedding reads it instead of `x`); dropout draws
/// from `dropout`.
std::unique_ptr<GpuLayer> make_layer(LayerContext& ctx, const Layer& l, int64_t n, const std::vector<int64_t>& in,
                                     const std::vector<int64_t>& out, const LayerParams& params, const int64_t* tokens,
                                     DropoutStream& dropout);

}  // namespace dlscale::cuda
