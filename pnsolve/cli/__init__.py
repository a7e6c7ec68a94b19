"""The ``pnsolve`` command line: ``demo``, ``fit``, ``sample``, ``bench`` (``pnsolve --help``).

The top of the layers: command-line apps built on the library, never imported by it.
"""

from .main import main

__all__ = ["main"]
