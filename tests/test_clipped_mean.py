"""The design seam and the clipped-mean oracle: sensitivity and noise."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from skdpsco._design import LinearDesign
from skdpsco._mean_estimation import ClippedMeanOracle
from skdpsco._mean_estimation._clipped import clip_coefficients

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_design_aggregates_match_explicit_computation(sparse, fit_intercept):
    X = RNG.normal(size=(37, 5))
    X[X < 0.3] = 0.0
    Xt = np.hstack([X, np.ones((37, 1))]) if fit_intercept else X
    design = LinearDesign(
        sp.csr_matrix(X) if sparse else X, fit_intercept, chunk_rows=8
    )
    W = RNG.normal(size=design.dim)
    W2 = RNG.normal(size=(design.dim, 3))
    np.testing.assert_allclose(design.predict(W), Xt @ W)
    np.testing.assert_allclose(design.predict(W2), Xt @ W2)
    np.testing.assert_allclose(design.row_norms(), np.linalg.norm(Xt, axis=1))
    c, C = RNG.normal(size=37), RNG.normal(size=(37, 3))
    np.testing.assert_allclose(design.weighted_sum(c), Xt.T @ c)
    np.testing.assert_allclose(design.weighted_sum(C), Xt.T @ C)


def test_row_norms_do_not_overflow():
    X = np.array(
        [
            [1e300, 1e300],
            [3.0, 4.0],
            [0.0, 0.0],
            [1.5e308, 1.5e308],
            [3e-170, 4e-170],
            [5e-324, 0.0],
        ]
    )
    with np.errstate(all="raise"):
        norms = LinearDesign(X, False).row_norms()
    # Ordinary rows: the norm itself; rows whose squares overflow or underflow:
    # their l1 norm, an upper bound (clipping them more is always safe).
    assert norms[1] == 5.0 and norms[2] == 0.0 and norms[3] == np.inf
    assert norms[0] == 2e300 and norms[4] == pytest.approx(7e-170)
    assert norms[5] == 5e-324
    exact = np.array([np.sqrt(2) * 1e300, 5.0, 0.0, np.inf, 5e-170, 5e-324])
    assert np.all(norms >= exact) and np.all(norms <= np.sqrt(2) * exact)


def test_clip_coefficients_bound_every_per_sample_gradient():
    row_norms = np.array([0.0, 1.0, 10.0, 1e300, np.inf, 2.0])
    U = np.array([5.0, -3.0, 0.01, 1e10, 1.0, np.inf])
    c = clip_coefficients(U, row_norms, 2.0)
    assert np.all(np.isfinite(c))
    with np.errstate(invalid="ignore"):
        g_norm = np.where(row_norms > 0, np.abs(c) * row_norms, 0.0)
    g_norm = np.nan_to_num(g_norm)
    assert np.all(g_norm <= 2.0 * (1 + 1e-12))
    assert c[2] == 0.01  # small gradients are untouched
    assert c[5] == pytest.approx(1.0)  # inf derivative clipped to C / ||x||
    UK = RNG.normal(size=(6, 3)) * np.array([[1e5], [1e-3], [1], [1e300], [0], [9]])
    rn = np.abs(RNG.normal(size=6)) + 0.1
    cK = clip_coefficients(UK, rn, 1.5)
    assert np.all(np.linalg.norm(cK, axis=1) * rn <= 1.5 * (1 + 1e-12))
    np.testing.assert_array_equal(cK[1], UK[1])  # below the bound: untouched


@pytest.mark.usefixtures("non_private_mode")
def test_clipped_mean_sensitivity_under_adversarial_neighbours():
    # Replace-one: || mean(D) - mean(D') || <= 2C/n for the worst canaries.
    n, d, C = 50, 4, 1.5
    X = RNG.normal(size=(n, d))
    U = RNG.normal(size=n) * 3
    oracle = ClippedMeanOracle(C).calibrate(n, rho=np.inf)
    rng = np.random.default_rng(0)
    base = oracle.estimate(LinearDesign(X, True), U, rng)
    worst = 0.0
    for canary_x, canary_u in [
        (np.full(d, 1e8), -1e12),
        (-X[0] * 1e6, 1e300),
        (np.zeros(d), 1e9),
        (RNG.normal(size=d), -U[0]),
    ]:
        X2, U2 = X.copy(), U.copy()
        X2[0], U2[0] = canary_x, canary_u
        other = oracle.estimate(LinearDesign(X2, True), U2, rng)
        worst = max(worst, np.linalg.norm(base - other))
    assert worst <= 2 * C / n * (1 + 1e-12)
    assert worst > 1.5 * C / n  # the bound is nearly attained by some canary
    # Negative control: the unclipped mean moves without bound.
    X2 = X.copy()
    X2[0] = 1e8
    unclipped = np.linalg.norm((X2.T @ U - X.T @ U) / n)
    assert unclipped > 1e6 * C / n


def test_clipped_mean_noise_std_and_multinomial_shape():
    n, d, K, rho = 40, 500, 3, 0.3
    oracle = ClippedMeanOracle(2.0).calibrate(n, rho, (d, K))
    sigma = (2 * 2.0 / n) / np.sqrt(2 * rho)
    # 2 C / n and the rounding of the exact sums (Casacuberta et al. 2022): a
    # relative 7.6e-6 at most (the fold's worst case), never less than 2 C / n.
    assert sigma < oracle.noise_scale < sigma * (1 + 8e-6)
    design = LinearDesign(np.zeros((n, d)), False)
    out = oracle.estimate(design, RNG.normal(size=(n, K)), np.random.default_rng(1))
    assert out.shape == (d, K)
    lo, hi = stats.chi2.ppf([0.0005, 0.9995], d * K) / (d * K)
    assert lo * sigma**2 < np.mean(out**2) < hi * sigma**2
    (rec,) = oracle.records(7)
    assert rec.count == 7 and rec.kind == "gaussian"


@pytest.mark.parametrize("K", [None, 3])
@pytest.mark.parametrize("sparse", [False, True])
def test_gradient_chunk_sum_matches_explicit_per_sample_gradients(K, sparse):
    X = RNG.normal(size=(53, 4))
    X[X < 0] = 0.0
    U = RNG.normal(size=(53,) if K is None else (53, K))
    design = LinearDesign(sp.csr_matrix(X) if sparse else X, True, chunk_rows=7)
    Xt = np.hstack([X, np.ones((53, 1))])
    G = U[:, None] * Xt if K is None else Xt[:, :, None] * U[:, None, :]
    out = design.gradient_chunk_sum(U, lambda g, rows: np.tanh(g).sum(axis=0))
    np.testing.assert_allclose(out, np.tanh(G).sum(axis=0))
    count = design.gradient_chunk_sum(U, lambda g, rows: np.array(g.shape[0]))
    assert count == 53


@pytest.mark.parametrize("K", [None, 3])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_gradient_chunk_sum_over_a_row_subset(K, sparse, fit_intercept):
    # rows=mask: only those rows' gradients are built, in increasing order, and
    # func gets their indices; the values are those of the full chunks.
    X = RNG.normal(size=(3001, 4))
    X[X < 0] = 0.0
    U = RNG.normal(size=(3001,) if K is None else (3001, K))
    mask = RNG.random(3001) < 0.5
    design = LinearDesign(
        sp.csr_matrix(X) if sparse else X,
        fit_intercept,
        chunk_rows=200,
        intercept_column=1.5,
    )
    Xt = np.hstack([X, np.full((3001, 1), 1.5)]) if fit_intercept else X
    G = U[:, None] * Xt if K is None else Xt[:, :, None] * U[:, None, :]
    seen = []

    def func(g, rows):
        seen.append(np.asarray(rows))
        np.testing.assert_array_equal(g, G[rows])
        return np.tanh(g).sum(axis=0)

    out = design.gradient_chunk_sum(U, func, rows=mask)
    np.testing.assert_allclose(out, np.tanh(G[mask]).sum(axis=0))
    np.testing.assert_array_equal(np.concatenate(seen), np.flatnonzero(mask))
    assert len(seen) > 1
