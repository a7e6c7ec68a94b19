"""ULISSE: an unbiased estimate of ``A⁻¹b`` from early-stopped, reweighted CG."""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from .._core.precision import full_float32
from .._core.validation import check_bool, require_generator
from ..linops.base import LinearOperator
from ..linops.checks import (
    as_preconditioner,
    as_system,
    check_nonnegative,
    check_optional_count,
)
from ._ulisse_core import ulisse_trace
from .ulisse_info import UlisseInfo

__all__ = ["expected_roulette_steps", "ulisse", "ulisse_variance"]


@full_float32
def ulisse(
    A: object,
    b: object,
    *,
    alpha: float,
    beta: float,
    generator: torch.Generator,
    x0: object = None,
    maxiter: int | None = None,
    M: object = None,
    num_estimates: int | None = None,
    variance: bool = True,
) -> tuple[torch.Tensor, UlisseInfo]:
    r"""Unbiased estimate of ``A⁻¹b`` by CG with randomized truncation (Filippone & Engler, §4).

    CG runs until the residual reaches the early threshold ``alpha``; after that,
    step ``r = 1, 2, …`` is taken only with probability ``1/w_r``, ``w_r = exp(β r)``
    ("Russian roulette"), and its increment ``α_i p_i`` is multiplied by the inverse
    survival probability ``W_r = ∏_{s≤r} w_s = exp(β r (r+1)/2)``:

    .. math::
        x̃ = x_0 + \sum_{i ≤ l} α_i p_i + \sum_{r ≥ 1} W_r I_r \, α_{l+r} p_{l+r},
        \qquad P(I_r = 1) = 1/W_r,

    so ``E[x̃] = x_0 + Σ_i α_i p_i = A⁻¹b`` exactly (the CG series ends once CG has
    converged, after at most ``n`` steps in exact arithmetic).

    Parameters
    ----------
    A
        Anything :func:`pnsolve.linops.as_linop` accepts, shape ``(n, n)``, SPD.
    b
        Right-hand side, shape ``(n,)`` or ``(n, k)``, finite, with ``A``'s dtype and
        device (NumPy arrays are converted). Columns are independent runs, each with
        its own threshold step and roulette draws (``k`` columns of one ``b`` give
        ``k`` independent estimates for the price of block products).
    alpha
        Early threshold, **absolute** as in the paper (which uses ``α = q √n``):
        the roulette starts once ``‖b − A x_l‖₂ ≤ alpha`` (column-wise), ``≥ 0``. As in
        the paper's Algorithm 1 the residual is checked after each step, so ``l ≥ 1``
        even when ``‖b − A x0‖ ≤ alpha`` (with the paper's ``α = √n`` and standardised
        targets, ``‖y‖ = √n``, the first step is always deterministic).
        ``alpha = 0`` (or below the attainable residual) gives plain CG to
        convergence. Take ``alpha = q · ‖b‖`` for a relative threshold.
    beta
        Rate ``β > 0`` of the weights ``w_r = exp(β r)``; larger means fewer steps
        after the threshold and a larger variance. The expected number of roulette
        steps is ``Σ_{j≥1} exp(−β j (j+1)/2)``.
    generator
        The ``torch.Generator`` that draws the roulette (required; on any device).
    x0
        Initial guess with ``b``'s shape (default zero); costs one product.
    maxiter
        Maximum total number of CG steps (default ``10·n``). An estimate cut by it is
        biased (``info.unbiased`` is False, ``StopReason.MAX_ITERATIONS``).
    M
        Preconditioner approximating ``A⁻¹`` (as in :func:`pnsolve.cg`); the threshold
        is still on the unpreconditioned residual.
    num_estimates
        ``None`` (default): one estimate, shaped like ``b``. An int ``E ≥ 1``: ``E``
        estimates with independent roulette draws along the *same* CG run (paper
        §4.1), stacked as ``x[0], …, x[E−1]`` (shape ``(E, *b.shape)``, also for
        ``E = 1``: the shape follows the argument's type, as NumPy's ``size``). They
        are independent given ``A, b``, so ``x[0]ᵀ B x[1]`` is an unbiased estimate of
        the quadratic form ``(A⁻¹b)ᵀ B (A⁻¹b)`` (e.g. ``yᵀK⁻¹ ∂K K⁻¹y`` in a GP
        gradient), whereas the plug-in ``x̃ᵀ B x̃`` is biased by ``tr(B Cov x̃)``. CG
        runs until every estimate is done.
    variance
        Accumulate ``info.variance_estimates`` (default). ``False`` skips its
        ``O(E n k)`` work per step (callers that never read it, such as the SGLD
        gradient); ``info.variance_estimates`` is then NaN.

    Returns
    -------
    x : torch.Tensor
        The estimate(s): shape of ``b``, or ``(num_estimates, *b.shape)`` when
        ``num_estimates`` is given. Dtype and device of ``b``.
    info : UlisseInfo
        Step counts (to the threshold, after it), products, the weights applied,
        truncation by roulette or convergence, a variance estimate, stop reason.

    Raises
    ------
    TypeError
        If ``generator`` is not a ``torch.Generator``, on dtype mismatches or
        arguments of the wrong type (the message names the argument).
    ValueError
        On shape or device mismatches, NaN/Inf in ``b`` or ``x0``, ``alpha < 0``,
        ``beta ≤ 0``, non-finite ``alpha``/``beta``, negative ``maxiter``.
    NotPositiveDefiniteError
        On negative curvature ``pᵀAp < 0`` (``A`` not SPD) or ``rᵀMr ≤ 0``.

    Notes
    -----
    *Cost.* One product with ``A`` per step (the roulette is drawn before the product,
    so a rejected step costs nothing): ``info.products = iterations + (1 if x0)``.
    The expected number of steps is ``l + Σ_j exp(−β j(j+1)/2)`` where ``l`` is the
    number of CG steps to the threshold.

    *Variance.* ``Var`` is finite only while the CG increments ``‖δ_{l+j}‖`` shrink
    faster than ``W_j`` grows; on slowly converging systems (``κ ≳ 10³``) the rare
    long runs carry the mass and a sample mean over few runs looks biased.
    ``info.variance_estimates`` is an unbiased one-run estimate of ``E‖x̃ − A⁻¹b‖²``:
    ``Σ_{j,k ≤ J} W_max(j,k) (W_min(j,k) − 1) δ_jᵀδ_k`` over the roulette steps seen.

    *Convergence.* A column stops when its recursive residual reaches
    ``10·eps·‖b‖`` (its remaining increments are zero to working precision; in
    exact arithmetic after at most ``n`` steps) or, before that, when the roulette
    stops all its estimates. The roulette draws one float64 uniform per estimate and
    column per step from ``generator``, so a seed reproduces a run.

    The computation runs under ``torch.no_grad()``; it is not differentiable.
    """
    A, b, x0, alpha, beta, maxiter, M = validate_ulisse_arguments(
        A, b, x0, alpha, beta, generator, maxiter, M
    )
    if num_estimates is not None and (
        isinstance(num_estimates, bool) or not isinstance(num_estimates, int)
    ):
        raise TypeError(f"num_estimates must be None or an int, got {type(num_estimates).__name__}")
    if num_estimates is not None and num_estimates < 1:
        raise ValueError(f"num_estimates must be at least 1, got {num_estimates}")
    vector = b.ndim == 1
    B = b.unsqueeze(-1) if vector else b
    X0 = None if x0 is None else x0.reshape(B.shape)
    with torch.no_grad():
        trace = ulisse_trace(
            A, B, X0, alpha=alpha, beta=beta, generator=generator, maxiter=maxiter, M=M,
            n_estimates=1 if num_estimates is None else num_estimates,
            track_variance=check_bool(variance, "variance"),
        )  # fmt: skip
    x, info = trace.estimates, trace.info
    if vector:
        x, info = x.squeeze(-1), _squeeze(info, -1, per_column=True)
    if num_estimates is None:
        x, info = x.squeeze(0), _squeeze(info, 0, per_column=False)
    return x, info


