"""Every tensor pnsolve creates follows its inputs' device; randomness is drawn on the generator's.

Two kinds of checks:

* **Static.** Every call ``torch.<factory>(...)`` in ``pnsolve/`` passes ``device=`` (a
  ``**kwargs`` splat counts), ``torch.from_numpy(...)`` is directly followed by
  ``.to(...)``, and a draw ``torch.<draw>(..., generator=g)`` is made on ``g.device``
  (the convention of :mod:`pnsolve._core.random`; no allowlist entry covers a draw
  made elsewhere: the test harness cannot redirect it). A factory call used only for its
  ``.device`` or ``.dtype`` (``torch.empty(0).device``: the default device, resolved in
  the data sources themselves; ``torch.from_numpy(np.zeros(0, dtype)).dtype``: a dtype
  mapping) creates no data and passes. Everything else is listed in :data:`ALLOWLIST`,
  keyed by (file, enclosing function, factory) so that it survives line shifts, with its
  reason; an entry that no longer matches anything fails too (stale).
* **Runtime.** The main entry points run with every input on torch's lazy-tensor device
  (a second device emulated on the CPU: mixing it with CPU tensors raises, as CUDA
  does) and CPU generators, and must return on that device the CPU results.
"""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch.utils._device import _device_constructors

import pnsolve as pn
from pnsolve.testing import exact_tol, krylov_tol, rtol_for
from pnsolve.testing.device import lazy_device, suite_device

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pnsolve"
F64 = torch.float64

#: ``torch.<name>(...)`` calls that create a tensor (or a generator) on some device.
FACTORIES = frozenset(
    {f.__name__ for f in _device_constructors()} | {"normal", "from_numpy", "Generator"}
)
#: Random draws that take a ``generator=`` (must then draw on ``generator.device``).
DRAWS = frozenset({"rand", "randn", "randint", "randperm", "normal"})
#: Attributes that read metadata only: a factory call used just for them creates no data.
METADATA = frozenset({"device", "dtype"})

#: (file, enclosing function, factory) → why the call passes no ``device=``. Glob
#: patterns are allowed in each field.
ALLOWLIST: dict[tuple[str, str, str], str] = {
    ("pnsolve/testing/*", "*", "*"): (
        "test-data helpers: the suite's harness (pytest --device) redirects their factory "
        "calls to the device under test, as it does for tests/"
    ),
    ("pnsolve/linops/conversion.py", "as_linop", "from_numpy"): (
        "a NumPy matrix is host data: the operator wraps it on the CPU without a copy "
        "(documented: NumPy and SciPy inputs give CPU operators)"
    ),
    ("pnsolve/linops/conversion.py", "_from_scipy_callable", "from_numpy"): (
        "the diagonal of a SciPy operator, which is a CPU operator (device='cpu')"
    ),
    ("pnsolve/plotting/mcmc.py", "_draws", "from_numpy"): (
        "plotting is host-side: wraps the NumPy draws without a copy for check_finite"
    ),
    ("pnsolve/gp/bayes/sgld.py", "SGLD.__init__", "as_tensor"): (
        "casts the argument M itself to float64: a tensor keeps its device (the chain "
        "lives there), an array-like lands on torch's default device"
    ),
    ("pnsolve/gp/bayes/mh.py", "MetropolisHastings.__init__", "as_tensor"): (
        "casts the argument proposal_cov itself to float64: a tensor keeps its device "
        "(the chain lives there), an array-like lands on torch's default device"
    ),
}

NO_DEVICE = "no device= (or torch.from_numpy not followed by .to)"
OFF_GENERATOR = "a draw not made on its generator's device (use pnsolve._core.random)"
#: Files exempt from the generator rule: the implementation of the rule itself.
DRAW_RULE_EXEMPT = frozenset({"pnsolve/_core/random.py"})


