#include "suite/meters/allreduce_microbenchmark.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "schema/allreduce_record.h"
#include "suite/comm/gradient_allreduce.h"
#include "suite/errors.h"
#include "suite/meters/statistics.h"

namespace dlscale {

namespace {

using Clock = std::chrono::steady_clock;

/// Element i of rank r: a small integer, so that sums over any realistic rank count stay exact
/// in float32 (below 2^24).
float input_value(size_t i, int rank) { return static_cast<float>((i + static_cast<size_t>(rank)) % 13 + 1); }

/// Host memory, summed with the training step's own MPI all-reduce.
class MpiTransport final : public AllreduceTransport {
 public:
  explicit MpiTransport(MPI_Comm comm) : comm_(comm) {}
  void load(const std::vector<float>& values) override { buffer_ = values; }
  void reduce() override { allreduce_sum_in_place(buffer_.data(), buffer_.size(), GradCompression::kNone, comm_); }
  std::vector<float> read() override { return buffer_; }

 private:
  MPI_Comm comm_;
  std::vector<float> buffer_;
};

/// Rank 0's figures from every rank's times: per size the median over iterations of the slowest
/// rank's time, its bandwidths, and the ring fit over the sizes.
void summarise(AllreduceResult& r) {
  const size_t nsizes = r.bytes.size(), iters = static_cast<size_t>(r.iterations);
  for (size_t s = 0; s < nsizes; ++s) {
    std::vector<double> slowest(iters, 0.0);
    for (int q = 0; q < r.ranks; ++q) {
      for (size_t i = 0; i < iters; ++i) {
        slowest[i] = std::max(slowest[i], r.time_s[(static_cast<size_t>(q) * nsizes + s) * iters + i]);
      }
    }
    const double t = median(slowest);
    const double algbw = static_cast<double>(r.bytes[s]) / t / 1e9;
    r.median_s.push_back(t);
    r.algbw_gbps.push_back(algbw);
    r.busbw_gbps.push_back(algbw * 2.0 * (r.ranks - 1) / r.ranks);
  }
  if (r.ranks > 1 && nsizes >= 2) fit_ring(r.bytes, r.median_s, r.ranks, &r.alpha_s, &r.beta_s_per_byte);
}

}  // namespace

std::vector<int64_t> allreduce_sizes(int64_t min_bytes, int64_t max_bytes, const std::vector<int64_t>& extra) {
  std::vector<int64_t> sizes;
  for (int64_t s = std::max<int64_t>(4, min_bytes); s <= max_bytes; s *= 2) sizes.push_back((s + 3) / 4 * 4);
  for (int64_t e : extra) sizes.push_back(e);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

AllreduceResult run_allreduce_benchmark(MPI_Comm comm, const AllreduceOptions& options, AllreduceTransport* transport) {
  MpiTransport mpi(comm);
  if (transport == nullptr) transport = &mpi;
  int rank = 0, ranks = 1;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &ranks));
  AllreduceResult r;
  r.ranks = ranks;
  r.warmup = options.warmup;
  r.iterations = options.iterations;
  r.bytes = options.sizes_bytes;
  const size_t nsizes = r.bytes.size(), iters = static_cast<size_t>(options.iterations);
  std::vector<double> mine(nsizes * iters);
  std::vector<int64_t> my_errors(nsizes, 0);
  for (size_t s = 0; s < nsizes; ++s) {
    if (r.bytes[s] <= 0 || r.bytes[s] % 4 != 0) {
      throw std::invalid_argument("all-reduce sizes must be positive multiples of 4 bytes");
    }
    const auto n = static_cast<size_t>(r.bytes[s] / 4);
    std::vector<float> pristine(n);
    for (size_t i = 0; i < n; ++i) pristine[i] = input_value(i, rank);
    for (int it = 0; it < options.warmup + options.iterations; ++it) {
      transport->load(pristine);
      DLSCALE_CHECK_MPI(MPI_Barrier(comm));
      const Clock::time_point t0 = Clock::now();
      transport->reduce();
      const double t = std::chrono::duration<double>(Clock::now() - t0).count();
      if (it >= options.warmup) mine[s * iters + static_cast<size_t>(it - options.warmup)] = t;
    }
    const std::vector<float> buffer = transport->read();
    for (size_t i = 0; i < n; ++i) {
      float expected = 0;
      for (int q = 0; q < ranks; ++q) expected += input_value(i, q);
      if (buffer[i] != expected) ++my_errors[s];
    }
  }

