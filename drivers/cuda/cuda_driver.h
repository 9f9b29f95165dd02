// The CUDA driver: cuDNN and cuBLAS called directly, one GPU per rank (drivers/cuda/cuda_driver.cpp).
#pragma once

#include "drivers/driver.h"

namespace dlscale {

void register_cuda(Registry& registry);

}  // namespace dlscale
