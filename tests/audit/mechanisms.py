"""Mechanism-level audits for algorithms too data-hungry to audit end to end.

Sample-and-aggregate (Wang et al. 2020, Algorithm 1) needs about 1e5 records at
epsilon = 1 before it runs at all, so fitting it a thousand times per side is out of
reach in CI. Its privacy rests entirely on the release
:func:`skdpsco._solvers._sample_aggregate.nrs_release` of the subset solutions: one
record changes at most ``s_NRS`` of the ``m`` solutions. This audit feeds that exact
function two neighbouring solution sets, the worst kind for the smooth bound (the
``s`` solutions a record can touch moved from the cluster to the far side of the
ball), and bounds epsilon from its outputs like the estimator-level audit.
"""

import numpy as np

from skdpsco._solvers._sample_aggregate import nrs_release

from .auditor import audit

M_SUBSETS, S_NRS, DIM, RADIUS = 100, 10, 1, 1.0


class _ReleaseOnSolutions:
    """Adapter: ``fit(Z, _)`` runs the private release on the solution set ``Z``."""

    def __init__(self, seed, epsilon, delta):
        self.seed, self.epsilon, self.delta = seed, epsilon, delta

    def fit(self, Z, y=None):
        rng = np.random.default_rng(self.seed)
        self.coef_ = nrs_release(Z, S_NRS, self.epsilon, self.delta, RADIUS, rng)
        return self


def neighbouring_solution_sets(seed=0):
    """Two clusters, 60 solutions near 0 and 40 near ``+R``; in ``Z'`` a record has
    moved ``s`` of the first cluster to the second, which flips the centre of
    attention from 0 to ``+R`` (the largest move of ``g`` one record can cause)."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(scale=0.01, size=(M_SUBSETS, DIM))
    Z[60:] += RADIUS
    Z_prime = Z.copy()
    Z_prime[:S_NRS] += RADIUS
    return Z, Z_prime


def audit_sample_aggregate_release(*, n_runs, claimed_epsilon, delta, seed=0):
    """Lower bound on the epsilon of the NRS release between the two sets."""
    Z, Z_prime = neighbouring_solution_sets()
    return audit(
        lambda s: _ReleaseOnSolutions(s, claimed_epsilon, delta),
        (Z, None),
        (Z_prime, None),
        statistic=lambda m: {"coef": float(m.coef_[0])},
        n_runs=n_runs,
        delta=delta,
        seed=seed,
    )
