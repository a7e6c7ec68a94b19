"""Hyperparameter training loop: resume reproduces the trajectory, budgets, validation."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import pnsolve as pn
from pnsolve.gp.training import StepSolve, TrainingConfig, load_checkpoint, train_hyperparameters
from pnsolve.testing import statistical_threshold

F64 = torch.float64


def _data(n=120, d=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=F64)
    y = torch.sin(4 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * torch.randn(n, generator=g, dtype=F64)
    return X, y


def _params(result):
    return torch.cat(
        [
            result.kernel.lengthscale.detach().reshape(-1),
            result.kernel.outputscale.detach().reshape(1),
            torch.tensor([result.noise], dtype=F64),
        ]
    )


class _Interrupt(Exception):
    pass


@pytest.mark.parametrize(
    ("solver", "estimator", "warm"),
    [("cg", "pathwise", True), ("sgd", "standard", False), ("ap", "pathwise", True)],
)
def test_resume_after_interrupt_reproduces_the_trajectory(tmp_path: Path, solver, estimator, warm):
    X, y = _data()
    config = TrainingConfig(
        solver=solver,
        estimator=estimator,
        warm_start=warm,
        steps=5,
        num_probes=4,
        num_features=64,
        block_size=40,
        batch_size=40,
        epochs_budget=5.0,
        preconditioner_rank=10,
    )
    ref = train_hyperparameters(X, y, config, generator=torch.Generator().manual_seed(3))

    ckpt = tmp_path / "run.pt"

    def stop_after_two(record):
        if record.step == 1:
            raise _Interrupt

    with pytest.raises(_Interrupt):
        train_hyperparameters(
            X,
            y,
            config,
            generator=torch.Generator().manual_seed(3),
            checkpoint=ckpt,
            callback=stop_after_two,
        )
    assert len(load_checkpoint(ckpt)["log"]) == 2
    # a fresh generator with the same seed: the checkpoint restores the saved state
    resumed = train_hyperparameters(
        X, y, config, generator=torch.Generator().manual_seed(3), checkpoint=ckpt
    )
    assert len(resumed.log) == config.steps
    assert all(p.dtype == F64 for p in resumed.kernel.parameters())
    assert torch.equal(_params(resumed), _params(ref))
    assert [r.epochs for r in resumed.log] == [r.epochs for r in ref.log]
    assert torch.equal(resumed.solutions, ref.solutions)


def test_checkpoint_of_another_run_is_refused(tmp_path: Path):
    X, y = _data()
    config = TrainingConfig(solver="cholesky", estimator="exact", steps=2)
    ckpt = tmp_path / "run.pt"
    train_hyperparameters(X, y, config, generator=torch.Generator(), checkpoint=ckpt)
    other = TrainingConfig(solver="cholesky", estimator="exact", steps=3, lr=0.05)
    with pytest.raises(ValueError, match="another run") as info:
        train_hyperparameters(X, y, other, generator=torch.Generator(), checkpoint=ckpt)
    # the differing keys and their values, not two dumps of the whole configuration
    assert "lr (checkpoint: 0.1, this run: 0.05); steps (checkpoint: 2, this run: 3)" in str(
        info.value
    )
    assert "{" not in str(info.value)
    with pytest.raises(ValueError, match="differs in: data"):
        train_hyperparameters(X, y + 1, config, generator=torch.Generator(), checkpoint=ckpt)
    bad = tmp_path / "bad.pt"
    bad.write_text("not a checkpoint")
    with pytest.raises(ValueError, match="checkpoint"):
        train_hyperparameters(X, y, config, generator=torch.Generator(), checkpoint=bad)


def test_exact_training_increases_the_marginal_likelihood():
    X, y = _data()
    config = TrainingConfig(solver="cholesky", estimator="exact", steps=30)
    res = train_hyperparameters(X, y, config, generator=torch.Generator())
    yc = y - y.mean()

    def lml(ls, os_, noise):
        k = pn.kernels.Matern(nu=1.5, lengthscale=torch.tensor(ls, dtype=F64), outputscale=os_)
        return float(pn.gp.ExactGP(k, noise=noise).log_marginal_likelihood(X, yc).detach())

    first = res.log[0]
    start = lml(first.lengthscale, first.outputscale, first.noise)
    end = lml(res.kernel.lengthscale.detach().tolist(), float(res.kernel.outputscale), res.noise)
    assert end > start
    assert all(r.epochs == 0 and r.converged for r in res.log)


def test_epoch_budget_is_respected_per_step():
    X, y = _data(n=150)
    config = TrainingConfig(
        solver="cg",
        estimator="standard",
        steps=3,
        num_probes=4,
        epochs_budget=3.0,
        tol=1e-12,
        preconditioner_rank=0,
    )
    res = train_hyperparameters(X, y, config, generator=torch.Generator().manual_seed(0))
    # CG: one epoch per iteration; the budget caps the iterations (Algorithm 1), the
    # warm-start residual of later steps is set-up work on top of it
    assert [r.iterations for r in res.log] == [3, 3, 3]
    assert res.log[0].epochs == 3.0 and all(r.epochs == 4.0 for r in res.log[1:])
    assert not any(r.converged for r in res.log)


@pytest.mark.statistical
def test_pathwise_prediction_matches_cholesky():
    X, y = _data(n=150)
    config = TrainingConfig(solver="cholesky", estimator="exact", steps=10)
    res = train_hyperparameters(X, y, config, generator=torch.Generator())
    Xs = torch.rand(20, 2, generator=torch.Generator().manual_seed(5), dtype=F64)
    m_exact, v_exact = pn.gp.training.predictive(res, X, y, Xs)
    m_path, v_path = pn.gp.training.predictive(
        res,
        X,
        y,
        Xs,
        method="pathwise",
        config=TrainingConfig(solver="cg", tol=1e-10),
        num_samples=2000,
        generator=torch.Generator().manual_seed(1),
    )
    # the mean needs no sampling: CG to relative residual 1e-10, amplified by κ(K̂) ≤ 1/σ²·‖K̂‖
    kappa = (float(res.kernel.outputscale) * X.shape[0] + res.noise) / res.noise
    atol = 1e-10 * kappa * float(y.abs().max())
    torch.testing.assert_close(m_path, m_exact, rtol=0, atol=atol)
    # variance from s samples around the known mean: relative standard error sqrt(2/s)
    # (Bonferroni over the 20 points at false-alarm 1e-3), plus the RFF prior's bias,
    # relative O(1/sqrt(m)) of the prior variance (outputscale) — the predictive
    # variance includes σ², so divide by it
    s, m = 2000, config.num_features
    z = statistical_threshold(1e-3 / 20)
    bias = 4.0 * float(res.kernel.outputscale) / m**0.5 / v_exact.min()
    assert float(((v_path - v_exact) / v_exact).abs().max()) <= z * (2 / s) ** 0.5 + bias


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"solver": "lu"}, "solver"),
        ({"estimator": "exact", "solver": "cg"}, "cholesky"),
        ({"steps": 0}, "steps"),
        ({"lr": -1.0}, "lr"),
        ({"epochs_budget": 0.0}, "epochs_budget"),
        ({"momentum": 1.0}, "momentum"),
        ({"init": "random"}, "init"),
        ({"solver": "sgd"}, "epochs_budget or a tuned sgd_lr"),
    ],
)
def test_bad_configuration(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TrainingConfig(**kwargs)


def test_bad_arguments():
    X, y = _data()
    with pytest.raises(TypeError, match="generator"):
        train_hyperparameters(X, y, TrainingConfig(steps=1), generator=None)
    with pytest.raises(TypeError, match="config"):
        train_hyperparameters(X, y, {"steps": 1}, generator=torch.Generator())
    with pytest.raises(ValueError, match="y"):
        train_hyperparameters(X, y[:-1], TrainingConfig(steps=1), generator=torch.Generator())


def test_unconverged_steps_above_the_threshold_skip_their_update():
    # a threshold below every residual the 1-epoch solves reach: every update is skipped,
    # the hyperparameters stay at their start values and the log says so
    X, y = _data()
    config = TrainingConfig(
        solver="cg",
        estimator="pathwise",
        steps=3,
        num_probes=4,
        epochs_budget=1.0,
        preconditioner_rank=0,
        max_step_residual=1e-12,
    )
    res = train_hyperparameters(X, y, config, generator=torch.Generator().manual_seed(0))
    assert all(r.skipped and not r.converged for r in res.log)
    assert torch.equal(_params(res), torch.ones(4, dtype=F64))
    # the warm-started solves still accumulate progress across the skipped steps
    probes = [r.residual_norm_probes for r in res.log]
    assert probes[-1] < probes[0]
    # the default threshold (1: a solution worse than zero) applies these updates
    config = TrainingConfig(
        solver="cg", estimator="pathwise", steps=3, num_probes=4, epochs_budget=1.0
    )
    res = train_hyperparameters(X, y, config, generator=torch.Generator().manual_seed(0))
    assert not any(r.skipped for r in res.log)
    assert not torch.equal(_params(res), torch.ones(4, dtype=F64))


def test_step_solve_carries_the_solvers_report_into_the_log():
    X, y = _data(60)
    config = TrainingConfig(
        solver="cg", estimator="standard", steps=2, num_probes=3, epochs_budget=2.0,
        preconditioner_rank=5, tol=1e-8, max_step_residual=None,
    )  # fmt: skip
    res = train_hyperparameters(X, y, config, generator=torch.Generator().manual_seed(0))
    for r in res.log:
        assert r.iterations == 2 and not r.converged  # the budget, not the tolerance
        assert r.epochs - r.setup_epochs == pytest.approx(2.0)
    # the record of a solve, and the rule that skips an unusable gradient
    system = pn.iterative.KernelSystem(pn.kernels.RBF(), X, 0.1)
    _, info = pn.iterative.ConjugateGradients(tol=1e-8, max_iterations=1).solve(
        system, torch.stack([y, X[:, 0]], dim=1)
    )
    solve = StepSolve.of(info)
    assert (solve.iterations, solve.epochs, solve.converged) == (1, info.epochs, False)
    assert solve.residual_norm_mean == info.residual_norm_mean
    assert solve.unusable(1e-3) and not solve.unusable(None) and not solve.unusable(10.0)
    assert StepSolve() == StepSolve(0.0, 0.0, 0.0, 0.0, 0, True)  # Cholesky: exact, free
    assert not StepSolve().unusable(1e-12)
