"""Private-range truncated mean (Kamath, Liu & Zhang 2021, Alg. 2–3, App. B) and its
public schedules (Algorithm 4 with Theorems 4.7 and 4.8): worked-example numbers,
sensitivities, noise scales, the data-independent split of Section 4.1 into disjoint
halves, and the zCDP ledger."""

import math
import tracemalloc

import numpy as np
import pytest
from scipy import stats

from skdpsco._design import LinearDesign
from skdpsco._mean_estimation import _truncated_mean as tm
from skdpsco._mean_estimation._schedules import (
    axis_convex_schedule,
    axis_strongly_convex_schedule,
    convex_schedule,
    strongly_convex_schedule,
)
from skdpsco._mean_estimation._truncated_mean import (
    AxisTruncatedMeanOracle,
    BucketGrid,
    TruncatedMeanOracle,
    axis_truncated_mean,
    bucket_counts,
    default_gradient_bound,
    mean_stage_size,
    private_range_centre,
    range_histogram_mechanism,
    truncated_mean,
)
from skdpsco.privacy import account_records, approx_dp_to_zcdp, gdp_to_approx_dp

RHO_EXAMPLE = approx_dp_to_zcdp(1.0, 1e-5)  # 0.0208199 (Lemma 2.3, inverted)
ORACLES = [TruncatedMeanOracle, AxisTruncatedMeanOracle]


def _per_sample_gradients(X, U, fit_intercept=True):
    Xt = np.hstack([X, np.ones((X.shape[0], 1))]) if fit_intercept else X
    return U[:, None] * Xt if U.ndim == 1 else Xt[:, :, None] * U[:, None, :]


# ----------------------------------- schedules (Algorithm 4, Theorems 4.7 and 4.8)


def test_worked_example_convex_numbers():
    # Worked example of Algorithm 4 with Theorem 4.7's parameters (n = |Z|, tau
    # clamped at Theorem 4.1's 60): N = 1e5, d = 10, k = 2, eps = 1, delta = 1e-5,
    # s = 1, R = 10, ball of radius 5 (M = 10).
    N, d = 100_000, 10
    n = mean_stage_size(N)
    assert n == 50_000
    assert n * math.sqrt(RHO_EXAMPLE) / d == pytest.approx(721.456, abs=1e-3)
    sched = convex_schedule(N, RHO_EXAMPLE, d, diameter=10.0, gradient_bound=10.0)
    assert sched.truncation_formula == pytest.approx(26.860, abs=1e-3)
    assert sched.truncation == 60.0
    assert sched.n_iter == 78
    assert sched.learning_rate == pytest.approx(0.113228, abs=1e-6)
    assert sched.rho_per_iter == pytest.approx(2.66922e-4, rel=1e-5)
    assert sched.averaging == "uniform"
    oracle = TruncatedMeanOracle(gradient_bound=10.0).calibrate(
        N, sched.rho_per_iter, (d,), truncation=sched.truncation
    )
    assert oracle.mean_mechanism_.sigma == pytest.approx(0.437968, abs=1e-6)
    assert oracle.histogram_mechanism_.sigma == pytest.approx(193.56, abs=5e-3)
    np.testing.assert_array_equal(oracle.grid_.edges, [-40, -20, 0, 20, 40])
    assert oracle.radius_ == pytest.approx(60 * math.sqrt(10))


def test_worked_example_strongly_convex_numbers():
    sched = strongly_convex_schedule(
        100_000, RHO_EXAMPLE, 10, diameter=10.0, strong_convexity=1.0, smoothness=2.0
    )
    assert sched.n_iter == 18
    assert sched.learning_rate == pytest.approx(1 / 3)
    assert sched.truncation == 60.0
    assert sched.truncation_formula == pytest.approx(13.04, abs=5e-3)
    assert sched.averaging == "last"
    assert sched.rho_per_iter == pytest.approx(RHO_EXAMPLE / 18)
    # The rule holds at T and fails at T - 1 (it is the smallest such T).
    q, n, d = 7 / 9, 50_000, 10

    def G(T):
        return math.sqrt(d / n) + math.sqrt(d * math.sqrt(T) / (n * RHO_EXAMPLE**0.5))

    assert q**18 * 10 <= 1.5 * G(18) and q**17 * 10 > 1.5 * G(17)


def test_schedule_clamps_and_caps():
    # T >= 1 for a tiny budget; tau clamped at 60; L_R = max(1, ln R~) for R <= e s.
    low = convex_schedule(1000, 1e-9, 20, diameter=2.0)
    assert low.n_iter == 1 and low.truncation == 60.0
    assert low.rho_per_iter == 1e-9
    # The cap: T = max_iter, eta and rho_t recomputed with the capped T.
    capped = convex_schedule(
        10**7, 10.0, 5, diameter=4.0, moment_order=2.0, gradient_bound=2.0, max_iter=250
    )
    assert capped.n_iter == 250
    assert capped.learning_rate == pytest.approx(4.0 / (2.0 * math.sqrt(250)))
    assert capped.rho_per_iter == pytest.approx(10.0 / 250)
    # Convex tau does NOT include T (the paper's key choice): same tau for any cap.
    other = convex_schedule(
        10**7, 10.0, 5, diameter=4.0, moment_order=2.0, gradient_bound=2.0, max_iter=3
    )
    assert other.truncation == capped.truncation > 60.0
    # L_R: R~ = 2 < e gives L_R = 1, so T = floor(X / 4) for k = 2.
    sched = convex_schedule(20_000, 0.01, 10, diameter=1.0, gradient_bound=2.0)
    assert sched.n_iter == math.floor(10_000 * 0.1 / 10 / 4)
    # Strongly convex tau includes T; T never exceeds max_iter.
    sc = strongly_convex_schedule(
        20_000,
        0.01,
        10,
        diameter=1e6,
        strong_convexity=1e-3,
        smoothness=1.0,
        max_iter=40,
    )
    assert sc.n_iter == 40
    assert sc.truncation_formula == pytest.approx(
        math.sqrt(10_000 * math.sqrt(0.01 / 40) / 10)
    )
    # The testing mode rho = inf: T at the cap, the formula tau infinite.
    inf = convex_schedule(1000, math.inf, 3, diameter=1.0, max_iter=17)
    assert inf.n_iter == 17 and math.isinf(inf.truncation_formula)


