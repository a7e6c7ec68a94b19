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
# # LOVE: fast predictive variances, and what they leave out
#
# An exact GP's predictive variance at a test input `x` is
#
#     v(x) = k(x, x) − k(X, x)ᵀ K̂⁻¹ k(X, x),        K̂ = K(X, X) + σ² I.
#
# With a Cholesky factor of `K̂` every test point costs a triangular solve,
# `O(n²)`. **LOVE** (Lanczos variance estimates, Pleiss et al., 2018) runs `k` Lanczos
# steps on `K̂` from a probe vector `b` *once*, which gives an orthonormal basis `Q`
# (shape `(n, k)`) of the Krylov space `K_k(K̂, b)` and a tridiagonal `T = Qᵀ K̂ Q`, and
# approximates
#
#     K̂⁻¹ ≈ Q T⁻¹ Qᵀ = R Rᵀ,        R = Q L_T⁻ᵀ   (T = L_T L_Tᵀ, R has shape (n, k)),
#
# so that each test point costs `O(n k)`:
#
#     v_k(x) = k(x, x) − ‖Rᵀ k(X, x)‖².
#
# **Why LOVE's variance is never below the exact one.** For any basis `S` of the
# Krylov space, `Q T⁻¹ Qᵀ = S (Sᵀ K̂ S)⁻¹ Sᵀ`: this is exactly the inverse
# approximation `C_k` of the probabilistic linear solver with the CG policy after `k`
# steps on `K̂ x = b` (tutorial 02). `K̂^½ C_k K̂^½` is an orthogonal projector, so
# `C_k ≼ K̂⁻¹` and
#
#     v_k(x) − v(x) = k(X, x)ᵀ (K̂⁻¹ − C_k) k(X, x) ≥ 0.
#
# Under the solver's inverse prior, `K̂⁻¹ − C_k` is the covariance `Σ_k` of its belief
# about `K̂⁻¹ b`: the gap is LOVE's **computational uncertainty** — the part of
# `K̂⁻¹` that `k` Lanczos steps have not explored — and `pnsolve` reports it as
# `posterior.comp_var`. LOVE errs on the safe side: too wide, never too narrow.
#
# **The probe.** The Krylov space should contain the directions `k(X, x)` of the test
# points we care about. The paper's probe, `pnsolve`'s default when test inputs are
# given, is their average `b = mean_x k(X, x)`.
#
# This tutorial measures LOVE's accuracy against exact variances on real data
# (UCI *concrete*), its speed, its computational uncertainty as a solver belief, and
# its fast joint predictive samples. Set `PNSOLVE_SMOKE=1` to run everything on
# smaller problems (the test suite does).

# %%
import itertools
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
F64 = torch.float64


