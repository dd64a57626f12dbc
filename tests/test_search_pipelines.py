"""PrivateSearchCV over real pipelines: ColumnTransformers with DP and public branches.

Every DP step of every branch sees columns of the same records, so the budgets
compose sequentially within a run (the same introspection as
``total_privacy_spent``); public branches (``"passthrough"``, ``"drop"``,
encoders with given categories that never raise, stateless transformers) learn
nothing from the records.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    OneHotEncoder,
    OrdinalEncoder,
    StandardScaler,
)

from skdpsco import HeavyTailedDPRidge
from skdpsco.exceptions import PrivacyLeakWarning
from skdpsco.model_selection import PrivateSearchCV
from skdpsco.preprocessing import DPStandardScaler
from skdpsco.privacy import total_privacy_spent

_LEVELS = ["north", "south", "east", "west"]


def _frame(n, seed):
    """A mixed-type frame (two numeric columns, one string category) and its y."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "age": rng.normal(40.0, 10.0, n),
            "income": rng.lognormal(3.0, 0.5, n),
            "region": rng.choice(_LEVELS, n),
        }
    )
    effect = frame["region"].map(dict(zip(_LEVELS, [1.0, -1.0, 0.5, 0.0], strict=True)))
    y = (frame["age"] - 40.0) / 10.0 + effect + rng.normal(0.0, 0.3, n)
    return frame, y.to_numpy()


def _pipeline(sparse_output):
    columns = ColumnTransformer(
        [
            ("num", DPStandardScaler(), ["age", "income"]),
            (
                "cat",
                OneHotEncoder(
                    categories=[_LEVELS],
                    handle_unknown="ignore",
                    sparse_output=sparse_output,
                ),
                ["region"],
            ),
        ],
        # Sparse whenever the encoder is: the case where a ColumnTransformer with
        # many categories switches to sparse output on its own.
        sparse_threshold=1.0,
    )
    return make_pipeline(columns, HeavyTailedDPRidge())


@pytest.mark.parametrize("sparse_output", [False, True])
def test_column_transformer_pipeline_on_a_frame(sparse_output):
    X, y = _frame(3000, seed=0)
    search = PrivateSearchCV(
        _pipeline(sparse_output),
        {"heavytaileddpridge__alpha": [0.01, 1.0]},
        epsilon=2.0,
        delta=1e-6,
        random_state=0,
    )
    if sparse_output:
        # The heavy-tailed family refuses sparse input (for now): the probe on
        # public data says so before any private record is read.
        with pytest.raises(TypeError, match="sparse"):
            search.fit(X, y)
        return
    search.fit(X, y)
    # Two DP steps (the scaler in a branch, the regressor) share each run.
    assert search.privacy_spent_.epsilon <= 2.0
    assert search.privacy_spent_.delta == 1e-6
    total = total_privacy_spent(search)
    assert total.epsilon <= 2.0 and total.delta <= 1e-6
    released = search.best_estimator_
    scaler = released[0].named_transformers_["num"]
    assert scaler.privacy_spent_ is search.privacy_spent_
    new, y_new = _frame(500, seed=1)
    pred = search.predict(new)
    assert pred.shape == (500,)
    # Better than the constant predictor on fresh data (R^2 of the released run).
    assert search.score(new, y_new) > 0.5
    assert search.best_score_ > -0.5


def test_branch_budgets_compose_sequentially(monkeypatch):
    X, y = _frame(2000, seed=2)
    inner = ColumnTransformer(
        [
            ("a", DPStandardScaler(), ["age"]),
            ("b", DPStandardScaler(), ["income"]),
            ("drop", "drop", ["region"]),
        ]
    )
    pipe = Pipeline([("nested", make_pipeline(inner)), ("reg", HeavyTailedDPRidge())])
    search = PrivateSearchCV(pipe, {"reg__alpha": [1.0]}, epsilon=2.0, random_state=0)
    search.fit(X, y)
    ledger = [
        search.best_estimator_["nested"][0].named_transformers_[name].privacy_spent_
        for name in ("a", "b")
    ]
    assert all(spent is search.privacy_spent_ for spent in ledger)
    from skdpsco.model_selection._search import _private_steps

    assert _private_steps(pipe) == [
        "nested__columntransformer__a__",
        "nested__columntransformer__b__",
        "reg__",
    ]


@pytest.mark.parametrize(
    "encoder, match",
    [
        (OneHotEncoder(), "learns the categories"),
        (OneHotEncoder(categories=[_LEVELS]), "handle_unknown='ignore'"),
        (
            OneHotEncoder(
                categories=[_LEVELS], handle_unknown="ignore", min_frequency=5
            ),
            "frequency",
        ),
        (
            OneHotEncoder(
                categories=[_LEVELS], handle_unknown="ignore", max_categories=2
            ),
            "frequency",
        ),
        (OrdinalEncoder(categories=[_LEVELS]), "use_encoded_value"),
        (StandardScaler(), "without a privacy budget"),
    ],
)
def test_refuses_branches_that_learn_or_raise(encoder, match):
    X, y = _frame(300, seed=3)
    pipe = make_pipeline(
        ColumnTransformer(
            [("num", DPStandardScaler(), ["age"]), ("cat", encoder, ["region"])]
        ),
        HeavyTailedDPRidge(),
    )
    with pytest.raises(ValueError, match=match):
        PrivateSearchCV(pipe, {"heavytaileddpridge__alpha": [1.0]}).fit(X, y)


@pytest.mark.parametrize(
    "branch",
    [
        OneHotEncoder(categories=[_LEVELS], handle_unknown="ignore", drop="if_binary"),
        OneHotEncoder(categories=[_LEVELS], handle_unknown="ignore", drop="first"),
        OrdinalEncoder(
            categories=[_LEVELS], handle_unknown="use_encoded_value", unknown_value=-1
        ),
    ],
)
def test_public_branches_are_accepted(branch):
    X, y = _frame(1500, seed=4)
    pipe = make_pipeline(
        ColumnTransformer(
            [
                ("num", DPStandardScaler(), ["age"]),
                ("log", FunctionTransformer(np.arcsinh), ["income"]),
                ("cat", branch, ["region"]),
            ],
            remainder="passthrough",
        ),
        HeavyTailedDPRidge(),
    )
    search = PrivateSearchCV(
        pipe, {"heavytaileddpridge__alpha": [1.0]}, epsilon=2.0, random_state=0
    ).fit(X, y)
    assert search.privacy_spent_.epsilon <= 2.0
    assert np.isfinite(search.predict(X.iloc[:3])).all()


def test_total_privacy_spent_warns_on_an_encoder_that_can_raise():
    # One introspection for both: the encoder the search refuses is a leak for
    # total_privacy_spent too.
    X, y = _frame(500, seed=5)
    pipe = make_pipeline(
        ColumnTransformer(
            [
                ("num", DPStandardScaler(), ["age"]),
                ("cat", OneHotEncoder(categories=[_LEVELS]), ["region"]),
            ]
        ),
        HeavyTailedDPRidge(random_state=0),
    ).fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match="OneHotEncoder"):
        total_privacy_spent(pipe)
    pipe.set_params(columntransformer__cat__handle_unknown="ignore").fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        total_privacy_spent(pipe)
