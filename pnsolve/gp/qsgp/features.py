"""Columns and rows of the random-Fourier-feature matrix ``Φ``, one block at a time."""

from __future__ import annotations

import copy

import torch

from ...kernels.kernel import Kernel
from ...kernels.random_features import RandomFourierFeatures, check_spectral_state, rff_features

__all__ = ["FeatureBlocks"]


class FeatureBlocks:
    """Blocks ``Φ[rows, cols]`` of ``φ_i(x) = sqrt(2 a_i / m) cos(ω_iᵀ x + b_i)``.

    QSGP never forms the ``n × m`` matrix ``Φ``: every estimate reads a block of ``ñ``
    sampled rows and ``m̃`` sampled columns (cost ``O(ñ m̃ d)``, independent of ``n`` and
    ``m``). Blocks of the *current* basis follow the kernel's hyperparameters (and carry
    their gradients, for empirical Bayes); blocks of the *frozen* basis use the
    hyperparameters captured by :meth:`freeze` (the control variates' basis, fixed at
    initialisation so that their expectations stay valid while the kernel moves,
    Evans & Nair appendix F.3). Frequencies ``ω_i`` and amplitudes ``a_i`` come from the
    kernel's :meth:`~pnsolve.kernels.Kernel.spectral_projection` of the frozen draws
    (for a stationary kernel ``ω = ε / ℓ`` and ``a = outputscale``).

    Parameters
    ----------
    features
        The :class:`~pnsolve.kernels.RandomFourierFeatures` (frozen base draws, phases
        ``b``, and its kernel).
    """

    def __init__(self, features: RandomFourierFeatures) -> None:
        self.rff = features
        self.m = features.num_features
        #: A detached copy of the kernel at :meth:`freeze` (the frozen basis), or ``None``
        self.frozen_kernel: Kernel | None = None

    def freeze(self) -> None:
        """Capture the kernel's current hyperparameters as the frozen basis (a copy)."""
        self.frozen_kernel = copy.deepcopy(self.rff.kernel).requires_grad_(False)

    def frozen_state(self) -> dict[str, torch.Tensor] | None:
        """The frozen basis for a checkpoint: the frozen kernel's ``state_dict`` (or ``None``)."""
        return None if self.frozen_kernel is None else self.frozen_kernel.state_dict()

    def load_frozen_state(self, state: object) -> None:
        """Restore :meth:`frozen_state`.

        Also takes the ``(lengthscale, outputscale)`` pair that checkpoints held before
        kernels other than stationary ones had features.
        """
        if state is None:
            self.frozen_kernel = None
            return
        frozen = copy.deepcopy(self.rff.kernel).requires_grad_(False)
        if isinstance(state, tuple):
            frozen.lengthscale, frozen.outputscale = state
        else:
            frozen.load_state_dict(state)  # type: ignore[arg-type]
        self.frozen_kernel = frozen

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
        k: Kernel = self.rff.kernel
        check_spectral_state(k, self.rff.drawn_spectral_state)
        if frozen:
            if self.frozen_kernel is None:
                raise RuntimeError("the frozen basis is not set: call freeze() first")
            k = self.frozen_kernel
        eps = self.rff.base_frequencies.to(dtype=X.dtype, device=X.device)
        phase = self.rff.phases.to(dtype=X.dtype, device=X.device)
        if cols is not None:
            eps, phase = eps[cols], phase[cols]
        return rff_features(k, X, eps, phase, self.m)

    def chunks(self, X: torch.Tensor, *, max_entries: int = 2**22, frozen: bool = False):
        """Yield ``(row_slice, Φ[X[row_slice], :])`` in row blocks of at most ``max_entries``."""
        rows = max(1, max_entries // self.m)
        for r0 in range(0, X.shape[0], rows):
            sl = slice(r0, min(X.shape[0], r0 + rows))
            yield sl, self.block(X[sl], frozen=frozen)
