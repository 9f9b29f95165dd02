# Sourced by the other scripts: Open MPI's settings for running as root in a container and on
# machines with fewer cores than ranks.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
if [ "$(nproc)" -lt 2 ]; then
  export OMPI_MCA_rmaps_base_oversubscribe=1
fi
