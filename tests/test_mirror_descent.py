"""l_p mirror descent (Su-Zhao-Wang Algorithms 3, 4 and Theorem 8): geometry, the
grid Gaussian noise and its scales, sensitivity handling, non-private limits,
ledger."""

import math

import numpy as np
import pytest
from scipy import optimize, special

from skdpsco._constraints import L1Ball
from skdpsco._design import LinearDesign, row_lr_norms
from skdpsco._exact_sum import exact_sum_slack
from skdpsco._losses import get_loss
from skdpsco._solvers import _mirror_descent as md
from skdpsco.privacy import approx_dp_to_gdp, calibrate_analytic_gaussian
from skdpsco.privacy._budget import AlgorithmBudget
from skdpsco.privacy._ledger import PrivacySpent
from skdpsco.privacy._mechanisms import GaussianMechanism
from skdpsco.privacy._shuffling import shuffle_epsilon


def _logistic_data(n=2000, d=20, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) / np.sqrt(d)
    y = (rng.random(n) < special.expit(X @ np.linspace(-2, 2, d))).astype(float)
    return X, y


def test_geometry_cases_and_mirror_maps():
    g = md.lp_geometry(1.5, 1000)  # Case A: 1/(p-1) = 2 <= 2e ln d
    assert (g.kappa, g.q, g.q_plus, g.p_plus) == pytest.approx((2.0, 3.0, 3.0, 1.5))
    g = md.lp_geometry(1.01, 100)  # Case B: 100 > 2e ln 100 = 25.0
    assert g.kappa == pytest.approx(2 * math.e * math.log(100))
    assert g.q_plus == pytest.approx(2 * math.log(100) + 1)
    assert g.p_plus == pytest.approx(1 + 1 / (2 * math.log(100)))
    rng = np.random.default_rng(0)
    for geom in (
        md.lp_geometry(1.5, 30),
        md.lp_geometry(1.01, 30),
        md.lp_geometry(1.2, 30),
    ):
        for _ in range(50):
            w, u = rng.standard_normal(30), rng.standard_normal(30)
            assert np.allclose(geom.grad_phi_star(geom.grad_phi(w)), w, atol=1e-12)
            lin = geom.phi(w) + geom.grad_phi(w) @ (u - w)
            # 1-strong convexity w.r.t. ||.||_p.
            assert (
                geom.phi(u)
                >= lin + 0.5 * np.sum(np.abs(u - w) ** geom.p) ** (2 / geom.p) - 1e-9
            )


def _spy_releases(monkeypatch):
    """Record (sensitivity, sigma, value shape) of every grid Gaussian release."""
    released = []
    real = GaussianMechanism.release

    def spy(self, value, rng):
        released.append((self.sensitivity, self.sigma, np.shape(value)))
        return real(self, value, rng)

    monkeypatch.setattr(GaussianMechanism, "release", spy)
    return released


@pytest.mark.parametrize(("p", "d"), [(2.0, 40), (1.5, 40), (1.2, 40), (1.01, 1000)])
def test_l2_sensitivity_factor_and_dual_moment(p, d):
    geom = md.lp_geometry(p, d)
    rng = np.random.default_rng(1)
    # Hölder: ||v||_2 <= d^{1/2 - 1/q} ||v||_q, with equality at the all-ones vector.
    h = md.l2_sensitivity_factor(geom)
    V = rng.standard_t(1.5, (2000, d))
    ratio = np.linalg.norm(V, axis=1) / row_lr_norms(V, geom.q)
    assert np.all(ratio <= h * (1 + 1e-12))
    ones = np.ones(d)
    assert np.linalg.norm(ones) == pytest.approx(h * md._norm(ones, geom.q))
    # The Jensen bound on E ||z||_{q+}^2 for Gaussian z: above the Monte Carlo
    # value, and not far above it.
    sigma = 1.7
    Z = sigma * rng.standard_normal((4000, d))
    r = geom.q_plus
    empirical = np.mean(np.sum(np.abs(Z) ** r, axis=1) ** (2 / r))
    bound = md.gaussian_dual_moment(geom, sigma)
    assert empirical <= bound <= 1.6 * empirical
    if p == 2.0:
        assert bound == pytest.approx(d * sigma**2)


def _slack(lipschitz, R, q, n, d, intercept, n_params):
    """The exact sums' slack of Algorithm 3's gradient mean: its rows have
    ``||phi' x~_i||_2 <= lipschitz ||[x, 1]||_2`` (Hölder from ``||x||_q <= R``)."""
    bound = lipschitz * md.clipped_row_l2_bound(R, q, d, intercept)
    return exact_sum_slack(bound * md.rounding_slack(1), n, n_params)


