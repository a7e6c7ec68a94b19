"""Error catalogue cases: cg, Lanczos, the PLS, ULISSE, affine methods, kernels."""

from __future__ import annotations

import torch
from error_catalogue_inputs import (
    _A,
    _X,
    F64,
    Case,
    _asym,
    _b,
    _cplx,
    _gen,
    _pls,
    _with_nan,
)

import pnsolve as pn
from pnsolve.testing.device import lazy_device


def _wrapped_gpytorch_on_keops():
    import gpytorch

    class Custom(gpytorch.kernels.RBFKernel):  # a subclass: wrapped, not mapped
        pass

    k = pn.kernels.from_gpytorch(Custom().double())
    X = torch.ones(4, 1, dtype=torch.float64)
    return k.linop(X, backend="keops") @ torch.ones(4, 1, dtype=torch.float64)


def _features_after_alpha_moved() -> torch.Tensor:
    k = pn.kernels.RationalQuadratic(lengthscale=0.8, alpha=0.6)
    f = pn.kernels.RandomFourierFeatures(
        k, 8, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64
    )
    k.alpha = 2.0
    return f(torch.zeros(3, 2, dtype=torch.float64))


SOLVER_CASES: dict[str, Case] = {
    # --- pn.cg
    "cg-shape": Case(
        "cg", "`b` of the wrong length", lambda: pn.cg(_A(), _b(4)), ValueError, "b must have shape"
    ),
    "cg-nan-b": Case(
        "cg", "NaN in `b`", lambda: pn.cg(_A(), _with_nan(_b())), ValueError, "b contains NaN"
    ),
    "cg-nan-A": Case(
        "cg", "NaN in `A`", lambda: pn.cg(_with_nan(_A()), _b()), ValueError, "A contains NaN"
    ),
    "cg-complex": Case(
        "cg", "complex `A` (NumPy)", lambda: pn.cg(_cplx(), _b()), TypeError, "A must be real"
    ),
    "cg-half": Case(
        "cg",
        "float16 operands",
        lambda: pn.cg(_A().half(), _b().half()),
        TypeError,
        "A has unsupported dtype",
    ),
    "cg-empty": Case(
        "cg",
        "an empty system (n = 0)",
        lambda: pn.cg(torch.zeros(0, 0, dtype=F64), torch.zeros(0, dtype=F64)),
        ValueError,
        "A is empty",
    ),
    "cg-nonsym": Case(
        "cg", "a non-symmetric matrix", lambda: pn.cg(_asym(), _b()), ValueError, "A must be symm"
    ),
    "cg-nonspd": Case(
        "cg",
        "a symmetric matrix that is not positive definite",
        lambda: pn.cg(-_A(), _b()),
        pn.NotPositiveDefiniteError,
        "not positive definite.*iteration",
    ),
    "cg-precision": Case(
        "cg",
        "an unknown `precision`",
        lambda: pn.cg(_A(), _b(), precision="half"),
        ValueError,
        "precision must be one of",
    ),
    "cg-precision-float32": Case(
        "cg",
        '`precision="mixed"` with a float32 system',
        lambda: pn.cg(_A().float(), _b().float(), precision="mixed"),
        ValueError,
        "precision='mixed' runs float64 recurrences",
    ),
    "cg-precision-closure": Case(
        "cg",
        '`precision="mixed"` with an operator of fixed dtype (a `Closure`)',
        lambda: pn.cg(
            pn.linops.Closure(lambda X: 2 * X, (5, 5), dtype=F64, is_symmetric=True),
            _b(),
            precision="mixed",
        ),
        ValueError,
        "precision='mixed' needs an A",
    ),
    "cg-dtype": Case(
        "cg",
        "`x0` in another dtype",
        lambda: pn.cg(_A(), _b(), x0=torch.zeros(5)),
        TypeError,
        "x0 has dtype",
    ),
    "cg-rtol": Case(
        "cg", "negative `rtol`", lambda: pn.cg(_A(), _b(), rtol=-1.0), ValueError, "rtol must be"
    ),
    "cg-maxiter": Case(
        "cg", "non-integer `maxiter`", lambda: pn.cg(_A(), _b(), maxiter=2.5), TypeError, "maxiter"
    ),
    "cg-M": Case(
        "cg",
        "a preconditioner of the wrong shape",
        lambda: pn.cg(_A(), _b(), M=torch.eye(4, dtype=F64)),
        ValueError,
        "M must match A",
    ),
    "cg-callback": Case(
        "cg",
        "a callback that is not callable",
        lambda: pn.cg(_A(), _b(), callback=3),
        TypeError,
        "callback must be callable",
    ),
    "cg-type": Case(
        "cg", "`A` of an unknown type", lambda: pn.cg("matrix", _b()), TypeError, "A must be a"
    ),
    # --- pn.lanczos
    "lanczos-k": Case(
        "lanczos", "`k = 0` steps", lambda: pn.lanczos(_A(), _b(), 0), ValueError, "k must be"
    ),
    "lanczos-v": Case(
        "lanczos",
        "a zero start vector",
        lambda: pn.lanczos(_A(), torch.zeros(5, dtype=F64), 3),
        ValueError,
        "v must be nonzero",
    ),
    "lanczos-reorth": Case(
        "lanczos",
        "an unknown re-orthogonalisation",
        lambda: pn.lanczos(_A(), _b(), 3, reorth="partial"),
        ValueError,
        "reorth must be one of",
    ),
    # --- the probabilistic linear solver
    "pls-policy": Case(
        "PLS",
        "a policy given as a string",
        lambda: pn.ProbabilisticLinearSolver("cg", pn.stopping.MaxIterations(3)),
        TypeError,
        "policy must be a pnsolve.policies.Policy",
    ),
    "pls-precision": Case(
        "PLS",
        "an unknown `precision`",
        lambda: _pls(precision="double"),
        ValueError,
        "precision must be one of",
    ),
    "pls-precision-bf16": Case(
        "PLS",
        '`precision="mixed-bf16"` (too coarse for its rounding bands)',
        lambda: _pls(precision="mixed-bf16"),
        ValueError,
        "precision must be one of",
    ),
    "pls-prior": Case(
        "PLS", "a negative prior variance", lambda: _pls(prior=-1.0), ValueError, "prior must be"
    ),
    "pls-nonspd": Case(
        "PLS",
        "an operator with negative curvature",
        lambda: _pls().solve(-_A(), _b()),
        pn.NotPositiveDefiniteError,
        "not positive definite.*iteration 0",
    ),
    "pls-generator": Case(
        "PLS",
        "a seed instead of a `torch.Generator`",
        lambda: _pls().solve(_A(), _b(), generator=0),
        TypeError,
        "generator must be a torch.Generator",
    ),
    "pls-buffer": Case(
        "PLS",
        "a buffer without actions and images",
        lambda: _pls().solve(_A(), _b(), buffer=object()),
        TypeError,
        "buffer must provide",
    ),
    "pls-stopping": Case(
        "PLS",
        "a negative iteration budget",
        lambda: pn.stopping.MaxIterations(-1),
        ValueError,
        "maxiter must be",
    ),
    "problinsolve-policy": Case(
        "PLS",
        "an unknown policy name in `problinsolve`",
        lambda: pn.problinsolve(_A(), _b(), policy="gmres"),
        ValueError,
        "policy must be a Policy or one of",
    ),
    "problinsolve-matrix-b": Case(
        "PLS",
        "several right-hand sides in `problinsolve`",
        lambda: pn.problinsolve(_A(), torch.ones(5, 2, dtype=F64)),
        ValueError,
        "one at a time",
    ),
    "policy-order": Case(
        "PLS",
        "an unknown unit-vector order",
        lambda: pn.policies.UnitVector("largest"),
        ValueError,
        "order must be one of",
    ),
    # --- ULISSE
    "ulisse-beta": Case(
        "ULISSE",
        "a negative `beta`",
        lambda: pn.randomized.ulisse(_A(), _b(), alpha=2, beta=-1.0, generator=_gen()),
        ValueError,
        "beta must be",
    ),
    "ulisse-alpha": Case(
        "ULISSE",
        "a negative `alpha`",
        lambda: pn.randomized.ulisse(_A(), _b(), alpha=-2, beta=1.0, generator=_gen()),
        ValueError,
        "alpha must be",
    ),
    "ulisse-generator": Case(
        "ULISSE",
        "no generator (its randomness must be explicit)",
        lambda: pn.randomized.ulisse(_A(), _b(), alpha=2, beta=1.0, generator=None),
        TypeError,
        "generator",
    ),
    # --- affine iterative methods
    "affine-damping": Case(
        "affine methods",
        "a Jacobi damping above 2/λ_max (the sweeps diverge)",
        lambda: pn.iterative.affine_solve(_A(), _b(), pn.iterative.JacobiIteration(5, damping=5.0)),
        pn.iterative.DivergenceError,
        "damping=5\\) diverges.*use damping <",
    ),
    "affine-upper": Case(
        "affine methods",
        "a Chebyshev `upper` below λ_max",
        lambda: pn.iterative.affine_solve(
            _A(), _b(), pn.iterative.Chebyshev(5, lower=0.1, upper=1.0)
        ),
        pn.iterative.DivergenceError,
        "upper=1\\) diverges.*use upper ≥ λ_max",
    ),
    "affine-indefinite": Case(
        "affine methods",
        "Gauss–Seidel on an indefinite matrix with a positive diagonal",
        lambda: pn.iterative.affine_solve(
            torch.tensor([[1.0, 2.0], [2.0, 1.0]], dtype=F64), _b(2), pn.iterative.GaussSeidel(40)
        ),
        pn.NotPositiveDefiniteError,
        "diverges.*A is not positive definite",
    ),
    # --- kernels
    "kernel-lengthscale": Case(
        "kernels",
        "a negative lengthscale",
        lambda: pn.kernels.RBF(lengthscale=-1.0),
        ValueError,
        "lengthscale must be positive",
    ),
    "kernel-nu": Case(
        "kernels",
        "an unsupported Matérn ν",
        lambda: pn.kernels.Matern(nu=2.0),
        ValueError,
        "nu must be one of",
    ),
    "kernel-1d": Case(
        "kernels",
        "1-D inputs",
        lambda: pn.kernels.RBF()(torch.ones(5, dtype=F64)),
        ValueError,
        r"X1 must have shape \(n, d\)",
    ),
    "kernel-dims": Case(
        "kernels",
        "inputs with different numbers of columns",
        lambda: pn.kernels.RBF()(_X(), torch.ones(3, 3, dtype=F64)),
        ValueError,
        "X2 has 3 input dimensions",
    ),
    "kernel-ard": Case(
        "kernels",
        "inputs that do not match the ARD lengthscales",
        lambda: pn.kernels.RBF(lengthscale=torch.ones(3))(_X()),
        ValueError,
        "ARD lengthscales",
    ),
    "ski-grid-size": Case(
        "kernels",
        "a SKI grid with fewer than 4 points per dimension",
        lambda: pn.kernels.GridInterpolation(pn.kernels.RBF(), 3),
        ValueError,
        "grid_size must be at least 4",
    ),
    "ski-base": Case(
        "kernels",
        "a SKI kernel on a non-stationary base (another SKI kernel)",
        lambda: pn.kernels.GridInterpolation(
            pn.kernels.GridInterpolation(pn.kernels.RBF(), 10), 10
        ),
        TypeError,
        "stationary",
    ),
    "ski-dims": Case(
        "kernels",
        "a SKI grid in too many dimensions",
        lambda: pn.kernels.GridInterpolation(pn.kernels.RBF(), 10, [(0.0, 1.0)] * 6),
        ValueError,
        "at most 5 input dimensions",
    ),
    "ski-outside": Case(
        "kernels",
        "a test point outside a fitted SKI grid",
        lambda: (
            pn.gp.ExactGP(pn.kernels.GridInterpolation(pn.kernels.RBF(), 10, [(0.0, 1.0)] * 2), 0.1)
            .fit(torch.full((3, 2), 0.5, dtype=F64), torch.zeros(3, dtype=F64))
            .posterior(torch.full((1, 2), 3.0, dtype=F64))
        ),
        ValueError,
        "outside the grid",
    ),
    "distributed-no-group": Case(
        "kernels",
        'backend="distributed" outside a torch.distributed process group',
        lambda: pn.kernels.RBF().linop(_X(), backend="distributed"),
        RuntimeError,
        "needs an initialised default process group",
    ),
    "kernel-backend": Case(
        "kernels",
        "an unknown matrix-free backend",
        lambda: pn.kernels.RBF().linop(_X(), backend="gpu"),
        ValueError,
        "backend must be one of",
    ),
    "kernel-keops-device": Case(
        "kernels",
        "KeOps on a device it does not compute on",
        lambda: pn.kernels.RBF().linop(_X().to(lazy_device()), backend="keops"),
        ValueError,
        'backend="keops" runs on CPU and CUDA',
    ),
    "kernel-two-devices": Case(
        "kernels",
        "hyperparameter tensors on two devices",
        lambda: pn.kernels.RBF(
            lengthscale=torch.ones(2, dtype=torch.float64).to(lazy_device()),
            outputscale=torch.tensor(1.0, dtype=torch.float64),
        ),
        ValueError,
        "lengthscale is on device",
    ),
    "kernel-alpha": Case(
        "kernels",
        "a rational quadratic's alpha that is not positive",
        lambda: pn.kernels.RationalQuadratic(alpha=-1.0),
        ValueError,
        "alpha must be positive and finite",
    ),
    "kernel-spectral-state": Case(
        "kernels",
        "random features used after the spectral density's own parameter moved",
        lambda: _features_after_alpha_moved(),
        ValueError,
        "spectral parameters changed since these random features were drawn",
    ),
    "kernel-expression": Case(
        "kernels",
        "an unknown family in a kernel expression (the CLI's --kernel)",
        lambda: pn.kernels.from_expression("rbf + gauss", input_dim=2),
        ValueError,
        "unknown kernel 'gauss'",
    ),
    "kernel-active-dims": Case(
        "kernels",
        "a column an active_dims names that the inputs do not have",
        lambda: pn.kernels.Linear(active_dims=[3])(torch.ones(4, 2, dtype=torch.float64)),
        ValueError,
        "X1 has 2 input dimensions but the kernel's active_dims reach column 3",
    ),
    "kernel-parts-ard": Case(
        "kernels",
        "parts of a sum or product with different numbers of ARD lengthscales",
        lambda: (pn.kernels.RBF(torch.ones(2)) + pn.kernels.Periodic(torch.ones(3), 1.0))(
            torch.ones(4, 2, dtype=torch.float64)
        ),
        ValueError,
        "give them active_dims or equal ARD sizes",
    ),
    "kernel-no-keops-formula": Case(
        "kernels",
        "backend='keops' for a wrapped GPyTorch kernel",
        lambda: _wrapped_gpytorch_on_keops(),
        NotImplementedError,
        'backend="keops" needs a KeOps formula',
    ),
    "kernel-complex": Case(
        "kernels",
        "complex inputs",
        lambda: pn.kernels.RBF()(torch.ones(3, 2, dtype=torch.complex128)),
        TypeError,
        "X1 must be real",
    ),
}
