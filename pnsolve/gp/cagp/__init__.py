"""Computation-aware GPs with model selection (Wenger et al. 2024): :class:`CaGP`.

The posterior of IterGP for ``i`` actions; hyperparameters and (block-sparse) actions
chosen by maximising the computation-aware ELBO (:mod:`pnsolve.gp.cagp.elbo`), each
step one matrix-free pass over the kernel entries for ``K S``.
"""

from .actions import BlockActions
from .classifier import CaGPClassifier
from .elbo import ActionsNotFullRankError, CaGPFactors, computation_aware_elbo
from .model import CaGP, CaGPFitState

__all__ = [
    "ActionsNotFullRankError",
    "BlockActions",
    "CaGP",
    "CaGPClassifier",
    "CaGPFactors",
    "CaGPFitState",
    "computation_aware_elbo",
]
