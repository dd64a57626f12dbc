"""Approximate objective perturbation (Su-Zhao-Wang Algorithms 1/2): constants,
noise scales drawn, certified solve, non-private limit, ledger."""

import math

import numpy as np
import pytest

from skdpsco._constraints import L1Ball, L2Ball, project_l2_ball
from skdpsco._design import LinearDesign
from skdpsco._losses import get_loss
from skdpsco._solvers import _objective_perturbation as objp
from skdpsco._solvers._certified import certified_minimize, certified_minimize_fixed
from skdpsco.exceptions import CertificationError
from skdpsco.privacy._budget import AlgorithmBudget
from skdpsco.privacy._ledger import PrivacySpent


def _data(n=2000, d=50, seed=0, loss="squared"):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) / np.sqrt(d) * 1.5  # some rows exceed R_z = 1
    theta = np.zeros(d)
    theta[:3] = [0.6, -0.3, 0.1]
    z = X @ theta
    if loss == "squared":
        y = z + 0.1 * rng.standard_normal(n)
    else:
        y = (rng.random(n) < 1 / (1 + np.exp(-4 * z))).astype(float)
    return X, y


def _constants(**kw):
    base = dict(
        n=10_000,
        dim=1000,
        epsilon=1.0,
        delta=1e-5,
        lipschitz=2.0,
        smoothness=1.0,
        diameter=2.0,
        r_max=1.0,
        gaussian_width=3.4354,
    )
    return objp.objective_perturbation_constants(**(base | kw))


def test_constants_worked_example():
    k = _constants()
    # Worked example (l1 ball, d = 1000, n = 1e4, L = 2, eps = 1, delta = 1e-5):
    # Theorem 2's lambda_obj = L / (sqrt(n) ||C||_2) = 0.01 and Algorithm 1's
    # sigma1 = sqrt(128 ln(2.5/delta)) L / eps = 79.77.
    assert k["c_tot"] == pytest.approx(0.01)
    assert k["c_priv"] == pytest.approx(2e-4)
    assert k["sigma1"] == pytest.approx(math.sqrt(128 * math.log(2.5e5)) * 2.0)
    assert k["sigma1"] == pytest.approx(79.77, abs=0.01)
    assert k["sigma2"] ** 2 == pytest.approx(
        64 * k["opt_tol"] * math.log(2.5e5) / (k["c_tot"] * 1.0)
    )
    # sigma2 is the Gaussian mechanism at (eps/2, delta/2), sensitivity 2 gamma.
    assert k["sigma2"] == pytest.approx(
        2 * k["gamma"] * math.sqrt(2 * math.log(1.25 / 5e-6)) / 0.5
    )
    assert k["gamma"] == pytest.approx(math.sqrt(2 * k["opt_tol"] / k["c_tot"]))
    assert k["certify_tol"] == k["gamma"] / 2


def test_constants_monotone_and_floor():
    a, b = _constants(epsilon=0.5), _constants(epsilon=1.0)
    assert a["sigma1"] > b["sigma1"]
    assert _constants(delta=1e-8)["sigma1"] > b["sigma1"]
    # A tiny user lam_obj is clamped up to r beta / (eps n) (Theorem 1's condition
    # beta <= eps n lambda_obj / r).
    k = _constants(lam_obj=1e-12, epsilon=0.1, n=1000)
    assert k["c_tot"] == pytest.approx(2 * 1.0 / (0.1 * 1000))
    # Ridge mode (Algorithm 2): c_tot = max(mu/2, c_priv).
    assert _constants(l2_penalty=0.5)["c_tot"] == 0.25
    assert _constants(l2_penalty=1e-9)["c_tot"] == pytest.approx(2e-4)
    # sigma2 ~ sqrt(alpha_opt) above the floor.
    s1 = _constants(opt_tol=1e-8)["sigma2"]
    s2 = _constants(opt_tol=4e-8)["sigma2"]
    assert s2 / s1 == pytest.approx(2.0)


