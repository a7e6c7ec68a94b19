"""Renamed public names: one name, one object across the package; the old names warn.

``pnsolve.iterative.Jacobi`` (the affine iterative method) is now ``JacobiIteration`` and
``pnsolve.policies.PivotedCholesky`` (the action policy) ``PivotedCholeskyActions``: the
preconditioners keep ``Jacobi`` and ``PivotedCholesky``. ``pnsolve.stopping.Any``/``All``
(which shadowed ``typing.Any``) are ``AnyOf``/``AllOf``. The old names stay importable
from the old places for a while, return the new class itself (so ``isinstance`` keeps
working) and emit a ``DeprecationWarning`` that names the new name.
"""

from __future__ import annotations

import importlib
import warnings

import pytest
import torch

import pnsolve as pn

RENAMED = [
    ("pnsolve.iterative", "Jacobi", "JacobiIteration"),
    ("pnsolve.iterative.richardson", "Jacobi", "JacobiIteration"),
    ("pnsolve.policies", "PivotedCholesky", "PivotedCholeskyActions"),
    ("pnsolve.policies.pivoted_cholesky", "PivotedCholesky", "PivotedCholeskyActions"),
    ("pnsolve.stopping", "Any", "AnyOf"),
    ("pnsolve.stopping", "All", "AllOf"),
    ("pnsolve.stopping.base", "Any", "AnyOf"),
    ("pnsolve.stopping.base", "All", "AllOf"),
]


@pytest.mark.parametrize(("module", "old", "new"), RENAMED, ids=lambda v: str(v))
def test_old_name_warns_and_is_the_new_class(module: str, old: str, new: str) -> None:
    mod = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old}\b.*{module}\.{new}"):
        cls = getattr(mod, old)
    assert cls is getattr(mod, new)
    assert old not in getattr(mod, "__all__", ())
    assert new in mod.__all__


@pytest.mark.parametrize(("module", "old", "new"), RENAMED[::2], ids=lambda v: str(v))
def test_from_import_of_the_old_name_warns(module: str, old: str, new: str) -> None:
    with pytest.warns(DeprecationWarning, match=new):
        exec(f"from {module} import {old}", {})


def test_new_names_are_distinct_from_the_preconditioners() -> None:
    assert pn.iterative.JacobiIteration is not pn.preconditioners.Jacobi
    assert pn.policies.PivotedCholeskyActions is not pn.preconditioners.PivotedCholesky
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the preconditioners' names are not deprecated
        assert pn.preconditioners.Jacobi.__name__ == "Jacobi"
        assert pn.preconditioners.PivotedCholesky.__name__ == "PivotedCholesky"


def test_star_imports_are_silent_and_export_only_new_names() -> None:
    for module in ("pnsolve.iterative", "pnsolve.policies", "pnsolve.stopping"):
        namespace: dict[str, object] = {}
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            exec(f"from {module} import *", namespace)
        assert not {"Jacobi", "PivotedCholesky", "Any", "All"} & namespace.keys()


def test_unknown_attributes_still_raise_attribute_error() -> None:
    for mod in (pn.iterative, pn.policies, pn.stopping):
        with pytest.raises(AttributeError, match="no attribute 'Nope'"):
            _ = mod.Nope  # type: ignore[attr-defined]


def test_operators_build_the_new_stopping_classes_and_old_isinstance_works() -> None:
    a, b = pn.stopping.MaxIterations(3), pn.stopping.MatvecBudget(5)
    assert type(a | b) is pn.stopping.AnyOf
    assert type(a & b) is pn.stopping.AllOf
    with pytest.warns(DeprecationWarning):
        old_any, old_all = pn.stopping.Any, pn.stopping.All  # type: ignore[attr-defined]
    assert isinstance(a | b, old_any) and isinstance(a & b, old_all)
    assert repr(old_any(a, b)) == "(MaxIterations(3) | MatvecBudget(5))"


def _spd(n: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    B = torch.randn(n, n, generator=g, dtype=torch.float64)
    return B @ B.T + n * torch.eye(n, dtype=torch.float64), torch.ones(n, dtype=torch.float64)


def test_old_names_still_work() -> None:
    A, b = _spd()
    with pytest.warns(DeprecationWarning):
        Jacobi = pn.iterative.Jacobi  # type: ignore[attr-defined]
        PivotedCholesky = pn.policies.PivotedCholesky  # type: ignore[attr-defined]
        Any = pn.stopping.Any  # type: ignore[attr-defined]
    old, _ = pn.iterative.affine_solve(A, b, Jacobi(sweeps=30))
    new, _ = pn.iterative.affine_solve(A, b, pn.iterative.JacobiIteration(sweeps=30))
    assert torch.equal(old.mean, new.mean)
    stop = Any(pn.stopping.MaxIterations(8), pn.stopping.ResidualNorm(rtol=1e-12))
    belief, _ = pn.ProbabilisticLinearSolver(PivotedCholesky(), stop).solve(A, b)
    assert torch.allclose(belief.mean, torch.linalg.solve(A, b))
    assert isinstance(pn.policies.PivotedCholeskyActions(), PivotedCholesky)
