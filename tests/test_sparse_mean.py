"""Sparse-gradient mean estimation (Ghazi et al. Algorithms 1 and 2): noise scales,
sensitivities under adversarial neighbours, the l1 ball, the testing-mode limit,
exact recovery and the size cap."""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from skdpsco._design import LinearDesign
from skdpsco._exact_sum import (
    exact_mean_sensitivity,
    exact_sum_slack,
    float_sum_error,
)
from skdpsco._mean_estimation import _sparse_mean as sm
from skdpsco._mean_estimation._sparse_mean import (
    MAX_MEASUREMENT_ENTRIES,
    L1RecoveryMeanOracle,
    ProjectionMeanOracle,
    projection_mean,
    sparse_clip_coefficients,
)
from skdpsco.privacy._accounting import calibrate_analytic_gaussian
from skdpsco.privacy._params import _non_private_testing_mode

RNG = np.random.default_rng(20240601)


def sparse_rows(n, d, s, rng, norm=0.9):
    """n rows with exactly s non-zeros each and l2 norm ``norm``."""
    cols = np.concatenate([rng.choice(d, s, replace=False) for _ in range(n)])
    vals = rng.normal(size=n * s).reshape(n, s)
    vals *= norm / np.linalg.norm(vals, axis=1, keepdims=True)
    return sp.csr_matrix((vals.ravel(), (np.repeat(np.arange(n), s), cols)), (n, d))


def l1_recovery_estimate(G, norm_bound, sparsity, rho, rng, **kwargs):
    """L1RecoveryMeanOracle on the rows of ``G`` (gradients ``1 * g_i``), calibrated
    at ``rho`` (``inf``: the testing mode); returns ``(estimate, oracle)``."""
    n, d = G.shape
    oracle = L1RecoveryMeanOracle(norm_bound, sparsity, **kwargs)
    oracle.calibrate(n, rho, (d,))
    design = LinearDesign(sp.csr_matrix(G), False)
    return oracle.estimate(design, np.ones(n), rng), oracle


def chi2_band(stat, dof, level=1e-4):
    lo, hi = stats.chi2.ppf([level / 2, 1 - level / 2], dof)
    return lo <= stat <= hi


# ----------------------------------------------------------------- clipping


def test_sparse_clip_puts_every_gradient_in_the_l1_and_l2_balls():
    L, s = 2.0, 4
    l2 = np.array([0.0, 1.0, 1.0, 10.0, 1e300, np.inf, 3.0, 1.0])
    l1 = np.array([0.0, 2.0, 10.0, 12.0, 1e301, np.inf, 3.0, 1e6])
    U = np.array([5.0, 1.5, 3.0, 0.01, 1e10, 1.0, -np.inf, np.nan])
    c = sparse_clip_coefficients(U, l2, l1, L, s)
    assert np.all(np.isfinite(c))
    with np.errstate(invalid="ignore"):
        assert np.all(np.nan_to_num(np.abs(c) * l2) <= L * (1 + 1e-12))
        assert np.all(np.nan_to_num(np.abs(c) * l1) <= L * 2 * (1 + 1e-12))
    assert c[1] == 1.5  # 2-sparse-like row inside both balls: untouched
    assert c[2] == pytest.approx(L * 2 / 10.0)  # l1 clip active: L sqrt(s) / ||x||_1
    assert c[3] == 0.01
    # Multinomial: ||c_i||_2 ||x_i||_2 <= L and ||c_i||_1 ||x_i||_1 <= L sqrt(s).
    UK = RNG.normal(size=(8, 3)) * np.array([1e5, 1e-3, 1, 1e300, 0, 9, 1, 2])[:, None]
    rn2 = np.abs(RNG.normal(size=8)) + 0.1
    rn1 = rn2 * (1 + 5 * RNG.random(8))
    cK = sparse_clip_coefficients(UK, rn2, rn1, L, s)
    assert np.all(np.linalg.norm(cK, axis=1) * rn2 <= L * (1 + 1e-12))
    assert np.all(np.abs(cK).sum(axis=1) * rn1 <= 2 * L * (1 + 1e-12))
    np.testing.assert_array_equal(cK[1], UK[1])


