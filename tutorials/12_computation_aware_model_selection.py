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
# # Computation-aware GPs: model selection with a bound that knows what was computed
#
# IterGP (tutorial 04) showed that a GP whose linear solve stopped early still has a
# proper posterior: the exact GP's uncertainty plus a *computational* uncertainty for
# the directions the solver never looked at. Wenger et al. (NeurIPS 2024) turn this
# into a model one can *train*: **CaGP** conditions the GP prior on `i` linear
# projections of the data,
#
#     z = Sᵀy,   S ∈ ℝ^{n×i}  (the actions),
#
# instead of on `y` itself. With `K̂ = K + σ²I` and `Ĝ = SᵀK̂S` (`i × i`) the posterior
# at `x` has mean `μ + k(x, X) S Ĝ⁻¹ Sᵀ(y − μ)` and variance
# `k(x, x) − k(x, X) S Ĝ⁻¹ Sᵀ k(X, x)`. This is exact Bayesian inference given `z`, so
# the variance is never below the exact GP's; the difference is the computational
# uncertainty. Two choices make the model practical:
#
# * **block-sparse actions**: column `j` of `S` is non-zero only on a block of about
#   `n/i` training points, every point in exactly one block. `S` is stored as its `n`
#   non-zero entries, which are *learned*;
# * **an ELBO for model selection**: the posterior given `z` is a Gaussian `q(f)` over
#   the training function values, and `E_q log p(y | f) − KL(q ‖ p)` is a lower bound on
#   the log marginal likelihood that accounts for what the `i` actions missed.
#   Hyperparameters *and* action entries are trained by maximising it.
#
# A training step costs one pass over the `n²` kernel entries for `K S` (and its
# backward) plus `O(n i² + i³)` algebra, in `O(n i)` memory with a matrix-free kernel
# backend (`backend="chunked"`, what `"auto"` picks beyond a few thousand points). A
# prediction costs
# `O(n d)` kernel entries and `O(i²)` per test point: linear in `n`. This tutorial:
#
# 1. looks at the posterior given `Sᵀy` and its variance decomposition on 1-d data;
# 2. checks the ELBO: below the exact log marginal likelihood, and equal to it with
#    `i = n` one-point actions;
# 3. trains CaGP on real data (UCI *elevators*) and compares it with an exact GP;
# 4. compares `blocks="random"` with `blocks="kmeans"`;
# 5. plots the posterior across a gap in the data.
#
# Set `PNSOLVE_SMOKE=1` for tiny budgets (the test suite does).

# %%
import copy
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


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# %% [markdown]
# ## 1. The posterior given `Sᵀy`
#
# 1-d data with a gap: 300 points on `[0, 1] ∪ [2, 3]`, `y = sin 3x + 0.1 ε`. A CaGP
# with `i` actions, fitted with `steps=0`: the hyperparameters stay where we put them and
# the actions keep their random initial entries (`N(0, 1/|block|)` on each block). The
# posterior's `.var` is the combined variance; `.math_var` is the exact GP's at the same
# hyperparameters (computed on demand by CG solves with `K̂`) and `.comp_var` the rest.

# %%
g = gen(0)
n_gap = 300
x = torch.rand(n_gap, generator=g, dtype=F64)
x = torch.where(torch.arange(n_gap) % 2 == 0, x, x + 2.0)
X_gap, y_gap = x.unsqueeze(1), torch.sin(3 * x) + 0.1 * torch.randn(n_gap, generator=g, dtype=F64)
grid = torch.linspace(-0.5, 3.5, 200, dtype=F64).unsqueeze(1)
in_gap = (grid[:, 0] > 1.2) & (grid[:, 0] < 1.8)
on_data = (grid[:, 0] >= 0) & (grid[:, 0] <= 1)

print(f"{'i':>4s} {'mean sd':>8s} {'comp. share of var':>19s} {'(on the data)':>14s}")
for i in (4, 16, 64):
    m = pn.gp.CaGP(pn.kernels.RBF(lengthscale=0.5), 0.01, i)
    post = m.fit(X_gap, y_gap, steps=0, generator=gen(1)).posterior(grid)
    share = post.comp_var / post.var
    print(f"{i:4d} {float(post.var.sqrt().mean()):8.3f} {float(share.mean()):19.3f} "
          f"{float(share[on_data].mean()):14.3f}")  # fmt: skip
    assert float(post.comp_var.min()) >= -1e-8  # never below the exact GP's variance

