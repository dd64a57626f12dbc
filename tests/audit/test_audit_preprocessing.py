"""Empirical privacy audit of DPStandardScaler (tests/audit/README.md).

The released ``mean_`` and ``scale_`` of every feature are the statistic; ``D`` is an
ordinary dataset and ``D'`` replaces one record by a canary of huge norm (every
feature ``1e6``). The replaced record is the ordinary one most opposed to the
canary (smallest feature sum), so the swap moves the clipped mean by a large share
of its sensitivity. The audit must stay at or below the claim, and must flag a
scaler with ten times too little noise and one with an un-noised mean.
"""

import numpy as np
import pytest

from skdpsco.preprocessing import DPStandardScaler
from skdpsco.preprocessing import _data as scaler_module
from skdpsco.privacy._mechanisms import GaussianMechanism, gaussian_noise

from .auditor import audit_within_claim
from .canaries import CANARY_SCALE, base_dataset

#: Small test data put many variances below their noise level: expected here.
pytestmark = pytest.mark.filterwarnings(
    "ignore:DPStandardScaler.*noise level:UserWarning"
)

CLAIMED_EPSILON = 1.0
DELTA = 1e-5
N_RUNS = 600


def _neighbours(n_samples=100, n_features=3):
    X, _, _ = base_dataset("regression", n_samples=n_samples, n_features=n_features)
    index = int(np.argmin(X.sum(axis=1)))
    X_prime = X.copy()
    X_prime[index] = CANARY_SCALE
    return (X, None), (X_prime, None), index


def _released(model):
    stats = {f"mean[{j}]": float(v) for j, v in enumerate(model.mean_)}
    stats.update({f"scale[{j}]": float(v) for j, v in enumerate(model.scale_)})
    return stats


def _audit(params, seed=0):
    dataset, neighbour, _ = _neighbours()
    return audit_within_claim(
        DPStandardScaler,
        params,
        dataset,
        neighbour,
        epsilon=CLAIMED_EPSILON,
        delta=DELTA,
        statistic=_released,
        n_runs=N_RUNS,
        seed=seed,
    )


def test_canary_pair_is_replace_one():
    (X, _), (X_prime, _), index = _neighbours()
    differs = np.flatnonzero(np.any(X != X_prime, axis=1))
    assert differs.tolist() == [index]
    assert np.linalg.norm(X_prime[index]) > 1e6


@pytest.mark.parametrize("method", ["clipped", "robust"])
def test_scaler_audit_within_claim(method):
    result = _audit({"method": method}, seed=11)
    print(result.summary())
    assert result.n_failed == (0, 0), result.summary()
    assert result.epsilon_lb <= CLAIMED_EPSILON, result.summary()


class _TenfoldUnderNoised(GaussianMechanism):
    """Releases with a tenth of its sigma but records the honest sigma."""

    def release(self, value, rng):
        value = np.asarray(value, dtype=float)
        return value + gaussian_noise(rng, self.sigma / 10.0, value.shape)


class _UnNoisedMean(GaussianMechanism):
    """The mean is released without noise; the ledger still claims the noise."""

    def release(self, value, rng):
        if "mean" in self.name:
            return np.asarray(value, dtype=float)
        return super().release(value, rng)


@pytest.mark.parametrize("broken", [_TenfoldUnderNoised, _UnNoisedMean])
def test_audit_flags_broken_scaler(monkeypatch, broken):
    monkeypatch.setattr(scaler_module, "GaussianMechanism", broken)
    result = _audit({"method": "clipped"}, seed=12)
    print(result.summary())
    assert result.epsilon_lb > CLAIMED_EPSILON, result.summary()


def test_scaler_audit_with_unequal_public_boxes(monkeypatch):
    # The clipped moments are released in units of each feature's half-width:
    # audit the case where the widths differ (100x between features), and show
    # the audit has power there too (a tenfold under-noised release is flagged).
    bounds = (np.array([-1.0, -10.0, -100.0]), np.array([1.0, 10.0, 100.0]))
    params = {"method": "clipped", "bounds": bounds}
    result = _audit(params, seed=13)
    print(result.summary())
    assert result.n_failed == (0, 0), result.summary()
    assert result.epsilon_lb <= CLAIMED_EPSILON, result.summary()
    monkeypatch.setattr(scaler_module, "GaussianMechanism", _TenfoldUnderNoised)
    assert _audit(params, seed=14).epsilon_lb > CLAIMED_EPSILON
