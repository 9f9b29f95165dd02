"""A recording stand-in for the part of Spack's package API that
packaging/spack/dlscale/package.py uses, so that the recipe can be loaded and its cmake_args()
called where Spack is not installed.

It is not Spack. Directives (version, variant, depends_on, conflicts, `with when(...)`) are
recorded, not checked; a spec is a dictionary of variant values plus the dependencies given to
it; conditions understand only `+v`, `~v` and `v=a,b`, and anything else raises, so a recipe
that needs more of Spack fails the test loudly rather than being misread. define() and
define_from_variant() format flags the way Spack's CMake build system does
(-DNAME:BOOL=ON, -DNAME:STRING=a;b). CudaPackage contributes what Spack's does to a recipe:
the cuda and cuda_arch variants and a dependency on cuda under +cuda (cuda_arch_values is a
subset of Spack's list).
"""

import contextlib
import os
import re
import sys
import types

_CONDITION_TOKEN = re.compile(r"\s*(?:([+~])([A-Za-z0-9_]+)|([A-Za-z0-9_]+)=([A-Za-z0-9_,]+))")


def parse_condition(condition):
    """'+a~b c=1,2' -> [('+', 'a'), ('~', 'b'), ('=', 'c', ('1', '2'))]; raises on anything else."""
    tokens, pos = [], 0
    condition = condition or ""
    while pos < len(condition.rstrip()):
        m = _CONDITION_TOKEN.match(condition, pos)
        if not m:
            raise ValueError(f"condition {condition!r}: the stub understands only +v, ~v and v=a,b")
        if m.group(1):
            tokens.append((m.group(1), m.group(2)))
        else:
            tokens.append(("=", m.group(3), tuple(m.group(4).split(","))))
        pos = m.end()
    return tokens


class Recorder:
    """What the recipe's class body declared."""

    def __init__(self):
        self.versions = {}
        self.variants = {}
        self.dependencies = []  # (spec string, when or None, type)
        self.conflicts = []  # (spec string, when or None, msg)
        self.when_stack = []

    def condition(self, when):
        parts = [c for c in self.when_stack + [when] if c]
        return " ".join(parts) if parts else None


_recorder = None


def version(name, **kwargs):
    _recorder.versions[name] = kwargs


def variant(name, default=None, description="", values=None, multi=None, when=None, sticky=False):
    _recorder.variants[name] = dict(default=default, description=description, values=values,
                                    multi=multi, when=_recorder.condition(when))


def depends_on(spec, when=None, type=None):
    _recorder.dependencies.append((spec, _recorder.condition(when), type))


def conflicts(spec, when=None, msg=None):
    _recorder.conflicts.append((spec, _recorder.condition(when), msg))


@contextlib.contextmanager
def when(condition):
    _recorder.when_stack.append(condition)
    try:
        yield
    finally:
        _recorder.when_stack.pop()


def run_after(phase):
    def mark(method):
        method.run_after = phase
        return method
    return mark


def join_path(*parts):
    return os.path.join(*parts)


def filter_file(regex, repl, *filenames):
    """Line by line, as Spack's filter_file does."""
    pattern = re.compile(regex)
    for name in filenames:
        with open(name) as f:
            lines = f.readlines()
        with open(name, "w") as f:
            for line in lines:
                end = "\n" if line.endswith("\n") else ""
                f.write(pattern.sub(repl, line[:len(line) - len(end)]) + end)


