"""Multi-output targets for the regressors and ``sample_weight`` (issue 18, item 5).

Several target columns: one run per column, composed (``DPLinearModel._run``,
:meth:`AlgorithmBudget.per_output`). Sample weights in ``[0, 1]``: each record's
clipped contribution times its weight, sensitivity unchanged (doc/proofs.rst,
"Several targets" and "Sample weights").
"""

import math

import numpy as np
import pytest
from _helpers import noiseless_fit, public_estimators
from sklearn.base import is_regressor
from sklearn.datasets import make_regression
from sklearn.linear_model import Ridge
from sklearn.preprocessing import StandardScaler

from skdpsco import (
    GaussianWidthDPRegressor,
    HeavyTailedDPLogistic,
    HeavyTailedDPRidge,
    SparseGradientDPRegressor,
)
from skdpsco.privacy import approx_dp_to_gdp, gdp_to_approx_dp
from skdpsco.privacy._budget import PrivacyBudget

REGRESSORS = [E for E in public_estimators() if is_regressor(E())]


def _targets(n=600, d=4, k=3, seed=0):
    X, Y = make_regression(n, d, n_targets=k, noise=1.0, random_state=seed)
    Y = Y.reshape(n, k)
    X = StandardScaler().fit_transform(X)
    return X, (Y - Y.mean(axis=0)) / Y.std(axis=0) + np.arange(k) * 0.5


# --------------------------------------------------------------- several targets


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("Est", REGRESSORS, ids=lambda E: E.__name__)
def test_column_target_gives_ridge_shapes_and_the_same_model(Est, fit_intercept):
    # y of shape (n, 1): Ridge's shapes (coef_ (d,), intercept_ (1,), or 0.0
    # without intercept; predictions (n,)); the single column runs once with the
    # whole budget, so the model is the 1-D fit's, bit for bit.
    X, Y = _targets(k=1)
    params = dict(fit_intercept=fit_intercept, random_state=0)
    flat = Est(**params).fit(X, Y[:, 0])
    column = Est(**params).fit(X, Y)
    ref = Ridge(fit_intercept=fit_intercept).fit(X, Y)
    assert column.coef_.shape == ref.coef_.shape == (4,)
    assert np.shape(column.intercept_) == np.shape(ref.intercept_)
    assert column.predict(X).shape == ref.predict(X).shape == (600,)
    np.testing.assert_array_equal(column.coef_, flat.coef_)
    np.testing.assert_array_equal(column.predict(X), flat.predict(X))
    assert column.privacy_spent_ == flat.privacy_spent_


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_three_targets_non_private_limit_matches_sklearn_ridge(fit_intercept):
    X, Y = _targets()
    est = noiseless_fit(
        HeavyTailedDPRidge,
        X,
        Y,
        alpha=2.0,
        clip_norm=1e6,
        max_iter=400,
        fit_intercept=fit_intercept,
        random_state=0,
    )
    ref = Ridge(alpha=2.0, fit_intercept=fit_intercept).fit(X, Y)
    assert est.coef_.shape == (3, 4)
    assert np.shape(est.intercept_) == np.shape(ref.intercept_)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-6)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, atol=1e-6)
    np.testing.assert_allclose(est.predict(X), ref.predict(X), atol=1e-5)


@pytest.mark.parametrize("Est", REGRESSORS, ids=lambda E: E.__name__)
def test_three_targets_non_private_limit_is_one_fit_per_column(Est):
    # Every family: column j of the joint fit is the single-target fit of y[:, j]
    # (the first column always; the others where the solver draws no randomness
    # in the limit: the Gaussian-width default shuffles, from the shared stream).
    X, Y = _targets(n=400)
    joint = noiseless_fit(Est, X, Y, random_state=0)
    for j in range(1 if Est is GaussianWidthDPRegressor else 3):
        single = noiseless_fit(Est, X, Y[:, j], random_state=0)
        np.testing.assert_allclose(joint.coef_[j], single.coef_, atol=1e-10)
        np.testing.assert_allclose(joint.intercept_[j], single.intercept_, atol=1e-10)


