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
# # GP classification on digits with IterNCGP
#
# A GP classifier puts a GP prior on `C` latent functions and squashes them through a
# softmax. The posterior is not Gaussian; the **Laplace approximation** replaces it by
# a Gaussian at the posterior mode. Finding the mode by Newton's method turns out to be
# a *sequence of GP regressions*, so every Newton step can be solved by IterGP
# (tutorial 04) — with a few solver iterations only, and with computational
# uncertainty on top. This is **IterNCGP** (Tatzel et al., 2024).
#
# Because consecutive Newton steps solve closely related linear systems, the solver's
# past work can be **recycled** through a Krylov buffer, and **compressed** to keep the
# memory bounded. We classify the 8×8 handwritten digits (10 classes) and measure
# what recycling and compression buy in test accuracy and NLL per product with the
# kernel matrix, and what the latent uncertainty looks like.
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
# ## 1. Data
#
# 1797 images of 8×8 pixels (intensities scaled to `[0, 1]`), 64 inputs, labels
# `0…9`, split 80/20 into training and test parts. A fifth of the training part is
# held out as a validation set for choosing the two kernel hyperparameters.

# %%
ds = pn.datasets.load_digits(generator=torch.Generator().manual_seed(0))
g = torch.Generator().manual_seed(1)
X, y, Xs, ys = ds.X_train, ds.y_train, ds.X_test, ds.y_test
if SMOKE:
    i, j = torch.randperm(X.shape[0], generator=g)[:200], torch.randperm(Xs.shape[0], generator=g)
    X, y, Xs, ys = X[i], y[i], Xs[j[:80]], ys[j[:80]]
C = ds.n_classes
n, N = X.shape[0], C * X.shape[0]
perm = torch.randperm(n, generator=g)
n_val = n // 5
X_fit, y_fit, X_val, y_val = X[perm[n_val:]], y[perm[n_val:]], X[perm[:n_val]], y[perm[:n_val]]
lik = pn.likelihoods.Softmax(C)
print(f"digits: n = {n} training points ({N} latent values), {Xs.shape[0]} test points, d = 64")

# %% [markdown]
# ## 2. Newton's method for the Laplace mode is GP regression
#
# Stack the `C` latent functions at the training inputs class by class into one
# vector `f` of length `N = C n`. The prior is `f ~ N(μ, K)` with `K = I_C ⊗ k(X, X)`
# (independent latents sharing one kernel), the likelihood is
# `log p(y | f) = Σᵢ [f_{i,yᵢ} − log Σ_c exp f_{i,c}]` with gradient
# `g = onehot(y) − p` and negative Hessian `W = blkdiag_i(diag pᵢ − pᵢ pᵢᵀ)`.
#
# Newton's step on the Laplace objective
# `Ψ(f) = log p(y | f) − ½ (f − μ)ᵀ K⁻¹ (f − μ)` is
#
#     f_{t+1} − μ = (K⁻¹ + W)⁻¹ (W (f_t − μ) + g)
#                 = K (K + W⁻¹)⁻¹ ŷ_t,          ŷ_t = f_t − μ + W⁻¹ g :
#
# the posterior mean of **GP regression** on pseudo-targets `ŷ_t` observed with
# (heteroscedastic, correlated) noise covariance `W⁻¹`. Each Newton step is one GP
# regression with the system matrix `A_t = K + W_t⁻¹`, and at the mode the Laplace
# covariance `(K⁻¹ + W)⁻¹ = K − K (K + W⁻¹)⁻¹ K` is that regression's posterior
# covariance.
#
# **The softmax wrinkle.** Each block `diag pᵢ − pᵢ pᵢᵀ` has rank `C − 1`: adding the
# same constant to all `C` latents of a point does not change its class
# probabilities, so `W 1 = 0` per point. The Moore–Penrose pseudo-inverse has a closed
# form per point,
#
#     W⁺ = blkdiag_i(P Dᵢ⁻¹ P),        Dᵢ = diag pᵢ,   P = I − 11ᵀ/C,
#
# applied in `O(N)` (centre over the classes, divide by `p`, centre again). `W⁺` is
# zero along each point's class mean, the direction the likelihood cannot see. So
# IterNCGP regresses only the *centred* latents — prior `P K P` (`P` now removes the
# class mean of every point), noise `W⁺`:
#
#     A_t = P K P + W_t⁺        (positive definite on the centred subspace).
#
# This reproduces the Newton step exactly (the mode stays centred), and the latent
# covariance `K − K P A_t⁺ P K` is the Laplace covariance `(K⁻¹ + W)⁻¹`: the class
# mean keeps its prior variance. (Plain `K + W⁺` would treat each point's class sum
# as observed without noise.)
#
# Let us check all of this densely on 25 training points:

