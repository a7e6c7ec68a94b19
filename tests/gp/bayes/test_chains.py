"""Several chains: Laplace start, kept draws, checkpoints that resume into the same chain."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.gp.bayes import (
    ChainConfig,
    LogHyperparameters,
    laplace_preconditioner,
    sample_hyperparameters,
)
from pnsolve.gp.bayes import chains as chains_module
from pnsolve.testing.tolerances import rtol_for

pytestmark = pytest.mark.usefixtures("one_thread")

F64 = torch.float64


def _data(n: int = 80):
    ds = pn.datasets.load_uci("concrete", split=0)
    X, y = ds.X_train[:n].to(F64), ds.y_train[:n].to(F64)
    return X, (y - y.mean()) / y.std(correction=0)


def _job(config: ChainConfig, checkpoint=None):
    X, y = _data()
    params = LogHyperparameters(pn.kernels.RBF(lengthscale=1.0), 0.1, parametrization="log_tau")
    fit = laplace_preconditioner(
        params, X, y, subset=60, generator=torch.Generator().manual_seed(0)
    )
    return chains_module._Job(
        X, y, config, params, fit.M, fit.theta, 1234, checkpoint, "tag", config.iterations
    )


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


@pytest.mark.parametrize("sampler", ["sgld", "mh"])
def test_a_run_taken_in_pieces_with_until_is_the_whole_run(sampler, tmp_path):
    """``until`` stops every chain part-way along the full run's schedule; a later call
    continues from the checkpoints and the draws equal one uninterrupted run's."""
    X, y = _data(60)
    config = ChainConfig(sampler=sampler, iterations=240, subset=60, variance_batch=40,
                         checkpoint_every=50, alpha=1.0, burn_in=100)  # fmt: skip

    def run(until=None, checkpoint=None):
        return sample_hyperparameters(
            X, y, config, chains=2, generator=torch.Generator().manual_seed(6), processes=1,
            checkpoint=checkpoint, until=until,
        )  # fmt: skip

    whole = run()
    first = run(until=90, checkpoint=tmp_path / "ck")
    assert first.all_samples.shape == (2, 90, 3)
    assert torch.equal(first.all_samples, whole.all_samples[:, :90])
    if sampler == "mh":  # still inside the burn-in: not certified, its second half kept
        assert not first.frozen and first.start == 45
    rest = run(until=240, checkpoint=tmp_path / "ck")
    assert torch.equal(rest.all_samples, whole.all_samples)
    assert torch.equal(rest.samples, whole.samples)
    again = run(until=90, checkpoint=tmp_path / "ck")  # files hold more: the first 90
    assert torch.equal(again.all_samples, whole.all_samples[:, :90])
    with pytest.raises(ValueError, match="until"):
        run(until=241)


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
    with pytest.raises(ValueError, match="backend"):
        ChainConfig(backend="cuda")


def test_matrix_free_backend_gives_the_same_chain():
    """``backend="chunked"`` never forms K̂ and reproduces the dense chain to rounding.

    ``alpha = 0``: CG to convergence, no roulette; the probes are kept for the whole run
    (the roulette's uniforms are drawn per CG step, so a step more or less would shift
    the next probes).
    """
    X, y = _data(40)
    draws = {}
    for backend in ("dense", "chunked"):
        config = ChainConfig(iterations=30, subset=40, backend=backend, alpha=0.0, redraw_every=30)
        out = sample_hyperparameters(
            X, y, config, chains=1, generator=torch.Generator().manual_seed(3), processes=1
        )
        draws[backend] = out.all_samples
    tol = rtol_for(F64)  # two product implementations, rounding carried through 30 steps
    torch.testing.assert_close(draws["chunked"], draws["dense"], rtol=tol, atol=tol)


@pytest.mark.parametrize("sampler", ["sgld", "mh"])
def test_worker_processes_reproduce_the_in_process_chains(sampler):
    """Regression: the jobs' tensors reach spawned workers through shared memory, so
    chains running at the same time once moved one shared kernel's parameters under each
    other (wrong products, "negative curvature" at benign θ). Each chain now works on its
    own copy of the model (and the Laplace fit one of its own, which once made a second
    call start from where the first left the kernel): two workers reproduce the
    in-process chains bit for bit, and the caller's kernel is left untouched."""
    X, y = _data(120)
    params = LogHyperparameters(pn.kernels.RBF(lengthscale=1.0), 0.1, parametrization="log_tau")
    before = [p.detach().clone() for p in params.kernel.parameters()]
    config = ChainConfig(sampler=sampler, iterations=150, subset=80, variance_batch=50)
    runs = [
        sample_hyperparameters(
            X, y, config, chains=2, generator=torch.Generator().manual_seed(5),
            params=params, processes=processes,
        ).all_samples
        for processes in (1, 2)
    ]  # fmt: skip
    assert torch.equal(runs[1], runs[0])
    after = list(params.kernel.parameters())
    assert all(torch.equal(a, b) for a, b in zip(after, before, strict=True))


def test_a_diverging_chain_is_dropped_and_reported_not_the_whole_run():
    """Steps far too large for this posterior (ε₀ = 4, exact gradients): with this seed
    chain 1 leaves the positive-definite region and chain 0 does not; every chain
    diverging (ε₀ = 30) is an error."""
    X, y = _data(60)
    config = ChainConfig(iterations=60, gradient="exact", subset=60, step_start=4.0,
                         step_end=0.4, variance_batch=30)  # fmt: skip
    out = sample_hyperparameters(
        X, y, config, chains=2, generator=torch.Generator().manual_seed(4), processes=1
    )
    assert [c for c, _ in out.dropped] == [1]
    assert "SGLD" in out.dropped[0][1] or "gradient" in out.dropped[0][1]
    assert out.all_samples.shape == (1, 60, 3)
    assert len(out.seconds) == len(out.products) == 1
    assert bool(torch.isfinite(out.samples).all())
    worse = ChainConfig(iterations=60, gradient="exact", subset=60, step_start=30.0,
                        step_end=3.0, variance_batch=30)  # fmt: skip
    with pytest.raises(ArithmeticError, match="every chain diverged"):
        sample_hyperparameters(
            X, y, worse, chains=2, generator=torch.Generator().manual_seed(4), processes=1
        )