@pytest.mark.parametrize(
    "Est, params, accountant",
    [
        (HeavyTailedDPRidge, {}, "gdp"),
        (HeavyTailedDPRidge, {"algorithm": "dp_sgd", "max_iter": 2}, "rdp-group"),
        (HeavyTailedDPRidge, {"algorithm": "smooth_sensitivity_gd"}, "basic"),
        (GaussianWidthDPRegressor, {"algorithm": "phased_sgd"}, "gdp"),
        (
            SparseGradientDPRegressor,
            {"algorithm": "output_perturbation", "delta": 0.0},
            None,
        ),
    ],
    ids=["gdp", "poisson", "basic", "gdp-epsilon", "pure"],
)
def test_three_targets_spend_within_the_ask_and_record_every_output(
    Est, params, accountant
):
    X, Y = _targets(n=3000)
    params = {"epsilon": 2.0, "random_state": 0, **params}
    joint = Est(**params).fit(X, Y)
    single = Est(**params).fit(X, Y[:, 0])
    spent = joint.privacy_spent_
    assert spent.epsilon <= 2.0 and spent.delta <= params.get("delta", 1e-5)
    if accountant == "gdp":
        # Exact composition: the three runs spend the whole ask, as one run does.
        assert spent.epsilon == pytest.approx(2.0, rel=1e-6)
        assert single.privacy_spent_.epsilon == pytest.approx(2.0, rel=1e-6)
    names = [m.name for m in spent.mechanisms]
    for j in range(3):
        assert any(name.startswith(f"output {j}: ") for name in names)
    assert joint.coef_.shape == (3, 4) and joint.intercept_.shape == (3,)
    assert joint.target_center_.shape == joint.target_scale_.shape == (3,)


def test_three_targets_seeded_noise_is_reproducible_and_per_column():
    X, Y = _targets(n=2000)
    a = HeavyTailedDPRidge(epsilon=1.0, random_state=3).fit(X, Y)
    b = HeavyTailedDPRidge(epsilon=1.0, random_state=3).fit(X, Y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    # Each column's model is close to the column's Ridge, at the fit's noise level.
    ref = Ridge().fit(X, Y)
    assert np.abs(a.coef_ - ref.coef_).max() < 0.1
    # rho / 3 per column: each column's gradient noise is sqrt(3) times that of
    # a single-target fit of the same budget (same clip and steps at this n).
    assert a.privacy_spent_.rho == pytest.approx(
        HeavyTailedDPRidge(epsilon=1.0, random_state=3)
        .fit(X, Y[:, 0])
        .privacy_spent_.rho
    )


def test_per_output_budget_composes_to_the_whole():
    budget = PrivacyBudget(1.0, 1e-5, 1000).for_algorithm("gdp")
    assert budget.per_output("gdp", 4).rho == budget.rho / 4
    assert budget.per_output("gdp", 1) is budget
    pure = PrivacyBudget(1.0, 0.0, 1000).for_algorithm(None)
    each = pure.per_output(None, 4)
    assert 4 * each.epsilon <= 1.0 and each.epsilon == pytest.approx(0.25)
    approx = PrivacyBudget(1.0, 1e-5, 1000).for_algorithm(None)
    each = approx.per_output(None, 4)
    assert 4 * each.delta <= 1e-5 and each.delta == pytest.approx(2.5e-6)
    # gdp-epsilon: four Gaussians calibrated at the share compose to at most mu.
    whole = PrivacyBudget(1.0, 1e-5, 1000).for_algorithm("gdp-epsilon")
    each = whole.per_output("gdp-epsilon", 4)
    mu_each = approx_dp_to_gdp(each.epsilon, each.delta)
    assert math.sqrt(4) * mu_each <= approx_dp_to_gdp(1.0, 1e-5)
    assert gdp_to_approx_dp(2 * mu_each, 1e-5) == pytest.approx(1.0, rel=1e-6)
    testing = PrivacyBudget(math.inf, 1e-5, 1000).for_algorithm("gdp")
    assert testing.per_output("gdp", 3) is testing


def test_classifiers_still_refuse_a_two_column_target():
    X, Y = _targets(k=2)
    with pytest.raises(ValueError):
        HeavyTailedDPLogistic(random_state=0).fit(X, (Y > 0).astype(int))
