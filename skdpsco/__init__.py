"""skdpsco: differentially private linear models with the scikit-learn API.

Every estimator releases a model with an ``(epsilon, delta)``-DP guarantee under
replace-one neighbouring datasets, with no bound read from the private data.
"""

from . import datasets, exceptions, model_selection, preprocessing, privacy
from ._constraints import gaussian_width
from ._estimators._gaussian_width import (
    GaussianWidthDPClassifier,
    GaussianWidthDPRegressor,
)
from ._estimators._heavy_tailed import HeavyTailedDPLogistic, HeavyTailedDPRidge
from ._estimators._sparse_gradient import (
    SparseGradientDPClassifier,
    SparseGradientDPRegressor,
)

__version__ = "0.1.0.dev0"

#: Every public estimator class (tests and tools discover estimators from this list).
__all__ = [
    "GaussianWidthDPClassifier",
    "GaussianWidthDPRegressor",
    "HeavyTailedDPLogistic",
    "HeavyTailedDPRidge",
    "SparseGradientDPClassifier",
    "SparseGradientDPRegressor",
]

#: Public helpers that are not estimators (kept out of ``__all__``, which tools read
#: as the list of estimators).
_HELPERS = (gaussian_width,)

_SUBMODULES = (datasets, exceptions, model_selection, preprocessing, privacy)
