// The ResNet v1.5 bottleneck: the main path and the projection are chains of ConvLayer and
// BatchNormLayer; the join is one binary add with a ReLU post-op. Backward, the ReLU gradient is
// written straight into the last batch norm's output gradient, which the projection's batch
// norm reads too, and the two input gradients are summed in place.
#include "drivers/onednn/onednn_bottleneck.h"

namespace dlscale::onednn {

using dnnl::algorithm;
using dnnl::prop_kind;

BottleneckLayer::BottleneckLayer(std::string name, const Layer& spec, const std::vector<ParamSlot>& slots,
                                 ParamVersion version)
    : NetLayer(std::move(name)) {
  const std::string& n = this->name();
  const ParamSlot none;
  auto conv = [&](const char* part, int64_t in, int64_t out, int64_t kernel, int64_t stride, size_t slot) {
    return std::make_unique<ConvLayer>(n + part, ConvSpec{in, out, kernel, stride, kernel / 2, false}, slots[slot],
                                       none, version);
  };
  auto bn = [&](const char* part, int64_t channels, size_t slot, bool relu) {
    return std::make_unique<BatchNormLayer>(n + part, channels, slots[slot], slots[slot + 1], relu);
  };
  main_.push_back(conv(".conv1", spec.in, spec.mid, 1, 1, 0));
  main_.push_back(bn(".bn1", spec.mid, 1, true));
  main_.push_back(conv(".conv2", spec.mid, spec.mid, 3, spec.stride, 3));
  main_.push_back(bn(".bn2", spec.mid, 4, true));
  main_.push_back(conv(".conv3", spec.mid, spec.out, 1, 1, 6));
  main_.push_back(bn(".bn3", spec.out, 7, false));
  if (slots.size() > 9) {  // projection shortcut
    shortcut_.push_back(conv(".down", spec.in, spec.out, 1, spec.stride, 9));
    shortcut_.push_back(bn(".down_bn", spec.out, 10, false));
  }
}

void BottleneckLayer::build(const Env& env, const Tensor& in, bool grad_out) {
  in_ = in;
  Tensor cur = in;
  for (auto& layer : main_) {
    with_context(layer->name(), [&] { layer->build(env, cur, true); });
    cur = layer->out();
  }
  const Tensor& main_out = main_.back()->out();
  const memory::desc sum_md = main_out.value.get_desc();
  Tensor shortcut = in;
  if (!shortcut_.empty()) {
    // The projection writes its input gradient to a buffer of its own, added to conv1's below.
    shortcut_grad_in_ = in.grad ? allocate(env, in.value.get_desc()) : memory();
    shortcut = Tensor{in.value, shortcut_grad_in_};
    for (auto& layer : shortcut_) {
      with_context(layer->name(), [&] { layer->build(env, shortcut, true); });
      shortcut = layer->out();
    }
  }

  with_context(name() + ".join", [&] {
    shortcut_value_ = Staged(env, shortcut.value, sum_md, Flow::kIn);
    dnnl::post_ops relu;
    relu.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(relu);
    const dnnl::binary::primitive_desc join_pd({algorithm::binary_add, sum_md, sum_md, sum_md}, attr, env.engine);
    out_ = allocate_tensor(env, join_pd.dst_desc(), grad_out);
    join_ = dnnl::binary(join_pd);
    join_args_ = {
        {DNNL_ARG_SRC_0, main_out.value}, {DNNL_ARG_SRC_1, shortcut_value_.mem()}, {DNNL_ARG_DST, out_.value}};
    if (!grad_out) return;

    // The forward descriptor is only the hint the backward one needs (the join did the ReLU).
    const dnnl::eltwise_forward::primitive_desc relu_hint(
        {prop_kind::forward_training, algorithm::eltwise_relu_use_dst_for_bwd, sum_md}, env.engine);
    const dnnl::eltwise_backward::primitive_desc relu_bwd_pd({algorithm::eltwise_relu_use_dst_for_bwd, sum_md, sum_md},
                                                             env.engine, relu_hint);
    relu_bwd_ = dnnl::eltwise_backward(relu_bwd_pd);
    relu_bwd_args_ = {{DNNL_ARG_DST, out_.value}, {DNNL_ARG_DIFF_DST, out_.grad}, {DNNL_ARG_DIFF_SRC, main_out.grad}};

    const memory::desc in_md = in.value.get_desc();
    memory addend;  // what the shortcut adds to the input gradient
    if (!shortcut_.empty()) {
      // Both batch norms read the same d(sum): shared when their layouts agree, else copied.
      if (!shortcut_.back()->rebind_output_grad(main_out.grad)) {
        const memory& projection_grad = shortcut_.back()->out().grad;
        copy_sum_grad_ = dnnl::reorder(main_out.grad, projection_grad);
        copy_sum_grad_args_ = {{DNNL_ARG_FROM, main_out.grad}, {DNNL_ARG_TO, projection_grad}};
      }
      addend = shortcut_grad_in_;
    } else if (in.grad) {
      identity_grad_ = Staged(env, main_out.grad, in_md, Flow::kIn);
      addend = identity_grad_.mem();
    }
    if (!in.grad) return;
    const dnnl::binary::primitive_desc add_pd({algorithm::binary_add, in_md, in_md, in_md}, env.engine);
    add_grad_ = dnnl::binary(add_pd);
    add_grad_args_ = {{DNNL_ARG_SRC_0, in.grad}, {DNNL_ARG_SRC_1, addend}, {DNNL_ARG_DST, in.grad}};
  });
}

void BottleneckLayer::forward(const Env& env) {
  for (auto& layer : main_) layer->forward(env);
  for (auto& layer : shortcut_) layer->forward(env);
  shortcut_value_.sync(env);
  join_.execute(env.stream, join_args_);
}

void BottleneckLayer::reset_statistics() {
  for (auto& layer : main_) layer->reset_statistics();
  for (auto& layer : shortcut_) layer->reset_statistics();
}

void BottleneckLayer::backward(const Env& env) {
  relu_bwd_.execute(env.stream, relu_bwd_args_);
  for (auto it = main_.rbegin(); it != main_.rend(); ++it) (*it)->backward(env);  // conv1 writes in_.grad
  if (!shortcut_.empty()) {
    if (copy_sum_grad_) copy_sum_grad_.execute(env.stream, copy_sum_grad_args_);
    for (auto it = shortcut_.rbegin(); it != shortcut_.rend(); ++it) (*it)->backward(env);
  } else {
    identity_grad_.sync(env);
  }
  if (add_grad_) add_grad_.execute(env.stream, add_grad_args_);
}

}  // namespace dlscale::onednn
