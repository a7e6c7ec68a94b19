"""At most one host synchronisation per CG / PLS iteration (the stopping check).

On a GPU every host read (``.item()``, ``bool(t)``, ``nonzero``, ...) stalls the device
until its queue drains. :class:`pnsolve.testing.HostSyncCounter` counts them on any
device, so these run on a CPU-only CI. Setup and exit (argument checks, the stop reason,
freezing converged columns) may read a few more: a constant per solve and per column
that stops, bounded here by ``SETUP``. Off the CPU the PLS and CG take their device
paths by themselves (checked on torch's lazy-tensor device, a second device emulated on
the CPU); on the CPU, where a host read costs nothing, they keep their host decisions,
and the device paths are forced to count them.
"""

from __future__ import annotations

import pytest
import torch

import pnsolve as pn
from pnsolve.krylov import conjugate_gradient
from pnsolve.solvers.conditioning import Conditioner
from pnsolve.testing import count_host_syncs, krylov_tol
from pnsolve.testing.device import lazy_device

F64, F32 = torch.float64, torch.float32
#: host reads a whole solve may add to its one per iteration (setup, stop reason, exit)
SETUP = 30


def _system(n: int, dtype: torch.dtype = F64, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=dtype)
    # on X's device: a kernel left on the CPU copies its hyperparameters to X's device
    # at every product, one host sync each (docs/gpus.md)
    k = pn.kernels.RBF(lengthscale=0.3).to(X.device)
    A = (k(X, X) + 1e-2 * torch.eye(n, dtype=dtype)).detach()
    b = torch.randn(n, generator=g, dtype=dtype)
    return k, X, A, b


@pytest.fixture
def device_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Condition single actions as off the CPU (one host read per update)."""
    monkeypatch.setattr(Conditioner, "_device_path", staticmethod(lambda A: True))


@pytest.fixture
def cg_device_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run CG's general (device) step, as off the CPU (one host read per iteration)."""
    monkeypatch.setattr(conjugate_gradient, "on_host", lambda run: False)


@pytest.mark.usefixtures("cg_device_step")
@pytest.mark.parametrize("operator", ["tensor", "chunked kernel", "block rhs", "jacobi"])
def test_cg_reads_the_host_once_per_iteration(operator: str) -> None:
    k, X, A, b = _system(300)
    M = None
    if operator == "chunked kernel":
        A = k.linop(X, backend="chunked") + pn.linops.ScaledIdentity(300, 1e-2, dtype=F64)
    elif operator == "block rhs":
        b = torch.stack([b, 2 * b + 1, b.flip(0)], dim=1)
    elif operator == "jacobi":
        M = pn.linops.Diagonal(1.0 / A.diagonal())
    with count_host_syncs() as syncs:
        _, info = pn.cg(A, b, rtol=1e-10, M=M)
    assert info.iterations > 50
    columns = 1 if b.ndim == 1 else b.shape[1]  # each column's stop is one event
    assert syncs.count <= info.iterations + SETUP * columns, dict(syncs.by_op)


@pytest.mark.usefixtures("cg_device_step")
def test_cg_float32_reliable_updates_stay_rare() -> None:
    # float32 replaces residuals periodically: each replacement is an event with a few
    # reads, not a per-iteration cost
    _, _, A, b = _system(300, F32)
    with count_host_syncs() as syncs:
        _, info = pn.cg(A, b, rtol=1e-4)
    assert syncs.count <= info.iterations + SETUP + 10 * info.true_residual_checks


@pytest.mark.usefixtures("device_path")
@pytest.mark.parametrize("prior", ["inverse", 1.0])
def test_pls_device_path_reads_the_host_once_per_iteration(prior: object) -> None:
    _, _, A, b = _system(200)
    stopping = pn.stopping.MaxIterations(60) | pn.stopping.ResidualNorm(rtol=1e-9)
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), stopping, prior=prior)
    with count_host_syncs() as syncs:
        _, info = solver.solve(A, b)
    assert info.iterations >= 30
    assert syncs.count <= info.iterations + SETUP, dict(syncs.by_op)


def test_pls_host_and_device_paths_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    _, _, A, b = _system(200)
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(40))
    host, _ = solver.solve(A, b)
    monkeypatch.setattr(Conditioner, "_device_path", staticmethod(lambda A: True))
    device, _ = solver.solve(A, b)
    tol = krylov_tol(F64, float(torch.linalg.cond(A)))
    scale = float(host.mean.abs().max())
    assert float((host.mean - device.mean).abs().max()) <= tol * scale
    assert host.V.shape == device.V.shape


@pytest.mark.usefixtures("device_path")
def test_itergp_device_path_reads_the_host_once_per_iteration() -> None:
    k, X, _, _ = _system(200)
    y = torch.sin(6 * X[:, 0])
    gp = pn.gp.IterGP(
        k, noise=1e-2, policy=pn.policies.CG(), stopping=pn.stopping.MaxIterations(40)
    )
    with count_host_syncs() as syncs:
        gp.fit(X, y)
    assert syncs.count <= 40 + 2 * SETUP, dict(syncs.by_op)


# ------------------------------------------------------------------ a real second device
pytest.importorskip("torch._lazy.ts_backend")


@pytest.fixture(scope="module", name="lazy_device")
def _lazy_device() -> torch.device:
    return lazy_device()


@pytest.mark.slow
def test_on_another_device_the_pls_takes_its_device_path(lazy_device: torch.device) -> None:
    _, _, A, b = _system(40)
    solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(8))
    cpu, _ = solver.solve(A, b)
    with count_host_syncs() as syncs:
        dev, info = solver.solve(A.to(lazy_device), b.to(lazy_device))
    assert dev.mean.device.type == "lazy"
    assert syncs.count <= info.iterations + SETUP, dict(syncs.by_op)
    tol = krylov_tol(F64, float(torch.linalg.cond(A))) * float(cpu.mean.abs().max())
    assert float((dev.mean.cpu() - cpu.mean).abs().max()) <= tol


@pytest.mark.slow
def test_cg_on_another_device(lazy_device: torch.device) -> None:
    _, _, A, b = _system(40)
    x_cpu, info_cpu = pn.cg(A, b, rtol=1e-8)
    with count_host_syncs() as syncs:
        x, info = pn.cg(A.to(lazy_device), b.to(lazy_device), rtol=1e-8)
    assert x.device.type == "lazy" and info.iterations == info_cpu.iterations
    assert syncs.count <= info.iterations + SETUP, dict(syncs.by_op)
    tol = krylov_tol(F64, float(torch.linalg.cond(A))) * float(x_cpu.abs().max())
    assert float((x.cpu() - x_cpu).abs().max()) <= tol
