"""PrivateSearchCV: end-to-end budget, selection, refusals, released attributes."""

import functools
import math

import numpy as np
import pytest
from _search_spy import ThresholdDPClassifier, spy_on_runs
from scipy import stats
from sklearn.base import clone, is_classifier
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from skdpsco import (
    HeavyTailedDPLogistic,
    HeavyTailedDPRidge,
)
from skdpsco.exceptions import PrivacyBudgetError
from skdpsco.model_selection import PrivateSearchCV
from skdpsco.model_selection._search import PrivateSearchCV as _PSCV
from skdpsco.preprocessing import DPStandardScaler
from skdpsco.privacy import (
    MechanismRecord,
    PrivacySpent,
    total_privacy_spent,
)
from skdpsco.privacy._accounting import gaussian_rho_budget, gdp_to_approx_dp
from skdpsco.privacy._params import _non_private_testing_mode
from skdpsco.privacy._selection import (
    calibrate_selection_rho,
    selection_epsilon,
    selection_record,
    tnb_gamma,
    tnb_pmf,
)
from skdpsco.utils._compat import InvalidParameterError

#: Small test data put many variances below their noise level: expected here.
pytestmark = pytest.mark.filterwarnings(
    "ignore:DPStandardScaler.*noise level:UserWarning"
)


@pytest.fixture(scope="module")
def clf_data():
    X, y = make_classification(
        1500, 4, n_informative=3, n_redundant=0, class_sep=2.0, random_state=0
    )
    return X, y


@pytest.fixture(scope="module")
def fitted(clf_data):
    X, y = clf_data
    search = PrivateSearchCV(
        HeavyTailedDPLogistic(max_iter=10),
        {"C": [0.01, 1.0], "clip_norm": [0.5, 2.0]},
        epsilon=1.0,
        delta=1e-5,
        random_state=0,
    )
    return search.fit(X, y)


# ------------------------------------------------------------------- the budget


def test_end_to_end_spend_within_the_ask(fitted, clf_data):
    spent = fitted.privacy_spent_
    assert isinstance(spent, PrivacySpent)
    assert 0.999 <= spent.epsilon <= 1.0
    assert spent.delta == 1e-5
    assert spent.accountant == "rdp-selection"
    (record,) = spent.mechanisms
    assert record.kind == "approx_dp" and record.epsilon == spent.epsilon
    # total_privacy_spent sees the whole search as one (epsilon, delta) release.
    assert total_privacy_spent(fitted).epsilon == pytest.approx(spent.epsilon)
    # The released model carries the search's spend, not its run's.
    assert fitted.best_estimator_.privacy_spent_ is spent
    # The per-run budget is the calibrated one, and the score noise follows from it.
    gamma = tnb_gamma(0.0, 4.0)
    assert fitted.selection_gamma_ == gamma
    assert fitted.expected_runs_ == pytest.approx(4.0, rel=1e-12)
    assert fitted.run_rho_ == calibrate_selection_rho(1.0, 1e-5, 0.0, gamma)
    n_val = fitted.n_validation_
    assert (n_val, fitted.n_train_) == (300, 1200)
    assert fitted.score_noise_std_ == pytest.approx(
        (1 / n_val) / math.sqrt(2 * fitted.run_rho_), rel=1e-12
    )


