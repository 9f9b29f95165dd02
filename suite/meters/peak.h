// The measured peaks a case's achieved FLOP/s is compared with: per driver, device, precision
// and thread count, the sustained rate of the backend's own GEMM, and per device a memory
// bandwidth, measured on every rank at once (as a case of the whole job runs), outside any timed
// region, and written to /peak/NNNN (docs/metrics.md, "Measured peak").
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "drivers/driver.h"

namespace dlscale {

/// What a case's peak is looked up by.
struct PeakKey {
  std::string driver;
  DeviceType device = DeviceType::kCpu;
  Precision precision = Precision::kFp32;
  int threads = 1;
  bool operator<(const PeakKey& o) const {
    return std::tie(driver, device, precision, threads) < std::tie(o.driver, o.device, o.precision, o.threads);
  }
  bool operator==(const PeakKey& o) const {
    return std::tie(driver, device, precision, threads) == std::tie(o.driver, o.device, o.precision, o.threads);
  }
};

/// One rank's measurement: a GEMM rate in FLOP/s or a bandwidth in bytes/s, or why none.
struct PeakRow {
  std::string kind;  ///< "gemm" or "stream"
  PeakKey key;
  int64_t rank = 0, size = 0, runs = 0;
  double seconds = 0, rate = 0;
  std::string status;  ///< "ok" or "unavailable"
  std::string method;  ///< how it was measured, or why it was not
};

/// Measures the GEMM of every key and the bandwidth of every device among them on every rank
/// of `comm` (collective), each for about `seconds` after sizing and warming up; `gpu` is this
/// rank's GPU. Returns every rank's rows on rank 0, nothing elsewhere.
std::vector<PeakRow> measure_peaks(MPI_Comm comm, const std::vector<PeakKey>& keys, const Registry& drivers,
                                   double seconds, int gpu);

/// Prints the rows as a table on `out`.
void print_peaks(std::FILE* out, const std::vector<PeakRow>& rows);

/// The peaks the cases of a job are compared with (rank 0 holds them).
class PeakLookup {
 public:
  /// `where`: which /peak group of which file holds `rows`; `why_none`: why there are none.
  PeakLookup(std::vector<PeakRow> rows, std::string where, std::string why_none = "")
      : rows_(std::move(rows)), where_(std::move(where)), why_none_(std::move(why_none)) {}
  /// The GEMM peak of ranks 0..ranks-1 summed, in FLOP/s (NaN when unknown); `note` says where
  /// it came from or why there is none.
  double gemm_sum(const PeakKey& key, int ranks, std::string* note) const;
  /// How many ranks measured the peaks at once (the distinct ranks of the rows; 0 without any).
  int measured_ranks() const;

 private:
  std::vector<PeakRow> rows_;
  std::string where_, why_none_;
};

}  // namespace dlscale
