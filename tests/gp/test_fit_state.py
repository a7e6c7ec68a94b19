"""GP models under change: a query never answers from a stale fit.

The workflow a new user follows — fit, move the hyperparameters (an optimiser step on
the marginal likelihood, ``k.lengthscale = …``, ``load_state_dict``, ``gp.noise = …``),
query — gives the answer of a fresh fit with the new hyperparameters (ExactGP, IterGP,
AffineGP, IterNCGP fit again on their data) or a clear error (QSGP, whose fit is a
training run). Exactness claims: the refitted answer equals a fresh fit's bit for bit
(same data, same deterministic solver).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
import torch

import pnsolve as pn
from pnsolve.gp.fit_state import FitChangedError, Provenance, snapshot
from pnsolve.iterative import GaussSeidel

F64 = torch.float64


def _data(n: int = 80, t: int = 15, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=F64)
    y = torch.sin(6 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=F64)
    Xs = torch.rand(t, 2, generator=g, dtype=F64)
    return X, y, Xs


def _exact(k):
    return pn.gp.ExactGP(k, noise=0.05)


def _itergp(k):
    return pn.gp.IterGP(
        k, noise=0.05, policy=pn.policies.CG(), stopping=pn.stopping.MaxIterations(20)
    )


def _affine(k):
    return pn.gp.AffineGP(k, 0.05, GaussSeidel(3))


def _iterncgp(k):
    return pn.gp.IterNCGP(
        k,
        likelihood=pn.likelihoods.Gaussian(0.05),
        policy=pn.policies.CG(),
        stopping=pn.stopping.MaxIterations(30),
        max_newton_steps=3,
    )


def _ski(k):
    return pn.gp.IterGP(
        pn.kernels.GridInterpolation(k, grid_size=40),
        noise=0.05,
        policy=pn.policies.CG(),
        stopping=pn.stopping.MaxIterations(30),
    )


REFITTING: dict[str, Callable[[pn.kernels.RBF], object]] = {
    "exact": _exact, "itergp": _itergp, "affine": _affine, "iterncgp": _iterncgp, "ski": _ski,
}  # fmt: skip


def _assign(k, gp) -> None:
    k.lengthscale = 0.15


def _optimiser(k, gp) -> None:
    opt = torch.optim.Adam(k.parameters(), lr=0.2)
    for _ in range(3):
        opt.zero_grad()
        loss = (k.lengthscale - 0.1) ** 2 + (k.outputscale - 2.0) ** 2
        loss.backward()
        opt.step()


def _load_state_dict(k, gp) -> None:
    k.load_state_dict(pn.kernels.RBF(lengthscale=0.12, outputscale=1.7).state_dict())


def _data_write(k, gp) -> None:
    with torch.no_grad():
        k.raw_lengthscale.data.copy_(k.raw_lengthscale.data - 0.5)  # not seen by _version


CHANGES = {
    "assignment": _assign,
    "optimiser": _optimiser,
    "load_state_dict": _load_state_dict,
    ".data write": _data_write,
}


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize("model", list(REFITTING))
def test_a_query_after_a_change_gives_the_fresh_fit(model: str, change: str) -> None:
    X, y, Xs = _data()
    k = pn.kernels.RBF(lengthscale=0.4)
    gp = REFITTING[model](k).fit(X, y)
    before = gp.posterior(Xs).mean
    CHANGES[change](k, gp)
    after = gp.posterior(Xs)
    fresh = REFITTING[model](k).fit(X, y).posterior(Xs)
    assert not torch.equal(before, after.mean)  # the change matters
    assert torch.equal(after.mean, fresh.mean)
    assert torch.equal(after.var, fresh.var)


@pytest.mark.parametrize("model", ["exact", "itergp", "affine"])
def test_noise_and_mean_assigned_after_fit_refit(model: str) -> None:
    X, y, Xs = _data()
    gp = REFITTING[model](pn.kernels.RBF(lengthscale=0.4)).fit(X, y)
    gp.noise = 0.2
    gp.mean = 0.3
    fresh = REFITTING[model](pn.kernels.RBF(lengthscale=0.4))
    fresh.noise, fresh.mean = 0.2, 0.3
    fresh.fit(X, y)
    assert torch.equal(gp.posterior(Xs).mean, fresh.posterior(Xs).mean)


def test_the_first_paragraph_workflow_on_exactgp() -> None:
    """Adam on ``-gp.log_marginal_likelihood()``, then ``posterior``: the refit's answer."""
    X, y, Xs = _data(200, 50)
    k = pn.kernels.RBF(lengthscale=1.0)
    gp = pn.gp.ExactGP(k, noise=0.05).fit(X, y)
    opt = torch.optim.Adam(k.parameters(), lr=0.1)
    for _ in range(50):
        opt.zero_grad()
        (-gp.log_marginal_likelihood()).backward()
        opt.step()
    post = gp.posterior(Xs)
    fresh = pn.gp.ExactGP(k, noise=0.05).fit(X, y).posterior(Xs)
    assert torch.equal(post.mean, fresh.mean) and bool((post.var >= 0).all())