# %%
with torch.no_grad():
    m_ = 25
    Xm, ym = X[:m_], y[:m_]
    kern = pn.kernels.RBF(lengthscale=2.0, outputscale=5.0)
    Km = torch.block_diag(*[kern(Xm)] * C)
    Pm = lik.latent_projector(m_, X.dtype, X.device).to_dense()
    Im = torch.eye(C * m_, dtype=X.dtype)
    f = torch.zeros(C * m_, dtype=X.dtype)  # μ = 0
    for _ in range(3):
        F = lik.unflatten(f)
        W, Wp = lik.hessian(F, ym).to_dense(), lik.noise(F, ym).to_dense()
        grad = lik.flatten(lik.gradient(F, ym))
        newton = torch.linalg.solve(torch.linalg.inv(Km) + W, W @ f + grad)
        # A⁺ on the centred subspace: P (A + I − P)⁻¹ P, with A + I − P positive definite
        A_pinv = Pm @ torch.linalg.inv(Pm @ Km @ Pm + Wp + Im - Pm) @ Pm
        regression = Pm @ Km @ Pm @ A_pinv @ (f + Wp @ grad)
        torch.testing.assert_close(regression, newton, rtol=1e-6, atol=1e-6)
        f = newton
    # W + (I − P) is positive definite and W (I − P) = 0: rank W = N − n = n (C − 1)
    torch.linalg.cholesky(W + Im - Pm)
    torch.testing.assert_close(W @ (Im - Pm), torch.zeros_like(W), rtol=0, atol=1e-12)
    # W⁺ satisfies the Moore–Penrose conditions (W⁺ W symmetric follows by transposition)
    for lhs, rhs in ((W @ Wp @ W, W), (Wp @ W @ Wp, Wp), (W @ Wp, (W @ Wp).mT)):
        torch.testing.assert_close(lhs, rhs, rtol=1e-6, atol=1e-6)
    laplace = torch.linalg.inv(torch.linalg.inv(Km) + W)
    torch.testing.assert_close(Km - Km @ A_pinv @ Km, laplace, rtol=1e-6, atol=1e-6)
print(
    f"rank W = {m_ * (C - 1)} = n (C − 1); W⁺ is its pseudo-inverse; the regression on "
    "P K P + W⁺ is the Newton step, its covariance the Laplace covariance ✓"
)

# %% [markdown]
# ## 3. The inner loop is IterGP, and its uncertainty
#
# IterNCGP solves `A_t v = ŷ_t` with the probabilistic linear solver (here the CG
# policy) and stops after a few iterations. After `i` iterations with actions `S` the
# solver believes `v ≈ C_i ŷ_t`, `C_i = S (Sᵀ A_t S)⁻¹ Sᵀ ≈ A_t⁺`. Then
#
# * the Newton direction points to `μ + K v_i`, which costs no extra product with `K`:
#   the solver already knows `A_t v_i = ŷ_t − r_i`, so `K v_i = ŷ_t − r_i − W⁺ v_i`
#   (on the centred subspace). An inexact direction can overshoot, so the step is
#   halved until `Ψ` does not decrease (`NewtonStep.step_size`; `Ψ` needs no K-product
#   either). If no halving helps, the loop stops with `stop_reason == "no_ascent"`.
# * The latent posterior at a test input `x` has mean `μ + k(x, X) v` and the
#   **combined** variance
#
#       k(x, x) − k(x, X) C_i k(X, x)
#         = [k(x, x) − k(x, X) P A_t⁺ P k(X, x)]  +  k(x, X) (P A_t⁺ P − C_i) k(X, x)
#              mathematical (Laplace)                     computational (≥ 0)
#
#   the Laplace variance plus what the solver has not computed yet. Class
#   probabilities follow from the latent marginals by the probit (MacKay)
#   approximation `softmax_c(m_c / √(1 + π v_c / 8))`, or by Monte Carlo.
#
# The cost unit throughout is one **K-product**: one product of `K = I_C ⊗ k(X, X)`
# with an `N`-vector (one inner iteration). We count them by passing the prior
# operator wrapped in `pn.testing.CountingOperator` to `fit`/`iterate`.
#
# ## 4. Recycling and compression
#
# Consecutive systems `A_t = P K P + W_t⁺` share the expensive part `P K P`. The
# `KrylovBuffer` keeps every action `S` together with its image `Z = P K P S`. For the
# next system, `A_{t+1} S = Z + W_{t+1}⁺ S` costs no K-product, so the solver starts
# with a **virtual run**: it conditions on all buffered actions at once
# (`C₀ = S (Sᵀ A_{t+1} S)⁻¹ Sᵀ`). That is a *deflation*: the initial residual is
# orthogonal to everything explored so far, and CG goes on from there.
#
# The buffer grows by one column pair per inner iteration. **Compression** keeps the
# `R` re-weighted directions that retain the most variance reduction at the training
# data (a small generalised eigenproblem), so the memory stays `O(N (R + new
# iterations))` instead of `O(N · all iterations)`.
#
# ## 5. Hyperparameters on a small validation grid
#
# RBF kernel, zero prior mean. We try lengthscales ℓ ∈ {2, 3} and outputscales
# s ∈ {2, 5} and keep the pair with the best validation NLL (each fit: recycling,
# CG, a few inner iterations per Newton step).

