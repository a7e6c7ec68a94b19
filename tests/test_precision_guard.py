"""float32 products are never silently in TF32 (CUDA) or bfloat16 (oneDNN on CPUs).

A user who calls ``torch.set_float32_matmul_precision("high")`` for their network also
changes every float32 matmul pnsolve runs: TF32 keeps 10 mantissa bits, a relative error
of about 1e-3 per product, which stalls CG and spoils float32 predictions
(gpytorch#1960). pnsolve runs its products under ``pnsolve._core.precision.ieee_float32``.
The flags exist on CPU builds too, so a CPU-only CI checks that every matmul-like
operation pnsolve itself issues sees ``"ieee"``, that the caller's setting is restored,
and (oneDNN really computes in bfloat16 where the CPU has it) that results are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode

import pnsolve as pn
from pnsolve._core.precision import ieee_float32
from pnsolve.iterative import GaussSeidel

F32 = torch.float32
PACKAGE = str(Path(pn.__file__).resolve().parent)
TESTING = str(Path(pn.__file__).resolve().parent / "testing")
TORCH = str(Path(torch.__file__).resolve().parent)
MATMULS = {
    torch.matmul, torch.mm, torch.bmm, torch.addmm, torch.addmv, torch.mv, torch.einsum,
    torch.cdist, torch.tensordot, torch.baddbmm, torch.linalg.matmul, torch.linalg.multi_dot,
    torch.Tensor.__matmul__, torch.Tensor.__rmatmul__, torch.Tensor.mm, torch.Tensor.matmul,
    torch.Tensor.mv, torch.Tensor.addmm, torch.Tensor.addmm_, torch.Tensor.bmm,
    torch.linalg.solve_triangular, torch.linalg.cholesky, torch.linalg.cholesky_ex,
}  # fmt: skip


def _pnsolve_caller() -> str | None:
    """``file:line`` of the pnsolve code that issued the operation, or ``None``."""
    import sys

    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(TORCH) and name != __file__:
            if name.startswith(PACKAGE) and not name.startswith(TESTING):
                return f"{name[len(PACKAGE) + 1 :]}:{frame.f_lineno}"
            return None
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _states() -> tuple[str, str]:
    return (
        torch.backends.cuda.matmul.fp32_precision,
        torch.backends.mkldnn.matmul.fp32_precision,
    )


class Recorder(TorchFunctionMode):
    """Records the matmul precision flags at every float32 matmul issued by pnsolve."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, tuple[str, str]]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        where = _pnsolve_caller() if func in MATMULS else None
        if where is not None:
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            if any(t.dtype == F32 for t in tensors):
                self.seen.append((where, _states()))
        return func(*args, **kwargs)


@pytest.fixture
def user_low_precision() -> Iterator[None]:
    """The caller asked for TF32 on CUDA and bfloat16 through oneDNN (new-style flags)."""
    saved = _states()
    torch.backends.cuda.matmul.fp32_precision = "tf32"
    torch.backends.mkldnn.matmul.fp32_precision = "bf16"
    yield
    torch.backends.cuda.matmul.fp32_precision, torch.backends.mkldnn.matmul.fp32_precision = saved


def _problem(n: int = 120, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, generator=g, dtype=F32)
    y = torch.sin(6 * X[:, 0]) + 0.05 * torch.randn(n, generator=g, dtype=F32)
    Xs = torch.rand(20, 2, generator=g, dtype=F32)
    return X, y, Xs


