"""Noise mechanisms: distribution of the noise, calibration, input checks, records."""

import math

import numpy as np
import pytest
from scipy import stats

from skdpsco.privacy import (
    GaussianMechanism,
    LaplaceMechanism,
    MechanismRecord,
    gaussian_noise,
    laplace_noise,
    sigma_for_zcdp,
)

N_DRAWS = 200_000
Z999 = stats.norm.ppf(0.9995)  # two-sided 99.9%


def _assert_gaussian_std(noise, sigma):
    n = noise.size
    s2 = np.var(noise, ddof=1)
    lo = stats.chi2.ppf(0.0005, n - 1)
    hi = stats.chi2.ppf(0.9995, n - 1)
    stat = (n - 1) * s2 / sigma**2
    assert lo <= stat <= hi, (math.sqrt(s2), sigma)
    assert abs(noise.mean()) <= Z999 * sigma / math.sqrt(n)


@pytest.mark.parametrize("sigma", [0.3, 2.5])
def test_gaussian_noise_std_and_mean(sigma):
    noise = gaussian_noise(np.random.default_rng(0), sigma, N_DRAWS)
    assert noise.shape == (N_DRAWS,)
    _assert_gaussian_std(noise, sigma)
    # The band is tight enough to catch a 2% error in the scale.
    n = N_DRAWS
    s2 = np.var(noise, ddof=1)
    assert not (
        stats.chi2.ppf(0.0005, n - 1)
        <= (n - 1) * s2 / (1.02 * sigma) ** 2
        <= stats.chi2.ppf(0.9995, n - 1)
    )


