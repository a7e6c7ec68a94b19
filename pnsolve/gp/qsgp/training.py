"""QSGP's training loop: sparse AdaGrad on ``q``, Adam on the hyperparameters, checkpoints."""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..._core.statefile import load_state, save_state
from ..._core.validation import check_positive_int, require_generator
from ...likelihoods.gaussian import Gaussian
from .estimator import ControlVariates, estimate
from .optim import SparseAdagrad
from .sampling import Draw, draw_indices

if TYPE_CHECKING:
    from .model import QSGP


__all__ = ["fit"]


def fit(
    q: QSGP,
    X: torch.Tensor,
    y: torch.Tensor,
    *,
    steps: int,
    lr: float,
    generator: torch.Generator,
    hyper_lr: float,
    learn_hyperparameters: bool,
    freeze_hyperparameters: int | None,
    checkpoint: str | Path | None,
    checkpoint_every: int,
    progress: bool,
) -> QSGP:
    """Run ``steps`` stochastic steps on the ELBO of ``q`` (counted over calls).

    Each step draws the four index sets, forms one estimate (Gaussian: unbiased ELBO;
    otherwise Theorem 3's bound), back-propagates once and updates only the rows of
    ``μ`` and ``C`` it touched with AdaGrad (seed: lr 0.1), keeping the control
    variates' products exact (Proposition 3). The hyperparameters (the kernel's and
    ``log σ²``) move by Adam at ``hyper_lr`` after ``freeze_hyperparameters`` steps
    (default ``steps // 10``; the seed freezes them for the first 10 % while ``q``
    tightens the bound). ``steps`` counts from the model's first step, so a second call
    with a larger ``steps`` continues; with ``checkpoint``, the state is written every
    ``checkpoint_every`` steps and a later call resumes from the file into the same
    iterates as an uninterrupted run. The rates passed are the ones used, also by a
    resumed or continued fit. The control variates belong to the data they were built
    on: a fit on other data builds new ones.

    Parameters
    ----------
    q
        The model.
    X, y
        Training inputs ``(n, d)`` and targets ``(n,)``.
    steps
        Total steps (including those already taken).
    lr, hyper_lr
        AdaGrad's and Adam's learning rates.
    generator
        Draws the index sets.
    learn_hyperparameters
        Empirical Bayes on the kernel's hyperparameters and the Gaussian noise.
    freeze_hyperparameters
        Steps before the hyperparameters start to move.
    checkpoint, checkpoint_every
        File and interval of the checkpoints.
    progress
        Show a tqdm progress bar.

    Returns
    -------
    QSGP
        ``q``, trained; per-step log in ``q.history``.
    """
    X, y = q._check_data(X, y)
    generator = require_generator(generator)
    steps = check_positive_int(steps, "steps")
    checkpoint_every = check_positive_int(checkpoint_every, "checkpoint_every")
    for name, rate in (("lr", lr), ("hyper_lr", hyper_lr)):
        if (
            isinstance(rate, bool)
            or not isinstance(rate, int | float)
            or not (math.isfinite(rate) and rate > 0)
        ):
            raise ValueError(f"{name} must be a positive finite number, got {rate!r}")
    freeze = steps // 10 if freeze_hyperparameters is None else freeze_hyperparameters
    if isinstance(freeze, bool) or not isinstance(freeze, int) or freeze < 0:
        raise ValueError(f"freeze_hyperparameters must be an int ≥ 0, got {freeze!r}")
    q._ensure(X)
    assert q.features is not None and q.cov is not None and q.mean_weights is not None
    assert q.log_noise is not None
    hyper: list[torch.Tensor] = list(q.kernel.parameters())
    if isinstance(q.likelihood, Gaussian):
        hyper.append(q.log_noise)
    flags = [p.requires_grad for p in hyper]
    for p in hyper:
        p.requires_grad_(learn_hyperparameters)
    adagrad = q._adagrad or SparseAdagrad(lr)
    adam = torch.optim.Adam(hyper, lr=hyper_lr)
    if q._adam_state is not None:
        adam.load_state_dict(q._adam_state)
    path = None if checkpoint is None else Path(checkpoint)
    tag = _fingerprint(q, X, y)
    if path is not None and path.exists():
        _load(q, path, tag, adagrad, adam, generator)
        q.cv_data = q.data_digest(X, y)  # the tag covers the data: the saved state is for it
    q.control_variates_for(X, y)
    # the rates passed now are the ones used (also on resume and in a continued fit)
    adagrad.lr = float(lr)
    for group in adam.param_groups:
        group["lr"] = float(hyper_lr)
    quadrature = q._quadrature(X)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=steps, initial=q.steps_done, desc="QSGP", unit="step")
    try:
        while q.steps_done < steps:
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
            _update_variational(q, draw, est, adagrad)
            if learn_hyperparameters and q.steps_done >= freeze:
                adam.step()
            q.steps_done += 1
            q.history.append({"step": q.steps_done, "elbo": float(est.elbo.detach()),
                              "seconds": time.perf_counter() - t0})  # fmt: skip
            if bar is not None:
                bar.update(1)
                bar.set_postfix(elbo=f"{q.history[-1]['elbo']:.4g}", refresh=False)
            if path is not None and (q.steps_done % checkpoint_every == 0 or q.steps_done == steps):
                _save(q, path, tag, adagrad, adam, generator)
    finally:
        if bar is not None:
            bar.close()
        for p, flag in zip(hyper, flags, strict=True):
            p.requires_grad_(flag)
            p.grad = None
    q._adagrad = adagrad
    q._adam_state = adam.state_dict()
    return q


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


