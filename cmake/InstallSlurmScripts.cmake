# Run by `cmake --install` (install(SCRIPT) in the top-level CMakeLists.txt): copies the sbatch
# templates and slurm/study into share/dlscale/slurm with the line `installed_prefix=""` (shell)
# or `INSTALLED_PREFIX = ""` (Python) set to the prefix being installed into, so that the
# installed copies find the installed dlscale and dlscale-report by default.
set(_dest "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${DLSCALE_SLURM_DIR}")
file(MAKE_DIRECTORY "${_dest}")
foreach(_name dlscale-cpu.sbatch dlscale-gpu.sbatch study)
  file(READ "${DLSCALE_SOURCE_DIR}/slurm/${_name}" _text)
  set(_before "${_text}")
  string(REPLACE "installed_prefix=\"\"" "installed_prefix=\"${CMAKE_INSTALL_PREFIX}\"" _text "${_text}")
  string(REPLACE "INSTALLED_PREFIX = \"\"" "INSTALLED_PREFIX = \"${CMAKE_INSTALL_PREFIX}\"" _text "${_text}")
  if(_text STREQUAL _before)
    message(FATAL_ERROR "slurm/${_name} has no installed_prefix line to fill in")
  endif()
  message(STATUS "Installing: ${_dest}/${_name}")
  file(WRITE "${_dest}/${_name}" "${_text}")
  file(CHMOD "${_dest}/${_name}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                             WORLD_READ WORLD_EXECUTE)
endforeach()
