// The file's provenance (docs/schema.md, "Root", "/system", "/runs"): the root attributes, one
// record per run of dlscale on the file, and the software each run used. Written by dlscale
// (suite/record/results_access.cpp, provenance.cpp); dlscale-project reads the software's thread
// level for files older than the per-case all-reduce mechanism.
#pragma once

#include <cstdint>
#include <string>

#include "schema/fields.h"

namespace dlscale {

/// The root's attributes, written by the run that created the file.
struct RootRecord {
  std::string schema, dlscale_version, git_commit, created_utc, command_line;
  int64_t world_size = 0;
  std::string config;  ///< the matrix as TOML
};

inline const Field<RootRecord> kRootFields[] = {
    member<&RootRecord::schema>("schema"),
    member<&RootRecord::dlscale_version>("dlscale_version"),
    member<&RootRecord::git_commit>("git_commit"),
    member<&RootRecord::created_utc>("created_utc"),
    member<&RootRecord::command_line>("command_line"),
    member<&RootRecord::world_size>("world_size"),
    member<&RootRecord::config>("config"),
};

/// /runs/NNNN's attributes: one run of dlscale on the file, the first or a --resume.
struct RunRecord {
  std::string started_utc;
  bool resumed = false;
  std::string command_line, config;
  int64_t world_size = 0;
  std::string dlscale_version, git_commit;
};

inline const Field<RunRecord> kRunFields[] = {
    member<&RunRecord::started_utc>("started_utc"),   member<&RunRecord::resumed>("resumed"),
    member<&RunRecord::command_line>("command_line"), member<&RunRecord::config>("config"),
    member<&RunRecord::world_size>("world_size"),     member<&RunRecord::dlscale_version>("dlscale_version"),
    member<&RunRecord::git_commit>("git_commit"),
};

/// /system/software and /runs/NNNN/software: the build, MPI, HDF5, BLAS and OpenMP in use. Each
/// compiled driver adds its own libraries' versions after these (Driver::versions).
struct SoftwareRecord {
  std::string dlscale, git_commit, compiler, build_type, cxx_flags;
  std::string backends;  ///< the compiled drivers, space-separated
  std::string mpi, mpi_thread_level, mpi_transport, bucketed_allreduce, mpi_allreduce_settings;
  std::string hdf5;
  std::string blas, blas_path, blas_config, blas_core, blas_core_chosen, blas_core_reason;
  std::string openmp_runtime;
};

inline const Field<SoftwareRecord> kSoftwareFields[] = {
    member<&SoftwareRecord::dlscale>("dlscale"),
    member<&SoftwareRecord::git_commit>("git_commit"),
    member<&SoftwareRecord::compiler>("compiler"),
    member<&SoftwareRecord::build_type>("build_type"),
    member<&SoftwareRecord::cxx_flags>("cxx_flags"),
    member<&SoftwareRecord::backends>("backends"),
    member<&SoftwareRecord::mpi>("mpi"),
    member<&SoftwareRecord::mpi_thread_level>("mpi_thread_level"),
    member<&SoftwareRecord::mpi_transport>("mpi_transport"),
    member<&SoftwareRecord::bucketed_allreduce>("bucketed_allreduce"),
    member<&SoftwareRecord::mpi_allreduce_settings>("mpi_allreduce_settings"),
    member<&SoftwareRecord::hdf5>("hdf5"),
    member<&SoftwareRecord::blas>("blas"),
    member<&SoftwareRecord::blas_path>("blas_path"),
    member<&SoftwareRecord::blas_config>("blas_config"),
    member<&SoftwareRecord::blas_core>("blas_core"),
    member<&SoftwareRecord::blas_core_chosen>("blas_core_chosen"),
    member<&SoftwareRecord::blas_core_reason>("blas_core_reason"),
    member<&SoftwareRecord::openmp_runtime>("openmp_runtime"),
};

}  // namespace dlscale
