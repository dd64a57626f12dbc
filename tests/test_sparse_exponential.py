"""Algorithm 7: the sparse exponential mechanism (Ghazi et al., Lemma 7.3, Thm 7.5)."""

import math

import numpy as np
import pytest
from scipy import special, stats

from skdpsco._design import LinearDesign
from skdpsco._losses import HuberLoss
from skdpsco._solvers._sparse_exponential import (
    MAX_CANDIDATES,
    MAX_DIM,
    net_parameters,
    sparse_exponential_mechanism,
    sparse_net,
)
from skdpsco.privacy._accounting import account_records
from skdpsco.privacy._budget import AlgorithmBudget
from skdpsco.privacy._mechanisms import exponential_mechanism, selection_codes
from skdpsco.privacy._params import _non_private_testing_mode


def _permute_and_flip_law(scores, epsilon, sensitivity):
    """Exact output law of permute-and-flip on the integer codes.

    With i.i.d. uniform arrival times, ``j`` is visited before ``i`` iff it
    arrives earlier, so ``P[i] = p_i int_0^1 prod_{j != i} (1 - t p_j) dt``: a
    polynomial of degree ``N - 1`` in ``t``, integrated exactly by Gauss-Legendre.
    """
    codes, resolution = selection_codes(scores, epsilon, sensitivity)
    p = np.exp(-(np.array(codes, dtype=float) - min(codes)) / resolution)
    nodes, weights = np.polynomial.legendre.leggauss(len(p))
    t, w = (nodes + 1.0) / 2.0, weights / 2.0
    factors = 1.0 - np.outer(t, p)  # (nodes, N)
    law = np.empty(len(p))
    for i in range(len(p)):
        law[i] = p[i] * (w @ np.prod(np.delete(factors, i, axis=1), axis=1))
    return law


def test_exponential_mechanism_law_chi_square():
    scores = np.array([0.0, 0.5, 1.0, 2.0, 3.0, 0.25])
    rng = np.random.default_rng(0)
    draws = [exponential_mechanism(rng, scores, 2.0, 0.5) for _ in range(30_000)]
    law = _permute_and_flip_law(scores, 2.0, 0.5)
    assert law.sum() == pytest.approx(1.0, abs=1e-12)
    counts = np.bincount(draws, minlength=6)
    assert stats.chisquare(counts, 30_000 * law).pvalue > 1e-3
    # Never worse in expectation than the exponential mechanism (McKenna &
    # Sheldon 2020, Thm 2).
    em = special.softmax(-2.0 * scores / (2 * 0.5))
    assert law @ scores <= em @ scores
    assert exponential_mechanism(rng, scores, math.inf, 1.0) == 0


@pytest.mark.parametrize("epsilon", [1e-3, 0.3, 1.0, 7.0, 1e4])
def test_selection_codes_sensitivity_under_adversarial_neighbours(epsilon):
    # Scores at every magnitude (subnormal to 1e300, negative), neighbours moved
    # by exactly +-Delta, by a hair less, and onto rounding boundaries: the integer
    # codes move by at most Delta_T with 2 Delta_T / resolution <= epsilon.
    rng = np.random.default_rng(1)
    delta = 0.37
    base = np.concatenate(
        [
            rng.normal(size=50),
            rng.normal(size=20) * 1e6,
            [0.0, 5e-324, -5e-324, 1e300, -1e300, 1e-300, delta, -delta],
        ]
    )
    worst = 0
    for move in (delta, -delta, np.nextafter(delta, 0), 0.5 * delta):
        other = base + move
        keep = np.abs(other - base) <= delta
        a, resolution = selection_codes(base[keep], epsilon, delta)
        b, _ = selection_codes(other[keep], epsilon, delta)
        worst = max(worst, max(abs(x - y) for x, y in zip(a, b, strict=True)))
    assert 2 * worst / resolution <= epsilon
    # ... and the rounding costs almost nothing.
    assert 2 * worst / resolution >= epsilon * (1 - 2.0**-18)


