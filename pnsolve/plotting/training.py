"""Training curves of hyperparameter optimisation runs (residual norms, epochs, noise)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ._figure import new_panels, save_figure

if TYPE_CHECKING:
    from ..gp.training.record import StepRecord

__all__ = ["plot_training"]


def plot_training(
    runs: Mapping[str, Sequence[StepRecord]],
    path: str | Path,
    *,
    title: str = "Hyperparameter training",
    tol: float | None = None,
) -> Path:
    """Four panels per step: residual norms (mean and probes), epochs, noise, outputscale.

    Parameters
    ----------
    runs
        Label → the run's per-step log (``TrainingResult.log``).
    path
        Output PNG; parent folders are created.
    title
        Figure title.
    tol
        Optional tolerance line on the residual panel.

    Returns
    -------
    pathlib.Path
        The written file.
    """
    fig, axes, path = new_panels(path, (10.0, 6.4), 2, 2, sharex=True)
    (ax_res, ax_ep), (ax_noise, ax_os) = axes
    any_residual = False
    for i, (label, log) in enumerate(runs.items()):
        color = f"C{i % 10}"
        steps = [r.step for r in log]
        for attr, style in (("residual_norm_mean", "--"), ("residual_norm_probes", "-")):
            # exact solves log zero (and nan probe) residuals: nothing to draw on a log axis
            pts = [(s, getattr(r, attr)) for s, r in zip(steps, log) if getattr(r, attr) > 0]
            if pts:
                any_residual = True
                ax_res.semilogy(
                    *zip(*pts), color=color, ls=style, label=label if style == "-" else None
                )
        # log scale: budgets and cold baselines span 1–1000 epochs per step; exact runs
        # (zero epochs) have nothing to draw there and appear in the noise panel's legend
        pts = [(s, r.epochs) for s, r in zip(steps, log) if r.epochs > 0]
        if pts:
            ax_ep.semilogy(*zip(*pts), color=color, label=label)
        ax_noise.semilogy(steps, [r.noise for r in log], color=color, label=label)
        ax_os.plot(steps, [r.outputscale for r in log], color=color, label=label)
    if not any_residual:
        ax_res.text(0.5, 0.5, "exact solves: no residuals", ha="center", transform=ax_res.transAxes)
    elif tol is not None:
        ax_res.axhline(tol, color="0.5", lw=1, ls=":")
    ax_res.set_ylabel("relative residual (solid: probes, dashed: mean)")
    ax_ep.set_ylabel("solver epochs per step")
    ax_noise.set_ylabel("noise variance σ²")
    ax_os.set_ylabel("outputscale")
    for ax in (ax_noise, ax_os):
        ax.set_xlabel("Adam step")
    for ax in axes.flat:
        ax.grid(True, which="both", alpha=0.3)
    ax_noise.legend(fontsize=8)
    fig.suptitle(title)
    return save_figure(fig, path)