class Prefix(str):
    """A path whose attributes are its subdirectories (prefix.share.dlscale), as in Spack."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Prefix(os.path.join(self, name))


def define(name, value):
    if isinstance(value, bool):
        return f"-D{name}:BOOL={'ON' if value else 'OFF'}"
    if isinstance(value, (list, tuple)):
        value = ";".join(str(v) for v in value)
    return f"-D{name}:STRING={value}"


class CMakePackage:
    """Spack's CMakePackage, as far as cmake_args() needs it. variant_to_cmake records, for each
    define_from_variant() call, the variant and the CMake variable it is passed as."""

    def __init__(self, spec, run_tests=False, prefix="/spack/opt/dlscale"):
        self.spec = spec
        self.run_tests = run_tests
        self.prefix = Prefix(prefix)
        self.variant_to_cmake = {}

    @classmethod
    def has_variant(cls, name):
        return name in all_variants(cls)

    def define(self, name, value):
        return define(name, value)

    def define_from_variant(self, name, variant=None):
        variant = variant or name.lower()
        if not self.has_variant(variant):
            raise KeyError(f'"{variant}" is not a variant of "{type(self).__name__}"')
        self.variant_to_cmake[variant] = name
        if variant not in self.spec.variants:  # a conditional variant whose condition fails
            return ""
        value = self.spec.variants[variant].value
        return define(name, sorted(value) if isinstance(value, (list, tuple)) else value)


class CudaPackage:
    cuda_arch_values = ("70", "80", "86", "89", "90", "90a", "100")
    stub_variants = {
        "cuda": dict(default=False, description="Build with CUDA", values=None, multi=None,
                     when=None),
        "cuda_arch": dict(default=("none",), description="CUDA architecture",
                          values=cuda_arch_values, multi=True, when="+cuda"),
    }
    stub_dependencies = [("cuda", "+cuda", None)]


def all_variants(cls):
    """The recipe's variants and those its base classes contribute."""
    merged = {}
    for base in reversed(cls.__mro__):
        merged.update(base.__dict__.get("stub_variants", {}))
        recorded = base.__dict__.get("_recorded")
        if recorded is not None:
            merged.update(recorded.variants)
    return merged


def all_dependencies(cls):
    """(spec, when, type) of every depends_on, the base classes' included."""
    deps = []
    for base in cls.__mro__:
        deps += base.__dict__.get("stub_dependencies", [])
        recorded = base.__dict__.get("_recorded")
        if recorded is not None:
            deps += recorded.dependencies
    return deps


class Variant:
    def __init__(self, value):
        self.value = value


class FakeSpec:
    """Variant values (bool, or a tuple for a multi-valued variant) and dependencies by name."""

    def __init__(self, variants, dependencies):
        self.variants = {name: Variant(value) for name, value in variants.items()}
        self._dependencies = dependencies

    def satisfies(self, condition):
        for token in parse_condition(condition):
            variant = self.variants.get(token[1])
            if variant is None:
                return False
            if token[0] == "+" and variant.value is not True:
                return False
            if token[0] == "~" and variant.value is not False:
                return False
            if token[0] == "=":
                have = variant.value if isinstance(variant.value, tuple) else (variant.value,)
                if not set(token[2]) <= set(have):
                    return False
        return True

    def __contains__(self, condition):
        return self.satisfies(condition)

    def __getitem__(self, name):
        """Only a dependency this spec has: KeyError for one the recipe does not depend on here."""
        return self._dependencies[name]


_MODULE_NAMES = ("spack", "spack.package", "spack_repo", "spack_repo.builtin",
                 "spack_repo.builtin.build_systems", "spack_repo.builtin.build_systems.cmake",
                 "spack_repo.builtin.build_systems.cuda")

_PACKAGE_API = dict(version=version, variant=variant, depends_on=depends_on, conflicts=conflicts,
                    when=when, run_after=run_after, join_path=join_path, filter_file=filter_file,
                    CMakePackage=CMakePackage, CudaPackage=CudaPackage)


def load_recipe(path, class_name):
    """Executes the recipe at `path` against this stand-in; returns its package class, with what
    its body declared in `_recorded`."""
    global _recorder
    _recorder = Recorder()
    saved = {name: sys.modules.get(name) for name in _MODULE_NAMES}
    modules = {name: types.ModuleType(name) for name in _MODULE_NAMES}
    for module in modules.values():
        module.__path__ = []  # a package, so that its submodules import
    modules["spack.package"].__dict__.update(_PACKAGE_API)
    modules["spack.package"].__all__ = list(_PACKAGE_API)
    modules["spack_repo.builtin.build_systems.cmake"].CMakePackage = CMakePackage
    modules["spack_repo.builtin.build_systems.cuda"].CudaPackage = CudaPackage
    sys.modules.update(modules)
    try:
        recipe = types.ModuleType("dlscale_recipe")
        recipe.__file__ = path
        with open(path) as f:
            # compile() + exec rather than an import: no __pycache__ beside the recipe.
            exec(compile(f.read(), path, "exec"), recipe.__dict__)
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    cls = getattr(recipe, class_name)
    cls._recorded = _recorder
    _recorder = None
    return cls
