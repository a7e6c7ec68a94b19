"""Krylov buffers: recycle actions and their images across related systems.

Tatzel, Wenger, Schneider & Hennig (2024), §3.3–3.4.

For a sequence of systems ``A_t = K + D_t`` sharing an expensive fixed part ``K`` and
differing by a cheap part ``D_t`` (e.g. ``W_t⁻¹`` in IterNCGP, a noise term in GP
hyperparameter steps), a buffer keeps actions ``S`` (``n × m``) and their images under
the fixed part ``Z = K S``. For a new ``A_t`` the images ``A_t S = Z + D_t S`` cost no
product with ``K``, so a solver can condition on all buffered actions at once — the
*virtual solver run*: ``G = Sᵀ A_t S = Q Λ Qᵀ`` (directions with ``λ`` at rounding
level or below dropped) and ``C₀ = S Q Λ⁻¹ Qᵀ Sᵀ`` with root ``S Q Λ^{-½}``. It is a
deflation: the initial residual ``b − A_t C₀ b`` is orthogonal to ``span(S)``.

**Compression** keeps ``R`` re-weighted actions ``S B`` (and images ``Z B``) that retain
the most variance reduction at the training data: ``tr(K C K) = Σ_j ‖K v_j‖²`` over an
``A_t``-orthonormal basis ``v_j`` of ``span(S)``. Its best rank-``R`` part comes from the
generalised eigenproblem ``(ZᵀZ) q = μ (Sᵀ A_t S) q``: the ``R`` largest ``μ`` (each the
variance reduction of its direction) are kept, non-positive and rounding-level
directions of ``Sᵀ A_t S`` are dropped first. (The paper keeps the largest eigenvalues of
``G``, which for normalised eigen-actions of ``K`` orders directions the same way.)
Memory stays ``O(n (R + new iterations))``.
"""

from __future__ import annotations

import math

import torch

from .._core.columns import ColumnBuffer
from .._core.validation import check_finite
from ..linops.base import LinearOperator
from ..linops.checks import as_square_operator
from ..linops.sum import Sum

__all__ = ["KrylovBuffer"]