def test_a_replaced_kernel_is_fitted() -> None:
    X, y, Xs = _data()
    gp = _itergp(pn.kernels.RBF(lengthscale=0.4)).fit(X, y)
    gp.kernel = pn.kernels.Matern(nu=1.5, lengthscale=0.3)
    fresh = _itergp(pn.kernels.Matern(nu=1.5, lengthscale=0.3)).fit(X, y)
    assert torch.equal(gp.posterior(Xs).mean, fresh.posterior(Xs).mean)


def test_the_likelihood_noise_of_iterncgp_is_a_hyperparameter() -> None:
    X, y, Xs = _data()
    k = pn.kernels.RBF(lengthscale=0.4)
    gp = _iterncgp(k).fit(X, y)
    gp.likelihood = pn.likelihoods.Gaussian(0.3)
    fresh = _iterncgp(k)
    fresh.likelihood = pn.likelihoods.Gaussian(0.3)
    fresh.fit(X, y)
    assert torch.equal(gp.posterior(Xs).mean, fresh.posterior(Xs).mean)
    p = pn.gp.IterNCGP(
        k, likelihood=pn.likelihoods.Bernoulli(), policy=pn.policies.CG(),
        stopping=pn.stopping.MaxIterations(30), max_newton_steps=3,
    ).fit(X, (y > 0).to(F64))  # fmt: skip
    first = p.predict_proba(Xs)
    k.lengthscale = 0.2
    assert not torch.equal(first, p.predict_proba(Xs))


def test_no_change_no_refit() -> None:
    X, y, Xs = _data()
    for model in REFITTING:
        gp = REFITTING[model](pn.kernels.RBF(lengthscale=0.4)).fit(X, y)
        state = gp._fitted() if model != "iterncgp" else gp.state
        gp.posterior(Xs)
        gp.posterior(Xs)
        assert (gp._fitted() if model != "iterncgp" else gp.state) is state, model


@pytest.mark.parametrize("model", list(REFITTING))
def test_the_callers_data_written_later_do_not_reach_the_fit(model: str) -> None:
    X, y, Xs = _data()
    gp = REFITTING[model](pn.kernels.RBF(lengthscale=0.4)).fit(X, y)
    before = gp.posterior(Xs).mean
    y.add_(1.0)  # the tensors the model was fitted on, written by the caller
    X.data.mul_(0.5)  # (a .data write: no version counter sees it)
    assert torch.equal(gp.posterior(Xs).mean, before)


