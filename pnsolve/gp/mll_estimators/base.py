"""The interface every marginal-likelihood gradient estimator implements."""

from __future__ import annotations

import abc

import torch

from ..._core.precision import full_float32
from ...kernels.kernel import Kernel
from .._checks import check_inputs, check_solutions
from ..pathwise import pathwise_update
from ._problem import Problem, check_problem

__all__ = ["GradientEstimator"]


class GradientEstimator(abc.ABC):
    """Estimator of the gradient of the loss ``L(θ) = −log p(y | θ)`` of GP regression.

    One hyperparameter step of a training loop::

        B = estimator.targets(kernel, X, noise, y)            # (n, 1 + s), no grad
        V = solver(K̂, B)                                      # ≈ K̂⁻¹ B, any solver
        estimator.backward(kernel, X, noise, y, V)            # accumulates into .grad
        optimizer.step()

    with ``K̂ = K(X, X; θ) + noise · I`` and ``y`` already centred by the caller. Column 0
    of the targets is ``y``, columns ``1..s`` are the estimator's probe right-hand sides.
    Warm starts: the random draws behind the probes are made once and reused, so the
    previous step's solutions are a good starting point for the next solve.

    Subclasses implement :meth:`_targets` and :meth:`_backward` on checked arguments.

    Attributes
    ----------
    num_probes
        Number ``s`` of probe right-hand sides (``0`` for :class:`ExactEstimator`).
    needs_solves
        Whether :meth:`backward` uses ``solutions`` (``False`` for the exact estimator).
    """

    num_probes: int
    needs_solves: bool

    @full_float32
    def targets(
        self,
        kernel: Kernel,
        X: torch.Tensor,
        noise: float | torch.Tensor,
        y: torch.Tensor,
    ) -> torch.Tensor:
        """Right-hand sides ``[y, b_1, …, b_s]`` of the linear systems, shape ``(n, 1 + s)``.

        Parameters
        ----------
        kernel
            The GP's stationary kernel at the current hyperparameters.
        X
            Training inputs, shape ``(n, d)``; outputs follow its dtype and device.
        noise
            Noise variance ``σ² > 0``: a float or a 0-d tensor (e.g. ``softplus(raw)``).
        y
            Centred targets, shape ``(n,)``.

        Returns
        -------
        torch.Tensor
            Shape ``(n, 1 + s)``, detached (computed without autograd). The stochastic
            estimators draw their frozen randomness on the first call.

        Raises
        ------
        ValueError, TypeError
            For bad arguments, or (stochastic estimators) an ``X`` whose size, width,
            dtype or device differs from the frozen draws' (call ``resample()``).
        """
        return self._targets(check_problem(kernel, X, noise, y))

    @full_float32
    def backward(
        self,
        kernel: Kernel,
        X: torch.Tensor,
        noise: float | torch.Tensor,
        y: torch.Tensor,
        solutions: torch.Tensor | None = None,
    ) -> None:
        """Accumulate the gradient estimate of ``−log p(y | θ)`` into the leaves' ``.grad``.

        Parameters
        ----------
        kernel, X, noise, y
            As in :meth:`targets`. Gradients reach the kernel's parameters and whatever
            leaf tensors ``noise`` (and ``X``, if it requires grad) depend on.
        solutions
            ``≈ K̂⁻¹ targets``, shape ``(n, 1 + s)`` (detached on entry; from any solver).
            Ignored by an estimator that needs no solves (:class:`ExactEstimator`: it
            back-propagates through a Cholesky factorisation), which may omit it.

        Raises
        ------
        RuntimeError
            :class:`StandardEstimator` before its first :meth:`targets` call.
        ValueError, TypeError
            For bad arguments (``solutions`` must be ``(n, 1 + s)``, or ``None`` for an
            estimator that does not need solves), or (stochastic estimators) an ``X``
            unlike the frozen draws.
        """
        problem = check_problem(kernel, X, noise, y)
        if solutions is not None or self.needs_solves:
            solutions = check_solutions(solutions, problem.X, 1 + self.num_probes)
        self._backward(problem, solutions)

    @abc.abstractmethod
    def _targets(self, problem: Problem) -> torch.Tensor:
        """:meth:`targets` of checked arguments."""

    @abc.abstractmethod
    def _backward(self, problem: Problem, solutions: torch.Tensor | None) -> None:
        """:meth:`backward` of checked arguments (``solutions`` checked, or ``None``)."""

    def _checked_query(
        self,
        kernel: object,
        X: object,
        noise: object,
        y: object,
        solutions: object,
        Xs: object,
    ) -> tuple[Problem, torch.Tensor, torch.Tensor]:
        """Checked ``(problem, solutions, Xs)`` of a posterior query."""
        problem = check_problem(kernel, X, noise, y)
        solutions = check_solutions(solutions, problem.X, 1 + self.num_probes)
        return problem, solutions, check_inputs(Xs, "Xs", d=problem.X.shape[1], like=problem.X)

    def posterior_mean(
        self,
        kernel: Kernel,
        X: torch.Tensor,
        noise: float | torch.Tensor,
        y: torch.Tensor,
        solutions: torch.Tensor,
        Xs: torch.Tensor,
    ) -> torch.Tensor:
        """Posterior mean ``k(Xs, X) v_y`` from the solutions, no extra solves.

        Parameters
        ----------
        kernel, X, noise, y, solutions
            As in :meth:`backward`; only column 0 of ``solutions`` (``v_y ≈ K̂⁻¹ y``) is used.
        Xs
            Test inputs, shape ``(t, d)``, with ``X``'s dtype and device.

        Returns
        -------
        torch.Tensor
            Shape ``(t,)``; add the caller's mean back if ``y`` was centred.
        """
        problem, solutions, Xs = self._checked_query(kernel, X, noise, y, solutions, Xs)
        return pathwise_update(problem.kernel, Xs, problem.X, solutions[:, :1])[:, 0]