class KrylovBuffer:
    """Actions ``S`` and images ``Z = K S`` under the fixed part ``K`` of ``A_t = K + D_t``.

    Parameters
    ----------
    K
        The fixed, expensive operator, shape ``(n, n)`` (e.g. a matrix-free
        :class:`~pnsolve.kernels.KernelMatrix`). The buffer belongs to this object:
        operators passed later must be ``K`` itself or a :class:`~pnsolve.linops.Sum`
        with ``K`` among its terms (``K + D_t``), of the same shape, dtype and device.

    Attributes
    ----------
    actions
        ``S``, shape ``(n, m)``.
    images
        ``Z = K S``, shape ``(n, m)``.

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> K = pn.linops.as_linop(torch.diag(torch.arange(1.0, 6.0, dtype=torch.float64)))
    >>> buf = pn.krylov.KrylovBuffer(K)
    >>> A = K + pn.linops.ScaledIdentity(5, 0.5, dtype=torch.float64)
    >>> b = torch.ones(5, dtype=torch.float64)
    >>> solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(2))
    >>> _ = solver.solve(A, b, buffer=buf)   # the solve appends its actions
    >>> buf.size
    2
    """

    def __init__(self, K: object) -> None:
        self.K = as_square_operator(K, "K")
        n = self.K.shape[0]
        self._S = ColumnBuffer(n, self.K.dtype, self.K.device)
        self._Z = ColumnBuffer(n, self.K.dtype, self.K.device)

    # ------------------------------------------------------------------ contents
    @property
    def actions(self) -> torch.Tensor:
        """``S``, shape ``(n, m)``."""
        return self._S.view()

    @property
    def images(self) -> torch.Tensor:
        """``Z = K S``, shape ``(n, m)``."""
        return self._Z.view()

    @property
    def size(self) -> int:
        """Number of buffered actions ``m``."""
        return len(self._S)

    @property
    def nbytes(self) -> int:
        """Bytes held by the buffered ``S`` and ``Z`` (``2 n m`` entries)."""
        return 2 * self.actions.numel() * self.actions.element_size()

    def append(self, S: torch.Tensor, Z: torch.Tensor) -> None:
        """Append actions ``S`` and their images ``Z = K S`` (shapes ``(n,)`` or ``(n, k)``)."""
        S = self._check_columns(S, "S")
        Z = self._check_columns(Z, "Z")
        if S.shape != Z.shape:
            raise ValueError(
                f"S and Z must have the same shape, got {tuple(S.shape)} and {tuple(Z.shape)}"
            )
        self._S.append(S)
        self._Z.append(Z)

    def record(self, A: LinearOperator, S: torch.Tensor, AS: torch.Tensor) -> None:
        """Append actions observed on ``A = K + D``, storing ``K S = A S − D S``.

        No product with ``K``.

        Called by :class:`~pnsolve.ProbabilisticLinearSolver` after each product when
        this buffer is passed as ``buffer=``. Columns are stored scaled to unit norm
        (with their images scaled alike).
        """
        D = self._shift(A)
        S = S.unsqueeze(-1) if S.ndim == 1 else S
        AS = AS.unsqueeze(-1) if AS.ndim == 1 else AS
        KS = AS if D is None else AS - D @ S
        # store unit-norm actions (a linear rescaling: Z stays K S exactly), so that
        # Gram matrices of the buffer are not dominated by the early, long CG directions
        norm = torch.linalg.vector_norm(S, dim=0)
        norm = torch.where(norm > 0, norm, torch.ones_like(norm))
        self.append(S / norm, KS / norm)

    def clear(self) -> None:
        """Drop every buffered action."""
        n = self.K.shape[0]
        self._S = ColumnBuffer(n, self.K.dtype, self.K.device)
        self._Z = ColumnBuffer(n, self.K.dtype, self.K.device)

    # ------------------------------------------------------------------ operators
    def images_for(self, A: object) -> torch.Tensor:
        """``A S = K S + D S`` for ``A = K + D`` without a product with ``K``; shape ``(n, m)``."""
        A = as_square_operator(A, "A")
        D = self._shift(A)
        S, Z = self.actions, self.images
        if D is None or S.shape[1] == 0:
            return Z
        return Z + D @ S

    def compress(self, rank: int, A: object | None = None) -> None:
        """Keep the ``rank`` re-weighted actions that retain the most variance reduction.

        Parameters
        ----------
        rank
            Number of directions to keep (``≥ 0``; a buffer of lower rank only loses
            its dependent or non-positive directions).
        A
            The operator ``K + D`` whose belief the kept actions should serve (default
            ``K``), defining ``G = Sᵀ A S``. No product with ``K``.

        Notes
        -----
        Solves ``(ZᵀZ) q = μ G q`` in the ``G``-orthonormal basis ``B = Q Λ^{-½}``
        (``G = Q Λ Qᵀ``, eigenvalues ``≤ √eps λ_max`` dropped as dependent or
        non-positive: their images' rounding errors would be amplified by ``λ^{-½}``)
        and keeps ``S B U_R``, ``Z B U_R`` for the top ``R`` eigenvectors ``U_R`` of
        ``Bᵀ ZᵀZ B``. The kept actions are ``A``-orthonormal.
        """
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ValueError(f"rank must be a non-negative int, got {rank!r}")
        S, Z = self.actions, self.images
        if S.shape[1] == 0:
            return
        AS = Z if A is None else self.images_for(A)
        G = S.mT @ AS
        G = 0.5 * (G + G.mT)
        # equilibrate (columns of different A-norms), then drop directions whose
        # curvature is at rounding level relative to their own, or negative
        diag = G.diagonal()
        d = torch.where(diag > 0, diag, torch.ones_like(diag)).rsqrt()
        lam, Q = torch.linalg.eigh(G * d[:, None] * d[None, :])
        eps = torch.finfo(G.dtype).eps
        # a direction of relative curvature λ has its image error amplified by λ^{-½}
        # in the basis B: keeping λ ≥ √eps bounds the kept images' error by ~eps^{3/4}
        # (10 √n eps kept λ ~ 1e-13, whose amplified image errors broke the conjugacy of
        # recycled actions: ‖VᵀAV − I‖ up to 350 on an XOR classification toy)
        keep = lam > math.sqrt(eps) * float(lam.abs().max().detach())
        B = d[:, None] * Q[:, keep] * lam[keep].rsqrt()
        ZB = Z @ B
        H = ZB.mT @ ZB
        H = 0.5 * (H + H.mT)
        mu, U = torch.linalg.eigh(H)
        order = torch.argsort(mu, descending=True)[: min(rank, mu.shape[0])]
        W = B @ U[:, order]
        S_new, Z_new = S @ W, Z @ W
        self.clear()
        if S_new.shape[1]:
            self.append(S_new, Z_new)

    # ------------------------------------------------------------------ checks
    def _shift(self, A: LinearOperator) -> LinearOperator | None:
        """``D`` for ``A = K + D`` (``None`` for ``A = K``); refuses other operators."""
        if A is self.K:
            return None
        if A.shape != self.K.shape:
            raise ValueError(
                f"A has shape {tuple(A.shape)} but the buffer's K has {tuple(self.K.shape)}"
            )
        if A.dtype != self.K.dtype:
            raise TypeError(f"A has dtype {A.dtype} but the buffer's K has {self.K.dtype}")
        if A.device != self.K.device:
            raise ValueError(f"A is on {A.device} but the buffer's K is on {self.K.device}")
        if isinstance(A, Sum) and any(op is self.K for op in A.ops):
            rest = [op for op in A.ops if op is not self.K]
            if not rest:
                return None
            return rest[0] if len(rest) == 1 else Sum(*rest)
        raise ValueError(
            "A must be the buffer's K or a Sum with K among its terms (K + D), so that "
            "A S = K S + D S needs no product with K"
        )

    def _check_columns(self, X: object, name: str) -> torch.Tensor:
        if not isinstance(X, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(X).__name__}")
        if X.ndim == 1:
            X = X.unsqueeze(-1)
        if X.ndim != 2 or X.shape[0] != self.K.shape[0]:
            raise ValueError(f"{name} must have shape ({self.K.shape[0]}, k), got {tuple(X.shape)}")
        if X.dtype != self.K.dtype:
            raise TypeError(f"{name} must have dtype {self.K.dtype}, got {X.dtype}")
        if X.device != self.K.device:
            raise ValueError(f"{name} must be on {self.K.device}, got {X.device}")
        return check_finite(X, name)

    def __repr__(self) -> str:
        return f"KrylovBuffer(n={self.K.shape[0]}, size={self.size}, dtype={self.K.dtype})"