def _calls() -> dict[str, Callable[[], Any]]:
    X, y, Xs = _problem()
    k = pn.kernels.RBF(lengthscale=0.3)
    with torch.no_grad():
        A = (k(X, X) + 0.05 * torch.eye(X.shape[0], dtype=F32)).detach()
    cg_stop = pn.stopping.MaxIterations(15)
    labels = (y > 0).to(F32)

    def itergp():
        gp = pn.gp.IterGP(k, noise=0.05, policy=pn.policies.CG(), stopping=cg_stop).fit(X, y)
        return gp.posterior(Xs).var, gp.posterior(Xs, method="love", rank=10).var

    def estimator():
        est = pn.gp.StandardEstimator(4, generator=torch.Generator().manual_seed(0))
        B = est.targets(k, X, 0.05, y)
        V, _ = pn.cg(A, B, rtol=1e-4)
        est.backward(k, X, 0.05, y, V)
        return [p.grad for p in k.parameters()]

    def qsgp():
        g = torch.Generator().manual_seed(0)
        q = pn.gp.QSGP(k, pn.likelihoods.Gaussian(0.05), 64, rank=4, batch_size=20,
                       feature_batch_size=32, control_variate_rank=8, generator=g)  # fmt: skip
        q.fit(X, y, steps=2, generator=g)
        return q.posterior(Xs).var, q.elbo(X, y)

    def lazy_parts():  # posteriors compute some parts on demand, after the query returned
        gp = pn.gp.IterGP(k, noise=0.05, policy=pn.policies.CG(), stopping=cg_stop).fit(X, y)
        post = gp.posterior(Xs)
        return post.math_var, post.comp_var, post.sample(2, torch.Generator().manual_seed(0))

    def training():
        config = pn.gp.TrainingConfig(solver="cg", estimator="standard", steps=2, num_probes=4)
        return pn.gp.train_hyperparameters(X, y, config, generator=torch.Generator().manual_seed(0))

    def belief():
        pls = pn.ProbabilisticLinearSolver(pn.policies.CG(), cg_stop)
        b = pls.solve(A, y)[0]
        u = torch.ones(X.shape[0], 3, dtype=F32)
        return b.var(u), b.downdate_variance(u), b.sample(2, torch.Generator().manual_seed(0))

    def features():
        g = torch.Generator().manual_seed(0)
        rff = pn.kernels.RandomFourierFeatures(k, 32, 2, generator=g, dtype=F32, device=X.device)
        return rff.features(X), rff.approx_kernel(X, Xs), rff.sample_prior(Xs, 2, generator=g)

    return {
        "cg": lambda: pn.cg(A, y, rtol=1e-5)[0],
        "belief": belief,
        "nystrom": lambda: pn.preconditioners.Nystrom(
            A, 10, generator=torch.Generator().manual_seed(0)
        ).logdet(),
        "pivoted cholesky": lambda: pn.preconditioners.PivotedCholesky(A, 10).logdet(),
        "random features": features,
        "pls": lambda: pn.ProbabilisticLinearSolver(pn.policies.CG(), cg_stop).solve(A, y)[0].mean,
        "lanczos": lambda: pn.lanczos(A, y, 10).T,
        "kernel": lambda: k(X, Xs),
        "chunked": lambda: k.linop(X, backend="chunked") @ y,
        "exact gp": lambda: pn.gp.ExactGP(k, noise=0.05).fit(X, y).posterior(Xs).var,
        "itergp": itergp,
        "iterncgp": lambda: (
            pn.gp.IterNCGP(
                k,
                likelihood=pn.likelihoods.Bernoulli(),
                policy=pn.policies.CG(),
                stopping=cg_stop,
                max_newton_steps=2,
            )
            .fit(X, labels)
            .predict_proba(Xs)
        ),
        "estimator": estimator,
        "affine gp": lambda: pn.gp.AffineGP(k, 0.05, GaussSeidel(3)).fit(X, y).posterior(Xs).var,
        "pathwise": lambda: pn.gp.sample_posterior(
            k, X, y, 0.05, 2, generator=torch.Generator().manual_seed(0), num_features=64
        )(Xs),
        "qsgp": qsgp,
        "posterior on demand": lazy_parts,
        "ski": lambda: (
            pn.gp.IterGP(
                pn.kernels.GridInterpolation(k, grid_size=30),
                noise=0.05,
                policy=pn.policies.CG(),
                stopping=cg_stop,
            )
            .fit(X, y)
            .posterior(Xs)
            .var
        ),
        "training": training,
    }