# %%
iters = 5 if SMOKE else 10
newton_steps = 6 if SMOKE else 12


def model(kernel, stopping, steps: int, **kw) -> pn.gp.IterNCGP:
    """IterNCGP-CG with the softmax likelihood."""
    return pn.gp.IterNCGP(kernel, lik, pn.policies.CG(), stopping, max_newton_steps=steps, **kw)


def scores(probs: torch.Tensor, labels: torch.Tensor) -> tuple[float, float, float]:
    """Accuracy, NLL and ECE of predicted class probabilities."""
    return (
        pn.metrics.accuracy(probs, labels),
        pn.metrics.nll(probs, labels),
        pn.metrics.ece(probs, labels),
    )


grid = [(2.0, 5.0), (3.0, 5.0)] if SMOKE else [(2.0, 2.0), (2.0, 5.0), (3.0, 2.0), (3.0, 5.0)]
val = {}
for ell, s in grid:
    kernel = pn.kernels.RBF(lengthscale=ell, outputscale=s)
    m = model(kernel, pn.stopping.MaxIterations(iters), newton_steps - 2).fit(X_fit, y_fit)
    val[(ell, s)] = scores(m.predict_proba(X_val), y_val)
    acc, nll, _ = val[(ell, s)]
    print(f"ℓ = {ell}, s = {s}: validation accuracy {acc:.3f}, NLL {nll:.3f}")
ell, s = min(val, key=lambda k: val[k][1])
kernel = pn.kernels.RBF(lengthscale=ell, outputscale=s)
print(f"chosen: ℓ = {ell}, outputscale s = {s}")

# %% [markdown]
# ## 6. Four variants, two ways of stopping the inner loop
#
# We fit on the whole training set with
#
# * **no recycling** (every Newton step starts its solve from scratch),
# * **recycling** (full Krylov buffer),
# * **recycling + compression** to `R = 50` and to `R = 20` directions,
#
# and two inner stopping rules:
#
# * **(a) a fixed budget** of a few CG iterations per Newton step — the regime
#   IterNCGP is made for. `iterate(X, y, Xs=X_test)` yields after every inner
#   iteration (the first yield of a Newton step is the replayed belief after the
#   virtual run) with the latent posterior at the test inputs: we score the test set
#   at the end of every Newton step, and follow the mean combined variance of 50
#   "watched" test points after every inner iteration.
# * **(b) a tolerance**: iterate until the relative residual is below 10⁻², and stop
#   Newton once the RMS change of the mode is below 10⁻². Every variant then reaches
#   the same mode, and we compare what it costs.

# %%
variants = {
    "no recycling": dict(recycle=False),
    "recycling": dict(recycle=True),
    "recycling + compression R = 50": dict(recycle=True, max_rank=50),
    "recycling + compression R = 20": dict(recycle=True, max_rank=20),
}
stop_a = pn.stopping.MaxIterations(iters)
stop_b = pn.stopping.ResidualNorm(rtol=1e-2) | pn.stopping.MaxIterations(400)
tol_b = 1e-2
watch = torch.arange(min(50, Xs.shape[0]))


