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

__all__ = [
    "GaussianWidthDPClassifier",
    "GaussianWidthDPRegressor",
    "HeavyTailedDPLogistic",
    "HeavyTailedDPRidge",
    "SparseGradientDPClassifier",
    "SparseGradientDPRegressor",
    "datasets",
    "exceptions",
    "gaussian_width",
    "model_selection",
    "preprocessing",
    "privacy",
]
