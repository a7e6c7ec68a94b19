"""The main job (`pnsolve demo`): CG on a real kernel system, with and without preconditioning.

Builds K̂ = K + σ²I for a Matérn-3/2 kernel on a UCI training set shipped with the
package, solves K̂ x = y with

1. plain CG,
2. CG preconditioned with P = L Lᵀ + σ²I, L a pivoted partial Cholesky factor of K,
3. a dense Cholesky factorisation (the reference),

prints a table (iterations, relative residual, error against Cholesky, time) and
writes a convergence plot. Then, on a subset of a few hundred points, it runs the
probabilistic linear solver with several policies and prints, at a few iteration
counts, the error against Cholesky next to the uncertainty the belief reports
(:mod:`pnsolve.demo_tradeoff`; plot ``tradeoff.png``). Finally it fits IterGP on a
1-d toy problem with a small budget and plots the posterior with its mathematical and
computational bands (:mod:`pnsolve.demo_itergp`; plot ``itergp.png``).
"""

from __future__ import annotations

import math
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from .text import format_rows

__all__ = ["DemoRow", "run_demo"]


@dataclass(frozen=True)
class DemoRow:
    """One line of the demo table."""

    method: str
    iterations: int
    relative_residual: float
    relative_error: float
    seconds: float


def run_demo(
    dataset: str = "concrete",
    *,
    split: int = 0,
    out: str | Path = "outputs/demo",
    lengthscale: float = 2.0,
    outputscale: float = 1.0,
    noise: float = 1e-2,
    rank: int = 100,
    rtol: float = 1e-8,
    backend: str = "auto",
    data_dir: str | None = None,
    pls_subset: int = 400,
    pls_checkpoints: tuple[int, ...] = (10, 50, 200),
    itergp_budget: int = 8,
    echo=print,
) -> tuple[list[DemoRow], Path]:
    """Run the demo and return its table rows and the path of the plot.

    Parameters
    ----------
    dataset, split, data_dir
        UCI dataset (see :func:`pnsolve.datasets.load_uci`).
    out
        Output folder for ``convergence.png``, ``tradeoff.png`` and ``itergp.png``.
    lengthscale, outputscale, noise
        Matérn-3/2 hyperparameters and noise variance σ² (inputs standardised).
    rank
        Rank of the pivoted-Cholesky preconditioner.
    rtol
        CG tolerance on ‖r‖ / ‖y‖.
    backend
        KernelMatrix backend.
    pls_subset
        Training points (the first ones) for the policy trade-off table; ``0`` skips it.
    pls_checkpoints
        Iteration counts reported in the trade-off table.
    itergp_budget
        CG iterations of the plotted IterGP posterior (1-d toy problem); ``0`` skips it.
    echo
        Where text output goes.
    """
    import pnsolve as pn

    _check_demo_arguments(lengthscale, outputscale, noise, rtol, rank, pls_subset, itergp_budget)
    ds = pn.datasets.load_uci(dataset, split=split, data_dir=data_dir)
    X, y = ds.X_train, ds.y_train
    n = X.shape[0]
    kernel = pn.kernels.Matern(nu=1.5, lengthscale=lengthscale, outputscale=outputscale)
    with torch.no_grad():
        K = pn.kernels.KernelMatrix(kernel, X, backend=backend)
        A = K + pn.linops.ScaledIdentity(n, noise, dtype=X.dtype, device=X.device)
        echo(
            f"{dataset}: n = {n}, d = {X.shape[1]}, Matérn-3/2 (ℓ = {lengthscale}, "
            f"s = {outputscale}), σ² = {noise}, KernelMatrix backend = {K.backend}"
        )

        rows, histories = _compare_solvers(K, A, y, rtol=rtol, rank=min(rank, n), noise=noise)

    echo(_format_table(rows))
    echo(_cg_notes(rows, rtol, min(rank, n)))
    path = pn.plotting.plot_convergence(
        histories,
        Path(out) / "convergence.png",
        title=f"CG on K̂ x = y ({dataset}, n = {n})",
        reference=rtol,
    )
    echo(f"wrote {path}")
    if pls_subset > 0:
        from .demo_tradeoff import run_tradeoff

        m = min(pls_subset, n)
        echo("")
        run_tradeoff(
            X[:m],
            y[:m],
            kernel,
            noise,
            checkpoints=pls_checkpoints,
            out=out,
            title=f"PLS on K̂ x = y ({dataset}, first {m} points): error vs sqrt(tr Σ_i)",
            echo=echo,
        )
    if itergp_budget > 0:
        from .demo_itergp import run_itergp_demo

        echo("")
        run_itergp_demo(out=out, budget=itergp_budget, echo=echo)
    return rows, path


