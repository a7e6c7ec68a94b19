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
# # Constant-time predictive uncertainty with SKI and LOVE, and where the grid stops paying
#
# Tutorial 05 made GP variances cheap with **LOVE** (Pleiss et al., 2018): `k` Lanczos
# steps on `K̂ = K + σ² I`, cached once as a root `R` (shape `(n, k)`) with
# `K̂⁻¹ ≈ R Rᵀ`, then `v(x) ≈ k(x, x) − ‖Rᵀ k(X, x)‖²` per test point. That costs
# `O(n k)` per point, plus the `n` kernel evaluations in `k(X, x)`: still linear in `n`.
#
# With **structured kernel interpolation** (SKI, or KISS-GP when the inducing points lie
# on a regular grid; Wilson & Nickisch, 2015) the kernel is read off a grid `U` of `m`
# points,
#
#     k(x, x') ≈ k_SKI(x, x') = w(x)ᵀ K_UU w(x'),        K_UU = k(U, U)  (m × m),
#
# where `w(x)` holds Keys' cubic interpolation weights of `x` on the `4ᵈ` grid points
# around it. Then `k(X, x) = W_X K_UU w(x)` and LOVE's projection becomes
#
#     Rᵀ k(X, x) = (K_UU W_Xᵀ R)ᵀ w(x):
#
# the `(m, k)` matrix `K_UU W_Xᵀ R` depends on the training data only, and `w(x)` has
# `4ᵈ` nonzeros. After one precomputation a predictive variance costs `O(4ᵈ k)`,
# **independent of `n` and `m`** — the paper's "constant-time predictive
# distributions" (§3.2); the mean `w(x)ᵀ a` with `a = K_UU W_Xᵀ K̂⁻¹ y` was already
# constant-time in KISS-GP (§2.3). This tutorial:
#
# 1. builds the SKI kernel: its error against the exact RBF as the grid is refined,
#    Keys' interpolation reproducing quadratics exactly (not cubics), and `K_UU`'s
#    Toeplitz/Kronecker structure that makes a product cost `O(m log m)`;
# 2. fits a SKI GP with `pn.gp.IterGP` (CG) on real data — log bike rentals against hour
#    of day and temperature (UCI *bike*, all 15 642 training rows) — against exact GPs;
# 3. builds the grid-space LOVE cache: accuracy against exact SKI variances as the rank
#    grows (never below them), and the time per test point as `n` grows from `10³` to
#    `10⁵` (flat);
# 4. draws joint posterior samples;
# 5. measures where the grid stops paying: `m = grid_sizeᵈ` grid points and `4ᵈ` weights
#    per point for `d = 1 … 5`, and what `pnsolve` says at `d = 6`.
#
# Set `PNSOLVE_SMOKE=1` to run everything on smaller problems (the test suite does).

# %%
import itertools
import math
import os
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch

import pnsolve as pn

SMOKE = os.environ.get("PNSOLVE_SMOKE") == "1"
OUT = Path("outputs/tutorials")
OUT.mkdir(parents=True, exist_ok=True)
T_START = time.perf_counter()
F64 = torch.float64
REPEATS = 1 if SMOKE else 3


def best_of(fn, repeats: int = REPEATS):
    """Shortest wall time of ``repeats`` calls of ``fn()``, and the last result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


# %% [markdown]
# ## 1. SKI: a kernel read off a grid
#
# **Keys' cubic convolution** (Keys, 1981, with `a = −1/2`) interpolates a function known
# on a regular grid of spacing `h` from the 4 grid points around `x`, with weights
# `u((x − u_j)/h)` from a piecewise cubic `u`. In `d` dimensions the weights are the
# tensor product of `d` such 1-d stencils: `4ᵈ` nonzeros per point. Applied to the
# kernel in both arguments, `k(x, x') ≈ w(x)ᵀ K_UU w(x')` with `K_UU = k(U, U)`.
#
# `pn.kernels.GridInterpolation(base, grid_size, grid_bounds)` is that kernel for a
# stationary base kernel (`RBF` or `Matern`). `grid_bounds` is the box in which inputs can
# be interpolated (the grid extends one spacing beyond each end); by default a model fixes
# it at `fit` to the training inputs' range plus 5 % per side. `k(X1, X2)` returns the
# dense `W₁ K_UU W₂ᵀ` (a reference), `k.linop(X)` the structured operator
# (`.left` is `W`, `.grid_matrix` is `K_UU`), `k.diag(X)` the SKI prior variances.
#
# Below: the largest error of `k_SKI` against the exact RBF (lengthscale 0.1 on `[0, 1]`)
# as the grid is refined, and the error of interpolating a quadratic and a cubic from
# their grid values, `W f(U)` against `f(X)`. Keys' kernel is **third-order accurate**:
# it reproduces polynomials up to degree 2 exactly, and a cubic with an `O(h³)` error —
# and so does the kernel approximation, about 8 times smaller per halving of `h`.


# %%
def quad(t: torch.Tensor) -> torch.Tensor:
    """A quadratic: Keys' interpolation reproduces it exactly."""
    return 1.0 - 3.0 * t + 2.0 * t**2


def cube(t: torch.Tensor) -> torch.Tensor:
    """A cubic: reproduced only up to ``O(h³)``."""
    return t**3


g = torch.Generator().manual_seed(0)
base_1d = pn.kernels.RBF(lengthscale=0.1)
X1 = torch.rand(300 if SMOKE else 1000, 1, generator=g, dtype=F64)
x1 = X1[:, 0]
with torch.no_grad():
    K_exact = base_1d(X1)
