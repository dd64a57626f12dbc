"""Smooth-sensitivity trimmed mean oracle (Wang et al. 2020, Algorithms 2-3).

Worked numbers of Algorithm 3's calibration (n = 1e5, d = 10, T = 10, eps = 1,
delta = 1e-5); the t-smooth bound S of skdpsco._mean_estimation._trimmed_mean (>=
the brute-force local sensitivity, t-smooth over replace-one neighbours), with the
scale printed in Algorithm 2, line 1, as a documented negative test (it is not
t-smooth); the range eps0 <= 1 of Theorem 3 (Bun & Steinke's arsinh-normal
guarantee); the sinh noise law and the non-private limit.
"""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

import skdpsco._mean_estimation._trimmed_mean as tm
from skdpsco._mean_estimation._trimmed_mean import (
    SmoothSensitivityTrimmedMeanOracle,
    _accurate_sum,
    default_trim_count,
    trimmed_mean,
    trimmed_mean_smooth_sensitivity,
)
from skdpsco._solvers import LinearDesign
from skdpsco.privacy import (
    PrivacySpent,
    account_records,
    approx_dp_to_zcdp,
    zcdp_to_approx_dp,
)
from skdpsco.privacy._mechanisms import arsinh_normal_noise

SINH_STD = math.sqrt((math.e**2 - 1) / 2)  # std of sinh(N(0, 1)) = 1.7873


def reference_smooth_sens(z, m, a, b, t):
    """The bound S of the oracle's module, literally (1-based order statistics)."""
    z = np.sort(np.asarray(z, dtype=float))
    n = len(z)
    if m == 0:
        return b - a

    def zz(i):  # z_(i), 1-based
        return z[i - 1]

    best = math.exp(-m * t) * (b - a)
    for k in range(m):
        inner = max(
            (zz(n - m + 1 + k - l) - zz(m + 1 - l)) / (n - 2 * m) for l in range(k + 2)
        )
        best = max(best, math.exp(-k * t) * min(b - a, inner))
    return best


def paper_bound(z, m, a, b, t):
    """Wang et al. Algorithm 2, line 1: max{(z_(n) - z_(1)) / (n - 2m), e^-mt (b-a)}."""
    z = np.asarray(z, dtype=float)
    n = z.shape[-1]
    spread = (z.max(axis=-1) - z.min(axis=-1)) / (n - 2 * m)
    return np.maximum(spread, math.exp(-m * t) * (b - a))


def random_dataset(rng, n, kind):
    if kind == 0:
        return rng.standard_normal(n)
    if kind == 1:
        return 3.0 * rng.standard_cauchy(n)
    if kind == 2:
        return rng.integers(-2, 3, n).astype(float)  # many ties
    return np.exp(2.0 * rng.standard_normal(n)) * rng.choice([-1.0, 1.0], n)


def neighbours(rng, x):
    """All replace-one neighbours of x over a set of replacement values."""
    values = np.concatenate(
        [[-1e6, 1e6, 0.0], x, x + 1e-3, x - 1e-3, 2.0 * rng.standard_normal(4)]
    )
    out = np.repeat(x[None, :], len(x) * len(values), axis=0)
    rows = np.arange(out.shape[0])
    out[rows, np.repeat(np.arange(len(x)), len(values))] = np.tile(values, len(x))
    return out


# ------------------------------------------------------------------ worked numbers


def test_worked_numbers_of_algorithm_3():
    # n = 1e5, d = 10, T = 10, eps = 1, delta = 1e-5; one call gets rho / T, p = d.
    rho = approx_dp_to_zcdp(1.0, 1e-5)
    assert rho == pytest.approx(0.02081994, rel=1e-6)
    assert math.sqrt(2 * rho) == pytest.approx(0.2040585, rel=1e-6)  # eps~_3
    with pytest.warns(UserWarning, match="capped"):
        oracle = SmoothSensitivityTrimmedMeanOracle().calibrate(
            100_000, rho / 10, (10,)
        )
    assert oracle.epsilon0_ == pytest.approx(0.02040585, rel=1e-6)
    assert oracle.smoothness_ == pytest.approx(2.6025e-5, rel=1e-4)
    assert oracle.noise_divisor_ == pytest.approx(0.00510146, rel=1e-6)
    # ceil(ln(1e5) / t_SS) = 442,380 > (n - 1) / 4: default_trim_count's cap binds.
    assert math.log(1e5) / oracle.smoothness_ == pytest.approx(442_380, rel=1e-4)
    assert oracle.trim_count_ == 24_999
    assert oracle.mean_bounds_ == (-1.0, 1.0)
    assert oracle.rho_ == rho / 10


