"""A zoo of SPD linear systems with named spectra, for tests, benchmarks and tutorials.

Each problem is ``A = Q diag(λ) Qᵀ`` with ``λ`` from :mod:`pnsolve.problems.spectra`
and ``Q`` a Haar-random orthogonal matrix (QR of a Gaussian matrix with the signs of
``diag(R)`` folded in), or a kernel Gram matrix on random inputs. ``A`` is a
``pnsolve.linops.Dense(..., is_symmetric=True, is_psd=True)``.

Right-hand sides (``rhs=``):

* ``"solution"`` (default): ``x_true ~ N(0, I)`` and ``b = A x_true``;
* ``"gaussian"``: ``b ~ N(0, I)`` and ``x_true = A⁻¹ b`` computed in float64 from the
  eigendecomposition (or a Cholesky solve for kernel Gram matrices).

Everything is drawn and built in float64 on the generator's device and then cast to
``dtype`` and moved to ``device`` (``None``: torch's default device), so the same seed
gives the same problem in every dtype (up to rounding) and, with a CPU generator, the
same numbers on every device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import torch

from ..datasets.dataset import check_float_dtype
from ..datasets.kernel_formulas import KERNEL_NAMES, stationary_kernel
from ..datasets.sampling import output_cast, require_generator, standard_normal, uniform
from ..linops import Dense
from .linear_system import LinearSystem
from .spectra import (
    check_size,
    clustered_spectrum,
    exponential_spectrum,
    polynomial_spectrum,
    rank_deficient_spectrum,
)

__all__ = [
    "PROBLEMS",
    "clustered",
    "exponential_decay",
    "kernel_gram",
    "make_problem",
    "polynomial_decay",
    "random_orthogonal",
    "rank_deficient_plus_jitter",
    "spd_from_spectrum",
]

Rhs = Literal["solution", "gaussian"]


def random_orthogonal(n: int, *, generator: torch.Generator) -> torch.Tensor:
    """Haar-random orthogonal matrix ``(n, n)``, float64, on the generator's device."""
    n = check_size(n)
    Q, R = torch.linalg.qr(standard_normal(n, n, generator=generator))
    signs = torch.sign(torch.diagonal(R))
    return Q * torch.where(signs == 0, torch.ones_like(signs), signs)


def _draw_rhs(n: int, num_rhs: int | None, generator: torch.Generator) -> torch.Tensor:
    if num_rhs is None:
        return standard_normal(n, generator=generator)
    check_size(num_rhs, "num_rhs")
    return standard_normal(n, num_rhs, generator=generator)


def _check_options(rhs: object, dtype: object) -> None:
    check_float_dtype(dtype)
    if rhs not in ("solution", "gaussian"):
        raise ValueError(f"rhs must be 'solution' or 'gaussian', got {rhs!r}")


def _system(
    A: torch.Tensor,
    x: torch.Tensor,
    b: torch.Tensor,
    lam: torch.Tensor | None,
    name: str,
    dtype: torch.dtype,
    device: torch.device | str | None,
) -> LinearSystem:
    cast = output_cast(dtype, device)
    A_op = Dense(cast(0.5 * (A + A.mT)), is_symmetric=True, is_psd=True)
    spectrum = None if lam is None else cast(lam)
    return LinearSystem(A=A_op, b=cast(b), x_true=cast(x), name=name, spectrum=spectrum)


