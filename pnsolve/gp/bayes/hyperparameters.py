"""The vector ``θ`` of log-hyperparameters of GP regression, and its kernel and noise."""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Sequence

import torch
from torch import nn

from ...kernels.base import StationaryKernel, inv_softplus, softplus
from ...kernels.kernel import Kernel
from ...kernels.positive import parameter_label
from ...kernels.rbf import RBF
from .._checks import check_matrix_free_kernel, check_noise
from .priors import GammaPrior, LogPrior

__all__ = ["PARAMETRIZATIONS", "LogHyperparameters"]

#: ``"log"``: θ = (log outputscale, log lengthscale(s), log noise) for an RBF or Matérn
#: kernel, the log of every positive parameter then log noise for any other kernel;
#: ``"log_tau"``: θ = (log σ, log τ, log λ) for σ exp(−τ‖x − x'‖²) + λδ, the covariance of
#: Filippone & Engler (2015), eq. 1.
PARAMETRIZATIONS = ("log", "log_tau")

#: Old parametrization names, still accepted with a ``DeprecationWarning``.
_DEPRECATED_PARAMETRIZATIONS = {"seed": "log_tau"}


class LogHyperparameters:
    """Log-space hyperparameters ``θ`` of a GP regression model ``y ~ N(0, K(θ) + λ I)``.

    Samplers and optimisers move ``θ``; this class maps it to the kernel and the noise
    and carries gradients back (chain rule through the kernel's softplus storage).

    Parameters
    ----------
    kernel
        Any family of :mod:`pnsolve.kernels` or an expression of them, copied: its values
        are the starting point. The copy is what :meth:`kernel_at` updates.
    noise
        Noise variance ``λ > 0`` of the starting point.
    parametrization
        ``"log"`` (default): for an RBF or Matérn kernel ``θ = (log outputscale, log
        lengthscale_1, …, log lengthscale_d, log noise)`` (one lengthscale unless ARD);
        for any other kernel the log of every entry of every positive parameter that
        requires a gradient, in ``kernel.named_parameters()`` order, then ``log noise``
        (names such as ``"log_0.outputscale"``, ``"log_1.period"``, ``"log_alpha"``;
        parameters frozen with ``requires_grad_(False)`` keep their values, as
        scikit-learn's ``"fixed"`` bounds). ``"log_tau"``: the
        covariance of Filippone & Engler (2015), eq. 1,
        ``k(x, x') = σ exp(−τ ‖x − x'‖²) + λ δ``, ``θ = (log σ, log τ, log λ)``; an
        isotropic :class:`~pnsolve.kernels.RBF` with ``τ = 1 / (2 ℓ²)``. The old name
        ``"seed"`` for ``"log_tau"`` still works but emits a ``DeprecationWarning``.
    priors
        One :class:`LogPrior` per entry of ``θ`` (default ``GammaPrior(1, 1)`` each), or
        a single prior used for every entry.

    Attributes
    ----------
    names
        Parameter names, e.g. ``("log_sigma", "log_tau", "log_lambda")``.
    dim
        ``p = len(names)``.

    Notes
    -----
    ``θ`` is a small float64 vector that lives on the data's device (the samplers and
    the MAP put it there); every method returns its results on ``theta``'s device, and
    :meth:`initial` on the kernel's. :meth:`kernel_at` moves this object's kernel copy
    to ``θ``'s device.
    """

    def __init__(
        self,
        kernel: Kernel,
        noise: float,
        *,
        parametrization: str = "log",
        priors: LogPrior | Sequence[LogPrior] | None = None,
    ) -> None:
        kernel = check_matrix_free_kernel(kernel, "LogHyperparameters")
        self.noise0 = check_noise(noise)
        if parametrization in _DEPRECATED_PARAMETRIZATIONS:
            new = _DEPRECATED_PARAMETRIZATIONS[parametrization]
            warnings.warn(
                f"parametrization={parametrization!r} is deprecated; use "
                f"parametrization={new!r} (the same model)",
                DeprecationWarning,
                stacklevel=2,
            )
            parametrization = new
        if parametrization not in PARAMETRIZATIONS:
            raise ValueError(
                f"parametrization must be one of {PARAMETRIZATIONS}, got {parametrization!r}"
            )
        if parametrization == "log_tau" and (type(kernel) is not RBF or kernel.ard_dims):
            raise ValueError(
                "parametrization='log_tau' (σ exp(−τ‖x − x'‖²) + λδ) needs an isotropic "
                f"pnsolve.kernels.RBF, got {kernel!r}"
            )
        self.parametrization = parametrization
        self.kernel = copy.deepcopy(kernel)
        #: Whether θ is the generic layout (every positive parameter) rather than
        #: (log outputscale, log lengthscale(s), log noise).
        self.generic = not _classic(self.kernel)
        if not self.generic or parametrization == "log_tau":
            for p in self.kernel.parameters():
                p.requires_grad_(True)
        #: ``(raw parameter, slice of θ)`` of the generic layout, in ``named_parameters()``
        #: order (empty for the classic layout).
        self._entries: list[tuple[nn.Parameter, slice]] = []
        if parametrization == "log_tau":
            self.names: tuple[str, ...] = ("log_sigma", "log_tau", "log_lambda")
            self._lengthscales = 1
        elif self.generic:
            names: list[str] = []
            for name, raw in self.kernel.named_parameters():
                if not raw.requires_grad:  # frozen by the caller: kept at its value
                    continue
                label = "log_" + parameter_label(name)
                start = len(names)
                names += [label] if raw.numel() == 1 else _numbered(label, raw.numel())
                self._entries.append((raw, slice(start, len(names))))
            self.names = (*names, "log_noise")
            self._lengthscales = 0
        else:
            assert isinstance(self.kernel, StationaryKernel)
            ls = self.kernel.ard_dims or 1
            lengths = ("log_lengthscale",) if ls == 1 else _numbered("log_lengthscale", ls)
            self.names = ("log_outputscale", *lengths, "log_noise")
            self._lengthscales = ls
        self.dim = len(self.names)
        self.priors = _priors(priors, self.dim)

    # ------------------------------------------------------------------ mapping
    def initial(self) -> torch.Tensor:
        """``θ`` of the kernel and noise given at construction, float64, shape ``(p,)``.

        On the kernel's device (move it to the data's: ``params.initial().to(X.device)``).
        """
        if self.generic:
            with torch.no_grad():
                logs = [torch.log(softplus(raw)).reshape(-1).double() for raw, _ in self._entries]
                device = logs[0].device if logs else torch.get_default_device()
                noise = torch.full((1,), math.log(self.noise0), dtype=torch.float64, device=device)
                return torch.cat([*logs, noise])
        assert isinstance(self.kernel, StationaryKernel)
        with torch.no_grad():
            log_os = torch.log(self.kernel.outputscale).reshape(1)
            log_ls = torch.log(self.kernel.lengthscale).reshape(-1)
            if self.parametrization == "log_tau":
                log_ls = -math.log(2.0) - 2.0 * log_ls  # log τ = −log 2 − 2 log ℓ
            log_noise = log_os.new_full((1,), math.log(self.noise0), dtype=torch.float64)
            return torch.cat([log_os.double(), log_ls.double(), log_noise])

    def check(self, theta: object) -> torch.Tensor:
        """``theta`` as a finite float64 tensor of shape ``(p,)`` (errors name it).

        A tensor keeps its device; a sequence of numbers becomes a tensor on torch's default
        device.
        """
        if not isinstance(theta, torch.Tensor):
            theta = torch.as_tensor(theta, dtype=torch.float64, device=torch.get_default_device())
        if theta.shape != (self.dim,):
            raise ValueError(
                f"theta must have shape ({self.dim},) for parameters {self.names}, got "
                f"{tuple(theta.shape)}"
            )
        if not bool(torch.isfinite(theta).all()):
            raise ValueError(f"theta must be finite, got {theta.tolist()}")
        return theta.detach().to(torch.float64)

    def lengthscale(self, theta: torch.Tensor) -> torch.Tensor:
        """Lengthscale(s) ``ℓ`` at ``θ``: shape ``()`` or ``(d,)`` (RBF and Matérn layouts).

        Raises
        ------
        ValueError
            For the generic layout (read the kernel's parameters from :meth:`kernel_at`).
        """
        if self.generic:
            raise ValueError(
                f"lengthscale(θ) is defined for an RBF or Matérn kernel's θ; this θ holds "
                f"{self.names}: read the values from kernel_at(θ)"
            )
        u = theta[1 : 1 + self._lengthscales]
        if self.parametrization == "log_tau":
            u = -0.5 * (u + math.log(2.0))  # ℓ = (2τ)^(−1/2)
        return torch.exp(u).reshape(()) if self._lengthscales == 1 else torch.exp(u)

    def noise_at(self, theta: torch.Tensor) -> float:
        """Noise variance ``λ = exp(θ_last)``."""
        return math.exp(float(theta[-1]))

    def kernel_at(self, theta: torch.Tensor) -> Kernel:
        """The kernel at ``θ`` (this object's copy, updated in place, gradients zeroed).

        The copy moves to ``theta``'s device first if it lives elsewhere (``θ`` lives on
        the data's device), so the kernel is evaluated where the data are.
        """
        theta = self.check(theta)
        first = next(self.kernel.parameters(), None)
        if first is not None and first.device != theta.device:
            self.kernel.to(theta.device)
        with torch.no_grad():
            if self.generic:
                for raw, sl in self._entries:
                    value = torch.exp(theta[sl]).to(raw.dtype).reshape_as(raw)
                    raw.copy_(inv_softplus(value))
            else:
                k = self.kernel
                assert isinstance(k, StationaryKernel)
                k.raw_outputscale.copy_(inv_softplus(torch.exp(theta[0])))
                ls = self.lengthscale(theta).to(k.raw_lengthscale.dtype)
                k.raw_lengthscale.copy_(inv_softplus(ls).reshape_as(k.raw_lengthscale))
        for p in self.kernel.parameters():
            p.grad = None
        return self.kernel

    def chain_rule(self, theta: torch.Tensor, noise_grad: float) -> torch.Tensor:
        """``∂S/∂θ`` from the kernel's raw-parameter ``.grad`` and ``∂S/∂λ``.

        With ``φ = softplus(raw)``: ``∂S/∂ log φ = (∂S/∂raw) · φ / sigmoid(raw)``; for the
        ``"log_tau"`` parametrization ``∂S/∂ log τ = −½ ∂S/∂ log ℓ``.

        Parameters
        ----------
        theta
            The point, shape ``(p,)``.
        noise_grad
            ``∂S/∂λ`` (the noise enters ``K̂`` linearly: ``Σ_c u_cᵀ w_c``).

        Returns
        -------
        torch.Tensor
            Shape ``(p,)``, float64, on ``theta``'s device.
        """
        k = self.kernel
        out = theta.new_zeros(self.dim, dtype=torch.float64)
        if self.generic:
            entries = self._entries
        else:
            assert isinstance(k, StationaryKernel)
            entries = [
                (k.raw_outputscale, slice(0, 1)),
                (k.raw_lengthscale, slice(1, self.dim - 1)),
            ]
        for raw, sl in entries:
            g = torch.zeros_like(raw) if raw.grad is None else raw.grad
            value = torch.nn.functional.softplus(raw.detach())
            part = g.detach() * value / torch.sigmoid(raw.detach())
            out[sl] = part.reshape(-1).to(out)
        if self.parametrization == "log_tau":
            out[1] = -0.5 * out[1]
        out[-1] = noise_grad * self.noise_at(theta)
        return out

    # ------------------------------------------------------------------ priors
    def log_prior(self, theta: torch.Tensor) -> torch.Tensor:
        """``Σ_i log p_i(θ_i)`` (log-space densities), 0-d float64 tensor."""
        theta = self.check(theta)
        return sum(
            (pr.log_density(theta[i]) for i, pr in enumerate(self.priors)),
            theta.new_zeros(()),
        )

    def log_prior_grad(self, theta: torch.Tensor) -> torch.Tensor:
        """``∇_θ log p(θ)``, shape ``(p,)``."""
        theta = self.check(theta)
        return torch.stack([pr.grad(theta[i]) for i, pr in enumerate(self.priors)])

    def __repr__(self) -> str:
        return (
            f"LogHyperparameters({type(self.kernel).__name__}, names={self.names}, "
            f"parametrization={self.parametrization!r})"
        )


def _classic(kernel: Kernel) -> bool:
    """Whether θ is (log outputscale, log lengthscale(s), log noise): RBF or Matérn."""
    if not isinstance(kernel, StationaryKernel):
        return False
    names = {name for name, _ in kernel.named_parameters()}
    return names == {"raw_lengthscale", "raw_outputscale"}


def _numbered(label: str, count: int) -> tuple[str, ...]:
    return tuple(f"{label}_{i + 1}" for i in range(count))


def _priors(priors: LogPrior | Sequence[LogPrior] | None, dim: int) -> tuple[LogPrior, ...]:
    if priors is None:
        return tuple(GammaPrior() for _ in range(dim))
    if isinstance(priors, LogPrior):
        return (priors,) * dim
    priors = tuple(priors)
    if len(priors) != dim or not all(isinstance(p, LogPrior) for p in priors):
        raise ValueError(f"priors must be one LogPrior or {dim} of them, got {priors!r}")
    return priors