def test_numpy_data_changed_after_fit_do_not_reach_the_fit() -> None:
    X, y, Xs = _data()
    Xn, yn = X.numpy().copy(), y.numpy().copy()
    gp = _exact(pn.kernels.RBF(lengthscale=0.4)).fit(Xn, yn)
    Xs = Xs.numpy()  # NumPy data make a CPU model: query it with NumPy too
    before = gp.posterior(Xs).mean
    Xn *= 0.5
    yn += 1.0
    assert torch.equal(gp.posterior(Xs).mean, before)


@pytest.mark.parametrize("model", list(REFITTING))
def test_the_models_own_data_written_in_place_are_refused(model: str) -> None:
    X, y, Xs = _data()
    gp = REFITTING[model](pn.kernels.RBF(lengthscale=0.4)).fit(X, y)
    gp.X.mul_(2.0)  # the model's copy
    with pytest.raises(FitChangedError, match=r"training data \(X\).*call fit"):
        gp.posterior(Xs)


def test_fit_on_inference_tensors() -> None:
    with torch.inference_mode():
        X, y, Xs = _data()
    for model in REFITTING:
        gp = REFITTING[model](pn.kernels.RBF(lengthscale=0.4)).fit(X, y)
        assert gp.posterior(Xs).mean.shape == (Xs.shape[0],)


def test_a_ski_kernel_changed_where_the_user_holds_it_refits() -> None:
    X, y, Xs = _data()
    ski = pn.kernels.GridInterpolation(pn.kernels.RBF(lengthscale=0.3), grid_size=40)
    gp = pn.gp.IterGP(ski, 0.05, pn.policies.CG(), pn.stopping.MaxIterations(30)).fit(X, y)
    before = gp.posterior(Xs).mean
    ski.base_kernel = pn.kernels.RBF(lengthscale=0.1)
    after = gp.posterior(Xs).mean
    fresh = pn.gp.IterGP(
        pn.kernels.GridInterpolation(pn.kernels.RBF(lengthscale=0.1), grid_size=40), 0.05,
        pn.policies.CG(), pn.stopping.MaxIterations(30),
    ).fit(X, y)  # fmt: skip
    assert not torch.equal(before, after) and torch.equal(after, fresh.posterior(Xs).mean)


def test_exact_log_marginal_likelihood_refuses_written_data() -> None:
    X, y, _ = _data()
    gp = pn.gp.ExactGP(pn.kernels.RBF(lengthscale=0.4), noise=0.05).fit(X, y)
    gp.X.mul_(2.0)
    with pytest.raises(FitChangedError, match=r"\(X\)"):
        gp.log_marginal_likelihood()


@pytest.mark.parametrize("model", list(REFITTING))
def test_a_posterior_refuses_its_late_parts_after_a_change(model: str) -> None:
    X, y, Xs = _data()
    k = pn.kernels.RBF(lengthscale=0.4)
    gp = REFITTING[model](k).fit(X, y)
    post = gp.posterior(Xs)
    mean, var = post.mean, post.var
    k.lengthscale = 0.2
    with pytest.raises(FitChangedError, match="query posterior"):
        post.cov()
    with pytest.raises(FitChangedError):
        post.sample(2, torch.Generator().manual_seed(0))
    assert post.mean is mean and post.var is var  # what was computed stays readable


def test_a_posterior_refuses_after_a_refit_and_math_var_computed_before_stays() -> None:
    X, y, Xs = _data()
    k = pn.kernels.RBF(lengthscale=0.4)
    gp = _itergp(k).fit(X, y)
    post, late = gp.posterior(Xs), gp.posterior(Xs)
    math_var = post.math_var
    gp.fit(X, y)
    assert post.math_var is math_var or torch.equal(post.math_var, math_var)
    with pytest.raises(FitChangedError, match="fitted again"):
        late.math_var  # noqa: B018


