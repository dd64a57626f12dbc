"""Sample-and-aggregate with smooth sensitivity (Wang et al. 2020, Algorithm 1).

The corrected order-statistic smooth bound (the "mean of the K largest" printed in
step 5 of Algorithm 1 is not smooth: kept as a documented negative test), subset
solutions forced into W, the paper's sample-size conditions (Algorithm 1,
Theorem 1), worked numbers of the NRS07 parameters, the subset plumbing, the
smoothness checks, the propose-test-release on a public grid (the margin of the
noisy bound, the calibrated grid noise, the floating-point regression, large
epsilon), and nothing data-dependent stored.
"""

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats
from sklearn.linear_model import LogisticRegression, Ridge

from skdpsco._solvers import _sample_aggregate as sa
from skdpsco._solvers._result import SolverResult
from skdpsco._solvers._sample_aggregate import (
    MAX_N_SUBSETS,
    centre_of_attention,
    draw_subsets,
    minimum_n_subsets,
    minimum_samples,
    nrs_gaussian_parameters,
    project_rows_l2_ball,
    release_parameters,
    sample_and_aggregate,
)
from skdpsco.exceptions import PrivacyBudgetError
from skdpsco.privacy import MechanismRecord, PrivacySpent
from skdpsco.privacy._accounting import calibrate_analytic_gaussian
from skdpsco.privacy._budget import AlgorithmBudget
from skdpsco.privacy._mechanisms import GRID_SLACK, grid_step

# -- independent reference code (full sorts, no chunking) ---------------------------


def _sa(X, y, loss, *, epsilon, delta, **kwargs):
    """:func:`sample_and_aggregate` with the algorithm's budget ``(epsilon, delta)``."""
    budget = AlgorithmBudget(epsilon, delta, X.shape[0])
    return sample_and_aggregate(X, y, loss, budget=budget, **kwargs)


def _t0(m, s):
    return math.ceil((m + s) / 2) + 1


def _sorted_distances(Z):
    Z = np.asarray(Z, dtype=float)
    D = np.sqrt(((Z[:, None, :] - Z[None, :, :]) ** 2).sum(axis=2))
    return np.sort(D, axis=1)


def _r(D_sorted, t, diameter):
    """r_i(t) for all i (1-based t), Lambda once t > m."""
    m = D_sorted.shape[0]
    return D_sorted[:, t - 1] if t <= m else np.full(m, float(diameter))


def corrected_bound_reference(Z, s, beta, diameter):
    """Corrected bound S = 2 max_k rho_k e^{-beta k}, rho_k an order statistic."""
    D = _sorted_distances(Z)
    m = D.shape[0]
    t0, k, best = _t0(m, s), 0, 0.0
    while True:
        t = t0 + (k + 1) * s
        if t > m:
            return 2.0 * max(best, diameter * math.exp(-beta * k))
        rho = np.sort(_r(D, t, diameter))[(k + 1) * s]  # ((k+1)s+1)-th smallest
        best = max(best, rho * math.exp(-beta * k))
        k += 1


def k_largest_bound_reference(Z, s, beta, diameter):
    """The paper's printed Alg. 1 line 5: rho(t) = mean of the ceil(s/beta) largest.

    Kept only as a documented negative test: it is NOT a beta-smooth bound.
    """
    D = _sorted_distances(Z)
    m = D.shape[0]
    K = math.ceil(s / beta)
    t0, k, best = _t0(m, s), 0, 0.0
    while True:
        t = t0 + (k + 1) * s
        rho = diameter if t > m else float(np.mean(np.sort(_r(D, t, diameter))[-K:]))
        best = max(best, rho * math.exp(-beta * k))
        if t > m:
            return 2.0 * best
        k += 1


def centre_reference(Z, t0):
    D = _sorted_distances(Z)
    r = _r(D, t0, np.inf)
    return np.asarray(Z, dtype=float)[int(np.argmin(r))]


# -- worked numbers and the sample-size rule -----------------------------------------


def test_worked_numbers_d10_eps1_delta1e5():
    gamma, beta = nrs_gaussian_parameters(1.0, 1e-5, 10)
    assert gamma == pytest.approx(0.0404787, abs=5e-8)
    assert beta == pytest.approx(0.0112582, abs=5e-8)
    assert minimum_n_subsets(1.0, 1e-5, 10) == 7890
    # Default minimum subset size max(10 d, d + 1) = 100 rows (the library's
    # stand-in for Lemma 1's n_alpha): about 8e5 records.
    assert minimum_samples(1.0, 1e-5, 10) == 789_000


@pytest.mark.parametrize(
    ("epsilon", "delta", "dim", "expected"),
    [(1.0, 1e-5, 11, 947_870), (8.0, 1e-6, 5, 4_800), (1.0, 1e-5, 3, 111_000)],
)
def test_minimum_samples_formula(epsilon, delta, dim, expected):
    log_term = math.log(2 / delta)
    m_sub = max(
        math.ceil(16 * (dim + log_term) ** 2 / epsilon**2),
        math.ceil(4 * dim**2 / epsilon**2) + 1,
    )
    assert minimum_n_subsets(epsilon, delta, dim) == m_sub
    assert minimum_samples(epsilon, delta, dim) == m_sub * max(10 * dim, dim + 1)
    assert minimum_samples(epsilon, delta, dim) == expected
    assert minimum_samples(epsilon, delta, dim, subset_size_min=7) == m_sub * 7


