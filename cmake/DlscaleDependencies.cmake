# Finds every dependency. Backends default to "on if found"; a backend forced ON
# (-DDLSCALE_WITH_X=ON) that cannot be found stops the configure with a clear message.
# Cluster hints: Torch_DIR or CMAKE_PREFIX_PATH for a CUDA LibTorch, dnnl_DIR, Kokkos_ROOT,
# KokkosKernels_ROOT, CUDAToolkit_ROOT, CUDNN_ROOT, NCCL_ROOT, MPI_HOME, HDF5_ROOT (see
# docs/building.md).

find_package(MPI REQUIRED COMPONENTS C CXX)
set(HDF5_PREFER_PARALLEL ON)
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(CLI11 REQUIRED)
find_package(tomlplusplus REQUIRED)
find_package(fmt REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)

# dlscale_resolve_backend(NAME FOUND) resolves DLSCALE_WITH_<NAME> from AUTO/ON/OFF.
function(dlscale_resolve_backend name found)
  set(value "${DLSCALE_WITH_${name}}")
  if(value STREQUAL "AUTO")
    if(found)
      set(DLSCALE_WITH_${name} ON PARENT_SCOPE)
    else()
      set(DLSCALE_WITH_${name} OFF PARENT_SCOPE)
    endif()
  elseif(value AND NOT found)
    message(FATAL_ERROR "DLSCALE_WITH_${name}=ON but ${name} was not found. "
                        "Install it or point CMake at it (see docs/building.md), "
                        "or configure with -DDLSCALE_WITH_${name}=OFF.")
  elseif(value)
    set(DLSCALE_WITH_${name} ON PARENT_SCOPE)
  else()
    set(DLSCALE_WITH_${name} OFF PARENT_SCOPE)
  endif()
endfunction()

foreach(backend TORCH ONEDNN CUDA KOKKOS)
  set(DLSCALE_WITH_${backend} AUTO CACHE STRING "Build the ${backend} backend (AUTO = on if found)")
  set_property(CACHE DLSCALE_WITH_${backend} PROPERTY STRINGS AUTO ON OFF)
endforeach()

# LibTorch (Debian's libtorch-dev, or a CUDA build via Torch_DIR).
if(DLSCALE_WITH_TORCH)
  find_package(Torch QUIET)
endif()
dlscale_resolve_backend(TORCH "${Torch_FOUND}")

# oneDNN v2 (Debian's libdnnl-dev also needs ocl-icd-opencl-dev for its CMake config).
if(DLSCALE_WITH_ONEDNN)
  find_package(dnnl QUIET)
endif()
dlscale_resolve_backend(ONEDNN "${dnnl_FOUND}")