# %% [markdown]
# With more actions the computational share shrinks: the projections `Sᵀy` carry more
# of the data. Its share is largest where the data are: there the exact GP is certain,
# and what is left of the posterior variance is mostly the price of having looked at the
# data only through `i` random projections.
#
# ## 2. The ELBO
#
# `m.elbo(X, y)` is on the scale of the exact log marginal likelihood (a sum over the
# `n` points) and never above it: the gap is `KL(q ‖ exact posterior)`. With `i = n`
# actions of one point each, `S` is a permutation matrix (up to the entries' scale) and
# `q` *is* the exact posterior, so the bound is tight. `blocks="random"` with
# `num_actions=n` puts one point in each block; setting every entry to 1 makes `S` a
# permutation. (Any non-zero entries would do: with one point per block `S` is then a
# scaled permutation, invertible, and `Sᵀy` determines `y`.)

# %%
kernel = pn.kernels.RBF(lengthscale=0.5)
noise = 0.01
X_small, y_small = X_gap[:100], y_gap[:100]
lml = float(pn.gp.ExactGP(kernel, noise).fit(X_small, y_small).log_marginal_likelihood().detach())
print(f"exact log marginal likelihood: {lml:.3f}")
for i in (5, 20, 50, 100):
    m = pn.gp.CaGP(copy.deepcopy(kernel), noise, i)
    m.fit(X_small, y_small, steps=0, generator=gen(2))
    print(f"i = {i:3d}, random entries: ELBO {m.elbo(X_small, y_small):10.3f}")
    assert m.elbo(X_small, y_small) <= lml + 1e-6 * abs(lml)
with torch.no_grad():
    m.action_values.fill_(1.0)  # i = n one-point blocks: S is a permutation matrix
tight = m.elbo(X_small, y_small)
print(f"i = 100, S a permutation: ELBO {tight:10.3f}  (difference to the exact value "
      f"{tight - lml:.2e})")  # fmt: skip
assert abs(tight - lml) <= 1e-6 * abs(lml)

# %% [markdown]
# With few random actions the bound is far below the exact value: `q` has seen only
# `i` random combinations of the targets, and the ELBO charges for every direction it
# missed. Training moves the hyperparameters *and* the entries to close that gap at
# `i ≪ n`, which is what makes the ELBO useful for model selection: it prefers
# hyperparameters under which the `i` actions explain the data well.
#
# ## 3. Training on elevators
#
# *elevators* (18 inputs, about 15 000 training rows, standardised on the training
# split) subsampled to `n` rows; an ARD RBF kernel started at lengthscales 1, noise 0.1;
# `fit` runs Adam on `−ELBO / n` over the kernel's parameters and the noise (rate 0.3)
# and the action entries (rate 0.1), the defaults. `m.training.history` holds the ELBO
# before every step.

# %%
n, n_test = (300, 300) if SMOKE else (1000, 1000)
i_uci = 32 if SMOKE else 128
steps = 25 if SMOKE else 200
ds = pn.datasets.load_uci("elevators", split=0)
idx = torch.randperm(ds.X_train.shape[0], generator=gen(3))[:n]
jdx = torch.randperm(ds.X_test.shape[0], generator=gen(4))[:n_test]
X, y = ds.X_train[idx].to(F64), ds.y_train[idx].to(F64)
Xs, ys = ds.X_test[jdx].to(F64), ds.y_test[jdx].to(F64)
d = X.shape[1]
print(f"elevators: n = {n}, d = {d}, {n_test} test rows; CaGP with i = {i_uci}, {steps} steps")


def nll(mean: torch.Tensor, var: torch.Tensor) -> float:
    """Mean negative log predictive density of the test targets."""
    return -pn.metrics.gaussian_log_likelihood(mean, var, ys)


