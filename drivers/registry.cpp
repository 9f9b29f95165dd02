#include "drivers/driver.h"

#include "drivers/reference/reference_driver.h"

#ifdef DLSCALE_WITH_TORCH
#include "drivers/libtorch/libtorch_driver.h"
#endif
#ifdef DLSCALE_WITH_ONEDNN
#include "drivers/onednn/onednn_driver.h"
#endif

namespace dlscale {

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
}

}  // namespace dlscale
