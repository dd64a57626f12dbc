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
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.gaussian_process import GaussianProcessRegressor
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
    search.fit(X, y)
    # The same pipeline, whatever the encoder emits: the regressor sees CSR or
    # dense rows.
    Z = search.best_estimator_[0].transform(X.iloc[:5])
    assert sp.issparse(Z) == sparse_output
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
        # A dropped level makes transform warn on an unknown category.
        (
            OneHotEncoder(categories=[_LEVELS], handle_unknown="ignore", drop="first"),
            "drop=None",
        ),
        (
            OneHotEncoder(
                categories=[_LEVELS], handle_unknown="ignore", drop="if_binary"
            ),
            "drop=None",
        ),
        # fit warns or not depending on a sample of the records.
        (
            FunctionTransformer(np.arcsinh, inverse_func=np.sinh),
            "check_inverse=False",
        ),
        # requires_fit=False, yet it stores every training row.
        (GaussianProcessRegressor(), "without a privacy budget"),
    ],
)
def test_refuses_branches_that_learn_or_raise(encoder, match):
    X, y = _frame(300, seed=3)
    pipe = make_pipeline(
        ColumnTransformer(
            [("num", DPStandardScaler(), ["age"]), ("cat", encoder, ["region"])],
            sparse_threshold=0,
        ),
        HeavyTailedDPRidge(),
    )
    with pytest.raises(ValueError, match=match):
        PrivateSearchCV(pipe, {"heavytaileddpridge__alpha": [1.0]}).fit(X, y)


@pytest.mark.parametrize(
    "branch",
    [
        OneHotEncoder(categories=[_LEVELS], handle_unknown="ignore"),
        OneHotEncoder(
            categories=[_LEVELS],
            handle_unknown="infrequent_if_exist",
            sparse_output=False,
        ),
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
                (
                    "inv",
                    FunctionTransformer(
                        np.arcsinh, inverse_func=np.sinh, check_inverse=False
                    ),
                    ["age"],
                ),
            ],
            remainder="passthrough",
            sparse_threshold=0,
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
            ],
            sparse_threshold=0,
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


# ------------------------------------------------------- runs without a zCDP bound


def test_replace_one_rdp_of_ledger_records():
    from skdpsco.privacy import MechanismRecord
    from skdpsco.privacy._accounting import (
        rdp_gaussian,
        rdp_poisson_subsampled_gaussian,
    )
    from skdpsco.privacy._selection import replace_one_rdp

    orders = np.array([2.0, 3.0, 8.0, 64.0])
    gauss = MechanismRecord("g", "gaussian", count=3, sensitivity=2.0, scale=10.0)
    sgd = MechanismRecord(
        "s",
        "subsampled_gaussian",
        count=100,
        sensitivity=1.0,
        scale=4.0,
        sampling_rate=0.01,
    )
    scaling = MechanismRecord("sc", "approx_dp", rho=0.002, epsilon=0.1, delta=1e-6)
    pure = MechanismRecord("p", "approx_dp", epsilon=0.5, delta=0.0)
    got = replace_one_rdp([gauss, sgd, scaling, pure], orders)
    want = (
        3 * rdp_gaussian(5.0, orders)
        # Mironov 2017, Prop. 2 (c = 1): (2 lambda, eps)-RDP -> (lambda, 3 eps).
        + 3 * 100 * rdp_poisson_subsampled_gaussian(0.01, 4.0, 2 * orders)
        + 0.002 * orders
        + np.minimum(0.5, orders * 0.125)
    )
    np.testing.assert_allclose(got, want, rtol=1e-12)
    opaque = MechanismRecord("o", "approx_dp", epsilon=0.1, delta=1e-6)
    assert replace_one_rdp([gauss, opaque], orders) is None
    with pytest.raises(ValueError, match="orders >= 2"):
        replace_one_rdp([gauss], [1.5, 2.0])


def test_selection_on_orders_is_conservative_and_calibrated():
    from skdpsco.privacy._selection import (
        RUN_RDP_ORDERS,
        calibrate_selection_rho,
        selection_epsilon,
    )

    for eta, gamma in [(0.0, 0.1), (1.0, 0.25)]:
        closed = selection_epsilon(0.02, 1e-5, eta, gamma)
        grid = selection_epsilon(0.02, 1e-5, eta, gamma, RUN_RDP_ORDERS, on_grid=True)
        assert closed <= grid <= closed * 1.05
        rho = calibrate_selection_rho(
            1.0, 1e-5, eta, gamma, RUN_RDP_ORDERS, 0.001, on_grid=True
        )
        eps = selection_epsilon(
            rho, 1e-5, eta, gamma, RUN_RDP_ORDERS, 0.001, on_grid=True
        )
        assert 1.0 - 1e-6 < eps <= 1.0


