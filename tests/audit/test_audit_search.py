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

import numpy as np
from _search_spy import ThresholdDPClassifier

import skdpsco.model_selection._search as search_module
from skdpsco.model_selection import PrivateSearchCV
from skdpsco.privacy import GaussianMechanism

from .auditor import audit

CLAIMED_EPSILON = 1.0
DELTA = 1e-5
N_RUNS = 600
N = 200


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
