"""What every private solver returns."""

from dataclasses import dataclass, field

import numpy as np

__all__ = ["SolverResult"]


@dataclass
class SolverResult:
    """Output of a private solver: the released parameters and what they cost."""

    coef: np.ndarray
    n_iter: int
    records: list
    #: Public values the algorithm chose from public inputs (e.g. an automatic
    #: penalty), stored by the estimator as fitted attributes.
    attributes: dict = field(default_factory=dict)
