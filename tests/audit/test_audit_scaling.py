"""Empirical privacy audit of the private column scaling (every estimator's default).

The release is :func:`skdpsco._column_scaling.private_column_scaling` at the zCDP
budget of the claim (all its mechanisms are Gaussian, composed exactly). Two canary
pairs: a record replaced by ``1e300`` (an outlier that must change its own count
only), and a record moved onto the detection threshold of the magnitude histogram
(so that whether the column is located hinges on that one record: the released
``located`` flag, centre and scale are the statistics). The power test releases the
histogram without its noise while recording it: the threshold pair then separates
deterministically, and the audit must say so.
"""

import math

import numpy as np
import pytest

import skdpsco._column_scaling as scaling_module
from skdpsco._column_scaling import private_column_scaling
from skdpsco.privacy import gaussian_rho_budget
from skdpsco.privacy._mechanisms import GaussianMechanism

from .auditor import audit

CLAIMED_EPSILON = 1.0
DELTA = 1e-5
N_RUNS = 600
RHO = gaussian_rho_budget(CLAIMED_EPSILON, DELTA)


class _ScalingRelease:
    """Adapter: ``fit(X, _)`` releases the private centre and scale of ``X``."""

    def __init__(self, seed):
        self.seed = seed

    def fit(self, X, y=None):
        result = private_column_scaling(X, np.random.default_rng(self.seed), rho=RHO)
        self.center_, self.scale_, self.located_ = (
            result.center,
            result.scale,
            result.located,
        )
        return self


def _statistic(model):
    out = {}
    for j in range(model.center_.size):
        out[f"located[{j}]"] = float(model.located_[j])
        out[f"center[{j}]"] = float(model.center_[j])
        out[f"log2 scale[{j}]"] = math.log2(model.scale_[j])
    return out


def _outlier_pair(n=200):
    rng = np.random.default_rng(0)
    X = rng.normal(3.0, 1.0, size=(n, 2))
    X_prime = X.copy()
    X_prime[int(np.argmin(X.sum(axis=1)))] = 1e300
    return X, X_prime


def _threshold_pair(n=400):
    """``D``: a bulk of ``floor(T)`` records in one magnitude bin, where ``T`` is the
    public detection threshold of the narrowest run searched for a lone column
    (one bin), the rest at 0; ``D'`` moves one zero into the bulk, onto the
    threshold."""
    # The histogram's noise is public (n, d and the budget): read it off a release.
    records = private_column_scaling(
        np.zeros((n, 1)), np.random.default_rng(0), rho=RHO
    )
    (record,) = [r for r in records.records if r.name == "column magnitude histogram"]
    mech = GaussianMechanism(record.sensitivity, record.scale)
    bin_of_bulk = scaling_module.magnitude_bins(np.array([1.5]))[0]
    width = min(scaling_module._LONE_COLUMN_WIDTHS)
    threshold = scaling_module._thresholds(mech, width)[bin_of_bulk]
    bulk = int(math.floor(threshold))
    assert bulk < threshold <= bulk + 1 < n
    X = np.zeros((n, 1))
    X[:bulk] = 1.5
    X_prime = X.copy()
    X_prime[bulk] = 1.5
    return X, X_prime


def _audit(pair, seed):
    X, X_prime = pair
    return audit(
        _ScalingRelease,
        (X, None),
        (X_prime, None),
        statistic=_statistic,
        n_runs=N_RUNS,
        delta=DELTA,
        seed=seed,
    )


def test_threshold_pair_hinges_on_one_record():
    X, X_prime = _threshold_pair()
    assert np.flatnonzero(np.any(X != X_prime, axis=1)).size == 1
    with pytest.MonkeyPatch.context() as mp:
        _noise_free_histogram(mp)
        a = _ScalingRelease(0).fit(X).located_[0]
        b = _ScalingRelease(0).fit(X_prime).located_[0]
    assert (a, b) == (False, True)


@pytest.mark.parametrize("pair", ["outlier", "threshold"])
def test_scaling_audit_within_claim(pair):
    result = _audit(_outlier_pair() if pair == "outlier" else _threshold_pair(), 21)
    print(result.summary())
    assert result.n_failed == (0, 0), result.summary()
    assert result.epsilon_lb <= CLAIMED_EPSILON, result.summary()


def _noise_free_histogram(monkeypatch):
    """The magnitude histograms released without noise (the ledger keeps sigma)."""
    release = GaussianMechanism.release

    def exact_histogram(self, value, rng):
        if "histogram" in self.name:
            return np.asarray(value, dtype=float)
        return release(self, value, rng)

    monkeypatch.setattr(GaussianMechanism, "release", exact_histogram)


def test_audit_flags_a_histogram_without_threshold_noise(monkeypatch):
    _noise_free_histogram(monkeypatch)
    result = _audit(_threshold_pair(), 22)
    print(result.summary())
    assert result.epsilon_lb > 2 * CLAIMED_EPSILON, result.summary()
