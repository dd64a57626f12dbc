"""Poisson-batch SGD: sampling, batch-oracle sensitivity, noise, accounting, limits."""

import numpy as np
import pytest
from scipy import stats
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.preprocessing import StandardScaler

from skdpsco import HeavyTailedDPLogistic, HeavyTailedDPRidge
from skdpsco._design import LinearDesign
from skdpsco._mean_estimation import AveragedClipBatchOracle, PerExampleClipBatchOracle
from skdpsco.privacy import (
    noise_multiplier_for_rdp,
    rdp_poisson_subsampled_gaussian,
    rdp_to_approx_dp,
)
from skdpsco.privacy._accounting import (
    DEFAULT_RDP_ORDERS,
    calibrate_poisson_noise_multiplier,
)
from skdpsco.privacy._discrete import poisson_batches
from skdpsco.privacy._params import _non_private_testing_mode

SGD_ALGORITHMS = ["aclipped_sgd", "dp_sgd", "r_aclipped_sgd"]
RNG = np.random.default_rng(0)


def test_poisson_batches_include_each_record_independently_with_rate_q():
    n, q, reps = 50, 0.1, 20_000
    rng = np.random.default_rng(1)
    hits = np.zeros(n)
    sizes = []
    # The batches noisy_sgd draws (the seeded branch: Binomial count, uniform subset).
    for rows in poisson_batches(rng, n, q, reps):
        hits[rows] += 1
        sizes.append(rows.size)
    # Each inclusion frequency within a 5-sigma band of q, sizes ~ Binomial(n, q).
    assert np.all(np.abs(hits / reps - q) < 5 * np.sqrt(q * (1 - q) / reps))
    assert np.mean(sizes) == pytest.approx(n * q, rel=0.02)
    assert np.var(sizes) == pytest.approx(n * q * (1 - q), rel=0.06)


@pytest.mark.usefixtures("non_private_mode")
def test_aclip_output_stays_in_the_ball_so_sensitivity_is_two_lambda():
    lam = 1.5
    oracle = AveragedClipBatchOracle(lam).calibrate(100, 0.1, 0.0)  # noiseless
    X = RNG.normal(size=(12, 3))
    U = RNG.normal(size=12)
    outs = []
    for canary_x, canary_u in [(np.full(3, 1e8), 1e12), (np.full(3, 1e8), -1e300)]:
        X2, U2 = X.copy(), U.copy()
        X2[0], U2[0] = canary_x, canary_u
        outs.append(oracle.estimate(LinearDesign(X2, True), U2, RNG))
    outs.append(oracle.estimate(LinearDesign(X, True), U, RNG))
    empty = oracle.estimate(LinearDesign(X[:0], True), U[:0], RNG)
    np.testing.assert_array_equal(empty, 0.0)
    for a in outs:
        assert np.linalg.norm(a) <= lam * (1 + 1e-12)
    assert np.linalg.norm(outs[0] - outs[1]) > 1.9 * lam  # the bound is attained
    assert oracle.records(5)[0].sensitivity == 2 * lam


@pytest.mark.usefixtures("non_private_mode")
def test_per_example_sum_sensitivity_and_noise():
    C, z, n, q = 2.0, 1.3, 400, 0.05
    oracle = PerExampleClipBatchOracle(C).calibrate(n, q, z)
    rec = oracle.records(1)[0]
    assert rec.sensitivity == C and rec.scale == pytest.approx(z * C)
    assert oracle.noise_scale == rec.scale and rec.sampling_rate == q
    # Adding one extreme record moves the (noiseless) clipped sum by <= C.
    quiet = PerExampleClipBatchOracle(C).calibrate(n, q, 0.0)
    X = RNG.normal(size=(20, 3))
    U = RNG.normal(size=20)
    a = quiet.estimate(LinearDesign(X, True), U, RNG) * q * n
    X2, U2 = np.vstack([X, [1e9, 1e9, 1e9]]), np.append(U, -1e9)
    b = quiet.estimate(LinearDesign(X2, True), U2, RNG) * q * n
    assert np.linalg.norm(a - b) <= C * (1 + 1e-12)
    # Noise on the mean: std z C / (q n) per coordinate.
    d = 3000
    out = oracle.estimate(LinearDesign(np.zeros((5, d)), False), np.zeros(5), RNG)
    sigma = z * C / (q * n)
    lo, hi = stats.chi2.ppf([0.0005, 0.9995], d) / d
    assert lo * sigma**2 < np.mean(out**2) < hi * sigma**2


