// Stacked LSTMs (gates i, f, g, o; one bias per stacked layer, as in workloads/workload.h). The
// layer's input and output are batch-major ([N, T, features], like every activation here), but
// inside it every sequence tensor is time-major ([T, N, features]): then one step's rows are
// contiguous, so each recurrent product h_{t-1} W_hh^T is a plain GEMM on [N, H] rows, and the
// input products of all steps are one GEMM over [T*N] rows, both forward and backward.
//
// Per stacked layer, forward: gates = X W_ih^T (all steps), then per step gates_t += h_{t-1}
// W_hh^T and one kernel adds the bias, applies the gate nonlinearities in place and advances c
// and h. Backward through time: per step (last first) one kernel turns dh_t into the four gates'
// pre-activation gradients, and dh_{t-1} = dgates_t W_hh; then dW_ih, dW_hh and dx are one GEMM
// each over all steps, and the bias gradient a column sum.
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "drivers/kokkos/kokkos_common.h"

namespace dlscale::kk {

namespace lstm_kernels {

/// dst[b, a, c] = src[a, b, c]: batch-major <-> time-major.
void swap_leading(Floats src, Floats dst, int64_t a, int64_t b, int64_t c) {
  Kokkos::parallel_for(
      "kokkos_driver::lstm_transpose", Range(0, a * b * c), KOKKOS_LAMBDA(int64_t i) {
        const int64_t k = i % c, ib = (i / c) % b, ia = i / (b * c);
        dst((ib * a + ia) * c + k) = src(i);
      });
}

/// Step t of one stacked layer: gates_t holds the pre-activations without the bias; they are
/// replaced by sigmoid(i), sigmoid(f), tanh(g), sigmoid(o), and c_t, h_t are written.
void cell_forward(Floats gates, Floats cell, Floats hidden, Floats bias, int64_t t, int64_t n, int64_t h) {
  Kokkos::parallel_for(
      "kokkos_driver::lstm_cell", Range(0, n * h), KOKKOS_LAMBDA(int64_t e) {
        const int64_t b = e / h, k = e % h, row = t * n + b, g0 = row * 4 * h;
        const float i = sigmoid(gates(g0 + k) + bias(k));
        const float f = sigmoid(gates(g0 + h + k) + bias(h + k));
        const float g = math::tanh(gates(g0 + 2 * h + k) + bias(2 * h + k));
        const float o = sigmoid(gates(g0 + 3 * h + k) + bias(3 * h + k));
        gates(g0 + k) = i;
        gates(g0 + h + k) = f;
        gates(g0 + 2 * h + k) = g;
        gates(g0 + 3 * h + k) = o;
        const float c_prev = t > 0 ? cell((row - n) * h + k) : 0.0f;
        const float c = f * c_prev + i * g;
        cell(row * h + k) = c;
        hidden(row * h + k) = o * math::tanh(c);
      });
}

/// Step t backward: dh = d_out_t + dh_next; dc = dc_next + dh o (1 - tanh(c)^2); the four
/// pre-activation gradients go to dgates_t, and dc_next becomes dc f for step t - 1.
void cell_backward(Floats gates, Floats cell, Floats d_out, Floats dh_next, Floats dc_next, Floats dgates, int64_t t,
                   int64_t n, int64_t h) {
  Kokkos::parallel_for(
      "kokkos_driver::lstm_cell_backward", Range(0, n * h), KOKKOS_LAMBDA(int64_t e) {
        const int64_t k = e % h, row = t * n + e / h, g0 = row * 4 * h;
        const float i = gates(g0 + k), f = gates(g0 + h + k), g = gates(g0 + 2 * h + k), o = gates(g0 + 3 * h + k);
        const float c_prev = t > 0 ? cell((row - n) * h + k) : 0.0f;
        const float tanh_c = math::tanh(cell(row * h + k));
        const float dh = d_out(row * h + k) + dh_next(e);
        const float dc = dc_next(e) + dh * o * (1 - tanh_c * tanh_c);
        dgates(g0 + k) = dc * g * i * (1 - i);
        dgates(g0 + h + k) = dc * c_prev * f * (1 - f);
        dgates(g0 + 2 * h + k) = dc * i * (1 - g * g);
        dgates(g0 + 3 * h + k) = dh * tanh_c * o * (1 - o);
        dc_next(e) = dc * f;
      });
}

}  // namespace lstm_kernels

namespace {

namespace lk = lstm_kernels;

class LstmLayer final : public NetLayer {
 public:
  LstmLayer(const std::string& name, const Layer& l, std::vector<ParamSlot> slots)
      : NetLayer(name),
        in_(l.in),
        h_(l.out),
        layers_(l.num_layers),
        all_steps_(l.all_steps),
        slots_(std::move(slots)) {}

