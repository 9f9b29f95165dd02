#include "drivers/cuda/cuda_lstm.h"

#include <stdexcept>

#include <fmt/format.h>

#include "drivers/cuda/cuda_kernels.h"

namespace dlscale::cuda {

namespace {

bool bf16(Precision precision) { return precision == Precision::kBf16; }

/// The descriptor of `l`: one input bias per gate (the canonical layout has one bias of 4H per
/// layer), no dropout between layers. fp32 and tf32: fp32 data, FMA math under fp32 so that no
/// TF32 sneaks in. bf16: bf16 data, weights and states with fp32 arithmetic on tensor cores (cuDNN
/// has no bf16 arithmetic for RNNs).
void describe(cudnnHandle_t cudnn, cudnnRNNDescriptor_t rnn, cudnnDropoutDescriptor_t no_dropout, const Layer& l,
              Precision precision) {
  DLSCALE_CHECK_CUDA(cudnnSetDropoutDescriptor(no_dropout, cudnn, 0.0f, nullptr, 0, 0));
  cudnnMathType_t math = CUDNN_TENSOR_OP_MATH;
  if (precision == Precision::kFp32) math = CUDNN_FMA_MATH;
  if (precision == Precision::kTf32) math = CUDNN_DEFAULT_MATH;
  const cudnnDataType_t data = bf16(precision) ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
  // Padded I/O: required for the unpacked batch-major layout the activations already have.
  DLSCALE_CHECK_CUDA(cudnnSetRNNDescriptor_v8(
      rnn, CUDNN_RNN_ALGO_STANDARD, CUDNN_LSTM, CUDNN_RNN_SINGLE_INP_BIAS, CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
      data, CUDNN_DATA_FLOAT, math, static_cast<int32_t>(l.in), static_cast<int32_t>(l.out),
      static_cast<int32_t>(l.out), static_cast<int32_t>(l.num_layers), no_dropout, CUDNN_RNN_PADDED_IO_ENABLED));
}

int64_t elements(cudnnTensorDescriptor_t desc) {
  cudnnDataType_t type{};
  int dims[8] = {0}, strides[8] = {0}, rank = 0;
  DLSCALE_CHECK_CUDA(cudnnGetTensorNdDescriptor(desc, 8, &type, &rank, dims, strides));
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= dims[i];
  return rank == 0 ? 0 : n;
}

class LstmLayer final : public GpuLayer {
 public:
  LstmLayer(LayerContext& ctx, const Layer& l, int64_t batch, int64_t steps, const LayerParams& p)
      : ctx_(ctx),
        batch_(batch),
        steps_(steps),
        hidden_(l.out),
        all_steps_(l.all_steps),
        act_bytes_(bytes_of(ctx.act)),
        weights_(bf16(ctx.precision) ? p.bf16[0] : static_cast<void*>(p.value[0])),
        grad_(p.grad[0]),
        weight_bytes_(p.weight_space_bytes) {
    describe(ctx.cudnn, rnn_, no_dropout_, l, ctx.precision);
    size_t bytes = 0;
    DLSCALE_CHECK_CUDA(cudnnGetRNNWeightSpaceSize(ctx.cudnn, rnn_, &bytes));
    if (bytes != weight_bytes_) {
      throw std::logic_error(
          fmt::format("cuda driver: LSTM weight space is {} bytes, the layout reserved {}", bytes, weight_bytes_));
    }
    // cuDNN writes the weight gradient in the weight space's type: under bf16 into a bf16 space of
    // the layer's own, widened into the fp32 gradient buffer afterwards.
    if (bf16(ctx.precision)) dweights16_ = gpu::DeviceBuffer(weight_bytes_, ctx.memory);
    const std::vector<int> lengths(static_cast<size_t>(batch), static_cast<int>(steps));
    seq_lengths_ = gpu::DeviceBuffer(lengths.size() * sizeof(int32_t), ctx.memory);
    DLSCALE_CHECK_CUDA(
        cudaMemcpy(seq_lengths_.get(), lengths.data(), lengths.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    DLSCALE_CHECK_CUDA(cudnnSetRNNDataDescriptor(x_desc_, ctx.act_cudnn, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
                                                 static_cast<int>(steps), static_cast<int>(batch),
                                                 static_cast<int>(l.in), lengths.data(), nullptr));
    DLSCALE_CHECK_CUDA(cudnnSetRNNDataDescriptor(y_desc_, ctx.act_cudnn, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
                                                 static_cast<int>(steps), static_cast<int>(batch),
                                                 static_cast<int>(l.out), lengths.data(), nullptr));
    const int dims[3] = {static_cast<int>(l.num_layers), static_cast<int>(batch), static_cast<int>(l.out)};
    const int strides[3] = {dims[1] * dims[2], dims[2], 1};
    DLSCALE_CHECK_CUDA(cudnnSetTensorNdDescriptor(h_desc_, ctx.act_cudnn, 3, dims, strides));
    size_t reserve = 0;
    DLSCALE_CHECK_CUDA(
        cudnnGetRNNTempSpaceSizes(ctx.cudnn, rnn_, CUDNN_FWD_MODE_TRAINING, x_desc_, &workspace_, &reserve));
    reserve_ = gpu::DeviceBuffer(reserve, ctx.memory);
    if (!all_steps_) {
      // Only the last step feeds the next layer: the full sequence and its gradient live here.
      y_full_ = gpu::DeviceBuffer(static_cast<size_t>(batch * steps * hidden_) * act_bytes_, ctx.memory);
      dy_full_ = gpu::DeviceBuffer(static_cast<size_t>(batch * steps * hidden_) * act_bytes_, ctx.memory);
    }
    input_elems_ = batch * steps * l.in;
  }

  size_t prepare(const void*, void*, void* dx, void*) override {
    // cuDNN always writes the input gradient; without a consumer it lands in scratch.
    if (dx == nullptr) dx_scratch_ = gpu::DeviceBuffer(static_cast<size_t>(input_elems_) * act_bytes_, ctx_.memory);
    return workspace_;
  }

  void forward(const void* x, void* y) override {
    void* seq = all_steps_ ? y : y_full_.get();
    DLSCALE_CHECK_CUDA(cudnnRNNForward(ctx_.cudnn, rnn_, CUDNN_FWD_MODE_TRAINING, seq_lengths_.as<int32_t>(), x_desc_,
                                       x, y_desc_, seq, h_desc_, nullptr, nullptr, h_desc_, nullptr, nullptr,
                                       weight_bytes_, weights_, ctx_.workspace_bytes, ctx_.workspace, reserve_.bytes(),
                                       reserve_.get()));
    if (!all_steps_) select_last_step(ctx_.act, seq, y, batch_, steps_, hidden_, ctx_.stream);
  }

  void backward(const void* x, const void* y, const void* dy, void* dx) override {
    const void* seq = y;
    const void* dseq = dy;
    if (!all_steps_) {
      scatter_last_step(ctx_.act, dy, dy_full_.get(), batch_, steps_, hidden_, ctx_.stream);
      seq = y_full_.get();
      dseq = dy_full_.get();
    }
    // Data first: it prepares the reserve space that the weight gradient reads.
    DLSCALE_CHECK_CUDA(cudnnRNNBackwardData_v8(
        ctx_.cudnn, rnn_, seq_lengths_.as<int32_t>(), y_desc_, seq, dseq, x_desc_,
        dx != nullptr ? dx : dx_scratch_.get(), h_desc_, nullptr, nullptr, nullptr, h_desc_, nullptr, nullptr, nullptr,
        weight_bytes_, weights_, ctx_.workspace_bytes, ctx_.workspace, reserve_.bytes(), reserve_.get()));
    // cuDNN only adds weight gradients (CUDNN_WGRAD_MODE_ADD), so they start from zero.
    void* dweights = dweights16_.get() != nullptr ? dweights16_.get() : static_cast<void*>(grad_);
    DLSCALE_CHECK_CUDA(cudaMemsetAsync(dweights, 0, weight_bytes_, ctx_.stream));
    DLSCALE_CHECK_CUDA(cudnnRNNBackwardWeights_v8(
        ctx_.cudnn, rnn_, CUDNN_WGRAD_MODE_ADD, seq_lengths_.as<int32_t>(), x_desc_, x, h_desc_, nullptr, y_desc_, seq,
        weight_bytes_, dweights, ctx_.workspace_bytes, ctx_.workspace, reserve_.bytes(), reserve_.get()));
    if (dweights16_.get() != nullptr) {
      from_bf16(dweights16_.get(), grad_, static_cast<int64_t>(weight_bytes_ / 2), ctx_.stream);
    }
  }

 private:
  LayerContext& ctx_;
  int64_t batch_, steps_, hidden_, input_elems_ = 0;
  bool all_steps_;
  size_t act_bytes_;
  void* weights_;  // the fp32 weight space, or under bf16 its bf16 copy
  float* grad_;    // the layer's block of the fp32 gradient buffer
  size_t weight_bytes_, workspace_ = 0;
  gpu::RnnDesc rnn_;
  gpu::DropoutDesc no_dropout_;
  gpu::RnnDataDesc x_desc_, y_desc_;
  gpu::TensorDesc h_desc_;
  gpu::DeviceBuffer seq_lengths_, reserve_, y_full_, dy_full_, dx_scratch_, dweights16_;
};

}  // namespace

LstmWeightLayout lstm_weight_layout(cudnnHandle_t cudnn, const Layer& l, int64_t canonical_offset,
                                    Precision precision) {
  gpu::RnnDesc rnn;
  gpu::DropoutDesc no_dropout;
  describe(cudnn, rnn, no_dropout, l, precision);
  LstmWeightLayout layout;
  DLSCALE_CHECK_CUDA(cudnnGetRNNWeightSpaceSize(cudnn, rnn, &layout.bytes));
  const int64_t value_bytes = bf16(precision) ? 2 : 4;
  layout.values = static_cast<int64_t>(layout.bytes) / value_bytes;
  // cuDNN reports addresses inside a weight space, so it gets a real (uncounted, temporary) one.
  const gpu::DeviceBuffer space(layout.bytes, nullptr);
  const auto offset_of = [&](void* address) {
    return static_cast<int64_t>(static_cast<char*>(address) - static_cast<char*>(space.get())) / value_bytes;
  };
  const int64_t h = l.out;
  int64_t base = canonical_offset, mapped = 0;
  for (int64_t s = 0; s < l.num_layers; ++s) {
    const int64_t in = s == 0 ? l.in : h;
    const int64_t w_ih = base, w_hh = base + 4 * h * in, bias = w_hh + 4 * h * h;
    for (int id = 0; id < 8; ++id) {
      gpu::TensorDesc m_desc, b_desc;
      void* m_addr = nullptr;
      void* b_addr = nullptr;
      DLSCALE_CHECK_CUDA(cudnnGetRNNWeightParams(cudnn, rnn, static_cast<int32_t>(s), layout.bytes, space.get(), id,
                                                 m_desc, &m_addr, b_desc, &b_addr));
      const int gate = id % 4;  // i, f, g, o: cuDNN's order is the canonical one
      const bool input = id < 4;
      const int64_t width = input ? in : h;
      if (m_addr != nullptr) {
        if (elements(m_desc) != h * width) {
          throw std::logic_error(fmt::format("cuda driver: cuDNN LSTM matrix {} of layer {} has {} values, not {}", id,
                                             s, elements(m_desc), h * width));
        }
        layout.pieces.push_back({(input ? w_ih : w_hh) + gate * h * width, offset_of(m_addr), h * width});
        mapped += h * width;
      }
      if (b_addr != nullptr) {
        if (!input || elements(b_desc) != h) {
          throw std::logic_error(fmt::format("cuda driver: unexpected cuDNN LSTM bias {} of layer {}", id, s));
        }
        layout.pieces.push_back({bias + gate * h, offset_of(b_addr), h});
        mapped += h;
      }
    }
    base = bias + 4 * h;
  }
  if (mapped != base - canonical_offset) {
    throw std::logic_error(fmt::format("cuda driver: cuDNN's LSTM weight space holds {} of the {} canonical values",
                                       mapped, base - canonical_offset));
  }
  return layout;
}

std::unique_ptr<GpuLayer> make_lstm_layer(LayerContext& ctx, const Layer& l, int64_t batch, int64_t steps,
                                          const LayerParams& params) {
  return std::make_unique<LstmLayer>(ctx, l, batch, steps, params);
}

}  // namespace dlscale::cuda
