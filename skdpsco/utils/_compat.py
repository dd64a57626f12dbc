"""The one place that imports scikit-learn's private modules.

scikit-learn's declarative parameter validation (``Interval``, ``StrOptions``) and
the ``_fit_context`` decorator live in private modules.
Importing them here, and nowhere else, keeps an upstream rename a one-file fix.
"""

from sklearn.base import _fit_context
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    InvalidParameterError,
    Options,
    StrOptions,
    validate_params,
)
from sklearn.utils.validation import check_is_fitted
from sklearn.utils.validation import validate_data as _sklearn_validate_data

__all__ = [
    "HasMethods",
    "Interval",
    "InvalidParameterError",
    "Options",
    "StrOptions",
    "_fit_context",
    "check_is_fitted",
    "validate_data",
    "validate_params",
]


def validate_data(*args, **kwargs):
    """scikit-learn's ``validate_data`` without floating-point warnings.

    Its finiteness check sums the input: values near the float range (finite,
    valid) overflow that sum to +inf and -inf and warn on one dataset and not on its
    neighbour, a side channel. The check's verdict is unchanged.
    """
    import numpy as np

    with np.errstate(over="ignore", invalid="ignore"):
        return _sklearn_validate_data(*args, **kwargs)