t0 = time.perf_counter()
cagp = pn.gp.CaGP(pn.kernels.RBF(lengthscale=torch.ones(d, dtype=F64)), 0.1, i_uci)
cagp.fit(X, y, steps=steps, generator=gen(5))  # the default rates: 0.3, actions 0.1
t_cagp = time.perf_counter() - t0
post = cagp.posterior(Xs)
elbo_curve = [h["elbo"] / n for h in cagp.training.history]
per_step = sorted(h["seconds"] for h in cagp.training.history)[len(elbo_curve) // 2]
print(f"CaGP: {t_cagp:.1f} s ({per_step:.3f} s per step, median); ELBO/n from "
      f"{elbo_curve[0]:.3f} to {cagp.elbo(X, y) / n:.3f}; noise {cagp.noise:.4f}")  # fmt: skip
assert cagp.elbo(X, y) > cagp.training.history[0]["elbo"]

# %% [markdown]
# The exact GP for comparison: its own hyperparameters by maximising the exact log
# marginal likelihood (a Cholesky factorisation and its backward per step: fine at this
# `n`, not at 10⁵), and also the exact GP at *CaGP's* hyperparameters. The latter
# separates the two things CaGP changes: the hyperparameters it selects (by the ELBO) and
# the inference it does with them (given `Sᵀy`).

# %%
t0 = time.perf_counter()
k_exact = pn.kernels.RBF(lengthscale=torch.ones(d, dtype=F64))
fit = pn.gp.fit_exact_hyperparameters(k_exact, X, y, noise=0.1, steps=20 if SMOKE else 150)
exact = pn.gp.ExactGP(k_exact, float(fit.noise)).fit(X, y)
t_exact = time.perf_counter() - t0
pe = exact.posterior(Xs)
same = pn.gp.ExactGP(copy.deepcopy(cagp.kernel), cagp.noise).fit(X, y)
ps = same.posterior(Xs)
rows = [
    ("CaGP", post.mean, post.var + cagp.noise, t_cagp),
    ("exact GP, own hyperparameters", pe.mean, pe.var + float(fit.noise), t_exact),
    ("exact GP, CaGP's hyperparameters", ps.mean, ps.var + cagp.noise, None),
]
print(f"{'model':34s} {'test RMSE':>9s} {'test NLL':>9s} {'train s':>8s}")
for label, mean, var, sec in rows:
    secs = "—" if sec is None else f"{sec:.1f}"
    print(f"{label:34s} {pn.metrics.rmse(mean, ys):9.4f} {nll(mean, var):9.4f} {secs:>8s}")
lml_at_cagp = float(same.log_marginal_likelihood().detach())
print(f"at CaGP's hyperparameters: ELBO {cagp.elbo(X, y):.1f} ≤ exact log marginal "
      f"likelihood {lml_at_cagp:.1f}")  # fmt: skip
assert cagp.elbo(X, y) <= lml_at_cagp + 1e-6 * abs(lml_at_cagp)

# %% [markdown]
# The variance decomposition at the test points: `math_var` is the exact GP's variance
# at CaGP's hyperparameters (it matches the third row's model), `comp_var` what the
# `i` learned actions leave.

# %%
math_err = float((post.math_var - ps.var).abs().max() / ps.var.max())
share = post.comp_var / post.var
print(f"max |math_var − exact var| / max var = {math_err:.1e}")
print(f"computational share of the latent variance: median {float(share.median()):.3f}, "
      f"90th percentile {float(share.quantile(0.9)):.3f}")  # fmt: skip
mean_gap = pn.metrics.rmse(post.mean, ps.mean) / float(ps.var.mean().sqrt())
print(f"RMS difference of the means (CaGP − exact, same hyperparameters) / mean exact sd: "
      f"{mean_gap:.3f}")  # fmt: skip
assert math_err < 1e-2

fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
axes[0].plot(range(1, len(elbo_curve) + 1), elbo_curve, "C0-")
lml_label = "exact log marginal likelihood / n\n(at the final hyperparameters)"
axes[0].axhline(lml_at_cagp / n, color="k", ls="--", lw=1, label=lml_label)
axes[0].set_xlabel("Adam step")
axes[0].set_ylabel("ELBO / n")
axes[0].set_title(f"CaGP on elevators (n = {n}, i = {i_uci})")
axes[0].legend(fontsize=8)
axes[1].scatter(ps.var.sqrt(), post.var.sqrt(), s=4, alpha=0.5, label="combined (CaGP .var)")
axes[1].scatter(ps.var.sqrt(), post.math_var.sqrt(), s=4, alpha=0.5, label="math_var")
lim = float(post.var.sqrt().max()) * 1.05
axes[1].plot([0, lim], [0, lim], "k--", lw=1)
axes[1].set_xlabel("exact GP sd (CaGP's hyperparameters)")
axes[1].set_ylabel("CaGP sd")
axes[1].set_title("test points: CaGP's sd is never below the exact one")
axes[1].legend(fontsize=8)
fig.tight_layout()
fig.savefig(OUT / "12_cagp_training.png", dpi=110)
plt.close(fig)

# %% [markdown]
# How close CaGP gets to the exact GP depends on `i / n` and on the data; the table
# above is the measurement for this subset. `benchmarks/bench_cagp.py` runs the
# comparison on five UCI sets against SVGP, SGPR, the exact GP and IterGP.
#
# ## 4. Which points share a block: `blocks="random"` or `"kmeans"`
#
# An action is a weighted sum of the targets in its block. `blocks="random"` cuts a
# random permutation into equal blocks, so every action sees points from everywhere;
# `blocks="kmeans"` makes each block a cluster of nearby inputs (a few Lloyd iterations),
# so every action summarises one region, like an inducing point that owns its
# neighbourhood. The same budget for both:

# %%
results = {}
for blocks in ("random", "kmeans"):
    m = pn.gp.CaGP(pn.kernels.RBF(lengthscale=torch.ones(d, dtype=F64)), 0.1, i_uci,
                   blocks=blocks)  # fmt: skip
    t0 = time.perf_counter()
    m.fit(X, y, steps=steps, generator=gen(5))
    p = m.posterior(Xs)
    results[blocks] = (m.elbo(X, y) / n, pn.metrics.rmse(p.mean, ys), nll(p.mean, p.var + m.noise),
                       time.perf_counter() - t0)  # fmt: skip
print(f"{'blocks':8s} {'ELBO/n':>8s} {'test RMSE':>9s} {'test NLL':>9s} {'s':>6s}")
for blocks, (e, r, nl, sec) in results.items():
    print(f"{blocks:8s} {e:8.4f} {r:9.4f} {nl:9.4f} {sec:6.1f}")
better = max(results, key=lambda b: results[b][0])
lower_nll = min(results, key=lambda b: results[b][2])
print(f"higher ELBO here: blocks={better!r}; lower test NLL: blocks={lower_nll!r}")

# %% [markdown]
# The ELBO is the criterion the fit optimises, so it is also the fair way to choose
# between the two on training data alone; the test columns say whether that choice
# carried over to held-out data on this subset. Which one wins depends on the data and
# on `i`: compare them on your problem.
#
# ## 5. Across a gap
#
# Back to the 1-d data, now with trained hyperparameters and actions (`i = 16`), against
# the exact GP with its own hyperparameters. CaGP's band is split into the exact GP's
# variance at CaGP's hyperparameters (`math_var`) and the computational part on top of
# it (never negative). Beyond the data, at both ends, both models return towards the
# prior; the table compares the mean posterior sd in the gap (`x` in `[1.2, 1.8]`,
# shaded) and on the data (`[0, 1]`).

# %%
gap_steps = 60 if SMOKE else 500
m16 = pn.gp.CaGP(pn.kernels.RBF(lengthscale=1.0), 0.1, 16)
m16.fit(X_gap, y_gap, steps=gap_steps, lr=0.05, generator=gen(6))
p16 = m16.posterior(grid)
k_gap = pn.kernels.RBF(lengthscale=1.0)
fit_gap = pn.gp.fit_exact_hyperparameters(k_gap, X_gap, y_gap, noise=0.1,
                                          steps=30 if SMOKE else 150)  # fmt: skip
pg = pn.gp.ExactGP(k_gap, float(fit_gap.noise)).fit(X_gap, y_gap).posterior(grid)
print(f"{'':24s} {'sd in the gap':>14s} {'sd on [0, 1]':>13s} {'noise':>7s}")
for label, var, nz in (("CaGP (i = 16)", p16.var, m16.noise),
                       ("  of which math_var", p16.math_var, m16.noise),
                       ("exact GP", pg.var, float(fit_gap.noise))):  # fmt: skip
    sd = var.clamp_min(0).sqrt()
    print(f"{label:24s} {float(sd[in_gap].mean()):14.3f} {float(sd[on_data].mean()):13.3f} "
          f"{nz:7.4f}")  # fmt: skip

fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
xg = grid[:, 0]
sd, sd_math = p16.var.sqrt(), p16.math_var.clamp_min(0).sqrt()
ax = axes[0]
ax.fill_between(xg, p16.mean - 2 * sd, p16.mean + 2 * sd, color="C1", alpha=0.3,
                label="± 2 sd, combined")  # fmt: skip
ax.fill_between(xg, p16.mean - 2 * sd_math, p16.mean + 2 * sd_math, color="C0", alpha=0.4,
                label="± 2 sd, math_var only")  # fmt: skip
ax.plot(xg, p16.mean, "k-", lw=1.2, label="mean")
ax.set_title(f"CaGP, i = 16 (trained {gap_steps} steps)")
ax = axes[1]
sd_e = pg.var.sqrt()
ax.fill_between(xg, pg.mean - 2 * sd_e, pg.mean + 2 * sd_e, color="C0", alpha=0.4,
                label="± 2 sd")  # fmt: skip
ax.plot(xg, pg.mean, "k-", lw=1.2, label="mean")
ax.set_title("exact GP (own hyperparameters)")
for ax in axes:
    ax.plot(X_gap[:, 0], y_gap, ".", color="0.3", ms=2, label="data")
    ax.axvspan(1.2, 1.8, color="0.9", zorder=0)
    ax.set_xlabel("x")
    ax.legend(fontsize=7, loc="lower left")
fig.tight_layout()
fig.savefig(OUT / "12_cagp_gap.png", dpi=110)
plt.close(fig)

# %% [markdown]
# The computational band is what the 16 actions could not pin down: CaGP reports the
# error of its own approximation as posterior uncertainty rather than hiding it.
#
# A faster function, `y = sin 8x` on the same inputs, asks more of 16 actions. With
# random blocks every action mixes points from the whole input space; with k-means
# blocks in one dimension each action covers one interval. The noise each fit settles
# on, next to the exact GP's, is the thing to look at: a noise far above the exact GP's
# means the fit explained structure as noise (a local optimum of the ELBO). More
# actions, the other block choice or a shorter initial lengthscale are the remedies to
# try. The benchmark's version of this figure (`benchmarks/bench_cagp.py --parts
# figure`) runs these cases against gpytorch's SVGP with 16 inducing points.

# %%
y_fast = torch.sin(8 * x) + 0.1 * torch.randn(n_gap, generator=gen(7), dtype=F64)
k_fast = pn.kernels.RBF(lengthscale=1.0)
fit_fast = pn.gp.fit_exact_hyperparameters(k_fast, X_gap, y_fast, noise=0.1,
                                           steps=30 if SMOKE else 150)  # fmt: skip
print(f"y = sin 8x: exact GP noise {float(fit_fast.noise):.4f}, lengthscale "
      f"{float(k_fast.lengthscale.detach()):.3f}")  # fmt: skip
for blocks in ("random", "kmeans"):
    mf = pn.gp.CaGP(pn.kernels.RBF(lengthscale=1.0), 0.1, 16, blocks=blocks)
    mf.fit(X_gap, y_fast, steps=gap_steps, lr=0.05, generator=gen(8))
    print(f"CaGP, {blocks:6s} blocks: ELBO {mf.elbo(X_gap, y_fast):8.1f}, noise "
          f"{mf.noise:.4f} ({mf.noise / float(fit_fast.noise):.1f} × the exact GP's), "
          f"lengthscale {float(mf.kernel.lengthscale.detach()):.3f}")  # fmt: skip
#
# ## When to use CaGP
#
# * **Use it** when `n` is too large for a Cholesky factorisation but a few hundred
#   passes over the kernel matrix are affordable (matrix-free, `O(n i)` memory), and you
#   want hyperparameters selected by a bound that is honest about the approximation, and
#   predictions whose variance includes what the approximation left out.
# * **Prefer the exact GP** where a Cholesky factorisation per training step is
#   affordable (a few thousand points): no approximation at all.
# * **Prefer SVGP or QSGP** (tutorial 10) when even one pass over the `n²` kernel entries
#   per step is too much: their steps touch minibatches only.
# * The learned actions depend on `y`, so the computational variance is not a calibrated
#   error bar (`posterior.calibrated` is `False`); a non-adaptive policy's actions
#   (`actions=pn.policies.Lanczos(start="random")`) give calibrated computational
#   uncertainty, with fixed actions.

# %%
print(f"tutorial ran in {time.perf_counter() - T_START:.0f} s")
