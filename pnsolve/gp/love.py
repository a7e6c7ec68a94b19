"""LOVE: Lanczos variance estimates (Pleiss et al., 2018) as a solver belief.

Lanczos on ``K̂`` from a probe vector ``b`` gives ``K̂ Q = Q T + β q_{k+1} e_kᵀ`` and the
inverse approximation ``K̂⁻¹ ≈ Q T⁻¹ Qᵀ = R Rᵀ`` with ``R = Q L_T⁻ᵀ`` (``T = L_T L_Tᵀ``).
Predictive variances are ``k(x, x) − ‖Rᵀ k(X, x)‖²``.

``Q T⁻¹ Qᵀ = S (Sᵀ K̂ S)⁻¹ Sᵀ`` for any basis ``S`` of the Krylov space
``K_k(K̂, b)``: it is the inverse approximation ``C_k`` of the probabilistic linear
solver with the inverse prior after ``k`` CG steps on ``K̂ x = b``. So the cache *is* a
belief (:meth:`LoveCache.belief`), ``C_k ≼ K̂⁻¹``, and LOVE's variances are never below
the exact GP's: the difference is LOVE's computational uncertainty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from ..beliefs.gaussian_solution import GaussianSolutionBelief
from ..beliefs.priors import InversePrior
from ..kernels.kernel import Kernel
from ..krylov.buffer import KrylovBuffer
from ..krylov.lanczos_process import lanczos
from ..linops.base import LinearOperator
from ..linops.checks import as_operand, as_square_operator
from ..linops.low_rank import LowRank
from ._checks import check_positive_int
from .posterior import nonnegative_variance

if TYPE_CHECKING:  # pragma: no cover
    from .love_grid import GridLove

__all__ = ["LoveCache"]


def check_rank(rank: object) -> int:
    """``rank`` as a positive int (``TypeError``/``ValueError`` otherwise)."""
    return check_positive_int(rank, "rank", type_name=True)


@dataclass(frozen=True, eq=False)
class LoveCache:
    """The LOVE cache ``K̂⁻¹ ≈ Q T⁻¹ Qᵀ = R Rᵀ`` of a symmetric positive definite ``K̂``.

    Build it with :meth:`build`; never mutated.

    Attributes
    ----------
    A
        The operator ``K̂``, shape ``(n, n)``.
    probe
        The Lanczos starting vector ``b``, shape ``(n,)``.
    Q
        Orthonormal Lanczos basis of ``K_k(K̂, b)``, shape ``(n, k)``.
    T
        Tridiagonal ``Qᵀ K̂ Q``, shape ``(k, k)``.
    L_T
        Lower Cholesky factor of ``T``, shape ``(k, k)``.
    R
        Root ``Q L_T⁻ᵀ``, shape ``(n, k)``: ``R Rᵀ = Q T⁻¹ Qᵀ``, ``Rᵀ K̂ R = I``.
    beta_next
        0-d tensor ``β_k`` of the Lanczos relation ``K̂ Q = Q T + β_k q_{k+1} e_kᵀ``.
    q_next
        The next Lanczos vector ``q_{k+1}``, shape ``(n,)`` (zero when the Krylov
        space became invariant or ``k = n``; then ``K̂ Q = Q T`` to working precision).
    breakdown
        Whether Lanczos found an invariant subspace (``k`` may be below the requested
        rank). Not an error: then ``Q T⁻¹ Qᵀ b = K̂⁻¹ b`` exactly.
    calibrated
        Whether the probe does not depend on the targets ``y``: then ``C_k`` comes from
        non-adaptive actions (the Krylov space of ``K̂`` and a ``y``-independent vector)
        and the posteriors built from the cache are marked ``calibrated``. The GP
        models' default probe ``k(X, Xs) 1 / t`` is; the centred targets are not; a
        user's probe is not unless declared (``build(..., calibrated=True)``).
    grid
        For a SKI model (:class:`~pnsolve.kernels.GridInterpolation`), the cache
        projected onto the grid (:class:`~pnsolve.gp.love_grid.GridLove`): ``K_UU W_Xᵀ
        R`` ``(m, k)`` and the mean vector, which make a test point cost ``O(4ᵈ k)``,
        independent of ``n``. ``None`` otherwise (the models attach it).
    """

    A: LinearOperator
    probe: torch.Tensor
    Q: torch.Tensor
    T: torch.Tensor
    L_T: torch.Tensor
    R: torch.Tensor
    beta_next: torch.Tensor
    q_next: torch.Tensor
    breakdown: bool
    calibrated: bool = False
    grid: GridLove | None = None

    @classmethod
    def build(cls, A: object, probe: object, rank: int, *, calibrated: bool = False) -> LoveCache:
        """Run Lanczos with full reorthogonalisation on ``A`` from ``probe``.

        Parameters
        ----------
        A
            Symmetric positive definite operator, shape ``(n, n)`` (anything
            :func:`pnsolve.linops.as_linop` accepts), e.g. ``K + σ² I`` or a
            heteroscedastic ``K + diag(σ²_i)``.
        probe
            Starting vector, shape ``(n,)``, nonzero and finite.
        rank
            Number of Lanczos steps ``k ≥ 1`` (clipped to ``n``).
        calibrated
            Declare that ``probe`` does not depend on the targets ``y`` (see
            :attr:`calibrated`); default ``False`` (no claim).

        Returns
        -------
        LoveCache
            The cache; ``rank`` products with ``A`` plus one more (for ``q_{k+1}``,
            so that :attr:`AR` needs no further products) when ``k < n``.

        Raises
        ------
        ValueError
            For ``rank < 1``, a probe of the wrong shape or zero, or an ``A`` whose
            projection ``T`` is not positive definite.
        """
        rank = check_rank(rank)
        A = as_square_operator(A, "A")
        probe = as_operand(probe, A, "probe", allow_matrix=False)
        n = A.shape[0]
        k = min(rank, n)
        res = lanczos(A, probe, k + 1 if k < n else k, reorth="full")
        steps = res.Q.shape[1]
        if steps > k:  # one step beyond k: keep q_{k+1} for the Lanczos relation
            Q, T = res.Q[:, :k], res.T[:k, :k]
            beta_next, q_next = res.T[k - 1, k].clone(), res.Q[:, k].clone()
        else:  # invariant subspace (or k = n): K̂ Q = Q T to working precision
            Q, T = res.Q, res.T
            beta_next, q_next = res.beta_next, torch.zeros_like(probe)
        L_T, info = torch.linalg.cholesky_ex(T)
        if int(info) != 0:
            raise ValueError(
                "the Lanczos matrix T = Qᵀ A Q is not positive definite (Cholesky failed at "
                f"column {int(info) - 1}): A must be symmetric positive definite"
            )
        R = torch.linalg.solve_triangular(L_T, Q.mT, upper=False).mT  # Q L_T⁻ᵀ
        return cls(
            A=A,
            probe=probe,
            Q=Q.contiguous(),
            T=T.contiguous(),
            L_T=L_T,
            R=R.contiguous(),
            beta_next=beta_next,
            q_next=q_next,
            breakdown=bool(res.breakdown and steps <= k),
            calibrated=bool(calibrated),
        )

    @property
    def rank(self) -> int:
        """Number of Lanczos vectors ``k`` in the cache."""
        return self.Q.shape[1]

    @property
    def inverse_approx(self) -> LowRank:
        """``Q T⁻¹ Qᵀ = R Rᵀ ≼ K̂⁻¹`` as a low-rank operator, shape ``(n, n)``."""
        return LowRank(self.R)

    @property
    def AR(self) -> torch.Tensor:
        """``K̂ R`` from the Lanczos relation, without products; shape ``(n, k)``.

        ``K̂ Q = Q T + β q_{k+1} e_kᵀ`` and ``T L_T⁻ᵀ = L_T`` give
        ``K̂ R = Q L_T + β q_{k+1} (L_T⁻¹ e_k)ᵀ``; as ``L_T`` is lower triangular,
        ``L_T⁻¹ e_k = e_k / (L_T)_{kk}``, so only the last column gets the correction.
        """
        AR = self.Q @ self.L_T
        AR[:, -1] += (self.beta_next / self.L_T[-1, -1]) * self.q_next
        return AR

    def buffer(self) -> KrylovBuffer:
        """The cache as a :class:`~pnsolve.krylov.KrylovBuffer` of ``K̂`` (for recycling).

        Actions ``S = Q`` ``(n, k)`` and images ``K̂ Q = Q T + β q_{k+1} e_kᵀ`` from the
        Lanczos relation (no product with ``K̂``). A virtual run on it
        (:func:`pnsolve.solvers.virtual_run`) gives ``C₀ = Q (Qᵀ K̂ Q)⁻¹ Qᵀ = Q T⁻¹ Qᵀ``,
        this cache's belief; passed as ``buffer=`` to a solver on :attr:`A` it starts the
        solve from that belief (recycling). A new buffer each call, owned by the caller.
        """
        AQ = self.Q @ self.T
        AQ[:, -1] += self.beta_next * self.q_next
        buf = KrylovBuffer(self.A)
        buf.append(self.Q, AQ)
        return buf

    def project(self, cross: torch.Tensor | LinearOperator) -> torch.Tensor:
        """``k(Xs, X) R``, shape ``(t, k)``.

        Parameters
        ----------
        cross
            The cross-covariance ``k(Xs, X)``, shape ``(t, n)``: a tensor or a
            (matrix-free) operator such as ``kernel.linop(Xs, X)``, which never forms it.
            (Test points index the rows; the 0.x releases before the LOVE rework took
            ``k(X, Xs)``, and for ``t = n`` that orientation cannot be detected.)
        """
        if isinstance(cross, LinearOperator):
            if cross.shape[1] != self.R.shape[0]:
                raise ValueError(
                    f"cross must have shape (t, {self.R.shape[0]}), got {tuple(cross.shape)}"
                )
            return cross @ self.R
        # (Rᵀ crossᵀ)ᵀ: the wide-by-skinny product runs 2x faster than cross @ R on CPU
        return (self.R.mT @ self._check_cross(cross).mT).mT

    def variance(
        self, cross: torch.Tensor | LinearOperator, prior_var: torch.Tensor
    ) -> torch.Tensor:
        """LOVE variances ``k(x, x) − ‖Rᵀ k(X, x)‖²``, shape ``(t,)``.

        Parameters
        ----------
        cross
            Cross-covariance ``k(Xs, X)``, shape ``(t, n)`` (tensor or operator).
        prior_var
            Prior variances ``k(x, x)``, shape ``(t,)``.

        Raises
        ------
        ValueError
            If a variance comes out negative (see :meth:`variance_from_projection`).
        """
        return self.variance_from_projection(self.project(cross), prior_var)

    def variance_from_projection(self, P: torch.Tensor, prior_var: torch.Tensor) -> torch.Tensor:
        """``prior_var − ‖P_i‖²`` for a projection ``P = k(Xs, X) R`` of shape ``(t, k)``.

        Raises
        ------
        NegativeVarianceError
            (a ``ValueError``) If a variance comes out negative beyond rounding
            (:func:`~pnsolve.gp.posterior.nonnegative_variance`). In exact arithmetic
            LOVE's variance is at least the exact posterior variance, which is
            nonnegative; a clearly negative value means a broken cache or inconsistent
            inputs, so it is reported, not clamped.
        """
        prior_var = torch.as_tensor(prior_var, device=P.device)
        if P.ndim != 2 or P.shape[1] != self.rank:
            raise ValueError(f"P must have shape (t, {self.rank}), got {tuple(P.shape)}")
        if prior_var.shape != (P.shape[0],):
            raise ValueError(
                f"prior_var must have shape ({P.shape[0]},), got {tuple(prior_var.shape)}"
            )
        explained = (P * P).sum(1)
        # rounding below zero becomes 0; beyond it R Rᵀ ≼ K̂⁻¹ is violated and reported
        return nonnegative_variance(prior_var - explained, prior_var.abs() + explained, "LOVE")

    def belief(self, b: torch.Tensor | None = None) -> GaussianSolutionBelief:
        """The cache as the solver belief about ``K̂⁻¹ b`` under the inverse prior.

        ``mean = R Rᵀ b``, ``V = T = R`` (so ``C_k = R Rᵀ``), ``W = K̂ R`` (from
        :attr:`AR`, no products). Equal to the belief of
        ``ProbabilisticLinearSolver(CG(), MaxIterations(k)).solve(K̂, probe)``.

        The belief is ``calibrated`` when ``b`` is given and the cache is (its probe,
        hence its actions, do not depend on ``b``); about the probe itself it is CG's
        belief, never calibrated.

        Parameters
        ----------
        b
            Right-hand side, shape ``(n,)``; default: the probe.
        """
        calibrated = b is not None and self.calibrated
        b = self.probe if b is None else as_operand(b, self.A, "b", allow_matrix=False)
        mean = self.R @ (self.R.mT @ b)
        return GaussianSolutionBelief(
            A=self.A,
            b=b,
            mean=mean,
            prior=InversePrior(),
            V=self.R,
            T=self.R,
            W=self.AR,
            calibrated=calibrated,
        )

    def _check_cross(self, cross: torch.Tensor) -> torch.Tensor:
        if not isinstance(cross, torch.Tensor):
            raise TypeError(
                f"cross must be a torch.Tensor or a LinearOperator, got {type(cross).__name__}"
            )
        if cross.ndim != 2 or cross.shape[1] != self.R.shape[0]:
            raise ValueError(
                f"cross must have shape (t, {self.R.shape[0]}), got {tuple(cross.shape)}"
            )
        return cross

    def __repr__(self) -> str:
        return (
            f"LoveCache(n={self.R.shape[0]}, rank={self.rank}, calibrated={self.calibrated}, "
            f"dtype={self.R.dtype})"
        )


def default_probe(kernel: Kernel, X: torch.Tensor, Xs: torch.Tensor, backend: str):
    """The paper's probe: ``k(X, Xs)`` averaged over the test points, shape ``(n,)``.

    One matrix-free product ``k(X, Xs) 1 / t`` (no ``(n, t)`` block is formed).
    """
    ones = torch.full((Xs.shape[0], 1), 1.0 / Xs.shape[0], dtype=Xs.dtype, device=Xs.device)
    return (kernel.linop(X, Xs, backend=backend) @ ones).squeeze(-1)
