"""Predictions from Gaussian latent marginals: closed forms, MacKay's approximation, MC.

- Monte Carlo against exact closed forms (Poisson rate ``exp(m + v/2)``, probit link
  ``Φ(m/√(1+v))``) is a statistical claim: z-scores of the MC mean at a family-wise
  false-alarm level of ``1e-3`` (Bonferroni over the test points), fixed seeds. The
  standard deviation of one draw is exact for the Poisson rate (log-normal) and, for
  the Bernoulli links, bounded by the Gaussian Poincaré inequality
  ``Var λ(f) ≤ v · sup λ'² `` (``sup Φ' = 1/√(2π)``, ``sup σ' = 1/4``).
- MacKay's approximation for the logit link is *not* exact: it is compared with MC
  within its documented approximation error (``0.005`` for ``v ≤ 1``) plus the MC bound.
"""

from __future__ import annotations

import math

import pytest
import torch

from pnsolve.likelihoods import Bernoulli, Gaussian, Poisson, Softmax, base
from pnsolve.testing import exact_tol, statistical_threshold

F64 = torch.float64
FALSE_ALARM = 1e-3
T = 25
S = 20_000
#: max |MacKay − exact| for v ≤ 1, from Gauss–Hermite quadrature (see Bernoulli docs).
MACKAY_TOL_V1 = 0.005


def _marginals(seed: int, v_max: float, dtype=F64, shape=(T,)):
    g = torch.Generator().manual_seed(seed)
    m = torch.randn(shape, generator=g, dtype=dtype)
    v = v_max * torch.rand(shape, generator=g, dtype=dtype)
    return m, v


def _z_bound(sd: torch.Tensor, t: int) -> torch.Tensor:
    return statistical_threshold(FALSE_ALARM / t) * sd / math.sqrt(S)


@pytest.mark.statistical
def test_poisson_mc_matches_lognormal_mean():
    m, v = _marginals(0, 0.5)
    lik = Poisson()
    exact = lik.predict(m, v, method="closed_form")
    assert torch.equal(exact, torch.exp(m + v / 2))
    assert torch.equal(lik.predict(m, v), exact)  # "probit" is the default alias
    mc = lik.predict(m, v, method="mc", num_samples=S, generator=torch.Generator().manual_seed(1))
    sd = torch.sqrt(torch.expm1(v) * torch.exp(2 * m + v))
    assert bool(((mc - exact).abs() <= _z_bound(sd, T)).all())


@pytest.mark.statistical
def test_probit_link_mc_matches_exact_probability():
    m, v = _marginals(2, 2.0)
    lik = Bernoulli("probit")
    exact = torch.special.ndtr(m / torch.sqrt(1 + v))
    assert torch.equal(lik.predict(m, v), exact)
    mc = lik.predict(m, v, method="mc", num_samples=S, generator=torch.Generator().manual_seed(3))
    sd = torch.sqrt(v / (2 * math.pi))
    assert bool(((mc - exact).abs() <= _z_bound(sd, T)).all())


@pytest.mark.statistical
def test_mackay_logit_is_close_to_mc():
    m, v = _marginals(4, 1.0)
    lik = Bernoulli("logit")
    mackay = lik.predict(m, v, method="probit")
    mc = lik.predict(m, v, method="mc", num_samples=S, generator=torch.Generator().manual_seed(5))
    bound = MACKAY_TOL_V1 + _z_bound(torch.sqrt(v) / 4, T)
    assert bool(((mackay - mc).abs() <= bound).all())


def test_zero_variance_predicts_the_response_exactly():
    m = torch.randn(T, generator=torch.Generator().manual_seed(6), dtype=F64)
    z = torch.zeros_like(m)
    g = torch.Generator().manual_seed(0)
    cases = [
        (Gaussian(0.1), m),
        (Bernoulli("logit"), torch.sigmoid(m)),
        (Bernoulli("probit"), torch.special.ndtr(m)),
        (Poisson(), torch.exp(m)),
    ]
    for lik, expected in cases:
        for method in ("probit", "mc"):
            out = lik.predict(m, z, method=method, num_samples=3, generator=g)
            assert float((out - expected).abs().max()) <= exact_tol(F64) * float(
                expected.abs().max()
            )
    M = m.reshape(5, 5)
    sm = Softmax(5)
    for method in ("probit", "mc"):
        out = sm.predict(M, torch.zeros_like(M), method=method, num_samples=3, generator=g)
        assert float((out - torch.softmax(M, 1)).abs().max()) <= exact_tol(F64)


