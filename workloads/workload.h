// The layer description every driver builds from: a workload is data (input, an ordered list
// of layers, a loss, an init rule), never code. Drivers translate it into their own graph; the
// canonical parameter layout defined here is what makes them comparable. Semantics follow
// PyTorch's (NCHW activations, OIHW conv weights, Linear weights [out, in], LSTM gates i,f,g,o).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlscale {

/// Kinds of layer a workload can use. Drivers switch over this; a driver that meets a kind it
/// cannot run reports it as unsupported instead of guessing.
enum class LayerKind {
  kLinear,         ///< y = x W^T + b over the last dimension (so per time step on [T, in])
  kConv2d,         ///< 2-D cross-correlation, square kernel, stride, zero padding
  kMaxPool2d,      ///< square window `kernel`, `stride`, implicit -inf padding `padding`
  kGlobalAvgPool,  ///< [C, H, W] -> [C]
  kReLU,
  kSigmoid,
  kTanh,
  kDropout,      ///< inverted dropout with probability `p` (training mode)
  kBatchNorm2d,  ///< training-mode batch statistics over (N, H, W), eps 1e-5; weight, bias
  kBottleneck,   ///< ResNet v1.5 bottleneck, see below
  kFlatten,      ///< [C, H, W] -> [C*H*W]
  kEmbedding,    ///< token ids [T] -> [T, out]; `in` is the vocabulary size
  kLstm,         ///< `num_layers` stacked LSTMs over [T, in]: [T, out] (all_steps) or [out]
};

/// One layer. Only the fields that matter for its kind are set.
///
/// Bottleneck (ResNet v1.5, stride on the 3x3): conv1x1(in->mid) BN ReLU, conv3x3(mid->mid,
/// stride, pad 1) BN ReLU, conv1x1(mid->out) BN, plus the shortcut — identity, or conv1x1(in->out,
/// stride) BN when stride != 1 or in != out — then ReLU. Its convolutions have no bias.
///
/// LSTM (per layer l, input x_t of width in_l = l ? out : in, state h, c of width out = H):
/// gates = W_ih x_t + W_hh h_{t-1} + b, split into i, f, g, o (each H wide, in that order);
/// c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g); h_t = sigmoid(o) tanh(c_t); h_0 = c_0 = 0.
struct Layer {
  LayerKind kind;
  int64_t in = 0;   ///< features, input channels, vocabulary (Embedding), LSTM input width
  int64_t out = 0;  ///< features, output channels, embedding width, LSTM hidden size
  int64_t mid = 0;  ///< Bottleneck width
  int64_t kernel = 0, stride = 1, padding = 0;
  bool bias = true;        ///< Linear, Conv2d
  int64_t num_layers = 1;  ///< LSTM
  bool all_steps = true;   ///< LSTM: every step's output, or only the last step's
  double p = 0;            ///< Dropout probability
};

enum class LossKind {
  kSoftmaxCrossEntropy,        ///< mean over every (sample, step) of -log softmax(logits)[label]
  kSigmoidBinaryCrossEntropy,  ///< mean over samples of BCE(sigmoid(logit), label in {0, 1})
};

enum class InputKind {
  kDense,   ///< float features of input_shape per sample
  kTokens,  ///< int64 token ids of input_shape ({T}) per sample, in [0, vocab)
};

/// How canonical initial parameters are drawn.
enum class InitRule {
  kUniformHalf,  ///< every parameter uniform(-0.5, 0.5) (Shi et al.'s DLBench FCNs)
  kDefault,      ///< PyTorch's defaults per layer (see parameter_layout)
};

/// A network, fully specified: what every driver must build and train.
struct Workload {
  std::string name;    ///< catalog name including overrides, e.g. "fcn5:width=256"
  std::string source;  ///< the seed paper it comes from
  InputKind input_kind = InputKind::kDense;
  std::vector<int64_t> input_shape;  ///< per sample, e.g. {26752}, {3, 224, 224} or {32} tokens
  int64_t vocab = 0;                 ///< token workloads: ids are in [0, vocab)
  int64_t num_classes = 0;           ///< softmax classes, or 1 for binary cross-entropy
  bool label_per_step = false;       ///< language models: one label per time step
  std::vector<Layer> layers;
  LossKind loss = LossKind::kSoftmaxCrossEntropy;
  InitRule init = InitRule::kDefault;

