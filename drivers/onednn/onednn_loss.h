// The training losses of workloads/workload.h on the network's output: softmax cross-entropy
// (oneDNN's softmax primitive, then one pass per row) and sigmoid binary cross-entropy (a plain
// loop over one logit per sample). Both write d(loss)/d(logits) into the output's gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "drivers/driver.h"
#include "drivers/onednn/onednn_common.h"
#include "workloads/workload.h"

namespace dlscale::onednn {

class Loss {
 public:
  Loss(LossKind kind, int64_t classes) : kind_(kind), classes_(classes) {}

  /// `labels` are the model's: one per row of `logits` ([rows, classes] once flattened).
  void build(const Env& env, const Tensor& logits, const std::vector<int64_t>* labels);
  /// The mean loss over every row (sample, or sample and step).
  double forward(const Env& env);
  /// The gradient of the mean loss, into the logits' gradient buffer.
  void backward(const Env& env);
  /// The loss summed over the rows and the correct predictions among them (Model::evaluate),
  /// leaving nothing for backward().
  Evaluation evaluate(const Env& env);

 private:
  /// The loss summed over the rows, from the logits of the last forward pass.
  double loss_sum(const Env& env);

  LossKind kind_;
  int64_t classes_, rows_ = 0;
  const std::vector<int64_t>* labels_ = nullptr;
  StagedTensor plain_;    // the logits in plain layout
  Tensor flat_;           // the same, viewed as [rows, classes]
  memory probabilities_;  // softmax output, turned into the gradient in place by backward()
  dnnl::softmax_forward softmax_;
  Args softmax_args_;
  bool forward_done_ = false;  // backward() needs this forward pass's probabilities
};

}  // namespace dlscale::onednn
