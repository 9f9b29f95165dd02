// What /system/environment may record: allow-listed families and exact names, never a name that
// may hold a secret.
#include <gtest/gtest.h>

#include "suite/record/provenance.h"

namespace dlscale {
namespace {

TEST(EnvironmentCapture, FamiliesByPrefixAndSingleVariablesByExactName) {
  for (const char* name : {"OMP_NUM_THREADS", "OMP_PROC_BIND", "NCCL_DEBUG", "SLURM_JOB_ID", "SLURM_CPU_BIND",
                           "SLURM_CPU_BIND_LIST", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "SLURM_NTASKS",
                           "SLURM_PROCID", "OMPI_COMM_WORLD_LOCAL_RANK", "OPENBLAS_CORETYPE"}) {
    EXPECT_TRUE(recorded_environment_name(name)) << name;
  }
  // Exact names stay exact: what merely starts like one is not recorded.
  for (const char* name : {"MKL_NUM_THREADS_EXTRA", "CUDA_VISIBLE_DEVICES_BACKUP", "SLURM_NTASKS_PER_SOCKET_X",
                           "SLURM_PROCIDX", "SLURM_NODELIST_HISTORY", "HOME", "PATH", "SLURM_PRIO", "OMP"}) {
    EXPECT_FALSE(recorded_environment_name(name)) << name;
  }
}

TEST(EnvironmentCapture, NeverANameThatMayHoldASecret) {
  for (const char* name : {"SLURM_JOB_ACCOUNT_TOKEN", "NCCL_IB_PASSWORD", "OMP_SECRET", "SLURM_JOB_KEY",
                           "NCCL_CREDENTIALS", "ONEDNN_API_KEY", "OPENBLAS_TOKEN_X", "SLURM_STEP_SECRET_FILE"}) {
    EXPECT_FALSE(recorded_environment_name(name)) << name;
  }
}

}  // namespace
}  // namespace dlscale
