"""total_privacy_spent over composites: Pipeline, searches, cross_validate, parallel."""

import math
import warnings

import numpy as np
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    RandomizedSearchCV,
    cross_validate,
)
from sklearn.multiclass import OneVsRestClassifier
from sklearn.pipeline import FeatureUnion, Pipeline
from sklearn.preprocessing import FunctionTransformer

from skdpsco import HeavyTailedDPLogistic, HeavyTailedDPRidge
from skdpsco.exceptions import PrivacyLeakWarning
from skdpsco.preprocessing import DPStandardScaler
from skdpsco.privacy import (
    MechanismRecord,
    PrivacySpent,
    account_records,
    total_privacy_spent,
)

DELTA = 1e-5


def _classification(n=300, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(2.0, 1.5, size=(n, d))
    y = (X[:, 0] - 2.0 + 0.5 * rng.normal(size=n) > 0).astype(int)
    return X, y


def _logistic(**params):
    return HeavyTailedDPLogistic(max_iter=10, classes=[0, 1], random_state=0, **params)


def test_pipeline_scaler_and_logistic_totals_one():
    X, y = _classification(n=2000)
    pipe = Pipeline(
        [
            ("scale", DPStandardScaler(epsilon=0.5, random_state=0)),
            ("clf", HeavyTailedDPLogistic(epsilon=0.5, classes=[0, 1], random_state=0)),
        ]
    ).fit(X, y)
    accuracy = (pipe.predict(X) == y).mean()
    assert accuracy > 0.8
    parts = [pipe[0].privacy_spent_, pipe[1].privacy_spent_]
    assert all(p.epsilon <= 0.5 * (1 + 1e-9) and p.delta == DELTA for p in parts)
    total = total_privacy_spent(pipe)
    assert total.delta == pytest.approx(2 * DELTA, rel=1e-14)
    assert max(p.epsilon for p in parts) <= total.epsilon <= 1.0 + 1e-9
    # Every mechanism is Gaussian: the accountant composes them exactly (GDP) at
    # delta = 2e-5, which beats the basic sum 0.5 + 0.5.
    joint, _, how = account_records(parts[0].mechanisms + parts[1].mechanisms, 2e-5)
    assert how == "gdp" and total.accountant == "gdp"
    assert total.epsilon == joint
    assert total.epsilon == pytest.approx(0.6943, abs=5e-4)
    # At the parts' own delta (1e-5) the joint GDP total is still below 1.
    assert total_privacy_spent(pipe, delta=DELTA).epsilon < 1.0


def _grid_search(**kwargs):
    X, y = _classification()
    grid = {"epsilon": [0.25, 0.5, 1.0], "C": [0.1, 1.0, 10.0]}
    search = GridSearchCV(_logistic(), grid, cv=KFold(5), **kwargs)
    return search.fit(X, y)


def test_grid_search_3x3_with_5_folds_is_45_fits_plus_the_refit():
    search = _grid_search()
    assert len(search.cv_results_["params"]) == 9 and search.n_splits_ == 5
    with pytest.warns(PrivacyLeakWarning, match="best_params_") as record:
        total = total_privacy_spent(search)
    assert not any("splitter" in str(w.message) for w in record)  # KFold: indices
    refit = search.best_estimator_.privacy_spent_
    # Independent computation 1: basic composition of 45 fold fits at their claimed
    # budgets (3 epsilons x 3 Cs x 5 folds) and the refit's exact spend.
    basic_eps = 5 * 3 * (0.25 + 0.5 + 1.0) + refit.epsilon
    basic_delta = 45 * DELTA + refit.delta
    assert total.epsilon == pytest.approx(basic_eps, rel=1e-12)
    assert total.delta == pytest.approx(basic_delta, rel=1e-12)
    # Independent computation 2: the accountant over 45 approx-DP records and the
    # refit's Gaussian records.
    records = [
        MechanismRecord("fold fit", "approx_dp", epsilon=e, delta=DELTA)
        for e in (0.25, 0.5, 1.0)
        for _ in range(3 * 5)
    ] + list(refit.mechanisms)
    eps, _, how = account_records(records, basic_delta)
    assert how == "gdp+basic"
    assert total.epsilon == pytest.approx(eps, rel=1e-12)
    assert total.epsilon == pytest.approx(26.25 + refit.epsilon, rel=1e-12)
    counts = [r.count for r in total.mechanisms if r.kind == "approx_dp"]
    assert sum(counts) == 45


def test_grid_search_without_refit_and_with_stratified_folds():
    X, y = _classification()
    grid = {"epsilon": [0.25, 0.5, 1.0], "C": [0.1, 1.0, 10.0]}
    search = GridSearchCV(_logistic(), grid, cv=5, refit=False).fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match="splitter also reads the data"):
        total = total_privacy_spent(search)
    assert total.epsilon == pytest.approx(26.25, rel=1e-12)
    assert total.delta == pytest.approx(45 * DELTA, rel=1e-12)