def test_noise_multiplier_is_the_group_privacy_calibration():
    # Replace-one (eps, delta) via add/remove (eps/2, delta/(1+e^(eps/2))) at least;
    # the fixed point can only do better than that split.
    eps, delta, q, T = 1.0, 1e-5, 0.02, 500
    z = calibrate_poisson_noise_multiplier(eps, delta, [(q, T)])
    z_split = noise_multiplier_for_rdp(eps / 2, delta / (1 + np.exp(eps / 2)), q, T)
    assert z <= z_split * (1 + 1e-6)
    # and it certifies the target: 2 eps_ar at a feasible delta_ar.
    curve = T * rdp_poisson_subsampled_gaussian(q, z, DEFAULT_RDP_ORDERS)
    e_ar = rdp_to_approx_dp(DEFAULT_RDP_ORDERS, curve, delta / (1 + np.exp(eps / 2)))[0]
    assert 2 * e_ar <= eps * (1 + 1e-6)


@pytest.mark.parametrize("algorithm", SGD_ALGORITHMS)
@pytest.mark.parametrize("Est", [HeavyTailedDPRidge, HeavyTailedDPLogistic])
def test_sgd_spends_what_was_asked(Est, algorithm):
    X = RNG.normal(size=(400, 3))
    y = X @ [1.0, -1.0, 0.5] if Est is HeavyTailedDPRidge else (X[:, 0] > 0)
    est = Est(
        scaling="none",
        algorithm=algorithm,
        epsilon=0.8,
        delta=1e-6,
        max_iter=3,
        random_state=0,
    )
    est.fit(X, y)
    spent = est.privacy_spent_
    assert spent.epsilon <= 0.8 and spent.epsilon == pytest.approx(0.8, rel=1e-4)
    assert spent.accountant == "rdp-group" and est.n_iter_ == 3
    stages = 3 if algorithm == "r_aclipped_sgd" else 1
    assert len(spent.mechanisms) == stages
    rates = [r.sampling_rate for r in spent.mechanisms]
    assert rates[0] == pytest.approx(np.ceil(np.sqrt(400)) / 400)
    assert all(
        b == pytest.approx(min(1, 2 * a))
        for a, b in zip(rates, rates[1:], strict=False)
    )


@pytest.mark.parametrize("algorithm", SGD_ALGORITHMS)
def test_sgd_full_batch_non_private_limit_matches_sklearn(algorithm):
    # batch_size = n makes every Poisson batch the whole data; without noise and
    # with a huge clip level the iterates are full-batch gradient descent.
    X = StandardScaler().fit_transform(RNG.normal(size=(200, 3)))
    y = X @ [1.0, -2.0, 0.5] + 0.3 + RNG.normal(size=200)
    ref = Ridge(alpha=0.0).fit(X, y)
    errors = []
    for epochs in (500, 2000):
        with _non_private_testing_mode():
            est = HeavyTailedDPRidge(
                scaling="none",
                epsilon=np.inf,
                algorithm=algorithm,
                alpha=0.0,
                batch_size=200,
                clip_norm=1e6,
                learning_rate=0.5,
                max_iter=epochs,
                random_state=0,
            ).fit(X, y)
        errors.append(
            np.abs(
                np.append(est.coef_ - ref.coef_, est.intercept_ - ref.intercept_)
            ).max()
        )
    if algorithm == "dp_sgd":  # suffix average of a linearly converging sequence
        assert errors[1] < 1e-8
    else:  # uniform average (the paper's output): 1/T
        assert errors[1] < 5e-3 and errors[1] < errors[0] / 3


def test_logistic_dp_sgd_non_private_limit():
    X = StandardScaler().fit_transform(RNG.normal(size=(200, 3)))
    y = (X @ [1.0, -2.0, 0.5] + RNG.logistic(size=200) > 0).astype(int)
    ref = LogisticRegression(C=1.0, tol=1e-12).fit(X, y)
    with _non_private_testing_mode():
        est = HeavyTailedDPLogistic(
            scaling="none",
            epsilon=np.inf,
            algorithm="dp_sgd",
            batch_size=200,
            clip_norm=1e6,
            max_iter=3000,
            random_state=0,
        ).fit(X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, atol=1e-6)


def test_sgd_is_useful_at_realistic_size():
    from skdpsco.datasets import make_heavy_tailed_classification

    X, y, _ = make_heavy_tailed_classification(20_000, 5, random_state=0)
    ref = LogisticRegression().fit(X, y).score(X, y)
    majority = max(np.mean(y), 1 - np.mean(y))
    for algorithm in SGD_ALGORITHMS:
        est = HeavyTailedDPLogistic(
            scaling="none", algorithm=algorithm, epsilon=2.0, delta=1e-6, random_state=0
        ).fit(X, y)
        if algorithm == "r_aclipped_sgd":
            # Measured: the restarted schedule with its default tuning is weaker
            # (0.60-0.72 over seeds); the median of three fits must still beat the
            # majority class.
            scores = [est.score(X, y)] + [
                HeavyTailedDPLogistic(
                    scaling="none",
                    algorithm=algorithm,
                    epsilon=2.0,
                    delta=1e-6,
                    random_state=seed,
                )
                .fit(X, y)
                .score(X, y)
                for seed in (1, 2)
            ]
            assert np.median(scores) > majority + 0.03, (algorithm, scores)
        else:
            assert est.score(X, y) > ref - 0.12, algorithm
