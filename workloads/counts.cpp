// Parameter layout, shape inference and analytic counts, derived from the layer list alone so
// that the catalog can be checked against docs/workloads.md without building any network.
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "workloads/workload.h"

namespace dlscale {

int64_t shape_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) {
      throw std::invalid_argument(
          fmt::format("a tensor of shape [{}] has more elements than 64-bit integers count", fmt::join(shape, ", ")));
    }
  }
  return n;
}

namespace {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

/// Output size of a window sweep; 0 when the window does not fit the padded input at all.
int64_t conv_out(int64_t size, int64_t kernel, int64_t stride, int64_t padding) {
  const int64_t room = size + 2 * padding - kernel;
  return room < 0 ? 0 : room / stride + 1;
}

/// Collects the tensors of one layer, named "layer<i>.<role>".
class LayoutBuilder {
 public:
  LayoutBuilder(const Workload& w, std::vector<ParamSpec>& out) : w_(w), out_(out) {}

  void add(int layer, const std::string& role, Shape shape, InitKind init, float value) {
    ParamSpec p;
    p.name = fmt::format("layer{}.{}", layer, role);
    p.count = shape_elements(shape);
    p.shape = std::move(shape);
    p.offset = offset_;
    p.layer = layer;
    if (w_.init == InitRule::kUniformHalf && init == InitKind::kUniform) {
      init = InitKind::kUniform;
      value = 0.5f;
    }
    p.init = init;
    p.init_value = value;
    // The offsets are the running parameter count: a workload of huge overrides can take it past
    // what an int64 counts although each tensor fits.
    if (__builtin_add_overflow(offset_, p.count, &offset_)) {
      throw std::invalid_argument(fmt::format("workload {}: its parameter count overflows 64-bit integers", w_.name));
    }
    out_.push_back(std::move(p));
  }

  /// A weight and optional bias both uniform with bound 1/sqrt(fan_in) (PyTorch's default).
  void fan_in_uniform(int layer, const std::string& prefix, Shape weight, int64_t fan_in, bool bias) {
    const auto bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
    const int64_t out = weight.front();
    add(layer, prefix + "weight", std::move(weight), InitKind::kUniform, bound);
    if (bias) add(layer, prefix + "bias", {out}, InitKind::kUniform, bound);
  }

  void batch_norm(int layer, const std::string& prefix, int64_t channels) {
    add(layer, prefix + "weight", {channels}, InitKind::kConstant, 1.0f);
    add(layer, prefix + "bias", {channels}, InitKind::kConstant, 0.0f);
  }

 private:
  const Workload& w_;
  std::vector<ParamSpec>& out_;
  int64_t offset_ = 0;
};

}  // namespace

int64_t Workload::input_size() const { return shape_elements(input_shape); }

int64_t Workload::labels_per_sample() const { return label_per_step ? input_shape.front() : 1; }

std::vector<ParamSpec> parameter_layout(const Workload& w) {
  std::vector<ParamSpec> specs;
  LayoutBuilder b(w, specs);
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const Layer& l = w.layers[i];
    const int idx = static_cast<int>(i);
    switch (l.kind) {
      case LayerKind::kLinear:
        b.fan_in_uniform(idx, "", {l.out, l.in}, l.in, l.bias);
        break;
      case LayerKind::kConv2d:
        b.fan_in_uniform(idx, "", {l.out, l.in, l.kernel, l.kernel}, l.in * l.kernel * l.kernel, l.bias);
        break;
      case LayerKind::kBatchNorm2d:
        b.batch_norm(idx, "", l.in);
        break;
      case LayerKind::kEmbedding:
        b.add(idx, "weight", {l.in, l.out}, InitKind::kNormal, 1.0f);
        break;
      case LayerKind::kLstm: {
        const auto bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(l.out)));
        for (int64_t s = 0; s < l.num_layers; ++s) {
          const int64_t in = s == 0 ? l.in : l.out;
          b.add(idx, fmt::format("l{}.w_ih", s), {4 * l.out, in}, InitKind::kUniform, bound);
          b.add(idx, fmt::format("l{}.w_hh", s), {4 * l.out, l.out}, InitKind::kUniform, bound);
          b.add(idx, fmt::format("l{}.bias", s), {4 * l.out}, InitKind::kUniform, bound);
        }
        break;
      }
      case LayerKind::kBottleneck:
        b.fan_in_uniform(idx, "conv1.", {l.mid, l.in, 1, 1}, l.in, false);
        b.batch_norm(idx, "bn1.", l.mid);
        b.fan_in_uniform(idx, "conv2.", {l.mid, l.mid, 3, 3}, l.mid * 9, false);
        b.batch_norm(idx, "bn2.", l.mid);
        b.fan_in_uniform(idx, "conv3.", {l.out, l.mid, 1, 1}, l.mid, false);
        b.batch_norm(idx, "bn3.", l.out);
        if (l.stride != 1 || l.in != l.out) {
          b.fan_in_uniform(idx, "down.", {l.out, l.in, 1, 1}, l.in, false);
          b.batch_norm(idx, "down_bn.", l.out);
        }
        break;
      case LayerKind::kMaxPool2d:
      case LayerKind::kGlobalAvgPool:
      case LayerKind::kReLU:
      case LayerKind::kSigmoid:
      case LayerKind::kTanh:
      case LayerKind::kDropout:
      case LayerKind::kFlatten:
        break;
    }
  }
  return specs;
}

