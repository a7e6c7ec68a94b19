"""The variational covariance ``Σ = C Cᵀ``: mean-field, chevron or full Cholesky factor."""

from __future__ import annotations

import torch

__all__ = ["COVARIANCES", "FULL_LIMIT", "VariationalCovariance"]

#: ``"diagonal"`` (mean-field), ``"chevron"`` (the first ``rank`` columns dense lower
#: triangular, the rest diagonal), ``"full"`` (dense lower triangular).
COVARIANCES = ("diagonal", "chevron", "full")
#: Largest ``m`` accepted for ``"full"`` (its ``m²/2`` parameters).
FULL_LIMIT = 4096


class VariationalCovariance:
    """Lower-triangular ``C`` with positive diagonal, ``Σ = C Cᵀ`` (Evans & Nair §2.2).

    The first ``R`` columns are dense below the diagonal (``R = 0``: mean-field;
    ``R = rank``: chevron; ``R = m``: full), the others hold only ``c_rr``. Storage:
    ``log_diag`` (``log c_rr``, shape ``(m,)``) and ``lower`` (shape ``(m, R)``, the
    entries ``c_kr`` for ``k > r``; the rest of it is never read). ``O(m R)`` numbers.

    Parameters
    ----------
    m
        Number of basis functions.
    kind
        One of :data:`COVARIANCES`.
    rank
        ``R`` for ``"chevron"`` (``1 ≤ rank ≤ m``).
    dtype, device
        Of the parameters.
    """

    def __init__(
        self, m: int, kind: str, rank: int, *, dtype: torch.dtype, device: torch.device
    ) -> None:
        if kind not in COVARIANCES:
            raise ValueError(f"covariance must be one of {COVARIANCES}, got {kind!r}")
        if kind == "chevron" and not (isinstance(rank, int) and 1 <= rank <= m):
            raise ValueError(f"rank must be an int in [1, num_features={m}], got {rank!r}")
        if kind == "full" and m > FULL_LIMIT:
            raise ValueError(
                f"covariance='full' stores m²/2 parameters; num_features={m} > {FULL_LIMIT}: "
                "use 'chevron'"
            )
        self.m, self.kind = m, kind
        self.R = {"diagonal": 0, "chevron": rank, "full": m}[kind]
        self.log_diag = torch.zeros(m, dtype=dtype, device=device)
        self.lower = torch.zeros(m, self.R, dtype=dtype, device=device)

    # ------------------------------------------------------------------ blocks
    def dense_block(
        self, rows: torch.Tensor, lower_rows: torch.Tensor, log_diag_dense: torch.Tensor
    ) -> torch.Tensor:
        """``C[rows, :R]`` from (leaf) copies of its parameters, shape ``(len(rows), R)``.

        Parameters
        ----------
        rows
            Row indices ``k``, shape ``(u,)``.
        lower_rows
            ``lower[rows]``, shape ``(u, R)`` (a leaf for gradients).
        log_diag_dense
            ``log_diag[:R]``, shape ``(R,)`` (a leaf for gradients).
        """
        r = torch.arange(self.R, device=rows.device)
        k = rows.unsqueeze(1)
        diag = torch.exp(log_diag_dense).unsqueeze(0).expand_as(lower_rows)
        zero = torch.zeros((), dtype=lower_rows.dtype, device=lower_rows.device)
        return torch.where(k > r, lower_rows, torch.where(k == r, diag, zero))

    def dense_columns(self) -> torch.Tensor:
        """``C[:, :R]``, shape ``(m, R)`` (no gradient)."""
        rows = torch.arange(self.m, device=self.lower.device)
        return self.dense_block(rows, self.lower, self.log_diag[: self.R])

    def matrix(self) -> torch.Tensor:
        """The whole ``C``, shape ``(m, m)`` (for tests and small ``m``)."""
        C = torch.diag(torch.exp(self.log_diag))
        C[:, : self.R] = self.dense_columns()
        return C

    # ----------------------------------------------------------------- queries
    def latent_cov(self, Phi: torch.Tensor) -> torch.Tensor:
        """``Φ Σ Φᵀ`` for feature rows ``Phi`` of shape ``(t, m)``; shape ``(t, t)``.

        Through ``Φ C = [Φ C[:, :R], Φ[:, R:] diag(c_rr)]``: never forms ``C``.
        """
        R = self.R
        F = Phi[:, R:] * torch.exp(self.log_diag[R:])
        cov = F @ F.mT
        if R:
            D = Phi @ self.dense_columns()
            cov = cov + D @ D.mT
        return cov

    def latent_var(self, Phi: torch.Tensor) -> torch.Tensor:
        """``diag(Φ Σ Φᵀ)`` for feature rows ``Phi`` of shape ``(t, m)``; shape ``(t,)``."""
        R = self.R
        var = (Phi[:, R:] ** 2) @ torch.exp(2 * self.log_diag[R:])
        if R:
            var = var + ((Phi @ self.dense_columns()) ** 2).sum(-1)
        return var

    def trace(self) -> torch.Tensor:
        """``tr Σ = ‖C‖²_F``."""
        R = self.R
        return (self.dense_columns() ** 2).sum() + torch.exp(2 * self.log_diag[R:]).sum()

    def log_det(self) -> torch.Tensor:
        """``log |Σ| = 2 Σ_r log c_rr``."""
        return 2 * self.log_diag.sum()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The parameters (for checkpoints)."""
        return {"log_diag": self.log_diag.clone(), "lower": self.lower.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore :meth:`state_dict`."""
        for name in ("log_diag", "lower"):
            value = state[name]
            if value.shape != getattr(self, name).shape:
                raise ValueError(f"{name} has shape {tuple(value.shape)}, expected "
                                 f"{tuple(getattr(self, name).shape)}")  # fmt: skip
            getattr(self, name).copy_(value)
