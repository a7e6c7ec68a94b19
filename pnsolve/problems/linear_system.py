"""A linear system ``A x = b`` with optional ground truth, as used by tests and benchmarks."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._core.validation import check_same_device, check_same_dtype, check_tensor
from ..linops import LinearOperator

__all__ = ["LinearSystem"]


@dataclass(frozen=True, eq=False)
class LinearSystem:
    """The problem ``A x = b``.

    Attributes
    ----------
    A
        Square :class:`~pnsolve.linops.LinearOperator` of shape ``(n, n)``.
    b
        Right-hand side of shape ``(n,)`` or ``(n, k)`` (``k`` columns solved at once).
    x_true
        The solution, same shape as ``b``, or None when unknown.
    name
        A short description, e.g. ``"exponential(n=50, cond=1e+03)"``.
    spectrum
        Eigenvalues of ``A`` in descending order, shape ``(n,)``, or None.
    """

    A: LinearOperator
    b: torch.Tensor
    x_true: torch.Tensor | None = None
    name: str = ""
    spectrum: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.A, LinearOperator):
            raise TypeError(
                f"A must be a pnsolve LinearOperator, got {type(self.A).__name__}; "
                "wrap tensors with pnsolve.linops.as_linop(...)"
            )
        if not self.A.is_square:
            raise ValueError(f"A must be square, got shape {self.A.shape}")
        n = self.A.shape[0]
        check_tensor(self.b, "b")
        if self.b.ndim not in (1, 2) or self.b.shape[0] != n:
            raise ValueError(f"b must have shape ({n},) or ({n}, k), got {tuple(self.b.shape)}")
        check_same_dtype(self.b, self.A.dtype, "b", "A")
        check_same_device(self.b, self.A.device, "b", "A")
        if self.x_true is not None:
            check_tensor(self.x_true, "x_true")
            if self.x_true.shape != self.b.shape:
                raise ValueError(
                    f"x_true must have the shape of b {tuple(self.b.shape)}, "
                    f"got {tuple(self.x_true.shape)}"
                )
            check_same_dtype(self.x_true, self.A.dtype, "x_true", "A")
        if self.spectrum is not None:
            check_tensor(self.spectrum, "spectrum")
            if self.spectrum.shape != (n,):
                raise ValueError(
                    f"spectrum must have shape ({n},), got {tuple(self.spectrum.shape)}"
                )

    @property
    def n(self) -> int:
        """Size of the system."""
        return self.A.shape[0]

    @property
    def cond(self) -> float | None:
        """Spectral condition number ``λ_max / λ_min`` when the spectrum is known."""
        if self.spectrum is None:
            return None
        return float(self.spectrum.max() / self.spectrum.min())

    def residual(self, x: torch.Tensor) -> torch.Tensor:
        """Residual ``b − A x``.

        Parameters
        ----------
        x
            Candidate solution, shape of ``b``.

        Returns
        -------
        torch.Tensor
            Same shape as ``b``.
        """
        check_tensor(x, "x")
        if x.shape != self.b.shape:
            raise ValueError(
                f"x must have the shape of b {tuple(self.b.shape)}, got {tuple(x.shape)}"
            )
        return self.b - self.A @ x

    @classmethod
    def from_solution(
        cls,
        A: LinearOperator,
        x: torch.Tensor,
        name: str = "",
        spectrum: torch.Tensor | None = None,
    ) -> LinearSystem:
        """The system whose solution is ``x``: ``b = A x``.

        Parameters
        ----------
        A
            Square operator ``(n, n)``.
        x
            Solution of shape ``(n,)`` or ``(n, k)``.
        name, spectrum
            Stored on the result.
        """
        if not isinstance(A, LinearOperator):
            raise TypeError(f"A must be a pnsolve LinearOperator, got {type(A).__name__}")
        check_tensor(x, "x")
        return cls(A=A, b=A @ x, x_true=x, name=name, spectrum=spectrum)
