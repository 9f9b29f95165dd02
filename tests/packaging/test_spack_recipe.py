"""The Spack recipe (packaging/spack/dlscale/package.py) and the module file templates
(packaging/modules/) against the project's CMake files.

Spack is not installed where these tests run, so this is not a Spack build: the recipe is
loaded with spack_stub.py, a small recording stand-in for Spack's package API, and the tests
check its structure and its mapping onto CMake, not whether Spack concretizes or builds it.
They check that:
  - every variant maps to a CMake option or cache variable the project declares, and every
    DLSCALE_WITH_<X> backend option has a variant (a new backend without one fails here);
  - the variant defaults are those of the cpu preset;
  - every find_package()/find_library() of the project has a Spack dependency, each backend's
    dependencies depend on its variant, and cuda_arch reaches every CUDA dependency;
  - cmake_args() gives the expected -D flags for a few variant combinations, and every variable
    it sets is a project cache variable or a hint named in docs/building.md;
  - both module templates hold the @PREFIX@ placeholder and set PATH and DLSCALE_SHARE like the
    recipe's run environment (and, where tclsh or lua is installed, evaluate to those values).
The project has install() rules, which both `spack install` and the module files need
(test_project_has_install_rules; tests/install checks the installed layout itself).

Run: cd tests/packaging && /usr/bin/python3 -m unittest -v test_spack_recipe
(CTest sets DLSCALE_SOURCE_DIR; without it the source tree is the one this file is in.)
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import spack_stub  # noqa: E402  (needs the path above)

SOURCE = os.environ.get("DLSCALE_SOURCE_DIR") or os.path.normpath(os.path.join(HERE, "..", ".."))
RECIPE = os.path.join(SOURCE, "packaging", "spack", "dlscale", "package.py")
MODULES = os.path.join(SOURCE, "packaging", "modules")
BUILDING_MD = os.path.join(SOURCE, "docs", "building.md")
TCLSH = shutil.which("tclsh")
LUA = next(filter(None, map(shutil.which, ("lua", "lua5.4", "lua5.3", "lua5.1"))), None)

# What each find_package()/find_library() of the project is called in Spack. A name missing here
# fails test_every_cmake_dependency_has_a_spack_dependency: add the dependency to the recipe too.
SPACK_NAME = {
    "MPI": "mpi",
    "HDF5": "hdf5",
    "CLI11": "cli11",
    "tomlplusplus": "tomlplusplus",
    "fmt": "fmt",
    "OpenMP": None,  # the compiler's
    "Torch": "py-torch",
    "dnnl": "onednn",
    "CUDAToolkit": "cuda",
    "cudnn": "cudnn",
    "nccl": "nccl",
    "Kokkos": "kokkos",
    "KokkosKernels": "kokkos-kernels",
    "GTest": "googletest",
    "Python3": "python",
    "PkgConfig": "pkgconfig",  # how project/ finds SimGrid
}

# The Spack packages each backend variant brings in.
BACKEND_PACKAGES = {
    "torch": {"py-torch"},
    "onednn": {"onednn"},
    "kokkos": {"kokkos", "kokkos-kernels"},
    "cuda": {"cuda", "cudnn", "nccl"},
    "simgrid": {"simgrid"},
}


# --- the project's CMake files -------------------------------------------------------------

def _strip_comments(text):
    """Drops # comments (line comments; the project has no #[[ ]] bracket comments)."""
    out, i, in_quote = [], 0, False
    while i < len(text):
        c = text[i]
        if in_quote:
            if c == "\\":
                out.append(text[i:i + 2])
                i += 2
                continue
            in_quote = c != '"'
        elif c == '"':
            in_quote = True
        elif c == "#":
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _commands(text):
    """[(command name in lower case, argument text)] of one CMake file."""
    text, commands, pos = _strip_comments(text), [], 0
    start = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
    while True:
        m = start.search(text, pos)
        if not m:
            return commands
        i, depth, in_quote = m.end(), 1, False
        while depth:
            c = text[i]
            if in_quote:
                if c == "\\":
                    i += 1
                elif c == '"':
                    in_quote = False
            elif c == '"':
                in_quote = True
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            i += 1
        commands.append((m.group(1).lower(), text[m.end():i - 1]))
        pos = i


