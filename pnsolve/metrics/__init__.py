"""Evaluation metrics for regression predictions and approximate variances."""

from .regression import rmse, smae

__all__ = ["rmse", "smae"]
