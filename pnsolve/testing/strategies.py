"""Hypothesis strategies for SPD linear systems with named spectra.

Hypothesis draws only small integers and floats (size, spectral parameters and a
seed); the matrices are then built by :mod:`pnsolve.problems` from a
``torch.Generator`` seeded with the drawn seed. Examples are therefore reproducible
and shrink towards small, well-conditioned problems with seed 0.

Usage in a test::

    from hypothesis import given
    from pnsolve.testing import exact_tol
    from pnsolve.testing.strategies import spd_problems, rhs

    @given(spd_problems(n=st.integers(2, 20), max_cond=1e3))
    def test_solution_has_zero_residual(problem):
        r = problem.residual(problem.x_true)
        assert r.norm() <= exact_tol(problem.A.dtype, problem.n) * problem.b.norm() * ...

Requires ``hypothesis`` (a development dependency); import this module only from
tests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from hypothesis import strategies as st

from ..problems import LinearSystem, make_problem

__all__ = ["SPECTRUM_NAMES", "rhs", "spd_matrices", "spd_problems"]

SPECTRUM_NAMES = ("exponential", "polynomial", "clustered", "rank_deficient")
_MAX_SEED = 2**32 - 1

IntStrategy = st.SearchStrategy[int]


def _as_strategy(value: int | IntStrategy, name: str) -> IntStrategy:
    if isinstance(value, st.SearchStrategy):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return st.just(value)
    raise TypeError(f"{name} must be a positive int or a hypothesis strategy, got {value!r}")


def _spectral_params(draw: st.DrawFn, name: str, n: int, max_cond: float) -> dict[str, object]:
    """Draw parameters for ``name`` whose condition number stays ≤ ``max_cond``."""
    log_max = math.log10(max_cond)
    if name == "exponential":
        return {"cond": 10.0 ** draw(st.floats(0.0, log_max))}
    if name == "polynomial":
        top = 3.0 if n == 1 else min(3.0, math.log(max_cond) / math.log(n))
        return {"power": draw(st.floats(0.0, top))}
    if name == "clustered":
        k = draw(st.integers(1, 4))
        spread = draw(st.sampled_from((0.0, 0.01, 0.1)))
        ratio = min(100.0, max_cond * (1 - spread) / (1 + spread))
        centres = [ratio ** (-j / (k - 1)) if k > 1 else 1.0 for j in range(k)]
        return {"clusters": centres, "spread": spread}
    if name == "rank_deficient":
        # cond = (1 + jitter) / jitter ≤ max_cond  ⇔  jitter ≥ 1 / (max_cond − 1)
        low = math.log10(1.0 / (max_cond - 1.0))
        return {"rank": draw(st.integers(0, n)), "jitter": 10.0 ** draw(st.floats(low, 0.0))}
    raise ValueError(f"spectra must hold names from {SPECTRUM_NAMES}, got {name!r}")


@st.composite
def spd_problems(
    draw: st.DrawFn,
    n: int | IntStrategy = st.integers(2, 40),  # noqa: B008
    spectra: Sequence[str] = SPECTRUM_NAMES,
    dtypes: Sequence[torch.dtype] = (torch.float64,),
    num_rhs: st.SearchStrategy[int | None] = st.none(),  # noqa: B008
    max_cond: float = 1e4,
    rhs_kind: Sequence[str] = ("solution",),
) -> LinearSystem:
    """Strategy drawing a :class:`~pnsolve.problems.LinearSystem` with a named spectrum.

    Parameters
    ----------
    n
        Size of the system: an int or an integer strategy.
    spectra
        Names from :data:`SPECTRUM_NAMES` to choose from.
    dtypes
        Floating dtypes to choose from.
    num_rhs
        Strategy for the number of right-hand-side columns (``None``: ``b`` is 1-D).
    max_cond
        Upper bound (> 2) on the condition number of the drawn systems.
    rhs_kind
        Right-hand-side constructions to choose from (``"solution"``, ``"gaussian"``).

    Returns
    -------
    SearchStrategy[LinearSystem]
        Systems on the CPU with ``A`` a symmetric PSD ``Dense`` of shape ``(n, n)``,
        ``b`` and ``x_true`` of shape ``(n,)`` or ``(n, k)`` and the exact spectrum.
    """
    if not max_cond > 2:
        raise ValueError(f"max_cond must exceed 2, got {max_cond}")
    if not spectra or any(s not in SPECTRUM_NAMES for s in spectra):
        raise ValueError(f"spectra must be non-empty names from {SPECTRUM_NAMES}, got {spectra!r}")
    size = draw(_as_strategy(n, "n"))
    name = draw(st.sampled_from(tuple(spectra)))
    params = _spectral_params(draw, name, size, max_cond)
    dtype = draw(st.sampled_from(tuple(dtypes)))
    k = draw(num_rhs)
    seed = draw(st.integers(0, _MAX_SEED))
    generator = torch.Generator().manual_seed(seed)
    return make_problem(
        name,
        size,
        generator=generator,
        rhs=draw(st.sampled_from(tuple(rhs_kind))),
        num_rhs=k,
        dtype=dtype,
        **params,
    )


def spd_matrices(
    n: int | IntStrategy = st.integers(2, 40),  # noqa: B008
    spectra: Sequence[str] = SPECTRUM_NAMES,
    dtypes: Sequence[torch.dtype] = (torch.float64,),
    max_cond: float = 1e4,
) -> st.SearchStrategy[torch.Tensor]:
    """Strategy drawing a dense symmetric positive-definite tensor of shape ``(n, n)``.

    Same parameters as :func:`spd_problems`; the matrix is ``problem.A.to_dense()``.
    """
    return spd_problems(n=n, spectra=spectra, dtypes=dtypes, max_cond=max_cond).map(
        lambda problem: problem.A.to_dense()
    )


@st.composite
def rhs(
    draw: st.DrawFn,
    n: int | IntStrategy,
    num_rhs: st.SearchStrategy[int | None] = st.none(),  # noqa: B008
    dtypes: Sequence[torch.dtype] = (torch.float64,),
) -> torch.Tensor:
    """Strategy drawing a Gaussian right-hand side of shape ``(n,)`` or ``(n, k)``.

    Parameters
    ----------
    n
        Number of rows: an int or an integer strategy.
    num_rhs
        Strategy for the number of columns (``None``: 1-D).
    dtypes
        Floating dtypes to choose from.
    """
    size = draw(_as_strategy(n, "n"))
    k = draw(num_rhs)
    dtype = draw(st.sampled_from(tuple(dtypes)))
    generator = torch.Generator().manual_seed(draw(st.integers(0, _MAX_SEED)))
    shape = (size,) if k is None else (size, k)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(dtype)
