"""Shared test helpers: estimator discovery, seeded data, parameter equality, fits.

Plain functions rather than fixtures: the suites parametrize over what they return,
which pytest needs at collection time.
"""

import math

import numpy as np
from sklearn.base import BaseEstimator

import skdpsco
from skdpsco.privacy._params import _non_private_testing_mode


def public_estimators():
    """The public estimator classes, in the order of ``skdpsco.__all__``.

    ``__all__`` lists every public name (estimators, helpers, submodules); the
    estimators are its classes that are scikit-learn estimators, so a new one is
    covered by every suite that iterates over this list the day it is exported.
    """
    found = []
    for name in skdpsco.__all__:
        obj = getattr(skdpsco, name)
        if isinstance(obj, type) and issubclass(obj, BaseEstimator):
            found.append(obj)
    return found


def algorithms(Est):
    """Every value of ``Est``'s ``algorithm`` parameter, sorted."""
    return sorted(Est._parameter_constraints["algorithm"][0].options)


def dense_data(n=400, d=4, seed=0):
    """Standard normal ``X`` of shape ``(n, d)``, a linear target ``y_reg`` (noise
    0.1) and a binary target ``y_clf`` read from the first column (noise 0.3), drawn
    in that order from ``default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y_reg = X @ np.linspace(1.0, -1.0, d) + 0.1 * rng.standard_normal(n)
    y_clf = (X[:, 0] + 0.3 * rng.standard_normal(n) > 0).astype(int)
    return X, y_reg, y_clf


def params_equal(a, b):
    """Equality of parameter values: same type, NaN equal to NaN, arrays by shape,
    dtype and values, containers and nested estimators element by element."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, np.ndarray):
        return (
            a.shape == b.shape
            and a.dtype == b.dtype
            and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
        )
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(map(params_equal, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(params_equal(a[k], b[k]) for k in a)
    if isinstance(a, BaseEstimator):
        return params_equal(a.get_params(), b.get_params())
    return a == b


def assert_params_equal(before, after):
    """``get_params()`` snapshots ``before`` and ``after`` hold the same values."""
    assert before.keys() == after.keys()
    changed = {k: (before[k], after[k]) for k in before}
    changed = {k: v for k, v in changed.items() if not params_equal(*v)}
    assert not changed, f"parameters changed (before, after): {changed}"


def noiseless_fit(Est, X, y, **params):
    """``Est(**params)`` fitted on the data as given (``scaling="none"``) at
    ``epsilon = inf`` in the hidden testing mode, where no noise is drawn: the
    non-private limit that the estimator suites compare with a reference solver."""
    with _non_private_testing_mode():
        return Est(scaling="none", epsilon=np.inf, **params).fit(X, y)
