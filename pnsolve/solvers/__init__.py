"""Solver loop and its typed records (the probabilistic linear solver lands here)."""

from .stop_reason import StopReason

__all__ = ["StopReason"]