sizes_1d = (8, 16, 32, 64, 128, 256) if SMOKE else (8, 16, 32, 64, 128, 256, 512, 1024)
refinement = []
print(f"{'grid m':>7s} {'h':>8s} {'max|k_SKI − k|':>15s} {'ratio':>6s} {'quad.':>7s} {'cubic':>8s}")
for m in sizes_1d:
    k_ski = pn.kernels.GridInterpolation(base_1d, m, grid_bounds=[(0.0, 1.0)])
    with torch.no_grad():
        K_ski = k_ski.linop(X1)
        grid = K_ski.grid
        U = grid.lower[0] + grid.spacing[0] * torch.arange(m, dtype=F64)  # grid points
        W = K_ski.left  # (n, m), 4 weights per row
        err_k = float((k_ski(X1) - K_exact).abs().max())
    err_q = float(((W @ quad(U).unsqueeze(-1)).squeeze(-1) - quad(x1)).abs().max())
    err_c = float(((W @ cube(U).unsqueeze(-1)).squeeze(-1) - cube(x1)).abs().max())
    ratio = refinement[-1][2] / err_k if refinement else float("nan")
    refinement.append((m, grid.spacing[0], err_k, err_q, err_c))
    print(f"{m:7d} {grid.spacing[0]:8.4f} {err_k:15.2e} {ratio:6.1f} {err_q:7.1e} {err_c:8.1e}")
    assert W.nnz_per_row == 4
    assert err_q < 1e-12  # quadratics: exact up to rounding
assert refinement[-1][4] > 1e-12  # cubics: not exact
# third order: halving h divides the cubic's error by about 2³ = 8
assert refinement[-1][4] < refinement[-2][4] / 6

fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
hs = [r[1] for r in refinement]
ax.loglog(hs, [r[2] for r in refinement], "o-", label="max |k_SKI − k| (RBF, ℓ = 0.1)")
ax.loglog(hs, [r[4] for r in refinement], "s-", label="cubic: max |W f(U) − f(X)|")
ax.loglog(hs, [max(r[3], 1e-17) for r in refinement], "^-", label="quadratic (rounding)")
ref = refinement[-3]
ax.loglog(hs, [ref[4] * (h / ref[1]) ** 3 for h in hs], "k--", lw=0.8, label="∝ h³")
ax.set_xlabel("grid spacing h")
ax.set_ylabel("largest error")
ax.set_title("Keys' cubic interpolation: third order")
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(OUT / "11_ski_refinement.png")
plt.close(fig)

# %% [markdown]
# (The kernel's error falls faster than `h³` on the coarsest grids, where `h` is
# comparable to the lengthscale, and settles at a ratio of about 8.)
#
# **Why SKI products are fast.** On a regular grid a stationary kernel depends only on
# the offset between grid points, so `K_UU` is **Toeplitz** in 1-d: its first column
# determines it, and a product embeds it in a circulant of size `2m` and costs two FFTs,
# `O(m log m)` with `O(m)` memory. For a separable kernel such as the RBF (ARD or not),
# `K_UU` is a **Kronecker product** of `d` Toeplitz factors; for a Matérn kernel in
# `d ≥ 2` it is a `d`-level Toeplitz matrix (one `d`-dimensional FFT of size `2ᵈ m`). A
# product with the SKI matrix `W K_UU Wᵀ` then costs `O(n 4ᵈ + m log m)`: two sparse
# products and one FFT product. We check `K_UU v` against the dense `k(U, U) v` and time
# it as `m` grows.

# %%
print(f"{'m':>9s} {'K_UU':>10s} {'FFT product':>12s} {'dense product':>14s} {'max diff':>9s}")
for m in (10**3, 10**4, 10**5) if SMOKE else (10**3, 10**4, 10**5, 10**6):
    k_ski = pn.kernels.GridInterpolation(base_1d, m, grid_bounds=[(0.0, 1.0)])
    with torch.no_grad():
        K_UU = k_ski.linop(X1[:2]).grid_matrix
        v = torch.randn(m, 1, generator=g, dtype=F64)
        t_fft, Kv = best_of(lambda K_UU=K_UU, v=v: K_UU @ v)
        dense, diff = "-", "-"
        if m <= 4000:  # the dense m × m matrix only where it is small
            grid = k_ski.grid(X1[:2])
            U = (grid.lower[0] + grid.spacing[0] * torch.arange(m, dtype=F64)).unsqueeze(-1)
            K_dense = base_1d(U, U)
            t_dense, Kv_dense = best_of(lambda K_dense=K_dense, v=v: K_dense @ v)
            dense, diff = f"{t_dense * 1e3:11.2f} ms", f"{float((Kv - Kv_dense).abs().max()):9.1e}"
            assert torch.allclose(Kv, Kv_dense, rtol=0, atol=1e-10 * m)
    print(f"{m:9d} {type(K_UU).__name__:>10s} {t_fft * 1e3:9.2f} ms {dense:>14s} {diff:>9s}")

# %% [markdown]
# The FFT product grows like `m log m` (a million grid points in a fraction of a second
# on one core); the dense product grows like `m²` and needs `m²` memory.
#
# ## 2. A SKI GP on real data: bike rentals by hour and temperature
#
# UCI *bike* (hourly bike-sharing counts in Washington D.C.; shipped with `pnsolve`) has
# 17 inputs; the target is the **log** of the hourly rental count, standardised. Two of
# its inputs carry most of the signal a smooth low-dimensional model can use:
#
# * column 6, the **hour of day** (0–23): the strongest single input (correlation 0.56
#   with the target, and strongly nonlinear — night lows, commute peaks);
# * column 11, the **temperature** (normalised): the strongest weather input (correlation
#   0.39; column 12, the "feels-like" temperature, is nearly a copy of it).
#
# (Columns 15 and 16 correlate more, but they are the casual and registered counts whose
# sum *is* the target: using them would leak it.) Two inputs keep the grid small and the
# model easy to look at; section 5 is about what happens when `d` grows.
#
# **Hyperparameters.** We fit an RBF-ARD kernel (two lengthscales, outputscale, noise) by
# maximising the exact marginal likelihood on a random subset
# (`pn.gp.fit_exact_hyperparameters`), then use the same base kernel with and without the
# grid.

