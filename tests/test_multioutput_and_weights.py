"""Multi-output targets for the regressors and ``sample_weight`` (issue 18, item 5).

Several target columns: one run per column, composed (``DPLinearModel._run``,
:meth:`AlgorithmBudget.per_output`). Sample weights in ``[0, 1]``: each record's
clipped contribution times its weight, sensitivity unchanged (doc/proofs.rst,
"Several targets" and "Sample weights").
"""

import inspect
import math

import numpy as np
import pytest
from _helpers import noiseless_fit, public_estimators
from sklearn.base import is_regressor
from sklearn.datasets import make_classification, make_regression
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.preprocessing import StandardScaler

from skdpsco import (
    GaussianWidthDPRegressor,
    HeavyTailedDPLogistic,
    HeavyTailedDPRidge,
    SparseGradientDPRegressor,
)
from skdpsco._design import LinearDesign
from skdpsco._mean_estimation import ClippedMeanOracle, PerExampleClipBatchOracle
from skdpsco.privacy import approx_dp_to_gdp, gdp_to_approx_dp
from skdpsco.privacy._budget import PrivacyBudget
from skdpsco.privacy._params import _non_private_testing_mode

REGRESSORS = [E for E in public_estimators() if is_regressor(E())]
#: The heavy-tailed algorithms whose registry entries support sample_weight.
WEIGHTED = ["aclipped_sgd", "catoni_gd", "clipped_gd", "dp_sgd", "r_aclipped_sgd"]
UNWEIGHTED = [
    "axis_truncated_mean_gd",
    "sample_aggregate",
    "smooth_sensitivity_gd",
    "truncated_mean_gd",
]


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


# ---------------------------------------------------------------- sample weights


def _weights(n, seed=0):
    w = np.random.default_rng(seed).uniform(size=n)
    w[::5] = 0.0
    w[1::7] = 1.0
    return w


@pytest.mark.parametrize("algorithm", WEIGHTED)
@pytest.mark.parametrize("Est", [HeavyTailedDPRidge, HeavyTailedDPLogistic])
def test_unit_weights_are_no_weights_bit_for_bit(Est, algorithm):
    X, Y = _targets(n=2000, k=1)
    y = Y[:, 0] if Est is HeavyTailedDPRidge else (Y[:, 0] > 0.3).astype(int)
    params = dict(algorithm=algorithm, max_iter=3, random_state=0)
    plain = Est(**params).fit(X, y)
    ones = Est(**params).fit(X, y, sample_weight=np.ones(2000))
    assert np.any(plain.coef_ != 0)
    np.testing.assert_array_equal(ones.coef_, plain.coef_)
    np.testing.assert_array_equal(ones.intercept_, plain.intercept_)
    assert ones.privacy_spent_ == plain.privacy_spent_


@pytest.mark.parametrize("algorithm", WEIGHTED)
def test_privacy_spent_does_not_depend_on_the_weights(algorithm):
    X, Y = _targets(n=2000, k=1)
    params = dict(algorithm=algorithm, max_iter=3, random_state=0)
    plain = HeavyTailedDPRidge(**params).fit(X, Y[:, 0])
    weighted = HeavyTailedDPRidge(**params).fit(
        X, Y[:, 0], sample_weight=_weights(2000)
    )
    assert weighted.privacy_spent_ == plain.privacy_spent_
    assert not np.array_equal(weighted.coef_, plain.coef_)


def _noiseless(Est, X, y, sample_weight, **params):
    with _non_private_testing_mode():
        est = Est(scaling="none", epsilon=np.inf, random_state=0, **params)
        return est.fit(X, y, sample_weight=sample_weight)


@pytest.mark.parametrize("algorithm", ["catoni_gd", "clipped_gd"])
def test_ridge_weights_non_private_limit_matches_sklearn(algorithm):
    X, Y = _targets(n=300, k=1)
    y = Y[:, 0]
    w = _weights(300)
    est = _noiseless(
        HeavyTailedDPRidge,
        X,
        y,
        w,
        algorithm=algorithm,
        alpha=2.0,
        clip_norm=1e6,
        catoni_scale=1e6,
        gradient_scale=1e6,
        max_iter=1000,
    )
    ref = Ridge(alpha=2.0).fit(X, y, sample_weight=w)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-6)
    assert est.intercept_ == pytest.approx(ref.intercept_, abs=1e-6)
    # Weight 0 drops a record from the gradient sums: sklearn on the kept rows.
    kept = w > 0
    dropped = Ridge(alpha=2.0).fit(X[kept], y[kept], sample_weight=w[kept])
    np.testing.assert_allclose(est.coef_, dropped.coef_, atol=1e-6)


