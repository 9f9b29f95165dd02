// The layer description every driver builds from: a workload is data (input shape, an
// ordered list of layers, a loss, an init rule), never code. Drivers translate it into their
// own graph; the canonical parameter layout defined here is what makes them comparable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlscale {

/// Kinds of layer a workload can use. Drivers switch over this; a driver that meets a kind it
/// cannot run reports it as unsupported instead of guessing.
enum class LayerKind { kLinear, kReLU, kSigmoid };

/// One layer. Only the fields that matter for its kind are set.
struct Layer {
  LayerKind kind;
  int64_t in_features = 0;   ///< Linear: input width
  int64_t out_features = 0;  ///< Linear: output width
};

enum class LossKind { kSoftmaxCrossEntropy };

/// How the canonical initial parameters are drawn. Every parameter tensor is uniform in
/// [-bound, bound]; the rule picks the bound.
enum class InitRule {
  kUniformHalf,   ///< bound 0.5 for weights and biases (Shi et al.'s DLBench FCNs)
  kFanInUniform,  ///< bound 1/sqrt(fan_in) for weights and biases (PyTorch's Linear default)
};

/// A network, fully specified: what every driver must build and train.
struct Workload {
  std::string name;                  ///< catalog name including overrides, e.g. "fcn5:width=256"
  std::string source;                ///< the seed paper it comes from
  std::vector<int64_t> input_shape;  ///< per sample, e.g. {26752} or {1, 28, 28}
  int64_t num_classes = 0;
  std::vector<Layer> layers;
  LossKind loss = LossKind::kSoftmaxCrossEntropy;
  InitRule init = InitRule::kFanInUniform;

  /// Elements of one input sample.
  int64_t input_size() const;
};

/// One parameter tensor in the canonical flat layout: Linear weights are [out, in] row-major,
/// followed by their bias [out]; tensors appear in layer order without padding.
struct ParamSpec {
  std::string name;  ///< e.g. "layer0.weight"
  std::vector<int64_t> shape;
  int64_t offset = 0;  ///< first element in the flat parameter vector
  int64_t count = 0;
  int layer = 0;            ///< index into Workload::layers
  float init_bound = 0.0f;  ///< uniform(-bound, bound)
};

/// The canonical layout of all trainable parameters of `w`, in order.
std::vector<ParamSpec> parameter_layout(const Workload& w);

/// Total trainable parameters (biases included).
int64_t parameter_count(const Workload& w);

/// Analytic FLOPs for one sample (a multiply-add counts 2). Forward counts the matrix
/// products and bias additions; backward counts grad-input (skipped for the first layer, whose
/// input needs no gradient) and grad-weight/bias. Activations and the loss are not counted.
struct FlopCounts {
  double forward = 0;
  double backward = 0;
  double train() const { return forward + backward; }
};
FlopCounts flops_per_sample(const Workload& w);

}  // namespace dlscale
