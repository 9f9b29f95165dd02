// Stacked LSTMs on oneDNN's LSTM primitives. Activations stay batch-first: oneDNN's `ntc` format
// is the [N, T, C] buffer the embedding writes and the per-step Linear reads, so no transpose is
// needed. No initial state is passed (zero h_0, c_0). For a last-step-only output the top
// level's dst_iter (its final hidden state, [1, 1, N, H] = [N, H]) is the output itself, and
// the gradient enters through diff_dst_iter with a zero diff_dst_layer.
#include "drivers/onednn/onednn_lstm.h"

namespace dlscale::onednn {

namespace {

using dnnl::prop_kind;
using tag = memory::format_tag;

constexpr auto kF32 = memory::data_type::f32;

}  // namespace

LstmLayer::LstmLayer(std::string name, const Layer& spec, std::vector<ParamSlot> slots, ParamVersion version)
    : NetLayer(std::move(name)),
      input_(spec.in),
      hidden_(spec.out),
      layers_(spec.num_layers),
      all_steps_(spec.all_steps),
      slots_(std::move(slots)),
      version_(version) {}

void LstmLayer::build(const Env& env, const Tensor& in, bool grad_out) {
  const memory::dims dims = in.value.get_desc().dims();  // N, T, in
  const int64_t n = dims[0], steps = dims[1];
  const auto op = env.compute;
  src_ = StagedTensor(env, in, plain_md(dims));
  src_op_ = Staged(env, src_.tensor().value, with_type(plain_md(dims), op), Flow::kIn);
  const memory::dims out_dims = all_steps_ ? memory::dims{n, steps, hidden_} : memory::dims{n, hidden_};
  out_ = allocate_tensor(env, plain_md(out_dims), grad_out);
  out_op_ = Staged(env, out_.value, with_type(plain_md(out_dims), op), Flow::kOut);
  weights_seen_ = ~uint64_t{0};
  levels_.clear();
  const memory::desc seq_md = plain_md({n, steps, hidden_});
  // The bottom level writes its input gradient even when nothing below needs it.
  buffers_.clear();
  auto buffer = [&](const memory::desc& md) { return buffers_.emplace_back(allocate(env, md)); };
  memory src = src_op_.mem(), diff_src = src_.tensor().grad ? src_.tensor().grad : buffer(plain_md(dims));
  for (int64_t level = 0; level < layers_; ++level) {
    const bool top = level == layers_ - 1;
    memory dst, diff_dst;
    if (top && all_steps_) {
      dst = out_op_.mem();
      diff_dst = out_.grad;
    } else {
      // A level below the top, or a top level whose per-step outputs receive no gradient (its
      // diff_dst_layer stays zero: allocate() zeroes it and nothing ever writes it).
      dst = buffer(with_type(seq_md, op));
      diff_dst = buffer(seq_md);
    }
    levels_.push_back(with_context(name() + ".l" + std::to_string(level), [&] {
      return build_level(env, static_cast<size_t>(level), src, diff_src, dst, diff_dst, top && !all_steps_);
    }));
    src = dst;
    diff_src = diff_dst;
  }
}

LstmLayer::Level LstmLayer::build_level(const Env& env, size_t level, const memory& src, const memory& diff_src,
                                        const memory& dst, const memory& diff_dst, bool last_step_only) {
  const int64_t steps = src.get_desc().dims()[1], n = src.get_desc().dims()[0];
  const int64_t width = level == 0 ? input_ : hidden_;
  const auto op = env.compute;
  // RNN data descriptors are logically (T, N, C); `ntc` lays them out batch-first.
  const memory::desc src_md({steps, n, width}, op, tag::ntc), dst_md({steps, n, hidden_}, op, tag::ntc);
  const memory::desc diff_src_md({steps, n, width}, kF32, tag::ntc), diff_dst_md({steps, n, hidden_}, kF32, tag::ntc);
  const memory::desc none;
  // The final hidden state (the output when only the last step is kept) and the cell state.
  const memory::desc iter_md = last_step_only ? memory::desc({1, 1, n, hidden_}, op, tag::ldnc) : none;
  const memory::desc iter_f32 = last_step_only ? memory::desc({1, 1, n, hidden_}, kF32, tag::ldnc) : none;
  const memory::desc w_layer_md({1, 1, width, 4, hidden_}, kF32, tag::ldgoi),
      w_iter_md({1, 1, hidden_, 4, hidden_}, kF32, tag::ldgoi), bias_md({1, 1, 4, hidden_}, kF32, tag::ldgo);
  const memory::desc w_layer_any({1, 1, width, 4, hidden_}, op, tag::any),
      w_iter_any({1, 1, hidden_, 4, hidden_}, op, tag::any);
  const memory::desc dw_layer_any({1, 1, width, 4, hidden_}, kF32, tag::any),
      dw_iter_any({1, 1, hidden_, 4, hidden_}, kF32, tag::any);
  const auto direction = dnnl::rnn_direction::unidirectional_left2right;

  const dnnl::lstm_forward::primitive_desc fwd_pd({prop_kind::forward_training, direction, src_md, none, none,
                                                   w_layer_any, w_iter_any, bias_md, dst_md, iter_md, iter_f32},
                                                  env.engine);
  const dnnl::lstm_backward::primitive_desc bwd_pd({prop_kind::backward,
                                                    direction,
                                                    src_md,
                                                    none,
                                                    none,
                                                    w_layer_any,
                                                    w_iter_any,
                                                    bias_md,
                                                    dst_md,
                                                    iter_md,
                                                    iter_f32,
                                                    diff_src_md,
                                                    none,
                                                    none,
                                                    dw_layer_any,
                                                    dw_iter_any,
                                                    bias_md,
                                                    diff_dst_md,
                                                    iter_f32,
                                                    iter_f32},
                                                   env.engine, fwd_pd);

  const ParamSlot& w_ih = slots_[3 * level];
  const ParamSlot& w_hh = slots_[3 * level + 1];
  const ParamSlot& bias = slots_[3 * level + 2];
  const memory user_w_layer = wrap(env, w_layer_md, w_ih.value), user_w_iter = wrap(env, w_iter_md, w_hh.value);
  Level lv;
  lv.fwd_weights_layer = Staged(env, user_w_layer, fwd_pd.weights_layer_desc(), Flow::kIn);
  lv.fwd_weights_iter = Staged(env, user_w_iter, fwd_pd.weights_iter_desc(), Flow::kIn);
  // Backward reads the weights in its own layout: staged from the forward copy when that one
  // already has it, from the canonical weights otherwise (an alias when they are `ldgoi`).
  auto bwd_from = [&](const memory::desc& want, const Staged& fwd, const memory& user) {
    return Staged(env, want == fwd.mem().get_desc() ? fwd.mem() : user, want, Flow::kIn);
  };
  lv.bwd_weights_layer = bwd_from(bwd_pd.weights_layer_desc(), lv.fwd_weights_layer, user_w_layer);
  lv.bwd_weights_iter = bwd_from(bwd_pd.weights_iter_desc(), lv.fwd_weights_iter, user_w_iter);
  lv.diff_weights_layer = Staged(env, wrap(env, w_layer_md, w_ih.grad), bwd_pd.diff_weights_layer_desc(), Flow::kOut);
  lv.diff_weights_iter = Staged(env, wrap(env, w_iter_md, w_hh.grad), bwd_pd.diff_weights_iter_desc(), Flow::kOut);
  lv.diff_bias = Staged(env, wrap(env, bias_md, bias.grad), bwd_pd.diff_bias_desc(), Flow::kOut);

  lv.fwd = dnnl::lstm_forward(fwd_pd);
  lv.fwd_args = {{DNNL_ARG_SRC_LAYER, wrap(env, src_md, src.get_data_handle())},
                 {DNNL_ARG_WEIGHTS_LAYER, lv.fwd_weights_layer.mem()},
                 {DNNL_ARG_WEIGHTS_ITER, lv.fwd_weights_iter.mem()},
                 {DNNL_ARG_BIAS, wrap(env, bias_md, bias.value)},
                 {DNNL_ARG_DST_LAYER, wrap(env, dst_md, dst.get_data_handle())},
                 {DNNL_ARG_WORKSPACE, allocate(env, fwd_pd.workspace_desc())}};
  if (last_step_only) {
    lv.fwd_args[DNNL_ARG_DST_ITER] = wrap(env, iter_md, out_op_.mem().get_data_handle());
    lv.fwd_args[DNNL_ARG_DST_ITER_C] = allocate(env, iter_f32);
  }

  lv.bwd = dnnl::lstm_backward(bwd_pd);
  lv.bwd_args = lv.fwd_args;
  lv.bwd_args[DNNL_ARG_WEIGHTS_LAYER] = lv.bwd_weights_layer.mem();
  lv.bwd_args[DNNL_ARG_WEIGHTS_ITER] = lv.bwd_weights_iter.mem();
  lv.bwd_args[DNNL_ARG_DIFF_SRC_LAYER] = wrap(env, diff_src_md, diff_src.get_data_handle());
  lv.bwd_args[DNNL_ARG_DIFF_WEIGHTS_LAYER] = lv.diff_weights_layer.mem();
  lv.bwd_args[DNNL_ARG_DIFF_WEIGHTS_ITER] = lv.diff_weights_iter.mem();
  lv.bwd_args[DNNL_ARG_DIFF_BIAS] = lv.diff_bias.mem();
  lv.bwd_args[DNNL_ARG_DIFF_DST_LAYER] = wrap(env, diff_dst_md, diff_dst.get_data_handle());
  if (last_step_only && out_.grad) {
    lv.bwd_args[DNNL_ARG_DIFF_DST_ITER] = wrap(env, iter_f32, out_.grad.get_data_handle());
    lv.bwd_args[DNNL_ARG_DIFF_DST_ITER_C] = allocate(env, iter_f32);  // the final cell state gets no gradient
  }
  return lv;
}

void LstmLayer::forward(const Env& env) {
  src_.forward(env);
  src_op_.sync(env);
  if (*version_ != weights_seen_) {  // the canonical weights changed (update, load_parameters)
    for (const Level& lv : levels_) {
      for (const Staged* s :
           {&lv.fwd_weights_layer, &lv.fwd_weights_iter, &lv.bwd_weights_layer, &lv.bwd_weights_iter}) {
        s->sync(env);
      }
    }
    weights_seen_ = *version_;
  }
  for (const Level& lv : levels_) lv.fwd.execute(env.stream, lv.fwd_args);
  out_op_.sync(env);
}

void LstmLayer::backward(const Env& env) {
  for (auto it = levels_.rbegin(); it != levels_.rend(); ++it) {
    // oneDNN's RNN backward accumulates into its weight gradients: they start from zero.
    for (const Staged* s : {&it->diff_weights_layer, &it->diff_weights_iter, &it->diff_bias}) zero(s->mem());
    it->bwd.execute(env.stream, it->bwd_args);
    for (const Staged* s : {&it->diff_weights_layer, &it->diff_weights_iter, &it->diff_bias}) s->sync(env);
  }
  src_.backward(env);
}

}  // namespace dlscale::onednn
