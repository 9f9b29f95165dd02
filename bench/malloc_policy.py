"""The PyTorch yardsticks under the allocator setting of `dlscale run --malloc` (docs/metrics.md,
"The allocator"), so that both sides of a comparison free memory the same way.

glibc reads its malloc settings once, at start-up, from the environment: a script that wants
`keep` runs itself again with them set, before anything is allocated that matters.
"""

import os
import sys

# What `dlscale run --malloc keep` sets with mallopt (suite/process/allocator.cpp), as glibc's variables.
KEEP = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "2147483647"}
CHOICES = ("keep", "system")


def add_argument(parser):
    parser.add_argument("--malloc", choices=CHOICES, default="keep",
                        help="keep (glibc keeps freed memory, dlscale's default) or system (the allocator as the "
                             "environment set it), as dlscale run --malloc")


def apply(policy):
    """Re-executes this script with glibc's `keep` settings when they are asked for and not yet
    in effect; `system` changes nothing."""
    if policy != "keep" or all(os.environ.get(k) == v for k, v in KEEP.items()):
        return
    os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, **KEEP))
