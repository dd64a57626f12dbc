"""DP gradient descent with the sparse-gradient mean oracles (Ghazi et al.
Algorithms 1 and 2) on scipy.sparse designs: accounting, the non-private limit, and
memory at d = 10^6."""

import math
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsco._design import LinearDesign
from skdpsco._exact_sum import exact_sum_slack
from skdpsco._losses import HuberLoss, LogisticLoss, MultinomialLoss
from skdpsco._mean_estimation import ClippedMeanOracle
from skdpsco._mean_estimation._sparse_mean import (
    L1RecoveryMeanOracle,
    ProjectionMeanOracle,
)
from skdpsco._solvers import noisy_gradient_descent
from skdpsco.privacy import PrivacySpent
from skdpsco.privacy._accounting import gaussian_rho_budget
from skdpsco.privacy._budget import AlgorithmBudget

RNG = np.random.default_rng(7)


def one_hot(n, fields, vocab, rng):
    """CSR one-hot design: ``fields`` non-zeros per row, ``d = fields * vocab``."""
    cols = rng.integers(0, vocab, size=(n, fields)) + vocab * np.arange(fields)
    data = np.full(n * fields, 1.0 / math.sqrt(fields))  # ||x_i|| = 1
    indptr = np.arange(0, n * fields + 1, fields)
    return sp.csr_matrix((data, cols.ravel(), indptr), shape=(n, fields * vocab))


def regression(n, fields, vocab, rng):
    X = one_hot(n, fields, vocab, rng)
    w = rng.normal(size=X.shape[1])
    return X, X @ w + 0.1 * rng.normal(size=n)


def run(X, y, loss, oracle, n_outputs=1, max_iter=20, fit_intercept=True, **budget):
    """``budget``: ``rho=`` (zCDP oracles) or ``epsilon=`` (pure-DP oracles)."""
    epsilon = budget.get("epsilon", 1.0)
    return noisy_gradient_descent(
        LinearDesign(X, fit_intercept),
        y,
        loss,
        oracle,
        n_outputs=n_outputs,
        budget=AlgorithmBudget(epsilon, 0.0, X.shape[0], budget.get("rho")),
        max_iter=max_iter,
        learning_rate=0.5,
        l2_penalty=1e-3,
        rng=np.random.default_rng(3),
    )


def test_pure_dp_gd_uses_only_laplace_records_and_spends_at_most_epsilon():
    X, y = regression(60, 4, 10, RNG)
    eps, s = 0.7, 5  # 4 fields + intercept
    oracle = ProjectionMeanOracle(1.0 * math.sqrt(2), s, noise="laplace")
    res = run(X, y, HuberLoss(1.0), oracle, epsilon=eps)
    assert {r.kind for r in res.records} == {"laplace"}
    rec = res.records[0]
    assert rec.count == 20 and rec.epsilon == pytest.approx(eps / 20, rel=1e-9)
    # l1: 2 L sqrt(s) / n, plus sqrt(p) times the exact sums' l2 slack.
    p = res.coef.size
    slack = math.sqrt(p) * exact_sum_slack(math.sqrt(2), 60, p)
    expected = 2 * math.sqrt(2) * math.sqrt(s) / 60 + slack
    assert rec.sensitivity == pytest.approx(expected, rel=1e-12)
    spent = PrivacySpent.from_records(res.records, 0.0)
    assert spent.accountant == "basic"
    assert eps * (1 - 1e-9) <= spent.epsilon <= eps
    assert np.all(np.isfinite(res.coef)) and res.coef.shape == (41,)
    # Multinomial parameters: still pure DP, (dim, K) iterates.
    yK = RNG.integers(0, 3, size=60)
    res = run(
        X,
        yK,
        MultinomialLoss(),
        ProjectionMeanOracle(2.0, 15, "laplace"),
        n_outputs=3,
        epsilon=eps,
    )
    assert res.coef.shape == (41, 3) and {r.kind for r in res.records} == {"laplace"}
    assert PrivacySpent.from_records(res.records, 0.0).epsilon <= eps
    with pytest.raises(ValueError, match="cannot be pure DP"):
        run(X, y, HuberLoss(1.0), ProjectionMeanOracle(1.0, s), epsilon=eps)


