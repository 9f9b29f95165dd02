// Forward and backward of every layer kind in float64, one plain loop nest per operation. Each
// layer keeps what its backward needs (its input and output, a dropout mask, pooling argmaxes,
// batch-norm statistics, LSTM gates and cell states) for the length of one call; nothing
// survives between calls, so the same (parameters, batch, step) always gives the same result.
#include "drivers/reference/reference_network.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "workloads/random.h"

namespace dlscale {

namespace {

constexpr double kBatchNormEps = 1e-5;

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t conv_out(int64_t size, int64_t kernel, int64_t stride, int64_t padding) {
  return (size + 2 * padding - kernel) / stride + 1;
}

/// A batch of activations: shape[0] is the batch dimension; the data is row-major.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> data;

  Tensor() = default;
  explicit Tensor(std::vector<int64_t> s) : shape(std::move(s)), data(static_cast<size_t>(product(shape)), 0.0) {}

  int64_t numel() const { return static_cast<int64_t>(data.size()); }
  double& operator[](int64_t i) { return data[static_cast<size_t>(i)]; }
  double operator[](int64_t i) const { return data[static_cast<size_t>(i)]; }
  /// Flat index of element (n, c, y, x) of an NCHW tensor.
  int64_t at(int64_t n, int64_t c, int64_t y, int64_t x) const {
    return ((n * shape[1] + c) * shape[2] + y) * shape[3] + x;
  }
};

// ---------------------------------------------------------------------------------------------
// Linear: y = x W^T + b over the last dimension; every leading index is an independent row.

Tensor linear_forward(const Tensor& x, const Layer& l, const double* weight, const double* bias) {
  std::vector<int64_t> shape = x.shape;
  shape.back() = l.out;
  Tensor y(shape);
  const int64_t rows = x.numel() / l.in;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < l.out; ++o) {
      double sum = bias ? bias[o] : 0.0;
      for (int64_t i = 0; i < l.in; ++i) sum += x[r * l.in + i] * weight[o * l.in + i];
      y[r * l.out + o] = sum;
    }
  }
  return y;
}

void linear_backward(const Tensor& x, const Layer& l, const double* weight, const Tensor& dy, Tensor* dx,
                     double* dweight, double* dbias) {
  if (dx) *dx = Tensor(x.shape);
  const int64_t rows = x.numel() / l.in;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < l.out; ++o) {
      const double g = dy[r * l.out + o];
      if (dbias) dbias[o] += g;
      for (int64_t i = 0; i < l.in; ++i) {
        dweight[o * l.in + i] += g * x[r * l.in + i];
        if (dx) (*dx)[r * l.in + i] += g * weight[o * l.in + i];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Conv2d: cross-correlation of NCHW input with OIHW weights, zero padding.

struct ConvSpec {
  int64_t in, out, kernel, stride, padding;
};

Tensor conv2d_forward(const Tensor& x, const ConvSpec& c, const double* weight, const double* bias) {
  const int64_t n = x.shape[0], h = x.shape[2], w = x.shape[3];
  Tensor y({n, c.out, conv_out(h, c.kernel, c.stride, c.padding), conv_out(w, c.kernel, c.stride, c.padding)});
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t o = 0; o < c.out; ++o) {
      for (int64_t oy = 0; oy < y.shape[2]; ++oy) {
        for (int64_t ox = 0; ox < y.shape[3]; ++ox) {
          double sum = bias ? bias[o] : 0.0;
          for (int64_t ci = 0; ci < c.in; ++ci) {
            const double* src = &x.data[static_cast<size_t>(x.at(b, ci, 0, 0))];    // one input plane
            const double* filter = weight + (o * c.in + ci) * c.kernel * c.kernel;  // one kernel plane
            for (int64_t ky = 0; ky < c.kernel; ++ky) {
              const int64_t iy = oy * c.stride - c.padding + ky;
              if (iy < 0 || iy >= h) continue;  // zero padding contributes nothing
              for (int64_t kx = 0; kx < c.kernel; ++kx) {
                const int64_t ix = ox * c.stride - c.padding + kx;
                if (ix >= 0 && ix < w) sum += src[iy * w + ix] * filter[ky * c.kernel + kx];
              }
            }
          }
          y[y.at(b, o, oy, ox)] = sum;
        }
      }
    }
  }
  return y;
}

