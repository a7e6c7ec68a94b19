"""Affine iterative methods ``x_m = P_m b`` and their calibrated beliefs.

A stationary iteration ``x_{k+1} = x_k + M⁻¹ (b − A x_k)`` from ``x₀ = 0`` gives after
``m`` sweeps ``x_m = P_m b`` with ``P_m = Σ_{j<m} (I − M⁻¹A)^j M⁻¹``, a matrix that
depends on ``A`` and ``m`` but not on ``b``; the error propagator is
``E_m = I − P_m A = (I − M⁻¹ A)^m``. Chebyshev's semi-iterative method is affine too
(``P_m = q_{m−1}(A)``, a polynomial). :func:`affine_solve` turns such a method into
the belief ``N(x_m, E_m Σ₀ E_mᵀ)`` (:class:`~pnsolve.beliefs.AffineSolutionBelief`),
which is calibrated on solutions drawn from the prior.

**Transposes.** With ``A = Aᵀ``,
``P_mᵀ = Σ_{j<m} M⁻ᵀ (I − A M⁻ᵀ)^j = Σ_{j<m} (I − M⁻ᵀ A)^j M⁻ᵀ`` (push-through
``M⁻ᵀ (I − A M⁻ᵀ) = (I − M⁻ᵀ A) M⁻ᵀ``): ``m`` sweeps of the *transposed method*
(splitting ``Mᵀ``) from zero. For a symmetric splitting (symmetric Gauss–Seidel,
``M = (D + L) D⁻¹ (D + Lᵀ)``; damped Jacobi/Richardson; Chebyshev, a polynomial in
``A``) ``P_m = P_mᵀ`` and ``E_m`` is self-adjoint in the ``A`` inner product
(``A E_m = E_mᵀ A``). A forward block sweep (alternating projections with a cyclic
order, ``M = D_B + L_B``) has the backward sweep (``Mᵀ = D_B + U_B``) as its transpose.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar

import torch

from .._core.info import IterationInfo
from .._core.stop_reason import StopReason
from .._core.validation import check_positive_int
from ..beliefs.affine import AffineSolutionBelief
from ..beliefs.priors import as_prior
from ..linops.base import LinearOperator
from ..linops.checks import as_operand, as_square_operator
from .divergence import DivergenceError, ResidualWatch, growth_text

__all__ = ["AffineMethod", "AffineSolveInfo", "SweepOperator", "Sweeper", "affine_solve"]


class Sweeper(abc.ABC):
    """A method's sweeps on a fixed ``A``, with its set-up (bounds, block factors) done.

    Built by :meth:`AffineMethod.operator`; internal to :class:`SweepOperator`.
    """

    #: Full products with ``A`` per sweep.
    products_per_sweep: int = 0
    #: Passes over ``A``'s rows per sweep (every row read once per pass).
    row_passes_per_sweep: int = 0
    #: Whether the splitting is symmetric (``P_m = P_mᵀ``).
    symmetric: bool = True
    #: Products with ``A`` spent on the set-up (spectral bounds).
    setup_products: int = 0
    #: Largest factor by which a convergent run's residual norm can exceed the initial
    #: one (see :mod:`pnsolve.iterative.divergence`).
    growth_bound: float = 1.0

    @abc.abstractmethod
    def run(
        self, X: torch.Tensor, R: torch.Tensor, sweeps: int, transpose: bool, watch: ResidualWatch
    ) -> list[float]:
        """Run ``sweeps`` sweeps in place on iterates ``X`` and residuals ``R = B − A X``.

        Returns the residual norm of column 0 after each sweep (recursive residuals),
        read by ``watch.check`` (which raises once a column diverged).
        ``transpose=True`` runs the transposed method (splitting ``Mᵀ``).
        """

    def parameters(self) -> dict[str, float]:
        """The set-up's numbers (damping, eigenvalue bounds), for the info."""
        return {}

    def diverged(self, sweep: int, start: float, now: float) -> Exception:
        """The error once a residual column went from ``start`` to ``now`` at ``sweep``."""
        return DivergenceError(f"{type(self).__name__} diverges: {growth_text(start, now, sweep)}")

    @staticmethod
    def step(A: LinearOperator, X: torch.Tensor, R: torch.Tensor, D: torch.Tensor) -> None:
        """``X += D`` and ``R −= A D`` in place (one product)."""
        X += D
        R -= A @ D