def test_selection_record_is_the_selection_theorem():
    gamma = tnb_gamma(1.5, 3.0)
    record = selection_record(0.03678, 1e-5, 1.5, gamma)
    assert record.kind == "approx_dp" and record.delta == 1e-5
    assert record.epsilon == selection_epsilon(0.03678, 1e-5, 1.5, gamma)
    assert record.epsilon == pytest.approx(2.0, rel=1e-4)
    assert record.name == (
        "private selection, best of K runs (truncated negative binomial eta=1.5, "
        "E[K]=3) of a rho=0.03678-zCDP run; Papernot & Steinke 2022, Thm 2"
    )
    geometric = selection_record(0.01, 1e-6, 1.0, 0.25)
    assert geometric.epsilon == selection_epsilon(0.01, 1e-6, 1.0, 0.25)
    assert "(geometric, E[K]=4)" in geometric.name


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: tnb_gamma(0.0, 1.0),
            "expected number of runs must be a real number > 1",
        ),
        (lambda: tnb_gamma(True, 4.0), "eta must be a real number >= 0"),
        (lambda: tnb_pmf(1, 0.0, 1.0), r"gamma must be a real number in \(0, 1\)"),
        (
            lambda: selection_record(-0.1, 1e-5, 1.0, 0.5),
            "rho must be a real number >= 0",
        ),
        # -inf is not the non-private testing mode's inf: refused, not inf.
        (lambda: calibrate_selection_rho(-math.inf, 1e-5, 1.0, 0.5), "epsilon must be"),
    ],
)
def test_selection_accounting_refuses_what_is_out_of_range(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("n_jobs", [None, 1, 2, 3])
def test_seeded_search_releases_exactly_these_numbers(clf_data, monkeypatch, n_jobs):
    # The order and number of a search's random draws (the probes' generator, the
    # split, K, the configurations and the fits' seeds; the score noise from its
    # own stream) are part of its reproducibility: a seeded pipeline search (two
    # DP steps, four candidates, 11 hidden runs) releases exactly these numbers
    # (hex floats), whatever n_jobs.
    X, y = clf_data
    drawn = spy_on_runs(monkeypatch)
    pipe = Pipeline(
        [
            ("scale", DPStandardScaler(epsilon=0.5)),
            ("clf", HeavyTailedDPLogistic(max_iter=5)),
        ]
    )
    grid = {"clf__C": [0.01, 1.0], "clf__clip_norm": [0.5, 2.0]}
    search = PrivateSearchCV(pipe, grid, epsilon=2.0, random_state=0, n_jobs=n_jobs)
    search.fit(X, y)
    assert drawn == [11]
    assert search.best_index_ == 3
    assert search.best_params_ == {"clf__C": 1.0, "clf__clip_norm": 2.0}
    # Bit for bit on the machine that wrote them; rtol absorbs BLAS differences.
    np.testing.assert_allclose(
        [search.best_score_, search.privacy_spent_.epsilon],
        [float.fromhex("0x1.981d000000000p-1"), float.fromhex("0x1.ffffffffff23bp+0")],
        rtol=1e-9,
    )
    coef = ["0x1.e5e754ecab258p+0", "0x1.28d00475a4033p-6", "0x1.bfc4288ad6587p-1"]
    coef.append("-0x1.3ad7a84b422c9p-1")
    np.testing.assert_allclose(
        search.best_estimator_.steps[-1][1].coef_.ravel(),
        [float.fromhex(c) for c in coef],
        rtol=1e-9,
    )
    (record,) = search.privacy_spent_.mechanisms
    assert record.epsilon == search.privacy_spent_.epsilon
    assert record.name == (
        "private selection, best of K runs (truncated negative binomial eta=0, "
        "E[K]=4) of a rho=0.0479829-zCDP run; Papernot & Steinke 2022, Thm 2"
    )


def test_every_run_fits_within_its_share(clf_data, monkeypatch):
    """Each fit of the search (probes included) spends at most the per-run rho."""
    X, y = clf_data
    drawn = spy_on_runs(monkeypatch)
    seen = []
    original = _PSCV._check_run

    def spy(self, est, prefixes, rho_step, where, orders=None):
        total = original(self, est, prefixes, rho_step, where, orders)
        seen.append((total, rho_step))
        return total

    monkeypatch.setattr(_PSCV, "_check_run", spy)
    search = PrivateSearchCV(
        HeavyTailedDPLogistic(max_iter=5), {"C": [0.1, 1.0]}, random_state=3
    ).fit(X, y)
    assert len(seen) == 2 + drawn[-1]  # one probe per configuration + the runs
    for total, rho_step in seen:
        assert total <= search.run_rho_
        assert total == pytest.approx(rho_step, rel=1e-6)  # and uses all of it


def test_pipeline_budget_split_over_dp_steps(clf_data):
    X, y = clf_data
    X = 3.0 * X + 2.0  # unscaled data (inside the scaler's public box (-10, 10))
    pipe = Pipeline(
        [("scale", DPStandardScaler()), ("clf", HeavyTailedDPLogistic(max_iter=10))]
    )
    search = PrivateSearchCV(
        pipe, {"clf__C": [0.01, 1.0]}, epsilon=2.0, random_state=0
    ).fit(X, y)
    assert search.privacy_spent_.epsilon <= 2.0
    best = search.best_estimator_
    # Each step of a run gets half of the per-run rho (checked run by run in
    # test_every_run_fits_within_its_share); the released steps carry the whole
    # search's spend, so totalling one step alone never understates.
    for name in ("scale", "clf"):
        assert best.named_steps[name].privacy_spent_ == search.privacy_spent_
    assert total_privacy_spent(best).epsilon == search.privacy_spent_.epsilon
    # Non-private LogisticRegression: 0.80; this search 0.68-0.80 over seeds 0-5,
    # chance 0.5.
    assert search.score(X, y) > 0.65
    # A stateless transformer learns nothing from the data: allowed.
    stateless = Pipeline(
        [("f", FunctionTransformer()), ("clf", HeavyTailedDPLogistic(max_iter=5))]
    )
    PrivateSearchCV(stateless, {"clf__C": [1.0]}, random_state=0).fit(X / 50, y)


# -------------------------------------------------------------- the selection


def _many_runs(estimator, grid, epsilon, seed):
    """A search of 20 expected runs (eta=2), so that each candidate is likely tried."""
    return PrivateSearchCV(
        estimator, grid, epsilon=epsilon, expected_runs=20, eta=2.0, random_state=seed
    )


def test_large_budget_picks_the_truly_best_configuration(clf_data):
    X, y = clf_data
    grid = {"C": [1e-7, 1.0]}  # C = 1e-7: coefficients ~ 0, chance accuracy
    with _non_private_testing_mode():
        search = _many_runs(HeavyTailedDPLogistic(max_iter=30), grid, np.inf, 0)
        search.fit(X, y)
    assert search.best_params_ == {"C": 1.0}
    assert search.score_noise_std_ == 0.0
    assert search.privacy_spent_.epsilon == math.inf
    # The noiseless score is the exact validation accuracy of the released model
    # (non-private LogisticRegression: 0.80 on these data, chance 0.5).
    assert search.best_score_ > 0.72
    # A large finite budget gives the same choice (a seed whose hidden number of
    # runs is not 1: a single run fits a random configuration).
    search = _many_runs(HeavyTailedDPLogistic(max_iter=30), grid, 200.0, 2).fit(X, y)
    assert search.best_params_ == {"C": 1.0}
    assert search.privacy_spent_.epsilon <= 200.0


def test_large_budget_regression():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1500, 3))
    y = X @ np.array([1.0, -0.5, 0.25]) + 0.1 * rng.standard_normal(1500)
    grid = {"alpha": [1e7, 1.0]}  # alpha = 1e7: coefficients ~ 0
    search = _many_runs(HeavyTailedDPRidge(max_iter=50), grid, 200.0, 0).fit(X, y)
    assert search.best_params_ == {"alpha": 1.0}
    assert search.scorer_ == "neg_clipped_squared_error"
    assert -0.1 < search.best_score_ <= 0.05  # minus the clipped validation MSE
    assert not is_classifier(search)


