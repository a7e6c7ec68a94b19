"""Error catalogue cases: GP models, sampling, calibration, likelihoods, datasets, buffers."""

from __future__ import annotations

import torch
from error_catalogue_inputs import (
    _A,
    _X,
    F64,
    Case,
    _calibration,
    _chain_config,
    _gen,
    _itergp,
    _labels,
    _Moments,
    _ncgp,
    _qsgp_after_change,
    _sample,
    _stale_posterior,
    _with_nan,
    _written_after_fit,
    _y,
)

import pnsolve as pn

MODEL_CASES: dict[str, Case] = {
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
    "qsgp-warm-start": Case(
        "GP models",
        "a `QSGP.fit` warm start with a non-Gaussian likelihood",
        lambda: pn.gp.QSGP(pn.kernels.RBF(), pn.likelihoods.Bernoulli(), 10, generator=_gen()).fit(
            _X(), _labels(), steps=1, generator=_gen(), warm_start=5
        ),
        ValueError,
        "warm_start=5 needs a Gaussian likelihood",
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
        "at step \\d+ \\(lr=0.01, hyper_lr=1000\\): lower hyper_lr",
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
        "Xs must have 2 columns like the training inputs",
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
}
