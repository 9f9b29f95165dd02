// The CUDA driver's Linear GEMMs (drivers/cuda/linear_gemms.h), checked without a GPU: a plain
// column-major GEMM with cuBLAS's argument conventions runs each planned call on row-major
// buffers, and the results must equal the row-major formulas Y = X W^T + 0, dX = dY W,
// dW = dY^T X.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "drivers/cuda/linear_gemms.h"

namespace dlscale::cuda {
namespace {

/// cuBLAS's sgemm semantics (alpha 1, beta 0) on host memory.
void column_major_gemm(const GemmCall& g, const std::vector<double>& a, const std::vector<double>& b,
                       std::vector<double>& c) {
  const auto at = [&](int64_t i, int64_t p) {  // op(A)[i, p]
    return g.transpose_a ? a[static_cast<size_t>(p + i * g.lda)] : a[static_cast<size_t>(i + p * g.lda)];
  };
  const auto bt = [&](int64_t p, int64_t j) {  // op(B)[p, j]
    return g.transpose_b ? b[static_cast<size_t>(j + p * g.ldb)] : b[static_cast<size_t>(p + j * g.ldb)];
  };
  for (int64_t j = 0; j < g.n; ++j) {
    for (int64_t i = 0; i < g.m; ++i) {
      double sum = 0;
      for (int64_t p = 0; p < g.k; ++p) sum += at(i, p) * bt(p, j);
      c[static_cast<size_t>(i + j * g.ldc)] = sum;
    }
  }
}

std::vector<double> random_values(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

class LinearGemmsTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(LinearGemmsTest, ComputeTheRowMajorProducts) {
  const auto [rows, in, out] = GetParam();
  std::mt19937 rng(7);
  const std::vector<double> x = random_values(static_cast<size_t>(rows * in), rng);    // [rows, in]
  const std::vector<double> w = random_values(static_cast<size_t>(out * in), rng);     // [out, in]
  const std::vector<double> dy = random_values(static_cast<size_t>(rows * out), rng);  // [rows, out]
  const LinearGemms g = linear_gemms(rows, in, out);

  std::vector<double> y(static_cast<size_t>(rows * out)), dx(static_cast<size_t>(rows * in)),
      dw(static_cast<size_t>(out * in));
  column_major_gemm(g.forward, w, x, y);
  column_major_gemm(g.grad_input, w, dy, dx);
  column_major_gemm(g.grad_weight, x, dy, dw);

  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      double want = 0;
      for (int i = 0; i < in; ++i) want += x[static_cast<size_t>(r * in + i)] * w[static_cast<size_t>(o * in + i)];
      ASSERT_NEAR(y[static_cast<size_t>(r * out + o)], want, 1e-12) << "Y[" << r << "," << o << "]";
    }
    for (int i = 0; i < in; ++i) {
      double want = 0;
      for (int o = 0; o < out; ++o) want += dy[static_cast<size_t>(r * out + o)] * w[static_cast<size_t>(o * in + i)];
      ASSERT_NEAR(dx[static_cast<size_t>(r * in + i)], want, 1e-12) << "dX[" << r << "," << i << "]";
    }
  }
  for (int o = 0; o < out; ++o) {
    for (int i = 0; i < in; ++i) {
      double want = 0;
      for (int r = 0; r < rows; ++r) want += dy[static_cast<size_t>(r * out + o)] * x[static_cast<size_t>(r * in + i)];
      ASSERT_NEAR(dw[static_cast<size_t>(o * in + i)], want, 1e-12) << "dW[" << o << "," << i << "]";
    }
  }
}

// Unequal sizes, so that a swapped dimension or leading dimension cannot go unnoticed.
INSTANTIATE_TEST_SUITE_P(Shapes, LinearGemmsTest,
                         ::testing::Values(std::make_tuple(1, 1, 1), std::make_tuple(3, 5, 7), std::make_tuple(8, 2, 5),
                                           std::make_tuple(6, 9, 4)));

TEST(LinearGemms, TransposeOnlyWhereNoLayoutAvoidsIt) {
  const LinearGemms g = linear_gemms(64, 512, 256);
  const auto transposed = [](const GemmCall& c) { return (c.transpose_a ? 1 : 0) + (c.transpose_b ? 1 : 0); };
  EXPECT_EQ(transposed(g.grad_input), 0);
  EXPECT_EQ(transposed(g.forward), 1);
  EXPECT_EQ(transposed(g.grad_weight), 1);
}

}  // namespace
}  // namespace dlscale::cuda
