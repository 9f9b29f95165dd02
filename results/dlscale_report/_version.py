"""Version and commit of dlscale-report.

__version__ is the one place the Python side keeps the version: pyproject.toml reads it
(setuptools dynamic version, by static analysis, so building does not import h5py) and it
must equal the CMake project version (tests/python/test_formats.py checks that).

The commit is `git describe --always --dirty --abbrev=12` of the source tree when this
package is results/dlscale_report of a git checkout; an installed copy instead carries
_build_info.py, written by results/setup.py at build time; otherwise "unknown". This module
needs only the standard library: `--version` works without h5py, and setup.py loads it by
path without importing the package.
"""

import os
import subprocess

__version__ = "0.1.0"

_HERE = os.path.dirname(os.path.realpath(__file__))


def source_commit(package_dir=_HERE):
    """git describe of the checkout whose results/dlscale_report is package_dir, else None.

    An installed copy that merely lies inside some checkout (a venv in the source tree)
    is not that checkout's code, so the directory must be the checkout's own package.
    """
    def git(*args):
        return subprocess.run(["git", "-C", package_dir, *args], capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()
    try:
        top = git("rev-parse", "--show-toplevel")
        if os.path.realpath(os.path.join(top, "results", "dlscale_report")) != os.path.realpath(package_dir):
            return None
        return git("describe", "--always", "--dirty", "--abbrev=12") or None
    except (OSError, subprocess.SubprocessError):
        return None


def commit():
    """The commit this code came from (see the module comment), or "unknown"."""
    found = source_commit()
    if found:
        return found
    try:
        from ._build_info import COMMIT
    except ImportError:
        return "unknown"
    return COMMIT or "unknown"


def version_line(prog="dlscale-report"):
    return f"{prog} {__version__} (commit {commit()})"
