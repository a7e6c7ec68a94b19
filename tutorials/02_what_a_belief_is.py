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
# # What a belief is: the probabilistic linear solver
#
# A classical solver returns a vector. A **probabilistic linear solver** (PLS)
# returns a *belief*: a Gaussian distribution over the solution of A x = b whose
# mean is the usual estimate and whose covariance says how much the finite
# computation has left unknown. This tutorial follows one solve through its four
# stages on a small real kernel system:
#
# 1. **prior**: a Gaussian belief x ~ N(x₀, Σ₀) before any computation;
# 2. **actions**: each iteration a *policy* picks a direction sᵢ, and the solver
#    multiplies it by A once (zᵢ = A sᵢ);
# 3. **conditioning**: the belief is conditioned on the observation sᵢᵀ A x = sᵢᵀ b;
# 4. **belief**: mean, covariance, samples, and how well the covariance describes
#    the actual error, policy by policy.
#
# Set `PNSOLVE_SMOKE=1` to run everything on a smaller subset (the test suite does).

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
# ## 1. A real kernel system and its exact solution
#
# Gaussian-process regression on the first few hundred training points of UCI
# *concrete* (shipped with the package) needs the representer weights
# x* = K̂⁻¹ y with K̂ = K + σ²I, K a Matérn-3/2 Gram matrix. At this size a dense
# Cholesky factorisation K̂ = L Lᵀ is cheap, so we can compare every belief with
# the exact answer.

# %%
n = 200 if SMOKE else 300
iters = 80 if SMOKE else 150
ds = pn.datasets.load_uci("concrete", split=0)
X, y = ds.X_train[:n], ds.y_train[:n]
kernel = pn.kernels.Matern(nu=1.5, lengthscale=2.0, outputscale=1.0)
noise = 1e-2
with torch.no_grad():
    A = kernel.linop(X, backend="dense") + pn.linops.ScaledIdentity(n, noise, dtype=X.dtype)
    A_dense = A.to_dense()
L = torch.linalg.cholesky(A_dense)
x_star = torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
print(
    f"n = {n}, ‖x*‖ = {float(x_star.norm()):.1f}, cond(K̂) = {float(torch.linalg.cond(A_dense)):.3g}"
)

# %% [markdown]
# ## 2. The prior
#
# pnsolve's default is the **inverse prior** x ~ N(0, A⁻¹) (BayesCG with the
# Krylov prior; IterGP). It looks circular — the covariance is the inverse we are
# trying to avoid — but the update never needs it: conditioning on sᵀ A x only
# involves Σ₀ A s = s. Equivalently the prior says that b = A x ~ N(0, A).
#
# Only quantities *about the covariance itself* need A⁻¹. The total prior
# uncertainty tr(Σ₀) = tr(A⁻¹) is one of them; with the Cholesky factor it is
# ‖L⁻¹‖²_F (the diagonal of A⁻¹ comes from the same triangular inverse).

# %%
L_inv = torch.linalg.solve_triangular(L, torch.eye(n, dtype=L.dtype), upper=False)
diag_A_inv = (L_inv * L_inv).sum(0)  # A⁻¹ = L⁻ᵀ L⁻¹
trace_A_inv = diag_A_inv.sum()
print(f"prior: sqrt(tr Σ₀) = {float(trace_A_inv.sqrt()):.1f}", end="   vs   ")
print(f"‖x* − x₀‖ = {float(x_star.norm()):.1f}")

# %% [markdown]
# ## 3. Actions and conditioning, by hand
#
# `solver.iterate` yields the frozen solver state after every iteration, starting
# with the prior (iteration 0). Each state records the action block `S` and its
# image `A S` (the only product with A of that iteration) and the belief.
#
# After i actions S = [s₁ … sᵢ] the inverse-prior belief has the closed form
#
#     C_i = S (Sᵀ A S)⁻¹ Sᵀ,    x_i = x₀ + C_i r₀,    Σ_i = A⁻¹ − C_i.
#
# C_i is a rank-i approximation of A⁻¹ (`belief.inverse_approx`), and the solver
# stores it as a root, C_i = V Vᵀ (`belief.V`), so tr(Σ_i) = tr(A⁻¹) − ‖V‖²_F.
# We check the formulas against the solver for three CG steps.

