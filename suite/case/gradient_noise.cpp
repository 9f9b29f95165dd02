#include "suite/case/gradient_noise.h"

#include <cmath>

#include "suite/errors.h"

namespace dlscale {

std::optional<CaseNoiseScale> gather_noise_scale(MPI_Comm comm, const std::vector<double>& small_sq,
                                                 const std::vector<double>& big_sq, double batch_small,
                                                 double batch_big) {
  int rank = 0, ranks = 1;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &ranks));
  // Every rank of a case took the same steps and measures alike: the decision is the same on all.
  const bool measured = !small_sq.empty() && std::isfinite(small_sq.front()) && batch_big > batch_small;
  if (!measured) return std::nullopt;
  const auto steps = static_cast<int>(small_sq.size());
  std::vector<double> sum(rank == 0 ? small_sq.size() : 0);
  DLSCALE_CHECK_MPI(MPI_Reduce(small_sq.data(), sum.data(), steps, MPI_DOUBLE, MPI_SUM, 0, comm));
  if (rank != 0) return std::nullopt;
  CaseNoiseScale out;
  out.small_sq.reserve(sum.size());
  for (double s : sum) out.small_sq.push_back(s / ranks);
  out.big_sq = big_sq;  // the same averaged gradient on every rank
  out.estimate = estimate_noise_scale(out.small_sq, out.big_sq, batch_small, batch_big);
  return out;
}

}  // namespace dlscale
