// The Kokkos driver's layers: every layer kind of workloads/workload.h but the LSTM
// (kokkos_lstm.cpp). Matrix products (Linear, and convolutions as im2col + GEMM per sample) go to
// KokkosBlas::gemm; everything else is a Kokkos kernel below. Activations are NCHW (or [rows,
// features]), weights stay in their canonical slices of the model's flat buffers, and gradients
// are written straight into theirs, so the model's all-reduce and update each touch one buffer.
//
// Backward passes that would scatter into overlapping places (max-pooling windows, col2im,
// embedding rows) are written as gathers instead, so no kernel needs atomics and every result is
// deterministic: the same batch gives bit-identical gradients on every call.
#include <Kokkos_Random.hpp>

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "drivers/kokkos/kokkos_common.h"

namespace dlscale::kk {

using Argmax = Kokkos::View<int32_t*, Kokkos::LayoutRight, Device>;
using RandomPool = Kokkos::Random_XorShift64_Pool<ExecSpace>;

// ---------------------------------------------------------------------------------------------
// Kernels. Free functions with external linkage and explicit return types: the places nvcc
// accepts extended (device) lambdas in.

namespace layer_kernels {

constexpr double kBatchNormEps = 1e-5;

/// y[r, o, i] += b[o] over [rows, out, inner] (Linear: inner 1; convolution: inner = H*W). One
/// team per row r, so no element pays for index arithmetic and the innermost extent, which the
/// vector lanes walk, is contiguous.
void add_bias(Floats y, Floats b, int64_t rows, int64_t out, int64_t inner) {
  Kokkos::parallel_for(
      "kokkos_driver::add_bias", Team(static_cast<int>(rows), Kokkos::AUTO, Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& m) {
        const int64_t row = m.league_rank() * out;
        if (inner == 1) {
          Kokkos::parallel_for(Kokkos::TeamVectorRange(m, out), [&](int64_t o) { y(row + o) += b(o); });
          return;
        }
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, out), [&](int64_t o) {
          const float bias = b(o);
          const int64_t base = (row + o) * inner;
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(m, inner), [&](int64_t i) { y(base + i) += bias; });
        });
      });
}

void activation_forward(LayerKind kind, Floats x, Floats y) {
  const Range all(0, static_cast<int64_t>(x.extent(0)));
  if (kind == LayerKind::kReLU) {
    Kokkos::parallel_for(
        "kokkos_driver::relu", all, KOKKOS_LAMBDA(int64_t i) { y(i) = x(i) > 0 ? x(i) : 0.0f; });
  } else if (kind == LayerKind::kSigmoid) {
    Kokkos::parallel_for(
        "kokkos_driver::sigmoid", all, KOKKOS_LAMBDA(int64_t i) { y(i) = sigmoid(x(i)); });
  } else {
    Kokkos::parallel_for(
        "kokkos_driver::tanh", all, KOKKOS_LAMBDA(int64_t i) { y(i) = math::tanh(x(i)); });
  }
}

/// The backward passes need only the output: ReLU y > 0 iff x > 0, sigmoid' = y (1 - y),
/// tanh' = 1 - y^2.
void activation_backward(LayerKind kind, Floats y, Floats dy, Floats dx) {
  const Range all(0, static_cast<int64_t>(y.extent(0)));
  if (kind == LayerKind::kReLU) {
    Kokkos::parallel_for(
        "kokkos_driver::relu_backward", all, KOKKOS_LAMBDA(int64_t i) { dx(i) = y(i) > 0 ? dy(i) : 0.0f; });
  } else if (kind == LayerKind::kSigmoid) {
    Kokkos::parallel_for(
        "kokkos_driver::sigmoid_backward", all, KOKKOS_LAMBDA(int64_t i) { dx(i) = dy(i) * y(i) * (1.0f - y(i)); });
  } else {
    Kokkos::parallel_for(
        "kokkos_driver::tanh_backward", all, KOKKOS_LAMBDA(int64_t i) { dx(i) = dy(i) * (1.0f - y(i) * y(i)); });
  }
}

/// The geometry of a convolution or pooling window over one [C, H, W] sample.
struct Window {
  int64_t channels, height, width, kernel, stride, padding, out_height, out_width;
};

/// col[(c, ky, kx), (oy, ox)] = x[sample](c, oy*s - p + ky, ox*s - p + kx), zero outside. One
/// work item per output row (c, ky, kx, oy), so the index arithmetic is paid per row, not per
/// element, and the inner loop runs along contiguous memory.
void im2col(Floats x, int64_t sample, Window w, Floats col) {
  const int64_t k2 = w.kernel * w.kernel;
  const int64_t base = sample * w.channels * w.height * w.width;
  Kokkos::parallel_for(
      "kokkos_driver::im2col", Range(0, w.channels * k2 * w.out_height), KOKKOS_LAMBDA(int64_t r) {
        const int64_t oy = r % w.out_height, row = r / w.out_height;
        const int64_t c = row / k2, ky = (row % k2) / w.kernel, kx = row % w.kernel;
        const int64_t iy = oy * w.stride - w.padding + ky, dst = r * w.out_width;
        const int64_t src = base + (c * w.height + iy) * w.width - w.padding + kx;
        const bool row_inside = iy >= 0 && iy < w.height;
        for (int64_t ox = 0; ox < w.out_width; ++ox) {
          const int64_t ix = ox * w.stride - w.padding + kx;
          col(dst + ox) = row_inside && ix >= 0 && ix < w.width ? x(src + ox * w.stride) : 0.0f;
        }
      });
}