  if (rank == 0) r.time_s.resize(static_cast<size_t>(ranks) * nsizes * iters);
  DLSCALE_CHECK_MPI(MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, r.time_s.data(),
                               static_cast<int>(mine.size()), MPI_DOUBLE, 0, comm));
  r.errors.assign(nsizes, 0);
  DLSCALE_CHECK_MPI(
      MPI_Reduce(my_errors.data(), r.errors.data(), static_cast<int>(nsizes), MPI_INT64_T, MPI_SUM, 0, comm));
  if (rank == 0) summarise(r);
  if (transport == &mpi && ranks > 1) r.segment_bytes = static_cast<int64_t>(ring_segment_bytes(comm));
  return r;
}

GroupRecord allreduce_group(const AllreduceResult& r, const std::string& backend, const std::string& for_case,
                            int hosts, int64_t run) {
  AllreduceRecord rec;
  rec.backend = backend;
  rec.ranks = r.ranks;
  rec.warmup = r.warmup;
  rec.iterations = r.iterations;
  rec.for_case = for_case;
  rec.alpha_s = r.alpha_s;
  rec.beta_s_per_byte = r.beta_s_per_byte;
  rec.hosts = hosts;
  rec.network = hosts > 1 ? "between hosts" : "within one host";
  rec.segment_bytes = r.segment_bytes;
  rec.bytes = r.bytes;
  rec.time_s = r.time_s;
  rec.algbw_gbps = r.algbw_gbps;
  rec.busbw_gbps = r.busbw_gbps;
  rec.errors = r.errors;
  rec.run = run;
  return group_of(rec, kAllreduceFields, kAllreduceDatasets);
}

double ring_allreduce_s(double alpha_s, double beta_s_per_byte, int ranks, double bytes) {
  if (ranks <= 1) return 0;
  return 2.0 * (ranks - 1) * alpha_s + 2.0 * (ranks - 1) / ranks * bytes * beta_s_per_byte;
}

void fit_ring(const std::vector<int64_t>& bytes, const std::vector<double>& median_s, int ranks, double* alpha_s,
              double* beta_s_per_byte) {
  // t = a*x + b*y with x = 2(P-1), y = 2(P-1)/P * n: weighted normal equations, weight 1/t^2.
  double sxx = 0, sxy = 0, syy = 0, sxt = 0, syt = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const double t = median_s[i], w = 1.0 / (t * t);
    const double x = 2.0 * (ranks - 1), y = 2.0 * (ranks - 1) / ranks * static_cast<double>(bytes[i]);
    sxx += w * x * x;
    sxy += w * x * y;
    syy += w * y * y;
    sxt += w * x * t;
    syt += w * y * t;
  }
  const double det = sxx * syy - sxy * sxy;
  if (bytes.size() < 2 || det <= 0) throw std::invalid_argument("the ring fit needs at least two distinct sizes");
  // Negative estimates mean the data cannot tell a term apart from zero; clamp and refit the other.
  double a = (sxt * syy - syt * sxy) / det, b = (syt * sxx - sxt * sxy) / det;
  if (a < 0) {
    a = 0;
    b = syt / syy;
  } else if (b < 0) {
    b = 0;
    a = sxt / sxx;
  }
  *alpha_s = a;
  *beta_s_per_byte = b;
}

}  // namespace dlscale
