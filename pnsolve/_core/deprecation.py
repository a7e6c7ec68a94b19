"""Renamed public names that stay importable from their old place for a while.

A module that renamed ``Old`` to ``New`` keeps ``Old`` as a module attribute that warns::

    __getattr__ = renamed_attributes(__name__, {"Old": "New"})

``module.Old`` and ``from module import Old`` then return ``New`` itself (so ``isinstance``
checks and subclassing keep working) with a :class:`DeprecationWarning` naming ``New``.
Old names are not in ``__all__`` and not in the API reference.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Mapping

__all__ = ["renamed_attributes"]


def renamed_attributes(module: str, renamed: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` serving the old names ``renamed`` (old → new) of ``module``.

    An old name returns the module's object now called ``renamed[name]``, with a
    :class:`DeprecationWarning`; any other name raises the ``AttributeError`` Python would
    have raised.
    """
    renamed = dict(renamed)

    def __getattr__(name: str) -> object:
        new = renamed.get(name)
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} is deprecated and will be removed; it was renamed to "
            f"{module}.{new}, use that name",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(sys.modules[module], new)

    return __getattr__