def test_gaussian_width_changes_utility_constants_only():
    k = _constants()
    for factor in (0.1, 10.0):
        k2 = _constants(gaussian_width=3.4354 * factor)
        assert k2["sigma1"] == k["sigma1"] and k2["c_tot"] == k["c_tot"]
        assert k2["opt_tol"] != k["opt_tol"] and k2["sigma2"] != k["sigma2"]


def test_large_epsilon_scales():
    # eps <= 1: the derived chi_2 calibration is below Algorithm 1's constant
    # sqrt(128 ln(2.5/delta)) L / eps.
    t = math.sqrt(2 * math.log(2 / 1e-5))
    derived = 2.0 * (4 * t + 4 * math.sqrt(t * t + 0.5)) / 1.0
    assert derived <= _constants()["sigma1"]
    k4 = _constants(epsilon=4.0)
    assert k4["sigma1"] == pytest.approx(
        2.0 * (4 * t + 4 * math.sqrt(t * t + 2.0)) / 4.0
    )
    assert 0 < k4["sigma2"] < math.inf


def _spy_release(monkeypatch, drawn, with_noise=False):
    """Record the output mechanism's release as a draw (its noise, on the grid,
    is the released value minus the certified solution)."""
    real = objp.GaussianMechanism.release

    def spy(self, value, rng):
        out = real(self, value, rng)
        size = np.shape(value)
        entry = (self.sigma, size, out - np.asarray(value))
        drawn.append(entry if with_noise else entry[:2])
        return out

    monkeypatch.setattr(objp.GaussianMechanism, "release", spy)


def _spy_objective_noise(monkeypatch, drawn, with_noise=False):
    """Record the objective's noise ``G`` as a draw: the scale asked of the grid
    sampler, its shape and its values; returns the grid plans."""
    plans = []
    real_plan = objp.objective_noise_grid
    real_draw = objp.PerturbationNoise.draw

    def plan_spy(*args, **kwargs):
        plans.append(real_plan(*args, **kwargs))
        return plans[-1]

    def draw_spy(self, size, rng):
        out = real_draw(self, size, rng)
        if self.sigma == 0:  # the testing mode: no grid, no draw
            return out
        assert self.step == plans[-1].step
        sigma = self.sigma
        drawn.append((sigma, size, out) if with_noise else (sigma, size))
        return out

    monkeypatch.setattr(objp, "objective_noise_grid", plan_spy)
    monkeypatch.setattr(objp.PerturbationNoise, "draw", draw_spy)
    return plans


@pytest.mark.parametrize("loss_name", ["squared", "logistic"])
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_noise_scales_drawn_and_feasible(monkeypatch, loss_name, fit_intercept):
    drawn = []
    _spy_objective_noise(monkeypatch, drawn)
    _spy_release(monkeypatch, drawn)
    X, y = _data(loss=loss_name)
    C = L1Ball(1.0, n_features=50)
    design = LinearDesign(X, fit_intercept)
    res = objp.approximate_objective_perturbation(
        design,
        y,
        get_loss(loss_name),
        C,
        budget=AlgorithmBudget(0.5, 1e-5, len(y)),
        rng=np.random.default_rng(1),
    )
    R = math.hypot(1.0, 1.0) if fit_intercept else 1.0
    L = R
    if loss_name == "squared":
        L = R * (math.hypot(1.0, 1.0 if fit_intercept else 0.0) * R + 1.0)
    assert drawn[0][0] == pytest.approx(math.sqrt(128 * math.log(2.5e5)) * L / 0.5)
    assert drawn[0][1] == design.dim and drawn[1][1] == (design.dim,)
    assert drawn[1][0] > 0
    assert C.contains(res.coef[:50], tol=1e-10)
    if fit_intercept:
        assert abs(res.coef[50]) <= 1.0
    spent = PrivacySpent.from_records(res.records, 1e-5)
    assert spent.epsilon <= 0.5 and spent.epsilon > 0.4