# %%
ds = pn.datasets.load_uci("bike", split=0)
cols = [6, 11]
X, y = ds.X_train[:, cols], ds.y_train
Xs, ys = ds.X_test[:, cols], ds.y_test
n = X.shape[0]
g = torch.Generator().manual_seed(1)
perm = torch.randperm(n, generator=g)
n_hyp, steps = (300, 15) if SMOKE else (1000, 60)
base = pn.kernels.RBF(lengthscale=torch.ones(2, dtype=F64))
fit = pn.gp.fit_exact_hyperparameters(
    base, X[perm[:n_hyp]], y[perm[:n_hyp]], noise=0.1, steps=steps, lr=0.1
)
noise = fit.noise
ls = base.lengthscale.detach()
print(
    f"bike: n = {n} training, t = {Xs.shape[0]} test points; inputs hour (col 6), "
    f"temperature (col 11)\nfitted on {n_hyp} points: lengthscales ({ls[0]:.3f}, "
    f"{ls[1]:.3f}), outputscale {float(base.outputscale.detach()):.3f}, noise {noise:.4f}"
)


def test_scores(mean: torch.Tensor, var: torch.Tensor) -> tuple[float, float]:
    """Test RMSE and mean test log-likelihood (predictive variance of y = var + σ²)."""
    return (
        pn.metrics.rmse(mean, ys),
        pn.metrics.gaussian_log_likelihood(mean, var + noise, ys),
    )


# %% [markdown]
# **Choosing the grid.** In standardised units the hour's lengthscale is short (a few
# hours) and the temperature's long, so the grid can be finer along the hour. We try
# three grids and measure the largest kernel error on 400 training points; the grid's
# box is left to the model (`grid_bounds=None`: the training range plus 5 %). The test
# inputs must fall inside it — here they do (every hour and every temperature value of
# the test split also occurs in training); otherwise pass `grid_bounds` that cover them.

# %%
X_probe = X[perm[:400]]
with torch.no_grad():
    K_probe = base(X_probe)
for sizes in ([16, 8], [32, 16], [64, 32]):
    k_try = pn.kernels.GridInterpolation(base, sizes)
    with torch.no_grad():
        err = float((k_try(X_probe) - K_probe).abs().max())
    print(f"grid_size {sizes}: m = {math.prod(sizes):5d} grid points, max |k_SKI − k| = {err:.1e}")
grid_size = [32, 16]
kernel = pn.kernels.GridInterpolation(base, grid_size)

# %% [markdown]
# `[32, 16]` (512 grid points) is accurate to a few parts in 10³ of the outputscale,
# well below the noise. Now the models:
#
# * **IterGP + SKI on all `n` points**: CG on `W K_UU Wᵀ + σ² I` until the relative
#   residual is `10⁻⁶` (`ResidualNorm(1e-6) | MaxIterations(300)`): each iteration is
#   one sparse-FFT-sparse product.
# * **ExactGP + SKI on a subset** of `n_ref` points: the SKI kernel formed densely and
#   factored by Cholesky — the exact SKI GP, our reference for LOVE (allowed up to
#   `n = 5000`: the point of SKI is never to form `n × n`).
# * **ExactGP + RBF on the same subset**: the exact kernel, the classic reference.
# * **IterGP + RBF** (the matrix-free exact kernel, `backend="chunked"`) with the same
#   CG and stopping rule: what SKI replaces; each product is `O(n² d)` kernel work. On
#   all `n` in the full run, on a subset in smoke mode.

# %%
n_ref = 500 if SMOKE else 4000
n_free = 2000 if SMOKE else n
stop = pn.stopping.ResidualNorm(rtol=1e-6) | pn.stopping.MaxIterations(300)
results = []


def run(label, make, X_fit, y_fit):
    """Fit ``make()`` on (X_fit, y_fit), predict at Xs, record times and scores."""
    t_fit, gp = best_of(lambda: make().fit(X_fit, y_fit), 1)
    t_pred, post = best_of(lambda: gp.posterior(Xs), 1)
    its = gp.info.iterations if hasattr(gp, "info") else "-"
    results.append((label, X_fit.shape[0], its, t_fit, t_pred, *test_scores(post.mean, post.var)))
    return gp, post


ski_gp, ski_post = run(
    "IterGP, SKI (CG)", lambda: pn.gp.IterGP(kernel, noise, pn.policies.CG(), stop), X, y
)
ref_rows = perm[:n_ref]
exact_ski, exact_ski_post = run(
    "ExactGP, SKI", lambda: pn.gp.ExactGP(kernel, noise), X[ref_rows], y[ref_rows]
)
exact_rbf, exact_rbf_post = run(
    "ExactGP, RBF", lambda: pn.gp.ExactGP(base, noise), X[ref_rows], y[ref_rows]
)
free_gp, _ = run(
    "IterGP, RBF matrix-free (CG)",
    lambda: pn.gp.IterGP(base, noise, pn.policies.CG(), stop, backend="chunked"),
    X[perm[:n_free]],
    y[perm[:n_free]],
)
header = ("model", "n", "its", "fit s", "pred. s", "RMSE", "test LL")
print("{:30s} {:>6s} {:>4s} {:>7s} {:>7s} {:>7s} {:>8s}".format(*header))
for label, n_fit, its, t_fit, t_pred, rmse_, ll in results:
    print(f"{label:30s} {n_fit:6d} {its!s:>4s} {t_fit:7.2f} {t_pred:7.3f} {rmse_:7.4f} {ll:8.4f}")
