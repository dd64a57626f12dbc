"""Tests for the synthetic heavy-tailed data generators."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from skdpsco.datasets import (
    make_heavy_tailed_classification,
    make_heavy_tailed_regression,
)

FAMILIES = ["normal", "student_t", "lognormal", "pareto", "loglogistic"]
# z-score of the confidence bands used by the Monte Carlo checks below.  The
# generators are seeded, so these tests are deterministic; the band only says
# how far from the population value a correct implementation may land.
Z = 6.0


def _noise(X, y, coef, bias=0.0):
    return y - X @ coef - bias


# ---------------------------------------------------------------------------
# Shapes, dtypes, reproducibility
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("feature_distribution", FAMILIES)
@pytest.mark.parametrize("noise_distribution", FAMILIES + ["none"])
def test_regression_shapes_and_dtypes(feature_distribution, noise_distribution):
    X, y, coef = make_heavy_tailed_regression(
        n_samples=37,
        n_features=4,
        feature_distribution=feature_distribution,
        noise_distribution=noise_distribution,
        random_state=0,
    )
    assert X.shape == (37, 4) and X.dtype == np.float64
    assert y.shape == (37,) and y.dtype == np.float64
    assert coef.shape == (4,) and coef.dtype == np.float64
    assert np.all(np.isfinite(X)) and np.all(np.isfinite(y))


def test_regression_single_sample_single_feature():
    X, y, coef = make_heavy_tailed_regression(1, 1, random_state=0)
    assert X.shape == (1, 1) and y.shape == (1,) and coef.shape == (1,)
    assert abs(coef[0]) == pytest.approx(1.0)


@pytest.mark.parametrize("n_classes", [2, 3, 5])
def test_classification_shapes_and_dtypes(n_classes):
    X, y, coef = make_heavy_tailed_classification(
        n_samples=50, n_features=6, n_classes=n_classes, random_state=0
    )
    assert X.shape == (50, 6) and X.dtype == np.float64
    assert y.shape == (50,) and y.dtype == np.int64
    expected = (6,) if n_classes == 2 else (n_classes, 6)
    assert coef.shape == expected
    assert set(np.unique(y)) <= set(range(n_classes))


@pytest.mark.parametrize(
    "make", [make_heavy_tailed_regression, make_heavy_tailed_classification]
)
def test_reproducible_with_int_seed(make):
    a = make(n_samples=100, n_features=3, random_state=42)
    b = make(n_samples=100, n_features=3, random_state=42)
    c = make(n_samples=100, n_features=3, random_state=43)
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)
    assert not np.array_equal(a[0], c[0])


@pytest.mark.parametrize(
    "make", [make_heavy_tailed_regression, make_heavy_tailed_classification]
)
def test_reproducible_with_generator(make):
    a = make(n_samples=100, n_features=3, random_state=np.random.default_rng(7))
    b = make(n_samples=100, n_features=3, random_state=np.random.default_rng(7))
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)
    # An int seed is the same as default_rng(seed).
    c = make(n_samples=100, n_features=3, random_state=7)
    for u, v in zip(a, c, strict=True):
        np.testing.assert_array_equal(u, v)
    # A Generator is used in place: consecutive calls give fresh draws.
    rng = np.random.default_rng(7)
    first = make(n_samples=100, n_features=3, random_state=rng)
    second = make(n_samples=100, n_features=3, random_state=rng)
    np.testing.assert_array_equal(first[0], a[0])
    assert not np.array_equal(first[0], second[0])


def test_random_state_instance_and_global_state_untouched():
    # Only reads the legacy global state, to check that it is never consumed.
    _, keys_before, pos_before, *_ = np.random.get_state()  # noqa: NPY002
    keys_before = keys_before.copy()
    a = make_heavy_tailed_regression(50, 2, random_state=np.random.RandomState(3))
    b = make_heavy_tailed_regression(50, 2, random_state=np.random.RandomState(3))
    np.testing.assert_array_equal(a[0], b[0])
    rs = np.random.RandomState(3)
    make_heavy_tailed_regression(50, 2, random_state=rs)
    c = make_heavy_tailed_regression(50, 2, random_state=rs)
    assert not np.array_equal(a[0], c[0])  # the RandomState was advanced
    make_heavy_tailed_classification(50, 2, random_state=None)
    _, keys_after, pos_after, *_ = np.random.get_state()  # noqa: NPY002
    np.testing.assert_array_equal(keys_after, keys_before)
    assert pos_after == pos_before


# ---------------------------------------------------------------------------
# Feature distributions
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "family, params",
    [
        ("normal", {}),
        # df=5 (not 3): the variance estimate needs a finite 4th moment.
        ("student_t", {"df": 5.0}),
        ("lognormal", {"sigma": 0.5}),
        ("pareto", {"alpha_pareto": 9.0}),
        ("loglogistic", {"sigma": 0.2}),
    ],
)
def test_features_have_zero_mean_and_unit_variance(family, params):
    n = 200_000
    X, _, _ = make_heavy_tailed_regression(
        n,
        2,
        feature_distribution=family,
        noise_distribution="none",
        random_state=0,
        **params,
    )
    for x in X.T:
        mean_band = Z * x.std() / math.sqrt(n)
        assert abs(x.mean()) < mean_band
        var_band = Z * (x**2).std() / math.sqrt(n)
        assert abs(np.mean(x**2) - 1.0) < var_band
        assert 1e-3 < var_band < 0.1  # sanity: the band is informative


@pytest.mark.parametrize(
    "family, params",
    [
        ("student_t", {"df": 3.0}),
        ("lognormal", {"sigma": 1.0}),
        ("pareto", {"alpha_pareto": 2.5}),
        ("loglogistic", {"sigma": 0.4}),
    ],
)
def test_default_shape_features_are_centred(family, params):
    n = 200_000
    X, _, _ = make_heavy_tailed_regression(
        n, 1, feature_distribution=family, noise_distribution="none",
        random_state=1, **params,
    )  # fmt: skip
    x = X[:, 0]
    assert abs(x.mean()) < Z * x.std() / math.sqrt(n)


def test_exact_support_of_standardised_families():
    # The lower end of the support pins down the exact centring/rescaling.
    X, _, _ = make_heavy_tailed_regression(
        20_000, 1, feature_distribution="pareto", alpha_pareto=3.0,
        noise_distribution="none", random_state=0,
    )  # fmt: skip
    a = 3.0
    lower = (1 - a / (a - 1)) / math.sqrt(a / ((a - 1) ** 2 * (a - 2)))
    assert X.min() >= lower - 1e-12 and X.min() < lower + 1e-3

    s = 0.5
    X, _, _ = make_heavy_tailed_regression(
        20_000, 1, feature_distribution="lognormal", sigma=s,
        noise_distribution="none", random_state=0,
    )  # fmt: skip
    lower = -math.exp(s**2 / 2) / math.sqrt((math.exp(s**2) - 1) * math.exp(s**2))
    assert X.min() > lower
    np.testing.assert_allclose(
        np.log(X[:, 0] - lower).std(), s, rtol=0.03
    )  # log(X - lower) is N(mu, s^2) up to an additive constant


def test_infinite_variance_families_centred_not_rescaled():
    # Pareto with a in (1, 2]: centred by a / (a - 1) but not rescaled.
    a = 1.5
    X, _, _ = make_heavy_tailed_regression(
        20_000, 1, feature_distribution="pareto", alpha_pareto=a,
        noise_distribution="none", random_state=0,
    )  # fmt: skip
    lower = 1.0 - a / (a - 1.0)
    assert X.min() >= lower - 1e-12 and X.min() < lower + 1e-3
    # Pareto with a <= 1: infinite mean, raw classical Pareto (support >= 1).
    X, _, _ = make_heavy_tailed_regression(
        20_000, 1, feature_distribution="pareto", alpha_pareto=0.8,
        noise_distribution="none", random_state=0,
    )  # fmt: skip
    assert X.min() >= 1.0 and X.min() < 1.001
    # Log-logistic with 1/2 <= s < 1: centred by pi s / sin(pi s) only.
    s = 0.7
    X, _, _ = make_heavy_tailed_regression(
        20_000, 1, feature_distribution="loglogistic", sigma=s,
        noise_distribution="none", random_state=0,
    )  # fmt: skip
    lower = -math.pi * s / math.sin(math.pi * s)
    assert X.min() > lower and X.min() < lower + 0.01
    # Student-t with df <= 2 is left as is: the median is still ~0.
    X, _, _ = make_heavy_tailed_regression(
        20_000, 1, feature_distribution="student_t", df=2.0,
        noise_distribution="none", random_state=0,
    )  # fmt: skip
    assert abs(np.median(X)) < 0.05
    assert np.mean(np.abs(X) > 10) > 1e-3  # unscaled heavy tails


# ---------------------------------------------------------------------------
# Noise
# ---------------------------------------------------------------------------


def test_default_noise_is_wang_et_al_centred_lognormal():
    n = 200_000
    X, y, coef = make_heavy_tailed_regression(n, 3, random_state=0)
    e = _noise(X, y, coef)
    shift = math.exp(0.5)  # exact mean of LogNormal(0, 1)
    # Mean ~0 (loose band), but the median is 1 - e^{1/2}, not 0.
    assert abs(e.mean()) < Z * e.std() / math.sqrt(n)
    assert abs(np.median(e) - (1.0 - shift)) < 0.02
    # e + e^{1/2} is exactly LogNormal(0, 1): positive with N(0, 1) logs.
    delta = e + shift
    assert delta.min() > 0
    log_delta = np.log(delta)
    assert abs(log_delta.mean()) < Z / math.sqrt(n)
    assert abs(log_delta.std() - 1.0) < 0.01
    # Noise variance is (e - 1) e, i.e. not rescaled to one.
    assert abs(e.var() / ((math.e - 1) * math.e) - 1.0) < 0.1


def test_noise_centred_by_exact_mean_not_sample_mean():
    X, y, coef = make_heavy_tailed_regression(20, 2, random_state=0)
    assert abs(_noise(X, y, coef).mean()) > 1e-6


@pytest.mark.parametrize(
    "family, params",
    [
        ("normal", {}),
        ("student_t", {"df": 3.0}),
        ("lognormal", {"sigma": 1.0}),
        ("pareto", {"alpha_pareto": 2.5}),
        ("loglogistic", {"sigma": 0.4}),
    ],
)
def test_noise_is_centred(family, params):
    n = 200_000
    X, y, coef = make_heavy_tailed_regression(
        n, 1, noise_distribution=family, noise_scale=2.0, random_state=3, **params
    )
    e = _noise(X, y, coef)
    assert abs(e.mean()) < Z * e.std() / math.sqrt(n)


def test_noise_scale_and_draw_order():
    kw = dict(n_samples=500, n_features=3, bias=1.5, random_state=11)
    X0, y0, c0 = make_heavy_tailed_regression(noise_distribution="none", **kw)
    X1, y1, c1 = make_heavy_tailed_regression(noise_scale=1.0, **kw)
    X2, y2, c2 = make_heavy_tailed_regression(noise_scale=3.0, **kw)
    Xz, yz, cz = make_heavy_tailed_regression(noise_scale=0.0, **kw)
    # X and coef are drawn before the noise.
    for X_, c_ in [(X1, c1), (X2, c2), (Xz, cz)]:
        np.testing.assert_array_equal(X_, X0)
        np.testing.assert_array_equal(c_, c0)
    np.testing.assert_allclose(y2 - y0, 3.0 * (y1 - y0), rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(yz, y0)


def test_noiseless_targets_recovered_exactly():
    X, y, coef = make_heavy_tailed_regression(
        300, 7, noise_distribution="none", bias=-2.25, feature_distribution="pareto",
        random_state=5,
    )  # fmt: skip
    np.testing.assert_allclose(y, X @ coef - 2.25, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------
# Coefficients and outliers
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("coef_norm", [0.0, 0.3, 1.0, 12.5])
def test_coef_norm(coef_norm):
    _, _, coef = make_heavy_tailed_regression(
        10, 8, coef_norm=coef_norm, random_state=0
    )
    assert np.linalg.norm(coef) == pytest.approx(coef_norm, rel=1e-12, abs=1e-15)
    _, _, coef = make_heavy_tailed_classification(
        10, 8, n_classes=4, coef_norm=coef_norm, random_state=0
    )
    np.testing.assert_allclose(
        np.linalg.norm(coef, axis=1), coef_norm, rtol=1e-12, atol=1e-15
    )


def test_n_informative():
    _, _, coef = make_heavy_tailed_regression(
        10, 9, n_informative=4, coef_norm=2.0, random_state=0
    )
    assert np.all(coef[4:] == 0.0)
    assert np.all(coef[:4] != 0.0)
    assert np.linalg.norm(coef) == pytest.approx(2.0)
    _, _, coef = make_heavy_tailed_classification(
        10, 9, n_classes=3, n_informative=2, random_state=0
    )
    assert np.all(coef[:, 2:] == 0.0) and np.all(coef[:, :2] != 0.0)
    _, _, coef = make_heavy_tailed_classification(
        10, 9, n_informative=9, random_state=0
    )
    assert np.all(coef != 0.0)


@pytest.mark.parametrize(
    "fraction, n_samples, expected",
    [(0.0, 100, 0), (0.1, 1000, 100), (0.29, 100, 29), (0.015, 200, 3),
     (0.999, 1000, 999), (0.5, 3, 1)],
)  # fmt: skip
def test_outlier_count(fraction, n_samples, expected):
    magnitude = 1e4
    kw = dict(n_features=2, noise_distribution="none", bias=0.5, random_state=2)
    X, y, coef = make_heavy_tailed_regression(
        n_samples, outlier_fraction=fraction, outlier_magnitude=magnitude, **kw
    )
    shift = _noise(X, y, coef, bias=0.5)
    is_outlier = np.isclose(shift, magnitude, rtol=0, atol=1e-6)
    assert is_outlier.sum() == expected
    np.testing.assert_allclose(shift[~is_outlier], 0.0, atol=1e-9)
    # X and coef are unaffected by the outliers.
    X0, _, coef0 = make_heavy_tailed_regression(n_samples, **kw)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(coef, coef0)


def test_outlier_rows_are_random():
    X, y, coef = make_heavy_tailed_regression(
        1000, 2, noise_distribution="none", outlier_fraction=0.05,
        outlier_magnitude=-50.0, random_state=0,
    )  # fmt: skip
    rows = np.flatnonzero(_noise(X, y, coef) < -25.0)
    assert rows.size == 50
    assert not np.array_equal(rows, np.arange(50))
    assert rows.max() > 500


# ---------------------------------------------------------------------------
# Classification
# ---------------------------------------------------------------------------


def test_binary_default_is_balanced_ish():
    X, y, coef = make_heavy_tailed_classification(20_000, random_state=0)
    assert set(np.unique(y)) == {0, 1}
    assert 0.35 < y.mean() < 0.65


def test_binary_labels_follow_sign_convention():
    X, y, coef = make_heavy_tailed_classification(
        2000, 5, noise_distribution="none", random_state=0
    )
    np.testing.assert_array_equal(y, (X @ coef > 0).astype(np.int64))


def test_multiclass_labels_are_argmax():
    X, y, coef = make_heavy_tailed_classification(
        3000, 5, n_classes=4, noise_distribution="none", random_state=0
    )
    np.testing.assert_array_equal(y, np.argmax(X @ coef.T, axis=1))
    assert set(np.unique(y)) == {0, 1, 2, 3}


@pytest.mark.parametrize(
    "n_classes, names",
    [(2, ["neg", "pos"]), (3, ["a", "b", "c"]), (3, [10, -1, 7])],
)
def test_label_names_mapping(n_classes, names):
    kw = dict(n_samples=400, n_features=4, n_classes=n_classes, random_state=9)
    X, y_int, coef = make_heavy_tailed_classification(**kw)
    X2, y_named, coef2 = make_heavy_tailed_classification(label_names=names, **kw)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(coef, coef2)
    np.testing.assert_array_equal(y_named, np.asarray(names)[y_int])
    assert y_named.shape == (400,)
    if isinstance(names[0], str):
        assert y_named.dtype.kind == "U"
    assert set(y_named.tolist()) == set(names)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_logistic_regression_recovers_low_noise_labels(n_classes):
    X, y, _ = make_heavy_tailed_classification(
        25_000, 5, n_classes=n_classes, noise_scale=0.01, random_state=0
    )
    clf = LogisticRegression(C=100.0, max_iter=1000)
    clf.fit(X[:20_000], y[:20_000])
    assert clf.score(X[20_000:], y[20_000:]) > 0.9


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------

REGRESSION_INVALID = [
    ({"n_samples": 0}, "n_samples"),
    ({"n_samples": 10.0}, "n_samples"),
    ({"n_samples": True}, "n_samples"),
    ({"n_features": 0}, "n_features"),
    ({"n_features": "3"}, "n_features"),
    ({"feature_distribution": "cauchy"}, "feature_distribution.*student_t"),
    ({"feature_distribution": "none"}, "feature_distribution"),
    ({"noise_distribution": "gaussian"}, "noise_distribution.*loglogistic"),
    ({"noise_scale": -0.1}, "noise_scale"),
    ({"noise_scale": np.nan}, "noise_scale"),
    ({"coef_norm": -1.0}, "coef_norm"),
    ({"n_informative": 0}, "n_informative"),
    ({"n_informative": 11}, "n_informative"),
    ({"n_informative": 2.5}, "n_informative"),
    ({"df": 0.0}, "df"),
    ({"df": -3.0}, "df"),
    ({"sigma": 0.0}, "sigma"),
    ({"alpha_pareto": -1.0}, "alpha_pareto"),
    ({"alpha_pareto": np.inf}, "alpha_pareto"),
    ({"random_state": "seed"}, "random_state"),
    ({"random_state": -1}, "random_state"),
]


@pytest.mark.parametrize(
    "kwargs, match",
    REGRESSION_INVALID
    + [
        ({"bias": np.inf}, "bias"),
        ({"outlier_fraction": -0.1}, "outlier_fraction"),
        ({"outlier_fraction": 1.0}, "outlier_fraction"),
        ({"outlier_magnitude": np.nan}, "outlier_magnitude"),
    ],
)
def test_regression_invalid_parameters(kwargs, match):
    params = {"n_samples": 10, "n_features": 10, "random_state": 0}
    params.update(kwargs)
    with pytest.raises(ValueError, match=match):
        make_heavy_tailed_regression(**params)


@pytest.mark.parametrize(
    "kwargs, match",
    REGRESSION_INVALID
    + [
        ({"n_classes": 1}, "n_classes"),
        ({"n_classes": 2.0}, "n_classes"),
        ({"label_names": ["a"]}, "label_names"),
        ({"label_names": ["a", "b", "c"]}, "label_names"),
        ({"label_names": ["a", "a"]}, "label_names"),
        ({"label_names": "ab"}, "label_names"),
        ({"n_classes": 3, "label_names": [[0], [1], [2]]}, "label_names"),
    ],
)
def test_classification_invalid_parameters(kwargs, match):
    params = {"n_samples": 10, "n_features": 10, "random_state": 0}
    params.update(kwargs)
    with pytest.raises(ValueError, match=match):
        make_heavy_tailed_classification(**params)


def test_make_one_hot_classification_schema_and_reproducibility():
    from skdpsco.datasets import make_one_hot_classification

    X, y, coef = make_one_hot_classification(
        500, n_fields=4, n_levels=10, random_state=0
    )
    assert sp.isspmatrix_csr(X) and X.shape == (500, 40)
    # Exactly one level per field: n_fields ones per row, one in each field block.
    np.testing.assert_array_equal(np.diff(X.indptr), 4)
    np.testing.assert_array_equal(X.data, 1.0)
    np.testing.assert_array_equal(X.indices.reshape(500, 4) // 10, [[0, 1, 2, 3]] * 500)
    assert set(np.unique(y)) == {0, 1} and coef.shape == (40,)
    # Noise-free labels are the sign of the linear score.
    X0, y0, w0 = make_one_hot_classification(200, 3, 5, noise_scale=0, random_state=1)
    np.testing.assert_array_equal(y0, (X0 @ w0 > 0).astype(int))
    X2, y2, _ = make_one_hot_classification(500, 4, 10, random_state=0)
    assert (X2 != X).nnz == 0 and np.array_equal(y2, y)
    with pytest.raises(ValueError, match="n_fields"):
        make_one_hot_classification(10, n_fields=0)
    with pytest.raises(ValueError, match="noise_scale"):
        make_one_hot_classification(10, noise_scale=-1.0)
