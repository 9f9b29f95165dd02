"""The PyTorch peers compute on the BLAS kernels dlscale computes on (drivers/cpu/blas_core.h):
they load the same libblas.so.3, so where dlscale selects other kernels than OpenBLAS chose on its
own, apply() starts the Python process again with the same OPENBLAS_CORETYPE. A user's own
OPENBLAS_CORETYPE, or DLSCALE_BLAS_CORE=keep, is left alone, as dlscale leaves it.
"""

import os
import subprocess
import sys


def software(dlscale):
    """The /system/software lines of `dlscale info` as {name: value}."""
    out = subprocess.run([dlscale, "info"], capture_output=True, text=True).stdout.splitlines()
    values, inside = {}, False
    for line in out:
        if line.startswith("Software"):
            inside = True
        elif inside and not line.startswith("  "):
            break
        elif inside:
            name, _, value = line.strip().partition(" ")
            values[name] = value.strip()
    return values


def apply(dlscale):
    """Before the first product: restart with dlscale's kernels where they differ from OpenBLAS's own."""
    if os.environ.get("OPENBLAS_CORETYPE") or os.environ.get("DLSCALE_BLAS_CORE") == "keep":
        return
    s = software(dlscale)
    used, chosen = s.get("blas_core", ""), s.get("blas_core_chosen", "")
    if used and chosen and used != chosen:
        os.environ["OPENBLAS_CORETYPE"] = used
        print(f"{os.path.basename(sys.argv[0])}: OPENBLAS_CORETYPE={used}, as dlscale selects on this CPU "
              f"(OpenBLAS chose {chosen})", file=sys.stderr, flush=True)
        os.execv(sys.executable, [sys.executable] + sys.argv)
