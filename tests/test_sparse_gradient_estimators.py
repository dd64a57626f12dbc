"""SparseGradientDPRegressor / SparseGradientDPClassifier: limits, inputs, scale."""

import math
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import algorithms, noiseless_fit
from _sparse_input import assert_fit_leaves_matrix_unchanged
from scipy import optimize
from sklearn.base import clone
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer

from skdpsco._estimators._sparse_gradient import (
    INTERCEPT_COLUMN_RATIO,
    SparseGradientDPClassifier,
    SparseGradientDPRegressor,
)
from skdpsco._losses import get_loss
from skdpsco._sparse_rows import enforce_row_bounds
from skdpsco.exceptions import PrivacyLeakWarning

ALGORITHMS = algorithms(SparseGradientDPRegressor)


def _sparse_regression(n=400, d=60, nnz=4, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    cols = np.stack([rng.choice(d, nnz, replace=False) for _ in range(n)])
    vals = scale * rng.normal(size=(n, nnz)) / math.sqrt(nnz)
    X = sp.csr_matrix(
        (vals.ravel(), cols.ravel(), np.arange(0, n * nnz + 1, nnz)), shape=(n, d)
    )
    y = np.asarray(X @ rng.normal(size=d)).ravel() + 0.1 * rng.normal(size=n)
    return X, y


#: The implicit intercept column of output perturbation (the default) at
#: row_norm_bound = 1: its intercept_ is A times the column's coefficient.
A = 1.0 / INTERCEPT_COLUMN_RATIO


def _with_ones(X):
    X = X.toarray() if sp.issparse(X) else np.asarray(X)
    return np.hstack([X, np.full((X.shape[0], 1), A)])


# ------------------------------------------------ epsilon -> inf limits (sklearn)


def _huber_reference(Xe, y, alpha, fit_intercept, threshold):
    Xt = _with_ones(Xe) if fit_intercept else Xe.toarray()
    loss = get_loss("huber", threshold=threshold)

    def f(w):
        z = Xt @ w
        grad = Xt.T @ loss.derivative(z, y) / len(y) + alpha * w
        return np.mean(loss.value(z, y)) + alpha / 2 * w @ w, grad

    res = optimize.minimize(
        f,
        np.zeros(Xt.shape[1]),
        jac=True,
        method="L-BFGS-B",
        options=dict(gtol=1e-12, ftol=1e-15, maxiter=10_000),
    )
    return res.x


@pytest.mark.parametrize("fmt", ["csr", "csc", "dense"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_huber_limit_equals_the_scipy_minimiser_on_the_enforced_rows(
    fmt, fit_intercept
):
    X, y = _sparse_regression(scale=3.0)  # many rows exceed row_norm_bound = 1
    Xe = enforce_row_bounds(X, sparsity=3, row_norm_bound=1.0, method="clip_l1")
    ref = _huber_reference(Xe, y, 0.05, fit_intercept, 0.7)
    Xin = {"csr": X, "csc": X.tocsc(), "dense": X.toarray()}[fmt]
    est = noiseless_fit(
        SparseGradientDPRegressor,
        Xin,
        y,
        alpha=0.05 * X.shape[0],  # Ridge's alpha: lambda = alpha / n
        huber_threshold=0.7,
        sparsity=3,
        fit_intercept=fit_intercept,
        tol=1e-5,
    )
    got = np.append(est.coef_, est.intercept_ / A) if fit_intercept else est.coef_
    np.testing.assert_allclose(got, ref, atol=1e-5)


def test_squared_error_limit_equals_ridge_with_a_penalised_intercept():
    X, y = _sparse_regression()
    y = np.clip(y, -2.0, 2.0)
    n = X.shape[0]
    Xe = enforce_row_bounds(X, sparsity=None, row_norm_bound=1.0)
    ref = Ridge(alpha=0.05 * n, fit_intercept=False, tol=1e-12).fit(_with_ones(Xe), y)
    est = noiseless_fit(
        SparseGradientDPRegressor,
        X,
        y,
        alpha=0.05 * n,
        loss="squared_error",
        target_bound=2.0,
        coef_norm_bound=100.0,
        tol=1e-6,
    )
    np.testing.assert_allclose(
        np.append(est.coef_, est.intercept_ / A), ref.coef_, atol=1e-5
    )


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_classifier_limit_equals_logistic_regression(n_classes, fit_intercept):
    X, score = _sparse_regression(n=300, d=40, seed=1)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    C = 2.0
    Xe = enforce_row_bounds(X, sparsity=None, row_norm_bound=1.0)
    Xt = _with_ones(Xe) if fit_intercept else Xe
    ref = LogisticRegression(C=C, fit_intercept=False, tol=1e-12, max_iter=20_000)
    ref.fit(Xt, y)
    est = noiseless_fit(
        SparseGradientDPClassifier, X, y, C=C, fit_intercept=fit_intercept, tol=1e-6
    )
    got = (
        np.hstack([est.coef_, est.intercept_[:, None] / A])
        if fit_intercept
        else est.coef_
    )
    np.testing.assert_allclose(got, ref.coef_, atol=1e-4)
    np.testing.assert_allclose(est.predict_proba(X), ref.predict_proba(Xt), atol=1e-5)


@pytest.mark.parametrize("algorithm", ["projection_gd", "l1_recovery_gd"])
def test_gradient_descent_limits_reach_the_unpenalised_intercept_minimiser(algorithm):
    X, y = _sparse_regression(n=200, d=10, nnz=3)
    est = noiseless_fit(
        SparseGradientDPRegressor,
        X,
        y,
        alpha=0.5 * X.shape[0],
        algorithm=algorithm,
        max_iter=400,
    )
    # The gradient descents keep an intercept column of 1.
    Xe = enforce_row_bounds(X, sparsity=None, row_norm_bound=1.0).toarray()
    Xt = np.hstack([Xe, np.ones((Xe.shape[0], 1))])
    loss = get_loss("huber", threshold=1.0)
    mask = np.append(np.ones(10), 0.0)  # the GD solvers leave the intercept free

    def f(w):
        z = Xt @ w
        grad = Xt.T @ loss.derivative(z, y) / len(y) + 0.5 * mask * w
        return np.mean(loss.value(z, y)) + 0.25 * (mask * w) @ w, grad

    ref = optimize.minimize(f, np.zeros(11), jac=True, method="L-BFGS-B").x
    np.testing.assert_allclose(np.append(est.coef_, est.intercept_), ref, atol=1e-4)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("Est", [SparseGradientDPRegressor, SparseGradientDPClassifier])
def test_every_algorithm_runs_within_its_budget(Est, algorithm):
    X, score = _sparse_regression(n=120, d=3, nnz=2)
    y = score if Est is SparseGradientDPRegressor else (score > 0).astype(int)
    # Boosting: failure_prob 0.9 gives gamma = 1/2, about 2 runs (accuracy only).
    extra = dict(failure_prob=0.9) if algorithm == "boosted_sgd" else {}
    est = Est(algorithm=algorithm, epsilon=1.0, random_state=0, **extra).fit(X, y)
    assert est.privacy_spent_.epsilon <= 1.0 + 1e-9
    assert est.privacy_spent_.delta <= 1e-5
    assert np.all(np.isfinite(est.coef_)) and np.all(np.isfinite(est.intercept_))
    assert est.predict(X).shape == (120,)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize(
    "algorithm", ["output_perturbation", "projection_gd", "l1_recovery_gd"]
)
def test_fit_never_writes_into_the_users_sparse_matrix(fmt, algorithm):
    # A canonical matrix is used as given (no copy), so nothing may write into it.
    X, y = _sparse_regression(n=200, d=30, seed=5)
    X = X.asformat(fmt)
    X.data[:5] = [1e300, -1e300, 1e-310, 0.0, 7.0]
    X.sort_indices()
    assert_fit_leaves_matrix_unchanged(
        SparseGradientDPRegressor(algorithm=algorithm, random_state=0), X, y
    )


def test_a_stale_canonical_flag_does_not_let_duplicates_past_the_row_bound():
    # scipy caches has_canonical_format; writing duplicates into X.indices after it
    # was read leaves True on a matrix with duplicates. The row map must still see
    # the summed values (10 copies of 1e6 in one column: a row norm of 1e7, which
    # the products with X see), not ten entries of 1e6 each.
    from skdpsco.utils._validation import canonical_sparse

    X, _ = _sparse_regression(n=50, d=20, nnz=10, seed=2)
    X.sort_indices()
    assert X.has_canonical_format  # cached now
    lo, hi = X.indptr[3], X.indptr[4]
    X.indices[lo:hi] = X.indices[lo]
    X.data[lo:hi] = 1e6
    assert X.has_canonical_format  # stale
    summed = canonical_sparse(X, "test")
    np.testing.assert_array_equal(summed.toarray(), X.toarray())
    assert summed.nnz == X.nnz - (hi - lo - 1)
    for Z in (X, X.tocsc()):
        out = enforce_row_bounds(Z, sparsity=None, row_norm_bound=1.0)
        dense = out.toarray()
        assert np.linalg.norm(dense, axis=1).max() <= 1.0 + 1e-12
        # The map acts on the matrix's values: row 3 is e_j, the others unscaled
        # (their norms were at most 1 already) or scaled down.
        np.testing.assert_allclose(np.abs(dense[3]).sum(), 1.0)


# ------------------------------------------------------------ row enforcement


@pytest.mark.parametrize("method", ["clip_l1", "truncate"])
@pytest.mark.parametrize("fmt", ["csr", "csc", "dense"])
def test_enforced_rows_satisfy_the_declared_bounds(method, fmt):
    rng = np.random.default_rng(0)
    D = rng.standard_cauchy(size=(80, 25)) * (rng.random((80, 25)) < 0.4)
    D[0] = 1e300  # huge dense row
    D[1] = 0.0
    X = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "dense": np.asarray}[fmt](D)
    X_before = X.copy()
    out = enforce_row_bounds(X, sparsity=3, row_norm_bound=2.0, method=method)
    dense = out.toarray() if sp.issparse(out) else out
    assert np.all(np.linalg.norm(dense, axis=1) <= 2.0 * (1 + 1e-12))
    assert np.all(np.abs(dense).sum(axis=1) <= 2.0 * math.sqrt(3) * (1 + 1e-12))
    if method == "truncate":
        assert (dense != 0).sum(axis=1).max() <= 3
    assert np.all(np.isfinite(dense)) and np.abs(dense[0]).max() > 0
    # The input is never modified.
    before = X_before.toarray() if sp.issparse(X) else X_before
    after = X.toarray() if sp.issparse(X) else X
    np.testing.assert_array_equal(after, before)


def test_enforcement_is_a_per_row_map_identical_across_formats_and_chunks(monkeypatch):
    import skdpsco._sparse_rows as rows_module

    rng = np.random.default_rng(1)
    D = rng.normal(size=(60, 20)) * (rng.random((60, 20)) < 0.5)
    D[:, 7] = 1.0  # many ties: truncation breaks them by column index
    ref = enforce_row_bounds(D, sparsity=4, row_norm_bound=1.5, method="truncate")
    monkeypatch.setattr(rows_module, "_CHUNK_ENTRIES", 7)
    for X in (sp.csr_matrix(D), sp.csc_matrix(D)):
        out = enforce_row_bounds(X, sparsity=4, row_norm_bound=1.5, method="truncate")
        np.testing.assert_allclose(out.toarray(), ref, rtol=1e-15, atol=1e-15)
    # Per-row: the map of a subset of rows is the subset of the map.
    sub = enforce_row_bounds(D[10:20], sparsity=4, row_norm_bound=1.5)
    full = enforce_row_bounds(D, sparsity=4, row_norm_bound=1.5)
    np.testing.assert_array_equal(sub, full[10:20])
    # Ties: row with equal magnitudes keeps the smallest column indices.
    tie = np.ones((1, 6))
    kept = enforce_row_bounds(tie, sparsity=2, row_norm_bound=10.0, method="truncate")
    np.testing.assert_array_equal(np.flatnonzero(kept[0]), [0, 1])


def test_duplicates_and_explicit_zeros_give_the_canonical_result():
    data = np.array([1.0, 2.0, 0.0, 3.0, 4.0, 0.0])
    rows = np.array([0, 0, 0, 1, 1, 1])
    cols = np.array([2, 2, 5, 0, 1, 3])
    X = sp.coo_matrix((data, (rows, cols)), shape=(2, 6)).tocsr(copy=False)
    X.has_canonical_format = False  # duplicates kept as stored
    X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(2, 6))
    canonical = X.copy()
    canonical.sum_duplicates()
    canonical.eliminate_zeros()
    for method in ("clip_l1", "truncate"):
        a = enforce_row_bounds(X, sparsity=1, row_norm_bound=1.0, method=method)
        b = enforce_row_bounds(canonical, sparsity=1, row_norm_bound=1.0, method=method)
        np.testing.assert_array_equal(a.toarray(), b.toarray())


def test_intercept_counts_toward_sparsity_and_norm():
    X, y = _sparse_regression(n=100, d=20, nnz=3)
    # alpha = lambda n: lambda = 0.1 at n = 100.
    a = SparseGradientDPRegressor(scaling="none", sparsity=3, delta=0.0, alpha=10.0)
    a.fit(X, y)
    b = SparseGradientDPRegressor(
        scaling="none", sparsity=3, delta=0.0, alpha=10.0, fit_intercept=False
    ).fit(X, y)
    C_a, C_b = math.hypot(1 + 1e-12, A), 1 + 1e-12

    # Laplace scale ~ sqrt(s_eff) L (2H/lambda + 1) + sqrt(p) tol term.
    def scale(C, s, p):
        L, H, lam, n = C, C**2, 0.1, 100
        tol_w = 1e-3 * 2 * L / (lam * n)
        return (2 * math.sqrt(2 * s) * L / (lam * n)) * (
            2 * H / lam + 1
        ) + 2 * math.sqrt(p) * tol_w

    assert a.noise_scale_ == pytest.approx(scale(C_a, 4, 21), rel=1e-12)
    assert b.noise_scale_ == pytest.approx(scale(C_b, 3, 20), rel=1e-12)


def test_predict_applies_the_same_row_map():
    X, y = _sparse_regression(n=100, d=20, nnz=3)
    est = SparseGradientDPRegressor(
        scaling="none", row_norm_bound=0.5, random_state=0
    ).fit(X, y)
    big = X * 100.0
    Xe = enforce_row_bounds(big, sparsity=None, row_norm_bound=0.5)
    np.testing.assert_allclose(
        est.predict(big), Xe @ est.coef_ + est.intercept_, rtol=1e-12
    )


# ------------------------------------------------------------------ bad input


def _data():
    return _sparse_regression(n=60, d=8, nnz=2)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(epsilon=0.0), "epsilon"),
        (dict(epsilon=-1.0), "epsilon"),
        (dict(epsilon=float("nan")), "epsilon"),
        (dict(epsilon=True), "epsilon"),
        (dict(epsilon=np.inf), "epsilon"),
        (dict(delta=1.0), "delta"),
        (dict(delta=-1e-3), "delta"),
        (dict(delta=float("nan")), "delta"),
        (dict(sparsity=0), "sparsity"),
        (dict(sparsity=9), "sparsity=9 exceeds n_features=8"),
        (dict(row_norm_bound=np.inf), "row_norm_bound"),
        (dict(loss="squared_error"), "target_bound"),
        (dict(loss="squared_error", target_bound=1.0, delta=0.0), "delta=0"),
        (dict(algorithm="l1_recovery_gd", delta=0.0), "delta"),
        (dict(algorithm="bias_reduced_sgd", delta=0.0), "delta"),
        (dict(algorithm="boosted_sgd", epsilon=1e-5, delta=1e-5), "epsilon"),
        (dict(alpha=0.0), "alpha"),
        (dict(tol=1.0), "tol"),
    ],
)
def test_bad_parameters_raise_and_change_nothing(params, match):
    X, y = _data()
    est = SparseGradientDPRegressor(scaling="none", random_state=0).fit(X, y)
    before = {k: v for k, v in vars(est).items()}
    coef = est.coef_.copy()
    est.set_params(**params)
    with pytest.raises(ValueError, match=match):
        est.fit(X, y)
    assert set(vars(est)) == set(before)
    np.testing.assert_array_equal(est.coef_, coef)
    assert est.privacy_spent_ is before["privacy_spent_"]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("fmt", ["csr", "dense"])