print(
    f"SKI vs exact kernel on the same {n_ref} points: max |mean diff| = "
    f"{float((exact_ski_post.mean - exact_rbf_post.mean).abs().max()):.1e}, max |var diff| = "
    f"{float((exact_ski_post.var - exact_rbf_post.var).abs().max()):.1e}"
)
bounds = ", ".join(f"({lo:.2f}, {hi:.2f})" for lo, hi in ski_gp.kernel.grid_bounds)
print(f"the fitted grid: {ski_gp.kernel.grid_size} points, bounds {bounds}")

# %% [markdown]
# On the same subset, the SKI GP and the exact-kernel GP predict the same to a few parts
# in 10³ or better: the grid error is far below the noise. The SKI fit on all ~15 600
# points takes a fraction of a second — each CG iteration is a sparse product, an FFT
# product on 512 grid points and another sparse product — against seconds for the
# Cholesky reference on a subset and far longer for the matrix-free exact kernel, whose
# every product touches all `n²` pairs (in the full run: about half a second against
# over half a minute for the same 39 CG iterations on all points, with the same test
# scores to four digits). With only two inputs the model saturates early (the test
# scores barely move between `n_ref` points and all of them: hour and temperature
# explain what they can, the rest is noise to this model); SKI's benefit is that the
# full data cost next to nothing.
#
# After `fit` the model holds a *bound* copy of the kernel (`gp.kernel`) whose
# `grid_bounds` are fixed to the training range plus the margin; it shares the base
# kernel's parameters.
#
# ## 3. LOVE on the grid
#
# `gp.build_love_cache(rank=k)` runs `k` Lanczos steps on `K̂` (`k + 1` SKI products),
# factors `T = L_T L_Tᵀ` and sets `R = Q L_T⁻ᵀ` as in tutorial 05; for a SKI kernel it
# also projects onto the grid (Pleiss et al., §3.2):
#
#     cache.grid.root = K_UU W_Xᵀ R    (m, k),     cache.grid.mean = K_UU W_Xᵀ v    (m,)
#
# with `v` the model's representer weights (`K̂⁻¹ (y − μ)`, or CG's estimate of it for
# IterGP). A test point then costs
#
#     mean  μ + w(x)ᵀ a,      variance  w(x)ᵀ K_UU w(x) − ‖rootᵀ w(x)‖²:
#
# `4ᵈ k` multiply-adds for the projection and `16ᵈ` for the SKI prior variance (the
# `4ᵈ × 4ᵈ` block of `K_UU` seen by a stencil is the same for every point). Without test
# inputs the probe is the paper's average column `b = W_X K_UU 1 / m` — independent of
# both the targets and the test points, so the one cache serves every later test set.

# %%
rank = 50
t_cache, cache = best_of(lambda: ski_gp.build_love_cache(rank=rank), 1)
t_love, love_post = best_of(lambda: ski_gp.posterior(Xs, method="love", cache=cache))
print(
    f"cache: rank {cache.rank}, R {tuple(cache.R.shape)}, grid root "
    f"{tuple(cache.grid.root.shape)}, grid mean {tuple(cache.grid.mean.shape)}; "
    f"built in {t_cache:.3f} s, calibrated probe: {cache.calibrated}"
)
print(
    f"LOVE posterior at t = {Xs.shape[0]}: {t_love * 1e3:.2f} ms "
    f"({t_love / Xs.shape[0] * 1e6:.2f} µs per test point)"
)
# the mean is the model's (same weights, read off the grid)
assert torch.allclose(love_post.mean, ski_post.mean, rtol=0, atol=1e-8)
assert cache.grid.root.shape == (math.prod(grid_size), rank)

# %% [markdown]
# **Accuracy against exact SKI variances.** LOVE's variance is never below the exact
# one: `R Rᵀ = Q T⁻¹ Qᵀ ≼ K̂⁻¹` (tutorial 05), and the grid projection is an exact
# rewriting of `Rᵀ k_SKI(X, x)`. The gap is LOVE's computational uncertainty and shrinks
# as the rank grows. On the `n_ref` subset the exact SKI variances come from the
# Cholesky factor (`ExactGP` with the SKI kernel); we report the LOVE paper's **SMAE**
# (`pn.metrics.smae`: mean absolute error over the variance of the test targets), the
# smallest gap `min(v_LOVE − v)` and the largest relative error.

# %%
exact_var = exact_ski_post.var
tol = 1e-9 * float(base.outputscale.detach())  # rounding allowance
ranks = (2, 5, 10, 20, 50) if SMOKE else (2, 5, 10, 20, 50, 100)
smae = []
print(f"{'rank':>5s} {'SMAE':>9s} {'min(v_LOVE − v)':>16s} {'max rel err':>11s}")
for k in ranks:
    c = exact_ski.build_love_cache(rank=k)
    v_love = exact_ski.posterior(Xs, method="love", cache=c).var
    gap = v_love - exact_var
    assert bool((gap >= -tol).all()), f"LOVE below the exact SKI variance at rank {k}"
    smae.append(pn.metrics.smae(v_love, exact_var, ys))
    rel = float((gap / exact_var).max())
    print(f"{k:5d} {smae[-1]:9.1e} {float(gap.min()):+16.1e} {rel:11.1e}")