def test_axis_and_budget_schedules():
    N, rho, p, R = 40_000, 0.5, 8, 6.0
    n = 20_000
    ax = axis_convex_schedule(N, rho, p, diameter=3.0, gradient_bound=R)
    assert ax.n_iter == min(1000, math.floor(math.sqrt(rho) * n * R**2 / p**1.5))
    assert ax.truncation_formula == pytest.approx((n * n * rho / p) ** 0.25)
    assert ax.learning_rate == pytest.approx(3.0 / (R * math.sqrt(ax.n_iter)))
    axs = axis_strongly_convex_schedule(
        N, rho, p, diameter=3.0, strong_convexity=0.5, smoothness=1.0
    )
    iso = strongly_convex_schedule(
        N, rho, p, diameter=3.0, strong_convexity=0.5, smoothness=1.0
    )
    assert axs.n_iter == iso.n_iter  # App. B: T and eta as in Theorem 4.8 (k = 2)
    assert axs.truncation_formula == pytest.approx(
        (n * n * rho / axs.n_iter / p) ** 0.25
    )
    # 'budget': the mean stage sees n = N at rho / 2.
    b = convex_schedule(N, rho, p, diameter=3.0, sample_split="budget")
    assert b.truncation_formula == pytest.approx(math.sqrt(N * math.sqrt(rho / 2) / p))


def test_default_gradient_bound_and_stage_size():
    assert default_gradient_bound(2.0, 100) == pytest.approx(20.0)
    assert default_gradient_bound(3.0, 5) == pytest.approx(3.0 * math.e)
    assert mean_stage_size(7) == 4 and mean_stage_size(7, "budget") == 7
    oracle = TruncatedMeanOracle(gradient_scale=3.0, truncation=60.0)
    assert oracle.calibrate(10, 1.0, (5,)).gradient_bound_ == pytest.approx(3 * math.e)


# ---------------------------------------------------------- CDPRE (Algorithm 2)


def test_bucket_grid_values():
    assert BucketGrid.from_bound(20, 10).edges.tolist() == [-40, -20, 0, 20, 40]
    assert BucketGrid.from_bound(10, 10).edges.tolist() == [-40, -20, 0, 20, 40]
    g = BucketGrid.from_bound(25, 10)
    assert g.n_buckets == 6 == 40 / 10 + 2
    np.testing.assert_array_equal(g.midpoints, [-50, -30, -10, 10, 30, 50])


def test_bucket_counts_edges_and_non_finite_values():
    grid = BucketGrid.from_bound(20, 10)  # [-40,-20), [-20,0), [0,20), [20,40]
    # -40 | -20, -1e-12 | 0, 19.999 | 20, 40 (closed); the rest in no bucket.
    v = np.array(
        [
            -40,
            -20.0,
            -1e-12,
            0,
            19.999,
            20,
            40,
            40.0001,
            -40.0001,
            np.nan,
            np.inf,
            -np.inf,
            1e308,
            -1e308,
        ]
    )
    np.testing.assert_array_equal(bucket_counts(v, grid)[0], [1, 2, 2, 2])
    # With a scale s the grid is in units of s: edges at 2.5 * [-40, ..., 40].
    with np.errstate(over="ignore"):
        scaled = 2.5 * v
    np.testing.assert_array_equal(
        bucket_counts(scaled, grid, scale=2.5)[0], [1, 2, 2, 2]
    )
    V = np.column_stack([v, -v])
    np.testing.assert_array_equal(bucket_counts(V, grid), [[1, 2, 2, 2], [1, 2, 2, 2]])


def test_histogram_sensitivity_under_replace_one():
    # Algorithm 2's histogram under replace-one: the count vector changes in <= 2
    # cells by exactly 1 (l2 <= sqrt 2).
    rng = np.random.default_rng(1)
    grid = BucketGrid.from_bound(30, 10)
    specials = [np.nan, np.inf, -np.inf, 1e300, 40.0, -60.0, 60.0, 0.0]
    for _ in range(200):
        v = rng.normal(0, 30, size=rng.integers(1, 12))
        base = bucket_counts(v, grid)[0]
        i = rng.integers(v.size)
        for new in [rng.normal(0, 50), *specials]:
            w = v.copy()
            w[i] = new
            diff = bucket_counts(w, grid)[0] - base
            assert np.count_nonzero(diff) <= 2 and np.all(np.abs(diff) <= 1)
            assert diff.sum() in (-1, 0, 1)


def test_histogram_noise_variance_on_every_bucket():
    # Algorithm 2's noise: rho' = 0.5 -> per-bucket variance 1/rho' = 2.0 +- 5%,
    # empty or not.
    mech = range_histogram_mechanism(0.5)
    assert mech.sigma == pytest.approx(math.sqrt(2.0))
    counts = np.array([[0, 0, 700, 0, 3, 0]])
    rng = np.random.default_rng(2)
    noise = np.stack([mech.release(counts, rng) - counts for _ in range(20_000)])
    var = noise.var(axis=0)[0]
    assert np.all(np.abs(var - 2.0) < 0.1)
    # Joint mechanism of p histograms: sensitivity sqrt(2p), same per-cell sigma.
    joint = range_histogram_mechanism(0.5, n_coordinates=7)
    assert joint.sensitivity == pytest.approx(math.sqrt(14))
    assert joint.sigma == mech.sigma


@pytest.mark.usefixtures("non_private_mode")
def test_range_estimator_noises_empty_buckets():
    # Every value in one bucket: with a tiny budget the noisy argmax sometimes lands
    # on an EMPTY bucket (so empty buckets are noised); with rho = inf never.
    values = np.full((5, 400), 13.0)  # 400 independent coordinates, 5 samples each
    rng = np.random.default_rng(3)
    noisy = private_range_centre(values, 1e-4, 20.0, 10.0, rng)
    midpoints = set(BucketGrid.from_bound(20, 10).midpoints.tolist())
    assert set(np.unique(noisy).tolist()) == midpoints  # all four buckets chosen
    exact = private_range_centre(values, math.inf, 20.0, 10.0, rng)
    np.testing.assert_array_equal(exact, 10.0)
    # Lowest-index tie rule on exact counts: an all-NaN column picks bucket 0.
    assert private_range_centre(np.full(3, np.nan), math.inf, 20, 10, rng) == -30.0


