"""Action policies: the user's main lever over what a probabilistic solver computes."""

from .base import Policy
from .cg import CG

__all__ = ["CG", "Policy"]
