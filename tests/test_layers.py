"""The package's imports go one way only, checked by parsing every module.

Layers, lowest first; a module may import from its own layer and the layers below:

    _core → linops → kernels → problems / preconditioners / likelihoods / datasets /
    metrics → krylov → beliefs / policies / stopping / solvers → randomized / iterative /
    testing → gp → plotting → cli

Every import counts, also those inside functions and under ``TYPE_CHECKING``: a lazy
import is still a dependency. Private modules and names (a leading underscore) are not
imported across packages, except from ``_core``, the shared private base. The package's
``__init__`` (the public namespace) and ``__main__`` (``python -m pnsolve``: the command
line) may import from anywhere.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.cpu_only(reason="the import graph: no tensors")

PACKAGE = Path(__file__).resolve().parents[1] / "pnsolve"

LAYERS: dict[str, int] = {
    "_core": 0,
    "linops": 1,
    "kernels": 2,
    "problems": 3,
    "preconditioners": 3,
    "likelihoods": 3,
    "datasets": 3,
    "metrics": 3,
    "krylov": 4,
    "beliefs": 5,
    "policies": 5,
    "stopping": 5,
    "solvers": 5,
    "randomized": 6,
    "iterative": 6,
    "testing": 6,
    "gp": 7,
    "plotting": 8,
    "cli": 9,
}


def _modules() -> list[Path]:
    top = {PACKAGE / "__init__.py", PACKAGE / "__main__.py"}
    return sorted(p for p in PACKAGE.rglob("*.py") if p not in top)


def _package_of(path: Path) -> str:
    return path.relative_to(PACKAGE).parts[0].removesuffix(".py")


def _imports(path: Path) -> list[tuple[int, list[str], list[str]]]:
    """``(line, absolute module parts below pnsolve, imported names)`` of every import."""
    here = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if here[-1] == "__init__":
        here = here[:-1]
    else:
        here = here[:-1]  # the package the module is in
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                target = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.split(".")[0] == "pnsolve":
                target = node.module.split(".")[1:]
            else:
                continue
            found.append((node.lineno, target, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "pnsolve":
                    found.append((node.lineno, parts[1:], []))
    return found


def _violations() -> tuple[list[str], list[str]]:
    upward, private = [], []
    for path in _modules():
        src = _package_of(path)
        where = str(path.relative_to(PACKAGE.parent))
        for line, target, names in _imports(path):
            if not target:  # "from pnsolve import x" / "from .. import x": the namespace
                dst = None
                for name in names:
                    if name in LAYERS and LAYERS[name] > LAYERS.get(src, -1):
                        upward.append(f"{where}:{line}: {src} → {name}")
                continue
            dst = target[0]
            if dst == src:
                continue
            if dst not in LAYERS or src not in LAYERS:
                upward.append(f"{where}:{line}: {src} → {dst} (a module outside the layers)")
                continue
            if LAYERS[dst] > LAYERS[src]:
                upward.append(f"{where}:{line}: {src} → {'.'.join(target)}")
            if dst != "_core" and (
                any(p.startswith("_") for p in target[1:]) or any(n.startswith("_") for n in names)
            ):
                private.append(f"{where}:{line}: {'.'.join(target)} {names}")
    return upward, private


def test_every_package_has_a_layer():
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    loose = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert not loose, f"modules outside a package: {sorted(loose)}"
    assert packages == set(LAYERS), packages ^ set(LAYERS)


def test_imports_only_go_down_the_layers():
    upward, _ = _violations()
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_no_private_helper_is_imported_across_packages():
    _, private = _violations()
    assert not private, "private imports across packages:\n" + "\n".join(private)


@pytest.mark.parametrize("path", _modules()[:1])
def test_the_parser_sees_relative_and_absolute_imports(path):
    # sanity: the walker resolves a known relative import of the solver package
    solver = PACKAGE / "solvers" / "solver.py"
    targets = [t for _, t, _ in _imports(solver)]
    assert any(t[:1] == ["beliefs"] for t in targets)