def test_non_finite_input_is_rejected(bad, fmt):
    X, y = _data()
    X = X.tolil()
    X[3, 2] = bad
    X = X.tocsr() if fmt == "csr" else X.toarray()
    with pytest.raises(ValueError, match="NaN|infinity"):
        SparseGradientDPRegressor(
            scaling="none",
        ).fit(X, y)
    y_bad = y.copy()
    y_bad[0] = bad
    with pytest.raises(ValueError, match="NaN|infinity"):
        SparseGradientDPRegressor(
            scaling="none",
        ).fit(_data()[0], y_bad)


def test_single_class_is_rejected():
    X, _ = _data()
    with pytest.raises(ValueError, match="at least 2 classes"):
        SparseGradientDPClassifier(
            scaling="none",
        ).fit(X, np.zeros(X.shape[0]))


def test_refusals_name_the_size_limit():
    X, y = _sparse_regression(n=100, d=20, nnz=2)
    with pytest.raises(ValueError, match="MAX_DIM=10"):
        SparseGradientDPRegressor(scaling="none", algorithm="sparse_exponential").fit(
            X, y
        )
    # n = 3000, p = 1e6 + 1, s = 2: Algorithm 2 needs m ~ 1e3 measurements, a
    # 1e3 x 1e6 matrix (1e9 entries > 2e8): refused from the sizes alone.
    rng = np.random.default_rng(0)
    cols = rng.integers(0, 1_000_000, size=3000)
    big = sp.csr_matrix((np.ones(3000), cols, np.arange(3001)), shape=(3000, 1_000_000))
    yb = rng.normal(size=3000)
    with pytest.raises(ValueError, match="MAX_MEASUREMENT_ENTRIES"):
        SparseGradientDPRegressor(
            scaling="none", algorithm="l1_recovery_gd", sparsity=1
        ).fit(big, yb)


