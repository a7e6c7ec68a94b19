"""backend="distributed": 2 gloo processes on CPU equal one process (float64, 1e-10 relative).

Each check runs in ranks spawned by :func:`pnsolve.testing.ranks.run_ranks`; every rank
computes the single-process reference itself (backend ``"chunked"`` or ``"dense"``), so
only small summaries travel back. The ranks must also agree with each other bit for
bit: they take identical steps on identical gathered products.
"""

from __future__ import annotations

import itertools

import pytest
import torch

import pnsolve as pn
from pnsolve.testing import exact_tol, iterative_tol
from pnsolve.testing.ranks import RankFailure, run_ranks

pytestmark = [
    pytest.mark.usefixtures("one_thread"),
    pytest.mark.cpu_only(reason="gloo ranks are CPU processes; NCCL needs one GPU per rank"),
]

F64 = torch.float64
#: Algorithms (iterative solves, training) against one process: the issue's 1e-10 in
#: float64, what iterative solvers reliably reach.
REL = iterative_tol(F64)
#: Direct products and their gradients (301 rows) against one process.
REL_PRODUCTS = exact_tol(F64, 301)


def _data(n: int, d: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, dtype=F64, generator=g)
    y = torch.sin(4 * X[:, 0]) + X[:, 1] ** 2 + 0.1 * torch.randn(n, dtype=F64, generator=g)
    return X, y


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def _summary(out: dict[str, torch.Tensor]) -> torch.Tensor:
    """The results stacked in one vector (compared bit for bit across ranks)."""
    return torch.cat([t.detach().reshape(-1) for _, t in sorted(out.items())])


def _op(k, A: torch.Tensor, B: torch.Tensor | None, mode: str, local: str):
    """``k.linop(A, B)``: one process with ``local``, or distributed with ``local`` blocks."""
    if mode == "single":
        return k.linop(A, B, backend=local)
    return k.linop(A, B, backend="distributed", local_backend=local)


def _products(rank: int, world: int) -> tuple[dict[str, float], torch.Tensor]:
    """Products and gradients of KernelMatrix, distributed vs one process."""
    X, _ = _data(301)  # 301 rows: uneven blocks
    Y, _ = _data(57, seed=1)
    g = torch.Generator().manual_seed(2)
    V = torch.randn(301, 3, dtype=F64, generator=g)
    W = torch.randn(57, 3, dtype=F64, generator=g)
    errors: dict[str, float] = {}
    outs: dict[str, torch.Tensor] = {}
    kernels = {
        "rbf-ard": lambda: pn.kernels.RBF(lengthscale=torch.tensor([0.3, 0.5, 0.8])),
        "matern32": lambda: pn.kernels.Matern(nu=1.5, lengthscale=0.4, outputscale=1.3),
        "rq": lambda: pn.kernels.RationalQuadratic(lengthscale=0.4, alpha=0.7, outputscale=1.3),
        # an expression: white noise must stay on the self pairs of each rank's row block
        "expression": lambda: (
            pn.kernels.Constant(1.5) * pn.kernels.RBF(0.6)
            + pn.kernels.Matern(nu=2.5, lengthscale=0.5) * pn.kernels.Periodic(0.9, 1.7)
            + pn.kernels.White(0.2)
        ),
        "spectral-mixture": lambda: pn.kernels.SpectralMixture(2, ard_dims=3),
    }
    for kname, make in kernels.items():
        for local in ("dense", "chunked"):
            results = {}
            for mode in ("single", "distributed"):
                k = make()
                Xg, Yg, Vg = (t.clone().requires_grad_(True) for t in (X, Y, V))

                K, C = _op(k, Xg, None, mode, local), _op(k, Xg, Yg, mode, local)
                loss = ((K @ Vg) * V).sum() + ((C @ W) * V).sum() + ((C.T @ Vg) * W).sum()
                grads = torch.autograd.grad(loss, [Xg, Yg, Vg, *k.parameters()])
                with torch.no_grad():
                    res = {"K@V": K @ V, "C@W": C @ W, "C.T@V": C.T @ V}
                res.update({f"grad{i}": gr for i, gr in enumerate(grads)})
                results[mode] = res
            for key, ref in results["single"].items():
                errors[f"{kname}/{local}/{key}"] = _rel(results["distributed"][key], ref)
                outs[f"{kname}/{local}/{key}"] = results["distributed"][key]
    return errors, _summary(outs)