assert all(b <= a * (1 + 1e-6) + 1e-12 for a, b in itertools.pairwise(smae)), smae
assert smae[ranks.index(50)] < 1e-3

# %% [markdown]
# Rank 50 — the paper's default — is accurate to an SMAE of about `10⁻⁷` here (full run;
# `10⁻⁵` in smoke mode, with rougher hyperparameters), small ranks are not: on two
# inputs `K̂` has a few dozen eigenvalues above the noise, and Lanczos has to find them
# (tutorial 05 shows how the required rank grows with the effective dimension).
#
# Without a dense reference, `post.math_var` gives the exact SKI variances on demand:
# batched CG with `K̂` to rounding level, one column per test point — slow, an analysis
# path. `post.comp_var = post.var − post.math_var` is then LOVE's computational
# uncertainty. The same check on the model fitted to all `n` points, at a few test
# points:

# %%
t_check = 10 if SMOKE else 50
check = ski_gp.posterior(Xs[:t_check], method="love", cache=cache)
v_ref = check.math_var  # exact SKI variances by CG
gap = check.comp_var  # = check.var − v_ref
print(
    f"IterGP + SKI, n = {n}, rank {rank}: at {t_check} test points "
    f"min(v_LOVE − v) = {float(gap.min()):+.1e}, max |v_LOVE − v| / v = "
    f"{float((gap.abs() / v_ref).max()):.1e}"
)
assert bool((gap >= -tol).all())

# %% [markdown]
# **Time per test point as `n` grows.** A synthetic 1-d problem: `f(x) = sin 12x +
# ½ cos 31x` observed with noise (σ² = 0.01) at `n` uniform points in `[0, 1]` except
# a gap `(0.55, 0.70)`, an RBF (lengthscale 0.05) on a 1000-point grid, IterGP with CG.
# For each `n` we time, at `t = 5000` test points:
#
# * **LOVE** with the grid cache (`posterior(Xs, method="love", cache=cache)`),
# * IterGP's own posterior (`posterior(Xs)`, the CG belief: `i` products of `k(Xs, X)`,
#   each `O(n + t + m log m)`, amortised over the `t` points),
# * the exact SKI variance by CG (`post.math_var`) at a few points — KISS-GP without
#   LOVE (§3.1 of the paper): every test point needs solves with `K̂`.


# %%
def target(x: torch.Tensor) -> torch.Tensor:
    """The synthetic regression function."""
    return torch.sin(12 * x) + 0.5 * torch.cos(31 * x)


