"""The places a new driver touches, as docs/adding-a-driver.md lists them ("Every place a driver
touches"), held against the source tree both ways:

- every file in the list exists and names each of the CPU backends built beside the reference
  driver (oneDNN and Kokkos): a file that is a place to add a driver names the ones added so far;
- every other file that names them all, outside the drivers' own folders, the documentation and
  the fuzz corpora, is one of NOT_PLACES below, each with the reason it names the drivers without
  being a place to add one. A file that starts listing the drivers fails here until it is added
  to the document's table or to NOT_PLACES.
"""

import os
import re
import unittest

SOURCE_DIR = os.path.abspath(os.environ.get("DLSCALE_SOURCE_DIR",
                                            os.path.join(os.path.dirname(__file__), "..", "..")))
DOC = os.path.join(SOURCE_DIR, "docs", "adding-a-driver.md")
SECTION = "## 7. Every place a driver touches"

# How each CPU backend is named in a file: its driver name, or its library's (Debian's package
# libdnnl-dev, CMake's DNNL::dnnl).
BACKENDS = {"onednn": re.compile(r"onednn|dnnl", re.IGNORECASE), "kokkos": re.compile(r"kokkos", re.IGNORECASE)}

# Files that name the drivers without being a place to add one.
NOT_PLACES = {
    "bench/CMakeLists.txt": "benches of particular drivers against their libraries and peers",
    "bench/kokkos_vs_cpu_drivers.cpp": "a bench comparing the CPU drivers it names",
    "bench/overlap_vs_blocking.cpp": "a bench whose figures name the drivers they were taken with",
    "drivers/driver.h": "the interface's comments name backends as examples",
    "scripts/test.sh": "comments on what the sanitizer stages skip; the lists are in tests/CMakeLists.txt",
    "tests/conformance/test_training_contract.cpp": "comments name the code paths it covers; "
                                                    "a new driver is picked up by itself",
    "tests/unit/test_utilisation.cpp": "driver names as sample data of a peak table",
    "tests/unit/test_driver_places.py": "this test: the backends' names are what it looks for",
}

# Never searched: each driver's own folders, the documentation (which names drivers throughout),
# data, and what builds and tools leave behind.
SKIPPED_DIRS = {".git", "build", "docs", "node_modules", "corpus", "__pycache__", ".hypothesis"}
SKIPPED_SUFFIXES = (".md", ".h5", ".png", ".svg", ".gz", ".bin", ".idx", ".pdf")


def listed_files():
    """The paths in the document's table (its first column; a cell may name several)."""
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    paths = []
    for line in text[start:end if end >= 0 else None].splitlines():
        if not line.startswith("| `"):
            continue
        first_cell = line.split("|")[1]
        paths += re.findall(r"`([^`]+)`", first_cell)
    return paths


def own_folders():
    """Each driver's folders, drivers/NAME and tests/NAME."""
    names = [d for d in os.listdir(os.path.join(SOURCE_DIR, "drivers"))
             if os.path.isdir(os.path.join(SOURCE_DIR, "drivers", d))]
    return {f"drivers/{n}" for n in names} | {f"tests/{n}" for n in names}


def files_naming_every_backend():
    skip_folders = own_folders()
    found = []
    for folder, dirs, files in os.walk(SOURCE_DIR):
        rel_folder = os.path.relpath(folder, SOURCE_DIR).replace(os.sep, "/")
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS and
                   (f"{rel_folder}/{d}" if rel_folder != "." else d) not in skip_folders]
        for name in files:
            if name.endswith(SKIPPED_SUFFIXES):
                continue
            path = os.path.join(folder, name)
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except (UnicodeDecodeError, OSError):
                continue
            if all(p.search(text) for p in BACKENDS.values()):
                found.append(os.path.relpath(path, SOURCE_DIR).replace(os.sep, "/"))
    return sorted(found)


class DriverPlaces(unittest.TestCase):
    def test_the_table_lists_places(self):
        listed = listed_files()
        self.assertGreater(len(listed), 10, "the table of places was not found")
        for path in listed:
            with self.subTest(path=path):
                full = os.path.join(SOURCE_DIR, path)
                self.assertTrue(os.path.isfile(full), f"{path} is listed but not in the tree")
                with open(full, encoding="utf-8") as f:
                    text = f.read()
                for backend, pattern in BACKENDS.items():
                    self.assertRegex(text, pattern, f"{path} is listed as a place a driver touches "
                                                    f"but does not name {backend}")

    def test_every_file_naming_the_drivers_is_listed_or_explained(self):
        listed = set(listed_files())
        for path in files_naming_every_backend():
            with self.subTest(path=path):
                self.assertTrue(path in listed or path in NOT_PLACES,
                                f"{path} names every CPU driver: add it to the table of "
                                f"docs/adding-a-driver.md ({SECTION[3:]}) or, if it is not a place to "
                                "add a driver, to NOT_PLACES in this test")

    def test_not_places_exist_and_are_not_listed(self):
        listed = set(listed_files())
        for path in NOT_PLACES:
            with self.subTest(path=path):
                self.assertTrue(os.path.isfile(os.path.join(SOURCE_DIR, path)), f"{path} is gone")
                self.assertNotIn(path, listed)


if __name__ == "__main__":
    unittest.main()
