"""Every built-in policy against :class:`pnsolve.testing.contract.PolicyContract`."""

from __future__ import annotations

import torch

import pnsolve as pn
from pnsolve.krylov import KrylovBuffer
from pnsolve.testing.contract import PolicyContract, contract_system


class TestCG(PolicyContract):
    def make(self, dtype):
        return pn.policies.CG()


class TestPreconditionedCG(PolicyContract):
    def make(self, dtype):
        A, _ = contract_system(dtype)
        return pn.policies.CG(preconditioner=torch.diag(1.0 / A.diagonal()))


class TestUnitVectorSequential(PolicyContract):
    def make(self, dtype):
        return pn.policies.UnitVector("sequential")


class TestUnitVectorRandomBlocks(PolicyContract):
    def make(self, dtype):
        return pn.policies.UnitVector("random", block_size=3)


class TestUnitVectorPivot(PolicyContract):
    def make(self, dtype):
        return pn.policies.UnitVector("pivot")


class TestRandomGaussian(PolicyContract):
    def make(self, dtype):
        return pn.policies.Random()


class TestRandomRademacherBlocks(PolicyContract):
    def make(self, dtype):
        return pn.policies.Random("rademacher", block_size=2)


class TestRandomSparseSign(PolicyContract):
    # a 3-sparse ±1 action has a discrete law: it can fall in the span of earlier ones
    # with positive probability, and a fully dependent action ends the solve (BREAKDOWN)
    spans = False

    def make(self, dtype):
        return pn.policies.Random("sparse_sign", nnz=3)


class TestLanczos(PolicyContract):
    def make(self, dtype):
        return pn.policies.Lanczos()


class TestPseudoInput(PolicyContract):
    def make(self, dtype):
        X = torch.linspace(0, 1, 12, dtype=dtype).unsqueeze(-1)
        Z = torch.linspace(0, 1, 12, dtype=dtype).unsqueeze(-1)
        return pn.policies.PseudoInput(pn.kernels.RBF(lengthscale=0.05), X, Z)


class TestRecycled(PolicyContract):
    def make(self, dtype):
        A, b = contract_system(dtype)
        K = pn.linops.as_linop(A)
        buffer = KrylovBuffer(K)
        pn.ProbabilisticLinearSolver(pn.policies.Random(), pn.stopping.MaxIterations(12)).solve(
            K, b, buffer=buffer, generator=torch.Generator().manual_seed(9)
        )
        return pn.policies.Recycled(buffer)


class TestCustomResidual(PolicyContract):
    def make(self, dtype):
        return pn.policies.Custom(lambda state: state.residual)


class TestSwitch(PolicyContract):
    def make(self, dtype):
        return pn.policies.Switch([pn.policies.UnitVector("random"), pn.policies.CG()], at=[3])


class TestMixed(PolicyContract):
    def make(self, dtype):
        return pn.policies.Mixed([pn.policies.UnitVector("random"), pn.policies.Random()])


class TestProjected(PolicyContract):
    spans = False  # actions stay in range P, which omits one direction

    def make(self, dtype):
        n = 12
        P = torch.eye(n, dtype=dtype)
        P[0, 0] = 0.0
        return pn.policies.Projected(pn.policies.CG(), P)


class TestLanczosRandomStart(PolicyContract):
    def make(self, dtype):
        return pn.policies.Lanczos(start="random")


class TestLanczosTensorStart(PolicyContract):
    def make(self, dtype):
        return pn.policies.Lanczos(start=torch.linspace(1.0, 2.0, 12, dtype=dtype))


class TestUnitVectorSchur(PolicyContract):
    def make(self, dtype):
        return pn.policies.UnitVector("schur")


class TestUnitVectorSchurBlocks(PolicyContract):
    def make(self, dtype):
        return pn.policies.UnitVector("schur", block_size=5)


class TestPivotedCholeskyActions(PolicyContract):
    def make(self, dtype):
        return pn.policies.PivotedCholeskyActions()


class TestPivotedCholeskyBlocks(PolicyContract):
    def make(self, dtype):
        return pn.policies.PivotedCholeskyActions(block_size=3)


class TestRecycledDeclaredNonAdaptive(PolicyContract):
    def make(self, dtype):
        A, _ = contract_system(dtype)
        buffer = KrylovBuffer(pn.linops.as_linop(A))
        buffer.append(torch.eye(12, dtype=dtype), A)
        return pn.policies.Recycled(buffer, adaptive=False)


class TestCustomDeclaredNonAdaptive(PolicyContract):
    def make(self, dtype):
        return pn.policies.Custom(
            lambda state, generator: torch.randn(12, generator=generator, dtype=torch.float64).to(
                state.residual.dtype
            ),
            adaptive=False,
        )
