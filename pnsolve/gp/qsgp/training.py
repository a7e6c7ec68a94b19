"""QSGP's training loop: sparse AdaGrad on ``q``, Adam on the hyperparameters, checkpoints."""

from __future__ import annotations

import copy
import dataclasses
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..._core.validation import (
    check_bool,
    check_int,
    check_positive_int,
    check_positive_number,
    require_generator,
)
from ...likelihoods.gaussian import Gaussian
from .checkpoint import load_checkpoint, save_checkpoint
from .estimator import estimate
from .finite import checked_elbo, step_gradients
from .optim import SparseAdagrad
from .run import (
    COLD_LR,
    FREEZE_STEPS,
    HYPER_LR,
    WARM_LR,
    QSGPRun,
    QSGPTrainingState,
)
from .sampling import Draw, draw_indices
from .warm_start import WARM_START_ITERATIONS, WarmStart
from .warm_start import warm_start as start_warm

if TYPE_CHECKING:
    from .model import QSGP


__all__ = ["fit"]


def fit(
    q: QSGP,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    steps: int,
    lr: float | None,
    generator: torch.Generator,
    hyper_lr: float,
    learn_hyperparameters: bool,
    freeze_hyperparameters: int | None,
    checkpoint: str | Path | None,
    checkpoint_every: int,
    progress: bool,
    warm_start: int | None = None,
) -> QSGP:
    """Run stochastic steps on the ELBO of ``q`` until ``steps`` (counted over calls).

    Each step draws the four index sets, forms one estimate (Gaussian: unbiased ELBO;
    otherwise Theorem 3's bound), back-propagates once and updates only the rows of
    ``μ`` and ``C`` it touched with AdaGrad (Evans & Nair: lr 0.1), keeping the control
    variates' products exact (Proposition 3). The hyperparameters (the kernel's and
    ``log σ²``) move by Adam at ``hyper_lr`` from step ``freeze_hyperparameters`` on
    (counted from the run's first step; default :data:`FREEZE_STEPS`, the paper's 10 %
    of a 1 000-step run, while ``q`` tightens the bound).

    **Warm start.** A fresh run with a Gaussian likelihood first sets ``μ`` by
    ``warm_start`` CG iterations in weight space and the diagonal of ``C`` by
    Proposition 1 (:func:`~pnsolve.gp.qsgp.warm_start.warm_start`), then steps at
    AdaGrad's :data:`~pnsolve.gp.qsgp.run.WARM_LR` instead of the paper's
    :data:`~pnsolve.gp.qsgp.run.COLD_LR`.

    **One run over several calls.** ``steps`` counts from the run's first step, so
    ``fit(steps=20)`` then ``fit(steps=40)`` takes the same 40 steps as one
    ``fit(steps=40)`` (same generator object, same arguments). A call with ``steps`` at
    or below the steps done trains nothing and warns. A call on other data than the
    run's continues training ``q`` there (new control variates) and warns. Rates and the
    freeze step passed to a later call are used from then on (without a checkpoint: a
    checkpointed run's rates are part of its identity). With ``checkpoint``, the
    state and the run's identity (:class:`~pnsolve.gp.qsgp.run.QSGPRun`: data, model
    settings, random features, the generator's initial state, rates, freeze step) are
    written every ``checkpoint_every`` steps; a later call resumes from the file into
    the same iterates as an uninterrupted run, and refuses a file of another run,
    naming what differs.

    Parameters
    ----------
    q
        The model.
    X, y
        Training inputs ``(n, d)`` and targets ``(n,)``.
    steps
        Total steps of the run (including those already taken).
    lr, hyper_lr
        AdaGrad's and Adam's learning rates. ``lr=None``: the run's rate in a later
        call, else :data:`~pnsolve.gp.qsgp.run.WARM_LR` after a warm start and
        :data:`~pnsolve.gp.qsgp.run.COLD_LR` without.
    generator
        Draws the index sets.
    learn_hyperparameters
        Empirical Bayes on the kernel's hyperparameters and the Gaussian noise.
    freeze_hyperparameters
        The step from which the hyperparameters move (``None``: :data:`FREEZE_STEPS`).
    checkpoint, checkpoint_every
        File and interval of the checkpoints.
    progress
        Show a tqdm progress bar.
    warm_start
        CG iterations of the warm start of a fresh run (``None``:
        :data:`~pnsolve.gp.qsgp.warm_start.WARM_START_ITERATIONS` for a Gaussian
        likelihood, 0 otherwise; 0: start from the prior, as the paper). A later call of
        the same run warns if it is given and ignores it.

    Returns
    -------
    QSGP
        ``q``, trained; its :attr:`~pnsolve.gp.QSGP.training` record holds the run.

    Raises
    ------
    FloatingPointError
        (:class:`~pnsolve.gp.qsgp.finite.NonFiniteTraining`) At the first step whose ELBO
        estimate, or a gradient it would apply, is not finite, naming the step and the
        rates. That step is not applied: ``q``, the hyperparameters, the optimisers and
        the training record (``steps_done``, ``history``) are those after the previous
        step. They are finite, but the estimate at them was not: train a new model with
        smaller rates (continuing this one would meet the same estimate).
    """
    X, y = q.check_data(X, y)
    generator = require_generator(generator)
    steps = check_positive_int(steps, "steps")
    checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
    state = q.training
    warm = _warm_iterations(q, warm_start, state)
    default_lr = state.run.lr if state is not None else WARM_LR if warm else COLD_LR
    lr = default_lr if lr is None else check_positive_number(lr, "lr")
    hyper_lr = check_positive_number(hyper_lr, "hyper_lr")
    freeze = (
        FREEZE_STEPS
        if freeze_hyperparameters is None
        else check_int(freeze_hyperparameters, "freeze_hyperparameters", minimum=0)
    )
    learn_hyperparameters = check_bool(learn_hyperparameters, "learn_hyperparameters")
    q.build(X)
    assert q.features is not None and q.cov is not None and q.mean_weights is not None
    assert q.log_noise is not None
    run = _run_of_this_call(q, X, y, generator, lr, hyper_lr, freeze, learn_hyperparameters, warm)
    hyper: list[torch.Tensor] = list(q.kernel.parameters())
    named_hyper: dict[str, torch.Tensor] = {
        f"the kernel's {name}": p for name, p in q.kernel.named_parameters()
    }
    if isinstance(q.likelihood, Gaussian):
        hyper.append(q.log_noise)
        named_hyper["the noise"] = q.log_noise
    adagrad = SparseAdagrad(lr)
    adam = torch.optim.Adam(hyper, lr=hyper_lr)
    warmed = None if state is None else state.warm
    if state is not None:
        adagrad.load_state_dict(state.adagrad)
        adam.load_state_dict(state.adam)
    done, history = (0, []) if state is None else (state.steps_done, list(state.history))
    path = None if checkpoint is None else Path(checkpoint)
    if path is not None and path.exists():
        done, history, warmed = load_checkpoint(q, path, run, adagrad, adam, generator)
        q.cv_data = q.data_digest(X, y)  # the identity covers the data: the state is for it
    elif state is None and warm:
        warmed = start_warm(q, X, y, warm)
    # a call that trains nothing leaves the run as it was (its rates are not the run's)
    kept = run if done < steps or state is None else state.run
    q.training = _record(kept, done, history, adagrad, adam, warmed)
    if done >= steps:
        warnings.warn(
            f"QSGP.fit: the run has taken {done} steps and steps={steps} counts from its "
            f"first step, so this call trains nothing (ask for steps > {done} to continue)",
            stacklevel=4,
        )
        return q
    q.control_variates_for(X, y)
    # the rates passed now are the ones used (also on resume and in a continued fit)
    adagrad.lr = float(lr)
    for group in adam.param_groups:
        group["lr"] = float(hyper_lr)
    quadrature = q.quadrature(X)
    flags = [p.requires_grad for p in hyper]
    for p in hyper:
        p.requires_grad_(learn_hyperparameters)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, initial=done, desc="QSGP", unit="step")
    try:
        while done < steps:
            t0 = time.perf_counter()
            draw = draw_indices(
                X.shape[0], q.m, q.cov.R, q.batch_size, q.feature_batch_size, generator,
                device=X.device,
            )  # fmt: skip
            est = estimate(
                q.features, q.cov, q.mean_weights, torch.exp(q.log_noise), q.likelihood, X, y,
                draw, q.cv, quadrature,
            )  # fmt: skip
            for p in hyper:
                p.grad = None
            (-est.elbo).backward()
            moves = learn_hyperparameters and done >= freeze
            elbo = checked_elbo(  # raises before a non-finite update is applied
                est.elbo, step_gradients(est.leaves, named_hyper, moves), step=done + 1, lr=lr,
                hyper_lr=hyper_lr, hyperparameters_moved=learn_hyperparameters and done > freeze,
                defaults=(default_lr, HYPER_LR),
            )  # fmt: skip
            _update_variational(q, draw, est, adagrad)
            if moves:
                adam.step()
            done += 1
            history.append({"step": done, "elbo": elbo,
                            "seconds": time.perf_counter() - t0})  # fmt: skip
            if bar is not None:
                bar.update(1)
                bar.set_postfix(elbo=f"{history[-1]['elbo']:.4g}", refresh=False)
            if path is not None and (done % checkpoint_every == 0 or done == steps):
                q.training = _record(run, done, history, adagrad, adam, warmed)
                save_checkpoint(q, path, generator)
    finally:
        if bar is not None:
            bar.close()
        for p, flag in zip(hyper, flags, strict=True):
            p.requires_grad_(flag)
            p.grad = None
        # the steps taken (all of them, or up to an interruption) are the record
        q.training = _record(run, done, history, adagrad, adam, warmed)
    if learn_hyperparameters and done <= freeze:
        warnings.warn(
            f"QSGP.fit: the hyperparameters move from step {freeze} on "
            f"(freeze_hyperparameters) and the run ends at step {done}: none learned",
            stacklevel=4,
        )
    return q