def synthetic(n_pts: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n_pts`` noisy observations on [0, 1] outside the gap (0.55, 0.7)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(2 * n_pts, generator=gen, dtype=F64)
    x = x[(x < 0.55) | (x > 0.7)][:n_pts]
    return x.unsqueeze(-1), target(x) + 0.1 * torch.randn(n_pts, generator=gen, dtype=F64)


kernel_1d = pn.kernels.GridInterpolation(
    pn.kernels.RBF(lengthscale=0.05, outputscale=0.5), 1000, grid_bounds=[(0.0, 1.0)]
)
Xs_1d = torch.linspace(0.0, 1.0, 5000, dtype=F64).unsqueeze(-1)
t_ex = 5 if SMOKE else 20  # test points for the exact (CG) variances
ns = (10**3, 10**4) if SMOKE else (10**3, 10**4, 10**5)
timing, models_1d = [], {}
for n_1d in ns:
    X_1d, y_1d = synthetic(n_1d, seed=n_1d)
    t_fit, gp = best_of(
        lambda X_1d=X_1d, y_1d=y_1d: pn.gp.IterGP(kernel_1d, 0.01, pn.policies.CG(), stop).fit(
            X_1d, y_1d
        ),
        1,
    )
    t_c, c = best_of(lambda gp=gp: gp.build_love_cache(rank=rank), 1)
    t_l, post = best_of(lambda gp=gp, c=c: gp.posterior(Xs_1d, method="love", cache=c))
    t_b, _ = best_of(lambda gp=gp: gp.posterior(Xs_1d))
    sub = Xs_1d[:: Xs_1d.shape[0] // t_ex][:t_ex]
    post_sub = gp.posterior(sub, method="love", cache=c)
    t_e, _ = best_of(lambda p=post_sub: p.math_var, 1)  # computed once, then kept
    gap = post_sub.comp_var
    assert bool((gap >= -1e-9).all())
    models_1d[n_1d] = (gp, c, X_1d, y_1d)
    timing.append(
        (n_1d, gp.info.iterations, t_fit, t_c, t_l / 5000 * 1e6, t_b / 5000 * 1e6,
         t_e / t_ex * 1e3, float(gap.abs().max()), float(gap.min()))
    )  # fmt: skip
print(
    f"{'n':>7s} {'CG its':>6s} {'fit s':>6s} {'cache s':>7s} {'LOVE µs/pt':>10s} "
    f"{'IterGP µs/pt':>12s} {'exact ms/pt':>11s} {'max|v_LOVE−v|':>13s} {'min(v_LOVE−v)':>13s}"
)
for row in timing:
    print(
        f"{row[0]:7d} {row[1]:6d} {row[2]:6.2f} {row[3]:7.3f} {row[4]:10.2f} {row[5]:12.2f} "
        f"{row[6]:11.2f} {row[7]:13.1e} {row[8]:+13.1e}"
    )

fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
n_axis = [r[0] for r in timing]
ax.loglog(n_axis, [r[4] for r in timing], "o-", label="LOVE, grid cache")
ax.loglog(n_axis, [r[5] for r in timing], "s-", label="IterGP posterior (CG belief)")
ax.loglog(n_axis, [r[6] * 1e3 for r in timing], "^-", label="exact SKI variance by CG")
ax.set_xlabel("training points n")
ax.set_ylabel("time per test point (µs)")
ax.set_title("Predictive variance cost, 1-d SKI (m = 1000)")
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(OUT / "11_love_time_vs_n.png")
plt.close(fig)

# %% [markdown]
# More data, slightly larger relative errors at the same rank (about `10⁻³` in the full
# run): more eigenvalues of `K̂` stand out above the noise. Still never below the exact
# variance.
#
# LOVE's time per test point does not move with `n` (about half a microsecond on one CPU
# core): only the cache (`k + 1` SKI products, linear in `n`) pays for the data.
# IterGP's own posterior is also fast — its products with `k(Xs, X)` are SKI products
# too — but its cost per point grows with `n` as `i (n + m log m) / t`; the exact
# variance by CG costs milliseconds to half a second per point. In 1-d with 1000 grid
# points LOVE at rank 50 is exact to rounding: a tiny negative `min(v_LOVE − v)` is
# rounding in the reference's CG solves, not LOVE.
#
# ## 4. Joint samples
#
# `post.sample(s, generator=...)` returns `s` joint draws at the `t` test points, shape
# `(t, s)`. `pnsolve` runs a second Lanczos of rank `k` on the test covariance
# `W_s K_UU W_sᵀ − P Pᵀ` (`P = W_s root`; each product costs `O(t 4ᵈ + m log m)`,
# independent of `n`), keeps its root `S` (shape `(t, k)`, `post.sample_root()`), and
# every draw is `mean + S z`. The paper's §3.3 root of the *grid* covariance
# `K_UU − root rootᵀ` (shape `(m, k)`, computed once for all test sets) is
# `cache.grid.sample(Xs, s, generator)`; it returns the draws without the model's
# constant prior mean (zero here). At this grid both roots are accurate.
#
# We draw from the `n = 1000` model (its band is wide enough to see) at 400 points, check
# the draws' moments against LOVE's mean and variance, and time first and later calls.

# %%
gp_s, cache_s, X_s, y_s = models_1d[10**3]
Xp = torch.linspace(0.0, 1.0, 400, dtype=F64).unsqueeze(-1)
post_s = gp_s.posterior(Xp, method="love", cache=cache_s)
s = 500 if SMOKE else 2000
t_first, draws = best_of(lambda: post_s.sample(s, generator=torch.Generator().manual_seed(0)), 1)
t_again, _ = best_of(lambda: post_s.sample(s, generator=torch.Generator().manual_seed(1)), 1)
t_grid, draws_grid = best_of(
    lambda: cache_s.grid.sample(Xp, s, torch.Generator().manual_seed(0)), 1
)
S = post_s.sample_root()
with torch.no_grad():
    C = post_s.cov()
root_err = float(torch.linalg.matrix_norm(S @ S.mT - C) / torch.linalg.matrix_norm(C))
print(f"draws {tuple(draws.shape)} (t, s); root S {tuple(S.shape)}: ‖SSᵀ − C‖/‖C‖ = {root_err:.1e}")
print(
    f"sampling: first call {t_first * 1e3:.1f} ms (builds S), later {t_again * 1e3:.1f} ms; "
    f"grid root: {t_grid * 1e3:.1f} ms"
)
for label, F in (("test root", draws), ("grid root", draws_grid)):
    z_mean = ((F.mean(1) - post_s.mean) / (post_s.var / s).sqrt()).abs().max()
    rel_var = ((F.var(1) - post_s.var) / post_s.var).abs()
    print(
        f"{label}: max |z| of the sample mean {float(z_mean):.1f}, relative error of the "
        f"sample variance: median {float(rel_var.median()):.3f}, max {float(rel_var.max()):.3f} "
        f"(Monte Carlo: ≈ {math.sqrt(2 / s):.3f})"
    )
assert draws.shape == (Xp.shape[0], s)
assert root_err < 1e-3

# %% [markdown]
# The sample moments agree with LOVE's mean and variance up to Monte Carlo error
# (`√(2/s)` for a variance). Below, left: the mean ± 2 sd band and three joint draws; in
# the gap the band widens and the draws spread apart. Right: the bike model along the
# hour of day at a cold and a warm temperature (10th and 90th percentile of the training
# temperatures), with training points of similar temperature — the same cache serves
# every slice.

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4), dpi=110)
ax = axes[0]
xp = Xp[:, 0]
title = f"1-d SKI + LOVE, n = {X_s.shape[0]}"
pn.plotting.draw_gp_band(ax, xp, post_s.mean, post_s.var, title=title)
ax.scatter(X_s[:300, 0], y_s[:300], s=4, c="k", alpha=0.3, label="data (300 shown)")
ax.plot(xp, draws[:, :3], color="C1", lw=0.8)
ax.plot([], [], color="C1", lw=0.8, label="joint LOVE draws")
ax.axvspan(0.55, 0.7, color="C2", alpha=0.1, label="no data")
ax.set_xlabel("x")
ax.legend(fontsize=7, loc="lower left")

