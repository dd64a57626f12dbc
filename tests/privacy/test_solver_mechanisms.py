"""Mechanisms that pair a solver's noise with its ledger record: the record states
the sensitivity, noise and budget the draw used, and the drawn noise has the
stated spread."""

import math

import numpy as np
import pytest
from scipy import stats

from skdpsco._solvers._sample_aggregate import release_parameters
from skdpsco.privacy._accounting import calibrate_analytic_gaussian
from skdpsco.privacy._ledger import PrivacySpent
from skdpsco.privacy._mechanisms import (
    AnalyticGaussianMechanism,
    GaussianMechanism,
    ParallelGaussianMechanism,
    PerturbationNoise,
    grid_gaussian_sigma,
    propose_test_release_record,
)
from skdpsco.privacy._shuffling import (
    ShuffledGaussianRandomizers,
    shuffle_delta,
    shuffle_epsilon,
    shuffle_local_epsilon,
)

N_DRAWS = 20_000


def _std_in_band(noise, sigma):
    """The sample std of ``noise`` against ``sigma``: a two-sided chi-square band
    at level 1e-6 (a false alarm once in a million runs)."""
    noise = np.asarray(noise).ravel()
    k = noise.size
    lo, hi = stats.chi2.ppf([1e-6 / 2, 1 - 1e-6 / 2], k)
    ss = float(np.sum(noise**2))
    assert lo * sigma**2 <= ss <= hi * sigma**2, (math.sqrt(ss / k), sigma)


def test_parallel_gaussian_scales_noise_and_sensitivity_together():
    mech = ParallelGaussianMechanism(2.0, 0.75, name="phases")
    assert mech.sigma == 1.5
    for factor in (1.0, 0.25, 2.0**-20):
        # The same draws as the grid Gaussian of (factor Delta, factor sigma).
        out = mech.release(np.zeros(N_DRAWS), np.random.default_rng(3), factor)
        direct = GaussianMechanism(2.0 * factor, 1.5 * factor).release(
            np.zeros(N_DRAWS), np.random.default_rng(3)
        )
        np.testing.assert_array_equal(out, direct)
        _std_in_band(out, 1.5 * factor * (1 + 2.0**-10))
    record = mech.record()
    assert (record.kind, record.count, record.sensitivity, record.scale) == (
        "gaussian",
        1,
        1.0,
        0.75,
    )
    # Accounted as one release of ratio sigma / Delta = 0.75: the same cost as one
    # Gaussian release of sensitivity 2 and noise 1.5.
    one = GaussianMechanism(2.0, 1.5).record()
    assert PrivacySpent.from_records([record], 1e-5).epsilon == pytest.approx(
        PrivacySpent.from_records([one], 1e-5).epsilon, rel=1e-12
    )


def test_analytic_gaussian_is_calibrated_to_its_record():
    mech = AnalyticGaussianMechanism(0.5, 0.8, 1e-6, name="batches")
    assert mech.sigma == calibrate_analytic_gaussian(0.8, 1e-6, 0.5)
    record = mech.record()
    assert (record.kind, record.epsilon, record.delta) == ("approx_dp", 0.8, 1e-6)
    spent = PrivacySpent.from_records([record], 1e-6)
    assert (spent.epsilon, spent.delta) == (0.8, 1e-6)
    out = mech.release(np.zeros(N_DRAWS), np.random.default_rng(1))
    _std_in_band(out, mech.sigma * (1 + 2.0**-10))
    # A smaller sensitivity changes the grid only, not the noise.
    small = mech.release(np.zeros(N_DRAWS), np.random.default_rng(1), 0.1)
    _std_in_band(small, mech.sigma * (1 + 2.0**-10))
    with pytest.raises(ValueError, match="exceeds the calibrated"):
        mech.release(np.zeros(3), np.random.default_rng(1), 0.6)
    assert AnalyticGaussianMechanism(0.5, math.inf, 1e-6).sigma == 0.0


