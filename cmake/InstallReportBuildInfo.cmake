# Run by `cmake --install`: records in the installed report package the commit the installed
# dlscale binary was built from (the same header the binary's provenance comes from), so that
# `dlscale-report --version` of an install agrees with `dlscale --version`, and the Python the
# build was configured with (DLSCALE_PYTHON), which the installed dlscale-report runs itself with
# where the first python3 on PATH lacks h5py (results/dlscale_report/_interpreter.py).
file(STRINGS "${DLSCALE_COMMIT_HEADER}" _line REGEX "DLSCALE_GIT_COMMIT")
string(REGEX REPLACE ".*\"(.*)\".*" "\\1" _commit "${_line}")
# A Python string literal of the path: backslashes and quotes escaped.
string(REPLACE "\\" "\\\\" _python "${DLSCALE_CONFIGURED_PYTHON}")
string(REPLACE "\"" "\\\"" _python "${_python}")
set(_path "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${DLSCALE_PYTHON_DIR}/dlscale_report/_build_info.py")
message(STATUS "Installing: ${_path}")
file(WRITE "${_path}" "\"\"\"Written by cmake --install (cmake/InstallReportBuildInfo.cmake).\"\"\"\n\n"
                      "COMMIT = \"${_commit}\"\nPYTHON = \"${_python}\"\n")