@pytest.mark.parametrize("K", [1, 3])
def test_objective_noise_is_on_a_grid_a_coupling_away(monkeypatch, K):
    # G = step K with K integer: on the public grid whatever the data. Its
    # continuous part has std >= sigma_1 (Theorem 1 only gains), and the residual
    # bound moves the minimiser by at most gamma / 2 (the output perturbation's
    # sensitivity 2 gamma then covers theta_2).
    drawn = []
    plans = _spy_objective_noise(monkeypatch, drawn, with_noise=True)
    if K == 1:
        X, y = _data(loss="logistic")
        loss, C, kwargs = get_loss("logistic"), L1Ball(1.0, n_features=50), {}
    else:
        X, y = _multiclass(n=2000, d=30, K=K, seed=2)
        loss, C, kwargs = (
            get_loss("multinomial"),
            L1Ball(2.0, n_features=30),
            {"n_classes": K},
        )
    captured = {}
    real = objp.objective_perturbation_constants

    def constants_spy(**kw):
        captured.update(real(**kw))
        return captured

    monkeypatch.setattr(objp, "objective_perturbation_constants", constants_spy)
    design = LinearDesign(X, True)
    objp.approximate_objective_perturbation(
        design,
        y,
        loss,
        C,
        budget=AlgorithmBudget(1.0, 1e-6, len(y)),
        rng=np.random.default_rng(3),
        **kwargs,
    )
    (plan,) = plans
    (sigma, _, G) = drawn[0]
    n, p = X.shape[0], design.dim * K
    assert math.frexp(plan.step)[0] == 0.5  # a power of two
    assert np.all(np.mod(G, plan.step) == 0)
    assert plan.step <= 2.0**-10 * captured["sigma1"] / math.sqrt(p)
    assert captured["sigma1"] <= plan.sigma <= captured["sigma1"] * (1 + 1e-2)
    assert sigma == pytest.approx(captured["sigma1"], rel=1e-12)
    assert plan.residual_bound / (n * captured["mu_J"]) <= captured["gamma"] / 2
    # Recomputed from the documented rule, not from the planner: the residual step
    # R is sub-Gaussian of parameter 6, so ||step R|| <= step sqrt(p) t except with
    # probability 2 p e^{-t^2 / 72} <= eta = 2^-65 delta e^-eps; the step is the
    # largest power of two meeting both bounds.
    eta = 2.0**-65 * 1e-6 * math.exp(-1.0)
    t = math.sqrt(72.0 * math.log(2.0 * (1 + 2.0**-20) * p / eta))
    assert 2 * p * math.exp(-(t**2) / 72) <= eta
    reach = min(
        2.0**-10 * captured["sigma1"] / math.sqrt(p),
        n * captured["mu_J"] * captured["gamma"] / (2 * math.sqrt(p) * t),
    )
    assert plan.step <= reach < 2 * plan.step
    assert plan.residual_bound == pytest.approx(plan.step * math.sqrt(p) * t)


def test_objective_noise_plan_refuses_a_degenerate_grid():
    # Public constants that leave no positive, finite step (gamma = 0) are refused
    # rather than planned with a step of 0.5; tiny delta and huge epsilon do not
    # underflow the tail probability.
    with pytest.raises(ValueError, match="no grid"):
        objp.objective_noise_grid(10.0, 5, 100, 0.1, 0.0, 1.0, 1e-6)
    plan = objp.objective_noise_grid(10.0, 5, 100, 0.1, 1e-3, 690.0, 1e-200)
    assert 0 < plan.step and plan.residual_bound / (100 * 0.1) <= 1e-3 / 2


def test_certification_failure_raises():
    X, y = _data()
    with pytest.raises(CertificationError):
        objp.approximate_objective_perturbation(
            LinearDesign(X, False),
            y,
            get_loss("squared"),
            L1Ball(1.0, n_features=50),
            budget=AlgorithmBudget(1.0, 1e-5, len(y)),
            max_iter=1,
            rng=np.random.default_rng(0),
        )


