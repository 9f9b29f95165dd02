# Spack recipe for dlscale. It lives in the dlscale repository, not in Spack's builtin packages:
# a site copies packaging/spack/dlscale/ into a package repository of its own (packaging/README.md).
# tests/packaging/test_spack_recipe.py checks its variants, dependencies and CMake flags against
# the project's CMake files without Spack; it has not been built by a real Spack yet.
import os

from spack.package import *

try:  # Spack >= 1.0: the build systems live in the builtin package repository.
    from spack_repo.builtin.build_systems.cmake import CMakePackage
    from spack_repo.builtin.build_systems.cuda import CudaPackage
except ImportError:  # Spack 0.x: spack.package, imported above, has them.
    pass


class Dlscale(CMakePackage, CudaPackage):
    """MPI-distributed deep-learning training benchmarks: every rank trains the same network on
    a backend (LibTorch, oneDNN, cuDNN+cuBLAS, Kokkos), gradients are all-reduced (MPI or NCCL),
    and per-rank timings go into HDF5 files for strong- and weak-scaling studies."""

    # Placeholders: dlscale has no public repository yet. Point `git` at the repository your
    # site clones from, or build a checkout in place with
    # `spack develop --path /path/to/dlscale dlscale@main`.
    homepage = "https://git.example.org/hpc/dlscale"
    git = "https://git.example.org/hpc/dlscale.git"

    version("main", branch="main")
    # 0.1.0 is the version project() declares. It has not been tagged or published, so there is
    # no tarball to checksum and no commit to pin. Once v0.1.0 is tagged, add its commit
    # (tag="v0.1.0", commit="<sha>") so that Spack can check what it fetched; until then
    # install dlscale@main.
    version("0.1.0", tag="v0.1.0")

    # One variant per backend, each passed to CMake as DLSCALE_WITH_<X>=ON/OFF. The defaults are
    # those of the cpu preset of CMakePresets.json: CUDA off (CudaPackage's +cuda defaults to
    # off), the others AUTO, i.e. on where found. A Spack build finds only what it depends on,
    # so AUTO becomes on here.
    variant("torch", default=True, description="LibTorch driver (LibTorch from py-torch)")
    variant("onednn", default=True, description="oneDNN driver (oneDNN v2 API)")
    variant("kokkos", default=True, description="Kokkos driver (Kokkos Core and Kokkos Kernels)")
    variant("simgrid", default=True, description="dlscale-project: the step simulated on a described cluster (SimGrid)")
    # +cuda and cuda_arch come from CudaPackage: the cuDNN+cuBLAS driver, the NCCL all-reduce
    # and CUDA-event timing for every GPU driver.
    variant("bench", default=False, description="Build the hand-run benchmarks of bench/")

    conflicts("cuda_arch=none", when="+cuda", msg="dlscale+cuda needs cuda_arch, e.g. cuda_arch=90")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.25:", type="build")

    # Lower bounds are the versions dlscale is built with on Debian 12.
    depends_on("mpi")
    # The build prefers parallel HDF5 (HDF5_PREFER_PARALLEL); the code is written for the
    # 1.10 to 1.14 API.
    depends_on("hdf5@1.10:1.14 +mpi")
    depends_on("cli11@2.1:")
    depends_on("tomlplusplus@3.3:")
    depends_on("fmt@9.1:")
    # OpenMP comes with the compiler.

    # results/dlscale-report and the Python tests: h5py and numpy; matplotlib for plots and the
    # HTML report; scipy for the U test of `compare`.
    depends_on("python@3", type=("run", "test"))
    depends_on("py-h5py", type=("run", "test"))
    depends_on("py-numpy", type=("run", "test"))
    depends_on("py-matplotlib", type=("run", "test"))
    depends_on("py-scipy", type=("run", "test"))
    depends_on("googletest@1.12:", type="test")

    with when("+torch"):
        # Spack's LibTorch is the one inside py-torch (there is no separate libtorch package);
        # Torch_DIR is set from py-torch's cmake_prefix_paths. LibTorch uses the GPU only when
        # DLSCALE_WITH_CUDA is on, so ~cuda asks for a CPU py-torch (py-torch defaults to +cuda).
        depends_on("py-torch@1.13:")
        depends_on("py-torch~cuda", when="~cuda")
        depends_on("py-torch+cuda+cudnn+nccl", when="+cuda")

    # The driver calls the oneDNN v2 API (operation descriptors such as dnnl::matmul::desc, which
    # v3 removed). py-torch (+mkldnn) carries its own oneDNN; whether the two share one process
    # cleanly has not been tried.
    depends_on("onednn@2.6:2", when="+onednn")

    # project/ finds SimGrid through pkg-config (simgrid.pc); built and tested with 3.32.
    with when("+simgrid"):
        depends_on("simgrid@3.32:")
        depends_on("pkgconfig", type="build")

    with when("+kokkos"):
        # Built with Kokkos 3.4.1 (Debian's Trilinos 13.2) and 4.6.1; Kokkos 5 needs C++20.
        depends_on("kokkos@3.4:4")
        depends_on("kokkos-kernels@3.4:4")
        # The driver runs on Kokkos' default execution space. Without +cuda that is OpenMP, with
        # Kokkos Kernels' BLAS TPL: its own portable GEMM is much slower.
        depends_on("kokkos+openmp", when="~cuda")
        depends_on("kokkos-kernels+openmp+blas", when="~cuda")
        # With +cuda the Kokkos driver trains on the GPU too, with cuBLAS GEMMs. dlscale compiles
        # its Kokkos code as C++, not as the CUDA language, so Kokkos is built +wrapper and
        # nvcc_wrapper becomes the C++ compiler of the whole build (cmake_args), as
        # docs/building.md describes; +cmake_lang would need the CUDA language for those files.
        # Kokkos 3 needs +cuda_lambda; in 4 it is always on. Kokkos takes one cuda_arch, so
        # +kokkos+cuda builds for a single architecture. This combination is untried
        # (docs/kokkos.md).
        depends_on("kokkos+cuda+wrapper+cuda_lambda", when="+cuda")
        depends_on("kokkos-kernels+cuda+cublas", when="+cuda")

    with when("+cuda"):
        # The v8 RNN API the driver calls (cudnnRNNForward, ..._v8) came with cuDNN 8;
        # ncclGetLastError with NCCL 2.13. Built with CUDA 13, cuDNN 9.19 and NCCL 2.28 so far.
        depends_on("cudnn@8:")
        depends_on("nccl@2.13:")

    # Every CUDA dependency builds for the architectures dlscale builds for.
    for _arch in CudaPackage.cuda_arch_values:
        depends_on(f"nccl cuda_arch={_arch}", when=f"+cuda cuda_arch={_arch}")
        depends_on(f"py-torch cuda_arch={_arch}", when=f"+torch+cuda cuda_arch={_arch}")
        depends_on(f"kokkos cuda_arch={_arch}", when=f"+kokkos+cuda cuda_arch={_arch}")

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define_from_variant("DLSCALE_WITH_TORCH", "torch"),
            self.define_from_variant("DLSCALE_WITH_ONEDNN", "onednn"),
            self.define_from_variant("DLSCALE_WITH_CUDA", "cuda"),
            self.define_from_variant("DLSCALE_WITH_KOKKOS", "kokkos"),
            self.define_from_variant("DLSCALE_WITH_SIMGRID", "simgrid"),
            self.define_from_variant("DLSCALE_BUILD_BENCH", "bench"),
            # The tests need GoogleTest and a Python with h5py and numpy: only with
            # `spack install --test=root`.
            self.define("BUILD_TESTING", self.run_tests),
            # The hints of docs/building.md, so that CMake takes the dependency Spack chose.
            self.define("MPI_HOME", spec["mpi"].prefix),
            self.define("HDF5_ROOT", spec["hdf5"].prefix),
        ]
        if self.run_tests:
            args.append(self.define("DLSCALE_PYTHON", spec["python"].command.path))
        if spec.satisfies("+torch"):
            torch_cmake = spec["py-torch"].package.cmake_prefix_paths[0]
            args.append(self.define("Torch_DIR", join_path(torch_cmake, "Torch")))
        if spec.satisfies("+onednn"):
            args.append(self.define("dnnl_ROOT", spec["onednn"].prefix))
        if spec.satisfies("+kokkos"):
            args.append(self.define("Kokkos_ROOT", spec["kokkos"].prefix))
            args.append(self.define("KokkosKernels_ROOT", spec["kokkos-kernels"].prefix))
        if spec.satisfies("+cuda"):
            args.append(
                self.define("CMAKE_CUDA_ARCHITECTURES", sorted(spec.variants["cuda_arch"].value))
            )
            args.append(self.define("CUDAToolkit_ROOT", spec["cuda"].prefix))
            args.append(self.define("CUDNN_ROOT", spec["cudnn"].prefix))
            args.append(self.define("NCCL_ROOT", spec["nccl"].prefix))
        if spec.satisfies("+kokkos+cuda"):
            args.append(self.define("CMAKE_CXX_COMPILER", spec["kokkos"].package.kokkos_cxx))
        return args

    def setup_run_environment(self, env):
        # The same variable as packaging/modules/dlscale.{lua,tcl}, for Spack's own module files.
        env.set("DLSCALE_SHARE", self.prefix.share.dlscale)

    @run_after("install")
    def use_spack_python(self):
        # results/dlscale-report starts with `#!/usr/bin/env python3`, whatever python3 is first
        # on PATH; an installed copy must run the Python this package depends on (with h5py).
        script = join_path(self.prefix.bin, "dlscale-report")
        if os.path.exists(script):
            filter_file(r"^#!.*python.*$", "#!" + self.spec["python"].command.path, script)