@pytest.mark.parametrize(
    "make_oracle",
    [
        lambda: ProjectionMeanOracle(1.5, 5),
        lambda: ProjectionMeanOracle(1.5, 5, noise="laplace"),
        lambda: L1RecoveryMeanOracle(1.5, 5, n_measurements=60),
    ],
    ids=["projection-gaussian", "projection-laplace-in-zcdp", "l1-recovery"],
)
def test_approximate_dp_gd_records_compose_to_at_most_epsilon(make_oracle):
    X, y = regression(80, 4, 800, RNG)  # d = 3200: l1-recovery in the CS branch
    eps, delta = 1.0, 1e-6
    oracle = make_oracle()
    rho = gaussian_rho_budget(eps, delta, "gdp" if oracle.all_gaussian else "zcdp")
    res = run(X, y, HuberLoss(1.0), oracle, max_iter=5, rho=rho)
    if isinstance(oracle, L1RecoveryMeanOracle):
        assert oracle.branch_ == "cs" and oracle.A_.shape == (60, 3201)
    spent = PrivacySpent.from_records(res.records, delta)
    assert spent.epsilon <= eps
    assert spent.epsilon >= eps * (0.9 if oracle.all_gaussian else 0.3)
    assert np.all(np.isfinite(res.coef))


@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.usefixtures("non_private_mode")
def test_non_private_limit_equals_clipped_gradient_descent(fit_intercept):
    # On s-sparse rows the l1 clip is inactive and the clipped mean lies inside the
    # l1 ball: with no noise, both sparse oracles are the clipped mean exactly.
    X = one_hot(50, 3, 7, RNG)
    y = RNG.integers(0, 2, size=50)
    L, s = 0.8, 3 + fit_intercept
    reference = run(
        X,
        y,
        LogisticLoss(),
        ClippedMeanOracle(L),
        rho=np.inf,
        fit_intercept=fit_intercept,
    ).coef
    for oracle, budget in [
        (ProjectionMeanOracle(L, s), {"rho": np.inf}),
        (ProjectionMeanOracle(L, s, noise="laplace"), {"epsilon": np.inf}),
        (L1RecoveryMeanOracle(L, s), {"rho": np.inf}),  # m = inf: dense branch
    ]:
        coef = run(
            X, y, LogisticLoss(), oracle, fit_intercept=fit_intercept, **budget
        ).coef
        np.testing.assert_allclose(coef, reference, rtol=1e-12, atol=1e-14)


def test_dense_rows_are_shrunk_not_trusted():
    # A declared s that the rows violate: privacy must still hold, because the
    # per-sample gradients are clipped into the l1 ball of radius L sqrt(s).
    n, d, L, s = 30, 50, 1.0, 2
    X = RNG.normal(size=(n, d))  # dense rows
    U = RNG.normal(size=n)
    oracle = ProjectionMeanOracle(L, s).calibrate(n, np.inf)
    design = LinearDesign(sp.csr_matrix(X), False)
    c = oracle._clipped_coefficients(design, U, None)
    assert np.all(np.abs(c) * np.abs(X).sum(axis=1) <= L * math.sqrt(s) * (1 + 1e-12))
    weights = RNG.random(n)
    cw = oracle._clipped_coefficients(design, U, weights)
    np.testing.assert_allclose(cw, c * weights)


def test_gd_at_d_1e6_keeps_memory_near_the_size_of_X():
    n, fields, vocab = 20_000, 20, 50_000  # d = 10^6, 4e5 non-zeros
    X, y = regression(n, fields, vocab, RNG)
    d = X.shape[1]
    x_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    for oracle, budget in [
        (ProjectionMeanOracle(1.0, fields + 1), {"rho": 0.05}),
        (ProjectionMeanOracle(1.0, fields + 1, noise="laplace"), {"epsilon": 1.0}),
    ]:
        tracemalloc.start()
        res = run(X, y, HuberLoss(1.0), oracle, max_iter=3, **budget)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        # X is not copied; what is allocated is a few dense d-vectors (noise, sort
        # buffers of the projection, iterates) and O(n) per-sample arrays.
        assert peak < 0.5 * x_bytes + 16 * 8 * d, (peak, x_bytes)
        assert res.coef.shape == (d + 1,) and np.all(np.isfinite(res.coef))
        assert np.abs(res.coef).sum() > 0


def test_design_parameter_shape_and_unpenalised_intercept_row():
    design = LinearDesign(np.ones((3, 2)), True)
    assert design.parameter_shape(1) == (3,) and design.parameter_shape(4) == (3, 4)
    np.testing.assert_array_equal(design.penalty_mask((3,)), [1.0, 1.0, 0.0])
    mask = design.penalty_mask((3, 2))
    np.testing.assert_array_equal(mask, [[1.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    no_intercept = LinearDesign(np.ones((3, 2)), False)
    np.testing.assert_array_equal(no_intercept.penalty_mask((2,)), [1.0, 1.0])