def test_delta_above_one_over_n_warns():
    X, y = _data()
    with pytest.warns(PrivacyLeakWarning):
        SparseGradientDPRegressor(scaling="none", delta=0.1).fit(X, y)


# ---------------------------------------------------------------------- scale


def test_fit_on_a_million_column_csr_matrix_without_densifying():
    # A dense copy would need n * d * 8 = 160 GB. benchmarks/sparse.py runs the
    # full n = 100,000 size and measures time and peak memory.
    n, d, k = 20_000, 1_000_000, 20
    rng = np.random.default_rng(0)
    # One-hot style: 20 fields of 50,000 values, rows scaled to unit norm.
    cols = (np.arange(k) * (d // k))[None, :] + rng.integers(0, d // k, size=(n, k))
    X = sp.csr_matrix(
        (np.full(n * k, 1 / math.sqrt(k)), cols.ravel(), np.arange(0, n * k + 1, k)),
        shape=(n, d),
    )
    y = np.asarray(X @ rng.normal(size=d)).ravel() + 0.1 * rng.normal(size=n)
    est = SparseGradientDPRegressor(
        scaling="none", sparsity=k, delta=1e-6, coef_norm_bound=1.0, random_state=0
    )
    est.fit(X, y)
    assert est.coef_.shape == (d,)
    assert est.predict(X[:5]).shape == (5,)
    # Prediction noise <xi, x> has std sigma ||x~||, independent of d.
    assert est.noise_scale_ < 0.02


# -------------------------------------------------------- scikit-learn citizen


@pytest.mark.parametrize("Est", [SparseGradientDPRegressor, SparseGradientDPClassifier])
def test_formats_seeds_clone_pickle_pipeline(Est):
    X, score = _sparse_regression(n=150, d=30, nnz=3)
    y = (
        score
        if Est is SparseGradientDPRegressor
        else np.array(["a", "b"])[(score > 0).astype(int)]
    )
    # Data as given: dense equals sparse (the default private scaling centres
    # dense input and keeps sparse input sparse); CSR equals CSC either way.
    fits = [
        Est(scaling="none", sparsity=3, random_state=7).fit(Xf, y).coef_
        for Xf in (X, X.tocsc(), X.toarray())
    ]
    np.testing.assert_allclose(fits[0], fits[1], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(fits[0], fits[2], rtol=1e-12, atol=1e-13)
    a, b = (Est(sparsity=3, random_state=7).fit(Xf, y).coef_ for Xf in (X, X.tocsc()))
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
    a = Est(random_state=None).fit(X, y).coef_
    b = Est(random_state=None).fit(X, y).coef_
    assert not np.array_equal(a, b)
    est = Est(sparsity=3, random_state=7).fit(X, y)
    np.testing.assert_array_equal(
        pickle.loads(pickle.dumps(est)).predict(X), est.predict(X)
    )
    assert clone(est).get_params() == est.get_params()
    pipe = make_pipeline(Normalizer(), Est(random_state=0)).fit(X, y)
    assert pipe.predict(X).shape == (150,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grid = {"alpha" if Est is SparseGradientDPRegressor else "C": ["auto", 1.0]}
        GridSearchCV(Est(random_state=0), grid, cv=2).fit(X, y)


def test_bias_reduced_sgd_runs_at_tiny_epsilon():
    # Its per-call self-check tripped on the accountant's rounding at epsilon = 1e-6.
    rng = np.random.default_rng(0)
    X = sp.random(500, 50, density=0.05, random_state=0, format="csr")
    y = rng.normal(size=500)
    est = SparseGradientDPRegressor(
        scaling="none", algorithm="bias_reduced_sgd", epsilon=1e-6, random_state=0
    ).fit(X, y)
    assert est.privacy_spent_.epsilon <= 1e-6


# ------------------------------------------------- coef_norm_bound="auto" rule


def _one_hot(n, seed, fields=4, levels=20):
    from skdpsco.datasets import make_one_hot_classification

    X, y, _ = make_one_hot_classification(n, fields, levels, random_state=seed)
    return X, y


def test_auto_coef_norm_bound_is_a_public_function_of_the_sizes():
    # Same n, d, epsilon, delta and declared sparsity: the same D and penalty,
    # whatever the data (features and labels unrelated to each other).
    X1, y1 = _one_hot(3000, seed=0)
    rng = np.random.default_rng(5)
    X2 = sp.random(3000, X1.shape[1], density=0.2, format="csr", random_state=1)
    y2 = rng.integers(0, 2, size=3000)
    fits = [
        SparseGradientDPClassifier(sparsity=4, random_state=s).fit(X, y)
        for s, (X, y) in enumerate([(X1, y1), (X2, y2), (X1, 1 - y1)])
    ]
    assert len({f.coef_norm_bound_ for f in fits}) == 1
    assert len({f.alpha_ for f in fits}) == 1
    assert fits[0].coef_norm_bound_ > 1.0
    # The rule itself: the noise on a prediction at the row bound is 0.25.
    from skdpsco._solvers._output_perturbation import AUTO_PREDICTION_NOISE

    row_bound = math.hypot(1 + 1e-12, A)
    assert fits[0].noise_scale_ * row_bound == pytest.approx(
        AUTO_PREDICTION_NOISE, rel=1e-6
    )
    # It grows with n and epsilon (less noise per unit of D).
    big = SparseGradientDPClassifier(sparsity=4, random_state=0).fit(
        *_one_hot(12_000, seed=0)
    )
    loose = SparseGradientDPClassifier(sparsity=4, epsilon=4.0, random_state=0).fit(
        X1, y1
    )
    assert big.coef_norm_bound_ > fits[0].coef_norm_bound_
    assert loose.coef_norm_bound_ > fits[0].coef_norm_bound_


@pytest.mark.parametrize("Est", [SparseGradientDPRegressor, SparseGradientDPClassifier])
def test_an_explicit_coef_norm_bound_is_honoured(Est):
    X, score = _sparse_regression(n=300, d=30, nnz=3)
    y = score if Est is SparseGradientDPRegressor else (score > 0).astype(int)
    est = Est(coef_norm_bound=7.0, scaling="none", sparsity=3, random_state=0)
    est.fit(X, y)
    assert est.coef_norm_bound_ == 7.0
    lipschitz = math.hypot(1 + 1e-12, A)
    from skdpsco._solvers._output_perturbation import auto_l2_penalty

    expected = auto_l2_penalty(
        lipschitz=lipschitz,
        smoothness=0.0,
        coef_norm_bound=7.0,
        n_samples=300,
        n_params=31,
        sparsity=4,
        epsilon=1.0,
        delta=1e-5,
    )
    # alpha_ is in Ridge's units: lambda n.
    assert est.alpha_ == pytest.approx(expected * 300, rel=1e-12)
    # Other algorithms keep the previous prior 1.0 under "auto".
    other = Est(algorithm="projection_gd", scaling="none", random_state=0).fit(X, y)
    assert other.coef_norm_bound_ == 1.0


def test_default_classifier_beats_the_majority_class_on_one_hot_data():
    # n = 20,000 one-hot rows (4 fields x 20 levels), epsilon = 1, every parameter at
    # its default. coef_norm_bound=1.0 with an intercept column of 1 predicted the
    # majority class on every seed (margin 0); with the intercept column at 1/2 and
    # rows at the row bound the rule must keep a wide lead over D = 1.
    margins, old = [], []
    for seed in range(3):
        X, y = _one_hot(25_000, seed=seed)
        Xtr, ytr, Xte, yte = X[:20_000], y[:20_000], X[20_000:], y[20_000:]
        majority = np.mean(yte == np.bincount(ytr).argmax())
        new = SparseGradientDPClassifier(random_state=seed).fit(Xtr, ytr)
        margins.append(new.score(Xte, yte) - majority)
        prev = SparseGradientDPClassifier(coef_norm_bound=1.0, random_state=seed)
        old.append(prev.fit(Xtr, ytr).score(Xte, yte) - majority)
    assert np.median(margins) > 0.2, margins
    assert np.median(margins) > np.median(old), (margins, old)


def test_pure_dp_output_perturbation_at_exact_budget_releases():
    # The Laplace scale Delta / epsilon rounded so that Delta / b was 0.9 + 1 ulp:
    # the release gate refused this fit as an overspend.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = (X @ rng.normal(size=4) + rng.normal(size=400) > 0).astype(int)
    est = SparseGradientDPClassifier(
        algorithm="output_perturbation",
        epsilon=0.9,
        delta=0.0,
        scaling="none",
        random_state=0,
    ).fit(X, y)
    assert est.privacy_spent_.epsilon <= 0.9
    assert est.privacy_spent_.mechanisms[0].kind == "laplace"
