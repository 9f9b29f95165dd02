// The three cuBLAS calls of a Linear layer, worked out once, without CUDA, so that a CPU test can
// check them against the row-major formulas (tests/unit/test_linear_gemms.cpp).
//
// Activations are row-major [rows, in] (rows = batch, or batch x steps) and weights canonical
// [out, in]. cuBLAS is column-major, so a row-major [r, c] matrix is a column-major [c, r] one:
//   forward      Y^T[out, rows]  = W * X^T      -> op(A) = W, read transposed from its storage
//   grad input   dX^T[in, rows]  = W^T * dY^T   -> no operand transposed
//   grad weight  dW^T[in, out]   = X^T * dY     -> op(B) = dY, read transposed
// No storage order of W, X and dY makes all three transpose-free: the weight gradient contracts
// over the batch, the slow index of both X and dY, and forward and grad-input want W in opposite
// orders. Two of the three calls reading one operand transposed is therefore the minimum; this
// arrangement (PyTorch's as well) keeps the weights canonical, so gradients need no reordering.
#pragma once

#include <cstdint>

namespace dlscale::cuda {

/// Column-major C[m, n] = op(A)[m, k] * op(B)[k, n] with leading dimensions as cuBLAS takes them.
struct GemmCall {
  bool transpose_a = false, transpose_b = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
};

/// forward: A = W, B = X, C = Y.  grad_input: A = W, B = dY, C = dX.  grad_weight: A = X, B = dY, C = dW.
struct LinearGemms {
  GemmCall forward, grad_input, grad_weight;
};

inline LinearGemms linear_gemms(int64_t rows, int64_t in, int64_t out) {
  LinearGemms g;
  g.forward = {true, false, out, rows, in, in, in, out};
  g.grad_input = {false, false, in, rows, out, in, out, in};
  g.grad_weight = {false, true, in, out, rows, in, out, in};
  return g;
}

}  // namespace dlscale::cuda
