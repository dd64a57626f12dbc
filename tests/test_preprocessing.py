"""DPStandardScaler: scikit-learn checks, noise calibration, limits, sensitivity."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from skdpsco._column_scaling import window_moments
from skdpsco._dask_scaling import moment_grid, moment_sum_slack
from skdpsco.exceptions import PrivacyLeakWarning
from skdpsco.preprocessing import DPStandardScaler
from skdpsco.preprocessing._data import (
    MEAN_BUDGET_FRACTION,
    ROBUST_TRUNCATION,
    SCALE_FLOOR,
)
from skdpsco.privacy import PrivacySpent, gdp_to_approx_dp
from skdpsco.privacy._accounting import gaussian_rho_budget
from skdpsco.privacy._params import _non_private_testing_mode
from skdpsco.utils._compat import InvalidParameterError

#: Small test data put many variances below their noise level: expected here.
pytestmark = pytest.mark.filterwarnings(
    "ignore:DPStandardScaler.*noise level:UserWarning"
)

EPS, DELTA = 1.0, 1e-5


def _data(n=200, d=3, loc=3.0, seed=0, std=1.0):
    return np.random.default_rng(seed).normal(loc, std, size=(n, d))


def clipped_moments(X, lower, upper):
    """The clipped moments the "clipped" method releases (window_moments, in units of
    the half-width h), back in the data's units: mean and second moment of
    clip(x, lower, upper) - (lower + upper) / 2."""
    h = (upper - lower) / 2.0
    m, s = window_moments(X, (lower + upper) / 2.0, h)
    return m * h, s * h * h


def _chi2_in_band(residuals, sigma, level=1e-3):
    """Sum of squared standardised residuals within the two-sided chi-square band."""
    z = np.asarray(residuals).ravel() / sigma
    k = z.size
    lo, hi = stats.chi2.ppf([level / 2, 1 - level / 2], k)
    stat = float(z @ z)
    assert lo <= stat <= hi, (stat, lo, hi, k)
    return stat / k


# ----------------------------------------------------------- scikit-learn checks


@parametrize_with_checks(
    [
        DPStandardScaler(random_state=0),
        DPStandardScaler(method="robust", random_state=0),
        DPStandardScaler(with_mean=False, random_state=0),
    ]
)
def test_sklearn_common_checks(estimator, check):
    with np.errstate(divide="raise", over="raise", invalid="raise", under="ignore"):
        check(estimator)


def test_fitted_attributes_and_feature_names():
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(_data(), columns=["a", "b", "c"])
    scaler = DPStandardScaler(random_state=0).fit(X)
    assert scaler.n_features_in_ == 3 and scaler.n_samples_seen_ == 200
    assert scaler.feature_names_in_.tolist() == ["a", "b", "c"]
    assert scaler.get_feature_names_out().tolist() == ["a", "b", "c"]
    assert scaler.mean_.shape == scaler.var_.shape == scaler.scale_.shape == (3,)
    np.testing.assert_array_equal(scaler.scale_, np.sqrt(scaler.var_))
    assert isinstance(scaler.privacy_spent_, PrivacySpent)
    assert scaler.privacy_spent_.epsilon <= EPS * (1 + 1e-9)
    assert scaler.privacy_spent_.delta == DELTA
    Xt = scaler.transform(X)
    np.testing.assert_allclose(Xt, (X.to_numpy() - scaler.mean_) / scaler.scale_)
    Xt = pd.DataFrame(Xt, columns=X.columns)
    np.testing.assert_allclose(scaler.inverse_transform(Xt), X.to_numpy())


def test_same_seed_same_release_and_fresh_entropy_by_default():
    X = _data()
    a = DPStandardScaler(random_state=3).fit(X)
    b = DPStandardScaler(random_state=3).fit(X)
    np.testing.assert_array_equal(a.mean_, b.mean_)
    np.testing.assert_array_equal(a.scale_, b.scale_)
    c, d = DPStandardScaler().fit(X), DPStandardScaler().fit(X)
    assert not np.array_equal(c.mean_, d.mean_)


# ---------------------------------------------------------- noise calibration


def test_clipped_noise_std_matches_calibration():
    # Variance 25 and n = 2000: the noisy variance never reaches the floor or the
    # cap, so the second moment's noise can be read back from the release.
    n, d, runs = 2000, 3, 400
    X = _data(n, d, loc=0.0, std=5.0)
    lower, upper = -10.0, 10.0
    h = (upper - lower) / 2
    m, s = clipped_moments(X, np.full(d, lower), np.full(d, upper))
    rho = gaussian_rho_budget(EPS, DELTA, "gdp")
    # Independent formulas: sensitivities (2 + t) h sqrt(d) / n and (1 + t) h^2
    # sqrt(d) / n (t: the public floating-point summation slack, ~1e-9), each
    # query at half of rho; sigma = Delta / sqrt(2 rho_query).
    t = moment_sum_slack(moment_grid(n))
    assert 0 < t < 1e-8
    sigma_mean = ((2 + t) * h * math.sqrt(d) / n) / math.sqrt(
        2 * rho * MEAN_BUDGET_FRACTION
    )
    sigma_second = ((1 + t) * h * h * math.sqrt(d) / n) / math.sqrt(
        2 * rho * (1 - MEAN_BUDGET_FRACTION)
    )
    r_mean, r_second = [], []
    for seed in range(runs):
        sc = DPStandardScaler(bounds=(lower, upper), random_state=seed).fit(X)
        m_noisy = sc.mean_  # box centre 0, no clipping of the release at these sizes
        r_mean.append(m_noisy - m)
        # var_ = s_noisy - m_noisy^2 (no floor / cap reached): recover s_noisy.
        r_second.append(sc.var_ + m_noisy**2 - s)
    mech_mean, mech_second = sc.privacy_spent_.mechanisms
    assert h * mech_mean.scale == pytest.approx(sigma_mean, rel=1e-12)
    assert h * h * mech_second.scale == pytest.approx(sigma_second, rel=1e-12)
    # Released in units of the half-width h: sensitivities (2 + t) sqrt(d) / n and
    # (1 + t) sqrt(d) / n.
    assert mech_mean.sensitivity == pytest.approx((2 + t) * math.sqrt(d) / n)
    assert mech_second.sensitivity == pytest.approx((1 + t) * math.sqrt(d) / n)
    ratio_mean = _chi2_in_band(r_mean, sigma_mean)
    ratio_second = _chi2_in_band(r_second, sigma_second)
    assert 0.85 < ratio_mean < 1.15 and 0.85 < ratio_second < 1.15
    # The two Gaussian mechanisms compose (GDP) to exactly the asked epsilon.
    mu = math.sqrt(2 * rho)
    assert sc.privacy_spent_.epsilon == pytest.approx(gdp_to_approx_dp(mu, DELTA))
    assert sc.privacy_spent_.epsilon <= EPS


def test_with_std_false_puts_the_whole_budget_on_the_mean():
    n, d = 200, 3
    X = _data(n, d)
    sc = DPStandardScaler(with_std=False, bounds=(-10, 10), random_state=0).fit(X)
    (rec,) = sc.privacy_spent_.mechanisms
    rho = gaussian_rho_budget(EPS, DELTA, "gdp")
    # Default box [-10, 10]: released in units of h = 10, sensitivity 2 sqrt(d) / n.
    assert 10 * rec.scale == pytest.approx((20 * math.sqrt(d) / n) / math.sqrt(2 * rho))
    assert sc.var_ is None and sc.scale_ is None
    np.testing.assert_allclose(sc.transform(X), X - sc.mean_)
    none = DPStandardScaler(with_mean=False, with_std=False).fit(X)
    assert none.privacy_spent_.epsilon == 0 and none.privacy_spent_.mechanisms == ()
    np.testing.assert_array_equal(none.transform(X), X)


def test_robust_noise_std_matches_calibration():
    # Data N(3, 1): every record lies within 60 of any centre the histograms can
    # pick, so the noiseless truncated mean is the plain mean whatever the centre,
    # and mean_ - mean(X) is the Gaussian noise of the mean stage alone.
    n, d, runs = 400, 2, 300
    X = _data(n, d)
    rho = gaussian_rho_budget(EPS, DELTA, "gdp")
    # Kamath et al. truncated mean, sample_split="budget": the scaler's mean query
    # gets rho/2, split again evenly between histograms and mean: rho/4.
    sens = 8 * ROBUST_TRUNCATION * math.sqrt(d) * 1.0 / (3 * n)
    sigma = sens / math.sqrt(2 * rho / 4)
    residuals = [
        DPStandardScaler(method="robust", random_state=seed).fit(X).mean_
        - X.mean(axis=0)
        for seed in range(runs)
    ]
    ratio = _chi2_in_band(residuals, sigma)
    assert 0.85 < ratio < 1.15
    sc = DPStandardScaler(method="robust", random_state=0).fit(X)
    mean_records = [r for r in sc.privacy_spent_.mechanisms if "mean" in r.name]
    assert mean_records[0].scale == pytest.approx(sigma, rel=1e-9)
    assert len(sc.privacy_spent_.mechanisms) == 4  # (histograms, mean) x 2 queries
    assert sc.privacy_spent_.epsilon <= EPS * (1 + 1e-9)


# ------------------------------------------------------------ epsilon -> inf


def test_infinite_epsilon_equals_standard_scaler_inside_the_box():
    X = _data()
    ref = StandardScaler().fit(X)
    with _non_private_testing_mode():
        for method in ("clipped", "robust"):
            sc = DPStandardScaler(epsilon=np.inf, method=method, random_state=0).fit(X)
            np.testing.assert_allclose(sc.mean_, ref.mean_, rtol=1e-12)
            np.testing.assert_allclose(sc.var_, ref.var_, rtol=1e-10)
            np.testing.assert_allclose(sc.transform(X), ref.transform(X), atol=1e-10)
            assert math.isinf(sc.privacy_spent_.epsilon)


def test_infinite_epsilon_equals_the_clipped_and_truncated_statistics():
    X = _data()
    X[7] = [1e6, -1e6, 50.0]  # an outlier, outside the box and the truncation
    with _non_private_testing_mode():
        clipped = DPStandardScaler(epsilon=np.inf, bounds=(-10, 10)).fit(X)
        robust = DPStandardScaler(epsilon=np.inf, method="robust").fit(X)
    Xc = np.clip(X, -10, 10)
    np.testing.assert_allclose(clipped.mean_, Xc.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(clipped.var_, Xc.var(axis=0), rtol=1e-10)
    # Robust: the histograms put the centre of every feature in the bucket
    # [0, 20) (midpoint 10) and the ball |x - 10| <= 60 drops exactly the outlier
    # row's entries beyond it; 199 >= 3n/4 kept, so the truncated mean is the mean
    # of the kept entries, and likewise for the squared deviations.
    for j in range(3):
        keep = np.abs(X[:, j] - 10.0) <= ROBUST_TRUNCATION
        assert keep.sum() == (199 if j < 2 else 200)
        assert robust.mean_[j] == pytest.approx(X[keep, j].mean(), rel=1e-12)
        dev = (X[:, j] - robust.mean_[j]) ** 2
        kept_dev = dev[np.abs(dev - 10.0) <= ROBUST_TRUNCATION]
        assert robust.var_[j] == pytest.approx(kept_dev.mean(), rel=1e-10)
    # Feature 2: the entry 50 is kept by the mean (|50 - 10| <= 60) but its squared
    # deviation (~2200) is dropped by the second stage (checked in the loop).
    assert robust.mean_[2] == pytest.approx(X[:, 2].mean(), rel=1e-12)
    assert (50.0 - robust.mean_[2]) ** 2 > 10.0 + ROBUST_TRUNCATION


# -------------------------------------------------------------- sensitivity


def test_clipped_moments_sensitivity_under_adversarial_neighbour():
    n, d = 50, 3
    lower, upper = np.array([-1.0, 0.0, -5.0]), np.array([1.0, 2.0, 5.0])
    h = (upper - lower) / 2
    X = _data(n, d, loc=0.0)
    X[0] = lower - 1e300  # at the bottom corner of the box after clipping
    X_prime = X.copy()
    X_prime[0] = 1e300  # replaced by a canary far beyond the top corner
    m, s = clipped_moments(X, lower, upper)
    mp, sp_ = clipped_moments(X_prime, lower, upper)
    # Mean: the full 2 h_j / n in every coordinate (tight).
    np.testing.assert_allclose(np.abs(mp - m), 2 * h / n, rtol=1e-12)
    sc = DPStandardScaler(bounds=(lower, upper), random_state=0).fit(
        np.clip(X, -1e10, 1e10)
    )
    mean_rec, second_rec = sc.privacy_spent_.mechanisms
    # The mechanisms release m / h and s / h^2 (units of each half-width); the
    # recorded sensitivity is the tight move plus the tiny summation slack.
    move = np.linalg.norm((mp - m) / h)
    assert move <= mean_rec.sensitivity <= move * (1 + 1e-8)
    # Second moment: corner to corner leaves z^2 = h^2 unchanged; the centre to a
    # corner is the worst case, h_j^2 / n per coordinate.
    X_centre = X.copy()
    X_centre[0] = (lower + upper) / 2
    _, s_centre = clipped_moments(X_centre, lower, upper)
    np.testing.assert_allclose(np.abs(sp_ - s_centre), h**2 / n, rtol=1e-12)
    assert np.linalg.norm((sp_ - s_centre) / h**2) <= second_rec.sensitivity * (
        1 + 1e-12
    )
    # Random adversarial pairs never exceed the recorded sensitivities.
    rng = np.random.default_rng(1)
    for _ in range(200):
        i = rng.integers(n)
        Y = X.copy()
        Y[i] = rng.standard_cauchy(d) * 10.0 ** rng.integers(0, 300)
        a, b = clipped_moments(Y, lower, upper)
        assert np.linalg.norm((a - m) / h) <= mean_rec.sensitivity * (1 + 1e-12)
        assert np.linalg.norm((b - s) / h**2) <= second_rec.sensitivity * (1 + 1e-12)


def test_robust_sensitivity_under_adversarial_neighbour():
    # Noiseless (epsilon = inf) robust mean on neighbours whose centre is the same
    # (bucket midpoint 10): a kept record at the bottom of the ball replaced by one
    # at the top moves a feature by 2 * 60 / n <= 8 * 60 / (3 n) (the bound the
    # noise is calibrated to); a canary of norm 1e300 is dropped.
    n, d = 100, 2
    X = _data(n, d)
    X[0] = 10.0 - ROBUST_TRUNCATION
    for canary in (np.full(d, 10.0 + ROBUST_TRUNCATION), np.full(d, 1e300)):
        X_prime = X.copy()
        X_prime[0] = canary
        with _non_private_testing_mode():
            a = DPStandardScaler(epsilon=np.inf, method="robust").fit(X)
            b = DPStandardScaler(epsilon=np.inf, method="robust").fit(X_prime)
        bound = 8 * ROBUST_TRUNCATION * math.sqrt(d) / (3 * n)
        assert np.linalg.norm(b.mean_ - a.mean_) <= bound
    # The top-of-ball canary realises 2 tau / n per coordinate.
    X_prime = X.copy()
    X_prime[0] = 10.0 + ROBUST_TRUNCATION
    with _non_private_testing_mode():
        b = DPStandardScaler(epsilon=np.inf, method="robust").fit(X_prime)
    np.testing.assert_allclose(b.mean_ - a.mean_, 2 * ROBUST_TRUNCATION / n, rtol=1e-9)


# ------------------------------------------------------------ scale floor


def test_scale_is_strictly_positive_and_finite_under_heavy_noise():
    X = _data(n=20, d=4)
    for method in ("clipped", "robust"):
        for seed in range(50):
            sc = DPStandardScaler(epsilon=0.01, method=method, random_state=seed)
            sc.fit(X)
            h = 10.0 if method == "clipped" else 1.0
            assert np.all(sc.scale_ >= SCALE_FLOOR * h * (1 - 1e-12))
            assert np.all(np.isfinite(sc.scale_)) and np.all(np.isfinite(sc.mean_))
            assert np.all(np.isfinite(sc.transform(X)))
            if method == "clipped":
                assert np.all(sc.scale_ <= h) and np.all(np.abs(sc.mean_) <= h)


# -------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "params",
    [
        {"epsilon": 0.0},
        {"epsilon": -1.0},
        {"epsilon": np.inf},
        {"epsilon": np.nan},
        {"epsilon": True},
        {"epsilon": "1"},
        {"delta": 1.0},
        {"delta": -1e-6},
        {"delta": np.nan},
        {"method": "median"},
        {"scale": 0.0},
        {"scale": np.inf},
        {"with_mean": "yes"},
    ],
)
def test_invalid_parameters_are_rejected(params):
    X = _data()
    with pytest.raises(InvalidParameterError):
        DPStandardScaler(**params).fit(X)


@pytest.mark.parametrize(
    "bounds, match",
    [
        ((1.0, -1.0), "lower < upper"),
        ((0.0, np.inf), "finite"),
        ((np.nan, 1.0), "finite"),
        (([0.0, 0.0], [1.0, 1.0]), "shape"),
        ((0.0, 1.0, 2.0), "pair"),
    ],
)
def test_invalid_bounds_are_rejected(bounds, match):
    with pytest.raises(ValueError, match=match):
        DPStandardScaler(bounds=bounds).fit(_data())


def test_zero_delta_is_refused_and_large_delta_warns():
    with pytest.raises(ValueError, match="delta"):
        DPStandardScaler(delta=0.0).fit(_data())
    with pytest.warns(PrivacyLeakWarning):
        DPStandardScaler(delta=0.1).fit(_data(n=20))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input_is_refused_and_nothing_changes(bad):
    X = _data()
    sc = DPStandardScaler(random_state=0).fit(X)
    before = (sc.mean_.copy(), sc.scale_.copy(), sc.privacy_spent_)
    Y = X.copy()
    Y[3, 1] = bad
    with pytest.raises(ValueError, match="NaN|infinity"):
        sc.fit(Y)
    np.testing.assert_array_equal(sc.mean_, before[0])
    np.testing.assert_array_equal(sc.scale_, before[1])
    assert sc.privacy_spent_ is before[2]
    with pytest.raises(ValueError, match="NaN|infinity"):
        sc.transform(Y)
    fresh = DPStandardScaler()
    with pytest.raises(ValueError):
        fresh.fit(Y)
    assert not hasattr(fresh, "mean_") and not hasattr(fresh, "privacy_spent_")


def test_sparse_input_is_refused_clearly():
    X = sp.csr_matrix(_data())
    with pytest.raises(TypeError, match="[Ss]parse"):
        DPStandardScaler().fit(X)
    sc = DPStandardScaler(random_state=0).fit(_data())
    with pytest.raises(TypeError, match="[Ss]parse"):
        sc.transform(X)


def test_wrong_number_of_features_in_transform():
    sc = DPStandardScaler(random_state=0).fit(_data(d=3))
    with pytest.raises(ValueError, match="features"):
        sc.transform(_data(d=2))


def test_clipped_release_is_equivariant_to_the_units_of_one_feature():
    # Noise relative to each feature's own box: measuring feature 1 in units a
    # thousand times smaller (data and public bounds x 1000) scales its released
    # mean and scale by 1000 and leaves the other features' releases unchanged
    # (same seed), so one wide box cannot drown a narrow feature.
    n, d = 500, 3
    X = _data(n, d, loc=0.0, std=0.5)
    lower, upper = np.full(d, -2.0), np.full(d, 2.0)
    a = DPStandardScaler(bounds=(lower, upper), random_state=3).fit(X)
    X2, lower2, upper2 = X.copy(), lower.copy(), upper.copy()
    X2[:, 1] *= 1000.0
    lower2[1] *= 1000.0
    upper2[1] *= 1000.0
    b = DPStandardScaler(bounds=(lower2, upper2), random_state=3).fit(X2)
    np.testing.assert_allclose(b.mean_[[0, 2]], a.mean_[[0, 2]], rtol=1e-12)
    np.testing.assert_allclose(b.scale_[[0, 2]], a.scale_[[0, 2]], rtol=1e-12)
    np.testing.assert_allclose(b.mean_[1], 1000.0 * a.mean_[1], rtol=1e-9)
    np.testing.assert_allclose(b.scale_[1], 1000.0 * a.scale_[1], rtol=1e-9)
    assert b.privacy_spent_.epsilon == pytest.approx(a.privacy_spent_.epsilon)


@pytest.mark.filterwarnings("error::UserWarning")
def test_variance_below_its_noise_level_is_floored_there_and_flagged():
    # n = 1000, d = 10, N(0, 1) data, default box [-10, 10], epsilon = 1: the noise
    # std of the variance is ~2.4, so many noisy variances fall at or below 0.
    # They are floored at that public noise level (scale ~1.5), not at
    # (1e-3 x 10)^2, which multiplied the feature by 100 after scaling.
    X = _data(1000, 10, loc=0.0, std=1.0)
    with pytest.warns(UserWarning, match="below its noise level"):
        sc = DPStandardScaler(bounds=(-10, 10), random_state=1).fit(X)
    (_, second) = sc.privacy_spent_.mechanisms
    noise_var = 100.0 * second.scale
    assert np.all(sc.var_ >= noise_var * (1 - 1e-12))
    assert np.all(sc.scale_ > 1.0) and np.all(sc.scale_ <= 10.0)
    # Noise-free: the exact variance, no floor above 1e-6 h^2, no warning.
    with _non_private_testing_mode():
        exact = DPStandardScaler(epsilon=math.inf).fit(X)
    np.testing.assert_allclose(exact.var_, X.var(axis=0), rtol=1e-10)
    # Enough data: the variances stand above their noise and nothing is flagged.
    DPStandardScaler(delta=1e-7, random_state=1).fit(_data(200_000, 2, std=1.0))


def test_fit_parameters_such_as_sample_weight_are_refused_clearly():
    X = _data()
    with pytest.raises(TypeError, match="DPStandardScaler.*sample_weight"):
        DPStandardScaler().fit(X, sample_weight=np.ones(len(X)))
