"""Training-curve figure: iterative and exact runs, no log-scale warnings."""

from __future__ import annotations

import warnings
from pathlib import Path

import torch

from pnsolve.gp.training import TrainingConfig, train_hyperparameters
from pnsolve.plotting import plot_training


def test_plot_training_mixes_exact_and_iterative_runs(tmp_path: Path):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(60, 2, generator=g, dtype=torch.float64)
    y = X.sum(1) + 0.1 * torch.randn(60, generator=g, dtype=torch.float64)
    runs = {
        "exact": train_hyperparameters(
            X, y, TrainingConfig(solver="cholesky", estimator="exact", steps=3), generator=g
        ).log,
        "cg": train_hyperparameters(
            X, y, TrainingConfig(solver="cg", steps=3, num_probes=4), generator=g
        ).log,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = plot_training(runs, tmp_path / "curves.png", tol=0.01)
        only_exact = plot_training({"exact": runs["exact"]}, tmp_path / "exact.png")
    for p in (out, only_exact):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
