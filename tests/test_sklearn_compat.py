"""scikit-learn citizenship: the common checks over every public estimator."""

import numpy as np
from sklearn.utils.estimator_checks import parametrize_with_checks

import skdpsco


def _public_estimators():
    return [getattr(skdpsco, name) for name in skdpsco.__all__]


def _instances():
    # A fixed seed: the common checks compare fits (idempotence, pickling, ...).
    return [est(random_state=0) for est in _public_estimators()]


def test_all_lists_every_estimator():
    from sklearn.base import BaseEstimator

    assert skdpsco.__all__, "skdpsco.__all__ must list the public estimators"
    for est in _public_estimators():
        assert issubclass(est, BaseEstimator)
        assert "algorithm" in est().get_params()


@parametrize_with_checks(_instances())
def test_sklearn_common_checks(estimator, check):
    with np.errstate(divide="raise", over="raise", invalid="raise", under="ignore"):
        check(estimator)


def _composite_instances():
    # Public meta-estimators and transformers outside ``skdpsco.__all__`` (which lists
    # the linear models). epsilon=50: the checks' tiny datasets would otherwise make
    # the search refuse its budget as too small.
    from skdpsco import HeavyTailedDPLogistic, HeavyTailedDPRidge
    from skdpsco.model_selection import PrivateSearchCV

    return [
        PrivateSearchCV(
            HeavyTailedDPLogistic(max_iter=5),
            {"C": [1.0]},
            epsilon=50.0,
            random_state=0,
        ),
        PrivateSearchCV(
            HeavyTailedDPRidge(max_iter=5),
            {"alpha": [1.0]},
            epsilon=50.0,
            random_state=0,
        ),
    ]


@parametrize_with_checks(_composite_instances())
def test_sklearn_common_checks_composites(estimator, check):
    check(estimator)