def test_certification_failure_message_is_public():
    # Too few iterations to certify: both neighbours raise, with the same message
    # (the public tolerance and count), never a data-dependent number.
    X, y = _data()
    X2, y2 = X.copy(), y.copy()
    X2[0], y2[0] = 1e6, -1e6
    messages = []
    for XX, yy in ((X, y), (X2, y2)):
        with pytest.raises(CertificationError) as info:
            objp.approximate_objective_perturbation(
                LinearDesign(XX, False),
                yy,
                get_loss("squared"),
                L1Ball(1.0, n_features=50),
                budget=AlgorithmBudget(1.0, 1e-5, len(yy)),
                max_iter=3,
                rng=np.random.default_rng(0),
            )
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "after its 3 iterations" in messages[0]


def test_public_iteration_count_formula():
    kw = dict(
        start_gradient=3.0,
        start_distance=2.0,
        gradient_bound=4.0,
        r_max=1.0,
        mu=0.01,
        smoothness=1.01,
        tol=1e-6,
    )
    kappa = 101.0
    q = 1.0 - 1.0 / math.sqrt(kappa)
    margin = 64 * np.finfo(float).eps * 2 * (4.0 + 1.01 * 1.0) / 0.01
    # B_0 <= g_0 min(D, g_0 / mu) = 3 * 2; the rate is asked for (tol - margin) / 2.
    ratio = (kappa - 1) * math.sqrt(2 * 3.0 * 2.0 / 1.01) / ((1e-6 - margin) / 2)
    count = objp.objective_perturbation_iterations(**kw)
    assert count == math.ceil(2 * math.log(ratio) / -math.log(q)) == 389
    # About half the former cap 2 ceil(sqrt(kappa) ln(gap0 / target)) + 50.
    gap0 = 3.0 * 2.0 + 0.01 * 2.0**2 / 2
    target = (0.01 * 1e-6) ** 2 / (8 * 1.01)
    assert count < (2 * math.ceil(math.sqrt(kappa) * math.log(gap0 / target)) + 50) / 2
    # Far from the start, the distance to the minimiser is bounded by g_0 / mu.
    far = objp.objective_perturbation_iterations(**(kw | {"start_distance": 1e9}))
    assert far == objp.objective_perturbation_iterations(
        **(kw | {"start_distance": 3.0 / 0.01})
    )
    # Every public quantity enters logarithmically, tol and kappa the most.
    assert objp.objective_perturbation_iterations(**(kw | {"tol": 1e-3})) < count
    assert objp.objective_perturbation_iterations(**(kw | {"mu": 0.1})) < count


@pytest.mark.parametrize("radius", [None, 0.5])
def test_public_iteration_count_certifies_worst_case_quadratics(radius):
    """The count is a bound: every quadratic with curvatures in ``[mu, H]``,
    ``||grad J(0)|| = g_0`` and its minimiser anywhere (inside or outside the ball)
    is certified after exactly that many iterations."""
    mu, H, g0, tol, d = 0.02, 1.0, 2.0, 1e-7, 40
    curvature = np.concatenate([[mu, H], np.geomspace(mu, H, d - 2)])
    project = None if radius is None else (lambda w: project_l2_ball(w, radius))
    count = objp.objective_perturbation_iterations(
        start_gradient=g0,
        start_distance=math.inf if radius is None else 2 * radius,
        gradient_bound=g0 + H * (g0 / mu if radius is None else radius),
        r_max=g0 / mu if radius is None else radius,
        mu=mu,
        smoothness=H,
        tol=tol,
    )
    rng = np.random.default_rng(3)
    for b in [np.eye(d)[0], np.eye(d)[1], np.eye(d)[7], *rng.normal(size=(4, d))]:
        b = g0 * b / np.linalg.norm(b)
        result = certified_minimize_fixed(
            lambda w, b=b: (None, curvature * w - b),
            project,
            w0=np.zeros(d),
            mu=mu,
            smoothness=H,
            tol=tol,
            n_iter=count,
        )
        assert result.n_iter == count and result.distance_bound <= tol


