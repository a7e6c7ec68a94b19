"""MCMC figures (seed 000 Fig. 5): traces with running statistics and PSRF curves."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from pnsolve.metrics import psrf_curve
from pnsolve.plotting import plot_psrf, plot_traces

PNG = b"\x89PNG\r\n\x1a\n"
NAMES = ["log σ", "log τ", "log λ"]


def _chains(chains: int, draws: int, seed: int, shift: float = 0.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    steps = torch.randn(chains, draws, len(NAMES), generator=g, dtype=torch.float64)
    return 0.1 * steps.cumsum(1) + shift  # random walks: visible traces


def test_plot_traces_with_and_without_reference(tmp_path: Path):
    x = _chains(3, 200, seed=0)
    reference = _chains(2, 300, seed=1, shift=0.5).numpy()  # numpy and another length
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        both = plot_traces(x, NAMES, tmp_path / "deep" / "traces.png", reference=reference)
        alone = plot_traces(x[:1], NAMES, tmp_path / "one_chain.png", title="one chain")
    for p in (both, alone):
        assert isinstance(p, Path) and p.read_bytes()[:8] == PNG


def test_plot_psrf_from_psrf_curve(tmp_path: Path):
    x = _chains(4, 120, seed=2)
    steps = list(range(10, 121, 10))
    psrf, upper = psrf_curve(x, steps)
    upper[0, 0] = float("inf")  # stuck chains: left out, not an error
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = plot_psrf(steps, psrf, upper, NAMES, tmp_path / "sub" / "psrf.png")
    assert out.read_bytes()[:8] == PNG


def test_plot_bad_input(tmp_path: Path):
    x = _chains(2, 20, seed=3)
    with pytest.raises(ValueError, match="names"):
        plot_traces(x, NAMES[:2], tmp_path / "a.png")
    with pytest.raises(ValueError, match="reference"):
        plot_traces(x, NAMES, tmp_path / "a.png", reference=x[..., :2])
    with pytest.raises(ValueError, match="samples"):
        plot_traces(x[0], NAMES, tmp_path / "a.png")
    bad = x.clone()
    bad[0, 3, 1] = float("nan")
    with pytest.raises(ValueError, match="samples contains NaN"):
        plot_traces(bad, NAMES, tmp_path / "a.png")
    psrf, upper = psrf_curve(x, [10, 20])
    with pytest.raises(ValueError, match="psrf"):
        plot_psrf([10, 20, 30], psrf, upper, NAMES, tmp_path / "b.png")
    with pytest.raises(ValueError, match="same shape"):
        plot_psrf([10, 20], psrf, upper[:, :2], NAMES, tmp_path / "b.png")
    assert not (tmp_path / "a.png").exists() and not (tmp_path / "b.png").exists()
