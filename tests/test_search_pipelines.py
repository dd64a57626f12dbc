"""PrivateSearchCV over real pipelines: ColumnTransformers with DP and public branches.

Every DP step of every branch sees columns of the same records, so the budgets
compose sequentially within a run (the same introspection as
``total_privacy_spent``); public branches (``"passthrough"``, ``"drop"``,
encoders with given categories that never raise, stateless transformers) learn
nothing from the records.
"""

import re
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


# ------------------------------------------------- score clip, cv, refit, verbose


def _diabetes_searches(score_clip, seeds):
    from sklearn.datasets import load_diabetes

    from skdpsco.model_selection._search import _CLIP_SHARE

    assert _CLIP_SHARE == 0.05
    X, y = load_diabetes(return_X_y=True)  # y in natural units: mean 152, std 77
    for seed in seeds:
        yield PrivateSearchCV(
            HeavyTailedDPRidge(),
            # A fitted model against (nearly) the constant predictor.
            {"alpha": [1.0, 1e5]},
            # K = 1 (a coin flip between the two) has probability 1/6.
            selection="geometric",
            expected_runs=6,
            epsilon=4.0,
            delta=1e-4,
            score_clip=score_clip,
            random_state=seed,
        ).fit(X, y)


def test_auto_score_clip_follows_the_target_scale():
    searches = list(_diabetes_searches("auto", range(30)))
    clips = np.array([s.score_clip_ for s in searches])
    scores = np.array([s.best_score_ for s in searches])
    picks = sum(s.best_params_["alpha"] == 1.0 for s in searches)
    # (2 s)^2 with s the private scale of y (about its std, 77).
    assert 1000.0 < np.median(clips) < 40000.0
    # Not saturated: the released score is well inside (-clip, 0].
    assert np.median(scores / clips) > -0.8
    # The fitted model wins far more often than a coin (25 of 30; P[Bin(30, 1/2)
    # >= 23] = 0.003). A fixed score_clip=4 picks it 18 times of these 30.
    assert picks >= 23
    # The scale's release is composed into the total.
    assert all(s.privacy_spent_.epsilon <= 4.0 for s in searches)
    assert "rho=" in searches[0].privacy_spent_.mechanisms[0].name


def test_a_fixed_score_clip_saturates_on_natural_units():
    searches = list(_diabetes_searches(4.0, range(10)))
    assert all(-4.6 < s.best_score_ < -3.2 for s in searches)
    assert all(s.score_clip_ == 4.0 for s in searches)


def _clf_data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 2))
    return X, (X[:, 0] > 0.2).astype(int)


def test_verbose_prints_public_lines_only(monkeypatch, capsys):
    from _search_spy import ThresholdDPClassifier, spy_on_runs

    X, y = _clf_data()
    drawn = spy_on_runs(monkeypatch)
    outputs = []
    for seed in range(6):
        PrivateSearchCV(
            ThresholdDPClassifier(),
            {"side": [1, -1]},
            epsilon=2.0,
            verbose=1,
            random_state=seed,
        ).fit(X, y)
        outputs.append(capsys.readouterr().out.splitlines())
    assert len(set(drawn)) > 1  # K varied; the output does not count it
    for lines in outputs:
        assert len(lines) == 2
        assert lines[0] == outputs[0][0]  # the public plan
        assert lines[0] == (
            "PrivateSearchCV: 2 configurations, 2 expected runs; each run fits "
            "within rho=0.06052 (epsilon 1.333 at delta=1e-05), score noise std "
            "0.03593 (accuracy clipped at 1)"
        )
        assert re.fullmatch(
            r"PrivateSearchCV: released \{'side': -?1\} \(noisy accuracy "
            r"[-0-9.e]+\); spent epsilon=2, delta=1e-05",
            lines[1],
        )
    PrivateSearchCV(
        ThresholdDPClassifier(), {"side": [1, -1]}, epsilon=2.0, random_state=0
    ).fit(X, y)
    assert capsys.readouterr() == ("", "")


def test_refit_is_refused_with_its_reason():
    X, y = _clf_data()
    from _search_spy import ThresholdDPClassifier

    search = PrivateSearchCV(ThresholdDPClassifier(), {"side": [1]}, refit=True)
    with pytest.raises(ValueError, match="one more fit, composed with the search"):
        search.fit(X, y)


def test_cv_is_the_validation_fraction():
    from _search_spy import ThresholdDPClassifier
    from sklearn.model_selection import KFold

    X, y = _clf_data()

    def fitted(**kwargs):
        return PrivateSearchCV(
            ThresholdDPClassifier(), {"side": [1, -1]}, random_state=3, **kwargs
        ).fit(X, y)

    a, b = fitted(cv=0.3), fitted(validation_fraction=0.3)
    assert a.n_validation_ == b.n_validation_ == 120
    assert a.best_score_ == b.best_score_
    assert fitted(cv=0.3, validation_fraction=0.5).n_validation_ == 120
    for cv in (5, KFold(5), 1.0, 0):
        with pytest.raises(ValueError, match="cv is the validation fraction"):
            fitted(cv=cv)
