"""``pnsolve fit --method cagp``: a computation-aware GP (:class:`~pnsolve.gp.CaGP`) by its ELBO.

The same data, Matérn-3/2 ARD kernel, initial hyperparameters, Adam (``--steps``,
``--lr``), seed, checkpoint, log, plot and result lines as ``--method mll``; the
hyperparameters, the noise and the block-sparse actions maximise CaGP's
computation-aware ELBO (Wenger et al., 2024), and the test predictions are CaGP's
posterior (its variance plus the learned noise for ``y``).
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

__all__ = ["DEFAULT_NUM_ACTIONS", "run_cagp"]

#: ``--num-actions`` when none is given (capped at the number of training rows).
DEFAULT_NUM_ACTIONS = 256


def run_cagp(args: argparse.Namespace) -> int:
    """Run ``pnsolve fit --method cagp`` with parsed arguments; returns the exit status.

    Ctrl-C prints one line saying how many steps the checkpoint holds and returns 130.

    Raises
    ------
    UsageError
        If ``--num-actions`` exceeds the training rows, or ``--checkpoint`` is given
        with ``--backend distributed`` (every rank would write the file).
    """
    from .fit import _saved_steps
    from .main import EXIT_INTERRUPTED, UsageError

    if args.backend == "distributed" and args.checkpoint is not None:
        raise UsageError(
            "--checkpoint with --method cagp --backend distributed: every rank would write "
            "the same file; leave --checkpoint out"
        )
    try:
        return _run(args)
    except KeyboardInterrupt:
        where = _saved_steps(args.checkpoint, args.steps, method="cagp")
        print(f"pnsolve fit: interrupted {where}", file=sys.stderr)
        return EXIT_INTERRUPTED


def _num_actions(args: argparse.Namespace, n: int) -> int:
    """``--num-actions`` checked against the ``n`` training rows (default: 256 or ``n``)."""
    from .main import UsageError

    if args.num_actions is None:
        return min(DEFAULT_NUM_ACTIONS, n)
    if args.num_actions > n:
        more = " or a larger --subsample" if args.subsample is not None else ""
        raise UsageError(
            f"--num-actions {args.num_actions} is more than the {n} training rows (CaGP "
            f"takes at most one action per row): give at most {n}{more}"
        )
    return int(args.num_actions)


def _run(args: argparse.Namespace) -> int:
    """Load, fit, predict and report; the outputs ``--log`` and ``--plot`` asked for."""
    from .fit import _report_hyperparameters, _report_test_metrics, _training_rows

    ds, X, y, gen = _training_rows(args)
    n, d = X.shape
    i = _num_actions(args, n)
    print(
        f"pnsolve fit: {ds.name} split {ds.split}: n = {n} train, {ds.X_test.shape[0]} test, "
        f"d = {d}; CaGP, {i} actions ({args.blocks} blocks), {args.steps} steps",
        flush=True,
    )
    lead = getattr(args, "lead", True)  # distributed: rank 0 shows the bar and writes
    t0 = time.perf_counter()
    model = _model(args, X, y, i, gen)
    resumed = _resumable_steps(args.checkpoint)
    model.fit(
        X, y, steps=args.steps, generator=gen, **({} if args.lr is None else {"lr": args.lr}),
        progress=not args.no_progress and lead, checkpoint=args.checkpoint, checkpoint_every=1,
    )  # fmt: skip
    train_s = time.perf_counter() - t0
    if resumed is not None:
        print(_resumed(args.checkpoint, resumed, args.steps))
    post = model.posterior(ds.X_test)
    mean, var = post.mean, post.var + model.noise  # latent variance + noise: y's predictive
    elbo = model.elbo(X, y)
    _report_hyperparameters(model.kernel, model.noise)
    print(f"final ELBO: {elbo:.4f} ({elbo / n:.4f} per training row)")
    print(f"training time: {train_s:.1f} s; predictions: CaGP posterior ({i} actions)")
    _report_test_metrics(mean, var, ds.y_test)
    history = model.training.history if model.training is not None else ()
    if args.log is not None and lead:
        print(f"wrote {_write_log(history, args.log)}")
    if args.plot is not None and lead:
        title = f"{ds.name}: CaGP, {i} actions ({args.blocks} blocks)"
        print(f"wrote {_plot_elbo(history, n, args.plot, title)}")
    return 0


def _model(args: argparse.Namespace, X: torch.Tensor, y: torch.Tensor, i: int, gen):
    """The CaGP at ``--method mll``'s initial hyperparameters (``--init``), mean ``ȳ``."""
    from ..gp import CaGP
    from ..kernels import Matern

    mean = float(y.mean())
    if args.init == "heuristic":
        from ..gp.training import initial_hyperparameters

        ls, outputscale, noise = initial_hyperparameters(X, y - mean, generator=gen)
    else:
        ls = torch.ones(X.shape[1], dtype=X.dtype, device=X.device)
        outputscale, noise = 1.0, 1.0
    if args.kernel is not None:
        from .fit import cli_kernel

        kernel = cli_kernel(args.kernel, X.shape[1])
    else:
        kernel = Matern(nu=1.5, lengthscale=ls.to(X.dtype), outputscale=ls.new_tensor(outputscale))
    return CaGP(kernel, noise, i, blocks=args.blocks, backend=args.backend, mean=mean)


def _resumed(checkpoint: str, done: int, steps: int) -> str:
    """The line saying that the run went on from a checkpoint holding ``done`` steps."""
    line = f"resumed from checkpoint {checkpoint} after step {done} of {steps}"
    if done == steps:
        return line + " (all steps done)"
    if done > steps:
        return f"{line}: it holds more steps than --steps; the results are those after step {done}"
    return line


def _resumable_steps(checkpoint: str | None) -> int | None:
    """The steps an existing checkpoint holds (``None``: no file, or one fit will refuse)."""
    from .fit import _checkpoint_steps

    if checkpoint is None or not Path(checkpoint).exists():
        return None
    try:
        return _checkpoint_steps(checkpoint, "cagp")
    except (ValueError, KeyError):
        return None  # CaGP.fit refuses it with the reason


def _write_log(history: Sequence[dict[str, float]], path: str | Path) -> Path:
    """One CSV row per step: ``step``, ``elbo`` (before the step's update), ``seconds``."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    names = ["step", "elbo", "seconds"]
    with out.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(names)
        for record in history:
            writer.writerow([record[k] for k in names])
    return out


def _plot_elbo(history: Sequence[dict[str, float]], n: int, path: str | Path, title: str) -> Path:
    """The ELBO per training row at every step (before its update), as a PNG."""
    from ..plotting import plot_elbo

    return plot_elbo(history, n, path, title=title)