# ------------------------------------------------------------------------ static scan
def _torch_call(node: ast.AST) -> str | None:
    """``name`` for a call ``torch.<name>(...)``, else ``None``."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "torch":
        return f.attr
    return None


def _keywords(call: ast.Call) -> dict[str | None, ast.expr]:
    return {k.arg: k.value for k in call.keywords}


class _Scan(ast.NodeVisitor):
    """Collect ``(file, qualified function, factory, line, problem)`` of one module."""

    def __init__(self, rel: str) -> None:
        self.rel = rel
        self.scope: list[str] = []
        self.parents: dict[ast.AST, ast.AST] = {}
        self.found: list[tuple[str, str, str, int, str]] = []

    def scan(self, tree: ast.AST) -> list[tuple[str, str, str, int, str]]:
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self.visit(tree)
        return self.found

    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def _report(self, node: ast.Call, name: str, problem: str) -> None:
        """Record a site; ``problem`` is :data:`NO_DEVICE` or :data:`OFF_GENERATOR`."""
        where = ".".join(self.scope) or "<module>"
        self.found.append((self.rel, where, name, node.lineno, problem))

    def visit_Call(self, node: ast.Call) -> None:
        name = _torch_call(node)
        if name in FACTORIES:
            self._check_factory(node, name)
        if name in DRAWS and self.rel not in DRAW_RULE_EXEMPT:
            self._check_draw(node, name)
        self.generic_visit(node)

    def _check_factory(self, node: ast.Call, name: str) -> None:
        parent = self.parents.get(node)
        if isinstance(parent, ast.Attribute) and parent.attr in METADATA:
            return  # torch.empty(0).device and the like: no data is created
        kw = _keywords(node)
        if name == "from_numpy":
            # no device argument: it must be moved on at once
            if not (isinstance(parent, ast.Attribute) and parent.attr == "to"):
                self._report(node, name, NO_DEVICE)
        elif "device" not in kw and None not in kw:
            self._report(node, name, NO_DEVICE)

    def _check_draw(self, node: ast.Call, name: str) -> None:
        kw = _keywords(node)
        gen, device = kw.get("generator"), kw.get("device")
        if gen is None or device is None or None in kw:
            return  # no generator, or no device= (the factory rule's business)
        on_generator = (
            isinstance(device, ast.Attribute)
            and device.attr == "device"
            and ast.dump(device.value) == ast.dump(gen)
        )
        if not on_generator:
            self._report(node, name, OFF_GENERATOR)


def _sites() -> Iterator[tuple[str, str, str, int, str]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        yield from _Scan(rel).scan(ast.parse(path.read_text(encoding="utf-8"), filename=rel))


def _entry(site: tuple[str, str, str, int, str]) -> tuple[str, str, str] | None:
    """The allowlist entry covering ``site`` (a draw off its generator is never covered)."""
    rel, func, name, _, problem = site
    if problem == OFF_GENERATOR:
        return None
    for key in ALLOWLIST:
        if all(fnmatch.fnmatchcase(v, p) for v, p in zip((rel, func, name), key, strict=True)):
            return key
    return None


def test_every_factory_passes_a_device_and_every_draw_uses_the_generators():
    sites = list(_sites())
    unlisted = [s for s in sites if _entry(s) is None]
    assert not unlisted, "tensors created without following a device:\n" + "\n".join(
        f"  {rel}:{line} in {func}: torch.{name} ({problem})"
        for rel, func, name, line, problem in unlisted
    )
    used = {_entry(s) for s in sites}
    stale = [key for key in ALLOWLIST if key not in used]
    assert not stale, f"allowlist entries that match nothing (remove them): {stale}"


def test_the_scan_finds_what_it_should():
    src = (
        "import torch\n"
        "def f(x, g, **kw):\n"
        "    a = torch.zeros(3)\n"  # flagged
        "    b = torch.zeros(3, device=x.device)\n"
        "    c = torch.ones(3, **kw)\n"
        "    d = torch.empty(0).device\n"
        "    e = torch.from_numpy(x)\n"  # flagged
        "    h = torch.from_numpy(x).to(x.device)\n"
        "    i = torch.randn(3, generator=g, device=x.device)\n"  # flagged: not g's device
        "    j = torch.randn(3, generator=g, device=g.device)\n"
    )
    found = _Scan("pnsolve/x.py").scan(ast.parse(src))
    assert [(line, name) for _, _, name, line, _ in found] == [
        (3, "zeros"),
        (7, "from_numpy"),
        (9, "randn"),
    ]


# ---------------------------------------------------------------- a second device at runtime
pytest.importorskip("torch._lazy.ts_backend")


@pytest.fixture(scope="module")
def lazy() -> torch.device:
    """Torch's lazy device (initialised once per process).

    These tests compare a second device with the CPU. Under ``pytest --device cuda`` the
    harness sends the CPU references to the device too, and the whole suite is then the
    device test: they skip.
    """
    if suite_device().type != "cpu":
        pytest.skip(f"compares the lazy device with the CPU; the suite runs on {suite_device()}")
    return lazy_device()


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(seed)


def _close(dev: torch.Tensor, cpu: torch.Tensor, tol: float) -> None:
    """``dev`` is on the lazy device and equals ``cpu`` to ``tol`` relative to its size."""
    assert dev.device.type == "lazy", dev.device
    dev, cpu = dev.detach(), cpu.detach()
    scale = max(1.0, float(cpu.abs().max()))
    err = float((dev.cpu() - cpu).abs().max())
    assert err <= tol * scale, (err, tol * scale)


def _spd(n: int = 12, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    problem = pn.problems.exponential_decay(n, cond=1e2, generator=_gen(seed), device="cpu")
    return problem.A.to_dense(), problem.b


def _regression(n: int = 12, t: int = 4, seed: int = 0):
    g = _gen(seed)
    X = torch.rand(n, 2, generator=g, dtype=F64)
    y = torch.sin(4 * X[:, 0]) + 0.1 * torch.randn(n, generator=g, dtype=F64)
    Xs = torch.rand(t, 2, generator=g, dtype=F64)
    return X, y, Xs


def test_cg_and_lanczos(lazy):
    A, b = _spd()
    x, info = pn.cg(A, b, rtol=1e-10)
    xd, info_d = pn.cg(A.to(lazy), b.to(lazy), rtol=1e-10)
    assert info_d.iterations == info.iterations
    _close(xd, x, krylov_tol(F64, 1e2))
    res, res_d = pn.lanczos(A, b, 4), pn.lanczos(A.to(lazy), b.to(lazy), 4)
    _close(res_d.Q, res.Q, krylov_tol(F64, 1e2))
    _close(res_d.T, res.T, krylov_tol(F64, 1e2))


@pytest.mark.parametrize(
    "policy",
    [
        pn.policies.CG(),
        pn.policies.Random(),
        pn.policies.Random(distribution="rademacher"),
        pn.policies.Random(distribution="sparse_sign"),
        pn.policies.UnitVector(order="random"),
        pn.policies.Mixed([pn.policies.CG(), pn.policies.Random()], [0.5, 0.5]),
    ],
    ids=["cg", "random", "rademacher", "sparse-sign", "unit-vector-random", "mixed"],
)
def test_probabilistic_linear_solver(lazy, policy):
    A, b = _spd()
    solver = pn.ProbabilisticLinearSolver(policy, pn.stopping.MaxIterations(3))
    cpu, _ = solver.solve(A, b, generator=_gen(3))
    dev, _ = solver.solve(A.to(lazy), b.to(lazy), generator=_gen(3))  # a CPU generator
    _close(dev.mean, cpu.mean, krylov_tol(F64, 1e2))


def test_exact_gp_and_kernel_matrix(lazy):
    X, y, Xs = _regression()
    k = pn.kernels.Matern(nu=1.5, lengthscale=0.4)
    post = pn.gp.ExactGP(k, noise=0.1).fit(X, y).posterior(Xs)
    post_d = pn.gp.ExactGP(k, noise=0.1).fit(X.to(lazy), y.to(lazy)).posterior(Xs.to(lazy))
    _close(post_d.mean, post.mean, exact_tol(F64, X.shape[0]))
    _close(post_d.var, post.var, exact_tol(F64, X.shape[0]))
    K = k.linop(X, backend="chunked") @ y
    K_d = k.linop(X.to(lazy), backend="chunked") @ y.to(lazy)
    _close(K_d, K, exact_tol(F64, X.shape[0]))


def test_itergp_and_love(lazy):
    X, y, Xs = _regression()
    k = pn.kernels.RBF(lengthscale=0.4)

    def run(X, y, Xs):
        gp = pn.gp.IterGP(k, 0.1, pn.policies.CG(), pn.stopping.MaxIterations(4)).fit(X, y)
        return gp.posterior(Xs), gp.posterior(Xs, method="love", rank=4)

    (post, love), (post_d, love_d) = run(X, y, Xs), run(X.to(lazy), y.to(lazy), Xs.to(lazy))
    tol = krylov_tol(F64, 1e3)
    for dev, cpu in ((post_d, post), (love_d, love)):
        _close(dev.mean, cpu.mean, tol)
        _close(dev.var, cpu.var, tol)


def test_pathwise_samples_and_standard_estimator(lazy):
    X, y, Xs = _regression()
    k = pn.kernels.RBF(lengthscale=0.4)
    Xd, yd = X.to(lazy), y.to(lazy)

    def sample(X, y, Xs):
        f = pn.gp.sample_posterior(
            k, X, y, 0.1, 2, generator=_gen(5), num_features=16,
            solver=lambda A, B: pn.cg(A, B, maxiter=4),
        )  # fmt: skip
        return f(Xs)

    _close(sample(Xd, yd, Xs.to(lazy)), sample(X, y, Xs), krylov_tol(F64, 1e3))

    from pnsolve.gp.mll_estimators import StandardEstimator

    B = StandardEstimator(3, generator=_gen(6)).targets(k, X, 0.1, y)
    B_d = StandardEstimator(3, generator=_gen(6)).targets(k, Xd, 0.1, yd)
    _close(B_d, B, 0.0)  # the same probes: drawn on the CPU, moved


def test_iterncgp_bernoulli(lazy):
    X, y, Xs = _regression()
    labels = (y > 0).to(F64)
    k = pn.kernels.RBF(lengthscale=0.4)

    def fit(X, labels, Xs):
        m = pn.gp.IterNCGP(
            k, pn.likelihoods.Bernoulli(), pn.policies.CG(), pn.stopping.MaxIterations(3),
            max_newton_steps=2,
        )  # fmt: skip
        return m.fit(X, labels).predict_proba(Xs)

    p, p_d = fit(X, labels, Xs), fit(X.to(lazy), labels.to(lazy), Xs.to(lazy))
    _close(p_d, p, krylov_tol(F64, 1e3))


def test_qsgp_fit(lazy):
    X, y, Xs = _regression()

    def fit(X, y, Xs):
        q = pn.gp.QSGP(
            pn.kernels.RBF(lengthscale=0.4), pn.likelihoods.Gaussian(0.1), 8,
            batch_size=8, feature_batch_size=4, control_variate_rank=4, generator=_gen(7),
        )  # fmt: skip
        q.fit(X, y, steps=2, generator=_gen(8))
        return q.posterior(Xs).mean

    # the default warm start runs CG, whose iterations amplify the devices' different
    # rounding of each operation (measured 1e-10): agreement of two implementations
    _close(fit(X.to(lazy), y.to(lazy), Xs.to(lazy)), fit(X, y, Xs), rtol_for(F64))


def test_cagp_fit(lazy):
    X, y, Xs = _regression()

    def fit(X, y, Xs):
        m = pn.gp.CaGP(pn.kernels.RBF(lengthscale=0.4), 0.1, 3, backend="chunked")
        m.fit(X, y, steps=2, generator=_gen(7))
        post = m.posterior(Xs)
        return torch.cat([post.mean, post.var])

    _close(fit(X.to(lazy), y.to(lazy), Xs.to(lazy)), fit(X, y, Xs), rtol_for(F64))


def test_prior_draw_calibration(lazy):
    from pnsolve.metrics.calibration import prior_draw_calibration

    X, _, Xs = _regression(8, 3)
    k = pn.kernels.RBF(lengthscale=0.4)

    def exact(X, y, Xs):
        with torch.no_grad():
            return pn.gp.ExactGP(k, noise=0.1).fit(X, y).posterior(Xs)

    def run(X, Xs):
        stats = prior_draw_calibration(k, 0.1, X, Xs, exact, draws=2, generator=_gen(9))
        return stats["combined"].mean_z2

    cpu, dev = run(X, Xs), run(X.to(lazy), Xs.to(lazy))
    assert abs(dev - cpu) <= krylov_tol(F64) * max(1.0, abs(cpu))


@pytest.mark.cpu_only(reason="compares pnsolve's CPU draws with torch's own on the CPU")
def test_draws_with_a_cpu_generator_are_unchanged_on_the_cpu():
    from pnsolve._core import random as rnd

    def pair(seed: int, draw, plain) -> None:
        a, b = draw(_gen(seed)), plain(_gen(seed))
        assert a.device == b.device and torch.equal(a, b)

    cpu = torch.device("cpu")
    pair(1, lambda g: rnd.randn((3, 2), generator=g, dtype=F64, device=cpu),
         lambda g: torch.randn(3, 2, generator=g, dtype=F64))  # fmt: skip
    pair(2, lambda g: rnd.rand(4, generator=g, dtype=F64, device=cpu),
         lambda g: torch.rand(4, generator=g, dtype=F64))  # fmt: skip
    pair(3, lambda g: rnd.randint(0, 5, (6,), generator=g, device=cpu),
         lambda g: torch.randint(0, 5, (6,), generator=g))  # fmt: skip
    pair(4, lambda g: rnd.randperm(7, generator=g, device=cpu),
         lambda g: torch.randperm(7, generator=g))  # fmt: skip
    pair(5, lambda g: rnd.rademacher((5,), generator=g, dtype=F64, device=cpu),
         lambda g: torch.randint(0, 2, (5,), generator=g).to(F64) * 2 - 1)  # fmt: skip


def test_random_draws_on_another_device_equal_the_cpu_draws(lazy):
    from pnsolve._core import random as rnd

    a = rnd.randn((3, 2), generator=_gen(1), dtype=F64, device=lazy)
    _close(a, torch.randn(3, 2, generator=_gen(1), dtype=F64), 0.0)
    p = rnd.randperm(6, generator=_gen(2), device=lazy)
    assert p.device.type == "lazy" and torch.equal(p.cpu(), torch.randperm(6, generator=_gen(2)))


def test_beliefs_posteriors_and_preconditioners_draw_on_the_generator(lazy):
    A, b = _spd()
    Ad, bd = A.to(lazy), b.to(lazy)
    solver = pn.ProbabilisticLinearSolver(
        pn.policies.Lanczos(start="random"), pn.stopping.MaxIterations(3)
    )
    belief, _ = solver.solve(A, b, generator=_gen(1))
    belief_d, _ = solver.solve(Ad, bd, generator=_gen(1))
    _close(belief_d.mean, belief.mean, krylov_tol(F64, 1e2))
    P = pn.preconditioners.Nystrom(A, 4, generator=_gen(2))
    P_d = pn.preconditioners.Nystrom(Ad, 4, generator=_gen(2))
    _close(P_d @ bd, P @ b, krylov_tol(F64, 1e2))
    X, y, Xs = _regression()
    k = pn.kernels.RBF(lengthscale=0.4)
    post = pn.gp.ExactGP(k, 0.1).fit(X, y).posterior(Xs)
    post_d = pn.gp.ExactGP(k, 0.1).fit(X.to(lazy), y.to(lazy)).posterior(Xs.to(lazy))
    _close(post_d.sample(2, _gen(3)), post.sample(2, _gen(3)), krylov_tol(F64, 1e3))


def test_data_sources_put_their_draws_on_the_requested_device(lazy):
    problem = pn.problems.exponential_decay(8, cond=10.0, generator=_gen(1), device=lazy)
    cpu = pn.problems.exponential_decay(8, cond=10.0, generator=_gen(1))
    _close(problem.A.to_dense(), cpu.A.to_dense(), 0.0)
    _close(problem.b, cpu.b, 0.0)
    draws = pn.datasets.gp_draws(6, 1, generator=_gen(2), device=lazy)
    _close(draws.y, pn.datasets.gp_draws(6, 1, generator=_gen(2)).y, 0.0)


def test_hyperparameter_samplers_follow_the_data(lazy):
    from pnsolve.gp.bayes import (
        SGLD,
        LogHyperparameters,
        LogMarginalGradient,
        MetropolisHastings,
        laplace_preconditioner,
        log_posterior,
    )

    X, y, _ = _regression(8)

    def run(X, y):
        params = LogHyperparameters(pn.kernels.RBF(lengthscale=0.5), 0.1)
        fit = laplace_preconditioner(params, X, y, subset=6, generator=_gen(1))
        grad = LogMarginalGradient(params, X, y, method="cg", generator=_gen(2), num_probes=2)
        sgld = SGLD(grad, params.log_prior_grad, fit.M, variance_batch=2)
        chain = sgld.run(fit.theta, 3, _gen(3)).samples
        mh = MetropolisHastings(lambda t: log_posterior(params, X, y, t)[0], fit.M, adapt=0)
        return fit.theta, chain, mh.run(fit.theta, 2, _gen(4)).samples

    for dev, cpu in zip(run(X.to(lazy), y.to(lazy)), run(X, y), strict=True):
        _close(dev, cpu, krylov_tol(F64, 1e3))


def test_ulisse_and_stochastic_gradient_descent(lazy):
    A, b = _spd()
    x, _ = pn.randomized.ulisse(A, b, alpha=1.0, beta=1.0, generator=_gen(1))
    x_d, _ = pn.randomized.ulisse(A.to(lazy), b.to(lazy), alpha=1.0, beta=1.0, generator=_gen(1))
    _close(x_d, x, krylov_tol(F64, 1e2))  # the same roulette: drawn on the CPU
    X, y, _ = _regression()
    k = pn.kernels.RBF(lengthscale=0.4)
    sgd = pn.iterative.StochasticGradientDescent(batch_size=4, max_iterations=3)

    def solve(X, y):
        system = pn.iterative.KernelSystem(k, X, 0.1)
        return sgd.solve(system, y.unsqueeze(-1), generator=_gen(2))[0]

    _close(solve(X.to(lazy), y.to(lazy)), solve(X, y), krylov_tol(F64, 1e2))


def test_monte_carlo_predictions_and_probe_estimators(lazy):
    from pnsolve.gp.mll_estimators import PathwiseEstimator, StandardEstimator

    X, y, Xs = _regression()
    k = pn.kernels.RBF(lengthscale=0.4)

    def run(X, y, Xs):
        m = pn.gp.IterNCGP(
            k, pn.likelihoods.Bernoulli(), pn.policies.CG(), pn.stopping.MaxIterations(3),
            max_newton_steps=1,
        ).fit(X, (y > 0).to(F64))  # fmt: skip
        p = m.predict_proba(Xs, method="mc", num_samples=4, generator=_gen(1))
        B = StandardEstimator(2, "rademacher", generator=_gen(2)).targets(k, X, 0.1, y)
        C = PathwiseEstimator(2, num_features=8, generator=_gen(3)).targets(k, X, 0.1, y)
        return p, B, C

    for dev, cpu in zip(run(X.to(lazy), y.to(lazy), Xs.to(lazy)), run(X, y, Xs), strict=True):
        _close(dev, cpu, krylov_tol(F64, 1e3))
