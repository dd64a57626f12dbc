"""Mechanisms and composite records of the sparse-gradient solvers: the exponential
mechanism object (McKenna & Sheldon 2020), the record of a filter-stopped run
(Ghazi et al., Thm A.4) and of private selection (Liu & Talwar 2019, Thm 3.4)."""

import math

import numpy as np
import pytest

from skdpsco.privacy._accounting import account_records
from skdpsco.privacy._filter import (
    filtered_run_record,
    private_selection_cost,
    private_selection_record,
)
from skdpsco.privacy._mechanisms import (
    ExponentialMechanism,
    LaplaceMechanism,
    exponential_mechanism,
)
from skdpsco.privacy._records import MechanismRecord


def test_exponential_mechanism_record_states_the_epsilon_it_selects_with():
    mech = ExponentialMechanism(3.0, 0.7, name="selection")
    record = mech.record()
    assert (record.name, record.kind, record.count) == ("selection", "approx_dp", 1)
    assert (record.epsilon, record.delta) == (mech.epsilon, 0.0) == (0.7, 0.0)
    assert account_records([mech.record(4)], 0.0)[0] == pytest.approx(2.8, rel=1e-12)
    # The object selects exactly as the function at its epsilon and sensitivity.
    scores = np.array([5.0, 0.0, 2.0, 9.0])
    a = [mech.select(scores, np.random.default_rng(s)) for s in range(30)]
    b = [
        exponential_mechanism(np.random.default_rng(s), scores, 0.7, 3.0)
        for s in range(30)
    ]
    assert a == b


def test_exponential_mechanism_selection_frequency_matches_permute_and_flip():
    # Two candidates at distance Delta: the worse one is visited first with
    # probability 1/2 and its coin is exp(-epsilon / 2), so P[worse] =
    # exp(-epsilon / 2) / 2 (McKenna & Sheldon 2020, Algorithm 1).
    epsilon, n_draws = 1.0, 4000
    mech = ExponentialMechanism(2.0, epsilon)
    rng = np.random.default_rng(11)
    worse = sum(mech.select([0.0, 2.0], rng) for _ in range(n_draws))
    p = 0.5 * math.exp(-epsilon / 2)
    band = 4.0 * math.sqrt(p * (1 - p) / n_draws)
    assert abs(worse / n_draws - p) < band


def test_exponential_mechanism_refuses_bad_constants_and_is_exact_at_inf():
    with pytest.raises(ValueError, match="sensitivity"):
        ExponentialMechanism(0.0, 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        ExponentialMechanism(1.0, 0.0)
    mech = ExponentialMechanism(1.0, math.inf)
    assert mech.select([3.0, -1.0, 2.0], np.random.default_rng(0)) == 1


def test_filtered_run_record_is_one_approx_dp_mechanism_at_the_certified_total():
    record = filtered_run_record("run", 0.75, 9e-7)
    assert record == MechanismRecord("run", "approx_dp", epsilon=0.75, delta=9e-7)
    eps, _, how = account_records([record], 1e-6)
    assert eps == 0.75 and how == "basic"


def test_private_selection_record_composes_one_pair_then_liu_talwar():
    run = MechanismRecord("run", "approx_dp", epsilon=0.1, delta=1e-12)
    score = LaplaceMechanism.from_epsilon(0.5, 0.05).record()
    record = private_selection_record("selection", [run, score], 40, 5e-7)
    eps, delta = private_selection_cost(0.1 + score.epsilon, 1e-12, 40, 5e-7)
    assert (record.epsilon, record.delta) == (eps, delta)
    assert record.kind == "approx_dp" and record.name == "selection"
    # 3 epsilon_1 + 3 sqrt(2 delta_1), sqrt(2 delta_1) K + delta_2 (Thm 3.4).
    root = math.sqrt(2e-12)
    assert eps == pytest.approx(3 * 0.15 + 3 * root, rel=1e-12)
    assert delta == pytest.approx(root * 40 + 5e-7, rel=1e-12)
    # A record standing for two uses counts twice.
    twice = MechanismRecord("run", "approx_dp", count=2, epsilon=0.1, delta=1e-12)
    doubled = private_selection_record("selection", [twice], 40, 5e-7)
    assert doubled.epsilon == pytest.approx(3 * 0.2 + 3 * math.sqrt(4e-12))
