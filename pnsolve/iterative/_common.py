"""Shared pieces of the kernel-system solvers: argument checks, normalisation, bookkeeping."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction

import torch

from .._core.stop_reason import StopReason
from .._core.validation import check_finite, check_same_device, check_same_dtype, check_tensor
from .info import KernelSolveInfo
from .system import KernelSystem

__all__ = [
    "DEFAULT_MAX_EPOCHS",
    "Normalised",
    "Tracker",
    "check_count",
    "check_solve_args",
    "check_tol",
    "column_major",
    "column_norms",
    "confirm_below",
    "excess",
    "true_residual",
]

#: Safety cap of a solve called with ``max_epochs=None`` *and* ``max_iterations=None``:
#: iterations worth at most this many epochs (1000 CG iterations, ``1000·n/b`` alternating-
#: projections or SGD iterations), a guard against tolerances that are never met (it
#: replaces the ``10·n`` epochs of SciPy's CG default, about 8 h per solve for SGD at
#: ``γ = 1`` on ``n = 3000``). A solve stopped by it reports ``converged=False``.
DEFAULT_MAX_EPOCHS = 1000


def check_tol(value: object, name: str) -> float:
    """Require a finite number ``> 0``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a positive float, got {type(value).__name__}")
    if not (0 < value < math.inf):
        raise ValueError(f"{name} must be positive and finite, got {value}")
    return float(value)


