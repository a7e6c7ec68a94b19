"""Synthetic generators: reproducibility, shapes, dtypes, value ranges, generator checks."""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.datasets import gaussian_mixture_classes, gp_draws, poisson_counts


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize(
    "make",
    [
        lambda g: gp_draws(30, 2, generator=g),
        lambda g: poisson_counts(50, generator=g),
        lambda g: gaussian_mixture_classes(20, n_classes=3, generator=g),
    ],
)
def test_same_seed_same_draw_other_seed_differs(make):
    a, b, c = make(gen(1)), make(gen(1)), make(gen(2))
    fields = [f for f in vars(a) if isinstance(getattr(a, f), torch.Tensor)]
    assert all(torch.equal(getattr(a, f), getattr(b, f)) for f in fields)
    assert any(not torch.equal(getattr(a, f), getattr(c, f)) for f in fields)


@pytest.mark.parametrize("bad", [None, 0, "seed"])
def test_generator_is_required(bad):
    with pytest.raises(TypeError, match="generator"):
        gp_draws(5, generator=bad)
    with pytest.raises(TypeError, match="generator"):
        poisson_counts(5, generator=bad)
    with pytest.raises(TypeError, match="generator"):
        gaussian_mixture_classes(5, generator=bad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gp_draws_shapes_and_dtype(dtype):
    s = gp_draws(40, 3, noise=0.0, generator=gen(), dtype=dtype, device="cpu")
    assert s.X.shape == (40, 3) and s.y.shape == (40,) and s.f.shape == (40,)
    assert all(t.dtype == dtype for t in (s.X, s.y, s.f))
    assert float(s.X.min()) >= 0 and float(s.X.max()) <= 1
    assert torch.equal(s.y, s.f)  # zero noise


def test_gp_draws_with_custom_kernel_and_errors():
    def linear(X1, X2):
        return X1 @ X2.mT

    s = gp_draws(10, 2, kernel=linear, noise=1e-4, generator=gen())
    # a linear-kernel draw is a linear function of X: f lies in the column span of X
    coef = torch.linalg.lstsq(s.X, s.f[:, None]).solution
    assert float((s.X @ coef - s.f[:, None]).abs().max()) < 1e-3 * float(s.f.abs().max())
    with pytest.raises(ValueError, match="shape"):
        gp_draws(10, 2, kernel=lambda a, b: a, generator=gen())
    with pytest.raises(ValueError, match="noise"):
        gp_draws(10, noise=-1.0, generator=gen())
    with pytest.raises(ValueError, match="n must"):
        gp_draws(0, generator=gen())
    with pytest.raises(TypeError, match="dtype"):
        gp_draws(3, generator=gen(), dtype=torch.int32)


def test_poisson_counts_follow_the_paper_setup():
    s = poisson_counts(200, generator=gen(), dtype=torch.float32)
    assert s.X.shape == (200, 1) and s.y.shape == s.f.shape == s.rate.shape == (200,)
    assert s.y.dtype == torch.float32
    torch.testing.assert_close(s.X[:, 0], torch.linspace(0, 1, 200))  # linearly spaced inputs
    assert bool((s.y >= 0).all()) and torch.equal(s.y, s.y.round())  # counts
    torch.testing.assert_close(s.rate, s.f.exp())
    # log-rate prior variance 5 (outputscale): the sample spread is of that order
    assert 0.2 < float(s.f.var()) < 25.0


def test_poisson_count_generator_redraws_counts_with_fixed_rates():
    a = poisson_counts(100, generator=gen(3), count_generator=gen(10))
    b = poisson_counts(100, generator=gen(3), count_generator=gen(11))
    assert torch.equal(a.f, b.f) and not torch.equal(a.y, b.y)


def test_gaussian_mixture_classes_shapes_labels_and_parameters():
    m = gaussian_mixture_classes(
        25, n_classes=4, d=3, n_test_per_class=5, generator=gen(), dtype=torch.float32
    )
    assert m.X_train.shape == (100, 3) and m.y_train.shape == (100,)
    assert m.X_test.shape == (20, 3) and m.y_test.shape == (20,)
    assert m.y_train.dtype == torch.int64 and m.X_train.dtype == torch.float32
    assert m.n_classes == 4
    assert torch.equal(torch.bincount(m.y_train, minlength=4), torch.full((4,), 25))
    assert torch.equal(torch.bincount(m.y_test, minlength=4), torch.full((4,), 5))
    assert bool(((m.means >= 0) & (m.means <= 1)).all())
    eig = torch.linalg.eigvalsh(m.covariances.double())
    assert bool((eig >= 1e-3 * 0.999).all() and (eig <= 1e-2 * 1.001).all())
    # each class's sample mean sits near its mixture mean (std ≤ 0.1, 25 points)
    for c in range(4):
        centre = m.X_train[m.y_train == c].mean(0)
        assert float((centre - m.means[c]).abs().max()) < 0.1


def test_mixture_sample_generator_keeps_the_gaussians():
    a = gaussian_mixture_classes(10, n_classes=3, generator=gen(5), sample_generator=gen(1))
    b = gaussian_mixture_classes(10, n_classes=3, generator=gen(5), sample_generator=gen(2))
    assert torch.equal(a.means, b.means) and torch.equal(a.covariances, b.covariances)
    assert not torch.equal(a.X_train, b.X_train)


def test_mixture_argument_errors():
    with pytest.raises(ValueError, match="eigenvalue_range"):
        gaussian_mixture_classes(5, generator=gen(), eigenvalue_range=(0.0, 1.0))
    with pytest.raises(ValueError, match="n_classes"):
        gaussian_mixture_classes(5, generator=gen(), n_classes=0)
    with pytest.raises(TypeError, match="sample_generator"):
        gaussian_mixture_classes(5, generator=gen(), sample_generator=1)


def test_top_level_namespace():
    assert pn.datasets.gp_draws is gp_draws and pn.datasets.Dataset is not None
