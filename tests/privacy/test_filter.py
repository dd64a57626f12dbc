"""Privacy filter, amplification by subsampling and private-selection arithmetic.

Ghazi et al. (sparse gradients), Algorithms 4-5, Lemma 5.3, Theorem 6.1, Theorem A.4
(Whitehouse et al. 2023), and Liu & Talwar (2019), Theorem 3.4.
"""

import math

import numpy as np
import pytest

from skdpsco.privacy._filter import (
    PrivacyFilter,
    amplified_delta,
    amplified_epsilon,
    boosting_budget,
    closed_form_step_cost,
    filter_epsilon,
    private_selection_cost,
    step_cost,
)


@pytest.mark.parametrize("epsilon", [1e-4, 0.1, 0.99, 1.0, 3.0, 13.0, 50.0, 700.0])
@pytest.mark.parametrize("q", [1e-6, 1 / 1024, 0.1, 0.5, 1.0])
def test_amplified_epsilon_matches_exact_formula(epsilon, q):
    exact = float(np.log1p(q * np.expm1(np.longdouble(epsilon))))
    assert amplified_epsilon(epsilon, q) == pytest.approx(exact, rel=1e-12)
    assert amplified_epsilon(epsilon, q) <= epsilon * (1 + 1e-15)


def test_amplified_epsilon_edge_values():
    # Hand-computed: ln(1 + 0.01 (e - 1)) = ln(1.01718281...) = 0.01703686...
    assert amplified_epsilon(1.0, 0.01) == pytest.approx(0.0170368632, rel=1e-8)
    # No overflow far beyond e^709: ln(q e^eps + 1 - q) = eps + ln q up to e^-eps.
    assert amplified_epsilon(800.0, 0.25) == pytest.approx(800 + math.log(0.25))
    assert amplified_epsilon(math.inf, 0.3) == math.inf
    assert amplified_epsilon(2.0, 0.0) == 0.0
    assert amplified_epsilon(2.0, 1.0) == pytest.approx(2.0)
    assert amplified_delta(1e-5, 0.25) == 2.5e-6
    with pytest.raises(ValueError):
        amplified_epsilon(1.0, 1.5)


def test_step_cost_test_vector():
    # n = 1024, N = 3: q = 2^4 / 1024 = 1/64.
    # eps_t = ln(1 + (1/64)(e^(3/32) - 1)) + ln(1 + (e^(1/32) - 1)/1024)
    #       = ln(1.0015367...) + ln(1.0000310...) = 0.00153553... + 0.00003100...
    eps_t, delta_t = step_cost(1.0, 1e-6, 1024, 3)
    assert eps_t == pytest.approx(0.001565526268688327, rel=1e-12)
    # delta_t = (1/64)(3e-6/16) + (1e-6/16)/1024 = (3 * 16 + 1) e-6 / (16 * 1024)
    assert delta_t == pytest.approx(49e-6 / 16384, rel=1e-12)
    # The paper's closed form a(N) = (3 2^(N+1) + 1)/(16 n) = 49/16384.
    eps_c, delta_c = closed_form_step_cost(1.0, 1e-6, 1024, 3)
    assert eps_c == pytest.approx(49 / 16384, rel=1e-15)
    assert delta_c == pytest.approx(delta_t, rel=1e-12)


@pytest.mark.parametrize("n", [2, 3, 100, 1024, 100_000])
def test_exact_step_cost_below_closed_form_up_to_13(n):
    # Lemma 5.3's closed form a(N) eps: the exact amplified value is below it for
    # every level when eps <= 13 (e^x - 1 <= 2x holds for x = 3 eps / 32 <= 1.2564).
    M = n.bit_length() - 2
    for eps in np.linspace(0.01, 13.0, 40):
        for level in range(M + 1):
            exact = step_cost(eps, 1e-6, n, level)[0]
            closed = closed_form_step_cost(eps, 1e-6, n, level)[0]
            assert exact <= closed * (1 + 1e-12)


def test_closed_form_is_not_a_bound_for_large_epsilon():
    # Lemma 5.3's closed form relies on e^x - 1 <= 2x: beyond eps ~ 13.4 it
    # under-charges the small levels, which is why the solvers charge the exact value.
    exact = step_cost(20.0, 1e-6, 1024, 0)[0]
    closed = closed_form_step_cost(20.0, 1e-6, 1024, 0)[0]
    assert exact > 1.3 * closed