def test_paper_condition_k_le_m_holds_at_the_minimum():
    # ceil(s / beta) <= m_sub (Alg. 1) and eps > 2 d / sqrt(m_sub) (Thm 1).
    for epsilon, delta, dim in [(1.0, 1e-5, 10), (0.5, 1e-8, 3), (8.0, 1e-6, 5)]:
        m = minimum_n_subsets(epsilon, delta, dim)
        _, beta = nrs_gaussian_parameters(epsilon, delta, dim)
        assert math.ceil(math.isqrt(m) / beta) <= m
        assert epsilon > 2 * dim / math.sqrt(m)


def test_too_few_samples_raise_privacy_budget_error_naming_the_minimum():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(2000, 2)), rng.normal(size=2000)
    with pytest.raises(PrivacyBudgetError, match="n_samples=111000"):
        _sa(X, y, "squared", epsilon=1.0, delta=1e-5, radius=1.0, rng=rng)
    # With explicit n_subsets the minimum is n_subsets * subset_size_min.
    with pytest.raises(PrivacyBudgetError, match="n_samples=2400"):
        _sa(
            X, y, "squared", epsilon=12.0, delta=1e-5, radius=1.0,
            n_subsets=80, subset_size_min=30, rng=rng,
        )  # fmt: skip


def test_public_validation_errors():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(500, 2)), rng.normal(size=500)
    kw = {"epsilon": 12.0, "delta": 1e-5, "rng": rng}
    with pytest.raises(ValueError, match="needs a public 'radius'"):
        _sa(X, y, "squared", radius=None, **kw)
    for bad in (0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="radius"):
            _sa(X, y, "squared", radius=bad, **kw)
    m_min = minimum_n_subsets(12.0, 1e-5, 3)
    with pytest.raises(ValueError, match=f"below the minimum {m_min}"):
        _sa(X, y, "squared", radius=1.0, n_subsets=m_min - 1, **kw)
    with pytest.raises(ValueError, match="refused") as info:
        _sa(X, y, "squared", radius=1.0, n_subsets=MAX_N_SUBSETS + 1, **kw)
    assert not isinstance(info.value, PrivacyBudgetError)
    with pytest.raises(ValueError, match="delta"):
        _sa(X, y, "squared", radius=1.0, epsilon=1.0, delta=0.0,
                             rng=rng)  # fmt: skip
    with pytest.raises(TypeError, match="Generator"):
        _sa(X, y, "squared", radius=1.0, epsilon=1.0, delta=1e-5,
                             rng=0)  # fmt: skip


# -- the release: public parameters --------------------------------------------------


def test_release_parameters_split_the_budget_exactly():
    for epsilon, delta, dim in [(1.0, 1e-5, 10), (0.3, 1e-8, 3), (50.0, 1e-6, 7)]:
        p = release_parameters(epsilon, delta, dim)
        _, beta = nrs_gaussian_parameters(epsilon, delta, dim)
        assert p.beta == beta
        assert p.epsilon_bound == epsilon / 4
        assert Fraction(p.epsilon_bound) + Fraction(p.epsilon_value) <= epsilon
        assert p.epsilon_value == pytest.approx(0.75 * epsilon, rel=1e-15)
        # delta1 + delta2 + (1 + e^eps) d 2^-780 <= delta, exactly.
        tv = Fraction(1 + math.exp(epsilon)) * dim * Fraction(2) ** -780
        assert Fraction(p.delta_bound) + Fraction(p.delta_value) + tv <= delta
        assert p.delta_bound == delta / 2
        assert p.delta_value == pytest.approx(delta / 2, rel=1e-15)
        # L: pure eps1-DP release of ln S, sensitivity beta (1 + 2^-20).
        mech = p.bound_mechanism
        assert mech.sensitivity == beta * (1 + 2.0**-20)
        assert mech.epsilon == pytest.approx(p.epsilon_bound, rel=1e-15)
        step = grid_step(min(mech.sensitivity, mech.scale), 1, norm="l1")
        expected = (mech.scale * (1 + GRID_SLACK) + step) * math.log(2 / delta) + step
        assert p.log_margin == expected