def _fingerprint(q: QSGP, X: torch.Tensor, y: torch.Tensor) -> str:
    h = hashlib.sha256()
    h.update(q.data_digest(X, y).encode())
    h.update(repr(q).encode())
    h.update(repr((q.rank, q.control_variate_rank, q.linear_control_variate)).encode())
    return h.hexdigest()[:16]


def _state(q: QSGP, adagrad: SparseAdagrad, adam, generator) -> dict:
    assert q.features is not None and q.cov is not None
    return {
        "steps_done": q.steps_done,
        "mean_weights": q.mean_weights,
        "cov": q.cov.state_dict(),
        "log_noise": q.log_noise,
        "kernel": q.kernel.state_dict(),
        "features": q.features.rff.state_dict(),
        "frozen": q.features._frozen,
        "cv": None if q.cv is None else asdict(q.cv),
        "adagrad": adagrad.state_dict(),
        "adam": adam.state_dict(),
        "generator": generator.get_state(),
        "model_generator": q.generator.get_state(),
        "history": q.history,
    }


def _save(q: QSGP, path: Path, tag: str, adagrad, adam, generator) -> None:
    save_state(path, "qsgp", tag, _state(q, adagrad, adam, generator))


def _load(q: QSGP, path: Path, tag: str, adagrad, adam, generator) -> None:
    state = load_state(path, "qsgp", tag)
    assert q.features is not None and q.cov is not None and q.mean_weights is not None
    assert q.log_noise is not None
    with torch.no_grad():
        q.mean_weights.copy_(state["mean_weights"])
        q.cov.load_state_dict(state["cov"])
        q.log_noise.copy_(state["log_noise"])
        q.kernel.load_state_dict(state["kernel"])
        q.features.rff.load_state_dict(state["features"])
    q.features._frozen = state["frozen"]
    q.cv = None if state["cv"] is None else ControlVariates(**state["cv"])
    q.steps_done = state["steps_done"]
    q.history = list(state["history"])
    adagrad.load_state_dict(state["adagrad"])
    adam.load_state_dict(state["adam"])
    generator.set_state(state["generator"])
    q.generator.set_state(state["model_generator"])