  void build(const Activation& x, const Floats& dx) override {
    if (x.shape.size() != 3 || x.shape[2] != in_) {
      throw std::invalid_argument(fmt::format("kokkos driver: {} needs a [N, T, {}] input", name(), in_));
    }
    n_ = x.shape[0];
    t_ = x.shape[1];
    x_ = x.data;
    dx_ = dx;
    const int64_t rows = t_ * n_;
    xt_ = make_floats(name() + ".x_time_major", rows * in_);
    dxt_ = dx.extent(0) > 0 ? make_floats(name() + ".dx_time_major", rows * in_) : Floats();
    gates_.clear();
    cell_.clear();
    hidden_.clear();
    for (int64_t l = 0; l < layers_; ++l) {
      const std::string at = fmt::format("{}.l{}", name(), l);
      gates_.push_back(make_floats(at + ".gates", rows * 4 * h_));
      cell_.push_back(make_floats(at + ".cell", rows * h_));
      hidden_.push_back(make_floats(at + ".hidden", rows * h_));
    }
    dgates_ = make_floats(name() + ".dgates", rows * 4 * h_);
    dh_next_ = make_floats(name() + ".dh_next", n_ * h_);
    dc_next_ = make_floats(name() + ".dc_next", n_ * h_);
    for (Floats& d : d_hidden_) d = make_floats(name() + ".d_hidden", rows * h_);
    const int64_t out = all_steps_ ? rows * h_ : n_ * h_;
    y_ = {make_floats(name() + ".y", out),
          all_steps_ ? std::vector<int64_t>{n_, t_, h_} : std::vector<int64_t>{n_, h_}};
    dy_ = make_floats(name() + ".dy", out);
  }

  void forward(Pass) override {
    const int64_t rows = t_ * n_, step = n_ * h_;
    lk::swap_leading(x_, xt_, n_, t_, in_);
    for (int64_t l = 0; l < layers_; ++l) {
      const Floats& input = l == 0 ? xt_ : hidden_[static_cast<size_t>(l - 1)];
      const int64_t width = l == 0 ? in_ : h_;
      const Floats &gates = gates_[static_cast<size_t>(l)], &hidden = hidden_[static_cast<size_t>(l)];
      gemm(false, true, 1, {input.data(), rows, width}, {w_ih(l).value.data(), 4 * h_, width}, 0,
           {gates.data(), rows, 4 * h_});
      for (int64_t t = 0; t < t_; ++t) {
        if (t > 0) {
          gemm(false, true, 1, {hidden.data() + (t - 1) * step, n_, h_}, {w_hh(l).value.data(), 4 * h_, h_}, 1,
               {gates.data() + t * 4 * step, n_, 4 * h_});
        }
        lk::cell_forward(gates, cell_[static_cast<size_t>(l)], hidden, bias(l).value, t, n_, h_);
      }
    }
    const Floats& top = hidden_.back();
    if (all_steps_) {
      lk::swap_leading(top, y_.data, t_, n_, h_);
    } else {
      Kokkos::deep_copy(y_.data, slice(top, (t_ - 1) * step, step));
    }
  }

