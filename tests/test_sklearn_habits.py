"""The habits of scikit-learn's linear models, compared with the models themselves.

float32 input keeps float32 releases and predictions, ``n_iter_`` is an array,
``class_weight="balanced"`` works (with its own accounted share of the budget) and
the HTML repr links to the API page.
"""

import numpy as np
import pytest
from _helpers import dense_data, noiseless_fit, public_estimators
from sklearn.base import is_classifier
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.preprocessing import StandardScaler
from sklearn.utils.class_weight import compute_class_weight

from skdpsco import HeavyTailedDPLogistic

ESTIMATORS = list(public_estimators())
IDS = [Est.__name__ for Est in ESTIMATORS]


def _data(Est, dtype):
    X, y_reg, y_bin = dense_data(n=300, d=3)
    X = X.astype(dtype)
    if is_classifier(Est()):
        return X, y_bin
    return X, y_reg.astype(dtype)


def _reference(Est):
    return LogisticRegression() if is_classifier(Est()) else Ridge()


def _dtypes(est, X):
    """The dtypes of everything a linear model releases and predicts."""
    out = {
        "coef_": est.coef_.dtype,
        "intercept_": np.asarray(est.intercept_).dtype,
        "predict": est.predict(X).dtype,
        "predict64": est.predict(X.astype(np.float64)).dtype,
        "predict32": est.predict(X.astype(np.float32)).dtype,
    }
    if is_classifier(est):
        out["predict"] = est.decision_function(X).dtype
        out["predict64"] = est.decision_function(X.astype(np.float64)).dtype
        out["predict32"] = est.decision_function(X.astype(np.float32)).dtype
        out["proba"] = est.predict_proba(X).dtype
    return out


_LOGISTIC_KEEPS_FLOAT32 = (
    LogisticRegression()
    .fit(np.array([[0.0], [1.0]], dtype=np.float32), [0, 1])
    .coef_.dtype
    == np.float32
)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("Est", ESTIMATORS, ids=IDS)
def test_release_and_predictions_keep_the_dtype_as_in_sklearn(Est, dtype):
    X, y = _data(Est, dtype)
    est = Est(random_state=0).fit(X, y)
    expected = _dtypes(_reference(Est).fit(X, y), X)
    if is_classifier(est) and not _LOGISTIC_KEEPS_FLOAT32:
        # LogisticRegression keeps float32 since scikit-learn 1.8 (1.6 and 1.7
        # upcast to float64); skdpsco keeps it on every supported version.
        # The dtypes of scikit-learn >= 1.8: the model's, and numpy's promotion
        # of the input's with it for predictions.
        expected = {name: np.dtype(dtype) for name in expected}
        expected["predict64"] = np.dtype(np.float64)
    assert _dtypes(est, X) == expected
    assert est.coef_.dtype == dtype


@pytest.mark.parametrize("Est", ESTIMATORS, ids=IDS)
def test_float32_release_is_the_float64_release_rounded(Est):
    # The fit computes in float64 whatever the input: float32 input of the same
    # values releases the float64 model rounded (post-processing).
    X, y = _data(Est, np.float32)
    est32 = Est(random_state=0).fit(X, y)
    est64 = Est(random_state=0).fit(X.astype(np.float64), y.astype(np.float64))
    np.testing.assert_array_equal(est32.coef_, est64.coef_.astype(np.float32))
    np.testing.assert_array_equal(
        est32.intercept_, np.asarray(est64.intercept_, dtype=np.float32)
    )
    np.testing.assert_array_equal(est32.n_iter_, est64.n_iter_)
    assert est32.privacy_spent_.epsilon == est64.privacy_spent_.epsilon


@pytest.mark.parametrize("Est", ESTIMATORS, ids=IDS)
def test_n_iter_is_an_array_like_sklearn(Est):
    X, y = _data(Est, np.float64)
    est = Est(random_state=0).fit(X, y)
    ref = LogisticRegression().fit(X, (X[:, 0] > 0).astype(int))
    assert isinstance(est.n_iter_, np.ndarray)
    assert (est.n_iter_.shape, est.n_iter_.dtype) == (
        ref.n_iter_.shape,
        ref.n_iter_.dtype,
    )
    # Ridge's convention for its iterative solvers: one count per target.
    ridge = Ridge(solver="sag").fit(X, X[:, 0])
    assert est.n_iter_.shape == ridge.n_iter_.shape
    assert est.n_iter_[0] >= 1


def test_n_iter_of_the_multinomial_classifier_is_one_count():
    X, _, _ = dense_data(n=300, d=3)
    y = np.digitize(X[:, 0], [-0.5, 0.5])
    est = HeavyTailedDPLogistic(random_state=0).fit(X, y)
    ref = LogisticRegression().fit(X, y)
    assert est.n_iter_.shape == ref.n_iter_.shape == (1,)
    assert est.n_iter_.tolist() == [est.privacy_spent_.mechanisms[-1].count]


@pytest.mark.parametrize("Est", ESTIMATORS, ids=IDS)
def test_html_repr_links_to_the_api_page(Est):
    html = Est()._repr_html_()
    url = f"https://skdpsco.readthedocs.io/en/stable/generated/skdpsco.{Est.__name__}.html"
    assert f'href="{url}"' in html


