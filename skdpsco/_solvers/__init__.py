"""Optimisation loops that consume a mean oracle; they never read rows themselves."""

from ._design import LinearDesign
from ._gradient_descent import SolverResult, noisy_gradient_descent
from ._sgd import noisy_sgd

__all__ = ["LinearDesign", "SolverResult", "noisy_gradient_descent", "noisy_sgd"]
