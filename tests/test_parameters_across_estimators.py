"""One name and one meaning per parameter across the public estimators.

The table in doc/parameters.rst states them; these tests hold the estimators to it:
every estimator takes ``verbose`` and prints the same release line; ``max_iter`` is
refused where an algorithm's theorem fixes the number of passes; ``alpha`` is
scikit-learn Ridge's alpha (and ``C`` LogisticRegression's C) in every family.
"""

import inspect
import re

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import algorithms, dense_data, noiseless_fit, public_estimators
from sklearn.linear_model import Ridge

from skdpsco import (
    GaussianWidthDPClassifier,
    GaussianWidthDPRegressor,
    HeavyTailedDPLogistic,
    HeavyTailedDPRidge,
    SparseGradientDPClassifier,
    SparseGradientDPRegressor,
)

#: Names no public estimator may use any more (each concept has one name).
RETIRED = {
    "feature_norm_bound": "row_norm_bound",
    "gradient_moment_bound": "gradient_scale",
    "huber_delta": "huber_threshold",
    "confidence": "failure_prob",
}

RELEASE_LINE = re.compile(
    r"^\[(?P<name>\w+)\] algorithm='(?P<algorithm>\w+)': released after \d+ "
    r"iterations; epsilon spent (?P<spent>[0-9.e+-]+) of (?P<total>[0-9.e+-]+)$"
)


def _params(Est):
    return set(inspect.signature(Est.__init__).parameters) - {"self"}


@pytest.mark.parametrize("Est", public_estimators(), ids=lambda E: E.__name__)
def test_one_name_per_concept(Est):
    params = _params(Est)
    assert {"verbose", "max_iter", "random_state", "scaling"} <= params
    assert not params & set(RETIRED), f"{Est.__name__} uses a retired name"
    if "loss" in params:
        options = Est._parameter_constraints["loss"][0].options
        assert "squared" not in options and "squared_error" in options


@pytest.mark.parametrize("Est", public_estimators(), ids=lambda E: E.__name__)
def test_verbose_prints_one_release_line_in_the_users_units(Est, capsys):
    X, y_reg, y_clf = dense_data(n=600)
    y = y_clf if Est._is_dp_classifier else y_reg
    Est(epsilon=2.0, verbose=1, random_state=0).fit(X, y)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    match = RELEASE_LINE.match(last)
    assert match, last
    assert match["name"] == Est.__name__
    assert float(match["total"]) == 2.0
    assert 0 < float(match["spent"]) <= 2.0


@pytest.mark.parametrize("Est", public_estimators(), ids=lambda E: E.__name__)
def test_verbose_zero_prints_nothing(Est, capsys):
    X, y_reg, y_clf = dense_data(n=600)
    Est(random_state=0).fit(X, y_clf if Est._is_dp_classifier else y_reg)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    "Est, algorithm",
    [
        (HeavyTailedDPRidge, "sample_aggregate"),
        (GaussianWidthDPRegressor, "phased_sgd"),
        (GaussianWidthDPRegressor, "shuffled_mirror_descent"),
        (SparseGradientDPRegressor, "bias_reduced_sgd"),
        (SparseGradientDPClassifier, "boosted_sgd"),
        (SparseGradientDPRegressor, "sparse_exponential"),
    ],
)
def test_max_iter_is_refused_where_the_theorem_fixes_the_passes(Est, algorithm):
    X, y_reg, y_clf = dense_data(n=50)
    est = Est(algorithm=algorithm, max_iter=5, random_state=0)
    with pytest.raises(ValueError, match="leave max_iter=None"):
        est.fit(X, y_clf if Est._is_dp_classifier else y_reg)
    assert not hasattr(est, "coef_")


def test_alpha_is_ridges_alpha_in_every_regressor():
    # In the non-private limit each regressor minimises
    # (1/n) sum loss + alpha / (2n) ||w||^2 like Ridge(alpha): with a huge
    # feasible set and no clipping, the same alpha gives Ridge's coefficients
    # (Ridge with a penalised intercept column where the family penalises it).
    X, y, _ = dense_data(n=300, d=3)
    alpha = 30.0
    ridge = Ridge(alpha=alpha).fit(X, y)
    ht = noiseless_fit(HeavyTailedDPRidge, X, y, alpha=alpha, max_iter=2000)
    np.testing.assert_allclose(ht.coef_, ridge.coef_, atol=2e-3)
    # Penalised intercept: Ridge without intercept on [X, 1].
    X1 = np.column_stack([X, np.ones(len(X))])
    ridge1 = Ridge(alpha=alpha, fit_intercept=False).fit(X1, y)
    gw = noiseless_fit(
        GaussianWidthDPRegressor,
        X,
        y,
        alpha=alpha,
        constraint="l2",
        radius=1e3,
        intercept_bound=1e3,
        row_norm_bound=1e3,
        target_bound=1e3,
        loss="squared_error",
        tol=1e-10,
    )
    np.testing.assert_allclose(gw.coef_, ridge1.coef_[:3], atol=2e-3)
    assert gw.intercept_ == pytest.approx(ridge1.coef_[3], abs=2e-3)


