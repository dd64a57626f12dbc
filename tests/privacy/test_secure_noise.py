"""The secure noise layer: exact integer samplers, releases on a public grid, and
the floating-point attack it closes (Mironov 2012)."""

import math
import warnings

import numpy as np
import pytest
from _float_noise import numpy_laplace_reachable
from scipy import stats

from skdpsco.privacy import GaussianMechanism, LaplaceMechanism
from skdpsco.privacy._accounting import (
    SAMPLER_TOTAL_VARIATION,
    _account_ideal,
    account_records,
)
from skdpsco.privacy._discrete import (
    _ETA,
    COUPLING_SIGMA,
    SecureGenerator,
    bernoulli_exp,
    discrete_gaussian,
    discrete_gaussian_levels,
    discrete_laplace,
)
from skdpsco.privacy._mechanisms import (
    GRID_SLACK,
    grid_gaussian_noise,
    grid_gaussian_sigma,
    grid_step,
)


def _chi2_pvalue(samples, log_weight, lo, hi):
    xs = np.arange(lo, hi + 1)
    p = np.exp(log_weight(xs.astype(float)))
    p /= p.sum()
    counts = np.bincount(np.clip(samples, lo, hi) - lo, minlength=hi - lo + 1)
    inside = (samples >= lo) & (samples <= hi)
    assert inside.mean() > 0.999
    ok = p * samples.size > 5
    expected = p[ok] / p[ok].sum() * counts[ok].sum()
    return stats.chisquare(counts[ok], expected).pvalue


@pytest.mark.parametrize("num, den", [(0, 1), (1, 1), (3, 7), (7, 3), (50, 10)])
def test_bernoulli_exp_frequency(num, den):
    rng = np.random.default_rng(0)
    n = 200_000
    hits = bernoulli_exp(rng, np.full(n, num, np.uint64), np.full(n, den, np.int64))
    p = math.exp(-num / den)
    assert abs(hits.mean() - p) < 5 * math.sqrt(p * (1 - p) / n) + 1e-12


@pytest.mark.parametrize("t", [1, 3, 20])
def test_discrete_laplace_matches_its_pmf(t):
    x = discrete_laplace(np.random.default_rng(t), t, 200_000)
    assert _chi2_pvalue(x, lambda z: -np.abs(z) / t, -12 * t, 12 * t) > 1e-4
    q = math.exp(-1.0 / t)
    assert x.var() == pytest.approx(2 * q / (1 - q) ** 2, rel=0.03)


@pytest.mark.parametrize("variance", [0.3, 1.0, 2.7, 100.0, 5000.0, 70_000.0])
def test_discrete_gaussian_matches_its_pmf(variance):
    # One table, of the smallest menu variance at least the target (<= 0.55%).
    plan, realised = discrete_gaussian_levels(variance)
    assert len(plan) == 1 and variance <= realised <= 1.0055 * variance
    variance = realised
    x = discrete_gaussian(np.random.default_rng(1), variance, 300_000)
    h = int(6 * math.sqrt(variance)) + 1
    assert _chi2_pvalue(x, lambda z: -(z**2) / (2 * variance), -h, h) > 1e-4
    assert abs(x.mean()) < 5 * math.sqrt(variance / x.size)


@pytest.mark.parametrize("variance", [2.0**19, 2.0**23 + 7, 2.0**40, 2.0**80])
def test_large_discrete_gaussian_moments_and_plan(variance):
    plan, total = discrete_gaussian_levels(variance)
    # The last level comes from a menu 2^(1/128) apart: at most 0.55% more.
    assert variance <= total <= variance * 1.0055
    x = discrete_gaussian(np.random.default_rng(2), variance, 200_000).astype(float)
    assert x.var() / total == pytest.approx(1.0, abs=0.015)
    assert abs(stats.kurtosis(x)) < 0.05
    assert abs(x.mean()) < 5 * math.sqrt(total / x.size)
    # Every split satisfies Peikert's condition (fine width vs eta(2^k Z)).
    rest = total
    for fine, k in plan[:-1]:
        coarse = rest - fine
        assert math.sqrt(fine * coarse / rest) >= 2.0**k * _ETA
        rest = coarse / 4.0**k