def best_of(fn, repeats: int):
    """Shortest wall time of ``repeats`` calls of ``fn()``, and the last result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def max_rel(var: torch.Tensor, ref: torch.Tensor) -> float:
    """Largest relative error ``max |var − ref| / ref``."""
    return float(((var - ref).abs() / ref).max())


# %% [markdown]
# ## 1. Data and hyperparameters
#
# *concrete* (compressive strength of 1 030 concrete mixtures, shipped with `pnsolve`)
# has 8 inputs, standardised with the training statistics. We look at two views of
# it: the first three inputs (cement, blast-furnace slag, fly ash: `d = 3`) and all
# eight. For each view we fit RBF-ARD lengthscales, the outputscale and the noise by
# maximising the exact marginal likelihood (`pn.gp.fit_exact_hyperparameters`, Adam),
# so that LOVE is judged at the hyperparameters a user would actually get.

# %%
g = torch.Generator().manual_seed(0)
ds = pn.datasets.load_uci("concrete", split=0)
n_fit = 200 if SMOKE else ds.X_train.shape[0]
steps = 10 if SMOKE else 80
rows = torch.randperm(ds.X_train.shape[0], generator=g)[:n_fit]
y, ys = ds.y_train[rows], ds.y_test
views = {"3 inputs": [0, 1, 2], "8 inputs": list(range(8))}
models: dict[str, tuple[pn.gp.ExactGP, torch.Tensor, torch.Tensor]] = {}
for name, cols in views.items():
    X, Xs = ds.X_train[rows][:, cols], ds.X_test[:, cols]
    kernel = pn.kernels.RBF(lengthscale=torch.ones(len(cols), dtype=F64))
    fit = pn.gp.fit_exact_hyperparameters(kernel, X, y, noise=0.1, steps=steps, lr=0.1)
    gp = pn.gp.ExactGP(kernel, fit.noise).fit(X, y)
    models[name] = (gp, X, Xs)
    ls = ", ".join(f"{v:.2f}" for v in kernel.lengthscale.tolist())
    print(
        f"concrete, {name}: n = {n_fit}, t = {Xs.shape[0]}; lengthscales ({ls}), "
        f"outputscale {float(kernel.outputscale.detach()):.3f}, noise {fit.noise:.4f}; "
        f"test RMSE {pn.metrics.rmse(gp.posterior(Xs).mean, ys):.3f}"
    )

# %% [markdown]
# ## 2. Accuracy vs rank
#
# For each rank `k` we compare LOVE's variances with the exact (Cholesky) ones at the
# test inputs: the LOVE paper's **SMAE** (`pn.metrics.smae`: mean absolute error
# divided by the variance of the test targets) and the largest relative error. As
# `v_k ≥ v`, the absolute error *is* the computational variance, so SMAE is just its
# mean on the scale of the data. `gp.posterior(Xs, method="love", rank=k)` builds a
# fresh cache with the default probe each time, for that call only: the posterior hands
# it back as `post.love_cache` and the model is never modified.

# %%
ranks = (5, 10, 25, 50, 100) if SMOKE else (5, 10, 25, 50, 100, 200)
accuracy: dict[str, dict[int, tuple[float, float]]] = {}
comp_mean: dict[str, dict[int, float]] = {}
print(f"{'view':9s} {'rank':>5s} {'SMAE':>9s} {'max rel err':>11s} {'min(v_k − v)':>13s}")
for name, (gp, _, Xs) in models.items():
    exact_var = gp.posterior(Xs).var
    tol = 1e-9 * float(gp.kernel.outputscale.detach())  # rounding allowance
    accuracy[name], comp_mean[name] = {}, {}
    for k in ranks:
        post = gp.posterior(Xs, method="love", rank=k)
        gap = post.var - exact_var
        assert bool((gap >= -tol).all()), f"LOVE variance below the exact one ({name}, k={k})"
        assert bool((post.comp_var >= -tol).all())
        accuracy[name][k] = (pn.metrics.smae(post.var, exact_var, ys), max_rel(post.var, exact_var))
        comp_mean[name][k] = float(post.comp_var.mean())
        print(
            f"{name:9s} {k:5d} {accuracy[name][k][0]:9.1e} {accuracy[name][k][1]:11.1e} "
            f"{float(gap.min()):+13.1e}"
        )
    smaes = [accuracy[name][k][0] for k in ranks]
    # nested Krylov spaces: the error never grows with the rank (up to rounding)
    assert all(b <= a + 1e-12 for a, b in itertools.pairwise(smaes)), smaes

# %% [markdown]
# The smallest gap `min(v_k − v)` is never negative beyond rounding: LOVE never claims
# more certainty than the exact GP has.
#
# On three inputs the error falls by orders of magnitude between rank 25 and 100;
# on all eight inputs it falls far more slowly. The rank LOVE needs is set by the
# number of eigenvalues of `K` that stand out above the noise `σ²` — the *effective
# dimension* of the problem — which grows with the input dimension (and with `n` and
# the signal-to-noise ratio): a fixed rank such as 50 is not a safe default. Counting
# those eigenvalues, and the effective degrees of freedom `Σᵢ λᵢ / (λᵢ + σ²)`, shows
# the difference between the two views:

# %%
for name, (gp, X, _) in models.items():
    with torch.no_grad():
        lam = torch.linalg.eigvalsh(gp.kernel(X))
    print(
        f"{name}: {int((lam > gp.noise).sum())} eigenvalues of K above σ² = {gp.noise:.3f}, "
        f"effective degrees of freedom {float((lam / (lam + gp.noise)).sum()):.0f}"
    )

# %%
fig, ax = plt.subplots(figsize=(6, 4), dpi=110)
for i, name in enumerate(models):
    ax.plot(ranks, [accuracy[name][k][0] for k in ranks], "o-", color=f"C{i}", label=name)
ax.set_yscale("log")
ax.set_xlabel("LOVE rank k (Lanczos steps)")
ax.set_ylabel("SMAE of the variances")
ax.set_title(f"LOVE vs exact variances, concrete (n = {n_fit})")
ax.grid(True, which="both", alpha=0.3)
ax.legend()
fig.tight_layout()
fig.savefig(OUT / "05_smae_vs_rank.png")
plt.close(fig)

# %% [markdown]
# ### The probe matters (a little)
#
# Three probes at the same rank, on the three-input view: the default average of the
# test points' cross-covariances, the centred targets `y − μ` (the Krylov space of CG on
# the training system), and a random Gaussian vector. The default wins because it is
# built from the very directions `k(X, x)` whose norms LOVE has to get right.

# %%
gp3, X3, Xs3 = models["3 inputs"]
exact3 = gp3.posterior(Xs3).var
k_probe = 25
probes = {
    "default: mean k(X, x)": None,
    "targets y − μ": y - gp3.mean,
    "random N(0, I)": torch.randn(n_fit, generator=torch.Generator().manual_seed(1), dtype=F64),
}
for label, probe in probes.items():
    post = gp3.posterior(Xs3, method="love", rank=k_probe, probe=probe)
    print(f"probe {label:22s} rank {k_probe}: SMAE {pn.metrics.smae(post.var, exact3, ys):.2e}")

# %% [markdown]
# ## 3. Speed: build once, predict many times
#
# The cache costs `k + 1` products with `K̂`; after it, variances at `t` test points
# cost `t · n · k` multiply-adds (`k(X, x)ᵀ R`) against `t · n² / 2` for the exact
# triangular solves, so the variance part alone speeds up by up to `n / (2k)` (at
# equal flop rates; a triangular solve runs at a lower rate than a plain product). Both
# sides also evaluate the `t × n` cross-covariance `k(Xs, X)` (needed for the mean
# too); those `exp`-bound kernel evaluations are common to both and bound the
# end-to-end gain. `gp.build_love_cache(rank, Xs=...)` builds a cache to reuse across
# `posterior(Xs, method="love", cache=cache)` calls (the model does not keep it).
#
# A larger synthetic problem: a GP draw (RBF, lengthscale 0.5, noise 0.1) at `n`
# uniform points in `[0, 1]³`, predictions at `t` further uniform points. Timings
# depend on the machine (and on what else runs on it); `make bench`
# (`benchmarks/bench_love.py`) measures the ratios at `n = t = 10⁴` on real data.

# %%
n_big, t_big = (600, 800) if SMOKE else (3000, 5000)
speed_ranks = (25, 50) if SMOKE else (25, 50, 100)
repeats = 1 if SMOKE else 3
g = torch.Generator().manual_seed(2)
kern_big = pn.kernels.RBF(lengthscale=0.5)
with torch.no_grad():
    draw = pn.datasets.gp_draws(n_big, d=3, kernel=kern_big, noise=0.1, generator=g)
Xs_big = torch.rand(t_big, 3, generator=g, dtype=F64)
gp_big = pn.gp.ExactGP(kern_big, 0.1)
t_fit, _ = best_of(lambda: gp_big.fit(draw.X, draw.y), 1)
t_exact, exact_big = best_of(lambda: gp_big.posterior(Xs_big).var, repeats)
with torch.no_grad():
    Kxs = kern_big(Xs_big, draw.X)  # (t, n), formed once for the "variance part" timings
    prior_var = kern_big.diag(Xs_big)


def exact_var_part() -> torch.Tensor:
    W = torch.linalg.solve_triangular(gp_big.L, Kxs.mT, upper=False)  # L⁻¹ k(X, Xs)
    return prior_var - (W * W).sum(0)


t_exact_part, _ = best_of(exact_var_part, repeats)
table = [("exact (Cholesky)", f"{t_fit:.2f} (fit)", t_exact_part, t_exact, 1.0, 1.0, 0.0)]
for k in speed_ranks:
    t_cache, cache = best_of(lambda k=k: gp_big.build_love_cache(rank=k, Xs=Xs_big), 1)
    t_part, _ = best_of(lambda c=cache: c.variance(Kxs, prior_var), repeats)
    t_love, love_big = best_of(
        lambda c=cache: gp_big.posterior(Xs_big, method="love", cache=c).var, repeats
    )
    table.append(
        (
            f"LOVE k = {k}",
            f"{t_cache:.2f} (cache)",
            t_part,
            t_love,
            t_exact_part / t_part,
            t_exact / t_love,
            max_rel(love_big, exact_big),
        )
    )
print(f"n = {n_big} training points, t = {t_big} test points, d = 3 (times in seconds)")
print(
    f"{'method':18s} {'precompute':>13s} {'var part':>9s} {'posterior':>10s} "
    f"{'× var part':>10s} {'× posterior':>11s} {'max rel err':>11s}"
)
for row in table:
    print(
        f"{row[0]:18s} {row[1]:>13s} {row[2]:9.3f} {row[3]:10.3f} {row[4]:10.1f} "
        f"{row[5]:11.1f} {row[6]:11.1e}"
    )

# %% [markdown]
# Read the table as: the first column of ratios is LOVE's own work (the `O(n k)`
# projection instead of an `O(n²)` solve); the second is what a caller of
# `posterior(Xs).var` sees. The cache pays for itself as soon as it is reused for a
# batches of test points, and the error column says whether the rank was sufficient:
# speed at an insufficient rank is worth nothing (in the full run rank 100 is accurate
# to a few parts in 10⁴, ranks 25 and 50 are not). On this exact, dense-kernel GP the
# end-to-end gain stays modest because every test point still needs `n` kernel
# evaluations; structured kernels (KISS-GP/SKI) remove that cost.

# %% [markdown]
# ## 4. Computational uncertainty: the cache is a solver belief
#
# `posterior.comp_var = var − math_var` is LOVE's computational variance; it shrinks
# as the rank grows (numbers from section 2, mean over the test points):

# %%
for name in models:
    line = ", ".join(f"k={k}: {comp_mean[name][k]:.1e}" for k in ranks)
    print(f"mean comp_var, {name}: {line}")
for name in models:
    c = [comp_mean[name][k] for k in ranks]
    assert all(b <= a + 1e-12 for a, b in itertools.pairwise(c)), c

# %% [markdown]
# `cache.belief()` returns the cache as a `GaussianSolutionBelief` about `K̂⁻¹ b` (the
# probe as right-hand side, the inverse prior): mean `R Rᵀ b`, inverse approximation
# `C_k = R Rᵀ`. Running the probabilistic linear solver with the CG policy for `k`
# iterations on `K̂ x = b` gives the same belief — Lanczos and CG explore the same
# Krylov space. We check this on the three-input view (`gp.A` is the model's `K̂` as an
# operator, `.to_dense()` forms the `n × n` matrices, fine at this size). That is why
# LOVE's posterior is the same projection of a belief as IterGP's (`project_belief`,
# with the cache's root `R` in place of the solver's), and why `cache.buffer()` can
# hand the Lanczos vectors to a solver as a `KrylovBuffer` (actions `Q`, images `K̂ Q`).

# %%
k_bel = 10 if SMOKE else 25
cache = gp3.build_love_cache(rank=k_bel, Xs=Xs3)
belief = cache.belief()
solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(k_bel))
pls_belief, info = solver.solve(gp3.A, cache.probe)
C_love = cache.inverse_approx.to_dense()
C_pls = pls_belief.inverse_approx.to_dense()
err_C = float((C_love - C_pls).abs().max() / C_pls.abs().max())
err_mean = float((belief.mean - pls_belief.mean).norm() / pls_belief.mean.norm())
print(
    f"rank {k_bel}: LOVE cache vs CG solver after {info.iterations} iterations: "
    f"relative difference of C_k {err_C:.1e}, of the mean {err_mean:.1e}"
)
assert err_C < 1e-8 and err_mean < 1e-8

# %% [markdown]
# The belief's variance along a direction `u` is `uᵀ Σ_k u = uᵀ (K̂⁻¹ − C_k) u`; along
# `u = k(X, x)` it is exactly LOVE's computational variance at `x`. (Under the inverse
# prior `belief.var` needs solves with `K̂`, so we use a handful of test points.)

# %%
t_dir = 10 if SMOKE else 20
post3 = gp3.posterior(Xs3[:t_dir], method="love", cache=cache)
with torch.no_grad():
    directions = gp3.kernel(X3, Xs3[:t_dir])  # (n, t_dir): the columns k(X, x)
belief_var = belief.var(directions)
print(
    f"max |belief.var(k(X, x)) − comp_var| = {float((belief_var - post3.comp_var).abs().max()):.1e}"
    f" (comp_var up to {float(post3.comp_var.max()):.1e})"
)
assert torch.allclose(belief_var, post3.comp_var, rtol=1e-6, atol=1e-10)

# %% [markdown]
# One more consequence: with the targets as probe (`probe = y − μ`), the Krylov space is
# the one CG explores when it solves the training system, so LOVE's variances are those
# of `pn.gp.IterGP` with the CG policy after `k` iterations (tutorial 04): same belief,
# same computational uncertainty. (The means differ: the exact GP's uses the exact
# representer weights, IterGP's the solver's estimate.)

# %%
love_y = gp3.posterior(Xs3, method="love", rank=k_bel, probe=y - gp3.mean)
itergp = pn.gp.IterGP(gp3.kernel, gp3.noise, pn.policies.CG(), pn.stopping.MaxIterations(k_bel))
iter_post = itergp.fit(X3, y).posterior(Xs3)
print(
    f"rank {k_bel}: max |LOVE(probe = y) var − IterGP(CG) var| = "
    f"{float((love_y.var - iter_post.var).abs().max()):.1e}"
)
assert torch.allclose(love_y.var, iter_post.var, rtol=1e-8, atol=1e-10)

# %% [markdown]
# ## 5. Fast joint predictive samples
#
# A joint sample at `t` test points needs a root of the `t × t` predictive covariance
# `C = k(Xs, Xs) − P Pᵀ` (`P = k(Xs, X) R`). The exact route forms `C` and its Cholesky
# factor (`O(t³)` time, `t²` memory) on every call. LOVE runs a **second Lanczos**,
# `k` steps on `C` (products with `k(Xs, Xs)`, never a `t × t` factorisation), and
# keeps a root `S = Q U Λ^½` of shape `(t, k)` with `S Sᵀ ≈ C` (`post.sample_root()`);
# every draw then costs `O(t k)`.
#
# On the three-input concrete model, at `t` points spread uniformly over the box the
# training inputs span, we compare the root with the exact covariance — next to the
# best any rank-`k` root could do (the truncated eigendecomposition of `C`) — and time
# `post.sample(s, generator=...)`: the first LOVE call also builds the root, later
# calls only draw. The last column is the relative error of the sample covariance of
# the `s` draws, which includes the Monte-Carlo error (the exact sampler's line shows
# its size).

# %%
t_s, s = (300, 200) if SMOKE else (1500, 1000)
g = torch.Generator().manual_seed(3)
lo, hi = X3.min(0).values, X3.max(0).values
Xs_s = lo + (hi - lo) * torch.rand(t_s, 3, generator=g, dtype=F64)
post_e = gp3.posterior(Xs_s)
C_exact = post_e.cov()
norm_C = float(torch.linalg.matrix_norm(C_exact))
eig_C = torch.linalg.eigvalsh(C_exact).flip(0).clamp_min(0.0)  # descending


def rel_frob(M: torch.Tensor) -> float:
    """``‖M − C‖_F / ‖C‖_F`` against the exact predictive covariance ``C``."""
    return float(torch.linalg.matrix_norm(M - C_exact)) / norm_C


t_e, samples_e = best_of(lambda: post_e.sample(s, generator=torch.Generator().manual_seed(4)), 1)
print(f"t = {t_s} test points, s = {s} samples per call")
print(
    f"{'sampler':14s} {'root':>12s} {'root error':>10s} {'best rank-k':>11s} "
    f"{'1st call s':>10s} {'later s':>8s} {'sample cov err':>14s}"
)
print(
    f"{'exact (chol.)':14s} {f'({t_s}, {t_s})':>12s} {0.0:10.1e} {'-':>11s} {t_e:10.3f} "
    f"{t_e:8.3f} {rel_frob(torch.cov(samples_e)):14.3f}"
)
for k in (25, 50) if SMOKE else (25, 50, 100):
    post_l = gp3.posterior(Xs_s, method="love", rank=k)
    t_first, samples_l = best_of(
        lambda p=post_l: p.sample(s, generator=torch.Generator().manual_seed(4)), 1
    )
    t_again, _ = best_of(
        lambda p=post_l: p.sample(s, generator=torch.Generator().manual_seed(5)), 1
    )
    S = post_l.sample_root()
    best_k = float(eig_C[k:].square().sum().sqrt()) / norm_C
    print(
        f"{f'LOVE k = {k}':14s} {tuple(S.shape)!s:>12s} {rel_frob(S @ S.mT):10.1e} "
        f"{best_k:11.1e} {t_first:10.3f} {t_again:8.4f} {rel_frob(torch.cov(samples_l)):14.3f}"
    )

# %% [markdown]
# Two errors stack up in LOVE's root: the first Lanczos (rank `k` on `K̂`) makes `C` a
# little too wide — the computational uncertainty again — and the second truncates it
# to rank `k`. Once the root's error is well below the Monte-Carlo error of the
# sample covariance, LOVE's samples are as good as exact ones for anything estimated
# from them. The first call costs about as much as exact sampling at this size on a
# CPU (`k` products with `k(Xs, Xs)` against one `t³/3` Cholesky), later draws are
# nearly free, and memory is `t k` instead of `t²`: the gap grows with `t`.
#
# ## 6. A 1-d slice
#
# Sweep cement (the first input) with slag and fly ash held at their training mean
# (zero after standardisation). Left: LOVE at a small rank — the outer band (LOVE's
# variance) is visibly wider than the inner one (the exact variance): the difference is
# the computational uncertainty. Right: at a larger rank the two bands nearly coincide. The
# thin lines are joint LOVE samples.

# %%
grid = torch.linspace(-2.0, 2.5, 100 if SMOKE else 200, dtype=F64)
Xg = torch.zeros(grid.shape[0], 3, dtype=F64)
Xg[:, 0] = grid
exact_g = gp3.posterior(Xg)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), dpi=110, sharey=True)
for ax, k in zip(axes, (5, 50)):
    post_g = gp3.posterior(Xg, method="love", rank=k)
    pn.plotting.draw_gp_band(
        ax,
        grid,
        post_g.mean,
        post_g.var,
        math_var=exact_g.var,
        title=f"LOVE rank {k}: mean comp. variance {float(post_g.comp_var.mean()):.1e}",
    )
    draws = post_g.sample(3, generator=torch.Generator().manual_seed(6))
    ax.plot(grid, draws, color="C1", lw=0.8, alpha=0.8)
    ax.plot([], [], color="C1", lw=0.8, label="LOVE samples")
    ax.set_xlabel("cement (standardised; slag, fly ash at 0)")
axes[0].set_ylabel("strength (standardised)")
axes[0].legend(fontsize=7)
fig.tight_layout()
fig.savefig(OUT / "05_slice_love.png")
plt.close(fig)
print(f"figures written to {OUT}/05_*.png")