def test_regression_score_is_clipped():
    class Fixed:
        def predict(self, X):
            return np.array([0.0, np.nan, 100.0, 1.0])

    y = np.array([1.0, 0.0, 0.0, 1.0])
    raw = _PSCV._raw_score(Fixed(), None, y, "neg_clipped_squared_error", 4.0)
    assert raw == pytest.approx((1.0 + 4.0 + 4.0 + 0.0) / 4)
    raw = _PSCV._raw_score(Fixed(), None, y, "neg_clipped_absolute_error", 4.0)
    assert raw == pytest.approx((1.0 + 4.0 + 4.0 + 0.0) / 4)


def test_number_of_runs_follows_the_selection_distribution(monkeypatch):
    drawn = spy_on_runs(monkeypatch)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 2))
    y = (X[:, 0] > 0).astype(int)
    counts = []
    for seed in range(400):
        search = PrivateSearchCV(
            ThresholdDPClassifier(),
            {"side": [1, -1, 1]},  # three candidates: three probes draw seeds
            epsilon=5.0,
            selection="geometric",
            expected_runs=2.5,
            eta=7.0,  # ignored by "geometric"
            random_state=seed,
        ).fit(X, y)
        counts.append(drawn[-1])
    counts = np.array(counts)
    assert search.selection_eta_ == 1.0
    observed = [np.sum(counts == k) for k in (1, 2, 3, 4)] + [np.sum(counts >= 5)]
    p = tnb_pmf(np.arange(1, 5), 1.0, 0.4)  # geometric, gamma = 1 / 2.5
    expected = np.append(p, 1 - p.sum()) * counts.size
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    assert abs(counts.mean() - 2.5) < 4 * math.sqrt(0.6) / 0.4 / math.sqrt(400)