/// dx[sample](c, iy, ·) = the sum of dcol over every window position that read input row
/// (c, iy). One work item owns one input row and adds into it alone, so overlapping windows
/// need no atomics.
void col2im(Floats dcol, int64_t sample, Window w, Floats dx) {
  const int64_t plane = w.out_height * w.out_width, k = w.kernel;
  const int64_t base = sample * w.channels * w.height * w.width;
  Kokkos::parallel_for(
      "kokkos_driver::col2im", Range(0, w.channels * w.height), KOKKOS_LAMBDA(int64_t r) {
        const int64_t iy = r % w.height, c = r / w.height, dst = base + r * w.width;
        for (int64_t ix = 0; ix < w.width; ++ix) dx(dst + ix) = 0.0f;
        for (int64_t ky = 0; ky < k; ++ky) {
          const int64_t ty = iy + w.padding - ky;  // oy * stride for a window row that reads iy
          if (ty < 0 || ty % w.stride != 0 || ty / w.stride >= w.out_height) continue;
          for (int64_t kx = 0; kx < k; ++kx) {
            const int64_t src = ((c * k + ky) * k + kx) * plane + (ty / w.stride) * w.out_width;
            for (int64_t ox = 0; ox < w.out_width; ++ox) {
              const int64_t ix = ox * w.stride - w.padding + kx;
              if (ix >= 0 && ix < w.width) dx(dst + ix) += dcol(src + ox);
            }
          }
        }
      });
}

/// Max pooling with -inf padding over `planes` = N*C planes; `argmax` keeps the winner's index
/// within its plane. The first maximum in scan order wins a tie, as in PyTorch.
void max_pool_forward(Floats x, Floats y, Argmax argmax, int64_t planes, Window w) {
  const int64_t out_plane = w.out_height * w.out_width, in_plane = w.height * w.width;
  Kokkos::parallel_for(
      "kokkos_driver::max_pool", Range(0, planes * out_plane), KOKKOS_LAMBDA(int64_t i) {
        const int64_t plane = i / out_plane, oy = (i % out_plane) / w.out_width, ox = i % w.out_width;
        float best = 0;
        int32_t best_index = -1;
        for (int64_t ky = 0; ky < w.kernel; ++ky) {
          const int64_t iy = oy * w.stride - w.padding + ky;
          if (iy < 0 || iy >= w.height) continue;
          for (int64_t kx = 0; kx < w.kernel; ++kx) {
            const int64_t ix = ox * w.stride - w.padding + kx;
            if (ix < 0 || ix >= w.width) continue;
            const float v = x(plane * in_plane + iy * w.width + ix);
            if (best_index < 0 || v > best) {
              best = v;
              best_index = static_cast<int32_t>(iy * w.width + ix);
            }
          }
        }
        y(i) = best;
        argmax(i) = best_index;
      });
}

/// dx(iy, ix) = the sum of dy over the windows whose maximum was (iy, ix).
void max_pool_backward(Floats dy, Argmax argmax, Floats dx, int64_t planes, Window w) {
  const int64_t out_plane = w.out_height * w.out_width, in_plane = w.height * w.width;
  Kokkos::parallel_for(
      "kokkos_driver::max_pool_backward", Range(0, planes * in_plane), KOKKOS_LAMBDA(int64_t i) {
        const int64_t plane = i / in_plane, iy = (i % in_plane) / w.width, ix = i % w.width;
        const auto self = static_cast<int32_t>(iy * w.width + ix);
        // Windows oy with oy*s - p <= iy <= oy*s - p + k - 1.
        const int64_t y_lo = iy + w.padding - w.kernel + 1, x_lo = ix + w.padding - w.kernel + 1;
        const int64_t oy0 = y_lo <= 0 ? 0 : (y_lo + w.stride - 1) / w.stride;
        const int64_t ox0 = x_lo <= 0 ? 0 : (x_lo + w.stride - 1) / w.stride;
        const int64_t oy_hi = (iy + w.padding) / w.stride, ox_hi = (ix + w.padding) / w.stride;
        const int64_t oy1 = oy_hi < w.out_height ? oy_hi : w.out_height - 1;
        const int64_t ox1 = ox_hi < w.out_width ? ox_hi : w.out_width - 1;
        float sum = 0;
        for (int64_t oy = oy0; oy <= oy1; ++oy) {
          for (int64_t ox = ox0; ox <= ox1; ++ox) {
            const int64_t o = plane * out_plane + oy * w.out_width + ox;
            if (argmax(o) == self) sum += dy(o);
          }
        }
        dx(i) = sum;
      });
}

void global_avg_pool_forward(Floats x, Floats y, int64_t planes, int64_t plane) {
  Kokkos::parallel_for(
      "kokkos_driver::global_avg_pool", Range(0, planes), KOKKOS_LAMBDA(int64_t i) {
        float sum = 0;
        for (int64_t j = 0; j < plane; ++j) sum += x(i * plane + j);
        y(i) = sum / static_cast<float>(plane);
      });
}

