#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "drivers/cuda/cuda_kernels.h"
#include "drivers/gpu/cuda_check.h"

namespace dlscale::cuda {

namespace {

using bf16 = __nv_bfloat16;

constexpr int kThreads = 256;

/// Enough blocks for a grid-stride loop over n elements, capped where more blocks stop helping.
unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 65535 * 4)));
}

void check_launch() { DLSCALE_CHECK_CUDA(cudaGetLastError()); }

/// Runs f with a null pointer of the activation type, whose type the kernels are instantiated on.
template <class F>
void with_type(Act t, F&& f) {
  if (t == Act::kBf16) {
    f(static_cast<bf16*>(nullptr));
  } else {
    f(static_cast<float*>(nullptr));
  }
}
#define ACT_TYPE(tag) std::remove_pointer_t<decltype(tag)>

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(bf16 v) { return __bfloat162float(v); }
template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float v) {
  return __float2bfloat16_rn(v);
}

#define GRID_STRIDE(i, n)                                                                \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

/// Per-channel element-wise kernels on NCHW tensors run on a (chunks, channels, samples) grid:
/// the block knows its channel without dividing a 64-bit index (which costs more than the
/// memory traffic of such a kernel), and its threads stride over the channel's plane.
struct PlaneGrid {
  dim3 grid;
  static PlaneGrid of(int64_t n, int64_t c, int64_t plane) {
    if (n > 65535 || c > 65535) throw std::invalid_argument("cuda driver: more than 65535 samples or channels");
    const int64_t chunks = std::clamp<int64_t>((plane + kThreads - 1) / kThreads, 1, 64);
    return {dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(c), static_cast<unsigned>(n))};
  }
};
#define PLANE_STRIDE(k, plane)                                                               \
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < (plane); \
       k += static_cast<int64_t>(blockDim.x) * gridDim.x)
/// The first element of this block's (sample, channel) plane.
__device__ __forceinline__ int64_t plane_base(int64_t plane) {
  return (static_cast<int64_t>(blockIdx.z) * gridDim.y + blockIdx.y) * plane;
}

