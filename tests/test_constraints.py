"""Constraint sets: projections, linear minimisation oracles, Gaussian widths."""

import numpy as np
import pytest

from skdpsco._constraints import project_l1_ball, project_l2_ball


def _l1_projection_by_bisection(v, radius):
    """Reference: bisection on the soft threshold theta (monotone ||S_theta(v)||_1)."""
    a = np.abs(v)
    lo, hi = 0.0, a.max()
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if np.maximum(a - mid, 0.0).sum() > radius:
            lo = mid
        else:
            hi = mid
    return np.sign(v) * np.maximum(a - 0.5 * (lo + hi), 0.0)


def test_project_l2_ball_vector_matrix_and_none():
    rng = np.random.default_rng(0)
    v = rng.normal(size=7)
    w = project_l2_ball(v, 0.5)
    assert np.linalg.norm(w) == pytest.approx(0.5, rel=1e-14)
    np.testing.assert_allclose(w / np.linalg.norm(w), v / np.linalg.norm(v))
    W = rng.normal(size=(5, 3))
    P = project_l2_ball(W, 1.0)
    assert np.linalg.norm(P) == pytest.approx(1.0, rel=1e-14)
    inside = 0.1 * W / np.linalg.norm(W)
    assert project_l2_ball(inside, 1.0) is inside
    assert project_l2_ball(W, None) is W


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("d", [1, 2, 10, 100])
def test_project_l1_ball_matches_bisection_and_kkt(seed, d):
    rng = np.random.default_rng(seed)
    v = rng.standard_t(df=2, size=d)
    radius = 0.3 * np.abs(v).sum()
    w = project_l1_ball(v, radius)
    np.testing.assert_allclose(w, _l1_projection_by_bisection(v, radius), atol=1e-12)
    assert np.abs(w).sum() == pytest.approx(radius, rel=1e-12)
    # KKT: v - w = theta * s with s in the subdifferential of ||.||_1 at w.
    r = v - w
    theta = np.abs(r).max()
    support = w != 0
    np.testing.assert_allclose(r[support], theta * np.sign(w[support]), atol=1e-12)
    assert np.all(np.abs(r[~support]) <= theta + 1e-12)


def test_project_l1_ball_inside_ties_zero_radius_and_matrix():
    v = np.array([0.2, -0.3, 0.1])
    assert project_l1_ball(v, 1.0) is v
    assert project_l1_ball(v, None) is v
    np.testing.assert_array_equal(project_l1_ball(v, 0.0), np.zeros(3))
    # Ties: the threshold splits the budget equally among equal magnitudes.
    np.testing.assert_allclose(
        project_l1_ball(np.array([1.0, -1.0, 1.0, 0.0]), 1.5), [0.5, -0.5, 0.5, 0.0]
    )
    W = np.array([[3.0, -1.0], [0.5, 2.0]])
    P = project_l1_ball(W, 2.0)
    assert P.shape == W.shape
    np.testing.assert_allclose(P.ravel(), project_l1_ball(W.ravel(), 2.0))
    np.testing.assert_allclose(P, [[1.5, 0.0], [0.0, 0.5]])
    with pytest.raises(ValueError, match="radius"):
        project_l1_ball(v, -1.0)


def test_project_l1_ball_million_coordinates():
    rng = np.random.default_rng(1)
    v = rng.normal(size=10**6)
    radius = 100.0
    w = project_l1_ball(v, radius)
    assert np.abs(w).sum() == pytest.approx(radius, rel=1e-10)
    # The threshold is the same for every kept coordinate and no dropped one
    # exceeds it (KKT), checked on the whole vector.
    support = w != 0
    theta = np.abs(v[support]) - np.abs(w[support])
    np.testing.assert_allclose(theta, theta[0], atol=1e-10)
    assert np.abs(v[~support]).max() <= theta[0] + 1e-12
    assert np.all(np.sign(w[support]) == np.sign(v[support]))
