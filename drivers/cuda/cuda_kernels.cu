#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>

#include "drivers/cuda/cuda_kernels.h"
#include "drivers/gpu/cuda_check.h"

namespace dlscale::cuda {

namespace {

constexpr int kThreads = 256;

/// Enough blocks for a grid-stride loop over n elements, capped where more blocks stop helping.
unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 65535 * 4)));
}

void check_launch() { DLSCALE_CHECK_CUDA(cudaGetLastError()); }

#define GRID_STRIDE(i, n)                                                                \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

/// Sums a value over the block; the result is valid in thread 0.
template <class T>
__device__ T block_sum(T v) {
  __shared__ T partial[32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = threadIdx.x < warps ? partial[threadIdx.x] : T(0);
  if (warp == 0) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  return v;
}

__global__ void add_bias_rows_kernel(float* y, const float* b, int64_t total, int64_t cols) {
  GRID_STRIDE(i, total) { y[i] += b[i % cols]; }
}

__global__ void add_bias_channels_kernel(float* y, const float* b, int64_t total, int64_t c, int64_t plane) {
  GRID_STRIDE(i, total) { y[i] += b[(i / plane) % c]; }
}

// Pass 1: block (channel, slice) sums that channel's planes over the samples of its slice
// (a channel's plane is a contiguous run). Pass 2 adds the slices in a fixed order.
__global__ void bias_grad_channels_partial_kernel(const float* dy, float* partial, int64_t n, int64_t c, int64_t plane,
                                                  int64_t splits) {
  const int64_t ch = blockIdx.x, slice = blockIdx.y;
  float sum = 0;
  for (int64_t s = slice; s < n; s += splits) {
    const float* p = dy + (s * c + ch) * plane;
    for (int64_t k = threadIdx.x; k < plane; k += blockDim.x) sum += p[k];
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) partial[ch * splits + slice] = sum;
}

__global__ void bias_grad_channels_total_kernel(const float* partial, float* db, int64_t c, int64_t splits) {
  GRID_STRIDE(ch, c) {
    float sum = 0;
    for (int64_t s = 0; s < splits; ++s) sum += partial[ch * splits + s];
    db[ch] = sum;
  }
}

// A 32-column tile per block, its rows split over the block's 8 warps-worth of rows: adjacent
// threads read adjacent columns (coalesced), partial sums meet in shared memory.
__global__ void bias_grad_rows_kernel(const float* dy, float* db, int64_t rows, int64_t cols) {
  __shared__ float partial[8][33];
  const int64_t col = blockIdx.x * 32 + threadIdx.x;
  float sum = 0;
  if (col < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += 8) sum += dy[r * cols + col];
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = 0;
    for (int k = 0; k < 8; ++k) total += partial[k][threadIdx.x];
    db[col] = total;
  }
}

__global__ void global_avg_pool_forward_kernel(const float* x, float* y, int64_t plane) {
  const float* p = x + blockIdx.x * plane;
  float sum = 0;
  for (int64_t k = threadIdx.x; k < plane; k += blockDim.x) sum += p[k];
  sum = block_sum(sum);
  if (threadIdx.x == 0) y[blockIdx.x] = sum / static_cast<float>(plane);
}

__global__ void global_avg_pool_backward_kernel(const float* dy, float* dx, int64_t total, int64_t plane) {
  GRID_STRIDE(i, total) { dx[i] = dy[i / plane] / static_cast<float>(plane); }
}

__global__ void embedding_forward_kernel(const int64_t* tokens, const float* table, float* y, int64_t total,
                                         int64_t dim) {
  GRID_STRIDE(i, total) { y[i] = table[tokens[i / dim] * dim + i % dim]; }
}

__global__ void embedding_backward_kernel(const int64_t* tokens, const float* dy, float* dtable, int64_t total,
                                          int64_t dim) {
  GRID_STRIDE(i, total) { atomicAdd(&dtable[tokens[i / dim] * dim + i % dim], dy[i]); }
}

__global__ void select_last_step_kernel(const float* seq, float* out, int64_t total, int64_t steps, int64_t width) {
  GRID_STRIDE(i, total) {
    const int64_t b = i / width, k = i % width;
    out[i] = seq[(b * steps + steps - 1) * width + k];
  }
}

__global__ void scatter_last_step_kernel(const float* dout, float* dseq, int64_t total, int64_t steps, int64_t width) {
  GRID_STRIDE(i, total) {
    const int64_t k = i % width, t = (i / width) % steps, b = i / (width * steps);
    dseq[i] = t == steps - 1 ? dout[b * width + k] : 0.0f;
  }
}