void global_avg_pool_backward(Floats dy, Floats dx, int64_t plane) {
  Kokkos::parallel_for(
      "kokkos_driver::global_avg_pool_backward", Range(0, static_cast<int64_t>(dx.extent(0))),
      KOKKOS_LAMBDA(int64_t i) { dx(i) = dy(i / plane) / static_cast<float>(plane); });
}

/// Inverted dropout: mask = 0 with probability p, else 1/(1-p); y = x * mask. Each chunk of
/// elements draws from one generator state of the pool, so a state is taken once per chunk
/// rather than once per element.
void dropout_forward(RandomPool pool, float p, Floats x, Floats mask, Floats y) {
  constexpr int64_t kChunk = 4096;
  const int64_t n = static_cast<int64_t>(x.extent(0));
  const float keep_scale = p < 1 ? 1.0f / (1.0f - p) : 0.0f;  // p = 1 drops everything
  Kokkos::parallel_for(
      "kokkos_driver::dropout", Range(0, (n + kChunk - 1) / kChunk), KOKKOS_LAMBDA(int64_t chunk) {
        auto gen = pool.get_state();
        const int64_t end = (chunk + 1) * kChunk < n ? (chunk + 1) * kChunk : n;
        for (int64_t i = chunk * kChunk; i < end; ++i) {
          mask(i) = gen.frand() < p ? 0.0f : keep_scale;
          y(i) = x(i) * mask(i);
        }
        pool.free_state(gen);
      });
}

void multiply(Floats a, Floats b, Floats out) {
  Kokkos::parallel_for(
      "kokkos_driver::multiply", Range(0, static_cast<int64_t>(out.extent(0))),
      KOKKOS_LAMBDA(int64_t i) { out(i) = a(i) * b(i); });
}

/// y = gamma (x - mu) is + beta over channel c of [N, C, HW] (ReLU applied when `relu`), as one
/// multiply-add per element with the per-channel constants folded in double.
KOKKOS_INLINE_FUNCTION void normalise_channel(const Member& m, const Floats& x, const Floats& y, int64_t n,
                                              int64_t channels, int64_t c, int64_t hw, double gamma, double beta,
                                              double mu, double is, bool relu) {
  const auto scale = static_cast<float>(gamma * is), shift = static_cast<float>(beta - gamma * mu * is);
  Kokkos::parallel_for(Kokkos::TeamThreadRange(m, n), [&](int64_t b) {
    const int64_t base = (b * channels + c) * hw;
    Kokkos::parallel_for(Kokkos::ThreadVectorRange(m, hw), [&](int64_t j) {
      const float v = scale * x(base + j) + shift;
      y(base + j) = relu && v < 0 ? 0.0f : v;
    });
  });
}

/// Batch norm in training mode over [N, C, HW], one team per channel, its threads over the
/// samples and their vector lanes along each contiguous H*W plane: the batch mean and the biased
/// variance (two passes, in double), then y = gamma x_hat + beta, with ReLU applied when `relu`
/// (the bottleneck's BN-ReLU pairs). Keeps the mean and 1/std for the backward pass, which
/// recomputes x_hat from the input instead of storing it, and folds the batch statistics into
/// the running ones as PyTorch does: momentum 0.1, the unbiased variance (the biased one where a
/// channel has a single value, as the reference driver).
void batch_norm_forward(Floats x, Floats gamma, Floats beta, Doubles mean, Doubles inv_std, Floats running_mean,
                        Floats running_var, Floats y, int64_t n, int64_t channels, int64_t hw, bool relu) {
  constexpr double kMomentum = 0.1;
  Kokkos::parallel_for(
      "kokkos_driver::batch_norm", Team(static_cast<int>(channels), Kokkos::AUTO, Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& m) {
        const int64_t c = m.league_rank(), count = n * hw;
        const double mu =
            channel_sum(m, n, channels, c, hw, [&](int64_t i) { return x(i); }) / static_cast<double>(count);
        const double sq = channel_sum(m, n, channels, c, hw, [&](int64_t i) {
          const double d = x(i) - mu;
          return d * d;
        });
        const double is = 1.0 / math::sqrt(sq / static_cast<double>(count) + kBatchNormEps);
        Kokkos::single(Kokkos::PerTeam(m), [&] {
          mean(c) = mu;
          inv_std(c) = is;
          const double unbiased = sq / static_cast<double>(count > 1 ? count - 1 : 1);
          running_mean(c) = static_cast<float>((1 - kMomentum) * running_mean(c) + kMomentum * mu);
          running_var(c) = static_cast<float>((1 - kMomentum) * running_var(c) + kMomentum * unbiased);
        });
        normalise_channel(m, x, y, n, channels, c, hw, gamma(c), beta(c), mu, is, relu);
      });
}