@pytest.mark.parametrize("dist", ["normal", "student"])
def test_range_estimator_accuracy_theorem_4_2(dist):
    # Theorem 4.2: m = 1000, mu ~ U[-100, 100], R = 100, rho' = 0.1, 1000 trials (as
    # 1000 independent coordinates): every midpoint within 30, >= 99% within 13.
    rng = np.random.default_rng(4 if dist == "normal" else 5)
    mu = rng.uniform(-100, 100, size=1000)
    if dist == "normal":
        noise = rng.normal(size=(1000, 1000))
    else:
        noise = rng.standard_t(3, size=(1000, 1000)) / math.sqrt(3)
    centre = private_range_centre(mu + noise, 0.1, 100.0, 10.0, rng)
    err = np.abs(centre - mu)
    assert err.max() <= 30
    assert np.mean(err <= 13) >= 0.99


# ------------------------------------ truncated mean (Algorithm 3, Appendix B)


def _brute_force_ratio(mean_fn, n, d, r, rng, n_datasets):
    """Max over adversarial replace-one pairs of ||f(Z) - f(Z')|| / (8 r sqrt-ish)."""
    c = rng.normal(size=d)
    units = np.vstack([np.eye(d), -np.eye(d)])
    candidates = [c + r * u for u in units] + [
        c + 0.999 * r * units[0],
        c + 1.001 * r * units[0],
        c + 1e6 * units[1 % len(units)],
        np.full(d, np.nan),
        np.full(d, np.inf),
        np.full(d, -np.inf),
        np.full(d, 1e200),  # finite row whose norm overflows
        c.copy(),
    ]
    worst = 0.0
    for _ in range(n_datasets):
        kind = rng.integers(0, 4, size=n)
        dirs = rng.normal(size=(n, d))
        dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
        radii = np.choose(
            kind,
            [
                rng.uniform(0, r, n),
                np.full(n, r),
                rng.uniform(r, 3 * r, n),
                np.full(n, r),
            ],
        )
        Z = c + radii[:, None] * dirs
        axis_rows = kind == 3  # exact boundary points on the first axis
        Z[axis_rows] = c + r * units[rng.integers(0, 2, axis_rows.sum()) * d]
        base = mean_fn(Z, c)
        assert np.all(np.isfinite(base))
        for i in range(n):
            for v in candidates:
                Z2 = Z.copy()
                Z2[i] = v
                other = mean_fn(Z2, c)
                assert np.all(np.isfinite(other))
                worst = max(worst, np.linalg.norm(other - base))
    return worst


@pytest.mark.parametrize("n,d", [(4, 1), (5, 2), (8, 3), (12, 2)])
def test_truncated_mean_sensitivity_brute_force(n, d):
    # The sensitivity behind Algorithm 3's noise: ||f(Z) - f(Z')|| <= 8 r / (3n),
    # r = tau sqrt(d), c fixed, over boundary, far, NaN, +-inf and overflowing
    # replacements, and kept counts below, at and above the 3n/4 floor. The bound is
    # tight (ratio -> 1).
    rng = np.random.default_rng(10 * n + d)
    r = 1.7 * math.sqrt(d)
    worst = _brute_force_ratio(
        lambda Z, c: truncated_mean(Z, c, r, n), n, d, r, rng, 120
    )
    bound = 8 * r / (3 * n)
    assert worst <= bound * (1 + 1e-12)
    assert worst >= 0.99 * bound


@pytest.mark.parametrize("n,d", [(4, 2), (8, 3)])
def test_axis_truncated_mean_sensitivity_brute_force(n, d):
    # App. B: per coordinate 8 tau / (3n); jointly 8 tau sqrt(d) / (3n).
    rng = np.random.default_rng(20 * n + d)
    tau = 1.3
    worst = _brute_force_ratio(
        lambda Z, c: axis_truncated_mean(Z, c, tau, n), n, d, tau, rng, 120
    )
    assert worst <= 8 * tau * math.sqrt(d) / (3 * n) * (1 + 1e-12)


def test_keep_test_drops_nan_and_overflowing_rows():
    c = np.zeros(2)
    Z = np.array([[1.0, 0.0], [np.nan, 0.0], [1e200, 1e200], [np.inf, 0], [2.0, 2.0]])
    # Kept: rows 0 and 4 (||(2,2)|| < 3); floor 3*5/4 = 3.75 > 2.
    np.testing.assert_allclose(truncated_mean(Z, c, 3.0, 5), [3.0 / 3.75, 2 / 3.75])
    # Per coordinate (an l-inf box): x keeps 1 and 2 (3 / 3.75); y keeps the rows
    # 0, 1, 3, 4 (the NaN / inf rows are finite in y), 4 > 3.75: 2 / 4.
    np.testing.assert_allclose(axis_truncated_mean(Z, c, 2.5, 5), [3.0 / 3.75, 0.5])


# ------------------------------------------------------------------ the oracles


def _design(N, p, rng, fit_intercept=False, **kwargs):
    X = rng.normal(size=(N, p - int(fit_intercept)))
    return X, LinearDesign(X, fit_intercept, **kwargs)


@pytest.mark.parametrize("Oracle", ORACLES)
@pytest.mark.parametrize("split", ["data", "budget"])
@pytest.mark.usefixtures("non_private_mode")
def test_non_private_limit_is_the_plain_mean(Oracle, split):
    # Non-private limit: rho = inf and tau = 1e3 keep every point: the output is the
    # plain mean of the per-sample gradients over Z ('data') or all rows ('budget').
    rng = np.random.default_rng(6)
    X, design = _design(1001, 4, rng, fit_intercept=True)
    U = rng.normal(size=1001)
    oracle = Oracle(truncation=1e3, sample_split=split).calibrate(1001, math.inf, (4,))
    out = oracle.estimate(design, U, np.random.default_rng(0))
    G = _per_sample_gradients(X, U)
    rows = ~oracle.in_y_ if split == "data" else slice(None)
    if split == "data":
        assert (~oracle.in_y_).sum() == 501 == oracle.n_
    np.testing.assert_allclose(out, G[rows].mean(axis=0), rtol=1e-12, atol=1e-14)
    # A huge but finite budget instead: error ~ 1e-10.
    oracle.calibrate(1001, 1e24, (4,))
    out = oracle.estimate(design, U, np.random.default_rng(0))
    np.testing.assert_allclose(out, G[rows].mean(axis=0), atol=1e-6)