def _algorithms(rank: int, world: int) -> tuple[dict[str, float], torch.Tensor]:
    """cg, the PLS, IterGP (+ LOVE), IterNCGP and one training step: distributed vs not."""
    X, y = _data(240)
    Xs, _ = _data(30, seed=5)
    noise = 0.05
    errors: dict[str, float] = {}
    outs: dict[str, torch.Tensor] = {}
    res: dict[str, dict[str, torch.Tensor]] = {}
    for mode in ("chunked", "distributed"):
        r: dict[str, torch.Tensor] = {}
        k = pn.kernels.Matern(nu=1.5, lengthscale=0.3)
        A = k.linop(X, backend=mode).add_diagonal(noise)
        r["cg"], _ = pn.cg(A, y, rtol=1e-12)
        solver = pn.ProbabilisticLinearSolver(
            policy=pn.policies.CG(), stopping=pn.stopping.MaxIterations(15)
        )
        belief, _ = solver.solve(A, y)
        r["pls.mean"] = belief.mean
        r["pls.inverse_approx@y"] = belief.inverse_approx @ y
        gp = pn.gp.IterGP(
            k, noise, pn.policies.CG(), pn.stopping.MaxIterations(40), backend=mode
        ).fit(X, y)
        post = gp.posterior(Xs)
        r["itergp.mean"], r["itergp.var"] = post.mean, post.var
        love = gp.posterior(Xs, method="love", rank=20)
        r["love.mean"], r["love.var"] = love.mean, love.var
        labels = (y > y.median()).to(F64)
        nc = pn.gp.IterNCGP(
            pn.kernels.RBF(lengthscale=0.4),
            likelihood=pn.likelihoods.Bernoulli(),
            policy=pn.policies.CG(),
            stopping=pn.stopping.MaxIterations(30),
            max_newton_steps=5,
            backend=mode,
        ).fit(X, labels)
        r["iterncgp.proba"] = nc.predict_proba(Xs)
        config = pn.gp.TrainingConfig(
            solver="cg", estimator="standard", steps=2, num_probes=4, tol=1e-10, backend=mode
        )
        fit = pn.gp.train_hyperparameters(X, y, config, generator=torch.Generator().manual_seed(3))
        r["train.lengthscale"] = fit.kernel.lengthscale.detach()
        r["train.outputscale"] = fit.kernel.outputscale.detach().reshape(1)
        r["train.noise"] = torch.tensor([fit.noise], dtype=F64)
        # SGLD's gradient (CG to a tiny threshold: a stopping decision at a threshold
        # could flip on rounding-level differences, the products themselves do not)
        params = pn.gp.bayes.LogHyperparameters(pn.kernels.RBF(lengthscale=1.0), 0.1)
        grad = pn.gp.bayes.LogMarginalGradient(
            params, X, y, method="cg", alpha=1e-9, backend=mode,
            generator=torch.Generator().manual_seed(4),
        )  # fmt: skip
        r["sgld.gradient"] = grad(params.initial()).grad
        res[mode] = r
    for key, ref in res["chunked"].items():
        errors[key] = _rel(res["distributed"][key], ref)
        outs[key] = res["distributed"][key]
    return errors, _summary(outs)


def _disagree(rank: int, world: int) -> str:
    X, _ = _data(50, seed=rank)  # a different X on each rank
    try:
        pn.kernels.RBF(lengthscale=0.5).linop(X, backend="distributed")
    except ValueError as e:
        return str(e)
    return "no error"


def _nan_kernel() -> pn.kernels.RBF:
    """A kernel whose hyperparameters went NaN (as in a diverged training run)."""
    k = pn.kernels.RBF()
    with torch.no_grad():
        next(k.parameters()).fill_(float("nan"))
    return k


def _kernels_differ(rank: int, world: int) -> dict[str, str]:
    """Disagreements the fingerprints must catch, on every rank, without a crash."""
    X, _ = _data(40)
    cases = {
        "nu": lambda: pn.kernels.Matern(nu=0.5 if rank == 0 else 2.5).linop(
            X, backend="distributed"
        ),
        "class": lambda: (pn.kernels.RBF() if rank == 0 else pn.kernels.Matern(nu=1.5)).linop(
            X, backend="distributed"
        ),
        "X2": lambda: pn.kernels.RBF().linop(
            X, None if rank == 0 else X[:20], backend="distributed"
        ),
        "nan": lambda: _nan_kernel().linop(X, backend="distributed"),
    }
    messages = {}
    for name, build in cases.items():
        try:
            build()
            messages[name] = "no error"
        except ValueError as e:
            messages[name] = str(e)
    return messages