def test_love_caches_from_before_a_change_are_refused() -> None:
    X, y, Xs = _data()
    k = pn.kernels.RBF(lengthscale=0.4)
    for gp in (_exact(k).fit(X, y), _itergp(k).fit(X, y)):
        cache = gp.build_love_cache(rank=10)
        gp.posterior(Xs, method="love", cache=cache)
        k.lengthscale = float(k.lengthscale.detach()) * 0.8
        with pytest.raises(ValueError, match="build_love_cache"):
            gp.posterior(Xs, method="love", cache=cache)
        fresh = gp.build_love_cache(rank=10)
        gp.posterior(Xs, method="love", cache=fresh)


def test_iterate_posteriors_stay_usable_after_the_loop() -> None:
    X, y, Xs = _data()
    gp = _itergp(pn.kernels.RBF(lengthscale=0.4))
    posts = [post for _, post in gp.iterate(X, y, Xs)]
    assert len(posts) > 2
    assert bool((posts[1].math_var >= 0).all())  # same fit: not stale
    assert gp.info is not None


# ------------------------------------------------------------------------- QSGP
def _qsgp(k):
    g = torch.Generator().manual_seed(0)
    return pn.gp.QSGP(
        k, pn.likelihoods.Gaussian(0.05), 64, rank=4, batch_size=20,
        feature_batch_size=32, control_variate_rank=8, generator=g,
    )  # fmt: skip


@pytest.mark.parametrize("change", list(CHANGES))
def test_qsgp_refuses_a_query_after_a_change(change: str) -> None:
    X, y, Xs = _data()
    k = pn.kernels.RBF(lengthscale=0.4)
    g = torch.Generator().manual_seed(1)
    q = _qsgp(k).fit(X, y, steps=3, generator=g, freeze_hyperparameters=0)
    post = q.posterior(Xs)
    CHANGES[change](k, q)
    with pytest.raises(FitChangedError, match=r"hyperparameters changed since fit.*call fit"):
        q.posterior(Xs)
    with pytest.raises(FitChangedError):
        post.cov()
    with pytest.warns(UserWarning, match="trains nothing"):
        q.fit(X, y, steps=3, generator=g, freeze_hyperparameters=0)
    with pytest.raises(FitChangedError):  # no step taken: q is still the old one
        q.posterior(Xs)
    q.fit(X, y, steps=4, generator=g, freeze_hyperparameters=0)  # trains on: answers
    q.posterior(Xs)


def test_qsgp_refuses_after_its_likelihood_or_noise_changed() -> None:
    X, y, Xs = _data()
    g = torch.Generator().manual_seed(1)
    q = _qsgp(pn.kernels.RBF(lengthscale=0.4)).fit(X, y, steps=3, generator=g,
                                                   freeze_hyperparameters=0)  # fmt: skip
    assert q.log_noise is not None
    with torch.no_grad():
        q.log_noise.add_(0.5)
    with pytest.raises(FitChangedError, match="log_noise"):
        q.posterior(Xs)
    q.fit(X, y, steps=4, generator=g, freeze_hyperparameters=0)
    q.likelihood = pn.likelihoods.Gaussian(0.5)
    with pytest.raises(FitChangedError, match="likelihood"):
        q.posterior(Xs)


# ------------------------------------------------------------ the record itself
def test_snapshots_see_every_kind_of_write_and_only_writes() -> None:
    k = pn.kernels.RBF(lengthscale=torch.tensor([0.3, 0.5], dtype=F64))
    rec = Provenance.record({}, {"kernel": k, "noise": 0.1, "mean": 0.0})
    assert rec.changes({"kernel": k, "noise": 0.1, "mean": 0.0}) == []
    k(torch.rand(5, 2, dtype=F64))  # evaluating the kernel is not a change
    assert rec.changes({"kernel": k, "noise": 0.1, "mean": 0.0}) == []
    k.raw_outputscale.data.fill_(3.0)
    assert rec.changes({"kernel": k, "noise": 0.1, "mean": 0.0}) == ["kernel (raw_outputscale)"]
    other = pn.kernels.RBF(lengthscale=0.3)
    assert rec.changes({"kernel": other, "noise": 0.2, "mean": 0.0}) == [
        "kernel (replaced)",
        "noise",
    ]
    nan = torch.tensor(float("nan"))
    assert Provenance.record({}, {"t": nan}).changes({"t": nan.clone()}) == []
    assert snapshot(pn.likelihoods.Gaussian(0.1)) != snapshot(pn.likelihoods.Gaussian(0.2))