def test_randomized_search_over_a_pipeline():
    X, y = _classification()
    pipe = Pipeline(
        [("scale", DPStandardScaler(epsilon=0.5, random_state=0)), ("clf", _logistic())]
    )
    search = RandomizedSearchCV(
        pipe,
        {"clf__epsilon": [0.25, 0.5, 1.0], "scale__epsilon": [0.1, 0.2]},
        n_iter=4,
        cv=KFold(3),
        random_state=0,
    ).fit(X, y)
    with pytest.warns(PrivacyLeakWarning):
        total = total_privacy_spent(search)
    claimed = math.fsum(
        3 * (p["clf__epsilon"] + p["scale__epsilon"])
        for p in search.cv_results_["params"]
    )
    refit = total_privacy_spent(search.best_estimator_)
    assert total.epsilon == pytest.approx(claimed + refit.epsilon, rel=1e-12)
    assert total.delta == pytest.approx(4 * 3 * 2 * DELTA + 2 * DELTA, rel=1e-12)


def test_cross_validate_result_is_sequential_composition():
    X, y = _classification()
    result = cross_validate(
        _logistic(epsilon=0.5), X, y, cv=KFold(4), return_estimator=True
    )
    with pytest.warns(PrivacyLeakWarning) as caught:
        total = total_privacy_spent(result)
    messages = " ".join(str(w.message) for w in caught)
    assert "scores" in messages and "StratifiedKFold" in messages
    expected = total_privacy_spent(list(result["estimator"]))
    assert total == expected
    assert total.delta == pytest.approx(4 * DELTA)
    assert 0.5 < total.epsilon <= 2.0
    with pytest.raises(TypeError, match="return_estimator"):
        total_privacy_spent(cross_validate(_logistic(), X, y, cv=KFold(2)))


def test_lists_of_composites_add_up():
    X, y = _classification()
    search = _grid_search()
    result = cross_validate(_logistic(), X, y, cv=KFold(2), return_estimator=True)
    pipe = Pipeline(
        [("scale", DPStandardScaler(epsilon=0.3, random_state=0)), ("clf", _logistic())]
    ).fit(X, y)
    with pytest.warns(PrivacyLeakWarning):
        parts = [total_privacy_spent(o) for o in (search, result, pipe)]
        total = total_privacy_spent([search, result, pipe])
    assert total.delta == pytest.approx(sum(p.delta for p in parts), rel=1e-12)
    assert total.epsilon <= sum(p.epsilon for p in parts) * (1 + 1e-12)
    assert total.epsilon >= max(p.epsilon for p in parts)


def test_disjoint_parts_compose_in_parallel():
    X, y = _classification(n=400)
    a = _logistic(epsilon=0.5).fit(X[:200], y[:200])
    b = _logistic(epsilon=1.0).fit(X[200:], y[200:])
    total = total_privacy_spent([a, b], disjoint=True)
    assert total.accountant == "parallel"
    assert total.delta == DELTA
    assert total.epsilon == b.privacy_spent_.epsilon
    sequential = total_privacy_spent([a, b])
    assert sequential.epsilon > total.epsilon
    # A part made of two fits on the same records is totalled sequentially first.
    c = DPStandardScaler(epsilon=0.3, random_state=0).fit(X[:200])
    nested = total_privacy_spent([[a, c], b], disjoint=True)
    inner = total_privacy_spent([a, c], delta=2 * DELTA)
    assert nested.delta == 2 * DELTA
    assert nested.epsilon == max(
        inner.epsilon, total_privacy_spent(b, delta=2 * DELTA).epsilon
    )
    result = cross_validate(_logistic(), X, y, cv=KFold(2), return_estimator=True)
    for overlapping in (result, Pipeline([("m", a)]), a.privacy_spent_):
        with pytest.raises(TypeError, match="disjoint"):
            total_privacy_spent(overlapping, disjoint=True)


