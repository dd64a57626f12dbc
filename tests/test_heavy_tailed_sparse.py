"""scipy.sparse input to the heavy-tailed estimators (issue 18, item 2).

Every algorithm but ``sample_aggregate`` reads ``X`` through the row-chunked
design, so a CSR or CSC matrix fits as it is: the same model and the same spend
as the dense matrix, no dense copy, and a pipeline whose encoder emits sparse or
dense output fits either way.
"""

import tracemalloc
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from _sparse_input import assert_fit_leaves_matrix_unchanged
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

from skdpsco import HeavyTailedDPLogistic, HeavyTailedDPRidge
from skdpsco._estimators._heavy_tailed import _ALGORITHMS
from skdpsco.preprocessing import DPStandardScaler

ESTIMATORS = [HeavyTailedDPRidge, HeavyTailedDPLogistic]
SPARSE_ALGORITHMS = [name for name in _ALGORITHMS if name != "sample_aggregate"]


def _sparse_data(n=600, d=6, seed=0):
    """Half-zero ``X`` with a regression and a three-class target."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X[np.abs(X) < 0.7] = 0.0
    y = X @ np.linspace(1.0, -1.0, d) + rng.standard_t(3, size=n)
    labels = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    return X, y, labels


def _target(Est, y, labels):
    return labels if Est is HeavyTailedDPLogistic else y


@pytest.mark.filterwarnings("ignore:The default trim_count")
@pytest.mark.parametrize("Est", ESTIMATORS, ids=lambda E: E.__name__)
@pytest.mark.parametrize("algorithm", SPARSE_ALGORITHMS)
def test_csr_csc_and_dense_give_the_same_model_and_spend(Est, algorithm):
    X, y, labels = _sparse_data()
    target = _target(Est, y, labels)
    for params in (
        {"scaling": "none"},
        {"scaling": "private", "fit_intercept": False},
        {"scaling": (0.0, 2.0)},
    ):
        est = Est(algorithm=algorithm, max_iter=3, random_state=0, **params)
        dense, csr, csc = (
            clone(est).fit(Xf, target) for Xf in (X, sp.csr_matrix(X), sp.csc_matrix(X))
        )
        # CSC is turned into CSR before anything is read: bit for bit.
        np.testing.assert_array_equal(csc.coef_, csr.coef_)
        np.testing.assert_array_equal(csc.intercept_, csr.intercept_)
        # Same noise up to the dense path's exact sums: its scaling moments and
        # clipped gradients pay the public summation slack (a relative 1e-9 to
        # 1e-5 on their sensitivities) and are rounded to a grid; sparse sums are
        # float sums.
        np.testing.assert_allclose(csr.coef_, dense.coef_, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(
            csr.intercept_, dense.intercept_, rtol=1e-7, atol=1e-9
        )
        assert csr.privacy_spent_ == csc.privacy_spent_

        def spend(est):
            spent = est.privacy_spent_
            return spent.epsilon, spent.delta, spent.rho, len(spent.mechanisms)

        assert spend(csr) == spend(dense)
        assert csr.n_iter_ == dense.n_iter_ == csc.n_iter_


@pytest.mark.parametrize("Est", ESTIMATORS, ids=lambda E: E.__name__)
def test_default_private_scaling_spends_what_dense_input_spends(Est):
    # Sparse input is not centred (fewer feature statistics, in the same share
    # of the budget), so the model differs; the total, the target's statistics
    # and every mechanism of the algorithm are those of dense input.
    X, y, labels = _sparse_data(n=3000)
    target = _target(Est, y, labels)
    dense = Est(random_state=1).fit(X, target).privacy_spent_
    sparse = Est(random_state=1).fit(sp.csr_matrix(X), target).privacy_spent_
    assert (sparse.epsilon, sparse.delta, sparse.rho, sparse.accountant) == (
        dense.epsilon,
        dense.delta,
        dense.rho,
        dense.accountant,
    )
    assert sparse.epsilon <= 1.0

    def rest(spent):
        return [m for m in spent.mechanisms if not m.name.startswith("feature")]

    assert len(rest(sparse)) >= 1 and rest(sparse) == rest(dense)
    assert len(sparse.mechanisms) < len(dense.mechanisms)
    dense = Est(random_state=1).fit(X, target)
    sparse = Est(random_state=1).fit(sp.csr_matrix(X), target)
    np.testing.assert_array_equal(sparse.feature_center_, 0.0)
    assert not np.array_equal(sparse.coef_, dense.coef_)
    # The same data, the same model quality within the noise.
    assert abs(sparse.score(X, target) - dense.score(X, target)) < 0.05


def _firms(seed, n=6000):
    """A frame with an 11-level string category and two numeric columns."""
    rng = np.random.default_rng(seed)
    firms = np.array([f"firm{k}" for k in range(11)])
    cat = rng.integers(0, 11, size=n)
    x = rng.normal(size=(n, 2)) * [2.0, 0.5] + [1.0, -0.5]
    y = np.linspace(-2, 2, 11)[cat] + x @ [1.5, -2.0] + rng.standard_t(3, size=n)
    frame = pd.DataFrame({"firm": firms[cat], "a": x[:, 0], "b": x[:, 1]})
    return frame, y, firms


def _pipeline(firms, sparse, estimator):
    encoder = OneHotEncoder(categories=[firms], sparse_output=sparse)
    columns = ColumnTransformer(
        [("firm", encoder, ["firm"]), ("num", "passthrough", ["a", "b"])],
        sparse_threshold=1.0 if sparse else 0.0,
    )
    return make_pipeline(columns, estimator)


@pytest.mark.parametrize("Est", ESTIMATORS, ids=lambda E: E.__name__)
def test_one_hot_and_numeric_sparse_fit_reaches_the_dense_score(Est):
    # Measured (R^2 / accuracy, seeds 0-2, clipped_gd, epsilon = 1): ridge
    # sparse 0.775 / 0.808 / 0.796 vs dense 0.787 / 0.808 / 0.810; logistic
    # 0.867 / 0.880 / 0.873 vs 0.874 / 0.885 / 0.882.
    gaps = []
    for seed in range(3):
        frame, y, firms = _firms(seed)
        if Est is HeavyTailedDPLogistic:
            y = (y > np.median(y)).astype(int)
        scores = {}
        for sparse in (True, False):
            pipe = _pipeline(firms, sparse, Est(random_state=seed)).fit(frame, y)
            assert sp.issparse(pipe[0].transform(frame[:3])) == sparse
            scores[sparse] = pipe.score(frame, y)
        assert scores[True] > (0.75 if Est is HeavyTailedDPRidge else 0.85)
        gaps.append(scores[False] - scores[True])
    assert max(gaps) < 0.02 and np.mean(gaps) < 0.01


@pytest.mark.parametrize("Est", ESTIMATORS, ids=lambda E: E.__name__)
def test_sample_aggregate_refuses_sparse_naming_the_alternatives(Est):
    X, y, labels = _sparse_data()
    est = Est(algorithm="sample_aggregate")
    assert not est.__sklearn_tags__().input_tags.sparse
    assert Est().__sklearn_tags__().input_tags.sparse
    with pytest.raises(TypeError) as info:
        est.fit(sp.csr_matrix(X), _target(Est, y, labels))
    message = str(info.value)
    assert f"{Est.__name__}(algorithm='sample_aggregate')" in message
    assert str(SPARSE_ALGORITHMS) in message
    assert "OneHotEncoder(sparse_output=False)" in message
    assert "sparse_threshold=0" in message
    assert not hasattr(est, "coef_")


def test_other_refusals_name_sparse_output_false():
    with pytest.raises(TypeError, match=r"sparse_output=False.*sparse_threshold=0"):
        DPStandardScaler().fit(sp.csr_matrix(np.eye(5)))


def test_public_nonzero_center_needs_dense_input():
    # The sparse fit does not centre: a centre would shift the released
    # intercept without having been applied.
    X, y, _ = _sparse_data()
    est = HeavyTailedDPRidge(scaling=(0.5, 1.0), random_state=0)
    with pytest.raises(ValueError, match="nonzero center needs dense X"):
        est.fit(sp.csr_matrix(X), y)
    assert not hasattr(est, "coef_")
    assert np.isfinite(est.fit(X, y).intercept_)


@pytest.mark.parametrize("Est", ESTIMATORS, ids=lambda E: E.__name__)
def test_a_model_fitted_on_dense_input_predicts_sparse_input(Est):
    X, y, labels = _sparse_data()
    fitted = Est(random_state=0).fit(X, _target(Est, y, labels))
    for fmt in ("csr", "csc"):
        X_sparse = sp.csr_matrix(X).asformat(fmt)
        if Est is HeavyTailedDPLogistic:
            np.testing.assert_array_equal(fitted.predict(X_sparse), fitted.predict(X))
            scores, expected = fitted.predict_proba(X_sparse), fitted.predict_proba(X)
        else:
            scores, expected = fitted.predict(X_sparse), fitted.predict(X)
        np.testing.assert_allclose(scores, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "algorithm, max_iter",
    [("clipped_gd", None), ("catoni_gd", 2), ("dp_sgd", 1), ("truncated_mean_gd", 2)],
)
def test_wide_sparse_input_is_never_densified(algorithm, max_iter):
    # A dense copy of X would take n * d * 8 = 320 MB; the fit (scaling copy,
    # row norms, predictions, one densified row chunk) stays near 2 MiB chunks
    # plus O(n) vectors (about 8 MB measured).
    n, d = 10_000, 4_000
    X = sp.random(n, d, density=0.001, format="csr", random_state=1)
    rng = np.random.default_rng(2)
    y = np.asarray(X @ rng.normal(size=d)).ravel() + rng.normal(size=n)
    est = HeavyTailedDPRidge(algorithm=algorithm, max_iter=max_iter, random_state=0)
    tracemalloc.start()
    try:
        est.fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < n * d * 8 / 20
    assert est.coef_.shape == (d,) and np.all(np.isfinite(est.coef_))


@pytest.mark.parametrize("algorithm", ["clipped_gd", "catoni_gd", "dp_sgd"])
def test_fit_leaves_the_callers_matrix_unchanged(algorithm):
    X, y, _ = _sparse_data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for fmt in ("csr", "csc"):
            assert_fit_leaves_matrix_unchanged(
                HeavyTailedDPRidge(algorithm=algorithm, max_iter=2, random_state=0),
                sp.csr_matrix(X).asformat(fmt),
                y,
            )