@pytest.mark.parametrize(
    "Est, params",
    [
        # 1 / (C n) overflows: NaN coefficients (projection_gd), int(NaN) or
        # OverflowError deep in a solver.
        (SparseGradientDPClassifier, dict(algorithm="projection_gd", C=1e-320)),
        (GaussianWidthDPClassifier, dict(algorithm="objective_perturbation", C=1e-320)),
        (HeavyTailedDPLogistic, dict(algorithm="truncated_mean_gd", C=1e-320)),
        # alpha / n is subnormal: division by zero in the certified solve's plan.
        (
            SparseGradientDPRegressor,
            dict(algorithm="output_perturbation", alpha=1e-320),
        ),
        (HeavyTailedDPRidge, dict(algorithm="truncated_mean_gd", alpha=1e-320)),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_extreme_ridge_strengths_are_refused_by_name(Est, params):
    X, y_reg, y_clf = dense_data(n=50)
    est = Est(epsilon=1.0, random_state=0, **params)
    name = "C" if "C" in params else "alpha"
    with pytest.raises(ValueError, match=f"{name}=1e-320 gives the mean-scaled"):
        est.fit(X, y_clf if Est._is_dp_classifier else y_reg)
    assert not hasattr(est, "coef_")


@pytest.mark.parametrize(
    "params, chosen",
    [
        ({}, "phased_sgd"),
        ({"loss": "squared_error"}, "objective_perturbation"),
        ({"alpha": 1.0}, "objective_perturbation"),
        ({"p": 1.5, "epsilon": 1.0}, "mirror_descent"),
        ({"p": 1.5, "epsilon": 2.0, "constraint": "lp"}, "objective_perturbation"),
    ],
)
def test_auto_says_which_algorithm_it_picks_and_why(params, chosen, capsys):
    X, y, _ = dense_data(n=600)
    est = GaussianWidthDPRegressor(verbose=1, random_state=0, **params).fit(X, y)
    first, *_, last = capsys.readouterr().out.strip().splitlines()
    assert first.startswith(
        f"[GaussianWidthDPRegressor] algorithm='auto' runs '{chosen}': "
    )
    assert RELEASE_LINE.match(last)["algorithm"] == chosen
    assert est.algorithm == "auto"


@pytest.mark.parametrize(
    "Est",
    [E for E in public_estimators() if E._is_dp_classifier],
    ids=lambda E: E.__name__,
)
def test_sparsify_and_densify_as_in_logistic_regression(Est):
    import pickle

    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression

    X, _, y = dense_data(n=600)
    est = Est(epsilon=2.0, random_state=0).fit(X, y)
    dense_coef = est.coef_.copy()
    proba, labels = est.predict_proba(X), est.predict(X)
    assert est.sparsify() is est and sp.issparse(est.coef_)
    # The same methods and behaviour as scikit-learn's linear classifier.
    ref = LogisticRegression().fit(X, y).sparsify()
    assert type(est.coef_) is type(ref.coef_)
    np.testing.assert_array_equal(est.coef_.toarray(), dense_coef)
    np.testing.assert_allclose(est.predict_proba(X), proba, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(est)).predict(X), labels)
    assert est.densify() is est and isinstance(est.coef_, np.ndarray)
    np.testing.assert_array_equal(est.coef_, dense_coef)


def _sparse_configurations():
    """(estimator, algorithm) pairs that fit on scipy.sparse X."""
    return [
        (Est, alg)
        for Est in public_estimators()
        for alg in algorithms(Est)
        if Est(algorithm=alg).__sklearn_tags__().input_tags.sparse
    ]


@pytest.mark.parametrize(
    "Est, algorithm",
    _sparse_configurations(),
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_a_public_nonzero_center_is_refused_on_sparse_input(Est, algorithm):
    """Sparse input is scaled, never centred (the zeros stay zeros), so a public
    nonzero centre would be ignored by the fit yet shift the released intercept by
    ``-c . coef``. Every family refuses it, from public inputs, before any release."""
    X, y_reg, y_clf = dense_data(n=600)
    X[np.abs(X) < 0.8] = 0.0
    y = y_clf if Est._is_dp_classifier else y_reg
    est = Est(algorithm=algorithm, scaling=(0.5, 2.0), random_state=0)
    with pytest.raises(ValueError, match="nonzero center needs dense X") as info:
        est.fit(sp.csr_matrix(X), y)
    assert str(info.value) == (
        f"{Est.__name__}: scaling=(center, scale) with a nonzero center needs "
        "dense X (sparse input is scaled without centring); pass center=0 or "
        "dense X."
    )
    assert not hasattr(est, "coef_")


@pytest.mark.parametrize(
    "Est",
    sorted({E for E, _ in _sparse_configurations()}, key=lambda E: E.__name__),
    ids=lambda E: E.__name__,
)
def test_a_public_zero_center_gives_sparse_input_the_dense_model(Est):
    """With a public ``(0, scale)`` nothing is centred on either input: sparse and
    dense ``X`` give the same released model (to float rounding), intercept
    included."""
    X, y_reg, y_clf = dense_data(n=600)
    X[np.abs(X) < 0.8] = 0.0
    y = y_clf if Est._is_dp_classifier else y_reg
    models = [
        Est(epsilon=2.0, scaling=(0.0, 2.0), random_state=0).fit(Xin, y)
        for Xin in (X, sp.csr_matrix(X))
    ]
    for name in ("coef_", "intercept_"):
        a, b = (np.atleast_1d(getattr(m, name)) for m in models)
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
        assert np.all(np.isfinite(a)) and np.any(a != 0)
