"""Approximate objective perturbation (Su-Zhao-Wang Algorithms 1/2): constants,
noise scales drawn, certified solve, non-private limit, ledger."""

import math

import numpy as np
import pytest

from skdpsco._constraints import L1Ball, L2Ball
from skdpsco._losses import get_loss
from skdpsco._solvers import _objective_perturbation as objp
from skdpsco._solvers._certified import certified_minimize
from skdpsco._solvers._design import LinearDesign
from skdpsco.exceptions import CertificationError
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
    # Card §3.1 worked example: lambda_obj = 0.01, sigma1 = 79.77.
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
    # A tiny user lam_obj is clamped up to r beta / (eps n) (card §5.3).
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
    # eps <= 1: the derived chi_2 calibration is below the card's constant.
    t = math.sqrt(2 * math.log(2 / 1e-5))
    derived = 2.0 * (4 * t + 4 * math.sqrt(t * t + 0.5)) / 1.0
    assert derived <= _constants()["sigma1"]
    k4 = _constants(epsilon=4.0)
    assert k4["sigma1"] == pytest.approx(
        2.0 * (4 * t + 4 * math.sqrt(t * t + 2.0)) / 4.0
    )
    assert 0 < k4["sigma2"] < math.inf


@pytest.mark.parametrize("loss_name", ["squared", "logistic"])
@pytest.mark.parametrize("fit_intercept", [False, True])
def test_noise_scales_drawn_and_feasible(monkeypatch, loss_name, fit_intercept):
    drawn = []
    real = objp.gaussian_noise

    def spy(rng, sigma, size=None):
        drawn.append((sigma, size))
        return real(rng, sigma, size)

    monkeypatch.setattr(objp, "gaussian_noise", spy)
    X, y = _data(loss=loss_name)
    C = L1Ball(1.0, n_features=50)
    design = LinearDesign(X, fit_intercept)
    res = objp.approximate_objective_perturbation(
        design,
        y,
        get_loss(loss_name),
        C,
        epsilon=0.5,
        delta=1e-5,
        rng=np.random.default_rng(1),
    )
    R = math.hypot(1.0, 1.0) if fit_intercept else 1.0
    L = R
    if loss_name == "squared":
        L = R * (math.hypot(1.0, 1.0 if fit_intercept else 0.0) * R + 1.0)
    assert drawn[0][0] == pytest.approx(math.sqrt(128 * math.log(2.5e5)) * L / 0.5)
    assert drawn[0][1] == design.dim and drawn[1][1] == design.dim
    assert drawn[1][0] > 0
    assert C.contains(res.coef[:50], tol=1e-10)
    if fit_intercept:
        assert abs(res.coef[50]) <= 1.0
    spent = PrivacySpent.from_records(res.records, 1e-5)
    assert spent.epsilon <= 0.5 and spent.epsilon > 0.4


def test_certification_failure_raises():
    X, y = _data()
    with pytest.raises(CertificationError):
        objp.approximate_objective_perturbation(
            LinearDesign(X, False),
            y,
            get_loss("squared"),
            L1Ball(1.0, n_features=50),
            epsilon=1.0,
            delta=1e-5,
            max_iter=1,
            rng=np.random.default_rng(0),
        )


def test_refuses_non_glm_or_non_smooth_losses():
    X, y = _data()
    with pytest.raises(ValueError, match="GLM"):
        objp.approximate_objective_perturbation(
            LinearDesign(X, False),
            y,
            get_loss("huber"),
            L2Ball(1.0, n_features=50),
            epsilon=1.0,
            delta=1e-5,
            rng=np.random.default_rng(0),
        )


@pytest.mark.parametrize("loss_name", ["squared", "logistic"])
@pytest.mark.parametrize("ball", ["l1", "l2"])
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
        epsilon=math.inf,
        delta=1e-5,
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