def test_alg3_noise_scale_and_ledger(monkeypatch):
    released = _spy_releases(monkeypatch)
    X, y = _logistic_data()
    n, d = X.shape
    res = md.noisy_mirror_descent(
        LinearDesign(X, False),
        y,
        get_loss("logistic"),
        p=1.5,
        budget=AlgorithmBudget(0.5, 1e-5, len(y)),
        row_norm_bound=1.0,
        rng=np.random.default_rng(0),
    )
    T = res.n_iter
    base = n * 0.5 * 2.0 / math.sqrt(d * math.log(1e5))
    assert T == math.ceil(base**0.4)
    # Sensitivity 2L/n in ||.||_q (L = R_q = 1, q = 3), d^{1/2 - 1/3} times in l2,
    # plus the exact sums' slack; T steps compose to sqrt(T) Delta / sigma =
    # mu-GDP, (0.5, 1e-5)-DP.
    sensitivity = 2.0 / n * d ** (0.5 - 1 / 3) + _slack(1.0, 1.0, 3.0, n, d, False, d)
    sigma = math.sqrt(T) * sensitivity / approx_dp_to_gdp(0.5, 1e-5)
    assert len(released) == T
    assert all(
        r[:2] == (pytest.approx(sensitivity), pytest.approx(sigma)) for r in released
    )
    assert math.sqrt(T) * sensitivity / sigma <= approx_dp_to_gdp(0.5, 1e-5) * (
        1 + 1e-12
    )
    spent = PrivacySpent.from_records(res.records, 1e-5)
    assert spent.epsilon == pytest.approx(0.5)


@pytest.mark.usefixtures("non_private_mode")
def test_alg3_non_private_limit():
    """sigma = 0, fixed alpha_reg: converges to argmin L^ + alpha_reg Phi."""
    X, y = _logistic_data(n=500, d=8)
    loss = get_loss("logistic")
    geom = md.lp_geometry(1.5, 8)
    alpha = 0.5
    res = md.noisy_mirror_descent(
        LinearDesign(X, False),
        y,
        loss,
        p=1.5,
        budget=AlgorithmBudget(math.inf, 1e-5, len(y)),
        row_norm_bound=10.0,
        n_iter=3000,
        alpha_reg=alpha,
        rng=np.random.default_rng(0),
    )

    def f(w):
        z = X @ w
        return np.mean(loss.value(z, y)) + alpha * geom.phi(w)

    ref = optimize.minimize(f, np.zeros(8), method="BFGS", options={"gtol": 1e-10}).x
    assert np.linalg.norm(res.coef - ref) <= 1e-3


def test_alg3_refuses_squared_and_large_epsilon():
    X, y = _logistic_data()
    with pytest.raises(ValueError, match="Lipschitz"):
        md.noisy_mirror_descent(
            LinearDesign(X, False),
            y,
            get_loss("squared"),
            p=1.5,
            budget=AlgorithmBudget(1.0, 1e-5, len(y)),
            row_norm_bound=1.0,
            rng=np.random.default_rng(0),
        )
    with pytest.raises(ValueError, match="epsilon <= 1"):
        md.noisy_mirror_descent(
            LinearDesign(X, False),
            y,
            get_loss("logistic"),
            p=1.5,
            budget=AlgorithmBudget(2.0, 1e-5, len(y)),
            row_norm_bound=1.0,
            rng=np.random.default_rng(0),
        )


def test_row_clipping_bounds_gradients():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((50, 10)) * rng.choice([1e-3, 1, 1e6], size=(50, 1))
    design = LinearDesign(X, False)
    s = md._clip_scales(design, 3.0, 0.7)
    norms = np.sum(np.abs(X * s[:, None]) ** 3, axis=1) ** (1 / 3)
    assert np.all(norms <= 0.7 * (1 + 1e-12))
    small = np.sum(np.abs(X) ** 3, axis=1) ** (1 / 3) <= 0.7
    assert np.all(s[small] == 1.0)