def test_gaussian_mechanism_release():
    mech = GaussianMechanism(sensitivity=1.0, sigma=1.7, name="sum")
    value = np.full((N_DRAWS // 4, 4), 3.0)
    out = mech.release(value, np.random.default_rng(1))
    assert out.shape == value.shape
    _assert_gaussian_std((out - 3.0).ravel(), 1.7)
    # Same seed, same noise; different seed, different noise.
    a = mech.release(np.zeros(5), np.random.default_rng(7))
    b = mech.release(np.zeros(5), np.random.default_rng(7))
    c = mech.release(np.zeros(5), np.random.default_rng(8))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("b", [0.5, 3.0])
def test_laplace_scale_via_mean_absolute_deviation(b):
    noise = laplace_noise(np.random.default_rng(2), b, N_DRAWS)
    # |Laplace(0, b)| is Exponential(b): mean b, std b.
    mad = np.abs(noise).mean()
    assert abs(mad - b) <= Z999 * b / math.sqrt(N_DRAWS)
    assert abs(noise.mean()) <= Z999 * math.sqrt(2) * b / math.sqrt(N_DRAWS)
    mech = LaplaceMechanism(sensitivity=1.0, scale=b)
    out = mech.release(np.full(N_DRAWS, -1.0), np.random.default_rng(3)) + 1.0
    assert abs(np.abs(out).mean() - b) <= Z999 * b / math.sqrt(N_DRAWS)


def test_zero_scale_gives_zeros():
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(gaussian_noise(rng, 0.0, 3), np.zeros(3))
    np.testing.assert_array_equal(laplace_noise(rng, 0.0, (2, 2)), np.zeros((2, 2)))
    assert gaussian_noise(rng, 0.0) == 0.0


@pytest.mark.parametrize("rho", [1e-4, 0.0123, 0.5, 3.0])
@pytest.mark.parametrize("sens", [0.1, 1.0, 7.0])
def test_from_zcdp_costs_rho(sens, rho):
    mech = GaussianMechanism.from_zcdp(sens, rho)
    assert mech.rho == pytest.approx(rho, rel=1e-13)
    assert mech.sigma == pytest.approx(sens / math.sqrt(2 * rho), rel=1e-15)


def test_sigma_for_zcdp():
    assert sigma_for_zcdp(3.0, 0.125) == 6.0
    assert sigma_for_zcdp(2.0, 0.5) == 2.0
    assert GaussianMechanism.from_zcdp(2.0, 0.5).sigma == 2.0
    assert sigma_for_zcdp(1.0, math.inf) == 0.0
    assert sigma_for_zcdp(0.0, 0.1) == 0.0
    for bad_rho in [0.0, -1.0, math.nan]:
        with pytest.raises(ValueError, match="rho"):
            sigma_for_zcdp(1.0, bad_rho)
    for bad_sens in [-1.0, math.inf, math.nan]:
        with pytest.raises(ValueError, match="sensitivity"):
            sigma_for_zcdp(bad_sens, 0.1)


def test_mechanism_costs():
    assert GaussianMechanism(0.0, 1.0).rho == 0.0
    assert math.isinf(GaussianMechanism(1.0, 0.0).rho)
    assert GaussianMechanism(2.0, 4.0).rho == 0.125
    assert LaplaceMechanism.from_epsilon(1.0, 0.5).scale == 2.0
    assert LaplaceMechanism.from_epsilon(2.0, 0.5).epsilon == 0.5
    assert LaplaceMechanism(0.0, 1.0).epsilon == 0.0
    assert math.isinf(LaplaceMechanism(1.0, 0.0).epsilon)
    with pytest.raises(ValueError, match="epsilon"):
        LaplaceMechanism.from_epsilon(1.0, 0.0)


def test_laplace_from_epsilon_never_exceeds_epsilon():
    # Delta / (Delta / epsilon) rounds above epsilon for about 5% of pairs: the
    # ledger, which reads Delta / b, then refused an exact-budget release.
    rng = np.random.default_rng(1)
    sensitivities = np.exp(rng.uniform(-30.0, 30.0, 2000))
    epsilons = np.exp(rng.uniform(-10.0, 13.0, 2000))
    for sensitivity, epsilon in zip(sensitivities, epsilons, strict=True):
        mech = LaplaceMechanism.from_epsilon(float(sensitivity), float(epsilon))
        assert mech.epsilon <= epsilon
        # At most one ulp of extra noise.
        assert mech.scale <= math.nextafter(sensitivity / epsilon, math.inf)
    # A pair that rounds high: 3 / (3 / 0.9) is 0.9 + 1 ulp.
    assert 3.0 / (3.0 / 0.9) > 0.9
    assert LaplaceMechanism.from_epsilon(3.0, 0.9).epsilon <= 0.9


@pytest.mark.parametrize(
    "rng",
    [np.random.RandomState(0), None, 0, np.random.default_rng],
    ids=["RandomState", "None", "int", "default_rng-function"],
)
def test_rng_must_be_a_generator(rng):
    with pytest.raises(TypeError, match="Generator"):
        gaussian_noise(rng, 1.0, 3)
    with pytest.raises(TypeError, match="Generator"):
        laplace_noise(rng, 1.0, 3)
    with pytest.raises(TypeError, match="Generator"):
        GaussianMechanism(1.0, 1.0).release(np.zeros(3), rng)
    with pytest.raises(TypeError, match="Generator"):
        LaplaceMechanism(1.0, 1.0).release(np.zeros(3), rng)


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan, -math.inf])
def test_invalid_scales_raise(bad):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="sigma"):
        gaussian_noise(rng, bad, 3)
    with pytest.raises(ValueError, match="scale"):
        laplace_noise(rng, bad, 3)
    with pytest.raises(ValueError, match="sigma"):
        GaussianMechanism(1.0, bad)
    with pytest.raises(ValueError, match="sensitivity"):
        GaussianMechanism(bad, 1.0)
    with pytest.raises(ValueError, match="scale"):
        LaplaceMechanism(1.0, bad)
    with pytest.raises(ValueError, match="sensitivity"):
        LaplaceMechanism(bad, 1.0)


def test_records():
    rec = GaussianMechanism(2.0, 5.0, name="grad").record(count=7)
    assert rec == MechanismRecord(
        "grad", "gaussian", count=7, sensitivity=2.0, scale=5.0
    )
    assert rec.rho is None and rec.epsilon is None and rec.delta is None
    assert GaussianMechanism(1.0, 1.0).record().count == 1
    lap = LaplaceMechanism.from_epsilon(2.0, 0.25, name="count").record(count=3)
    assert (lap.name, lap.kind, lap.count) == ("count", "laplace", 3)
    assert (lap.sensitivity, lap.scale, lap.epsilon) == (2.0, 8.0, 0.25)


@pytest.mark.parametrize("mechanism", [GaussianMechanism, LaplaceMechanism])
def test_zero_noise_is_refused_outside_the_testing_mode(mechanism):
    # sigma = 0 comes only from epsilon = inf, which only the hidden testing mode
    # accepts; reached any other way it would publish the value itself, so the
    # mechanism refuses (and releases nothing) rather than trust every caller.
    from skdpsco.privacy._params import _non_private_testing_mode

    rng = np.random.default_rng(0)
    value = np.array([0.25, -3.0])
    with pytest.raises(RuntimeError, match="zero noise"):
        mechanism(1.0, 0.0).release(value, rng)
    with _non_private_testing_mode():
        np.testing.assert_array_equal(mechanism(1.0, 0.0).release(value, rng), value)
    # A query of sensitivity 0 is public: no noise is needed.
    np.testing.assert_array_equal(mechanism(0.0, 0.0).release(value, rng), value)