def test_noise_norm_bound_tail():
    # P(||G|| > sigma (sqrt(p) + s)) <= exp(-s^2 / 2) and (1 + e^eps) exp(-s^2 / 2)
    # <= 2^-64 delta: a failed certificate adds nothing visible to delta.
    for eps, delta, p in ((1.0, 1e-5, 3), (8.0, 1e-9, 1000), (0.1, 0.5, 1)):
        t = objp._noise_norm_bound(2.0, p, eps, delta)
        s = t / 2.0 - math.sqrt(p)
        log_eta = -(s**2) / 2
        assert math.log1p(math.exp(eps)) + log_eta <= math.log(2.0**-64 * delta) + 1e-9
    assert objp._noise_norm_bound(0.0, 10, math.inf, 1e-5) == 0.0


def test_refuses_non_glm_or_non_smooth_losses():
    X, y = _data()
    with pytest.raises(ValueError, match="GLM"):
        objp.approximate_objective_perturbation(
            LinearDesign(X, False),
            y,
            get_loss("huber"),
            L2Ball(1.0, n_features=50),
            budget=AlgorithmBudget(1.0, 1e-5, len(y)),
            rng=np.random.default_rng(0),
        )


@pytest.mark.parametrize("loss_name", ["squared", "logistic"])
@pytest.mark.parametrize("ball", ["l1", "l2"])
@pytest.mark.usefixtures("non_private_mode")
def test_non_private_limit(loss_name, ball):
    """eps = inf: the output is argmin_C L^ + c_tot ||theta||^2 of the clipped data."""
    X, y = _data(loss=loss_name)
    n, d = X.shape
    C = (L1Ball if ball == "l1" else L2Ball)(0.5, n_features=d)
    loss = get_loss(loss_name)
    res = objp.approximate_objective_perturbation(
        LinearDesign(X, True),
        y,
        loss,
        C,
        budget=AlgorithmBudget(math.inf, 1e-5, len(y)),
        intercept_bound=0.3,
        rng=np.random.default_rng(0),
    )
    # Reference: explicit clipping, plain numpy gradient, long certified solve.
    Xc = X / np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    Xa = np.hstack([Xc, np.ones((n, 1))])
    yc = np.clip(y, -1, 1) if loss_name == "squared" else y
    r_max = math.hypot(C.radius_l2, 0.3)
    diam = math.hypot(C.diameter, 0.6)
    L = (
        math.sqrt(2) * (r_max * math.sqrt(2) + 1)
        if loss_name == "squared"
        else math.sqrt(2)
    )
    c = L / (math.sqrt(n) * diam)

    def vg(w):
        return None, Xa.T @ loss.derivative(Xa @ w, yc) / n + 2 * c * w

    def project(w):
        return np.append(C.project(w[:d]), np.clip(w[d], -0.3, 0.3))

    ref = certified_minimize(
        vg,
        project,
        w0=np.zeros(d + 1),
        mu=2 * c,
        smoothness=2 + 2 * c,
        tol=1e-9,
        max_iter=100_000,
    )
    assert np.linalg.norm(res.coef - ref.w) <= 1e-6
    assert PrivacySpent.from_records(res.records, 1e-5).epsilon == math.inf


# ------------------------------------------------- multinomial loss (K >= 3 classes)


