"""Several SGLD or Metropolis–Hastings chains, in parallel processes, with checkpoints."""

from __future__ import annotations

import copy
import math
import multiprocessing as mp
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..._core import random as rnd
from ..._core.precision import full_float32
from ..._core.validation import check_positive_int, require_generator
from ...kernels.backends.collectives import is_lead
from ...kernels.backends.rank_agreement import ranks_agree_on
from ...kernels.rbf import RBF
from .._checks import check_inputs, check_targets
from .chain_config import SAMPLERS, ChainConfig
from .checkpoints import chain_path, file_digest, load_chain, run_fingerprint, save_chain
from .gradient import LogMarginalGradient
from .hyperparameters import LogHyperparameters
from .map_estimate import LaplaceFit, laplace_preconditioner, log_posterior
from .mh import MetropolisHastings
from .sgld import SGLD, SGLDState

__all__ = ["SAMPLERS", "ChainConfig", "HyperSamples", "sample_hyperparameters"]


@dataclass
class HyperSamples:
    """Posterior samples of the log-hyperparameters from several chains.

    Attributes
    ----------
    samples
        Kept draws, float64, shape ``(chains, draws, p)`` (log space): SGLD's after the
        latest chain froze its step size, MH's after burn-in.
    names
        Parameter names, length ``p``.
    all_samples
        Every iterate, shape ``(chains, iterations, p)``.
    start
        Index of the first kept iterate.
    frozen
        SGLD: whether every chain froze its step size within the first half of the run
        (if not, the kept draws are the second half, not certified to be in the Langevin
        phase). MH: whether the run went past the burn-in (only a partial run, see
        ``until``, can stop inside it; its kept draws are then its second half).
    laplace
        The MAP/Laplace fit on the subset (``M`` and the chains' starting distribution).
    seconds
        Wall time of each chain.
    products
        Block products with ``K̂`` per chain (SGLD).
    acceptance
        MH: acceptance rate after burn-in per chain.
    dropped
        ``(chain index, message)`` of each chain that diverged (an ``ArithmeticError``:
        a heavy-tailed gradient estimate can throw an SGLD chain out of the region
        where ``K̂(θ)`` is numerically positive definite). Those chains are left out of
        every other field; the others are kept. Empty when none diverged.
    """

    samples: torch.Tensor
    names: tuple[str, ...]
    all_samples: torch.Tensor
    start: int
    frozen: bool
    laplace: LaplaceFit
    seconds: list[float]
    products: list[int]
    acceptance: list[float]
    dropped: list[tuple[int, str]] = field(default_factory=list)