def validate_ulisse_arguments(
    A: object,
    b: object,
    x0: object,
    alpha: object,
    beta: object,
    generator: object,
    maxiter: object,
    M: object,
) -> tuple[
    LinearOperator, torch.Tensor, torch.Tensor | None, float, float, int, LinearOperator | None
]:
    """Check and convert ULISSE's arguments; every error names its argument."""
    require_generator(generator)
    A, b, x0 = as_system(A, b, x0)
    alpha = check_nonnegative(alpha, "alpha")
    beta = check_nonnegative(beta, "beta")
    if beta == 0:
        raise ValueError("beta must be positive (beta = 0 never truncates), got 0")
    maxiter = check_optional_count(maxiter, "maxiter", 10 * A.shape[0])
    M = as_preconditioner(M, A)
    return A, b, x0, alpha, beta, maxiter, M


def _squeeze(info: UlisseInfo, dim: int, *, per_column: bool) -> UlisseInfo:
    """Drop the column (``dim=-1``) or the estimate (``dim=0``) dimension of ``info``."""
    fields = ["roulette_steps", "by_roulette", "converged", "variance_estimates"]
    if per_column:
        fields += ["threshold_iterations", "residual_norms", "cg_iterate"]
    return replace(info, **{f: getattr(info, f).squeeze(dim) for f in fields})


