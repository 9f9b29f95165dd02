// Provenance: what produced a results file. Library versions, the BLAS and OpenMP runtime the
// process actually loaded (Debian's LibTorch runs whatever libblas.so.3 is selected, and the
// reference BLAS is ~19x slower), build options, and an allow-list of environment variables —
// never the whole environment, which can hold secrets.
#pragma once

#include <string>
#include <vector>

#include "drivers/driver.h"
#include "io/results_file.h"

namespace dlscale {

struct LoadedMath {
  std::string blas_path;       ///< resolved path of the loaded BLAS, "" when none is loaded
  std::string blas;            ///< "OpenBLAS (openblas-openmp)", "reference", "MKL", …
  std::string blas_config;     ///< openblas_get_config() when available
  std::string blas_core;       ///< openblas_get_corename(): the kernels OpenBLAS chose
  std::string openmp_runtime;  ///< resolved file name of the loaded OpenMP runtime
  bool reference_blas() const { return blas == "reference"; }
};

/// Inspects the shared objects mapped into this process.
LoadedMath detect_loaded_math();

/// /system/software: dlscale, compiler, build, MPI, HDF5, BLAS, OpenMP and every driver's
/// libraries.
Attrs software_attributes(const Registry& drivers);

/// Whether /system/environment records a variable of this name (docs/schema.md lists the rule).
bool recorded_environment_name(const std::string& name);
/// /system/environment: only the allow-listed variables that are set.
Attrs environment_attributes();

/// Warnings a user must see before trusting the numbers (reference BLAS, shared cores).
std::vector<std::string> provenance_warnings(const LoadedMath& math);

std::string dlscale_version();
std::string git_commit();

}  // namespace dlscale