@pytest.mark.parametrize("Oracle", ORACLES)
@pytest.mark.usefixtures("non_private_mode")
def test_multinomial_shape(Oracle):
    rng = np.random.default_rng(7)
    N, d, K = 300, 3, 4
    X, design = _design(N, d + 1, rng, fit_intercept=True)
    U = rng.normal(size=(N, K))
    oracle = Oracle(truncation=1e3).calibrate(N, math.inf, (d + 1, K))
    assert oracle.dim_ == (d + 1) * K
    out = oracle.estimate(design, U, np.random.default_rng(1))
    assert out.shape == (d + 1, K)
    G = _per_sample_gradients(X, U)
    np.testing.assert_allclose(
        out, G[~oracle.in_y_].mean(axis=0), rtol=1e-12, atol=1e-13
    )
    noisy = Oracle(truncation=60.0).calibrate(N, 0.5, (d + 1, K))
    assert noisy.estimate(design, U, np.random.default_rng(1)).shape == (d + 1, K)


@pytest.mark.parametrize("Oracle", ORACLES)
@pytest.mark.usefixtures("non_private_mode")
def test_oracle_sensitivity_with_adversarial_rows_in_z(Oracle):
    # Same seed -> same split (data-independent), rho = inf -> c from exact counts on
    # the unchanged Y. Replacing one Z row moves the output by <= 8 tau sqrt(p) s / 3n.
    N, p, s, tau = 41, 3, 2.5, 1.0
    rng = np.random.default_rng(8)
    # Grid in units of s: buckets of width 50, the data's bucket [0, 50) has
    # midpoint c = 25 in every coordinate; ball radius tau sqrt(p) s = 4.33.
    c = np.full(p, 25.0)
    X = c + rng.normal(scale=2.0, size=(N, p))
    U = np.ones(N)
    kw = dict(gradient_scale=s, truncation=tau, bucket_halfwidth=10.0)

    def run(X):
        with pytest.warns(UserWarning, match="truncation"):
            oracle = Oracle(**kw).calibrate(N, math.inf, (p,))
        out = oracle.estimate(LinearDesign(X, False), U, np.random.default_rng(5))
        return oracle, out

    oracle, base = run(X)
    z_rows = np.flatnonzero(~oracle.in_y_)
    r = tau * s * math.sqrt(p) if Oracle is TruncatedMeanOracle else tau * s
    e0 = np.eye(p)[0]
    candidates = [
        np.full(p, np.nan),
        np.full(p, np.inf),
        np.full(p, -1e200),
        1e6 * np.ones(p),
        np.zeros(p),
        c,
        c + r * e0,
        c - r * e0,
        c + 1.0001 * r * e0,
        2 * c - X[z_rows[0]],
    ]
    worst = 0.0
    for i in z_rows[:8]:
        for v in candidates:
            X2 = X.copy()
            X2[i] = v
            other_oracle, other = run(X2)
            np.testing.assert_array_equal(other_oracle.in_y_, oracle.in_y_)
            assert np.all(np.isfinite(other))
            worst = max(worst, np.linalg.norm(other - base))
    bound = 8 * tau * math.sqrt(p) * s / (3 * oracle.n_)
    assert oracle.mean_mechanism_.sensitivity == pytest.approx(bound)
    assert 0.1 * bound < worst <= bound * (1 + 1e-12)


@pytest.mark.filterwarnings("ignore:truncation")
@pytest.mark.parametrize("Oracle", ORACLES)
@pytest.mark.parametrize("split", ["data", "budget"])
@pytest.mark.usefixtures("non_private_mode")
def test_noiseless_oracle_equals_the_reference_algorithm(Oracle, split):
    # rho = inf: CDPRE on exact counts of Y, then the truncated mean of Z with the
    # floor 3n/4 -- recomputed here from the module's reference functions on explicit
    # per-sample gradients. About a third of Z lies outside the ball (box), so the
    # floor binds.
    N, p, s, tau, R = 403, 3, 1.5, 3.5, 40.0
    rng = np.random.default_rng(18)
    X = 13.0 + rng.normal(scale=2.0, size=(N, p))
    U = 1.0 + 0.3 * rng.standard_t(4, size=N)
    design = LinearDesign(X, False, chunk_rows=50)
    oracle = Oracle(
        gradient_scale=s, truncation=tau, gradient_bound=R, sample_split=split
    ).calibrate(N, math.inf, (p,))
    out = oracle.estimate(design, U, np.random.default_rng(0))
    G = _per_sample_gradients(X, U, fit_intercept=False)
    everything = np.ones(N, dtype=bool)
    in_y = oracle.in_y_ if split == "data" else everything
    in_z = ~oracle.in_y_ if split == "data" else everything
    c = s * private_range_centre(G[in_y] / s, math.inf, R / s, 10.0, rng)
    np.testing.assert_array_equal(c, 15.0)  # bucket [0, 30) in units of s = 1.5
    D = G[in_z] - c
    if Oracle is TruncatedMeanOracle:
        r = tau * math.sqrt(p) * s
        expected = truncated_mean(G[in_z], c, r, oracle.n_)
        kept = np.sum(np.linalg.norm(D, axis=1) <= r)
    else:
        expected = axis_truncated_mean(G[in_z], c, tau * s, oracle.n_)
        kept = np.sum(np.abs(D) <= tau * s, axis=0)
    assert np.all(kept < 0.75 * oracle.n_) and np.all(kept > 0.5 * oracle.n_)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-13)


@pytest.mark.filterwarnings("ignore:truncation")
@pytest.mark.parametrize("Oracle", ORACLES)
def test_chunked_mean_stage_is_the_reference_function(Oracle):
    # The mean stage the oracles run on the gradient chunks (one chunk here, so
    # the sums associate alike) is, bit for bit, the public function whose
    # sensitivity the brute-force tests check: same kept sum, same floored finish.
    N, p, s, tau = 403, 3, 1.5, 3.5
    rng = np.random.default_rng(18)
    X = 13.0 + rng.normal(scale=2.0, size=(N, p))
    U = 1.0 + 0.3 * rng.standard_t(4, size=(N, 2))  # 2-d: the axis mask path
    design = LinearDesign(X, False, chunk_rows=N)
    oracle = Oracle(gradient_scale=s, truncation=tau).calibrate(N, 1.0, (p, 2))
    oracle.in_y_ = oracle._draw_split(np.random.default_rng(0))
    oracle.widening_ = None  # the chunked ball test (the products' is exercised below)
    centre = np.full(2 * p, 20.0)
    out = oracle._mean_query(design, U, centre)
    G = _per_sample_gradients(X, U, fit_intercept=False).reshape(N, -1)
    Z = G[~oracle.in_y_]
    if Oracle is TruncatedMeanOracle:
        expected = truncated_mean(Z, centre, oracle.radius_, oracle.n_)
        assert 0 < np.sum(np.linalg.norm(Z - centre, axis=1) <= oracle.radius_)
    else:
        expected = axis_truncated_mean(Z, centre, oracle.radius_, oracle.n_)
    np.testing.assert_array_equal(out, expected)
    assert not np.allclose(out, centre)