# ---------------------------------------------------------- released attributes


def test_only_released_quantities_are_stored(fitted, clf_data):
    X, y = clf_data
    results = fitted.cv_results_
    assert set(results) == {
        "params",
        "mean_test_score",
        "rank_test_score",
        "candidate_index",
    }
    assert results["params"] == [fitted.best_params_]
    assert results["mean_test_score"].tolist() == [fitted.best_score_]
    assert results["candidate_index"].tolist() == [fitted.best_index_]
    # The number of runs must stay hidden (the selection theorem needs it).
    assert not hasattr(fitted, "n_runs_")
    assert not [a for a in vars(fitted) if a.endswith("_") and "split" in a]
    assert fitted.n_candidates_ == 4
    assert fitted.classes_.tolist() == [0, 1]
    assert fitted.n_features_in_ == 4
    proba = fitted.predict_proba(X[:5])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert fitted.decision_function(X[:5]).shape == (5,)
    assert fitted.predict_log_proba(X[:5]).shape == (5, 2)
    assert 0.5 < fitted.score(X, y) <= 1.0
    assert is_classifier(fitted)


def test_string_labels_and_reproducibility(clf_data):
    X, y = clf_data
    labels = np.array(["no", "yes"])[y]
    make = functools.partial(
        PrivateSearchCV,
        HeavyTailedDPLogistic(max_iter=5),
        {"C": [0.1, 1.0]},
        expected_runs=3,
    )
    a = make(random_state=7).fit(X, labels)
    b = make(random_state=7).fit(X, labels)
    c = make(random_state=8).fit(X, labels)
    assert a.best_score_ == b.best_score_ and a.best_params_ == b.best_params_
    np.testing.assert_array_equal(a.best_estimator_.coef_, b.best_estimator_.coef_)
    assert a.best_score_ != c.best_score_
    assert set(a.predict(X[:20])) <= {"no", "yes"}
    clone(a)  # get_params / set_params round trip


# ------------------------------------------------------------------ refusals


def test_refuses_non_dp_estimators_and_leaky_steps(clf_data):
    X, y = clf_data
    with pytest.raises(TypeError, match="differentially private estimator"):
        PrivateSearchCV(LogisticRegression(), {"C": [1.0]}).fit(X, y)
    leaky = Pipeline([("s", StandardScaler()), ("c", HeavyTailedDPLogistic())])
    with pytest.raises(ValueError, match="learns from the data without a privacy"):
        PrivateSearchCV(leaky, {"c__C": [1.0]}).fit(X, y)


