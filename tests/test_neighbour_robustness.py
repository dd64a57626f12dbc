"""Neighbouring datasets must look alike from the outside, not only in their noise.

An attacker who holds the library and every record but one can tell two replace-one
neighbours apart by anything a fit does differently on them besides its noisy
release: raising on one only, NaN coefficients on one only, a floating-point
warning printed on one only, or a pickled model that carries the generator's
post-fit state (from which the noise can be regenerated). Each test below fits two
such neighbours, with the same seed, and compares what is observable.
"""

import copy
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import dense_data, public_estimators
from sklearn.base import is_classifier

import skdpsco
from skdpsco._constraints import L2Ball
from skdpsco._design import LinearDesign, row_clip_scales, row_lr_norms
from skdpsco._losses import get_loss
from skdpsco._solvers import _mirror_descent as md
from skdpsco.preprocessing import DPRobustScaler, DPStandardScaler
from skdpsco.privacy._budget import AlgorithmBudget

FMAX = np.finfo(np.float64).max
SUBNORMAL_ROW = [5e-324, 1e-310, -1e-320, 2.2e-309]


ESTIMATORS = public_estimators()
SPARSE_ESTIMATORS = [
    Est for Est in ESTIMATORS if Est().__sklearn_tags__().input_tags.sparse
]


def _observe(make, X, y):
    """What an observer of one fit sees: its outcome and its warnings.

    Returns ``(outcome, warns)``: ``("ok", coef_finite)`` or ``("raise", type,
    message)``, and the sorted ``(category, message)`` of every warning emitted
    (scikit-learn's own FutureWarnings left out: they depend on the version only).
    """
    est = make()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            est.fit(X, y)
        except Exception as exc:  # the observable is the exception itself
            outcome = ("raise", type(exc).__name__, str(exc))
        else:
            finite = bool(
                np.all(np.isfinite(est.coef_)) and np.all(np.isfinite(est.intercept_))
            )
            outcome = ("ok", finite)
    warns = sorted(
        (w.category.__name__, str(w.message))
        for w in caught
        if not (issubclass(w.category, FutureWarning) and "sklearn" in w.filename)
    )
    return outcome, warns


def _target(Est, y_reg, y_clf):
    return y_clf if is_classifier(Est()) else y_reg


# --------------------------------------------------------------------------------
# Stored duplicates of a sparse row.


def _one_hot_csr(n=400, d=20, seed=1):
    """Two one-hot fields (columns 0-9 and 10-19): finite, canonical CSR."""
    rng = np.random.default_rng(seed)
    cols = np.column_stack([rng.integers(0, 10, n), rng.integers(10, 20, n)])
    X = sp.csr_matrix(
        (np.ones(2 * n), cols.ravel(), np.arange(0, 2 * n + 1, 2)), shape=(n, d)
    )
    w = rng.standard_normal(d) / 2.0
    y_reg = X @ w + 0.1 * rng.standard_normal(n)
    y_clf = (y_reg > np.median(y_reg)).astype(int)
    return X, y_reg, y_clf


def _with_row(X, i, data, indices):
    """``X`` with row ``i`` stored as given, duplicates kept (not summed)."""
    X = sp.csr_matrix(X)
    rows_data, rows_idx, indptr = [], [], [0]
    for r in range(X.shape[0]):
        if r == i:
            d, j = np.asarray(data, float), np.asarray(indices, np.int32)
        else:
            sl = slice(X.indptr[r], X.indptr[r + 1])
            d, j = X.data[sl], X.indices[sl]
        rows_data.append(d)
        rows_idx.append(j)
        indptr.append(indptr[-1] + d.size)
    return sp.csr_matrix(
        (np.concatenate(rows_data), np.concatenate(rows_idx), np.array(indptr)),
        shape=X.shape,
    )


def _duplicate_neighbours():
    X, y_reg, y_clf = _one_hot_csr()
    X_dup = _with_row(X, 0, [1e308, 1e308], [5, 5])
    assert not X_dup.has_canonical_format and X_dup.nnz == X.nnz
    assert np.all(np.isfinite(X_dup.data))  # each stored value passes validation
    return X, X_dup, y_reg, y_clf