def _multiclass(n=600, d=6, K=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * 1.2 / np.sqrt(d)  # some rows exceed R_z = 1
    B = rng.standard_normal((d, K)) * 3.0
    bias = np.linspace(1.5, -1.5, K)  # unbalanced classes: the intercept bound binds
    y = np.argmax(X @ B + bias + rng.gumbel(size=(n, K)), axis=1)
    return X, y


def test_multinomial_sigma1_vector_and_monotone_in_K():
    from scipy import stats

    def expected(eps, delta, K, L=1.0):
        # chi_{2K} tail of the projection of G onto span{e_k x~, e_k x~'}.
        t = math.sqrt(stats.chi2.isf(delta / 2, 2 * K))
        derived = L * (4 * t + 4 * math.sqrt(t * t + eps / 2)) / eps
        paper = math.sqrt(128 * math.log(2.5 / delta)) * L / eps
        return max(derived, paper) if eps <= 1 else derived

    # Test vector (L = 1, delta = 1e-5): K = 3 -> chi_6, t = 5.8878.
    for eps, value in ((0.5, 94.3750), (1.0, 47.2720), (4.0, 11.9431)):
        got = objp._sigma1(1.0, eps, 1e-5, 6)
        assert got == pytest.approx(value, abs=1e-3)
        assert got == pytest.approx(expected(eps, 1e-5, 3), rel=1e-12)
    # K = 3 at eps = 1: the chi_6 calibration exceeds the paper's constant 39.887.
    assert objp._sigma1(1.0, 1.0, 1e-5, 6) > math.sqrt(128 * math.log(2.5e5))
    # One output (m = 2): unchanged, the paper's constant at eps <= 1.
    assert objp._sigma1(2.0, 1.0, 1e-5, 2) == pytest.approx(79.7732, abs=1e-4)
    for eps in (0.3, 1.0, 4.0):
        for delta in (1e-3, 1e-8):
            s = [objp._sigma1(1.0, eps, delta, 2 * K) for K in range(2, 11)]
            assert all(b > a for a, b in zip(s, s[1:], strict=False))
            assert s[1] == pytest.approx(expected(eps, delta, 3), rel=1e-12)
    # Jacobian floor r = 2k with k = K - 1 (beta = 1/2 for unit rows).
    k = _constants(hessian_rank=4, gradient_span_dim=10, smoothness=0.5, n=1000)
    assert k["c_priv"] == pytest.approx(2 * 4 * 0.5 / (1.0 * 1000))


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_multinomial_noise_drawn_with_stated_std(monkeypatch, fit_intercept):
    from scipy import stats

    drawn = []
    _spy_objective_noise(monkeypatch, drawn, with_noise=True)
    _spy_release(monkeypatch, drawn, with_noise=True)
    K, d = 4, 200
    X, y = _multiclass(n=3000, d=d, K=K, seed=1)
    design = LinearDesign(X, fit_intercept)
    C = L1Ball(2.0, n_features=d)
    res = objp.approximate_objective_perturbation(
        design,
        y,
        get_loss("multinomial"),
        C,
        budget=AlgorithmBudget(2.0, 1e-6, len(y)),
        n_classes=K,
        rng=np.random.default_rng(7),
    )
    R = math.hypot(1.0, 1.0) if fit_intercept else 1.0
    L = math.sqrt(2.0) * R
    (s1, shape1, G), (s2, shape2, H) = drawn
    assert shape1 == shape2 == (design.dim, K) == res.coef.shape
    assert s1 == pytest.approx(objp._sigma1(L, 2.0, 1e-6, 2 * K), rel=1e-12)
    # Both draws have the stated std: (N - 1) s^2 / sigma^2 ~ chi^2_{N-1} (the
    # output's grid noise is larger by the factor 1 + 2^-10).
    for sigma, noise in ((s1, G), (s2, H)):
        N = noise.size
        stat = (N - 1) * noise.var(ddof=1) / sigma**2
        assert stats.chi2.ppf(1e-4, N - 1) < stat < stats.chi2.ppf(1 - 1e-4, N - 1)
        assert abs(noise.mean()) < 4 * sigma / math.sqrt(N)
    spent = PrivacySpent.from_records(res.records, 1e-6)
    assert 1.8 < spent.epsilon <= 2.0 and spent.delta <= 1e-6
    assert [r.epsilon for r in res.records[:1]] == [1.0]


def test_multinomial_jacobian_floor_and_constants(monkeypatch):
    captured = {}
    real = objp.objective_perturbation_constants

    def spy(**kw):
        captured.update(kw)
        return real(**kw)

    monkeypatch.setattr(objp, "objective_perturbation_constants", spy)
    K, d, n = 5, 8, 400
    X, y = _multiclass(n=n, d=d, K=K)
    objp.approximate_objective_perturbation(
        LinearDesign(X, True),
        y,
        get_loss("multinomial"),
        L2Ball(1.0, n_features=d),
        budget=AlgorithmBudget(0.5, 1e-5, len(y)),
        lam_obj=1e-12,
        intercept_bound=0.5,
        n_classes=K,
        rng=np.random.default_rng(0),
    )
    assert captured["hessian_rank"] == K - 1
    assert captured["gradient_span_dim"] == 2 * K
    assert captured["lipschitz"] == pytest.approx(math.sqrt(2) * math.sqrt(2))
    assert captured["smoothness"] == pytest.approx(0.5 * 2.0)
    assert captured["dim"] == (d + 1) * K
    # Frobenius geometry of C x [-B, B]^K.
    assert captured["r_max"] == pytest.approx(math.hypot(1.0, 0.5 * math.sqrt(K)))
    assert captured["diameter"] == pytest.approx(math.hypot(2.0, 1.0 * math.sqrt(K)))
    # The tiny lam_obj is clamped up to 2 (K - 1) beta / (eps n).
    k = real(**captured)
    assert k["c_tot"] == pytest.approx(2 * (K - 1) * 1.0 / (0.5 * n))


def _split_l1_reference(fun_W, d, K, dim, R, B):
    """scipy SLSQP on W = U - V (U, V >= 0, sum(U + V) <= R on the first d rows)."""
    from scipy import optimize

    m = dim * K

    def unpack(x):
        return (x[:m] - x[m:]).reshape(dim, K)

    def fun(x):
        value, grad = fun_W(unpack(x))
        g = grad.ravel()
        return value, np.concatenate([g, -g])

    feat = np.zeros(m, dtype=bool)
    feat.reshape(dim, K)[:d] = True
    mask = np.concatenate([feat, feat]).astype(float)
    cons = [{"type": "ineq", "fun": lambda x: R - mask @ x, "jac": lambda x: -mask}]
    bounds = [(0, None if f else B) for f in np.concatenate([feat, feat])]
    res = optimize.minimize(
        fun,
        np.zeros(2 * m),
        jac=True,
        bounds=bounds,
        constraints=cons,
        method="SLSQP",
        options={"ftol": 1e-16, "maxiter": 5000},
    )
    return unpack(res.x)


@pytest.mark.parametrize("ball", ["l1", "l2"])
@pytest.mark.usefixtures("non_private_mode")
def test_multinomial_non_private_limit_matches_scipy(ball):
    """eps = inf: the output is argmin_{W[:d] in C, |b| <= B} L^(W) + c ||W||_F^2,
    solved independently with scipy (SLSQP) on the clipped data."""
    from scipy import optimize, special

    K, d, n, R, B, c = 3, 5, 500, 1.0, 0.2, 0.01
    X, y = _multiclass(n=n, d=d, K=K, seed=3)
    C = (L1Ball if ball == "l1" else L2Ball)(R, n_features=d)
    res = objp.approximate_objective_perturbation(
        LinearDesign(X, True),
        y,
        get_loss("multinomial"),
        C,
        budget=AlgorithmBudget(math.inf, 1e-5, len(y)),
        intercept_bound=B,
        lam_obj=c,
        n_classes=K,
        rng=np.random.default_rng(0),
    )
    Xc = X / np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
    Xa = np.hstack([Xc, np.ones((n, 1))])
    Y = np.eye(K)[y]

    def fun_W(W):
        Z = Xa @ W
        value = np.mean(special.logsumexp(Z, axis=1) - (Z * Y).sum(axis=1))
        grad = Xa.T @ (special.softmax(Z, axis=1) - Y) / n
        return value + c * np.sum(W * W), grad + 2 * c * W

    if ball == "l1":
        ref = _split_l1_reference(fun_W, d, K, d + 1, R, B)
    else:
        cons = {
            "type": "ineq",
            "fun": lambda x: R**2 - np.sum(x.reshape(d + 1, K)[:d] ** 2),
            "jac": lambda x: np.concatenate([-2 * x[: d * K], np.zeros(K)]),
        }
        bounds = [(None, None)] * (d * K) + [(-B, B)] * K
        ref = optimize.minimize(
            lambda x: tuple(
                a.ravel() if i else a for i, a in enumerate(fun_W(x.reshape(d + 1, K)))
            ),
            np.zeros((d + 1) * K),
            jac=True,
            bounds=bounds,
            constraints=[cons],
            method="SLSQP",
            options={"ftol": 1e-16, "maxiter": 5000},
        ).x.reshape(d + 1, K)
    # The constraint and the intercept bound are active (a meaningful check).
    assert C.violation(ref[:d] * 1.01) > 0
    assert np.max(np.abs(ref[d])) == pytest.approx(B, abs=1e-9)
    assert res.coef.shape == (d + 1, K)
    assert np.linalg.norm(res.coef - ref) <= 1e-6
    assert C.contains(res.coef[:d], tol=1e-12)


@pytest.mark.parametrize(
    "name, params",
    [
        ("l2", {}),
        ("l1", {}),
        ("lp", {"p": 1.5}),
        ("lp", {"p": 3.0}),
        ("box", {}),
        ("simplex", {}),
        ("group_l1", {"groups": [0, 0, 1, 1, 2, 2]}),
        ("k_sparse", {"k": 2}),
    ],
)
def test_multinomial_coef_in_set_and_matrix_convention(name, params):
    from skdpsco._constraints import make_constraint

    K, d = 3, 6
    X, y = _multiclass(n=400, d=d, K=K, seed=5)
    C = make_constraint(name, d, 0.7, **params)
    flat = objp._flattened_set(C, d, K)
    rng = np.random.default_rng(0)
    for _ in range(5):
        # The (d, K) projection of C equals the flattened set's projection, so
        # R_max, diameter and width are the (d K)-dimensional set's.
        W = rng.standard_normal((d, K)) * 2
        np.testing.assert_allclose(
            C.project(W).ravel(), flat.project(W.ravel()), atol=1e-12
        )
    res = objp.approximate_objective_perturbation(
        LinearDesign(X, True),
        y,
        get_loss("multinomial"),
        C,
        budget=AlgorithmBudget(1.0, 1e-5, len(y)),
        intercept_bound=0.4,
        n_classes=K,
        rng=np.random.default_rng(2),
    )
    assert res.coef.shape == (d + 1, K)
    assert C.contains(res.coef[:d], tol=1e-10)
    assert np.all(np.abs(res.coef[d]) <= 0.4)
    assert PrivacySpent.from_records(res.records, 1e-5).epsilon <= 1.0


def test_multinomial_set_quantities():
    d, K = 10, 3
    box = objp._set_quantities(
        __import__("skdpsco._constraints", fromlist=["Box"]).Box(
            -0.5, 0.5, n_features=d
        ),
        d,
        None,
        K,
    )
    assert box[0] == pytest.approx(0.5 * math.sqrt(d * K))
    assert box[2] == pytest.approx(0.5 * d * K * math.sqrt(2 / math.pi))
    l2 = objp._set_quantities(L2Ball(1.0, n_features=d), d, 0.3, K)
    ref_width = L2Ball(1.0).gaussian_width(d * K) + K * 0.3 * math.sqrt(2 / math.pi)
    assert l2[2] == pytest.approx(ref_width)
    assert l2[0] == pytest.approx(math.hypot(1.0, 0.3 * math.sqrt(K)))