def test_data_stamps_follow_in_place_writes_only() -> None:
    X = torch.zeros(3, 2)
    rec = Provenance.record({"X": X}, {})
    _ = X + 1.0
    assert rec.data_changes() == []
    X[0, 0] = 1.0
    assert rec.data_changes() == ["X"]


def test_qsgp_fit_trains_under_no_grad() -> None:
    """``fit`` enables autograd itself (it used to fail inside ``torch.no_grad()``)."""
    X, y, _ = _data()
    q = _qsgp(pn.kernels.RBF(lengthscale=0.4))
    with torch.no_grad():
        q.fit(X, y, steps=3, generator=torch.Generator().manual_seed(1), freeze_hyperparameters=0)
    assert q.steps_done == 3


def _qsgp_data():
    g = torch.Generator().manual_seed(0)
    X = torch.rand(300, 3, generator=g, dtype=F64)
    y = torch.sin(4 * X[:, 0]) + 0.1 * torch.randn(300, generator=g, dtype=F64)
    return X, y


def _qsgp_model():
    return pn.gp.QSGP(
        pn.kernels.RBF(lengthscale=0.5), pn.likelihoods.Gaussian(0.1), 200, rank=5,
        batch_size=50, feature_batch_size=64, control_variate_rank=20,
        generator=torch.Generator().manual_seed(1),
    )  # fmt: skip


@pytest.mark.parametrize("freeze", [None, 5])
def test_qsgp_fit_in_two_calls_is_one_run(freeze: int | None) -> None:
    """``fit(steps=20)`` then ``fit(steps=40)`` equals ``fit(steps=40)``, bit for bit."""
    X, y = _qsgp_data()
    kw = {"freeze_hyperparameters": freeze}
    two = _qsgp_model()
    g = torch.Generator().manual_seed(2)
    with pytest.warns(UserWarning, match="none learned") if freeze is None else _quiet():
        two.fit(X, y, steps=20, generator=g, **kw)
        two.fit(X, y, steps=40, generator=g, **kw)
    one = _qsgp_model()
    with pytest.warns(UserWarning, match="none learned") if freeze is None else _quiet():
        one.fit(X, y, steps=40, generator=torch.Generator().manual_seed(2), **kw)
    assert torch.equal(two.mean_weights, one.mean_weights)
    assert torch.equal(two.cov.lower, one.cov.lower)
    assert torch.equal(two.kernel.raw_lengthscale, one.kernel.raw_lengthscale)
    assert [h["elbo"] for h in two.history] == [h["elbo"] for h in one.history]
    assert two.training is not None and two.training.run == one.training.run  # type: ignore[union-attr]


def _quiet():
    import contextlib
    import warnings

    @contextlib.contextmanager
    def quiet():
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no warning expected
            yield

    return quiet()


def test_qsgp_fit_says_what_it_does() -> None:
    X, y = _qsgp_data()
    q = _qsgp_model()
    g = torch.Generator().manual_seed(2)
    q.fit(X, y, steps=5, generator=g, freeze_hyperparameters=0)
    record = q.training
    with pytest.warns(UserWarning, match="taken 5 steps and steps=5.*trains nothing"):
        q.fit(X, y, steps=5, generator=g, freeze_hyperparameters=0)
    assert q.steps_done == 5 and q.training.steps_done == record.steps_done  # type: ignore[union-attr]
    with pytest.warns(UserWarning, match="other data than the run's"):
        q.fit(X[:200], y[:200], steps=7, generator=g, freeze_hyperparameters=0)
    assert q.steps_done == 7
    with pytest.warns(UserWarning, match="closed_form_diagonal.*ignored"):
        q.fit(X[:200], y[:200], steps=8, generator=g, freeze_hyperparameters=0,
              closed_form_diagonal=True)  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.training.steps_done = 0  # type: ignore[misc,union-attr]


