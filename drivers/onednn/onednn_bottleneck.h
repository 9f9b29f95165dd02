// The ResNet v1.5 bottleneck on oneDNN, composed from the driver's convolution and batch-norm
// layers plus a residual join (a binary add with a fused ReLU).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "drivers/onednn/onednn_layers.h"

namespace dlscale::onednn {

/// conv1x1 BN ReLU, conv3x3(stride) BN ReLU, conv1x1 BN, plus the shortcut (identity, or
/// conv1x1(stride) BN), then ReLU (workloads/workload.h). The first two ReLUs are fused into
/// their batch norms; `slots` are the 9 (or 12, with a projection) tensors in canonical order.
class BottleneckLayer final : public NetLayer {
 public:
  BottleneckLayer(std::string name, const Layer& spec, const std::vector<ParamSlot>& slots, ParamVersion version);
  void build(const Env& env, const Tensor& in, bool grad_out) override;
  void forward(const Env& env) override;
  void backward(const Env& env) override;
  void reset_statistics() override;

 private:
  std::vector<std::unique_ptr<NetLayer>> main_;      // conv1 bn1 conv2 bn2 conv3 bn3
  std::vector<std::unique_ptr<NetLayer>> shortcut_;  // down, down_bn; empty for the identity
  Tensor in_;
  memory shortcut_grad_in_;          // the projection's input gradient, added to in_.grad
  Staged shortcut_value_;            // the shortcut in the join's layout
  Staged identity_grad_;             // d(sum) in the input's layout (identity shortcut)
  dnnl::reorder copy_sum_grad_;      // d(sum) -> the projection's output gradient, if not shared
  dnnl::binary join_, add_grad_;     // relu(main + shortcut); in_.grad += shortcut gradient
  dnnl::eltwise_backward relu_bwd_;  // d(out) -> d(sum), written into bn3's output gradient
  Args join_args_, add_grad_args_, relu_bwd_args_, copy_sum_grad_args_;
};

}  // namespace dlscale::onednn