def _resume_without_shared_files(rank: int, world: int, folder: str) -> torch.Tensor:
    """Rank 0's checkpoint (each rank names its own folder) resumes every rank."""
    X, y = _data(120)
    path = f"{folder}/rank{rank}.pt"  # only rank 0's is written and read

    config = pn.gp.TrainingConfig(solver="cg", estimator="standard", steps=2, num_probes=4,
                                  tol=1e-10, backend="distributed")  # fmt: skip

    class Stop(Exception):
        pass

    def interrupt(record) -> None:  # every rank stops after the first step
        raise Stop

    with pytest.raises(Stop):
        pn.gp.train_hyperparameters(X, y, config, generator=torch.Generator().manual_seed(3),
                                    checkpoint=path, callback=interrupt)  # fmt: skip
    restored: list[int] = []
    resumed = pn.gp.train_hyperparameters(
        X, y, config, generator=torch.Generator().manual_seed(3), checkpoint=path,
        on_resume=restored.append,
    )  # fmt: skip
    assert restored == [1] and len(resumed.log) == 2
    return resumed.kernel.lengthscale.detach()


def _runs_differ(rank: int, world: int, folder: str) -> dict[str, str]:
    """Training, a refused checkpoint and SGLD chains whose ranks would diverge."""
    X, y = _data(80)
    messages: dict[str, str] = {}
    config = pn.gp.TrainingConfig(solver="cg", estimator="standard", steps=1, num_probes=2,
                                  backend="distributed")  # fmt: skip

    def attempt(name: str, fn) -> None:
        try:
            fn()
            messages[name] = "no error"
        except ValueError as e:
            messages[name] = str(e)

    gen = lambda: torch.Generator().manual_seed(0)  # noqa: E731
    # other targets on rank 1
    attempt("targets", lambda: pn.gp.train_hyperparameters(X, y + rank, config, generator=gen()))
    # a damaged checkpoint that only rank 0 reads
    bad = f"{folder}/damaged.pt"
    if rank == 0:
        with open(bad, "wb") as fh:
            fh.write(b"not a checkpoint")
    torch.distributed.barrier()
    attempt("checkpoint", lambda: pn.gp.train_hyperparameters(X, y, config, generator=gen(),
                                                               checkpoint=bad))  # fmt: skip
    # SGLD: other data on rank 1; then chain checkpoints in per-rank folders
    chain = pn.gp.bayes.ChainConfig(gradient="cg", iterations=2, subset=40, backend="distributed",
                                    checkpoint_every=1)  # fmt: skip
    attempt("chain run", lambda: pn.gp.bayes.sample_hyperparameters(
        X, y + rank, chain, chains=1, processes=1, generator=gen()))  # fmt: skip
    prefix = f"{folder}/rank{rank}/run"
    pn.gp.bayes.sample_hyperparameters(X, y, chain, chains=1, processes=1, generator=gen(),
                                       checkpoint=prefix)  # fmt: skip
    attempt("chain checkpoint", lambda: pn.gp.bayes.sample_hyperparameters(
        X, y, chain, chains=1, processes=1, generator=gen(), checkpoint=prefix))  # fmt: skip
    return messages


def _one_rank_fails(rank: int, world: int) -> None:
    X, _ = _data(50)
    K = pn.kernels.RBF(lengthscale=0.5).linop(X, backend="distributed")
    if rank == 1:
        raise RuntimeError("rank 1 fails before its product")
    K @ torch.ones(50, dtype=F64)  # rank 0 waits in all_gather for a rank that is gone


@pytest.mark.slow
def test_kernel_products_and_gradients_equal_one_process() -> None:
    results = run_ranks(_products, 2, timeout=60)
    (errors, summary0), (_, summary1) = results
    bad = {key: err for key, err in errors.items() if not err <= REL_PRODUCTS}
    assert not bad, bad
    assert torch.equal(summary0, summary1)  # the ranks agree bit for bit