/// Batch norm in inference mode: the same normalisation with the running statistics.
void batch_norm_inference(Floats x, Floats gamma, Floats beta, Floats running_mean, Floats running_var, Floats y,
                          int64_t n, int64_t channels, int64_t hw, bool relu) {
  Kokkos::parallel_for(
      "kokkos_driver::batch_norm_inference", Team(static_cast<int>(channels), Kokkos::AUTO, Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& m) {
        const int64_t c = m.league_rank();
        const double is = 1.0 / math::sqrt(static_cast<double>(running_var(c)) + kBatchNormEps);
        normalise_channel(m, x, y, n, channels, c, hw, gamma(c), beta(c), running_mean(c), is, relu);
      });
}

/// dx = gamma inv_std / m (m g - sum(g) - x_hat sum(g x_hat)) with g = dy (masked by y > 0 under
/// a fused ReLU); dgamma = sum(g x_hat), dbeta = sum(g). `dx` empty: parameter gradients only.
void batch_norm_backward(Floats x, Floats y, Floats dy, Floats gamma, Doubles mean, Doubles inv_std, Floats dgamma,
                         Floats dbeta, Floats dx, int64_t n, int64_t channels, int64_t hw, bool relu) {
  const bool want_dx = dx.extent(0) > 0;
  Kokkos::parallel_for(
      "kokkos_driver::batch_norm_backward", Team(static_cast<int>(channels), Kokkos::AUTO, Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& m) {
        const int64_t c = m.league_rank(), count = n * hw;
        const double mu = mean(c), is = inv_std(c);
        auto grad = [&](int64_t i) { return relu && !(y(i) > 0) ? 0.0f : dy(i); };
        const double sum_g = channel_sum(m, n, channels, c, hw, [&](int64_t i) { return grad(i); });
        const double sum_gx = channel_sum(m, n, channels, c, hw, [&](int64_t i) { return grad(i) * (x(i) - mu); }) * is;
        Kokkos::single(Kokkos::PerTeam(m), [&] {
          dgamma(c) = static_cast<float>(sum_gx);
          dbeta(c) = static_cast<float>(sum_g);
        });
        if (!want_dx) return;
        // dx = a g + b (x - mean) + d, with the per-channel constants folded once (x - mean
        // stays a difference, so a large mean cancels exactly rather than in the constants).
        const double scale = gamma(c) * is / static_cast<double>(count);
        const auto a = static_cast<float>(gamma(c) * is), mean_f = static_cast<float>(mu);
        const auto bx = static_cast<float>(-scale * sum_gx * is), d = static_cast<float>(-scale * sum_g);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(m, n), [&](int64_t b) {
          const int64_t base = (b * channels + c) * hw;
          Kokkos::parallel_for(Kokkos::ThreadVectorRange(m, hw),
                               [&](int64_t j) { dx(base + j) = a * grad(base + j) + bx * (x(base + j) - mean_f) + d; });
        });
      });
}

/// The end of a bottleneck: y = ReLU(y + shortcut), in place on the main path's output.
void residual_relu(Floats y, Floats shortcut) {
  Kokkos::parallel_for(
      "kokkos_driver::residual_relu", Range(0, static_cast<int64_t>(y.extent(0))), KOKKOS_LAMBDA(int64_t i) {
        const float v = y(i) + shortcut(i);
        y(i) = v > 0 ? v : 0.0f;
      });
}

/// The gradient through that ReLU, written to the main path and (when not empty) the shortcut.
void residual_relu_backward(Floats y, Floats dy, Floats d_main, Floats d_shortcut) {
  const bool both = d_shortcut.extent(0) > 0;
  Kokkos::parallel_for(
      "kokkos_driver::residual_relu_backward", Range(0, static_cast<int64_t>(y.extent(0))), KOKKOS_LAMBDA(int64_t i) {
        const float g = y(i) > 0 ? dy(i) : 0.0f;
        d_main(i) = g;
        if (both) d_shortcut(i) = g;
      });
}

void add_into(Floats dst, Floats src) {
  Kokkos::parallel_for(
      "kokkos_driver::add_into", Range(0, static_cast<int64_t>(dst.extent(0))),
      KOKKOS_LAMBDA(int64_t i) { dst(i) += src(i); });
}

void embedding_forward(Ids tokens, Floats weight, Floats y, int64_t dim) {
  Kokkos::parallel_for(
      "kokkos_driver::embedding", Range(0, static_cast<int64_t>(y.extent(0))),
      KOKKOS_LAMBDA(int64_t i) { y(i) = weight(tokens(i / dim) * dim + i % dim); });
}

/// dW = 0, then dW[token[r]] += dy[r] for every row r. One work item per embedding column walks
/// the rows in order: repeated tokens never collide between work items, so no atomics.
void embedding_backward(Ids tokens, Floats dy, Floats dweight, int64_t dim) {
  Kokkos::deep_copy(dweight, 0.0f);
  const auto rows = static_cast<int64_t>(tokens.extent(0));
  Kokkos::parallel_for(
      "kokkos_driver::embedding_backward", Range(0, dim), KOKKOS_LAMBDA(int64_t d) {
        for (int64_t r = 0; r < rows; ++r) dweight(tokens(r) * dim + d) += dy(r * dim + d);
      });
}

}  // namespace layer_kernels