def test_permute_and_flip_ratio_on_neighbours_is_at_most_epsilon():
    # Exact laws on neighbouring score vectors (every score moves by <= Delta,
    # the best one included): the log-ratio of every outcome stays within epsilon.
    rng = np.random.default_rng(2)
    epsilon, delta = 1.3, 0.5
    worst = 0.0
    for _ in range(40):
        scores = rng.uniform(0.0, 3.0, size=5)
        other = scores + rng.choice([-delta, delta, 0.0], size=5)
        p = _permute_and_flip_law(scores, epsilon, delta)
        q = _permute_and_flip_law(other, epsilon, delta)
        worst = max(worst, np.max(np.abs(np.log(p) - np.log(q))))
    assert worst <= epsilon
    assert worst > 0.5 * epsilon  # the test can see a violation


def test_exponential_mechanism_draws_a_coin_for_every_candidate(monkeypatch):
    # The work done does not depend on where the first success falls: one coin
    # per candidate, whatever the scores.
    import skdpsco.privacy._mechanisms as mechanisms

    sizes = []
    real = mechanisms.bernoulli_exp

    def spy(rng, num, den):
        sizes.append(len(num))
        return real(rng, num, den)

    monkeypatch.setattr(mechanisms, "bernoulli_exp", spy)
    rng = np.random.default_rng(3)
    for scores in (np.zeros(7), np.arange(7.0) * 100.0, -np.arange(7.0)):
        exponential_mechanism(rng, scores, 1.0, 1.0)
    assert sizes == [7, 7, 7]


def _tiny(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)) * 0.5
    y = X @ np.array([0.6, 0.0, -0.4, 0.0]) + 0.05 * rng.normal(size=n)
    return LinearDesign(X, fit_intercept=False), X, y


@pytest.mark.parametrize("k", [1, 2])
def test_output_law_matches_permute_and_flip(k):
    # d = 4: exact law of the output over the net is permute-and-flip's with
    # coins exp(-eps n F_S / (2B)) (from the best point), the per-record loss
    # clipped to [0, B] (chi-square over the net points).
    design, X, y = _tiny()
    loss, B, eps = HuberLoss(1.0), 1.0, 1.0
    net = sparse_net(4, k, 1.0, 1.0)  # coarse grid: few points, many draws each
    scores = np.array([np.clip(loss.value(X @ w, y), 0, B).sum() for w in net])
    p = _permute_and_flip_law(scores, eps, B)
    rng = np.random.default_rng(1)
    kw = dict(
        budget=AlgorithmBudget(eps, 0.0, design.n_samples),
        loss_bound=B,
        norm_bound=1.0,
        sparsity=4,
        radius=1.0,
        net_sparsity=k,
        net_resolution=1.0,
        rng=rng,
    )
    draws = np.array(
        [sparse_exponential_mechanism(design, y, loss, **kw).coef for _ in range(2000)]
    )
    idx = [int(np.flatnonzero((net == w).all(axis=1))[0]) for w in draws]
    counts = np.bincount(idx, minlength=len(net))
    keep = 2000 * p >= 5
    expected = np.append(2000 * p[keep], 2000 * p[~keep].sum())
    observed = np.append(counts[keep], counts[~keep].sum())
    if expected[-1] == 0:
        expected, observed = expected[:-1], observed[:-1]
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def test_net_covers_sparse_ball():
    net = sparse_net(5, 2, 1.0, 0.4)
    assert np.all(np.linalg.norm(net, axis=1) <= 1.0 + 1e-9)
    assert np.all((net != 0).sum(axis=1) <= 2)
    rng = np.random.default_rng(0)
    for _ in range(200):
        x = np.zeros(5)
        x[rng.choice(5, 2, replace=False)] = rng.normal(size=2)
        x *= rng.uniform() / np.linalg.norm(x)
        assert np.min(np.linalg.norm(net - x, axis=1)) < 0.4


