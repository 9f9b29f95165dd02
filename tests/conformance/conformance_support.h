// What the conformance test files share: the device of this build (the CPU, or with
// DLSCALE_CONFORMANCE_ON_GPU the GPU), the compiled drivers, which of them are under test on that
// device, and gtest-safe names for their parameters.
#pragma once

#include <cctype>
#include <string>
#include <vector>

#include "drivers/driver.h"

namespace dlscale::conformance {

#ifdef DLSCALE_CONFORMANCE_ON_GPU
constexpr DeviceType kDevice = DeviceType::kCuda;
#else
constexpr DeviceType kDevice = DeviceType::kCpu;
#endif

inline const Registry& registry() {
  static const Registry r = [] {
    Registry reg;
    register_drivers(reg);
    return reg;
  }();
  return r;
}

/// On the CPU, the drivers whose home is the CPU; on the GPU, every driver. Never the oracle.
inline std::vector<std::string> drivers_under_test() {
  std::vector<std::string> names;
  for (const auto& d : registry().all()) {
    if (d->name() == "reference") continue;
    if (kDevice == DeviceType::kCpu && d->default_device() != DeviceType::kCpu) continue;
    names.emplace_back(d->name());
  }
  return names;
}

/// `text` with every character gtest does not allow in a test name replaced by '_'.
inline std::string test_name(std::string text) {
  for (char& c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return text;
}

}  // namespace dlscale::conformance