/// Accumulates into `dweight` and `dbias` (when set); writes `dx` (when set).
void conv2d_backward(const Tensor& x, const ConvSpec& c, const double* weight, const Tensor& dy, Tensor* dx,
                     double* dweight, double* dbias) {
  if (dx) *dx = Tensor(x.shape);
  const int64_t n = x.shape[0], h = x.shape[2], w = x.shape[3];
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t o = 0; o < c.out; ++o) {
      for (int64_t oy = 0; oy < dy.shape[2]; ++oy) {
        for (int64_t ox = 0; ox < dy.shape[3]; ++ox) {
          const double g = dy[dy.at(b, o, oy, ox)];
          if (dbias) dbias[o] += g;
          for (int64_t ci = 0; ci < c.in; ++ci) {
            const int64_t plane = x.at(b, ci, 0, 0);
            const int64_t filter = (o * c.in + ci) * c.kernel * c.kernel;
            for (int64_t ky = 0; ky < c.kernel; ++ky) {
              const int64_t iy = oy * c.stride - c.padding + ky;
              if (iy < 0 || iy >= h) continue;
              for (int64_t kx = 0; kx < c.kernel; ++kx) {
                const int64_t ix = ox * c.stride - c.padding + kx;
                if (ix < 0 || ix >= w) continue;
                const int64_t xi = plane + iy * w + ix, wi = filter + ky * c.kernel + kx;
                dweight[wi] += g * x[xi];
                if (dx) (*dx)[xi] += g * weight[wi];
              }
            }
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// MaxPool2d: padding is -inf, so a padded position never wins. Like PyTorch, the first maximum
// in scan order wins a tie and receives the whole gradient.

Tensor max_pool_forward(const Tensor& x, const Layer& l, std::vector<int64_t>* argmax) {
  const int64_t n = x.shape[0], ch = x.shape[1], h = x.shape[2], w = x.shape[3];
  Tensor y({n, ch, conv_out(h, l.kernel, l.stride, l.padding), conv_out(w, l.kernel, l.stride, l.padding)});
  argmax->assign(y.data.size(), -1);
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t c = 0; c < ch; ++c) {
      for (int64_t oy = 0; oy < y.shape[2]; ++oy) {
        for (int64_t ox = 0; ox < y.shape[3]; ++ox) {
          double best = -std::numeric_limits<double>::infinity();
          int64_t best_index = -1;
          for (int64_t ky = 0; ky < l.kernel; ++ky) {
            const int64_t iy = oy * l.stride - l.padding + ky;
            if (iy < 0 || iy >= h) continue;
            for (int64_t kx = 0; kx < l.kernel; ++kx) {
              const int64_t ix = ox * l.stride - l.padding + kx;
              if (ix < 0 || ix >= w) continue;
              const int64_t i = x.at(b, c, iy, ix);
              if (best_index < 0 || x[i] > best) {
                best = x[i];
                best_index = i;
              }
            }
          }
          const int64_t o = y.at(b, c, oy, ox);
          y[o] = best;
          (*argmax)[static_cast<size_t>(o)] = best_index;
        }
      }
    }
  }
  return y;
}

Tensor max_pool_backward(const Tensor& x, const std::vector<int64_t>& argmax, const Tensor& dy) {
  Tensor dx(x.shape);
  for (int64_t o = 0; o < dy.numel(); ++o) dx[argmax[static_cast<size_t>(o)]] += dy[o];
  return dx;
}

// ---------------------------------------------------------------------------------------------
// GlobalAvgPool: [N, C, H, W] -> [N, C].

Tensor global_avg_pool_forward(const Tensor& x) {
  const int64_t n = x.shape[0], ch = x.shape[1], hw = x.shape[2] * x.shape[3];
  Tensor y({n, ch});
  for (int64_t i = 0; i < n * ch; ++i) {
    double sum = 0;
    for (int64_t j = 0; j < hw; ++j) sum += x[i * hw + j];
    y[i] = sum / static_cast<double>(hw);
  }
  return y;
}

Tensor global_avg_pool_backward(const Tensor& x, const Tensor& dy) {
  Tensor dx(x.shape);
  const int64_t hw = x.shape[2] * x.shape[3];
  for (int64_t i = 0; i < dy.numel(); ++i) {
    for (int64_t j = 0; j < hw; ++j) dx[i * hw + j] = dy[i] / static_cast<double>(hw);
  }
  return dx;
}

// ---------------------------------------------------------------------------------------------
// Elementwise activations. Their backward needs only the output (ReLU: y > 0 iff x > 0).

double sigmoid(double z) {
  // Two branches so that exp never overflows.
  if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1.0 + e);
}

/// True for the kinds activation_forward/backward handle.
bool is_activation(LayerKind kind) {
  switch (kind) {
    case LayerKind::kReLU:
    case LayerKind::kSigmoid:
    case LayerKind::kTanh:
      return true;
    case LayerKind::kLinear:
    case LayerKind::kConv2d:
    case LayerKind::kMaxPool2d:
    case LayerKind::kGlobalAvgPool:
    case LayerKind::kDropout:
    case LayerKind::kBatchNorm2d:
    case LayerKind::kBottleneck:
    case LayerKind::kFlatten:
    case LayerKind::kEmbedding:
    case LayerKind::kLstm:
      return false;
  }
  return false;
}

Tensor activation_forward(LayerKind kind, const Tensor& x) {
  if (!is_activation(kind)) throw std::logic_error("activation_forward: not an activation");
  Tensor y(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (kind == LayerKind::kReLU) {
      y[i] = x[i] > 0 ? x[i] : 0.0;
    } else if (kind == LayerKind::kSigmoid) {
      y[i] = sigmoid(x[i]);
    } else {
      y[i] = std::tanh(x[i]);
    }
  }
  return y;
}

Tensor activation_backward(LayerKind kind, const Tensor& y, const Tensor& dy) {
  if (!is_activation(kind)) throw std::logic_error("activation_backward: not an activation");
  Tensor dx(y.shape);
  for (int64_t i = 0; i < y.numel(); ++i) {
    if (kind == LayerKind::kReLU) {
      dx[i] = y[i] > 0 ? dy[i] : 0.0;
    } else if (kind == LayerKind::kSigmoid) {
      dx[i] = dy[i] * y[i] * (1 - y[i]);
    } else {
      dx[i] = dy[i] * (1 - y[i] * y[i]);  // tanh' = 1 - tanh^2
    }
  }
  return dx;
}

// ---------------------------------------------------------------------------------------------
// Dropout: inverted, so a kept element is scaled by 1/(1-p) in training and inference needs no
// rescaling. The mask is a pure function of (seed, step, layer, element), never of a hidden
// generator state, so a finite-difference check sees the same mask at every evaluation.

std::vector<double> dropout_mask(uint64_t seed, uint64_t step, size_t layer, int64_t count, double p) {
  const CounterRng rng(mix64(seed) ^ mix64(step), static_cast<uint64_t>(layer));
  const double keep_scale = p < 1 ? 1.0 / (1.0 - p) : 0.0;  // p = 1 drops everything
  std::vector<double> mask(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    mask[static_cast<size_t>(i)] = rng.uniform(static_cast<uint64_t>(i)) < p ? 0.0 : keep_scale;
  }
  return mask;
}

Tensor multiply(const Tensor& x, const std::vector<double>& mask) {
  Tensor y(x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) y[i] = x[i] * mask[static_cast<size_t>(i)];
  return y;
}

// ---------------------------------------------------------------------------------------------
// BatchNorm2d in training mode: per channel, the batch mean and biased variance over (N, H, W).

struct BatchNormState {
  std::vector<double> x_hat;      ///< normalised input, like x
  std::vector<double> inv_std;    ///< per channel, 1 / sqrt(var + eps)
  std::vector<double> mean, var;  ///< per channel, the batch's mean and biased variance
  int64_t count = 0;              ///< values per channel, N*H*W
};

Tensor batch_norm_forward(const Tensor& x, const double* gamma, const double* beta, BatchNormState* state) {
  const int64_t n = x.shape[0], ch = x.shape[1], hw = x.shape[2] * x.shape[3];
  const auto m = static_cast<double>(n * hw);
  Tensor y(x.shape);
  state->x_hat.assign(x.data.size(), 0.0);
  state->inv_std.assign(static_cast<size_t>(ch), 0.0);
  state->mean.assign(static_cast<size_t>(ch), 0.0);
  state->var.assign(static_cast<size_t>(ch), 0.0);
  state->count = n * hw;
  for (int64_t c = 0; c < ch; ++c) {
    double mean = 0;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t j = 0; j < hw; ++j) mean += x[(b * ch + c) * hw + j];
    }
    mean /= m;
    double var = 0;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t j = 0; j < hw; ++j) {
        const double d = x[(b * ch + c) * hw + j] - mean;
        var += d * d;
      }
    }
    var /= m;
    const double inv_std = 1.0 / std::sqrt(var + kBatchNormEps);
    state->inv_std[static_cast<size_t>(c)] = inv_std;
    state->mean[static_cast<size_t>(c)] = mean;
    state->var[static_cast<size_t>(c)] = var;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t j = 0; j < hw; ++j) {
        const int64_t i = (b * ch + c) * hw + j;
        const double x_hat = (x[i] - mean) * inv_std;
        state->x_hat[static_cast<size_t>(i)] = x_hat;
        y[i] = gamma[c] * x_hat + beta[c];
      }
    }
  }
  return y;
}

