// A driver module: a shared library holding one driver and linking its backend's libraries, which
// dlscale loads the first time a case or command needs more of that driver than its name
// (drivers/registry.cpp). LibTorch's and CUDA's libraries take most of a second each to load;
// linked into dlscale, every start paid for them, also one that only refuses a typo or lists
// the workloads.
#pragma once

#include "drivers/driver.h"

/// The function dlscale looks up in a driver module: a new instance of its driver.
#define DLSCALE_DRIVER_MODULE_ENTRY "dlscale_driver_module_create"

/// Defines a module's entry point, making a `DriverType` (default-constructed).
#define DLSCALE_DRIVER_MODULE(DriverType)                                                             \
  extern "C" __attribute__((visibility("default"))) dlscale::Driver* dlscale_driver_module_create() { \
    return new DriverType();                                                                          \
  }