def test_design_row_l1_norms_match_explicit_and_canonicalise_duplicates():
    X = RNG.normal(size=(23, 7))
    X[X < 0.2] = 0.0
    for fit_intercept in (False, True):
        expected = np.abs(X).sum(axis=1) + fit_intercept
        for Xin in (X, sp.csr_matrix(X), sp.csc_matrix(X)):
            got = LinearDesign(Xin, fit_intercept, chunk_rows=5).row_l1_norms()
            np.testing.assert_allclose(got, expected)
    # Duplicates (1, -1) at one position: the product sums them to 0.
    dup = sp.csr_matrix((np.array([1.0, -1.0, 3.0]), ([0, 0, 0], [0, 0, 1])), (1, 3))
    assert LinearDesign(dup, False).row_l1_norms()[0] == 3.0
    huge = np.array([[1e308, 1e308, 1e308], [1e300, 0.0, 0.0]])
    norms = LinearDesign(huge, False).row_l1_norms()
    assert norms[0] == np.inf and norms[1] == 1e300


# ------------------------------------------------------------- noise scales


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_projection_oracle_noise_scale_in_confidence_band(noise):
    n, d, L, s = 400, 20_000, 1.5, 9
    oracle = ProjectionMeanOracle(L, s, noise=noise)
    if noise == "gaussian":
        rho = 0.01
        oracle.calibrate(n, rho, (d,))
        # 2 L / n and the exact sums' slack (test below).
        sensitivity = exact_mean_sensitivity(L, n, d)
        assert oracle.noise_scale == pytest.approx(sensitivity / math.sqrt(2 * rho))
    else:
        eps = 0.3
        oracle.calibrate(n, None, (d,), epsilon=eps)
        slack = math.sqrt(d) * exact_sum_slack(L, n, d)
        sensitivity = 2 * L * math.sqrt(s) / n + slack
        assert oracle.noise_scale == pytest.approx(sensitivity / eps, rel=1e-12)
    # noise_scale (what the estimators report) is the scale the draws have.
    scale = oracle.noise_scale
    mean = np.zeros(d)
    _, noisy = sm._release_projected(mean, oracle.mechanism_, oracle.radius_, RNG)
    xi = noisy - mean
    if noise == "gaussian":
        # sum xi^2 / sigma^2 ~ chi2(d)
        assert chi2_band(np.sum(xi**2) / scale**2, d)
    else:
        # |xi| / b ~ Exp(1), so 2 sum |xi| / b ~ chi2(2d)
        assert chi2_band(2 * np.sum(np.abs(xi)) / scale, 2 * d)
        assert stats.kstest(xi / scale, "laplace").pvalue > 1e-4


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
def test_projection_oracle_pays_the_exact_sums_slack(noise):
    # Dense rows are summed exactly: the noise covers the one changed block's
    # rounding, its grid rounding and the float steps after the integer sum
    # (exact_sum_slack), in l2, and sqrt(p) times it in l1. Without the slack
    # the assertions ``> ... * (1 + 1e-7)`` fail.
    n, p, L, s = 9000, 12, 3.0, 4
    oracle = ProjectionMeanOracle(L, s, noise=noise)
    if noise == "gaussian":
        oracle.calibrate(n, 0.02, (p,))
        sensitivity, exact = oracle.mechanism_.sensitivity, 2 * L / n
        assert sensitivity == exact_mean_sensitivity(L, n, p)
    else:
        oracle.calibrate(n, None, (p,), epsilon=0.4)
        sensitivity = oracle.noise_scale * 0.4
        exact = 2 * L * math.sqrt(s) / n
        slack = math.sqrt(p) * exact_sum_slack(L, n, p)
        assert sensitivity == pytest.approx(exact + slack, rel=1e-12)
    assert sensitivity > exact * (1 + 1e-7)
    assert sensitivity < exact * (1 + 1e-4)


def test_float_summed_rows_pay_twice_the_float_sum_error():
    # Sparse rows keep float sums: each neighbour's rounding counts.
    n, p, L = 9000, 12, 3.0
    oracle = ProjectionMeanOracle(L, 4, exact_sums=False).calibrate(n, 0.02, (p,))
    slack = 2 * float_sum_error(L, n)
    assert oracle.mechanism_.sensitivity == pytest.approx(2 * L / n + slack, 1e-15)
    assert oracle.mechanism_.sensitivity > 2 * L / n * (1 + 1e-9)


