"""The Laplace pieces behind IterNCGP: the Newton-loop generator, its states, stop reasons,
step halving, the softmax Newton operator and the model's pure queries."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import pnsolve as pn
from pnsolve.gp.laplace import (
    MAX_HALVINGS,
    LaplaceState,
    NewtonStopReason,
    halve_step,
    laplace_objective,
    laplace_problem,
    newton_loop,
)

F64 = torch.float64


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():
        yield


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _kernel():
    return pn.kernels.RBF(lengthscale=0.3, outputscale=2.0)


def _data(kind, n=40, seed=0):
    g = _gen(seed)
    X = torch.rand(n, 2, generator=g, dtype=F64)
    f = torch.sin(6 * X[:, 0]) + torch.cos(4 * X[:, 1])
    if kind == "bernoulli":
        y = (torch.rand(n, generator=g, dtype=F64) < torch.sigmoid(2 * f)).to(F64)
        return X, y, pn.likelihoods.Bernoulli()
    if kind == "poisson":
        return X, torch.poisson(torch.exp(f), generator=g), pn.likelihoods.Poisson()
    logits = torch.stack([f, -f, 0.5 * f.square()], dim=1)
    y = torch.multinomial(torch.softmax(2 * logits, dim=1), 1, generator=g).squeeze(1)
    return X, y, pn.likelihoods.Softmax(3)


def _model(lik, iters=5, **kw):
    kw.setdefault("max_newton_steps", 8)
    return pn.gp.IterNCGP(_kernel(), lik, pn.policies.CG(), pn.stopping.MaxIterations(iters), **kw)


def _run(loop):
    """All states of a Newton-loop generator and its return value."""
    states = []
    while True:
        try:
            states.append(next(loop))
        except StopIteration as stop:
            return states, stop.value


def test_stop_reason_is_a_str_enum():
    assert NewtonStopReason("no_ascent") is NewtonStopReason.NO_ASCENT
    reason = NewtonStopReason.MAX_NEWTON_STEPS
    assert reason == "max_newton_steps" and isinstance(reason, str)
    assert f"{reason:18s}|" == "max_newton_steps  |" and str(reason) == "max_newton_steps"
    X, y, lik = _data("bernoulli")
    m = _model(lik, iters=40, newton_tol=1e-8).fit(X, y)
    assert m.stop_reason is NewtonStopReason.CONVERGED and m.stop_reason == "converged"
    m = _model(lik, iters=2, max_newton_steps=2, newton_tol=0.0).fit(X, y)
    assert m.stop_reason is NewtonStopReason.MAX_NEWTON_STEPS and not m.converged


@pytest.mark.parametrize("kind", ["bernoulli", "poisson", "softmax"])
def test_newton_loop_states_and_the_model_agree(kind):
    X, y, lik = _data(kind)
    m = _model(lik, max_rank=6)
    problem = laplace_problem(_kernel(), lik, X, y)
    states, reason = _run(
        newton_loop(problem, m.solver, max_newton_steps=8, newton_tol=1e-6, max_rank=6)
    )
    assert all(isinstance(s, LaplaceState) for s in states)
    ends = [s for s in states if s.record is not None]
    last = states[-1]
    assert last is ends[-1] and last.stop_reason is reason and reason is not None
    assert all(s.stop_reason is None for s in states[:-1])
    assert last.steps == tuple(s.record for s in ends)
    assert [r.step for r in last.steps] == list(range(len(ends)))
    for s in states:  # inner states keep the step's linearisation point
        if s.record is None:
            assert s.steps == tuple(r for r in last.steps if r.step < s.newton_step)
            assert float(s.objective) == (s.steps[-1].objective if s.steps else s.objective)
    for e in ends:  # Ψ recorded at the end of a step is that of the state's mode
        assert e.record.objective == e.objective == laplace_objective(problem, e.h, e.weights)
    # the model drives the same loop: the same inner states, steps and mode
    inner = [(t, st.iteration) for t, st, _ in m.iterate(X, y)]
    assert inner == [(s.newton_step, s.inner.iteration) for s in states if s.record is None]
    assert m.steps == last.steps and m.stop_reason is reason
    assert torch.equal(m.weights, last.weights)
    assert m.state.record is not None and m.state.A is m.A


def test_states_are_frozen():
    X, y, lik = _data("bernoulli")
    m = _model(lik).fit(X, y)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.state.weights = torch.zeros_like(m.weights)
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.steps[0].objective = 0.0
    with pytest.raises(AttributeError):
        m.weights = torch.zeros(3)


def test_posterior_and_predictions_are_pure_queries():
    X, y, lik = _data("softmax")
    m = _model(lik).fit(X, y)
    _ = m.f  # the cached mode is the only lazily filled slot
    before = dict(vars(m))
    Xs = torch.rand(5, 2, generator=_gen(1), dtype=F64)
    post = m.posterior(Xs)
    m.predict_proba(Xs)
    m.predict(Xs, method="mc", num_samples=20, generator=_gen(2))
    assert vars(m).keys() == before.keys()
    assert all(vars(m)[k] is v for k, v in before.items())
    again = m.posterior(Xs)
    assert torch.equal(post.mean, again.mean) and torch.equal(post.var, again.var)


def test_unfitted_model():
    m = _model(pn.likelihoods.Bernoulli())
    assert m.X is None and m.state is None
    for name in ("steps", "weights", "buffer", "A", "belief", "converged", "stop_reason", "f"):
        with pytest.raises(RuntimeError, match="fit"):
            getattr(m, name)


def test_softmax_newton_operator_carries_the_complement():
    # A = P K P + W⁺ + c (I − P): on the per-point all-ones directions (range I − P) the
    # projected prior and W⁺ vanish, so A acts as c, the prior variance.
    X, y, lik = _data("softmax", n=20)
    m = _model(lik).fit(X, y)
    n, C = X.shape[0], 3
    u = torch.randn(n, generator=_gen(3), dtype=F64).repeat(C)  # class-major, constant per point
    c = float(_kernel().diag(X[:1])[0])
    torch.testing.assert_close(m.A @ u, c * u, rtol=1e-12, atol=1e-12)
    P = m.state.problem.projector
    assert torch.allclose(P @ m.weights, m.weights, atol=1e-12)  # weights stay in range P


def test_halve_step():
    X, y, lik = _data("poisson", n=15)
    problem = laplace_problem(_kernel(), lik, X, y)
    h = a = torch.zeros(15, dtype=F64)
    psi = laplace_objective(problem, h, a)
    # towards a huge latent value Ψ drops at every size down to 2⁻³⁰ · 1e12 ≈ 1e3
    far = torch.full((15,), 1e12, dtype=F64)
    step, h1, a1, psi1 = halve_step(problem, h, a, psi, far, torch.zeros_like(far))
    assert step == 0.0 and h1 is h and a1 is a and psi1 == psi and MAX_HALVINGS == 30
    # a moderate move overshoots once, then ascends
    g = lik.flatten(lik.gradient(lik.unflatten(h), y))
    step, h1, _, psi1 = halve_step(problem, h, a, psi, 3.0 * g, torch.zeros_like(g))
    assert 0.0 < step <= 1.0 and psi1 >= psi and torch.equal(h1, step * (3.0 * g))
    # full_step: no search
    step, h1, _, psi1 = halve_step(problem, h, a, psi, far, a, full_step=True)
    assert step == 1.0 and h1 is far


def test_newton_loop_checks_its_configuration():
    X, y, lik = _data("bernoulli", n=10)
    problem = laplace_problem(_kernel(), lik, X, y)
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(2))
    for kw, name in (
        ({"max_newton_steps": 0, "newton_tol": 1e-6}, "max_newton_steps"),
        ({"max_newton_steps": 2, "newton_tol": -1.0}, "newton_tol"),
        ({"max_newton_steps": 2, "newton_tol": 1e-6, "max_rank": 0}, "max_rank"),
    ):
        with pytest.raises(ValueError, match=name):
            next(newton_loop(problem, solver, **kw))


def test_stopping_early_leaves_a_readable_partial_fit():
    X, y, lik = _data("bernoulli")
    m = _model(lik)
    with torch.enable_grad():
        it = m.iterate(X, y)
        for _, state, _ in it:
            assert not torch.is_grad_enabled()  # the loop runs under no_grad
            if state.iteration == 2:
                break
        it.close()
        assert torch.is_grad_enabled()  # closing the loop leaves no_grad
    assert m.stop_reason is None and not m.converged and m.steps == ()
    assert m.posterior(X[:3]).mean.shape == (3,)