def test_step_cost_rejects_levels_above_m():
    with pytest.raises(ValueError):
        step_cost(1.0, 1e-6, 1000, 9)  # 2^10 > 1000
    with pytest.raises(ValueError):
        step_cost(1.0, 1e-6, 1, 0)


def test_filter_epsilon_test_vector():
    # sqrt(2 ln(1e6) * 0.01) + 0.01 / 2 = sqrt(0.276310...) + 0.005
    assert filter_epsilon(0.01, 1e-6) == pytest.approx(0.5306521769756932, rel=1e-12)
    assert filter_epsilon(0.0, 1e-6) == 0.0
    assert filter_epsilon(math.inf, 1e-6) == math.inf


def test_privacy_filter_never_exceeds_its_target():
    rng = np.random.default_rng(0)
    filt = PrivacyFilter(1.0, 1e-6, 1e-6)
    admitted = []
    while True:
        eps_t = rng.uniform(0.0, 0.05)
        delta_t = rng.uniform(0.0, 2e-8)
        before = (filt.sum_sq_epsilon, filt.sum_delta, filt.n_steps)
        if not filt.try_charge(eps_t, delta_t):
            # A refused step leaves the state unchanged.
            assert (filt.sum_sq_epsilon, filt.sum_delta, filt.n_steps) == before
            break
        admitted.append((eps_t, delta_t))
        assert filter_epsilon(filt.sum_sq_epsilon, 1e-6) <= 1.0
        assert filt.sum_delta <= 1e-6
    sq = math.fsum(e * e for e, _ in admitted)
    assert filt.sum_sq_epsilon == pytest.approx(sq)
    assert filt.n_steps == len(admitted) > 10
    assert filt.delta == 2e-6
    # A step past the filter is refused and charges nothing.
    assert not filt.try_charge(1.0, 0.0)
    assert filt.n_steps == len(admitted)
    assert filt.sum_sq_epsilon == pytest.approx(sq)


def test_filter_with_infinite_epsilon_stops_on_delta_only():
    filt = PrivacyFilter(math.inf, 1e-6, 1e-6)
    steps = 0
    while filt.try_charge(math.inf, 1e-7):
        steps += 1
    assert steps == 10


def test_private_selection_cost_test_vector():
    # (3 eps_1 + 3 sqrt(2 delta_1), sqrt(2 delta_1) K + delta_2)
    eps, delta = private_selection_cost(0.1, 1e-12, 100, 1e-7)
    assert eps == pytest.approx(0.3 + 3 * math.sqrt(2e-12))
    assert delta == pytest.approx(100 * math.sqrt(2e-12) + 1e-7)


def test_boosting_budget_test_vector():
    plan = boosting_budget(1.0, 1e-6, 0.05)
    assert plan["gamma"] == pytest.approx(0.0375)
    # K = ceil(ln(2e6) / 0.0375) = ceil(14.5087 / 0.0375) = ceil(386.9) = 387
    assert plan["max_runs"] == 387
    assert plan["epsilon_run"] == plan["epsilon_score"] == pytest.approx(1 / 12)
    assert plan["delta_run"] == pytest.approx((1e-6 / (4 * 387)) ** 2)
    assert plan["delta_stop"] == 5e-7


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 2.0, 8.0])
@pytest.mark.parametrize("beta", [0.05, 0.3, 0.9])
@pytest.mark.parametrize("ratio", [1e-8, 1e-3, 0.0999])
def test_boosting_split_composes_within_budget(epsilon, beta, ratio):
    # Theorem 6.1: Liu–Talwar on the eps/12 + eps/12 pairs with (delta/4K)^2
    # returns <= (eps, delta) whenever delta <= eps/10.
    delta = min(ratio * epsilon, 0.5)
    plan = boosting_budget(epsilon, delta, beta)
    eps_1 = plan["epsilon_run"] + plan["epsilon_score"]
    total = private_selection_cost(
        eps_1, plan["delta_run"], plan["max_runs"], plan["delta_stop"]
    )
    assert total[0] <= epsilon
    assert total[1] <= delta


def test_boosting_rejects_delta_above_epsilon_over_10():
    with pytest.raises(ValueError, match="delta <= epsilon/10"):
        boosting_budget(0.1, 0.02, 0.05)
