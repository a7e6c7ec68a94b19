"""A QSGP training run: its identity and its state after each ``fit`` call (frozen records)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..._core.statefile import identity_mismatch as shared_identity_mismatch
from ..._core.statefile import tensor_digest

__all__ = ["FREEZE_STEPS", "QSGPRun", "QSGPTrainingState", "identity_mismatch"]

#: Default steps before the hyperparameters move, counted from the run's first step:
#: the paper's 10 % of its run at the default 1 000 steps. Absolute, so that a run
#: continued over several ``fit`` calls follows the schedule of one call.
FREEZE_STEPS = 100


@dataclass(frozen=True)
class QSGPRun:
    """What makes ``fit`` calls (and checkpoints) one training run.

    Attributes
    ----------
    data
        Digest of the training data ``(X, y)``.
    model
        The model's settings (likelihood, ``m``, covariance, batch sizes, ranks).
    features
        Digest of the random features (base frequencies and phases, drawn once).
    generator
        Digest of the ``fit`` generator's state at the run's first step (its seed).
    lr, hyper_lr
        AdaGrad's and Adam's learning rates.
    freeze
        The step (counted from the run's first) from which the hyperparameters move.
    learn_hyperparameters
        Whether they move at all.
    """

    data: str
    model: str
    features: str
    generator: str
    lr: float
    hyper_lr: float
    freeze: int
    learn_hyperparameters: bool

    @classmethod
    def start(
        cls,
        *,
        data: str,
        model: str,
        base_frequencies: torch.Tensor,
        phases: torch.Tensor,
        generator: torch.Generator,
        lr: float,
        hyper_lr: float,
        freeze: int,
        learn_hyperparameters: bool,
    ) -> QSGPRun:
        """The identity of a run that starts now (``generator`` at its first draw)."""
        return cls(
            data=data,
            model=model,
            features=tensor_digest(base_frequencies, phases),
            generator=tensor_digest(generator.get_state()),
            lr=float(lr),
            hyper_lr=float(hyper_lr),
            freeze=int(freeze),
            learn_hyperparameters=bool(learn_hyperparameters),
        )

    def identity(self) -> dict[str, object]:
        """The fields as a plain dict (stored in checkpoints, compared on resume)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class QSGPTrainingState:
    """A QSGP model's training after its last ``fit`` call (replaced, never modified).

    Attributes
    ----------
    run
        The run's identity.
    steps_done
        Steps taken since the run's first.
    history
        Per step: ``{"step", "elbo", "seconds"}`` (the ELBO estimate).
    adagrad, adam
        The optimisers' states (AdaGrad on ``q``, Adam on the hyperparameters).
    """

    run: QSGPRun
    steps_done: int
    history: tuple[dict[str, float], ...]
    adagrad: dict[str, Any]
    adam: dict[str, Any]


#: identity entries that are digests: a mismatch is named without the values
_DIGESTS = {
    "data": "the training inputs or targets differ",
    "features": "the random features differ: another model generator?",
    "generator": "the fit generator's initial state differs: another seed?",
}


def identity_mismatch(saved: Mapping[str, object], current: Mapping[str, object]) -> str | None:
    """``None`` if two QSGP run identities agree, else a one-line list of what differs."""
    return shared_identity_mismatch(saved, current, _DIGESTS)
