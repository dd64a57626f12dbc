"""What every private solver returns."""

from dataclasses import dataclass

import numpy as np

__all__ = ["SolverResult"]


@dataclass
class SolverResult:
    """Output of a private solver: the released parameters and what they cost."""

    coef: np.ndarray
    n_iter: int
    records: list