def run_a(**kw) -> dict:
    """Regime (a): test scores per Newton step, watched variances per inner iteration."""
    m = model(kernel, stop_a, newton_steps, newton_tol=1e-3, **kw)
    K = pn.testing.CountingOperator(m.prior_operator(X))
    h: dict = {"model": m, "products": [], "acc": [], "nll": [], "var": []}
    prev_step, prev_var = -1, None
    for step, state, post in m.iterate(X, y, Xs=Xs, K=K):
        var = post.var[watch].mean(1)  # mean over the C latents, per watched point
        if step == prev_step:  # within a Newton step the belief only sharpens
            assert bool((var <= prev_var + 1e-8 * s).all())
        prev_step, prev_var = step, var
        h["var"].append(float(var.mean()))
        if state.stop_reason is not None:  # the last inner iteration of this Newton step
            acc, nll, _ = scores(lik.predict(post.mean, post.var.clamp_min(0.0)), ys)
            h["products"].append(K.products)
            h["acc"].append(acc)
            h["nll"].append(nll)
    # the virtual runs cost no K-product: every product is a counted inner iteration
    assert K.products == sum(st.products for st in m.steps)
    h["final"] = scores(m.predict_proba(Xs), ys)  # the fitted model (accepted steps)
    return h


def run_b(**kw) -> dict:
    """Regime (b): K-products per Newton step and the residual after each virtual run."""
    m = model(kernel, stop_b, 20, newton_tol=tol_b, **kw)
    K = pn.testing.CountingOperator(m.prior_operator(X))
    start = [
        float(st.relative_residual_norm) for _, st, _ in m.iterate(X, y, K=K) if st.iteration == 0
    ]
    assert K.products == sum(st.products for st in m.steps)
    return {"model": m, "start_residual": start, "final": scores(m.predict_proba(Xs), ys)}


res_a = {label: run_a(**kw) for label, kw in variants.items()}
res_b = {label: run_b(**kw) for label, kw in variants.items()}
for title, res in (("(a) few CG iterations per step", res_a), ("(b) tolerance", res_b)):
    print(title)
    for label, h in res.items():
        mm = h["model"]
        acc, nll, _ = h["final"]
        print(
            f"  {label:31s} {len(mm.steps):2d} Newton steps, "
            f"{sum(st.products for st in mm.steps):4d} K-products, stop: {mm.stop_reason:16s} "
            f"Ψ = {mm.steps[-1].objective:8.1f}: test accuracy {acc:.3f}, NLL {nll:.3f}"
        )

# %% [markdown]
# The fraction of each inexact Newton step that step halving accepted, regime (a):

# %%
for label, h in res_a.items():
    print(f"  {label:31s} step sizes {[st.step_size for st in h['model'].steps]}")

# %% [markdown]
# ### 6.1 The virtual run deflates
#
# The relative residual `‖ŷ_t − A_t C₀ ŷ_t‖ / ‖ŷ_t‖` at the start of each Newton step of
# regime (b), before any new K-product, and the new inner iterations each step then
# needs. Without recycling every solve starts from zero (residual 1). With recycling
# the first replay can even raise the residual norm (the system changes most after
# the first step, from uniform to confident class probabilities), but later the buffer
# has already done most of the work, and the last Newton steps need only a handful of
# new iterations.

# %%
for label, h in res_b.items():
    start = " ".join(f"{r:.2f}" for r in h["start_residual"])
    its = [st.iterations for st in h["model"].steps]
    print(f"  {label:31s} start residuals {start:30s} new iterations {its}")

# %% [markdown]
# ### 6.2 Claims the test suite checks
#
# * With a tolerance, every variant reaches the Newton tolerance, and recycling gets
#   there with fewer K-products than starting every solve from scratch.
# * With a small fixed budget per step, recycling keeps improving the Laplace
#   objective; without it each truncated solve forgets what the previous ones
#   explored, and Newton stalls at a worse objective.
# * A compressed buffer never holds more than `R` directions after a Newton step.

# %%
products_b = {label: sum(st.products for st in h["model"].steps) for label, h in res_b.items()}
for label, h in res_b.items():
    assert h["model"].converged, label