def expected_roulette_steps(beta: float) -> float:
    """Expected number of steps after the threshold, ``Σ_{j≥1} exp(−β j (j+1)/2)``.

    Ignores convergence (which can only shorten the run). ``beta > 0``.
    """
    beta = check_nonnegative(beta, "beta")
    if beta == 0:
        raise ValueError("beta must be positive, got 0")
    total, j = 0.0, 1
    while (term := math.exp(-beta * j * (j + 1) / 2)) > 1e-17 * max(total, 1.0):
        total, j = total + term, j + 1
    return total


def ulisse_variance(
    error_norms: torch.Tensor, threshold_iterations: int, beta: float, *, log10: bool = False
) -> float:
    r"""Exact ``E‖x̃ − A⁻¹b‖²`` (trace of the covariance) of ULISSE, from CG's error norms.

    With ``e_i = ‖A⁻¹b − x_i‖`` the error of the plain CG iterate after ``i`` steps
    and ``l`` the steps to the threshold,

    .. math::
        \operatorname{tr} \operatorname{Cov} x̃ = \sum_{m ≥ 1} (W_m − W_{m−1}) \, e_{l+m−1}^2,
        \qquad W_m = e^{β m (m+1)/2},\ W_0 = 1,

    (from ``W_min(j,k) − 1 = Σ_{m ≤ min(j,k)} (W_m − W_{m−1})`` and
    ``Σ_{j ≥ m} δ_{l+j} = A⁻¹b − x_{l+m−1}``): finite only while ``e_i²`` decays
    faster than ``W`` grows. An analysis tool (it needs the solution).

    Parameters
    ----------
    error_norms
        ``e_0, e_1, …, e_T``, shape ``(T + 1,)``; the sum stops at ``T`` (later
        errors are taken as zero, e.g. CG converged).
    threshold_iterations
        ``l`` (``info.threshold_iterations``), ``0 ≤ l ≤ T``.
    beta
        The weight rate ``β > 0``.
    log10
        Return ``log10`` of the trace instead (for traces beyond the float64 range).

    Returns
    -------
    float
        The trace (or its ``log10``), summed in log space; ``math.inf`` only beyond
        the float64 range.
    """
    beta = check_nonnegative(beta, "beta")
    if beta == 0:
        raise ValueError("beta must be positive, got 0")
    if not isinstance(error_norms, torch.Tensor) or error_norms.ndim != 1:
        raise ValueError("error_norms must be a 1-D tensor of CG error norms")
    l = check_optional_count(threshold_iterations, "threshold_iterations", 0)
    if l >= error_norms.numel():
        raise ValueError(
            f"threshold_iterations must be < len(error_norms) = {error_norms.numel()}, got {l}"
        )
    e = error_norms[l:].to(torch.float64)
    m = torch.arange(1, e.numel() + 1, dtype=torch.float64, device=e.device)
    # log(W_m − W_{m−1}) = β m(m+1)/2 + log(1 − e^{−β m})
    log_terms = beta * m * (m + 1) / 2 + torch.log(-torch.expm1(-beta * m)) + 2 * torch.log(e)
    log_total = float(torch.logsumexp(log_terms, dim=0))
    if log10:
        return log_total / math.log(10.0)
    return math.exp(log_total) if log_total < 709.0 else math.inf
