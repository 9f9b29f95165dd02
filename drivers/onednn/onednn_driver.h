// The oneDNN backend (oneDNN v2 API, CPU engine). Only drivers/onednn/ includes oneDNN's headers,
// so that the rest of the build stays backend-free.
#pragma once

#include "drivers/driver.h"

namespace dlscale {

/// Registers the "onednn" driver.
void register_onednn(Registry& registry);

}  // namespace dlscale
