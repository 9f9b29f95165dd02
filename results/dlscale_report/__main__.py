"""`python -m dlscale_report ...` runs the same CLI as the dlscale-report script."""

import sys

from .cli import main

sys.exit(main())
