"""The error catalogue's case type and the inputs its cases build (``test_error_catalogue``)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

import pnsolve as pn

F64 = torch.float64
ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "errors.md"


@dataclass(frozen=True)
class Case:
    """One bad input: where it goes in, what it is, and what must come out."""

    area: str
    bad: str
    run: Callable[[], object]
    error: type[BaseException]
    match: str


class CliExit(Exception):
    """A CLI run that ended with a non-zero exit: ``exit {code}: {stderr}``."""


# ----------------------------------------------------------------------------- inputs
def _A(n: int = 5) -> torch.Tensor:
    return 2.0 * torch.eye(n, dtype=F64)


def _b(n: int = 5) -> torch.Tensor:
    return torch.ones(n, dtype=F64)


def _X(n: int = 10) -> torch.Tensor:
    return torch.linspace(0, 1, 2 * n, dtype=F64).reshape(n, 2)


def _y(n: int = 10) -> torch.Tensor:
    return torch.sin(3 * _X(n)[:, 0])


def _labels(n: int = 10) -> torch.Tensor:
    return (_y(n) > 0.5).to(F64)


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(0)


def _pls(**kw: object) -> pn.ProbabilisticLinearSolver:
    return pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(3), **kw)


def _itergp() -> pn.gp.IterGP:
    return pn.gp.IterGP(
        pn.kernels.RBF(), noise=0.1, policy=pn.policies.CG(), stopping=pn.stopping.MaxIterations(3)
    )


def _written_after_fit() -> object:
    gp = pn.gp.ExactGP(pn.kernels.RBF(), noise=0.1).fit(_X(), _y())
    assert gp.X is not None
    gp.X.mul_(2.0)  # the model's own copy of the data (the caller's copy is never read)
    return gp.posterior(_X())


def _stale_posterior() -> object:
    k = pn.kernels.RBF()
    post = pn.gp.ExactGP(k, noise=0.1).fit(_X(), _y()).posterior(_X(3))
    k.lengthscale = 2.0
    return post.cov()


def _qsgp_after_change() -> object:
    k = pn.kernels.RBF()
    q = pn.gp.QSGP(k, pn.likelihoods.Gaussian(), 10, batch_size=5, generator=_gen())
    q.fit(_X(), _y(), steps=1, generator=_gen())
    k.lengthscale = 2.0
    return q.posterior(_X())


def _ncgp(lik: pn.likelihoods.Likelihood) -> pn.gp.IterNCGP:
    return pn.gp.IterNCGP(pn.kernels.RBF(), lik, pn.policies.CG(), pn.stopping.MaxIterations(3))


def _mh(iterations: int = 10) -> object:
    from pnsolve.gp.bayes import ChainConfig

    return ChainConfig(sampler="mh", iterations=iterations)


def _sample(X: object, y: object) -> object:
    from pnsolve.gp.bayes import sample_hyperparameters

    return sample_hyperparameters(X, y, _mh(), chains=1, generator=_gen(), processes=1)


def _chain_config(**kwargs: object) -> object:
    from pnsolve.gp.bayes import ChainConfig

    return ChainConfig(**kwargs)


def _calibration(posterior: Callable[..., object], Xs: torch.Tensor | None = None) -> object:
    return pn.metrics.prior_draw_calibration(
        pn.kernels.RBF(), 0.1, _X(), _X(4) if Xs is None else Xs, posterior, draws=2,
        generator=_gen(),
    )  # fmt: skip


class _Moments:
    """A user's posterior object with given ``mean`` and ``var``."""

    def __init__(self, mean: torch.Tensor, var: torch.Tensor) -> None:
        self.mean, self.var = mean, var


def _with_nan(t: torch.Tensor) -> torch.Tensor:
    t = t.clone()
    t.view(-1)[1] = float("nan")
    return t


def _asym() -> torch.Tensor:
    A = _A()
    A[0, 3] = 1.0
    return A


def _cplx() -> np.ndarray:
    return (_A() + 1j * torch.eye(5, dtype=F64)).numpy()


# ----------------------------------------------------------------------------- the CLI
def _write_csv(name: str = "toy.csv", bad: str | None = None) -> str:
    """A small regression CSV in the current folder (``bad`` replaces the third value)."""
    X = torch.linspace(0, 1, 80, dtype=F64).reshape(40, 2)
    y = torch.sin(3 * X[:, 0])
    rows = [f"{a:.6g},{b:.6g},{t:.6g}" for (a, b), t in zip(X.tolist(), y.tolist())]
    if bad is not None:
        rows[1] = rows[1].rsplit(",", 1)[0] + "," + bad
    Path(name).write_text("a,b,target\n" + "\n".join(rows) + "\n")
    return name


def _fit_args(data: str, *extra: str) -> list[str]:
    return [
        "fit", "--data", data, "--solver", "cg", "--estimator", "pathwise", "--num-probes",
        "2", "--epochs-budget", "3", "--steps", "1", "--no-progress", *extra,
    ]  # fmt: skip


def _main(argv: list[str]) -> tuple[int, str]:
    """Run the ``pnsolve`` command in-process: ``(exit status, stderr)``."""
    from pnsolve.cli import main

    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
    return int(code or 0), err.getvalue()


def _cli(*argv: str, setup: Callable[[], object] | None = None) -> Callable[[], None]:
    """A case that runs ``pnsolve argv`` and raises :class:`CliExit` on a non-zero exit.

    The CLI's contract is checked on the way: exactly one line on stderr, no traceback.
    """

    def run() -> None:
        if setup is not None:
            setup()
        code, err = _main(list(argv))
        if code == 0:
            return
        lines = err.strip().splitlines()
        assert "Traceback" not in err and len(lines) == 1, err
        raise CliExit(f"exit {code}: {lines[0]}")

    return run


def _checkpoint(*extra: str) -> None:
    """Write ``run.pt`` by a successful one-step run (``extra`` flags added)."""
    code, err = _main(_fit_args(_write_csv(), "--checkpoint", "run.pt", *extra))
    assert code == 0, err


def _damaged_checkpoint() -> None:
    _checkpoint()
    raw = Path("run.pt").read_bytes()
    Path("run.pt").write_bytes(raw[:-64])