def test_ridge_weights_multi_output_non_private_limit_matches_sklearn():
    X, Y = _targets(n=300)
    w = _weights(300, seed=1)
    est = _noiseless(
        HeavyTailedDPRidge, X, Y, w, alpha=2.0, clip_norm=1e6, max_iter=1000
    )
    ref = Ridge(alpha=2.0).fit(X, Y, sample_weight=w)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-6)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, atol=1e-6)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_logistic_weights_non_private_limit_matches_sklearn(n_classes):
    X, y = make_classification(
        300, 3, n_informative=3, n_redundant=0, n_classes=n_classes, random_state=1
    )
    X = StandardScaler().fit_transform(X)
    w = _weights(300)
    est = _noiseless(
        HeavyTailedDPLogistic,
        X,
        y,
        w,
        C=0.5,
        clip_norm=1e6,
        max_iter=3000,
        learning_rate=0.5,
    )
    ref = LogisticRegression(C=0.5, tol=1e-12, max_iter=10_000)
    ref.fit(X, y, sample_weight=w)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-4)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, atol=1e-4)


def test_sample_weight_and_class_weight_multiply_as_in_sklearn():
    X, y = make_classification(200, 3, n_informative=2, n_redundant=0, random_state=1)
    X = StandardScaler().fit_transform(X)
    w, class_weight = _weights(200), {0: 3.0, 1: 0.5}
    est = _noiseless(
        HeavyTailedDPLogistic,
        X,
        y,
        w,
        class_weight=class_weight,
        clip_norm=1e6,
        max_iter=8000,
        learning_rate=0.5,
    )
    ref = LogisticRegression(class_weight=class_weight, tol=1e-12, max_iter=10_000)
    ref.fit(X, y, sample_weight=w)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-4)


def test_weighted_clipped_mean_sensitivity_under_adversarial_neighbours():
    # Replace-one of a whole record (x, u, w): || mean(D) - mean(D') || <= 2C/n
    # for weights in [0, 1], through both the fused path of the solver and the
    # plain one; attained by a weight-1 canary at the clip against a weight-1
    # record at the clip in the opposite direction.
    rng = np.random.default_rng(0)
    n, d, C = 50, 4, 1.5
    X = rng.normal(size=(n, d))
    U = rng.normal(size=n) * 3
    w = _weights(n)
    w[0] = 1.0
    oracle = ClippedMeanOracle(C).calibrate(n, rho=np.inf)
    W = np.zeros(d + 1)

    def mean(X, U, w, fused):
        design = LinearDesign(X, True)
        if fused:
            return oracle.estimate_at(design, W, lambda Z, rows: U[rows], rng, w)
        return oracle.estimate(design, U, rng, sample_weight=w)

    for fused in (False, True):
        with _non_private_testing_mode():
            base = mean(X, U, w, fused)
        worst = 0.0
        for canary_x, canary_u, canary_w in [
            (np.full(d, 1e8), -1e12, 1.0),
            (-X[0] * 1e6, 1e300 * np.sign(U[0]), 1.0),
            (np.zeros(d), 1e9, 0.0),
            (rng.normal(size=d), -U[0], 0.5),
        ]:
            X2, U2, w2 = X.copy(), U.copy(), w.copy()
            X2[0], U2[0], w2[0] = canary_x, canary_u, canary_w
            with _non_private_testing_mode():
                other = mean(X2, U2, w2, fused)
            worst = max(worst, np.linalg.norm(base - other))
        assert worst <= 2 * C / n * (1 + 1e-12)
        assert worst > 1.5 * C / n
    # Negative control: a weight above the cap moves the mean past the bound.
    X2, U2, w2 = X.copy(), U.copy(), w.copy()
    X2[0], U2[0], w2[0] = -X[0] * 1e6, 1e300 * np.sign(U[0]), 3.0
    with _non_private_testing_mode():
        other = mean(X2, U2, w2, True)
    assert np.linalg.norm(base - other) > 3 * C / n


