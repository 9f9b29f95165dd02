// The LibTorch backend. Only this folder includes torch headers, so that the rest of the build
// stays fast.
#pragma once

#include "drivers/driver.h"

namespace dlscale {

void register_libtorch(Registry& registry);

}  // namespace dlscale