def check_count(value: object, name: str) -> int | None:
    """Require ``None`` or an int ``≥ 0``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int or None, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be non-negative, got {value}")
    return value


def confirm_below(dtype: torch.dtype, tol: float, tol_probes: float) -> bool:
    """Whether a tolerance is so tight (``< √eps``) that convergence needs confirming.

    Convergence is then confirmed on the true residual: recursively updated residuals
    drift from ``b − K̂u`` by rounding.
    """
    return min(tol, tol_probes) < math.sqrt(torch.finfo(dtype).eps)


def check_solve_args(
    system: object, B: object, x0: object, max_epochs: object
) -> tuple[KernelSystem, torch.Tensor, torch.Tensor | None, float | None]:
    """Validate the arguments of ``solve``; errors name the argument."""
    if not isinstance(system, KernelSystem):
        raise TypeError(
            f"system must be a pnsolve.iterative.KernelSystem, got {type(system).__name__}"
        )
    B = _check_block(system, B, "B")
    if B.shape[1] < 1:
        raise ValueError(f"B must have at least one column, got shape {tuple(B.shape)}")
    if x0 is not None:
        x0 = _check_block(system, x0, "x0")
        if x0.shape != B.shape:
            raise ValueError(f"x0 must have the shape of B {tuple(B.shape)}, got {tuple(x0.shape)}")
    if max_epochs is not None:
        if isinstance(max_epochs, bool) or not isinstance(max_epochs, int | float):
            raise TypeError(f"max_epochs must be a number or None, got {type(max_epochs).__name__}")
        if not (0 < max_epochs < math.inf):
            raise ValueError(f"max_epochs must be positive and finite, got {max_epochs}")
    return system, B, x0, max_epochs


def _check_block(system: KernelSystem, V: object, name: str) -> torch.Tensor:
    V = check_tensor(V, name)
    if V.ndim != 2 or V.shape[0] != system.n:
        raise ValueError(f"{name} must have shape (n, k) = ({system.n}, k), got {tuple(V.shape)}")
    check_same_dtype(V, system.dtype, name, "the system's X")
    check_same_device(V, system.device, name, "the system's X")
    return check_finite(V.detach(), name)


class Normalised:
    """The normalised problem ``K̂ Ũ = B̃`` with ``b̃_j = b_j / ‖b_j‖``.

    Lin et al. divide by ``‖b_j‖ + ε`` to protect zero columns; here a zero column
    (``‖b_j‖`` below the smallest normal number of the dtype) gets scale ``1`` instead,
    so dividing ``x0`` by it cannot overflow. A column with ``b_j = 0`` also starts at
    its exact solution ``0`` whatever ``x0`` holds (as :func:`pnsolve.cg` does): it
    costs nothing and is converged from the start.

    Attributes
    ----------
    B
        ``B̃``, shape ``(n, k)``.
    U0
        Normalised starting point, shape ``(n, k)`` (zeros for a cold start).
    scale
        ``‖b_j‖`` (``1`` for a zero column), shape ``(k,)``.
    zero
        Which columns of ``B`` are zero, bool, shape ``(k,)``.
    warm
        Whether the starting point is not all zeros (then the initial residual costs a
        product; for a cold start it is ``B̃``, for free).
    """

    def __init__(self, B: torch.Tensor, x0: torch.Tensor | None) -> None:
        norms = torch.linalg.vector_norm(B, dim=0)
        zero = norms < torch.finfo(B.dtype).tiny
        self.scale = torch.where(zero, torch.ones_like(norms), norms)
        self.zero = zero
        self.B = B / self.scale
        if x0 is None:
            self.U0 = torch.zeros_like(B)
        else:
            self.U0 = torch.where(zero, torch.zeros_like(x0), x0 / self.scale)
        self.warm = bool((self.U0 != 0).any())


class Tracker:
    """Budget, set-up accounting, tolerances and history of one solve (inside ``solve``).

    The budget caps *iterations*, as in Algorithms 1–3 of Lin et al.: with ``T =
    max_epochs`` and ``c`` the epochs of one iteration (``1`` for CG, ``b/n`` for
    alternating projections and SGD), at most ``⌊T / c⌋`` iterations run (a quotient
    within rounding of an integer counts as that integer, so ``T = 2·b/n`` computed in
    floating point allows 2 iterations). Set-up work (anything charged inside
    :meth:`setup`, or assigned to :attr:`setup_entries`) is counted in the result but
    not capped. :meth:`record` keeps the rows of ``info.residual_norms`` (row 0 from
    :meth:`initial`) and the history.
    """

    def __init__(
        self,
        system: KernelSystem,
        k: int,
        tol: float,
        tol_probes: float,
        *,
        max_epochs: float | None,
        max_iterations: int | None,
        iteration_epochs: Fraction,
        what: str,
    ) -> None:
        self.system = system
        self.n2 = system.n * system.n
        self.start, self.start_products = system.entries, system.products
        self.setup_entries = 0
        #: Whether the iteration cap comes from the caller's ``max_epochs`` (``BUDGET``).
        self.budgeted = False
        if max_epochs is None and max_iterations is None:
            max_epochs = DEFAULT_MAX_EPOCHS
        else:
            self.budgeted = max_epochs is not None
        cap = math.inf if max_iterations is None else max_iterations
        if max_epochs is not None:
            affordable = _iterations_within(max_epochs, iteration_epochs)
            if affordable == 0:
                raise ValueError(
                    f"max_epochs={max_epochs} allows no iteration: one iteration of {what} "
                    f"costs {float(iteration_epochs):.4g} epochs (the budget caps iterations, "
                    "as in Lin et al.'s Algorithms 1–3)"
                )
            self.budgeted &= affordable <= cap
            cap = min(cap, affordable)
        #: Most iterations this solve may run.
        self.max_iterations = int(cap)
        self.tol, self.tol_probes = tol, tol_probes
        #: Per-column tolerances, shape ``(k,)``.
        self.tols = torch.full((k,), tol_probes, dtype=system.dtype, device=system.device)
        self.tols[0] = tol
        self.history: list[tuple[float, float, float]] = []
        self.rows: list[torch.Tensor] = []

    @property
    def spent(self) -> int:
        """Entries charged since the solve began."""
        return self.system.entries - self.start

    def can_iterate(self, iteration: int) -> bool:
        """Whether iteration number ``iteration`` (0-based) is within the cap."""
        return iteration < self.max_iterations

    @contextmanager
    def setup(self) -> Iterator[None]:
        """Charge what the block computes to the set-up, outside the iteration budget."""
        before = self.system.entries
        try:
            yield
        finally:
            self.setup_entries += self.system.entries - before

    def epochs(self) -> float:
        """Epochs spent so far (iterations and set-up)."""
        return self.spent / self.n2

    @staticmethod
    def summary(norms: torch.Tensor) -> tuple[float, float]:
        """``(mean-column norm, average probe norm)`` of per-column norms ``(k,)``."""
        mean = float(norms[0])
        probes = float(norms[1:].mean()) if norms.numel() > 1 else math.nan
        return mean, probes

    def met(self, norms: torch.Tensor) -> bool:
        """Whether both tolerances hold (the probe one vacuously when ``k == 1``)."""
        mean, probes = self.summary(norms)
        return mean <= self.tol and (math.isnan(probes) or probes <= self.tol_probes)

    def initial(self, norms: torch.Tensor) -> None:
        """Row 0 of ``info.residual_norms``: the norms before the first iteration."""
        self.rows = [norms]

    def true_residual(
        self, problem: Normalised, U: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``R = B̃ − K̂U`` (:func:`column_major`, one set-up epoch) and its column norms."""
        with self.setup():
            R = column_major(true_residual(self.system, problem, U))
        return R, column_norms(R)

    def initial_residual(
        self, problem: Normalised, U: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The starting residual (``B̃`` when cold) and its norms, recorded as row 0."""
        if problem.warm:
            R, norms = self.true_residual(problem, U)
        else:
            R = column_major(problem.B)
            norms = column_norms(R)
        self.initial(norms)
        return R, norms

    def record(self, norms: torch.Tensor) -> None:
        """Append ``(epochs, mean, probes)`` to the history and ``norms`` to the rows."""
        self.history.append((self.epochs(), *self.summary(norms)))
        self.rows.append(norms)

    def result(
        self,
        problem: Normalised,
        U: torch.Tensor,
        iterations: int,
        norms: torch.Tensor,
        reason: StopReason | None = None,
    ) -> tuple[torch.Tensor, KernelSolveInfo]:
        """Undo the normalisation: ``(solution, info)``.

        ``reason`` is why a solve that did not meet its tolerances ended early
        (``STAGNATION``, ``BREAKDOWN``); ``None`` for the cap (``BUDGET`` when the
        caller's ``max_epochs`` set it, else ``MAX_ITERATIONS``).
        """
        mean, probes = self.summary(norms)
        converged = self.met(norms)
        if converged:
            reason = StopReason.ZERO_RHS if bool(problem.zero.all()) else StopReason.CONVERGED
        elif reason is None:
            reason = StopReason.BUDGET if self.budgeted else StopReason.MAX_ITERATIONS
        info = KernelSolveInfo(
            iterations=iterations,
            products=self.system.products - self.start_products,
            residual_norms=torch.stack(self.rows),
            stop_reason=reason,
            epochs=self.epochs(),
            setup_epochs=self.setup_entries / self.n2,
            residual_norm_mean=mean,
            residual_norm_probes=probes,
            converged=converged,
            history=tuple(self.history),
        )
        return U * problem.scale, info


def _iterations_within(max_epochs: float, iteration_epochs: Fraction) -> int:
    """``⌊max_epochs / iteration_epochs⌋``, exact, with rounding-level shortfalls forgiven."""
    quotient = Fraction(max_epochs) / iteration_epochs
    nearest = round(quotient)
    if abs(quotient - nearest) <= 4 * torch.finfo(torch.float64).eps * quotient:
        return int(nearest)
    return math.floor(quotient)


def column_major(R: torch.Tensor) -> torch.Tensor:
    """A copy of ``R`` ``(n, k)`` stored column by column.

    The storage is the transpose of a contiguous ``(k, n)`` tensor, the layout the
    solvers keep their residuals in: per-column norms, AP's block sums and its update
    ``R −= K̂[:, I] Δ`` (which the dense system returns in this layout) then run over
    contiguous memory (measured: norms 4× faster at ``n = 1000``, ``k = 65``).
    """
    # clone, not .contiguous(): a one-column R is already "contiguous" in both layouts,
    # and .contiguous() would return it uncopied (the solvers then overwrite their B̃)
    return R.mT.clone(memory_format=torch.contiguous_format).mT


def column_norms(R: torch.Tensor) -> torch.Tensor:
    """Euclidean norms of the columns of ``R`` ``(n, k)``; shape ``(k,)``."""
    return torch.linalg.vector_norm(R, dim=0)


def true_residual(system: KernelSystem, problem: Normalised, U: torch.Tensor) -> torch.Tensor:
    """``B̃ − K̂ U`` (one product: one epoch; callers charge it to the set-up)."""
    return problem.B - system.matmul(U)


def excess(track: Tracker, norms: torch.Tensor) -> float:
    """``max(mean / tol, probes / tol_probes)``: ``≤ 1`` iff both tolerances hold."""
    mean, probes = track.summary(norms)
    return max(mean / track.tol, 0.0 if math.isnan(probes) else probes / track.tol_probes)