def _check_demo_arguments(
    lengthscale, outputscale, noise, rtol, rank, pls_subset, itergp_budget
) -> None:
    """Refuse bad demo settings with a ValueError naming the argument."""
    for name, value in (
        ("lengthscale", lengthscale),
        ("outputscale", outputscale),
        ("noise", noise),
        ("rtol", rtol),
    ):
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not (math.isfinite(value) and value > 0)
        ):
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ValueError(f"rank must be a positive int, got {rank!r}")
    if isinstance(pls_subset, bool) or not isinstance(pls_subset, int) or pls_subset < 0:
        raise ValueError(f"pls_subset must be a non-negative int, got {pls_subset!r}")
    if isinstance(itergp_budget, bool) or not isinstance(itergp_budget, int) or itergp_budget < 0:
        raise ValueError(f"itergp_budget must be a non-negative int, got {itergp_budget!r}")


def _compare_solvers(K, A, y: torch.Tensor, *, rtol: float, rank: int, noise: float):
    """Cholesky, CG and pivoted-Cholesky-preconditioned CG on ``A x = y``.

    Returns the table rows and the relative residual histories of the two CG runs.
    """
    import pnsolve as pn

    n = y.shape[0]
    t0 = time.perf_counter()
    dense = A.to_dense()
    chol = torch.linalg.cholesky(dense)
    x_ref = torch.cholesky_solve(y.unsqueeze(-1), chol).squeeze(-1)
    t_chol = time.perf_counter() - t0

    def rel_res(x: torch.Tensor) -> float:
        return float(torch.linalg.norm(y - A @ x) / torch.linalg.norm(y))

    def rel_err(x: torch.Tensor) -> float:
        return float(torch.linalg.norm(x - x_ref) / torch.linalg.norm(x_ref))

    rows = [DemoRow("Cholesky (dense)", 0, rel_res(x_ref), 0.0, t_chol)]
    histories = {}
    t0 = time.perf_counter()
    x_cg, info = pn.cg(A, y, rtol=rtol, maxiter=10 * n)
    t_cg = time.perf_counter() - t0
    rows.append(DemoRow("CG", info.iterations, rel_res(x_cg), rel_err(x_cg), t_cg))
    histories["CG"] = info.residual_norms.reshape(-1) / torch.linalg.norm(y)

    t0 = time.perf_counter()
    P = pn.preconditioners.PivotedCholesky(K, rank=rank, shift=noise)
    x_pc, info_pc = pn.cg(A, y, rtol=rtol, maxiter=10 * n, M=P)
    t_pc = time.perf_counter() - t0
    label = f"CG + pivoted Cholesky (rank {rank})"
    rows.append(DemoRow(label, info_pc.iterations, rel_res(x_pc), rel_err(x_pc), t_pc))
    histories[label] = info_pc.residual_norms.reshape(-1) / torch.linalg.norm(y)
    return rows, histories


def _cg_notes(rows: list[DemoRow], rtol: float, rank: int) -> str:
    """Two plain lines under the CG table: what it shows."""
    _, cg, pcg = rows
    return textwrap.fill(
        f"CG stops once ‖r‖ ≤ rtol·‖y‖ (rtol = {rtol:g}); 'rel. error' is the distance to "
        f"the dense Cholesky solution. The preconditioner (rank-{rank} pivoted Cholesky of K, "
        "plus σ²I) captures K's largest eigenvalues, so preconditioned CG sees a "
        f"better-conditioned system: {pcg.iterations} instead of {cg.iterations} iterations.",
        width=100,
    )


def _format_table(rows: list[DemoRow]) -> str:
    header = ("method", "iterations", "rel. residual", "rel. error vs Cholesky", "time [s]")
    return format_rows(rows, header, ("", "", ".2e", ".2e", ".3f"))