/// Inference mode: per channel, y = gamma (x - mean) / sqrt(var + eps) + beta with the given
/// (running) statistics.
Tensor batch_norm_inference(const Tensor& x, const double* gamma, const double* beta, const std::vector<double>& mean,
                            const std::vector<double>& var) {
  const int64_t n = x.shape[0], ch = x.shape[1], hw = x.shape[2] * x.shape[3];
  Tensor y(x.shape);
  for (int64_t c = 0; c < ch; ++c) {
    const auto k = static_cast<size_t>(c);
    const double inv_std = 1.0 / std::sqrt(var[k] + kBatchNormEps);
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t j = 0; j < hw; ++j) {
        const int64_t i = (b * ch + c) * hw + j;
        y[i] = gamma[c] * (x[i] - mean[k]) * inv_std + beta[c];
      }
    }
  }
  return y;
}

/// PyTorch's update of the running statistics in training mode: momentum 0.1, and the unbiased
/// batch variance (m / (m - 1) times the biased one the normalisation used).
constexpr double kBatchNormMomentum = 0.1;

void fold_batch_statistics(const BatchNormState& batch, std::vector<double>* mean, std::vector<double>* var) {
  const auto m = static_cast<double>(batch.count);
  const double unbias = batch.count > 1 ? m / (m - 1) : 1.0;
  for (size_t c = 0; c < mean->size(); ++c) {
    (*mean)[c] = (1 - kBatchNormMomentum) * (*mean)[c] + kBatchNormMomentum * batch.mean[c];
    (*var)[c] = (1 - kBatchNormMomentum) * (*var)[c] + kBatchNormMomentum * batch.var[c] * unbias;
  }
}

/// The batch norms of one pass, in the order they run (RunningStatistics' order): each
/// normalises with its batch's statistics, folding them into `update` when set (training), or
/// with `use` when set (inference).
class BatchNorms {
 public:
  BatchNorms(RunningStatistics* update, const RunningStatistics* use) : update_(update), use_(use) {}

  Tensor forward(const Tensor& x, const double* gamma, const double* beta, BatchNormState* state) {
    const size_t k = next_++;
    if (use_ != nullptr) return batch_norm_inference(x, gamma, beta, use_->mean.at(k), use_->var.at(k));
    Tensor y = batch_norm_forward(x, gamma, beta, state);
    if (update_ != nullptr) fold_batch_statistics(*state, &update_->mean.at(k), &update_->var.at(k));
    return y;
  }