@full_float32
def sample_hyperparameters(
    X: torch.Tensor,
    y: torch.Tensor,
    config: ChainConfig,
    *,
    chains: int,
    generator: torch.Generator,
    params: LogHyperparameters | None = None,
    processes: int | None = None,
    checkpoint: str | Path | None = None,
    progress: Callable[[int], object] | None = None,
    until: int | None = None,
) -> HyperSamples:
    """Run ``chains`` chains of SGLD (or MH) on ``p(θ | y, X)`` (Filippone & Engler 2015, §5).

    The chains start from ``N(MAP, M)`` of a Laplace fit on a random subset (dispersed
    enough for the PSRF), use ``M`` as SGLD's preconditioner (MH's proposal
    covariance), and run in ``processes`` worker processes, each chain with its own
    generator seeded from ``generator``. With ``checkpoint``, every chain saves its state
    every ``config.checkpoint_every`` iterations to ``<checkpoint>.chain<c>.pt``; a
    later call with the same data, settings and seed resumes from those files and
    produces chains identical to an uninterrupted run.

    Parameters
    ----------
    X, y
        Inputs ``(n, d)`` and targets ``(n,)``, float64 (standardised, as the CLI does).
    config
        :class:`ChainConfig`.
    chains
        ``C ≥ 1`` (the PSRF needs 2).
    generator
        The only source of randomness (subset, starting points, chain seeds).
    params
        The model (default: the paper's ``σ exp(−τ‖x − x'‖²) + λδ``, parametrization
        ``"log_tau"``, with Gamma(1, 1) priors, starting at outputscale 1, lengthscale 1,
        noise 0.1).
    processes
        Worker processes (default ``min(chains, cpu count)``), each with one torch
        thread. ``processes=1`` runs the chains in this process (no spawning); several
        processes are spawned (scripts need an ``if __name__ == "__main__":`` guard).
        Either way every chain works on its own copy of ``params`` (the caller's is
        left as it was) and a run is reproduced bit for bit, whatever ``processes``
        (a checkpointed run resumes into the same draws).
    checkpoint
        Path prefix of the per-chain checkpoint files.
    progress
        Called with the number of iterations done since the last call (progress bars).
    until
        Stop every chain after this many of its ``config.iterations`` steps (default: all
        of them). The schedule is still the full run's, so a long run can be taken in
        pieces: with ``checkpoint``, a later call with a larger ``until`` continues
        from the files, and the draws equal one uninterrupted run's first ``until``
        iterations.

    Returns
    -------
    HyperSamples
        A chain that diverges (``ArithmeticError``) is dropped and listed in
        ``dropped``; the run fails only if every chain diverges.

    Raises
    ------
    TypeError
        ``X`` or ``y`` not a tensor or array of a floating dtype (NumPy is converted),
        ``config`` not a :class:`ChainConfig`.
    ValueError
        ``X`` not ``(n, d)``, ``y`` not ``(n,)`` with ``X``'s dtype, NaN or Inf in either.
    ArithmeticError
        If every chain diverged.
    """
    X = check_inputs(X, "X")
    y = check_targets(y, X)
    if not isinstance(config, ChainConfig):
        raise TypeError(f"config must be a ChainConfig, got {type(config).__name__}")
    generator = require_generator(generator)
    chains = check_positive_int(chains, "chains")
    stop = config.iterations if until is None else check_positive_int(until, "until")
    if stop > config.iterations:
        raise ValueError(f"until must be at most config.iterations={config.iterations}, got {stop}")
    if params is None:
        params = LogHyperparameters(RBF(lengthscale=1.0), 0.1, parametrization="log_tau")
    # the fit moves the kernel's parameters in place and starts from their values: work
    # on a copy, so the caller's model is left as it was and a second call is the same
    params = copy.deepcopy(params)
    fit = laplace_preconditioner(params, X, y, subset=config.subset, generator=generator)
    L = torch.linalg.cholesky(fit.M)  # fit.theta and fit.M are on X's device
    f64, device = torch.float64, X.device
    starts = [
        fit.theta + L @ rnd.randn(params.dim, generator=generator, dtype=f64, device=device)
        for _ in range(chains)
    ]
    g = generator  # the chain seeds: host ints, drawn on the generator's device
    seeds = [
        int(torch.randint(0, 2**62, (1,), generator=g, device=g.device)) for _ in range(chains)
    ]
    tag = run_fingerprint(X, y, config, params, seeds)
    if config.backend == "distributed":
        ranks_agree_on(tag, "run (data, settings, chain seeds)")
    jobs = [
        _Job(X, y, config, params, fit.M, starts[c], seeds[c], chain_path(checkpoint, c), tag, stop)
        for c in range(chains)
    ]
    workers = (
        min(chains, mp.cpu_count())
        if processes is None
        else check_positive_int(processes, "processes")
    )
    if config.backend == "distributed":  # the ranks run the chains in turn, products split
        if processes not in (None, 1):
            raise ValueError(f'processes must be 1 with backend="distributed", got {processes}')
        workers = 1
    results = _run_jobs(jobs, workers, progress)
    return _collect(results, params, config, fit, stop)


@dataclass
class _Job:
    X: torch.Tensor
    y: torch.Tensor
    config: ChainConfig
    params: LogHyperparameters
    M: torch.Tensor
    start: torch.Tensor
    seed: int
    checkpoint: Path | None
    tag: str
    stop: int


@dataclass
class _ChainResult:
    samples: torch.Tensor
    frozen_at: int | None
    seconds: float
    products: int
    acceptance: float
    error: str | None = None


def _run_jobs(
    jobs: list[_Job], workers: int, progress: Callable[[int], object] | None
) -> list[_ChainResult]:
    """Run every chain on one torch thread.

    In this process for ``workers == 1``, else in spawned worker processes (scripts
    calling this then need the usual ``if __name__ == "__main__":`` guard).
    """
    if workers == 1:  # in this process (no spawning: works from scripts without a guard)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return [_chain(job, progress) for job in jobs]
        finally:
            torch.set_num_threads(threads)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()  # handed to the workers when they start (initargs)
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=_start_worker,
        initargs=(os.getpid(), queue),
    ) as pool:  # fmt: skip
        futures = [pool.submit(_chain, job, _report_progress) for job in jobs]
        while not all(f.done() for f in futures):
            _drain(queue, progress, timeout=0.2)
        while _drain(queue, progress, timeout=0.0):
            pass
        return [f.result() for f in futures]


#: the worker's channel for progress reports to the parent (set by :func:`_start_worker`)
_PROGRESS: list[Any] = []
#: seconds between a worker's checks that its parent is alive
PARENT_POLL_SECONDS = 0.5


def _start_worker(parent: int, queue: Any) -> None:
    """Initialise a chain worker: one torch thread, the progress queue, a parent watch.

    A worker whose parent died (killed, e.g. by a timeout) exits within
    :data:`PARENT_POLL_SECONDS` instead of running its chain on, orphaned: the
    operating system gives it a new parent, which a daemon thread notices.
    """
    torch.set_num_threads(1)
    _PROGRESS[:] = [queue]

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="pnsolve-parent-watch", daemon=True).start()


def _report_progress(count: int) -> None:
    """A worker's progress report (``count`` more iterations done) to its parent."""
    _PROGRESS[0].put(count)


def _drain(queue, progress, timeout: float) -> bool:
    """Pass one progress report on, if there is one (``True`` if there was)."""
    import queue as queue_module

    try:
        count = queue.get(timeout=timeout) if timeout else queue.get_nowait()
    except queue_module.Empty:
        return False
    if progress is not None:
        progress(count)
    return True