def test_default_trim_count_rule():
    # eps0 = 1: t = 1/16, m = ceil(16 ln n) = 185 at n = 1e5, no cap, no warning.
    assert default_trim_count(100_000, 1 / 16) == (185, False)
    assert default_trim_count(100, 1e-3) == (24, True)
    assert default_trim_count(4, 1 / 16) == (0, True)  # n < 5: no trimming
    assert default_trim_count(1, 1 / 16) == (0, False)
    assert default_trim_count(1000, math.inf) == (0, False)  # testing mode
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        oracle = SmoothSensitivityTrimmedMeanOracle().calibrate(100_000, 5.0, (10,))
    assert oracle.epsilon0_ == 1.0 and oracle.trim_count_ == 185
    assert oracle.calibrate(100, math.inf, (3,)).trim_count_ == 0


# ------------------------------------------------------------ the t-smooth bound S


def test_smooth_sensitivity_equals_reference_formula():
    rng = np.random.default_rng(0)
    for trial in range(600):
        n = int(rng.integers(1, 41))
        m = int(rng.integers(0, (n + 1) // 2))
        z = random_dataset(rng, n, trial % 4)
        a, b = sorted(rng.uniform(-3, 3, 2))
        t = float(rng.choice([1e-5, 1e-2, 0.1, 0.5, 2.0]))
        got = trimmed_mean_smooth_sensitivity(z, m, b - a, t)
        assert got == pytest.approx(reference_smooth_sens(z, m, a, b, t), rel=1e-12)


@pytest.mark.parametrize("case", ["cauchy", "flat"])
def test_branch_and_bound_is_exact_for_large_m(case):
    # Against the dense O(m^2) evaluation of the same floats: bit-for-bit equal. The
    # "flat" data make e^{-kt} A^(k) constant over half the k range, the worst case
    # of the pruning (every k there must be evaluated).
    rng = np.random.default_rng(1)
    n, m, t, width = 4001, 1500, 1e-3, 1.0
    g = n - 2 * m
    if case == "cauchy":
        z = np.sort(rng.standard_cauchy(n) * 0.05 * g)
    else:
        z = np.zeros(n)
        z[n - m - 1 :] = math.exp(-m * t / 2) * np.exp((np.arange(m + 1) - 1) * t) * g
    w = z / g
    hi, lo = w[n - m - 1 :], w[m::-1]
    decay = np.minimum.accumulate(np.exp(-t * np.arange(m + 1)))
    A = np.array([np.max(hi[k + 1 :: -1] - lo[: k + 2]) for k in range(m)])
    dense = max(decay[m] * width, np.max(decay[:m] * np.minimum(width, A)))
    assert trimmed_mean_smooth_sensitivity(z, m, width, t) == dense


def test_smooth_sensitivity_dominates_brute_force_local_sensitivity():
    # LS(x) = max over i and replacement v of |f(x) - f(x with x_i = v)| where f is
    # the clamped trimmed mean; f is monotone in v, so v = +-1e6 attains it, and the
    # other values are extra checks.
    rng = np.random.default_rng(2)
    checked = 0
    for trial in range(400):
        n = int(rng.integers(3, 15))
        m = int(rng.integers(0, (n + 1) // 2))
        x = random_dataset(rng, n, trial % 4)
        a, b = sorted(rng.uniform(-3, 3, 2))
        t = float(rng.choice([1e-3, 0.1, 0.5]))
        f_x = trimmed_mean(x, m, a, b)
        local = np.max(np.abs(trimmed_mean(neighbours(rng, x), m, a, b) - f_x))
        S = trimmed_mean_smooth_sensitivity(x, m, b - a, t)
        assert local <= S * (1 + 1e-12) + 1e-15
        checked += local > 0
    assert checked > 250  # non-vacuous


def test_smooth_sensitivity_is_t_smooth_over_random_neighbours():
    # S(x) <= e^t S(x') for every replace-one neighbour, including +-1e6 outliers:
    # 0 violations, and the ratio reaches e^t (the check is tight).
    rng = np.random.default_rng(3)
    violations = pairs = 0
    worst = 0.0
    for trial in range(300):
        n = int(rng.integers(3, 15))
        m = int(rng.integers(1, (n + 1) // 2))
        x = random_dataset(rng, n, trial % 4)
        width = float(rng.uniform(0.5, 5))
        t = float(rng.choice([1e-3, 0.1, 0.5]))
        S = trimmed_mean_smooth_sensitivity(x, m, width, t)
        S_nb = trimmed_mean_smooth_sensitivity(neighbours(rng, x), m, width, t)
        ratio = np.abs(np.log(S_nb / S))
        violations += int(np.sum(ratio > t * (1 + 1e-9)))
        pairs += ratio.size
        worst = max(worst, float(np.max(ratio / t)))
    assert violations == 0
    assert pairs > 50_000
    assert worst == pytest.approx(1.0, abs=1e-6)


def test_paper_simplified_bound_is_not_t_smooth():
    # Documented negative test (privacy): the scale printed in Algorithm 2, line 1,
    # max{(z_(n) - z_(1)) / (n - 2m), e^{-mt} (b - a)} is an upper bound on the
    # smooth sensitivity but not itself t-smooth: one outlier multiplies it by far
    # more than e^t, so as a noise scale it leaks the outlier. The corrected bound
    # on the same pairs never does (test above).
    rng = np.random.default_rng(3)
    violations = pairs = 0
    for trial in range(300):
        n = int(rng.integers(3, 15))
        m = int(rng.integers(1, (n + 1) // 2))
        x = random_dataset(rng, n, trial % 4)
        width = float(rng.uniform(0.5, 5))
        t = float(rng.choice([1e-3, 0.1, 0.5]))
        P = paper_bound(x, m, 0.0, width, t)
        P_nb = paper_bound(neighbours(rng, x), m, 0.0, width, t)
        violations += int(np.sum(np.abs(np.log(P_nb / P)) > t * (1 + 1e-9)))
        pairs += P_nb.size
    assert violations > pairs // 10
    # One explicit pair: ten standard normals, one replaced by 1e6 (m = 2, t = 0.1).
    x = np.random.default_rng(4).standard_normal(10)
    x_out = x.copy()
    x_out[0] = 1e6
    ratio = paper_bound(x_out, 2, -1.0, 1.0, 0.1) / paper_bound(x, 2, -1.0, 1.0, 0.1)
    assert ratio > 1e4 > math.exp(0.1)
    fixed = trimmed_mean_smooth_sensitivity(np.stack([x, x_out]), 2, 2.0, 0.1)
    assert abs(math.log(fixed[1] / fixed[0])) <= 0.1 * (1 + 1e-12)


def test_smooth_sensitivity_without_trimming_is_the_width():
    assert trimmed_mean_smooth_sensitivity([5.0, -3.0, 1.0], 0, 2.0, 0.1) == 2.0


def test_accurate_sum_is_correctly_rounded_on_cancelling_data():
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.standard_normal(1001) * 1e16, rng.standard_normal(1001)])
    x = np.concatenate([x, -x[:1001]])
    rng.shuffle(x)
    assert _accurate_sum(x) == pytest.approx(math.fsum(x), rel=1e-15, abs=1e-12)
    rows = rng.standard_normal((3, 77))
    np.testing.assert_allclose(
        _accurate_sum(rows), [math.fsum(r) for r in rows], rtol=1e-15
    )


# ------------------------------------------------------------------- the oracle


def _oracle(n, rho, shape, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return SmoothSensitivityTrimmedMeanOracle(**kwargs).calibrate(n, rho, shape)


def _gradients(X, U, fit_intercept=True):
    Xt = np.hstack([X, np.ones((X.shape[0], 1))]) if fit_intercept else X
    return U[:, None] * Xt if U.ndim == 1 else Xt[:, :, None] * U[:, None, :]


def test_estimate_is_trimmed_mean_plus_scaled_sinh_noise():
    # The release is exactly clamp(trimmed mean) + (max(S, floor) / s_AN) sinh(Y)
    # per coordinate, with Y drawn once (p values) from the given generator.
    rng = np.random.default_rng(6)
    n, d, m = 200, 3, 10
    X = rng.standard_cauchy((n, d))
    U = rng.standard_normal(n)
    oracle = _oracle(n, 0.05, (d + 1,), trim_count=m, clip_noisy_mean=False)
    out = oracle.estimate(
        LinearDesign(X, True, chunk_rows=17), U, np.random.default_rng(7)
    )
    G = _gradients(X, U).T
    a, b = oracle.mean_bounds_
    S = trimmed_mean_smooth_sensitivity(G, m, b - a, oracle.smoothness_)
    S = np.maximum(S, oracle.min_smooth_sensitivity_)
    noise = np.sinh(np.random.default_rng(7).standard_normal(d + 1))
    expected = trimmed_mean(G, m, a, b) + S / oracle.noise_divisor_ * noise
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    assert oracle.epsilon0_ == pytest.approx(math.sqrt(2 * 0.05 / (d + 1)))


def test_noise_law_is_sinh_of_a_standard_normal():
    # Constant data (every g_ij = 0.25): the trimmed mean is 0.25, every A^(k) = 0,
    # so S = e^{-m t} (b - a) exactly and (out - 0.25) s_AN / S ~ sinh(N(0, 1)).
    n, p, m = 20, 100, 2
    design = LinearDesign(np.ones((n, p)), False)
    U = np.full(n, 0.25)
    oracle = _oracle(n, 0.5, (p,), trim_count=m, clip_noisy_mean=False)
    S = math.exp(-m * oracle.smoothness_) * 2.0
    assert S > oracle.min_smooth_sensitivity_
    rng = np.random.default_rng(8)
    draws = np.concatenate(
        [(oracle.estimate(design, U, rng) - 0.25) for _ in range(600)]
    ) * (oracle.noise_divisor_ / S)
    assert np.std(draws) == pytest.approx(SINH_STD, rel=0.04)
    assert abs(np.mean(draws)) < 0.03
    ks = stats.kstest(draws, lambda x: stats.norm.cdf(np.arcsinh(x)))
    assert ks.pvalue > 1e-3
    # The primitive itself, and its explicit-generator rule.
    z = arsinh_normal_noise(np.random.default_rng(9), 200_000)
    assert np.std(z) == pytest.approx(SINH_STD, rel=0.02)
    with pytest.raises(TypeError):
        arsinh_normal_noise(np.random.RandomState(0), 3)


def test_noise_floor_keeps_noise_for_a_large_trim_count():
    # m t = 1000 / 16: e^{-mt} (b - a) ~ 1e-27 would vanish in mu + noise; the
    # public floor max((b - a) e^{-30}, 2^20 s_AN ulp(max |a|, |b|)) keeps the
    # release random on constant data.
    n, m = 2001, 1000
    design = LinearDesign(np.ones((n, 1)), False)
    oracle = _oracle(n, 0.5, (1,), trim_count=m, clip_noisy_mean=False)
    assert oracle.epsilon0_ == 1.0
    floor = max(2.0 * math.exp(-30), 2.0**20 * 0.25 * np.spacing(1.0))
    assert oracle.min_smooth_sensitivity_ == pytest.approx(floor, rel=1e-12)
    assert 2.0 * math.exp(-m * oracle.smoothness_) < 1e-10 * floor
    rng = np.random.default_rng(10)
    outs = np.array(
        [oracle.estimate(design, np.full(n, 0.5), rng)[0] for _ in range(50)]
    )
    assert len(np.unique(outs)) == 50
    scaled = (outs - 0.5) * oracle.noise_divisor_ / oracle.min_smooth_sensitivity_
    assert 0.3 < np.std(scaled) < 10


def test_epsilon0_above_one_raises():
    oracle = SmoothSensitivityTrimmedMeanOracle(trim_count=1)
    with pytest.raises(ValueError, match="epsilon.*smaller epsilon or more iter"):
        oracle.calibrate(100, 0.6, (1,))  # eps0 = sqrt(1.2)
    with pytest.raises(ValueError, match="exceeds 1"):
        oracle.calibrate(100, 5.5, (2, 5))  # eps0 = sqrt(1.1)
    assert oracle.calibrate(100, 0.5, (1,)).epsilon0_ == 1.0  # the boundary is fine
    assert oracle.calibrate(100, math.inf, (1,)).epsilon0_ == math.inf  # testing mode


def test_output_stays_in_mean_bounds_when_clipped():
    rng = np.random.default_rng(11)
    n, d = 60, 4
    X = 10.0 * rng.standard_cauchy((n, d))
    U = rng.standard_cauchy(n)
    design = LinearDesign(X, True)
    outside = 0
    for clip in (True, False):
        oracle = _oracle(
            n, 0.02, (d + 1,), mean_bounds=(-0.5, 2.0), clip_noisy_mean=clip
        )
        for _ in range(100):
            out = oracle.estimate(design, U, rng)
            inside = (out >= -0.5) & (out <= 2.0)
            if clip:
                assert inside.all()
            else:
                outside += int(np.sum(~inside))
    assert outside > 0  # the noise does leave [a, b]: the clamp is not vacuous


@pytest.mark.parametrize("K", [None, 3])
def test_non_private_limit_is_the_plain_trimmed_mean(K):
    rng = np.random.default_rng(12)
    n, d, m = 101, 3, 7
    X = rng.standard_t(2, (n, d))
    U = rng.standard_normal(n) if K is None else rng.standard_normal((n, K))
    shape = (d + 1,) if K is None else (d + 1, K)
    design = LinearDesign(X, True, chunk_rows=13)
    G = np.sort(_gradients(X, U).reshape(n, -1), axis=0)
    gen = np.random.default_rng(0)
    state = gen.bit_generator.state
    oracle = _oracle(n, math.inf, shape, trim_count=m, mean_bounds=(-50.0, 50.0))
    out = oracle.estimate(design, U, gen)
    expected = np.clip(G[m : n - m].mean(axis=0), -50, 50).reshape(shape)
    np.testing.assert_allclose(out, expected, rtol=1e-13, atol=1e-15)
    assert gen.bit_generator.state == state  # no noise drawn
    # The default m is 0 in the testing mode: the plain (clamped) mean gradient.
    plain = _oracle(n, math.inf, shape, mean_bounds=(-1e6, 1e6))
    assert plain.trim_count_ == 0
    np.testing.assert_allclose(
        plain.estimate(design, U, gen), design.weighted_sum(U) / n, rtol=1e-12
    )
    # Narrow bounds clamp the output.
    narrow = _oracle(n, math.inf, shape, trim_count=m, mean_bounds=(-0.01, 0.01))
    assert np.all(np.abs(narrow.estimate(design, U, gen)) <= 0.01)


def test_no_nan_for_extreme_rows():
    # Rows producing +-inf (1e300 * 1e300) and NaN (0 * inf) gradient entries are
    # sanitised entry by entry (NaN -> 0, clip to +-1e300) before sorting: a fixed
    # deterministic function of each record alone, so replace-one neighbours stay
    # neighbours and the sensitivity argument is unchanged; without it NaN would
    # poison the sort, the sums and S, making finiteness depend on one record.
    rng = np.random.default_rng(13)
    n, d = 30, 3
    X = rng.standard_normal((n, d))
    X[0] = 1e300
    X[1] = -1e300
    X[2, 0] = 0.0
    U = rng.standard_normal(n)
    U[0] = 1e300
    U[1] = 1e300
    U[2] = np.inf  # 0 * inf = NaN in the gradient entry (2, 0)
    design = LinearDesign(X, True)
    for rho in (0.05, math.inf):
        oracle = _oracle(n, rho, (d + 1,), trim_count=3, clip_noisy_mean=False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = oracle.estimate(design, U, np.random.default_rng(0))
        assert np.all(np.isfinite(out))
    # Sanitising is the same as replacing the non-finite entries by those values.
    vals = np.array([np.nan, np.inf, -np.inf, 1e308, 1.0, 2.0, 3.0])
    same = np.array([0.0, 1e300, -1e300, 1e300, 1.0, 2.0, 3.0])
    assert trimmed_mean(vals, 2, -5, 5) == trimmed_mean(same, 2, -5, 5)
    assert trimmed_mean(vals, 0, -5, 5) == 5.0
    S = trimmed_mean_smooth_sensitivity(vals, 2, 10.0, 0.1)
    assert S == trimmed_mean_smooth_sensitivity(same, 2, 10.0, 0.1) == 10.0


def test_records_compose_to_count_times_rho():
    oracle = _oracle(1000, 0.004, (5,))
    assert SmoothSensitivityTrimmedMeanOracle.all_gaussian is False
    (record,) = oracle.records(7)
    assert (record.kind, record.count, record.rho) == ("zcdp", 7, 0.004)
    eps, rho, how = account_records([record], 1e-6)
    assert rho == pytest.approx(7 * 0.004, rel=1e-15)
    assert eps <= zcdp_to_approx_dp(7 * 0.004, 1e-6) * (1 + 1e-12)
    assert how in ("zcdp", "rdp")
    spent = PrivacySpent.from_records(oracle.records(10), delta=1e-6)
    assert spent.rho == pytest.approx(0.04)
    # Per coordinate eps0^2 / 2 = rho / p, p of them per call: rho.
    assert 5 * oracle.epsilon0_**2 / 2 == pytest.approx(0.004, rel=1e-14)


def test_column_blocks_give_the_same_release(monkeypatch):
    # Memory: q = max(1, 2**22 // n) coordinates per pass. Forcing q = 2 (several
    # passes over the rows) changes nothing in the release.
    rng = np.random.default_rng(14)
    n, d = 50, 6
    X = rng.standard_cauchy((n, d))
    U = rng.standard_normal(n)
    design = LinearDesign(X, True, chunk_rows=9)
    one = _oracle(n, 0.05, (d + 1,), trim_count=4)
    assert one.block_columns_ == d + 1
    monkeypatch.setattr(tm, "MAX_BLOCK_ENTRIES", 2 * n + 1)
    blocked = _oracle(n, 0.05, (d + 1,), trim_count=4)
    assert blocked.block_columns_ == 2
    np.testing.assert_array_equal(
        one.estimate(design, U, np.random.default_rng(1)),
        blocked.estimate(design, U, np.random.default_rng(1)),
    )


def test_oracle_stores_only_public_numbers():
    # Neither S (data-dependent) nor the un-noised means are kept: the state after
    # estimate is identical for two different datasets of the same public n.
    rng = np.random.default_rng(15)
    n, d = 40, 3
    states = []
    for _ in range(2):
        oracle = _oracle(n, 0.05, (d + 1,), trim_count=3)
        before = dict(vars(oracle))
        oracle.estimate(
            LinearDesign(rng.standard_cauchy((n, d)), True),
            rng.standard_cauchy(n),
            rng,
        )
        assert vars(oracle) == before
        states.append(dict(vars(oracle)))
    assert states[0] == states[1]


def test_sample_weight_is_refused():
    oracle = _oracle(10, 0.05, (2,), trim_count=1)
    design = LinearDesign(np.ones((10, 1)), True)
    with pytest.raises(ValueError, match="weighted trimmed means are not covered"):
        oracle.estimate(design, np.ones(10), np.random.default_rng(0), np.ones(10))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mean_bounds": (1.0, 1.0)},
        {"mean_bounds": (2.0, -1.0)},
        {"mean_bounds": (-np.inf, 1.0)},
        {"mean_bounds": (-1e308, 1e308)},  # b - a overflows
        {"mean_bounds": 3.0},
        {"gradient_scale": 0.0},
        {"gradient_scale": np.nan},
        {"trim_count": 0},
        {"trim_count": 2.5},
        {"trim_count": True},
        {"clip_noisy_mean": "yes"},
    ],
)
def test_parameter_validation(kwargs):
    with pytest.raises(ValueError):
        SmoothSensitivityTrimmedMeanOracle(**kwargs)


def test_calibrate_and_estimate_validation():
    assert _oracle(100, 0.5, (1,), gradient_scale=3.0).mean_bounds_ == (-3.0, 3.0)
    oracle = SmoothSensitivityTrimmedMeanOracle(trim_count=5)
    with pytest.raises(ValueError, match="n - 2 m >= 1"):
        oracle.calibrate(10, 0.05, (2,))
    for bad in [(0, 0.05, (2,)), (10, 0.0, (2,)), (10, -1.0, (2,)), (20, 0.05, ())]:
        with pytest.raises(ValueError):
            oracle.calibrate(*bad)
    with pytest.raises(ValueError, match="too wide"):
        SmoothSensitivityTrimmedMeanOracle(mean_bounds=(-1e290, 1e290)).calibrate(
            100, 0.001, (1,)
        )
    oracle.calibrate(20, 0.05, (2,))
    with pytest.raises(ValueError, match="calibrated for n = 20"):
        oracle.estimate(
            LinearDesign(np.ones((21, 1)), True), np.ones(21), np.random.default_rng()
        )
    with pytest.raises(TypeError):
        oracle.estimate(LinearDesign(np.ones((20, 1)), True), np.ones(20), 0)
    with pytest.raises(ValueError, match="coordinates"):
        oracle.estimate(
            LinearDesign(np.ones((20, 3)), True), np.ones(20), np.random.default_rng()
        )
    with pytest.raises(RuntimeError):
        SmoothSensitivityTrimmedMeanOracle().estimate(
            LinearDesign(np.ones((20, 1)), True), np.ones(20), np.random.default_rng()
        )