# %%
solver = pn.ProbabilisticLinearSolver(pn.policies.CG(), pn.stopping.MaxIterations(3))
states = list(solver.iterate(A, y))
print([(s.iteration, s.stop_reason) for s in states])
s1, z1 = states[1].action, states[1].observation  # (n, 1) each
x1 = (s1 @ ((s1.mT @ y) / (s1.mT @ z1))).squeeze(-1)  # condition on s₁ᵀ A x = s₁ᵀ b
print("x₁ by hand == belief.mean:", torch.allclose(states[1].belief.mean, x1))
S = torch.cat([s.action for s in states[1:]], dim=1)
C = S @ torch.linalg.solve(S.mT @ A_dense @ S, S.mT)
belief = states[-1].belief
print("C₃ by hand == inverse_approx:", torch.allclose(belief.inverse_approx.to_dense(), C))
print("‖V‖²_F == tr(C₃):", torch.allclose((belief.V**2).sum(), C.trace()))

# %% [markdown]
# ## 4. The belief
#
# A belief has a cheap part — `mean`, `inverse_approx` (C_i) and
# `downdate_variance(u)` = uᵀ C_i u — and an expensive part under the inverse
# prior: `cov` is the operator A⁻¹ − C_i, and every product with it (and so
# `var(u)` = uᵀ Σ_i u) runs an inner solve to working precision; `sample` runs
# Lanczos. That is fine at this size and meant for study. The structured
# `trace()` is refused, because A⁻¹ has no cheap diagonal (pnsolve never
# densifies silently); with the Cholesky factor we already have, the marginal
# variances are diag(A⁻¹) minus the row sums of V².

# %%
try:
    belief.trace()
except pn.MissingStructureError as err:
    print("MissingStructureError:", str(err)[:100], "…")
E = torch.eye(n, dtype=X.dtype)[:, :3]  # three coordinate directions
with torch.no_grad():
    print("var(e_j) with inner solves:   ", belief.var(E).tolist())
print("diag A⁻¹ − rowsums(V²):        ", (diag_A_inv[:3] - (belief.V[:3] ** 2).sum(1)).tolist())
print("removed by computation (cheap):", belief.downdate_variance(E).tolist())

# %% [markdown]
# ### What the belief looks like
#
# `belief.sample(k, generator)` draws x = x_i + (I − V Wᵀ) u with u ~ N(0, Σ₀);
# under the inverse prior u = A^{-1/2} ξ comes from Lanczos run to working precision:

# %%
with torch.no_grad():
    draws = belief.sample(2, torch.Generator().manual_seed(0))
dist = torch.linalg.vector_norm(draws - x_star[:, None], dim=0)
print("samples:", tuple(draws.shape), "| distance to x*:", [f"{float(d):.1f}" for d in dist])

# %% [markdown]
# With the Cholesky factor at hand, u = L⁻ᵀ ξ is a cheaper exact draw from
# N(0, A⁻¹), and reusing the same ξ shows the same prior draws conditioned on
# different computations. For a few coordinates: the mean with a
# ±2 standard-deviation band (diag Σ_i = diag A⁻¹ − rowsums of V²), three samples
# and the true solution — early and later in a CG run, and for the greedy
# unit-vector policy, which observes the largest residual entry each step.


# %%
def run(policy: pn.policies.Policy, k: int, seed: int = 0) -> list[pn.SolverState]:
    """All states of ``k`` iterations of ``policy`` (seeded generator for random ones)."""
    solver = pn.ProbabilisticLinearSolver(policy, pn.stopping.MaxIterations(k))
    return list(solver.iterate(A, y, generator=torch.Generator().manual_seed(seed)))


xi = torch.randn(n, 3, generator=torch.Generator().manual_seed(1), dtype=X.dtype)
U_prior = torch.linalg.solve_triangular(L.mT, xi, upper=True)  # u ~ N(0, A⁻¹)
coords = torch.arange(30)
snapshots = [5, 40]
fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True, sharey=True)
for row, (name, policy) in enumerate(
    [("CG", pn.policies.CG()), ("UnitVector (pivot)", pn.policies.UnitVector("pivot"))]
):
    states = run(policy, max(snapshots))
    for col, i in enumerate(snapshots):
        b_i = states[i].belief
        std = (diag_A_inv - (b_i.V**2).sum(1)).clamp_min(0).sqrt()
        samples = b_i.mean[:, None] + U_prior - b_i.V @ (b_i.W.mT @ U_prior)
        ax = axes[row, col]
        m = b_i.mean[coords]
        ax.fill_between(
            coords, m - 2 * std[coords], m + 2 * std[coords], alpha=0.25, label="±2 std"
        )
        ax.plot(coords, samples[coords], lw=0.8, color="C1", alpha=0.8)
        ax.plot(coords, m, color="C0", label="mean")
        ax.plot(coords, x_star[coords], "k.", label="x*")
        ax.set_title(f"{name}, iteration {i}")
axes[0, 0].legend(loc="upper right", fontsize=8)
for ax in axes[1]:
    ax.set_xlabel("coordinate j")