def _imbalanced(n=400, seed=1):
    X, y = make_classification(
        n, 3, n_informative=2, n_redundant=0, weights=[0.85], random_state=seed
    )
    return StandardScaler().fit_transform(X), y


def test_balanced_class_weight_non_private_limit_is_sklearns():
    X, y = _imbalanced()
    est = noiseless_fit(
        HeavyTailedDPLogistic,
        X,
        y,
        class_weight="balanced",
        clip_norm=1e6,
        max_iter=20_000,
        learning_rate=1.0,
    )
    ref = LogisticRegression(class_weight="balanced", tol=1e-12, max_iter=10_000)
    ref.fit(X, y)
    np.testing.assert_allclose(
        est.class_weight_,
        compute_class_weight("balanced", classes=np.unique(y), y=y),
        rtol=1e-15,
    )
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-4)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, atol=1e-4)


@pytest.mark.parametrize("scaling", ["none", "private"])
def test_balanced_counts_take_a_tenth_of_the_budget_and_are_accounted(scaling):
    X, y = _imbalanced(n=4000)
    est = HeavyTailedDPLogistic(
        class_weight="balanced", scaling=scaling, random_state=0
    ).fit(X, y)
    spent = est.privacy_spent_
    counts = spent.mechanisms[0]
    assert counts.name == "label counts" and counts.sensitivity == np.sqrt(2.0)
    # Exact GDP composition: rho adds up; the counts' share is 10%.
    rho = counts.sensitivity**2 / (2.0 * counts.scale**2)
    np.testing.assert_allclose(rho / spent.rho, 0.1, rtol=1e-9)
    assert spent.epsilon <= 1.0
    truth = compute_class_weight("balanced", classes=np.unique(y), y=y)
    # Seeded: the noise of the counts (std 17) moves the weights by a few percent.
    np.testing.assert_allclose(est.class_weight_, truth, rtol=0.05)
    assert not np.allclose(est.class_weight_, truth, rtol=1e-6)


def test_balanced_under_basic_composition_is_one_scaling_record():
    # dp_sgd composes the scaling share by basic composition: the counts are one
    # of the mechanisms of the share's single (epsilon, delta) record.
    X, y = _imbalanced(n=4000)
    est = HeavyTailedDPLogistic(
        class_weight="balanced", scaling="none", algorithm="dp_sgd", random_state=0
    ).fit(X, y)
    first = est.privacy_spent_.mechanisms[0]
    assert first.name == "label counts (1 mechanisms)"
    np.testing.assert_allclose(first.epsilon, 0.1, rtol=1e-6)
    assert est.privacy_spent_.epsilon <= 1.0


def test_balanced_raises_the_minority_recall_as_in_sklearn():
    X, y = _imbalanced(n=4000)

    def recall(model):
        return np.mean(model.predict(X)[y == 1] == 1)

    plain = HeavyTailedDPLogistic(random_state=0).fit(X, y)
    balanced = HeavyTailedDPLogistic(class_weight="balanced", random_state=0)
    balanced.fit(X, y)
    ref = LogisticRegression(class_weight="balanced").fit(X, y)
    assert recall(plain) < 0.8 < recall(ref) - 0.05 < recall(balanced)


def test_balanced_weight_of_an_empty_class_is_capped():
    # A public class without records: its count is clipped at n / (100 K), so
    # its weight is 100, not infinite.
    X, y = _imbalanced()
    est = noiseless_fit(
        HeavyTailedDPLogistic, X, y, class_weight="balanced", classes=[0, 1, 2]
    )
    counts = np.bincount(y)
    np.testing.assert_allclose(est.class_weight_, [*(400 / (3 * counts)), 100.0])


def test_balanced_counts_under_pure_dp_are_laplace():
    est = HeavyTailedDPLogistic(class_weight="balanced")
    est.classes_ = np.array([0, 1])
    target = np.repeat([0.0, 1.0], [300, 100])
    (record,) = est._release_label_counts(
        target, {"epsilon": 0.5}, np.random.default_rng(0)
    )
    assert (record.kind, record.sensitivity, record.epsilon) == ("laplace", 2.0, 0.5)
    np.testing.assert_allclose(est.class_weight_, [400 / 600, 400 / 200], rtol=0.1)


def test_balanced_is_refused_by_algorithms_without_weights():
    X, y = _imbalanced()
    with pytest.raises(ValueError, match="class_weight is not supported"):
        HeavyTailedDPLogistic(
            class_weight="balanced", algorithm="truncated_mean_gd"
        ).fit(X, y)


def test_doc_links_follow_the_declared_documentation_url():
    # One address: the package metadata's Documentation URL is the repr's base,
    # and every linked page is one the API docs generate (doc/api.rst).
    import pathlib
    import re

    from skdpsco._estimators._base import DOCS_URL

    root = pathlib.Path(__file__).resolve().parents[1]
    # (tomllib is Python >= 3.11; the package supports 3.10.)
    urls = re.search(
        r'^Documentation = "([^"]+)"', (root / "pyproject.toml").read_text(), re.M
    )
    assert urls.group(1) == DOCS_URL
    api = (root / "doc" / "api.rst").read_text()
    for Est in ESTIMATORS:
        assert Est.__name__ in api
