"""QSGP training: convergence, Proposition 3's running products, empirical Bayes, resume."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.testing import rtol_for

pytestmark = pytest.mark.usefixtures("one_thread")
F64 = torch.float64
TOL = rtol_for(F64)


def _lml(q, X, y):
    Phi = q.features.block(X).detach()
    K = Phi @ Phi.mT + q.noise * torch.eye(X.shape[0], dtype=F64)
    mvn = torch.distributions.MultivariateNormal(torch.zeros(X.shape[0], dtype=F64), K)
    return float(mvn.log_prob(y))


def test_full_batch_training_closes_the_gap_to_the_marginal_likelihood(problem, model):
    """Full C, full batches, fixed prior, the paper's cold start (prior ``q``, AdaGrad at
    0.1): the ELBO rises towards its maximum, the weight-space log marginal likelihood."""
    X, y = problem("gaussian", n=100)
    q = model("gaussian", m=20, covariance="full", X=X, randomise=False, batch_size=10**6,
              feature_batch_size=10**6, control_variate_rank=0)  # fmt: skip
    lml, start = _lml(q, X, y), q.elbo(X, y)
    g = torch.Generator().manual_seed(0)
    q.fit(X, y, steps=300, generator=g, learn_hyperparameters=False, warm_start=0)
    mid = q.elbo(X, y)
    q.fit(X, y, steps=3000, generator=g, learn_hyperparameters=False)
    end = q.elbo(X, y)
    assert start < mid < end <= lml + TOL * abs(lml)
    assert lml - end < 0.02 * (lml - start)
    assert len(q.history) == 3000 and q.history[-1]["step"] == 3000


@pytest.mark.parametrize("covariance", ["diagonal", "chevron"])
def test_sparse_updates_keep_the_control_variate_products_exact(covariance, problem, model):
    """Proposition 3: after stochastic steps (AdaGrad moves only touched rows) the running
    ``a = Φ⁰_p μ``, ``A = Φ⁰_p C[:, :R]`` and ``bᵀμ`` equal their recomputation, although
    the hyperparameters (and so Φ) moved: Φ⁰ is the basis at initialisation."""
    X, y = problem("gaussian", n=150)
    q = model("gaussian", m=40, covariance=covariance, X=X, batch_size=20, feature_batch_size=10,
              control_variate_rank=30, linear_control_variate=True)  # fmt: skip
    ell0 = float(q.kernel.lengthscale.detach())
    q.fit(X, y, steps=200, generator=torch.Generator().manual_seed(1), freeze_hyperparameters=50)
    assert float(q.kernel.lengthscale.detach()) != ell0
    cv = q.cv
    B = q.features.block(X[cv.support], frozen=True)
    torch.testing.assert_close(cv.a, B @ q.mean_weights, rtol=TOL, atol=TOL)
    torch.testing.assert_close(cv.A, B @ q.cov.dense_columns(), rtol=TOL, atol=TOL)
    b = q.features.block(X, frozen=True).mT @ y
    torch.testing.assert_close(cv.beta, b @ q.mean_weights, rtol=TOL, atol=TOL)


def test_empirical_bayes_learns_the_noise(problem, model):
    """Data with noise sd 0.1 from a start at σ² = 1: the learned σ² falls and the exact
    ELBO rises (full batches, so the test is deterministic)."""
    X, y = problem("gaussian", n=100)
    q = pn.gp.QSGP(pn.kernels.RBF(lengthscale=1.0), pn.likelihoods.Gaussian(1.0), 30,
                   covariance="diagonal", batch_size=10**6, feature_batch_size=10**6,
                   control_variate_rank=0, generator=torch.Generator().manual_seed(2))  # fmt: skip
    g = torch.Generator().manual_seed(0)
    q.fit(X, y, steps=300, generator=g, learn_hyperparameters=False)
    before = q.elbo(X, y)
    q.fit(X, y, steps=1500, generator=g, hyper_lr=0.05, freeze_hyperparameters=0)
    assert q.noise < 0.3
    assert q.elbo(X, y) > before


def test_fit_leaves_the_kernels_gradient_flags_as_it_found_them(problem):
    """The kernel may be shared with another model: fit turns its parameters' gradients
    on for empirical Bayes and restores each flag afterwards."""
    X, y = problem("gaussian", n=40)
    k = pn.kernels.RBF(lengthscale=1.0)
    flags = {name: p.requires_grad for name, p in k.named_parameters()}
    q = pn.gp.QSGP(k, pn.likelihoods.Gaussian(0.1), 10, covariance="diagonal",
                   generator=torch.Generator().manual_seed(0))  # fmt: skip
    q.fit(X, y, steps=3, generator=torch.Generator().manual_seed(1), freeze_hyperparameters=0)
    assert {name: p.requires_grad for name, p in k.named_parameters()} == flags
    next(iter(k.parameters())).requires_grad_(not next(iter(flags.values())))
    flags = {name: p.requires_grad for name, p in k.named_parameters()}
    q.fit(X, y, steps=6, generator=torch.Generator().manual_seed(1), freeze_hyperparameters=0)
    assert {name: p.requires_grad for name, p in k.named_parameters()} == flags


def test_a_checkpointed_fit_resumes_into_the_same_iterates(tmp_path, problem, model):
    X, y = problem("gaussian", n=80)

    def fresh():
        return model("gaussian", m=25, covariance="chevron", X=X, batch_size=10,
                     feature_batch_size=6, control_variate_rank=15)  # fmt: skip

    whole = fresh().fit(X, y, steps=90, generator=torch.Generator().manual_seed(3),
                        freeze_hyperparameters=30)  # fmt: skip
    path = tmp_path / "qsgp.pt"
    fresh().fit(X, y, steps=40, generator=torch.Generator().manual_seed(3),
                freeze_hyperparameters=30, checkpoint=path, checkpoint_every=20)  # fmt: skip
    with pytest.raises(ValueError, match=r"another run: generator \(.*another seed"):
        fresh().fit(X, y, steps=90, generator=torch.Generator().manual_seed(99),
                    freeze_hyperparameters=30, checkpoint=path)  # fmt: skip
    for changed, name in (({"lr": 0.2}, "lr"), ({"hyper_lr": 0.5}, "hyper_lr"),
                          ({"freeze_hyperparameters": 31}, "freeze")):  # fmt: skip
        kwargs = {"freeze_hyperparameters": 30, **changed}
        with pytest.raises(ValueError, match=rf"another run: {name} \(checkpoint: "):
            fresh().fit(X, y, steps=90, generator=torch.Generator().manual_seed(3),
                        checkpoint=path, **kwargs)  # fmt: skip
    resumed = fresh().fit(X, y, steps=90, generator=torch.Generator().manual_seed(3),
                          freeze_hyperparameters=30, checkpoint=path)  # fmt: skip
    assert torch.equal(resumed.mean_weights, whole.mean_weights)
    assert torch.equal(resumed.cov.lower, whole.cov.lower)
    assert torch.equal(resumed.kernel.raw_lengthscale, whole.kernel.raw_lengthscale)
    assert [h["elbo"] for h in resumed.history] == [h["elbo"] for h in whole.history]
    other = model("gaussian", m=26, X=X)
    with pytest.raises(ValueError, match="another run"):
        other.fit(X, y, steps=50, generator=torch.Generator().manual_seed(3), checkpoint=path)
    cut = tmp_path / "cut.pt"
    cut.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match="corrupt or truncated"):
        fresh().fit(X, y, steps=50, generator=torch.Generator().manual_seed(3), checkpoint=cut)
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\n")
    with pytest.raises(ValueError, match="not a pnsolve qsgp checkpoint"):
        fresh().fit(X, y, steps=50, generator=torch.Generator().manual_seed(3), checkpoint=notes)
