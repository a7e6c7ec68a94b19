"""Named eigenvalue spectra: deterministic functions of ``n`` and a few parameters.

Every function returns the eigenvalues in descending order, shape ``(n,)``, all
positive (so the matrices built from them are SPD). :data:`SPECTRA` maps the names
used across pnsolve (``"exponential"``, ``"polynomial"``, ``"clustered"``,
``"rank_deficient"``) to these functions; :func:`spectrum` looks a name up.

They are computed in float64 on ``device`` (``None``: torch's default device) and then
cast to ``dtype``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from .._core.validation import check_positive_int

__all__ = [
    "SPECTRA",
    "clustered_spectrum",
    "exponential_spectrum",
    "polynomial_spectrum",
    "rank_deficient_spectrum",
    "spectrum",
]


def check_size(n: object, name: str = "n") -> int:
    """Require an int ``n ≥ 1``; the error names the argument."""
    return check_positive_int(n, name)


def _check_scale(scale: float) -> float:
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    return float(scale)


def _device(device: torch.device | str | None) -> torch.device:
    """``device``, or for ``None`` torch's default device (resolved in this file)."""
    return torch.empty(0).device if device is None else torch.device(device)


def _out(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return values.sort(descending=True).values.to(dtype=dtype)


def exponential_spectrum(
    n: int,
    *,
    cond: float | None = None,
    rate: float | None = None,
    scale: float = 1.0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``λ_i = scale · exp(−rate · i)``, ``i = 0..n−1``.

    Give either ``rate ≥ 0`` or the condition number ``cond ≥ 1`` (then
    ``rate = log(cond) / (n − 1)`` so that ``λ_0 / λ_{n−1} = cond``); the default is
    ``cond = 1e3``.
    """
    n = check_size(n)
    scale = _check_scale(scale)
    if cond is not None and rate is not None:
        raise ValueError("give either cond or rate, not both")
    if rate is None:
        cond = 1e3 if cond is None else cond
        if not (math.isfinite(cond) and cond >= 1):
            raise ValueError(f"cond must be a finite number ≥ 1, got {cond!r}")
        rate = math.log(cond) / (n - 1) if n > 1 else 0.0
    if not (math.isfinite(rate) and rate >= 0):
        raise ValueError(f"rate must be a finite number ≥ 0, got {rate!r}")
    i = torch.arange(n, dtype=torch.float64, device=_device(device))
    return _out(scale * torch.exp(-rate * i), dtype)


def polynomial_spectrum(
    n: int,
    *,
    power: float = 2.0,
    scale: float = 1.0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``λ_i = scale · (i + 1)^(−power)``, ``i = 0..n−1``; condition number ``n^power``."""
    n = check_size(n)
    scale = _check_scale(scale)
    if not (math.isfinite(power) and power >= 0):
        raise ValueError(f"power must be a finite number ≥ 0, got {power!r}")
    i = torch.arange(1, n + 1, dtype=torch.float64, device=_device(device))
    return _out(scale * i.pow(-power), dtype)


def clustered_spectrum(
    n: int,
    *,
    clusters: int | Sequence[float] = 3,
    spread: float = 0.0,
    scale: float = 1.0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Eigenvalues in a few clusters.

    Parameters
    ----------
    clusters
        Either the number ``k`` of clusters, with centres ``scale · 100^(−j/(k−1))``
        (``j = 0..k−1``, from ``scale`` down to ``scale/100``), or the sequence of
        positive centres itself.
    spread
        Relative half-width in ``[0, 1)``: cluster ``j`` of size ``m_j`` holds
        ``c_j (1 + spread · t)`` for ``t`` evenly spaced in ``[−1, 1]``. With
        ``spread = 0`` the matrix has exactly ``min(k, n)`` distinct eigenvalues and CG
        terminates after that many steps in exact arithmetic.

    Notes
    -----
    The ``n`` eigenvalues are shared out as evenly as possible (the first ``n mod k``
    clusters get one more); when ``n < k`` only the first ``n`` clusters are used.
    """
    n = check_size(n)
    scale = _check_scale(scale)
    dev = _device(device)
    if isinstance(clusters, bool):
        raise TypeError(f"clusters must be an int or a sequence of centres, got {clusters!r}")
    if isinstance(clusters, int):
        k = check_size(clusters, "clusters")
        j = torch.arange(k, dtype=torch.float64, device=dev)
        centres = (
            scale * 100.0 ** (-j / (k - 1))
            if k > 1
            else torch.tensor([scale], dtype=torch.float64, device=dev)
        )
    else:
        centres = torch.as_tensor(list(clusters), dtype=torch.float64, device=dev)
        if centres.numel() == 0 or not bool(torch.all(centres > 0) & torch.isfinite(centres).all()):
            raise ValueError(f"clusters must hold positive finite centres, got {clusters!r}")
        centres = centres.sort(descending=True).values
    if not (0 <= spread < 1):
        raise ValueError(f"spread must lie in [0, 1), got {spread!r}")
    k = centres.numel()
    sizes = [n // k + (1 if j < n % k else 0) for j in range(k)]
    parts = [
        c * (1 + spread * torch.linspace(1, -1, m, dtype=torch.float64, device=dev))
        if m > 1
        else c.reshape(m)
        for c, m in zip(centres, sizes)
        if m > 0
    ]
    return _out(torch.cat(parts), dtype)


def rank_deficient_spectrum(
    n: int,
    *,
    rank: int | None = None,
    jitter: float = 1e-6,
    scale: float = 1.0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """A rank-``rank`` PSD spectrum plus ``jitter``: the spectrum of ``B + jitter · I``.

    ``λ_i = scale · (rank − i)/rank + jitter`` for ``i < rank`` and ``λ_i = jitter``
    otherwise, so ``n − rank`` eigenvalues equal ``jitter``. ``rank`` defaults to
    ``n // 2``; it must lie in ``0..n``; ``jitter`` must be positive.
    """
    n = check_size(n)
    scale = _check_scale(scale)
    rank = n // 2 if rank is None else rank
    if isinstance(rank, bool) or not isinstance(rank, int):
        raise TypeError(f"rank must be an int, got {rank!r}")
    if not 0 <= rank <= n:
        raise ValueError(f"rank must lie in 0..n = 0..{n}, got {rank}")
    if not (math.isfinite(jitter) and jitter > 0):
        raise ValueError(f"jitter must be a positive finite number, got {jitter!r}")
    lam = torch.zeros(n, dtype=torch.float64, device=_device(device))
    if rank:
        lam[:rank] = (
            scale * torch.arange(rank, 0, -1, dtype=torch.float64, device=lam.device) / rank
        )
    return _out(lam + jitter, dtype)


SPECTRA: dict[str, Callable[..., torch.Tensor]] = {
    "exponential": exponential_spectrum,
    "polynomial": polynomial_spectrum,
    "clustered": clustered_spectrum,
    "rank_deficient": rank_deficient_spectrum,
}


def spectrum(name: str, n: int, **params: object) -> torch.Tensor:
    """Eigenvalues (descending, shape ``(n,)``) of the named spectrum.

    Parameters
    ----------
    name
        A key of :data:`SPECTRA`.
    n
        Number of eigenvalues.
    **params
        The spectrum function's keyword arguments (``cond``, ``power``, ``clusters``,
        ``spread``, ``rank``, ``jitter``, ``scale``, ``dtype``, ``device``).
    """
    if name not in SPECTRA:
        extra = (
            " (kernel_gram's spectrum depends on random inputs: build the problem with "
            "pnsolve.problems.kernel_gram and read .spectrum)"
            if name == "kernel_gram"
            else ""
        )
        raise ValueError(f"unknown spectrum name {name!r}; choose one of {sorted(SPECTRA)}{extra}")
    return SPECTRA[name](n, **params)