 private:
  RunningStatistics* update_;
  const RunningStatistics* use_;
  size_t next_ = 0;
};

/// dx = gamma * inv_std / m * (m dy - sum(dy) - x_hat sum(dy x_hat)): the mean and variance
/// depend on every element of the channel, hence the two sums.
Tensor batch_norm_backward(const Tensor& dy, const double* gamma, const BatchNormState& state, double* dgamma,
                           double* dbeta) {
  const int64_t n = dy.shape[0], ch = dy.shape[1], hw = dy.shape[2] * dy.shape[3];
  const auto m = static_cast<double>(n * hw);
  Tensor dx(dy.shape);
  for (int64_t c = 0; c < ch; ++c) {
    double sum_dy = 0, sum_dy_x_hat = 0;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t j = 0; j < hw; ++j) {
        const int64_t i = (b * ch + c) * hw + j;
        sum_dy += dy[i];
        sum_dy_x_hat += dy[i] * state.x_hat[static_cast<size_t>(i)];
      }
    }
    dgamma[c] += sum_dy_x_hat;
    dbeta[c] += sum_dy;
    const double scale = gamma[c] * state.inv_std[static_cast<size_t>(c)] / m;
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t j = 0; j < hw; ++j) {
        const int64_t i = (b * ch + c) * hw + j;
        dx[i] = scale * (m * dy[i] - sum_dy - state.x_hat[static_cast<size_t>(i)] * sum_dy_x_hat);
      }
    }
  }
  return dx;
}

// ---------------------------------------------------------------------------------------------
// Bottleneck (ResNet v1.5): the composition documented in workload.h, from the pieces above.

/// Positions of a bottleneck's tensors in its parameter list (parameter_layout's order).
enum BottleneckTensor : size_t {
  kConv1 = 0,
  kBn1Weight,
  kBn1Bias,
  kConv2,
  kBn2Weight,
  kBn2Bias,
  kConv3,
  kBn3Weight,
  kBn3Bias,
  kDown,
  kDownBnWeight,
  kDownBnBias,
};

/// The inputs of the second and third convolutions (ReLU outputs, which also give the ReLU
/// masks) and the batch-norm records; the backward pass needs nothing else.
struct BottleneckState {
  Tensor r1, r2;
  BatchNormState bn1, bn2, bn3, down_bn;
};

bool has_projection(const Layer& l) { return l.stride != 1 || l.in != l.out; }

Tensor bottleneck_forward(const Tensor& x, const Layer& l, const double* const* p, BottleneckState* s, BatchNorms& bn) {
  const ConvSpec c1{l.in, l.mid, 1, 1, 0}, c2{l.mid, l.mid, 3, l.stride, 1}, c3{l.mid, l.out, 1, 1, 0};
  const Tensor a1 = conv2d_forward(x, c1, p[kConv1], nullptr);
  s->r1 = activation_forward(LayerKind::kReLU, bn.forward(a1, p[kBn1Weight], p[kBn1Bias], &s->bn1));
  const Tensor a2 = conv2d_forward(s->r1, c2, p[kConv2], nullptr);
  s->r2 = activation_forward(LayerKind::kReLU, bn.forward(a2, p[kBn2Weight], p[kBn2Bias], &s->bn2));
  const Tensor a3 = conv2d_forward(s->r2, c3, p[kConv3], nullptr);
  Tensor sum = bn.forward(a3, p[kBn3Weight], p[kBn3Bias], &s->bn3);
  if (has_projection(l)) {
    const Tensor down = conv2d_forward(x, {l.in, l.out, 1, l.stride, 0}, p[kDown], nullptr);
    const Tensor shortcut = bn.forward(down, p[kDownBnWeight], p[kDownBnBias], &s->down_bn);
    for (int64_t i = 0; i < sum.numel(); ++i) sum[i] += shortcut[i];
  } else {
    for (int64_t i = 0; i < sum.numel(); ++i) sum[i] += x[i];
  }
  return activation_forward(LayerKind::kReLU, sum);
}

Tensor bottleneck_backward(const Tensor& x, const Tensor& y, const Layer& l, const double* const* p,
                           const BottleneckState& s, const Tensor& dy, double* const* g, bool need_dx) {
  const ConvSpec c1{l.in, l.mid, 1, 1, 0}, c2{l.mid, l.mid, 3, l.stride, 1}, c3{l.mid, l.out, 1, 1, 0};
  const Tensor d_sum = activation_backward(LayerKind::kReLU, y, dy);
  // Main path, from the last convolution back to the first.
  Tensor d_r2, d_r1, dx;
  const Tensor d_a3 = batch_norm_backward(d_sum, p[kBn3Weight], s.bn3, g[kBn3Weight], g[kBn3Bias]);
  conv2d_backward(s.r2, c3, p[kConv3], d_a3, &d_r2, g[kConv3], nullptr);
  const Tensor d_a2 = batch_norm_backward(activation_backward(LayerKind::kReLU, s.r2, d_r2), p[kBn2Weight], s.bn2,
                                          g[kBn2Weight], g[kBn2Bias]);
  conv2d_backward(s.r1, c2, p[kConv2], d_a2, &d_r1, g[kConv2], nullptr);
  const Tensor d_a1 = batch_norm_backward(activation_backward(LayerKind::kReLU, s.r1, d_r1), p[kBn1Weight], s.bn1,
                                          g[kBn1Weight], g[kBn1Bias]);
  conv2d_backward(x, c1, p[kConv1], d_a1, need_dx ? &dx : nullptr, g[kConv1], nullptr);
  // Shortcut: its gradient adds to the main path's.
  if (has_projection(l)) {
    const Tensor d_down = batch_norm_backward(d_sum, p[kDownBnWeight], s.down_bn, g[kDownBnWeight], g[kDownBnBias]);
    Tensor dx_down;
    conv2d_backward(x, {l.in, l.out, 1, l.stride, 0}, p[kDown], d_down, need_dx ? &dx_down : nullptr, g[kDown],
                    nullptr);
    if (need_dx) {
      for (int64_t i = 0; i < dx.numel(); ++i) dx[i] += dx_down[i];
    }
  } else if (need_dx) {
    for (int64_t i = 0; i < dx.numel(); ++i) dx[i] += d_sum[i];
  }
  return dx;
}