int64_t parameter_count(const Workload& w) {
  // The layout's offsets are checked for overflow as it is built: their sum, the last offset
  // plus its count, fits.
  int64_t n = 0;
  for (const ParamSpec& p : parameter_layout(w)) n += p.count;
  return n;
}

int64_t activation_elements_per_sample(const Workload& w) {
  int64_t n = shape_elements(w.input_shape);
  for (const std::vector<int64_t>& shape : activation_shapes(w)) {
    if (__builtin_add_overflow(n, shape_elements(shape), &n)) {
      throw std::invalid_argument(fmt::format("workload {}: its activation count overflows 64-bit integers", w.name));
    }
  }
  return n;
}

std::vector<ParamRange> layer_parameter_ranges(const Workload& w) {
  std::vector<ParamRange> ranges(w.layers.size());
  for (const ParamSpec& p : parameter_layout(w)) {
    ParamRange& r = ranges.at(static_cast<size_t>(p.layer));
    if (r.count == 0) r.first = static_cast<size_t>(p.offset);
    r.count = static_cast<size_t>(p.offset + p.count) - r.first;
  }
  return ranges;
}

std::vector<size_t> layer_parameter_starts(const Workload& w) {
  std::vector<size_t> starts;
  for (const ParamRange& r : layer_parameter_ranges(w)) {
    if (r.count > 0) starts.push_back(r.first);
  }
  return starts;
}

std::vector<Shape> activation_shapes(const Workload& w) {
  std::vector<Shape> shapes;
  Shape s = w.input_shape;
  auto fail = [&](size_t i, const std::string& why) {
    throw std::invalid_argument(
        fmt::format("workload {}: layer {} does not fit its input {}: {}", w.name, i, shape_str(s), why));
  };
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const Layer& l = w.layers[i];
    const bool first = i == 0;
    switch (l.kind) {
      case LayerKind::kLinear:
        if (s.empty() || s.back() != l.in) fail(i, fmt::format("Linear expects last dimension {}", l.in));
        s.back() = l.out;
        break;
      case LayerKind::kConv2d:
      case LayerKind::kMaxPool2d: {
        if (s.size() != 3) fail(i, "expects [C, H, W]");
        if (l.kind == LayerKind::kConv2d && s[0] != l.in) fail(i, fmt::format("Conv2d expects {} channels", l.in));
        if (l.kind == LayerKind::kMaxPool2d && 2 * l.padding > l.kernel)
          fail(i, "max-pool padding exceeds half the window");
        const int64_t h = conv_out(s[1], l.kernel, l.stride, l.padding),
                      wd = conv_out(s[2], l.kernel, l.stride, l.padding);
        if (h <= 0 || wd <= 0) fail(i, "the window is larger than the input");
        s = {l.kind == LayerKind::kConv2d ? l.out : s[0], h, wd};
        break;
      }
      case LayerKind::kBottleneck: {
        if (s.size() != 3 || s[0] != l.in) fail(i, fmt::format("Bottleneck expects [{}, H, W]", l.in));
        s = {l.out, conv_out(s[1], 3, l.stride, 1), conv_out(s[2], 3, l.stride, 1)};
        break;
      }
      case LayerKind::kBatchNorm2d:
        if (s.size() != 3 || s[0] != l.in) fail(i, fmt::format("BatchNorm2d expects [{}, H, W]", l.in));
        break;
      case LayerKind::kGlobalAvgPool:
        if (s.size() != 3) fail(i, "expects [C, H, W]");
        s = {s[0]};
        break;
      case LayerKind::kFlatten:
        s = {shape_elements(s)};
        break;
      case LayerKind::kEmbedding:
        if (!first || w.input_kind != InputKind::kTokens || s.size() != 1) fail(i, "Embedding must read the tokens");
        if (l.in != w.vocab) fail(i, fmt::format("the embedding has {} rows for a vocabulary of {}", l.in, w.vocab));
        s = {s[0], l.out};
        break;
      case LayerKind::kLstm:
        if (s.size() != 2 || s[1] != l.in) fail(i, fmt::format("LSTM expects [T, {}]", l.in));
        s = l.all_steps ? Shape{s[0], l.out} : Shape{l.out};
        break;
      case LayerKind::kReLU:
      case LayerKind::kSigmoid:
      case LayerKind::kTanh:
      case LayerKind::kDropout:
        break;
    }
    if (first && w.input_kind == InputKind::kTokens && l.kind != LayerKind::kEmbedding) {
      fail(i, "a token workload must start with an Embedding");
    }
    shapes.push_back(s);
  }
  if (shape_elements(s) != w.labels_per_sample() * w.num_classes) {
    throw std::invalid_argument(fmt::format("workload {}: the last layer gives {} values per sample, the loss needs {}",
                                            w.name, shape_str(s), w.labels_per_sample() * w.num_classes));
  }
  return shapes;
}

