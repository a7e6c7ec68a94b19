"""QSGP's guard against training into NaN: one check per step, before anything moves.

A step of :func:`~pnsolve.gp.qsgp.training.fit` forms one ELBO estimate, back-propagates
once and then updates ``q`` (AdaGrad) and the hyperparameters (Adam). Too large a rate
sends the estimate (or a gradient) to ``inf``/``NaN``; applied, it would turn every
parameter into ``NaN`` while ``fit`` returns normally. :func:`checked_elbo` reads the
estimate and the finiteness of the gradients about to be applied in one host read, and
raises :class:`NonFiniteTraining` before the update: the model keeps its state after the
last step applied. Its parameters are finite (every update applied had finite
gradients, and AdaGrad's and Adam's steps are bounded by their rates), but they are
the ones the offending estimate was taken at, so a model stopped this way should be
trained again from a new start (or a checkpoint) with smaller rates, not continued.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from .estimator import Leaves

__all__ = ["NonFiniteTraining", "checked_elbo", "step_gradients"]


class NonFiniteTraining(FloatingPointError):
    """A QSGP step met a non-finite ELBO estimate or gradient (a rate too large).

    Attributes
    ----------
    step
        The step (counted from the run's first, 1-based) that was not applied.
    """

    def __init__(self, message: str, step: int) -> None:
        super().__init__(message)
        self.step = step


def checked_elbo(
    elbo: torch.Tensor,
    gradients: dict[str, torch.Tensor | None],
    *,
    step: int,
    lr: float,
    hyper_lr: float,
    hyperparameters_moved: bool,
    defaults: tuple[float, float],
) -> float:
    """The ELBO estimate as a float, once it and the ``gradients`` are finite.

    Parameters
    ----------
    elbo
        The step's ELBO estimate, 0-d.
    gradients
        The gradients the step is about to apply, by the name the error message uses
        (``None`` entries are skipped).
    step
        The step's number, counted from the run's first (1-based).
    lr, hyper_lr
        AdaGrad's and Adam's rates, named in the message.
    hyperparameters_moved
        Whether Adam has moved the hyperparameters in this run before this step.
    defaults
        The default ``(lr, hyper_lr)``: the message tells to lower the rate furthest
        above its default among those that acted (``lr`` alone while the
        hyperparameters have not moved).

    Returns
    -------
    float
        ``elbo`` (one host read, the estimate and the checks together).

    Raises
    ------
    NonFiniteTraining
        A ``FloatingPointError`` naming the step, what was not finite, the rates and the
        rate to lower.
    """
    named = [(name, g) for name, g in gradients.items() if g is not None]
    value = elbo.detach().reshape(1)
    # a kernel kept on the CPU with data on a GPU has its gradients on the CPU
    flags = [torch.isfinite(g).all().to(value.device) for _, g in named]
    read = torch.cat([value, torch.stack([torch.isfinite(value[0]), *flags]).to(value.dtype)])
    value_read, *ok = read.tolist()
    if all(ok):
        return value_read
    what = (
        f"the ELBO estimate is {value_read}"
        if not ok[0]
        else f"the gradient with respect to {named[ok.index(0.0) - 1][0]} is not finite"
    )
    lower = "lr"
    if hyperparameters_moved and hyper_lr / defaults[1] > lr / defaults[0]:
        lower = "hyper_lr"
    raise NonFiniteTraining(
        f"QSGP.fit: {what} at step {step} (lr={lr:g}, hyper_lr={hyper_lr:g}): lower {lower} "
        f"and fit a new model; step {step} was not applied (the model keeps its finite "
        f"parameters after step {step - 1}, the update that led here)",
        step,
    )


def step_gradients(
    leaves: Leaves, hyper: Mapping[str, torch.Tensor], hyper_moves: bool
) -> dict[str, torch.Tensor | None]:
    """The gradients a step applies, by name: ``q``'s, and the hyperparameters' if they move.

    Parameters
    ----------
    leaves
        The estimate's :class:`~pnsolve.gp.qsgp.estimator.Leaves` (``mu``, ``lower``,
        ``log_diag_dense``, ``log_diag_diag``), after the backward pass.
    hyper
        The hyperparameters by name.
    hyper_moves
        Whether Adam steps now (then their gradients are applied and checked).
    """
    grads: dict[str, torch.Tensor | None] = {
        "q's mean": leaves.mu.grad,
        "q's dense covariance columns": leaves.lower.grad,
        "q's dense covariance diagonal": leaves.log_diag_dense.grad,
        "q's diagonal covariance": leaves.log_diag_diag.grad,
    }
    if hyper_moves:
        grads.update({name: p.grad for name, p in hyper.items()})
    return grads