def test_l1_recovery_dense_branch_pays_the_exact_sums_slack():
    n, p, L = 9000, 5, 2.0
    oracle = L1RecoveryMeanOracle(L, 5).calibrate(n, 0.01, (p,))
    assert oracle.branch_ == "dense"
    assert oracle.mechanism_.sensitivity == exact_mean_sensitivity(L, n, p)
    assert oracle.mechanism_.sensitivity > 2 * L / n * (1 + 1e-7)


def test_projection_mean_noise_scale_in_confidence_band():
    n, d, L, s, eps, delta = 50, 20_000, 1.0, 4, 0.7, 1e-6
    G = sp.csr_matrix((n, d))  # zero mean: the output is the projected noise
    _, rec = projection_mean(
        G, norm_bound=L, sparsity=s, epsilon=eps, delta=delta, rng=RNG
    )
    assert rec.kind == "gaussian" and rec.sensitivity == pytest.approx(2 * L / n)
    assert rec.scale == pytest.approx(
        calibrate_analytic_gaussian(eps, delta, 2 * L / n)
    )
    _, rec = projection_mean(G, norm_bound=L, sparsity=s, epsilon=eps, delta=0, rng=RNG)
    assert rec.kind == "laplace"
    assert rec.scale == pytest.approx(2 * L * math.sqrt(s) / (n * eps))
    assert rec.epsilon == pytest.approx(eps)


def test_l1_recovery_measurement_noise_in_confidence_band(monkeypatch):
    n, d, L, s, rho, m = 30, 3000, 1.0, 3, 0.5, 100
    captured = []
    monkeypatch.setattr(
        sm, "_decode", lambda A, b, *a: captured.append(b) or np.zeros(A.shape[1])
    )
    G = sp.csr_matrix((n, d))  # zero measurements: b is the noise
    for _ in range(20):
        _, oracle = l1_recovery_estimate(G, L, s, rho, RNG, n_measurements=m)
    # The compressed-sensing branch at rho: sensitivity 3L/n, sigma = Delta/sqrt(2 rho).
    sigma = 3 * L / n / math.sqrt(2 * rho)
    assert oracle.branch_ == "cs" and oracle.mechanism_.sensitivity == 3 * L / n
    assert oracle.noise_scale == pytest.approx(sigma, rel=1e-12)
    b = np.concatenate(captured)
    assert b.size == 20 * m
    assert chi2_band(np.sum(b**2) / sigma**2, b.size)


# ------------------------------------------------------------ sensitivity


def _canaries(d, rng):
    return [
        ("dense", np.full(d, 1e8), -1e12),
        ("huge", np.concatenate([[1e300, -1e300], np.zeros(d - 2)]), 1e300),
        ("dense small", rng.normal(size=d), 1.0),
        ("zero", np.zeros(d), 1e9),
    ]


@pytest.mark.parametrize("noise", ["gaussian", "laplace"])
@pytest.mark.parametrize("fit_intercept", [False, True])
@pytest.mark.usefixtures("non_private_mode")
def test_projection_oracle_sensitivity_under_adversarial_neighbours(
    noise, fit_intercept
):
    # Testing mode (no noise): the estimate is the clipped mean (inside the ball),
    # so its change between neighbours is the query's sensitivity.
    n, d, L, s = 40, 300, 1.3, 5
    X = sparse_rows(n, d, s - fit_intercept, RNG, norm=0.7).toarray()
    U = RNG.normal(size=n) * 3
    oracle = ProjectionMeanOracle(L, s, noise=noise)
    oracle.calibrate(n, np.inf) if noise == "gaussian" else oracle.calibrate(
        n, None, epsilon=np.inf
    )
    base = oracle.estimate(LinearDesign(sp.csr_matrix(X), fit_intercept), U, RNG)
    worst1 = worst2 = 0.0
    for _, x, u in _canaries(d, RNG):
        X2, U2 = X.copy(), U.copy()
        X2[0], U2[0] = x, u
        other = oracle.estimate(LinearDesign(sp.csr_matrix(X2), fit_intercept), U2, RNG)
        worst1 = max(worst1, np.abs(base - other).sum())
        worst2 = max(worst2, np.linalg.norm(base - other))
    assert worst1 <= 2 * L * math.sqrt(s) / n * (1 + 1e-12)
    assert worst2 <= 2 * L / n * (1 + 1e-12)
    assert worst1 > 1.0 * L * math.sqrt(s) / n  # the dense canary pushes the l1 bound
    # Negative control: l2 clipping alone (ClippedMeanOracle) lets the dense canary
    # move the mean by far more than the l1 bound the Laplace noise is scaled to.
    from skdpsco._mean_estimation import ClippedMeanOracle

    l2_only = ClippedMeanOracle(L).calibrate(n, np.inf)
    X2, U2 = X.copy(), U.copy()
    X2[0], U2[0] = np.full(d, 1e8), -1e12
    moved = l2_only.estimate(LinearDesign(X, fit_intercept), U, RNG) - l2_only.estimate(
        LinearDesign(X2, fit_intercept), U2, RNG
    )
    assert np.abs(moved).sum() > 3 * L * math.sqrt(s) / n