/// Sums a value over the block; the result is valid in thread 0.
template <class T>
__device__ T block_sum(T v) {
  __shared__ T partial[32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // a previous call's partial[] has been read
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = threadIdx.x < warps ? partial[threadIdx.x] : T(0);
  if (warp == 0) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  return v;
}

template <class T>
__global__ void add_bias_rows_kernel(T* y, const float* b, int64_t total, int64_t cols) {
  GRID_STRIDE(i, total) { y[i] = from_float<T>(to_float(y[i]) + b[i % cols]); }
}

template <class T>
__global__ void add_bias_channels_kernel(T* y, const float* b, int64_t plane) {
  T* p = y + plane_base(plane);
  const float v = b[blockIdx.y];
  PLANE_STRIDE(k, plane) { p[k] = from_float<T>(to_float(p[k]) + v); }
}

// Pass 1: block (channel, slice) sums that channel's planes over the samples of its slice
// (a channel's plane is a contiguous run). Pass 2 adds the slices in a fixed order.
template <class T>
__global__ void bias_grad_channels_partial_kernel(const T* dy, float* partial, int64_t n, int64_t c, int64_t plane,
                                                  int64_t splits) {
  const int64_t ch = blockIdx.x, slice = blockIdx.y;
  float sum = 0;
  for (int64_t s = slice; s < n; s += splits) {
    const T* p = dy + (s * c + ch) * plane;
    for (int64_t k = threadIdx.x; k < plane; k += blockDim.x) sum += to_float(p[k]);
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
template <class T>
__global__ void bias_grad_rows_kernel(const T* dy, float* db, int64_t rows, int64_t cols) {
  __shared__ float partial[8][33];
  const int64_t col = blockIdx.x * 32 + threadIdx.x;
  float sum = 0;
  if (col < cols) {
    for (int64_t r = threadIdx.y; r < rows; r += 8) sum += to_float(dy[r * cols + col]);
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = 0;
    for (int k = 0; k < 8; ++k) total += partial[k][threadIdx.x];
    db[col] = total;
  }
}

// One block per (sample, channel) plane.
template <class T>
__global__ void global_avg_pool_forward_kernel(const T* x, T* y, int64_t plane) {
  const T* p = x + blockIdx.x * plane;
  float sum = 0;
  for (int64_t k = threadIdx.x; k < plane; k += blockDim.x) sum += to_float(p[k]);
  sum = block_sum(sum);
  if (threadIdx.x == 0) y[blockIdx.x] = from_float<T>(sum / static_cast<float>(plane));
}

template <class T>
__global__ void global_avg_pool_backward_kernel(const T* dy, T* dx, int64_t plane) {
  const float v = to_float(dy[blockIdx.x]) / static_cast<float>(plane);
  T* p = dx + blockIdx.x * plane;
  for (int64_t k = threadIdx.x; k < plane; k += blockDim.x) p[k] = from_float<T>(v);
}

template <class T>
__global__ void embedding_forward_kernel(const int64_t* tokens, const float* table, T* y, int64_t total, int64_t dim) {
  GRID_STRIDE(i, total) { y[i] = from_float<T>(table[tokens[i / dim] * dim + i % dim]); }
}

template <class T>
__global__ void embedding_backward_kernel(const int64_t* tokens, const T* dy, float* dtable, int64_t total,
                                          int64_t dim) {
  GRID_STRIDE(i, total) { atomicAdd(&dtable[tokens[i / dim] * dim + i % dim], to_float(dy[i])); }
}

template <class T>
__global__ void select_last_step_kernel(const T* seq, T* out, int64_t total, int64_t steps, int64_t width) {
  GRID_STRIDE(i, total) {
    const int64_t b = i / width, k = i % width;
    out[i] = seq[(b * steps + steps - 1) * width + k];
  }
}

template <class T>
__global__ void scatter_last_step_kernel(const T* dout, T* dseq, int64_t total, int64_t steps, int64_t width) {
  GRID_STRIDE(i, total) {
    const int64_t k = i % width, t = (i / width) % steps, b = i / (width * steps);
    dseq[i] = t == steps - 1 ? dout[b * width + k] : from_float<T>(0.0f);
  }
}

/// Philox4x32-10 (Salmon et al., SC'11): four 32-bit random words from a 128-bit counter and a
/// 64-bit key, the generator cuRAND and PyTorch use for dropout.
__device__ __forceinline__ uint4 philox(uint4 c, uint2 k) {
  for (int round = 0; round < 10; ++round) {
    const unsigned lo0 = 0xD2511F53u * c.x, hi0 = __umulhi(0xD2511F53u, c.x);
    const unsigned lo1 = 0xCD9E8D57u * c.z, hi1 = __umulhi(0xCD9E8D57u, c.z);
    c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    k.x += 0x9E3779B9u;
    k.y += 0xBB67AE85u;
  }
  return c;
}

// Each thread draws four words for four consecutive elements: counter (group, draw), key seed.
template <class T>
__global__ void dropout_forward_kernel(const T* x, T* y, uint8_t* mask, int64_t n, uint64_t keep_below, float scale,
                                       uint64_t seed, uint64_t draw) {
  const uint2 key = make_uint2(static_cast<unsigned>(seed), static_cast<unsigned>(seed >> 32));
  GRID_STRIDE(g, (n + 3) / 4) {
    const uint4 r = philox(make_uint4(static_cast<unsigned>(g), static_cast<unsigned>(g >> 32),
                                      static_cast<unsigned>(draw), static_cast<unsigned>(draw >> 32)),
                           key);
    const unsigned words[4] = {r.x, r.y, r.z, r.w};
    for (int j = 0; j < 4; ++j) {
      const int64_t i = 4 * g + j;
      if (i >= n) break;
      const bool keep = words[j] < keep_below;
      mask[i] = keep ? 1 : 0;
      y[i] = from_float<T>(keep ? to_float(x[i]) * scale : 0.0f);
    }
  }
}

template <class T>
__global__ void dropout_backward_kernel(const T* dy, T* dx, const uint8_t* mask, int64_t n, float scale) {
  GRID_STRIDE(i, n) { dx[i] = from_float<T>(mask[i] != 0 ? to_float(dy[i]) * scale : 0.0f); }
}

// ---- Batch norm (own kernels, for activation types cuDNN's batch norm does not take) --------
// Sums per channel in two deterministic passes, as the bias gradient: blocks (channel, slice)
// write partial sums, one thread per channel adds them in double in a fixed order. Statistics
// are summed about a shift (the channel's first value), which keeps the variance's two sums from
// cancelling when the mean is large against the spread.

template <class T>
__global__ void bn_stats_partial_kernel(const T* x, float* partial, int64_t n, int64_t c, int64_t plane,
                                        int64_t splits) {
  const int64_t ch = blockIdx.x, slice = blockIdx.y;
  const float shift = to_float(x[ch * plane]);
  float s1 = 0, s2 = 0;
  for (int64_t s = slice; s < n; s += splits) {
    const T* p = x + (s * c + ch) * plane;
    for (int64_t k = threadIdx.x; k < plane; k += blockDim.x) {
      const float v = to_float(p[k]) - shift;
      s1 += v;
      s2 += v * v;
    }
  }
  s1 = block_sum(s1);
  s2 = block_sum(s2);
  if (threadIdx.x == 0) {
    partial[ch * splits + slice] = s1;
    partial[(c + ch) * splits + slice] = s2;
  }
}

// coefficients: a (scale * inv_std) and b (bias - a * mean), so that y = a x + b.
template <class T>
__global__ void bn_stats_total_kernel(const T* x, const float* partial, int64_t n, int64_t c, int64_t plane,
                                      int64_t splits, const float* scale, const float* bias, float* running_mean,
                                      float* running_var, float momentum, float eps, float* saved_mean,
                                      float* saved_inv_std, float* coefficients) {
  GRID_STRIDE(ch, c) {
    double s1 = 0, s2 = 0;
    for (int64_t s = 0; s < splits; ++s) {
      s1 += partial[ch * splits + s];
      s2 += partial[(c + ch) * splits + s];
    }
    const double count = static_cast<double>(n * plane);
    const double shifted_mean = s1 / count;
    const double var = fmax(s2 / count - shifted_mean * shifted_mean, 0.0);
    const double mean = to_float(x[ch * plane]) + shifted_mean;
    const double inv_std = 1.0 / sqrt(var + eps);
    running_mean[ch] = static_cast<float>((1.0 - momentum) * running_mean[ch] + momentum * mean);
    const double unbiased = count > 1 ? var * count / (count - 1) : var;
    running_var[ch] = static_cast<float>((1.0 - momentum) * running_var[ch] + momentum * unbiased);
    saved_mean[ch] = static_cast<float>(mean);
    saved_inv_std[ch] = static_cast<float>(inv_std);
    const double a = scale[ch] * inv_std;
    coefficients[ch] = static_cast<float>(a);
    coefficients[c + ch] = static_cast<float>(bias[ch] - a * mean);
  }
}

__global__ void bn_inference_coefficients_kernel(int64_t c, const float* scale, const float* bias,
                                                 const float* running_mean, const float* running_var, float eps,
                                                 float* coefficients) {
  GRID_STRIDE(ch, c) {
    const double a = scale[ch] / sqrt(static_cast<double>(running_var[ch]) + eps);
    coefficients[ch] = static_cast<float>(a);
    coefficients[c + ch] = static_cast<float>(bias[ch] - a * running_mean[ch]);
  }
}

// y = a[c] x + b[c].
template <class T>
__global__ void bn_apply_kernel(const T* x, T* y, const float* coefficients, int64_t c, int64_t plane) {
  const int64_t base = plane_base(plane);
  const float a = coefficients[blockIdx.y], b = coefficients[c + blockIdx.y];
  PLANE_STRIDE(k, plane) { y[base + k] = from_float<T>(a * to_float(x[base + k]) + b); }
}

template <class T>
__global__ void bn_backward_partial_kernel(const T* x, const T* dy, const float* saved_mean, float* partial, int64_t n,
                                           int64_t c, int64_t plane, int64_t splits) {
  const int64_t ch = blockIdx.x, slice = blockIdx.y;
  const float mean = saved_mean[ch];
  float s1 = 0, s2 = 0;
  for (int64_t s = slice; s < n; s += splits) {
    const int64_t base = (s * c + ch) * plane;
    for (int64_t k = threadIdx.x; k < plane; k += blockDim.x) {
      const float g = to_float(dy[base + k]);
      s1 += g;
      s2 += g * (to_float(x[base + k]) - mean);
    }
  }
  s1 = block_sum(s1);
  s2 = block_sum(s2);
  if (threadIdx.x == 0) {
    partial[ch * splits + slice] = s1;
    partial[(c + ch) * splits + slice] = s2;
  }
}

// dscale = sum(dy (x - mean)) inv_std, dbias = sum(dy); dx = p dy + q x + r with
// p = scale inv_std, q = -p inv_std^2 sum(dy (x - mean)) / M, r = -q mean - p sum(dy) / M.
__global__ void bn_backward_total_kernel(const float* partial, int64_t c, int64_t count, int64_t splits,
                                         const float* scale, const float* saved_mean, const float* saved_inv_std,
                                         float* dscale, float* dbias, float* coefficients) {
  GRID_STRIDE(ch, c) {
    double sum_dy = 0, sum_dy_xmu = 0;
    for (int64_t s = 0; s < splits; ++s) {
      sum_dy += partial[ch * splits + s];
      sum_dy_xmu += partial[(c + ch) * splits + s];
    }
    const double inv_std = saved_inv_std[ch], m = static_cast<double>(count);
    dscale[ch] = static_cast<float>(sum_dy_xmu * inv_std);
    dbias[ch] = static_cast<float>(sum_dy);
    const double p = scale[ch] * inv_std;
    const double q = -p * inv_std * inv_std * sum_dy_xmu / m;
    coefficients[ch] = static_cast<float>(p);
    coefficients[c + ch] = static_cast<float>(q);
    coefficients[2 * c + ch] = static_cast<float>(-q * saved_mean[ch] - p * sum_dy / m);
  }
}

template <class T>
__global__ void bn_backward_apply_kernel(const T* x, const T* dy, T* dx, const float* coefficients, int64_t c,
                                         int64_t plane) {
  const int64_t base = plane_base(plane);
  const float p = coefficients[blockIdx.y], q = coefficients[c + blockIdx.y], r = coefficients[2 * c + blockIdx.y];
  PLANE_STRIDE(k, plane) { dx[base + k] = from_float<T>(p * to_float(dy[base + k]) + q * to_float(x[base + k]) + r); }
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

template <class T>
__global__ void add_in_place_kernel(T* y, const T* x, int64_t n) {
  GRID_STRIDE(i, n) { y[i] = from_float<T>(to_float(y[i]) + to_float(x[i])); }
}

__global__ void to_bf16_kernel(const float* x, bf16* y, int64_t n) {
  GRID_STRIDE(i, n) { y[i] = __float2bfloat16_rn(x[i]); }
}

__global__ void from_bf16_kernel(const bf16* x, float* y, int64_t n) {
  GRID_STRIDE(i, n) { y[i] = __bfloat162float(x[i]); }
}

}  // namespace

void add_bias_rows(Act t, void* y, const float* b, int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t total = rows * cols;
  with_type(t, [&](auto tag) {
    using T = ACT_TYPE(tag);
    add_bias_rows_kernel<<<blocks_for(total), kThreads, 0, stream>>>(static_cast<T*>(y), b, total, cols);
  });
  check_launch();
}

void add_bias_channels(Act t, void* y, const float* b, int64_t n, int64_t c, int64_t plane, cudaStream_t stream) {
  const PlaneGrid g = PlaneGrid::of(n, c, plane);
  with_type(t, [&](auto tag) {
    using T = ACT_TYPE(tag);
    add_bias_channels_kernel<<<g.grid, kThreads, 0, stream>>>(static_cast<T*>(y), b, plane);
  });
  check_launch();
}

int64_t channel_splits(int64_t n, int64_t c) {
  // About 512 blocks in all: a few per SM on current GPUs.
  return std::max<int64_t>(1, std::min<int64_t>(n, (512 + c - 1) / c));
}

void bias_grad_channels(Act t, const void* dy, float* db, int64_t n, int64_t c, int64_t plane, float* scratch,
                        int64_t splits, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(c), static_cast<unsigned>(splits));
  with_type(t, [&](auto tag) {
    using T = ACT_TYPE(tag);
    bias_grad_channels_partial_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const T*>(dy), scratch, n, c, plane,
                                                                     splits);
  });
  check_launch();
  bias_grad_channels_total_kernel<<<blocks_for(c), kThreads, 0, stream>>>(scratch, db, c, splits);
  check_launch();
}

void bias_grad_rows(Act t, const void* dy, float* db, int64_t rows, int64_t cols, cudaStream_t stream) {
  const dim3 block(32, 8);
  with_type(t, [&](auto tag) {
    using T = ACT_TYPE(tag);
    bias_grad_rows_kernel<<<static_cast<unsigned>((cols + 31) / 32), block, 0, stream>>>(static_cast<const T*>(dy), db,
                                                                                         rows, cols);
  });
  check_launch();
}

void global_avg_pool_forward(Act t, const void* x, void* y, int64_t channels_total, int64_t plane,
                             cudaStream_t stream) {
  with_type(t, [&](auto tag) {
    using T = ACT_TYPE(tag);
    global_avg_pool_forward_kernel<<<static_cast<unsigned>(channels_total), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), plane);
  });
  check_launch();
}