def test_dp_sgd_in_a_grid(monkeypatch):
    # It failed with "spent no zCDP bound for a per-run share": DP-SGD's
    # replace-one guarantee is (epsilon, delta) from group privacy, and its
    # private scaling was one (epsilon, delta) record. The runs are now bounded
    # on RUN_RDP_ORDERS (replace_one_rdp) and the selection accounted there.
    from skdpsco.model_selection._search import PrivateSearchCV as PSCV

    rng = np.random.default_rng(0)
    X = rng.standard_normal((1500, 4))
    y = X @ np.array([1.0, -0.5, 0.25, 0.0]) + 0.3 * rng.standard_normal(1500)
    seen = []
    original = PSCV._check_run

    def spy(self, est, prefixes, rho_step, where, orders=None):
        total = original(self, est, prefixes, rho_step, where, orders)
        seen.append((total, rho_step, orders))
        return total

    monkeypatch.setattr(PSCV, "_check_run", spy)
    search = PrivateSearchCV(
        HeavyTailedDPRidge(algorithm="dp_sgd", max_iter=3),
        {"alpha": [0.1, 10.0]},
        epsilon=1.0,
        score_clip=4.0,
        random_state=0,
    ).fit(X, y)
    assert search.privacy_spent_.epsilon <= 1.0
    assert "on orders 2 to 55;" in search.privacy_spent_.mechanisms[0].name
    # Probes and runs: every fit's curve within rho_step * lambda on the orders,
    # and the bisection leaves at most a factor 2^(2^-6) of the share unused.
    assert seen and all(orders[-1] == 55.0 for _, _, orders in seen)
    for total, rho_step, _ in seen:
        assert 0.9 * rho_step < total <= rho_step * (1 + 1e-9)
    ask = search.best_estimator_.epsilon
    assert 0.5 < ask < 0.65  # the Gaussian ask of the same share: 0.64
    assert search.score(X, y) > 0.5


@pytest.mark.parametrize(
    "threshold, sparse_output, public",
    [
        (0.3, True, False),  # the density decides: one record can tip it
        (0.0, True, True),  # always dense
        (1.0, True, True),  # a sparse one-hot branch: always sparse
        (0.3, False, False),  # passthrough of the remainder may be sparse input
    ],
)
def test_column_transformer_output_type_must_be_public(
    threshold, sparse_output, public
):
    X, y = _frame(600, seed=6)
    ct = ColumnTransformer(
        [
            ("num", DPStandardScaler(), ["age"]),
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
        remainder="passthrough",
        sparse_threshold=threshold,
    )
    search = PrivateSearchCV(
        make_pipeline(ct, HeavyTailedDPRidge()),
        {"heavytaileddpridge__alpha": [1.0]},
        epsilon=2.0,
        random_state=0,
    )
    if public:
        search.fit(X, y)
        assert search.best_estimator_[0].sparse_output_ == (threshold >= 1)
        return
    with pytest.raises(ValueError, match="sparse_threshold=0"):
        search.fit(X, y)
    pipe = make_pipeline(clone(ct), HeavyTailedDPRidge(random_state=0))
    with pytest.warns(PrivacyLeakWarning, match="sparse_threshold"):
        pipe.fit(X, y)
    with pytest.warns(PrivacyLeakWarning, match="sparse_threshold"):
        total_privacy_spent(pipe)


def test_auto_score_clip_with_several_targets():
    # The clip follows the largest target's private scale (the loss averages the
    # targets' clipped losses); it used to fail on a 2-D y.
    rng = np.random.default_rng(7)
    X = rng.normal(size=(1500, 3))
    Y = X @ rng.normal(size=(3, 2)) * np.array([1.0, 100.0]) + 150.0
    search = PrivateSearchCV(
        HeavyTailedDPRidge(),
        {"alpha": [0.1, 1.0]},
        epsilon=4.0,
        random_state=0,
    ).fit(X, Y)
    spread = np.std(Y, axis=0).max()
    assert spread < search.score_clip_**0.5 < 20 * spread
    assert search.predict(X[:4]).shape == (4, 2)
    assert search.privacy_spent_.epsilon <= 4.0