@dataclass(frozen=True)
class AffineMethod(abc.ABC):
    """Base of the affine iterative methods: ``m = sweeps`` sweeps from ``x₀``.

    Subclasses are frozen dataclasses (immutable configuration); everything that
    depends on ``A`` (eigenvalue estimates, block factors) is computed by
    :meth:`operator`, never from ``b``.

    Parameters
    ----------
    sweeps
        ``m ≥ 1``: the number of sweeps.
    """

    sweeps: int

    #: Affine methods never look at ``b`` to choose what to do: not adaptive.
    adaptive: ClassVar[bool] = False

    def __post_init__(self) -> None:
        check_positive_int(self.sweeps, "sweeps")

    def operator(self, A: object) -> SweepOperator:
        """``P_m`` for ``A`` as a :class:`SweepOperator` (set-up from ``A`` alone).

        Parameters
        ----------
        A
            Symmetric positive definite operator (anything
            :func:`~pnsolve.linops.as_linop` accepts; stored matrices are checked for
            symmetry).

        Returns
        -------
        SweepOperator
            ``P_m``: products run ``m`` sweeps from zero, transposed products ``m``
            sweeps of the transposed method.
        """
        op = as_square_operator(A, "A")
        return SweepOperator(self, op, self._sweeper(op))

    @abc.abstractmethod
    def _sweeper(self, A: LinearOperator) -> Sweeper:
        """The method's sweeps on the checked ``A`` (set-up done here, from ``A`` only)."""


class SweepOperator(LinearOperator):
    """``P_m`` of an affine method on ``A``: ``P_m B`` runs ``m`` sweeps on right-hand sides ``B``.

    Built by :meth:`AffineMethod.operator`. ``P_mᵀ B`` (:meth:`rmatmat`) runs ``m``
    sweeps of the transposed method; for a symmetric splitting ``P_m`` is symmetric and
    both are the same.

    Attributes
    ----------
    method
        The :class:`AffineMethod`.
    A
        The system operator.
    sweeps
        ``m``.
    setup_products
        Products with ``A`` spent on the set-up (eigenvalue estimates).
    parameters
        The set-up's numbers: ``damping`` (Jacobi/Richardson), ``lower``/``upper``
        eigenvalue bounds (Chebyshev, and the spectral estimates behind a damping).

    Notes
    -----
    Cost of ``P_m B`` for ``B`` of shape ``(n, k)``: ``m`` times the method's sweep on
    ``k`` columns (see :attr:`products_per_sweep`, :attr:`row_passes_per_sweep`).
    """

    def __init__(self, method: AffineMethod, A: LinearOperator, sweeper: Sweeper) -> None:
        super().__init__(A.shape, A.dtype, A.device, is_symmetric=sweeper.symmetric)
        self.method = method
        self.A = A
        self.sweeps = method.sweeps
        self._sweeper = sweeper
        self.setup_products = sweeper.setup_products
        self.parameters = sweeper.parameters()

    @property
    def products_per_sweep(self) -> int:
        """Full products with ``A`` per sweep (Jacobi, Richardson, Chebyshev: 1)."""
        return self._sweeper.products_per_sweep

    @property
    def row_passes_per_sweep(self) -> int:
        """Passes over the rows of ``A`` per sweep (Gauss–Seidel: 1 forward + 1 backward)."""
        return self._sweeper.row_passes_per_sweep

    def run(
        self, B: torch.Tensor, *, transpose: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, list[float]]:
        """``(P_m B, B − A P_m B, norms)``: ``m`` sweeps from zero on the columns of ``B``.

        Parameters
        ----------
        B
            Right-hand sides, shape ``(n, k)`` (checked by the caller).
        transpose
            Run the transposed method: ``P_mᵀ B``.

        Returns
        -------
        X, R : torch.Tensor
            The iterate and its recursive residual, shape ``(n, k)``.
        norms : list of float
            Residual norm of column 0, before the first and after each sweep.

        Raises
        ------
        DivergenceError
            Once a column's residual exceeds
            :data:`~pnsolve.iterative.divergence.DIVERGENCE_FACTOR` times the method's
            growth bound times its initial norm, or is no longer finite; the message
            names the setting to change (``damping``, ``upper``). Gauss–Seidel and
            cyclic projections, which converge for every SPD ``A``, raise
            :class:`~pnsolve.NotPositiveDefiniteError` instead.
        """
        with torch.no_grad():
            X = torch.zeros_like(B)
            R = B.clone()
            watch = ResidualWatch(R, self._sweeper)
            norms = [float(watch.start[0])]
            norms += self._sweeper.run(X, R, self.sweeps, transpose, watch)
        return X, R, norms

    def _matmat(self, X: torch.Tensor) -> torch.Tensor:
        return self.run(X)[0]

    def _rmatmat(self, X: torch.Tensor) -> torch.Tensor:
        if self.is_symmetric:
            return self._matmat(X)
        return self.run(X, transpose=True)[0]

    def __repr__(self) -> str:
        return f"SweepOperator({self.method!r}, n={self.shape[0]}, dtype={self.dtype})"


