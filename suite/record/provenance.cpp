#include "suite/record/provenance.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <mpi.h>
#include <stdlib.h>

#include <string_view>

#include <fmt/format.h>

#include "dlscale_build_info.h"
#include "dlscale_git_commit.h"
#include "drivers/cpu/blas_core.h"
#include "io/h5.h"
#include "schema/run_record.h"
#include "suite/comm/mpi_settings.h"

extern char** environ;

namespace dlscale {

namespace {

std::vector<std::string> loaded_objects() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') {
          static_cast<std::vector<std::string>*>(data)->emplace_back(info->dlpi_name);
        }
        return 0;
      },
      &paths);
  return paths;
}

std::string resolved(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : path;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

std::string parent_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return "";
  return base_name(path.substr(0, slash));
}

}  // namespace

LoadedMath detect_loaded_math() {
  LoadedMath m;
  for (const std::string& obj : loaded_objects()) {
    const std::string name = base_name(obj);
    const std::string real = resolved(obj);
    if (m.blas_path.empty() && (contains(name, "libblas.so") || contains(name, "libopenblas") ||
                                contains(name, "libmkl_rt") || contains(name, "libblis"))) {
      m.blas_path = real;
      if (contains(real, "openblas")) {
        m.blas = "OpenBLAS (" + parent_name(real) + ")";
      } else if (contains(real, "mkl")) {
        m.blas = "MKL";
      } else if (contains(real, "blis")) {
        m.blas = "BLIS";
      } else if (contains(real, "atlas")) {
        m.blas = "ATLAS";
      } else if (parent_name(real) == "blas") {
        m.blas = "reference";  // Debian's netlib libblas3
      } else {
        m.blas = "unknown";
      }
    }
    if (m.openmp_runtime.empty() &&
        (contains(name, "libgomp") || contains(name, "libomp") || contains(name, "libiomp5"))) {
      m.openmp_runtime = base_name(real);
    }
  }
  using ConfigFn = char* (*)();
  if (auto fn = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) m.blas_config = fn();
  // The kernels OpenBLAS actually chose for this CPU (a DYNAMIC_ARCH build's config names only
  // its oldest target); under some hypervisors it fails to recognise the CPU and falls back.
  if (auto fn = reinterpret_cast<ConfigFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"))) m.blas_core = fn();
  return m;
}

std::string dlscale_version() { return DLSCALE_VERSION; }
std::string git_commit() { return DLSCALE_GIT_COMMIT; }

Attrs software_attributes(const Registry& drivers) {
  SoftwareRecord s;
  s.dlscale = dlscale_version();
  s.git_commit = git_commit();
  s.compiler = DLSCALE_COMPILER;
  s.build_type = DLSCALE_BUILD_TYPE;
  s.cxx_flags = DLSCALE_CXX_FLAGS;
  // The drivers compiled into this binary, each of which records its own libraries below.
  for (const std::string& name : drivers.names()) s.backends += (s.backends.empty() ? "" : " ") + name;
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  MPI_Get_library_version(mpi, &len);
  const std::string mpi_version(mpi, static_cast<size_t>(len));
  s.mpi = mpi_version.substr(0, mpi_version.find_first_of("\n,"));
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  s.mpi_thread_level = level >= MPI_THREAD_MULTIPLE     ? "MPI_THREAD_MULTIPLE"
                       : level >= MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
                       : level >= MPI_THREAD_FUNNELED   ? "MPI_THREAD_FUNNELED"
                                                        : "MPI_THREAD_SINGLE";
  s.mpi_transport = mpi_transport();
  // How --bucket-mb reduces gradients on CPU ranks in this process (suite/comm/gradient_allreduce.h).
  s.bucketed_allreduce = level >= MPI_THREAD_SERIALIZED ? "one all-reduce per bucket on a communication thread"
                                                        : "one all-reduce per bucket after backward (no communication "
                                                          "thread below MPI_THREAD_SERIALIZED)";
  s.mpi_allreduce_settings = mpi_allreduce_settings();
  s.hdf5 = h5::library_version();
  const LoadedMath math = detect_loaded_math();
  s.blas = math.blas.empty() ? std::string("none loaded") : math.blas;
  s.blas_path = math.blas_path;
  s.blas_config = math.blas_config;
  s.blas_core = math.blas_core;
  const BlasCore core = blas_core();
  s.blas_core_chosen = core.chosen;
  s.blas_core_reason = core.reason;
  s.openmp_runtime = math.openmp_runtime;
  Attrs a = attrs_of(s, kSoftwareFields);
  for (const auto& driver : drivers.all()) {
    for (const auto& [lib, version] : driver->versions()) a.emplace_back(lib, version);
  }
  return a;
}

bool recorded_environment_name(const std::string& name) {
  // Variables that shape performance or say where and how the job ran: whole families by prefix
  // (each ends in '_'), single variables by exact name.
  static const char* const kPrefixes[] = {
      "OMP_",       "KMP_",        "GOMP_",           "OPENBLAS_",   "DNNL_",       "ONEDNN_",          "NCCL_",
      "SLURM_JOB_", "SLURM_CPUS_", "SLURM_CPU_BIND_", "SLURM_GPUS_", "SLURM_STEP_", "OMPI_COMM_WORLD_", "MALLOC_"};
  static const char* const kExact[] = {
      "MKL_NUM_THREADS",    "CUDA_VISIBLE_DEVICES", "SLURM_NODELIST", "SLURM_NTASKS",
      "SLURM_NNODES",       "SLURM_TASKS_PER_NODE", "SLURM_CPU_BIND", "SLURM_GPUS",
      "SLURM_LOCALID",      "SLURM_PROCID",         "SLURM_MPI_TYPE", "SLURM_DISTRIBUTION",
      "SLURM_CLUSTER_NAME", "SLURM_GPU_BIND",       "GLIBC_TUNABLES", "LD_PRELOAD"};
  // Never a name that may hold a secret, whatever family it belongs to (NCCL_IB_PASSWORD...).
  static const char* const kSecret[] = {"TOKEN", "SECRET", "PASSWORD", "KEY", "CREDENTIAL"};
  for (const char* word : kSecret) {
    if (name.find(word) != std::string::npos) return false;
  }
  for (const char* exact : kExact) {
    if (name == exact) return true;
  }
  for (const char* prefix : kPrefixes) {
    if (name.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

Attrs environment_attributes() {
  Attrs a;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    if (recorded_environment_name(name)) a.emplace_back(name, entry.substr(eq + 1));
  }
  return a;
}

std::vector<std::string> provenance_warnings(const LoadedMath& math) {
  std::vector<std::string> w;
  if (math.reference_blas()) {
    w.push_back(
        fmt::format("the loaded BLAS is the reference implementation ({}), roughly 19x slower than "
                    "OpenBLAS on FCN-5: install libopenblas0-openmp (scripts/setup-deps.sh does)",
                    math.blas_path));
  }
  const BlasCore core = blas_core();
  if (core.below_cpu) {
    w.push_back(fmt::format("{} runs its {} kernels, below what this CPU's instruction set allows: {}", core.library,
                            core.used, core.reason));
  }
  return w;
}

}  // namespace dlscale
