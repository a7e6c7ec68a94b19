"""Plain-text tables for the command line."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

__all__ = ["format_rows", "format_table"]


def format_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """Left-aligned fixed-width table with a rule under the header."""
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(b, widths)) for b in body]
    return "\n".join(lines)


def format_rows(rows: Sequence[Any], header: Sequence[str], specs: Sequence[str]) -> str:
    """:func:`format_table` of dataclass rows: one column per field, in field order.

    Parameters
    ----------
    rows
        Dataclass instances of one type, with ``len(header)`` fields each.
    header
        The columns' titles, one per field.
    specs
        Format spec of each field's values, e.g. ``".2e"``; ``""`` writes ``str(value)``.

    Returns
    -------
    str
        The table: the header, a rule and one line per row.
    """
    if len(specs) != len(header):
        raise ValueError(f"got {len(header)} column titles but {len(specs)} format specs")
    body = [
        [
            format(getattr(row, field.name), spec)
            for field, spec in zip(dataclasses.fields(row), specs, strict=True)
        ]
        for row in rows
    ]
    return format_table(header, body)