@pytest.mark.usefixtures("non_private_mode")
def test_floor_far_cluster_output_is_the_centre():
    # The floor 3n/4 of Algorithm 3: if all of Z lies outside the ball, the output is
    # c (+ noise), finite and independent of how far away the points are.
    N, p = 60, 2
    rng = np.random.default_rng(9)
    X = rng.normal(5.0, 1.0, size=(N, p))  # all in the bucket [0, 20)
    oracle = TruncatedMeanOracle(truncation=60.0).calibrate(N, math.inf, (p,))
    design = LinearDesign(X, False)
    oracle.estimate(design, np.ones(N), np.random.default_rng(0))
    outs = []
    for far in (1e5, 1e250):
        X2 = X.copy()
        X2[~oracle.in_y_] = far
        o = TruncatedMeanOracle(truncation=60.0).calibrate(N, math.inf, (p,))
        outs.append(
            o.estimate(LinearDesign(X2, False), np.ones(N), np.random.default_rng(0))
        )
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], [10.0, 10.0])  # bucket [0, 20) midpoint


def test_non_finite_gradients_keep_the_output_finite():
    rng = np.random.default_rng(10)
    X, design = _design(200, 3, rng, fit_intercept=True)
    U = rng.normal(size=200)
    U[:30] = np.inf
    U[30:60] = np.nan
    U[60] = 1e308
    for Oracle in ORACLES:
        out = (
            Oracle(truncation=60.0)
            .calibrate(200, 1.0, (3,))
            .estimate(design, U, np.random.default_rng(0))
        )
        assert np.all(np.isfinite(out))


def test_mean_stage_noise_std_chi_square_band():
    # Algorithm 3's noise sigma^2 = 32 tau^2 d / (9 n^2 rho): tau = 60, d = 4,
    # n = 1000, rho = 1 -> 0.0512 (s = 1); with s = 2 the std doubles. Data
    # concentrated in one bucket, so c is the same in every call (histogram noise
    # std 2 against ~1000 counts).
    N, p, s, reps = 2000, 4, 2.0, 1500
    rng = np.random.default_rng(11)
    X = rng.normal(5.0 * s, 0.5 * s, size=(N, p))
    design = LinearDesign(X, False)
    oracle = TruncatedMeanOracle(gradient_scale=s, truncation=60.0)
    oracle.calibrate(N, 1.0, (p,))
    sigma = s * math.sqrt(32 * 3600 * 4 / (9 * 1000**2 * 1.0))
    assert sigma / s == pytest.approx(math.sqrt(0.0512))
    assert oracle.mean_mechanism_.sigma == pytest.approx(sigma)
    gen = np.random.default_rng(12)
    first = oracle.estimate(design, np.ones(N), gen)
    exact = X[~oracle.in_y_].mean(axis=0)
    draws = np.stack([oracle.estimate(design, np.ones(N), gen) for _ in range(reps)])
    resid = np.vstack([first, draws]) - exact
    dof = resid.size
    lo, hi = stats.chi2.ppf([0.0005, 0.9995], dof) / dof
    assert lo * sigma**2 < np.mean(resid**2) < hi * sigma**2
    assert np.abs(resid.mean()) < 4 * sigma / math.sqrt(dof)


def test_heavy_tailed_accuracy_theorem_4_1():
    # Theorem 4.1's MSE bound with the explicit constants of its proof (App. C.4):
    # d = 5, N = 10 000, rho = 1, tau = 60, unit-variance t_5 noise around
    # ||mu|| <= 10, R = 20: mean squared error within 8d/n + 32 tau^2 d^2 / (9 n^2 rho)
    # + 0.01.
    N, d, runs = 10_000, 5, 60
    rng = np.random.default_rng(13)
    oracle = TruncatedMeanOracle(truncation=60.0, gradient_bound=20.0)
    errs = []
    for _ in range(runs):
        mu = rng.uniform(-4, 4, size=d)
        X = mu + rng.standard_t(5, size=(N, d)) * math.sqrt(3 / 5)
        oracle.calibrate(N, 1.0, (d,))
        est = oracle.estimate(LinearDesign(X, False), np.ones(N), rng)
        errs.append(np.sum((est - mu) ** 2))
    assert np.mean(errs) <= 8 * d / 5000 + 32 * 3600 * 25 / (9 * 5000**2) + 0.01


def test_split_is_data_independent_and_kept_across_calls():
    rng = np.random.default_rng(14)
    N = 501
    splits = []
    for scale in (1.0, 1e6):
        X = rng.standard_cauchy(size=(N, 3)) * scale
        oracle = TruncatedMeanOracle(truncation=60.0).calibrate(N, 0.3, (3,))
        gen = np.random.default_rng(42)
        oracle.estimate(LinearDesign(X, False), rng.normal(size=N), gen)
        first = oracle.in_y_.copy()
        oracle.estimate(LinearDesign(X, False), rng.normal(size=N), gen)
        np.testing.assert_array_equal(oracle.in_y_, first)  # once per fit
        splits.append(first)
    np.testing.assert_array_equal(splits[0], splits[1])  # same seed, other data
    assert splits[0].sum() == N // 2
    other = TruncatedMeanOracle(truncation=60.0).calibrate(N, 0.3, (3,))
    other.estimate(LinearDesign(X, False), np.ones(N), np.random.default_rng(43))
    assert not np.array_equal(other.in_y_, splits[0])
    other.calibrate(N, 0.3, (3,))  # a new fit forgets the split
    assert other.in_y_ is None
    budget = TruncatedMeanOracle(truncation=60.0, sample_split="budget")
    budget.calibrate(N, 0.3, (3,)).estimate(
        LinearDesign(X, False), np.ones(N), np.random.default_rng(0)
    )
    assert budget.in_y_ is None


