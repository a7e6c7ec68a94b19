"""Part of `pnsolve demo`: an IterGP posterior with its computational band on a 1-d problem.

Fits :class:`~pnsolve.gp.IterGP` (CG policy) on noisy samples of a 1-d function with a
deliberately small budget, prints how the posterior's variance splits into its
mathematical (exact-GP) and computational parts at a few budgets, and plots the
posterior at the plotted budget with both bands (``itergp.png``).
"""

from __future__ import annotations

import itertools
import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

import torch

from .._core import random as rnd
from .text import format_rows

__all__ = ["ItergpRow", "run_itergp_demo", "toy_data"]


@dataclass(frozen=True)
class ItergpRow:
    """One line of the IterGP table (averages over the plotting grid)."""

    budget: int
    mean_error: float
    math_var: float
    comp_var: float
    outside_band: float = 0.0
    """Fraction of grid points where the exact mean lies outside the ±2 sd band."""


def toy_data(
    n: int, noise: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` noisy samples of ``f(x) = sin(3x) + 0.3 x`` at uniform ``x ∈ [−3, 3]``.

    Parameters
    ----------
    n
        Number of points.
    noise
        Noise variance.
    generator
        Randomness for inputs and noise.

    Returns
    -------
    tuple of torch.Tensor
        ``X`` of shape ``(n, 1)``, ``y`` of shape ``(n,)``, noise-free ``f(X)``; float64
        on torch's default device (drawn on the generator's).
    """
    g, f64, device = generator, torch.float64, torch.get_default_device()
    X = 6.0 * rnd.rand((n, 1), generator=g, dtype=f64, device=device) - 3.0
    f = torch.sin(3.0 * X[:, 0]) + 0.3 * X[:, 0]
    y = f + math.sqrt(noise) * rnd.randn(n, generator=g, dtype=f64, device=device)
    return X, y, f


def _itergp_notes(rows: list[ItergpRow]) -> str:
    """Plain lines under the IterGP table: why its columns behave as they do."""
    rises = [(a, b) for a, b in itertools.pairwise(rows) if b.mean_error > a.mean_error]
    here = (
        f" (here {rises[0][0].mean_error:.2f} at budget {rises[0][0].budget}, "
        f"{rises[0][1].mean_error:.2f} at {rises[0][1].budget})"
        if rises
        else ""
    )
    lines = [
        f"The mean's error need not fall with the budget{here}: CG reduces the error of the "
        "representer weights v_i in the K̂-norm at every iteration, but the mean on the grid, "
        "k(x, X) v_i, weighs that error differently and can move away from the exact mean "
        "before it converges.",
    ]
    worst = max(rows, key=lambda r: r.outside_band)
    seen = (
        f"at budget {worst.budget} the exact mean lies outside the ±2 sd band at "
        f"{worst.outside_band:.0%} of the grid points"
        if worst.outside_band > 0.05
        else "the exact mean can lie outside the ±2 sd band"
    )
    lines.append(
        f"CG's computational variance is not an error bar: {seen}. CG's actions are "
        "residuals, so they depend on y, and conditioning on them is not exact Gaussian "
        "inference: the belief is not calibrated (over-confident early on, far too wide once "
        "CG has converged). Policies whose actions do not depend on y "
        "(pn.policies.Lanczos(start='random'), PivotedCholeskyActions, Random) and pn.gp.AffineGP "
        "give calibrated beliefs on data drawn from the GP prior (posterior.calibrated; "
        "docs/calibration.md)."
    )
    return "\n".join(textwrap.fill(line, width=100) for line in lines)


def run_itergp_demo(
    *,
    out: str | Path = "outputs/demo",
    n: int = 300,
    noise: float = 0.05,
    lengthscale: float = 0.7,
    budget: int = 8,
    table_budgets: tuple[int, ...] = (2, 8, 32),
    seed: int = 0,
    echo=print,
) -> tuple[list[ItergpRow], Path]:
    """Run the IterGP part of the demo; return its table rows and the plot's path.

    Parameters
    ----------
    out
        Output folder for ``itergp.png``.
    n
        Training points of the 1-d toy problem (:func:`toy_data`).
    noise
        Noise variance σ².
    lengthscale
        Matérn-3/2 lengthscale (outputscale 1).
    budget
        CG iterations of the plotted posterior.
    table_budgets
        Budgets reported in the table.
    seed
        Seed of the data's generator.
    echo
        Where text output goes.
    """
    import pnsolve as pn

    g = torch.Generator(device="cpu").manual_seed(seed)  # the same data on every device
    X, y, _ = toy_data(n, noise, g)
    kernel = pn.kernels.Matern(nu=1.5, lengthscale=lengthscale, outputscale=1.0)
    grid = torch.linspace(-3.5, 3.5, 200, dtype=X.dtype, device=X.device)
    Xg = grid.unsqueeze(-1)
    exact = pn.gp.ExactGP(kernel, noise).fit(X, y).posterior(Xg)

    def fit(b: int) -> pn.gp.GaussianPosterior:
        gp = pn.gp.IterGP(kernel, noise, pn.policies.CG(), pn.stopping.MaxIterations(b))
        return gp.fit(X, y).posterior(Xg)

    rows = []
    for b in table_budgets:
        p = fit(b)
        rows.append(
            ItergpRow(
                b,
                float((p.mean - exact.mean).abs().mean()),
                float(exact.var.mean()),
                float((p.var - exact.var).mean()),
                float(
                    ((p.mean - exact.mean).abs() > 2 * p.var.clamp_min(0).sqrt()).double().mean()
                ),
            )
        )
    echo(
        f"IterGP (CG policy) on a 1-d toy problem: n = {n}, Matérn-3/2 (ℓ = {lengthscale}), "
        f"σ² = {noise}; averages over {grid.shape[0]} grid points"
    )
    header = (
        "budget",
        "|mean − exact mean|",
        "math. variance",
        "comp. variance",
        "exact mean outside ±2 sd",
    )
    echo(format_rows(rows, header, ("", ".2e", ".2e", ".2e", ".0%")))
    echo(_itergp_notes(rows))
    p = fit(budget)
    path = pn.plotting.plot_gp_band(
        grid,
        p.mean,
        p.var,
        Path(out) / "itergp.png",
        math_var=exact.var,
        reference_mean=exact.mean,
        X_train=X[:, 0],
        y_train=y,
        title=f"IterGP after {budget} CG iterations (n = {n}): inner band mathematical, "
        "outer band + computational",
    )
    echo(f"wrote {path}")
    return rows, path