void global_avg_pool_backward(Act t, const void* dy, void* dx, int64_t channels_total, int64_t plane,
                              cudaStream_t stream) {
  with_type(t, [&](auto tag) {
    using T = ACT_TYPE(tag);
    global_avg_pool_backward_kernel<<<static_cast<unsigned>(channels_total), 64, 0, stream>>>(
        static_cast<const T*>(dy), static_cast<T*>(dx), plane);
  });
  check_launch();
}

void embedding_forward(Act t, const int64_t* tokens, const float* table, void* y, int64_t count, int64_t dim,
                       cudaStream_t stream) {
  const int64_t total = count * dim;
  with_type(t, [&](auto tag) {
    using T = ACT_TYPE(tag);
    embedding_forward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(tokens, table, static_cast<T*>(y), total, dim);
  });
  check_launch();
}

void embedding_backward(Act t, const int64_t* tokens, const void* dy, float* dtable, int64_t count, int64_t dim,
                        cudaStream_t stream) {
  const int64_t total = count * dim;
  with_type(t, [&](auto tag) {
    using T = ACT_TYPE(tag);
    embedding_backward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(tokens, static_cast<const T*>(dy), dtable,
                                                                          total, dim);
  });
  check_launch();
}

void select_last_step(Act t, const void* seq, void* out, int64_t batch, int64_t steps, int64_t width,
                      cudaStream_t stream) {
  const int64_t total = batch * width;
  with_type(t, [&](auto tag) {
    using T = ACT_TYPE(tag);
    select_last_step_kernel<<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(seq),
                                                                        static_cast<T*>(out), total, steps, width);
  });
  check_launch();
}