def _warm_iterations(q: QSGP, warm_start: int | None, state: QSGPTrainingState | None) -> int:
    """The warm start's CG iterations for this call's run (its own for a later call)."""
    if warm_start is not None:
        warm_start = check_int(warm_start, "warm_start", minimum=0)
    if state is not None:
        if warm_start is not None and warm_start != state.run.warm_start:
            warnings.warn(
                f"QSGP.fit: warm_start initialises a fresh run; the run has taken "
                f"{state.steps_done} steps, so warm_start={warm_start} is ignored",
                stacklevel=5,
            )
        return state.run.warm_start
    if warm_start is None:
        return WARM_START_ITERATIONS if isinstance(q.likelihood, Gaussian) else 0
    if warm_start and not isinstance(q.likelihood, Gaussian):
        raise ValueError(
            f"warm_start={warm_start} needs a Gaussian likelihood (it sets μ to the "
            f"weight-space posterior mean); the model's is {type(q.likelihood).__name__}: "
            "pass warm_start=0 or leave it out"
        )
    return warm_start


def _run_of_this_call(
    q: QSGP,
    X: torch.Tensor,
    y: torch.Tensor,
    generator: torch.Generator,
    lr: float,
    hyper_lr: float,
    freeze: int,
    learn: bool,
    warm: int,
) -> QSGPRun:
    """The run this call belongs to: a new one, or the model's run as this call sets it."""
    assert q.features is not None
    data = q.data_digest(X, y)
    state = q.training
    if state is None:
        rff = q.features.rff
        return QSGPRun.start(
            data=data, model=_settings(q), base_frequencies=rff.base_frequencies,
            phases=rff.phases, generator=generator, lr=lr, hyper_lr=hyper_lr, freeze=freeze,
            learn_hyperparameters=learn, warm_start=warm,
        )  # fmt: skip
    if data != state.run.data:
        warnings.warn(
            "QSGP.fit on other data than the run's: training continues from the current q "
            "on the new data (new control variates); create a new model to start afresh",
            stacklevel=5,
        )
    return dataclasses.replace(
        state.run, data=data, lr=float(lr), hyper_lr=float(hyper_lr), freeze=int(freeze),
        learn_hyperparameters=bool(learn),
    )  # fmt: skip