# CUDA, cuDNN and NCCL: imported targets from find_library with *_ROOT hints.
set(_cuda_found FALSE)
if(DLSCALE_WITH_CUDA)
  find_package(CUDAToolkit QUIET)
  find_library(CUDNN_LIBRARY cudnn HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib lib64)
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib lib64)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
            PATH_SUFFIXES include)
  if(CUDAToolkit_FOUND AND CUDNN_LIBRARY AND CUDNN_INCLUDE_DIR AND NCCL_LIBRARY AND NCCL_INCLUDE_DIR)
    set(_cuda_found TRUE)
    add_library(dlscale::cudnn UNKNOWN IMPORTED)
    set_target_properties(dlscale::cudnn PROPERTIES IMPORTED_LOCATION "${CUDNN_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
    add_library(dlscale::nccl UNKNOWN IMPORTED)
    set_target_properties(dlscale::nccl PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                          INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  endif()
endif()
dlscale_resolve_backend(CUDA "${_cuda_found}")
if(DLSCALE_WITH_CUDA)
  # The driver's own kernels: nvcc from the toolkit found above. Default architectures: A100
  # (sm_80) and H100/H200 (sm_90, with PTX so that newer GPUs JIT-compile it); override with
  # -DCMAKE_CUDA_ARCHITECTURES=... (e.g. "native" on the GPU machine itself).
  if(NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}")
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80-real 90)
  endif()
  # The shared CUDA runtime, the one copy that cuBLAS, cuDNN, NCCL and LibTorch also use (the
  # default would link a second, static one into dlscale for its own kernels).
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  enable_language(CUDA)
endif()

# Kokkos Core and Kokkos Kernels: the kokkos driver needs both (hints Kokkos_ROOT and
# KokkosKernels_ROOT; Debian's Trilinos build is Serial-only, with Kokkos Kernels' BLAS TPL).
# dlscale::kokkos is what the driver links: Kokkos::kokkos plus the Kokkos Kernels target, which
# is Kokkos::kokkoskernels in a standalone install and trilinos_kokkoskernels inside Trilinos.
set(_kokkos_found FALSE)
if(DLSCALE_WITH_KOKKOS)
  find_package(Kokkos QUIET)
  find_package(KokkosKernels QUIET)
  if(TARGET Kokkos::kokkoskernels)
    set(_kokkos_kernels_target Kokkos::kokkoskernels)
  elseif(TARGET trilinos_kokkoskernels)
    set(_kokkos_kernels_target trilinos_kokkoskernels)
  endif()
  if(Kokkos_FOUND AND KokkosKernels_FOUND AND TARGET Kokkos::kokkos AND _kokkos_kernels_target)
    set(_kokkos_found TRUE)
  endif()
endif()
dlscale_resolve_backend(KOKKOS "${_kokkos_found}")
if(DLSCALE_WITH_KOKKOS)
  # Debian's Trilinos config computes Kokkos::kokkos's include directory from its own location
  # and gets /usr/lib/include, which does not exist (the headers are in /usr/include/trilinos);
  # CMake refuses to use an imported target naming a missing directory. Only such entries are
  # dropped: generator expressions and existing directories, all a normal install has, stay.
  get_target_property(_kokkos_aliased Kokkos::kokkos ALIASED_TARGET)
  get_target_property(_kokkos_includes Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
  if(NOT _kokkos_aliased AND _kokkos_includes)
    set(_kokkos_kept "")
    foreach(_dir IN LISTS _kokkos_includes)
      if(_dir MATCHES "\\$<" OR EXISTS "${_dir}")
        list(APPEND _kokkos_kept "${_dir}")
      else()
        message(STATUS "Kokkos::kokkos names a missing include directory, dropped: ${_dir}")
      endif()
    endforeach()
    set_property(TARGET Kokkos::kokkos PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${_kokkos_kept}")
  endif()
  add_library(dlscale::kokkos INTERFACE IMPORTED)
  set_property(TARGET dlscale::kokkos PROPERTY INTERFACE_LINK_LIBRARIES Kokkos::kokkos ${_kokkos_kernels_target})
  # TriBITS (Trilinos) configs name their header directory only in these variables; their
  # targets carry none. Standalone installs do not set them.
  foreach(_dir IN LISTS Kokkos_INCLUDE_DIRS KokkosKernels_INCLUDE_DIRS)
    if(EXISTS "${_dir}")
      set_property(TARGET dlscale::kokkos APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${_dir}")
    endif()
  endforeach()
endif()

# SimGrid (Debian's libsimgrid-dev), for project/: the step projected by simulating a modelled
# cluster (docs/projection.md). Optional like a backend: AUTO = on if pkg-config finds it.
set(DLSCALE_WITH_SIMGRID AUTO CACHE STRING "Build project/, the SimGrid projection (AUTO = on if found)")
set_property(CACHE DLSCALE_WITH_SIMGRID PROPERTY STRINGS AUTO ON OFF)
set(_simgrid_found FALSE)
if(DLSCALE_WITH_SIMGRID)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(SIMGRID QUIET IMPORTED_TARGET simgrid)
    if(SIMGRID_FOUND)
      set(_simgrid_found TRUE)
    endif()
  endif()
endif()
dlscale_resolve_backend(SIMGRID "${_simgrid_found}")