void scatter_last_step(Act t, const void* dout, void* dseq, int64_t batch, int64_t steps, int64_t width,
                       cudaStream_t stream) {
  const int64_t total = batch * steps * width;
  with_type(t, [&](auto tag) {
    using T = ACT_TYPE(tag);
    scatter_last_step_kernel<<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(dout),
                                                                         static_cast<T*>(dseq), total, steps, width);
  });
  check_launch();
}

void dropout_forward(Act t, const void* x, void* y, uint8_t* mask, int64_t n, float p, uint64_t seed, uint64_t draw,
                     cudaStream_t stream) {
  // Kept when the 32-bit word is below (1 - p) 2^32; p = 0 keeps every element.
  const uint64_t keep_below = static_cast<uint64_t>(std::ldexp(1.0 - static_cast<double>(p), 32));
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  with_type(t, [&](auto tag) {
    using T = ACT_TYPE(tag);
    dropout_forward_kernel<<<blocks_for((n + 3) / 4), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), mask, n, keep_below, scale, seed, draw);
  });
  check_launch();
}

void dropout_backward(Act t, const void* dy, void* dx, const uint8_t* mask, int64_t n, float p, cudaStream_t stream) {
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  with_type(t, [&](auto tag) {
    using T = ACT_TYPE(tag);
    dropout_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(dy), static_cast<T*>(dx),
                                                                    mask, n, scale);
  });
  check_launch();
}

