#include "suite/case/case_utilisation.h"

#include <cmath>

#include <fmt/format.h>

namespace dlscale {

MeterReadings::MeterReadings(const CpuUsage& cpu, const Energy& cpu_energy, const GpuUsage& gpu)
    : cpu_s(cpu.cpu_s),
      wall_s(cpu.wall_s),
      user_s(cpu.user_s),
      system_s(cpu.system_s),
      minor_faults(cpu.minor_faults),
      major_faults(cpu.major_faults),
      run_wait_s(cpu.run_wait_s),
      run_s(cpu.run_s),
      steal_share(cpu.steal_share),
      cpu_energy_j(cpu_energy.joules),
      gpu_energy_j(gpu.energy_j),
      gpu_utilisation_pct(gpu.utilisation_pct),
      gpu_sm_clock_mhz(gpu.sm_clock_mhz),
      gpu_power_w(gpu.power_w),
      gpu_samples(static_cast<double>(gpu.samples)) {}

CpuUsage MeterReadings::cpu() const {
  CpuUsage c;
  c.cpu_s = cpu_s, c.wall_s = wall_s, c.user_s = user_s, c.system_s = system_s, c.minor_faults = minor_faults;
  c.major_faults = major_faults, c.run_wait_s = run_wait_s, c.run_s = run_s, c.steal_share = steal_share;
  return c;
}

namespace {

/// Why a case's achieved rate can exceed its measured peak (a share above 1), else "". The peak
/// is measured on every rank of a job at once (suite/meters/peak.cpp; this job's, or a --peak
/// FILE's): a case on fewer ranks has more of the node's cores, caches and memory bandwidth than
/// each rank had then. Otherwise the analytic FLOP count is what is off: a layer outside the
/// measured product (an LSTM's gates, convolutions by another algorithm) or fewer
/// multiplications than counted.
std::string above_peak_reason(int case_ranks, int measured_ranks, double share) {
  if (!(share > 1)) return "";
  if (case_ranks < measured_ranks) {
    return fmt::format("the peak was measured with {} ranks active at once; this case ran on {}", measured_ranks,
                       case_ranks);
  }
  return "the analytic FLOP count is more than this driver computes as measured matrix products: a layer computed "
         "another way, or fewer multiplications than counted";
}

/// The largest of the finite values; NaN when none is (a kernel without schedstat or steal).
double worst(double so_far, double v) { return std::isfinite(v) && !(v <= so_far) ? v : so_far; }

}  // namespace

CaseUtilisation case_utilisation(const ResolvedCase& c, const PeakLookup& peaks, std::vector<RankUtilisation> ranks,
                                 double achieved_flops) {
  CaseUtilisation u;
  u.threads = c.threads;
  const auto n = static_cast<double>(ranks.size());
  const auto steps = static_cast<double>(c.spec.iterations);
  double util = 0, busy = 0, user_s = 0, system_s = 0, system_share = 0, faults = 0, major = 0;
  double cpu_energy = 0, gpu_energy = 0;
  bool any_cpu_energy = false, all_gpu_energy = true;
  for (RankUtilisation& r : ranks) {
    const CpuUsage cpu = r.meters.cpu();
    r.cpu_utilisation = cpu.utilisation(c.threads), r.busy_cores = cpu.busy_cores();
    util += cpu.utilisation(c.threads), busy += cpu.busy_cores(), user_s += cpu.user_s, system_s += cpu.system_s;
    system_share += cpu.system_share();
    faults += (cpu.minor_faults + cpu.major_faults) / steps, major += cpu.major_faults / steps;
    u.cpu_wait_share = worst(u.cpu_wait_share, cpu.wait_share());
    u.cpu_steal_share = worst(u.cpu_steal_share, cpu.steal_share);
    u.contended = u.contended || cpu.contended();
    // The host's first rank reads its packages; the others record NaN and why.
    if (std::isfinite(r.meters.cpu_energy_j)) cpu_energy += r.meters.cpu_energy_j, any_cpu_energy = true;
    if (std::isfinite(r.meters.gpu_energy_j)) gpu_energy += r.meters.gpu_energy_j;
    all_gpu_energy = all_gpu_energy && std::isfinite(r.meters.gpu_energy_j);
  }
  u.cpu_utilisation = util / n, u.busy_cores = busy / n, u.user_s_per_step = user_s / n / steps;
  u.system_s_per_step = system_s / n / steps, u.system_share = system_share / n;
  u.page_faults_per_step = faults / n, u.major_faults_per_step = major / n;
  // A case's energy is its device's: the CPU packages' for a CPU case, the GPUs' for a GPU case.
  const double energy =
      c.gpu() ? (all_gpu_energy ? gpu_energy : kNotMeasured) : (any_cpu_energy ? cpu_energy : kNotMeasured);
  u.energy_note =
      c.gpu() ? (all_gpu_energy ? "the GPUs' (NVML), summed over ranks" : ranks.front().gpu_source)
              : (any_cpu_energy ? "the CPU packages' (powercap), summed over hosts: " + ranks.front().cpu_energy_source
                                : ranks.front().cpu_energy_source);
  const CaseSpec& s = c.spec;
  u.peak_flops = peaks.gemm_sum({s.driver, s.device, s.precision, c.threads}, s.ranks, &u.peak_note);
  u.peak_share = achieved_flops / u.peak_flops;
  u.peak_share_note = above_peak_reason(s.ranks, peaks.measured_ranks(), u.peak_share);
  u.energy_j_per_step = energy / steps;
  u.energy_j_per_sample = energy / (steps * static_cast<double>(s.global_batch()));
  u.ranks = std::move(ranks);
  return u;
}

}  // namespace dlscale