def _cmake_files(root):
    """The CMake files of the source tree (build trees, hidden and cache folders left out)."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(("build", ".", "__pycache__"))]
        for name in filenames:
            if name == "CMakeLists.txt" or name.endswith(".cmake"):
                with open(os.path.join(dirpath, name)) as f:
                    yield f.read()


def _words(args):
    return [w[1:-1] if w.startswith('"') else w
            for w in re.findall(r'"(?:[^"\\]|\\.)*"|[^\s"]+', args)]


class CMakeProject:
    """The cache variables (option(), set(... CACHE ...), BUILD_TESTING from include(CTest)) and
    the find_package()/find_library() names of every CMake file under `root`, with foreach()
    loops over literal items expanded (the backend options are declared in one)."""

    def __init__(self, root):
        self.cache_variables, self.packages, self.libraries = set(), set(), set()
        for text in _cmake_files(root):
            self._walk(_commands(text))

    def _walk(self, commands):
        i = 0
        while i < len(commands):
            name, args = commands[i]
            if name != "foreach":
                self._record(name, _words(args))
                i += 1
                continue
            depth, j = 1, i + 1
            while depth:
                depth += {"foreach": 1, "endforeach": -1}.get(commands[j][0], 0)
                j += 1
            body = commands[i + 1:j - 1]
            var, *items = _words(args)
            if items[:2] == ["IN", "ITEMS"]:
                items = items[2:]
            elif items[:1] in (["IN"], ["RANGE"]):
                items = []
            if not items:  # lists and ranges are not expanded: the body is read once as it is
                self._walk(body)
            for item in items:
                self._walk([(n, a.replace("${%s}" % var, item)) for n, a in body])
            i = j

    def _record(self, name, words):
        if name == "option" and words:
            self.cache_variables.add(words[0])
        elif name == "set" and "CACHE" in words[1:]:
            self.cache_variables.add(words[0])
        elif name == "include" and words[:1] == ["CTest"]:
            self.cache_variables.add("BUILD_TESTING")
        elif name == "find_package" and words:
            self.packages.add(words[0])
        elif name == "find_library" and len(words) > 1:
            self.libraries.add(words[2] if words[1] == "NAMES" else words[1])


# --- the recipe under the stand-in ---------------------------------------------------------

TORCH_CMAKE = "/spack/opt/py-torch/lib/python3.11/site-packages/torch/share/cmake"
NVCC_WRAPPER = "/spack/opt/kokkos-nvcc-wrapper/bin/nvcc_wrapper"


def _package_name(spec):
    return re.match(r"[a-z0-9][a-z0-9-]*", spec).group(0)


def _fake_dependency(name, constraints):
    """A dependency as cmake_args() sees it: a prefix, and for py-torch, kokkos and python the
    attributes their Spack packages provide (py-torch's cmake_prefix_paths, Kokkos' kokkos_cxx,
    which is nvcc_wrapper when Kokkos is built +wrapper, python's command)."""
    prefix = spack_stub.Prefix(f"/spack/opt/{name}")
    package = types.SimpleNamespace()
    if name == "py-torch":
        package.cmake_prefix_paths = [TORCH_CMAKE]
    if name == "kokkos":
        wrapper = any("+wrapper" in c for c in constraints)
        package.kokkos_cxx = NVCC_WRAPPER if wrapper else "/usr/bin/g++"
    return types.SimpleNamespace(prefix=prefix, package=package, constraints=constraints,
                                 command=types.SimpleNamespace(path=prefix + "/bin/python3"))


def make_spec(cls, run_tests=False, **chosen):
    """The spec of `cls` with the variants in `chosen` and the defaults for the rest; its
    dependencies are those whose `when` holds (test-only ones only with run_tests)."""
    declared = spack_stub.all_variants(cls)
    unknown = set(chosen) - set(declared)
    if unknown:
        raise KeyError(f"not variants of the recipe: {sorted(unknown)}")
    variants = {n: chosen.get(n, v["default"]) for n, v in declared.items() if v["when"] is None}
    probe = spack_stub.FakeSpec(variants, {})
    for n, v in declared.items():
        if v["when"] is not None and probe.satisfies(v["when"]):
            value = chosen.get(n, v["default"])
            variants[n] = (value,) if isinstance(value, str) else tuple(value)
    constraints = {}
    for dep, _, deptype in active_dependencies(cls, spack_stub.FakeSpec(variants, {})):
        if deptype != "test" or run_tests:
            constraints.setdefault(_package_name(dep), []).append(dep)
    dependencies = {n: _fake_dependency(n, c) for n, c in constraints.items()}
    return spack_stub.FakeSpec(variants, dependencies)


def active_dependencies(cls, spec):
    return [d for d in spack_stub.all_dependencies(cls) if d[1] is None or spec.satisfies(d[1])]


def cmake_args(cls, run_tests=False, **chosen):
    pkg = cls(make_spec(cls, run_tests=run_tests, **chosen), run_tests=run_tests)
    return [a for a in pkg.cmake_args() if a], pkg


def _defined_names(args):
    return {re.match(r"-D([A-Za-z0-9_]+)", a).group(1) for a in args}


PROJECT = CMakeProject(SOURCE)
Dlscale = spack_stub.load_recipe(RECIPE, "Dlscale")
RECIPE_VARIANTS = set(Dlscale._recorded.variants)


class ProjectParsingTest(unittest.TestCase):
    """The parser above sees what the checks below rely on (so they cannot pass on nothing)."""

    def test_finds_the_backend_options_and_the_test_switch(self):
        for name in ("DLSCALE_WITH_TORCH", "DLSCALE_WITH_ONEDNN", "DLSCALE_WITH_CUDA",
                     "DLSCALE_WITH_KOKKOS", "DLSCALE_BUILD_BENCH", "BUILD_TESTING",
                     "DLSCALE_PYTHON"):
            self.assertIn(name, PROJECT.cache_variables)

    def test_finds_the_dependencies(self):
        for name in ("MPI", "HDF5", "Torch", "dnnl", "CUDAToolkit", "Kokkos", "GTest"):
            self.assertIn(name, PROJECT.packages)
        self.assertLessEqual({"cudnn", "nccl"}, PROJECT.libraries)


class VariantTest(unittest.TestCase):
    def test_every_variant_maps_to_a_project_cmake_option(self):
        _, pkg = cmake_args(Dlscale, cuda=True, cuda_arch="90")
        for variant in RECIPE_VARIANTS | {"cuda"}:
            self.assertIn(variant, pkg.variant_to_cmake,
                          f"variant {variant} is not passed to CMake with define_from_variant")
            self.assertIn(pkg.variant_to_cmake[variant], PROJECT.cache_variables,
                          f"variant {variant} maps to {pkg.variant_to_cmake[variant]}, "
                          "which no CMake file of the project declares")

    def test_every_backend_option_has_a_variant(self):
        _, pkg = cmake_args(Dlscale)
        mapped = set(pkg.variant_to_cmake.values())
        for option in sorted(v for v in PROJECT.cache_variables if v.startswith("DLSCALE_WITH_")):
            self.assertIn(option, mapped,
                          f"{option} has no variant in packaging/spack/dlscale/package.py: add "
                          "one, its dependencies and its cmake_args() line")

    def test_defaults_follow_the_cpu_preset(self):
        with open(os.path.join(SOURCE, "CMakePresets.json")) as f:
            presets = {p["name"]: p for p in json.load(f)["configurePresets"]}
        cpu = presets["cpu"].get("cacheVariables", {})
        _, pkg = cmake_args(Dlscale)
        variants = spack_stub.all_variants(Dlscale)
        for variant, option in pkg.variant_to_cmake.items():
            if option.startswith("DLSCALE_WITH_"):
                # AUTO (or unset) is "on where found"; a Spack build finds what it depends on.
                expected = cpu.get(option, "AUTO") in ("AUTO", "ON")
                self.assertIs(variants[variant]["default"], expected, f"default of {variant}")

    def test_cuda_needs_an_architecture(self):
        self.assertIn(("cuda_arch=none", "+cuda"), [c[:2] for c in Dlscale._recorded.conflicts])


class DependencyTest(unittest.TestCase):
    def test_every_cmake_dependency_has_a_spack_dependency(self):
        declared = {_package_name(d[0]) for d in spack_stub.all_dependencies(Dlscale)}
        for name in sorted(PROJECT.packages | PROJECT.libraries):
            self.assertIn(name, SPACK_NAME, f"the project finds {name}: add it to the recipe "
                                            "and to SPACK_NAME in this test")
            if SPACK_NAME[name]:
                self.assertIn(SPACK_NAME[name], declared, f"{name} has no depends_on in the recipe")

    def test_the_always_needed_libraries(self):
        deps = {_package_name(d[0]): d for d in active_dependencies(Dlscale, make_spec(
            Dlscale, torch=False, onednn=False, kokkos=False))}
        for name in ("mpi", "hdf5", "cli11", "tomlplusplus", "fmt", "python", "py-h5py",
                     "py-numpy", "py-matplotlib", "py-scipy", "googletest"):
            self.assertIn(name, deps)
        for name in ("python", "py-h5py", "py-numpy", "py-matplotlib", "py-scipy"):
            self.assertIn("run", deps[name][2], f"{name} is needed by dlscale-report at run time")
        self.assertEqual(deps["googletest"][2], "test")

    def test_hdf5_is_parallel_1_10_to_1_14(self):
        hdf5 = [d[0] for d in spack_stub.all_dependencies(Dlscale) if _package_name(d[0]) == "hdf5"]
        self.assertEqual(len(hdf5), 1)
        self.assertIn("@1.10:1.14", hdf5[0])
        self.assertIn("+mpi", hdf5[0])

    def test_backend_dependencies_follow_their_variant(self):
        everything = dict(torch=True, onednn=True, kokkos=True, cuda=True, cuda_arch="90")
        for variant, packages in BACKEND_PACKAGES.items():
            for on in (True, False):
                chosen = dict(everything, **{variant: on})
                if variant == "cuda" and not on:
                    del chosen["cuda_arch"]
                spec = make_spec(Dlscale, **chosen)
                names = {_package_name(d[0]) for d in active_dependencies(Dlscale, spec)}
                if on:
                    self.assertLessEqual(packages, names, f"+{variant}")
                else:
                    self.assertFalse(packages & names, f"~{variant} depends on {packages & names}")

    def test_cpu_build_asks_for_cpu_libraries(self):
        spec = make_spec(Dlscale)
        self.assertIn("py-torch~cuda", spec["py-torch"].constraints)
        self.assertIn("kokkos+openmp", spec["kokkos"].constraints)
        self.assertIn("kokkos-kernels+openmp+blas", spec["kokkos-kernels"].constraints)

    def test_cuda_build_asks_for_cuda_libraries(self):
        spec = make_spec(Dlscale, cuda=True, cuda_arch="90")
        self.assertIn("py-torch+cuda+cudnn+nccl", spec["py-torch"].constraints)
        self.assertIn("kokkos+cuda+wrapper+cuda_lambda", spec["kokkos"].constraints)
        self.assertIn("kokkos-kernels+cuda+cublas", spec["kokkos-kernels"].constraints)

    def test_cuda_arch_reaches_every_cuda_dependency(self):
        for arch in spack_stub.CudaPackage.cuda_arch_values:
            spec = make_spec(Dlscale, cuda=True, cuda_arch=arch)
            for name in ("nccl", "py-torch", "kokkos"):
                self.assertIn(f"{name} cuda_arch={arch}", spec[name].constraints)


class CMakeArgsTest(unittest.TestCase):
    def test_default_is_the_cpu_build(self):
        args, _ = cmake_args(Dlscale)
        self.assertCountEqual(args, [
            "-DDLSCALE_WITH_TORCH:BOOL=ON",
            "-DDLSCALE_WITH_ONEDNN:BOOL=ON",
            "-DDLSCALE_WITH_CUDA:BOOL=OFF",
            "-DDLSCALE_WITH_KOKKOS:BOOL=ON",
            "-DDLSCALE_WITH_SIMGRID:BOOL=ON",
            "-DDLSCALE_BUILD_BENCH:BOOL=OFF",
            "-DBUILD_TESTING:BOOL=OFF",
            "-DMPI_HOME:STRING=/spack/opt/mpi",
            "-DHDF5_ROOT:STRING=/spack/opt/hdf5",
            f"-DTorch_DIR:STRING={TORCH_CMAKE}/Torch",
            "-Ddnnl_ROOT:STRING=/spack/opt/onednn",
            "-DKokkos_ROOT:STRING=/spack/opt/kokkos",
            "-DKokkosKernels_ROOT:STRING=/spack/opt/kokkos-kernels",
        ])

    def test_reference_driver_only(self):
        args, _ = cmake_args(Dlscale, torch=False, onednn=False, kokkos=False, simgrid=False, bench=True)
        self.assertCountEqual(args, [
            "-DDLSCALE_WITH_TORCH:BOOL=OFF",
            "-DDLSCALE_WITH_ONEDNN:BOOL=OFF",
            "-DDLSCALE_WITH_CUDA:BOOL=OFF",
            "-DDLSCALE_WITH_KOKKOS:BOOL=OFF",
            "-DDLSCALE_WITH_SIMGRID:BOOL=OFF",
            "-DDLSCALE_BUILD_BENCH:BOOL=ON",
            "-DBUILD_TESTING:BOOL=OFF",
            "-DMPI_HOME:STRING=/spack/opt/mpi",
            "-DHDF5_ROOT:STRING=/spack/opt/hdf5",
        ])

    def test_cuda_with_kokkos(self):
        args, _ = cmake_args(Dlscale, torch=False, onednn=False, cuda=True, cuda_arch=("90", "80"))
        self.assertIn("-DDLSCALE_WITH_CUDA:BOOL=ON", args)
        self.assertIn("-DDLSCALE_WITH_KOKKOS:BOOL=ON", args)
        self.assertIn("-DCMAKE_CUDA_ARCHITECTURES:STRING=80;90", args)
        self.assertIn("-DCUDAToolkit_ROOT:STRING=/spack/opt/cuda", args)
        self.assertIn("-DCUDNN_ROOT:STRING=/spack/opt/cudnn", args)
        self.assertIn("-DNCCL_ROOT:STRING=/spack/opt/nccl", args)
        # Kokkos +wrapper: nvcc_wrapper compiles all of dlscale.
        self.assertIn(f"-DCMAKE_CXX_COMPILER:STRING={NVCC_WRAPPER}", args)

    def test_cuda_without_kokkos_keeps_the_compiler(self):
        args, _ = cmake_args(Dlscale, kokkos=False, cuda=True, cuda_arch="90")
        self.assertNotIn("CMAKE_CXX_COMPILER", _defined_names(args))
        self.assertNotIn("Kokkos_ROOT", _defined_names(args))

    def test_cpu_build_sets_no_cuda_variable(self):
        args, _ = cmake_args(Dlscale)
        cuda = {n for n in _defined_names(args) if "CUDA" in n.upper()}
        self.assertEqual(cuda, {"DLSCALE_WITH_CUDA"})

    def test_tests_only_with_spack_install_test(self):
        args, _ = cmake_args(Dlscale, run_tests=True)
        self.assertIn("-DBUILD_TESTING:BOOL=ON", args)
        self.assertIn("-DDLSCALE_PYTHON:STRING=/spack/opt/python/bin/python3", args)

    def test_every_variable_set_is_declared_or_documented(self):
        with open(BUILDING_MD) as f:
            building = f.read()
        combinations = [dict(), dict(torch=False, onednn=False, kokkos=False),
                        dict(cuda=True, cuda_arch="90")]
        for chosen in combinations:
            for run_tests in (False, True):
                args, _ = cmake_args(Dlscale, run_tests=run_tests, **chosen)
                for name in _defined_names(args):
                    # Named as a word, or after -D (where \b does not match).
                    documented = re.search(rf"(?:\b|(?<=-D)){name}\b", building)
                    self.assertTrue(name in PROJECT.cache_variables or documented,
                                    f"cmake_args() sets {name}, which the project neither declares "
                                    "nor documents in docs/building.md")


class InstallTest(unittest.TestCase):
    def test_run_environment_sets_dlscale_share(self):
        pkg = Dlscale(make_spec(Dlscale), prefix="/spack/opt/dlscale")
        env = types.SimpleNamespace(values={})
        env.set = lambda name, value: env.values.__setitem__(name, value)
        pkg.setup_run_environment(env)
        self.assertEqual(env.values, {"DLSCALE_SHARE": "/spack/opt/dlscale/share/dlscale"})

    def test_installed_report_runs_spack_python(self):
        with tempfile.TemporaryDirectory() as prefix:
            os.makedirs(os.path.join(prefix, "bin"))
            script = os.path.join(prefix, "bin", "dlscale-report")
            shutil.copy(os.path.join(SOURCE, "results", "dlscale-report"), script)
            Dlscale(make_spec(Dlscale), prefix=prefix).use_spack_python()
            with open(script) as f:
                lines = f.read().splitlines()
            with open(os.path.join(SOURCE, "results", "dlscale-report")) as f:
                original = f.read().splitlines()
            self.assertEqual(lines, ["#!/spack/opt/python/bin/python3"] + original[1:])

    def test_nothing_to_fix_without_the_script(self):
        with tempfile.TemporaryDirectory() as prefix:
            Dlscale(make_spec(Dlscale), prefix=prefix).use_spack_python()  # must not raise

    def test_project_has_install_rules(self):
        # spack install runs the install step (`make install`), which needs install() rules
        # putting dlscale and dlscale-report into bin/ and the Slurm templates into
        # share/dlscale/, where the module files and DLSCALE_SHARE point (tests/install checks
        # that layout on a real `cmake --install`).
        commands = {name for text in _cmake_files(SOURCE) for name, _ in _commands(text)}
        self.assertIn("install", commands)


class ModuleFileTest(unittest.TestCase):
    PREFIX = "/opt/site/dlscale/0.1.0"

    def _template(self, name):
        with open(os.path.join(MODULES, name)) as f:
            return f.read()

    def _filled(self, name, directory):
        text = self._template(name).replace("@PREFIX@", self.PREFIX).replace("@VERSION@", "0.1.0")
        self.assertIsNone(re.search(r"@[A-Z_]+@", text), f"{name}: a placeholder is left")
        path = os.path.join(directory, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_templates_hold_the_prefix_placeholder(self):
        for name in ("dlscale.lua", "dlscale.tcl"):
            self.assertIn("@PREFIX@", self._template(name), name)

    def test_lua_sets_path_and_share(self):
        text = self._template("dlscale.lua")
        self.assertRegex(text, r'prepend_path\("PATH", pathJoin\(prefix, "bin"\)\)')
        self.assertRegex(text, r'setenv\("DLSCALE_SHARE", pathJoin\(prefix, "share", "dlscale"\)\)')

    def test_tcl_sets_path_and_share(self):
        text = self._template("dlscale.tcl")
        self.assertTrue(text.startswith("#%Module"), "environment-modules needs #%Module first")
        self.assertRegex(text, r"prepend-path\s+PATH\s+\$prefix/bin")
        self.assertRegex(text, r"setenv\s+DLSCALE_SHARE\s+\$prefix/share/dlscale")

    def _evaluate(self, interpreter, driver, template):
        """Runs `driver` (stand-ins for the module commands, then the filled template) and
        returns the variables the module set, and what its help printed."""
        with tempfile.TemporaryDirectory() as tmp:
            path = self._filled(template, tmp)
            script = os.path.join(tmp, "driver")
            with open(script, "w") as f:
                f.write(driver)
            out = subprocess.run([interpreter, script, path], capture_output=True, text=True,
                                 check=True)
        return dict(line.split("=", 1) for line in out.stdout.splitlines()), out.stderr

    EXPECTED = {"PATH": f"{PREFIX}/bin", "DLSCALE_SHARE": f"{PREFIX}/share/dlscale"}

    @unittest.skipUnless(TCLSH, "no tclsh")
    def test_tcl_evaluates_to_path_and_share(self):
        driver = r"""
            array set recorded {}
            proc prepend-path {var value args} { set ::recorded($var) $value }
            proc setenv {var value} { set ::recorded($var) $value }
            foreach cmd {module-whatis conflict prereq module} { proc $cmd {args} {} }
            source [lindex $argv 0]
            ModulesHelp
            foreach name [lsort [array names recorded]] { puts "$name=$recorded($name)" }
        """
        variables, help_text = self._evaluate(TCLSH, driver, "dlscale.tcl")
        self.assertEqual(variables, self.EXPECTED)
        self.assertIn("dlscale 0.1.0", help_text)  # ModulesHelp prints to stderr

    @unittest.skipUnless(LUA, "no lua")
    def test_lua_evaluates_to_path_and_share(self):
        driver = """
            local recorded = {}
            function prepend_path(var, value) recorded[var] = value end
            function setenv(var, value) recorded[var] = value end
            function pathJoin(...) return (table.concat({...}, "/"):gsub("//+", "/")) end
            function help(text) io.stderr:write(text) end
            function whatis() end
            function depends_on() end
            dofile(arg[1])
            local names = {}
            for name in pairs(recorded) do names[#names + 1] = name end
            table.sort(names)
            for _, name in ipairs(names) do print(name .. "=" .. recorded[name]) end
        """
        variables, help_text = self._evaluate(LUA, driver, "dlscale.lua")
        self.assertEqual(variables, self.EXPECTED)
        self.assertIn("dlscale 0.1.0", help_text)


if __name__ == "__main__":
    unittest.main()
