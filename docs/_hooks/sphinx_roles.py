"""Griffe extension: render Sphinx cross-reference roles in pnsolve's docstrings.

pnsolve's numpy-style docstrings use Sphinx roles such as
``:class:`~pnsolve.linops.KernelMatrix``` or ``:meth:`solve```. mkdocstrings does
not understand them, so without this extension they appear literally on the site.
Before a docstring is parsed, every role is replaced by an *optional*
mkdocs-autorefs reference::

    <autoref identifier="pnsolve.kernels.kernel_matrix.KernelMatrix" optional>
      <code>KernelMatrix</code></autoref>

(on one line)

autorefs turns it into a link when the target is rendered somewhere on the site
and into plain code otherwise (optional references never fail ``mkdocs --strict``).
Names are resolved the way Sphinx does: relative names first in the object that
owns the docstring, then in its parents (class, module, packages); ``~`` shows
only the last component; ``Title <target>`` sets the text; a leading ``!``
suppresses the link.

The source docstrings are left untouched: only griffe's in-memory copy changes.
Registered in ``mkdocs.yml`` under the python handler's ``extensions`` option.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

ROLES = ("class", "func", "meth", "attr", "mod", "data", "exc", "obj", "const", "type")

ROLE_RE = re.compile(
    r"(?<![\w`]):(?:py:)?(?P<role>" + "|".join(ROLES) + r"):`(?P<body>[^`]+)`(?!`)"
)
"""A Sphinx Python-domain role: ``:class:`target```, ``:py:func:`~a.b```, ..."""

_TITLE_RE = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$", flags=re.S)


def parse_role(body: str) -> tuple[str, str, bool]:
    """Split a role's body into ``(target, shown text, link wanted)``."""
    explicit = _TITLE_RE.match(body.strip())
    if explicit:
        title, target = " ".join(explicit["title"].split()), "".join(explicit["target"].split())
        return target.lstrip("~.!"), title, not target.startswith("!")
    body = "".join(body.split())  # a target wrapped across docstring lines
    link = not body.startswith("!")
    target = body.lstrip("!")
    if target.startswith("~"):
        target = target.lstrip("~")
        shown = target.rstrip("()").rsplit(".", 1)[-1]
        shown += "()" if target.endswith("()") else ""
    else:
        shown = target
    return target.lstrip("."), shown, link


def convert_roles(text: str, resolve: Callable[[str, str], str | None] | None = None) -> str:
    """Replace every Sphinx role in ``text`` by an optional autorefs reference.

    Parameters
    ----------
    text
        Docstring text (Markdown).
    resolve
        Maps a role's target (as written, without ``~``) and the role's name
        (``"class"``, ``"func"``, ...) to the identifier to link to, or ``None`` to
        keep the target as written.

    Returns
    -------
    str
        The text without roles. Lines of doctest examples (``>>>``, ``...``) and
        fenced code blocks are left as they are.
    """
    code_spans = _code_line_spans(text)

    def replace(match: re.Match[str]) -> str:
        if any(lo <= match.start() < hi for lo, hi in code_spans):
            return match.group(0)
        target, shown, link = parse_role(match["body"])
        code = f"<code>{html.escape(shown, quote=False)}</code>"
        if not link or not target:
            return code
        identifier = (resolve(target, match["role"]) if resolve else None) or target.rstrip("()")
        return f'<autoref identifier="{html.escape(identifier)}" optional>{code}</autoref>'

    return ROLE_RE.sub(replace, text)


def _code_line_spans(text: str) -> list[tuple[int, int]]:
    """Character ranges of fenced code blocks and doctest lines in ``text``."""
    spans: list[tuple[int, int]] = []
    pos = 0
    fenced = doctest = False
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip()
        fence = stripped.startswith(("```", "~~~"))
        fenced ^= fence
        # a doctest runs from its ``>>>`` line to the next blank line
        doctest = stripped.startswith(">>>") or (doctest and bool(stripped))
        if fence or fenced or doctest:
            spans.append((pos, pos + len(line)))
        pos += len(line)
    return spans


def _lookup(scope: Any, name: str) -> Any:
    """``scope[name]`` through griffe members, or None."""
    try:
        return scope[name]
    except Exception:  # KeyError, AliasResolutionError, ValueError on odd names
        return None


def _canonical(obj: Any) -> str:
    try:
        return obj.canonical_path
    except Exception:  # an alias to an object outside the loaded packages
        return getattr(obj, "target_path", None) or obj.path


def _function_not_module(found: Any, name: str, role: str) -> Any:
    """``from .ulisse import ulisse`` leaves griffe's member ``ulisse`` the submodule:
    a ``:func:`` (or ``:class:``, ...) role means the object of that name inside it."""
    try:
        is_module = found.is_module
    except Exception:
        return found
    last = name.rsplit(".", 1)[-1]
    if is_module and role != "mod" and last in found.members:
        return found.members[last]
    return found


def make_resolver(obj: Any, collection: Any) -> Callable[[str, str], str | None]:
    """Resolve role targets in the docstring of the griffe object ``obj``.

    Relative names are looked up in ``obj``, then in its parents up to the package;
    absolute names in the loaded packages. The result is the target's canonical path
    (mkdocstrings registers every rendered object under it), or None if not found.
    """

    def resolve(target: str, role: str) -> str | None:
        name = target.rstrip("()")
        scope = obj
        found = None
        while scope is not None and found is None:
            found = _lookup(scope, name)
            scope = scope.parent
        if found is None:
            found = _lookup(collection, name)
        if found is None:
            return None
        return _canonical(_function_not_module(found, name, role))

    return resolve


def _walk(obj: Any) -> Any:
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member)


try:
    import griffe
except ImportError:  # pragma: no cover - only the docs build needs griffe
    griffe = None


if griffe is not None:

    class SphinxRoles(griffe.Extension):
        """Rewrite Sphinx roles in every docstring of a loaded package."""

        def on_package(self, *, pkg: Any, loader: Any, **kwargs: Any) -> None:
            for obj in _walk(pkg):
                if obj.docstring is not None and ":" in obj.docstring.value:
                    resolve = make_resolver(obj, loader.modules_collection)
                    obj.docstring.value = convert_roles(obj.docstring.value, resolve)
                    obj.docstring.__dict__.pop("parsed", None)  # drop a cached parse
