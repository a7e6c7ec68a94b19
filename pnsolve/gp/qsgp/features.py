"""Columns and rows of the random-Fourier-feature matrix ``Φ``, one block at a time."""

from __future__ import annotations

import torch

from ...kernels.random_features import RandomFourierFeatures, check_spectral_state

__all__ = ["FeatureBlocks"]


class FeatureBlocks:
    """Blocks ``Φ[rows, cols]`` of ``φ_i(x) = sqrt(2 s / m) cos(ε_iᵀ x / ℓ + b_i)``.

    QSGP never forms the ``n × m`` matrix ``Φ``: every estimate reads a block of ``ñ``
    sampled rows and ``m̃`` sampled columns (cost ``O(ñ m̃ d)``, independent of ``n`` and
    ``m``). Blocks of the *current* basis follow the kernel's hyperparameters (and carry
    their gradients, for empirical Bayes); blocks of the *frozen* basis use the
    hyperparameters captured by :meth:`freeze` (the control variates' basis, fixed at
    initialisation so that their expectations stay valid while the kernel moves,
    Evans & Nair appendix F.3).

    Parameters
    ----------
    features
        The :class:`~pnsolve.kernels.RandomFourierFeatures` (frozen base frequencies
        ``ε``, phases ``b``; its kernel's lengthscale ``ℓ`` and outputscale ``s``).
    """

    def __init__(self, features: RandomFourierFeatures) -> None:
        self.rff = features
        self.m = features.num_features
        #: ``(lengthscale, outputscale)`` of the frozen basis (:meth:`freeze`), or ``None``
        self.frozen_hyperparameters: tuple[torch.Tensor, torch.Tensor] | None = None

    def freeze(self) -> None:
        """Capture the current lengthscale and outputscale as the frozen basis."""
        k = self.rff.kernel
        self.frozen_hyperparameters = (
            k.lengthscale.detach().clone(),
            k.outputscale.detach().clone(),
        )

    def block(
        self, X: torch.Tensor, cols: torch.Tensor | None = None, *, frozen: bool = False
    ) -> torch.Tensor:
        """``Φ[X, cols]`` of shape ``(len(X), len(cols))`` (all ``m`` columns if ``None``).

        Parameters
        ----------
        X
            Input rows, shape ``(r, d)`` (already validated).
        cols
            Integer column indices, shape ``(c,)``; repeats allowed.
        frozen
            Use the hyperparameters of :meth:`freeze` (no gradient).
        """
        k = self.rff.kernel
        check_spectral_state(k, self.rff.drawn_spectral_state)
        if frozen:
            basis = self.frozen_hyperparameters
            if basis is None:
                raise RuntimeError("the frozen basis is not set: call freeze() first")
            ell, scale = (t.to(dtype=X.dtype, device=X.device) for t in basis)
        else:
            ell = k.lengthscale.to(dtype=X.dtype, device=X.device)
            scale = k.outputscale.to(dtype=X.dtype, device=X.device)
        eps = self.rff.base_frequencies.to(dtype=X.dtype, device=X.device)
        phase = self.rff.phases.to(dtype=X.dtype, device=X.device)
        if cols is not None:
            eps, phase = eps[cols], phase[cols]
        proj = torch.addmm(phase, X / ell, eps.mT)
        return torch.sqrt(2.0 * scale / self.m) * torch.cos(proj)

    def chunks(self, X: torch.Tensor, *, max_entries: int = 2**22, frozen: bool = False):
        """Yield ``(row_slice, Φ[X[row_slice], :])`` in row blocks of at most ``max_entries``."""
        rows = max(1, max_entries // self.m)
        for r0 in range(0, X.shape[0], rows):
            sl = slice(r0, min(X.shape[0], r0 + rows))
            yield sl, self.block(X[sl], frozen=frozen)
