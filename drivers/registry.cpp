#include "drivers/driver.h"

#include "drivers/reference/reference_driver.h"

#ifdef DLSCALE_WITH_TORCH
#include "drivers/libtorch/libtorch_driver.h"
#endif
#ifdef DLSCALE_WITH_ONEDNN
#include "drivers/onednn/onednn_driver.h"
#endif
#ifdef DLSCALE_WITH_CUDA
#include "drivers/cuda/cuda_driver.h"
#endif
#ifdef DLSCALE_WITH_KOKKOS
#include "drivers/kokkos/kokkos_driver.h"
#endif

#include <fmt/format.h>

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

std::unique_ptr<GradientReducer> Driver::make_reducer(DeviceType, int, const RankGroup&) const { return nullptr; }

Support Driver::supports_precision(const Workload&, DeviceType, Precision precision) const {
  if (precision == Precision::kFp32) return Support::yes();
  return Support::no(fmt::format("{} driver: only fp32 is implemented, not {}", name(), precision_name(precision)));
}

ComputeIsa Driver::compute_isa(DeviceType, Precision) const { return {}; }

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

void Registry::add(std::unique_ptr<Driver> driver) { drivers_.push_back(std::move(driver)); }

const Driver* Registry::find(std::string_view name) const {
  for (const auto& d : drivers_) {
    if (d->name() == name) return d.get();
  }
  return nullptr;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> n;
  for (const auto& d : drivers_) n.emplace_back(d->name());
  return n;
}

void register_drivers(Registry& registry) {
  register_reference(registry);  // no dependencies: always compiled in
#ifdef DLSCALE_WITH_TORCH
  register_libtorch(registry);
#endif
#ifdef DLSCALE_WITH_ONEDNN
  register_onednn(registry);
#endif
#ifdef DLSCALE_WITH_CUDA
  register_cuda(registry);
#endif
#ifdef DLSCALE_WITH_KOKKOS
  register_kokkos(registry);
#endif
}

}  // namespace dlscale