  void backward() override {
    const int64_t rows = t_ * n_, step = n_ * h_;
    // The gradient reaching each step's output of the current stacked layer, time-major.
    size_t cur = 0;
    if (all_steps_) {
      lk::swap_leading(dy_, d_hidden_[cur], n_, t_, h_);
    } else {
      Kokkos::deep_copy(d_hidden_[cur], 0.0f);
      Kokkos::deep_copy(slice(d_hidden_[cur], (t_ - 1) * step, step), dy_);
    }
    for (int64_t l = layers_ - 1; l >= 0; --l) {
      const auto li = static_cast<size_t>(l);
      const Floats& input = l == 0 ? xt_ : hidden_[li - 1];
      const int64_t width = l == 0 ? in_ : h_;
      Kokkos::deep_copy(dh_next_, 0.0f);
      Kokkos::deep_copy(dc_next_, 0.0f);
      for (int64_t t = t_ - 1; t >= 0; --t) {
        lk::cell_backward(gates_[li], cell_[li], d_hidden_[cur], dh_next_, dc_next_, dgates_, t, n_, h_);
        if (t > 0) {
          gemm(false, false, 1, {dgates_.data() + t * 4 * step, n_, 4 * h_}, {w_hh(l).value.data(), 4 * h_, h_}, 0,
               {dh_next_.data(), n_, h_});
        }
      }
      gemm(true, false, 1, {dgates_.data(), rows, 4 * h_}, {input.data(), rows, width}, 0,
           {w_ih(l).grad.data(), 4 * h_, width});
      if (t_ > 1) {
        // dW_hh pairs step t's gate gradients with h_{t-1}: steps 1.. against hidden 0..T-2.
        gemm(true, false, 1, {dgates_.data() + 4 * step, rows - n_, 4 * h_}, {hidden_[li].data(), rows - n_, h_}, 0,
             {w_hh(l).grad.data(), 4 * h_, h_});
      } else {
        Kokkos::deep_copy(w_hh(l).grad, 0.0f);
      }
      bias_grad(dgates_, bias(l).grad, rows, 4 * h_, 1);
      if (l > 0) {
        gemm(false, false, 1, {dgates_.data(), rows, 4 * h_}, {w_ih(l).value.data(), 4 * h_, width}, 0,
             {d_hidden_[1 - cur].data(), rows, width});
        cur = 1 - cur;
      } else if (dx_.extent(0) > 0) {
        gemm(false, false, 1, {dgates_.data(), rows, 4 * h_}, {w_ih(l).value.data(), 4 * h_, width}, 0,
             {dxt_.data(), rows, width});
        lk::swap_leading(dxt_, dx_, t_, n_, in_);
      }
    }
  }

 private:
  const ParamSlot& w_ih(int64_t l) const { return slots_[static_cast<size_t>(3 * l)]; }
  const ParamSlot& w_hh(int64_t l) const { return slots_[static_cast<size_t>(3 * l + 1)]; }
  const ParamSlot& bias(int64_t l) const { return slots_[static_cast<size_t>(3 * l + 2)]; }

  int64_t in_, h_, layers_;
  bool all_steps_;
  std::vector<ParamSlot> slots_;
  int64_t n_ = 0, t_ = 0;
  Floats x_, dx_, xt_, dxt_;
  std::vector<Floats> gates_, cell_, hidden_;  // per stacked layer, time-major
  Floats dgates_, dh_next_, dc_next_;
  Floats d_hidden_[2];  // the current layer's output gradient, and the one below's
};

}  // namespace

std::unique_ptr<NetLayer> make_lstm_layer(const std::string& name, const Layer& l,
                                          const std::vector<ParamSlot>& slots) {
  return std::make_unique<LstmLayer>(name, l, slots);
}

}  // namespace dlscale::kk
