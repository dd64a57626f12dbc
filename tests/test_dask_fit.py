"""Fitting on dask collections on a real LocalCluster: the same model as in memory,
bit for bit, for every supported estimator x algorithm and three chunkings."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _dask_data import chunkings, raw_data

from skdpsco import (
    GaussianWidthDPRegressor,
    HeavyTailedDPLogistic,
    HeavyTailedDPRidge,
    SparseGradientDPClassifier,
    SparseGradientDPRegressor,
)

da = pytest.importorskip("dask.array")

N = 20_000


def _data(n=N):
    return raw_data(n, 3, [1.0, -0.5, 0.25, 0.0])


#: (estimator, target, parameters): every supported estimator x algorithm.
CASES = [
    (HeavyTailedDPRidge, "reg", {}),
    (HeavyTailedDPLogistic, "binary", {}),
    (HeavyTailedDPLogistic, "three", {}),
]


def _chunkings(X, y):
    return chunkings(X, y)


def _fit(Est, X, y, **params):
    est = Est(random_state=0, max_iter=6, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, y)


@pytest.mark.parametrize("scaling", ["private", "none"])
@pytest.mark.parametrize(
    "Est, target, params", CASES, ids=[f"{c[0].__name__}-{c[1]}" for c in CASES]
)
def test_dask_fits_are_the_numpy_fit_bit_for_bit(
    dask_client, Est, target, params, scaling
):
    X, targets = _data()
    y = targets[target]
    memory = _fit(Est, X, y, scaling=scaling, **params)
    assert np.all(memory.coef_ != 0)
    for name, Xd, yd in _chunkings(X, y):
        fitted = _fit(Est, Xd, yd, scaling=scaling, **params)
        np.testing.assert_array_equal(fitted.coef_, memory.coef_, err_msg=name)
        np.testing.assert_array_equal(
            fitted.intercept_, memory.intercept_, err_msg=name
        )
        assert fitted.privacy_spent_ == memory.privacy_spent_, name
        assert fitted.n_features_in_ == 4
        if target != "reg":
            np.testing.assert_array_equal(fitted.classes_, memory.classes_)


#: Output perturbation (the sparse-gradient default): a strong public penalty
#: keeps the certified solve's public iteration count small (at most 100).
_SPARSE_N = 9000
SPARSE_CASES = [
    (SparseGradientDPRegressor, "reg", {"alpha": 0.2 * _SPARSE_N}),
    (
        SparseGradientDPRegressor,
        "reg",
        {"alpha": 0.2 * _SPARSE_N, "loss": "squared_error", "target_bound": 2.0},
    ),
    (SparseGradientDPClassifier, "binary", {"C": 5.0 / _SPARSE_N}),
    (SparseGradientDPClassifier, "three", {"C": 5.0 / _SPARSE_N, "sparsity": 2}),
]


@pytest.mark.parametrize(
    "Est, target, params",
    SPARSE_CASES,
    ids=["huber", "squared", "binary", "three"],
)
def test_output_perturbation_on_dask_is_the_numpy_fit_bit_for_bit(
    dask_client, Est, target, params
):
    X, targets = _data(_SPARSE_N)
    y = targets[target]
    memory = Est(random_state=0, **params).fit(X, y)
    assert 1 < memory.n_iter_[0] <= 100
    assert np.all(memory.coef_ != 0)
    for name, Xd, yd in _chunkings(X, y):
        fitted = Est(random_state=0, **params).fit(Xd, yd)
        np.testing.assert_array_equal(fitted.coef_, memory.coef_, err_msg=name)
        np.testing.assert_array_equal(
            fitted.intercept_, memory.intercept_, err_msg=name
        )
        assert fitted.privacy_spent_ == memory.privacy_spent_, name
        np.testing.assert_array_equal(fitted.n_iter_, memory.n_iter_)
    lazy = memory.predict(da.from_array(X, chunks=(2500, 4)))
    np.testing.assert_array_equal(lazy.compute(), memory.predict(X))


def test_weights_public_scaling_and_several_targets(dask_client):
    X, targets = _data()
    weight = np.random.default_rng(5).uniform(0, 1, N)
    scaling = (X.mean(axis=0).round(), X.std(axis=0).round(1))
    Y = np.column_stack([targets["reg"], -targets["reg"] + 10.0])
    runs = [
        (HeavyTailedDPLogistic, targets["three"], {"class_weight": "balanced"}, None),
        (HeavyTailedDPLogistic, targets["binary"], {"scaling": scaling}, weight),
        (HeavyTailedDPRidge, Y, {}, weight),
    ]
    for Est, y, params, w in runs:
        est = Est(random_state=0, max_iter=4, **params)
        memory = est.fit(X, y, sample_weight=w)
        Xd = da.from_array(X, chunks=(5000, 4))
        yd = da.from_array(y, chunks=(7000,) + y.shape[1:])
        wd = None if w is None else da.from_array(w, chunks=6000)
        fitted = Est(random_state=0, max_iter=4, **params).fit(Xd, yd, sample_weight=wd)
        np.testing.assert_array_equal(fitted.coef_, memory.coef_)
        np.testing.assert_array_equal(fitted.intercept_, memory.intercept_)
        assert fitted.privacy_spent_ == memory.privacy_spent_


#: The gradient descents of the sparse-gradient family (Algorithms 1 and 2 of
#: Ghazi et al. as gradient oracles): every step one exact sum of the rows
#: clipped in l2 and l1; Laplace noise where delta = 0, the dense branch of
#: l1-recovery (few parameters).
GD_CASES = [
    (SparseGradientDPRegressor, "reg", {"algorithm": "projection_gd"}),
    (SparseGradientDPRegressor, "reg", {"algorithm": "projection_gd", "delta": 0.0}),
    (SparseGradientDPClassifier, "binary", {"algorithm": "projection_gd"}),
    (
        SparseGradientDPClassifier,
        "three",
        {"algorithm": "projection_gd", "sparsity": 2},
    ),
    (SparseGradientDPRegressor, "reg", {"algorithm": "l1_recovery_gd"}),
    (SparseGradientDPClassifier, "binary", {"algorithm": "l1_recovery_gd"}),
]


@pytest.mark.parametrize(
    "Est, target, params",
    GD_CASES,
    ids=["projection", "laplace", "binary", "three", "l1_dense", "l1_binary"],
)
def test_sparse_gradient_descents_on_dask_are_the_numpy_fit_bit_for_bit(
    dask_client, Est, target, params
):
    X, targets = _data(_SPARSE_N)
    y = targets[target]
    memory = Est(random_state=0, max_iter=4, **params).fit(X, y)
    assert np.all(memory.coef_ != 0)
    for name, Xd, yd in _chunkings(X, y):
        fitted = Est(random_state=0, max_iter=4, **params).fit(Xd, yd)
        np.testing.assert_array_equal(fitted.coef_, memory.coef_, err_msg=name)
        np.testing.assert_array_equal(
            fitted.intercept_, memory.intercept_, err_msg=name
        )
        assert fitted.privacy_spent_ == memory.privacy_spent_, name


def test_l1_recovery_compressed_sensing_branch_refuses_dask_input(dask_client):
    # n = 200 rows of 3000 features at epsilon = 1 over 30 steps: m = 53
    # measurements of 3001 parameters, a public choice refused on dask input
    # before the first step (nothing released, the estimator left as it was).
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((200, 3000)), rng.standard_normal(200)
    est = SparseGradientDPRegressor(
        algorithm="l1_recovery_gd", sparsity=1, scaling="none", random_state=0
    )
    with pytest.raises(TypeError, match=r"compressed-sensing branch here \(53 "):
        est.fit(da.from_array(X, chunks=(100, 3000)), da.from_array(y, chunks=100))
    assert not hasattr(est, "coef_")


def test_unsupported_algorithms_refuse_dask_input_naming_the_supported(dask_client):
    X, targets = _data(5000)
    Xd, yd = da.from_array(X, chunks=2000), da.from_array(targets["reg"], chunks=2000)
    supported = (
        r"use one of \['clipped_gd', 'dp_sgd', 'aclipped_sgd', 'r_aclipped_sgd'\]"
    )
    for algorithm in ("catoni_gd", "sample_aggregate"):
        est = HeavyTailedDPRidge(algorithm=algorithm, random_state=0)
        with pytest.raises(TypeError, match=supported):
            est.fit(Xd, yd)
        assert not hasattr(est, "coef_")
    sparse_supported = (
        r"use one of \['output_perturbation', 'projection_gd', 'l1_recovery_gd'\]"
    )
    with pytest.raises(TypeError, match=sparse_supported):
        SparseGradientDPRegressor(algorithm="bias_reduced_sgd").fit(Xd, yd)
    with pytest.raises(
        TypeError, match=r"use one of \['objective_perturbation', 'mirror_descent'\]"
    ):
        GaussianWidthDPRegressor().fit(Xd, yd)


def test_predictions_on_dask_are_lazy_and_equal_numpy(dask_client):
    X, targets = _data(9000)
    Xd = da.from_array(X, chunks=(2500, 4))
    for Est, target in (
        (HeavyTailedDPRidge, "reg"),
        (HeavyTailedDPLogistic, "binary"),
        (HeavyTailedDPLogistic, "three"),
    ):
        y = targets[target]
        est = _fit(Est, X, y)
        methods = ["predict"]
        if target != "reg":
            methods += ["decision_function", "predict_proba", "predict_log_proba"]
        for method in methods:
            lazy = getattr(est, method)(Xd)
            assert isinstance(lazy, da.Array), method
            np.testing.assert_array_equal(lazy.compute(), getattr(est, method)(X))
        score = est.score(Xd, da.from_array(y, chunks=3000))
        assert isinstance(score, float)
        assert score == pytest.approx(est.score(X, y), rel=1e-12, abs=1e-12)


def test_invalid_dask_input_is_refused_before_any_release(dask_client):
    X, targets = _data(5000)
    sparse_chunks = da.from_array(X, chunks=2000).map_blocks(sp.csr_matrix)
    for est in (SparseGradientDPRegressor(), HeavyTailedDPRidge()):
        with pytest.raises(TypeError, match="dask array of sparse chunks"):
            est.fit(sparse_chunks, da.from_array(targets["reg"], chunks=2000))
        assert not hasattr(est, "coef_")
    bad = X.copy()
    bad[4321, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity"):
        HeavyTailedDPRidge().fit(da.from_array(bad, chunks=2000), targets["reg"])
    with pytest.raises(ValueError, match=r"sample_weight must lie in \[0, 1\]"):
        HeavyTailedDPRidge().fit(
            da.from_array(X, chunks=2000),
            da.from_array(targets["reg"], chunks=2000),
            sample_weight=da.from_array(np.full(5000, 2.0), chunks=2000),
        )
    # A non-finite target (numpy or dask) is refused as in memory: in a block sum
    # it would turn 4096 records' contribution into NaN.
    for value in (np.nan, np.inf):
        y = targets["reg"].copy()
        y[4321] = value
        for target in (y, da.from_array(y, chunks=1500)):
            with pytest.raises(ValueError, match="Input y contains NaN or infinity"):
                HeavyTailedDPRidge().fit(da.from_array(X, chunks=2000), target)
