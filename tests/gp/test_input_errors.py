"""Bad input to the GP layer: one convention for every model, fit, posterior and helper.

``TypeError`` for a wrong type (a non-tensor ``X``, a string where a number belongs, a
``bool`` where an int or a number belongs, an integer tensor where a floating one does),
``ValueError`` for a wrong value (shape, range, NaN, an unknown option, a device
mismatch); every message names the argument, and a shape error shows the shape it got.
The checks live in one module, :mod:`pnsolve.gp._checks` (on :mod:`pnsolve._core.validation`,
which the likelihoods share).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

import pnsolve as pn
from pnsolve.gp.training import TrainingConfig

pytestmark = pytest.mark.cpu_only(reason="argument checks: no device-specific computation")

F64 = torch.float64
NAN = float("nan")


@dataclass(frozen=True)
class Case:
    """``run()`` must raise ``error`` whose message names ``name`` (and shows ``shows``)."""

    run: Callable[[], object]
    error: type[Exception]
    name: str
    shows: str | None = None


def _data(n: int = 12, d: int = 2):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(n, d, generator=g, dtype=F64)
    y = torch.sin(4 * X[:, 0])
    return X, y, torch.rand(4, d, generator=g, dtype=F64)


X, Y, XS = _data()
LABELS = (Y > 0.5).to(F64)


def _k():
    return pn.kernels.RBF(lengthscale=0.5)


def _stop():
    return pn.stopping.MaxIterations(5)


def _exact(**kw):
    return pn.gp.ExactGP(kw.pop("kernel", _k()), kw.pop("noise", 0.1), **kw)


def _iter(**kw):
    args = {"kernel": _k(), "noise": 0.1, "policy": pn.policies.CG(), "stopping": _stop()}
    args.update(kw)
    return pn.gp.IterGP(**args)


def _affine(**kw):
    args = {"kernel": _k(), "noise": 0.1, "method": pn.iterative.GaussSeidel(2)}
    args.update(kw)
    return pn.gp.AffineGP(**args)


def _ncgp(**kw):
    args = {
        "kernel": _k(),
        "likelihood": pn.likelihoods.Bernoulli(),
        "policy": pn.policies.CG(),
        "stopping": _stop(),
    }
    args.update(kw)
    return pn.gp.IterNCGP(**args)


def _fitted(model: str):
    if model == "ncgp":
        return _ncgp().fit(X, LABELS)
    return {"exact": _exact, "iter": _iter, "affine": _affine}[model]().fit(X, Y)


def _sample_posterior(**kw):
    args = {"kernel": _k(), "X": X, "y": Y, "noise": 0.1, "num_samples": 2}
    args |= {"generator": torch.Generator().manual_seed(0), "num_features": 64}
    args.update(kw)
    return pn.gp.sample_posterior(**args)


def _standard(**kw):
    return pn.gp.StandardEstimator(**({"generator": torch.Generator()} | kw))


def _pathwise(**kw):
    return pn.gp.PathwiseEstimator(**({"generator": torch.Generator()} | kw))


def _targets(**kw):
    args = {"kernel": _k(), "X": X, "noise": 0.1, "y": Y} | kw
    return _standard(num_probes=2).targets(**args)


def _backward(solutions):
    est = _standard(num_probes=2)
    est.targets(_k(), X, 0.1, Y)
    return est.backward(_k(), X, 0.1, Y, solutions)


CONSTRUCTORS = {"exact": _exact, "iter": _iter, "affine": _affine}

CASES: dict[str, Case] = {}

# ---------------------------------------------------------------- model configuration
for model, make in CONSTRUCTORS.items():
    CASES |= {
        f"{model}-kernel-str": Case(lambda make=make: make(kernel="rbf"), TypeError, "kernel"),
        f"{model}-noise-str": Case(lambda make=make: make(noise="0.1"), TypeError, "noise"),
        f"{model}-noise-None": Case(lambda make=make: make(noise=None), TypeError, "noise"),
        f"{model}-noise-bool": Case(lambda make=make: make(noise=True), TypeError, "noise"),
        f"{model}-noise-int-tensor": Case(
            lambda make=make: make(noise=torch.tensor(1)), TypeError, "noise"
        ),
        f"{model}-noise-negative": Case(lambda make=make: make(noise=-1.0), ValueError, "noise"),
        f"{model}-noise-nan": Case(lambda make=make: make(noise=NAN), ValueError, "noise"),
        f"{model}-noise-vector": Case(
            lambda make=make: make(noise=torch.ones(2, dtype=F64)), ValueError, "noise", "(2,)"
        ),
        f"{model}-mean-str": Case(lambda make=make: make(mean="0"), TypeError, "mean"),
        f"{model}-mean-None": Case(lambda make=make: make(mean=None), TypeError, "mean"),
        f"{model}-mean-bool": Case(lambda make=make: make(mean=False), TypeError, "mean"),
        f"{model}-mean-nan": Case(lambda make=make: make(mean=NAN), ValueError, "mean"),
        f"{model}-mean-vector": Case(
            lambda make=make: make(mean=torch.zeros(3, dtype=F64)), ValueError, "mean", "(3,)"
        ),
    }
for model, make in {"iter": _iter, "affine": _affine, "ncgp": _ncgp}.items():
    CASES |= {
        f"{model}-backend-int": Case(lambda make=make: make(backend=3), TypeError, "backend"),
        f"{model}-backend-unknown": Case(
            lambda make=make: make(backend="gpu"), ValueError, "backend"
        ),
    }
CASES |= {
    "iter-policy-str": Case(lambda: _iter(policy="cg"), TypeError, "policy"),
    "iter-stopping-int": Case(lambda: _iter(stopping=50), TypeError, "stopping"),
    "affine-method-str": Case(lambda: _affine(method="gauss-seidel"), TypeError, "method"),
    "affine-kernel-ski": Case(
        lambda: _affine(kernel=pn.kernels.GridInterpolation(_k(), grid_size=8)),
        TypeError,
        "kernel",
    ),
    "ncgp-kernel-str": Case(lambda: _ncgp(kernel="rbf"), TypeError, "kernel"),
    "ncgp-likelihood-str": Case(lambda: _ncgp(likelihood="bernoulli"), TypeError, "likelihood"),
    "ncgp-max_newton_steps-float": Case(
        lambda: _ncgp(max_newton_steps=2.0), TypeError, "max_newton_steps"
    ),
    "ncgp-max_newton_steps-bool": Case(
        lambda: _ncgp(max_newton_steps=True), TypeError, "max_newton_steps"
    ),
    "ncgp-max_newton_steps-zero": Case(
        lambda: _ncgp(max_newton_steps=0), ValueError, "max_newton_steps"
    ),
    "ncgp-newton_tol-str": Case(lambda: _ncgp(newton_tol="1e-6"), TypeError, "newton_tol"),
    "ncgp-newton_tol-bool": Case(lambda: _ncgp(newton_tol=True), TypeError, "newton_tol"),
    "ncgp-newton_tol-negative": Case(lambda: _ncgp(newton_tol=-1.0), ValueError, "newton_tol"),
    "ncgp-newton_tol-nan": Case(lambda: _ncgp(newton_tol=NAN), ValueError, "newton_tol"),
    "ncgp-max_rank-float": Case(lambda: _ncgp(max_rank=4.0), TypeError, "max_rank"),
    "ncgp-max_rank-zero": Case(lambda: _ncgp(max_rank=0), ValueError, "max_rank"),
    "ncgp-recycle-str": Case(lambda: _ncgp(recycle="yes"), TypeError, "recycle"),
    "ncgp-mean-str": Case(lambda: _ncgp(mean="0"), TypeError, "mean"),
    "ncgp-mean-nan": Case(lambda: _ncgp(mean=NAN), ValueError, "mean"),
}

# ------------------------------------------------------------------------------- fit
FITS = {
    "exact": lambda X=X, y=Y, **kw: _exact().fit(X, y, **kw),
    "iter": lambda X=X, y=Y, **kw: _iter().fit(X, y, **kw),
    "affine": lambda X=X, y=Y, **kw: _affine().fit(X, y, **kw),
    "ncgp": lambda X=X, y=LABELS, **kw: _ncgp().fit(X, y, **kw),
}
for model, fit in FITS.items():
    CASES |= {
        f"{model}-fit-X-list": Case(lambda fit=fit: fit(X=X.tolist()), TypeError, "X"),
        f"{model}-fit-X-int": Case(lambda fit=fit: fit(X=(X * 10).long()), TypeError, "X"),
        f"{model}-fit-X-1d": Case(lambda fit=fit: fit(X=X[:, 0]), ValueError, "X", "(12,)"),
        f"{model}-fit-X-nan": Case(lambda fit=fit: fit(X=torch.full_like(X, NAN)), ValueError, "X"),
        f"{model}-fit-y-list": Case(lambda fit=fit: fit(y=LABELS.tolist()), TypeError, "y"),
        f"{model}-fit-y-2d": Case(
            lambda fit=fit: fit(y=LABELS[:, None]), ValueError, "y", "(12, 1)"
        ),
    }
    if model != "ncgp":  # regression targets: X's length, dtype and device
        CASES |= {
            f"{model}-fit-y-short": Case(lambda fit=fit: fit(y=Y[:5]), ValueError, "y", "(5,)"),
            f"{model}-fit-y-float32": Case(lambda fit=fit: fit(y=Y.float()), TypeError, "y"),
        }
for model in ("iter", "ncgp"):
    CASES[f"{model}-fit-generator-int"] = Case(
        lambda fit=FITS[model]: fit(generator=0), TypeError, "generator"
    )
CASES |= {
    "ncgp-fit-y-labels": Case(lambda: FITS["ncgp"](y=2 * LABELS), ValueError, "y"),
    "ncgp-fit-y-short": Case(lambda: FITS["ncgp"](y=LABELS[:5]), ValueError, "y"),
    # a device mismatch is a wrong value (ValueError), as everywhere in pnsolve
    "exact-fit-y-device": Case(lambda: FITS["exact"](y=Y.to("meta")), ValueError, "y"),
    "exact-posterior-Xs-device": Case(lambda: _query("exact", Xs=XS.to("meta")), ValueError, "Xs"),
    "ncgp-fit-y-bool-softmax": Case(
        lambda: _ncgp(likelihood=pn.likelihoods.Softmax(2)).fit(X, LABELS.bool()),
        TypeError,
        "y",
    ),
}


# ------------------------------------------------------------------------- posteriors
def _query(model: str, **kw):
    return _fitted(model).posterior(kw.pop("Xs", XS), **kw)


for model in ("exact", "iter", "affine", "ncgp"):
    CASES |= {
        f"{model}-posterior-Xs-list": Case(
            lambda m=model: _query(m, Xs=XS.tolist()), TypeError, "Xs"
        ),
        f"{model}-posterior-Xs-width": Case(
            lambda m=model: _query(m, Xs=XS[:, :1]), ValueError, "Xs"
        ),
        f"{model}-posterior-Xs-3d": Case(
            lambda m=model: _query(m, Xs=XS[None]), ValueError, "Xs", "(1, 4, 2)"
        ),
        f"{model}-posterior-Xs-float32": Case(
            lambda m=model: _query(m, Xs=XS.float()), TypeError, "Xs"
        ),
        f"{model}-sample-s-float": Case(lambda m=model: _query(m).sample(2.0), TypeError, r"\bs\b"),
        f"{model}-sample-s-zero": Case(lambda m=model: _query(m).sample(0), ValueError, r"\bs\b"),
        f"{model}-sample-generator-int": Case(
            lambda m=model: _query(m).sample(2, generator=1), TypeError, "generator"
        ),
    }
for model in ("exact", "iter"):
    CASES |= {
        f"{model}-posterior-method-unknown": Case(
            lambda m=model: _query(m, method="cholesky!"), ValueError, "method"
        ),
        f"{model}-posterior-method-int": Case(
            lambda m=model: _query(m, method=1), TypeError, "method"
        ),
        f"{model}-love-rank-float": Case(
            lambda m=model: _query(m, method="love", rank=5.0), TypeError, "rank"
        ),
        f"{model}-love-rank-zero": Case(
            lambda m=model: _query(m, method="love", rank=0), ValueError, "rank"
        ),
        f"{model}-love-cache-str": Case(
            lambda m=model: _query(m, method="love", cache="cache"), TypeError, "cache"
        ),
        f"{model}-love-probe-list": Case(
            lambda m=model: _query(m, method="love", probe=Y.tolist()), TypeError, "probe"
        ),
        f"{model}-love-probe-short": Case(
            lambda m=model: _query(m, method="love", probe=Y[:3]), ValueError, "probe", "(3,)"
        ),
        f"{model}-build_love_cache-calibrated-int": Case(
            lambda m=model: _fitted(m).build_love_cache(rank=3, calibrated=1),
            TypeError,
            "calibrated",
        ),
    }
CASES |= {
    "iter-comp_var_scale-list": Case(
        lambda: _query("iter", comp_var_scale=[2.0]), TypeError, "comp_var_scale"
    ),
    "iter-comp_var_scale-bool": Case(
        lambda: _query("iter", comp_var_scale=True), TypeError, "comp_var_scale"
    ),
    "iter-comp_var_scale-negative": Case(
        lambda: _query("iter", comp_var_scale=-2.0), ValueError, "comp_var_scale"
    ),
    "iter-comp_var_scale-unknown": Case(
        lambda: _query("iter", comp_var_scale="calibrate"), ValueError, "comp_var_scale"
    ),
    "ncgp-predict_proba-method": Case(
        lambda: _fitted("ncgp").predict_proba(XS, method="exact"), ValueError, "method"
    ),
    "ncgp-predict_proba-num_samples-float": Case(
        lambda: _fitted("ncgp").predict_proba(
            XS, method="mc", num_samples=10.0, generator=torch.Generator()
        ),
        TypeError,
        "num_samples",
    ),
    "ncgp-predict_proba-generator-missing": Case(
        lambda: _fitted("ncgp").predict_proba(XS, method="mc"), TypeError, "generator"
    ),
    "exact-lml-noise-str": Case(
        lambda: _fitted("exact").log_marginal_likelihood(X, Y, noise="0.1"), TypeError, "noise"
    ),
}

# ----------------------------------------------------- pathwise sampling, exact fitting
CASES |= {
    "pathwise-kernel-ski": Case(
        lambda: _sample_posterior(kernel=pn.kernels.GridInterpolation(_k(), grid_size=8)),
        TypeError,
        "kernel",
    ),
    "pathwise-num_samples-float": Case(
        lambda: _sample_posterior(num_samples=2.0), TypeError, "num_samples"
    ),
    "pathwise-num_samples-zero": Case(
        lambda: _sample_posterior(num_samples=0), ValueError, "num_samples"
    ),
    "pathwise-num_features-bool": Case(
        lambda: _sample_posterior(num_features=True), TypeError, "num_features"
    ),
    "pathwise-generator-None": Case(
        lambda: _sample_posterior(generator=None), TypeError, "generator"
    ),
    "pathwise-noise-str": Case(lambda: _sample_posterior(noise="0.1"), TypeError, "noise"),
    "pathwise-noise-zero": Case(lambda: _sample_posterior(noise=0.0), ValueError, "noise"),
    "pathwise-mean-str": Case(lambda: _sample_posterior(mean="0"), TypeError, "mean"),
    "pathwise-mean-vector": Case(
        lambda: _sample_posterior(mean=torch.zeros(2, dtype=F64)), ValueError, "mean", "(2,)"
    ),
    "pathwise-solver-int": Case(lambda: _sample_posterior(solver=3), TypeError, "solver"),
    "pathwise-y-short": Case(lambda: _sample_posterior(y=Y[:2]), ValueError, "y", "(2,)"),
    "exact_fit-kernel-str": Case(
        lambda: pn.gp.fit_exact_hyperparameters("rbf", X, Y, steps=1), TypeError, "kernel"
    ),
    "exact_fit-steps-float": Case(
        lambda: pn.gp.fit_exact_hyperparameters(_k(), X, Y, steps=1.0), TypeError, "steps"
    ),
    "exact_fit-steps-zero": Case(
        lambda: pn.gp.fit_exact_hyperparameters(_k(), X, Y, steps=0), ValueError, "steps"
    ),
    "exact_fit-lr-str": Case(
        lambda: pn.gp.fit_exact_hyperparameters(_k(), X, Y, steps=1, lr="0.1"), TypeError, "lr"
    ),
    "exact_fit-lr-negative": Case(
        lambda: pn.gp.fit_exact_hyperparameters(_k(), X, Y, steps=1, lr=-0.1), ValueError, "lr"
    ),
    "exact_fit-min_noise-negative": Case(
        lambda: pn.gp.fit_exact_hyperparameters(_k(), X, Y, steps=1, min_noise=-1.0),
        ValueError,
        "min_noise",
    ),
}

# ------------------------------------------------------------------------- estimators
CASES |= {
    "standard-num_probes-float": Case(lambda: _standard(num_probes=4.0), TypeError, "num_probes"),
    "standard-num_probes-zero": Case(lambda: _standard(num_probes=0), ValueError, "num_probes"),
    "standard-distribution-int": Case(lambda: _standard(distribution=1), TypeError, "distribution"),
    "standard-distribution-unknown": Case(
        lambda: _standard(distribution="uniform"), ValueError, "distribution"
    ),
    "standard-generator-None": Case(lambda: _standard(generator=None), TypeError, "generator"),
    "standard-chunk_rows-float": Case(lambda: _standard(chunk_rows=8.0), TypeError, "chunk_rows"),
    "standard-distributed-int": Case(lambda: _standard(distributed=1), TypeError, "distributed"),
    "pathwise-est-num_features-float": Case(
        lambda: _pathwise(num_features=10.0), TypeError, "num_features"
    ),
    "pathwise-est-num_features-zero": Case(
        lambda: _pathwise(num_features=0), ValueError, "num_features"
    ),
    "pathwise-est-distributed-str": Case(
        lambda: _pathwise(distributed="no"), TypeError, "distributed"
    ),
    "targets-kernel-str": Case(lambda: _targets(kernel="rbf"), TypeError, "kernel"),
    "targets-noise-str": Case(lambda: _targets(noise="0.1"), TypeError, "noise"),
    "targets-noise-negative": Case(lambda: _targets(noise=-0.1), ValueError, "noise"),
    "targets-X-list": Case(lambda: _targets(X=X.tolist()), TypeError, "X"),
    "targets-y-short": Case(lambda: _targets(y=Y[:3]), ValueError, "y", "(3,)"),
    "backward-solutions-list": Case(lambda: _backward([[0.0]]), TypeError, "solutions"),
    "backward-solutions-shape": Case(
        lambda: _backward(torch.zeros(12, 2, dtype=F64)), ValueError, "solutions", "(12, 2)"
    ),
    "backward-solutions-device": Case(
        lambda: _backward(torch.zeros(12, 3, dtype=F64, device="meta")), ValueError, "solutions"
    ),
    "backward-solutions-float32": Case(
        lambda: _backward(torch.zeros(12, 3)), TypeError, "solutions"
    ),
}

# ---------------------------------------------------------------- training configuration
CASES |= {
    f"config-{name}-{label}": Case(lambda kw={name: value}: TrainingConfig(**kw), error, name)
    for name, label, value, error in [
        ("solver", "int", 1, TypeError),
        ("solver", "unknown", "lbfgs", ValueError),
        ("estimator", "unknown", "hutch", ValueError),
        ("warm_start", "int", 1, TypeError),
        ("steps", "float", 10.0, TypeError),
        ("steps", "bool", True, TypeError),
        ("steps", "zero", 0, ValueError),
        ("num_probes", "zero", 0, ValueError),
        ("preconditioner_rank", "float", 10.0, TypeError),
        ("preconditioner_rank", "negative", -1, ValueError),
        ("lr", "str", "0.1", TypeError),
        ("lr", "bool", True, TypeError),
        ("lr", "negative", -0.1, ValueError),
        ("lr", "inf", float("inf"), ValueError),
        ("epochs_budget", "str", "10", TypeError),
        ("momentum", "str", "0.9", TypeError),
        ("momentum", "one", 1.0, ValueError),
        ("backend", "int", 0, TypeError),
        ("backend", "unknown", "gpu", ValueError),
        ("init", "unknown", "random", ValueError),
    ]
}

# ------------------------------------------------------------------- likelihood targets
_F = torch.zeros(6, dtype=F64)
CASES |= {
    "bernoulli-y-list": Case(
        lambda: pn.likelihoods.Bernoulli().log_likelihood(_F, [0] * 6), TypeError, "y"
    ),
    "bernoulli-y-2d": Case(
        lambda: pn.likelihoods.Bernoulli().log_likelihood(_F, torch.zeros(6, 1)),
        ValueError,
        "y",
        "(6, 1)",
    ),
    "bernoulli-y-pm1": Case(
        lambda: pn.likelihoods.Bernoulli().log_likelihood(_F, -torch.ones(6)), ValueError, "y"
    ),
    "bernoulli-link-int": Case(lambda: pn.likelihoods.Bernoulli(link=0), TypeError, "link"),
    "bernoulli-link-unknown": Case(
        lambda: pn.likelihoods.Bernoulli(link="cauchit"), ValueError, "link"
    ),
    "poisson-y-negative": Case(
        lambda: pn.likelihoods.Poisson().log_likelihood(_F, -torch.ones(6)), ValueError, "y"
    ),
    "poisson-y-bool": Case(
        lambda: pn.likelihoods.Poisson().log_likelihood(_F, torch.ones(6, dtype=torch.bool)),
        TypeError,
        "y",
    ),
    "softmax-num_classes-float": Case(
        lambda: pn.likelihoods.Softmax(3.0), TypeError, "num_classes"
    ),
    "softmax-num_classes-bool": Case(
        lambda: pn.likelihoods.Softmax(True), TypeError, "num_classes"
    ),
    "softmax-num_classes-one": Case(lambda: pn.likelihoods.Softmax(1), ValueError, "num_classes"),
    "softmax-y-range": Case(
        lambda: pn.likelihoods.Softmax(3).log_likelihood(
            torch.zeros(6, 3, dtype=F64), torch.full((6,), 3)
        ),
        ValueError,
        "y",
    ),
    "gaussian-y-short": Case(
        lambda: pn.likelihoods.Gaussian().log_likelihood(_F, torch.zeros(4, dtype=F64)),
        ValueError,
        "y",
    ),
    "gaussian-noise-str": Case(lambda: pn.likelihoods.Gaussian("1"), TypeError, "noise"),
    "gaussian-noise-int-tensor": Case(
        lambda: pn.likelihoods.Gaussian(torch.tensor(1)), TypeError, "noise"
    ),
    "gaussian-noise-zero": Case(lambda: pn.likelihoods.Gaussian(0.0), ValueError, "noise"),
    "predict-num_samples-float": Case(
        lambda: pn.likelihoods.Bernoulli().predict(
            _F, _F + 1, method="mc", num_samples=10.0, generator=torch.Generator()
        ),
        TypeError,
        "num_samples",
    ),
    "predict-generator-missing": Case(
        lambda: pn.likelihoods.Bernoulli().predict(_F, _F + 1, method="mc"),
        TypeError,
        "generator",
    ),
    "predict-var-float32": Case(
        lambda: pn.likelihoods.Bernoulli().predict(_F, torch.ones(6)), TypeError, "var"
    ),
    "predict-method-unknown": Case(
        lambda: pn.likelihoods.Bernoulli().predict(_F, _F + 1, method="exact"),
        ValueError,
        "method",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_raises_the_documented_type_and_names_the_argument(case: str) -> None:
    c = CASES[case]
    with torch.no_grad(), pytest.raises((TypeError, ValueError)) as info:
        c.run()
    error = info.value
    assert isinstance(error, c.error), f"{type(error).__name__} instead of {c.error.__name__}"
    message = str(error)
    pattern = c.name if c.name.startswith("\\") else rf"\b{re.escape(c.name)}\b"
    assert re.search(pattern, message), f"{message!r} does not name {c.name}"
    if c.shows is not None:
        assert c.shows in message, f"{message!r} does not show the shape {c.shows}"
