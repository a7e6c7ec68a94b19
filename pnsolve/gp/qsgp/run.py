"""A QSGP training run: its identity and its state after each ``fit`` call (frozen records)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ..._core.statefile import identity_mismatch as shared_identity_mismatch
from ..._core.statefile import tensor_digest
from .warm_start import WarmStart

__all__ = [
    "COLD_LR",
    "FREEZE_STEPS",
    "HYPER_LR",
    "WARM_LR",
    "QSGPRun",
    "QSGPTrainingState",
    "identity_mismatch",
]

#: Default steps before the hyperparameters move, counted from the run's first step:
#: the paper's 10 % of its run at the default 1 000 steps. Absolute, so that a run
#: continued over several ``fit`` calls follows the schedule of one call.
FREEZE_STEPS = 100

#: AdaGrad's default rate from the prior's ``q`` (the paper's 0.1)
COLD_LR = 0.1
#: AdaGrad's default rate after a warm start: ``q`` starts near its optimum, where a
#: step of the paper's 0.1 per touched coordinate (AdaGrad's first steps move every
#: coordinate by about the rate) only adds noise. Measured (concrete, airfoil; n = 600,
#: m = 2 000, 3 000 steps): test RMSE 0.295 / 0.295 at 0.1, 0.289 / 0.284 at 0.03,
#: 0.289 / 0.282 at 0.01, the warm start alone 0.287 / 0.281
WARM_LR = 0.01
#: Adam's default rate on the hyperparameters: the paper's (Evans & Nair, app. I.1).
#: QSGP fine-tunes hyperparameters, it does not select them: the ELBO of the
#: random-feature model with a chevron ``q`` is maximised at a larger noise and a
#: smaller outputscale than the exact GP's marginal likelihood (the features' error
#: and the restricted covariance both enter the noise). Measured from the exact GP's
#: hyperparameters on concrete (n = 600, warm start, 3 000 steps): noise 0.052 → 0.11
#: at 1e-3 and → 0.30 at 1e-2, test RMSE 0.289 → 0.311 and 0.362
HYPER_LR = 1e-5


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
    warm_start
        CG iterations of the warm start at the run's first step (0: the prior's ``q``).
    """

    data: str
    model: str
    features: str
    generator: str
    lr: float
    hyper_lr: float
    freeze: int
    learn_hyperparameters: bool
    warm_start: int

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
        warm_start: int,
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
            warm_start=int(warm_start),
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
    warm
        What the run's warm start did (:class:`~pnsolve.gp.qsgp.warm_start.WarmStart`:
        iterations, relative residual), or ``None`` without one.
    """

    run: QSGPRun
    steps_done: int
    history: tuple[dict[str, float], ...]
    adagrad: dict[str, Any]
    adam: dict[str, Any]
    warm: WarmStart | None = None


#: identity entries that are digests: a mismatch is named without the values
_DIGESTS = {
    "data": "the training inputs or targets differ",
    "features": "the random features differ: another model generator?",
    "generator": "the fit generator's initial state differs: another seed?",
}


def identity_mismatch(saved: Mapping[str, object], current: Mapping[str, object]) -> str | None:
    """``None`` if two QSGP run identities agree, else a one-line list of what differs."""
    return shared_identity_mismatch(saved, current, _DIGESTS)
