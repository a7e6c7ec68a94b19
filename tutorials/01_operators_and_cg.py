# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Operators, matrix-free kernels and CG
#
# This tutorial introduces the three objects everything else in pnsolve is built
# on: **linear operators**, **kernel matrices** that never exist as n×n arrays,
# and the **conjugate-gradient** solver with preconditioning. We work on a real
# regression dataset (UCI *concrete*, shipped with the package).
#
# Set `PNSOLVE_SMOKE=1` to run everything on a small subset (the test suite does).

# %%
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

import pnsolve as pn

SMOKE = os.environ.get("PNSOLVE_SMOKE") == "1"
OUT = Path("outputs/tutorials")
OUT.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## 1. Linear operators
#
# A `LinearOperator` knows its shape, dtype and device and how to multiply a
# vector `(n,)` or a block `(n, k)`. Structured operators compose without ever
# forming a dense matrix: here a low-rank-plus-diagonal operator.

# %%
g = torch.Generator().manual_seed(0)
U = torch.randn(500, 5, generator=g, dtype=torch.float64)
A = pn.linops.LowRank(U) + pn.linops.Diagonal(torch.full((500,), 0.5, dtype=torch.float64))
print(A)
x = torch.randn(500, generator=g, dtype=torch.float64)
print("‖A x‖ =", float(torch.linalg.norm(A @ x)))
print("trace from the structured diagonal:", float(A.diagonal().sum()))

# %% [markdown]
# An operation without a structured implementation is an error, never a silent
# densification: a closure (any torch function) has no diagonal.

# %%
C = pn.linops.Closure(lambda X: 2.0 * X, (500, 500), dtype=torch.float64)
try:
    C.diagonal()
except pn.MissingStructureError as err:
    print("MissingStructureError:", err)

# %% [markdown]
# NumPy arrays, SciPy matrices and SciPy `LinearOperator`s are wrapped with `as_linop`.

# %%
import numpy as np

print(pn.linops.as_linop(np.eye(3)))

# %% [markdown]
# ## 2. A matrix-free kernel matrix on real data
#
# `kernel.linop(X)` returns a `KernelMatrix`. Its `chunked` backend evaluates the
# kernel in tiles under a memory cap, so a product with K costs O(n²) time but
# only O(n) memory, and autograd reaches the hyperparameters without storing tiles.

# %%
ds = pn.datasets.load_uci("concrete", split=0)
X, y = ds.X_train, ds.y_train
if SMOKE:
    X, y = X[:300], y[:300]
n = X.shape[0]
kernel = pn.kernels.Matern(nu=1.5, lengthscale=2.0, outputscale=1.0)
K = kernel.linop(X, backend="chunked")
K_dense = kernel.linop(X, backend="dense")
v = torch.randn(n, generator=g, dtype=X.dtype)
with torch.no_grad():
    diff = (K @ v - K_dense @ v).abs().max()
print("backend:", K.backend, "| chunked vs dense:", float(diff))

# %% [markdown]
# Gradients with respect to hyperparameters flow through every backend:

# %%
(v @ (K @ v)).backward()
print("d(vᵀKv)/d(raw lengthscale) =", kernel.raw_lengthscale.grad)
kernel.zero_grad()

# %% [markdown]
# ## 3. Solving K̂ x = y with CG
#
# With noise variance σ² the system matrix is K̂ = K + σ²I. Small noise makes it
# ill-conditioned; plain CG then needs many iterations. A pivoted partial Cholesky
# factor L of rank r of the noise-free K (built from its diagonal and r columns,
# never the whole matrix) gives the preconditioner P = L Lᵀ + σ²I, whose inverse
# is applied by the Woodbury identity in O(n r).

# %%
noise = 1e-2
with torch.no_grad():
    A = K + pn.linops.ScaledIdentity(n, noise, dtype=X.dtype)
    x_cg, info = pn.cg(A, y, rtol=1e-8, maxiter=5 * n)
    P = pn.preconditioners.PivotedCholesky(K, rank=50 if SMOKE else 100, shift=noise)
    x_pc, info_pc = pn.cg(A, y, rtol=1e-8, maxiter=5 * n, M=P)
print(f"CG: {info.iterations} iterations ({info.stop_reason.value})")
print(f"preconditioned CG: {info_pc.iterations} iterations ({info_pc.stop_reason.value})")

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
ynorm = torch.linalg.norm(y)
ax.semilogy(info.residual_norms.reshape(-1) / ynorm, label="CG")
ax.semilogy(info_pc.residual_norms.reshape(-1) / ynorm, label="CG + pivoted Cholesky")
ax.axhline(1e-8, ls="--", color="0.5", label="tolerance")
ax.set_xlabel("iteration")
ax.set_ylabel("‖r‖ / ‖y‖")
ax.legend()
fig.tight_layout()
fig.savefig(OUT / "01_cg_convergence.png")

# %% [markdown]
# Convergence is judged on the *true* residual b − A x, not on the recursively
# updated one (which drifts in float32):

# %%
with torch.no_grad():
    print("true relative residual:", float(torch.linalg.norm(y - A @ x_pc) / ynorm))

# %% [markdown]
# ## 4. Lanczos: the spectrum seen by CG
#
# CG's speed is governed by the spectrum of K̂. A few Lanczos steps with full
# reorthogonalisation estimate its extreme eigenvalues.

# %%
with torch.no_grad():
    Q, T = pn.lanczos(A, y, 30)[:2]
ritz = torch.linalg.eigvalsh(T)
print(f"λ_max ≈ {float(ritz[-1]):.3g}, λ_min ≈ {float(ritz[0]):.3g} (≥ σ² = {noise})")
print("orthogonality of Q:", float((Q.mT @ Q - torch.eye(Q.shape[1], dtype=Q.dtype)).abs().max()))
