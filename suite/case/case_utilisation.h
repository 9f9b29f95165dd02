// A case's utilisation, share of peak and energy over its timed region, from every rank's meters
// (docs/metrics.md, "Utilisation and energy"): what /cases/NNNN/utilisation and the summary's
// utilisation fields hold.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "suite/case/resolved_case.h"
#include "suite/meters/peak.h"
#include "suite/meters/utilisation.h"

namespace dlscale {

/// What one rank's meters read over the timed region. Plain doubles only, so that one
/// MPI_Gather of kMeterReadingCount doubles carries a rank's readings to the case's rank 0.
struct MeterReadings {
  double cpu_s = 0, wall_s = 0, user_s = 0, system_s = 0, minor_faults = 0, major_faults = 0;
  double run_wait_s = kNotMeasured, run_s = kNotMeasured, steal_share = kNotMeasured;
  double cpu_energy_j = kNotMeasured;
  double gpu_energy_j = kNotMeasured, gpu_utilisation_pct = kNotMeasured, gpu_sm_clock_mhz = kNotMeasured,
         gpu_power_w = kNotMeasured, gpu_samples = 0;

  MeterReadings() = default;
  MeterReadings(const CpuUsage& cpu, const Energy& cpu_energy, const GpuUsage& gpu);
  CpuUsage cpu() const;
};
inline constexpr int kMeterReadingCount = 15;
static_assert(sizeof(MeterReadings) == kMeterReadingCount * sizeof(double), "MeterReadings is gathered as doubles");

/// One rank's readings and where its energies came from (or why they are missing).
struct RankUtilisation {
  MeterReadings meters;
  std::string cpu_energy_source, gpu_source;
  /// From the readings, for the case's threads per rank (case_utilisation() sets them).
  double cpu_utilisation = 0, busy_cores = 0;
};

/// The case's utilisation: every rank's readings, and the summary over them.
struct CaseUtilisation {
  std::vector<RankUtilisation> ranks;
  int threads = 1;
  std::string peak_note, energy_note;  ///< where the peak and the energy came from, or why not
  double cpu_utilisation = 0, busy_cores = 0, user_s_per_step = 0, system_s_per_step = 0, system_share = 0;
  double page_faults_per_step = 0, major_faults_per_step = 0;
  double cpu_wait_share = kNotMeasured, cpu_steal_share = kNotMeasured;  ///< the worst rank's
  bool contended = false;
  double peak_flops = kNotMeasured, peak_share = kNotMeasured;
  std::string peak_share_note;  ///< why the share exceeds 1, else ""
  double energy_j_per_step = kNotMeasured, energy_j_per_sample = kNotMeasured;
};

/// The utilisation of case `c` from its ranks' readings (in case-rank order), compared with the
/// peak `peaks` gives and the case's `achieved_flops`.
CaseUtilisation case_utilisation(const ResolvedCase& c, const PeakLookup& peaks, std::vector<RankUtilisation> ranks,
                                 double achieved_flops);

}  // namespace dlscale
