"""Private selection with a random number of runs: distribution, theorems, calibration.

The formulas of Papernot & Steinke (2022) are recomputed here independently (numeric
minimisation, direct sums of the pmf) and cross-checked with Google's
``dp_accounting`` (``RepeatAndSelectDpEvent``).
"""

import math

import numpy as np
import pytest
from scipy import optimize, stats

from skdpsco.privacy._accounting import gaussian_rho_budget, rdp_to_approx_dp
from skdpsco.privacy._mechanisms import truncated_negative_binomial
from skdpsco.privacy._selection import (
    SELECTION_ORDERS,
    calibrate_selection_rho,
    rdp_repeat_and_select,
    selection_epsilon,
    tnb_gamma,
    tnb_mean,
    tnb_pmf,
    zcdp_repeat_and_select_rdp,
)

ETAS = [0.0, 0.5, 1.0, 2.0]

# ------------------------------------------------------------ the distribution


def _pmf_by_definition(k_max, eta, gamma):
    """Definition 1, literally: the product form (eta > 0) or the logarithmic one."""
    out = []
    for k in range(1, k_max + 1):
        if eta == 0:
            out.append((1 - gamma) ** k / (k * math.log(1 / gamma)))
        else:
            prod = math.prod((l + eta) / (l + 1) for l in range(k))
            out.append((1 - gamma) ** k / (gamma**-eta - 1) * prod)
    return np.array(out)


@pytest.mark.parametrize("eta", ETAS)
@pytest.mark.parametrize("gamma", [0.05, 0.3, 0.8])
def test_pmf_matches_definition_and_mean(eta, gamma):
    k = np.arange(1, 3001)
    p = tnb_pmf(k, eta, gamma)
    np.testing.assert_allclose(p[:60], _pmf_by_definition(60, eta, gamma), rtol=1e-10)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert (k * p).sum() == pytest.approx(tnb_mean(eta, gamma), rel=1e-10)
    assert tnb_pmf([0, -1], eta, gamma).tolist() == [0.0, 0.0]


def test_special_cases():
    # eta = 1: geometric gamma (1 - gamma)^(k - 1), mean 1 / gamma (Liu & Talwar).
    k = np.arange(1, 50)
    np.testing.assert_allclose(tnb_pmf(k, 1.0, 0.2), 0.2 * 0.8 ** (k - 1), rtol=1e-12)
    assert tnb_mean(1.0, 0.2) == 5.0
    # eta = 0: logarithmic, mean (1/gamma - 1) / log(1/gamma).
    assert tnb_mean(0.0, 0.1) == pytest.approx(9.0 / math.log(10.0), rel=1e-14)
    # eta = 2: mean 2 (1 - gamma) / (gamma (1 - gamma^2)) = 2 / (gamma (1 + gamma)).
    assert tnb_mean(2.0, 0.25) == pytest.approx(2.0 / (0.25 * 1.25), rel=1e-14)


@pytest.mark.parametrize("eta", ETAS)
@pytest.mark.parametrize("mean", [1.5, 9.0, 100.0])
def test_gamma_inverts_the_mean(eta, mean):
    gamma = tnb_gamma(eta, mean)
    assert 0 < gamma < 1
    assert tnb_mean(eta, gamma) == pytest.approx(mean, rel=1e-12)


@pytest.mark.parametrize("eta", ETAS)
def test_sampler_matches_the_pmf_chi_square(eta):
    rng = np.random.default_rng(12345)
    gamma = tnb_gamma(eta, 6.0)
    draws = np.array(
        [truncated_negative_binomial(rng, eta, gamma) for _ in range(20000)]
    )
    assert draws.min() >= 1
    edges = list(range(1, 16))  # cells {1}, ..., {14}, {>= 15}
    observed = [np.sum(draws == k) for k in edges[:-1]] + [np.sum(draws >= 15)]
    p = tnb_pmf(np.arange(1, 15), eta, gamma)
    expected = np.append(p, 1.0 - p.sum()) * draws.size
    result = stats.chisquare(observed, expected)
    assert result.pvalue > 1e-3, (observed, expected.round(1))
    # The mean within 4 standard errors.
    k = np.arange(1, 20000)
    sd = math.sqrt((k**2 * tnb_pmf(k, eta, gamma)).sum() - 36.0)
    assert abs(draws.mean() - 6.0) < 4 * sd / math.sqrt(draws.size)


def test_sampler_and_distribution_reject_bad_parameters():
    rng = np.random.default_rng(0)
    for eta, gamma in [(-0.5, 0.1), (1.0, 0.0), (1.0, 1.0), (math.nan, 0.1)]:
        with pytest.raises(ValueError):
            truncated_negative_binomial(rng, eta, gamma)
        with pytest.raises(ValueError):
            tnb_mean(eta, gamma)
    with pytest.raises(TypeError):
        truncated_negative_binomial(np.random.RandomState(0), 1.0, 0.5)
    with pytest.raises(ValueError):
        tnb_gamma(1.0, 1.0)


