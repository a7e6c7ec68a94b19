"""Contract tests for operators, policies and stopping criteria (pytest mixins).

Subclass a mixin in a pytest module, name the class ``Test…`` and implement
``make``; pytest then runs every ``test_*`` method against your component, once per
dtype of :data:`DTYPES` (a dtype the component is not checked in is *skipped* with a
reason, never passed silently)::

    class TestMyOperator(LinearOperatorContract):
        def make(self, dtype):
            op = MyOperator(...)
            return op, op_reference_dense_matrix

    class TestMyPolicy(PolicyContract):
        def make(self):
            return MyPolicy(...)

    class TestMyCriterion(StoppingContract):
        def make(self):
            return MyCriterion(...)

Reference values are built independently of the component's code paths. Needs
``pytest`` (a development dependency): import this module only from tests.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from .._core.errors import MissingStructureError
from .._core.stop_reason import StopReason
from ..linops.base import LinearOperator
from ..policies.base import Policy
from ..policies.unit_vector import UnitVector
from ..solvers.solver import ProbabilisticLinearSolver
from ..stopping.base import StoppingCriterion
from ..stopping.criteria import MaxIterations
from .tolerances import exact_tol, iterative_tol

__all__ = [
    "DTYPES",
    "LinearOperatorContract",
    "PolicyContract",
    "StoppingContract",
    "contract_system",
]

#: The dtypes every contract is parametrised over.
DTYPES = (torch.float64, torch.float32)


class _DtypeParametrised:
    """Runs each contract test once per dtype of :data:`DTYPES` (the ``dtype`` fixture)."""

    #: dtypes the component is checked in; the others are skipped with a reason.
    dtypes: tuple[torch.dtype, ...] = DTYPES

    @pytest.fixture(params=DTYPES, ids=lambda d: str(d).removeprefix("torch."))
    def dtype(self, request: pytest.FixtureRequest) -> torch.dtype:
        if request.param not in self.dtypes:
            pytest.skip(f"{type(self).__name__} is not checked in {request.param}")
        return request.param


class LinearOperatorContract(_DtypeParametrised):
    """Mixin of operator contract tests; subclasses implement :meth:`make`."""

    #: whether the operator is expected to have a structured diagonal.
    has_diagonal: bool = True
    #: whether the operator is expected to have structured row access.
    has_rows: bool = True
    #: whether the operator is expected to support transposed products.
    has_transpose: bool = True
    #: whether :meth:`~pnsolve.linops.LinearOperator.to` can change its products' dtype.
    has_other_dtype: bool = True

    def make(self, dtype: torch.dtype) -> tuple[LinearOperator, torch.Tensor]:
        """Return ``(operator, reference dense matrix)`` in ``dtype``."""
        raise MissingStructureError("subclasses implement make(dtype)")

    # ------------------------------------------------------------------ helpers
    def _close(self, a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype, n: int) -> None:
        tol = exact_tol(dtype, n)
        scale = max(float(b.abs().max()), 1.0) if b.numel() else 1.0
        err = float((a - b).abs().max()) if b.numel() else 0.0
        assert err <= tol * scale, f"max error {err:.3e} > {tol * scale:.3e}"

    def _rand(self, *shape: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        return torch.randn(*shape, generator=g, dtype=dtype)

    # -------------------------------------------------------------------- tests
    def test_matvec_matches_dense(self, dtype: torch.dtype) -> None:
        """Matvec matches dense."""
        op, D = self.make(dtype)
        x = self._rand(op.shape[1], dtype=dtype)
        y = op @ x
        assert y.shape == (op.shape[0],)
        self._close(y, D @ x, dtype, op.shape[1])

    def test_matmat_matches_dense(self, dtype: torch.dtype) -> None:
        """Matmat matches dense."""
        op, D = self.make(dtype)
        X = self._rand(op.shape[1], 3, dtype=dtype, seed=1)
        Y = op @ X
        assert Y.shape == (op.shape[0], 3)
        self._close(Y, D @ X, dtype, op.shape[1])
        self._close(op.matmat(X), D @ X, dtype, op.shape[1])

    def test_transposed_product(self, dtype: torch.dtype) -> None:
        """Transposed product."""
        if not self.has_transpose:
            pytest.skip(f"{type(self).__name__}: the operator has no transposed product")
        op, D = self.make(dtype)
        X = self._rand(op.shape[0], 2, dtype=dtype, seed=2)
        self._close(op.rmatmat(X), D.mT @ X, dtype, op.shape[0])
        self._close(op.T @ X, D.mT @ X, dtype, op.shape[0])

    def test_to_dense(self, dtype: torch.dtype) -> None:
        """To dense."""
        op, D = self.make(dtype)
        self._close(op.to_dense(), D, dtype, op.shape[1])

    def test_diagonal(self, dtype: torch.dtype) -> None:
        """Diagonal."""
        op, D = self.make(dtype)
        if self.has_diagonal:
            d = op.diagonal()
            assert d.dtype == dtype
            self._close(d, torch.diagonal(D), dtype, 1)
        else:
            with pytest.raises(MissingStructureError):
                op.diagonal()

    def test_row_block(self, dtype: torch.dtype) -> None:
        """Row block."""
        if not self.has_rows:
            pytest.skip(f"{type(self).__name__}: the operator has no structured row access")
        op, D = self.make(dtype)
        m = op.shape[0]
        rows = [m - 1, 0, m // 2]
        self._close(op.row_block(rows), D[rows], dtype, 1)
        self._close(op.row_block(slice(0, m, 2)), D[0:m:2], dtype, 1)

    def test_dtype_and_device_follow(self, dtype: torch.dtype) -> None:
        """Dtype and device follow."""
        op, D = self.make(dtype)
        assert op.dtype == dtype and op.device == D.device
        y = op @ self._rand(op.shape[1], dtype=dtype)
        assert y.dtype == dtype and y.device == D.device

    def test_inputs_not_mutated(self, dtype: torch.dtype) -> None:
        """Inputs not mutated."""
        op, _ = self.make(dtype)
        X = self._rand(op.shape[1], 2, dtype=dtype, seed=3)
        X0 = X.clone()
        op @ X
        op @ X[:, 0]
        assert torch.equal(X, X0)

    def test_rejects_bad_shape(self, dtype: torch.dtype) -> None:
        """Rejects bad shape."""
        op, _ = self.make(dtype)
        bad = torch.zeros(op.shape[1] + 1, dtype=dtype)
        with pytest.raises(ValueError, match="shape"):
            op @ bad

    def test_rejects_bad_dtype(self, dtype: torch.dtype) -> None:
        """Rejects bad dtype."""
        op, _ = self.make(dtype)
        other = torch.float32 if dtype == torch.float64 else torch.float64
        with pytest.raises(TypeError, match="dtype"):
            op @ torch.zeros(op.shape[1], dtype=other)

    def test_products_in_another_dtype(self, dtype: torch.dtype) -> None:
        """``op.to(other)`` multiplies in ``other`` with the same matrix and flags."""
        op, D = self.make(dtype)
        assert op.to(dtype) is op
        other = torch.float32 if dtype == torch.float64 else torch.float64
        if not self.has_other_dtype:
            with pytest.raises(MissingStructureError):
                op.to(other)
            return
        low = op.to(other)
        assert low.dtype == other and low.shape == op.shape and low.device == op.device
        assert (low.is_symmetric, low.is_psd) == (op.is_symmetric, op.is_psd)
        X = self._rand(op.shape[1], 2, dtype=other, seed=4)
        coarse = torch.float32  # the less precise of the two sets the tolerance
        self._close(low @ X, D.to(other) @ X, coarse, op.shape[1])
        with pytest.raises(TypeError, match="dtype"):
            op.to(torch.int64)

    def test_symmetry_flag_is_truthful(self, dtype: torch.dtype) -> None:
        """Symmetry flag is truthful."""
        op, D = self.make(dtype)
        if not op.is_symmetric:
            pytest.skip(f"{type(self).__name__}: the operator does not claim symmetry")
        self._close(D, D.mT, dtype, 1)


def contract_system(dtype: torch.dtype, n: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    """The SPD system the policy and stopping contracts solve: ``A`` (eigenvalues 1…4) and ``b``.

    Deterministic, so a :meth:`PolicyContract.make` that needs ``A`` (e.g. to fill a
    Krylov buffer) can rebuild it.
    """
    g = torch.Generator().manual_seed(7)
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    A = (Q * torch.linspace(1.0, 4.0, n, dtype=torch.float64)) @ Q.mT
    b = torch.randn(n, generator=g, dtype=torch.float64)
    return (0.5 * (A + A.mT)).to(dtype), b.to(dtype)


class PolicyContract(_DtypeParametrised):
    """Mixin of contract tests for action policies; subclasses implement :meth:`make`.

    Checked: actions have shape ``(n,)`` or ``(n, m)`` in ``A``'s dtype and device;
    the policy leaves the state's tensors untouched; randomness comes only from the
    solve's generator (the same seed gives the same actions); a solve with the policy
    keeps a valid belief and, where :attr:`spans` is true, reaches ``A⁻¹b`` after
    at most :attr:`iterations_to_span` iterations.
    """

    #: whether ``n`` iterations on an SPD system of size ``n`` reach the solution.
    spans: bool = True
    #: how many iterations (as a multiple of ``n``) spanning may take.
    iterations_to_span: int = 1

    def make(self, dtype: torch.dtype) -> Policy:
        """Return the policy under test (a fresh instance) for systems in ``dtype``."""
        raise MissingStructureError("subclasses implement make()")

    def _states(self, dtype: torch.dtype, iterations: int, seed: int = 0):
        A, b = contract_system(dtype)
        solver = ProbabilisticLinearSolver(self.make(dtype), MaxIterations(iterations))
        return A, b, list(solver.iterate(A, b, generator=torch.Generator().manual_seed(seed)))

    def test_actions_have_the_right_shape_dtype_and_device(self, dtype: torch.dtype) -> None:
        """Actions have the right shape dtype and device."""
        A, b, states = self._states(dtype, 3)
        policy = self.make(dtype)
        memory = policy.initial_memory(A, b, torch.Generator().manual_seed(0))
        state = states[0]
        S, _ = policy(replace(state, policy_memory=memory), torch.Generator().manual_seed(0))
        assert isinstance(S, torch.Tensor)
        assert S.ndim in (1, 2) and S.shape[0] == A.shape[0]
        assert S.dtype == dtype and S.device == A.device

    def test_the_state_is_not_modified(self, dtype: torch.dtype) -> None:
        """The state is not modified."""
        _, _, states = self._states(dtype, 2)
        state = states[1]
        before = (state.residual.clone(), state.belief.mean.clone())
        self.make(dtype)(state, torch.Generator().manual_seed(1))
        assert torch.equal(state.residual, before[0]) and torch.equal(state.belief.mean, before[1])

    def test_randomness_comes_from_the_generator(self, dtype: torch.dtype) -> None:
        """Randomness comes from the generator."""
        _, _, first = self._states(dtype, 4, seed=3)
        _, _, again = self._states(dtype, 4, seed=3)
        for s1, s2 in zip(first, again):
            assert (s1.action is None) == (s2.action is None)
            if s1.action is not None:
                assert torch.equal(s1.action, s2.action)

    def test_reaches_the_solution_when_it_spans(self, dtype: torch.dtype) -> None:
        """Reaches the solution when it spans."""
        if not self.spans:
            pytest.skip(f"{type(self).__name__}: the policy is not expected to span R^n")
        A, b, states = self._states(dtype, self.iterations_to_span * 12)
        x = torch.linalg.solve(A.double(), b.double())
        err = float(torch.linalg.vector_norm(states[-1].belief.mean.double() - x))
        assert err <= iterative_tol(dtype) * 10 * float(torch.linalg.vector_norm(x))
        assert states[-1].belief.rank <= A.shape[0]


class StoppingContract(_DtypeParametrised):
    """Mixin of contract tests for stopping criteria; subclasses implement :meth:`make`.

    Checked: a criterion returns ``None`` or a :class:`~pnsolve.StopReason`; calling
    it does not change it (immutable configuration: the same state gives the same
    answer); it composes with ``|``, ``&`` and ``~`` into criteria the solver
    accepts; a solve under it ends (with :attr:`stops` true: before the safety cap).
    """

    #: whether the criterion alone ends a solve of a small SPD system within 3n steps.
    stops: bool = True

    def make(self, dtype: torch.dtype) -> StoppingCriterion:
        """Return the criterion under test (a fresh instance) for systems in ``dtype``."""
        raise MissingStructureError("subclasses implement make()")

    def _solve(self, dtype: torch.dtype, stopping: StoppingCriterion):
        A, b = contract_system(dtype)
        cap = MaxIterations(3 * A.shape[0])
        solver = ProbabilisticLinearSolver(UnitVector(), stopping | cap)
        return list(solver.iterate(A, b, generator=torch.Generator().manual_seed(0)))

    def test_answers_are_stop_reasons_or_none(self, dtype: torch.dtype) -> None:
        """Answers are stop reasons or none."""
        criterion = self.make(dtype)
        states = self._solve(dtype, MaxIterations(5))
        memory = criterion.initial_memory(states[0])
        for state in states:
            answer = criterion.check(state, memory)
            assert answer is None or isinstance(answer, StopReason)
            assert criterion.check(state, memory) == answer  # no hidden state changes

    def test_composes_with_or_and_not(self, dtype: torch.dtype) -> None:
        """Composes with or and not."""
        criterion = self.make(dtype)
        for composed in (criterion | MaxIterations(2), criterion & MaxIterations(2), ~criterion):
            assert isinstance(composed, StoppingCriterion)
        states = self._solve(dtype, criterion | MaxIterations(2))
        assert states[-1].stop_reason is not None and states[-1].iteration <= 2

    def test_a_solve_under_it_ends(self, dtype: torch.dtype) -> None:
        """A solve under it ends."""
        if not self.stops:
            pytest.skip(f"{type(self).__name__}: the criterion alone need not stop a solve")
        states = self._solve(dtype, self.make(dtype))
        assert states[-1].iteration < 3 * 12, "the safety cap, not the criterion, ended it"
