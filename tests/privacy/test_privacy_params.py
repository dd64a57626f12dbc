"""Privacy-parameter validation shared by every estimator."""

import math
import warnings

import numpy as np
import pytest

from skdpsco import HeavyTailedDPLogistic, HeavyTailedDPRidge
from skdpsco.exceptions import PrivacyBudgetError, PrivacyLeakWarning
from skdpsco.preprocessing import DPStandardScaler
from skdpsco.privacy import PRIVACY_PARAMETER_CONSTRAINTS, check_privacy_params
from skdpsco.privacy._params import _non_private_testing_mode
from skdpsco.utils._compat import InvalidParameterError

ESTIMATORS = [HeavyTailedDPRidge, HeavyTailedDPLogistic]


def _data(cls, n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    if cls is HeavyTailedDPLogistic:
        y = (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)
    else:
        y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=n)
    return X, y


def _fit(cls, n=200, **params):
    X, y = _data(cls, n)
    return cls(max_iter=5, random_state=0, **params).fit(X, y)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_constraints_are_merged(cls):
    for key, value in PRIVACY_PARAMETER_CONSTRAINTS.items():
        assert cls._parameter_constraints[key] is value


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize(
    "bad", [0, -1, math.nan, math.inf, True, False, "1", None], ids=repr
)
def test_invalid_epsilon(cls, bad):
    with pytest.raises(InvalidParameterError) as excinfo:
        _fit(cls, epsilon=bad)
    msg = str(excinfo.value)
    assert "'epsilon'" in msg and cls.__name__ in msg


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize("bad", [-0.1, 1, 1.5, math.nan, True, "0.1", None], ids=repr)
def test_invalid_delta(cls, bad):
    with pytest.raises(InvalidParameterError) as excinfo:
        _fit(cls, delta=bad)
    msg = str(excinfo.value)
    assert "'delta'" in msg and cls.__name__ in msg


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize(
    "epsilon, delta",
    [(np.float32(0.5), 1e-5), (np.int64(2), np.float32(1e-5)), (1, np.float64(1e-6))],
)
def test_numpy_scalars_accepted(cls, epsilon, delta):
    est = _fit(cls, epsilon=epsilon, delta=delta)
    assert est.privacy_spent_.epsilon <= float(epsilon) * (1 + 1e-9)
    assert est.privacy_spent_.delta == float(delta)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_delta_zero_with_gaussian_algorithm(cls):
    with pytest.raises(ValueError, match="delta") as excinfo:
        _fit(cls, delta=0.0)
    assert not isinstance(excinfo.value, InvalidParameterError)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_large_delta_warns(cls):
    with pytest.warns(PrivacyLeakWarning, match="delta"):
        _fit(cls, n=50, delta=0.02)  # delta = 1/n
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        _fit(cls, n=50, delta=0.0199)


def test_large_delta_warning_names_a_delta_to_use():
    # The default delta = 1e-5 at n = 100,000 (delta n = 1): the warning says what
    # to use instead, a public function of n an order of magnitude below 1/n.
    from skdpsco.privacy._params import check_privacy_params, suggested_delta

    est = HeavyTailedDPRidge()
    with pytest.warns(PrivacyLeakWarning, match=r"e\.g\. delta=1e-06\.$"):
        check_privacy_params(est, 100_000)
    for n in [2, 7, 99, 100, 101, 1000, 54_321, 10**6, 10**9]:
        delta = suggested_delta(n)
        assert delta * n <= 0.1 + 1e-12 and 10 * delta * n > 0.1 - 1e-12
        with warnings.catch_warnings():
            warnings.simplefilter("error", PrivacyLeakWarning)
            check_privacy_params(HeavyTailedDPRidge(delta=delta), n)


def test_infinite_epsilon_only_in_testing_mode():
    with pytest.raises(InvalidParameterError, match="epsilon"):
        _fit(HeavyTailedDPRidge, epsilon=np.inf)
    with _non_private_testing_mode():
        est = _fit(HeavyTailedDPRidge, epsilon=np.inf)
    assert math.isinf(est.privacy_spent_.epsilon)
    # The switch is reset when the block exits.
    with pytest.raises(InvalidParameterError, match="epsilon"):
        _fit(HeavyTailedDPRidge, epsilon=np.inf)


def test_check_privacy_params():
    est = HeavyTailedDPRidge(epsilon=0.7, delta=1e-6)
    budget = check_privacy_params(est, 1000, min_samples=10)
    assert (budget.epsilon, budget.delta, budget.n_samples) == (0.7, 1e-6, 1000)
    assert budget.is_private
    with pytest.raises(PrivacyBudgetError, match="at least 2000 samples"):
        check_privacy_params(est, 1000, min_samples=2000, method="clipped_gd")
    zero = HeavyTailedDPRidge(delta=0.0)
    with pytest.raises(ValueError, match="delta"):
        check_privacy_params(zero, 1000)
    assert check_privacy_params(zero, 1000, requires_delta=False).delta == 0.0


@pytest.mark.parametrize("epsilon", [1e6 * (1 + 1e-12), 1e200, 1e308])
def test_epsilon_above_the_public_maximum_is_refused(epsilon):
    # Above 1e6 nothing is protected and the accounting's floating point gives
    # out (epsilon^2 and mu^2 overflow near 1e154); a clear error, nothing fitted.
    X = np.random.default_rng(0).normal(size=(60, 3))
    y = (X[:, 0] > 0).astype(int)
    est = HeavyTailedDPLogistic(epsilon=epsilon)
    with pytest.raises(ValueError, match="epsilon"):
        est.fit(X, y)
    assert not hasattr(est, "coef_")
    with pytest.raises(ValueError, match="epsilon"):
        DPStandardScaler(epsilon=epsilon).fit(X)


def test_accounting_conversions_stay_finite_and_fast_near_the_float_limit():
    from skdpsco.privacy import approx_dp_to_zcdp, zcdp_to_approx_dp
    from skdpsco.privacy._accounting import gaussian_rho_budget

    for eps, delta in [(2e307, 1e-5), (1e306, 1e-300)]:
        rho = approx_dp_to_zcdp(eps, delta)
        assert 0 < rho < math.inf and zcdp_to_approx_dp(rho, delta) <= eps
    assert 0 < gaussian_rho_budget(1e308, 1e-5) < math.inf
