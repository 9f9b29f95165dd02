#include "suite/comm/sparse_rows.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "suite/errors.h"

namespace dlscale {

double sparse_crossover_share(size_t width, int ranks) {
  return 2.0 * static_cast<double>(width) / (static_cast<double>(ranks) * static_cast<double>(width + 1));
}

SparseRowsSum::SparseRowsSum(float* block, size_t rows, size_t width, MPI_Comm comm, int lane)
    : block_(block), rows_(rows), width_(width), comm_(comm), lane_(lane) {
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &size_));
  // This rank's touched rows: those holding anything but zeros (an embedding's backward writes
  // only the rows its tokens looked up), each led by its index.
  for (size_t r = 0; r < rows_; ++r) {
    const float* row = block_ + r * width_;
    if (std::all_of(row, row + width_, [](float v) { return v == 0.0f; })) continue;
    const auto index = static_cast<uint32_t>(r);
    float lead;
    std::memcpy(&lead, &index, sizeof lead);
    sent_.push_back(lead);
    sent_.insert(sent_.end(), row, row + width_);
    ++mine_;
  }
  counts_.assign(static_cast<size_t>(size_), 0);
  DLSCALE_CHECK_MPI(MPI_Iallgather(&mine_, 1, MPI_INT64_T, counts_.data(), 1, MPI_INT64_T, comm_, &request_));
  progress();
}

bool SparseRowsSum::progress() {
  if (stage_ == Stage::kCounts || stage_ == Stage::kRows) {
    int finished = 0;
    DLSCALE_CHECK_MPI(MPI_Test(&request_, &finished, MPI_STATUS_IGNORE));
    if (!finished) return false;
    if (stage_ == Stage::kCounts) {
      gather_rows();
    } else {
      add_gathered();
    }
    return true;
  }
  if (stage_ == Stage::kDense) {
    const bool moved = ring_->progress();
    if (ring_->done()) {
      ring_.reset();
      stage_ = Stage::kDone;
      return true;
    }
    return moved;
  }
  return false;
}

void SparseRowsSum::gather_rows() {
  total_rows_ = 0;
  for (int64_t c : counts_) total_rows_ += c;
  const double records = static_cast<double>(total_rows_) * static_cast<double>(width_ + 1);
  // Every rank decides from the same counts: the gathered rows, or the ring where they are more
  // bytes than it sends, or more values than one MPI call takes.
  dense_ = records >= 2.0 * static_cast<double>(rows_) * static_cast<double>(width_) || records > INT_MAX;
  if (dense_) {
    sent_.clear();
    ring_ = std::make_unique<RingSum>(block_, rows_ * width_, GradCompression::kNone, comm_, lane_);
    stage_ = ring_->done() ? Stage::kDone : Stage::kDense;
    if (stage_ == Stage::kDone) ring_.reset();
    return;
  }
  record_counts_.resize(counts_.size());
  displacements_.resize(counts_.size());
  int at = 0;
  for (size_t q = 0; q < counts_.size(); ++q) {
    record_counts_[q] = static_cast<int>(counts_[q] * static_cast<int64_t>(width_ + 1));
    displacements_[q] = at;
    at += record_counts_[q];
  }
  gathered_.resize(static_cast<size_t>(at));
  DLSCALE_CHECK_MPI(MPI_Iallgatherv(sent_.data(), static_cast<int>(sent_.size()), MPI_FLOAT, gathered_.data(),
                                    record_counts_.data(), displacements_.data(), MPI_FLOAT, comm_, &request_));
  stage_ = Stage::kRows;
}

void SparseRowsSum::add_gathered() {
  std::fill(block_, block_ + rows_ * width_, 0.0f);
  // In rank order, the same on every rank: the same sums, bit for bit.
  for (size_t at = 0; at < gathered_.size(); at += width_ + 1) {
    uint32_t index;
    std::memcpy(&index, &gathered_[at], sizeof index);
    float* row = block_ + static_cast<size_t>(index) * width_;
    const float* in = &gathered_[at + 1];
    for (size_t k = 0; k < width_; ++k) row[k] += in[k];
  }
  gathered_.clear();
  sent_.clear();
  stage_ = Stage::kDone;
}

}  // namespace dlscale