ax = axes[1]
hour_raw = ds.X_train[:, 6] * ds.x_std[6] + ds.x_mean[6]
hour_zero = float(hour_raw.min())  # the raw column is the hour minus a constant
hours = torch.linspace(float(X[:, 0].min()), float(X[:, 0].max()), 200, dtype=F64)
hours_h = hours * ds.x_std[6] + ds.x_mean[6] - hour_zero
temps = [float(X[:, 1].quantile(q)) for q in (0.1, 0.9)]
Xg = torch.cat([torch.stack([hours, torch.full_like(hours, tp)], dim=1) for tp in temps])
pg = ski_gp.posterior(Xg, method="love", cache=cache)  # both slices: one joint posterior
draws_g = pg.sample(3, generator=torch.Generator().manual_seed(2))  # (400, 3)
for i, (q, tp) in enumerate(zip((0.1, 0.9), temps, strict=True)):
    part = slice(200 * i, 200 * (i + 1))
    mean_i, sd_i = pg.mean[part], pg.var[part].sqrt()
    ax.fill_between(hours_h, mean_i - 2 * sd_i, mean_i + 2 * sd_i, color=f"C{i}", alpha=0.25)
    ax.plot(hours_h, mean_i, color=f"C{i}", label=f"temperature {tp:+.2f} (q = {q})")
    ax.plot(hours_h, draws_g[part], color=f"C{i}", lw=0.6, alpha=0.8)
    near = ((X[:, 1] - tp).abs() < 0.05).nonzero()[:200, 0]
    ax.scatter(X[near, 0] * ds.x_std[6] + ds.x_mean[6] - hour_zero, y[near], s=4,
               color=f"C{i}", alpha=0.3)  # fmt: skip
ax.set_xlabel("hour of day")
ax.set_ylabel("log rentals (standardised)")
ax.set_title(f"bike, SKI + LOVE (n = {n}): mean ± 2 sd of f, 3 draws")
ax.legend(fontsize=7, loc="lower right")
fig.tight_layout()
fig.savefig(OUT / "11_ski_love_samples.png")
plt.close(fig)

# %% [markdown]
# The bike bands are narrow — with ~15 600 observations of a two-input function the
# posterior of `f` is tight; the scatter of the data around it is the noise `σ²`, which
# the band of `f` does not include. The commute peaks at 8 and 17–18 h and the night low
# are there at both temperatures, shifted up when it is warm. The two slices are one
# joint posterior at 400 points, so the draws are coherent across them. (A single slice
# — 200 points on one line — has a test covariance of rank at most 32, the hour grid,
# below the Lanczos rank 50; at the time of writing `post.sample` then stops with a
# `NotPositiveDefiniteError` on a rounding-level negative Ritz value.)
#
# **Which root?** On the bike slices, how much of LOVE's variance does each rank-50 root
# reproduce (`diag(S Sᵀ)` against `post.var`)?

# %%
S_test = pg.sample_root()  # (400, 50): Lanczos on the test covariance
with torch.no_grad():
    S_grid = ski_gp.kernel.linop(Xg).left @ cache.grid.sampling_root  # W_s S_grid
for label, root in (("test root", S_test), ("grid root", S_grid)):
    ratio = (root * root).sum(1) / pg.var
    print(
        f"{label} {tuple(root.shape)}: diag(SSᵀ) / var from {float(ratio.min()):.3f} to "
        f"{float(ratio.max()):.3f} (mean {float(ratio.mean()):.3f})"
    )
assert float(((S_test * S_test).sum(1) / pg.var - 1).abs().max()) < 1e-3

# %% [markdown]
# The paper's grid root spends its rank on the directions of largest *grid* covariance,
# `K_UU − root rootᵀ`: where there are no data and the posterior is still the prior (the
# empty corners of the hour × temperature box). At the slice points, inside the data, it
# reproduces only part of the variance; the test root is built where the draws are
# wanted and is accurate to rounding. That is why `post.sample` uses the test root. The
# grid root pays when many different test sets are sampled and its directions are good
# for them — as in the 1-d problem above, where 1000 grid points and data almost
# everywhere leave both roots accurate.
#
# ## 5. Where the grid stops paying
#
# Everything above rests on two counts that are exponential in `d`:
#
# * the grid has `m = grid_sizeᵈ` points: `K_UU` products cost `O(m log m)` and the LOVE
#   cache's grid root stores `m × k` numbers;
# * each point interpolates from `4ᵈ` grid points: `W` stores `n 4ᵈ` weights (an index
#   and a value each, and `pnsolve` keeps `W` and `Wᵀ`), a product costs `n 4ᵈ`, and a
#   LOVE variance `4ᵈ k + 16ᵈ`.
#
# The exact kernel, matrix-free (`IterGP` with `backend="chunked"`), costs `O(n² d)` per
# product and `O(n)` memory at any `d`; its LOVE variance (tutorial 05) costs `O(n k)`
# plus `n` kernel evaluations per test point. We measure both on `n` uniform points in
# `[0, 1]ᵈ` with an RBF of lengthscale 0.3, the same grid size 12 per dimension for every
# `d`, a smooth target and LOVE rank 20: the time of one product with `K̂`, the LOVE
# time per test point (1000 test points), the memory of the grid root and the SKI error
# `max |k_SKI(x, x) − k(x, x)|`.

