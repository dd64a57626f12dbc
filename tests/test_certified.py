"""Certified accelerated projected gradient: the distance bound is never below the
true distance to the minimiser, and an uncertified solve raises."""

import numpy as np
import pytest
from scipy import special

from skdpsco._constraints import project_l1_ball, project_l2_ball
from skdpsco._solvers._certified import (
    _residual_certificate,
    certified_minimize,
    certified_minimize_fixed,
)
from skdpsco.exceptions import CertificationError


def _quadratic(rng, d, mu, H):
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    eig = np.linspace(mu, H, d)
    A = (Q * eig) @ Q.T
    b = rng.standard_normal(d) * 0.3

    def value_and_grad(w):
        Aw = A @ w
        return 0.5 * w @ Aw - b @ w, Aw - b

    return A, b, value_and_grad


def _logistic(rng, n, d, lam):
    X = rng.standard_normal((n, d)) / np.sqrt(d)
    y = (rng.random(n) < special.expit(X @ rng.standard_normal(d) * 3)).astype(float)

    def value_and_grad(w):
        z = X @ w
        val = np.mean(-special.log_expit(z) + (1 - y) * z) + lam * w @ w
        return val, X.T @ (special.expit(z) - y) / n + 2 * lam * w

    H = 0.25 * np.linalg.eigvalsh(X.T @ X / n).max() + 2 * lam
    return value_and_grad, 2 * lam, H


PROJECTIONS = {
    "none": None,
    "l2": lambda w: project_l2_ball(w, 1.0),
    "l1": lambda w: project_l1_ball(w, 1.0),
}


def _reference(value_and_grad, project, d, mu, H):
    """Long certified solve: the reference minimiser and its own distance bound."""
    res = certified_minimize(
        value_and_grad,
        project,
        w0=np.zeros(d),
        mu=mu,
        smoothness=H,
        tol=1e-10,
        max_iter=50_000,
    )
    return res.w, res.distance_bound


def test_unconstrained_quadratic_exact_minimiser():
    rng = np.random.default_rng(0)
    for _ in range(5):
        A, b, vg = _quadratic(rng, 20, 0.1, 10.0)
        w_star = np.linalg.solve(A, b)
        for tol in (1e-2, 1e-5, 1e-8):
            res = certified_minimize(
                vg,
                None,
                w0=np.zeros(20),
                mu=0.1,
                smoothness=10.0,
                tol=tol,
                max_iter=10_000,
            )
            true = np.linalg.norm(res.w - w_star)
            assert res.converged and res.distance_bound <= tol
            assert true <= res.distance_bound
            assert 0.5 * (res.w - w_star) @ A @ (res.w - w_star) <= (
                res.value_gap_bound * (1 + 1e-9) + 1e-15
            )


def test_isotropic_quadratic_over_balls_exact_minimiser():
    # F = (mu/2)||w - c||^2 over C: the minimiser is P_C(c) exactly.
    rng = np.random.default_rng(1)
    for name in ("l2", "l1"):
        project = PROJECTIONS[name]
        for _ in range(5):
            c = rng.standard_normal(50) * 2

            def vg(w, c=c):
                return 0.5 * np.sum((w - c) ** 2), w - c

            res = certified_minimize(
                vg,
                project,
                w0=np.zeros(50),
                mu=1.0,
                smoothness=1.0,
                tol=1e-8,
                max_iter=100,
            )
            assert np.linalg.norm(res.w - project(c)) <= res.distance_bound


@pytest.mark.parametrize("name", ["none", "l2", "l1"])
def test_bound_valid_along_the_path_quadratic(name):
    """At every tolerance the returned bound covers the true distance."""
    rng = np.random.default_rng(2)
    project = PROJECTIONS[name]
    d, mu, H = 30, 0.05, 5.0
    A, b, vg = _quadratic(rng, d, mu, H)
    w_ref, ref_bound = _reference(vg, project, d, mu, H)
    if project is None:
        assert np.linalg.norm(w_ref - np.linalg.solve(A, b)) <= ref_bound
    for tol in (1e-1, 1e-3, 1e-6):
        res = certified_minimize(
            vg, project, w0=np.zeros(d), mu=mu, smoothness=H, tol=tol, max_iter=5000
        )
        assert np.linalg.norm(res.w - w_ref) - ref_bound <= res.distance_bound <= tol
        if project is not None:
            assert np.linalg.norm(project(res.w) - res.w) <= 1e-12


@pytest.mark.parametrize("name", ["none", "l2", "l1"])
def test_bound_valid_logistic(name):
    rng = np.random.default_rng(3)
    project = PROJECTIONS[name]
    d = 15
    vg, mu, H = _logistic(rng, 400, d, lam=0.01)
    w_ref, ref_bound = _reference(vg, project, d, mu, H)
    for tol in (1e-2, 1e-4, 1e-7):
        res = certified_minimize(
            vg, project, w0=np.zeros(d), mu=mu, smoothness=H, tol=tol, max_iter=20_000
        )
        assert np.linalg.norm(res.w - w_ref) - ref_bound <= res.distance_bound <= tol


