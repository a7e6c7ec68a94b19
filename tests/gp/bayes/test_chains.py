"""Several chains: Laplace start, kept draws, checkpoints that resume into the same chain."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.gp.bayes import ChainConfig, LogHyperparameters, laplace_preconditioner
from pnsolve.gp.bayes import chains as chains_module

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64


def _data(n: int = 80):
    ds = pn.datasets.load_uci("concrete", split=0)
    X, y = ds.X_train[:n].to(F64), ds.y_train[:n].to(F64)
    return X, (y - y.mean()) / y.std(correction=0)


def _job(config: ChainConfig, checkpoint=None):
    X, y = _data()
    params = LogHyperparameters(pn.kernels.RBF(lengthscale=1.0), 0.1, parametrization="seed")
    fit = laplace_preconditioner(
        params, X, y, subset=60, generator=torch.Generator().manual_seed(0)
    )
    return chains_module._Job(X, y, config, params, fit.M, fit.theta, 1234, checkpoint, "tag")


class _Stop(Exception):
    pass


@pytest.mark.parametrize("sampler", ["sgld", "mh"])
def test_an_interrupted_chain_resumes_into_the_same_draws(sampler, tmp_path):
    config = ChainConfig(sampler=sampler, gradient="ulisse", iterations=300, checkpoint_every=100,
                         variance_batch=50, alpha=1.0)  # fmt: skip
    whole = chains_module._chain(_job(config), None)
    path = tmp_path / "ck.chain0.pt"
    calls = []

    def stop_after_two_blocks(count):
        calls.append(count)
        if len(calls) == 2:
            raise _Stop

    with pytest.raises(_Stop):
        chains_module._chain(_job(config, path), stop_after_two_blocks)
    assert path.exists()
    resumed = chains_module._chain(_job(config, path), None)
    assert torch.equal(resumed.samples, whole.samples)
    assert resumed.frozen_at == whole.frozen_at


def test_a_checkpoint_of_another_run_is_refused(tmp_path):
    config = ChainConfig(sampler="mh", iterations=100, checkpoint_every=50)
    path = tmp_path / "ck.chain0.pt"
    chains_module._chain(_job(config, path), None)
    job = _job(config, path)
    job.tag = "another run"
    with pytest.raises(ValueError, match="belongs to another run"):
        chains_module._chain(job, None)


def test_sample_hyperparameters_keeps_draws_after_the_latest_freeze():
    X, y = _data(60)
    config = ChainConfig(iterations=400, gradient="exact", subset=60, variance_batch=50)
    out = pn.gp.bayes.sample_hyperparameters(
        X, y, config, chains=2, generator=torch.Generator().manual_seed(3), processes=1
    )
    assert out.names == ("log_sigma", "log_tau", "log_lambda")
    assert out.all_samples.shape == (2, 400, 3)
    assert out.samples.shape == (2, 400 - out.start, 3)
    assert torch.equal(out.samples, out.all_samples[:, out.start :])
    if out.frozen:
        assert out.start % config.variance_batch == 0
    assert len(out.seconds) == 2


def test_bad_configurations_name_the_argument():
    with pytest.raises(ValueError, match="sampler"):
        ChainConfig(sampler="hmc")
    with pytest.raises(ValueError, match="gradient"):
        ChainConfig(gradient="adam")
    with pytest.raises(ValueError, match="burn_in"):
        ChainConfig(iterations=10, burn_in=10)
