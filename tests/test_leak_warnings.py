"""Leaks the estimator can see at fit time warn there, from public facts only.

``fit`` reads the call stack (code and the public configuration of the objects
running it): a scikit-learn ``Pipeline`` step before it that learns without a
budget, and scikit-learn's search / cross-validation, whose fits compose. The
warnings must be the same for neighbouring datasets; skdpsco's own
``PrivateSearchCV`` accounts its runs and is silent. The estimators' docstring
examples are private end to end.
"""

import doctest
import re
import warnings

import numpy as np
import pytest
from _helpers import dense_data, public_estimators
from sklearn.compose import ColumnTransformer
from sklearn.model_selection import GridSearchCV, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from skdpsco import HeavyTailedDPLogistic, HeavyTailedDPRidge
from skdpsco.exceptions import PrivacyLeakWarning
from skdpsco.model_selection import PrivateSearchCV
from skdpsco.preprocessing import DPStandardScaler
from skdpsco.privacy import total_privacy_spent


def _leaks(fit):
    """The PrivacyLeakWarning messages ``fit()`` emits, in order."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit()
    return [str(w.message) for w in caught if w.category is PrivacyLeakWarning]


def _data(Est, n=400, seed=0):
    X, y_reg, y_clf = dense_data(n=n, seed=seed)
    return X, y_clf if Est._is_dp_classifier else y_reg


def _neighbour(X):
    """Replace-one neighbour: the first record replaced by an extreme one."""
    X = X.copy()
    X[0] = 1e6
    return X


@pytest.mark.parametrize("Est", public_estimators(), ids=lambda E: E.__name__)
def test_pipeline_after_a_scaler_without_budget_warns(Est):
    X, y = _data(Est)
    pipe = make_pipeline(StandardScaler(), Est(random_state=0))
    (message,) = _leaks(lambda: pipe.fit(X, y))
    assert message.startswith(
        f"{Est.__name__} is fitted in a Pipeline after step(s) ['StandardScaler']"
    )
    assert "DPStandardScaler" in message


def test_private_or_stateless_steps_do_not_warn():
    X, y = _data(HeavyTailedDPRidge)
    for first in [
        DPStandardScaler(random_state=0),
        FunctionTransformer(np.tanh),
        ColumnTransformer(
            [("dp", DPStandardScaler(random_state=0), [0, 1])],
            remainder="passthrough",
            sparse_threshold=0,
        ),
    ]:
        pipe = make_pipeline(first, HeavyTailedDPRidge(random_state=0))
        assert _leaks(lambda p=pipe: p.fit(X, y)) == []
    assert _leaks(lambda: HeavyTailedDPRidge(random_state=0).fit(X, y)) == []


def test_a_scaler_nested_in_a_column_transformer_warns():
    X, y = _data(HeavyTailedDPRidge)
    ct = ColumnTransformer(
        [
            ("dp", DPStandardScaler(random_state=0), [0, 1]),
            ("sk", StandardScaler(), [2, 3]),
        ],
        sparse_threshold=0,
    )
    pipe = make_pipeline(ct, HeavyTailedDPRidge(random_state=0))
    (message,) = _leaks(lambda: pipe.fit(X, y))
    assert "['StandardScaler']" in message


def _search_fit(X, y, n_jobs=1):
    search = GridSearchCV(
        HeavyTailedDPRidge(max_iter=5, random_state=0),
        {"alpha": [0.1, 10.0], "clip_norm": [1.0, 2.0]},
        cv=3,
        n_jobs=n_jobs,
    )
    return search, _leaks(lambda: search.fit(X, y))


def test_grid_search_warns_with_the_number_of_fits_it_composes():
    X, y = _data(HeavyTailedDPRidge)
    search, messages = _search_fit(X, y)
    # 4 candidates x 3 folds in _fit_and_score, then the refit.
    assert len(messages) == 13
    total = (
        "4 candidate(s) x 3 folds + 1 refit = 13 fits of it compose to epsilon up "
        "to 13,"
    )
    assert all(total in m for m in messages)
    assert all(m.startswith("HeavyTailedDPRidge is fitted by") for m in messages[:12])
    assert messages[-1].startswith(
        "HeavyTailedDPRidge is refitted by scikit-learn's GridSearchCV"
    )
    assert "PrivateSearchCV" in messages[0]
    # What total_privacy_spent measures afterwards (the bound is basic composition).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        spent = total_privacy_spent(search)
    assert spent.epsilon == pytest.approx(13.0)


def test_warnings_are_the_same_for_neighbouring_datasets():
    X, y = _data(HeavyTailedDPRidge)
    assert _search_fit(X, y)[1] == _search_fit(_neighbour(X), y)[1]
    pipe = make_pipeline(StandardScaler(), HeavyTailedDPLogistic(random_state=0))
    Xc, yc = _data(HeavyTailedDPLogistic)
    assert _leaks(lambda: pipe.fit(Xc, yc)) == _leaks(
        lambda: pipe.fit(_neighbour(Xc), yc)
    )


def test_grid_search_in_worker_processes_still_warns_at_the_refit():
    # With n_jobs=2 the fold fits warn in the loky workers; the refit runs here.
    X, y = _data(HeavyTailedDPRidge)
    _, messages = _search_fit(X, y, n_jobs=2)
    assert messages and messages[-1].startswith(
        "HeavyTailedDPRidge is refitted by scikit-learn's GridSearchCV"
    )
    assert "13 fits" in messages[-1]


def test_cross_validate_warns_per_fold_fit():
    X, y = _data(HeavyTailedDPRidge)
    messages = _leaks(
        lambda: cross_validate(
            HeavyTailedDPRidge(max_iter=5, random_state=0), X, y, cv=4
        )
    )
    assert len(messages) == 4
    assert all(
        "cross-validation" in m
        and "4 folds = 4 fits of it compose to epsilon up to 4," in m
        for m in messages
    )


def test_private_search_is_silent():
    X, y = _data(HeavyTailedDPLogistic, n=600)
    pipe = make_pipeline(
        DPStandardScaler(epsilon=0.5, random_state=0), HeavyTailedDPLogistic(max_iter=5)
    )
    grid = {"heavytaileddplogistic__C": [0.01, 1.0]}
    search = PrivateSearchCV(pipe, grid, epsilon=2.0, random_state=0)
    assert _leaks(lambda: search.fit(X, y)) == []


NON_PRIVATE = re.compile(r"(?<!DP)(StandardScaler|RobustScaler|MinMaxScaler|PCA)\(")


def _example(Est):
    # The class docstring's example (methods may carry their own).
    (test,) = [
        test
        for test in doctest.DocTestFinder().find(Est, Est.__name__, globs={})
        if test.name == Est.__name__
    ]
    return test


@pytest.mark.parametrize("Est", public_estimators(), ids=lambda E: E.__name__)
def test_docstring_examples_are_private_end_to_end(Est):
    # The examples run as doctests (pyproject.toml: --doctest-modules over
    # skdpsco); here, what they may hold: raw data into the DP estimator, no
    # scikit-learn scaler or fit_transform learning from the records first.
    source = "".join(example.source for example in _example(Est).examples)
    assert f"{Est.__name__}(" in source and ".fit(" in source
    assert not NON_PRIVATE.search(source) and "fit_transform" not in source
    assert NON_PRIVATE.search("make_pipeline(StandardScaler(), est)")
    assert not NON_PRIVATE.search("make_pipeline(DPStandardScaler(), est)")


@pytest.mark.slow
@pytest.mark.parametrize("Est", public_estimators(), ids=lambda E: E.__name__)
def test_docstring_examples_run_without_a_leak_warning(Est):
    test = _example(Est)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        runner.run(test)
    assert runner.failures == 0 and runner.tries == len(test.examples)
