# Run by `cmake --install`: records in the installed report package the commit the installed
# dlscale binary was built from (the same header the binary's provenance comes from), so that
# `dlscale-report --version` of an install agrees with `dlscale --version`.
file(STRINGS "${DLSCALE_COMMIT_HEADER}" _line REGEX "DLSCALE_GIT_COMMIT")
string(REGEX REPLACE ".*\"(.*)\".*" "\\1" _commit "${_line}")
set(_path "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${DLSCALE_PYTHON_DIR}/dlscale_report/_build_info.py")
message(STATUS "Installing: ${_path}")
file(WRITE "${_path}" "\"\"\"Written by cmake --install (cmake/InstallReportBuildInfo.cmake).\"\"\"\n\nCOMMIT = \"${_commit}\"\n")
