"""Empirical privacy audit of PrivateSearchCV (tests/audit/README.md).

The released output of the search (the index of the chosen configuration and its
noisy validation score) is collected over many searches on two neighbouring datasets
``D`` and ``D'`` (replace-one: one record swapped for a mislabelled canary), and
:func:`tests.audit.auditor.audit` turns the two samples into a lower bound on epsilon
(95% confidence) that must not exceed the claim. The audit must also flag a broken
search: noiseless validation scores (the selection then reads the private scores
exactly).

The base estimator is a one-parameter DP classifier (a Gaussian-noised clipped mean
used as a threshold), so that thousands of searches run in seconds; the mechanism
under audit is the search's own (split, random number of runs, DP scores, selection),
not the estimator's (every skdpsco estimator is audited in test_privacy_audit.py).

Why this canary gives power: ``x`` takes the values -1 and +1 with labels ``x > 0``, so
every threshold the fit releases (within a few noise stds of 0) classifies ``D``'s
validation part perfectly; ``D'`` replaces one record by ``x = +1`` with label 0. When
the canary falls in the validation half (probability 1/2) every configuration's
accuracy drops by exactly ``1 / n_val``: a noiseless score shows it every time.
"""

import functools

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

import skdpsco.model_selection._search as search_module
from skdpsco.model_selection import PrivateSearchCV
from skdpsco.privacy import GaussianMechanism, PrivacySpent
from skdpsco.privacy._accounting import gaussian_rho_budget

from .auditor import audit

CLAIMED_EPSILON = 1.0
DELTA = 1e-5
N_RUNS = 600
N = 200


@functools.lru_cache(maxsize=64)
def _rho_budget(epsilon, delta):
    return gaussian_rho_budget(epsilon, delta)


class ThresholdDPClassifier(ClassifierMixin, BaseEstimator):
    """Predicts ``side * (x_0 - t) > 0``, ``t`` the DP mean of ``clip(x_0, -1, 1)``.

    Replace-one sensitivity of the clipped mean: ``2 / n``; Gaussian noise of zCDP
    ``rho = gaussian_rho_budget(epsilon, delta)`` (the library's convention).
    """

    def __init__(
        self, *, epsilon=1.0, delta=1e-5, side=1, classes=None, random_state=None
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.side = side
        self.classes = classes
        self.random_state = random_state

    def fit(self, X, y):
        X = np.asarray(X, dtype=float)
        n = X.shape[0]
        self.classes_ = np.unique(y if self.classes is None else self.classes)
        rho = _rho_budget(self.epsilon, self.delta)
        mech = GaussianMechanism.from_zcdp(2.0 / n, rho, name="clipped mean")
        rng = np.random.default_rng(self.random_state)
        self.threshold_ = float(mech.release(np.clip(X[:, 0], -1, 1).mean(), rng))
        # The ledger's rho is what the search checks; epsilon is that of the ask (the
        # Gaussian composition at rho is exactly the asked epsilon at delta).
        self.privacy_spent_ = PrivacySpent(
            self.epsilon, self.delta, mech.rho, mechanisms=(mech.record(),)
        )
        self.n_features_in_ = X.shape[1]
        return self

    def predict(self, X):
        above = self.side * (np.asarray(X, dtype=float)[:, 0] - self.threshold_) > 0
        return self.classes_[above.astype(int)]


def neighbours():
    x = np.where(np.arange(N) % 2 == 0, -1.0, 1.0)
    X = np.column_stack([x, np.zeros(N)])
    y = (x > 0).astype(int)
    Xp, yp = X.copy(), y.copy()
    i = 0  # x = -1, label 0 in D
    Xp[i, 0], yp[i] = 1.0, 0  # the canary: x = +1 labelled 0
    return (X, y), (Xp, yp)


class SearchFactory:
    def __call__(self, seed):
        return PrivateSearchCV(
            ThresholdDPClassifier(),
            {"side": [1, -1]},
            epsilon=CLAIMED_EPSILON,
            delta=DELTA,
            validation_fraction=0.5,
            expected_runs=2.0,
            random_state=seed,
        )

    def __repr__(self):
        return "PrivateSearchCV(ThresholdDPClassifier)"


def released(search):
    """What the search releases about the selection: the index and the noisy score."""
    return {"index": float(search.best_index_), "score": float(search.best_score_)}


def run(seed):
    dataset, neighbour = neighbours()
    return audit(
        SearchFactory(),
        dataset,
        neighbour,
        statistic=released,
        n_runs=N_RUNS,
        delta=DELTA,
        alpha=0.05,
        seed=seed,
    )


def test_neighbours_differ_in_one_record():
    (X, y), (Xp, yp) = neighbours()
    differs = np.any(X != Xp, axis=1) | (y != yp)
    assert np.flatnonzero(differs).tolist() == [0]


def test_private_search_passes_the_audit():
    (X, y), _ = neighbours()
    search = SearchFactory()(0).fit(X, y)
    assert search.privacy_spent_.epsilon <= CLAIMED_EPSILON
    assert search.privacy_spent_.delta == DELTA
    result = run(seed=11)
    print(result.summary())
    assert result.n_failed == (0, 0), result.summary()
    assert result.epsilon_lb <= CLAIMED_EPSILON, result.summary()


class _NoiselessScore(GaussianMechanism):
    """Broken variant: the validation scores are released without their noise (the
    ledger still records the calibrated noise, so the search claims its epsilon)."""

    def release(self, value, rng):
        return np.asarray(value, dtype=float)


def test_audit_flags_noiseless_scores(monkeypatch):
    monkeypatch.setattr(search_module, "GaussianMechanism", _NoiselessScore)
    result = run(seed=12)
    print(result.summary())
    assert result.epsilon_lb > CLAIMED_EPSILON, result.summary()
