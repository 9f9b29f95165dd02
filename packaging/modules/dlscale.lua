-- Lmod module file for dlscale @VERSION@ installed under @PREFIX@.
--
-- `cmake --install` writes it as <prefix>/share/modulefiles/dlscale/<version>.lua from the
-- template packaging/modules/dlscale.lua, with the install prefix and the version filled in
-- (cmake/InstallModuleFiles.cmake). Spack installs do not use it: Spack writes module files
-- from the recipe.

help([[
dlscale @VERSION@: MPI-distributed deep-learning training benchmarks.

  mpirun -np 2 dlscale run -w fcn5 -d libtorch --out run.h5
  dlscale-report summary run.h5
  sbatch $DLSCALE_SHARE/slurm/dlscale-cpu.sbatch -w fcn5

dlscale info prints the backends and libraries this build has.
]])

whatis("Name: dlscale")
whatis("Version: @VERSION@")
whatis("Description: MPI-distributed deep-learning training benchmarks writing HDF5 results")

-- dlscale must be launched by the MPI it was built with: name that MPI's module here, e.g.
-- depends_on("openmpi/4.1")

local prefix = "@PREFIX@"
prepend_path("PATH", pathJoin(prefix, "bin"))
-- The Slurm templates and the rest of the shared files. No man pages are installed, so
-- MANPATH is left alone.
setenv("DLSCALE_SHARE", pathJoin(prefix, "share", "dlscale"))
