"""Privacy ledger: frozen records, composition over fits, Pipelines."""

import dataclasses
import math

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

import skdpsco
from skdpsco.privacy import (
    GaussianMechanism,
    LaplaceMechanism,
    MechanismRecord,
    PrivacySpent,
    gdp_to_approx_dp,
    total_privacy_spent,
)


def _gauss_spent(sigma=5.0, delta=1e-6, count=1):
    rec = GaussianMechanism(1.0, sigma, "g").record(count)
    return PrivacySpent.from_records([rec], delta=delta)


def _regression_data(n=300, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = X @ np.arange(1.0, d + 1) + rng.normal(size=n)
    return X, y


def test_privacy_spent_is_frozen():
    spent = _gauss_spent()
    with pytest.raises(dataclasses.FrozenInstanceError):
        spent.epsilon = 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        spent.mechanisms[0].scale = 1e9


def test_from_records():
    rec = MechanismRecord("mean", "gaussian", count=4, sensitivity=1.0, scale=8.0)
    spent = PrivacySpent.from_records([rec], delta=1e-5)
    assert spent.accountant == "gdp"
    assert spent.rho == 0.03125
    assert spent.epsilon == gdp_to_approx_dp(0.25, 1e-5)
    assert spent.delta == 1e-5
    assert spent.mechanisms == (rec,)
    assert "replace-one" in spent.neighbouring
    assert "accountant='gdp'" in repr(spent)


def test_mechanism_record_validation():
    with pytest.raises(ValueError, match="kind"):
        MechanismRecord("x", "exponential")
    for bad in [-1, 1.5, True]:
        with pytest.raises(ValueError, match="count"):
            MechanismRecord("x", "gaussian", count=bad, sensitivity=1.0, scale=1.0)


def test_total_of_two_gaussian_fits_is_gdp_composition():
    a = _gauss_spent(sigma=5.0, delta=1e-6)
    total = total_privacy_spent([a, a])
    assert total.delta == 2e-6
    assert total.accountant == "gdp"
    assert total.epsilon == pytest.approx(
        gdp_to_approx_dp(math.sqrt(2) / 5.0, 2e-6), rel=1e-12
    )
    assert total.epsilon < 2 * a.epsilon
    assert total.rho == pytest.approx(2 * a.rho, rel=1e-14)
    assert len(total.mechanisms) == 2
    # At an explicit delta below the sum only the joint accountant applies.
    low = total_privacy_spent([a, a], delta=1e-6)
    assert low.epsilon == pytest.approx(
        gdp_to_approx_dp(math.sqrt(2) / 5.0, 1e-6), rel=1e-12
    )


def test_total_of_pure_laplace_fits_at_delta_zero_is_the_sum():
    a = PrivacySpent.from_records([LaplaceMechanism(1.0, 2.0).record()], delta=0.0)
    b = PrivacySpent.from_records([LaplaceMechanism(1.0, 4.0).record(2)], delta=0.0)
    total = total_privacy_spent([a, b])
    assert total.accountant == "basic"
    assert total.delta == 0.0
    assert total.epsilon == pytest.approx(1.0, rel=1e-14)


def test_total_uses_basic_composition_when_smaller():
    # A GDP-accounted Gaussian fit plus a tiny pure-DP fit: the joint accountant
    # cannot use GDP for the mix, so summing the two epsilons is better.
    g = _gauss_spent(sigma=4.0, delta=1e-5)
    lap = PrivacySpent.from_records(
        [LaplaceMechanism.from_epsilon(1.0, 0.01).record()], delta=0.0
    )
    joint = PrivacySpent.from_records(g.mechanisms + lap.mechanisms, 1e-5)
    total = total_privacy_spent([g, lap])
    assert total.accountant == "basic"
    assert total.epsilon == pytest.approx(g.epsilon + 0.01, rel=1e-14)
    assert total.epsilon < joint.epsilon
    assert total.delta == 1e-5


def test_total_rejects_bad_input():
    with pytest.raises(TypeError, match="privacy_spent_"):
        total_privacy_spent(object())
    with pytest.raises(TypeError, match="privacy_spent_"):
        total_privacy_spent([_gauss_spent(), 3.0])
    with pytest.raises(ValueError):
        total_privacy_spent([])
    with pytest.raises(ValueError):  # Gaussian mechanisms at delta = 0
        total_privacy_spent([_gauss_spent()], delta=0.0)


def test_total_accepts_fitted_estimators_and_pipelines():
    X, y = _regression_data()
    pipe = make_pipeline(
        FunctionTransformer(np.tanh),
        skdpsco.HeavyTailedDPRidge(epsilon=0.5, random_state=0),
    ).fit(X, y)
    spent = pipe[-1].privacy_spent_
    assert spent.epsilon <= 0.5 * (1 + 1e-9)

    total = total_privacy_spent(pipe)
    assert total.epsilon == pytest.approx(spent.epsilon, rel=1e-12)
    assert total.delta == spent.delta
    assert total.mechanisms == spent.mechanisms

    other = skdpsco.HeavyTailedDPRidge(epsilon=0.3, random_state=1).fit(X, y)
    both = total_privacy_spent([pipe, other])
    expected = total_privacy_spent([spent, other.privacy_spent_])
    assert both.epsilon == expected.epsilon
    assert both.delta == pytest.approx(2e-5, rel=1e-14)
    assert both.epsilon < spent.epsilon + other.privacy_spent_.epsilon
    assert both.epsilon > max(spent.epsilon, other.privacy_spent_.epsilon)


def test_unfitted_dp_step_in_pipeline_is_an_error():
    pipe = make_pipeline(FunctionTransformer(), skdpsco.HeavyTailedDPRidge(epsilon=0.5))
    with pytest.raises(TypeError, match="privacy_spent_"):
        total_privacy_spent(pipe)
    # A Pipeline with no private step spent nothing that can be totalled.
    with pytest.raises(ValueError):
        total_privacy_spent(make_pipeline(FunctionTransformer()))