@dataclass(frozen=True, eq=False, kw_only=True)
class AffineSolveInfo(IterationInfo):
    """What :func:`affine_solve` spent: ``belief, info = affine_solve(A, b, method)``.

    Attributes
    ----------
    iterations
        Sweeps run (``m``).
    products
        Full products with ``A``: the sweeps' (Jacobi, Richardson, Chebyshev: one per
        sweep), the set-up's (eigenvalue estimates) and the initial residual of a
        nonzero ``x0``. Row passes are counted in :attr:`row_passes`.
    residual_norms
        ``‖b − A x_k‖`` before the first and after each sweep, shape ``(m + 1,)``
        (recursive residuals: no extra product).
    stop_reason
        ``MAX_ITERATIONS``: an affine method always runs its ``m`` sweeps (stopping on
        the residual would make it adaptive), or ``ZERO_RHS`` when ``b = A x0``.
    row_passes
        Passes over the rows of ``A`` (Gauss–Seidel, alternating projections): each reads
        every row once, the cost of one product.
    setup_products
        The part of :attr:`products` spent on the set-up.
    parameters
        The set-up's numbers (damping, eigenvalue bounds), see :class:`SweepOperator`.
    """

    row_passes: int
    setup_products: int
    parameters: dict[str, float]


def affine_solve(
    A: object,
    b: object,
    method: AffineMethod,
    x0: object = None,
    *,
    prior: object = "inverse",
) -> tuple[AffineSolutionBelief, AffineSolveInfo]:
    """Run ``m`` sweeps of an affine method and return its calibrated belief.

    ``x_m = x₀ + P_m (b − A x₀)`` and ``x* ~ N(x_m, (I − P_m A) Σ₀ (I − P_m A)ᵀ)``; see
    :class:`~pnsolve.beliefs.AffineSolutionBelief`.

    Parameters
    ----------
    A
        Symmetric positive definite operator, shape ``(n, n)``. Gauss–Seidel and
        alternating projections read its rows (``row_block``; a stored matrix, a
        :class:`~pnsolve.iterative.KernelSystem` or any operator with row access).
    b
        Right-hand side, shape ``(n,)``.
    method
        An :class:`AffineMethod`: :class:`~pnsolve.iterative.GaussSeidel`,
        :class:`~pnsolve.iterative.JacobiIteration`, :class:`~pnsolve.iterative.Richardson`,
        :class:`~pnsolve.iterative.Chebyshev` or
        :class:`~pnsolve.iterative.CyclicProjections`.
    x0
        Prior mean and starting point (``None``: zero).
    prior
        ``"inverse"`` (``Σ₀ = A⁻¹``), a positive number ``σ²`` (``Σ₀ = σ² I``), an SPD
        operator or a :class:`~pnsolve.beliefs.Prior`.

    Returns
    -------
    belief : AffineSolutionBelief
        ``mean = x_m``, ``cov`` (a linear operator), ``inverse_approx = P_m``,
        ``calibrated = True``.
    info : AffineSolveInfo
        Sweeps, products, row passes, residual norms, set-up parameters.

    Raises
    ------
    TypeError
        If ``method`` is not an :class:`AffineMethod`.
    NotPositiveDefiniteError
        If the set-up finds ``A`` not positive definite (a non-positive diagonal entry,
        a diagonal block without a Cholesky factor, a non-positive Ritz value), or
        Gauss–Seidel / cyclic projections diverge (they converge for every SPD ``A``).
    DivergenceError
        If the sweeps diverge (:mod:`pnsolve.iterative.divergence`): the residual grew
        past ``DIVERGENCE_FACTOR`` times what a convergent run allows, or is no longer
        finite. The message names the setting to change (``damping`` of Jacobi and
        Richardson, ``upper`` of Chebyshev) and a value that converges.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> A = torch.tensor([[4.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    >>> b = torch.tensor([1.0, 2.0], dtype=torch.float64)
    >>> belief, info = pn.iterative.affine_solve(A, b, pn.iterative.GaussSeidel(sweeps=20))
    >>> torch.allclose(belief.mean, torch.linalg.solve(A, b)), belief.calibrated
    (True, True)
    """
    if not isinstance(method, AffineMethod):
        raise TypeError(
            "method must be a pnsolve.iterative.AffineMethod (GaussSeidel, JacobiIteration, "
            f"Richardson, Chebyshev, CyclicProjections), got {type(method).__name__}"
        )
    P = method.operator(A)
    op = P.A
    b = as_operand(b, op, "b", allow_matrix=False)
    start = None if x0 is None else as_operand(x0, op, "x0", allow_matrix=False)
    the_prior = as_prior(prior)
    with torch.no_grad():
        r0 = b if start is None else b - op @ start
        X, _, norms = P.run(r0.unsqueeze(-1))
        mean = X[:, 0] if start is None else start + X[:, 0]
    extra = 0 if start is None else 1
    info = AffineSolveInfo(
        iterations=P.sweeps,
        products=P.setup_products + P.sweeps * P.products_per_sweep + extra,
        residual_norms=torch.tensor(norms, dtype=b.dtype, device=b.device),
        stop_reason=StopReason.ZERO_RHS if norms[0] == 0 else StopReason.MAX_ITERATIONS,
        row_passes=P.sweeps * P.row_passes_per_sweep,
        setup_products=P.setup_products,
        parameters=dict(P.parameters),
    )
    return AffineSolutionBelief(A=op, b=b, mean=mean, prior=the_prior, P=P), info
