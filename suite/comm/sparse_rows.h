// An embedding's gradient summed as the rows the ranks touched (--sparse-embedding), as Horovod's
// allgather of IndexedSlices and PyTorch's sparse all-reduce over gloo send them: a batch of 64
// sequences of 32 tokens touches at most 2,048 of a 10,000-word vocabulary's rows, and every
// other row of its gradient is zero, yet a dense all-reduce sends them all.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "suite/comm/ring_allreduce.h"

namespace dlscale {

/// The sum over `comm` of a [rows, width] block of floats in place, in flight (InFlightSum): each
/// rank's rows that hold anything but zeros, gathered to every rank (MPI_Iallgather of the counts,
/// MPI_Iallgatherv of the rows, each led by its index) and added into the zeroed block in rank
/// order, so every rank ends with the same bits; or, where those rows are more bytes than a ring
/// all-reduce of the whole block sends (sparse_crossover_share), the block round dlscale's ring,
/// which every rank decides alike from the gathered counts. A collective, as RingSum.
class SparseRowsSum final : public InFlightSum {
 public:
  SparseRowsSum(float* block, size_t rows, size_t width, MPI_Comm comm, int lane);
  SparseRowsSum(const SparseRowsSum&) = delete;
  SparseRowsSum& operator=(const SparseRowsSum&) = delete;
  bool progress() override;
  bool done() const override { return stage_ == Stage::kDone; }
  /// The rows the ranks sent, summed over ranks (known once the counts are in).
  int64_t rows_sent() const { return total_rows_; }
  /// Whether the block went round the ring instead.
  bool dense() const { return dense_; }

 private:
  enum class Stage { kCounts, kRows, kDense, kDone };
  void gather_rows();
  void add_gathered();
  float* block_;
  size_t rows_, width_;
  MPI_Comm comm_;
  int lane_, size_ = 1;
  Stage stage_ = Stage::kCounts;
  MPI_Request request_ = MPI_REQUEST_NULL;
  int64_t mine_ = 0, total_rows_ = 0;
  std::vector<int64_t> counts_;  ///< rows per rank
  std::vector<float> sent_;      ///< this rank's rows, each led by its index's bits
  std::vector<float> gathered_;  ///< every rank's, in rank order
  std::vector<int> record_counts_, displacements_;
  std::unique_ptr<RingSum> ring_;
  bool dense_ = false;
};

/// The share of a block's rows, over all ranks' (P x rows), above which the gathered rows (each
/// width + 1 floats: the index with them) are more bytes than the ring's 2(P-1)/P of the block:
/// 2 width / (P (width + 1)).
double sparse_crossover_share(size_t width, int ranks);

}  // namespace dlscale
