// The two losses, each the mean over rows (samples, or sample-steps for language models).
// Softmax cross-entropy: forward keeps every row's log-sum-exp, from which backward writes
// softmax - onehot without a second pass of reductions. Sigmoid binary cross-entropy uses
// max(z, 0) - z y + log(1 + exp(-|z|)), which never takes the log of a rounded-to-zero
// probability. Sums run in double (the exponentials in float); the loss stays on the device until value() asks for it.
// Inference (evaluate) sums the same loss unscaled and counts the correct predictions.
#include <stdexcept>

#include "drivers/kokkos/kokkos_common.h"

namespace dlscale::kk {

namespace loss_kernels {

/// One team per row: its maximum, then log-sum-exp shifted by it (exp cannot overflow); the
/// sum of (lse - z[label]) scale over the rows goes to `loss`.
void softmax_cross_entropy(Floats logits, Ids labels, Doubles log_sum_exp, Scalar loss, int64_t rows, int64_t classes,
                           double scale) {
  Kokkos::parallel_for(
      "kokkos_driver::log_sum_exp", Team(static_cast<int>(rows), Kokkos::AUTO), KOKKOS_LAMBDA(const Member& m) {
        const int64_t r = m.league_rank(), base = r * classes;
        float max = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(m, classes),
            [&](int64_t c, float& v) { v = logits(base + c) > v ? logits(base + c) : v; }, Kokkos::Max<float>(max));
        double sum = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(m, classes), [&](int64_t c, double& s) { s += math::exp(logits(base + c) - max); },
            sum);
        Kokkos::single(Kokkos::PerTeam(m), [&] { log_sum_exp(r) = max + math::log(sum); });
      });
  Kokkos::parallel_reduce(
      "kokkos_driver::cross_entropy", Range(0, rows),
      KOKKOS_LAMBDA(int64_t r, double& s) { s += (log_sum_exp(r) - logits(r * classes + labels(r))) * scale; }, loss);
}

/// d_logits = (softmax - onehot) / rows, one team per row.
void softmax_cross_entropy_backward(Floats logits, Ids labels, Doubles log_sum_exp, Floats d_logits, int64_t rows,
                                    int64_t classes) {
  const auto scale = static_cast<float>(1.0 / static_cast<double>(rows));
  Kokkos::parallel_for(
      "kokkos_driver::cross_entropy_backward", Team(static_cast<int>(rows), Kokkos::AUTO, Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& m) {
        const int64_t r = m.league_rank(), base = r * classes, label = labels(r);
        const auto lse = static_cast<float>(log_sum_exp(r));
        Kokkos::parallel_for(Kokkos::TeamVectorRange(m, classes), [&](int64_t c) {
          d_logits(base + c) = (math::exp(logits(base + c) - lse) - (c == label ? 1.0f : 0.0f)) * scale;
        });
      });
}

void sigmoid_binary_cross_entropy(Floats logits, Ids labels, Scalar loss, int64_t rows, double scale) {
  Kokkos::parallel_reduce(
      "kokkos_driver::binary_cross_entropy", Range(0, rows),
      KOKKOS_LAMBDA(int64_t r, double& s) {
        const double z = logits(r), y = static_cast<double>(labels(r));
        s += ((z > 0 ? z : 0.0) - z * y + math::log1p(math::exp(-math::fabs(z)))) * scale;
      },
      loss);
}

void sigmoid_binary_cross_entropy_backward(Floats logits, Ids labels, Floats d_logits, int64_t rows) {
  const auto scale = static_cast<float>(1.0 / static_cast<double>(rows));
  Kokkos::parallel_for(
      "kokkos_driver::binary_cross_entropy_backward", Range(0, rows),
      KOKKOS_LAMBDA(int64_t r) { d_logits(r) = (sigmoid(logits(r)) - static_cast<float>(labels(r))) * scale; });
}

/// The rows whose prediction is their label: the first maximum of the row's logits (softmax
/// cross-entropy, `classes` > 1 per row) or the logit's sign (binary cross-entropy).
int64_t correct_predictions(LossKind kind, Floats logits, Ids labels, int64_t rows, int64_t classes) {
  int64_t correct = 0;
  const bool binary = kind == LossKind::kSigmoidBinaryCrossEntropy;
  Kokkos::parallel_reduce(
      "kokkos_driver::correct_predictions", Range(0, rows),
      KOKKOS_LAMBDA(int64_t r, int64_t & n) {
        if (binary) {
          n += (logits(r) > 0) == (labels(r) == 1) ? 1 : 0;
          return;
        }
        const int64_t base = r * classes;
        int64_t best = 0;
        for (int64_t c = 1; c < classes; ++c) {
          if (logits(base + c) > logits(base + best)) best = c;  // strictly: the lowest index wins a tie
        }
        n += best == labels(r) ? 1 : 0;
      },
      correct);
  return correct;
}

}  // namespace loss_kernels

Loss::Loss(LossKind kind, int64_t classes) : kind_(kind), classes_(classes), loss_("kokkos_driver::loss") {}

void Loss::build(const Activation& logits, const Floats& d_logits, const Ids& labels) {
  rows_ = static_cast<int64_t>(labels.extent(0));
  if (logits.count() != rows_ * classes_) {
    throw std::invalid_argument("kokkos driver: the network's output does not match the labels and classes");
  }
  logits_ = logits.data;
  d_logits_ = d_logits;
  labels_ = labels;
  if (kind_ == LossKind::kSoftmaxCrossEntropy) {
    log_sum_exp_ = Doubles(Kokkos::view_alloc(Kokkos::WithoutInitializing, "kokkos_driver::log_sum_exp"),
                           static_cast<size_t>(rows_));
  }
}

void Loss::forward() { queue_loss(1.0 / static_cast<double>(rows_)); }

void Loss::queue_loss(double scale) {
  if (kind_ == LossKind::kSoftmaxCrossEntropy) {
    loss_kernels::softmax_cross_entropy(logits_, labels_, log_sum_exp_, loss_, rows_, classes_, scale);
  } else {
    loss_kernels::sigmoid_binary_cross_entropy(logits_, labels_, loss_, rows_, scale);
  }
}

Evaluation Loss::evaluate() {
  queue_loss(1.0);
  Evaluation e;
  e.correct = loss_kernels::correct_predictions(kind_, logits_, labels_, rows_, classes_);
  e.loss_sum = value();
  e.predictions = rows_;
  return e;
}

void Loss::backward() {
  if (kind_ == LossKind::kSoftmaxCrossEntropy) {
    loss_kernels::softmax_cross_entropy_backward(logits_, labels_, log_sum_exp_, d_logits_, rows_, classes_);
  } else {
    loss_kernels::sigmoid_binary_cross_entropy_backward(logits_, labels_, d_logits_, rows_);
  }
}

double Loss::value() const {
  double v = 0;
  Kokkos::deep_copy(v, loss_);
  return v;
}

}  // namespace dlscale::kk
