"""The include order of the source tree: each folder includes only itself and the folders below it.

The layers, lowest first, are declared here and nowhere else; docs/adding-a-driver.md ("The
harness") explains what each holds. A new folder must be placed in the order before it can be
used, so that no circle among folders can come back unnoticed.
"""

import os
import re
import sys
import tempfile
import unittest

SOURCE_DIR = os.environ.get("DLSCALE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))

# The libraries at the top of the tree, lowest first.
TOP_LAYERS = ["io", "schema", "workloads", "drivers", "suite", "project"]
# suite/'s folders, lowest first. The files at suite/'s top (errors.h, exit_code.h) serve every layer.
SUITE_LAYERS = ["process", "data", "matrix", "comm", "meters", "case", "record", "cli"]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
SOURCE_SUFFIXES = (".h", ".cpp", ".cu", ".cuh", ".h.in")


def layer_of(path):
    """(top folder, suite folder or None) of a path relative to the source tree."""
    parts = path.split("/")
    if parts[0] == "suite" and len(parts) > 2:
        return parts[0], parts[1]
    return parts[0], None


def rank(layer):
    top, sub = layer
    return (TOP_LAYERS.index(top), SUITE_LAYERS.index(sub) if sub is not None else -1)


def sources(root):
    for top in TOP_LAYERS:
        for folder, _, files in os.walk(os.path.join(root, top)):
            for name in files:
                if name.endswith(SOURCE_SUFFIXES):
                    full = os.path.join(folder, name)
                    yield os.path.relpath(full, root).replace(os.sep, "/"), full


def violations(root):
    """Every include of a higher layer, as 'file includes header'."""
    found = []
    for rel, full in sources(root):
        here = layer_of(rel)
        with open(full, encoding="utf-8") as f:
            text = f.read()
        for header in INCLUDE.findall(text):
            target = layer_of(header)
            if target[0] not in TOP_LAYERS:
                continue  # generated headers (dlscale_build_info.h) and third-party ones
            if rank(target) > rank(here):
                found.append(f"{rel} includes {header}")
    return found


class Layers(unittest.TestCase):
    def test_every_folder_is_placed(self):
        for top in TOP_LAYERS:
            self.assertTrue(os.path.isdir(os.path.join(SOURCE_DIR, top)), top)
        suite = os.path.join(SOURCE_DIR, "suite")
        folders = sorted(d for d in os.listdir(suite) if os.path.isdir(os.path.join(suite, d)) and d != "__pycache__")
        self.assertEqual(sorted(SUITE_LAYERS), folders, "a folder of suite/ missing from SUITE_LAYERS, or gone")

    def test_no_include_of_a_higher_layer(self):
        self.assertGreater(sum(1 for _ in sources(SOURCE_DIR)), 100)  # the walk found the tree
        self.assertEqual([], violations(SOURCE_DIR))

    def test_the_check_sees_a_violation(self):
        # A planted tree: a meter including the record, and io including a driver, are caught;
        # the record including a meter, a driver including io and suite/errors.h are not.
        files = {
            "suite/meters/peak.cpp": '#include "suite/record/case_fields.h"\n#include "suite/errors.h"\n',
            "suite/record/case_fields.cpp": '#include "suite/meters/peak.h"\n#include <mpi.h>\n',
            "suite/errors.h": '#include "dlscale_build_info.h"\n',
            "io/h5.cpp": '#include "drivers/driver.h"\n',
            "drivers/driver.cpp": '#include "io/h5.h"\n',
        }
        with tempfile.TemporaryDirectory() as root:
            for rel, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
                with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                    f.write(text)
            self.assertEqual(sorted(["suite/meters/peak.cpp includes suite/record/case_fields.h",
                                     "io/h5.cpp includes drivers/driver.h"]), sorted(violations(root)))


if __name__ == "__main__":
    sys.exit(unittest.main())