def _chain(job: _Job, report: Callable[[int], object] | None) -> _ChainResult:
    """One chain, resumed from its checkpoint when one matches."""
    # A private copy of the model: the samplers move its kernel's parameters in place,
    # and the jobs' tensors arrive in worker processes through shared memory (torch's
    # multiprocessing pickler), so without the copy chains running at the same time
    # would overwrite each other's parameters mid-product (and in this process, the
    # caller's kernel would be left at the last draw).
    cfg, params = job.config, copy.deepcopy(job.params)
    # CPU generators: the same chain whatever the data's device (pnsolve._core.random)
    g_noise = torch.Generator(device="cpu").manual_seed(job.seed)
    g_grad = torch.Generator(device="cpu").manual_seed(job.seed + 1)
    if cfg.sampler == "sgld":
        gradient = LogMarginalGradient(
            params, job.X, job.y, method=cfg.gradient, generator=g_grad,
            num_probes=cfg.num_probes, redraw_every=cfg.redraw_every,
            alpha=cfg.alpha_for(job.X.shape[0]), beta=cfg.beta, backend=cfg.backend,
            preconditioner_rank=cfg.preconditioner_rank,
        )  # fmt: skip
        sampler: SGLD | MetropolisHastings = SGLD(
            gradient, params.log_prior_grad, job.M, step_start=cfg.step_start,
            step_end=cfg.step_end, freeze_threshold=cfg.freeze_threshold,
            variance_batch=cfg.variance_batch,
        )  # fmt: skip
    else:
        gradient = None

        def density(theta: torch.Tensor) -> float:
            return log_posterior(params, job.X, job.y, theta)[0]

        sampler = MetropolisHastings(density, job.M, adapt=cfg.mh_burn_in)
    state = sampler.start(job.start, cfg.iterations)
    seconds = 0.0
    exists = job.checkpoint is not None and job.checkpoint.exists()
    if cfg.backend == "distributed":  # every rank reads the file: the same bytes, or stop
        content = file_digest(job.checkpoint) if job.checkpoint is not None and exists else None
        ranks_agree_on(content, f"checkpoint {job.checkpoint} (a file system all ranks share)")
    if exists:
        assert job.checkpoint is not None
        seconds = load_chain(job.checkpoint, job.tag, state, g_noise, g_grad, gradient)
    done = state.t
    while state.t < job.stop:
        t0 = time.perf_counter()
        count = min(cfg.checkpoint_every, job.stop - state.t)
        try:
            sampler.advance(state, count, g_noise)  # type: ignore[arg-type]
        except ArithmeticError as exc:  # the chain diverged: report it, keep the others
            if report is not None:
                report(job.stop - done)
            return _ChainResult(state.samples, None, seconds, 0, math.nan, error=str(exc))
        seconds += time.perf_counter() - t0
        if job.checkpoint is not None and is_lead(cfg.backend):  # distributed: rank 0
            save_chain(job.checkpoint, job.tag, state, g_noise, g_grad, gradient, seconds)
        if report is not None:
            report(state.t - done)
        done = state.t
    # a checkpoint from a longer run than ``until`` asks for: its first ``stop`` draws
    samples = state.samples[: min(state.t, job.stop)]
    if isinstance(state, SGLDState):
        frozen_at = state.frozen_at if (state.frozen_at or 0) <= job.stop else None
        return _ChainResult(samples, frozen_at, seconds, state.products, math.nan)
    # after burn-in; a partial run (``until``) still inside it: the whole run so far
    rate = state.acceptance_rate(cfg.mh_burn_in if state.t > cfg.mh_burn_in else 0)
    return _ChainResult(samples, None, seconds, 0, rate)


def _collect(
    results: list[_ChainResult], params, config: ChainConfig, fit: LaplaceFit, T: int
) -> HyperSamples:
    dropped = [(c, r.error) for c, r in enumerate(results) if r.error is not None]
    if len(dropped) == len(results):
        raise ArithmeticError(f"every chain diverged; chain 0: {dropped[0][1]}")
    results = [r for r in results if r.error is None]
    all_samples = torch.stack([r.samples for r in results])
    if config.sampler == "mh":
        # a partial run still inside the burn-in keeps its second half, not certified
        frozen = T > config.mh_burn_in
        start = config.mh_burn_in if frozen else T // 2
    else:
        frozen_at = [r.frozen_at for r in results]
        latest = max((f for f in frozen_at if f is not None), default=None)
        frozen = None not in frozen_at and latest is not None and latest <= T // 2
        start = latest if frozen and latest is not None else T // 2
    return HyperSamples(
        samples=all_samples[:, start:].clone(),
        names=params.names,
        all_samples=all_samples,
        start=start,
        frozen=frozen,
        laplace=fit,
        seconds=[r.seconds for r in results],
        products=[r.products for r in results],
        acceptance=[r.acceptance for r in results],
        dropped=dropped,
    )
