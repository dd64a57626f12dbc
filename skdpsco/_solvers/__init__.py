"""Optimisation loops that consume a mean oracle; they never read rows themselves."""

from ._bias_reduced_sgd import bias_reduced_sgd
from ._boosting import boosted_bias_reduced_sgd
from ._certified import CertifiedResult, certified_minimize
from ._gradient_descent import noisy_gradient_descent
from ._mirror_descent import (
    noisy_mirror_descent,
    phased_dp_sgd,
    shuffled_mirror_descent,
)
from ._objective_perturbation import approximate_objective_perturbation
from ._result import SolverResult
from ._sgd import noisy_sgd
from ._sparse_exponential import sparse_exponential_mechanism

__all__ = [
    "CertifiedResult",
    "SolverResult",
    "approximate_objective_perturbation",
    "bias_reduced_sgd",
    "boosted_bias_reduced_sgd",
    "certified_minimize",
    "noisy_gradient_descent",
    "noisy_mirror_descent",
    "noisy_sgd",
    "phased_dp_sgd",
    "shuffled_mirror_descent",
    "sparse_exponential_mechanism",
]