def test_scores_sensitivity_and_record():
    design, X, y = _tiny()
    res = sparse_exponential_mechanism(
        design,
        y,
        HuberLoss(1.0),
        budget=AlgorithmBudget(0.5, 0.0, design.n_samples),
        loss_bound=1.0,
        norm_bound=1.0,
        sparsity=4,
        radius=1.0,
        rng=np.random.default_rng(0),
    )
    assert res.coef.shape == (4,)
    assert account_records(res.records, 0.0)[0] == 0.5
    tau, k = net_parameters(
        60,
        0.5,
        loss_bound=1.0,
        norm_bound=1.0,
        sparsity=4,
        radius=1.0,
        dim=4,
        confidence=0.05,
    )
    # tau solves tau^3 / ln(d/(tau beta)) = B D^2 / (L sqrt(s) eps n) = 1/60.
    assert tau**3 / math.log(4 / (tau * 0.05)) == pytest.approx(1 / 60, rel=1e-9)
    assert k == min(4, math.floor(1 / tau**2))


def test_non_private_limit_is_net_minimiser():
    design, X, y = _tiny()
    loss = HuberLoss(1.0)
    net = sparse_net(4, 2, 1.0, 0.2)
    best = net[np.argmin([np.clip(loss.value(X @ w, y), 0, 5).sum() for w in net])]
    with _non_private_testing_mode():
        res = sparse_exponential_mechanism(
            design,
            y,
            loss,
            budget=AlgorithmBudget(math.inf, 0.0, design.n_samples),
            loss_bound=5.0,
            norm_bound=1.0,
            sparsity=4,
            radius=1.0,
            net_sparsity=2,
            net_resolution=0.2,
            rng=np.random.default_rng(0),
        )
    np.testing.assert_array_equal(res.coef, best)
    assert abs(res.coef[0] - 0.6) < 0.2 and abs(res.coef[2] + 0.4) < 0.2


def test_refuses_large_inputs():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, MAX_DIM + 1))
    design = LinearDesign(X, fit_intercept=False)
    kw = dict(
        budget=AlgorithmBudget(1.0, 0.0, 20),
        loss_bound=1.0,
        norm_bound=1.0,
        sparsity=2,
        radius=1.0,
        rng=rng,
    )
    with pytest.raises(ValueError, match=f"MAX_DIM={MAX_DIM}"):
        sparse_exponential_mechanism(design, np.zeros(20), HuberLoss(), **kw)
    design, _, y = _tiny()
    with pytest.raises(ValueError, match=f"MAX_CANDIDATES={MAX_CANDIDATES}"):
        sparse_exponential_mechanism(
            design, y, HuberLoss(), net_sparsity=4, net_resolution=1e-3, **kw
        )


def test_fixed_point_scores_move_by_at_most_the_sensitivity():
    # Replace one record by an extreme one: every candidate's integer score
    # moves by at most SCORE_UNITS exactly (a float sum could drift past B).
    from skdpsco._solvers._sparse_exponential import SCORE_UNITS, _scores

    design, X, y = _tiny(n=3000)
    loss, B = HuberLoss(1.0), 0.7
    net = sparse_net(4, 2, 1.0, 0.5)
    X2, y2 = X.copy(), y.copy()
    X2[0], y2[0] = 1e300, -1e300
    a = _scores(design, y, loss, net, 1, B)
    b = _scores(LinearDesign(X2, fit_intercept=False), y2, loss, net, 1, B)
    assert a.dtype == np.int64 and b.dtype == np.int64
    assert np.max(np.abs(a - b)) <= SCORE_UNITS


def test_selection_refuses_a_scale_past_the_float_range():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="float range"):
        exponential_mechanism(rng, np.zeros(3), 1e12, 1e-300)


def test_secure_visiting_order_is_a_uniform_permutation():
    from skdpsco.privacy._discrete import SecureGenerator, uniform_permutation

    secure = SecureGenerator(np.random.PCG64(0))
    firsts = np.bincount(
        [uniform_permutation(secure, 4)[0] for _ in range(4000)], minlength=4
    )
    assert stats.chisquare(firsts).pvalue > 1e-3
    assert sorted(uniform_permutation(secure, 50)) == list(range(50))
    # The seeded generator's stream does not decide the secure order.
    again = SecureGenerator(np.random.PCG64(0))
    orders = {tuple(uniform_permutation(g, 20)) for g in (secure, again)}
    assert len(orders) == 2