def _record(
    run: QSGPRun,
    done: int,
    history: list[dict[str, float]],
    adagrad: SparseAdagrad,
    adam: torch.optim.Optimizer,
    warm: WarmStart | None,
) -> QSGPTrainingState:
    """The training record now (copies: later steps do not change it)."""
    return QSGPTrainingState(
        run, done, tuple(history), adagrad.state_dict(),
        copy.deepcopy(adam.state_dict()), warm,
    )  # fmt: skip


def _settings(q: QSGP) -> str:
    return repr((repr(q), q.rank, q.control_variate_rank, q.linear_control_variate,
                 q.quadrature_points))  # fmt: skip


def _update_variational(q: QSGP, draw: Draw, est, adagrad: SparseAdagrad) -> None:
    """AdaGrad on the touched rows; the control variates' products follow (Prop. 3)."""
    assert q.cov is not None and q.mean_weights is not None
    cov, L, u, R = q.cov, est.leaves, draw.u, q.cov.R
    with torch.no_grad():
        mu_old = q.mean_weights[u].clone()
        adagrad.step("mu", q.mean_weights, u, L.mu.grad)
        if R:
            Cu_old = cov.dense_block(u, cov.lower[u], cov.log_diag[:R])
            diag_old = torch.exp(cov.log_diag[:R])
            adagrad.step("lower", cov.lower, u, L.lower.grad)
            adagrad.step("log_diag", cov.log_diag, torch.arange(R, device=u.device),
                         L.log_diag_dense.grad)  # fmt: skip
        if draw.diag.numel():
            adagrad.step("log_diag", cov.log_diag, draw.diag, L.log_diag_diag.grad)
        cv = q.cv
        if cv is None or est.basis_u is None:
            return
        d_mu = q.mean_weights[u] - mu_old
        cv.a += est.basis_u @ d_mu
        if cv.b is not None and cv.beta is not None:
            cv.beta += cv.b[u] @ d_mu
        if R:
            Cu_new = cov.dense_block(u, cov.lower[u], cov.log_diag[:R])
            cv.A += est.basis_u @ (Cu_new - Cu_old)
            outside = ~torch.isin(torch.arange(R, device=u.device), u)
            d_diag = (torch.exp(cov.log_diag[:R]) - diag_old) * outside
            cv.A += cv.basis_dense * d_diag