@pytest.mark.parametrize("key", ["epsilon", "delta", "clf__epsilon"])
def test_refuses_a_grid_that_varies_the_budget(clf_data, key):
    X, y = clf_data
    est = HeavyTailedDPLogistic()
    if key.startswith("clf__"):
        est = Pipeline([("clf", est)])
    with pytest.raises(ValueError, match="sets every DP step's"):
        PrivateSearchCV(est, {key: [0.5, 1.0]}).fit(X, y)


def test_refuses_a_budget_too_small_for_the_runs(clf_data):
    X, y = clf_data
    with pytest.raises(PrivacyBudgetError, match="too small for 20 expected runs"):
        PrivateSearchCV(
            HeavyTailedDPLogistic(), {"C": [1.0]}, epsilon=0.01, expected_runs=20
        ).fit(X[:200], y[:200])


@pytest.mark.parametrize(
    "params",
    [
        {"epsilon": 0},
        {"epsilon": -1.0},
        {"epsilon": np.inf},
        {"epsilon": True},
        {"epsilon": "1"},
        {"delta": 1.0},
        {"validation_fraction": 1.0},
        {"expected_runs": 1.0},
        {"eta": -0.5},
        {"selection": "poisson"},
        {"scoring": "f1"},
    ],
)
def test_invalid_parameters(clf_data, params):
    X, y = clf_data
    search = PrivateSearchCV(HeavyTailedDPLogistic(), {"C": [1.0]}, **params)
    with pytest.raises(InvalidParameterError):
        search.fit(X, y)


def test_delta_zero_and_wrong_scoring_are_refused(clf_data):
    X, y = clf_data
    with pytest.raises(ValueError, match="delta"):
        PrivateSearchCV(HeavyTailedDPLogistic(), {"C": [1.0]}, delta=0.0).fit(X, y)
    with pytest.raises(ValueError, match="is for classifiers"):
        PrivateSearchCV(HeavyTailedDPRidge(), {"alpha": [1.0]}, scoring="accuracy").fit(
            X, y.astype(float)
        )


class _ApproxDPOnly(ThresholdDPClassifier):
    """Releases like ThresholdDPClassifier, accounted as a generic (epsilon, delta)
    mechanism."""

    def fit(self, X, y):
        super().fit(X, y)
        record = MechanismRecord(
            "generic", "approx_dp", epsilon=self.epsilon, delta=self.delta
        )
        self.privacy_spent_ = PrivacySpent.from_records([record], self.delta)
        return self


def test_non_zcdp_configuration_refused_before_any_private_fit(monkeypatch):
    # An (epsilon, delta)-DP fit has no RDP curve for the selection theorem (the same
    # holds for algorithm="dp_sgd", accounted by group privacy of add/remove RDP).
    # The probe on synthetic public data finds it before the private data are read.
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 2))
    y = (X[:, 0] > 0).astype(int)
    touched = []
    monkeypatch.setattr(
        "skdpsco.model_selection._search._rows",
        lambda X, idx: touched.append(1) or X[idx],
    )
    search = PrivateSearchCV(_ApproxDPOnly(), {"side": [1]}, epsilon=5.0)
    with pytest.raises(PrivacyBudgetError, match=r"of \{'side': 1\} spent no zCDP"):
        search.fit(X, y)
    assert touched == []  # the split (first private access) never happened


# ---------------------------------------------------------------- documentation


def test_cost_against_grid_search():
    """The docstring's numbers: 3x3 grid, 5 folds (46 fits) vs the private search."""
    delta = 1e-5
    single = gaussian_rho_budget(1.0, delta)
    per_fit_grid = single / 46
    per_run = calibrate_selection_rho(1.0, delta, 0.0, tnb_gamma(0.0, 9.0))
    numbers = {
        "0.0359": single,
        "0.00078": per_fit_grid,
        "6.8": math.sqrt(single / per_fit_grid),
        "6.1": math.sqrt(37),
        "0.0104": per_run,
        "1.86": math.sqrt(single / per_run),
        "13.3": per_run / per_fit_grid,
        "4.26": gdp_to_approx_dp(math.sqrt(2 * 46 * per_run), delta),
    }
    doc = " ".join(PrivateSearchCV.__doc__.split())
    for text, value in numbers.items():
        assert float(text) == pytest.approx(
            value, abs=0.6 * 10 ** -len(text.split(".")[1])
        )
        assert text in doc, text