def test_phased_sgd_noise_and_record(monkeypatch):
    drawn = []
    real = md.GaussianMechanism.release

    def spy(self, value, rng):
        # Each phase is a grid release of sensitivity 2 L eta_i.
        drawn.append(self.sigma)
        assert self.sigma / self.sensitivity == pytest.approx(ratio)
        return real(self, value, rng)

    monkeypatch.setattr(md.GaussianMechanism, "release", spy)
    ratio = 1.0 / approx_dp_to_gdp(0.5, 1e-5)
    X, y = _logistic_data(n=1000, d=10)
    res = md.phased_dp_sgd(
        LinearDesign(X, False),
        y,
        get_loss("logistic"),
        budget=AlgorithmBudget(0.5, 1e-5, len(y)),
        row_norm_bound=1.0,
        rng=np.random.default_rng(0),
    )
    L, beta = 1.0, 0.25
    eta = min(
        2 / beta,
        (1.0 / L) * min(4 / math.sqrt(1000), 0.5 / math.sqrt(10 * math.log(1e5))),
    )
    # sigma_i / (2 L eta_i) = 1 / mu, mu the exact GDP parameter of (0.5, 1e-5).
    assert drawn == pytest.approx(
        [ratio * 2 * L * eta / 4**i for i in range(1, len(drawn) + 1)]
    )
    assert len(drawn) == 9  # phases i with n_i = floor(1000 / 2^i) >= 1
    spent = PrivacySpent.from_records(res.records, 1e-5)
    # The whole budget, and never more.
    assert spent.epsilon <= 0.5
    assert spent.epsilon == pytest.approx(0.5, rel=1e-6)


def _l1_constrained_minimiser(X, y, loss, R):
    from skdpsco._solvers._certified import certified_minimize

    n, d = X.shape
    lam = 1e-6

    def vg(w):
        return None, X.T @ loss.derivative(X @ w, y) / n + 2 * lam * w

    return certified_minimize(
        vg,
        L1Ball(R).project,
        w0=np.zeros(d),
        mu=2 * lam,
        smoothness=1.0,
        tol=1e-3,
        max_iter=200_000,
        raise_on_failure=False,
    ).w


def test_alg4_non_private_converges_to_constrained_minimiser():
    X, y = _logistic_data(n=20_000, d=10)
    loss = get_loss("logistic")
    C = L1Ball(1.0, n_features=10)
    res = md.shuffled_mirror_descent(
        LinearDesign(X, False),
        y,
        loss,
        C,
        p=1.5,
        budget=AlgorithmBudget(math.inf, 1e-5, len(y)),
        truncation_threshold=math.inf,
        grad_std_bound=0.1,
        smoothness=0.1,
        rng=np.random.default_rng(0),
    )
    assert C.contains(res.coef, tol=1e-9)
    ref = _l1_constrained_minimiser(X, y, loss, 1.0)

    def risk(w):
        return np.mean(loss.value(X @ w, y))

    assert risk(res.coef) - risk(ref) <= 2e-3
    assert risk(np.zeros(10)) - risk(ref) > 0.03  # the control: 0.032


def test_alg4_truncation_zeroes_gradients():
    X, y = _logistic_data(n=500, d=10)
    res = md.shuffled_mirror_descent(
        LinearDesign(X, False),
        y,
        get_loss("logistic"),
        L1Ball(1.0, n_features=10),
        p=1.5,
        budget=AlgorithmBudget(math.inf, 1e-5, len(y)),
        truncation_threshold=0.0,
        rng=np.random.default_rng(0),
    )
    assert np.all(res.coef == 0.0)


def test_alg4_shuffled_noise_and_achieved_epsilon(monkeypatch):
    released = _spy_releases(monkeypatch)
    X, y = _logistic_data(n=10_000, d=10)
    delta = 1e-5
    res = md.shuffled_mirror_descent(
        LinearDesign(X, False),
        y,
        get_loss("logistic"),
        L1Ball(1.0, n_features=10),
        p=1.5,
        budget=AlgorithmBudget(1.0, delta, len(y)),
        truncation_threshold=0.8,
        rng=np.random.default_rng(0),
    )
    # One noise vector per record (local randomizers), never one per batch.
    assert sum(r[2][0] for r in released) == 10_000
    delta0 = delta / (3 * 10_000 * (math.e + 1))
    # Two truncated gradients differ by 2 tau in ||.||_3, 2 tau 10^{1/6} in l2;
    # eps0 = 1 (the cap binds).
    sensitivity = 2 * 0.8 * 10 ** (0.5 - 1 / 3)
    sigma_loc = calibrate_analytic_gaussian(1.0, delta0, sensitivity)
    assert all(
        r[:2] == (pytest.approx(sensitivity), pytest.approx(sigma_loc))
        for r in released
    )
    (rec,) = res.records
    # eps = 1 is far above n^{-1/2}: the cap eps0 <= 1 binds and only
    # FMT(1, 1e4, delta/2) = 0.2212 is achieved, which is what is reported.
    assert rec.epsilon == pytest.approx(shuffle_epsilon(1.0, 10_000, delta / 2))
    assert rec.epsilon == pytest.approx(0.2212, abs=1e-4)
    assert rec.delta <= delta
    assert PrivacySpent.from_records(res.records, delta).epsilon < 1.0