namespace {

namespace lk = layer_kernels;

int64_t conv_out(int64_t size, int64_t kernel, int64_t stride, int64_t padding) {
  return (size + 2 * padding - kernel) / stride + 1;
}

std::vector<int64_t> with_last(std::vector<int64_t> shape, int64_t last) {
  shape.back() = last;
  return shape;
}

void require_rank(const std::string& name, const Activation& x, size_t rank) {
  if (x.shape.size() != rank) {
    throw std::invalid_argument(
        fmt::format("kokkos driver: {} needs a rank-{} input, got rank {}", name, rank, x.shape.size()));
  }
}

/// y = x W^T + b over the last dimension of x, viewed as [rows, in].
class LinearLayer final : public NetLayer {
 public:
  LinearLayer(std::string name, int64_t in, int64_t out, ParamSlot weight, ParamSlot bias)
      : NetLayer(std::move(name)), in_(in), out_(out), weight_(std::move(weight)), bias_(std::move(bias)) {}

  void build(const Activation& x, const Floats& dx) override {
    x_ = x.data;
    dx_ = dx;
    rows_ = x.count() / in_;
    y_ = {make_floats(name() + ".y", rows_ * out_), with_last(x.shape, out_)};
    dy_ = make_floats(name() + ".dy", rows_ * out_);
  }

  void forward(Pass) override {
    gemm(false, true, 1, {x_.data(), rows_, in_}, {weight_.value.data(), out_, in_}, 0, {y_.data.data(), rows_, out_});
    if (bias_.value.extent(0) > 0) lk::add_bias(y_.data, bias_.value, rows_, out_, 1);
  }

  void backward() override {
    gemm(true, false, 1, {dy_.data(), rows_, out_}, {x_.data(), rows_, in_}, 0, {weight_.grad.data(), out_, in_});
    if (bias_.value.extent(0) > 0) bias_grad(dy_, bias_.grad, rows_, out_, 1);
    if (dx_.extent(0) > 0) {
      gemm(false, false, 1, {dy_.data(), rows_, out_}, {weight_.value.data(), out_, in_}, 0, {dx_.data(), rows_, in_});
    }
  }

 private:
  int64_t in_, out_, rows_ = 0;
  ParamSlot weight_, bias_;  // bias_ empty without a bias
  Floats x_, dx_;
};

/// 2-D convolution as im2col + GEMM, one sample at a time (the column buffer stays the size of
/// one sample): y_n [out, P] = W [out, C k k] col_n [C k k, P]. A 1x1, stride-1, unpadded
/// convolution (most of ResNet's) multiplies the input itself. Backward recomputes col_n rather
/// than keeping every sample's, accumulates dW over the samples through the GEMM's beta, and
/// scatters dcol_n = W^T dy_n back with col2im.
class ConvLayer final : public NetLayer {
 public:
  ConvLayer(std::string name, int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding,
            ParamSlot weight, ParamSlot bias)
      : NetLayer(std::move(name)),
        out_(out),
        window_{in, 0, 0, kernel, stride, padding, 0, 0},
        weight_(std::move(weight)),
        bias_(std::move(bias)) {}

  void build(const Activation& x, const Floats& dx) override {
    require_rank(name(), x, 4);
    if (x.shape[1] != window_.channels) {
      throw std::invalid_argument(
          fmt::format("kokkos driver: {} expects {} channels, got {}", name(), window_.channels, x.shape[1]));
    }
    batch_ = x.shape[0];
    window_.height = x.shape[2];
    window_.width = x.shape[3];
    window_.out_height = conv_out(window_.height, window_.kernel, window_.stride, window_.padding);
    window_.out_width = conv_out(window_.width, window_.kernel, window_.stride, window_.padding);
    x_ = x.data;
    dx_ = dx;
    const int64_t plane = window_.out_height * window_.out_width, k = patch();
    direct_ = window_.kernel == 1 && window_.stride == 1 && window_.padding == 0;
    col_ = direct_ ? Floats() : make_floats(name() + ".col", k * plane);
    dcol_ = direct_ || dx.extent(0) == 0 ? Floats() : make_floats(name() + ".dcol", k * plane);
    y_ = {make_floats(name() + ".y", batch_ * out_ * plane), {batch_, out_, window_.out_height, window_.out_width}};
    dy_ = make_floats(name() + ".dy", batch_ * out_ * plane);
  }

  void forward(Pass) override {
    const int64_t plane = window_.out_height * window_.out_width;
    for (int64_t n = 0; n < batch_; ++n) {
      gemm(false, false, 1, {weight_.value.data(), out_, patch()}, columns(n), 0,
           {y_.data.data() + n * out_ * plane, out_, plane});
    }
    if (bias_.value.extent(0) > 0) lk::add_bias(y_.data, bias_.value, batch_, out_, plane);
  }

  void backward() override {
    const int64_t plane = window_.out_height * window_.out_width, k = patch();
    const int64_t in_sample = window_.channels * window_.height * window_.width;
    for (int64_t n = 0; n < batch_; ++n) {
      const Mat dy_n{dy_.data() + n * out_ * plane, out_, plane};
      gemm(false, true, 1, dy_n, columns(n), n == 0 ? 0.0f : 1.0f, {weight_.grad.data(), out_, k});
      if (dx_.extent(0) == 0) continue;
      if (direct_) {
        gemm(true, false, 1, {weight_.value.data(), out_, k}, dy_n, 0, {dx_.data() + n * in_sample, k, plane});
      } else {
        gemm(true, false, 1, {weight_.value.data(), out_, k}, dy_n, 0, {dcol_.data(), k, plane});
        lk::col2im(dcol_, n, window_, dx_);
      }
    }
    if (bias_.value.extent(0) > 0) bias_grad(dy_, bias_.grad, batch_, out_, plane);
  }

