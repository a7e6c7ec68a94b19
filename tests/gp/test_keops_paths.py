"""The KeOps backend in the places peers got it wrong: variances, LOVE and gradients.

GPyTorch users met KeOps posterior variances that disagreed with the dense kernel
(gpytorch#2566) and KeOps gradients that broke (gpytorch#1885, NaN at zero distances of
Matérn kernels). Here every such path runs with ``backend="keops"`` and is compared with
the dense backend on the same model. Under ``pytest --device cuda`` these run on the GPU,
where ``backend="auto"`` picks KeOps for large matrices (the rule is tested below).
Each test compiles a few KeOps formulas on first use (about 6 s each on a CPU).
"""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.kernels.backends.auto import DENSE_LIMIT_BYTES, choose_backend
from pnsolve.kernels.backends.keops import keops_available
from pnsolve.testing import exact_tol, krylov_tol

F64, F32 = torch.float64, torch.float32


def _data(n: int, d: int, dtype: torch.dtype, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=F64).to(dtype)
    y = (torch.sin(5 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=F64)).to(dtype)
    Xs = torch.rand(25, d, generator=g, dtype=F64).to(dtype)
    return X, y, Xs


def test_auto_picks_keops_for_large_matrices_on_cuda_only(monkeypatch: pytest.MonkeyPatch):
    # the rule itself (no CUDA needed): past the dense limit, KeOps on CUDA, chunked on CPU
    n = int((DENSE_LIMIT_BYTES / 8) ** 0.5) + 100
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    monkeypatch.setattr("pnsolve.kernels.backends.auto.keops_runs_on", lambda device: True)
    assert choose_backend(n, n, F64, cuda) == "keops"
    assert choose_backend(n, n, F64, cpu) == "chunked"
    assert choose_backend(100, 100, F64, cuda) == "dense"
    monkeypatch.setattr("pnsolve.kernels.backends.auto.keops_runs_on", lambda device: False)
    assert choose_backend(n, n, F64, cuda) == "chunked"


keops = pytest.mark.skipif(not keops_available(), reason="pykeops is not importable")


@pytest.mark.keops
@keops
@pytest.mark.parametrize("dtype", [F64, F32])
def test_itergp_keops_variances_match_dense(dtype: torch.dtype) -> None:
    X, y, Xs = _data(300, 3, dtype)
    posts = {}
    for backend in ("dense", "keops"):
        k = pn.kernels.RBF(lengthscale=0.4)
        gp = pn.gp.IterGP(
            k, noise=0.05, policy=pn.policies.CG(), stopping=pn.stopping.MaxIterations(30),
            backend=backend,
        ).fit(X, y)  # fmt: skip
        post = gp.posterior(Xs)
        love = gp.posterior(Xs, method="love", rank=20)
        posts[backend] = (post.mean, post.var, love.var)
        assert post.var.dtype == dtype and post.var.device == X.device
    tol = krylov_tol(dtype, 1.0 / 0.05) * 10
    for name, a, b in zip(("mean", "var", "love var"), posts["dense"], posts["keops"]):
        assert torch.isfinite(b).all(), name
        assert float((a - b).abs().max()) <= tol * max(1.0, float(a.abs().max())), name
    assert float(posts["keops"][1].min()) > 0.0  # no negative variances (gpytorch#2566)


@pytest.mark.keops
@keops
@pytest.mark.parametrize("kernel", ["rbf", "matern32"])
def test_keops_gradients_at_zero_distances_match_dense(kernel: str) -> None:
    # K(X, X) has exact zero distances on its diagonal: d/dx ‖x − x‖ must not be NaN
    g = torch.Generator().manual_seed(1)
    grads = {}
    for backend in ("dense", "keops"):
        make = pn.kernels.RBF if kernel == "rbf" else lambda **kw: pn.kernels.Matern(nu=1.5, **kw)
        k = make(lengthscale=torch.tensor([0.5, 0.8], dtype=F64))
        X = torch.rand(60, 2, generator=torch.Generator().manual_seed(2), dtype=F64)
        X.requires_grad_(True)
        V = torch.randn(60, 2, generator=g.manual_seed(3), dtype=F64)
        K = k.linop(X, backend=backend)
        (V * (K @ V)).sum().backward()
        grads[backend] = [X.grad] + [p.grad for p in k.parameters()]
    for a, b in zip(grads["dense"], grads["keops"]):
        assert torch.isfinite(b).all()
        assert float((a - b).abs().max()) <= exact_tol(F64, 60) * max(1.0, float(a.abs().max()))


@pytest.mark.cpu_only(reason="needs a device pykeops does not support (torch's lazy device)")
def test_keops_refuses_devices_it_cannot_compute_on() -> None:
    # pykeops reads raw pointers: on another device it would crash the process
    pytest.importorskip("torch._lazy.ts_backend")
    from pnsolve.testing.device import lazy_device

    X = torch.rand(5, 2, dtype=F64).to(lazy_device())
    with pytest.raises(ValueError, match='backend="keops" runs on CPU and CUDA'):
        pn.kernels.RBF().linop(X, backend="keops")