@pytest.mark.parametrize("dtype", [F64, torch.float32])
def test_softmax_predictions_are_distributions(dtype):
    m, v = _marginals(7, 1.0, dtype=dtype, shape=(T, 3))
    lik = Softmax(3)
    g = torch.Generator().manual_seed(8)
    for method in ("probit", "mc"):
        p = lik.predict(m, v, method=method, num_samples=500, generator=g)
        assert p.shape == (T, 3) and p.dtype == dtype
        assert bool((p >= 0).all())
        assert float((p.sum(1) - 1).abs().max()) <= exact_tol(dtype, 3)


@pytest.mark.parametrize("dtype", [F64, torch.float32])
@pytest.mark.parametrize(
    "lik", [Gaussian(0.5), Bernoulli(), Bernoulli("probit"), Poisson()], ids=repr
)
def test_dtype_follows_input_and_mc_is_reproducible(lik, dtype):
    m, v = _marginals(9, 1.0, dtype=dtype)
    for method in ("probit", "mc"):
        a, b = (
            lik.predict(
                m, v, method=method, num_samples=50, generator=torch.Generator().manual_seed(0)
            )
            for _ in range(2)
        )
        assert a.shape == (T,) and a.dtype == dtype and torch.equal(a, b)
        if isinstance(lik, Gaussian) and method == "probit":
            assert torch.equal(a, m)  # the predictive mean of y is the latent mean
        else:
            assert bool((a >= 0).all()) or isinstance(lik, Gaussian)


def test_mc_draws_in_chunks_from_one_stream(monkeypatch):
    # a chunk of 8 elements and t = 4 points: 5 draws come as chunks of 2, 2 and 1.
    monkeypatch.setattr(base, "_MC_CHUNK", 8)
    t = 4
    g = torch.Generator().manual_seed(11)
    m = torch.randn(t, generator=g, dtype=F64)
    v = torch.rand(t, generator=g, dtype=F64)
    out = Poisson().predict(m, v, method="mc", num_samples=5, generator=g.manual_seed(0))
    g.manual_seed(0)
    eps = torch.cat([torch.randn((k, t), generator=g, dtype=F64) for k in (2, 2, 1)])
    ref = torch.exp(m + v.sqrt() * eps).sum(0) / 5
    assert float((out - ref).abs().max()) <= exact_tol(F64, 5) * float(ref.abs().max())


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        ({"method": "closed_form"}, ValueError, "method"),
        ({"method": "mc"}, TypeError, "generator"),  # required: None is a wrong type
        ({"method": "mc", "generator": 0}, TypeError, "generator"),
        ({"method": "mc", "num_samples": 0, "generator": torch.Generator()}, ValueError, "num_"),
    ],
)
def test_predict_bad_method_arguments(kwargs, exc, match):
    m, v = _marginals(0, 1.0)
    with pytest.raises(exc, match=match):
        Bernoulli().predict(m, v, **kwargs)


def test_predict_bad_marginals():
    m, v = _marginals(0, 1.0)
    lik = Bernoulli()
    with pytest.raises(ValueError, match="var"):
        lik.predict(m, -v - 1)
    with pytest.raises(ValueError, match="var"):
        lik.predict(m, v[:-1])
    with pytest.raises(TypeError, match="var"):
        lik.predict(m, v.float())
    with pytest.raises(ValueError, match="mean"):
        lik.predict(m.reshape(5, 5), v.reshape(5, 5))
    with pytest.raises(ValueError, match="mean"):
        Softmax(3).predict(m, v)
    with pytest.raises(ValueError, match="mean contains NaN"):
        lik.predict(torch.full_like(m, math.nan), v)
    with pytest.raises(TypeError, match="mean"):
        lik.predict(m.tolist(), v)