def test_margin_bounds_the_exact_discrete_laplace_tail():
    # P[L + mu < ln S] from the exact pmf of the discrete Laplace noise, at the
    # worst position of ln S between two grid points: at most delta1, and more than
    # delta1 / 4 (the bound loses a factor about 2 only, from the one-sided tail).
    for epsilon, delta, dim in [(1.0, 1e-5, 10), (4.0, 0.4, 2), (0.5, 1e-3, 1)]:
        p = release_parameters(epsilon, delta, dim)
        mech = p.bound_mechanism
        step = grid_step(min(mech.sensitivity, mech.scale), 1, norm="l1")
        t = math.ceil(mech.scale * (1 + GRID_SLACK) / step)
        worst = 0.0
        for frac in np.linspace(-0.5, 0.5, 11):
            # ln S = (k + frac) step; L = (k + Z) step; miss iff Z < frac - mu/step.
            k_max = math.ceil(frac - p.log_margin / step) - 1  # largest missing Z
            tail = math.exp(k_max / t) / (1 + math.exp(-1 / t))  # P[Z <= k_max]
            worst = max(worst, tail)
        assert p.delta_bound / 4 < worst <= p.delta_bound


def test_huge_epsilon_is_refused_only_past_the_samplers_allowance():
    release_parameters(400.0, 1e-5, 10)
    with pytest.raises(ValueError, match="total variation"):
        release_parameters(600.0, 1e-5, 10)
    with pytest.raises(ValueError, match="epsilon"):
        release_parameters(np.inf, 1e-5, 10)


# -- subsets --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "m", "k"),
    [(20_000, 400, 50), (1_000, 9, 50), (4_800, 96, 50), (100_000, 2_500, 40)],
)
def test_no_index_in_more_than_s_subsets(n, m, k):
    s = math.isqrt(m)
    idx = draw_subsets(n, m, k, s, np.random.default_rng(1))
    assert idx.shape == (m, k)
    assert np.all(np.diff(idx, axis=1) > 0)  # k distinct indices per subset
    assert idx.min() >= 0 and idx.max() < n
    assert np.bincount(idx.ravel(), minlength=n).max() <= s
    again = draw_subsets(n, m, k, s, np.random.default_rng(1))
    np.testing.assert_array_equal(idx, again)


def test_subsets_are_uniform_enough():
    # Each index should be in a subset with probability k/n (uniform sampling).
    n, m, k = 200, 100, 10
    counts = np.zeros(n)
    rng = np.random.default_rng(2)
    for _ in range(40):
        counts += np.bincount(draw_subsets(n, m, k, 10, rng).ravel(), minlength=n)
    expected = 40 * m * k / n
    assert abs(counts.mean() - expected) < 1e-9
    assert stats.chisquare(counts).pvalue > 1e-3


def test_infeasible_subset_draw_is_refused_up_front():
    # 4 subsets of 40 of 100 rows with s = 2: a round almost never succeeds.
    with pytest.raises(ValueError, match="almost never"):
        draw_subsets(100, 4, 40, 2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="cannot fit"):
        draw_subsets(100, 4, 60, 2, np.random.default_rng(0))


