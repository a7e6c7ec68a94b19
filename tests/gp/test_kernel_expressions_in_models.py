"""Every model takes kernel expressions (sums, products, the other families).

ExactGP, IterGP, LOVE, AffineGP, IterNCGP, CaGP, the iterative kernel systems,
``LogHyperparameters`` and ``train_hyperparameters`` with a sum of products that
includes non-stationary parts and white noise.
"""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.testing import exact_tol, krylov_tol

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64
K = pn.kernels


def _kernel() -> pn.kernels.Kernel:
    return (
        K.Constant(1.2) * K.RBF(0.8)
        + K.Periodic(1.0, 2.0, active_dims=[0]) * K.Linear(0.3, active_dims=[1])
        + K.White(0.02)
    )


def _data(n: int = 120, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, dtype=F64, generator=g) * 4
    y = torch.sin(3 * X[:, 0]) + 0.3 * X[:, 1] + 0.1 * torch.randn(n, dtype=F64, generator=g)
    Xs = torch.rand(25, 2, dtype=F64, generator=g) * 4
    return X, y, Xs


def _dense_posterior(k, X, y, Xs, noise):
    with torch.no_grad():
        Kxx = k(X) + noise * torch.eye(X.shape[0], dtype=F64)
        Ksx = k(Xs, X)
        L = torch.linalg.cholesky(Kxx)
        mean = Ksx @ torch.cholesky_solve(y[:, None], L)[:, 0]
        var = k.diag(Xs) - (Ksx * torch.cholesky_solve(Ksx.mT, L).mT).sum(-1)
    return mean, var


def test_exact_itergp_and_love_equal_the_dense_posterior():
    X, y, Xs = _data()
    k = _kernel()
    mean, var = _dense_posterior(k, X, y, Xs, 0.05)
    tol = krylov_tol(F64, 1e4)
    post = pn.gp.ExactGP(k, noise=0.05).fit(X, y).posterior(Xs)
    torch.testing.assert_close(post.mean, mean, rtol=tol, atol=tol)
    torch.testing.assert_close(post.var, var, rtol=tol, atol=tol)
    it = pn.gp.IterGP(
        k, noise=0.05, policy=pn.policies.CG(), stopping=pn.stopping.MaxIterations(120)
    ).fit(X, y)
    p = it.posterior(Xs)
    torch.testing.assert_close(p.mean, mean, rtol=1e-6, atol=1e-6)
    assert bool((p.var >= var - 1e-8).all())  # never more certain than the exact GP
    love = pn.gp.ExactGP(k, noise=0.05).fit(X, y).posterior(Xs, method="love", rank=120)
    torch.testing.assert_close(love.mean, mean, rtol=tol, atol=tol)


def test_affine_gp_iterncgp_and_cagp_take_an_expression():
    X, y, Xs = _data()
    k = _kernel()
    _, var = _dense_posterior(k, X, y, Xs, 0.05)
    af = pn.gp.AffineGP(k, 0.05, pn.iterative.GaussSeidel(sweeps=3)).fit(X, y)
    assert bool((af.posterior(Xs).var >= var - 1e-8).all())
    labels = (y > y.median()).to(F64)
    nc = pn.gp.IterNCGP(
        k, likelihood=pn.likelihoods.Bernoulli(), policy=pn.policies.CG(),
        stopping=pn.stopping.MaxIterations(60),
    ).fit(X, labels)  # fmt: skip
    p = nc.predict_proba(Xs)
    assert p.shape == (25,) and bool(((p > 0) & (p < 1)).all())
    m = pn.gp.CaGP(_kernel(), noise=0.05, num_actions=12)
    before = [t.detach().clone() for t in m.kernel.parameters()]
    m.fit(X, y, steps=3, generator=torch.Generator().manual_seed(1))
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, m.kernel.parameters()))
    assert bool(torch.isfinite(m.posterior(Xs).var).all())


def test_kernel_system_rows_blocks_and_products_agree():
    X, _, _ = _data(60)
    k = _kernel()
    with torch.no_grad():
        full = k(X) + 0.1 * torch.eye(60, dtype=F64)
    tol = exact_tol(F64, 60) * float(full.abs().max())
    for backend in ("dense", "chunked"):
        system = pn.iterative.KernelSystem(k, X, 0.1, backend=backend)
        idx = torch.tensor([3, 17, 42])
        V = torch.randn(60, 2, dtype=F64, generator=torch.Generator().manual_seed(0))
        torch.testing.assert_close(system.matmul(V), full @ V, rtol=tol, atol=tol)
        torch.testing.assert_close(system.rows(idx, V), full[idx] @ V, rtol=tol, atol=tol)
        W = V[idx]
        torch.testing.assert_close(system.columns(idx, W), full[:, idx] @ W, rtol=tol, atol=tol)
        torch.testing.assert_close(system.block(idx), full[idx][:, idx], rtol=tol, atol=tol)
        torch.testing.assert_close(system.diagonal(), full.diagonal(), rtol=tol, atol=tol)
        # the rows of K̂ through the operator protocol (white noise on the self pairs)
        torch.testing.assert_close(system.to_dense(), full, rtol=tol, atol=tol)