@pytest.mark.parametrize("Oracle", ORACLES)
@pytest.mark.parametrize("split", ["data", "budget"])
@pytest.mark.parametrize("shape", [(10,), (4, 3)])
def test_records_compose_to_rho_per_call(Oracle, split, shape):
    # Disjoint halves (Section 4.1): one call costs rho (not 2 rho): one
    # Gaussian record with mu = sqrt(2 rho). 'budget': two sqrt(rho)-GDP records.
    rho, count, delta = 2.66922e-4, 78, 1e-5
    oracle = Oracle(truncation=60.0, sample_split=split).calibrate(5000, rho, shape)
    records = oracle.records(count)
    assert len(records) == (1 if split == "data" else 2)
    assert all(r.kind == "gaussian" and r.count == count for r in records)
    eps, total_rho, how = account_records(records, delta)
    assert total_rho == pytest.approx(count * rho, rel=1e-12)
    assert how == "gdp"
    assert eps == pytest.approx(
        gdp_to_approx_dp(math.sqrt(2 * count * rho), delta), rel=1e-9
    )
    p = math.prod(shape)
    hist, mean = oracle.histogram_mechanism_, oracle.mean_mechanism_
    assert hist.sensitivity == pytest.approx(math.sqrt(2 * p))
    stage_rho = rho if split == "data" else rho / 2
    assert hist.sigma == pytest.approx(math.sqrt(p / stage_rho))
    n = oracle.n_
    assert mean.sigma == pytest.approx(
        math.sqrt(32 * 3600 * p / (9 * n**2 * stage_rho))
    )
    assert hist.rho == pytest.approx(stage_rho) and mean.rho == pytest.approx(stage_rho)
    assert oracle.noise_scale == mean.sigma
    if split == "data":
        assert "parallel composition" in records[0].name


@pytest.mark.parametrize("Oracle", ORACLES)
@pytest.mark.usefixtures("non_private_mode")
def test_infinite_truncation_only_in_the_testing_mode(Oracle):
    # The schedules give tau = inf at rho = inf; the oracle then keeps every finite
    # gradient (an outlier too) and still drops NaN / inf rows.
    sched = convex_schedule(600, math.inf, 4, diameter=2.0, max_iter=5)
    assert math.isinf(sched.truncation)
    rng = np.random.default_rng(17)
    X, design = _design(600, 4, rng, fit_intercept=True)
    X[:40] *= 1e8
    U = rng.normal(size=600)
    U[40:50] = np.nan
    U[50:53] = np.inf  # an infinite distance: dropped even with tau = inf
    oracle = Oracle(truncation=sched.truncation).calibrate(600, math.inf, (4,))
    out = oracle.estimate(design, U, np.random.default_rng(0))
    G = _per_sample_gradients(X, U)
    rows = ~oracle.in_y_ & np.all(np.isfinite(G), axis=1)
    assert rows.sum() >= 0.75 * oracle.n_  # above the floor: the plain mean of kept
    np.testing.assert_allclose(out, G[rows].mean(axis=0), rtol=1e-9, atol=1e-6)
    assert np.all(np.isfinite(out))
    (record,) = oracle.records(5)
    assert account_records([record], 1e-5)[1] == math.inf
    with pytest.raises(ValueError, match="testing mode"):
        Oracle(truncation=math.inf).calibrate(600, 1.0, (4,))


def test_truncation_sources_and_warnings():
    oracle = TruncatedMeanOracle()
    with pytest.raises(ValueError, match="auto"):
        oracle.calibrate(100, 1.0, (3,))
    assert oracle.calibrate(100, 1.0, (3,), truncation=80.0).truncation_ == 80.0
    assert (
        TruncatedMeanOracle(truncation=65.0).calibrate(9, 1.0, (2,)).truncation_ == 65
    )
    with pytest.warns(UserWarning, match="truncation=30"):
        TruncatedMeanOracle(truncation=30.0).calibrate(100, 1.0, (3,))
    with pytest.warns(UserWarning, match="bucket_halfwidth=5"):
        TruncatedMeanOracle(truncation=60.0, bucket_halfwidth=5.0).calibrate(
            100, 1.0, (3,)
        )
    with pytest.warns(UserWarning, match="6 \\* bucket_halfwidth"):
        TruncatedMeanOracle(truncation=100.0, bucket_halfwidth=20.0).calibrate(
            100, 1.0, (3,)
        )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"gradient_scale": 0.0},
        {"gradient_scale": np.inf},
        {"gradient_scale": np.nan},
        {"gradient_scale": "1"},
        {"truncation": "fixed"},
        {"truncation": -1.0},
        {"gradient_bound": 0.0},
        {"bucket_halfwidth": -2.0},
        {"moment_order": 1.5},
        {"sample_split": "rows"},
    ],
)
def test_bad_oracle_parameters_raise(kwargs):
    with pytest.raises(ValueError):
        TruncatedMeanOracle(**kwargs)


def test_bad_calibration_and_call_raise():
    oracle = TruncatedMeanOracle(truncation=60.0)
    with pytest.raises(RuntimeError, match="calibrate"):
        oracle.estimate(LinearDesign(np.ones((3, 2)), False), np.ones(3), None)
    for args in [
        (0, 1.0, (3,)),
        (10, 0.0, (3,)),
        (10, -1.0, (3,)),
        (10, 1.0, None),
        (10, 1.0, (3, 2, 2)),
        (10, 1.0, (0,)),
        (2.5, 1.0, (3,)),
    ]:
        with pytest.raises(ValueError):
            oracle.calibrate(*args)
    with pytest.raises(ValueError, match="too many"):
        TruncatedMeanOracle(truncation=60.0, gradient_bound=1e12).calibrate(
            10, 1.0, (3,)
        )
    oracle.calibrate(10, 1.0, (2,))
    with pytest.raises(ValueError, match="rows"):
        oracle.estimate(
            LinearDesign(np.ones((9, 2)), False), np.ones(9), np.random.default_rng(0)
        )
    with pytest.raises(TypeError, match="Generator"):
        oracle.estimate(LinearDesign(np.ones((10, 2)), False), np.ones(10), 0)


def test_bad_schedule_parameters_raise():
    ok = dict(diameter=2.0)
    with pytest.raises(ValueError):
        convex_schedule(0, 1.0, 3, **ok)
    with pytest.raises(ValueError):
        convex_schedule(10, 0.0, 3, **ok)
    with pytest.raises(ValueError):
        convex_schedule(10, 1.0, 3, diameter=-1.0)
    with pytest.raises(ValueError):
        convex_schedule(10, 1.0, 3, moment_order=1.0, **ok)
    with pytest.raises(ValueError):
        convex_schedule(10, 1.0, 3, max_iter=0, **ok)
    with pytest.raises(ValueError):
        convex_schedule(10, 1.0, 3, sample_split="x", **ok)
    with pytest.raises(ValueError, match="exceed"):
        strongly_convex_schedule(10, 1.0, 3, strong_convexity=2.0, smoothness=1.0, **ok)
    with pytest.raises(ValueError):
        axis_strongly_convex_schedule(
            10, 1.0, 3, strong_convexity=0.0, smoothness=1.0, **ok
        )


