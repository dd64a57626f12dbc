"""Shared test helpers for ``PrivateSearchCV``: a spy on the hidden number of runs,
and a DP classifier cheap enough for thousands of searches."""

import functools

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from skdpsco.model_selection import _search as _search_module
from skdpsco.privacy import GaussianMechanism, PrivacySpent
from skdpsco.privacy._accounting import gaussian_rho_budget


def spy_on_runs(monkeypatch):
    """Record K, the hidden number of runs, as the sampler returns it."""
    drawn = []
    sampler = _search_module.truncated_negative_binomial

    def spy(*args, **kwargs):
        drawn.append(sampler(*args, **kwargs))
        return drawn[-1]

    monkeypatch.setattr(_search_module, "truncated_negative_binomial", spy)
    return drawn


@functools.lru_cache(maxsize=64)
def _rho_budget(epsilon, delta):
    return gaussian_rho_budget(epsilon, delta)


class ThresholdDPClassifier(ClassifierMixin, BaseEstimator):
    """Predicts ``side * (x_0 - t) > 0``, ``t`` the DP mean of ``clip(x_0, -1, 1)``.

    Replace-one sensitivity of the clipped mean: ``2 / n``; Gaussian noise of zCDP
    ``rho = gaussian_rho_budget(epsilon, delta)`` (the library's convention). A fit
    costs microseconds.
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
