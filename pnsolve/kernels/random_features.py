"""Random Fourier features with frozen base draws (Rahimi & Recht)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .._core import random as rnd
from .._core.precision import full_float32
from .._core.validation import check_finite, check_same_device, check_tensor, require_generator
from .kernel import Kernel, describe_kernel

__all__ = [
    "RandomFourierFeatures",
    "check_spectral_kernel",
    "check_spectral_state",
    "no_spectral_state",
    "rff_features",
]


class RandomFourierFeatures(nn.Module):
    """Random Fourier features ``φ(x) = sqrt(2·outputscale/m) · cos(ωᵀx + b)`` of a kernel.

    With ``ω = ε / lengthscale`` drawn from the kernel's spectral density and
    ``b ~ U[0, 2π)``, ``E[φ(x)ᵀφ(x')] = k(x, x')`` (Bochner). We use the phase form
    (``m`` features, one frequency each) rather than ``[cos, sin]`` pairs.

    The *base* draws ``ε`` (shape ``(m, d)``) and ``b`` (shape ``(m,)``) are drawn once at
    construction from ``generator`` and frozen as buffers. :meth:`features` always uses
    the kernel's *current* hyperparameters, so after a hyperparameter step the same
    frequencies are re-scaled (needed for warm starts) and gradients reach the kernel's
    parameters.

    Base draws: RBF: ``ε ~ N(0, I)`` (Gaussian spectral density). Matérn-ν: a multivariate
    Student-t with ``2ν`` degrees of freedom, ``ε = z · sqrt(2ν / u)`` with ``z ~ N(0, I)``,
    ``u ~ χ²(2ν)``.

    Parameters
    ----------
    kernel
        A kernel with random Fourier features (``kernel.has_spectral_features``: RBF,
        Matérn, rational quadratic, spectral mixture, cosine, constant, and sums,
        products and scalings of them); it becomes a submodule (its parameters are this
        module's). Its :meth:`~pnsolve.kernels.Kernel.spectral_base` draws are frozen
        and :meth:`~pnsolve.kernels.Kernel.spectral_projection` turns them into
        frequencies and amplitudes at the current hyperparameters.
    num_features
        ``m ≥ 1``.
    input_dim
        ``d`` (must equal the kernel's number of ARD dimensions, if any).
    generator
        The ``torch.Generator`` to draw ``ε`` and ``b`` from (required).
    dtype, device
        Of the frozen draws (default: torch's default dtype and device). The draws are made
        on ``generator``'s device and moved to ``device``, so a CPU generator gives the
        same frequencies on every device. Features follow the dtype of the inputs, which
        must be on ``device``.

    Raises
    ------
    TypeError
        If ``generator`` is not a ``torch.Generator`` or ``kernel`` has no random features.
    ValueError
        For a non-positive ``num_features``/``input_dim`` or an ARD mismatch.
    """

    # the frozen draws, registered as buffers in __init__ (declared for type checkers:
    # nn.Module.__getattr__ types every buffer as ``Tensor | Module``)
    base_frequencies: torch.Tensor
    phases: torch.Tensor

    def __init__(
        self,
        kernel: Kernel,
        num_features: int,
        input_dim: int,
        *,
        generator: torch.Generator,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        kernel = check_spectral_kernel(kernel, "RandomFourierFeatures")
        for name, v in (("num_features", num_features), ("input_dim", input_dim)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        exact, minimum = kernel.input_dims()
        if exact is not None and exact != input_dim:
            raise ValueError(f"input_dim={input_dim} but the kernel has {exact} ARD lengthscales")
        if input_dim < minimum:
            raise ValueError(
                f"input_dim={input_dim} but the kernel's active_dims reach column {minimum - 1}"
            )
        generator = require_generator(generator)
        dtype = dtype or torch.get_default_dtype()
        device = torch.device(device) if device is not None else torch.get_default_device()
        self.kernel = kernel
        self.num_features = num_features
        self.input_dim = input_dim
        eps = kernel.spectral_base(
            num_features, input_dim, generator=generator, dtype=dtype, device=device
        )
        phase = (
            2 * math.pi * rnd.rand(num_features, generator=generator, dtype=dtype, device=device)
        )
        self.register_buffer("base_frequencies", eps)
        self.register_buffer("phases", phase)
        #: The kernel's :meth:`~pnsolve.kernels.Kernel.spectral_state` at the draw.
        self.drawn_spectral_state = kernel.spectral_state()

    def _check_X(self, X: object, name: str = "X") -> torch.Tensor:
        X = check_tensor(X, name)
        if X.ndim != 2 or X.shape[1] != self.input_dim:
            raise ValueError(f"{name} must have shape (n, {self.input_dim}), got {tuple(X.shape)}")
        if not X.is_floating_point():
            raise TypeError(f"{name} must have a floating dtype, got {X.dtype}")
        check_same_device(X, self.base_frequencies.device, name, "the frozen frequencies")
        return check_finite(X, name)

    @full_float32
    def features(self, X: torch.Tensor) -> torch.Tensor:
        """Feature matrix ``φ(X)`` of shape ``(n, m)`` in ``X``'s dtype (differentiable).

        Parameters
        ----------
        X
            Shape ``(n, d)``.
        """
        X = self._check_X(X)
        check_spectral_state(self.kernel, self.drawn_spectral_state)
        return rff_features(self.kernel, X, self.base_frequencies, self.phases, self.num_features)

    @full_float32
    def forward(self, X: torch.Tensor) -> torch.Tensor:
        """Same as :meth:`features`."""
        return self.features(X)

    @full_float32
    def approx_kernel(self, X1: torch.Tensor, X2: torch.Tensor | None = None) -> torch.Tensor:
        """``φ(X1) φ(X2)ᵀ ≈ K(X1, X2)``, shape ``(n1, n2)`` (``X2 = None`` means ``X1``)."""
        F1 = self.features(X1)
        F2 = F1 if X2 is None else self.features(self._check_X(X2, "X2"))
        return F1 @ F2.mT

    def weights(
        self,
        num_samples: int,
        *,
        generator: torch.Generator,
        dtype: torch.dtype | None = None,
    ) -> torch.Tensor:
        """Draw feature weights ``w ~ N(0, I)`` of shape ``(m, num_samples)``.

        Keep them to evaluate the same prior function draws at new inputs with
        :meth:`evaluate`.
        """
        generator = require_generator(generator)
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
            raise ValueError(f"num_samples must be a positive int, got {num_samples!r}")
        return rnd.randn(
            (self.num_features, num_samples),
            generator=generator,
            dtype=dtype or self.base_frequencies.dtype,
            device=self.base_frequencies.device,
        )

    @full_float32
    def evaluate(self, X: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Function draws ``f(X) = φ(X) w`` for fixed ``weights`` ``(m, s)``; shape ``(n, s)``."""
        weights = check_tensor(weights, "weights")
        if weights.ndim != 2 or weights.shape[0] != self.num_features:
            raise ValueError(
                f"weights must have shape ({self.num_features}, s), got {tuple(weights.shape)}"
            )
        return self.features(X) @ weights.to(X.dtype)

    @full_float32
    def sample_prior(
        self, X: torch.Tensor, num_samples: int, *, generator: torch.Generator
    ) -> torch.Tensor:
        """Approximate prior function draws at ``X``: ``φ(X) w``, ``w ~ N(0, I)``; shape ``(n, s)``.

        Equivalent to ``evaluate(X, weights(num_samples, generator=generator))``.
        """
        X = self._check_X(X)
        return self.evaluate(X, self.weights(num_samples, generator=generator, dtype=X.dtype))

    def extra_repr(self) -> str:
        """Feature count and input dimension for the module's repr."""
        return f"num_features={self.num_features}, input_dim={self.input_dim}"


def rff_features(
    kernel: Kernel,
    X: torch.Tensor,
    base: torch.Tensor,
    phases: torch.Tensor,
    num_features: int,
) -> torch.Tensor:
    """``φ_j(X) = √(2 a_j / m) cos(ω_jᵀx + b_j)`` for the base rows given, ``(n, r)``.

    ``base`` ``(r, w)`` and ``phases`` ``(r,)`` are rows of the frozen draws (any subset
    of the ``m = num_features`` drawn); frequencies ``ω_j`` and amplitudes ``a_j`` come
    from the kernel's current parameters (:meth:`~pnsolve.kernels.Kernel.
    spectral_projection`), differentiably. For a stationary kernel: ``ω = ε / ℓ`` and
    ``a = outputscale``.
    """
    proj, amp = kernel.spectral_projection(X, base.to(X.dtype), phases.to(X.dtype), num_features)
    return torch.sqrt(2.0 * amp / num_features) * torch.cos(proj)


def check_spectral_kernel(kernel: object, user: str) -> Kernel:
    """Require a kernel with random Fourier features for ``user``; errors say which have them."""
    if not isinstance(kernel, Kernel) or not kernel.has_spectral_features:
        raise TypeError(
            f"kernel must have random Fourier features for {user}: RBF, Matern, "
            "RationalQuadratic, SpectralMixture, Cosine and Constant kernels have them, and "
            f"sums, products (of stationary parts) and scalings of them; got "
            f"{describe_kernel(kernel)}"
        )
    return kernel


def check_spectral_state(kernel: Kernel, drawn_at: tuple[float, ...]) -> None:
    """Refuse frozen spectral draws made under other spectral parameters than ``kernel``'s.

    Frozen draws ``ε`` follow a hyperparameter step through ``ε / lengthscale``, but not a
    change of a parameter that shapes the spectral density itself (the rational
    quadratic's ``α``, :meth:`~pnsolve.kernels.Kernel.spectral_state`).

    Raises
    ------
    ValueError
        Naming the kernel and both values, when they differ.
    """
    now = kernel.spectral_state()
    if now != tuple(drawn_at):
        raise ValueError(
            f"the {type(kernel).__name__} kernel's spectral parameters changed since these "
            f"random features were drawn ({tuple(drawn_at)} -> {now}): its spectral density "
            "depends on them, so draw new features, or keep those parameters fixed "
            "(requires_grad_(False)) while training through features"
        )


def no_spectral_state() -> torch.Tensor:
    """An empty float64 CPU tensor: the stored spectral state of RBF and Matérn draws."""
    return torch.empty(0, dtype=torch.float64, device="cpu")