void batch_norm_forward_training(Act t, const BatchNormShape& s, const void* x, void* y, const float* scale,
                                 const float* bias, float* running_mean, float* running_var, float momentum, float eps,
                                 float* saved_mean, float* saved_inv_std, float* scratch, float* coefficients,
                                 cudaStream_t stream) {
  const dim3 stats(static_cast<unsigned>(s.c), static_cast<unsigned>(s.splits));
  const PlaneGrid g = PlaneGrid::of(s.n, s.c, s.plane);
  with_type(t, [&](auto tag) {
    using T = ACT_TYPE(tag);
    const T* xt = static_cast<const T*>(x);
    bn_stats_partial_kernel<<<stats, kThreads, 0, stream>>>(xt, scratch, s.n, s.c, s.plane, s.splits);
    check_launch();
    bn_stats_total_kernel<<<blocks_for(s.c), kThreads, 0, stream>>>(xt, scratch, s.n, s.c, s.plane, s.splits, scale,
                                                                    bias, running_mean, running_var, momentum, eps,
                                                                    saved_mean, saved_inv_std, coefficients);
    check_launch();
    bn_apply_kernel<<<g.grid, kThreads, 0, stream>>>(xt, static_cast<T*>(y), coefficients, s.c, s.plane);
  });
  check_launch();
}

