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


# --------------------------------------------------------------------------
# The projection mechanism (Ghazi et al. Algorithm 1), the per-call release of the
# bias-reduced sparse SGD (Algorithms 3-5). End to end those solvers make hundreds of
# tiny sparse-matrix calls per fit (about 0.2-0.6 s at the audit's sizes), so the
# default suite audits the mechanism they call, on its worst inputs, at the full
# claim; ``make test-slow`` audits them end to end.

SPARSE_M, SPARSE_D, SPARSE_S, SPARSE_L = 20, 6, 2, 1.0


class _SparseMeanRelease:
    """Adapter: ``fit(G, _)`` releases the private mean of the rows of ``G``."""

    def __init__(self, seed, epsilon, delta):
        self.seed, self.epsilon, self.delta = seed, epsilon, delta

    def fit(self, G, y=None):
        from skdpsco._mean_estimation import projection_mean

        self.coef_, _ = projection_mean(
            G,
            norm_bound=SPARSE_L,
            sparsity=SPARSE_S,
            epsilon=self.epsilon,
            delta=self.delta,
            rng=np.random.default_rng(self.seed),
        )
        return self


def neighbouring_gradient_rows(kind, seed=0):
    """``G`` of ``m`` ordinary 2-sparse rows and ``G'`` with row 0 replaced by a
    canary: ``"dense"`` (every coordinate ``1e6``: violates the declared sparsity and
    norm, so only the clipping keeps the release private) or ``"huge"`` (one entry of
    ``1e300`` pointing away from the data's mean)."""
    rng = np.random.default_rng(seed)
    G = np.zeros((SPARSE_M, SPARSE_D))
    for i in range(SPARSE_M):
        cols = rng.choice(SPARSE_D, SPARSE_S, replace=False)
        G[i, cols] = rng.uniform(0.2, 0.7, SPARSE_S)
    G_prime = G.copy()
    if kind == "dense":
        G_prime[0] = -1e6
    else:
        G_prime[0] = 0.0
        G_prime[0, 0] = -1e300
    return G, G_prime


def audit_sparse_mean_release(
    kind, *, n_runs, claimed_epsilon, delta, seed=0, noise_epsilon=None
):
    """Lower bound on the epsilon of the projection mechanism between neighbours.

    ``noise_epsilon`` (power tests only) calibrates the noise to another epsilon
    than the claim: a deliberately under-noised variant.
    """
    G, G_prime = neighbouring_gradient_rows(kind)
    calibrated = claimed_epsilon if noise_epsilon is None else noise_epsilon
    return audit(
        lambda s: _SparseMeanRelease(s, calibrated, delta),
        (G, None),
        (G_prime, None),
        statistic=lambda m: {
            **{f"coef{j}": float(m.coef_[j]) for j in range(SPARSE_D)},
            "norm": float(np.linalg.norm(m.coef_)),
        },
        n_runs=n_runs,
        delta=delta,
        seed=seed,
    )