// ---------------------------------------------------------------------------------------------
// Embedding: token ids [N, T] -> rows of the [vocab, dim] weight, [N, T, dim].

Tensor embedding_forward(const std::vector<int64_t>& tokens, int64_t n, const Layer& l, const double* weight) {
  const auto steps = static_cast<int64_t>(tokens.size()) / n;
  Tensor y({n, steps, l.out});
  for (int64_t r = 0; r < n * steps; ++r) {
    const int64_t token = tokens[static_cast<size_t>(r)];
    for (int64_t d = 0; d < l.out; ++d) y[r * l.out + d] = weight[token * l.out + d];
  }
  return y;
}

void embedding_backward(const std::vector<int64_t>& tokens, const Layer& l, const Tensor& dy, double* dweight) {
  for (size_t r = 0; r < tokens.size(); ++r) {
    for (int64_t d = 0; d < l.out; ++d) dweight[tokens[r] * l.out + d] += dy[static_cast<int64_t>(r) * l.out + d];
  }
}

// ---------------------------------------------------------------------------------------------
// LSTM: stacked layers over [N, T, in]; each sample's sequence is independent.

/// One stacked layer's record of the forward pass, for backpropagation through time.
struct LstmLayerState {
  Tensor input;               // [N, T, in_l]
  std::vector<double> gates;  // [N, T, 4H]: sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)
  std::vector<double> cell;   // [N, T, H]: c_t
  Tensor hidden;              // [N, T, H]: h_t
};

struct LstmState {
  std::vector<LstmLayerState> layers;
};

/// p holds, per stacked layer l, the flat offsets of w_ih, w_hh and bias at 3l, 3l+1, 3l+2.
Tensor lstm_forward(const Tensor& x, const Layer& l, const double* const* p, LstmState* s) {
  const int64_t n = x.shape[0], steps = x.shape[1], h = l.out;
  s->layers.assign(static_cast<size_t>(l.num_layers), {});
  Tensor in = x;
  for (int64_t layer = 0; layer < l.num_layers; ++layer) {
    LstmLayerState& st = s->layers[static_cast<size_t>(layer)];
    const int64_t width = in.shape[2];
    const double* w_ih = p[3 * layer];
    const double* w_hh = p[3 * layer + 1];
    const double* bias = p[3 * layer + 2];
    st.gates.assign(static_cast<size_t>(n * steps * 4 * h), 0.0);
    st.cell.assign(static_cast<size_t>(n * steps * h), 0.0);
    st.hidden = Tensor({n, steps, h});
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t t = 0; t < steps; ++t) {
        const int64_t row = b * steps + t;
        double* gate = &st.gates[static_cast<size_t>(row * 4 * h)];
        for (int64_t j = 0; j < 4 * h; ++j) {
          double a = bias[j];
          for (int64_t k = 0; k < width; ++k) a += w_ih[j * width + k] * in[row * width + k];
          if (t > 0) {
            for (int64_t k = 0; k < h; ++k) a += w_hh[j * h + k] * st.hidden[(row - 1) * h + k];
          }
          gate[j] = (j >= 2 * h && j < 3 * h) ? std::tanh(a) : sigmoid(a);
        }
        for (int64_t k = 0; k < h; ++k) {
          const double i = gate[k], f = gate[h + k], g = gate[2 * h + k], o = gate[3 * h + k];
          const double c_prev = t > 0 ? st.cell[static_cast<size_t>((row - 1) * h + k)] : 0.0;
          const double c = f * c_prev + i * g;
          st.cell[static_cast<size_t>(row * h + k)] = c;
          st.hidden[row * h + k] = o * std::tanh(c);
        }
      }
    }
    st.input = std::move(in);
    in = st.hidden;
  }
  if (l.all_steps) return in;
  Tensor last({n, h});
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t k = 0; k < h; ++k) last[b * h + k] = in[((b * steps) + steps - 1) * h + k];
  }
  return last;
}