# %%
n_d = 1000 if SMOKE else 5000
gsz, k_d, t_d = 12, 20, 1000
rows_d = []
for d in range(1, 6):
    gen = torch.Generator().manual_seed(10 + d)
    Xd = torch.rand(n_d, d, generator=gen, dtype=F64)
    yd = torch.sin(3 * Xd.sum(1)) + 0.1 * torch.randn(n_d, generator=gen, dtype=F64)
    Xsd = torch.rand(t_d, d, generator=gen, dtype=F64)
    v = torch.randn(n_d, 1, generator=gen, dtype=F64)
    base_d = pn.kernels.RBF(lengthscale=0.3)
    ski_d = pn.kernels.GridInterpolation(base_d, gsz, grid_bounds=[(0.0, 1.0)] * d)
    models = {
        "grid": pn.gp.IterGP(ski_d, 0.01, pn.policies.CG(), pn.stopping.MaxIterations(k_d)),
        "exact": pn.gp.IterGP(
            base_d, 0.01, pn.policies.CG(), pn.stopping.MaxIterations(k_d), backend="chunked"
        ),
    }
    row = {"d": d, "m": gsz**d, "w": 4**d}
    for name, model in models.items():
        model.fit(Xd, yd)
        with torch.no_grad():
            row[f"{name} product"], _ = best_of(lambda model=model, v=v: model.A @ v)
        c = model.build_love_cache(rank=k_d)
        row[f"{name} love"], _ = best_of(
            lambda model=model, c=c, Xsd=Xsd: model.posterior(Xsd, method="love", cache=c)
        )
        if name == "grid":
            W_d = model.kernel.linop(Xd).left
            row["W MB"] = 2 * W_d.indices.numel() * 16 / 1e6  # W and Wᵀ, index + value
            row["root MB"] = c.grid.root.numel() * 8 / 1e6
            with torch.no_grad():
                row["err"] = float((ski_d.diag(Xsd) - base_d.diag(Xsd)).abs().max())
    rows_d.append(row)
print(f"n = {n_d} training points, grid size {gsz} per dimension, LOVE rank {k_d}, t = {t_d}")
print(
    f"{'d':>2s} {'m':>8s} {'4^d':>5s} {'W MB':>7s} {'root MB':>8s} {'SKI product':>12s} "
    f"{'exact product':>14s} {'LOVE grid':>10s} {'LOVE exact':>11s} {'SKI error':>9s}"
)
for r in rows_d:
    print(
        f"{r['d']:2d} {r['m']:8d} {r['w']:5d} {r['W MB']:7.1f} {r['root MB']:8.1f} "
        f"{r['grid product'] * 1e3:9.2f} ms {r['exact product'] * 1e3:11.2f} ms "
        f"{r['grid love'] / t_d * 1e6:7.1f} µs {r['exact love'] / t_d * 1e6:8.1f} µs "
        f"{r['err']:9.1e}"
    )
print("\n(µs per test point; products of K̂ with one vector)")

# %% [markdown]
# Read down the columns. The exact kernel's costs hardly depend on `d` (a kernel
# evaluation is a `d`-term sum); SKI's grow by a factor of 4 to 12 per dimension:
#
# * **products**: in 1–3 dimensions SKI is one to three orders of magnitude cheaper than
#   the exact kernel; at `d = 5` the `m log m` grid work (`12⁵ ≈ 250 000` points) and the
#   `4⁵ = 1024` weights per point have caught up with it (full run, `n = 5000`: within a
#   factor of two; smoke run, `n = 1000`: SKI is slower). The exact product grows like
#   `n²`, so a larger `n` moves the crossover up, but each dimension multiplies SKI's
#   costs by 4 to 12;
# * **LOVE per test point**: a few microseconds in 1–2 dimensions, but `16ᵈ` (the SKI
#   prior variance) and `4ᵈ k` grow to about a million multiply-adds per point at
#   `d = 5`. In the full run the exact kernel's LOVE (`O(n k)` per point, 30–40 µs at
#   `n = 5000`) ties with the grid at `d = 4` and is about ten times faster at `d = 5`.
#   "Constant time" is constant in `n` — and exponential in `d`;
# * **memory**: `W` grows as `n 4ᵈ` — at `n = 10⁶`, `d = 5` that is over 30 GB — and the
#   grid root as `12ᵈ k`;
# * **accuracy**: at a fixed grid size per dimension the SKI error grows slowly with
#   `d` (the interpolation errors of the dimensions add up). Keeping it fixed as the
#   lengthscales shrink means a finer grid in every dimension, and `m` grows as the
#   `d`-th power of that.
#
# `pnsolve` refuses grids in more than 5 dimensions:

# %%
try:
    pn.kernels.GridInterpolation(pn.kernels.RBF(lengthscale=torch.ones(6, dtype=F64)), 12)
except ValueError as err:
    print(f"ValueError: {err}")
else:
    raise AssertionError("a 6-d grid should be refused")

# %% [markdown]
# (With a scalar lengthscale the kernel does not know `d` until it sees data; the same
# message comes from `fit` or from the first kernel evaluation.)
#
# ## When to use which
#
# * **SKI + LOVE** (`GridInterpolation` with `IterGP` and `build_love_cache`): low
#   input dimension (1–3, up to 4 with a coarse grid), large `n`, and many predictions —
#   time series, spatial and spatio-temporal data, a couple of informative inputs as
#   here, Bayesian optimisation in few dimensions. Fit and cache once, then means,
#   variances and samples at a cost per point that does not grow with `n`. Choose
#   `grid_size` so that the spacing is a fraction (about a third or less) of each
#   lengthscale, check the kernel error on a subset as in section 2, and make
#   `grid_bounds` cover the test inputs.
# * **The matrix-free base kernel with IterGP** (`IterGP(RBF(...), noise, policy,
#   stopping, backend="chunked")`, LOVE with `build_love_cache` as in tutorial 05): from
#   about 4–5 inputs up, or when the lengthscales are short compared with the data's range
#   (the grid would need too many points), or when `n` is moderate. It costs `O(n² d)` per
#   product, but no grid, no interpolation error and memory linear in `n`; LOVE then costs
#   `O(n k)` per test point.
# * **ExactGP** with the SKI kernel is a dense reference for `n ≤ 5000` only (and it forms
#   `W K_UU Wᵀ` through an `(m, n)` intermediate, so keep it to small grids); with the
#   exact kernel it is the reference for the model itself.

# %%
print(f"tutorial ran in {time.perf_counter() - T_START:.0f} s")