@pytest.mark.parametrize("Est", SPARSE_ESTIMATORS, ids=lambda e: e.__name__)
def test_duplicate_entries_warn_alike_on_both_neighbours(Est):
    X, X_dup, y_reg, y_clf = _duplicate_neighbours()
    y = _target(Est, y_reg, y_clf)
    _, warns = _observe(lambda: Est(random_state=0), X, y)
    _, warns_dup = _observe(lambda: Est(random_state=0), X_dup, y)
    assert warns == warns_dup
    assert not [w for w in warns_dup if w[0] == "RuntimeWarning"]


@pytest.mark.parametrize("Est", SPARSE_ESTIMATORS, ids=lambda e: e.__name__)
def test_duplicate_entries_fit_alike_on_both_neighbours(Est):
    X, X_dup, y_reg, y_clf = _duplicate_neighbours()
    y = _target(Est, y_reg, y_clf)
    outcome, _ = _observe(lambda: Est(random_state=0), X, y)
    outcome_dup, _ = _observe(lambda: Est(random_state=0), X_dup, y)
    assert outcome == ("ok", True)  # the clean neighbour fits
    assert outcome_dup == outcome


@pytest.mark.parametrize("Est", SPARSE_ESTIMATORS, ids=lambda e: e.__name__)
def test_saturated_sparse_entry_fits_alike_on_both_neighbours(Est):
    # What the duplicates are once summed with saturation: one entry at the
    # largest float. Everything after validation must take it like any record.
    X, y_reg, y_clf = _one_hot_csr()
    X_max = _with_row(X, 0, [FMAX], [5])
    y = _target(Est, y_reg, y_clf)
    base = _observe(lambda: Est(random_state=0), X, y)
    assert base[0] == ("ok", True)
    assert _observe(lambda: Est(random_state=0), X_max, y) == base


def test_design_sums_duplicates_without_overflow_or_warning():
    # The solvers' row aggregates see the matrix's values (duplicates summed, a
    # sum past the float range saturated), never inf or NaN, and warn on no row.
    X, X_dup, _, _ = _duplicate_neighbours()
    X_dup = _with_row(X_dup, 1, [5e-324, 1e-310], [0, 12])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        design = LinearDesign(X_dup, fit_intercept=False)
        l2, l1 = design.row_norms(), design.row_l1_norms()
        scales = md._clip_scales(design, 3.0, 2.0)
        lq = md._row_feature_norms(design, 3.0)
    assert l2[0] == FMAX and l1[0] == FMAX and lq[0] == FMAX
    assert 0 < l2[1] < 1e-300 and 0 < l1[1] < 1e-300
    np.testing.assert_allclose(l2[2:], np.sqrt(2.0))
    np.testing.assert_allclose(l1[2:], 2.0)
    assert np.all(np.isfinite(scales)) and 0 < scales[0] < 1e-300
    assert np.all(scales[1:] == 1.0)