def test_subsampled_gaussian_draws_and_records_the_same_numbers():
    from skdpsco.privacy._mechanisms import SubsampledGaussianMechanism

    mech = SubsampledGaussianMechanism(2.0, 2.6, 0.05, name="batch sum")
    value = np.linspace(-1.0, 1.0, 7)
    out = mech.release(value, np.random.default_rng(4))
    # The draw is the Gaussian mechanism's at the recorded (sensitivity, sigma).
    rec = mech.record(count=9)
    plain = GaussianMechanism(rec.sensitivity, rec.scale, name=rec.name)
    np.testing.assert_array_equal(out, plain.release(value, np.random.default_rng(4)))
    assert rec == MechanismRecord(
        "batch sum",
        "subsampled_gaussian",
        count=9,
        sensitivity=2.0,
        scale=2.6,
        sampling_rate=0.05,
    )
    # Its noise has std sigma.
    _assert_gaussian_std(mech.release(np.zeros(N_DRAWS), np.random.default_rng(5)), 2.6)
    for bad in (-0.1, 1.5, math.nan):
        with pytest.raises(ValueError, match="sampling_rate"):
            SubsampledGaussianMechanism(1.0, 1.0, bad)


def test_parallel_gaussian_record_is_the_worst_part():
    from skdpsco.privacy._mechanisms import parallel_gaussian_record

    hist = GaussianMechanism(3.0, 2.0, name="h")  # mu = 1.5
    mean = GaussianMechanism(1.0, 0.5, name="m")  # mu = 2
    rec = parallel_gaussian_record("h || m", [hist, mean], count=4)
    assert rec == MechanismRecord(
        "h || m", "gaussian", count=4, sensitivity=1.0, scale=0.5
    )
    rec = parallel_gaussian_record("m || h", [mean, hist])
    assert (rec.sensitivity, rec.scale, rec.count) == (1.0, 0.5, 1)
    # Equal mu: the last part; zero noise is mu = inf.
    tie = GaussianMechanism(2.0, 1.0)
    assert parallel_gaussian_record("x", [tie, mean]).sensitivity == 1.0
    assert parallel_gaussian_record("x", [mean, tie]).sensitivity == 2.0
    free = GaussianMechanism(1.0, 0.0)
    assert parallel_gaussian_record("x", [free, mean]).scale == 0.0
    assert parallel_gaussian_record("x", [mean, free]).scale == 0.0


def test_propose_test_release_draws_in_order_and_records_its_budget():
    from skdpsco.privacy._mechanisms import ProposeTestReleaseMechanism
    from skdpsco.privacy._params import _non_private_testing_mode

    bound = GaussianMechanism(0.01, 0.05, name="ln S")
    value_mech = GaussianMechanism(1.0, 3.0, name="mu / S_hat")
    ptr = ProposeTestReleaseMechanism(bound, 1.2, value_mech, 0.5, 1e-6, "ptr")
    log_s = np.log([0.1, 0.2, 5.0])
    value = np.array([0.3, -0.1, 0.7])
    out = ptr.release(log_s, value, np.random.default_rng(2), low=0.05, high=2.0)
    gen = np.random.default_rng(2)
    s_hat = np.clip(np.exp(bound.release(log_s, gen) + 1.2), 0.05, 2.0)
    assert s_hat[2] == 2.0  # the clip binds
    np.testing.assert_array_equal(out, s_hat * value_mech.release(value / s_hat, gen))
    assert ptr.record(count=3) == MechanismRecord(
        "ptr", "approx_dp", count=3, epsilon=0.5, delta=1e-6
    )
    with pytest.raises(ValueError, match="delta"):
        ProposeTestReleaseMechanism(bound, 1.2, value_mech, 0.5, 1.0, "ptr")
    # The testing mode's stand-in draws nothing and records epsilon = inf; outside
    # the mode it refuses.
    free = ProposeTestReleaseMechanism.noiseless("ptr")
    assert (free.record().epsilon, free.record().delta) == (math.inf, 0.0)
    with pytest.raises(RuntimeError, match="noiseless"):
        free.release(log_s, value, gen, low=0.05, high=2.0)
    state = gen.bit_generator.state
    with _non_private_testing_mode():
        same = free.release(log_s, value, gen, low=0.05, high=2.0)
    np.testing.assert_array_equal(same, value)
    assert gen.bit_generator.state == state