def test_column_transformer_and_feature_union_count_their_dp_steps():
    X, y = _classification()
    columns = ColumnTransformer(
        [
            ("dp", DPStandardScaler(epsilon=0.25, random_state=0), [0, 1]),
            ("id", "passthrough", [2]),
        ]
    )
    union = FeatureUnion(
        [
            ("dp", DPStandardScaler(epsilon=0.25, random_state=1)),
            ("tanh", FunctionTransformer(np.tanh)),
        ]
    )
    for front in (columns, union):
        pipe = Pipeline([("front", front), ("clf", _logistic(epsilon=0.5))])
        pipe.fit(X, y)
        total = total_privacy_spent(pipe)
        assert total.delta == pytest.approx(2 * DELTA)
        assert 0.5 < total.epsilon <= 0.75 * (1 + 1e-9)


def test_unknown_wrappers_and_unfitted_composites_are_refused():
    X, y = _classification()
    wrapped = Pipeline(
        [("ovr", OneVsRestClassifier(HeavyTailedDPRidge(epsilon=0.5)))]
    ).fit(X, y)
    with pytest.raises(TypeError, match="cannot count"):
        total_privacy_spent(wrapped)
    grid = {"estimator__epsilon": [0.5, 1.0]}
    search = GridSearchCV(OneVsRestClassifier(HeavyTailedDPRidge()), grid, cv=KFold(2))
    with pytest.raises(TypeError, match="not fitted"):
        total_privacy_spent(search)
    search.fit(X, y)
    with pytest.raises(TypeError, match="cannot count"):
        total_privacy_spent(search)
    unfitted = Pipeline([("s", DPStandardScaler()), ("clf", _logistic())])
    with pytest.raises(TypeError, match="privacy_spent_"):
        total_privacy_spent(unfitted)


def test_existing_inputs_keep_working():
    rec = MechanismRecord("mean", "gaussian", sensitivity=1.0, scale=5.0)
    a = PrivacySpent.from_records([rec], delta=1e-6)
    assert total_privacy_spent(a) == PrivacySpent.from_records([rec], 1e-6)
    with pytest.raises(TypeError, match="privacy_spent_"):
        total_privacy_spent(object())


def test_steps_that_learn_without_a_budget_are_flagged():
    # scikit-learn's StandardScaler and PCA release exact statistics of the records
    # (and change every transformed row when one record changes): the total cannot
    # cover them, and says so; stateless steps pass silently.
    from sklearn.decomposition import PCA
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, StandardScaler

    X, y = _classification()
    leaky = make_pipeline(StandardScaler(), PCA(2), _logistic(epsilon=1.0)).fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match="PCA.*StandardScaler"):
        total = total_privacy_spent(leaky)
    assert total.epsilon == pytest.approx(leaky[-1].privacy_spent_.epsilon)
    clean = make_pipeline(FunctionTransformer(), _logistic(epsilon=1.0)).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        total_privacy_spent(clean)


def test_encoders_with_public_categories_are_not_flagged():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    rng = np.random.default_rng(0)
    X = rng.integers(0, 3, size=(300, 2))
    y = (X[:, 0] == 1).astype(int)
    public = OneHotEncoder(
        categories=[[0, 1, 2]] * 2, handle_unknown="ignore", sparse_output=False
    )
    pipe = make_pipeline(public, _logistic(epsilon=1.0)).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        total_privacy_spent(pipe)
    learned = OneHotEncoder(sparse_output=False)  # categories read from the data
    pipe = make_pipeline(learned, _logistic(epsilon=1.0)).fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match="OneHotEncoder"):
        total_privacy_spent(pipe)