def test_row_clip_scales_clip_rows_past_the_float_range():
    # A row whose norm overflows is clipped to the bound like any other (it was
    # dropped: bound / inf = 0), and never exceeds it after rounding.
    X = np.array([[1.7e308, -1.7e308, 1.7e308], [FMAX, 0.0, 0.0], [1e300, 1e300, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # At bound 1e-10 the factors are deep subnormals (about 5 digits).
        for r, bound, rtol in (
            (2.0, 1.0, 1e-12),
            (3.0, 0.7, 1e-12),
            (1.0, 1e-10, 1e-4),
        ):
            s = row_clip_scales(X, r, bound)
            assert np.all(s > 0)
            # The solvers clip as x * s; the norm here rounds too (1e-14 slack).
            clipped = row_lr_norms(X * s[:, None], r)
            assert np.all(clipped <= bound * (1 + 1e-14))
            np.testing.assert_allclose(clipped, bound, rtol=rtol)


# --------------------------------------------------------------------------------
# NaN coefficients of shuffled mirror descent.


def _extreme_records():
    """Records that drove the default (squared) loss's gradient to +-inf."""
    X, y, _ = dense_data(n=300, d=5)
    cases = {}
    X1 = X.copy()
    X1[0, 0] = 1.7e308
    cases["x=1.7e308"] = (X1, y)
    y1 = y.copy()
    y1[0] = 1.7e308
    cases["y=1.7e308"] = (X, y1)
    # z = x . w near 1e300 and y = -FMAX: z - y overflows to inf, then inf * 0.
    X2, y2 = X.copy(), y.copy()
    X2[0], y2[0] = 1e300, -FMAX
    cases["x=1e300, y=-max"] = (X2, y2)
    return (X, y), cases


@pytest.mark.parametrize("scaling", ["private", "none"])
def test_shuffled_mirror_descent_coefficients_finite_on_both_neighbours(scaling):
    (X, y), cases = _extreme_records()
    for seed in range(20):

        def make(seed=seed):
            return skdpsco.GaussianWidthDPRegressor(
                algorithm="shuffled_mirror_descent",
                scaling=scaling,
                fit_intercept=False,
                random_state=seed,
            )

        base = _observe(make, X, y)
        assert base == (("ok", True), []), (seed, base)
        for name, (X_n, y_n) in cases.items():
            assert _observe(make, X_n, y_n) == base, (name, seed)


def test_shuffled_truncation_zeroes_infinite_gradients_without_nan():
    # Solver level: an inf derivative (squared loss, overflowing residual) on a
    # zero row or a huge row is dropped by truncation, not turned into NaN.
    X, y, _ = dense_data(n=300, d=5)
    X[0], y[0] = 1e300, -FMAX
    X[1], y[1] = 0.0, FMAX
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for seed in range(5):
            res = md.shuffled_mirror_descent(
                LinearDesign(X, False),
                y,
                get_loss("squared"),
                L2Ball(5, 1.0),
                p=2.0,
                budget=AlgorithmBudget(1.0, 1e-5, len(y)),
                rng=np.random.default_rng(seed),
            )
            assert np.all(np.isfinite(res.coef))


# --------------------------------------------------------------------------------
# Floating-point warnings that differ between neighbours.


def _neighbour_records(X):
    out = {}
    X1 = X.copy()
    X1[0] = SUBNORMAL_ROW
    out["subnormal"] = X1
    for value in (1e300, -1e300):
        X2 = X.copy()
        X2[0, 1] = value
        out[f"{value:g}"] = X2
    return out


def _warning_cases():
    cases = []
    for Est in ESTIMATORS:
        formats = ["dense", "csr"] if Est in SPARSE_ESTIMATORS else ["dense"]
        for scaling in ("private", "none"):
            for fmt in formats:
                cases.append(
                    pytest.param(
                        Est, scaling, fmt, id=f"{Est.__name__}-{scaling}-{fmt}"
                    )
                )
    return cases


@pytest.mark.parametrize("Est, scaling, fmt", _warning_cases())
def test_extreme_or_subnormal_record_warns_like_its_neighbour(Est, scaling, fmt):
    X, y_reg, y_clf = dense_data()
    y = _target(Est, y_reg, y_clf)
    conv = sp.csr_matrix if fmt == "csr" else np.asarray

    def make():
        return Est(scaling=scaling, random_state=0)

    base = _observe(make, conv(X), y)
    assert base[0] == ("ok", True)
    assert not [w for w in base[1] if w[0] == "RuntimeWarning"]
    for name, X_n in _neighbour_records(X).items():
        assert _observe(make, conv(X_n), y) == base, name


@pytest.mark.parametrize("Est", ESTIMATORS, ids=lambda e: e.__name__)
def test_a_raising_numpy_error_state_raises_on_no_neighbour(Est):
    # Under np.errstate(all="raise") (a common debugging setting) an underflow
    # on a subnormal record, or an overflow near the float range, raised on that
    # neighbour only: the fit fixes its own error state.
    X, y_reg, y_clf = dense_data()
    y = _target(Est, y_reg, y_clf)
    for X_n in (X, *_neighbour_records(X).values()):
        with np.errstate(all="raise"):
            Est(random_state=0).fit(X_n, y)


@pytest.mark.parametrize("algorithm", ["projection_gd", "l1_recovery_gd"])
@pytest.mark.parametrize(
    "Est",
    [skdpsco.SparseGradientDPRegressor, skdpsco.SparseGradientDPClassifier],
    ids=lambda e: e.__name__,
)
def test_sparse_row_l1_norms_warn_like_the_neighbour(Est, algorithm):
    # The l1 row norms of these oracles formed 1 / max|x_i|: it overflowed for a
    # sparse row whose largest entry is subnormal (after the private scaling),
    # on that neighbour only.
    X, y_reg, y_clf = dense_data()
    y = _target(Est, y_reg, y_clf)

    def make():
        return Est(algorithm=algorithm, random_state=0)

    base = _observe(make, sp.csr_matrix(X), y)
    assert base == (("ok", True), []), base
    for name, X_n in _neighbour_records(X).items():
        assert _observe(make, sp.csr_matrix(X_n), y) == base, name


@pytest.mark.parametrize(
    "algorithm",
    [
        "objective_perturbation",
        "mirror_descent",
        "phased_sgd",
        "shuffled_mirror_descent",
    ],
)
@pytest.mark.parametrize("constraint", ["l1", "l2"])
def test_gaussian_width_algorithms_warn_like_the_neighbour(algorithm, constraint):
    # Every algorithm of the mirror-descent solvers, with the raw records reaching
    # them (scaling="none"), including the 3-class multinomial gradients and rows
    # whose norm is past the float range.
    X, y_reg, y_clf = dense_data()
    y3 = np.digitize(X[:, 0], [-0.5, 0.5])
    records = _neighbour_records(X)
    X_big = X.copy()
    X_big[0] = 1.7e308
    records["row of 1.7e308"] = X_big
    for Est, y in (
        (skdpsco.GaussianWidthDPRegressor, y_reg),
        (skdpsco.GaussianWidthDPClassifier, y_clf),
        (skdpsco.GaussianWidthDPClassifier, y3),
    ):

        def make(Est=Est):
            return Est(
                algorithm=algorithm,
                constraint=constraint,
                scaling="none",
                fit_intercept=algorithm != "shuffled_mirror_descent",
                random_state=0,
            )

        base = _observe(make, X, y)
        assert base == (("ok", True), []), base
        for name, X_n in records.items():
            assert _observe(make, X_n, y) == base, (Est.__name__, name)


# --------------------------------------------------------------------------------
# The generator's state in the pickle.


def _generator_states(obj, seen=None):
    """Every generator-like object reachable from ``obj``: its state."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, np.random.Generator):
        return [obj.bit_generator.state]
    if isinstance(obj, np.random.BitGenerator):
        return [obj.state]
    if isinstance(obj, np.random.RandomState):
        return [obj.get_state(legacy=False)]
    if isinstance(obj, dict):
        children = list(obj.values())
    elif isinstance(obj, (list, tuple, set, frozenset)):
        children = list(obj)
    elif hasattr(obj, "__dict__"):
        children = list(vars(obj).values())
    else:
        return []
    return [s for child in children for s in _generator_states(child, seen)]


def _same_state(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


_TRANSFORMERS = (DPStandardScaler, DPRobustScaler)

_FRESH = {
    "Generator": lambda: np.random.default_rng(0),
    "RandomState": lambda: np.random.RandomState(0),
}


@pytest.mark.parametrize("kind", sorted(_FRESH))
@pytest.mark.parametrize(
    "Model",
    [skdpsco.HeavyTailedDPRidge, DPStandardScaler, DPRobustScaler],
    ids=lambda m: m.__name__,
)
def test_pickled_model_holds_no_post_fit_generator_state(Model, kind):
    X, y, _ = dense_data(n=500, d=3)
    passed = _FRESH[kind]()
    pristine = _generator_states(_FRESH[kind]())[0]
    model = Model(random_state=passed)
    model.fit(X) if Model in _TRANSFORMERS else model.fit(X, y)
    # The object passed in was not advanced: its next draw is a fresh one's.
    assert _same_state(_generator_states(passed)[0], pristine)
    assert copy.deepcopy(passed).random() == _FRESH[kind]().random()
    # Nothing reachable from the pickled model holds any other state.
    blob = pickle.dumps(model)
    states = _generator_states(pickle.loads(blob))
    assert states and all(_same_state(s, pristine) for s in states)
    # A second fit from the same object releases the same model (same noise).
    again = Model(random_state=passed)
    again.fit(X) if Model in _TRANSFORMERS else again.fit(X, y)
    assert pickle.dumps(again) == blob