@pytest.mark.parametrize("h_factor", [1.0, 0.3, 5.0])
@pytest.mark.parametrize("name", ["none", "l2", "l1"])
def test_residual_certificate_at_random_points(name, h_factor):
    """The residual certificate of skdpsco._solvers._certified: ||w+ - w*|| <=
    ||v|| / mu and F(w+) - F* <= ||v||^2/(2 mu) at random points, also with H
    deliberately 0.3x the true smoothness."""
    rng = np.random.default_rng(4)
    project = PROJECTIONS[name]
    d, mu, H = 10, 0.2, 4.0
    A, b, vg = _quadratic(rng, d, mu, H)
    w_ref, ref_bound = _reference(vg, project, d, mu, H)
    f_ref = vg(w_ref)[0]

    def grad(w):
        return vg(w)[1]

    for _ in range(300):
        w = rng.standard_normal(d) * rng.choice([1e-3, 0.1, 1.0, 10.0])
        w_plus, _, bound = _residual_certificate(
            grad, project or (lambda u: u), w, grad(w), h_factor * H, mu
        )
        assert np.linalg.norm(w_plus - w_ref) <= bound + ref_bound
        gap = vg(w_plus)[0] - f_ref
        # F(w_ref) is within H ref_bound^2 / 2 + ||grad|| ref_bound of F*.
        slack = np.linalg.norm(grad(w_ref)) * ref_bound + H * ref_bound**2
        assert gap <= mu * bound**2 / 2 + slack + 1e-12


def test_early_stop_raises():
    rng = np.random.default_rng(5)
    _, _, vg = _quadratic(rng, 20, 0.01, 10.0)
    with pytest.raises(CertificationError, match="nothing is released"):
        certified_minimize(
            vg,
            None,
            w0=np.zeros(20),
            mu=0.01,
            smoothness=10.0,
            tol=1e-10,
            max_iter=3,
        )
    res = certified_minimize(
        vg,
        None,
        w0=np.zeros(20),
        mu=0.01,
        smoothness=10.0,
        tol=1e-10,
        max_iter=3,
        raise_on_failure=False,
    )
    assert not res.converged and res.distance_bound > 1e-10


def test_underestimated_smoothness_never_returns_a_false_certificate():
    rng = np.random.default_rng(6)
    A, b, vg = _quadratic(rng, 20, 0.1, 10.0)
    w_star = np.linalg.solve(A, b)
    # H = 1 < 10: plain gradient steps diverge along the top eigenvector.
    try:
        with np.errstate(all="ignore"):
            res = certified_minimize(
                vg,
                None,
                w0=np.zeros(20),
                mu=0.1,
                smoothness=1.0,
                tol=1e-6,
                max_iter=2000,
            )
    except CertificationError:
        return
    assert np.linalg.norm(res.w - w_star) <= res.distance_bound


def test_matrix_parameters_and_input_validation():
    rng = np.random.default_rng(7)
    C = rng.standard_normal((6, 3))

    def vg(W):
        return 0.5 * np.sum((W - C) ** 2), W - C

    res = certified_minimize(
        vg,
        lambda W: project_l2_ball(W, 1.0),
        w0=np.zeros((6, 3)),
        mu=1.0,
        smoothness=1.0,
        tol=1e-10,
        max_iter=50,
    )
    assert res.w.shape == (6, 3)
    assert np.linalg.norm(res.w - project_l2_ball(C, 1.0)) <= res.distance_bound
    for kwargs in (
        {"mu": 0.0},
        {"smoothness": 0.5, "mu": 1.0},
        {"tol": 0.0},
        {"max_iter": 0},
    ):
        args = {"mu": 1.0, "smoothness": 1.0, "tol": 1e-3, "max_iter": 5} | kwargs
        with pytest.raises(ValueError):
            certified_minimize(vg, None, w0=np.zeros((6, 3)), **args)


def test_the_final_step_reads_the_certificate_gradient():
    # F(w) = ||w - a||^2 / 2 (mu = H = 1). The iterations' gradient errs by e
    # (as float64 predictions may, by gamma_dim H W, beyond the certificate's
    # error bound E = 0); the certificate gradient is exact. The iterates stop
    # at a - e; the final step reads the certificate gradient, so w+ = a and
    # the residual v = H (x - w+) + grad F(w+) - g vanishes (the float64 g gave
    # ||v|| = ||e|| = 1e-8 > tol: a failure the iteration budget does not pay).
    a = np.array([0.75, -0.5, 0.25])
    e = np.array([6e-9, 0.0, -8e-9])

    def value_and_grad(w):
        return 0.0, w - a + e

    result = certified_minimize_fixed(
        value_and_grad,
        None,
        w0=np.zeros(3),
        mu=1.0,
        smoothness=1.0,
        tol=1e-10,
        n_iter=3,
        certificate_gradient=lambda w: w - a,
    )
    assert result.converged
    np.testing.assert_array_equal(result.w, a)
    assert result.distance_bound <= 1e-10