assert products_b["recycling"] < products_b["no recycling"], products_b
obj_a = {label: h["model"].steps[-1].objective for label, h in res_a.items()}
assert obj_a["recycling"] > obj_a["no recycling"], obj_a
assert res_a["recycling"]["final"][0] > (0.8 if SMOKE else 0.95)
for res in (res_a, res_b):
    for label, kw in variants.items():
        sizes = [st.buffer_size for st in res[label]["model"].steps]
        if "max_rank" in kw:
            assert max(sizes) <= kw["max_rank"], (label, sizes)
saved = 1 - products_b["recycling"] / products_b["no recycling"]
print(f"recycling saves {saved:.0%} of the K-products at the same Newton tolerance")

# %% [markdown]
# ### 6.3 Accuracy and NLL vs K-products, and the cost of a tolerance
#
# Top row, regime (a): test accuracy and NLL of the current inner solve's posterior at
# the end of every Newton step (before step halving), and the fitted model (★). Bottom
# row, regime (b): the RMS change of the mode vs K-products, and the new inner
# iterations per Newton step. Right column: the memory the buffer holds after each
# Newton step (`2 N` numbers per direction: the action and its image).
#
# What to look for: in (a) the recycled variants settle after three Newton steps and
# stay there, whichever the compression; without recycling, accuracy and NLL wander
# and Newton stops early (`no_ascent`). The second Newton step is the hard one (the
# class probabilities move from uniform to confident, and `W⁺` becomes badly
# conditioned): its full step overshoots — the NLL spike, which step halving then
# shortens. NLL is not monotone in the budget: the overshooting first step happens to
# give sharper probabilities than the under-confident Laplace approximation at the
# mode (section 7). (`R = 20` may end with `no_ascent` too, but at the converged
# objective: that close to the mode a compressed, inexact direction no longer improves
# `Ψ` measurably.) In (b) all variants reach the same mode; the full buffer needs the
# fewest K-products, and compression trades K-products for memory. Their test NLLs
# still differ a little: a recycled run's last belief holds every buffered direction,
# so its computational variance is smaller than that of a run started from scratch.

# %%
fig, axes = plt.subplots(2, 3, figsize=(14, 7.5), dpi=110)
styles = {  # overlapping curves stay visible
    label: dict(color=f"C{k}", ls=ls, marker=mk, ms=4, lw=1.3)
    for k, (label, ls, mk) in enumerate(zip(variants, ("-", "-", "--", ":"), "osv^"))
}
for label, h in res_a.items():
    axes[0, 0].plot(h["products"], h["acc"], label=label, **styles[label])
    axes[0, 1].plot(h["products"], h["nll"], label=label, **styles[label])
    for c in (0, 1):
        axes[0, c].plot(h["products"][-1], h["final"][c], "*", color=styles[label]["color"], ms=12)
for label, h in res_b.items():
    st = h["model"].steps
    cumulative = [sum(x.products for x in st[: i + 1]) for i in range(len(st))]
    axes[1, 0].semilogy(cumulative, [x.change for x in st], label=label, **styles[label])
    axes[1, 1].plot(range(1, len(st) + 1), [x.iterations for x in st], **styles[label])
for r, res in enumerate((res_a, res_b)):
    for label, h in res.items():
        mb = [2 * N * x.buffer_size * X.element_size() / 2**20 for x in h["model"].steps]
        axes[r, 2].plot(range(1, len(mb) + 1), mb, **styles[label])
axes[1, 0].axhline(tol_b, color="k", ls="--", lw=1, label="Newton tolerance")
axes[0, 1].set_yscale("log")
titles = [
    ["(a) test accuracy", "(a) test NLL", "(a) buffer memory [MiB]"],
    ["(b) RMS change of the mode", "(b) new inner iterations", "(b) buffer memory [MiB]"],
]
xlabels = ["cumulative K-products", "cumulative K-products", "Newton step"]
for r in range(2):
    for c in range(3):
        axes[r, c].set_title(titles[r][c], fontsize=9)
        axes[r, c].set_xlabel("Newton step" if (r, c) == (1, 1) else xlabels[c])
        axes[r, c].grid(True, alpha=0.3)
