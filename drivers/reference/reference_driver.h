// The reference driver: plain float64 C++ with no dependencies, the oracle the other drivers
// are checked against at small sizes. It is always compiled in.
#pragma once

#include "drivers/driver.h"

namespace dlscale {

void register_reference(Registry& registry);

}  // namespace dlscale
