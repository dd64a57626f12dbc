"""Loss objects: derivatives, bounds and numerical stability."""

import numpy as np
import pytest
from scipy import optimize

from skdpsco._losses import get_loss

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("name", ["squared", "huber", "logistic"])
def test_derivative_matches_finite_differences(name):
    loss = get_loss(name)
    z = RNG.normal(size=50) * 3
    y = (
        (RNG.random(50) > 0.5).astype(float)
        if loss.is_classifier
        else RNG.normal(size=50)
    )
    h = 1e-6
    fd = (loss.value(z + h, y) - loss.value(z - h, y)) / (2 * h)
    np.testing.assert_allclose(loss.derivative(z, y), fd, atol=1e-6)


def test_multinomial_derivative_matches_finite_differences():
    loss = get_loss("multinomial")
    z = RNG.normal(size=(20, 4)) * 2
    y = RNG.integers(0, 4, size=20)
    for k in range(4):
        e = np.zeros(4)
        e[k] = 1e-6
        fd = (loss.value(z + e, y) - loss.value(z - e, y)) / 2e-6
        np.testing.assert_allclose(loss.derivative(z, y)[:, k], fd, atol=1e-6)


def test_derivative_bounds_hold_at_extremes():
    z = np.array([-1e300, -50.0, 0.0, 50.0, 1e300])
    for y in (0.0, 1.0):
        u = get_loss("logistic").derivative(z, np.full(5, y))
        assert np.all(np.abs(u) <= 1.0) and np.all(np.isfinite(u))
    assert np.all(np.abs(get_loss("huber", threshold=2.0).derivative(z, 0.0)) <= 2.0)
    zm = np.array([[1e300, -1e300, 0.0], [0.0, 0.0, 0.0]])
    u = get_loss("multinomial").derivative(zm, np.array([1, 2]))
    assert np.all(np.linalg.norm(u, axis=1) <= np.sqrt(2) + 1e-12)
    assert np.all(np.isfinite(get_loss("logistic").value(z, np.ones(5))))


def test_smoothness_constants_bound_the_curvature():
    # Second derivative in z (largest Hessian eigenvalue for the multinomial loss).
    z = np.linspace(-10, 10, 2001)
    s = 1 / (1 + np.exp(-z))
    assert np.max(s * (1 - s)) <= get_loss("logistic").smoothness + 1e-15
    worst = 0.0
    for _ in range(200):
        p = RNG.dirichlet(np.ones(3) * 0.5)
        worst = max(worst, np.linalg.eigvalsh(np.diag(p) - np.outer(p, p)).max())
    assert worst <= get_loss("multinomial").smoothness


def test_multinomial_minimiser_is_the_class_frequencies():
    # Sanity of value/derivative together: the empirical minimiser of the mean
    # multinomial loss over a shared score vector is log-frequencies (up to shift).
    loss = get_loss("multinomial")
    y = np.array([0] * 6 + [1] * 3 + [2] * 1)

    def f(v):
        Z = np.tile(v, (y.size, 1))
        return loss.value(Z, y).mean(), loss.derivative(Z, y).mean(axis=0)

    v = optimize.minimize(f, np.zeros(3), jac=True, tol=1e-12).x
    p = np.exp(v - v.max())
    np.testing.assert_allclose(p / p.sum(), [0.6, 0.3, 0.1], atol=1e-6)


def test_unknown_loss_and_bad_threshold():
    with pytest.raises(ValueError, match="Unknown loss"):
        get_loss("hinge")
    with pytest.raises(ValueError, match="threshold"):
        get_loss("huber", threshold=0.0)
