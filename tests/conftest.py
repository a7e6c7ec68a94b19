"""Test-suite configuration: hypothesis without wall-clock deadlines (CI is noisy)."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "pnsolve",
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.load_profile("pnsolve")


# ----------------------------------------------------------------------------------
# Dense SPD matrices for the Krylov and preconditioner tests, from pnsolve.problems.

import pytest  # noqa: E402
import torch  # noqa: E402

import pnsolve as pn  # noqa: E402


def make_spd(
    n: int,
    spectrum: torch.Tensor | None = None,
    *,
    cond: float = 100.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> torch.Tensor:
    """``Q diag(λ) Qᵀ`` with Haar-random ``Q``; default λ log-spaced from 1 to 1/cond."""
    lam = pn.problems.spectrum("exponential", n, cond=cond) if spectrum is None else spectrum
    g = torch.Generator().manual_seed(seed)
    return pn.problems.spd_from_spectrum(
        lam.to(torch.float64), generator=g, dtype=dtype
    ).A.to_dense()


def make_kernel(
    n: int, noise: float = 1e-2, seed: int = 0, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """RBF Gram matrix (lengthscale 0.2) of ``n`` uniform points in [0, 1]² plus ``noise · I``."""
    g = torch.Generator().manual_seed(seed)
    system = pn.problems.kernel_gram(
        n, 2, lengthscale=0.2, noise=noise, generator=g, dtype=dtype, compute_spectrum=False
    )
    return system.A.to_dense()


@pytest.fixture
def spd():
    """Factory of dense SPD test matrices (see :func:`make_spd`)."""
    return make_spd


@pytest.fixture
def kernel():
    """Factory of dense kernel Gram test matrices (see :func:`make_kernel`)."""
    return make_kernel


@pytest.fixture
def one_thread():
    """One torch thread for the test, restored afterwards.

    For modules of many small products (``pytestmark = pytest.mark.usefixtures(
    "one_thread")``): intra-op threading only adds synchronisation there, up to 10×
    slower on a busy 2-core machine.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