FlopCounts flops_per_sample(const Workload& w) {
  FlopCounts f;
  const std::vector<Shape> shapes = activation_shapes(w);
  bool input_needs_grad = false;  // true once any earlier layer has parameters
  std::vector<bool> has_params(w.layers.size(), false);
  for (const ParamSpec& p : parameter_layout(w)) has_params[static_cast<size_t>(p.layer)] = true;
  Shape in_shape = w.input_shape;
  // A matrix product of `macs` multiply-adds with `bias` additions, of a layer whose input
  // gradient is needed or not.
  auto gemm = [&](double macs, double bias, bool grad_input) {
    f.forward_macs += macs;
    f.forward += 2 * macs + bias;
    f.backward += 2 * macs + bias;  // grad-weight, grad-bias
    if (grad_input) f.backward += 2 * macs;
  };
  for (size_t i = 0; i < w.layers.size(); ++i) {
    const Layer& l = w.layers[i];
    const Shape& out = shapes[i];
    switch (l.kind) {
      case LayerKind::kLinear: {
        const auto rows = static_cast<double>(shape_elements(out) / l.out);
        gemm(rows * static_cast<double>(l.in * l.out), l.bias ? rows * static_cast<double>(l.out) : 0,
             input_needs_grad);
        break;
      }
      case LayerKind::kConv2d: {
        const auto positions = static_cast<double>(out[1] * out[2]);
        gemm(positions * static_cast<double>(l.out * l.in * l.kernel * l.kernel),
             l.bias ? positions * static_cast<double>(l.out) : 0, input_needs_grad);
        break;
      }
      case LayerKind::kBottleneck: {
        const auto in_pos = static_cast<double>(in_shape[1] * in_shape[2]);
        const auto out_pos = static_cast<double>(out[1] * out[2]);
        gemm(in_pos * static_cast<double>(l.mid * l.in), 0, input_needs_grad);
        gemm(out_pos * static_cast<double>(l.mid * l.mid * 9), 0, true);
        gemm(out_pos * static_cast<double>(l.out * l.mid), 0, true);
        if (l.stride != 1 || l.in != l.out) gemm(out_pos * static_cast<double>(l.out * l.in), 0, input_needs_grad);
        break;
      }
      case LayerKind::kLstm: {
        const auto steps = static_cast<double>(in_shape[0]);
        const auto h = static_cast<double>(l.out);
        for (int64_t s = 0; s < l.num_layers; ++s) {
          const auto in = static_cast<double>(s == 0 ? l.in : l.out);
          gemm(steps * 4 * h * in, steps * 4 * h, s > 0 || input_needs_grad);  // input projection
          gemm(steps * 4 * h * h, 0, true);                                    // recurrence
        }
        break;
      }
      case LayerKind::kBatchNorm2d:
      case LayerKind::kEmbedding:
      case LayerKind::kMaxPool2d:
      case LayerKind::kGlobalAvgPool:
      case LayerKind::kReLU:
      case LayerKind::kSigmoid:
      case LayerKind::kTanh:
      case LayerKind::kDropout:
      case LayerKind::kFlatten:
        break;
    }
    if (has_params[i]) input_needs_grad = true;
    in_shape = out;
  }
  return f;
}

Workload without_dropout(const Workload& w) {
  Workload out = w;
  out.layers.clear();
  for (const Layer& l : w.layers) {
    if (l.kind != LayerKind::kDropout) out.layers.push_back(l);
  }
  return out;
}

}  // namespace dlscale