axes[0, 0].legend(fontsize=7)
axes[1, 0].legend(fontsize=7)
fig.suptitle(f"IterNCGP-CG on digits (n = {n}, C = {C}, RBF ℓ = {ell}, s = {s})")
fig.tight_layout()
fig.savefig(OUT / "06_accuracy_nll_vs_products.png")
plt.close(fig)

# %% [markdown]
# ## 7. The recycled model: test metrics
#
# The model of regime (a) with a full buffer. ECE is the expected calibration error of
# the top-class confidence. We compare the probit approximation, Monte Carlo over the
# latent marginals, and the plug-in `softmax(mean)` that ignores the latent variance.

# %%
m = res_a["recycling"]["model"]
post = m.posterior(Xs)
probs = m.predict_proba(Xs)
rows = {
    "probit": probs,
    "Monte Carlo": m.predict_proba(Xs, method="mc", generator=torch.Generator().manual_seed(2)),
    "plug-in softmax(mean)": torch.softmax(post.mean, dim=1),
}
for name, p in rows.items():
    acc, nll, ece = scores(p, ys)
    conf = float(p.max(1).values.mean())
    print(
        f"{name:22s} accuracy {acc:.4f}  NLL {nll:.4f}  ECE {ece:.4f}  mean confidence {conf:.3f}"
    )

# %% [markdown]
# The classifier ranks the classes well but is **under-confident**: its mean
# confidence is well below its accuracy, and the plug-in probabilities (no variance
# at all) score better. Part of this is the Laplace approximation itself, known to be
# conservative for GP classification (Kuss & Rasmussen, 2005); part is the
# computational uncertainty of a solver that has explored only about a hundred
# directions of an `N`-dimensional space — see the next section.
#
# ## 8. Latent uncertainty
#
# To split the combined variance we need the Laplace variance
# `k(x, x) − k(x, X) P A_t⁺ P k(X, x)` for the last Newton step's system `m.A`, the sum
# of `P K P`, `W_t⁺` and `c (I − P)` (the last term makes the solver's operator positive
# definite off the centred subspace and changes nothing on it). `posterior.math_var`
# computes it on demand by plain CG to rounding level. On this badly conditioned
# system (`W⁺` has entries up to `1/p` for small class probabilities) that takes
# thousands of iterations: fine for a test point or two (the smoke run cross-checks
# one), minutes for dozens at full size. We
# factor the dense `N × N` matrix `P K P + W⁺ + (I − P)` once instead (positive
# definite, with the same inverse on the centred subspace) — exactly the cost that
# IterNCGP avoids — and use it for the watched points and the six most uncertain
# test digits (largest predictive entropy). `W⁺` is block diagonal by points, so its
# `n` blocks of size `C × C` come from `C` products with class-indicator vectors.

# %%
entropy = -(probs * probs.clamp_min(1e-300).log()).sum(1)
uncertain = torch.argsort(entropy, descending=True)[:6]
pts = torch.cat([watch, uncertain])
with torch.no_grad():
    _, Wt, _ = m.A.ops  # P K P (with its counting wrapper), W_t⁺ and c (I − P)
    indicators = torch.kron(torch.eye(C, dtype=X.dtype), torch.ones(n, 1, dtype=X.dtype))
    blocks = (Wt @ indicators).reshape(C, n, C).permute(1, 0, 2)  # (n, C, C)
    PC = torch.eye(C, dtype=X.dtype) - 1.0 / C
    A = torch.kron(PC, kernel(X))  # P K P = P_C ⊗ k(X, X)
    idx = torch.arange(n)
    A.view(C, n, C, n)[:, idx, :, idx] += blocks + 1.0 / C  # + W⁺ + (I − P)
    torch.linalg.cholesky(A, out=A)
    half = torch.linalg.solve_triangular(A, torch.kron(PC, kernel(X, Xs[pts])), upper=False)
    del A
    math_var = (kernel.diag(Xs[pts]).repeat(C) - half.square().sum(0)).reshape(C, -1).mT
post_pts = m.posterior(Xs[pts])
comp_var = post_pts.var - math_var
assert bool((comp_var >= -1e-6 * s).all()), "combined variance below the Laplace variance"
nw = watch.shape[0]
if SMOKE:  # small enough to cross-check with the library's iterative split
    lib = m.posterior(Xs[uncertain[:1]]).math_var
    torch.testing.assert_close(lib, math_var[nw : nw + 1], rtol=1e-6, atol=1e-6)
