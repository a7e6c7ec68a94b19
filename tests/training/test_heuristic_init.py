"""The paper's initialisation heuristic: average of exact fits on nearest-neighbour subsets."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.gp.training import TrainingConfig, initial_hyperparameters, train_hyperparameters
from pnsolve.testing import exact_tol

F64 = torch.float64


def _data(n=90, d=2):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, d, generator=g, dtype=F64)
    y = torch.sin(5 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=F64)
    return X, y - y.mean()


def test_heuristic_is_the_average_of_local_exact_fits():
    X, y = _data()
    ls, os_, noise = initial_hyperparameters(
        X, y, generator=torch.Generator().manual_seed(4), subset=30, centroids=3, steps=5
    )
    # redo by hand with the same centroid draws
    g = torch.Generator().manual_seed(4)
    fits = []
    for _ in range(3):
        c = int(torch.randint(X.shape[0], (1,), generator=g))
        idx = torch.topk(torch.cdist(X[c : c + 1], X).squeeze(0), 30, largest=False).indices
        k = pn.kernels.Matern(
            nu=1.5,
            lengthscale=torch.ones(2, dtype=F64),
            outputscale=torch.tensor(1.0, dtype=F64),
        )
        fit = pn.gp.fit_exact_hyperparameters(
            k, X[idx], y[idx] - y[idx].mean(), noise=1.0, steps=5, lr=0.1
        )
        fits.append((k.lengthscale.detach(), float(k.outputscale.detach()), fit.noise))
    # the same operations in the same order: bitwise equal
    assert torch.equal(ls, torch.stack([f[0] for f in fits]).mean(0))
    assert os_ == sum(f[1] for f in fits) / 3
    assert noise == sum(f[2] for f in fits) / 3
    assert ls.shape == (2,) and bool((ls > 0).all()) and os_ > 0 and noise > 0


def test_training_starts_from_the_heuristic():
    X, y = _data()
    config = TrainingConfig(
        solver="cholesky",
        estimator="exact",
        steps=1,
        init="heuristic",
        init_subset=30,
        init_centroids=2,
        init_steps=5,
    )
    res = train_hyperparameters(X, y, config, generator=torch.Generator().manual_seed(4))
    ls, os_, noise = initial_hyperparameters(
        X,
        y - y.mean(),
        generator=torch.Generator().manual_seed(4),
        subset=30,
        centroids=2,
        steps=5,
        lr=config.lr,
    )
    first = res.log[0]
    # the model stores softplus-inverse raw values: one round trip of rounding
    tol = exact_tol(F64)
    assert first.lengthscale == pytest.approx(tuple(ls.tolist()), rel=tol)
    assert first.outputscale == pytest.approx(os_, rel=tol)
    assert first.noise == pytest.approx(noise, rel=tol)


def test_heuristic_needs_a_generator():
    X, y = _data()
    with pytest.raises(TypeError, match="generator"):
        initial_hyperparameters(X, y, generator=None)


def test_resume_after_interrupt_with_heuristic_initialisation(tmp_path):
    # the heuristic draws from the run's generator before the first step; a resumed run
    # must not redo it (the checkpoint restores parameters and the generator state)
    X, y = _data()
    config = TrainingConfig(
        solver="cg",
        estimator="pathwise",
        steps=4,
        num_probes=4,
        num_features=64,
        init="heuristic",
        init_subset=30,
        init_centroids=2,
        init_steps=5,
    )
    ref = train_hyperparameters(X, y, config, generator=torch.Generator().manual_seed(7))

    class Stop(Exception):
        pass

    def stop(record):
        if record.step == 1:
            raise Stop

    ckpt = tmp_path / "run.pt"
    with pytest.raises(Stop):
        train_hyperparameters(
            X, y, config, generator=torch.Generator().manual_seed(7), checkpoint=ckpt, callback=stop
        )
    resumed = train_hyperparameters(
        X, y, config, generator=torch.Generator().manual_seed(7), checkpoint=ckpt
    )
    assert [r.lengthscale for r in resumed.log] == [r.lengthscale for r in ref.log]
    assert resumed.noise == ref.noise
    assert torch.equal(resumed.solutions, ref.solutions)