def test_log_hyperparameters_cover_every_positive_parameter():
    k = _kernel()
    params = pn.gp.bayes.LogHyperparameters(k, 0.1)
    assert len(params.names) == sum(p.numel() for p in k.parameters()) + 1
    theta = params.initial()
    moved = params.kernel_at(theta + 0.2)
    for p0, p1 in zip(k.parameters(), moved.parameters()):
        v0 = torch.nn.functional.softplus(p0.detach())
        v1 = torch.nn.functional.softplus(p1.detach())
        torch.testing.assert_close(v1, v0 * torch.exp(torch.tensor(0.2, dtype=F64)))


def test_train_hyperparameters_trains_a_given_kernel_in_place():
    X, y, _ = _data(100)
    k = _kernel()
    cfg = pn.gp.training.TrainingConfig(solver="cg", estimator="standard", steps=4, num_probes=4)
    res = pn.gp.training.train_hyperparameters(
        X, y, cfg, kernel=k, generator=torch.Generator().manual_seed(0)
    )
    assert res.kernel is k and len(res.log) == 4
    names = [name for name, _ in res.log[0].parameters]
    assert names == [
        "0.0.value", "0.1.lengthscale", "0.1.outputscale", "1.0.lengthscale", "1.0.period",
        "1.1.variance", "2.noise",
    ]  # fmt: skip
    assert res.log[0].lengthscale == () and res.log[0].outputscale != res.log[0].outputscale
    assert res.log[0].parameters != res.log[-1].parameters  # it moved
    with pytest.raises(ValueError, match="estimator='pathwise'"):
        pn.gp.training.train_hyperparameters(
            X, y, pn.gp.training.TrainingConfig(steps=1), kernel=_kernel(),
            generator=torch.Generator().manual_seed(0),
        )  # fmt: skip


def test_training_checkpoints_resume_only_with_the_same_kernel(tmp_path):
    X, y, _ = _data(80)
    cfg = pn.gp.training.TrainingConfig(solver="cg", estimator="standard", steps=2, num_probes=4)
    ckpt = tmp_path / "run.pt"
    first = pn.gp.training.train_hyperparameters(
        X, y, cfg, kernel=_kernel(), checkpoint=ckpt, generator=torch.Generator().manual_seed(0)
    )
    again = pn.gp.training.train_hyperparameters(
        X, y, cfg, kernel=_kernel(), checkpoint=ckpt, generator=torch.Generator().manual_seed(0)
    )
    # resumed: all steps were done (outputscale is NaN for this kernel: compare the rest)
    assert [(r.step, r.parameters, r.noise) for r in again.log] == [
        (r.step, r.parameters, r.noise) for r in first.log
    ]
    with pytest.raises(ValueError, match="kernel"):
        pn.gp.training.train_hyperparameters(
            X, y, cfg, kernel=K.RBF(ard_dims=2) + K.White(0.1), checkpoint=ckpt,
            generator=torch.Generator().manual_seed(0),
        )  # fmt: skip


def test_log_hyperparameters_keep_frozen_parameters_fixed():
    k = K.RBF(0.8) * K.Periodic(1.0, 2.0)
    k.parts[1].raw_period.requires_grad_(False)
    params = pn.gp.bayes.LogHyperparameters(k, 0.1)
    assert "log_1.period" not in params.names and len(params.names) == 4
    moved = params.kernel_at(params.initial() + 1.0)
    assert float(moved.parts[1].period) == pytest.approx(2.0, rel=1e-12)


@pytest.mark.parametrize(("sampler", "gradient"), [("mh", "exact"), ("sgld", "ulisse")])
def test_sgld_and_mh_chains_run_on_an_expression(sampler, gradient):
    """The samplers move every positive parameter of an expression (generic θ layout)."""
    X, y, _ = _data(50)
    params = pn.gp.bayes.LogHyperparameters(K.RBF(0.8) * K.Periodic(1.0, 2.0) + K.White(0.05), 0.1)
    config = pn.gp.bayes.ChainConfig(
        sampler=sampler, iterations=30, gradient=gradient, subset=50, variance_batch=10
    )
    out = pn.gp.bayes.sample_hyperparameters(
        X, y, config, chains=1, params=params, generator=torch.Generator().manual_seed(0),
        processes=1,
    )  # fmt: skip
    assert out.names == params.names
    assert out.all_samples.shape == (1, 30, params.dim)
    assert bool(torch.isfinite(out.all_samples).all())
    moved = (out.all_samples[0, -1] - out.all_samples[0, 0]).abs()
    assert bool((moved > 0).any())