print(
    f"watched points: mean combined latent variance {float(post_pts.var[:nw].mean()):.3f} = "
    f"Laplace {float(math_var[:nw].mean()):.3f} + computational "
    f"{float(comp_var[:nw].mean()):.3f}   (prior variance {s})"
)

# %% [markdown]
# Left: the mean combined latent variance of the watched test points after every
# inner iteration of regime (a). Within a Newton step it only decreases (the belief
# sharpens); at a new step the system changes (`W_t` moves with the mode). Without
# recycling every step restarts from the prior variance; with recycling the virtual
# run keeps what was learned. Still, the variance comes down only slowly towards the
# Laplace variance (dashed; computed above at the final system of the recycled run):
# the CG actions are chosen to fit the pseudo-targets, not to explain the covariance
# at the test points, and after ~100 of them a large part of the combined variance
# is computational. Right: the split at the end for the six most uncertain test
# digits (mean over the 10 latents).

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4), dpi=110)
for k, (label, h) in enumerate(res_a.items()):
    axes[0].plot(range(len(h["var"])), h["var"], color=f"C{k}", lw=1.2, label=label)
axes[0].axhline(s, color="k", ls=":", lw=1, label="prior variance")
axes[0].axhline(float(math_var[:nw].mean()), color="k", ls="--", lw=1, label="Laplace variance")
axes[0].set_xlabel("inner iteration (all Newton steps, replays included)")
axes[0].set_ylabel("mean latent variance, watched points")
axes[0].grid(True, alpha=0.3)
axes[0].legend(fontsize=7)
mv, cv = math_var[nw:].mean(1).tolist(), comp_var[nw:].mean(1).tolist()
xs = list(range(uncertain.shape[0]))
axes[1].bar(xs, mv, color="C7", label="mathematical (Laplace)")
axes[1].bar(xs, cv, bottom=mv, color="C1", label="computational")
axes[1].set_xticks(xs, [f"test #{int(t)}" for t in uncertain], fontsize=7)
axes[1].set_ylabel("latent variance (mean over classes)")
axes[1].set_title("split at the end: the most uncertain test digits", fontsize=9)
axes[1].legend(fontsize=7)
fig.tight_layout()
fig.savefig(OUT / "06_latent_variance.png")
plt.close(fig)

# %% [markdown]
# The most uncertain test digits and their predicted class probabilities (probit):

# %%
fig, axes = plt.subplots(2, 6, figsize=(13, 4.4), dpi=110, gridspec_kw={"height_ratios": [3, 2]})
for c, t in enumerate(uncertain.tolist()):
    axes[0, c].imshow(Xs[t].reshape(8, 8).numpy(), cmap="gray_r")
    axes[0, c].set_axis_off()
    axes[0, c].set_title(f"label {int(ys[t])}, predicted {int(probs[t].argmax())}", fontsize=8)
    colors = ["C2" if k == int(ys[t]) else "C0" for k in range(C)]
    axes[1, c].bar(range(C), probs[t].tolist(), color=colors)
    axes[1, c].set_xticks(range(C))
    axes[1, c].tick_params(labelsize=6)
    axes[1, c].set_ylim(0, 1)
axes[1, 0].set_ylabel("p(class)")
fig.suptitle("Most uncertain test digits (largest predictive entropy; green bar = true label)")
fig.tight_layout()
fig.savefig(OUT / "06_uncertain_digits.png")
plt.close(fig)

# %% [markdown]
# ## 9. Memory
#
# The buffer holds two `N`-vectors per direction. Without compression it grows by one
# pair per inner iteration; compression caps it at `R` after every Newton step (during
# a step it holds at most `R` plus that step's new iterations).

# %%
for title, res in (("(a) few CG iterations per step", res_a), ("(b) tolerance", res_b)):
    print(title)
    for label, h in res.items():
        mm = h["model"]
        sizes = [st.buffer_size for st in mm.steps]
        nbytes = 0 if mm.buffer is None else mm.buffer.nbytes
        assert nbytes == 2 * N * sizes[-1] * X.element_size()
        print(f"  {label:31s} {nbytes / 2**20:6.1f} MiB, buffer sizes {sizes}")
print(f"(the dense N × N matrix of section 8 alone takes {N * N * 8 / 2**30:.2f} GiB)")
print(f"figures written to {OUT}/06_*.png")
