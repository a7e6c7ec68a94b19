"""Gaussian-mixture multi-class data (Tatzel et al. 2024, IterNCGP, §5.2 and App. C.3)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._core.validation import check_positive_int
from .dataset import check_float_dtype
from .sampling import (
    optional_generator,
    output_cast,
    output_device,
    require_generator,
    standard_normal,
    uniform,
)

__all__ = ["GaussianMixtureClasses", "gaussian_mixture_classes"]


@dataclass(frozen=True, eq=False)
class GaussianMixtureClasses:
    """Class-labelled samples of a Gaussian mixture, with its parameters.

    Attributes
    ----------
    X_train, y_train
        Inputs ``(C · n_per_class, d)`` and labels ``(C · n_per_class,)`` (int64 in
        ``0..C−1``), rows in random order.
    X_test, y_test
        Inputs ``(C · n_test_per_class, d)`` and labels, rows in random order.
    means
        Class means of shape ``(C, d)``.
    covariances
        Class covariances of shape ``(C, d, d)``, SPD.
    """

    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor
    means: torch.Tensor
    covariances: torch.Tensor

    @property
    def n_classes(self) -> int:
        """Number of classes ``C``."""
        return int(self.means.shape[0])


def gaussian_mixture_classes(
    n_per_class: int = 1000,
    *,
    generator: torch.Generator,
    sample_generator: torch.Generator | None = None,
    n_classes: int = 10,
    d: int = 3,
    n_test_per_class: int = 100,
    mean_range: tuple[float, float] = (0.0, 1.0),
    eigenvalue_range: tuple[float, float] = (1e-3, 1e-2),
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> GaussianMixtureClasses:
    """Multi-class data from one Gaussian per class, as in the paper's App. C.3.

    For each class ``c``:

    1. a mean ``μ_c`` uniform in ``mean_range^d``;
    2. a random orthonormal basis: a ``d × d`` matrix ``M`` with entries uniform in
       ``[−1, 1]`` and the eigenvectors ``Q_c`` of the symmetric ``M + Mᵀ``;
    3. ``d`` eigenvalues ``λ_c`` uniform in ``eigenvalue_range`` and the covariance
       ``Σ_c = Q_c diag(λ_c) Q_cᵀ``;
    4. ``n_per_class`` training and ``n_test_per_class`` test points from
       ``N(μ_c, Σ_c)``.

    The paper uses 3-d inputs and ``10^5`` training points per class (``10^6`` in
    all, too many to form the kernel matrix) and keeps the Gaussians fixed while
    re-sampling the points for each run: pass a separate ``sample_generator`` to do
    the same. Some numeric ranges are not legible in our text copy of the paper;
    ``mean_range = (0, 1)`` and ``eigenvalue_range = (1e-3, 1e-2)`` are our defaults,
    chosen to give overlapping but distinguishable classes at the paper's Matérn
    lengthscale 0.05.

    Parameters
    ----------
    n_per_class, n_test_per_class
        Training and test points per class (≥ 1).
    generator
        Required ``torch.Generator`` for the mixture parameters (and the points when
        ``sample_generator`` is None).
    sample_generator
        Optional separate generator for the points and their order.
    n_classes, d
        Number of classes ``C`` and input dimension.
    mean_range, eigenvalue_range
        ``(low, high)`` ranges of the uniform means and covariance eigenvalues
        (eigenvalues must be positive).
    dtype, device
        Dtype and device of inputs and parameters; labels are int64.

    Returns
    -------
    GaussianMixtureClasses
    """
    generator = require_generator(generator)
    sampler = optional_generator(sample_generator, "sample_generator", default=generator)
    dtype = check_float_dtype(dtype)
    for value, name in (
        (n_per_class, "n_per_class"),
        (n_test_per_class, "n_test_per_class"),
        (n_classes, "n_classes"),
        (d, "d"),
    ):
        check_positive_int(value, name)
    lo_m, hi_m = mean_range
    lo_e, hi_e = eigenvalue_range
    if not hi_m > lo_m:
        raise ValueError(f"mean_range must be (low, high) with low < high, got {mean_range}")
    if not (0 < lo_e <= hi_e):
        raise ValueError(
            f"eigenvalue_range must be (low, high) with 0 < low ≤ high, got {eigenvalue_range}"
        )
    means = uniform(n_classes, d, low=lo_m, high=hi_m, generator=generator)
    M = uniform(n_classes, d, d, low=-1.0, high=1.0, generator=generator)
    _, Q = torch.linalg.eigh(M + M.mT)
    lam = uniform(n_classes, d, low=lo_e, high=hi_e, generator=generator)
    roots = Q * lam.sqrt()[:, None, :]  # Σ_c = roots_c roots_cᵀ
    covariances = roots @ roots.mT

    def draw(per_class: int) -> tuple[torch.Tensor, torch.Tensor]:
        Z = standard_normal(n_classes, per_class, d, generator=sampler).to(means.device)
        X = means[:, None, :] + Z @ roots.mT
        labels = torch.arange(n_classes, device=means.device).repeat_interleave(per_class)
        order = torch.randperm(n_classes * per_class, generator=sampler, device=sampler.device)
        order = order.to(means.device)
        return X.reshape(-1, d)[order], labels[order]

    X_train, y_train = draw(n_per_class)
    X_test, y_test = draw(n_test_per_class)

    target = output_device(device)
    cast = output_cast(dtype, target)
    return GaussianMixtureClasses(
        X_train=cast(X_train),
        y_train=y_train.to(device=target),
        X_test=cast(X_test),
        y_test=y_test.to(device=target),
        means=cast(means),
        covariances=cast(0.5 * (covariances + covariances.mT)),
    )