def test_perturbation_noise_is_on_its_grid_with_the_realised_scale():
    sigma, step = 3.0, 2.0**-8
    noise = PerturbationNoise(sigma, step, 0.25, 5e-6, name="objective")
    G = noise.draw((N_DRAWS // 4, 4), np.random.default_rng(2))
    assert G.shape == (N_DRAWS // 4, 4)
    np.testing.assert_array_equal(G, np.round(G / step) * step)
    # Continuous part of std grid_gaussian_sigma, plus the coupling's 6 steps.
    _std_in_band(G, math.hypot(grid_gaussian_sigma(sigma, step), 6 * step))
    record = noise.record()
    assert (record.name, record.kind, record.epsilon, record.delta) == (
        "objective",
        "approx_dp",
        0.25,
        5e-6,
    )
    zero = PerturbationNoise(0.0, None, math.inf, 5e-6)
    np.testing.assert_array_equal(zero.draw(3, np.random.default_rng(0)), 0.0)
    with pytest.raises(ValueError, match="sigma"):
        PerturbationNoise(-1.0, step, 1.0, 1e-6)


def test_shuffled_randomizers_record_the_amplified_budget_of_their_noise():
    n, epsilon, delta = 10_000, 0.5, 1e-5
    local = ShuffledGaussianRandomizers(0.4, epsilon, delta, n, name="local")
    eps0, achieved = shuffle_local_epsilon(epsilon, n, delta / 2)
    delta0 = delta / (3 * n * (math.exp(epsilon) + 1))
    assert local.amplifies
    assert (local.epsilon0, local.delta0) == (eps0, delta0)
    assert local.sigma == calibrate_analytic_gaussian(eps0, delta0, 0.4)
    record = local.record()
    assert record.kind == "approx_dp"
    assert record.epsilon == achieved == shuffle_epsilon(eps0, n, delta / 2)
    assert record.epsilon <= epsilon
    assert record.delta == shuffle_delta(achieved, eps0, delta0, n, delta / 2)
    assert record.delta <= delta
    rows = local.release(np.zeros((N_DRAWS // 5, 5)), np.random.default_rng(4))
    _std_in_band(rows, local.sigma * (1 + 2.0**-10))


def test_shuffled_randomizers_without_amplification_release_nothing():
    local = ShuffledGaussianRandomizers(1.0, 0.5, 1e-5, 50)
    assert not local.amplifies and local.sigma is None
    with pytest.raises(ValueError, match="amplification"):
        local.release(np.zeros((2, 2)), np.random.default_rng(0))
    testing = ShuffledGaussianRandomizers(1.0, math.inf, 1e-5, 10_000)
    assert testing.sigma == 0.0
    assert (testing.record().epsilon, testing.record().delta) == (math.inf, 1e-5)


def test_propose_test_release_record_states_the_target_its_stages_fit_in():
    p = release_parameters(2.0, 1e-5, 4)
    stages = dict(
        bound=(p.epsilon_bound, p.delta_bound),
        value=(p.epsilon_value, p.delta_value),
        sampler_delta=p.sampler_delta,
    )
    record = propose_test_release_record("ptr", 2.0, 1e-5, **stages)
    assert (record.kind, record.count, record.epsilon, record.delta) == (
        "approx_dp",
        1,
        2.0,
        1e-5,
    )
    assert p.bound_mechanism.epsilon == pytest.approx(p.epsilon_bound, rel=1e-15)
    # Stages that spend more than the target (by one ulp) are a bug, not a record.
    with pytest.raises(RuntimeError, match="more than"):
        propose_test_release_record(
            "ptr", math.nextafter(p.epsilon_bound + p.epsilon_value, 0), 1e-5, **stages
        )
    over = dict(stages, sampler_delta=p.sampler_delta + 1e-12)
    with pytest.raises(RuntimeError, match="more than"):
        propose_test_release_record("ptr", 2.0, 1e-5, **over)
    testing = propose_test_release_record("ptr", math.inf, 1e-5)
    assert (testing.epsilon, testing.delta) == (math.inf, 1e-5)