@pytest.mark.usefixtures("user_low_precision")
@pytest.mark.parametrize("name", list(_calls()))
def test_pnsolve_matmuls_run_in_ieee_float32_and_restore_the_callers_flags(name: str) -> None:
    call = _calls()[name]
    with Recorder() as rec:
        call()
    assert rec.seen, f"{name}: no float32 matmul recorded (the test lost its subject)"
    low = sorted({where for where, s in rec.seen if s != ("ieee", "ieee")})
    assert not low, f"{name}: matmuls not in IEEE float32 at {low}"
    assert _states() == ("tf32", "bf16"), "the caller's precision flags were not restored"


def test_results_do_not_depend_on_the_callers_matmul_precision(user_low_precision) -> None:
    X, y, Xs = _problem(300)
    k = pn.kernels.RBF(lengthscale=0.3)
    with torch.no_grad():
        A = k(X, X) + 0.05 * torch.eye(300, dtype=F32)
    with torch.no_grad():
        low = pn.cg(A, y, rtol=1e-5)[0], pn.gp.ExactGP(k, noise=0.05).fit(X, y).posterior(Xs).var
    with ieee_float32():
        with torch.no_grad():
            full = (
                pn.cg(A, y, rtol=1e-5)[0],
                pn.gp.ExactGP(k, noise=0.05).fit(X, y).posterior(Xs).var,
            )
    for a, b in zip(low, full):
        assert torch.equal(a, b)


def test_the_guard_restores_and_nests() -> None:
    saved = _states()
    try:
        torch.backends.cuda.matmul.fp32_precision = "tf32"
        with ieee_float32():
            full = ("ieee", saved[1])  # "none" follows the legacy "highest": full already
            assert _states() == full
            with ieee_float32():
                assert _states() == full
            assert _states() == full
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
        with pytest.raises(RuntimeError), ieee_float32():
            raise RuntimeError("restored on errors too")
        assert torch.backends.cuda.matmul.fp32_precision == "tf32"
    finally:
        torch.backends.cuda.matmul.fp32_precision, torch.backends.mkldnn.matmul.fp32_precision = (
            saved
        )


@pytest.mark.parametrize("legacy", ["high", "medium"])
def test_a_legacy_setting_stays_readable_inside_and_is_restored(legacy: str) -> None:
    """A caller who used ``torch.set_float32_matmul_precision``: code called back from
    inside a pnsolve product (an operator) can read both APIs (torch raises on reads
    when they disagree)."""
    saved = torch.get_float32_matmul_precision()
    before = _states()
    seen: list[tuple[str, bool, tuple[str, str]]] = []

    X, y, _ = _problem(60)
    with torch.no_grad():
        K = pn.kernels.RBF(lengthscale=0.3)(X, X) + 0.05 * torch.eye(60, dtype=F32)

    def matmat(V: torch.Tensor) -> torch.Tensor:  # the user's operator, called back
        m = torch.backends.cuda.matmul
        seen.append((torch.get_float32_matmul_precision(), m.allow_tf32, _states()))
        return K @ V

    A = pn.linops.Closure(matmat, (60, 60), dtype=F32, device=y.device, is_symmetric=True)
    try:
        torch.set_float32_matmul_precision(legacy)
        user = _states()
        pn.cg(A, y, rtol=1e-4)
        assert seen and all(s == ("highest", False, ("ieee", "ieee")) for s in seen)
        assert torch.get_float32_matmul_precision() == legacy and _states() == user
        assert torch.backends.cuda.matmul.allow_tf32  # readable: the APIs agree again
    finally:
        torch.set_float32_matmul_precision(saved)
        torch.backends.cuda.matmul.fp32_precision, torch.backends.mkldnn.matmul.fp32_precision = (
            before
        )
