"""QSGP's warm start and its default rates (issue: QSGP must not spoil good hyperparameters).

Before: a fresh fit started ``q`` at the prior, stepped at AdaGrad's 0.1 and moved the
hyperparameters at Adam's 1e-2; from an exact GP's hyperparameters on a held-out UCI
set (parkinsons, n = 600, 2 000 features, chevron rank 20, 3 000 steps) it ended at
test RMSE 0.157 against the exact GP's 0.0645. Now ``μ`` starts at the weight-space
posterior mean by CG, ``C``'s diagonal at Proposition 1, AdaGrad steps at 0.01 and the
hyperparameters are fine-tuned at the paper's 1e-5.
"""

from __future__ import annotations

import math

import pytest
import torch

import pnsolve as pn
from pnsolve.gp.qsgp.run import COLD_LR, HYPER_LR, WARM_LR
from pnsolve.gp.qsgp.warm_start import WARM_START_ITERATIONS, warm_start
from pnsolve.testing import krylov_tol

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_the_warm_start_is_the_weight_space_posterior_mean_and_proposition_1(model, problem):
    X, y = problem("gaussian", n=120)
    q = model("gaussian", m=30, X=X)  # randomised q: the warm start replaces it
    info = warm_start(q, X, y, 200)
    Phi = q.features.block(X).detach()
    noise = q.noise
    A = Phi.mT @ Phi + noise * torch.eye(q.m, dtype=F64)
    expected = torch.linalg.solve(A, Phi.mT @ y)
    # CG stops at relative residual √eps: the forward error is at most κ(A) times that
    error = torch.linalg.vector_norm(q.mean_weights - expected) / torch.linalg.vector_norm(expected)
    assert error <= float(torch.linalg.cond(A)) * max(info.relative_residual, krylov_tol(F64))
    R = q.cov.R
    col = (Phi[:, R:] ** 2).sum(0)
    torch.testing.assert_close(
        torch.exp(q.cov.log_diag[R:]), torch.sqrt(noise / (col + noise)),
        rtol=krylov_tol(F64), atol=0.0,
    )  # fmt: skip
    assert info.relative_residual <= math.sqrt(torch.finfo(F64).eps)
    assert 0 < info.iterations <= 30 + 1  # CG on an m × m system


def test_the_warm_start_stops_at_its_iteration_count(model, problem):
    X, y = problem("gaussian", n=120)
    q = model("gaussian", m=30, X=X)
    info = warm_start(q, X, y, 2)
    assert info.iterations == 2 and info.relative_residual > 1e-3


def test_a_fresh_gaussian_fit_starts_warm_at_the_warm_rate(model, problem):
    X, y = problem("gaussian", n=120)
    q = model("gaussian", m=30, X=X)
    q.fit(X, y, steps=2, generator=_gen(), learn_hyperparameters=False)
    run = q.training.run
    assert (run.warm_start, run.lr, run.hyper_lr) == (WARM_START_ITERATIONS, WARM_LR, HYPER_LR)
    assert q.training.warm is not None and q.training.warm.iterations > 0
    # a later call keeps the run's rate and warm start; a warm start asked for is ignored
    with pytest.warns(UserWarning, match="warm_start=7 is ignored"):
        q.fit(X, y, steps=4, generator=_gen(), learn_hyperparameters=False, warm_start=7)
    assert (q.training.run.lr, q.training.run.warm_start) == (WARM_LR, WARM_START_ITERATIONS)


def test_warm_start_zero_is_the_paper_s_cold_start(model, problem):
    X, y = problem("gaussian", n=120)
    q = model("gaussian", m=30, X=X, randomise=False)
    q.fit(X, y, steps=1, generator=_gen(), learn_hyperparameters=False, warm_start=0)
    assert q.training.warm is None and q.training.run.lr == COLD_LR
    assert q.training.run.warm_start == 0


@pytest.mark.parametrize("likelihood", ["bernoulli", "poisson"])
def test_other_likelihoods_start_cold_and_refuse_a_warm_start(model, problem, likelihood):
    X, y = problem(likelihood, n=60)
    q = model(likelihood, m=20, X=X)
    with pytest.raises(ValueError, match="warm_start=5 needs a Gaussian likelihood"):
        q.fit(X, y, steps=1, generator=_gen(), warm_start=5)
    q.fit(X, y, steps=1, generator=_gen(), learn_hyperparameters=False)
    assert q.training.warm is None and q.training.run.lr == COLD_LR


def test_a_negative_warm_start_is_refused_by_name(model, problem):
    X, y = problem("gaussian", n=60)
    q = model("gaussian", m=20, X=X)
    with pytest.raises(ValueError, match="warm_start"):
        q.fit(X, y, steps=1, generator=_gen(), warm_start=-1)


def test_a_checkpoint_of_a_warm_run_refuses_a_cold_one(model, problem, tmp_path):
    X, y = problem("gaussian", n=80)
    path = tmp_path / "q.pt"
    q = model("gaussian", m=20, X=X, randomise=False)
    q.fit(X, y, steps=3, generator=_gen(), checkpoint=path, checkpoint_every=1)
    cold = model("gaussian", m=20, X=X, randomise=False)
    with pytest.raises(ValueError, match=r"belongs to another run: .*warm_start"):
        cold.fit(X, y, steps=5, generator=_gen(), checkpoint=path, lr=WARM_LR, warm_start=0)
    again = model("gaussian", m=20, X=X, randomise=False)
    again.fit(X, y, steps=3, generator=_gen(), checkpoint=path)  # resumes: nothing to do
    assert again.training.warm == q.training.warm


def _uci_600(name: str):
    """600 training and 300 test rows of a shipped UCI set, standardised on the training rows."""
    ds = pn.datasets.load_uci(name, split=0)
    X = torch.cat([ds.X_train, ds.X_test]).to(F64)
    y = torch.cat([ds.y_train, ds.y_test]).to(F64)
    idx = torch.randperm(X.shape[0], generator=_gen())
    tr, te = idx[:600], idx[600:900]
    mu, sd = X[tr].mean(0), X[tr].std(0).clamp_min(1e-12)
    ym, ys = y[tr].mean(), y[tr].std()
    return (X[tr] - mu) / sd, (y[tr] - ym) / ys, (X[te] - mu) / sd, (y[te] - ym) / ys


@pytest.mark.slow
def test_default_qsgp_keeps_good_hyperparameters_on_held_out_data():
    """Parkinsons was not used to choose the defaults (concrete and airfoil were)."""
    X, y, Xs, ys = _uci_600("parkinsons")
    kernel = pn.kernels.RBF(lengthscale=torch.ones(X.shape[1], dtype=F64))
    noise = float(pn.gp.fit_exact_hyperparameters(kernel, X, y, steps=150).noise)
    exact = pn.gp.ExactGP(kernel, noise).fit(X, y).posterior(Xs).mean
    exact_rmse = float((exact - ys).square().mean().sqrt())
    q = pn.gp.QSGP(
        pn.kernels.RBF(lengthscale=kernel.lengthscale.detach().clone(),
                       outputscale=float(kernel.outputscale.detach())),
        pn.likelihoods.Gaussian(noise), 2000, covariance="chevron", rank=20, generator=_gen(1),
    )  # fmt: skip
    q.fit(X, y, steps=3000, generator=_gen(2))
    rmse = float((q.posterior(Xs).mean - ys).square().mean().sqrt())
    assert rmse <= 1.15 * exact_rmse + 0.02, (rmse, exact_rmse)
