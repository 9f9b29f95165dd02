# Sourced by the other scripts: Open MPI's settings for running as root in a container and on
# machines with fewer cores than ranks.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
if [ "$(nproc)" -lt 2 ]; then
  export OMPI_MCA_rmaps_base_oversubscribe=1
fi
# The build: the cuda preset (every CPU backend plus the CUDA driver and NCCL) where the CUDA
# toolkit with cuDNN and NCCL is installed, else the cpu preset; DLSCALE_PRESET overrides.
if [ -z "${DLSCALE_PRESET:-}" ]; then
  DLSCALE_PRESET=cpu
  # cuDNN and NCCL headers: in the toolkit, or where distribution packages put them.
  if [ -x /usr/local/cuda/bin/nvcc ] &&
     { [ -f /usr/local/cuda/include/cudnn.h ] || [ -f /usr/include/cudnn.h ]; } &&
     { [ -f /usr/local/cuda/include/nccl.h ] || [ -f /usr/include/nccl.h ]; }; then
    DLSCALE_PRESET=cuda
  fi
fi
export DLSCALE_PRESET