// One block per row.
__global__ void softmax_cross_entropy_kernel(const float* logp, const int64_t* labels, float* row_loss, float* dlogits,
                                             int64_t classes, float inv_rows) {
  const int64_t r = blockIdx.x;
  const int64_t label = labels[r];
  const float* lp = logp + r * classes;
  float* d = dlogits + r * classes;
  for (int64_t k = threadIdx.x; k < classes; k += blockDim.x) {
    d[k] = (expf(lp[k]) - (k == label ? 1.0f : 0.0f)) * inv_rows;
  }
  if (threadIdx.x == 0) row_loss[r] = -lp[label];
}

__global__ void sigmoid_binary_cross_entropy_kernel(const float* x, const float* labels, float* row_loss, float* dx,
                                                    int64_t rows) {
  GRID_STRIDE(i, rows) {
    const float v = x[i], y = labels[i];
    // max(v, 0) - v*y + log(1 + exp(-|v|)): stable for large |v|.
    row_loss[i] = fmaxf(v, 0.0f) - v * y + log1pf(expf(-fabsf(v)));
    dx[i] = (1.0f / (1.0f + expf(-v)) - y) / static_cast<float>(rows);
  }
}

__global__ void sum_kernel(const float* v, int64_t n, double divisor, double* out) {
  double sum = 0;
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) sum += v[k];
  sum = block_sum(sum);
  if (threadIdx.x == 0) *out = sum / divisor;
}

// One block per row: each thread keeps the best of its strided classes, then the block's
// threads meet in shared memory; the lower index wins between equal values at every stage.
__global__ void argmax_correct_kernel(const float* logits, const int64_t* labels, float* correct, int64_t classes) {
  __shared__ float best_value[kThreads];
  __shared__ int64_t best_index[kThreads];
  const int64_t r = blockIdx.x;
  const float* row = logits + r * classes;
  float value = -INFINITY;
  int64_t index = classes;  // beyond every class: loses to any real one
  for (int64_t k = threadIdx.x; k < classes; k += blockDim.x) {
    if (row[k] > value || index == classes) {
      value = row[k];
      index = k;
    }
  }
  best_value[threadIdx.x] = value;
  best_index[threadIdx.x] = index;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      const float other = best_value[threadIdx.x + half];
      const int64_t other_index = best_index[threadIdx.x + half];
      if (other > best_value[threadIdx.x] ||
          (other == best_value[threadIdx.x] && other_index < best_index[threadIdx.x])) {
        best_value[threadIdx.x] = other;
        best_index[threadIdx.x] = other_index;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) correct[r] = best_index[0] == labels[r] ? 1.0f : 0.0f;
}

__global__ void binary_correct_kernel(const float* x, const float* labels, float* correct, int64_t rows) {
  GRID_STRIDE(i, rows) { correct[i] = (x[i] > 0.0f) == (labels[i] > 0.5f) ? 1.0f : 0.0f; }
}

__global__ void sgd_update_kernel(float* p, const float* g, int64_t n, float lr) {
  GRID_STRIDE(i, n) { p[i] -= lr * g[i]; }
}

__global__ void adam_update_kernel(float* p, const float* g, float* m, float* v, int64_t n, AdamStep s) {
  GRID_STRIDE(i, n) {
    const float gi = g[i];
    const float mi = m[i] * s.beta1 + gi * s.one_minus_beta1;
    const float vi = v[i] * s.beta2 + s.one_minus_beta2 * gi * gi;  // addcmul_: v + value * g * g
    m[i] = mi;
    v[i] = vi;
    // IEEE sqrt and division (no fast math): the same roundings as torch's sqrt, div, add, addcdiv.
    const float denom = __fsqrt_rn(vi) / s.bias_correction2_sqrt + s.epsilon;
    p[i] -= s.step_size * (mi / denom);
  }
}

__global__ void add_in_place_kernel(float* y, const float* x, int64_t n) {
  GRID_STRIDE(i, n) { y[i] += x[i]; }
}

__global__ void to_bf16_kernel(const float* x, __nv_bfloat16* y, int64_t n) {
  GRID_STRIDE(i, n) { y[i] = __float2bfloat16_rn(x[i]); }
}

__global__ void from_bf16_kernel(const __nv_bfloat16* x, float* y, int64_t n) {
  GRID_STRIDE(i, n) { y[i] = __bfloat162float(x[i]); }
}

}  // namespace

void add_bias_rows(float* y, const float* b, int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t total = rows * cols;
  add_bias_rows_kernel<<<blocks_for(total), kThreads, 0, stream>>>(y, b, total, cols);
  check_launch();
}

void add_bias_channels(float* y, const float* b, int64_t n, int64_t c, int64_t plane, cudaStream_t stream) {
  const int64_t total = n * c * plane;
  add_bias_channels_kernel<<<blocks_for(total), kThreads, 0, stream>>>(y, b, total, c, plane);
  check_launch();
}

int64_t bias_grad_splits(int64_t n, int64_t c) {
  // About 512 blocks in all: a few per SM on current GPUs.
  return std::max<int64_t>(1, std::min<int64_t>(n, (512 + c - 1) / c));
}

