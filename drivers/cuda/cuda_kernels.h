// The driver's own CUDA kernels: the small element-wise and reduction steps that cuDNN and
// cuBLAS do not provide, or do not provide for bf16 activations (bias, pooling's average,
// embedding, dropout, bf16 batch norm, losses, accuracy, SGD and Adam, bf16 conversion). Every
// launcher queues its kernel on `stream` and checks the launch.
//
// Activations and their gradients are of the case's activation type (`Act`): fp32, or bf16 under
// bf16 precision, where they stay bf16 from layer to layer as autocast keeps them. Parameters,
// their gradients and batch-norm statistics are always fp32; arithmetic is fp32 throughout.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace dlscale::cuda {

/// The element type of activation buffers.
enum class Act { kFloat, kBf16 };
inline size_t bytes_of(Act t) { return t == Act::kBf16 ? 2 : 4; }

/// y[r, c] += b[c] for a row-major [rows, cols] y.
void add_bias_rows(Act t, void* y, const float* b, int64_t rows, int64_t cols, cudaStream_t stream);
/// y[n, c, p] += b[c] for an NCHW y of `plane` = H*W elements per channel.
void add_bias_channels(Act t, void* y, const float* b, int64_t n, int64_t c, int64_t plane, cudaStream_t stream);
/// How many slices the per-channel reductions cut the batch into, so that a layer with few
/// channels still occupies the whole GPU; bias_grad_channels needs c * splits floats of scratch.
int64_t channel_splits(int64_t n, int64_t c);
/// db[c] = sum over n and p of dy[n, c, p] (overwrites db), in two deterministic passes.
void bias_grad_channels(Act t, const void* dy, float* db, int64_t n, int64_t c, int64_t plane, float* scratch,
                        int64_t splits, cudaStream_t stream);
/// db[c] = sum over r of dy[r, c] for a row-major [rows, cols] dy (overwrites db).
void bias_grad_rows(Act t, const void* dy, float* db, int64_t rows, int64_t cols, cudaStream_t stream);

/// y[n, c] = mean over p of x[n, c, p];  dx[n, c, p] = dy[n, c] / plane.
void global_avg_pool_forward(Act t, const void* x, void* y, int64_t channels_total, int64_t plane, cudaStream_t stream);
void global_avg_pool_backward(Act t, const void* dy, void* dx, int64_t channels_total, int64_t plane,
                              cudaStream_t stream);

/// y[i, :] = table[tokens[i], :] for `count` tokens of width `dim`.
void embedding_forward(Act t, const int64_t* tokens, const float* table, void* y, int64_t count, int64_t dim,
                       cudaStream_t stream);
/// dtable[tokens[i], :] += dy[i, :] (dtable must be zeroed first; atomic adds).
void embedding_backward(Act t, const int64_t* tokens, const void* dy, float* dtable, int64_t count, int64_t dim,
                        cudaStream_t stream);

/// out[b, :] = seq[b, steps - 1, :] for a [batch, steps, width] seq.
void select_last_step(Act t, const void* seq, void* out, int64_t batch, int64_t steps, int64_t width,
                      cudaStream_t stream);
/// dseq = 0 except dseq[b, steps - 1, :] = dout[b, :].
void scatter_last_step(Act t, const void* dout, void* dseq, int64_t batch, int64_t steps, int64_t width,
                       cudaStream_t stream);

/// Inverted dropout: element i is kept when the Philox4x32-10 draw of (seed; i, draw) is below
/// (1 - p) of its range; y = x / (1 - p) where kept, else 0, and mask[i] = kept. Counter-based, so
/// the masks depend on (seed, draw) alone: draw 0, 1, 2, … are a layer's successive steps.
void dropout_forward(Act t, const void* x, void* y, uint8_t* mask, int64_t n, float p, uint64_t seed, uint64_t draw,
                     cudaStream_t stream);
/// dx = dy / (1 - p) where the mask kept the element, else 0.
void dropout_backward(Act t, const void* dy, void* dx, const uint8_t* mask, int64_t n, float p, cudaStream_t stream);

/// Batch norm over (N, H, W) of an NCHW x of the activation type, fp32 scale, bias and statistics,
/// computed in fp32. `scratch` holds 2 * c * splits floats (channel_splits) and `coefficients`
/// 3 * c floats, both the caller's.
struct BatchNormShape {
  int64_t n, c, plane;
  int64_t splits;  ///< channel_splits(n, c)
};
/// Training: the batch's mean and biased variance normalise x; the running statistics move
/// towards the batch's with `momentum` (the unbiased variance, as PyTorch); saved_mean and
/// saved_inv_std keep what backward needs.
void batch_norm_forward_training(Act t, const BatchNormShape& s, const void* x, void* y, const float* scale,
                                 const float* bias, float* running_mean, float* running_var, float momentum, float eps,
                                 float* saved_mean, float* saved_inv_std, float* scratch, float* coefficients,
                                 cudaStream_t stream);
/// Inference: normalises with the running statistics, which stay as they are.
void batch_norm_forward_inference(Act t, const BatchNormShape& s, const void* x, void* y, const float* scale,
                                  const float* bias, const float* running_mean, const float* running_var, float eps,
                                  float* coefficients, cudaStream_t stream);
/// dscale, dbias (overwritten) and dx from dy, with the statistics forward saved.
void batch_norm_backward(Act t, const BatchNormShape& s, const void* x, const void* dy, void* dx, const float* scale,
                         float* dscale, float* dbias, const float* saved_mean, const float* saved_inv_std,
                         float* scratch, float* coefficients, cudaStream_t stream);

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
/// y += x, in the activation type.
void add_in_place(Act t, void* y, const void* x, int64_t n, cudaStream_t stream);

/// fp32 <-> bfloat16 (round to nearest even); `bf16` points at __nv_bfloat16 values.
void to_bf16(const float* x, void* bf16, int64_t n, cudaStream_t stream);
void from_bf16(const void* bf16, float* x, int64_t n, cudaStream_t stream);

}  // namespace dlscale::cuda