# ------------------------------------------------------------- memory / chunks


@pytest.mark.parametrize("Oracle", ORACLES)
def test_chunk_size_does_not_change_the_result(Oracle):
    rng = np.random.default_rng(15)
    X = rng.standard_t(3, size=(997, 6))
    U = rng.normal(size=(997, 2))
    outs = []
    for chunk_rows in (65536, 7, 100):
        design = LinearDesign(X, True, chunk_rows=chunk_rows)
        oracle = Oracle(truncation=60.0).calibrate(997, 0.7, (7, 2))
        outs.append(oracle.estimate(design, U, np.random.default_rng(3)))
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(outs[2], outs[0], rtol=1e-12, atol=1e-14)


def test_no_n_by_p_temporaries():
    # Peak traced memory of one call stays far below one n x p float array.
    N, p = 40_000, 50
    rng = np.random.default_rng(16)
    X = rng.normal(size=(N, p))
    design = LinearDesign(X, True, chunk_rows=1000)
    U = rng.normal(size=N)
    oracle = TruncatedMeanOracle(truncation=60.0).calibrate(N, 0.1, (p + 1,))
    gen = np.random.default_rng(0)
    oracle.estimate(design, U, gen)  # draws the split (an (N,) array) first
    tracemalloc.start()
    try:
        oracle.estimate(design, U, gen)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < N * (p + 1) * 8 / 4


# ------------------------------------------------- the fast paths of the oracles


def test_threshold_counts_match_the_division_bit_for_bit():
    # The histogram compares each entry with public thresholds instead of dividing
    # it by w s: same buckets for edges (and the floats next to them), -0.0,
    # subnormals, NaN, +-inf and values past the grid, at scales that do and do
    # not divide the edges exactly.
    rng = np.random.default_rng(40)
    cases = [(2.7, 10.0, 1.0), (45.0, 10.0, 2.5), (9.0, 1.5, 0.3), (2.7, 10.0, 1e-310)]
    for bound, halfwidth, s in cases:
        grid = BucketGrid.from_bound(bound, halfwidth)
        edges = grid.edges * grid.width * s / grid.width  # e w s, rounded
        special = np.concatenate(
            [
                edges,
                np.nextafter(edges, np.inf),
                np.nextafter(edges, -np.inf),
                [0.0, -0.0, 5e-324, -5e-324, -1e-320, np.nan, np.inf, -np.inf],
                [1e300, -1e300, 2.0 * edges[-1], 0.1, -0.1],
            ]
        )
        values = np.concatenate(
            [special, rng.standard_t(1, 3000) * grid.width * s * grid.half_count]
        )
        V = rng.permutation(np.resize(values, 6 * 1031)).reshape(1031, 6)
        thresholds = tm._bucket_thresholds(grid, s)
        assert thresholds is not None
        fast = tm._counts_from_thresholds(tm._threshold_counts(V, thresholds))
        np.testing.assert_array_equal(fast, bucket_counts(V, grid, s))
        assert fast.sum() > 0.5 * V.size
    # A bucket width past the float range falls back to the division (None).
    assert tm._bucket_thresholds(BucketGrid.from_bound(1.0, 10.0), 1e307) is None


@pytest.mark.parametrize("rows", [1, 7, 8, 9, 1031, 2040])
def test_column_counter_counts_every_column(rows):
    # uint64 words of 8 rows x p bytes, summed over <= 255 groups per call: the
    # byte lanes must not carry into each other even when every entry is True.
    rng = np.random.default_rng(rows)
    counter = tm._ColumnCounter(2, 13)
    B_all = []
    for fill in (0.5, 1.0, 0.0, 1.0):
        B = rng.random((2, rows, 13)) < fill
        counter.add(B)
        B_all.append(B)
    np.testing.assert_array_equal(
        counter.result(), np.concatenate(B_all, axis=1).sum(axis=1)
    )


def test_axis_clipped_sum_equals_the_masked_sum():
    # The clip-and-correct sum keeps the entries with |fl(g - c)| <= h, like the
    # masked one: entries exactly at c +- h, the floats next to them, +-inf,
    # 1e308 (g - c overflows) and subnormals; sums equal up to rounding, counts
    # exactly. 1031 rows: blocks of 8-row words and a remainder.
    rng = np.random.default_rng(43)
    p, h = 6, 60.0
    c = np.array([10.0, -10.0, 30.0, -30.0, 0.1, 1e-300])
    special = np.concatenate(
        [c + h, c - h, np.nextafter(c + h, np.inf), np.nextafter(c - h, -np.inf)]
    )
    values = np.concatenate(
        [special, [np.inf, -np.inf, 1e308, -1e308, 5e-324, 0.0, -0.0]]
    )
    G = rng.standard_t(1, size=(1031, p)) * 40.0
    flat = G.reshape(-1)
    flat[rng.choice(flat.size, values.size, replace=False)] = values
    total, kept = tm._axis_clipped_sum(G, c, h)
    ref_total, ref_kept = tm._axis_truncated_sum(G, c, h)
    np.testing.assert_array_equal(kept, ref_kept)
    np.testing.assert_allclose(total, ref_total, rtol=1e-12, atol=1e-9)
    assert 0 < kept.min() and kept.max() < 1031


def _ball_oracle(N, shape, tau, s=1.0):
    with pytest.warns(UserWarning, match="truncation"):
        oracle = TruncatedMeanOracle(truncation=tau, gradient_scale=s)
        oracle.calibrate(N, 1.0, shape)
    oracle.in_y_ = oracle._draw_split(np.random.default_rng(0))
    return oracle