@pytest.mark.slow
def test_algorithms_equal_one_process() -> None:
    results = run_ranks(_algorithms, 2, timeout=120)
    (errors, summary0), (_, summary1) = results
    assert set(errors) >= {"cg", "pls.mean", "itergp.var", "love.var", "iterncgp.proba",
                           "train.lengthscale", "sgld.gradient"}  # fmt: skip
    bad = {key: err for key, err in errors.items() if not err <= REL}
    assert not bad, bad
    assert torch.equal(summary0, summary1)


def test_ranks_with_different_inputs_are_refused_by_name() -> None:
    messages = run_ranks(_disagree, 2, timeout=30)
    for message in messages:
        assert "ranks [1] hold another X1 than rank 0" in message


def test_other_kernels_inputs_and_nan_hyperparameters_are_refused_on_every_rank() -> None:
    for messages in run_ranks(_kernels_differ, 2, timeout=30):
        assert "ranks [1] hold another kernel than rank 0" in messages["nu"]
        assert "ranks [1] hold another kernel than rank 0" in messages["class"]
        assert "ranks [1] hold another X2 than rank 0" in messages["X2"]
        assert "hyperparameters are not finite on ranks [0, 1]" in messages["nan"]


def test_every_rank_resumes_from_rank_0s_checkpoint(tmp_path) -> None:
    resumed = run_ranks(_resume_without_shared_files, 2, args=(str(tmp_path),), timeout=60)
    assert torch.equal(resumed[0], resumed[1])
    assert (tmp_path / "rank0.pt").exists() and not (tmp_path / "rank1.pt").exists()
    X, y = _data(120)
    config = pn.gp.TrainingConfig(solver="cg", estimator="standard", steps=2, num_probes=4,
                                  tol=1e-10)  # fmt: skip
    single = pn.gp.train_hyperparameters(X, y, config, generator=torch.Generator().manual_seed(3))
    assert _rel(resumed[0], single.kernel.lengthscale.detach()) <= REL


@pytest.mark.slow
def test_runs_that_would_diverge_are_refused_on_every_rank(tmp_path) -> None:
    for messages in run_ranks(_runs_differ, 2, args=(str(tmp_path),), timeout=60):
        assert (
            "rank 1 runs another training than rank 0; it differs in: data" in (messages["targets"])
        )
        assert "rank 0 could not resume from" in messages["checkpoint"]
        assert "ranks [1] hold another run (data, settings, chain seeds)" in messages["chain run"]
        assert "ranks [1] hold another checkpoint" in messages["chain checkpoint"]


def test_whole_matrix_paths_are_refused_with_the_distributed_backend() -> None:
    with pytest.raises(ValueError, match="use an iterative solver"):
        pn.gp.TrainingConfig(solver="cholesky", estimator="exact", backend="distributed")
    with pytest.raises(ValueError, match="use SGLD"):
        pn.gp.bayes.ChainConfig(sampler="mh", backend="distributed")
    with pytest.raises(ValueError, match="use SGLD"):
        pn.gp.bayes.ChainConfig(gradient="exact", backend="distributed")
    X, _ = _data(10)
    with pytest.raises(ValueError, match="local_backend applies to"):
        pn.kernels.RBF().linop(X, backend="chunked", local_backend="dense")


def test_a_failing_rank_ends_the_run_with_a_clear_error() -> None:
    with pytest.raises(RankFailure) as info:
        run_ranks(_one_rank_fails, 2, timeout=20, deadline=120)
    failures = info.value.failures
    assert "rank 1 fails before its product" in failures[1]
    assert 'backend="distributed": all_gather of a kernel product failed on rank 0' in failures[0]


def test_without_a_process_group_the_error_says_how_to_start_one() -> None:
    X, _ = _data(10)
    with pytest.raises(RuntimeError, match="initialised default process group"):
        pn.kernels.RBF(lengthscale=0.5).linop(X, backend="distributed")
    with pytest.raises(RuntimeError, match="initialised default process group"):
        pn.gp.train_hyperparameters(
            X, X[:, 0], pn.gp.TrainingConfig(steps=1, backend="distributed"),
            generator=torch.Generator().manual_seed(0),
        )  # fmt: skip


def test_partition_is_balanced_and_contiguous() -> None:
    from pnsolve.kernels.backends.collectives import partition

    for n in (0, 1, 7, 300, 301):
        for world in (1, 2, 3, 8):
            parts = partition(n, world)
            assert parts[0][0] == 0 and parts[-1][1] == n
            assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))
            sizes = [b - a for a, b in parts]
            assert max(sizes) - min(sizes) <= 1
