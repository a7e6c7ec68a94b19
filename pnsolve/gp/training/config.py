"""Configuration of an iterative hyperparameter-training run (Lin et al., 2024)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .._checks import (
    check_backend,
    check_bool,
    check_choice,
    check_int,
    check_nonnegative_number,
    check_positive_int,
    check_positive_number,
)

__all__ = ["ESTIMATORS", "SOLVERS", "TrainingConfig"]

SOLVERS = ("cholesky", "cg", "ap", "sgd")
ESTIMATORS = ("exact", "standard", "pathwise")


@dataclass(frozen=True)
class TrainingConfig:
    """Everything that defines a training trajectory (stored in checkpoints).

    Parameters
    ----------
    solver
        ``"cholesky"`` (dense reference), ``"cg"`` (pivoted-Cholesky preconditioned
        conjugate gradients), ``"ap"`` (alternating projections) or ``"sgd"``.
    estimator
        ``"exact"`` (Cholesky + autograd; only with ``solver="cholesky"``),
        ``"standard"`` (Hutchinson probes) or ``"pathwise"`` (prior-sample probes).
    warm_start
        Start every solve at the previous step's solutions and keep the probe draws
        fixed across steps (without it the draws are renewed every step).
    steps
        Adam steps on the softplus-parametrised hyperparameters.
    lr
        Adam learning rate (Lin et al.: 0.1 for ``n < 50k``, 0.03 above).
    epochs_budget
        Maximum solver epochs per step (one epoch = every entry of ``K̂`` evaluated
        once); ``None``: solve to ``tol``.
    tol, tol_probes
        Relative residual tolerances of the mean system and of the probe systems
        (``tol_probes=None``: same as ``tol``). Lin et al.: 0.01.
    num_probes
        Probe vectors ``s`` (Lin et al.: 64).
    num_features
        Random Fourier features of the pathwise prior samples.
    preconditioner_rank
        Pivoted-Cholesky rank for CG (Lin et al.: 100).
    block_size
        Alternating-projections block size (Lin et al.: 1000).
    batch_size, sgd_lr, momentum
        SGD minibatch size, learning rate and momentum (Lin et al.: 500, data-set
        dependent, 0.9); ``sgd_lr=None`` uses the solver's default.
    init
        ``"constant"``: every hyperparameter starts at ``init_value`` (Lin et al., small
        ``n``); ``"heuristic"``: average of exact fits on nearest-neighbour subsets
        around random centroids (Lin et al., large ``n``; see
        :func:`~pnsolve.gp.training.initial_hyperparameters`).
    init_value
        Start value of every hyperparameter for ``init="constant"``.
    init_subset, init_centroids, init_steps
        The heuristic's nearest-neighbour subset size (Lin et al.: 10 000; the default
        2 000 keeps each exact fit at seconds on a CPU), number of centroids (Lin
        et al.: 10) and Adam steps of each exact fit.
    min_noise
        Floor added to the softplus noise variance.
    max_step_residual
        Skip the Adam update of a step whose solve stopped unconverged with a relative
        residual (mean or probes) above this value: its gradient estimate is garbage
        (above 1 the zero vector would be a better solution) and one such step can
        stall Adam for the rest of the run. The step is logged with ``skipped=True``;
        with warm starts the next solve continues from its solutions, so progress
        accumulates. Without warm starts the next step solves the same system again
        (fresh probes, same hyperparameters), so a budget too small for that system
        skips every remaining step: the run stays at the last hyperparameters whose
        solve succeeded (measured: CG, standard estimator, cold, 10 epochs per step on
        1000 rows of pol: 50 of 100 steps skipped). ``None`` applies every update (the
        loop of Lin et al.).
    backend
        Kernel-matrix backend of the solver's products (``"auto"``, ``"dense"``,
        ``"chunked"``, ``"keops"``) or ``"distributed"``: inside an initialised
        torch.distributed default group (e.g. under ``torchrun``), every product and the
        gradient's kernel rows are partitioned over the ranks, each rank runs the same
        loop on the same data and generator seed and takes identical steps (see
        the "Scaling out" docs page). Minibatch accesses of ``"ap"``/``"sgd"`` stay local.
    """

    solver: str = "cg"
    estimator: str = "pathwise"
    warm_start: bool = True
    steps: int = 100
    lr: float = 0.1
    epochs_budget: float | None = None
    tol: float = 0.01
    tol_probes: float | None = None
    num_probes: int = 64
    num_features: int = 2000
    preconditioner_rank: int = 100
    block_size: int = 1000
    batch_size: int = 500
    sgd_lr: float | None = None
    momentum: float = 0.9
    init: str = "constant"
    init_value: float = 1.0
    init_subset: int = 2000
    init_centroids: int = 10
    init_steps: int = 100
    min_noise: float = 1e-6
    max_step_residual: float | None = 1.0
    backend: str = "auto"

    def __post_init__(self) -> None:
        check_choice(self.solver, "solver", SOLVERS)
        check_choice(self.estimator, "estimator", ESTIMATORS)
        if self.estimator == "exact" and self.solver != "cholesky":
            raise ValueError(
                "estimator='exact' differentiates a Cholesky factorisation and runs no "
                f"iterative solves: use solver='cholesky' (got solver={self.solver!r})"
            )
        check_bool(self.warm_start, "warm_start")
        for name in (
            "steps",
            "num_probes",
            "num_features",
            "block_size",
            "batch_size",
            "init_subset",
            "init_centroids",
            "init_steps",
        ):
            check_positive_int(getattr(self, name), name)
        check_int(self.preconditioner_rank, "preconditioner_rank", minimum=0)
        for name in ("lr", "tol", "init_value", "min_noise"):
            check_positive_number(getattr(self, name), name)
        for name in ("epochs_budget", "tol_probes", "sgd_lr", "max_step_residual"):
            if getattr(self, name) is not None:
                check_positive_number(getattr(self, name), name)
        if not check_nonnegative_number(self.momentum, "momentum") < 1:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum!r}")
        if self.solver == "sgd" and self.epochs_budget is None and self.sgd_lr is None:
            raise ValueError(
                "solver='sgd' to tolerance with the conservative default learning rate can "
                "take thousands of epochs per step: give epochs_budget or a tuned sgd_lr"
            )
        check_backend(self.backend)
        if self.backend == "distributed" and self.solver == "cholesky":
            raise ValueError(
                'backend="distributed" splits kernel products over ranks; solver="cholesky" '
                "forms and factors K̂ on every rank instead: use an iterative solver"
            )
        check_choice(self.init, "init", ("constant", "heuristic"))

    def as_dict(self) -> dict[str, object]:
        """Plain dictionary (for checkpoints and logs)."""
        return asdict(self)