def test_ball_products_keep_exactly_the_rows_of_the_chunked_test():
    # Adversarial rows for the identity ||u x - c||^2 = u^2 ||x||^2 - 2 u <x, c> +
    # ||c||^2: 1e150-scale entries (alone and times u = 1e-150), gradients equal to
    # the centre up to rounding (total cancellation), integer gradients exactly on
    # the sphere, rows just outside it, u = 0 under 1e300 entries, NaN / inf u.
    # The matrix-vector test keeps the same rows as the chunked one, and every
    # row it keeps is within r sqrt(1 + 4 kappa) of c (checked in exact
    # arithmetic).
    from fractions import Fraction

    rng = np.random.default_rng(41)
    d = 4
    c = np.array([10.0, -10.0, 30.0, 10.0])
    r = 20.0  # tau sqrt(p) s below
    rows, us = [], []

    def add(x, u):
        rows.append(np.asarray(x, dtype=float))
        us.append(u)

    for _ in range(64):
        add(c + rng.normal(scale=8.0, size=d), 1.0)  # about half inside
        add(rng.normal(size=d) * 1e150, rng.choice([1.0, 1e-150, -1e-150]))
        add(c / 3.0, 3.0)  # g = 3 fl(c / 3): c up to rounding
        e = np.eye(d)[rng.integers(d)] * rng.choice([-1.0, 1.0])
        add(c + r * e, 1.0)  # on the sphere, exactly
    for scale in (1.0 + 1e-9, 1.0 + 1e-6, 1.5):
        add(c + scale * r * np.eye(d)[1], 1.0)
    add(np.full(d, 1e300), 0.0)
    add(c, np.inf)
    add(c, np.nan)
    X = np.array(rows)
    U = np.array(us)
    N = X.shape[0]
    oracle = _ball_oracle(N, (d,), tau=1.0, s=10.0)
    assert oracle.radius_ == r
    design = LinearDesign(X, fit_intercept=False)
    assert oracle.widening_ is not None and oracle.widening_ < 1e-10
    total_p, kept_p = oracle._ball_sum_products(design, U, c)
    total_c, kept_c = oracle._ball_sum_chunks(design, U, c)
    assert kept_p == kept_c > N // 4
    np.testing.assert_allclose(total_p, total_c, rtol=1e-12, atol=1e-9)

    # In exact arithmetic: the kept rows are those of Z within r of c.
    z = ~oracle.in_y_
    kept_exact = 0
    for x, u, in_z in zip(X, U, z, strict=True):
        if not in_z or not np.isfinite(u):
            continue
        dist2 = sum(
            (Fraction(float(u)) * Fraction(float(v)) - Fraction(float(cj))) ** 2
            for v, cj in zip(x, c, strict=True)
        )
        kept_exact += dist2 <= Fraction(r) ** 2
    assert kept_exact == kept_p


def test_ball_products_with_an_intercept_and_several_outputs():
    # K = 3 (multinomial): ||g_i - c||^2 = ||u_i||^2 ||x~_i||^2 - 2 <u_i, X~_i C>
    # + ||C||^2, the intercept column inside the row norms and the predictions.
    rng = np.random.default_rng(42)
    N, d, K = 600, 3, 3
    X = rng.standard_t(2, size=(N, d))
    U = rng.standard_t(2, size=(N, K))
    U[:5] = 0.0
    oracle = _ball_oracle(N, (d + 1, K), tau=1.5)
    c = rng.choice([-0.5, 0.5], size=(d + 1) * K)
    design = LinearDesign(X, fit_intercept=True, intercept_column=2.0)
    total_p, kept_p = oracle._ball_sum_products(design, U, c)
    total_c, kept_c = oracle._ball_sum_chunks(design, U, c)
    assert kept_p == kept_c and 0.1 * oracle.n_ < kept_p < oracle.n_
    np.testing.assert_allclose(total_p, total_c, rtol=1e-12, atol=1e-9)


def test_matrix_vector_ball_widens_the_sensitivity_by_a_public_factor():
    # The products path keeps rows within r sqrt(1 + 4 kappa): the sensitivity is
    # that radius's; the chunked path (tau = inf, or a gradient bound far beyond
    # the truncation) keeps 8 r / (3n), and so does the axis oracle.
    oracle = TruncatedMeanOracle(truncation=60.0).calibrate(10_000, 1.0, (51,))
    kappa = oracle.widening_
    assert 1e-14 < kappa < 1e-12
    base = 8 * 60.0 * math.sqrt(51) / (3 * oracle.n_)
    assert oracle.mean_mechanism_.sensitivity == pytest.approx(
        base * math.sqrt(1 + 4 * kappa), rel=1e-15
    )
    assert oracle.mean_mechanism_.sensitivity > base
    far = TruncatedMeanOracle(truncation=60.0, gradient_bound=1e5)
    assert far.calibrate(10_000, 1.0, (51,)).widening_ is None
    axis = AxisTruncatedMeanOracle(truncation=60.0).calibrate(10_000, 1.0, (51,))
    assert axis.widening_ is None
    assert axis.mean_mechanism_.sensitivity == pytest.approx(base, rel=1e-15)


@pytest.mark.parametrize(
    ("algorithm", "Est", "expected"),
    [
        (
            "truncated_mean_gd",
            "HeavyTailedDPRidge",
            [
                3.018853537409408,
                2.950081340978067,
                -2.3776371548547517,
                1.1320830255199428,
            ],
        ),
        (
            "truncated_mean_gd",
            "HeavyTailedDPLogistic",
            [
                3.679981825500306,
                -4.842036071338307,
                -0.2089140852342616,
                3.7810372005999486,
            ],
        ),
        (
            "axis_truncated_mean_gd",
            "HeavyTailedDPRidge",
            [
                4.7626770158089915,
                -0.8061573308926799,
                -0.9188429720938427,
                4.595616499708845,
            ],
        ),
        (
            "axis_truncated_mean_gd",
            "HeavyTailedDPLogistic",
            [
                3.2307567091137823,
                -4.825989953163237,
                0.6123986063675694,
                2.345387095456291,
            ],
        ),
    ],
)
def test_seeded_fits_match_the_chunked_implementation(algorithm, Est, expected):
    # Golden numbers of the implementation that built every per-sample gradient
    # twice (histograms and the truncated sum by chunks on all rows, the other
    # half masked out): the faster paths release the same values.
    import skdpsco

    rng = np.random.default_rng(16)
    X = rng.standard_t(3, (400, 3))
    y = X @ [1.0, -2.0, 0.5] + rng.standard_t(2, 400)
    if Est == "HeavyTailedDPLogistic":
        y = (y > 0).astype(int)
    est = getattr(skdpsco, Est)(
        algorithm=algorithm, epsilon=2.0, max_iter=8, random_state=3
    ).fit(X, y)
    got = np.append(est.coef_.ravel(), est.intercept_)
    np.testing.assert_allclose(got, expected, rtol=1e-9)
    assert est.privacy_spent_.epsilon == pytest.approx(1.9999999976547191, rel=1e-15)
    assert est.privacy_spent_.rho == pytest.approx(0.1257770481903344, rel=1e-15)
