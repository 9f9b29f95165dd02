"""Build hook for pyproject.toml: record the source commit in the installed package.

Everything else is declared in pyproject.toml. build_py writes dlscale_report/_build_info.py
into the build tree only (never into the sources) with `git describe` of the checkout this is
built from, or nothing when it is not built from a checkout (`--version` then says
"unknown"). pip builds in this directory, so build/ can hold the package from an earlier
install; it is emptied first, or a module deleted since would be installed again.
"""

import importlib.util
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _source_commit():
    # By path: importing the package would import h5py, which building must not need.
    spec = importlib.util.spec_from_file_location(
        "_dlscale_report_version", os.path.join(HERE, "dlscale_report", "_version.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.source_commit(os.path.join(HERE, "dlscale_report"))


class BuildPyWithCommit(build_py):
    def run(self):
        shutil.rmtree(os.path.join(self.build_lib, "dlscale_report"), ignore_errors=True)
        super().run()
        commit = _source_commit()
        if commit and not self.dry_run:
            path = os.path.join(self.build_lib, "dlscale_report", "_build_info.py")
            with open(path, "w", encoding="utf-8") as f:
                f.write('"""Written by results/setup.py when this copy was built."""\n\n'
                        f"COMMIT = {commit!r}\n")


setup(cmdclass={"build_py": BuildPyWithCommit})
