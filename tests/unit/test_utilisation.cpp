// The meters of suite/meters/utilisation.h and the peak bookkeeping of suite/meters/peak.h: NVML absent, the
// powercap counters on a real directory tree in sysfs's format (with a wrap), the CPU-time
// arithmetic, every compiled driver's peak kernels, and the sum a case's share of peak uses.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iterator>
#include <sstream>
#include <vector>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "drivers/driver.h"
#include "suite/meters/peak.h"
#include "suite/meters/utilisation.h"
#include "suite/record/peak_fields.h"

namespace dlscale {
namespace {

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/dlscale_util_XXXXXX";
    const char* made = mkdtemp(pattern);
    if (made == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text << "\n";
  ASSERT_TRUE(f.good()) << path;
}

TEST(Nvml, MissingLibraryIsUnavailableAndChangesNothing) {
  const std::string name = "libdlscale-no-such-nvml.so.1";
  const NvmlLibrary nvml(name);
  EXPECT_FALSE(nvml.available());
  EXPECT_NE(nvml.why().find(name), std::string::npos) << nvml.why();
  GpuMonitor monitor(nvml, "0000:1b:00.0");
  monitor.start();  // must not throw, start a thread or touch anything
  const GpuUsage g = monitor.stop();
  EXPECT_TRUE(std::isnan(g.energy_j));
  EXPECT_TRUE(std::isnan(g.utilisation_pct));
  EXPECT_TRUE(std::isnan(g.sm_clock_mhz));
  EXPECT_TRUE(std::isnan(g.power_w));
  EXPECT_EQ(g.samples, 0);
  EXPECT_EQ(g.source.rfind("unavailable: NVML: cannot load " + name, 0), 0u) << g.source;
}

TEST(Nvml, LibraryNameFromTheEnvironment) {
  ASSERT_EQ(setenv("DLSCALE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1), 0);
  EXPECT_EQ(nvml_library_name(), "/nonexistent/libnvidia-ml.so.1");
  ASSERT_EQ(unsetenv("DLSCALE_NVML_LIBRARY"), 0);
  EXPECT_EQ(nvml_library_name(), "libnvidia-ml.so.1");
}

TEST(Nvml, BusIdOfADeviceDescription) {
  EXPECT_EQ(pci_bus_id_of("cuda:0 NVIDIA H100 80GB HBM3 GPU-5f1c bus 0000:1b:00.0 (79.1 GiB)"), "0000:1b:00.0");
  EXPECT_EQ(pci_bus_id_of("cpu"), "");
}

TEST(Rapl, PackagesSummedAndAWrapUnwrapped) {
  TempDir root;
  for (const char* zone : {"intel-rapl:0", "intel-rapl:1", "intel-rapl:0:0"}) {
    ASSERT_EQ(mkdir((root.path() + "/" + zone).c_str(), 0755), 0);
  }
  write(root.path() + "/intel-rapl:0/name", "package-0");
  write(root.path() + "/intel-rapl:0/max_energy_range_uj", "5000000");
  write(root.path() + "/intel-rapl:0/energy_uj", "4000000");
  write(root.path() + "/intel-rapl:1/name", "package-1");
  write(root.path() + "/intel-rapl:1/max_energy_range_uj", "5000000");
  write(root.path() + "/intel-rapl:1/energy_uj", "1000000");
  // A sub-zone (cores) is inside its package's count and must not be added.
  write(root.path() + "/intel-rapl:0:0/name", "core");
  write(root.path() + "/intel-rapl:0:0/max_energy_range_uj", "5000000");
  write(root.path() + "/intel-rapl:0:0/energy_uj", "0");
  RaplMeter meter(root.path());
  ASSERT_TRUE(meter.available()) << meter.why();
  meter.start();
  write(root.path() + "/intel-rapl:0/energy_uj", "500000");   // wrapped: 4.0 -> 5.0 = 0 -> 0.5 J
  write(root.path() + "/intel-rapl:1/energy_uj", "3000000");  // 2 J
  write(root.path() + "/intel-rapl:0:0/energy_uj", "999999999");
  const Energy e = meter.stop();
  EXPECT_DOUBLE_EQ(e.joules, 1.5 + 2.0);
  EXPECT_NE(e.source.find("package-0"), std::string::npos) << e.source;
  EXPECT_NE(e.source.find("package-1"), std::string::npos) << e.source;
}

TEST(Rapl, NoPowercapIsUnavailableWithWhy) {
  RaplMeter meter("/nonexistent/powercap");
  EXPECT_FALSE(meter.available());
  meter.start();
  const Energy e = meter.stop();
  EXPECT_TRUE(std::isnan(e.joules));
  EXPECT_EQ(e.source.rfind("unavailable: /nonexistent/powercap", 0), 0u) << e.source;
}

TEST(CpuUsage, Arithmetic) {
  const CpuUsage u{3.0, 2.0};
  EXPECT_DOUBLE_EQ(u.utilisation(2), 0.75);
  EXPECT_DOUBLE_EQ(u.busy_cores(), 1.5);
}

TEST(CpuUsage, SleepingCostsNoCpuTime) {
  CpuMeter meter;
  meter.start();
  usleep(200000);
  const CpuUsage u = meter.stop();
  EXPECT_GE(u.wall_s, 0.2);
  EXPECT_LT(u.cpu_s, u.wall_s / 2);  // a sleeping thread is not on a core
}

TEST(CpuUsage, ContendedIsWaitingForACoreOrSteal) {
  CpuUsage u;
  u.run_s = 9, u.run_wait_s = 1;  // 10% of the runnable time waiting
  EXPECT_DOUBLE_EQ(u.wait_share(), 0.1);
  EXPECT_TRUE(u.contended());
  u.run_wait_s = 0.5;
  EXPECT_FALSE(u.contended());
  u.steal_share = 0.05;
  EXPECT_TRUE(u.contended());
  CpuUsage unknown;  // no schedstat, no steal: NaN, never contended by default
  EXPECT_TRUE(std::isnan(unknown.wait_share()));
  EXPECT_FALSE(unknown.contended());
}

/// minflt, majflt, utime and stime of this process from /proc/self/stat (faults, seconds).
struct ProcStat {
  double minflt = 0, majflt = 0, utime_s = 0, stime_s = 0;
};
ProcStat read_proc_stat() {
  std::ifstream f("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  // Fields after the command name "(...)", which may hold spaces: state is field 3.
  std::istringstream rest(text.substr(text.rfind(')') + 2));
  std::vector<std::string> fields{"pid", "comm"};
  for (std::string w; rest >> w;) fields.push_back(w);
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  return {std::stod(fields.at(9)), std::stod(fields.at(11)), std::stod(fields.at(13)) / tick,
          std::stod(fields.at(14)) / tick};
}

TEST(CpuUsage, PageFaultsAndKernelTimeAgreeWithProcSelfStat) {
  // 256 MiB mapped, touched and unmapped four times: 4 x 65536 first touches, each a minor
  // fault handled in the kernel.
  constexpr size_t kBytes = size_t{256} << 20;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const ProcStat before = read_proc_stat();
  CpuMeter meter;
  meter.start();
  for (int round = 0; round < 4; ++round) {
    void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    madvise(p, kBytes, MADV_NOHUGEPAGE);  // one fault per page, whatever the THP setting (best effort)
    for (size_t at = 0; at < kBytes; at += page) static_cast<volatile char*>(p)[at] = 1;
    ASSERT_EQ(munmap(p, kBytes), 0);
  }
  const CpuUsage u = meter.stop();
  const ProcStat after = read_proc_stat();
  const double touched = 4.0 * static_cast<double>(kBytes / page);
  const double stat_faults = after.minflt - before.minflt;
  EXPECT_GE(u.minor_faults, touched * 0.99);
  EXPECT_LE(u.minor_faults, stat_faults);  // the meter read inside /proc's two readings
  EXPECT_GE(u.minor_faults, stat_faults - 1000) << "faults outside the meter's region";
  EXPECT_GT(u.system_s, 0);
  // /proc counts in clock ticks (10 ms): the same kernel time within a tick or two each side.
  EXPECT_NEAR(u.system_s, after.stime_s - before.stime_s, 0.03 + 0.05 * u.system_s);
  EXPECT_NEAR(u.user_s + u.system_s, u.cpu_s, 0.03 + 0.05 * u.cpu_s);
  EXPECT_EQ(u.major_faults, after.majflt - before.majflt);
}

TEST(PeakKernels, EveryCompiledCpuGemmRunsAndCountsItsWork) {
  Registry registry;
  register_drivers(registry);
  int measured = 0;
  for (const auto& d : registry.all()) {
    for (Precision p : {Precision::kFp32, Precision::kBf16}) {
      if (!d->supports_peak(PeakKind::kGemm, DeviceType::kCpu, p).ok) continue;
      DriverContext ctx;
      ctx.threads = 1;
      ctx.precision = p;
      ctx.denormals = Denormals::kFlush;
      auto k = d->make_peak_kernel(PeakKind::kGemm, 64, ctx);
      k->run();
      k->synchronize();
      EXPECT_DOUBLE_EQ(k->work(), 2.0 * 64 * 64 * 64) << d->name();
      EXPECT_NE(k->describe().find("n=64"), std::string::npos) << k->describe();
      ++measured;
    }
    EXPECT_FALSE(d->supports_peak(PeakKind::kGemm, DeviceType::kCpu, Precision::kTf32).ok) << d->name();
  }
  EXPECT_GE(measured, 1);  // the reference driver at least
}

TEST(PeakKernels, TheHostTriadMovesTwelveBytesPerElement) {
  Registry registry;
  register_drivers(registry);
  const Driver& reference = *registry.find("reference");
  ASSERT_TRUE(reference.supports_peak(PeakKind::kStream, DeviceType::kCpu, Precision::kFp32).ok);
  DriverContext ctx;
  ctx.threads = 2;
  auto k = reference.make_peak_kernel(PeakKind::kStream, 1000, ctx);
  k->run();
  EXPECT_DOUBLE_EQ(k->work(), 12.0 * 1000);
}

PeakRow row(const std::string& driver, int threads, int64_t rank, double rate, const std::string& status = "ok") {
  PeakRow r;
  r.kind = "gemm";
  r.key = {driver, DeviceType::kCpu, Precision::kFp32, threads};
  r.rank = rank;
  r.rate = rate;
  r.status = status;
  r.method = status == "ok" ? "measured" : "why not";
  return r;
}

TEST(PeakLookup, SumsTheCaseRanksAndFallsBackToRankZero) {
  const PeakLookup peaks({row("onednn", 2, 0, 100e9), row("onednn", 2, 1, 80e9), row("onednn", 1, 0, 60e9),
                          row("kokkos", 2, 0, 1e9, "unavailable")},
                         "/peak/0000 of x.h5");
  std::string note;
  EXPECT_DOUBLE_EQ(peaks.gemm_sum({"onednn", DeviceType::kCpu, Precision::kFp32, 2}, 2, &note), 180e9);
  EXPECT_NE(note.find("/peak/0000 of x.h5"), std::string::npos);
  // Rank 2 has no row of its own: rank 0's stands for it.
  EXPECT_DOUBLE_EQ(peaks.gemm_sum({"onednn", DeviceType::kCpu, Precision::kFp32, 2}, 3, &note), 280e9);
  EXPECT_DOUBLE_EQ(peaks.gemm_sum({"onednn", DeviceType::kCpu, Precision::kFp32, 1}, 1, &note), 60e9);
  EXPECT_TRUE(std::isnan(peaks.gemm_sum({"onednn", DeviceType::kCpu, Precision::kBf16, 2}, 1, &note)));
  EXPECT_EQ(note.rfind("unavailable: /peak/0000 of x.h5 holds no GEMM peak of onednn cpu bf16 t=2", 0), 0u) << note;
  EXPECT_TRUE(std::isnan(peaks.gemm_sum({"kokkos", DeviceType::kCpu, Precision::kFp32, 2}, 1, &note)));
  EXPECT_EQ(note, "unavailable: why not");
  const PeakLookup none({}, "", "--peak skip");
  EXPECT_TRUE(std::isnan(none.gemm_sum({"onednn", DeviceType::kCpu, Precision::kFp32, 2}, 1, &note)));
  EXPECT_EQ(note, "unavailable: --peak skip");
}

TEST(PeakTable, RoundTrip) {
  const std::vector<PeakRow> rows{row("onednn", 2, 0, 100e9), row("kokkos", 1, 1, std::nan(""), "unavailable")};
  const std::vector<PeakRow> back = peak_rows(peak_table(rows));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].key, rows[0].key);
  EXPECT_DOUBLE_EQ(back[0].rate, 100e9);
  EXPECT_EQ(back[1].rank, 1);
  EXPECT_TRUE(std::isnan(back[1].rate));
  EXPECT_EQ(back[1].status, "unavailable");
}

}  // namespace
}  // namespace dlscale
