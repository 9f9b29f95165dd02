# Run by `cmake --install` (install(SCRIPT) in the top-level CMakeLists.txt): fills in the module
# file templates of packaging/modules/ (@PREFIX@: the prefix being installed into, which only
# install time knows; @VERSION@: the project's) and writes them where each module system looks
# once the directory is on its MODULEPATH:
#   <prefix>/share/modulefiles/dlscale/<version>.lua   Lmod
#   <prefix>/share/modulefiles-tcl/dlscale/<version>   environment-modules (Lmod reads it too)
# Two directories, so that each system sees one module file per version. DESTDIR (packaging
# into a staging tree) moves where the files go, not the prefix written into them.
set(PREFIX "${CMAKE_INSTALL_PREFIX}")
set(VERSION "${DLSCALE_VERSION}")
foreach(_pair "dlscale.lua;modulefiles/dlscale/${VERSION}.lua" "dlscale.tcl;modulefiles-tcl/dlscale/${VERSION}")
  list(GET _pair 0 _template)
  list(GET _pair 1 _relative)
  file(READ "${DLSCALE_MODULES_SOURCE}/${_template}" _text)
  string(CONFIGURE "${_text}" _text @ONLY)
  if(_text MATCHES "@[A-Z_]+@")
    message(FATAL_ERROR "packaging/modules/${_template}: placeholder ${CMAKE_MATCH_0} left unfilled")
  endif()
  set(_path "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${DLSCALE_DATA_DIR}/${_relative}")
  message(STATUS "Installing: ${_path}")
  file(WRITE "${_path}" "${_text}")
endforeach()