  /// Elements of one input sample.
  int64_t input_size() const;
  /// Labels per sample: the sequence length for language models, else 1.
  int64_t labels_per_sample() const;
};

/// How one parameter tensor is initialised.
enum class InitKind { kUniform, kNormal, kConstant };

/// One parameter tensor in the canonical flat layout: tensors appear in layer order, within a
/// layer in the order listed by parameter_layout's documentation, row-major, without padding.
struct ParamSpec {
  std::string name;  ///< e.g. "layer3.weight", "layer5.conv2.weight", "layer2.l1.w_hh"
  std::vector<int64_t> shape;
  int64_t offset = 0;  ///< first element in the flat parameter vector
  int64_t count = 0;
  int layer = 0;  ///< index into Workload::layers
  InitKind init = InitKind::kUniform;
  float init_value = 0;  ///< uniform bound, normal standard deviation, or the constant
};

/// The number of elements of a tensor of `shape` (1 for a scalar).
int64_t shape_elements(const std::vector<int64_t>& shape);

/// The canonical layout of all trainable parameters of `w`, in order. Per layer kind:
///  Linear: weight [out, in], bias [out] (if bias);   Conv2d: weight [out, in, k, k], bias [out]
///  BatchNorm2d: weight [C] (init 1), bias [C] (init 0);   Embedding: weight [vocab, out]
///  LSTM, per stacked layer l: w_ih [4H, in_l], w_hh [4H, H], bias [4H]
///  Bottleneck: conv1.weight, bn1.weight, bn1.bias, conv2.weight, bn2.weight, bn2.bias,
///    conv3.weight, bn3.weight, bn3.bias, then (with a projection) down.weight, down_bn.weight,
///    down_bn.bias.
/// Default init (InitRule::kDefault, PyTorch's): Linear/Conv weights and biases uniform with
/// bound 1/sqrt(fan_in); LSTM uniform 1/sqrt(H); Embedding normal(0, 1).
std::vector<ParamSpec> parameter_layout(const Workload& w);

/// Total trainable parameters (biases included); throws std::invalid_argument when the count
/// overflows 64-bit integers (shape_elements too).
int64_t parameter_count(const Workload& w);

/// Values of one sample's input and of every layer's output: what a batch of it holds in
/// activations (checked like parameter_count).
int64_t activation_elements_per_sample(const Workload& w);

/// The largest parameter or per-sample activation count a workload may have (2^40, 4 TiB of
/// floats): anything beyond is a typo in an override, and products with batch sizes stay far
/// from 64-bit overflow.
constexpr int64_t kMaxWorkloadCount = int64_t{1} << 40;

/// Where each layer's parameters sit in the canonical vector: elements [first, first + count)
/// (count 0 for a layer without parameters). A layer's parameters are contiguous, so a driver
/// that finishes a layer's gradients reports one range (Model::set_gradient_ready_callback).
struct ParamRange {
  size_t first = 0, count = 0;
};
std::vector<ParamRange> layer_parameter_ranges(const Workload& w);
/// The first element of each layer that has parameters, ascending: where the ranges a driver
/// reports final begin, which gradient buckets do not cut (drivers/gradient_buckets.h).
std::vector<size_t> layer_parameter_starts(const Workload& w);

/// The per-sample activation shape after each layer (entry i is layer i's output); throws
/// std::invalid_argument when a layer does not fit its input.
std::vector<std::vector<int64_t>> activation_shapes(const Workload& w);

/// Analytic per-sample work. A multiply-add counts 2 FLOPs. Counted: matrix products and
/// convolutions (LSTM gate products included) and their bias additions. Backward counts
/// grad-weight and grad-bias for every parameterised layer, and grad-input wherever an earlier
/// layer has parameters (the data itself needs no gradient). Elementwise work (activations,
/// pooling, batch norm, dropout, embedding lookups, the loss) is not counted.
struct FlopCounts {
  double forward_macs = 0;  ///< forward multiply-adds (no bias)
  double forward = 0;
  double backward = 0;
  double train() const { return forward + backward; }
};
FlopCounts flops_per_sample(const Workload& w);

/// A copy of `w` without its dropout layers: dropout draws random masks that no two backends
/// can share, so driver-conformance runs compare networks without it.
Workload without_dropout(const Workload& w);

/// "layer 3 (Conv2d 64->192 k5 s1 p2)": a layer named in drivers' messages.
std::string describe_layer(const Layer& l, size_t index);

}  // namespace dlscale
