// Buffers and the one GEMM entry point every layer of the Kokkos driver uses.
#include "drivers/kokkos/kokkos_common.h"

#include <KokkosBlas3_gemm.hpp>

#include <limits>
#include <stdexcept>

#include <fmt/format.h>

namespace dlscale::kk {

Floats make_floats(const std::string& label, int64_t count) {
  return Floats(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), static_cast<size_t>(count));
}

Floats slice(const Floats& v, int64_t offset, int64_t count) {
  return Kokkos::subview(v, Kokkos::make_pair(offset, offset + count));
}

void bias_grad(Floats dy, Floats db, int64_t rows, int64_t out, int64_t inner) {
  if (inner == 1) {
    // Column sums of a row-major [rows, out] matrix: each work item owns a block of adjacent
    // columns and walks the rows, reading contiguous runs (a team per column would stride
    // through memory by a whole row per element).
    constexpr int64_t kBlock = 16;
    Kokkos::parallel_for(
        "kokkos_driver::bias_grad", Range(0, (out + kBlock - 1) / kBlock), KOKKOS_LAMBDA(int64_t block) {
          const int64_t first = block * kBlock, width = out - first < kBlock ? out - first : kBlock;
          double sum[kBlock] = {};
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t j = 0; j < width; ++j) sum[j] += dy(r * out + first + j);
          }
          for (int64_t j = 0; j < width; ++j) db(first + j) = static_cast<float>(sum[j]);
        });
    return;
  }
  // One team per output channel: its threads over the rows, their vector lanes along the
  // contiguous inner extent, summing in double.
  Kokkos::parallel_for(
      "kokkos_driver::bias_grad", Team(static_cast<int>(out), Kokkos::AUTO, Kokkos::AUTO),
      KOKKOS_LAMBDA(const Member& m) {
        const int64_t o = m.league_rank();
        const double sum = channel_sum(m, rows, out, o, inner, [&](int64_t i) { return dy(i); });
        Kokkos::single(Kokkos::PerTeam(m), [&] { db(o) = static_cast<float>(sum); });
      });
}

int64_t Activation::count() const { return static_cast<int64_t>(data.extent(0)); }

void gemm(bool trans_a, bool trans_b, float alpha, const Mat& a, const Mat& b, float beta, const Mat& c) {
  const int64_t m = trans_a ? a.cols : a.rows, k = trans_a ? a.rows : a.cols;
  const int64_t kb = trans_b ? b.cols : b.rows, n = trans_b ? b.rows : b.cols;
  if (k != kb || c.rows != m || c.cols != n) {
    throw std::invalid_argument(fmt::format("kokkos driver: gemm shapes do not fit: op(A) {}x{}, op(B) {}x{}, C {}x{}",
                                            m, k, kb, n, c.rows, c.cols));
  }
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();  // the BLAS takes int dimensions
  if (m > kIntMax || n > kIntMax || k > kIntMax) {
    throw std::invalid_argument(fmt::format("kokkos driver: gemm of {}x{}x{} exceeds the BLAS' int range", m, n, k));
  }
  // Unmanaged, contiguous LayoutRight Views: the layout for which Kokkos Kernels hands the
  // product to the BLAS (host) or cuBLAS (CUDA) instead of its own portable kernel.
  using Matrix = Kokkos::View<float**, Kokkos::LayoutRight, Device, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  const Matrix va(a.data, static_cast<size_t>(a.rows), static_cast<size_t>(a.cols));
  const Matrix vb(b.data, static_cast<size_t>(b.rows), static_cast<size_t>(b.cols));
  const Matrix vc(c.data, static_cast<size_t>(c.rows), static_cast<size_t>(c.cols));
  KokkosBlas::gemm(trans_a ? "T" : "N", trans_b ? "T" : "N", alpha, va, vb, beta, vc);
}

}  // namespace dlscale::kk