def _batched_run(n_classes=2):
    """Algorithm 4, batched, p = 1.5 (q = 3), tau = 0.8, on 3,000 x 10 rows."""
    X, y = _logistic_data(n=3000, d=10)
    loss = get_loss("logistic")
    if n_classes > 2:
        y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5).astype(int)
        loss = get_loss("multinomial")
    return md.shuffled_mirror_descent(
        LinearDesign(X, False),
        y,
        loss,
        L1Ball(1.0, n_features=10),
        p=1.5,
        budget=AlgorithmBudget(0.5, 1e-5, len(y)),
        truncation_threshold=0.8,
        variant="batched",
        n_classes=n_classes,
        rng=np.random.default_rng(0),
    )


def test_alg4_batched_variant(monkeypatch):
    released = _spy_releases(monkeypatch)
    res = _batched_run()
    T = res.n_iter
    b = 3000 // T
    h = 10 ** (0.5 - 1 / 3)
    sigma_b = calibrate_analytic_gaussian(0.5, 1e-5, 2 * 0.8 * h / b)
    assert len(released) == T
    assert all(r[1] == pytest.approx(sigma_b) and r[2] == (10,) for r in released)
    # The mechanism's sensitivity is that of the actual batch, at most the one
    # sigma_b is calibrated to.
    assert all(r[0] <= 2 * 0.8 * h / b * (1 + 1e-12) for r in released)
    assert res.records[0].epsilon == 0.5 and res.records[0].delta == 1e-5


@pytest.mark.parametrize("multiclass", [False, True])
def test_alg4_shuffled_gaussian_local_randomizers_are_on_the_grid(
    monkeypatch, multiclass
):
    # q+ = 2 (p = 2): each record's local randomizer is the Gaussian mechanism of
    # sensitivity 2 tau released on the public grid, never a float draw.
    from skdpsco._constraints import L2Ball
    from skdpsco.privacy._mechanisms import GaussianMechanism, grid_step

    def refuse(*args, **kwargs):
        raise AssertionError("a float noise draw")

    released = []
    real = GaussianMechanism.release

    def spy(self, value, rng):
        out = real(self, value, rng)
        released.append((self.sensitivity, self.sigma, value.shape, out))
        return out

    monkeypatch.setattr(GaussianMechanism, "release", spy)
    X, y = _logistic_data(n=4000, d=6)
    loss = get_loss("multinomial" if multiclass else "logistic")
    if multiclass:
        y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5).astype(int)
    res = md.shuffled_mirror_descent(
        LinearDesign(X, False),
        y,
        loss,
        L2Ball(1.0),
        p=2.0,
        budget=AlgorithmBudget(1.0, 1e-5, len(y)),
        truncation_threshold=0.8,
        n_classes=3 if multiclass else 2,
        rng=np.random.default_rng(0),
    )
    assert np.all(np.isfinite(res.coef))
    # One released vector per record, of the record's dimension, at sensitivity
    # 2 tau; every released value lies on its grid.
    width = 6 * (3 if multiclass else 1)
    assert sum(shape[0] for _, _, shape, _ in released) == 4000
    assert all(shape[1] == width for _, _, shape, _ in released)
    assert all(sens == pytest.approx(1.6) for sens, _, _, _ in released)
    for sens, sigma, shape, out in released:
        step = grid_step(min(sens, sigma), int(np.prod(shape)))
        assert np.all(out / step == np.round(out / step))


@pytest.mark.parametrize("multiclass", [False, True])
def test_alg3_sensitivity_with_intercept_and_classes(monkeypatch, multiclass):
    # The Hölder factor is over every released parameter (dim K of them), and L
    # carries the intercept: ||[x, 1]||_q <= (R^q + 1)^{1/q}; sqrt(2) per unit row
    # norm for the multinomial loss.
    released = _spy_releases(monkeypatch)
    X, y = _logistic_data(n=1500, d=8)
    K = 3 if multiclass else 1
    if multiclass:
        y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.2).astype(int)
    loss = get_loss("multinomial" if multiclass else "logistic")
    res = md.noisy_mirror_descent(
        LinearDesign(X, True),
        y,
        loss,
        p=1.5,
        budget=AlgorithmBudget(0.8, 1e-6, len(y)),
        row_norm_bound=2.0,
        n_classes=K if multiclass else 2,
        rng=np.random.default_rng(1),
    )
    q, p_total = 3.0, 9 * K
    L = loss.lipschitz * (2.0**q + 1.0) ** (1 / q)
    holder = 2 * L / 1500 * p_total ** (0.5 - 1 / q)
    # The gradients are exact block sums: the noise pays their rounding slack on
    # top of Hölder's bound (without it, the first assertion fails).
    slack = _slack(loss.lipschitz, 2.0, q, 1500, 8, True, p_total)
    assert slack > 1e-6 * holder
    sensitivity = holder + slack
    assert all(r[0] == pytest.approx(sensitivity, rel=1e-12) for r in released)
    assert all(r[0] > holder * (1 + 1e-6) for r in released)
    (record,) = res.records
    assert (record.kind, record.count) == ("gaussian", res.n_iter)
    assert PrivacySpent.from_records(res.records, 1e-6).epsilon <= 0.8