void batch_norm_forward_inference(Act t, const BatchNormShape& s, const void* x, void* y, const float* scale,
                                  const float* bias, const float* running_mean, const float* running_var, float eps,
                                  float* coefficients, cudaStream_t stream) {
  const PlaneGrid g = PlaneGrid::of(s.n, s.c, s.plane);
  bn_inference_coefficients_kernel<<<blocks_for(s.c), kThreads, 0, stream>>>(s.c, scale, bias, running_mean,
                                                                             running_var, eps, coefficients);
  check_launch();
  with_type(t, [&](auto tag) {
    using T = ACT_TYPE(tag);
    bn_apply_kernel<<<g.grid, kThreads, 0, stream>>>(static_cast<const T*>(x), static_cast<T*>(y), coefficients, s.c,
                                                     s.plane);
  });
  check_launch();
}

void batch_norm_backward(Act t, const BatchNormShape& s, const void* x, const void* dy, void* dx, const float* scale,
                         float* dscale, float* dbias, const float* saved_mean, const float* saved_inv_std,
                         float* scratch, float* coefficients, cudaStream_t stream) {
  const dim3 sums(static_cast<unsigned>(s.c), static_cast<unsigned>(s.splits));
  const PlaneGrid g = PlaneGrid::of(s.n, s.c, s.plane);
  with_type(t, [&](auto tag) {
    using T = ACT_TYPE(tag);
    const T* xt = static_cast<const T*>(x);
    const T* dyt = static_cast<const T*>(dy);
    bn_backward_partial_kernel<<<sums, kThreads, 0, stream>>>(xt, dyt, saved_mean, scratch, s.n, s.c, s.plane,
                                                              s.splits);
    check_launch();
    bn_backward_total_kernel<<<blocks_for(s.c), kThreads, 0, stream>>>(
        scratch, s.c, s.n * s.plane, s.splits, scale, saved_mean, saved_inv_std, dscale, dbias, coefficients);
    check_launch();
    bn_backward_apply_kernel<<<g.grid, kThreads, 0, stream>>>(xt, dyt, static_cast<T*>(dx), coefficients, s.c, s.plane);
  });
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

void add_in_place(Act t, void* y, const void* x, int64_t n, cudaStream_t stream) {
  with_type(t, [&](auto tag) {
    using T = ACT_TYPE(tag);
    add_in_place_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(y), static_cast<const T*>(x), n);
  });
  check_launch();
}

void to_bf16(const float* x, void* out, int64_t n, cudaStream_t stream) {
  to_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, static_cast<bf16*>(out), n);
  check_launch();
}

void from_bf16(const void* in, float* x, int64_t n, cudaStream_t stream) {
  from_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const bf16*>(in), x, n);
  check_launch();
}

}  // namespace dlscale::cuda