def test_two_level_sum_is_the_discrete_gaussian_in_total_variation():
    # The exact law of Z_fine + 2^k Z_coarse against the discrete Gaussian of the
    # summed variance, at a small analogue of the plan (fine width 2^6 eta).
    k, fine, coarse = 4, (2.0**4 * _ETA * 1.1) ** 2 * 2, 30.0
    xs_f = np.arange(-int(30 * math.sqrt(fine)), int(30 * math.sqrt(fine)) + 1)
    p_f = np.exp(-(xs_f**2) / (2 * fine))
    p_f /= p_f.sum()
    xs_c = np.arange(-200, 201)
    p_c = np.exp(-(xs_c**2) / (2 * coarse))
    p_c /= p_c.sum()
    total = fine + 4**k * coarse
    lo = xs_f[0] + 2**k * xs_c[0]
    out = np.zeros(xs_f[-1] + 2**k * xs_c[-1] - lo + 1)
    for c, pc in zip(xs_c, p_c, strict=True):
        out[xs_f + 2**k * c - lo] += pc * p_f
    xs = np.arange(lo, lo + out.size)
    ideal = np.exp(-(xs.astype(float) ** 2) / (2 * total))
    ideal /= ideal.sum()
    assert 0.5 * np.abs(out - ideal).sum() < 1e-12


def test_reachable_outputs_separate_neighbours_only_for_floating_point_noise():
    v, v_prime, b = 0.3, 0.3 + 1e-9, 1.0
    rng = np.random.default_rng(3)
    # The continuous mechanism as it was: value + float Laplace noise. An
    # attacker who recomputes both noise-free values tells them apart.
    outputs = [v + rng.laplace(0.0, b) for _ in range(300)]
    assert all(numpy_laplace_reachable(x, v, b) for x in outputs)
    unreachable = sum(not numpy_laplace_reachable(x, v_prime, b) for x in outputs)
    assert unreachable > 150
    # The grid mechanisms: both neighbours' outputs lie on the same grid, and
    # the integer noise reaches every grid point.
    for mech in (LaplaceMechanism(1.0, b), GaussianMechanism(1.0, b)):
        norm = "l1" if isinstance(mech, LaplaceMechanism) else "l2"
        gamma = grid_step(1.0, 1, norm)
        for value in (v, v_prime):
            out = np.array([mech.release(value, rng) for _ in range(200)])
            steps = out / gamma
            np.testing.assert_array_equal(steps, np.round(steps))
            assert np.unique(steps).size > 150  # a dense set of grid points


def test_grid_release_noise_std_and_mean():
    rng = np.random.default_rng(4)
    mech = GaussianMechanism.from_zcdp(2.0, 0.5)
    out = mech.release(np.full(200_000, 7.25), rng)
    assert out.mean() == pytest.approx(7.25, abs=5 * 2 / math.sqrt(out.size))
    # Noise std sigma (1 + 2^-10) (and the coupling part, 6 grid steps).
    assert out.std() == pytest.approx(mech.sigma * (1 + GRID_SLACK), rel=0.01)
    lap = LaplaceMechanism.from_epsilon(1.0, 0.25)
    out = lap.release(np.zeros(200_000), rng)
    assert out.std() == pytest.approx(math.sqrt(2) * lap.scale, rel=0.02)


@pytest.mark.parametrize("sigma", [3.0, 1e-7, 2e5])
def test_grid_gaussian_noise_is_on_its_grid_with_the_stated_scale(sigma):
    # Multiples of the public step, standard deviation grid_gaussian_sigma (at least
    # sigma, by at most the sampler's menu spacing), mean 0.
    step = 2.0 ** math.floor(math.log2(sigma * 2.0**-10))
    Z = grid_gaussian_noise(np.random.default_rng(0), sigma, step, 40_000)
    assert np.all(np.mod(Z, step) == 0)
    realised = grid_gaussian_sigma(sigma, step)
    assert sigma <= realised <= sigma * 2.0 ** (1 / 128)
    n = Z.size
    stat = (n - 1) * Z.var(ddof=1) / (realised**2 + (6 * step) ** 2)
    assert stats.chi2.ppf(1e-4, n - 1) < stat < stats.chi2.ppf(1 - 1e-4, n - 1)
    assert abs(Z.mean()) < 4 * realised / math.sqrt(n)
    with pytest.raises(ValueError, match="power of two"):
        grid_gaussian_noise(np.random.default_rng(0), sigma, step * 1.5, 3)
    with pytest.raises(ValueError, match="sigma"):
        grid_gaussian_noise(np.random.default_rng(0), 0.0, step, 3)