def spd_from_spectrum(
    eigenvalues: torch.Tensor,
    *,
    generator: torch.Generator,
    name: str = "",
    rhs: Rhs = "solution",
    num_rhs: int | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> LinearSystem:
    """SPD system ``A = Q diag(λ) Qᵀ`` with a Haar-random ``Q`` and the given eigenvalues.

    Parameters
    ----------
    eigenvalues
        Positive tensor of shape ``(n,)``.
    generator
        Required ``torch.Generator`` (draws ``Q`` then the right-hand side).
    name
        Stored on the result.
    rhs
        ``"solution"`` (``b = A x_true``, ``x_true`` Gaussian) or ``"gaussian"``.
    num_rhs
        ``None`` for ``b`` of shape ``(n,)``, else ``k`` for shape ``(n, k)``.
    dtype, device
        Dtype and device of ``A``, ``b``, ``x_true`` and ``spectrum``.

    Returns
    -------
    LinearSystem
        With ``spectrum`` = the eigenvalues in descending order.
    """
    generator = require_generator(generator)
    _check_options(rhs, dtype)
    if not isinstance(eigenvalues, torch.Tensor) or eigenvalues.ndim != 1:
        raise ValueError("eigenvalues must be a 1-D tensor")
    lam = eigenvalues.to(dtype=torch.float64, device=generator.device)
    if not bool(torch.all(lam > 0) & torch.isfinite(lam).all()):
        raise ValueError("eigenvalues must be positive and finite for an SPD matrix")
    lam = lam.sort(descending=True).values
    n = lam.numel()
    Q = random_orthogonal(n, generator=generator)
    A = (Q * lam) @ Q.mT
    v = _draw_rhs(n, num_rhs, generator)
    if rhs == "solution":
        x, b = v, A @ v
    else:
        scale = lam if v.ndim == 1 else lam[:, None]
        x, b = Q @ ((Q.mT @ v) / scale), v
    return _system(A, x, b, lam, name, dtype, device)


def exponential_decay(
    n: int,
    *,
    cond: float | None = None,
    rate: float | None = None,
    scale: float = 1.0,
    generator: torch.Generator,
    rhs: Rhs = "solution",
    num_rhs: int | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> LinearSystem:
    """SPD system with ``λ_i = scale · exp(−rate · i)`` (default ``cond = 1e3``).

    See
    :func:`~pnsolve.problems.spectra.exponential_spectrum` and :func:`spd_from_spectrum`.
    """
    lam = exponential_spectrum(n, cond=cond, rate=rate, scale=scale)
    label = f"rate={rate:g}" if rate is not None else f"cond={1e3 if cond is None else cond:g}"
    name = f"exponential(n={n}, {label})"
    return spd_from_spectrum(
        lam, generator=generator, name=name, rhs=rhs, num_rhs=num_rhs, dtype=dtype, device=device
    )


def polynomial_decay(
    n: int,
    *,
    power: float = 2.0,
    scale: float = 1.0,
    generator: torch.Generator,
    rhs: Rhs = "solution",
    num_rhs: int | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> LinearSystem:
    """SPD system with ``λ_i = scale · (i + 1)^(−power)``.

    See
    :func:`~pnsolve.problems.spectra.polynomial_spectrum`.
    """
    lam = polynomial_spectrum(n, power=power, scale=scale)
    name = f"polynomial(n={n}, power={power:g})"
    return spd_from_spectrum(
        lam, generator=generator, name=name, rhs=rhs, num_rhs=num_rhs, dtype=dtype, device=device
    )


def clustered(
    n: int,
    *,
    clusters: int | Sequence[float] = 3,
    spread: float = 0.0,
    scale: float = 1.0,
    generator: torch.Generator,
    rhs: Rhs = "solution",
    num_rhs: int | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> LinearSystem:
    """SPD system whose eigenvalues form a few clusters.

    With ``spread = 0`` there are exactly ``min(k, n)`` distinct values and CG
    terminates in that many steps; see
    :func:`~pnsolve.problems.spectra.clustered_spectrum`.
    """
    lam = clustered_spectrum(n, clusters=clusters, spread=spread, scale=scale)
    k = clusters if isinstance(clusters, int) else len(clusters)
    name = f"clustered(n={n}, clusters={k}, spread={spread:g})"
    return spd_from_spectrum(
        lam, generator=generator, name=name, rhs=rhs, num_rhs=num_rhs, dtype=dtype, device=device
    )


def rank_deficient_plus_jitter(
    n: int,
    *,
    rank: int | None = None,
    jitter: float = 1e-6,
    scale: float = 1.0,
    generator: torch.Generator,
    rhs: Rhs = "solution",
    num_rhs: int | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> LinearSystem:
    """SPD system ``B + jitter · I`` with ``B`` PSD of rank ``rank`` (default ``n // 2``).

    See :func:`~pnsolve.problems.spectra.rank_deficient_spectrum`.
    """
    lam = rank_deficient_spectrum(n, rank=rank, jitter=jitter, scale=scale)
    r = n // 2 if rank is None else rank
    name = f"rank_deficient(n={n}, rank={r}, jitter={jitter:g})"
    return spd_from_spectrum(
        lam, generator=generator, name=name, rhs=rhs, num_rhs=num_rhs, dtype=dtype, device=device
    )


def kernel_gram(
    n: int,
    d: int = 2,
    *,
    lengthscale: float = 0.5,
    noise: float = 1e-2,
    kernel: str = "rbf",
    outputscale: float = 1.0,
    generator: torch.Generator,
    rhs: Rhs = "solution",
    num_rhs: int | None = None,
    compute_spectrum: bool = True,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> LinearSystem:
    """Kernel Gram system ``A = k(X, X) + noise · I`` on inputs ``X ~ U[0, 1]^d``.

    Parameters
    ----------
    n, d
        Number of inputs and their dimension.
    lengthscale, outputscale
        Kernel hyperparameters (``outputscale`` multiplies, as in GPyTorch).
    noise
        Positive noise variance added to the diagonal (makes ``A`` SPD).
    kernel
        ``"rbf"``, ``"matern12"``, ``"matern32"`` or ``"matern52"``.
    generator
        Required ``torch.Generator`` (inputs, then the right-hand side).
    rhs, num_rhs
        As in :func:`spd_from_spectrum`; ``"gaussian"`` solves by Cholesky in float64.
    compute_spectrum
        Compute the exact spectrum with ``eigvalsh`` (``O(n³)``); otherwise
        ``spectrum`` is None.
    dtype, device
        Dtype and device of the result.
    """
    generator = require_generator(generator)
    n, d = check_size(n), check_size(d, "d")
    _check_options(rhs, dtype)
    if kernel not in KERNEL_NAMES:
        raise ValueError(f"kernel must be one of {KERNEL_NAMES}, got {kernel!r}")
    if not noise > 0:
        raise ValueError(f"noise must be positive, got {noise!r}")
    X = uniform(n, d, low=0.0, high=1.0, generator=generator)
    K = stationary_kernel(X, X, kind=kernel, lengthscale=lengthscale, outputscale=outputscale)
    A = 0.5 * (K + K.mT) + noise * torch.eye(n, dtype=torch.float64, device=X.device)
    v = _draw_rhs(n, num_rhs, generator)
    if rhs == "solution":
        x, b = v, A @ v
    else:
        L = torch.linalg.cholesky(A)
        x = torch.cholesky_solve(v if v.ndim == 2 else v[:, None], L)
        x, b = (x if v.ndim == 2 else x[:, 0]), v
    lam = torch.linalg.eigvalsh(A).flip(0) if compute_spectrum else None
    name = (
        f"kernel_gram(n={n}, d={d}, kernel={kernel}, lengthscale={lengthscale:g}, noise={noise:g})"
    )
    return _system(A, x, b, lam, name, dtype, device)


PROBLEMS: dict[str, Callable[..., LinearSystem]] = {
    "exponential": exponential_decay,
    "polynomial": polynomial_decay,
    "clustered": clustered,
    "rank_deficient": rank_deficient_plus_jitter,
    "kernel_gram": kernel_gram,
}


def make_problem(
    name: str, n: int, *, generator: torch.Generator, **params: object
) -> LinearSystem:
    """Build the problem registered as ``name`` in :data:`PROBLEMS`.

    Parameters
    ----------
    name
        ``"exponential"``, ``"polynomial"``, ``"clustered"``, ``"rank_deficient"`` or
        ``"kernel_gram"``.
    n
        Size of the system.
    generator
        Required ``torch.Generator``.
    **params
        Keyword arguments of the problem function.
    """
    if name not in PROBLEMS:
        raise ValueError(f"unknown problem name {name!r}; choose one of {sorted(PROBLEMS)}")
    return PROBLEMS[name](n, generator=generator, **params)
