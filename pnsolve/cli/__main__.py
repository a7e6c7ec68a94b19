"""``python -m pnsolve.cli``: the same as the ``pnsolve`` command."""

import sys

from .main import main

sys.exit(main())
