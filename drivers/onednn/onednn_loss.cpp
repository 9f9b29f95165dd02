// Losses on the network's output. The softmax itself is oneDNN's (vectorised exp); the loss and
// the gradient then need one pass per row: -log p[label] forward, and (p - onehot) / rows
// backward, written over the probabilities in the gradient buffer. Inference sums the same
// loss and counts the rows whose prediction is their label.
#include "drivers/onednn/onednn_loss.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace dlscale::onednn {

namespace {

/// Below this a float probability has lost its precision (or underflowed to zero): such a row's
/// loss is recomputed from its logits as log-sum-exp minus the label's logit.
constexpr float kTinyProbability = 1e-30f;

double log_sum_exp_loss(const float* z, int64_t classes, int64_t label) {
  const double max = *std::max_element(z, z + classes);
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(z[c]) - max);
  return max + std::log(sum) - z[label];
}

float* data(const memory& m) { return static_cast<float*>(m.get_data_handle()); }

}  // namespace

void Loss::build(const Env& env, const Tensor& logits, const std::vector<int64_t>* labels) {
  labels_ = labels;
  rows_ = static_cast<int64_t>(labels->size());
  const memory::desc md = plain_md({rows_, classes_});
  plain_ = StagedTensor(env, logits, plain_md(logits.value.get_desc().dims()));
  flat_ = view(env, plain_.tensor(), md);
  probabilities_ = flat_.grad ? flat_.grad : allocate(env, md);
  forward_done_ = false;
  if (kind_ != LossKind::kSoftmaxCrossEntropy) return;
  const dnnl::softmax_forward::primitive_desc pd({dnnl::prop_kind::forward_training, md, 1}, env.engine);
  softmax_ = dnnl::softmax_forward(pd);
  softmax_args_ = {{DNNL_ARG_SRC, flat_.value}, {DNNL_ARG_DST, probabilities_}};
}

double Loss::forward(const Env& env) {
  const double total = loss_sum(env);
  forward_done_ = true;
  return total / static_cast<double>(rows_);
}

Evaluation Loss::evaluate(const Env& env) {
  forward_done_ = false;  // the probabilities are the evaluated batch's, not a training one's
  Evaluation e{loss_sum(env), 0, rows_};
  const float* z = data(flat_.value);
  const int64_t* labels = labels_->data();
  const int64_t rows = rows_, classes = classes_;
  int64_t correct = 0;
  if (kind_ == LossKind::kSoftmaxCrossEntropy) {
#pragma omp parallel for reduction(+ : correct) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = z + r * classes;
      correct += std::max_element(row, row + classes) - row == labels[r];  // the first maximum wins a tie
    }
  } else {
    for (int64_t r = 0; r < rows; ++r) correct += (z[r] > 0) == (labels[r] == 1);
  }
  e.correct = correct;
  return e;
}

double Loss::loss_sum(const Env& env) {
  plain_.forward(env);
  const float* z = data(flat_.value);
  const int64_t* labels = labels_->data();
  const int64_t rows = rows_, classes = classes_;
  double total = 0;
  if (kind_ == LossKind::kSoftmaxCrossEntropy) {
    softmax_.execute(env.stream, softmax_args_);
    const float* p = data(probabilities_);
#pragma omp parallel for reduction(+ : total) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float pl = p[r * classes + labels[r]];
      total += pl >= kTinyProbability ? -std::log(static_cast<double>(pl))
                                      : log_sum_exp_loss(z + r * classes, classes, labels[r]);
    }
  } else {
    // max(z, 0) - z y + log(1 + exp(-|z|)): never the log of a rounded-to-zero probability.
    for (int64_t r = 0; r < rows; ++r) {
      const double x = z[r], y = static_cast<double>(labels[r]);
      total += std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::abs(x)));
    }
  }
  return total;
}

void Loss::backward(const Env& env) {
  if (!forward_done_) throw std::logic_error("onednn driver: backward() without a preceding forward()");
  forward_done_ = false;  // the probabilities are about to become the gradient
  const int64_t* labels = labels_->data();
  const int64_t rows = rows_, classes = classes_;
  float* g = data(probabilities_);
  if (kind_ == LossKind::kSoftmaxCrossEntropy) {
    const float inv_rows = 1.0f / static_cast<float>(rows);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      float* row = g + r * classes;
      for (int64_t c = 0; c < classes; ++c) row[c] *= inv_rows;
      row[labels[r]] -= inv_rows;
    }
  } else {
    const float* z = data(flat_.value);
    for (int64_t r = 0; r < rows; ++r) {
      const double x = z[r], y = static_cast<double>(labels[r]);
      const double sigmoid = x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
      g[r] = static_cast<float>((sigmoid - y) / static_cast<double>(rows));
    }
  }
  plain_.backward(env);
}

}  // namespace dlscale::onednn