# ---------------------------------------------------------------- Theorem 2


def _theorem2_by_hand(rho, lam, eta, gamma):
    """Papernot & Steinke (2022) Theorem 2 for a rho-zCDP run, minimised numerically."""

    def bound(lam_hat):
        eps_hat = lam_hat * rho
        return (1 + eta) * (1 - 1 / lam_hat) * eps_hat + (1 + eta) * math.log(
            1 / gamma
        ) / lam_hat

    best = optimize.minimize_scalar(bound, bounds=(1.0, 1e7), method="bounded")
    inner = min(best.fun, bound(1.0))
    return lam * rho + inner + math.log(tnb_mean(eta, gamma)) / (lam - 1)


def test_theorem2_vector_by_hand():
    # rho = 0.01, geometric with gamma = 0.1 (E[K] = 10), lambda = 10:
    # 0.1 + 2 (2 sqrt(0.01 log 10) - 0.01) + log(10) / 9.
    expected = 0.1 + 2 * (2 * math.sqrt(0.01 * math.log(10)) - 0.01) + math.log(10) / 9
    assert expected == pytest.approx(0.9428136, abs=1e-6)
    _, rdp = zcdp_repeat_and_select_rdp(0.01, 1.0, 0.1, orders=[10.0])
    assert rdp[0] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("eta", ETAS)
@pytest.mark.parametrize("rho", [1e-4, 0.01, 0.5, 5.0])
def test_zcdp_closed_form_matches_numeric_minimisation(eta, rho):
    gamma = tnb_gamma(eta, 8.0)
    orders = [1.5, 2.0, 8.0, 64.0]
    _, rdp = zcdp_repeat_and_select_rdp(rho, eta, gamma, orders=orders)
    by_hand = [_theorem2_by_hand(rho, lam, eta, gamma) for lam in orders]
    np.testing.assert_allclose(rdp, by_hand, rtol=1e-6)


def test_grid_form_is_the_closed_form_on_a_fine_grid():
    rho, eta, gamma = 0.02, 0.5, tnb_gamma(0.5, 12.0)
    orders = np.linspace(1.01, 300, 60000)
    grid = rdp_repeat_and_select(orders, orders * rho, eta, gamma)
    _, closed = zcdp_repeat_and_select_rdp(rho, eta, gamma, orders=orders)
    assert np.all(grid >= closed - 1e-12)  # the grid minimises over fewer lambda_hat
    np.testing.assert_allclose(grid, closed, rtol=1e-6)


@pytest.mark.parametrize("eta", ETAS)
def test_pure_dp_corollary3_is_the_limit_of_theorem2(eta):
    eps = 0.3
    # An eps-DP run is (lambda, eps)-RDP at every order; at huge lambda, lambda_hat
    # Theorem 2 tends to Corollary 3's (2 + eta) eps.
    orders = np.array([1e9])
    rdp = rdp_repeat_and_select(orders, np.array([eps]), eta, tnb_gamma(eta, 10.0))
    assert rdp[0] == pytest.approx((2 + eta) * eps, rel=1e-6)


# ------------------------------------------------------------------ dp_accounting


@pytest.fixture(scope="module")
def dpa():
    return pytest.importorskip("dp_accounting")


@pytest.mark.parametrize("eta", ETAS)
@pytest.mark.parametrize("mean", [3.0, 20.0])
def test_grid_form_matches_dp_accounting(dpa, eta, mean):
    from dp_accounting.rdp import rdp_privacy_accountant as rpa

    orders = np.asarray(SELECTION_ORDERS[40:200])
    z = 3.0
    rdp = orders / (2 * z**2)
    theirs = rpa._compute_rdp_repeat_and_select(orders, rdp, mean, eta)
    gamma = rpa._gamma_truncated_negative_binomial(eta, mean)
    ours = rdp_repeat_and_select(orders, rdp, eta, gamma)
    # dp_accounting then lowers each order to the minimum over higher orders
    # (monotonicity of RDP in the order); apply the same post-processing.
    ours = np.minimum.accumulate(ours[::-1])[::-1]
    np.testing.assert_allclose(ours, theirs, rtol=1e-9)


@pytest.mark.parametrize("eta", [0.0, 1.0, 2.0])
def test_epsilon_not_above_dp_accounting(dpa, eta):
    z, mean, delta = 4.0, 10.0, 1e-5
    accountant = dpa.rdp.RdpAccountant()
    accountant.compose(
        dpa.dp_event.RepeatAndSelectDpEvent(
            dpa.GaussianDpEvent(z), mean=mean, shape=eta
        )
    )
    theirs = accountant.get_epsilon(delta)
    ours = selection_epsilon(1 / (2 * z**2), delta, eta, tnb_gamma(eta, mean))
    # Same theorem; ours minimises lambda_hat exactly and uses more orders.
    assert ours <= theirs * (1 + 1e-9)
    assert ours >= 0.85 * theirs