Tensor lstm_backward(const Layer& l, const double* const* p, const LstmState& s, const Tensor& dy, double* const* g) {
  const LstmLayerState& top = s.layers.back();
  const int64_t n = top.hidden.shape[0], steps = top.hidden.shape[1], h = l.out;
  // The gradient reaching each step's output of the current stacked layer.
  Tensor d_hidden(top.hidden.shape);
  if (l.all_steps) {
    d_hidden = dy;
  } else {
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t k = 0; k < h; ++k) d_hidden[((b * steps) + steps - 1) * h + k] = dy[b * h + k];
    }
  }
  for (int64_t layer = l.num_layers - 1; layer >= 0; --layer) {
    const LstmLayerState& st = s.layers[static_cast<size_t>(layer)];
    const int64_t width = st.input.shape[2];
    const double* w_ih = p[3 * layer];
    const double* w_hh = p[3 * layer + 1];
    double* dw_ih = g[3 * layer];
    double* dw_hh = g[3 * layer + 1];
    double* dbias = g[3 * layer + 2];
    Tensor d_input(st.input.shape);
    std::vector<double> dh_next(static_cast<size_t>(h)), dc_next(static_cast<size_t>(h)),
        d_gate(static_cast<size_t>(4 * h));
    for (int64_t b = 0; b < n; ++b) {
      std::fill(dh_next.begin(), dh_next.end(), 0.0);
      std::fill(dc_next.begin(), dc_next.end(), 0.0);
      for (int64_t t = steps - 1; t >= 0; --t) {
        const int64_t row = b * steps + t;
        const double* gate = &st.gates[static_cast<size_t>(row * 4 * h)];
        for (int64_t k = 0; k < h; ++k) {
          const auto kk = static_cast<size_t>(k);
          const double i = gate[k], f = gate[h + k], gg = gate[2 * h + k], o = gate[3 * h + k];
          const double c = st.cell[static_cast<size_t>(row * h + k)];
          const double c_prev = t > 0 ? st.cell[static_cast<size_t>((row - 1) * h + k)] : 0.0;
          const double tanh_c = std::tanh(c);
          const double dh = d_hidden[row * h + k] + dh_next[kk];
          const double dc = dc_next[kk] + dh * o * (1 - tanh_c * tanh_c);
          d_gate[kk] = dc * gg * i * (1 - i);                                  // input gate
          d_gate[static_cast<size_t>(h + k)] = dc * c_prev * f * (1 - f);      // forget gate
          d_gate[static_cast<size_t>(2 * h + k)] = dc * i * (1 - gg * gg);     // cell candidate
          d_gate[static_cast<size_t>(3 * h + k)] = dh * tanh_c * o * (1 - o);  // output gate
          dc_next[kk] = dc * f;
        }
        std::fill(dh_next.begin(), dh_next.end(), 0.0);
        for (int64_t j = 0; j < 4 * h; ++j) {
          const double da = d_gate[static_cast<size_t>(j)];
          dbias[j] += da;
          for (int64_t k = 0; k < width; ++k) {
            dw_ih[j * width + k] += da * st.input[row * width + k];
            d_input[row * width + k] += da * w_ih[j * width + k];
          }
          if (t > 0) {
            for (int64_t k = 0; k < h; ++k) {
              dw_hh[j * h + k] += da * st.hidden[(row - 1) * h + k];
              dh_next[static_cast<size_t>(k)] += da * w_hh[j * h + k];
            }
          }
        }
      }
    }
    d_hidden = std::move(d_input);  // the layer below produced this layer's input
  }
  return d_hidden;
}

// ---------------------------------------------------------------------------------------------
// Losses: the mean over rows of the per-row loss; `d_logits` gets its gradient.

double softmax_cross_entropy(const Tensor& logits, const std::vector<int64_t>& labels, int64_t classes,
                             Tensor* d_logits) {
  const auto rows = static_cast<int64_t>(labels.size());
  *d_logits = Tensor(logits.shape);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double* z = &logits.data[static_cast<size_t>(r * classes)];
    const double max = *std::max_element(z, z + classes);  // shifted so that exp cannot overflow
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(z[c] - max);
    const double log_sum_exp = max + std::log(sum);
    const int64_t label = labels[static_cast<size_t>(r)];
    total += log_sum_exp - z[label];
    for (int64_t c = 0; c < classes; ++c) {
      const double softmax = std::exp(z[c] - log_sum_exp);
      (*d_logits)[r * classes + c] = (softmax - (c == label ? 1.0 : 0.0)) / static_cast<double>(rows);
    }
  }
  return total / static_cast<double>(rows);
}

/// -(y log s(z) + (1-y) log(1-s(z))) = max(z, 0) - z y + log(1 + exp(-|z|)), which never
/// takes the log of a rounded-to-zero probability.
double sigmoid_binary_cross_entropy(const Tensor& logits, const std::vector<int64_t>& labels, Tensor* d_logits) {
  const auto rows = static_cast<int64_t>(labels.size());
  *d_logits = Tensor(logits.shape);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double z = logits[r], y = static_cast<double>(labels[static_cast<size_t>(r)]);
    total += std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::abs(z)));
    (*d_logits)[r] = (sigmoid(z) - y) / static_cast<double>(rows);
  }
  return total / static_cast<double>(rows);
}

/// What one layer keeps from its forward pass for its backward pass (only its kind's part).
struct LayerState {
  std::vector<double> dropout_mask;
  std::vector<int64_t> argmax;
  BatchNormState batch_norm;
  BottleneckState bottleneck;
  LstmState lstm;
};

}  // namespace