 private:
  int64_t patch() const { return window_.channels * window_.kernel * window_.kernel; }

  /// Sample n's column matrix [C k k, P]: the input itself for a direct convolution.
  Mat columns(int64_t n) {
    const int64_t plane = window_.out_height * window_.out_width;
    if (direct_) return {x_.data() + n * window_.channels * plane, window_.channels, plane};
    lk::im2col(x_, n, window_, col_);
    return {col_.data(), patch(), plane};
  }

  int64_t out_, batch_ = 0;
  lk::Window window_;
  ParamSlot weight_, bias_;
  bool direct_ = false;
  Floats x_, dx_, col_, dcol_;
};

class MaxPoolLayer final : public NetLayer {
 public:
  MaxPoolLayer(std::string name, int64_t kernel, int64_t stride, int64_t padding)
      : NetLayer(std::move(name)), window_{0, 0, 0, kernel, stride, padding, 0, 0} {}

  void build(const Activation& x, const Floats& dx) override {
    require_rank(name(), x, 4);
    planes_ = x.shape[0] * x.shape[1];
    window_.channels = x.shape[1];
    window_.height = x.shape[2];
    window_.width = x.shape[3];
    window_.out_height = conv_out(window_.height, window_.kernel, window_.stride, window_.padding);
    window_.out_width = conv_out(window_.width, window_.kernel, window_.stride, window_.padding);
    const int64_t count = planes_ * window_.out_height * window_.out_width;
    x_ = x.data;
    dx_ = dx;
    argmax_ = Argmax(Kokkos::view_alloc(Kokkos::WithoutInitializing, name() + ".argmax"), static_cast<size_t>(count));
    y_ = {make_floats(name() + ".y", count), {x.shape[0], x.shape[1], window_.out_height, window_.out_width}};
    dy_ = make_floats(name() + ".dy", count);
  }

  void forward(Pass) override { lk::max_pool_forward(x_, y_.data, argmax_, planes_, window_); }
  void backward() override { lk::max_pool_backward(dy_, argmax_, dx_, planes_, window_); }

 private:
  lk::Window window_;
  int64_t planes_ = 0;
  Argmax argmax_;
  Floats x_, dx_;
};

/// [N, C, H, W] -> [N, C].
class GlobalAvgPoolLayer final : public NetLayer {
 public:
  using NetLayer::NetLayer;

  void build(const Activation& x, const Floats& dx) override {
    require_rank(name(), x, 4);
    planes_ = x.shape[0] * x.shape[1];
    plane_ = x.shape[2] * x.shape[3];
    x_ = x.data;
    dx_ = dx;
    y_ = {make_floats(name() + ".y", planes_), {x.shape[0], x.shape[1]}};
    dy_ = make_floats(name() + ".dy", planes_);
  }

  void forward(Pass) override { lk::global_avg_pool_forward(x_, y_.data, planes_, plane_); }
  void backward() override { lk::global_avg_pool_backward(dy_, dx_, plane_); }

 private:
  int64_t planes_ = 0, plane_ = 0;
  Floats x_, dx_;
};

class ActivationLayer final : public NetLayer {
 public:
  ActivationLayer(std::string name, LayerKind kind) : NetLayer(std::move(name)), kind_(kind) {}

  void build(const Activation& x, const Floats& dx) override {
    x_ = x.data;
    dx_ = dx;
    y_ = {make_floats(name() + ".y", x.count()), x.shape};
    dy_ = make_floats(name() + ".dy", x.count());
  }

  void forward(Pass) override { lk::activation_forward(kind_, x_, y_.data); }
  void backward() override { lk::activation_backward(kind_, y_.data, dy_, dx_); }

 private:
  LayerKind kind_;
  Floats x_, dx_;
};

/// Inverted dropout. Its generator pool is seeded from the case seed and the layer index, and
/// advances with every training pass, so each step draws new masks; an inference pass copies
/// its input and draws nothing.
class DropoutLayer final : public NetLayer {
 public:
  DropoutLayer(std::string name, double p, uint64_t seed)
      : NetLayer(std::move(name)), p_(static_cast<float>(p)), pool_(seed) {}

  void build(const Activation& x, const Floats& dx) override {
    x_ = x.data;
    dx_ = dx;
    mask_ = make_floats(name() + ".mask", x.count());
    y_ = {make_floats(name() + ".y", x.count()), x.shape};
    dy_ = make_floats(name() + ".dy", x.count());
  }

  void forward(Pass pass) override {
    if (pass == Pass::kInference) {
      Kokkos::deep_copy(y_.data, x_);
    } else {
      lk::dropout_forward(pool_, p_, x_, mask_, y_.data);
    }
  }
  void backward() override { lk::multiply(dy_, mask_, dx_); }

