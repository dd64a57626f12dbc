"""DPRobustScaler and the private column quantiles: scikit-learn checks, accuracy in
natural units, the non-private limit, sensitivity, degenerate columns, bad input."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import RobustScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import skdpsco._column_scaling as scaling_module
from skdpsco import HeavyTailedDPLogistic
from skdpsco._column_scaling import linear_histogram, private_column_quantiles
from skdpsco.preprocessing import DPRobustScaler, DPStandardScaler
from skdpsco.privacy import gaussian_rho_budget, total_privacy_spent
from skdpsco.privacy._params import _non_private_testing_mode
from skdpsco.utils._compat import InvalidParameterError

pytestmark = pytest.mark.filterwarnings(
    "ignore:DPRobustScaler.*could not be located:UserWarning"
)


def _natural_units(n=20_000, seed=0):
    rng = np.random.default_rng(seed)
    return np.column_stack(
        [
            rng.normal(2005.0, 10.0, n),  # a year
            rng.lognormal(10.0, 1.0, n),  # an income
            rng.standard_cauchy(n) * 1e-3 + 7.0,  # heavy tails at an offset
            1e6 - rng.exponential(2.0, n),  # one-signed, far from 0
        ]
    )


@parametrize_with_checks(
    [
        DPRobustScaler(random_state=0),
        DPRobustScaler(with_centering=False, random_state=0),
        DPRobustScaler(unit_variance=True, quantile_range=(10.0, 90.0), random_state=0),
    ]
)
def test_sklearn_common_checks(estimator, check):
    with np.errstate(divide="raise", over="raise", invalid="raise", under="ignore"):
        check(estimator)


def test_median_and_iqr_in_natural_units_at_epsilon_one():
    X = _natural_units()
    model = DPRobustScaler(epsilon=1.0, random_state=0).fit(X)
    q25, q50, q75 = np.percentile(X, [25, 50, 75], axis=0)
    iqr = q75 - q25
    # Within a tenth of an interquartile range, scale within 15%.
    np.testing.assert_array_less(np.abs(model.center_ - q50), 0.1 * iqr)
    np.testing.assert_allclose(model.scale_, iqr, rtol=0.15)
    assert model.privacy_spent_.epsilon <= 1.0 + 1e-9
    names = [r.name for r in model.privacy_spent_.mechanisms]
    assert names[-1] == "feature quantile histogram"


@pytest.mark.usefixtures("non_private_mode")
def test_non_private_limit_is_scikit_learns_robust_scaler_to_the_resolution():
    X = _natural_units(n=5000, seed=1)
    with _non_private_testing_mode():
        model = DPRobustScaler(epsilon=np.inf, random_state=0).fit(X)
    ref = RobustScaler().fit(X)
    res = model.resolution_
    np.testing.assert_array_less(np.abs(model.center_ - ref.center_), 2 * res)
    # The quartiles themselves to one bin; the range where it spans two bins or
    # more (else scale 1: scikit-learn's rule for a zero range).
    q = private_column_quantiles(X, np.random.default_rng(0), [0.25, 0.75], rho=np.inf)
    ref_q = np.percentile(X, [25, 75], axis=0)
    assert np.all(np.abs(q.values - ref_q) <= q.resolution), (q.values, ref_q)
    wide = ref.scale_ >= 4 * res
    assert wide.sum() >= 3
    np.testing.assert_array_less(
        np.abs(model.scale_ - ref.scale_)[wide], 2 * res[wide] + 1e-12
    )
    np.testing.assert_array_equal(model.scale_[ref.scale_ < res], 1.0)
    np.testing.assert_allclose(
        model.inverse_transform(model.transform(X)), X, rtol=1e-9
    )


def test_unit_variance_gives_about_the_standard_deviation_of_normal_data():
    X = np.random.default_rng(2).normal(-40.0, 3.0, size=(20_000, 2))
    model = DPRobustScaler(unit_variance=True, random_state=0).fit(X)
    np.testing.assert_allclose(model.scale_, 3.0, rtol=0.15)


def test_same_seed_same_release():
    X = _natural_units(n=3000)
    a = DPRobustScaler(random_state=5).fit(X)
    b = DPRobustScaler(random_state=5).fit(X)
    np.testing.assert_array_equal(a.center_, b.center_)
    np.testing.assert_array_equal(a.scale_, b.scale_)


def test_degenerate_columns_get_scale_one_and_finite_output():
    rng = np.random.default_rng(3)
    n = 20_000
    X = np.column_stack(
        [
            np.full(n, 3.0),  # constant
            (rng.random(n) < 0.1).astype(float),  # rare indicator: IQR 0
            np.zeros(n),  # all zero
            np.full(n, 1e300),  # huge constant
        ]
    )
    model = DPRobustScaler(random_state=0).fit(X)
    np.testing.assert_array_equal(model.scale_, 1.0)
    assert abs(model.center_[0] - 3.0) < 0.05 and abs(model.center_[1]) < 0.05
    assert np.all(np.isfinite(model.transform(X)))


def test_small_n_warns_and_leaves_features_unscaled():
    X = _natural_units(n=40)
    with pytest.warns(UserWarning, match="could not be located"):
        model = DPRobustScaler(epsilon=0.5, random_state=0).fit(X)
    assert np.all(np.isfinite(model.center_)) and np.all(model.scale_ > 0)
    assert np.all(np.isfinite(model.transform(X)))


def test_quantile_histogram_moves_one_count_per_column_under_replace_one():
    # l2-sensitivity sqrt(2) per column: a 1e300 canary, a canary on a bin edge.
    rng = np.random.default_rng(4)
    X = rng.normal(10.0, 2.0, size=(500, 3))
    low, high = np.array([0.0, 5.0, -10.0]), np.array([20.0, 15.0, 30.0])
    width = (high - low) / 256
    base = linear_histogram(X, low, high, 256)
    for canary in (np.full(3, 1e300), low + 17 * width, np.full(3, -1e300)):
        Y = X.copy()
        Y[7] = canary
        diff = linear_histogram(Y, low, high, 256) - base
        assert np.abs(diff).sum(axis=1).max() <= 2
        assert np.linalg.norm(diff) <= math.sqrt(2 * 3) + 1e-12
        assert base.sum() == linear_histogram(Y, low, high, 256).sum()


@pytest.mark.usefixtures("non_private_mode")
def test_an_outlier_moves_the_release_by_at_most_its_own_count():
    # Noise-free release: one record at 1e300 moves the median by at most one
    # record's share of a bin (linear interpolation), never to the outlier.
    X = np.random.default_rng(5).normal(100.0, 5.0, size=(4000, 1))
    Y = X.copy()
    Y[0] = 1e300
    a = private_column_quantiles(X, np.random.default_rng(0), [0.5], rho=math.inf)
    b = private_column_quantiles(Y, np.random.default_rng(0), [0.5], rho=math.inf)
    assert a.located.all() and b.located.all()
    assert abs(a.values[0, 0] - b.values[0, 0]) <= 2 * a.resolution[0]


def test_quantiles_are_non_decreasing_under_heavy_noise():
    X = _natural_units(n=2000)
    rho = gaussian_rho_budget(0.1, 1e-5)
    for seed in range(5):
        r = private_column_quantiles(
            X, np.random.default_rng(seed), [0.1, 0.25, 0.5, 0.75, 0.9], rho=rho
        )
        assert np.all(np.diff(r.values, axis=0) >= 0)


def test_budget_shares_are_public_and_compose_to_the_claim():
    X = _natural_units(n=3000)
    rho = gaussian_rho_budget(1.0, 1e-5)
    r = private_column_quantiles(X, np.random.default_rng(0), [0.5], rho=rho)
    spent = sum(rec.sensitivity**2 / (2 * rec.scale**2) for rec in r.records)
    assert spent == pytest.approx(rho, rel=1e-9)
    # The same records (names, sensitivities, scales) whatever the data.
    other = private_column_quantiles(
        X * 1e-5 + 3, np.random.default_rng(1), [0.5], rho=rho
    )
    assert [(x.name, x.sensitivity, x.scale) for x in r.records] == [
        (x.name, x.sensitivity, x.scale) for x in other.records
    ]


@pytest.mark.parametrize(
    "params",
    [
        {"quantile_range": (75.0, 25.0)},
        {"quantile_range": (-1.0, 50.0)},
        {"quantile_range": (25.0, 101.0)},
        {"quantile_range": (25.0, float("nan"))},
    ],
)
def test_invalid_quantile_range_is_refused(params):
    with pytest.raises(ValueError, match="quantile_range"):
        DPRobustScaler(**params).fit(_natural_units(n=100))


@pytest.mark.parametrize(
    "params", [{"epsilon": 0.0}, {"epsilon": True}, {"epsilon": float("nan")}]
)
def test_invalid_privacy_parameters_are_refused(params):
    with pytest.raises((InvalidParameterError, ValueError)):
        DPRobustScaler(**params).fit(_natural_units(n=100))


def test_zero_delta_bad_input_and_sparse_are_refused_and_nothing_changes():
    X = _natural_units(n=500)
    model = DPRobustScaler(random_state=0).fit(X)
    before = (model.center_.copy(), model.scale_.copy(), model.privacy_spent_)
    Y = X.copy()
    Y[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.fit(Y)
    with pytest.raises(ValueError, match="delta"):
        model.set_params(delta=0.0).fit(X)
    with pytest.raises(TypeError, match="[Ss]parse"):
        model.set_params(delta=1e-5).fit(sp.csr_matrix(X))
    np.testing.assert_array_equal(model.center_, before[0])
    np.testing.assert_array_equal(model.scale_, before[1])
    assert model.privacy_spent_ is before[2]


def test_in_a_pipeline_with_a_dp_model_the_total_spend_composes():
    X = _natural_units(n=4000)
    y = (X[:, 0] + 0.001 * X[:, 1] > 2030).astype(int)
    pipe = make_pipeline(
        DPRobustScaler(epsilon=0.5, random_state=0),
        HeavyTailedDPLogistic(epsilon=0.5, scaling="none", random_state=0),
    ).fit(X, y)
    spent = total_privacy_spent(pipe)
    assert 0.5 < spent.epsilon <= 1.0 + 1e-9
    ref = make_pipeline(RobustScaler(), LogisticRegression()).fit(X, y)
    assert pipe.score(X, y) > ref.score(X, y) - 0.1


def test_nothing_released_when_neither_centring_nor_scaling():
    model = DPRobustScaler(with_centering=False, with_scaling=False).fit(
        _natural_units(n=100)
    )
    assert model.center_ is None and model.scale_ is None
    assert model.privacy_spent_.epsilon == 0.0
    assert scaling_module  # the module under test


@pytest.mark.parametrize("range_", [(0.0, 75.0), (25.0, 100.0), (0, 100)])
def test_the_minimum_and_maximum_are_refused_with_the_reason(range_):
    with pytest.raises(ValueError, match="minimum or the maximum"):
        DPRobustScaler(quantile_range=range_).fit(_natural_units(n=100))


def test_more_features_than_the_per_feature_limit_are_refused_clearly():
    X = np.random.default_rng(0).normal(size=(3, scaling_module.MAX_PER_COLUMN + 1))
    with pytest.raises(ValueError, match="DPStandardScaler"):
        DPRobustScaler().fit(X)


@pytest.mark.parametrize("Scaler", [DPRobustScaler, DPStandardScaler])
def test_a_refused_refit_leaves_the_fitted_state_unchanged(Scaler):
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(_natural_units(n=500)[:, :2], columns=["a", "b"])
    model = Scaler(random_state=0).fit(X)
    before = dict(model.__dict__)
    with pytest.raises(ValueError, match="delta"):
        model.set_params(delta=0.0).fit(np.ones((300, 5)))
    model.set_params(delta=1e-5)
    assert model.n_features_in_ == 2
    assert list(model.feature_names_in_) == ["a", "b"]
    assert model.privacy_spent_ is before["privacy_spent_"]
    model.transform(X)


@pytest.mark.parametrize("Scaler", [DPRobustScaler, DPStandardScaler])
@pytest.mark.parametrize("state", ["raise", "warn"])
@pytest.mark.parametrize("extreme", [5e-324, 1e-310, 1.7e308])
def test_floating_point_events_never_differ_between_neighbours(Scaler, state, extreme):
    # Under any numpy error state, a subnormal or near-overflow record raises and
    # warns exactly as its neighbour does (here: neither does).
    import warnings

    X = np.random.default_rng(1).normal(50.0, 3.0, size=(2000, 2))
    Xp = X.copy()
    Xp[0, 0] = extreme
    for data in (X, Xp):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            with np.errstate(all=state):
                Scaler(random_state=0).fit(data)
