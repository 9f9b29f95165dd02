// What every driver shares: the names of the enumerations in drivers/driver.h, the defaults of
// the Driver interface (the host triad every CPU driver measures its memory bandwidth with) and
// precision_support(). Linked into dlscale and into every driver module (drivers/registry.cpp).
#include "drivers/driver.h"

#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <thread>
#include <vector>

namespace dlscale {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kTf32:
      return "tf32";
    case Precision::kBf16:
      return "bf16";
  }
  return "fp32";
}

Precision parse_precision(const std::string& name) {
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kBf16}) {
    if (name == precision_name(p)) return p;
  }
  throw std::invalid_argument(fmt::format("unknown precision '{}' (expected fp32, tf32 or bf16)", name));
}

const char* optimizer_name(OptimizerKind k) { return k == OptimizerKind::kAdam ? "adam" : "sgd"; }

OptimizerKind parse_optimizer(const std::string& name) {
  for (OptimizerKind k : {OptimizerKind::kSgd, OptimizerKind::kAdam}) {
    if (name == optimizer_name(k)) return k;
  }
  throw std::invalid_argument(fmt::format("unknown optimizer '{}' (expected sgd or adam)", name));
}

const char* sharding_name(Sharding s) { return s == Sharding::kOptimizer ? "optimizer" : "none"; }

Sharding parse_sharding(const std::string& name) {
  for (Sharding s : {Sharding::kNone, Sharding::kOptimizer}) {
    if (name == sharding_name(s)) return s;
  }
  throw std::invalid_argument(fmt::format("unknown sharding '{}' (expected none or optimizer)", name));
}

const char* denormals_name(Denormals d) { return d == Denormals::kFlush ? "flush" : "ieee"; }

Denormals parse_denormals(const std::string& name) {
  for (Denormals d : {Denormals::kFlush, Denormals::kIeee}) {
    if (name == denormals_name(d)) return d;
  }
  throw std::invalid_argument(fmt::format("unknown denormals mode '{}' (expected flush or ieee)", name));
}

Denormals default_denormals(DeviceType device) {
  return device == DeviceType::kCpu ? Denormals::kFlush : Denormals::kIeee;
}

const char* status_name(Status s) {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kUnsupported:
      return "unsupported";
    case Status::kOom:
      return "oom";
    case Status::kTimeout:
      return "timeout";
    case Status::kError:
      return "error";
  }
  return "error";
}

int Driver::device_count(DeviceType device, std::string* why) const {
  if (device == DeviceType::kCpu) return 1;
  if (why != nullptr) *why = fmt::format("the {} driver runs on the CPU only", name());
  return 0;
}

std::string Driver::describe_device(DeviceType device, int index) const {
  return device == DeviceType::kCpu ? std::string("cpu") : fmt::format("cuda:{} (not used by {})", index, name());
}

std::unique_ptr<GradientReducer> Driver::make_reducer(DeviceType, int, const RankGroup&, Deadline) const {
  return nullptr;
}

Support Driver::supports_precision(const Workload&, DeviceType, Precision precision) const {
  if (precision == Precision::kFp32) return Support::yes();
  return Support::no(fmt::format("{} driver: only fp32 is implemented, not {}", name(), precision_name(precision)));
}

ComputeIsa Driver::compute_isa(DeviceType, Precision) const { return {}; }
namespace {

/// The host's memory bandwidth as STREAM's triad measures it, a[i] = b[i] + s c[i] over the
/// case's threads (each a contiguous third of the arrays, touched first by its own thread so that
/// its pages lie on its NUMA node): every CPU backend reads and writes the same memory.
class HostTriad final : public PeakKernel {
 public:
  HostTriad(int64_t n, int threads) : n_(n), threads_(threads), a_(n), b_(n), c_(n) {
    for_each_part([this](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) a_[i] = 0, b_[i] = 1, c_[i] = 2;
    });
  }
  void run() override {
    for_each_part([this](int64_t begin, int64_t end) {
      float* a = a_.data();
      const float* b = b_.data();
      const float* c = c_.data();
      for (int64_t i = begin; i < end; ++i) a[i] = b[i] + 3.0f * c[i];
    });
  }
  void synchronize() override {}
  double work() const override { return 3.0 * sizeof(float) * static_cast<double>(n_); }
  std::string describe() const override {
    // Arrays that fit in the last-level cache measure the cache, not the memory: say which.
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    const double total = 3.0 * sizeof(float) * static_cast<double>(n_);
    const std::string cache =
        l3 <= 0 ? std::string("L3 size unknown")
        : total > static_cast<double>(l3)
            ? fmt::format("{:.0f} MiB in all, more than the {} MiB L3", total / 1048576.0, l3 >> 20)
            : fmt::format("{:.0f} MiB in all, within the {} MiB L3: may be a cache bandwidth", total / 1048576.0,
                          l3 >> 20);
    return fmt::format("host triad a = b + s*c, float32, {} elements per array ({}), {} std::thread(s)", n_, cache,
                       threads_);
  }

 private:
  template <class F>
  void for_each_part(const F& f) {
    std::vector<std::thread> team;
    for (int t = 1; t < threads_; ++t) team.emplace_back([&, t] { f(n_ * t / threads_, n_ * (t + 1) / threads_); });
    f(0, n_ / threads_);
    for (std::thread& th : team) th.join();
  }
  int64_t n_;
  int threads_;
  std::vector<float> a_, b_, c_;
};

}  // namespace

Support Driver::supports_peak(PeakKind kind, DeviceType device, Precision precision) const {
  if (kind == PeakKind::kStream && device == DeviceType::kCpu && precision == Precision::kFp32) return Support::yes();
  return Support::no(fmt::format("{} driver: no {} peak on {} in {}", name(),
                                 kind == PeakKind::kGemm ? "GEMM" : "stream",
                                 device == DeviceType::kCpu ? "cpu" : "cuda", precision_name(precision)));
}

std::unique_ptr<PeakKernel> Driver::make_peak_kernel(PeakKind kind, int64_t n, const DriverContext& ctx) const {
  // Not the virtual one: a driver answers for its own kernels and hands the rest to this one.
  const Support s = Driver::supports_peak(kind, ctx.device, ctx.precision);
  if (!s.ok) throw std::invalid_argument(s.reason);
  return std::make_unique<HostTriad>(n, std::max(1, ctx.threads));
}

Support Driver::supports_denormals(DeviceType, Denormals mode) const {
  if (mode == Denormals::kIeee) return Support::yes();
  return Support::no(fmt::format("{} driver: denormals are kept (IEEE); it cannot flush them", name()));
}

Support Driver::device_available(DeviceType device) const {
  if (device == DeviceType::kCpu) return Support::yes();
  return Support::no(fmt::format("the {} driver runs on the CPU only", name()));
}

Support precision_support(const Driver& driver, const Workload& w, DeviceType device, Precision precision,
                          bool allow_emulation) {
  Support s = driver.supports_precision(w, device, precision);
  if (!s.ok) return s;
  const ComputeIsa isa = driver.compute_isa(device, precision);
  if (isa.native || allow_emulation) return s;
  return Support::no(fmt::format("{} driver: {} on {} is emulated, not native: it needs {} (--allow-emulation runs it)",
                                 driver.name(), precision_name(precision), isa.isa.empty() ? "this CPU" : isa.isa,
                                 isa.native_needs.empty() ? "another instruction set" : isa.native_needs));
}
}  // namespace dlscale
