#include "suite/meters/peak.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "suite/comm/mpi_context.h"
#include "suite/errors.h"
#include "suite/matrix/run_matrix.h"

namespace dlscale {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// Seconds of one run() of `k`, synchronised.
double time_once(PeakKernel& k) {
  const Clock::time_point t = Clock::now();
  k.run();
  k.synchronize();
  return since(t);
}

/// One measurement on this rank: the GEMM's order doubles from 1024 (2048 on a GPU), large enough
/// to keep every core busy, until one product takes a tenth of the budget (or the cap), so that
/// the rate is not a small size's; then one warm-up run and as many runs as fill `seconds`, timed
/// one by one (in groups of 8 on a GPU, queued before one wait), and the fastest sets the rate:
/// other processes on a shared node can only slow a product down, so the best run is the
/// closest to what the backend sustains on its own.
PeakRow measure_one(const Driver& driver, PeakKind kind, const PeakKey& key, double seconds, int gpu) {
  PeakRow row;
  row.kind = kind == PeakKind::kGemm ? "gemm" : "stream";
  row.key = key;
  const Support s = driver.supports_peak(kind, key.device, key.precision);
  if (!s.ok) {
    row.status = "unavailable";
    row.method = s.reason;
    row.rate = std::nan("");
    return row;
  }
  const bool gpu_device = key.device == DeviceType::kCuda;
  DriverContext ctx;
  ctx.device = key.device;
  ctx.device_index = gpu_device ? gpu : 0;
  ctx.threads = key.threads;
  ctx.precision = key.precision;
  ctx.denormals = default_denormals(key.device);
  try {
    std::unique_ptr<PeakKernel> k;
    int64_t n = 0;
    if (kind == PeakKind::kGemm) {
      const int64_t cap = gpu_device ? 16384 : 4096;
      for (n = gpu_device ? 2048 : 1024;; n *= 2) {
        k = driver.make_peak_kernel(kind, n, ctx);
        k->run();  // first-touch, library set-up, kernel selection
        k->synchronize();
        if (n >= cap || time_once(*k) >= seconds / 10) break;
      }
    } else {
      // Buffers far larger than any cache: 64 MiB per array on the host, 1 GiB on a GPU.
      n = gpu_device ? (int64_t{1} << 28) : (int64_t{1} << 24);
      k = driver.make_peak_kernel(kind, n, ctx);
      k->run();
      k->synchronize();
    }
    const int group = gpu_device ? 8 : 1;
    const Clock::time_point start = Clock::now();
    int64_t runs = 0;
    double fastest = std::numeric_limits<double>::infinity();
    do {
      const Clock::time_point t = Clock::now();
      for (int i = 0; i < group; ++i) k->run();
      k->synchronize();
      fastest = std::min(fastest, since(t));
      runs += group;
    } while (since(start) < seconds);
    row.seconds = since(start);
    row.size = n;
    row.runs = runs;
    row.rate = k->work() * group / fastest;
    row.status = "ok";
    row.method = k->describe();
  } catch (const std::exception& e) {
    row.status = "unavailable";
    row.method = fmt::format("{} driver: {}", driver.name(), e.what());
    row.rate = std::nan("");
  }
  return row;
}

}  // namespace

