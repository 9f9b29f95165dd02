// The reference driver's network: every layer kind of workloads/workload.h, forward and
// backward, computed in float64 with plain loops. It is written to be read and trusted, not to
// be fast: it is the oracle the other drivers are compared against at small sizes, and its own
// gradients are checked against finite differences (tests/unit/test_reference_gradients.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/data/synthetic.h"
#include "workloads/workload.h"

namespace dlscale {

/// The running statistics of a network's batch norms, in the order their forward passes run
/// them: layer by layer, and within a Bottleneck bn1, bn2, bn3, then the projection's down_bn.
/// Per batch norm, a mean and a variance per channel.
struct RunningStatistics {
  std::vector<std::vector<double>> mean, var;
};

/// One workload, evaluated in double precision. Stateless between calls: the parameters, the
/// batch, the dropout step and the batch-norm running statistics are arguments, so a
/// finite-difference check can perturb one parameter and evaluate the loss again under exactly
/// the same dropout masks.
class ReferenceNetwork {
 public:
  /// Validates `w` (layer shapes, output size against the loss, pooling windows) and throws
  /// std::invalid_argument naming the problem. Dropout masks are a pure function of
  /// (`dropout_seed`, step, layer index, element index).
  explicit ReferenceNetwork(Workload w, uint64_t dropout_seed = 0);

  const Workload& workload() const { return workload_; }
  /// Elements of the canonical flat parameter vector (parameter_layout).
  int64_t parameter_count() const { return parameter_count_; }

  /// The network's output (the logits) for `batch`: [batch.size, output shape...] row-major.
  std::vector<double> output(const std::vector<double>& params, const Batch& batch, uint64_t step = 0) const;

  /// The loss of `batch`; `step` selects the dropout masks.
  double loss(const std::vector<double>& params, const Batch& batch, uint64_t step = 0) const;

  /// The loss of `batch` and its gradient with respect to every parameter, written to `grads`
  /// (resized to parameter_count()) in the canonical flat layout. With `running`, every batch
  /// norm folds its batch statistics into it as PyTorch's training mode does: momentum 0.1,
  /// the unbiased variance.
  double loss_and_gradients(const std::vector<double>& params, const Batch& batch, std::vector<double>* grads,
                            uint64_t step = 0, RunningStatistics* running = nullptr) const;

  /// Running statistics as a model starts with them: mean 0 and variance 1 for every channel.
  RunningStatistics initial_running_statistics() const;

  /// Inference (PyTorch's eval mode): no dropout, batch norms normalise with `running`. Returns
  /// the mean loss and puts the logits, [batch.size, output shape...], into `logits`.
  double inference(const std::vector<double>& params, const Batch& batch, const RunningStatistics& running,
                   std::vector<double>* logits) const;

 private:
  /// Forward pass, loss, and (when `grads` is set) the backward pass; stores the logits in
  /// `logits` when set. The batch norms normalise with the batch's statistics and fold them into
  /// `update` when set (training), or normalise with `use` when set (inference, no dropout).
  double run(const std::vector<double>& params, const Batch& batch, uint64_t step, std::vector<double>* grads,
             std::vector<double>* logits, RunningStatistics* update = nullptr,
             const RunningStatistics* use = nullptr) const;

  /// Throws std::invalid_argument when `params` or `batch` do not fit the workload.
  void check_inputs(const std::vector<double>& params, const Batch& batch) const;

  Workload workload_;
  uint64_t dropout_seed_;
  int64_t parameter_count_ = 0;
  std::vector<std::vector<int64_t>> shapes_;         ///< per-sample output shape of each layer
  std::vector<std::vector<int64_t>> layer_offsets_;  ///< per layer: its tensors' flat offsets, in order
};

}  // namespace dlscale
