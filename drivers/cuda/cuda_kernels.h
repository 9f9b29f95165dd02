// The driver's own CUDA kernels: the small element-wise and reduction steps that cuDNN and
// cuBLAS do not provide (bias, embedding, losses, accuracy, SGD and Adam, bf16 conversion). Every launcher queues
// its kernel on `stream` and checks the launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace dlscale::cuda {

/// y[r, c] += b[c] for a row-major [rows, cols] y.
void add_bias_rows(float* y, const float* b, int64_t rows, int64_t cols, cudaStream_t stream);
/// y[n, c, p] += b[c] for an NCHW y of `plane` = H*W elements per channel.
void add_bias_channels(float* y, const float* b, int64_t n, int64_t c, int64_t plane, cudaStream_t stream);
/// How many slices bias_grad_channels cuts the batch into, so that a layer with few channels
/// still occupies the whole GPU; it needs c * splits floats of scratch.
int64_t bias_grad_splits(int64_t n, int64_t c);
/// db[c] = sum over n and p of dy[n, c, p] (overwrites db), in two deterministic passes.
void bias_grad_channels(const float* dy, float* db, int64_t n, int64_t c, int64_t plane, float* scratch, int64_t splits,
                        cudaStream_t stream);
/// db[c] = sum over r of dy[r, c] for a row-major [rows, cols] dy (overwrites db).
void bias_grad_rows(const float* dy, float* db, int64_t rows, int64_t cols, cudaStream_t stream);

/// y[n, c] = mean over p of x[n, c, p];  dx[n, c, p] = dy[n, c] / plane.
void global_avg_pool_forward(const float* x, float* y, int64_t channels_total, int64_t plane, cudaStream_t stream);
void global_avg_pool_backward(const float* dy, float* dx, int64_t channels_total, int64_t plane, cudaStream_t stream);

/// y[i, :] = table[tokens[i], :] for `count` tokens of width `dim`.
void embedding_forward(const int64_t* tokens, const float* table, float* y, int64_t count, int64_t dim,
                       cudaStream_t stream);
/// dtable[tokens[i], :] += dy[i, :] (dtable must be zeroed first; atomic adds).
void embedding_backward(const int64_t* tokens, const float* dy, float* dtable, int64_t count, int64_t dim,
                        cudaStream_t stream);

/// out[b, :] = seq[b, steps - 1, :] for a [batch, steps, width] seq.
void select_last_step(const float* seq, float* out, int64_t batch, int64_t steps, int64_t width, cudaStream_t stream);
/// dseq = 0 except dseq[b, steps - 1, :] = dout[b, :].
void scatter_last_step(const float* dout, float* dseq, int64_t batch, int64_t steps, int64_t width,
                       cudaStream_t stream);

/// From log-probabilities logp [rows, classes] and labels: per-row loss -logp[r, label] into
/// row_loss, and the gradient of the mean loss w.r.t. the logits, (softmax - onehot) / rows.
void softmax_cross_entropy(const float* logp, const int64_t* labels, float* row_loss, float* dlogits, int64_t rows,
                           int64_t classes, cudaStream_t stream);
/// Binary cross-entropy on logits x [rows] with 0/1 labels: per-row loss and d(mean)/dx.
void sigmoid_binary_cross_entropy(const float* x, const float* labels, float* row_loss, float* dx, int64_t rows,
                                  cudaStream_t stream);
/// *mean = sum(v[0..n)) / n, summed in double by one block (deterministic).
void mean(const float* v, int64_t n, double* mean, cudaStream_t stream);
/// *sum = sum(v[0..n)), the same way.
void sum(const float* v, int64_t n, double* sum, cudaStream_t stream);

/// correct[r] = 1 when the argmax of logits[r, :] (the lowest index among equal maxima, as
/// torch.argmax) is labels[r], else 0; for [rows, classes] logits.
void argmax_correct(const float* logits, const int64_t* labels, float* correct, int64_t rows, int64_t classes,
                    cudaStream_t stream);
/// correct[r] = 1 when (x[r] > 0) equals (labels[r] > 0.5): binary predictions from logits.
void binary_correct(const float* x, const float* labels, float* correct, int64_t rows, cudaStream_t stream);

/// p -= lr * g.
void sgd_update(float* p, const float* g, int64_t n, float lr, cudaStream_t stream);

/// The scalars of Adam's update number t (host arithmetic in double, as torch.optim.Adam's).
struct AdamStep {
  float beta1, beta2;
  float one_minus_beta1, one_minus_beta2;
  float step_size;              ///< lr / (1 - beta1^t)
  float bias_correction2_sqrt;  ///< sqrt(1 - beta2^t)
  float epsilon;
};
/// Adam on n elements in one pass, in torch.optim.Adam's order (drivers/driver.h, Optimizer):
/// m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
/// p -= step_size * m / (sqrt(v) / bias_correction2_sqrt + epsilon).
void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamStep& step, cudaStream_t stream);
/// y += x.
void add_in_place(float* y, const float* x, int64_t n, cudaStream_t stream);

/// fp32 <-> bfloat16 (round to nearest even); `bf16` points at __nv_bfloat16 values.
void to_bf16(const float* x, void* bf16, int64_t n, cudaStream_t stream);
void from_bf16(const void* bf16, float* x, int64_t n, cudaStream_t stream);

}  // namespace dlscale::cuda