def test_solver_sees_each_record_in_at_most_s_subsets():
    n, m = 30_000, 400
    X = np.arange(n, dtype=float)[:, None]
    seen = []

    def recording_solver(X_sub, y_sub):
        seen.append(X_sub[:, 0].astype(int))
        return np.zeros(1)

    _sa(
        X, np.zeros(n), recording_solver, epsilon=np.inf, delta=1e-5, radius=1.0,
        n_subsets=m, fit_intercept=False, rng=np.random.default_rng(3),
    )  # fmt: skip
    assert len(seen) == m
    assert all(len(rows) == n // m and len(set(rows)) == n // m for rows in seen)
    assert np.bincount(np.concatenate(seen), minlength=n).max() <= math.isqrt(m)


# -- order statistics, centre of attention, smooth bound -----------------------------


def test_order_statistics_match_full_sort_with_tiny_chunks():
    rng = np.random.default_rng(4)
    Z = rng.normal(size=(37, 3))
    D = _sorted_distances(Z)
    ranks = [1, 5, 19, 20, 37, 38, 50]
    for chunk in (1, 50, 10**6):
        R = sa._distance_order_statistics(Z, ranks, 9.0, chunk_entries=chunk)
        for j, t in enumerate(ranks):
            np.testing.assert_allclose(R[:, j], _r(D, t, 9.0), rtol=1e-12, atol=1e-15)
    assert np.all(R[:, 0] == 0.0)  # r_i(1) = 0: z_i counts itself


def test_smooth_bound_and_centre_match_reference():
    rng = np.random.default_rng(5)
    for _ in range(25):
        m = int(rng.integers(1, 120))
        s = math.isqrt(m)
        Z = project_rows_l2_ball(rng.normal(size=(m, 2)) * rng.uniform(0.05, 2), 1.0)
        beta = float(rng.uniform(0.01, 1.0))
        expected = corrected_bound_reference(Z, s, beta, 2.0)
        t0 = _t0(m, s)
        np.testing.assert_array_equal(
            centre_of_attention(Z, t0), centre_reference(Z, t0)
        )
        g, S = sa._aggregate(Z, s, beta, 2.0)
        np.testing.assert_array_equal(g, centre_reference(Z, t0))
        assert S == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("m", [1, 2, 3, 50, 101, 400, 7890])
def test_identical_solutions_give_the_lambda_tail_exactly(m):
    R, beta = 1.5, 0.0112582
    s = math.isqrt(m)
    t0 = _t0(m, s)
    k_star = next(k for k in range(m + 1) if t0 + (k + 1) * s > m)
    point = np.array([0.3, -0.4, 0.5])
    Z = np.tile(point, (m, 1))
    expected = 2 * (2 * R) * math.exp(-beta * k_star)
    assert sa._aggregate(Z, s, beta, 2 * R)[1] == expected
    np.testing.assert_array_equal(centre_of_attention(Z, t0), point)


def test_smoothness_regression_corrected_vs_k_largest():
    # m - s solutions at 0 and s at distance R, which one record moves to 0:
    # m = 100, s = 10, beta = 1, R = 1 (Lambda = 2), k* = 4.
    m, s, beta, lam = 100, 10, 1.0, 2.0
    z = np.zeros((m, 2))
    z[m - s :, 0] = 1.0  # s solutions at distance R
    z_prime = np.zeros((m, 2))  # the neighbour moves them to 0
    S, S_prime = (
        sa._aggregate(z, s, beta, lam)[1],
        sa._aggregate(z_prime, s, beta, lam)[1],
    )
    assert S == pytest.approx(2 * math.exp(-3))
    assert S_prime == pytest.approx(4 * math.exp(-4))
    assert S / S_prime == pytest.approx(math.e / 2)
    assert abs(math.log(S / S_prime)) <= beta
    # Negative test (documented): the paper's "mean of the ceil(s/beta) largest"
    # gives S(z)/S(z') = e^4 / 2 ~ 27.3 > e^beta: not a smooth bound, it would leak.
    K_S = k_largest_bound_reference(z, s, beta, lam)
    K_S_prime = k_largest_bound_reference(z_prime, s, beta, lam)
    assert K_S / K_S_prime == pytest.approx(math.exp(4) / 2)
    assert math.log(K_S / K_S_prime) > beta


def _adversarial_neighbour(z, s, rng):
    """Move s entries of z somewhere nasty (inside the unit ball)."""
    m, d = z.shape
    z2 = z.copy()
    moved = rng.choice(m, size=s, replace=False)
    how = rng.integers(4)
    if how == 0:  # all to one far point
        far = rng.normal(size=d)
        z2[moved] = far / np.linalg.norm(far)
    elif how == 1:  # all onto the current centre (shrinks the cluster)
        z2[moved] = centre_reference(z, _t0(m, s))
    elif how == 2:  # copies of one existing solution
        z2[moved] = z[rng.integers(m)]
    else:  # fresh random points
        z2[moved] = project_rows_l2_ball(rng.normal(size=(s, d)), 1.0)
    return z2


def _clustered(m, d, rng):
    """Clusters of random sizes and spreads, some far apart, inside the unit ball."""
    n_clusters = int(rng.integers(1, 4))
    centres = project_rows_l2_ball(rng.normal(size=(n_clusters, d)), 0.8)
    labels = rng.integers(n_clusters, size=m)
    spread = 10 ** rng.uniform(-4, -0.5, size=n_clusters)
    z = centres[labels] + spread[labels, None] * rng.normal(size=(m, d))
    if rng.random() < 0.3:  # exact duplicates
        z[: m // 2] = z[0]
    return project_rows_l2_ball(z, 1.0)


def test_randomised_adversarial_smoothness_and_local_sensitivity():
    # NRS07's smooth upper bound: ||g(z) - g(z')|| <= S(z) and
    # |ln S(z) / S(z')| <= beta whenever at most s_NRS entries change (m <= 400,
    # 1-D and 2-D).
    rng = np.random.default_rng(6)
    ratios, informative = [], 0
    for _ in range(400):
        m = int(rng.integers(4, 401))
        s = math.isqrt(m)
        d = int(rng.integers(1, 3))
        beta = float(10 ** rng.uniform(-2, 0.5))
        z = _clustered(m, d, rng)
        z2 = _adversarial_neighbour(z, s, rng)
        g, S = sa._aggregate(z, s, beta, 2.0)
        g2, S2 = sa._aggregate(z2, s, beta, 2.0)
        move = np.linalg.norm(g - g2)
        assert move <= S * (1 + 1e-12)
        assert move <= S2 * (1 + 1e-12)
        ratio = abs(math.log(S / S2))
        assert ratio <= beta * (1 + 1e-12) + 1e-15
        ratios.append(ratio / beta)
        informative += S < 0.5  # far below the Lambda tail: a non-vacuous case
    assert informative > 50
    assert max(ratios) > 0.9  # the adversary pushes |ln S/S'| to (nearly) beta


# -- projection of the subset solutions into W ---------------------------------------


def test_project_rows_l2_ball():
    Z = np.array(
        [
            [0.1, 0.2],
            [3.0, 4.0],
            [np.nan, 1.0],
            [np.inf, 0.0],
            [1e300, 1e300],
            [-1e308, 1e-300],
        ]
    )
    P = project_rows_l2_ball(Z, 2.0)
    assert np.all(np.isfinite(P))
    assert np.all(np.linalg.norm(P, axis=1) <= 2.0)
    np.testing.assert_array_equal(P[0], Z[0])
    np.testing.assert_allclose(P[1], [1.2, 1.6], rtol=1e-15)
    np.testing.assert_array_equal(P[2], [0.0, 0.0])
    np.testing.assert_array_equal(P[3], [0.0, 0.0])
    np.testing.assert_allclose(P[4], [math.sqrt(2)] * 2, rtol=1e-15)
    np.testing.assert_allclose(P[5], [-2.0, 0.0], atol=1e-15)


def test_solutions_are_sanitised_before_distances(monkeypatch):
    # A solver returning points far outside W, NaN, inf, or raising: every z_i handed
    # to the aggregation must be finite and inside the ball.
    n, m, R = 40_000, 400, 1.0
    X = np.arange(n, dtype=float)[:, None]
    captured = {}
    real_aggregate = sa._aggregate

    def spy(Z, s, beta, diameter):
        captured["Z"] = Z.copy()
        captured["diameter"] = diameter
        return real_aggregate(Z, s, beta, diameter)

    monkeypatch.setattr(sa, "_aggregate", spy)

    def wild_solver(X_sub, y_sub):
        i = int(X_sub[0, 0]) % 5
        if i == 0:
            return np.array([np.nan, 1.0])
        if i == 1:
            return np.array([np.inf, -np.inf])
        if i == 2:
            raise FloatingPointError("overflow in the subset solve")
        if i == 3:
            return np.array([1e200, -1e200])
        return np.array([3.0, 4.0])

    result = _sa(
        X, np.zeros(n), wild_solver, epsilon=12.0, delta=1e-5, radius=R,
        n_subsets=m, rng=np.random.default_rng(7),
    )  # fmt: skip
    Z = captured["Z"]
    assert Z.shape == (m, 2) and captured["diameter"] == 2 * R
    assert np.all(np.isfinite(Z))
    assert np.all(np.linalg.norm(Z, axis=1) <= R)
    assert np.any(np.all(Z == 0, axis=1))  # NaN / inf / raising -> 0
    assert any(np.allclose(z, [0.6, 0.8], rtol=1e-15, atol=0) for z in Z)
    assert np.all(np.isfinite(result.coef))
    assert np.linalg.norm(result.coef) <= R


def test_non_private_mode_projects_far_solutions():
    n = 2_000
    X = np.zeros((n, 1))
    out = _sa(
        X, np.zeros(n), lambda X_sub, y_sub: np.array([3e200, 4e200]),
        epsilon=np.inf, delta=1e-5, radius=2.0, n_subsets=100,
        rng=np.random.default_rng(0),
    )  # fmt: skip
    np.testing.assert_allclose(out.coef, [1.2, 1.6], rtol=1e-15)


# -- per-subset solver ----------------------------------------------------------------


def test_subset_solutions_do_not_depend_on_batching(monkeypatch):
    # Each z_i must be a deterministic function of its own subset: changing how the
    # subsets are batched (or their order) leaves every solution bit-identical.
    rng = np.random.default_rng(8)
    n, m, k = 3_000, 60, 40
    X = rng.standard_t(2, size=(n, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.standard_t(2, size=n)
    subsets = draw_subsets(n, m, k, math.isqrt(m), rng)
    for loss_name, target in [("squared", y), ("logistic", (y > 0).astype(float))]:
        loss = sa.get_loss(loss_name)
        kw = dict(fit_intercept=True, n_outputs=1, l2_penalty=1e-2, radius=5.0,
                  n_iter=50)  # fmt: skip
        Z_all = sa._solve_subsets(X, target, subsets, "loss", loss, **kw)
        monkeypatch.setattr(sa, "_CHUNK_ENTRIES", 7 * k * 4)
        Z_small = sa._solve_subsets(X, target, subsets, "loss", loss, **kw)
        perm = rng.permutation(m)
        Z_perm = sa._solve_subsets(X, target, subsets[perm], "loss", loss, **kw)
        monkeypatch.undo()
        np.testing.assert_array_equal(Z_all, Z_small)
        np.testing.assert_array_equal(Z_all[perm], Z_perm)


def test_extreme_rows_stay_in_their_subset():
    # One subset with a 1e300 feature and a 1e300 target: its own solution may be
    # garbage (then 0 after sanitising) but no other subset's solution changes.
    rng = np.random.default_rng(9)
    n, m, k = 2_000, 40, 30
    X = rng.normal(size=(n, 2))
    y = X.sum(axis=1)
    subsets = draw_subsets(n, m, k, math.isqrt(m), rng)
    kw = dict(fit_intercept=True, n_outputs=1, l2_penalty=1e-3, radius=10.0,
              n_iter=30)  # fmt: skip
    loss = sa.get_loss("squared")
    Z = sa._solve_subsets(X, y, subsets, "loss", loss, **kw)
    row = subsets[0, 0]
    touched = np.any(subsets == row, axis=1)
    X2, y2 = X.copy(), y.copy()
    X2[row], y2[row] = 1e300, -1e300
    with np.errstate(all="raise"):  # nothing may warn or raise either
        Z2 = sa._solve_subsets(X2, y2, subsets, "loss", loss, **kw)
    np.testing.assert_array_equal(Z[~touched], Z2[~touched])
    assert np.all(np.isfinite(project_rows_l2_ball(Z2, 10.0)))


def test_non_private_limit_is_the_penalised_erm():
    # epsilon = inf and one subset: the release is the subset solver on all rows,
    # i.e. Ridge(alpha = n lambda) / LogisticRegression(C = 1/(n lambda)).
    rng = np.random.default_rng(10)
    n, lam = 400, 0.05
    X = rng.normal(size=(n, 3))
    y = X @ np.array([0.5, -0.3, 0.2]) + 0.3 + 0.1 * rng.normal(size=n)
    out = _sa(
        X, y, "squared", epsilon=np.inf, delta=1e-5, radius=10.0, l2_penalty=lam,
        n_subsets=1, subset_max_iter=500, rng=rng,
    )  # fmt: skip
    ref = Ridge(alpha=n * lam).fit(X, y)
    np.testing.assert_allclose(out.coef, np.r_[ref.coef_, ref.intercept_], atol=1e-8)

    labels = (y > 0.3).astype(float)
    out = _sa(
        X, labels, "logistic", epsilon=np.inf, delta=1e-5, radius=10.0,
        l2_penalty=lam, n_subsets=1, subset_max_iter=500, rng=rng,
    )  # fmt: skip
    ref = LogisticRegression(C=1 / (n * lam), tol=1e-12, max_iter=1000).fit(X, labels)
    np.testing.assert_allclose(
        out.coef, np.r_[ref.coef_.ravel(), ref.intercept_], atol=1e-6
    )


def test_multinomial_and_sparse_inputs():
    rng = np.random.default_rng(11)
    n = 3_000
    X = rng.normal(size=(n, 2))
    y = np.argmax(X @ rng.normal(size=(2, 3)) + rng.normal(size=(n, 3)), axis=1)
    out = _sa(
        X, y, "multinomial", epsilon=np.inf, delta=1e-5, radius=3.0, n_outputs=3,
        n_subsets=100, subset_size_min=20, l2_penalty=1e-2,
        rng=np.random.default_rng(0),
    )  # fmt: skip
    assert out.coef.shape == (3, 3)
    assert np.linalg.norm(out.coef) <= 3.0 * (1 + 1e-15)  # Frobenius, up to rounding

    Xs = X.copy()
    Xs[np.abs(Xs) < 0.8] = 0.0
    kw = dict(epsilon=12.0, delta=1e-5, radius=2.0, n_subsets=100,
              subset_size_min=20)  # fmt: skip
    y_reg = Xs @ np.array([1.0, -1.0])
    dense = _sa(Xs, y_reg, "squared", rng=np.random.default_rng(1), **kw)
    sparse = _sa(
        sp.csr_matrix(Xs), y_reg, "squared", rng=np.random.default_rng(1), **kw
    )
    np.testing.assert_allclose(dense.coef, sparse.coef, rtol=1e-12, atol=1e-14)


# -- the release -----------------------------------------------------------------------


def _ridge_problem(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    w = np.array([0.6, -0.4])
    y = X @ w + 0.2 + 0.5 * rng.standard_t(3, size=n)
    return X, y, np.r_[w, 0.2]


def test_smoke_fit_returns_finite_coef_inside_the_ball():
    # eps = 12, d = 3: m_sub = 2,500 subsets of 40 rows.
    X, y, w_true = _ridge_problem(100_000, 12)
    kw = dict(epsilon=12.0, delta=1e-6, radius=2.0, n_subsets=2_500,
              l2_penalty=1e-3)  # fmt: skip
    out = _sa(X, y, "squared", rng=np.random.default_rng(0), **kw)
    assert out.coef.shape == (3,)
    assert np.all(np.isfinite(out.coef))
    assert np.linalg.norm(out.coef) <= 2.0
    same = _sa(X, y, "squared", rng=np.random.default_rng(0), **kw)
    np.testing.assert_array_equal(out.coef, same.coef)
    other = _sa(X, y, "squared", rng=np.random.default_rng(1), **kw)
    assert not np.array_equal(out.coef, other.coef)
    # Without noise the centre of attention is a subset ERM close to w*.
    exact = _sa(
        X, y, "squared", rng=np.random.default_rng(0), **{**kw, "epsilon": np.inf}
    )
    assert np.linalg.norm(exact.coef - w_true) < 0.3


def test_result_holds_only_coef_n_iter_and_one_approx_dp_record():
    # S, S_hat, the z_i and i* are never returned.
    X, y, _ = _ridge_problem(20_000, 13)
    out = _sa(
        X, y, "squared", epsilon=12.0, delta=1e-6, radius=2.0, n_subsets=400,
        rng=np.random.default_rng(0),
    )  # fmt: skip
    assert type(out) is SolverResult
    fields = {"coef", "n_iter", "records", "attributes"}
    assert {f.name for f in dataclasses.fields(out)} == fields
    assert set(vars(out)) == fields and out.attributes == {}
    assert isinstance(out.coef, np.ndarray) and out.coef.shape == (3,)
    assert out.n_iter == 1
    (record,) = out.records
    assert record == MechanismRecord(
        name=record.name, kind="approx_dp", epsilon=12.0, delta=1e-6
    )
    assert record.scale is None and record.sensitivity is None  # no S_hat / sigma
    spent = PrivacySpent.from_records(out.records, 1e-6)
    assert spent.epsilon == 12.0 and spent.delta == 1e-6


def test_noisy_bound_covers_the_smooth_bound_with_probability_1_minus_delta1():
    # delta = 0.4: delta1 = 0.2. The exact miss probability is about delta1 / 2
    # (one-sided tail), so 4000 draws separate "at most delta1" from the real rate.
    p = release_parameters(4.0, 0.4, 2)
    assert p.delta_bound == 0.2
    rng = np.random.default_rng(20)
    n_draws, diameter = 4000, 2.0
    for S in (0.37, 1e-3, 1e-9):  # inside, and below the floor 2^-40 * diameter
        hats = np.array(
            [sa._release_bound(S, p, diameter, rng) for _ in range(n_draws)]
        )
        target = min(max(S, 2.0**-40 * diameter), diameter)
        misses = int(np.sum(hats < target))
        # Binomial upper check at delta1 (one-sided, 1e-6) ...
        assert stats.binom.sf(misses - 1, n_draws, p.delta_bound) > 1e-6
        # ... and the margin is not loose: misses do happen, near delta1 / 2.
        assert stats.binom.cdf(misses, n_draws, p.delta_bound / 4) > 1 - 1e-6
        assert np.all((hats >= 2.0**-40 * diameter) & (hats <= diameter))
        # S_hat / S is e^{mu + Laplace}: its median is e^mu within a grid step.
        ratio = np.median(np.log(hats / target))
        assert abs(ratio - p.log_margin) < 0.1 * p.bound_mechanism.scale + 1e-3
    # A quarter of the margin misses far more often than delta1 (about 0.33): the
    # check above has power.
    half = p._replace(log_margin=p.log_margin / 4)
    hats = np.array([sa._release_bound(0.37, half, diameter, rng) for _ in range(1000)])
    assert np.mean(hats < 0.37) > 1.3 * p.delta_bound


def test_noisy_bound_is_capped_by_the_diameter():
    p = release_parameters(1.0, 1e-5, 3)
    rng = np.random.default_rng(21)
    for S in (4.0, 1.9):  # S may exceed Lambda (S <= 2 Lambda); S_hat never does
        assert all(sa._release_bound(S, p, 2.0, rng) == 2.0 for _ in range(50))


def test_centre_release_noise_is_the_calibrated_grid_gaussian():
    # (noisy - g) / sigma is N(0, (1 + 2^-10)^2 I) on the grid of GaussianMechanism:
    # chi-square band on the sum of squares; every coordinate on the grid.
    p = release_parameters(2.0, 1e-5, 4)
    g = np.array([0.3, -0.2, 0.1, 1e-3])
    S, diameter = 0.05, 2.0
    rng = np.random.default_rng(22)
    total, n_draws, hats = 0.0, 2000, []
    for _ in range(n_draws):
        noisy, S_hat, sigma = sa._release_centre(g, S, p, diameter, rng)
        assert sigma == calibrate_analytic_gaussian(
            p.epsilon_value, p.delta_value, S_hat
        )
        step = grid_step(min(S_hat, sigma), g.size)
        units = noisy / step
        np.testing.assert_array_equal(units, np.round(units))
        total += float(np.sum(((noisy - g) / (sigma * (1 + GRID_SLACK))) ** 2))
        hats.append(S_hat)
    dof = n_draws * g.size
    lo, hi = stats.chi2.ppf([1e-4, 1 - 1e-4], dof)
    assert lo < total < hi
    # The noise is about 2x below NRS07's S / gamma on this case.
    gamma, _ = nrs_gaussian_parameters(2.0, 1e-5, 4)
    sigma_med = calibrate_analytic_gaussian(
        p.epsilon_value, p.delta_value, float(np.median(hats))
    )
    assert 1.5 < (S / gamma) / sigma_med < 4


def test_release_outputs_of_neighbours_lie_on_one_public_grid():
    # Mironov (2012): NRS07's g + (S / gamma) N(0, I) is a float draw, off any grid,
    # and its reachable set depends on g and S. The release puts every output of
    # both neighbours on the power-of-two grid of the released (S_hat, sigma): all
    # are integer multiples of the smallest step seen, and the integer noise reaches
    # a dense set of grid points.
    Z = np.random.default_rng(23).normal(scale=0.01, size=(100, 2))
    Z_prime = Z.copy()
    Z_prime[:10] += 0.3  # one record moves s_NRS = 10 solutions
    p = release_parameters(1.0, 1e-5, 2)
    rng = np.random.default_rng(24)
    outputs, steps = [], []
    for z in (Z, Z_prime):
        g, S = sa._aggregate(z, 10, p.beta, 2.0)
        for _ in range(300):
            noisy, S_hat, sigma = sa._release_centre(g, S, p, 2.0, rng)
            outputs.append(noisy)
            steps.append(grid_step(min(S_hat, sigma), 2))
    unit = min(steps)
    units = np.array(outputs) / unit
    np.testing.assert_array_equal(units, np.round(units))
    assert np.unique(units[:300, 0]).size > 250 and np.unique(units[300:, 0]).size > 250
    # The continuous draw of NRS07 at the same scale is off that grid.
    gamma, _ = nrs_gaussian_parameters(1.0, 1e-5, 2)
    g, S = sa._aggregate(Z, 10, p.beta, 2.0)
    continuous = g + rng.normal(0.0, S / gamma, size=(300, 2))
    assert np.mean(continuous / unit != np.round(continuous / unit)) > 0.99


def test_nrs_release_is_the_projected_centre_release(monkeypatch):
    # nrs_release = projection of the grid release of (g, S) from _aggregate,
    # with the parameters of release_parameters (beta from NRS07).
    Z = np.random.default_rng(25).normal(scale=0.05, size=(400, 3))
    seen = {}
    real = sa._release_centre

    def spy(g, S, params, diameter, rng):
        out = real(g, S, params, diameter, rng)
        seen.update(g=g, S=S, params=params, diameter=diameter, out=out)
        return out

    monkeypatch.setattr(sa, "_release_centre", spy)
    coef = sa.nrs_release(Z, 20, 3.0, 1e-6, 0.5, np.random.default_rng(0))
    expected = release_parameters(3.0, 1e-6, 3)
    assert seen["params"][:5] == expected[:5]
    assert seen["params"].log_margin == expected.log_margin
    mech = seen["params"].bound_mechanism
    assert (mech.sensitivity, mech.scale) == (
        expected.bound_mechanism.sensitivity,
        expected.bound_mechanism.scale,
    )
    assert seen["diameter"] == 1.0
    g, S = sa._aggregate(project_rows_l2_ball(Z, 0.5), 20, seen["params"].beta, 1.0)
    np.testing.assert_array_equal(seen["g"], g)
    assert seen["S"] == S
    np.testing.assert_array_equal(
        coef, project_rows_l2_ball(seen["out"][0][None, :], 0.5)[0]
    )


def test_large_epsilon_runs_and_spends_exactly_the_budget():
    # NRS07's Gaussian calibration is a small-epsilon result (it leaks beyond
    # about eps = 15); propose-test-release has no such limit.
    X, y, _ = _ridge_problem(20_000, 15)
    out = _sa(
        X, y, "squared", epsilon=50.0, delta=1e-5, radius=2.0, n_subsets=400,
        rng=np.random.default_rng(0),
    )  # fmt: skip
    assert np.all(np.isfinite(out.coef)) and np.linalg.norm(out.coef) <= 2.0
    (record,) = out.records
    assert (record.kind, record.epsilon, record.delta) == ("approx_dp", 50.0, 1e-5)
    spent = PrivacySpent.from_records(out.records, 1e-5)
    assert spent.epsilon == 50.0 and spent.delta == 1e-5


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_huge_epsilon_is_refused_without_numerical_warnings():
    from skdpsco import HeavyTailedDPRidge

    X = np.random.default_rng(0).normal(size=(3000, 3))
    with pytest.raises(ValueError, match="total variation"):
        HeavyTailedDPRidge(algorithm="sample_aggregate", epsilon=1e6).fit(X, X[:, 0])


@pytest.mark.parametrize(("epsilon", "dim"), [(100.0, 4), (300.0, 4), (300.0, 100)])
def test_tight_solutions_at_large_epsilon_are_not_clamped_toward_zero(epsilon, dim):
    # With a floor of 2^-40 Lambda alone, the value grid (step ~ 2^-10 min(S_hat,
    # sigma) / sqrt(d)) spanned less than the ball within its 2^52 steps: a centre
    # at 0.9 came back as 0.5 or 0.25. The public floor keeps the ball on the grid.
    m, s, radius = 2500, 50, 1.0
    Z = np.zeros((m, dim))
    Z[:, 0] = 0.9
    Z += np.random.default_rng(0).normal(scale=1e-14, size=Z.shape)
    params = sa.release_parameters(epsilon, 1e-5, dim)
    with np.errstate(all="ignore"):
        g, S = sa._aggregate(Z, s, params.beta, 2 * radius)
        for seed in range(3):
            noisy, _, _ = sa._release_centre(
                g, S, params, 2 * radius, np.random.default_rng(seed)
            )
            assert abs(noisy[0] - 0.9) < 0.01, noisy[0]
