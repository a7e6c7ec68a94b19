"""``python -m pnsolve`` (also ``torchrun ... -m pnsolve``): the ``pnsolve`` command."""

import sys

from .cli.main import main

if __name__ == "__main__":
    sys.exit(main())
