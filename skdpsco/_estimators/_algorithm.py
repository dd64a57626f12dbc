"""The contract between an estimator family and its algorithms.

Every family keeps a registry of :class:`Algorithm` entries, one per value of its
``algorithm`` parameter. The shared ``fit`` (:class:`~._base.DPLinearModel`) reads
the entry's requirements before any data is used, hands the runner one
:class:`FitProblem` (the data in the fit's units, the target, the algorithm's
budget, the randomness) and gets back a :class:`~skdpsco._solvers._result.SolverResult`;
it alone validates, scales, gates the release and stores the result.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .._solvers._progress import NO_PROGRESS
from ..privacy._budget import ACCOUNTANTS, AlgorithmBudget

__all__ = ["Algorithm", "FitProblem", "registry"]


@dataclass(frozen=True)
class FitProblem:
    """What a runner gets: everything it may read, in the fit's units.

    Attributes
    ----------
    estimator : DPLinearModel
        The estimator; runners read its public parameters only (and never set
        attributes on it: what they release travels in the result).
    X : ndarray, sparse matrix or LinearDesign
        The data in the fit's units (standardised, or a design folding the
        released scaling in).
    target : ndarray of shape (n_samples,)
        Standardised target (regressors) or class codes (classifiers).
    n_outputs : int
        1 (one coefficient vector) or the number of classes (multinomial).
    budget : AlgorithmBudget
        What the algorithm may spend (after the scaling's share).
    rng : numpy.random.Generator
    released_row_nnz : int or None
        The typical number of non-zeros per row released by the private scaling
        of sparse input (a public bound from then on), else None.
    sample_weight : ndarray of shape (n_samples,) or None
        Per-record weights in ``[0, 1]`` (only for algorithms that support
        ``"sample_weight"``).
    progress : Progress or NoProgress
        The reporter the iterative solvers hand their public progress to
        (:mod:`skdpsco._solvers._progress`); silent by default.
    """

    estimator: object
    X: object
    target: np.ndarray
    n_outputs: int
    budget: AlgorithmBudget
    rng: np.random.Generator
    released_row_nnz: int | None = None
    sample_weight: np.ndarray | None = None
    progress: object = NO_PROGRESS

    @property
    def n_features(self):
        return self.X.n_features if hasattr(self.X, "n_features") else self.X.shape[1]


@dataclass(frozen=True)
class Algorithm:
    """One entry of a family's algorithm registry.

    Attributes
    ----------
    name : str
        The value of the estimators' ``algorithm`` parameter.
    run : callable
        ``run(problem: FitProblem) -> SolverResult``.
    accountant : {"gdp", "zcdp", "gdp-epsilon", None}
        How the algorithm's mechanisms compose with the scaling statistics' when
        ``delta > 0`` (:mod:`skdpsco.privacy._budget`); with ``delta = 0`` every
        algorithm is composed by basic composition.
    requires_delta : bool
        Its mechanisms need ``delta > 0`` (Gaussian noise).
    min_samples : int
        The smallest ``n_samples`` it runs with.
    supports : frozenset of str
        Optional features it supports (``"class_weight"``: public per-record
        weights, whose effect its sensitivity analysis covers; ``"sample_weight"``:
        per-record weights in ``[0, 1]``, likewise; ``"max_iter"``: the
        number of passes over the data is the user's to set, where the others'
        is fixed by their theorem).
    """

    name: str
    run: Callable
    accountant: str | None = None
    requires_delta: bool = True
    min_samples: int = 2
    supports: frozenset = field(default_factory=frozenset)

    def __post_init__(self):
        if self.accountant not in ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {ACCOUNTANTS}.")

    def accountant_for(self, delta):
        """The accountant at this ``delta`` (basic composition for pure DP)."""
        return self.accountant if delta > 0 else None


def registry(*algorithms):
    """``{name: Algorithm}`` of a family, in the order given."""
    return {algorithm.name: algorithm for algorithm in algorithms}
