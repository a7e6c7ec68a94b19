"""CaGP's training run: the ELBO rises, calls split like one, checkpoints resume bit for bit."""

from __future__ import annotations

import pytest
import torch
from cagp_data import F64, data, gen

import pnsolve as pn

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(**kwargs) -> pn.gp.CaGP:
    kwargs.setdefault("backend", "chunked")
    return pn.gp.CaGP(pn.kernels.RBF(lengthscale=torch.tensor([1.0, 1.0], dtype=F64)), 0.5, 8,
                      **kwargs)  # fmt: skip


def _state(m: pn.gp.CaGP) -> list[torch.Tensor]:
    return [t.detach().clone() for t in (*m.kernel.parameters(), m.log_noise, m.action_values)]


def test_training_raises_the_elbo_and_learns_the_noise():
    X, y = data(120)
    m = _model()
    m.fit(X, y, steps=0, generator=gen(1))
    start = m.elbo(X, y)
    m.fit(X, y, steps=60, lr=0.1, generator=gen(1))  # a new generator: the run continues
    assert m.elbo(X, y) > start + 50
    assert m.noise < 0.2  # the data's noise variance is 0.01
    assert [h["step"] for h in m.training.history] == list(range(1, 61))
    assert m.training.history[-1]["elbo"] > m.training.history[0]["elbo"]
    assert m.fit_state.elbo == pytest.approx(m.elbo(X, y))


def test_a_run_split_over_calls_equals_one_call():
    X, y = data(80)
    one = _model()
    one.fit(X, y, steps=12, generator=gen(1))
    split = _model()
    g = gen(1)
    split.fit(X, y, steps=5, generator=g)
    split.fit(X, y, steps=12, generator=g)
    for a, b in zip(_state(one), _state(split), strict=True):
        assert torch.equal(a, b)
    with pytest.warns(UserWarning, match="trains nothing"):
        split.fit(X, y, steps=12, generator=g)


def test_a_checkpoint_resumes_bit_for_bit_and_refuses_another_run(tmp_path):
    X, y = data(80)
    path = tmp_path / "cagp.pt"
    whole = _model()
    whole.fit(X, y, steps=10, generator=gen(1))
    first = _model()
    first.fit(X, y, steps=4, generator=gen(1), checkpoint=path, checkpoint_every=2)
    resumed = _model()  # a fresh process would start like this
    resumed.fit(X, y, steps=10, generator=gen(1), checkpoint=path, checkpoint_every=2)
    for a, b in zip(_state(whole), _state(resumed), strict=True):
        assert torch.equal(a, b)
    assert [h["elbo"] for h in resumed.training.history] == [
        h["elbo"] for h in whole.training.history
    ]
    other = _model()
    with pytest.raises(
        ValueError, match=r"belongs to another run: .*lr \(checkpoint: 0.3, this run: 0.05\)"
    ):
        other.fit(X, y, steps=12, lr=0.05, generator=gen(1), checkpoint=path)
    seed = _model()
    with pytest.raises(ValueError, match="another seed"):
        seed.fit(X, y, steps=12, generator=gen(2), checkpoint=path)


def test_fixed_policy_actions_learn_only_the_hyperparameters():
    X, y = data(60)
    m = _model(actions=pn.policies.Lanczos(start="random"))
    m.fit(X, y, steps=0, generator=gen(1))
    S = m.action_values.clone()
    m.fit(X, y, steps=15, lr=0.1, generator=gen(1))
    assert torch.equal(m.action_values, S) and m.noise != pytest.approx(0.5)


def test_a_huge_rate_stops_at_the_first_non_finite_elbo_naming_the_rates():
    X, y = data(60)
    m = _model()
    with pytest.raises((FloatingPointError, ValueError), match=r"lr=1e\+06|not positive"):
        m.fit(X, y, steps=30, lr=1e6, generator=gen(1))
