"""Empirical privacy audit of the private column quantiles (DPRobustScaler).

The release is :func:`skdpsco._column_scaling.private_column_quantiles` at the zCDP
budget of the claim (every mechanism Gaussian, composed exactly), through the
public estimator :class:`skdpsco.preprocessing.DPRobustScaler`. Two canary pairs: a
record replaced by ``1e300`` (an outlier must move one count of an edge bin only),
and the smallest record moved above the upper quartile (every released quantile
below it moves by one count). The power test releases the histograms without their
noise while recording it: the pair then separates deterministically, and the audit
must say so.
"""

import numpy as np
import pytest

from skdpsco.preprocessing import DPRobustScaler

from .auditor import audit_within_claim
from .test_audit_scaling import _noise_free_histogram

CLAIMED_EPSILON = 1.0
DELTA = 1e-5
N_RUNS = 600

pytestmark = pytest.mark.filterwarnings(
    "ignore:DPRobustScaler.*could not be located:UserWarning"
)


def _released(model):
    out = {f"center[{j}]": float(v) for j, v in enumerate(model.center_)}
    out.update(
        {f"log2 scale[{j}]": float(np.log2(v)) for j, v in enumerate(model.scale_)}
    )
    return out


def _pair(kind, n=2000):
    rng = np.random.default_rng(0)
    X = rng.normal(50.0, 3.0, size=(n, 2))
    X_prime = X.copy()
    low = int(np.argmin(X.sum(axis=1)))
    X_prime[low] = 1e300 if kind == "outlier" else np.percentile(X, 90, axis=0)
    return (X, None), (X_prime, None)


def _audit(kind, seed):
    dataset, neighbour = _pair(kind)
    return audit_within_claim(
        DPRobustScaler,
        {},
        dataset,
        neighbour,
        epsilon=CLAIMED_EPSILON,
        delta=DELTA,
        statistic=_released,
        n_runs=N_RUNS,
        seed=seed,
    )


def test_pairs_are_replace_one_and_the_quartiles_are_located():
    for kind in ("outlier", "quartile"):
        (X, _), (X_prime, _) = _pair(kind)
        assert np.flatnonzero(np.any(X != X_prime, axis=1)).size == 1
        model = DPRobustScaler(random_state=0).fit(X)
        np.testing.assert_allclose(model.center_, np.median(X, axis=0), atol=0.5)


@pytest.mark.parametrize("kind", ["outlier", "quartile"])
def test_robust_scaler_audit_within_claim(kind):
    result = _audit(kind, 31)
    print(result.summary())
    assert result.n_failed == (0, 0), result.summary()
    assert result.epsilon_lb <= CLAIMED_EPSILON, result.summary()


def test_audit_flags_a_quantile_histogram_without_noise(monkeypatch):
    _noise_free_histogram(monkeypatch)
    result = _audit("quartile", 32)
    print(result.summary())
    assert result.epsilon_lb > 2 * CLAIMED_EPSILON, result.summary()
