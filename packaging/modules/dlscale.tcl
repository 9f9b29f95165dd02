#%Module1.0
##
## environment-modules (Tcl) module file for dlscale @VERSION@ installed under @PREFIX@.
##
## `cmake --install` writes it as <prefix>/share/modulefiles-tcl/dlscale/<version> from the
## template packaging/modules/dlscale.tcl, with the install prefix and the version filled in
## (cmake/InstallModuleFiles.cmake). Lmod reads it too. Spack installs do not use it: Spack
## writes module files from the recipe.

proc ModulesHelp { } {
    puts stderr "dlscale @VERSION@: MPI-distributed deep-learning training benchmarks."
    puts stderr ""
    puts stderr "  mpirun -np 2 dlscale run -w fcn5 -d libtorch --out run.h5"
    puts stderr "  dlscale-report summary run.h5"
    puts stderr "  sbatch \$DLSCALE_SHARE/slurm/dlscale-cpu.sbatch -w fcn5"
    puts stderr ""
    puts stderr "dlscale info prints the backends and libraries this build has."
}

module-whatis "Name: dlscale"
module-whatis "Version: @VERSION@"
module-whatis "Description: MPI-distributed deep-learning training benchmarks writing HDF5 results"

conflict dlscale

# dlscale must be launched by the MPI it was built with: name that MPI's module here, e.g.
# prereq openmpi/4.1

set prefix "@PREFIX@"
prepend-path PATH $prefix/bin
# The Slurm templates and the rest of the shared files. No man pages are installed, so
# MANPATH is left alone.
setenv DLSCALE_SHARE $prefix/share/dlscale