std::vector<PeakRow> measure_peaks(MPI_Comm comm, const std::vector<PeakKey>& keys, const Registry& drivers,
                                   double seconds, int gpu) {
  // The work list is the same on every rank: the keys' GEMMs, then one bandwidth per device and
  // thread count, measured with the first driver of the keys that gives one.
  std::vector<std::pair<PeakKind, PeakKey>> work;
  for (const PeakKey& k : keys) work.emplace_back(PeakKind::kGemm, k);
  std::map<std::pair<DeviceType, int>, PeakKey> streams;
  for (const PeakKey& k : keys) {
    const Driver& d = *drivers.find_or_missing(k.driver);
    if (!d.supports_peak(PeakKind::kStream, k.device, Precision::kFp32).ok) continue;
    streams.emplace(std::make_pair(k.device, k.threads), PeakKey{k.driver, k.device, Precision::kFp32, k.threads});
  }
  for (const auto& [where, k] : streams) work.emplace_back(PeakKind::kStream, k);

  int rank = 0, size = 1;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &size));
  std::vector<PeakRow> all;
  for (const auto& [kind, key] : work) {
    DLSCALE_CHECK_MPI(MPI_Barrier(comm));  // every rank measures at the same time, as a case runs
    PeakRow mine = measure_one(*drivers.find_or_missing(key.driver), kind, key, seconds, gpu);
    mine.rank = rank;
    const double numbers[4] = {static_cast<double>(mine.size), static_cast<double>(mine.runs), mine.seconds, mine.rate};
    std::vector<double> gathered(rank == 0 ? static_cast<size_t>(size) * 4 : 0);
    DLSCALE_CHECK_MPI(MPI_Gather(numbers, 4, MPI_DOUBLE, gathered.data(), 4, MPI_DOUBLE, 0, comm));
    const std::vector<std::string> methods = gather_strings(comm, mine.method);
    const std::vector<std::string> statuses = gather_strings(comm, mine.status);
    if (rank != 0) continue;
    for (int r = 0; r < size; ++r) {
      PeakRow row = mine;
      row.rank = r;
      row.size = static_cast<int64_t>(gathered[static_cast<size_t>(r) * 4]);
      row.runs = static_cast<int64_t>(gathered[static_cast<size_t>(r) * 4 + 1]);
      row.seconds = gathered[static_cast<size_t>(r) * 4 + 2];
      row.rate = gathered[static_cast<size_t>(r) * 4 + 3];
      row.method = methods[static_cast<size_t>(r)];
      row.status = statuses[static_cast<size_t>(r)];
      all.push_back(row);
    }
  }
  return all;
}

void print_peaks(std::FILE* out, const std::vector<PeakRow>& rows) {
  fmt::print(out, "{:<6} {:<10} {:<4} {:<4} {:>3} {:>4} {:>10} {:>6} {:>14}  {}\n", "kind", "driver", "dev", "prec",
             "t", "rank", "size", "runs", "rate", "method");
  for (const PeakRow& r : rows) {
    const std::string rate = r.status != "ok"   ? std::string("unavailable")
                             : r.kind == "gemm" ? fmt::format("{:.2f} GFLOP/s", r.rate / 1e9)
                                                : fmt::format("{:.2f} GB/s", r.rate / 1e9);
    fmt::print(out, "{:<6} {:<10} {:<4} {:<4} {:>3} {:>4} {:>10} {:>6} {:>14}  {}\n", r.kind, r.key.driver,
               device_name(r.key.device), precision_name(r.key.precision), r.key.threads, r.rank, r.size, r.runs, rate,
               r.method);
  }
}

int PeakLookup::measured_ranks() const {
  std::set<int64_t> ranks;
  for (const PeakRow& row : rows_) ranks.insert(row.rank);
  return static_cast<int>(ranks.size());
}

double PeakLookup::gemm_sum(const PeakKey& key, int ranks, std::string* note) const {
  if (!why_none_.empty()) {
    *note = "unavailable: " + why_none_;
    return std::nan("");
  }
  double sum = 0;
  for (int r = 0; r < ranks; ++r) {
    // A rank's own row, else rank 0's: a peak file of one rank serves a job of identical nodes.
    const PeakRow* found = nullptr;
    for (const PeakRow& row : rows_) {
      if (row.kind != "gemm" || !(row.key == key)) continue;
      if (row.rank == r) found = &row;
      if (row.rank == 0 && found == nullptr) found = &row;
    }
    if (found == nullptr) {
      *note = fmt::format("unavailable: {} holds no GEMM peak of {} {} {} t={}", where_, key.driver,
                          device_name(key.device), precision_name(key.precision), key.threads);
      return std::nan("");
    }
    if (found->status != "ok") {
      *note = fmt::format("unavailable: {}", found->method);
      return std::nan("");
    }
    sum += found->rate;
  }
  *note = fmt::format("{}: GEMM of {} {} {} t={}, summed over {} rank(s)", where_, key.driver, device_name(key.device),
                      precision_name(key.precision), key.threads, ranks);
  return sum;
}

}  // namespace dlscale