def test_weighted_dp_sgd_batch_sum_moves_at_most_the_clip():
    # Add/remove of one record of weight <= 1 moves DP-SGD's clipped batch sum
    # by at most C (the noise is calibrated to it, Abadi et al. 2016).
    rng = np.random.default_rng(1)
    n, d, C = 40, 3, 2.0
    X = rng.normal(size=(n, d))
    U = rng.normal(size=n) * 5
    w = _weights(n)
    oracle = PerExampleClipBatchOracle(C)
    oracle.calibrate(n, sampling_rate=1.0, noise_multiplier=0.0)
    with _non_private_testing_mode():
        full = oracle.estimate(LinearDesign(X, True), U, rng, sample_weight=w) * n
        worst = 0.0
        for i in range(n):
            keep = np.arange(n) != i
            part = oracle.estimate(LinearDesign(X[keep], True), U[keep], rng, w[keep])
            worst = max(worst, np.linalg.norm(full - part * n))
    assert worst <= C * (1 + 1e-12)
    assert worst > 0.5 * C


def test_sample_weight_refusals():
    X, Y = _targets(n=100, k=1)
    y = Y[:, 0]
    est = HeavyTailedDPRidge(random_state=0)
    with pytest.raises(ValueError, match=r"\[0, 1\].*divide the weights"):
        est.fit(X, y, sample_weight=np.full(100, 3.0))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        est.fit(X, y, sample_weight=-np.ones(100))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        est.fit(X, y, sample_weight=np.full(100, np.nan))
    with pytest.raises(ValueError, match=r"shape \(100,\)"):
        est.fit(X, y, sample_weight=np.ones(50))
    with pytest.raises(ValueError, match=r"shape \(100,\)"):
        est.fit(X, y, sample_weight=np.ones((100, 2)))
    assert not hasattr(est, "coef_")
    # A scalar weight in [0, 1] applies to every record, as in scikit-learn.
    half = HeavyTailedDPRidge(random_state=0).fit(X, y, sample_weight=0.5)
    halves = HeavyTailedDPRidge(random_state=0).fit(
        X, y, sample_weight=np.full(100, 0.5)
    )
    np.testing.assert_array_equal(half.coef_, halves.coef_)


@pytest.mark.parametrize("algorithm", UNWEIGHTED)
def test_algorithms_without_a_weighted_analysis_refuse_and_name_those_with(algorithm):
    X, Y = _targets(n=100, k=1)
    est = HeavyTailedDPRidge(algorithm=algorithm, random_state=0)
    with pytest.raises(ValueError, match="sample_weight is not supported") as info:
        est.fit(X, Y[:, 0], sample_weight=np.ones(100))
    named = str(info.value).split("use one of ")[1]
    assert sorted(eval(named.rstrip("."))) == WEIGHTED
    assert not hasattr(est, "coef_")


@pytest.mark.parametrize(
    "Est", [E for E in public_estimators() if "HeavyTailed" not in E.__name__]
)
def test_families_without_weighted_algorithms_keep_refusing_sample_weight(Est):
    assert "sample_weight" not in inspect.signature(Est.fit).parameters
    assert "sample_weight" in inspect.signature(HeavyTailedDPRidge.fit).parameters
    X, Y = _targets(n=100, k=1)
    y = Y[:, 0] if is_regressor(Est()) else (Y[:, 0] > 0.3).astype(int)
    with pytest.raises(TypeError, match=f"{Est.__name__}.*sample_weight"):
        Est(random_state=0).fit(X, y, sample_weight=np.ones(100))


def test_multioutput_n_iter_has_one_count_per_target():
    # Ridge's iterative solvers report n_iter_ of shape (n_targets,).
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 3))
    Y = X @ rng.normal(size=(3, 2))
    est = HeavyTailedDPRidge(epsilon=2.0, max_iter=7, random_state=0).fit(X, Y)
    assert est.n_iter_.shape == (2,)
    assert est.n_iter_.dtype == np.int32
    assert est.n_iter_.tolist() == [7, 7]
    single = HeavyTailedDPRidge(epsilon=2.0, max_iter=7, random_state=0).fit(X, Y[:, 0])
    assert single.n_iter_.tolist() == [7]