def test_projection_mean_sensitivity_under_adversarial_neighbours():
    n, d, L, s = 30, 200, 1.0, 4
    G = sparse_rows(n, d, s, RNG, norm=0.95).toarray()
    with _non_private_testing_mode():
        kw = dict(norm_bound=L, sparsity=s, epsilon=np.inf, delta=1e-6, rng=RNG)
        base = projection_mean(sp.csr_matrix(G), **kw)[0]
        for _, x, u in _canaries(d, RNG):
            G2 = G.copy()
            with np.errstate(over="ignore"):
                G2[0] = x * u
            other = projection_mean(sp.csr_matrix(G2), **kw)[0]
            assert np.abs(base - other).sum() <= 2 * L * math.sqrt(s) / n * (1 + 1e-12)
            assert np.linalg.norm(base - other) <= 2 * L / n * (1 + 1e-12)
    # A non-finite row counts as zero.
    G2 = G.copy()
    G2[0, 0] = np.inf
    mean, t = sm._clipped_row_mean(G2, L, s)
    assert t[0] == 0.0 and np.all(np.isfinite(mean))


@pytest.mark.usefixtures("non_private_mode")
def test_l1_recovery_dense_branch_sensitivity_under_adversarial_neighbours():
    # Testing mode: m = inf, the dense branch, whose estimate is the clipped mean.
    n, d, L, s = 30, 200, 1.0, 4
    X = sparse_rows(n, d, s, RNG, norm=0.95).toarray()
    U = RNG.normal(size=n) * 3
    oracle = L1RecoveryMeanOracle(L, s).calibrate(n, np.inf, (d,))
    assert oracle.branch_ == "dense"
    base = oracle.estimate(LinearDesign(sp.csr_matrix(X), False), U, RNG)
    worst = 0.0
    for _, x, u in _canaries(d, RNG):
        X2, U2 = X.copy(), U.copy()
        X2[0], U2[0] = x, u
        other = oracle.estimate(LinearDesign(sp.csr_matrix(X2), False), U2, RNG)
        worst = max(worst, np.linalg.norm(base - other))
    assert worst <= 2 * L / n * (1 + 1e-12)
    assert worst > L / n  # a canary moves the mean by over half the bound


def test_l1_recovery_measurement_sensitivity_under_adversarial_neighbours():
    # The released measurement sum has l2-sensitivity 3L / n for every A.
    n, d, L, s, m = 25, 3000, 1.0, 3, 60
    X = sparse_rows(n, d, s, RNG).toarray()
    U = RNG.normal(size=n) * 2
    oracle = L1RecoveryMeanOracle(L, s, n_measurements=m)
    oracle.calibrate(n, 0.5, (d,))
    assert oracle.branch_ == "cs" and oracle.mechanism_.sensitivity == 3 * L / n
    oracle.A_ = sm._measurement_matrix(m, d, RNG) * 40.0  # far from an isometry

    def b_of(Xr, Ur):
        design = LinearDesign(sp.csr_matrix(Xr), False)
        return (
            oracle._measurements(design, oracle._clipped_coefficients(design, Ur, None))
            / n
        )

    base = b_of(X, U)
    worst = 0.0
    for _, x, u in _canaries(d, RNG):
        X2, U2 = X.copy(), U.copy()
        X2[0], U2[0] = x, u
        worst = max(worst, np.linalg.norm(base - b_of(X2, U2)))
    assert worst <= 3 * L / n * (1 + 1e-12)
    assert worst > 2 * L / n  # attained: clipping at 1.5 L is what bounds it
    M = RNG.normal(size=(10, m)) * np.logspace(-3, 300, 10)[:, None]
    assert np.all(
        np.linalg.norm(sm._clip_rows_l2(M, 1.5 * L), axis=1) <= 1.5 * L * (1 + 1e-12)
    )