fig.tight_layout()
fig.savefig(OUT / "02_belief_snapshots.png")

# %% [markdown]
# ## 5. Error and uncertainty, policy by policy
#
# The policy is the user's main lever. For each built-in policy we record per
# iteration the true error ‖x_i − x*‖ and the *reported* uncertainty
# sqrt(tr Σ_i) = sqrt(E‖x − x_i‖²) under the belief, computed as
# sqrt(tr(A⁻¹) − ‖V_i‖²_F) from the one Cholesky factorisation above (no inner
# solves per iteration).

# %%
policies = {
    "CG": pn.policies.CG(),
    "UnitVector (pivot)": pn.policies.UnitVector("pivot"),
    "UnitVector (sequential)": pn.policies.UnitVector("sequential"),
    "Random (gaussian)": pn.policies.Random("gaussian"),
}
curves: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
for name, policy in policies.items():
    err, unc = [], []
    for st in run(policy, iters):
        err.append(torch.linalg.vector_norm(st.belief.mean - x_star))
        unc.append((trace_A_inv - (st.belief.V**2).sum()).clamp_min(0).sqrt())
    curves[name] = (torch.stack(err), torch.stack(unc))
    e, u = curves[name]
    final = f"error {float(e[-1]):.2e}, sqrt(tr Σ) {float(u[-1]):.2e}"
    print(f"{name:24s} after {len(e) - 1} its: {final}")

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
for k, (name, (e, u)) in enumerate(curves.items()):
    ax1.semilogy(e, color=f"C{k}", label=f"{name}: error")
    ax1.semilogy(u, color=f"C{k}", ls="--", label=f"{name}: sqrt(tr Σ)")
    ax2.semilogy(e / u, color=f"C{k}", label=name)
ax1.set_xlabel("iteration")
ax1.set_ylabel("‖x_i − x*‖ (solid), sqrt(tr Σ_i) (dashed)")
ax1.legend(fontsize=7)
ax2.axhline(1.0, color="0.5", ls=":")
ax2.set_xlabel("iteration")
ax2.set_ylabel("error ÷ reported uncertainty")
ax2.set_title("1 = the belief's scale matches the error")
fig.tight_layout()
fig.savefig(OUT / "02_error_vs_uncertainty.png")

# %% [markdown]
# Reading the plot:
#
# * **CG** drives the error down fastest: its actions are built from the residual,
#   so they go where *this* b needs them. Its reported uncertainty barely moves,
#   though: tr(A⁻¹) is dominated by the many directions with eigenvalues near σ²
#   (each contributes ≈ 1/σ² = 100), and CG, having adapted to b, has no reason to
#   explore them. The belief then describes every right-hand side the prior
#   deems plausible (b ~ N(0, A)), not the one at hand: CG's uncertainty is
#   very conservative.
# * **Sequential unit vectors** and **random Gaussian** actions ignore b. Their
#   error falls slowly, but the ratio error ÷ uncertainty stays roughly constant:
#   the uncertainty tracks the error up to a fixed factor. That factor is the scale
#   of the prior — N(0, A⁻¹) expects ‖x‖ ≈ sqrt(tr A⁻¹), while our x* is larger —
#   and the ratio at iteration 0 shows it before any computation.
# * **Greedy unit vectors** (largest residual) sit in between: they adapt to b
#   through the residual, and pay for it with a less faithful uncertainty.
#
# This is the central trade-off of probabilistic linear solvers: actions that
# adapt to b buy accuracy, actions that do not buy honest uncertainty.
#
# ## 6. A prior whose trace is cheap
#
# With Σ₀ = σ₀²I (`prior=σ₀²`) the trace is structured: `belief.trace()` is
# nσ₀² − ‖V‖²_F with no Cholesky at all. The price is a second product with A per
# iteration (the residual needs A Σ₀ A s), and the mean is no longer the CG
# iterate: with CG actions the σ₀²I-prior mean is the point of span(A S) closest to x*
# in the Euclidean norm (CG minimises the A-norm error over span(S)).

# %%
scale = float(x_star.norm()) ** 2 / n  # a prior scale of the right size, for illustration
solver = pn.ProbabilisticLinearSolver(
    pn.policies.CG(), pn.stopping.MaxIterations(iters), prior=scale
)
print(" i   error (σ₀²I prior)   sqrt(belief.trace())   products")
for st in solver.iterate(A, y):
    if st.iteration in (0, 10, 40, iters):
        err = float(torch.linalg.vector_norm(st.belief.mean - x_star))
        unc = float(st.belief.trace().sqrt())
        print(f"{st.iteration:3d}   {err:18.3e}   {unc:20.3e}   {st.products:8d}")