def _interrupt_at(monkeypatch: pytest.MonkeyPatch, call: int) -> None:
    """Make QSGP's training raise KeyboardInterrupt in its ``call``-th estimate."""
    from pnsolve.gp.qsgp import training

    real, count = training.estimate, {"n": 0}

    def estimate(*args, **kwargs):
        count["n"] += 1
        if count["n"] == call:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(training, "estimate", estimate)


def test_an_interrupted_qsgp_fit_keeps_its_steps_and_its_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    X, y, Xs = _data()
    k = pn.kernels.RBF(lengthscale=0.4)
    q = _qsgp(k)
    _interrupt_at(monkeypatch, 5)
    with pytest.raises(KeyboardInterrupt):
        q.fit(X, y, steps=20, generator=torch.Generator().manual_seed(1), freeze_hyperparameters=0)
    assert q.steps_done == 4 and len(q.history) == 4
    q.posterior(Xs)  # q and the hyperparameters of the steps taken: consistent
    k.lengthscale = 2.0
    with pytest.raises(FitChangedError):  # the first fit was interrupted: still checked
        q.posterior(Xs)


def test_an_interrupted_qsgp_continuation_stays_consistent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    X, y, Xs = _data()
    q = _qsgp(pn.kernels.RBF(lengthscale=0.4))
    g = torch.Generator().manual_seed(1)
    q.fit(X, y, steps=5, generator=g, freeze_hyperparameters=0)
    _interrupt_at(monkeypatch, 4)
    with pytest.raises(KeyboardInterrupt):
        q.fit(X, y, steps=20, generator=g, freeze_hyperparameters=0)
    assert q.steps_done == 8
    q.posterior(Xs)  # hyperparameters moved with q up to the interruption: not stale


def test_a_qsgp_call_that_trains_nothing_leaves_the_run() -> None:
    X, y, _ = _data()
    q = _qsgp(pn.kernels.RBF(lengthscale=0.4))
    g = torch.Generator().manual_seed(1)
    q.fit(X, y, steps=3, generator=g, freeze_hyperparameters=0)
    run = q.training.run  # type: ignore[union-attr]
    with pytest.warns(UserWarning, match="trains nothing"):
        q.fit(X, y, steps=2, lr=0.5, generator=g, freeze_hyperparameters=0)
    assert q.training.run == run  # type: ignore[union-attr]


def test_one_target_dtype_rule_across_models() -> None:
    """A floating ``y`` of another dtype than ``X`` is refused alike (TypeError naming y)."""
    X, y, _ = _data()
    labels = (y > 0).to(torch.float32)
    with pytest.raises(TypeError, match=r"y has dtype torch\.float32"):
        pn.gp.ExactGP(pn.kernels.RBF(), noise=0.1).fit(X, y.float())
    with pytest.raises(TypeError, match=r"y has dtype torch\.float32"):
        pn.gp.IterNCGP(pn.kernels.RBF(), pn.likelihoods.Bernoulli(), pn.policies.CG(),
                       pn.stopping.MaxIterations(3)).fit(X, labels)  # fmt: skip
    with pytest.raises(TypeError, match=r"y has dtype torch\.float32"):
        _qsgp(pn.kernels.RBF()).fit(X, y.float(), steps=1, generator=torch.Generator())
    ints = (y > 0).long()  # integer labels are the likelihood's to check: accepted
    pn.gp.IterNCGP(pn.kernels.RBF(), pn.likelihoods.Bernoulli(), pn.policies.CG(),
                   pn.stopping.MaxIterations(3)).fit(X, ints)  # fmt: skip
