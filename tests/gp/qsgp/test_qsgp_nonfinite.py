"""QSGP training stops at the first non-finite ELBO estimate or gradient.

Before: ``hyper_lr=1e3`` trained into NaN (from step 2 on) and ``fit`` returned
normally with a NaN kernel, noise and posterior. Now the step that would apply a
non-finite update raises ``FloatingPointError`` naming the step and the rates, and the
model keeps its (finite) state after the previous step.
"""

from __future__ import annotations

import math

import pytest
import torch

pytestmark = pytest.mark.usefixtures("one_thread")
#: a hyperparameter rate 1e8 times the default (1e-5): the kernel goes to NaN at once
HUGE_HYPER_LR = 1e3
#: a variational rate 1e5 times the default after a warm start (0.01): q's mean goes to
#: NaN within 60 steps
HUGE_LR = 1e3
STEPS = 80


def _fit(model, problem, *, steps: int = STEPS, **kwargs):
    X, y = problem("gaussian", n=100)
    q = model("gaussian", m=20, X=X, randomise=False)
    kwargs.setdefault("freeze_hyperparameters", 0)
    return q, X, y, lambda s=steps: q.fit(X, y, steps=s, generator=_gen(), **kwargs)


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def _state(q) -> list[torch.Tensor]:
    tensors = [q.mean_weights, q.cov.lower, q.cov.log_diag, q.log_noise]
    return [t.detach().clone() for t in [*tensors, *q.kernel.parameters()]]


def test_a_huge_hyper_lr_stops_at_the_first_nan_naming_step_and_rates(model, problem):
    q, _, _, run = _fit(model, problem, hyper_lr=HUGE_HYPER_LR)
    rates = r"step \d+ \(lr=0.01, hyper_lr=1000\): lower hyper_lr "
    with pytest.raises(FloatingPointError, match=rates):
        run()
    assert 0 < q.steps_done < STEPS
    assert all(math.isfinite(h["elbo"]) for h in q.history)
    assert all(bool(torch.isfinite(t).all()) for t in _state(q))


def test_a_huge_lr_names_lr_while_the_hyperparameters_stand_still(model, problem):
    q, _, _, run = _fit(model, problem, lr=HUGE_LR, learn_hyperparameters=False)
    with pytest.raises(FloatingPointError, match=r"\(lr=1000, hyper_lr=1e-05\): lower lr "):
        run()
    assert all(math.isfinite(h["elbo"]) for h in q.history)


def test_the_model_keeps_its_state_after_the_last_finite_step(model, problem):
    q, _, _, run = _fit(model, problem, hyper_lr=HUGE_HYPER_LR)
    with pytest.raises(FloatingPointError):
        run()
    kept = q.steps_done
    again, _, _, run_again = _fit(model, problem, hyper_lr=HUGE_HYPER_LR)
    run_again(kept)  # the same run, stopped by hand one step before the NaN
    assert again.steps_done == kept
    for a, b in zip(_state(q), _state(again), strict=True):
        assert torch.equal(a, b)
    assert [h["elbo"] for h in q.history] == [h["elbo"] for h in again.history]