# ------------------------------------------------ projection: ball, limits, Lemma 3.1


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_projection_output_lies_in_l1_ball_and_lemma_3_1(delta):
    n, d, L, s = 20, 5000, 2.0, 6
    G = sparse_rows(n, d, s, RNG, norm=1.9)
    radius = L * math.sqrt(s)
    for eps in (0.1, 1.0, 10.0):
        est, _ = projection_mean(
            G, norm_bound=L, sparsity=s, epsilon=eps, delta=delta, rng=RNG
        )
        assert np.abs(est).sum() <= radius * (1 + 1e-12)
    # Lemma 3.1, for every draw: ||out - mean|| <= sqrt(2 L sqrt(s) ||xi||_inf).
    mean, _ = sm._clipped_row_mean(G, L, s)
    oracle = ProjectionMeanOracle(L, s, "laplace" if delta == 0 else "gaussian")
    for budget in (1e-4, 1e-2, 1.0):
        oracle.calibrate(n, budget) if delta else oracle.calibrate(
            n, None, epsilon=budget
        )
        for _ in range(5):
            out, noisy = sm._release_projected(mean, oracle.mechanism_, radius, RNG)
            xi = np.abs(noisy - mean).max()
            assert (
                np.linalg.norm(out - mean)
                <= math.sqrt(2 * L * math.sqrt(s) * xi) + 1e-12
            )


def test_epsilon_infinity_gives_the_exact_clipped_mean():
    n, d, L, s = 15, 400, 1.0, 3
    G = sparse_rows(n, d, s, RNG, norm=1.0).toarray()
    G[0] *= 5.0  # l2 clip active
    G[1] = 0.2  # dense row: l1 clip active
    l2 = np.linalg.norm(G, axis=1)
    l1 = np.abs(G).sum(axis=1)
    t = np.minimum(1.0, np.minimum(L / l2, L * math.sqrt(s) / l1))
    exact = (t[:, None] * G).mean(axis=0)
    with _non_private_testing_mode():
        for delta in (0.0, 1e-6):
            est, rec = projection_mean(
                sp.csr_matrix(G),
                norm_bound=L,
                sparsity=s,
                epsilon=np.inf,
                delta=delta,
                rng=RNG,
            )
            np.testing.assert_allclose(est, exact, atol=1e-15)
            assert rec.scale == 0.0
        est, oracle = l1_recovery_estimate(G, L, s, np.inf, RNG)
        assert oracle.branch_ == "dense"
        np.testing.assert_allclose(est, exact, atol=1e-15)
    with pytest.raises(ValueError, match="epsilon"):
        projection_mean(G, norm_bound=L, sparsity=s, epsilon=np.inf, delta=0, rng=RNG)


def test_projection_error_far_below_dense_gaussian_at_d_1e5():
    # s-sparse rows on a 50-column block of a d = 1e5 space (one-hot-like data).
    n, d, L, s, eps, delta = 2000, 100_000, 1.0, 10, 1.0, 1e-6
    rows = np.repeat(np.arange(n), s)
    cols = np.concatenate([RNG.choice(50, s, replace=False) for _ in range(n)])
    G = sp.csr_matrix((np.full(n * s, 1 / math.sqrt(s)), (rows, cols)), (n, d))
    mean = np.asarray(G.mean(axis=0)).ravel()
    sigma = calibrate_analytic_gaussian(eps, delta, 2 * L / n)
    err_proj, err_dense = [], []
    for _ in range(3):
        est, _ = projection_mean(
            G, norm_bound=L, sparsity=s, epsilon=eps, delta=delta, rng=RNG
        )
        err_proj.append(np.linalg.norm(est - mean))
        err_dense.append(
            np.linalg.norm(
                sm.GaussianMechanism(2 * L / n, sigma).release(mean, RNG) - mean
            )
        )
    ratio = np.mean(err_proj) / np.mean(err_dense)
    assert np.mean(err_dense) == pytest.approx(sigma * math.sqrt(d), rel=0.02)
    assert ratio < 0.25, ratio
    est, _ = projection_mean(
        G, norm_bound=L, sparsity=s, epsilon=eps, delta=0.0, rng=RNG
    )
    assert np.linalg.norm(est - mean) < 0.5 * np.mean(err_dense)