def test_alg4_multinomial_sensitivity_counts_every_parameter(monkeypatch):
    released = _spy_releases(monkeypatch)
    _batched_run(n_classes=3)
    # Batch t's mean moves by 2 tau / b_t in ||.||_q, by (dim K)^{1/2 - 1/q} times
    # that in l2 (the batches of a public split of n into T).
    factor = 30 ** (0.5 - 1 / 3)
    sizes = [part.size for part in np.array_split(np.arange(3000), len(released))]
    assert all(r[2] == (10, 3) for r in released)
    for (sensitivity, _, _), b_t in zip(released, sizes, strict=True):
        assert sensitivity == pytest.approx(2 * 0.8 * factor / b_t, rel=1e-12)


def test_noise_scales_that_underflow_are_refused_on_every_neighbour():
    # A finite epsilon with public bounds so small that the sensitivity or the noise
    # scale leaves the normal floats: refused (the testing mode's sigma = 0 would
    # otherwise release exact means), with a message of public numbers only.
    X, y = _logistic_data(n=90, d=3)
    X2 = X.copy()
    X2[0] = 1e300
    messages = set()
    for XX in (X, X2):
        with pytest.raises(ValueError, match="normal float range") as info:
            md.shuffled_mirror_descent(
                LinearDesign(XX, False),
                y,
                get_loss("logistic"),
                L1Ball(1.0, n_features=3),
                p=1.5,
                budget=AlgorithmBudget(0.5, 1e-5, len(y)),
                truncation_threshold=5e-324,
                variant="batched",
                rng=np.random.default_rng(0),
            )
        messages.add(str(info.value))
    assert len(messages) == 1


def test_augmented_norm_bound_does_not_overflow():
    # p = 1.001: q = 1001, 3^1001 overflows a double; the scaled form does not.
    assert md._augmented_norm_bound(3.0, 1001.0, True) == pytest.approx(3.0)
    assert md._augmented_norm_bound(0.5, 2.0, True) == pytest.approx(math.sqrt(1.25))
    assert md._augmented_norm_bound(0.5, 2.0, False) == 0.5


def test_phased_releases_stay_far_inside_the_grid(monkeypatch):
    # Each phase releases its move from the previous release: the grid step shrinks
    # like 4^-i with the step size, and the average itself passed the grid's 2^52
    # steps in the last phases at large n and epsilon (every coefficient then came
    # out as exactly 1.0). The released values stay below 2^40 steps.
    from skdpsco.privacy._mechanisms import grid_step

    ratios = []
    outputs = []
    real = GaussianMechanism.release

    def spy(self, value, rng):
        gamma = grid_step(min(self.sensitivity, self.sigma), np.size(value))
        ratios.append(float(np.max(np.abs(value))) / gamma)
        outputs.append(real(self, value, rng))
        return outputs[-1]

    monkeypatch.setattr(GaussianMechanism, "release", spy)
    rng = np.random.default_rng(0)
    n, d = 60_000, 5
    X = rng.normal(size=(n, d))
    y = X @ np.array([2.0, -1.0, 0.5, 0.0, 1.0]) + 0.1 * rng.normal(size=n)
    res = md.phased_dp_sgd(
        LinearDesign(X, True),
        y,
        get_loss("huber"),
        budget=AlgorithmBudget(50.0, 1e-6, len(y)),
        row_norm_bound=5.0,
        norm_bound=5.0,
        rng=np.random.default_rng(1),
    )
    assert len(ratios) >= 15
    assert max(ratios) < 2.0**40
    # The released model is the sum of the releases alone: each phase's move is
    # taken from the previous release, never from the pass's (private) last
    # iterate, whose low-order bits would otherwise reach the output.
    total = np.zeros_like(outputs[0])
    for out in outputs:
        total = total + out
    np.testing.assert_array_equal(res.coef, total)
