"""The error catalogue (``docs/errors.md``): every bad input class and what the user sees.

Each row of the page is one :class:`Case` below: the test runs it, checks the exception
type and that the message names the problem, and the page itself is rendered from the
messages the library actually produces — so the documentation cannot drift from the
behaviour. Regenerate the page after changing a message::

    .venv/bin/python tests/docs/test_error_catalogue.py
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

import pnsolve as pn
from pnsolve.testing.device import lazy_device

pytestmark = pytest.mark.cpu_only(
    reason="documentation and its examples: no device-specific computation"
)

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


# ----------------------------------------------------------------------------- cases
CASES: dict[str, Case] = {
    # --- pn.cg
    "cg-shape": Case(
        "cg", "`b` of the wrong length", lambda: pn.cg(_A(), _b(4)), ValueError, "b must have shape"
    ),
    "cg-nan-b": Case(
        "cg", "NaN in `b`", lambda: pn.cg(_A(), _with_nan(_b())), ValueError, "b contains NaN"
    ),
    "cg-nan-A": Case(
        "cg", "NaN in `A`", lambda: pn.cg(_with_nan(_A()), _b()), ValueError, "A contains NaN"
    ),
    "cg-complex": Case(
        "cg", "complex `A` (NumPy)", lambda: pn.cg(_cplx(), _b()), TypeError, "A must be real"
    ),
    "cg-half": Case(
        "cg",
        "float16 operands",
        lambda: pn.cg(_A().half(), _b().half()),
        TypeError,
        "A has unsupported dtype",
    ),
    "cg-empty": Case(
        "cg",
        "an empty system (n = 0)",
        lambda: pn.cg(torch.zeros(0, 0, dtype=F64), torch.zeros(0, dtype=F64)),
        ValueError,
        "A is empty",
    ),
    "cg-nonsym": Case(
        "cg", "a non-symmetric matrix", lambda: pn.cg(_asym(), _b()), ValueError, "A must be symm"
    ),
    "cg-nonspd": Case(
        "cg",
        "a symmetric matrix that is not positive definite",
        lambda: pn.cg(-_A(), _b()),
        pn.NotPositiveDefiniteError,
        "not positive definite.*iteration",
    ),
    "cg-dtype": Case(
        "cg",
        "`x0` in another dtype",
        lambda: pn.cg(_A(), _b(), x0=torch.zeros(5)),
        TypeError,
        "x0 has dtype",
    ),
    "cg-rtol": Case(
        "cg", "negative `rtol`", lambda: pn.cg(_A(), _b(), rtol=-1.0), ValueError, "rtol must be"
    ),
    "cg-maxiter": Case(
        "cg", "non-integer `maxiter`", lambda: pn.cg(_A(), _b(), maxiter=2.5), TypeError, "maxiter"
    ),
    "cg-M": Case(
        "cg",
        "a preconditioner of the wrong shape",
        lambda: pn.cg(_A(), _b(), M=torch.eye(4, dtype=F64)),
        ValueError,
        "M must match A",
    ),
    "cg-callback": Case(
        "cg",
        "a callback that is not callable",
        lambda: pn.cg(_A(), _b(), callback=3),
        TypeError,
        "callback must be callable",
    ),
    "cg-type": Case(
        "cg", "`A` of an unknown type", lambda: pn.cg("matrix", _b()), TypeError, "A must be a"
    ),
    # --- pn.lanczos
    "lanczos-k": Case(
        "lanczos", "`k = 0` steps", lambda: pn.lanczos(_A(), _b(), 0), ValueError, "k must be"
    ),
    "lanczos-v": Case(
        "lanczos",
        "a zero start vector",
        lambda: pn.lanczos(_A(), torch.zeros(5, dtype=F64), 3),
        ValueError,
        "v must be nonzero",
    ),
    "lanczos-reorth": Case(
        "lanczos",
        "an unknown re-orthogonalisation",
        lambda: pn.lanczos(_A(), _b(), 3, reorth="partial"),
        ValueError,
        "reorth must be one of",
    ),
    # --- the probabilistic linear solver
    "pls-policy": Case(
        "PLS",
        "a policy given as a string",
        lambda: pn.ProbabilisticLinearSolver("cg", pn.stopping.MaxIterations(3)),
        TypeError,
        "policy must be a pnsolve.policies.Policy",
    ),
    "pls-prior": Case(
        "PLS", "a negative prior variance", lambda: _pls(prior=-1.0), ValueError, "prior must be"
    ),
    "pls-nonspd": Case(
        "PLS",
        "an operator with negative curvature",
        lambda: _pls().solve(-_A(), _b()),
        pn.NotPositiveDefiniteError,
        "not positive definite.*iteration 0",
    ),
    "pls-generator": Case(
        "PLS",
        "a seed instead of a `torch.Generator`",
        lambda: _pls().solve(_A(), _b(), generator=0),
        TypeError,
        "generator must be a torch.Generator",
    ),
    "pls-buffer": Case(
        "PLS",
        "a buffer without actions and images",
        lambda: _pls().solve(_A(), _b(), buffer=object()),
        TypeError,
        "buffer must provide",
    ),
    "pls-stopping": Case(
        "PLS",
        "a negative iteration budget",
        lambda: pn.stopping.MaxIterations(-1),
        ValueError,
        "maxiter must be",
    ),
    "problinsolve-policy": Case(
        "PLS",
        "an unknown policy name in `problinsolve`",
        lambda: pn.problinsolve(_A(), _b(), policy="gmres"),
        ValueError,
        "policy must be a Policy or one of",
    ),
    "problinsolve-matrix-b": Case(
        "PLS",
        "several right-hand sides in `problinsolve`",
        lambda: pn.problinsolve(_A(), torch.ones(5, 2, dtype=F64)),
        ValueError,
        "one at a time",
    ),
    "policy-order": Case(
        "PLS",
        "an unknown unit-vector order",
        lambda: pn.policies.UnitVector("largest"),
        ValueError,
        "order must be one of",
    ),
    # --- ULISSE
    "ulisse-beta": Case(
        "ULISSE",
        "a negative `beta`",
        lambda: pn.randomized.ulisse(_A(), _b(), alpha=2, beta=-1.0, generator=_gen()),
        ValueError,
        "beta must be",
    ),
    "ulisse-alpha": Case(
        "ULISSE",
        "a negative `alpha`",
        lambda: pn.randomized.ulisse(_A(), _b(), alpha=-2, beta=1.0, generator=_gen()),
        ValueError,
        "alpha must be",
    ),
    "ulisse-generator": Case(
        "ULISSE",
        "no generator (its randomness must be explicit)",
        lambda: pn.randomized.ulisse(_A(), _b(), alpha=2, beta=1.0, generator=None),
        TypeError,
        "generator",
    ),
    # --- affine iterative methods
    "affine-damping": Case(
        "affine methods",
        "a Jacobi damping above 2/λ_max (the sweeps diverge)",
        lambda: pn.iterative.affine_solve(_A(), _b(), pn.iterative.JacobiIteration(5, damping=5.0)),
        pn.iterative.DivergenceError,
        "damping=5\\) diverges.*use damping <",
    ),
    "affine-upper": Case(
        "affine methods",
        "a Chebyshev `upper` below λ_max",
        lambda: pn.iterative.affine_solve(
            _A(), _b(), pn.iterative.Chebyshev(5, lower=0.1, upper=1.0)
        ),
        pn.iterative.DivergenceError,
        "upper=1\\) diverges.*use upper ≥ λ_max",
    ),
    "affine-indefinite": Case(
        "affine methods",
        "Gauss–Seidel on an indefinite matrix with a positive diagonal",
        lambda: pn.iterative.affine_solve(
            torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=F64), _b(2), pn.iterative.GaussSeidel(40)
        ),
        pn.NotPositiveDefiniteError,
        "diverges.*A is not positive definite",
    ),
    # --- kernels
    "kernel-lengthscale": Case(
        "kernels",
        "a negative lengthscale",
        lambda: pn.kernels.RBF(lengthscale=-1.0),
        ValueError,
        "lengthscale must be positive",
    ),
    "kernel-nu": Case(
        "kernels",
        "an unsupported Matérn ν",
        lambda: pn.kernels.Matern(nu=2.0),
        ValueError,
        "nu must be one of",
    ),
    "kernel-1d": Case(
        "kernels",
        "1-D inputs",
        lambda: pn.kernels.RBF()(torch.ones(5, dtype=F64)),
        ValueError,
        r"X1 must have shape \(n, d\)",
    ),
    "kernel-dims": Case(
        "kernels",
        "inputs with different numbers of columns",
        lambda: pn.kernels.RBF()(_X(), torch.ones(3, 3, dtype=F64)),
        ValueError,
        "X2 has 3 input dimensions",
    ),
    "kernel-ard": Case(
        "kernels",
        "inputs that do not match the ARD lengthscales",
        lambda: pn.kernels.RBF(lengthscale=torch.ones(3))(_X()),
        ValueError,
        "ARD lengthscales",
    ),
    "ski-grid-size": Case(
        "kernels",
        "a SKI grid with fewer than 4 points per dimension",
        lambda: pn.kernels.GridInterpolation(pn.kernels.RBF(), 3),
        ValueError,
        "grid_size must be at least 4",
    ),
    "ski-base": Case(
        "kernels",
        "a SKI kernel on a non-stationary base (another SKI kernel)",
        lambda: pn.kernels.GridInterpolation(
            pn.kernels.GridInterpolation(pn.kernels.RBF(), 10), 10
        ),
        TypeError,
        "stationary",
    ),
    "ski-dims": Case(
        "kernels",
        "a SKI grid in too many dimensions",
        lambda: pn.kernels.GridInterpolation(pn.kernels.RBF(), 10, [(0.0, 1.0)] * 6),
        ValueError,
        "at most 5 input dimensions",
    ),
    "ski-outside": Case(
        "kernels",
        "a test point outside a fitted SKI grid",
        lambda: (
            pn.gp.ExactGP(pn.kernels.GridInterpolation(pn.kernels.RBF(), 10, [(0.0, 1.0)] * 2), 0.1)
            .fit(torch.full((3, 2), 0.5, dtype=F64), torch.zeros(3, dtype=F64))
            .posterior(torch.full((1, 2), 3.0, dtype=F64))
        ),
        ValueError,
        "outside the grid",
    ),
    "distributed-no-group": Case(
        "kernels",
        'backend="distributed" outside a torch.distributed process group',
        lambda: pn.kernels.RBF().linop(_X(), backend="distributed"),
        RuntimeError,
        "needs an initialised default process group",
    ),
    "kernel-backend": Case(
        "kernels",
        "an unknown matrix-free backend",
        lambda: pn.kernels.RBF().linop(_X(), backend="gpu"),
        ValueError,
        "backend must be one of",
    ),
    "kernel-keops-device": Case(
        "kernels",
        "KeOps on a device it does not compute on",
        lambda: pn.kernels.RBF().linop(_X().to(lazy_device()), backend="keops"),
        ValueError,
        'backend="keops" runs on CPU and CUDA',
    ),
    "kernel-complex": Case(
        "kernels",
        "complex inputs",
        lambda: pn.kernels.RBF()(torch.ones(3, 2, dtype=torch.complex128)),
        TypeError,
        "X1 must be real",
    ),
    # --- GP models
    "exactgp-noise": Case(
        "GP models",
        "a negative noise variance",
        lambda: pn.gp.ExactGP(pn.kernels.RBF(), noise=-1.0),
        ValueError,
        "noise must be",
    ),
    "exactgp-y": Case(
        "GP models",
        "targets of the wrong length",
        lambda: pn.gp.ExactGP(pn.kernels.RBF(), noise=0.1).fit(_X(), _y(5)),
        ValueError,
        "y must have shape",
    ),
    "exactgp-nan": Case(
        "GP models",
        "NaN targets",
        lambda: pn.gp.ExactGP(pn.kernels.RBF(), noise=0.1).fit(_X(), _with_nan(_y())),
        ValueError,
        "y contains NaN",
    ),
    "exactgp-unfitted": Case(
        "GP models",
        "a posterior before `fit`",
        lambda: pn.gp.ExactGP(pn.kernels.RBF(), noise=0.1).posterior(_X()),
        RuntimeError,
        "call fit",
    ),
    "exactgp-method": Case(
        "GP models",
        "an unknown posterior method",
        lambda: (
            pn.gp.ExactGP(pn.kernels.RBF(), noise=0.1).fit(_X(), _y()).posterior(_X(), method="ski")
        ),
        ValueError,
        "method must be",
    ),
    "itergp-Xs": Case(
        "GP models",
        "test inputs with another number of columns",
        lambda: _itergp().fit(_X(), _y()).posterior(torch.ones(3, 3, dtype=F64)),
        ValueError,
        "Xs must have 2 columns",
    ),
    "gp-data-written": Case(
        "GP models",
        "the model's copy of the training data (`gp.X`) written in place",
        lambda: _written_after_fit(),
        RuntimeError,
        "modified in place since fit: call fit",
    ),
    "gp-stale-posterior": Case(
        "GP models",
        "a posterior's covariance asked for after the kernel changed",
        lambda: _stale_posterior(),
        RuntimeError,
        "changed since this posterior was computed",
    ),
    "iterncgp-likelihood": Case(
        "GP models",
        "a likelihood given as a string",
        lambda: pn.gp.IterNCGP(
            pn.kernels.RBF(), "bernoulli", pn.policies.CG(), pn.stopping.MaxIterations(3)
        ),
        TypeError,
        "likelihood must be",
    ),
    "iterncgp-predict": Case(
        "GP models",
        "an unknown prediction method",
        lambda: (
            _ncgp(pn.likelihoods.Bernoulli())
            .fit(_X(), _labels())
            .predict_proba(_X(), method="laplace")
        ),
        ValueError,
        "method must be one of",
    ),
    "qsgp-features": Case(
        "GP models",
        "`QSGP` with no features",
        lambda: pn.gp.QSGP(pn.kernels.RBF(), pn.likelihoods.Gaussian(), 0, generator=_gen()),
        ValueError,
        "num_features must be",
    ),
    "qsgp-likelihood": Case(
        "GP models",
        "`QSGP` with a likelihood its bound does not cover",
        lambda: pn.gp.QSGP(pn.kernels.RBF(), pn.likelihoods.Softmax(3), 10, generator=_gen()),
        TypeError,
        "likelihood must be one of",
    ),
    "qsgp-stale": Case(
        "GP models",
        "a `QSGP` query after the kernel changed since `fit`",
        lambda: _qsgp_after_change(),
        RuntimeError,
        "hyperparameters changed since fit",
    ),
    "qsgp-labels": Case(
        "GP models",
        "`QSGP.fit` with labels outside {0, 1} (Bernoulli)",
        lambda: pn.gp.QSGP(pn.kernels.RBF(), pn.likelihoods.Bernoulli(), 10, generator=_gen()).fit(
            _X(), 2 * _labels(), steps=1, generator=_gen()
        ),
        ValueError,
        "y",
    ),
    "qsgp-empty": Case(
        "GP models",
        "`QSGP.fit` on empty data",
        lambda: pn.gp.QSGP(pn.kernels.RBF(), pn.likelihoods.Gaussian(), 10, generator=_gen()).fit(
            _X()[:0], _y()[:0], steps=1, generator=_gen()
        ),
        ValueError,
        "X must have shape \\(n, d\\) with n ≥ 1",
    ),
    "gp-random-policy": Case(
        "GP models",
        "a random policy in `IterGP.fit` without a generator",
        lambda: pn.gp.IterGP(
            pn.kernels.RBF(), 0.1, pn.policies.Lanczos(start="random"), pn.stopping.MaxIterations(2)
        ).fit(_X(), _y()),
        ValueError,
        "fit\\(X, y, generator=",
    ),
    "qsgp-nan": Case(
        "GP models",
        "a `QSGP.fit` rate so large that training meets NaN or Inf",
        lambda: pn.gp.QSGP(pn.kernels.RBF(), pn.likelihoods.Gaussian(), 10, generator=_gen()).fit(
            _X(), _y(), steps=20, generator=_gen(), hyper_lr=1e3, freeze_hyperparameters=0
        ),
        FloatingPointError,
        "at step \\d+ \\(lr=0.1, hyper_lr=1000\\): lower hyper_lr",
    ),
    # --- hyperparameter sampling
    "sample-y-length": Case(
        "sampling",
        "`sample_hyperparameters` with `y` of the wrong length",
        lambda: _sample(_X(), _y(4)),
        ValueError,
        "y must have shape \\(10,\\)",
    ),
    "sample-y-nan": Case(
        "sampling",
        "`sample_hyperparameters` with NaN in `y`",
        lambda: _sample(_X(), _with_nan(_y())),
        ValueError,
        "y contains NaN",
    ),
    "sample-steps": Case(
        "sampling",
        "`ChainConfig` with `step_end` above `step_start`",
        lambda: _chain_config(step_start=1e-4, step_end=0.1),
        ValueError,
        "step_end must be smaller than step_start",
    ),
    "sample-probes": Case(
        "sampling",
        "`ChainConfig` with no probes",
        lambda: _chain_config(num_probes=0),
        ValueError,
        "num_probes must be at least 1",
    ),
    # --- calibration studies
    "calibration-dims": Case(
        "calibration",
        "`prior_draw_calibration` with test inputs of another dimension",
        lambda: _calibration(lambda X, y, Xs: None, Xs=_X(4)[:, :1]),
        ValueError,
        "Xs must have 2 columns like X",
    ),
    "calibration-tuple": Case(
        "calibration",
        "a posterior function that returns a tuple",
        lambda: _calibration(
            lambda X, y, Xs: (torch.zeros(4, dtype=F64), torch.ones(4, dtype=F64))
        ),
        TypeError,
        "must return an object with .mean and .var",
    ),
    "calibration-length": Case(
        "calibration",
        "a posterior of the wrong length",
        lambda: _calibration(
            lambda X, y, Xs: _Moments(torch.zeros(3, dtype=F64), torch.ones(3, dtype=F64))
        ),
        ValueError,
        "mean must have shape \\(4,\\)",
    ),
    "calibration-negative": Case(
        "calibration",
        "a posterior with negative variances",
        lambda: _calibration(
            lambda X, y, Xs: _Moments(torch.zeros(4, dtype=F64), -torch.ones(4, dtype=F64))
        ),
        ValueError,
        "var is negative at 4 of 4 test points",
    ),
    # --- likelihoods
    "bernoulli-labels": Case(
        "likelihoods",
        "Bernoulli labels outside {0, 1}",
        lambda: _ncgp(pn.likelihoods.Bernoulli()).fit(_X(), 3 * _labels()),
        ValueError,
        "binary labels",
    ),
    "poisson-counts": Case(
        "likelihoods",
        "negative Poisson counts",
        lambda: _ncgp(pn.likelihoods.Poisson()).fit(_X(), -torch.ones(10, dtype=F64)),
        ValueError,
        "non-negative integer counts",
    ),
    "softmax-labels": Case(
        "likelihoods",
        "class labels beyond the number of classes",
        lambda: _ncgp(pn.likelihoods.Softmax(3)).fit(_X(), torch.arange(10)),
        ValueError,
        "class indices",
    ),
    "softmax-classes": Case(
        "likelihoods",
        "a softmax with one class",
        lambda: pn.likelihoods.Softmax(1),
        ValueError,
        "num_classes must be",
    ),
    # --- datasets
    "uci-name": Case(
        "datasets",
        "an unknown UCI data set",
        lambda: pn.datasets.load_uci("boston"),
        ValueError,
        "unknown UCI data set",
    ),
    "uci-split": Case(
        "datasets",
        "a split outside 0..9",
        lambda: pn.datasets.load_uci("concrete", split=12),
        ValueError,
        "split must lie in 0..9",
    ),
    # --- Krylov buffers and preconditioners
    "buffer-K": Case(
        "PLS",
        "a Krylov buffer on a non-square operator",
        lambda: pn.krylov.KrylovBuffer(torch.ones(3, 4, dtype=F64)),
        ValueError,
        "K must be square",
    ),
    "pivchol-diag": Case(
        "PLS",
        "a pivoted Cholesky of a matrix with a non-positive diagonal",
        lambda: pn.preconditioners.PivotedCholesky(-_A(), 2),
        ValueError,
        "non-positive diagonal",
    ),
    # --- command line and its data files
    "cli-missing-file": Case(
        "CLI",
        "a data file that does not exist",
        _cli(*_fit_args("nope.csv")),
        CliExit,
        "exit 1: .*nope.csv",
    ),
    "cli-not-gzip": Case(
        "CLI",
        "a `.csv.gz` that is not gzip",
        _cli(*_fit_args("fake.csv.gz"), setup=lambda: Path("fake.csv.gz").write_text("1,2\n")),
        CliExit,
        "exit 1: .*fake.csv.gz is not a valid gzip file",
    ),
    "cli-distributed-launch": Case(
        "CLI",
        "`--backend distributed` without torchrun",
        _cli(
            *_fit_args("toy.csv", "--backend", "distributed"), setup=lambda: _write_csv("toy.csv")
        ),
        CliExit,
        "exit 2: .*runs under torchrun",
    ),
    "cli-inf": Case(
        "CLI",
        "a CSV with an infinite value",
        _cli(*_fit_args("inf.csv"), setup=lambda: _write_csv("inf.csv", bad="inf")),
        CliExit,
        "exit 1: .*inf.csv, line 3: non-finite value",
    ),
    "cli-text": Case(
        "CLI",
        "a CSV with a non-numeric value",
        _cli(*_fit_args("text.csv"), setup=lambda: _write_csv("text.csv", bad="abc")),
        CliExit,
        "exit 1: .*text.csv",
    ),
    "cli-solver": Case(
        "CLI",
        "an unknown solver",
        _cli(*_fit_args("toy.csv", "--solver", "lu")),
        CliExit,
        "exit 2: .*--solver",
    ),
    "cli-steps": Case(
        "CLI",
        "a non-positive number of steps",
        _cli(*_fit_args("toy.csv", "--steps", "0"), setup=_write_csv),
        CliExit,
        "exit 2: .*--steps",
    ),
    "cli-combination": Case(
        "CLI",
        "an exact estimator with an iterative solver",
        _cli(*_fit_args("toy.csv", "--estimator", "exact"), setup=_write_csv),
        CliExit,
        "exit 2: .*exact",
    ),
    "cli-dataset": Case(
        "CLI",
        "an unknown data set name",
        _cli("fit", "--dataset", "boston", "--steps", "1", "--no-progress"),
        CliExit,
        "exit 1: .*boston",
    ),
    "cli-demo-noise": Case(
        "CLI",
        "`pnsolve demo --noise 0`",
        _cli("demo", "--noise", "0"),
        CliExit,
        "exit 2: .*--noise",
    ),
    "cli-sample-steps": Case(
        "CLI",
        "`pnsolve sample` with `--step-end` above `--step-start`",
        _cli(
            "sample",
            "--data",
            "toy.csv",
            "--iterations",
            "10",
            "--out",
            "s.npz",
            "--step-start",
            "1e-4",
            "--step-end",
            "0.1",
            setup=_write_csv,
        ),
        CliExit,
        "exit 2: .*--step-end must be smaller than --step-start",
    ),
    # --- checkpoints
    "checkpoint-seed": Case(
        "checkpoints",
        "resuming a checkpoint written with another seed",
        _cli(*_fit_args("toy.csv", "--checkpoint", "run.pt", "--seed", "2"), setup=_checkpoint),
        CliExit,
        r"exit 1: .*run.pt.*seed \(checkpoint: 0, this run: 2\)",
    ),
    "checkpoint-config": Case(
        "checkpoints",
        "resuming with another learning rate",
        _cli(*_fit_args("toy.csv", "--checkpoint", "run.pt", "--lr", "0.05"), setup=_checkpoint),
        CliExit,
        r"exit 1: .*differs in: lr",
    ),
    "checkpoint-truncated": Case(
        "checkpoints",
        "a truncated or corrupted checkpoint",
        _cli(*_fit_args("toy.csv", "--checkpoint", "run.pt"), setup=_damaged_checkpoint),
        CliExit,
        "exit 1: .*run.pt.* corrupt or truncated",
    ),
    "checkpoint-foreign": Case(
        "checkpoints",
        "a file that is not a checkpoint",
        _cli(
            *_fit_args("toy.csv", "--checkpoint", "notes.txt"),
            setup=lambda: (_write_csv(), Path("notes.txt").write_text("hello\n")),
        ),
        CliExit,
        "exit 1: .*notes.txt.* not a pnsolve training checkpoint",
    ),
}


# ----------------------------------------------------------------------------- running
def _message(case: Case) -> str:
    """What the user sees: ``ExceptionType: first line of the message``."""
    try:
        case.run()
    except BaseException as err:
        if isinstance(err, CliExit):
            return str(err)
        first = str(err).splitlines()[0] if str(err) else ""
        return f"{type(err).__name__}: {first}"
    raise AssertionError("no error was raised")


def _machine_independent(message: str) -> str:
    """Drop what differs between checkouts: the folders a data set was looked for in."""
    return re.sub(r"\(looked in [^)]*\)", "(looked in the package and PNSOLVE_DATA)", message)


@contextlib.contextmanager
def _in_tmp() -> Iterator[None]:
    """Run in a fresh temporary folder (CLI cases write relative file names)."""
    old = os.getcwd()
    with tempfile.TemporaryDirectory() as d:
        os.chdir(d)
        try:
            yield
        finally:
            os.chdir(old)


@pytest.mark.parametrize("cid", sorted(CASES))
def test_each_bad_input_gives_its_documented_error(cid):
    case = CASES[cid]
    with _in_tmp(), torch.no_grad(), pytest.raises(case.error, match=case.match):
        case.run()


def test_the_catalogue_covers_every_area_with_forty_cases():
    areas = {c.area for c in CASES.values()}
    expected = {"cg", "lanczos", "PLS", "ULISSE", "kernels", "GP models", "likelihoods"}
    expected |= {"datasets", "CLI", "checkpoints"}
    assert expected <= areas, expected - areas
    assert len(CASES) >= 40


def render() -> str:
    """The Markdown page: one table row per case, messages as the library prints them."""
    lines = [
        "# Error catalogue",
        "",
        "What pnsolve says for each class of bad input. Errors name the argument;",
        "`pn.NotPositiveDefiniteError` (a `ValueError`) reports detected non-SPD operators",
        "with the iteration; other bad input raises `ValueError` or `TypeError`. On the",
        "command line every error is one line on stderr with a non-zero exit status.",
        "",
        "Every row is a test (`tests/docs/test_error_catalogue.py`, id in the last",
        "column) and this page is rendered from the messages the library actually",
        "produces.",
        "",
        "| Area | Bad input | What you see | Test id |",
        "|---|---|---|---|",
    ]
    with _in_tmp(), torch.no_grad():
        for cid, case in CASES.items():
            msg = _machine_independent(_message(case)).replace("|", "\\|").replace("`", "'")
            lines.append(f"| {case.area} | {case.bad} | `{msg}` | `{cid}` |")
    return "\n".join(lines) + "\n"


def test_docs_page_matches_the_library():
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/errors.md is out of date: run .venv/bin/python tests/docs/test_error_catalogue.py"
    )


if __name__ == "__main__":  # regenerate docs/errors.md
    PAGE.write_text(render(), encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)} ({len(CASES)} cases)", file=sys.stderr)