# ------------------------------------------------------------------- calibration


@pytest.mark.parametrize("eta", ETAS)
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 8.0])
def test_calibration_certifies_the_target(eta, epsilon):
    gamma = tnb_gamma(eta, 9.0)
    rho = calibrate_selection_rho(epsilon, 1e-5, eta, gamma)
    got = selection_epsilon(rho, 1e-5, eta, gamma)
    assert got <= epsilon
    assert got >= epsilon * (1 - 1e-6)
    # Independent conversion of the same curve gives the same epsilon.
    orders, rdp = zcdp_repeat_and_select_rdp(rho, eta, gamma)
    assert rdp_to_approx_dp(orders, rdp, 1e-5)[0] == got


def test_calibration_vectors():
    """epsilon = 1, delta = 1e-5, E[K] = 9 (a 3x3 grid once on average)."""
    single = gaussian_rho_budget(1.0, 1e-5)
    assert single == pytest.approx(0.0359257, rel=1e-5)
    vec = {
        eta: calibrate_selection_rho(1.0, 1e-5, eta, tnb_gamma(eta, 9.0))
        for eta in ETAS
    }
    assert vec[0.0] == pytest.approx(0.0103742, rel=1e-4)
    assert vec[1.0] == pytest.approx(0.0070897, rel=1e-4)
    # Smaller shapes leave more per run (Theorem 2's (1 + eta) factor) ...
    assert vec[0.0] > vec[0.5] > vec[1.0] > vec[2.0]
    # ... and every one is above composing 9 fixed runs (rho / 9): 2.6 times at
    # eta = 0, 1.35 times at eta = 2.
    assert vec[0.0] > 2.5 * single / 9
    assert vec[2.0] > 1.3 * single / 9
    # More expected runs, smaller per-run budget (log E[K] growth).
    assert calibrate_selection_rho(1.0, 1e-5, 0.0, tnb_gamma(0.0, 100.0)) < vec[0.0]


def test_sampler_is_exact_integer_arithmetic():
    # No floating-point sampler of numpy is touched: a generator whose
    # logseries / geometric / negative_binomial raise still samples every eta.
    class NoFloatSamplers(np.random.Generator):
        def _refuse(self, *args, **kwargs):
            raise AssertionError("a numpy float sampler was used")

        logseries = geometric = negative_binomial = gamma = _refuse

    rng = NoFloatSamplers(np.random.PCG64(0))
    for eta in ETAS:
        assert truncated_negative_binomial(rng, eta, tnb_gamma(eta, 6.0)) >= 1
    # The OS-backed generator of random_state=None works too.
    from skdpsco.privacy._discrete import SecureGenerator

    secure = SecureGenerator(np.random.PCG64())
    assert truncated_negative_binomial(secure, 0.0, 0.2) >= 1


@pytest.mark.parametrize("exponent", [62, 63, 66])
def test_dyadic_bernoulli_past_62_bits_matches_its_rate(exponent):
    # A float gamma below 2^-9 has a denominator past 2^62: each trial then also
    # needs its top bits to be zero. The rate of the trials is gamma's.
    from fractions import Fraction

    from skdpsco.privacy._discrete import _bernoulli_dyadic

    m = 2**52 + 12345
    gamma = Fraction(m, 2**exponent)  # 2^-10, 2^-11, 2^-14
    rng = np.random.default_rng(5)
    hits = int(_bernoulli_dyadic(rng, gamma, 2**22).sum())
    expected = 2**22 * float(gamma)
    assert abs(hits - expected) < 5 * math.sqrt(expected)


@pytest.mark.parametrize(
    "eta, mean", [(1e-9, 6.0), (0.0, 200.0), (0.3, 300.0), (1e5, 6.0)]
)
def test_sampler_edge_parameters_are_fast_and_on_law(eta, mean):
    # A tiny eta (acceptance no longer proportional to eta), a small gamma (a
    # denominator past 2^62: batched trials, not one big integer at a time) and a
    # huge eta (batched negative binomial): the draws finish and their mean is
    # the law's.
    rng = np.random.default_rng(7)
    gamma = tnb_gamma(eta, mean)
    draws = np.array([truncated_negative_binomial(rng, eta, gamma) for _ in range(200)])
    k = np.arange(1, 200 * int(mean))
    pmf = tnb_pmf(k, eta, gamma)
    sd = math.sqrt((k**2 * pmf).sum() - mean**2)
    assert draws.min() >= 1
    assert abs(draws.mean() - mean) < 5 * sd / math.sqrt(draws.size)
