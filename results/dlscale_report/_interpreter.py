"""Which Python runs the dlscale-report script (results/dlscale-report, P/bin/dlscale-report).

The script starts with `#!/usr/bin/env python3`, so it starts under the first python3 on PATH;
on a shared machine that is often a pyenv, conda or module Python without h5py, while Debian's
/usr/bin/python3 has it (python3-h5py, scripts/setup-deps.sh). choose() keeps the Python it
runs under when that one has h5py, numpy and matplotlib; otherwise it runs the script again,
with the same arguments, under the first of these that has them:

  $DLSCALE_PYTHON              a path, or a command name looked up on PATH
  the build's DLSCALE_PYTHON   for the source tree, the CMake cache of build/current; for an
                               installed copy, _build_info.PYTHON (written by cmake --install)
  /usr/bin/python3

When it switches it says so in one line on stderr, and only then. When no candidate has all
three, the first one with h5py and numpy will do (matplotlib is only for plots); when none has
those, the script stays where it is and cli.py names what is missing and exits 2.

The new process replaces this one (exec), so its exit status and its output are the tool's.
DLSCALE_PYTHON_CHOSEN holds the id of a process that has been re-executed: exec keeps the id,
so the re-executed script does not choose again even if its Python disagrees with the probe
that chose it (a wrapper script, a broken install); nor does it when that id is its parent's, a
wrapper that starts Python as a child. The script takes the variable out of its environment, so
whatever it starts chooses for itself.

Standard library only: it runs before anything else is imported.
"""

import importlib.util
import os
import shutil
import subprocess
import sys

WANTED = ("h5py", "numpy", "matplotlib")
NEEDED = ("h5py", "numpy")  # every command; matplotlib only for the figures and the report
SYSTEM_PYTHON = "/usr/bin/python3"
GUARD = "DLSCALE_PYTHON_CHOSEN"

# Run by each candidate: prints the modules of its arguments that it cannot find. find_spec
# locates a module without importing it (h5py and matplotlib take a while to import); one that
# is there but fails to import is left for cli.py to name.
_PROBE = ("import importlib.util, sys\n"
          "for name in sys.argv[1:]:\n"
          "    if importlib.util.find_spec(name) is None:\n"
          "        print(name)\n")


def _lacks_here(modules):
    missing = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def _lacks(python, modules):
    """The modules that `python` cannot find, or None when it does not run."""
    try:
        proc = subprocess.run([python, "-c", _PROBE] + list(modules), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              universal_newlines=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.split() if proc.returncode == 0 else None


def build_python(package_dir=os.path.dirname(os.path.realpath(__file__))):
    """The DLSCALE_PYTHON the build was configured with, or None.

    An installed copy carries it in _build_info.py; the source tree's package (results/ of the
    checkout) reads the CMake cache of build/current, where scripts/build.sh points it.
    """
    try:
        from ._build_info import PYTHON
        return PYTHON or None
    except ImportError:
        pass
    cache = os.path.join(os.path.dirname(os.path.dirname(package_dir)), "build", "current", "CMakeCache.txt")
    try:
        with open(cache, encoding="utf-8", errors="replace") as f:
            for line in f:
                name, _, value = line.rstrip("\n").partition("=")
                if name.split(":")[0] == "DLSCALE_PYTHON":
                    return value or None
    except OSError:
        pass
    return None


def candidates(configured):
    """(path, where it came from) of each Python to try, in order, without the running one."""
    seen = {os.path.abspath(sys.executable)} if sys.executable else set()
    found = []
    for python, origin in ((os.environ.get("DLSCALE_PYTHON"), "$DLSCALE_PYTHON"),
                           (configured, "the build's DLSCALE_PYTHON"),
                           (SYSTEM_PYTHON, "the system Python")):
        path = shutil.which(python) if python else None
        if path and os.path.abspath(path) not in seen:
            seen.add(os.path.abspath(path))
            found.append((os.path.abspath(path), origin))
    return found


def choose(prog):
    """Returns when this Python will do; otherwise replaces the process (see the module doc)."""
    if os.environ.pop(GUARD, None) in (str(os.getpid()), str(os.getppid())):
        return  # chosen already; what it lacks, cli.py names
    missing = _lacks_here(WANTED)
    if not missing:
        return
    best = fallback = None
    for python, origin in candidates(build_python()):
        lacks = _lacks(python, WANTED)
        if lacks is None:
            continue
        if not lacks:
            best = (python, origin)
            break
        if fallback is None and not set(lacks) & set(NEEDED):
            fallback = (python, origin)
    if best is None and set(missing) & set(NEEDED):
        best = fallback
    if best is None:
        return
    python, origin = best
    print(f"{prog}: using {python} ({origin}): {sys.executable} lacks {', '.join(missing)}",
          file=sys.stderr, flush=True)
    sys.stdout.flush()
    os.environ[GUARD] = str(os.getpid())
    try:
        os.execv(python, [python, sys.argv[0]] + sys.argv[1:])
    except OSError:
        os.environ.pop(GUARD, None)  # stay; cli.py names what is missing here