 private:
  float p_;
  RandomPool pool_;
  Floats x_, dx_, mask_;
};

/// Batch norm over [N, C, H, W], optionally followed by a fused ReLU: on the batch statistics
/// in training passes (which also update the running statistics), on the running statistics
/// in inference passes.
class BatchNormLayer final : public NetLayer {
 public:
  BatchNormLayer(std::string name, int64_t channels, ParamSlot gamma, ParamSlot beta, bool relu)
      : NetLayer(std::move(name)),
        channels_(channels),
        relu_(relu),
        gamma_(std::move(gamma)),
        beta_(std::move(beta)),
        mean_(Kokkos::view_alloc(Kokkos::WithoutInitializing, this->name() + ".mean"), static_cast<size_t>(channels)),
        inv_std_(Kokkos::view_alloc(Kokkos::WithoutInitializing, this->name() + ".inv_std"),
                 static_cast<size_t>(channels)),
        running_mean_(make_floats(this->name() + ".running_mean", channels)),
        running_var_(make_floats(this->name() + ".running_var", channels)) {
    reset_statistics();
  }

  void reset_statistics() override {
    Kokkos::deep_copy(running_mean_, 0.0f);
    Kokkos::deep_copy(running_var_, 1.0f);
  }

  void build(const Activation& x, const Floats& dx) override {
    require_rank(name(), x, 4);
    if (x.shape[1] != channels_) {
      throw std::invalid_argument(
          fmt::format("kokkos driver: {} expects {} channels, got {}", name(), channels_, x.shape[1]));
    }
    batch_ = x.shape[0];
    plane_ = x.shape[2] * x.shape[3];
    x_ = x.data;
    dx_ = dx;
    y_ = {make_floats(name() + ".y", x.count()), x.shape};
    dy_ = make_floats(name() + ".dy", x.count());
  }

  void forward(Pass pass) override {
    if (pass == Pass::kInference) {
      lk::batch_norm_inference(x_, gamma_.value, beta_.value, running_mean_, running_var_, y_.data, batch_, channels_,
                               plane_, relu_);
    } else {
      lk::batch_norm_forward(x_, gamma_.value, beta_.value, mean_, inv_std_, running_mean_, running_var_, y_.data,
                             batch_, channels_, plane_, relu_);
    }
  }

  void backward() override {
    lk::batch_norm_backward(x_, y_.data, dy_, gamma_.value, mean_, inv_std_, gamma_.grad, beta_.grad, dx_, batch_,
                            channels_, plane_, relu_);
  }

 private:
  int64_t channels_, batch_ = 0, plane_ = 0;
  bool relu_;
  ParamSlot gamma_, beta_;
  Doubles mean_, inv_std_;
  Floats running_mean_, running_var_;  // made once: a batch-size change keeps them
  Floats x_, dx_;
};

/// ResNet v1.5 bottleneck from the pieces above: conv1x1-BN-ReLU, conv3x3(stride)-BN-ReLU,
/// conv1x1-BN, plus the shortcut (identity, or conv1x1(stride)-BN), then ReLU. The last batch
/// norm writes the block's output buffer, where the shortcut is added and the ReLU applied in
/// place; its backward reads only that output.
class BottleneckLayer final : public NetLayer {
 public:
  BottleneckLayer(const std::string& name, const Layer& l, const std::vector<ParamSlot>& p)
      : NetLayer(name), projection_(l.stride != 1 || l.in != l.out) {
    const ParamSlot none;
    conv1_ = std::make_unique<ConvLayer>(name + ".conv1", l.in, l.mid, 1, 1, 0, p[0], none);
    bn1_ = std::make_unique<BatchNormLayer>(name + ".bn1", l.mid, p[1], p[2], true);
    conv2_ = std::make_unique<ConvLayer>(name + ".conv2", l.mid, l.mid, 3, l.stride, 1, p[3], none);
    bn2_ = std::make_unique<BatchNormLayer>(name + ".bn2", l.mid, p[4], p[5], true);
    conv3_ = std::make_unique<ConvLayer>(name + ".conv3", l.mid, l.out, 1, 1, 0, p[6], none);
    bn3_ = std::make_unique<BatchNormLayer>(name + ".bn3", l.out, p[7], p[8], false);
    if (projection_) {
      down_ = std::make_unique<ConvLayer>(name + ".down", l.in, l.out, 1, l.stride, 0, p[9], none);
      down_bn_ = std::make_unique<BatchNormLayer>(name + ".down_bn", l.out, p[10], p[11], false);
    }
  }

  void build(const Activation& x, const Floats& dx) override {
    x_ = x.data;
    dx_ = dx;
    conv1_->build(x, dx);
    bn1_->build(conv1_->out(), conv1_->out_grad());
    conv2_->build(bn1_->out(), bn1_->out_grad());
    bn2_->build(conv2_->out(), conv2_->out_grad());
    conv3_->build(bn2_->out(), bn2_->out_grad());
    bn3_->build(conv3_->out(), conv3_->out_grad());
    if (projection_) {
      dx_down_ = dx.extent(0) > 0 ? make_floats(name() + ".dx_down", x.count()) : Floats();
      down_->build(x, dx_down_);
      down_bn_->build(down_->out(), down_->out_grad());
    }
    y_ = bn3_->out();
    dy_ = make_floats(name() + ".dy", y_.count());
  }

