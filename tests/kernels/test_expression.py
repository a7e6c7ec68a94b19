"""``pn.kernels.from_expression``: the grammar of the CLI's ``--kernel``."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.testing import exact_tol

F64 = torch.float64
K = pn.kernels


def _same(a: pn.kernels.Kernel, b: pn.kernels.Kernel, d: int = 3) -> None:
    X = torch.rand(15, d, dtype=F64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        A, B = a(X), b(X)
    assert float((A - B).abs().max()) <= exact_tol(F64, 15) * float(B.abs().max())


@pytest.mark.parametrize(
    ("text", "reference"),
    [
        ("rbf", lambda: K.RBF(ard_dims=3)),
        ("rbf + periodic * linear", lambda: K.RBF(ard_dims=3) + K.Periodic() * K.Linear()),
        (
            "2.5 * matern52(lengthscale=0.7) + white(noise=0.1)",
            lambda: 2.5 * K.Matern(nu=2.5, lengthscale=0.7, ard_dims=3) + K.White(0.1),
        ),
        (
            "(rbf[0] + constant(value=2)) * cosine(period=1.5)[1, 2]",
            lambda: (
                (K.RBF(ard_dims=1, active_dims=[0]) + K.Constant(2.0))
                * K.Cosine(1.5, active_dims=[1, 2])
            ),
        ),
        ("polynomial(degree=3, offset=0.5)", lambda: K.Polynomial(3, 0.5)),
        (
            "MATERN(nu=0.5) * rq(alpha=2)",
            lambda: K.Matern(nu=0.5, ard_dims=3) * K.RationalQuadratic(1.0, 2.0, ard_dims=3),
        ),
        ("sm(num_mixtures=2)[2]", lambda: K.SpectralMixture(2, active_dims=[2])),
    ],
)
def test_expressions_build_the_kernels_they_name(text, reference):
    k = pn.kernels.from_expression(text, input_dim=3)
    _same(k, reference())


def test_stationary_families_get_one_lengthscale_per_column_they_read():
    k = pn.kernels.from_expression("rbf + matern[0, 2]", input_dim=4)
    assert k.parts[0].lengthscale.shape == (4,)
    assert k.parts[1].lengthscale.shape == (2,)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("rbf +", "expected a kernel"),
        ("gauss", "unknown kernel 'gauss'"),
        ("rbf(width=1)", "width"),
        ("rbf[a]", "expected 'num'"),
        ("2 * 3", "a number, not a kernel"),
        ("rbf + 2", "only kernels can be added"),
        ("periodic(period=0)", "period"),
        ("polynomial(degree=1.5)", "degree"),
        ("rbf)", "unexpected"),
        ("", "non-empty"),
    ],
)
def test_bad_expressions_are_refused_naming_what_and_where(text, match):
    with pytest.raises(ValueError, match=match):
        pn.kernels.from_expression(text, input_dim=2)


def test_input_dim_is_checked():
    with pytest.raises(ValueError, match="input_dim"):
        pn.kernels.from_expression("rbf", input_dim=0)