ReferenceNetwork::ReferenceNetwork(Workload w, uint64_t dropout_seed)
    : workload_(std::move(w)), dropout_seed_(dropout_seed) {
  const Workload& wl = workload_;
  shapes_ = activation_shapes(wl);  // throws std::invalid_argument when a layer does not fit
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("reference driver: workload {}: {}", wl.name, why));
  };
  if (wl.layers.empty()) fail("has no layers");
  if (wl.input_kind == InputKind::kTokens && wl.layers.front().kind != LayerKind::kEmbedding) {
    fail("token input needs an Embedding first layer");
  }
  for (size_t i = 0; i < wl.layers.size(); ++i) {
    const Layer& l = wl.layers[i];
    const std::vector<int64_t>& in_shape = i == 0 ? wl.input_shape : shapes_[i - 1];
    // activation_shapes divides with truncation, so with a stride above 1 a window slightly
    // larger than its padded input still gets an output size of 1; PyTorch rejects it.
    auto check_window = [&] {
      if (in_shape[1] + 2 * l.padding < l.kernel || in_shape[2] + 2 * l.padding < l.kernel) {
        fail(fmt::format("layer {}: the {}x{} window is larger than the padded input", i, l.kernel, l.kernel));
      }
    };
    switch (l.kind) {
      case LayerKind::kConv2d:
        check_window();
        break;
      case LayerKind::kMaxPool2d:
        check_window();
        // PyTorch's rule; it also guarantees that every window covers at least one input.
        if (l.padding < 0 || 2 * l.padding > l.kernel) fail(fmt::format("layer {}: padding exceeds kernel / 2", i));
        break;
      case LayerKind::kDropout:
        if (!(l.p >= 0 && l.p <= 1)) fail(fmt::format("layer {}: dropout probability {} not in [0, 1]", i, l.p));
        break;
      case LayerKind::kLstm:
        if (l.num_layers < 1) fail(fmt::format("layer {}: LSTM needs at least one layer", i));
        break;
      case LayerKind::kLinear:
      case LayerKind::kGlobalAvgPool:
      case LayerKind::kReLU:
      case LayerKind::kSigmoid:
      case LayerKind::kTanh:
      case LayerKind::kBatchNorm2d:
      case LayerKind::kBottleneck:
      case LayerKind::kFlatten:
      case LayerKind::kEmbedding:
        break;
    }
  }
  const int64_t outputs = product(shapes_.back());
  if (wl.num_classes < 1 || outputs != wl.labels_per_sample() * wl.num_classes) {
    fail(fmt::format("the last layer gives {} values per sample, the loss needs {} labels x {} classes", outputs,
                     wl.labels_per_sample(), wl.num_classes));
  }
  if (wl.loss == LossKind::kSigmoidBinaryCrossEntropy && wl.num_classes != 1) {
    fail("binary cross-entropy needs num_classes = 1");
  }
  layer_offsets_.resize(wl.layers.size());
  for (const ParamSpec& p : parameter_layout(wl)) {
    layer_offsets_[static_cast<size_t>(p.layer)].push_back(p.offset);
    parameter_count_ = p.offset + p.count;
  }
}

std::vector<double> ReferenceNetwork::output(const std::vector<double>& params, const Batch& batch,
                                             uint64_t step) const {
  std::vector<double> logits;
  run(params, batch, step, nullptr, &logits);
  return logits;
}

double ReferenceNetwork::loss(const std::vector<double>& params, const Batch& batch, uint64_t step) const {
  return run(params, batch, step, nullptr, nullptr);
}

double ReferenceNetwork::loss_and_gradients(const std::vector<double>& params, const Batch& batch,
                                            std::vector<double>* grads, uint64_t step,
                                            RunningStatistics* running) const {
  return run(params, batch, step, grads, nullptr, running);
}

RunningStatistics ReferenceNetwork::initial_running_statistics() const {
  RunningStatistics running;
  auto add = [&](int64_t channels) {
    running.mean.emplace_back(static_cast<size_t>(channels), 0.0);
    running.var.emplace_back(static_cast<size_t>(channels), 1.0);
  };
  for (const Layer& l : workload_.layers) {
    if (l.kind == LayerKind::kBatchNorm2d) add(l.in);
    if (l.kind == LayerKind::kBottleneck) {
      for (int64_t channels : {l.mid, l.mid, l.out}) add(channels);
      if (has_projection(l)) add(l.out);
    }
  }
  return running;
}

double ReferenceNetwork::inference(const std::vector<double>& params, const Batch& batch,
                                   const RunningStatistics& running, std::vector<double>* logits) const {
  return run(params, batch, 0, nullptr, logits, nullptr, &running);
}

void ReferenceNetwork::check_inputs(const std::vector<double>& params, const Batch& batch) const {
  const Workload& w = workload_;
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("reference driver: workload {}: {}", w.name, why));
  };
  if (static_cast<int64_t>(params.size()) != parameter_count_) {
    fail(fmt::format("expected {} parameters, got {}", parameter_count_, params.size()));
  }
  check_batch(w, batch, "reference driver");
}