def test_grid_release_of_extreme_values_is_finite_and_silent():
    rng = np.random.default_rng(5)
    mech = GaussianMechanism(1e-6, 1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = mech.release(np.array([1e308, -1e308, np.nan, 5e-324, 0.0]), rng)
    assert np.all(np.isfinite(out))
    gamma = grid_step(1e-6, 5)
    assert abs(out[0]) <= 2.0**52 * gamma * 1.01  # clamped, a 1-Lipschitz map
    assert abs(out[2]) < 100 * 1e-6  # NaN is mapped to 0


def test_rounding_inflation_is_covered_by_the_noise():
    # sqrt(m) gamma <= 2^-10 Delta for every size, so Delta_eff / sigma_eff is the
    # recorded Delta / sigma.
    for m in (1, 7, 1000, 10**6):
        for delta in (1e-9, 0.37, 5.0, 1e6):
            g = grid_step(delta, m)
            assert math.sqrt(m) * g <= GRID_SLACK * delta
            assert math.sqrt(m) * 2 * g > GRID_SLACK * delta  # the largest such


def test_secure_generator_noise_does_not_follow_the_seed():
    a = SecureGenerator(np.random.PCG64(0))
    b = SecureGenerator(np.random.PCG64(0))
    mech = GaussianMechanism(1.0, 1.0)
    assert not np.array_equal(
        mech.release(np.zeros(50), a), mech.release(np.zeros(50), b)
    )
    # A seeded Generator reproduces its noise (tests only).
    c, d = np.random.default_rng(0), np.random.default_rng(0)
    np.testing.assert_array_equal(
        mech.release(np.zeros(50), c), mech.release(np.zeros(50), d)
    )
    x = discrete_gaussian(a, 9.0, 100_000)
    assert x.var() == pytest.approx(9.0, rel=0.03)


def test_accountant_adds_the_samplers_total_variation_to_delta():
    from skdpsco.privacy import MechanismRecord

    recs = [MechanismRecord("g", "gaussian", count=10, sensitivity=1.0, scale=5.0)]
    eps, rho, how = account_records(recs, 1e-6)
    eps_ideal = _account_ideal(recs, 1e-6)[0]
    assert eps >= eps_ideal and eps == pytest.approx(eps_ideal, rel=1e-12)
    # Where the slack (1 + e^eps) tau cannot fit in delta, the accountant refuses.
    tiny = [MechanismRecord("g", "gaussian", count=1, sensitivity=1.0, scale=1e-3)]
    with pytest.raises(ValueError, match="total variation"):
        account_records(tiny, SAMPLER_TOTAL_VARIATION)
    # The coupling part of the noise is wide enough for Peikert's theorem.
    assert COUPLING_SIGMA >= _ETA


def test_integer_counts_are_released_without_rounding():
    # Counts are on the grid already: the noise has std sigma (no 2^-10 slack)
    # (the coupling part is 6 steps of 1/4) and the outputs are multiples of 1/4.
    rng = np.random.default_rng(8)
    mech = GaussianMechanism(math.sqrt(2.0), 40.0, integer=True)
    counts = rng.integers(0, 1000, size=200_000)
    # The path is a property of the mechanism, never of the value's dtype.
    float_path = GaussianMechanism(math.sqrt(2.0), 40.0).release(counts, rng)
    assert not np.array_equal(4 * float_path, np.round(4 * float_path))
    out = mech.release(counts, rng)
    assert (out - counts).std() == pytest.approx(40.0, rel=0.01)
    np.testing.assert_array_equal(4 * out, np.round(4 * out))


def test_secure_uniform_integers_are_uniform():
    from skdpsco.privacy._discrete import _uniform_below

    rng = SecureGenerator(np.random.PCG64())
    for high in (3, 7, 1000, 2**32, 2**40 + 3):
        u = _uniform_below(rng, high, 60_000)
        assert u.min() >= 0 and u.max() < high
        if high <= 1000:
            counts = np.bincount(u, minlength=high)
            assert stats.chisquare(counts).pvalue > 1e-4
        else:
            assert abs(u.mean() / high - 0.5) < 5 * 0.29 / math.sqrt(u.size)


def test_laplace_release_past_the_exact_sampler_raises_a_budget_error():
    # A public-number failure (size, sensitivity, scale), with a clear error, not
    # the sampler's internal ValueError; the same numbers fail on every dataset.
    from skdpsco.exceptions import PrivacyBudgetError

    mech = LaplaceMechanism.from_epsilon(1.0, 1e-12)
    for value in (np.zeros(1), np.full(1, 1e300)):
        with pytest.raises(PrivacyBudgetError, match="larger epsilon"):
            mech.release(value, np.random.default_rng(0))
    # A budget inside the sampler's range still releases.
    out = LaplaceMechanism.from_epsilon(1.0, 1e-6).release(
        np.zeros(4), np.random.default_rng(0)
    )
    assert out.shape == (4,) and np.all(np.isfinite(out))
