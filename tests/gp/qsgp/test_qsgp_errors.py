"""QSGP refuses bad input with errors that name the argument."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn

F64 = torch.float64


def _make(**kwargs):
    args = {"generator": torch.Generator().manual_seed(0)}
    args.update(kwargs)
    likelihood = args.pop("likelihood", pn.likelihoods.Gaussian(0.1))
    m = args.pop("m", 10)
    return pn.gp.QSGP(pn.kernels.RBF(), likelihood, m, **args)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"m": 0}, ValueError, "num_features"),
        ({"m": 2.5}, TypeError, "num_features"),
        ({"covariance": "banded"}, ValueError, "covariance"),
        ({"covariance": "chevron", "rank": 0}, ValueError, "rank"),
        ({"covariance": "chevron", "rank": 11}, ValueError, "rank"),
        ({"covariance": "full", "m": 5000}, ValueError, "full"),
        ({"batch_size": 0}, ValueError, "batch_size"),
        ({"feature_batch_size": -1}, ValueError, "feature_batch_size"),
        ({"quadrature_points": 0}, ValueError, "quadrature_points"),
        ({"control_variate_rank": -1}, ValueError, "control_variate_rank"),
        ({"likelihood": pn.likelihoods.Softmax(3)}, TypeError, "likelihood"),
        ({"generator": None}, TypeError, "generator"),
    ],
)
def test_bad_settings_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        _make(**kwargs)


def test_bad_data_is_refused():
    g = torch.Generator().manual_seed(1)
    X = torch.randn(20, 2, generator=g, dtype=F64)
    q = _make(likelihood=pn.likelihoods.Bernoulli())
    with pytest.raises(ValueError, match="y"):
        q.fit(X, torch.full((20,), 2.0, dtype=F64), steps=5, generator=g)  # labels not 0/1
    with pytest.raises(ValueError, match="y"):
        q.fit(X, torch.zeros(19, dtype=F64), steps=5, generator=g)
    with pytest.raises(ValueError, match="X"):
        q.fit(X[:, 0], torch.zeros(20, dtype=F64), steps=5, generator=g)
    bad = X.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match="X"):
        q.fit(bad, torch.zeros(20, dtype=F64), steps=5, generator=g)
    with pytest.raises(RuntimeError, match="fit"):
        q.posterior(X)
    q.fit(X, torch.zeros(20, dtype=F64), steps=3, generator=g)
    with pytest.raises(ValueError, match="Xs"):
        q.posterior(torch.randn(4, 3, dtype=F64))
    with pytest.raises(ValueError, match="steps"):
        q.fit(X, torch.zeros(20, dtype=F64), steps=0, generator=g)
    with pytest.raises(TypeError, match="Bernoulli"):
        _make().predict_proba(X)
    with pytest.raises(AttributeError, match="Gaussian"):
        _ = q.noise


def test_more_bad_input_is_refused_by_name():
    g = torch.Generator().manual_seed(2)
    X = torch.randn(20, 2, generator=g, dtype=F64)
    y = torch.randn(20, generator=g, dtype=F64)
    with pytest.raises(ValueError, match="y"):  # negative counts
        _make(likelihood=pn.likelihoods.Poisson()).fit(X, -torch.ones(20, dtype=F64), steps=2,
                                                       generator=g)  # fmt: skip
    bad_y = y.clone()
    bad_y[3] = float("nan")
    with pytest.raises(ValueError, match="y"):
        _make().fit(X, bad_y, steps=2, generator=g)
    with pytest.raises(TypeError, match="X"):
        _make().fit(X.half(), y.half(), steps=2, generator=g)
    with pytest.raises(TypeError, match="generator"):
        _make().elbo_estimate(X, y, generator=None)
    for kwargs, name in (({"lr": -0.1}, "lr"), ({"hyper_lr": 0.0}, "hyper_lr"),
                         ({"freeze_hyperparameters": -1}, "freeze_hyperparameters")):  # fmt: skip
        with pytest.raises(ValueError, match=name):
            _make().fit(X, y, steps=2, generator=g, **kwargs)
    for kwargs, name in (({"lr": "0.1"}, "lr"), ({"freeze_hyperparameters": 2.5},
                         "freeze_hyperparameters"), ({"learn_hyperparameters": 1},
                         "learn_hyperparameters")):  # fmt: skip
        with pytest.raises(TypeError, match=name):  # types are TypeErrors, as elsewhere
            _make().fit(X, y, steps=2, generator=g, **kwargs)
    for kwargs, name in (({"covariance": 3}, "covariance"), ({"rank": 2.0}, "rank"),
                         ({"rank": True}, "rank"), ({"control_variate_rank": 1.0},
                         "control_variate_rank")):  # fmt: skip
        with pytest.raises(TypeError, match=name):
            _make(**kwargs)
    with pytest.raises(TypeError, match=r"y has dtype torch\.float32"):
        _make().fit(X, y.float(), steps=2, generator=g)
    q_np = _make().fit(X.numpy(), y.numpy(), steps=2, generator=g, freeze_hyperparameters=0)
    assert q_np.posterior(X[:3].numpy()).mean.shape == (3,)  # NumPy in, as the other models
    with pytest.raises(TypeError, match="chunk_entries"):
        q_np.posterior(X[:3].numpy(), chunk_entries=1.5)
    q = _make()
    q.fit(X, y, steps=2, generator=g)
    bad = X[:4].clone()
    bad[1, 1] = float("inf")
    with pytest.raises(ValueError, match="Xs"):
        q.posterior(bad)
    with pytest.raises(TypeError, match="Xs"):
        q.posterior(X[:4].float())
    with pytest.raises(ValueError, match="lr"):  # a continued fit checks its rate too
        q.fit(X, y, steps=4, lr=float("nan"), generator=g)
