"""AdaGrad on the rows an estimate touched (sparse updates keep Proposition 3's products exact)."""

from __future__ import annotations

import torch

__all__ = ["SparseAdagrad"]


class SparseAdagrad:
    """AdaGrad (Duchi et al. 2011) that updates only given rows of each parameter.

    ``G[idx] += g²``, ``θ[idx] −= lr · g / (√G[idx] + eps)``. Rows not in ``idx`` do not
    move, so running products such as ``Φ⁰_p: μ`` can be kept up to date from the rows
    that did (Evans & Nair, Proposition 3). Each update costs ``O(len(idx))``.

    Parameters
    ----------
    lr
        Learning rate (Evans & Nair 2020: 0.1).
    eps
        Added to ``√G``.
    """

    def __init__(self, lr: float = 0.1, eps: float = 1e-10) -> None:
        if not (isinstance(lr, int | float) and lr > 0):
            raise ValueError(f"lr must be a positive number, got {lr!r}")
        self.lr, self.eps = float(lr), float(eps)
        self.sums: dict[str, torch.Tensor] = {}

    def step(self, name: str, param: torch.Tensor, index: torch.Tensor, grad: torch.Tensor) -> None:
        """Update ``param[index]`` (in place) with ``grad`` (shape of ``param[index]``).

        ``index`` must not repeat (the callers pass unique indices).
        """
        if index.numel() == 0:
            return
        G = self.sums.get(name)
        if G is None:
            G = self.sums[name] = torch.zeros_like(param)
        g = grad.detach()
        G[index] += g * g
        param[index] -= self.lr * g / (torch.sqrt(G[index]) + self.eps)

    def state_dict(self) -> dict[str, object]:
        """Learning rate and the accumulated squares."""
        return {"lr": self.lr, "sums": {k: v.clone() for k, v in self.sums.items()}}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore :meth:`state_dict`."""
        lr, sums = state["lr"], state["sums"]
        if not isinstance(lr, float) or not isinstance(sums, dict):
            raise ValueError("not a SparseAdagrad state")
        self.lr = lr
        self.sums = {k: v.clone() for k, v in sums.items()}
