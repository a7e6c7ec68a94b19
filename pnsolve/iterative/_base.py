"""What the three kernel-system solvers share: ``solve``, its checks and its set-up."""

from __future__ import annotations

import abc
from fractions import Fraction
from typing import ClassVar

import torch

from .._core.validation import check_generator
from ._common import Normalised, Tracker, check_solve_args, check_tol
from .info import KernelSolveInfo
from .system import KernelSystem

__all__ = ["KernelSolverBase"]


class KernelSolverBase(abc.ABC):
    """Base of :class:`AlternatingProjections`, :class:`ConjugateGradients` and SGD.

    Subclasses are frozen dataclasses with the fields ``tol``, ``tol_probes`` and
    ``max_iterations``; they say what an iteration costs (:meth:`_iteration_size`) and
    implement :meth:`_solve`, which :meth:`solve` calls with the normalised problem and
    the bookkeeping of the solve.
    """

    tol: float
    tol_probes: float | None
    max_iterations: int | None
    #: What a randomised solver draws with its generator (then it requires one); ``None``
    #: for a deterministic solver, which accepts and ignores a generator.
    draws: ClassVar[str | None] = None

    def _check_tolerances(self) -> None:
        check_tol(self.tol, "tol")
        if self.tol_probes is not None:
            check_tol(self.tol_probes, "tol_probes")

    def solve(
        self,
        system: KernelSystem,
        B: torch.Tensor,
        x0: torch.Tensor | None = None,
        *,
        max_epochs: float | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, KernelSolveInfo]:
        """Solve ``K̂ U = B``.

        Parameters
        ----------
        system
            The :class:`~pnsolve.iterative.KernelSystem`.
        B
            Right-hand sides, shape ``(n, k)``: column 0 the mean system, the others probes.
        x0
            Warm start, shape ``(n, k)`` (``None``: zeros).
        max_epochs
            Budget ``T`` of the iterations, in epochs: at most ``⌊T / c⌋`` iterations of
            ``c`` epochs each (``c = 1`` for CG, ``b/n`` for alternating projections and
            SGD); set-up work (a warm start's residual, CG's preconditioner, the block
            factors of alternating projections, true-residual checks) is counted but not
            capped, see the class notes. ``None``: until the tolerances,
            ``max_iterations`` or, if that is ``None`` too,
            :data:`~pnsolve.iterative.DEFAULT_MAX_EPOCHS`.
        generator
            A ``torch.Generator``, required by SGD, which draws its batches with it (same
            generator state, same result); alternating projections (fixed block order,
            greedy choice) and CG are deterministic and ignore it (accepted for a uniform
            solver interface).

        Returns
        -------
        solution : torch.Tensor
            Approximate ``K̂⁻¹ B``, shape ``(n, k)``, in ``B``'s dtype and device.
        info : KernelSolveInfo
            Iterations, epochs (set-up separately), residual norms, stop reason.

        Raises
        ------
        ValueError
            Naming ``max_epochs`` if it allows no iteration (``max_epochs < c``); SGD:
            naming ``learning_rate`` if the run diverges.
        TypeError
            SGD: if ``generator`` is ``None``.
        """
        if self.draws is not None and generator is None:
            raise TypeError(f"generator is required: pass a torch.Generator to draw {self.draws}")
        if self.draws is not None:
            check_generator(generator)  # before the other arguments
        system, B, x0, max_epochs = check_solve_args(system, B, x0, max_epochs)
        check_generator(generator)
        with torch.no_grad():
            problem = Normalised(B, x0)
            b, what = self._iteration_size(system.n)
            track = Tracker(
                system,
                B.shape[1],
                self.tol,
                self.tol if self.tol_probes is None else self.tol_probes,
                max_epochs=max_epochs,
                max_iterations=self.max_iterations,
                iteration_epochs=Fraction(b, system.n),
                what=what,
            )
            return self._solve(problem, track, generator)

    @abc.abstractmethod
    def _iteration_size(self, n: int) -> tuple[int, str]:
        """``(b, what)``: an iteration costs ``b/n`` epochs; ``what`` names the method."""

    @abc.abstractmethod
    def _solve(
        self, problem: Normalised, track: Tracker, generator: torch.Generator | None
    ) -> tuple[torch.Tensor, KernelSolveInfo]:
        """The solve of the normalised ``problem`` (checked arguments, no autograd)."""
