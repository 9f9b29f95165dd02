// Stacked LSTMs on oneDNN's lstm_forward / lstm_backward primitives, one primitive pair per
// stacked layer (oneDNN's multi-layer form needs every layer to have the same input width).
#pragma once

#include <string>
#include <vector>

#include "drivers/onednn/onednn_common.h"
#include "workloads/workload.h"

namespace dlscale::onednn {

/// `spec.num_layers` LSTMs over a batch-first [N, T, in] input: [N, T, H] out, or [N, H] (the
/// last step's hidden state, read from dst_iter) when !spec.all_steps. oneDNN's gate order i, f,
/// c~, o is the canonical i, f, g, o, and its weights in `ldgoi` ([4H, in] row-major) are the
/// canonical w_ih and w_hh themselves; the primitives' preferred layouts are reorders of them.
/// `slots` hold w_ih, w_hh, bias per stacked layer. In bf16 (Env::compute) the weights, the
/// layer inputs and outputs and the hidden state are bf16; the cell state, the bias and every
/// gradient stay f32.
class LstmLayer final : public NetLayer {
 public:
  LstmLayer(std::string name, const Layer& spec, std::vector<ParamSlot> slots, ParamVersion version);
  void build(const Env& env, const Tensor& in, bool grad_out) override;
  void forward(const Env& env) override;
  void backward(const Env& env) override;

 private:
  /// One stacked layer's primitives, staged weights and buffers.
  struct Level {
    dnnl::lstm_forward fwd;
    dnnl::lstm_backward bwd;
    Args fwd_args, bwd_args;
    Staged fwd_weights_layer, fwd_weights_iter, bwd_weights_layer, bwd_weights_iter;
    Staged diff_weights_layer, diff_weights_iter, diff_bias;
  };

  /// `src` and `dst` hold the compute type, `diff_src` and `diff_dst` f32.
  Level build_level(const Env& env, size_t level, const memory& src, const memory& diff_src, const memory& dst,
                    const memory& diff_dst, bool last_step_only);

  int64_t input_, hidden_, layers_;
  bool all_steps_;
  std::vector<ParamSlot> slots_;
  ParamVersion version_;
  uint64_t weights_seen_ = ~uint64_t{0};
  StagedTensor src_;  // the input in plain [N, T, in]
  // The input and the output in the compute type: the primitives read and write that type for
  // values (oneDNN's bf16 LSTM has bf16 layer and hidden states), f32 for every gradient.
  Staged src_op_, out_op_;
  std::vector<Level> levels_;
  std::vector<memory> buffers_;  // the levels' own activations and gradients (args only view them)
};

}  // namespace dlscale::onednn