void bias_grad_channels(const float* dy, float* db, int64_t n, int64_t c, int64_t plane, float* scratch, int64_t splits,
                        cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(c), static_cast<unsigned>(splits));
  bias_grad_channels_partial_kernel<<<grid, kThreads, 0, stream>>>(dy, scratch, n, c, plane, splits);
  check_launch();
  bias_grad_channels_total_kernel<<<blocks_for(c), kThreads, 0, stream>>>(scratch, db, c, splits);
  check_launch();
}

void bias_grad_rows(const float* dy, float* db, int64_t rows, int64_t cols, cudaStream_t stream) {
  const dim3 block(32, 8);
  bias_grad_rows_kernel<<<static_cast<unsigned>((cols + 31) / 32), block, 0, stream>>>(dy, db, rows, cols);
  check_launch();
}

void global_avg_pool_forward(const float* x, float* y, int64_t channels_total, int64_t plane, cudaStream_t stream) {
  global_avg_pool_forward_kernel<<<static_cast<unsigned>(channels_total), kThreads, 0, stream>>>(x, y, plane);
  check_launch();
}

void global_avg_pool_backward(const float* dy, float* dx, int64_t channels_total, int64_t plane, cudaStream_t stream) {
  const int64_t total = channels_total * plane;
  global_avg_pool_backward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(dy, dx, total, plane);
  check_launch();
}

void embedding_forward(const int64_t* tokens, const float* table, float* y, int64_t count, int64_t dim,
                       cudaStream_t stream) {
  const int64_t total = count * dim;
  embedding_forward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(tokens, table, y, total, dim);
  check_launch();
}

void embedding_backward(const int64_t* tokens, const float* dy, float* dtable, int64_t count, int64_t dim,
                        cudaStream_t stream) {
  const int64_t total = count * dim;
  embedding_backward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(tokens, dy, dtable, total, dim);
  check_launch();
}

void select_last_step(const float* seq, float* out, int64_t batch, int64_t steps, int64_t width, cudaStream_t stream) {
  const int64_t total = batch * width;
  select_last_step_kernel<<<blocks_for(total), kThreads, 0, stream>>>(seq, out, total, steps, width);
  check_launch();
}

void scatter_last_step(const float* dout, float* dseq, int64_t batch, int64_t steps, int64_t width,
                       cudaStream_t stream) {
  const int64_t total = batch * steps * width;
  scatter_last_step_kernel<<<blocks_for(total), kThreads, 0, stream>>>(dout, dseq, total, steps, width);
  check_launch();
}

void softmax_cross_entropy(const float* logp, const int64_t* labels, float* row_loss, float* dlogits, int64_t rows,
                           int64_t classes, cudaStream_t stream) {
  softmax_cross_entropy_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      logp, labels, row_loss, dlogits, classes, 1.0f / static_cast<float>(rows));
  check_launch();
}

void sigmoid_binary_cross_entropy(const float* x, const float* labels, float* row_loss, float* dx, int64_t rows,
                                  cudaStream_t stream) {
  sigmoid_binary_cross_entropy_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(x, labels, row_loss, dx, rows);
  check_launch();
}

void mean(const float* v, int64_t n, double* out, cudaStream_t stream) {
  sum_kernel<<<1, 1024, 0, stream>>>(v, n, static_cast<double>(n), out);
  check_launch();
}

void sum(const float* v, int64_t n, double* out, cudaStream_t stream) {
  sum_kernel<<<1, 1024, 0, stream>>>(v, n, 1.0, out);
  check_launch();
}

void argmax_correct(const float* logits, const int64_t* labels, float* correct, int64_t rows, int64_t classes,
                    cudaStream_t stream) {
  argmax_correct_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, labels, correct, classes);
  check_launch();
}

void binary_correct(const float* x, const float* labels, float* correct, int64_t rows, cudaStream_t stream) {
  binary_correct_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(x, labels, correct, rows);
  check_launch();
}

void sgd_update(float* p, const float* g, int64_t n, float lr, cudaStream_t stream) {
  sgd_update_kernel<<<blocks_for(n), kThreads, 0, stream>>>(p, g, n, lr);
  check_launch();
}

void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamStep& step, cudaStream_t stream) {
  adam_update_kernel<<<blocks_for(n), kThreads, 0, stream>>>(p, g, m, v, n, step);
  check_launch();
}

void add_in_place(float* y, const float* x, int64_t n, cudaStream_t stream) {
  add_in_place_kernel<<<blocks_for(n), kThreads, 0, stream>>>(y, x, n);
  check_launch();
}

void to_bf16(const float* x, void* bf16, int64_t n, cudaStream_t stream) {
  to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, static_cast<__nv_bfloat16*>(bf16), n);
  check_launch();
}

void from_bf16(const void* bf16, float* x, int64_t n, cudaStream_t stream) {
  from_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(bf16), x, n);
  check_launch();
}

}  // namespace dlscale::cuda
