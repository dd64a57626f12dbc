"""The habits of scikit-learn's linear models, compared with the models themselves.

float32 input keeps float32 releases and predictions, ``n_iter_`` is an array,
``class_weight="balanced"`` works (with its own accounted share of the budget) and
the HTML repr links to the API page.
"""

import numpy as np
import pytest
from _helpers import dense_data, public_estimators
from sklearn.base import is_classifier
from sklearn.linear_model import LogisticRegression, Ridge

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


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("Est", ESTIMATORS, ids=IDS)
def test_release_and_predictions_keep_the_dtype_as_in_sklearn(Est, dtype):
    X, y = _data(Est, dtype)
    est = Est(random_state=0).fit(X, y)
    assert _dtypes(est, X) == _dtypes(_reference(Est).fit(X, y), X)
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
