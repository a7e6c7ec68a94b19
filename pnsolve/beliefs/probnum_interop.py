"""Export solution beliefs to `probnum <https://probnum.readthedocs.io>`_ random variables.

``to_probnum(belief)`` returns ``probnum.randvars.Normal`` for ``x`` with the mean as a
NumPy array. The covariance is, by default, a matrix-free
``probnum.linops.LinearOperator`` whose products call :attr:`GaussianSolutionBelief.cov`
(``Σ₀ − V Vᵀ``; under the inverse prior every product runs an inner solve). pnsolve
never densifies silently, so a dense NumPy covariance is returned only on request
(``dense=True``: ``n`` products with ``Σ_i``, for small ``n``).

NumPy 2 compatibility
---------------------
probnum 0.1.25 uses aliases that NumPy 2.0 removed: ``np.float_`` (random variables
infer their moment dtypes with it) and ``np.find_common_type`` (sums and products of
probnum linear operators). :func:`_ensure_numpy2_compat` defines exactly these two
names on the ``numpy`` module, only where they are missing, before probnum is
imported; it runs once, on the first call of :func:`to_probnum` (importing pnsolve
changes nothing). ``np.float_`` becomes ``np.float64`` (its NumPy 1 meaning);
``np.find_common_type(array_types, scalar_types)`` becomes
``np.result_type(*array_types, *scalar_types)`` (probnum passes ``scalar_types=[]``,
where both agree). Other probnum subpackages that use further removed names
(``probnum.quad``: ``np.Inf``; ``probnum.filtsmooth``: ``np.in1d``) are not covered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from .gaussian_solution import GaussianSolutionBelief

__all__ = ["to_probnum"]

_COMPAT_DONE = False


def _find_common_type(array_types, scalar_types):
    """NumPy 1's ``np.find_common_type`` for the calls probnum makes (``scalar_types=[]``)."""
    return np.result_type(*array_types, *scalar_types)


#: The names NumPy 2 removed that probnum's randvars/linops/linalg use, and their values.
_NUMPY1_ALIASES = {"float_": np.float64, "find_common_type": _find_common_type}


def _ensure_numpy2_compat() -> None:
    """Define the NumPy 1 aliases probnum 0.1.25 needs, where NumPy 2 lacks them (once)."""
    global _COMPAT_DONE
    if _COMPAT_DONE:
        return
    for name, value in _NUMPY1_ALIASES.items():
        if name not in np.__dict__:
            setattr(np, name, value)
    _COMPAT_DONE = True


def _import_probnum():
    _ensure_numpy2_compat()
    try:
        import probnum
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("to_probnum needs probnum: pip install 'pnsolve[probnum]'") from err
    return probnum


def _numpy(t: torch.Tensor) -> np.ndarray:
    # host round trip: probnum works on NumPy arrays, and keeps the moments of a Normal in
    # float64 (it promotes to ``np.float_``)
    return t.detach().cpu().numpy().astype(np.float64, copy=False)


def to_probnum(belief: GaussianSolutionBelief, dense: bool = False):
    """The belief about ``x`` as ``probnum.randvars.Normal``.

    Parameters
    ----------
    belief
        A :class:`~pnsolve.beliefs.GaussianSolutionBelief`.
    dense
        ``False`` (default): the covariance is a matrix-free
        ``probnum.linops.LinearOperator`` applying ``Σ_i`` with torch (each product
        under the inverse prior runs an inner solve). ``True``: a dense NumPy array
        ``Σ_i`` (built with ``n`` products; for small ``n``).

    Returns
    -------
    probnum.randvars.Normal
        Mean ``belief.mean`` as a NumPy array of shape ``(n,)`` and covariance ``Σ_i``,
        both float64 (probnum keeps the moments of a ``Normal`` in float64; a float32
        belief's covariance products still run in float32).

    Examples
    --------
    >>> import torch, pnsolve as pn
    >>> A = torch.diag(torch.arange(1.0, 5.0, dtype=torch.float64))
    >>> belief, _ = pn.problinsolve(A, torch.ones(4, dtype=torch.float64), maxiter=2)
    >>> x = belief.to_probnum(dense=True)  # doctest: +SKIP
    >>> x.mean.shape, x.cov.shape  # doctest: +SKIP
    ((4,), (4, 4))
    """
    probnum = _import_probnum()
    cov_op = belief.cov
    mean = _numpy(belief.mean)
    n = mean.shape[0]
    if dense:
        cov = _numpy(cov_op.to_dense())
        cov = 0.5 * (cov + cov.T)
    else:
        dtype, device = belief.mean.dtype, belief.mean.device

        def matmul(x: np.ndarray) -> np.ndarray:
            x = np.asarray(x)
            X = torch.as_tensor(x.reshape(n, -1) if x.ndim == 1 else x, dtype=dtype, device=device)
            Y = _numpy(cov_op @ X) if X.ndim == 2 else _numpy(cov_op.to_dense() @ X)
            return Y.reshape(x.shape)

        cov = probnum.linops.LambdaLinearOperator(
            (n, n),
            mean.dtype,
            matmul=matmul,
            todense=lambda: _numpy(cov_op.to_dense()),
        )
        cov.is_symmetric = True
    return probnum.randvars.Normal(mean=mean, cov=cov)