def test_list_and_dataframe_inputs(clf_data):
    pd = pytest.importorskip("pandas")
    X, y = clf_data
    est = HeavyTailedDPLogistic(max_iter=3)
    search = PrivateSearchCV(est, {"C": [1.0]}, random_state=0)
    search.fit(X.tolist(), y.tolist())
    assert search.n_features_in_ == 4
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    search.fit(frame, y)
    assert search.feature_names_in_.tolist() == ["a", "b", "c", "d"]
    with pytest.raises(ValueError):
        search.fit(X[:, 0], y)  # 1-d X


def test_released_model_carries_no_run_seed_and_k_is_not_stored(clf_data):
    # The seed of the winning run would let anyone regenerate its noise: the
    # released estimator carries the user's random_state (here None), and the
    # number of runs K is not an attribute of the fitted search.
    X, y = clf_data
    pipe = Pipeline(
        [
            ("scale", DPStandardScaler(epsilon=0.5)),
            ("clf", HeavyTailedDPLogistic(max_iter=5)),
        ]
    )
    search = PrivateSearchCV(pipe, {"clf__C": [0.1, 1.0]}).fit(X, y)
    params = search.best_estimator_.get_params()
    assert params["scale__random_state"] is None
    assert params["clf__random_state"] is None
    assert not any("n_runs" in name for name in vars(search))
    # Every DP step of the released model carries the whole search's spend.
    for step in (search.best_estimator_[0], search.best_estimator_[-1]):
        assert step.privacy_spent_ == search.privacy_spent_


def test_a_step_that_fails_on_the_probe_data_gets_a_clear_error():
    # log1p of the standard normal probe data is NaN: the error says that it was
    # the synthetic probe, not the user's (positive) data, and what to do.
    rng = np.random.default_rng(0)
    X = rng.uniform(0.0, 3.0, size=(300, 3))
    y = (X[:, 0] > 1.5).astype(int)
    pipe = Pipeline(
        [("log", FunctionTransformer(np.log1p)), ("clf", HeavyTailedDPLogistic())]
    )
    with pytest.raises(ValueError, match="synthetic public probe data"):
        PrivateSearchCV(pipe, {"clf__C": [0.1, 1.0]}).fit(X, y)


def test_runs_emit_no_warnings_and_grid_objects_are_cloned(clf_data, monkeypatch):
    # Each run's warnings would count the hidden runs K (and describe losing runs);
    # estimator objects of the grid must be cloned per run, or a losing run's
    # fitted step (with its run seed) stays in the user's param_grid and the
    # released model may mix runs.
    import warnings

    X, y = clf_data
    drawn = spy_on_runs(monkeypatch)
    candidates = [HeavyTailedDPLogistic(C=0.1), HeavyTailedDPLogistic(C=10.0)]
    pipe = Pipeline(
        [
            ("scale", DPStandardScaler(epsilon=0.5)),
            ("clf", HeavyTailedDPLogistic()),
        ]
    )
    grid = {"clf": candidates, "scale__with_mean": [True, False]}
    for seed in range(4):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            search = PrivateSearchCV(pipe, grid, epsilon=0.5, random_state=seed).fit(
                X / 5.0, y
            )
        assert not [w for w in caught if "noise level" in str(w.message)]
        for obj in candidates:
            assert not hasattr(obj, "coef_") and obj.random_state is None
        best = search.best_estimator_
        assert best.named_steps["clf"] is not search.best_params_["clf"]
        assert best.named_steps["clf"].privacy_spent_ == search.privacy_spent_
    assert max(drawn) >= 2  # some search above had several runs