# ----------------------------------------------------------- l1-recovery


@pytest.mark.parametrize("solver", ["linprog", "douglas_rachford"])
def test_l1_recovery_recovers_sparse_mean_exactly_without_noise(solver):
    n, d, s, m = 40, 2000, 5, 80  # m ~ 3 s ln(d/s)
    support = RNG.choice(d, s, replace=False)
    G = np.zeros((n, d))
    G[:, support] = RNG.uniform(-0.4, 0.4, size=(n, s))
    mean = G.mean(axis=0)
    with _non_private_testing_mode():
        est, oracle = l1_recovery_estimate(
            G, 1.0, s, np.inf, RNG, n_measurements=m, solver=solver, max_iter=2000
        )
    assert oracle.branch_ == "cs" and oracle.noise_scale == 0.0
    np.testing.assert_allclose(est, mean, atol=1e-6)


def test_l1_recovery_branches_and_output_bound():
    # d < m ln^2 m: dense branch; m < s ln(d/s): zero; otherwise compressed sensing.
    assert sm._l1_recovery_branch(100, 1000, 5, 1e3, None, 1e12, "x")[0] == "dense"
    assert sm._l1_recovery_branch(100, 1000, 600, 1.0, None, 1e12, "x")[0] == "dense"
    assert sm._l1_recovery_branch(100, 10**6, 50, 0.1, None, 1e12, "x")[0] == "zero"
    branch, m = sm._l1_recovery_branch(100, 10**6, 5, 10.0, None, 1e12, "x")
    assert branch == "cs" and m == math.ceil(10.0 * math.sqrt(5 * math.log(2e5)))
    # m = ceil(2 n sqrt(rho) sqrt(s ln(d/s))) = 1 < s ln(d/s): the zero branch.
    est, oracle = l1_recovery_estimate(sp.csr_matrix((5, 10**6)), 1.0, 50, 1e-6, RNG)
    assert oracle.branch_ == "zero" and oracle.m_ == 1
    assert not est.any() and oracle.mechanism_.sensitivity == 0.0
    # Strong noise: the decoded vector is zeroed when its norm exceeds 2L.
    n, d, s = 10, 3000, 3
    G = sparse_rows(n, d, s, RNG)
    for rho in (1e-3, 0.1, 10.0):
        est, oracle = l1_recovery_estimate(G, 1.0, s, rho, RNG, n_measurements=60)
        assert oracle.branch_ == "cs" and oracle.mechanism_.sensitivity == 3.0 / n
        assert np.linalg.norm(est) <= 2.0 + 1e-12


def test_l1_recovery_refuses_above_the_size_cap_before_reading_data():
    # calibrate sees only public sizes: the refusal comes before any estimate.
    with pytest.raises(
        ValueError, match=r"x 1000000 measurement matrix.*limit of 2e\+08"
    ):
        L1RecoveryMeanOracle(1.0, 10).calibrate(10_000, 2e-4, (10**6,))
    assert MAX_MEASUREMENT_ENTRIES == 2e8


def test_invalid_bounds_are_rejected():
    with pytest.raises(ValueError, match="norm_bound"):
        ProjectionMeanOracle(np.inf, 3)
    with pytest.raises(ValueError, match="sparsity"):
        ProjectionMeanOracle(1.0, 0)
    with pytest.raises(ValueError, match="noise"):
        ProjectionMeanOracle(1.0, 2, noise="cauchy")
    with pytest.raises(ValueError, match="pure DP"):
        ProjectionMeanOracle(1.0, 2).calibrate(10, None, epsilon=1.0)
    with pytest.raises(ValueError, match="exactly one"):
        ProjectionMeanOracle(1.0, 2).calibrate(10, 0.1, epsilon=1.0)