  void forward(Pass pass) override {
    conv1_->forward(pass);
    bn1_->forward(pass);
    conv2_->forward(pass);
    bn2_->forward(pass);
    conv3_->forward(pass);
    bn3_->forward(pass);
    if (projection_) {
      down_->forward(pass);
      down_bn_->forward(pass);
      lk::residual_relu(y_.data, down_bn_->out().data);
    } else {
      lk::residual_relu(y_.data, x_);
    }
  }

  void reset_statistics() override {
    for (BatchNormLayer* bn : {bn1_.get(), bn2_.get(), bn3_.get(), down_bn_.get()}) {
      if (bn != nullptr) bn->reset_statistics();
    }
  }

  void backward() override {
    lk::residual_relu_backward(y_.data, dy_, bn3_->out_grad(), projection_ ? down_bn_->out_grad() : Floats());
    bn3_->backward();
    conv3_->backward();
    bn2_->backward();
    conv2_->backward();
    bn1_->backward();
    conv1_->backward();
    if (projection_) {
      down_bn_->backward();
      down_->backward();
      if (dx_.extent(0) > 0) lk::add_into(dx_, dx_down_);
    } else if (dx_.extent(0) > 0) {
      lk::add_into(dx_, bn3_->out_grad());  // the identity shortcut passes the gradient through
    }
  }

 private:
  bool projection_;
  std::unique_ptr<ConvLayer> conv1_, conv2_, conv3_, down_;
  std::unique_ptr<BatchNormLayer> bn1_, bn2_, bn3_, down_bn_;
  Floats x_, dx_, dx_down_;
};

/// [C, H, W] -> [C*H*W]: the same buffers under another shape, no work.
class FlattenLayer final : public NetLayer {
 public:
  using NetLayer::NetLayer;

  void build(const Activation& x, const Floats& dx) override {
    y_ = {x.data, {x.shape[0], x.count() / x.shape[0]}};
    dy_ = dx;
  }
  void forward(Pass) override {}
  void backward() override {}
};

/// Token ids [N, T] -> rows of the [vocab, dim] weight, [N, T, dim].
class EmbeddingLayer final : public NetLayer {
 public:
  EmbeddingLayer(std::string name, int64_t dim, ParamSlot weight, const Ids* tokens)
      : NetLayer(std::move(name)), dim_(dim), weight_(std::move(weight)), tokens_(tokens) {}

  void build(const Activation& x, const Floats&) override {
    const auto rows = static_cast<int64_t>(tokens_->extent(0));
    y_ = {make_floats(name() + ".y", rows * dim_), {x.shape[0], rows / x.shape[0], dim_}};
    dy_ = make_floats(name() + ".dy", rows * dim_);
  }

  void forward(Pass) override { lk::embedding_forward(*tokens_, weight_.value, y_.data, dim_); }
  void backward() override { lk::embedding_backward(*tokens_, dy_, weight_.grad, dim_); }

 private:
  int64_t dim_;
  ParamSlot weight_;
  const Ids* tokens_;  // the model's, refilled by every set_batch()
};

}  // namespace

std::unique_ptr<NetLayer> make_layer(const std::string& name, const Layer& l, const std::vector<ParamSlot>& slots,
                                     const Ids* tokens, uint64_t seed, size_t index) {
  const ParamSlot none;
  switch (l.kind) {
    case LayerKind::kLinear:
      return std::make_unique<LinearLayer>(name, l.in, l.out, slots[0], l.bias ? slots[1] : none);
    case LayerKind::kConv2d:
      return std::make_unique<ConvLayer>(name, l.in, l.out, l.kernel, l.stride, l.padding, slots[0],
                                         l.bias ? slots[1] : none);
    case LayerKind::kMaxPool2d:
      return std::make_unique<MaxPoolLayer>(name, l.kernel, l.stride, l.padding);
    case LayerKind::kGlobalAvgPool:
      return std::make_unique<GlobalAvgPoolLayer>(name);
    case LayerKind::kReLU:
    case LayerKind::kSigmoid:
    case LayerKind::kTanh:
      return std::make_unique<ActivationLayer>(name, l.kind);
    case LayerKind::kDropout:
      // splitmix64's increment spreads the layer index over the seed's bits.
      return std::make_unique<DropoutLayer>(name, l.p, seed ^ (0x9E3779B97F4A7C15ull * (index + 1)));
    case LayerKind::kBatchNorm2d:
      return std::make_unique<BatchNormLayer>(name, l.in, slots[0], slots[1], false);
    case LayerKind::kBottleneck:
      return std::make_unique<BottleneckLayer>(name, l, slots);
    case LayerKind::kFlatten:
      return std::make_unique<FlattenLayer>(name);
    case LayerKind::kEmbedding:
      return std::make_unique<EmbeddingLayer>(name, l.out, slots[0], tokens);
    case LayerKind::kLstm:
      return make_lstm_layer(name, l, slots);
  }
  throw std::invalid_argument("kokkos driver: " + name + " has an unknown kind");
}

}  // namespace dlscale::kk
