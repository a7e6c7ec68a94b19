"""``problinsolve``: the SciPy-like front door to the probabilistic linear solver."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..beliefs.gaussian_solution import GaussianSolutionBelief
from ..linops.base import LinearOperator
from ..linops.checks import check_nonnegative, check_optional_count
from ..policies.base import Policy
from ..stopping.criteria import MaxIterations, ResidualNorm
from .solver import ProbabilisticLinearSolver
from .state import SolveInfo

__all__ = ["problinsolve"]


def _policy_from_name(policy: str | Policy, M: object) -> Policy:
    from .. import policies

    if isinstance(policy, Policy):
        return policy
    factories: dict[str, Callable[[], Policy]] = {
        "cg": lambda: policies.CG(preconditioner=M),
        "unitvector": policies.UnitVector,
        "random": policies.Random,
        "lanczos": policies.Lanczos,
    }
    if not isinstance(policy, str) or policy.lower() not in factories:
        raise ValueError(f"policy must be a Policy or one of {sorted(factories)}, got {policy!r}")
    if M is not None and policy.lower() != "cg":
        raise ValueError(
            f"M (a preconditioner) is only used by the 'cg' policy, not by {policy!r}; "
            "drop M or use policy='cg'"
        )
    return factories[policy.lower()]()


def problinsolve(
    A: object,
    b: object,
    x0: object = None,
    *,
    policy: str | Policy = "cg",
    prior: str | float | LinearOperator = "inverse",
    rtol: float = 1e-5,
    atol: float = 0.0,
    maxiter: int | None = None,
    M: object = None,
    generator: torch.Generator | None = None,
    precision: str = "full",
) -> tuple[GaussianSolutionBelief, SolveInfo]:
    """Solve ``A x = b`` probabilistically with SciPy-like arguments.

    Equivalent to ``ProbabilisticLinearSolver(policy, MaxIterations(maxiter) |
    ResidualNorm(rtol, atol), prior).solve(A, b, x0, generator=generator)``.

    Parameters
    ----------
    A
        SPD operator, shape ``(n, n)`` (anything :func:`~pnsolve.linops.as_linop` accepts).
    b
        Right-hand side, shape ``(n,)`` (one belief per call; a matrix ``(n, k)`` is
        refused with a message: solve its columns one at a time, or use :func:`pnsolve.cg`).
    x0
        Prior mean (default zero).
    policy
        A :class:`~pnsolve.policies.Policy` or a name: ``"cg"`` (default, uses ``M``),
        ``"unitvector"`` (sequential), ``"random"`` (Gaussian; needs ``generator``) or
        ``"lanczos"``.
    prior
        ``"inverse"`` (default), ``σ²`` or an SPD covariance operator.
    rtol, atol
        Stop when ``‖r_i‖ ≤ max(rtol‖b‖, atol)``.
    maxiter
        Iteration limit (default ``n``: with independent actions the belief is exact then).
    M
        Preconditioner for the ``"cg"`` policy (a ``ValueError`` with other policy names;
        a :class:`~pnsolve.policies.Policy` object carries its own).
    generator
        Randomness for stochastic policies.
    precision
        ``"full"`` (default) or ``"mixed"`` (float32 products, float64 belief; see
        :class:`~pnsolve.ProbabilisticLinearSolver`).

    Returns
    -------
    belief : GaussianSolutionBelief
    info : SolveInfo
    """
    rtol = check_nonnegative(rtol, "rtol")
    atol = check_nonnegative(atol, "atol")
    pol = _policy_from_name(policy, M)
    from ..linops.checks import as_square_operator

    A = as_square_operator(A, "A")
    b_any: Any = b  # a tensor or an array (validated by the solver); here only its ndim
    if getattr(b_any, "ndim", 1) == 2:
        raise ValueError(
            f"b has shape {tuple(b_any.shape)}: problinsolve infers one Gaussian belief over a "
            "vector x, so b must have shape (n,); solve the columns one at a time "
            "([pn.problinsolve(A, b[:, j]) for j in range(k)]) or use pn.cg, which takes "
            "several right-hand sides"
        )
    maxiter = check_optional_count(maxiter, "maxiter", A.shape[0])
    # The residual test comes first so that convergence on the last allowed iteration is
    # recorded as CONVERGED, not MAX_ITERATIONS.
    stopping = ResidualNorm(rtol=rtol, atol=atol) | MaxIterations(maxiter)
    solver = ProbabilisticLinearSolver(
        pol, stopping, prior=prior, preconditioner=M, precision=precision
    )
    return solver.solve(A, b, x0=x0, generator=generator)