double ReferenceNetwork::run(const std::vector<double>& params, const Batch& batch, uint64_t step,
                             std::vector<double>* grads, std::vector<double>* logits, RunningStatistics* update,
                             const RunningStatistics* use) const {
  check_inputs(params, batch);
  BatchNorms batch_norms(update, use);
  const bool inference = use != nullptr;
  const Workload& w = workload_;
  const size_t num_layers = w.layers.size();
  const int64_t n = batch.size;

  // acts[i] is layer i's input and acts[i + 1] its output. Token input has no tensor: the
  // Embedding (always first) reads batch.tokens.
  std::vector<Tensor> acts(num_layers + 1);
  if (w.input_kind == InputKind::kDense) {
    std::vector<int64_t> shape = {n};
    shape.insert(shape.end(), w.input_shape.begin(), w.input_shape.end());
    acts[0] = Tensor(shape);
    for (int64_t i = 0; i < acts[0].numel(); ++i) acts[0][i] = batch.features[static_cast<size_t>(i)];
  }
  std::vector<LayerState> states(num_layers);
  // Pointers to each tensor of layer i, in parameter_layout's order.
  auto param_ptrs = [&](size_t i) {
    std::vector<const double*> p;
    for (int64_t offset : layer_offsets_[i]) p.push_back(params.data() + offset);
    return p;
  };

  for (size_t i = 0; i < num_layers; ++i) {
    const Layer& l = w.layers[i];
    const Tensor& x = acts[i];
    const std::vector<const double*> p = param_ptrs(i);
    Tensor& y = acts[i + 1];
    switch (l.kind) {
      case LayerKind::kLinear:
        y = linear_forward(x, l, p[0], l.bias ? p[1] : nullptr);
        break;
      case LayerKind::kConv2d:
        y = conv2d_forward(x, {l.in, l.out, l.kernel, l.stride, l.padding}, p[0], l.bias ? p[1] : nullptr);
        break;
      case LayerKind::kMaxPool2d:
        y = max_pool_forward(x, l, &states[i].argmax);
        break;
      case LayerKind::kGlobalAvgPool:
        y = global_avg_pool_forward(x);
        break;
      case LayerKind::kReLU:
      case LayerKind::kSigmoid:
      case LayerKind::kTanh:
        y = activation_forward(l.kind, x);
        break;
      case LayerKind::kDropout:
        if (inference) {
          y = x;
          break;
        }
        states[i].dropout_mask = dropout_mask(dropout_seed_, step, i, x.numel(), l.p);
        y = multiply(x, states[i].dropout_mask);
        break;
      case LayerKind::kBatchNorm2d:
        y = batch_norms.forward(x, p[0], p[1], &states[i].batch_norm);
        break;
      case LayerKind::kBottleneck:
        y = bottleneck_forward(x, l, p.data(), &states[i].bottleneck, batch_norms);
        break;
      case LayerKind::kFlatten:
        y = x;
        y.shape = {n, product(shapes_[i])};
        break;
      case LayerKind::kEmbedding:
        y = embedding_forward(batch.tokens, n, l, p[0]);
        break;
      case LayerKind::kLstm:
        y = lstm_forward(x, l, p.data(), &states[i].lstm);
        break;
    }
  }

  const Tensor& out = acts[num_layers];
  if (logits) *logits = out.data;
  Tensor dy;
  const double loss = w.loss == LossKind::kSoftmaxCrossEntropy
                          ? softmax_cross_entropy(out, batch.labels, w.num_classes, &dy)
                          : sigmoid_binary_cross_entropy(out, batch.labels, &dy);
  if (!grads) return loss;

  grads->assign(static_cast<size_t>(parameter_count_), 0.0);
  auto grad_ptrs = [&](size_t i) {
    std::vector<double*> g;
    for (int64_t offset : layer_offsets_[i]) g.push_back(grads->data() + offset);
    return g;
  };
  // Backward, last layer first; dy is the gradient of the loss w.r.t. the current layer's output.
  for (size_t i = num_layers; i-- > 0;) {
    const Layer& l = w.layers[i];
    const Tensor& x = acts[i];
    const Tensor& y = acts[i + 1];
    const std::vector<const double*> p = param_ptrs(i);
    const std::vector<double*> g = grad_ptrs(i);
    const bool need_dx = i > 0;  // nothing is trained below the first layer
    Tensor dx;
    switch (l.kind) {
      case LayerKind::kLinear:
        linear_backward(x, l, p[0], dy, need_dx ? &dx : nullptr, g[0], l.bias ? g[1] : nullptr);
        break;
      case LayerKind::kConv2d:
        conv2d_backward(x, {l.in, l.out, l.kernel, l.stride, l.padding}, p[0], dy, need_dx ? &dx : nullptr, g[0],
                        l.bias ? g[1] : nullptr);
        break;
      case LayerKind::kMaxPool2d:
        dx = max_pool_backward(x, states[i].argmax, dy);
        break;
      case LayerKind::kGlobalAvgPool:
        dx = global_avg_pool_backward(x, dy);
        break;
      case LayerKind::kReLU:
      case LayerKind::kSigmoid:
      case LayerKind::kTanh:
        dx = activation_backward(l.kind, y, dy);
        break;
      case LayerKind::kDropout:
        dx = multiply(dy, states[i].dropout_mask);
        break;
      case LayerKind::kBatchNorm2d:
        dx = batch_norm_backward(dy, p[0], states[i].batch_norm, g[0], g[1]);
        break;
      case LayerKind::kBottleneck:
        dx = bottleneck_backward(x, y, l, p.data(), states[i].bottleneck, dy, g.data(), need_dx);
        break;
      case LayerKind::kFlatten:
        dx = dy;
        dx.shape = x.shape;
        break;
      case LayerKind::kEmbedding:
        embedding_backward(batch.tokens, l, dy, g[0]);
        break;
      case LayerKind::kLstm:
        dx = lstm_backward(l, p.data(), states[i].lstm, dy, g.data());
        break;
    }
    dy = std::move(dx);
  }
  return loss;
}

}  // namespace dlscale
