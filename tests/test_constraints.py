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


# --------------------------------------------------------------------------------------
# Constraint set classes.
# --------------------------------------------------------------------------------------

import pickle  # noqa: E402

from scipy import integrate, optimize, special  # noqa: E402

from skdpsco._constraints import (  # noqa: E402
    Box,
    GaussianWidth,
    GroupL12Ball,
    KSparsePolytope,
    L1Ball,
    L2Ball,
    LpBall,
    ProbabilitySimplex,
    gaussian_width,
    make_constraint,
    monte_carlo_gaussian_width,
)


def _groups(d):
    # Unequal groups (sizes 1, 2, 3, ...), non-contiguous labels.
    ids = np.repeat(np.arange(d), np.arange(1, d + 1))[:d]
    return np.random.default_rng(d).permutation(ids) * 7


def _sets(d):
    rng = np.random.default_rng(100 + d)
    lower = -rng.uniform(0.1, 1.0, size=d)
    upper = rng.uniform(-0.05, 1.0, size=d)
    upper = np.maximum(upper, lower)
    return [
        L2Ball(0.8, n_features=d),
        L1Ball(1.3, n_features=d),
        LpBall(0.9, p=1.5, n_features=d),
        LpBall(1.1, p=3.0, n_features=d),
        Box(lower, upper, n_features=d),
        ProbabilitySimplex(2.0, n_features=d),
        GroupL12Ball(1.2, _groups(d), n_features=d),
        KSparsePolytope(0.4, min(3, d), n_features=d),
    ]


def _reference_projection(c, v):
    """Projection by a generic solver (SLSQP) on a smooth reformulation of ``C``."""
    d = v.size
    opts = {"ftol": 1e-15, "maxiter": 1000}

    def solve(n_var, z0, bounds, cons):
        def f(z):
            r = z[:d] - v
            return 0.5 * r @ r, np.concatenate([r, np.zeros(n_var - d)])

        res = optimize.minimize(
            f,
            z0,
            jac=True,
            method="SLSQP",
            bounds=bounds,
            constraints=cons,
            options=opts,
        )
        return res.x

    if isinstance(c, L1Ball | KSparsePolytope):
        # x = x+ - x-, x+- >= 0; exact for both polytopes (|x_i| <= x+_i + x-_i).
        ub = c.radius if isinstance(c, KSparsePolytope) else None
        cap = c.radius * (c.k if isinstance(c, KSparsePolytope) else 1)
        cons = [
            {
                "type": "ineq",
                "fun": lambda z: cap - z[:d].sum() - z[d:].sum(),
                "jac": lambda z: -np.ones(2 * d),
            }
        ]

        def f(z):
            r = z[:d] - z[d:] - v
            return 0.5 * r @ r, np.concatenate([r, -r])

        res = optimize.minimize(
            f,
            np.zeros(2 * d),
            jac=True,
            method="SLSQP",
            bounds=[(0, ub)] * (2 * d),
            constraints=cons,
            options=opts,
        )
        return res.x[:d] - res.x[d:]
    if isinstance(c, GroupL12Ball):
        # Epigraph: t_j^2 >= ||x_j||^2, t_j >= 0, sum t_j <= R; feasible start.
        member = [np.flatnonzero(c.groups == g) for g in np.unique(c.groups)]
        m = len(member)

        def cone(z):
            return np.array([z[d + j] ** 2 - z[i] @ z[i] for j, i in enumerate(member)])

        def cone_jac(z):
            J = np.zeros((m, d + m))
            for j, i in enumerate(member):
                J[j, i] = -2 * z[i]
                J[j, d + j] = 2 * z[d + j]
            return J

        cons = [
            {
                "type": "ineq",
                "fun": lambda z: c.radius - z[d:].sum(),
                "jac": lambda z: np.concatenate([np.zeros(d), -np.ones(m)]),
            },
            {"type": "ineq", "fun": cone, "jac": cone_jac},
        ]
        norms = np.array([np.linalg.norm(v[i]) for i in member])
        s = 0.5 * c.radius / norms.sum()
        z0 = np.concatenate([s * v, 1.5 * s * norms])
        return solve(d + m, z0, [(None, None)] * d + [(0, None)] * m, cons)[:d]
    bounds, cons = None, []
    if isinstance(c, L2Ball):
        cons = [
            {
                "type": "ineq",
                "fun": lambda x: c.radius**2 - x @ x,
                "jac": lambda x: -2 * x,
            }
        ]
    elif isinstance(c, LpBall):
        p, r = c.p, c.radius
        cons = [
            {
                "type": "ineq",
                "fun": lambda x: 1.0 - np.sum(np.abs(x / r) ** p),
                "jac": lambda x: -p * np.sign(x) * np.abs(x / r) ** (p - 1) / r,
            }
        ]
    elif isinstance(c, Box):
        bounds = list(zip(c.lower, c.upper, strict=True))
    elif isinstance(c, ProbabilitySimplex):
        bounds = [(0, None)] * d
        cons = [
            {
                "type": "eq",
                "fun": lambda x: x.sum() - c.radius,
                "jac": lambda x: np.ones(d),
            }
        ]
    return solve(d, np.zeros(d), bounds, cons)


@pytest.mark.parametrize(("d", "seed"), [(5, 0), (12, 1), (25, 2)])
def test_projection_matches_generic_solver(d, seed):
    rng = np.random.default_rng(seed)
    for c in _sets(d):
        v = 1.5 * rng.normal(size=d)
        x = c.project(v)
        assert c.contains(x, tol=1e-10), type(c).__name__
        # Frank-Wolfe gap with an independent support function (LP / dual norm):
        # 0.5 ||x - x*||^2 <= h_C(v - x) - <v - x, x>.
        gap = -_lmo_reference(c, x - v) - (v - x) @ x
        assert -1e-9 <= gap <= 1e-9, type(c).__name__
        if isinstance(c, GroupL12Ball) and d > 12:
            continue  # SLSQP on the cone epigraph needs ~10 s here; the gap suffices
        ref = _reference_projection(c, v)
        # SLSQP's answer is feasible only to ~1e-8, so it may be marginally closer.
        assert np.linalg.norm(x - v) <= np.linalg.norm(ref - v) + 1e-6, type(c).__name__
        np.testing.assert_allclose(x, ref, atol=2e-6, err_msg=type(c).__name__)


@pytest.mark.parametrize("d", [1, 7, 40])
def test_projection_idempotent_firmly_nonexpansive_and_variational(d):
    rng = np.random.default_rng(d)
    for c in _sets(d):
        name = type(c).__name__
        for _ in range(20):
            v, w = 2.0 * rng.standard_t(3, size=(2, d))
            pv, pw = c.project(v), c.project(w)
            assert c.contains(pv, 1e-10), name
            np.testing.assert_allclose(c.project(pv), pv, atol=1e-12, err_msg=name)
            # Firm non-expansiveness: ||Pv - Pw||^2 <= <Pv - Pw, v - w>.
            diff = pv - pw
            assert diff @ diff <= diff @ (v - w) + 1e-10, name
            # Variational inequality <v - Pv, u - Pv> <= 0 for u in C, including the
            # worst u = lmo(Pv - v).
            for u in (pw, c.lmo(pv - v), c.project(rng.normal(size=d))):
                assert (v - pv) @ (u - pv) <= 1e-9 * (1 + np.abs(v).sum()), name


@pytest.mark.parametrize("p", [1.01, 1.05, 1.5, 3.0, 8.0, 40.0])
@pytest.mark.parametrize("scale", [0.5, 3.0, 1e4])
def test_lp_projection_certified_kkt(p, scale):
    rng = np.random.default_rng(int(10 * p))
    d = 1000
    c = LpBall(2.0, p=p)
    v = rng.normal(size=d) * scale * 2.0 * d ** (1 / p)
    assert c.norm(v) > 2.0
    x = c.project(v)
    assert c.norm(x) == pytest.approx(2.0, rel=1e-12)
    assert np.all(np.sign(x[x != 0]) == np.sign(v[x != 0]))
    # Common KKT multiplier: h + nu p h^(p-1) = |v| (h = |x| / R, v / R scaled).
    a, h = np.abs(v) / 2.0, np.abs(x) / 2.0
    i = np.argmax(h)
    nu = (a[i] - h[i]) / (p * h[i] ** (p - 1))
    kept = h > 1e-250  # below that h underflows (true value < 1e-250)
    residual = np.abs(h + nu * p * h ** (p - 1) - a)[kept] / a[kept]
    assert residual.max() < 1e-11
    assert np.all(nu * p * (1e-250) ** (p - 1) >= a[~kept] * (1 - 1e-9))


def test_lp_projection_p2_and_inside_points():
    v = np.array([3.0, -4.0])
    np.testing.assert_allclose(LpBall(1.0, p=2.0).project(v), [0.6, -0.8])
    inside = np.array([0.1, -0.2, 0.3])
    assert LpBall(1.0, p=1.5).project(inside) is inside


def test_k_sparse_projection_breakpoint_cases():
    c = KSparsePolytope(1.0, 2)
    # Inside the l1 cap after clipping: plain clip.
    np.testing.assert_allclose(c.project(np.array([5.0, -0.5, 0.2])), [1.0, -0.5, 0.2])
    # One coordinate saturated at tau, theta on the piece [0.3, 0.4]:
    # 1 + (1.3 - theta) + (0.4 - theta) = 2 gives theta = 0.35.
    x = c.project(np.array([2.0, -1.3, 0.4]))
    np.testing.assert_allclose(x, [1.0, -0.95, 0.05], atol=1e-14)
    # Everything below tau: theta = 0.35 from 2.7 - 2 theta = 2.
    np.testing.assert_allclose(
        c.project(np.array([1.5, 0.9, -0.8])), [1.0, 0.55, -0.45]
    )
    assert np.abs(x).sum() == pytest.approx(2.0, rel=1e-14)


def test_lmo_matches_linear_programs_and_support():
    rng = np.random.default_rng(5)
    d = 9
    for c in _sets(d):
        name = type(c).__name__
        for _ in range(5):
            g = rng.normal(size=d)
            u = c.lmo(g)
            assert c.contains(u, 1e-10), name
            assert c.support(-g) == pytest.approx(-(g @ u), rel=1e-12), name
            # h_C(g) >= <g, u> for every u in C.
            for _ in range(20):
                w = c.project(2 * rng.normal(size=d))
                assert g @ w >= g @ u - 1e-12, name
            ref = _lmo_reference(c, g)
            assert g @ u == pytest.approx(ref, rel=1e-9, abs=1e-12), name


def _lmo_reference(c, g):
    """min_{u in C} <g, u> by linprog (polytopes) or the dual norm (balls)."""
    d = g.size
    if isinstance(c, L1Ball | KSparsePolytope):
        ub = c.radius if isinstance(c, KSparsePolytope) else None
        cap = c.radius * (c.k if isinstance(c, KSparsePolytope) else 1)
        res = optimize.linprog(
            np.concatenate([g, -g]),
            A_ub=np.ones((1, 2 * d)),
            b_ub=[cap],
            bounds=[(0, ub)] * (2 * d),
        )
        return res.fun
    if isinstance(c, Box):
        return optimize.linprog(g, bounds=list(zip(c.lower, c.upper, strict=True))).fun
    if isinstance(c, ProbabilitySimplex):
        res = optimize.linprog(
            g, A_eq=np.ones((1, d)), b_eq=[c.radius], bounds=[(0, None)] * d
        )
        return res.fun
    if isinstance(c, L2Ball):
        return -c.radius * np.linalg.norm(g)
    if isinstance(c, LpBall):
        return -c.radius * np.sum(np.abs(g) ** c.q) ** (1 / c.q)
    assert isinstance(c, GroupL12Ball)
    return -c.radius * max(
        np.linalg.norm(g[c.groups == j]) for j in np.unique(c.groups)
    )


def test_matrix_arguments():
    rng = np.random.default_rng(3)
    W = rng.normal(size=(6, 3))
    c = L1Ball(1.0)
    np.testing.assert_allclose(
        c.project(W), project_l1_ball(W.ravel(), 1.0).reshape(6, 3)
    )
    assert c.lmo(W).shape == (6, 3)
    # Box: per-feature bounds broadcast over the columns.
    box = Box(-np.arange(1, 7) / 10, np.arange(1, 7) / 10)
    P = box.project(W)
    assert np.all(np.abs(P) <= (np.arange(1, 7) / 10)[:, None] + 1e-15)
    # Group ball with one id per row: the whole row is a group.
    grp = GroupL12Ball(1.0, [0, 0, 1, 1, 2, 2])
    P = grp.project(W)
    norms = [np.linalg.norm(P[2 * j : 2 * j + 2]) for j in range(3)]
    assert sum(norms) == pytest.approx(1.0, rel=1e-12)
    for j in range(3):
        block, orig = P[2 * j : 2 * j + 2], W[2 * j : 2 * j + 2]
        if norms[j] > 0:
            np.testing.assert_allclose(block / norms[j], orig / np.linalg.norm(orig))


def test_radii_and_diameters():
    d = 16
    assert LpBall(1.0, p=4.0, n_features=d).radius_l2 == pytest.approx(d**0.25)
    assert LpBall(1.0, p=4.0, n_features=d).diameter == pytest.approx(2 * d**0.25)
    assert Box(-1.0, 2.0, n_features=d).radius_l2 == pytest.approx(2.0 * 4)
    assert Box(-1.0, 2.0, n_features=d).diameter == pytest.approx(3.0 * 4)
    assert KSparsePolytope(0.5, 4, n_features=d).radius_l2 == pytest.approx(1.0)
    assert ProbabilitySimplex(3.0).diameter == pytest.approx(3.0 * np.sqrt(2))
    # R_max is the max norm of a point of C: check against the LMO vertices.
    rng = np.random.default_rng(0)
    for c in _sets(d):
        best = max(np.linalg.norm(c.lmo(rng.normal(size=d))) for _ in range(200))
        assert best <= c.radius_l2 * (1 + 1e-12), type(c).__name__
    with pytest.raises(ValueError, match="n_features"):
        LpBall(1.0, p=4.0).radius_l2  # noqa: B018


# --------------------------------------------------------------------------------------
# Gaussian widths.
# --------------------------------------------------------------------------------------


def _mc(support, d, m, seed):
    rng = np.random.default_rng(seed)
    vals = np.array([support(g) for g in rng.normal(size=(m, d))])
    return vals.mean(), vals.std(ddof=1) / np.sqrt(m)


def test_l2_width_closed_form():
    # The exact Gamma ratio R sqrt(2) Gamma((d + 1)/2) / Gamma(d/2): d = 1000, R = 1
    # gives 31.6149.
    assert gaussian_width("l2", 1000) == pytest.approx(31.614871896968, abs=1e-9)
    assert gaussian_width("l2", 1) == pytest.approx(np.sqrt(2 / np.pi), rel=1e-14)
    assert gaussian_width("l2", 2) == pytest.approx(np.sqrt(np.pi / 2), rel=1e-14)
    # Stable for huge d (gammaln): sqrt(d - 1/2) up to O(d^-3/2).
    assert gaussian_width("l2", 10**8) == pytest.approx(np.sqrt(10**8 - 0.5), rel=1e-12)
    w = gaussian_width("l2", 50, radius=2.5)
    assert w.method == "closed form"
    mean, se = _mc(np.linalg.norm, 50, 20000, 7)
    assert abs(w / 2.5 - mean) < 4 * se


def test_l1_width_against_integral_and_monte_carlo():
    # Values of R int_0^inf 1 - (2 Phi(t) - 1)^d dt = R E||g||_inf (the width of
    # Su, Zhao & Wang's Definition 12 for the l1 ball) and exact small cases:
    # d = 1: E|g| = sqrt(2/pi); d = 2: E max(|g1|, |g2|) = 2 / sqrt(pi).
    assert gaussian_width("l1", 1) == pytest.approx(np.sqrt(2 / np.pi), abs=1e-11)
    assert gaussian_width("l1", 2) == pytest.approx(2 / np.sqrt(np.pi), abs=1e-11)
    for d, value in [(10, 1.881), (100, 2.747), (1000, 3.435), (10**4, 4.019)]:
        assert gaussian_width("l1", d) == pytest.approx(value, abs=6e-4)
    # Independent trapezoid integration on a fine grid.
    t = np.linspace(0, 12, 400001)
    integrand = -np.expm1(1000 * np.log1p(-special.erfc(t[1:] / np.sqrt(2))))
    trap = integrate.trapezoid(np.concatenate([[1.0], integrand]), t)
    w = gaussian_width("l1", 1000)
    assert w == pytest.approx(trap, abs=1e-9)
    assert w.method == "quadrature" and w.error_bound < 1e-10
    # Loose bounds only (G = O(sqrt(log d)), Su, Zhao & Wang, Section 2):
    # 0.92 sqrt(2 ln d) < G < sqrt(2 ln 2d).
    assert 0.92 * np.sqrt(2 * np.log(1000)) < w < np.sqrt(2 * np.log(2000))
    # Big Monte Carlo, vectorised: 5 10^4 draws of max |g_i| at d = 200.
    rng = np.random.default_rng(11)
    vals = np.abs(rng.normal(size=(50000, 200))).max(axis=1)
    se = vals.std(ddof=1) / np.sqrt(vals.size)
    assert abs(gaussian_width("l1", 200) - vals.mean()) < 4 * se


def test_simplex_box_group_k_sparse_widths():
    # Reference values of R E max_i g_i (quadrature, as for the l1 ball).
    for d, value in [(10, 1.539), (100, 2.508), (1000, 3.241), (10**4, 3.852)]:
        assert gaussian_width("simplex", d) == pytest.approx(value, abs=6e-4)
    assert gaussian_width("simplex", 1) == pytest.approx(0.0, abs=1e-12)
    assert gaussian_width("simplex", 2) == pytest.approx(1 / np.sqrt(np.pi), abs=1e-11)
    assert gaussian_width("box", 1000) == pytest.approx(1000 * np.sqrt(2 / np.pi))
    lower, upper = np.array([-1.0, 0.0, 2.0]), np.array([1.0, 3.0, 2.5])
    # Half-widths 1, 1.5, 0.25; the centre does not matter.
    assert gaussian_width(Box(lower, upper), 3) == pytest.approx(
        2.75 * np.sqrt(2 / np.pi)
    )
    # (reference values to 4 significant digits)
    for k, value, digits in [(5, 15.37, 0.006), (10, 28.75, 0.006), (50, 116.7, 0.06)]:
        assert gaussian_width("k_sparse", 1000, k=k) == pytest.approx(value, abs=digits)
    # k = d: the box, d sqrt(2/pi); k = 1: the l1 ball.
    assert gaussian_width("k_sparse", 30, k=30) == pytest.approx(
        30 * np.sqrt(2 / np.pi)
    )
    assert gaussian_width("k_sparse", 30, k=1) == pytest.approx(
        gaussian_width("l1", 30)
    )
    for k, value in [(5, 4.2388), (10, 4.9664), (50, 8.3846)]:
        w = gaussian_width("group_l1", 1000, groups=np.repeat(np.arange(1000 // k), k))
        assert w == pytest.approx(value, abs=1e-4)
    # Singleton groups: the l1 ball; one group: the l2 ball.
    assert gaussian_width("group_l1", 40, groups=np.arange(40)) == pytest.approx(
        gaussian_width("l1", 40), abs=1e-10
    )
    assert gaussian_width("group_l1", 40, groups=np.zeros(40)) == pytest.approx(
        gaussian_width("l2", 40), abs=1e-10
    )


@pytest.mark.parametrize(
    "c",
    [
        ProbabilitySimplex(1.0, n_features=60),
        Box(-np.linspace(0, 1, 60), np.linspace(0.5, 1, 60)),
        GroupL12Ball(1.0, _groups(60)),
        KSparsePolytope(1.0, 7, n_features=60),
        L1Ball(1.0, n_features=60),
    ],
    ids=lambda c: type(c).__name__,
)
def test_exact_widths_within_4se_of_monte_carlo(c):
    exact = c.gaussian_width(60)
    mean, se = _mc(c.support, 60, 20000, 3)
    assert abs(exact - mean) < 4 * se
    # The library's own Monte Carlo (m = 4000) is within its stated bound
    # 4 R_max / sqrt(m) (Gaussian concentration: Boucheron, Lugosi & Massart 2013,
    # Theorem 5.6).
    mc = monte_carlo_gaussian_width(c, 60, n_samples=4000, seed=1)
    assert mc.method == "monte carlo"
    assert mc.error_bound == pytest.approx(4 * c.radius_l2 / np.sqrt(4000))
    assert abs(mc - exact) < mc.error_bound
    assert abs(mc - exact) < 4 * mc.standard_error


@pytest.mark.parametrize("p", [1.2, 1.5, 3.0])
def test_lp_width_monte_carlo_within_stated_bound(p):
    d = 300
    w = gaussian_width("lp", d, radius=2.0, p=p)
    assert w.method == "monte carlo"
    q = p / (p - 1)
    r_max = 2.0 * max(1.0, d ** (0.5 - 1 / p))
    assert w.error_bound == pytest.approx(4 * r_max / np.sqrt(w.n_samples))
    rng = np.random.default_rng(12345)  # independent of the library's seed 0
    vals = 2.0 * np.sum(np.abs(rng.normal(size=(40000, d))) ** q, axis=1) ** (1 / q)
    big, big_se = vals.mean(), vals.std(ddof=1) / np.sqrt(vals.size)
    assert abs(w - big) < w.error_bound + 4 * big_se
    assert abs(w - big) < 4 * np.hypot(w.standard_error, big_se)
    # Jensen upper bound on R E||g||_q: R (d E|g|^q)^(1/q).
    moment = 2 ** (q / 2) * special.gamma((q + 1) / 2) / np.sqrt(np.pi)
    assert w <= 2.0 * (d * moment) ** (1 / q) + w.error_bound
    assert gaussian_width("lp", d, p=2.0) == pytest.approx(gaussian_width("l2", d))


def test_width_scaling_determinism_and_value_object():
    for name, params in [("l1", {}), ("simplex", {}), ("k_sparse", {"k": 3})]:
        one = gaussian_width(name, 50, **params)
        assert gaussian_width(name, 50, radius=3.5, **params) == pytest.approx(
            3.5 * one
        )
    a = gaussian_width("lp", 100, p=1.7)
    assert float(a) == float(gaussian_width("lp", 100, p=1.7))  # fixed seed
    assert float(a) != float(gaussian_width("lp", 100, p=1.7, seed=1))
    b = pickle.loads(pickle.dumps(a))
    assert isinstance(b, GaussianWidth) and b == a and b.error_bound == a.error_bound
    assert isinstance(a + 1.0, float)


# --------------------------------------------------------------------------------------
# Factory and validation.
# --------------------------------------------------------------------------------------


def test_make_constraint_names_and_instances():
    d = 8
    assert isinstance(make_constraint("l2", d, 1.0), L2Ball)
    assert isinstance(
        make_constraint("l1", d, 1.0, p=None, k=None, groups=None), L1Ball
    )
    c = make_constraint("lp", d, 2.0, p=1.5)
    assert isinstance(c, LpBall) and c.p == 1.5 and c.n_features == d
    box = make_constraint("linf", d, 0.5)
    assert isinstance(box, Box) and box.radius_l2 == pytest.approx(0.5 * np.sqrt(d))
    custom = make_constraint("box", d, lower=np.zeros(d), upper=np.ones(d))
    np.testing.assert_array_equal(custom.upper, np.ones(d))
    assert isinstance(make_constraint("simplex", d, 1.0), ProbabilitySimplex)
    g = make_constraint("group_l1_l2", d, 1.0, groups=np.arange(d) // 2)
    assert isinstance(g, GroupL12Ball) and g.group_norms(np.ones(d)).shape == (4,)
    assert make_constraint("k_sparse", d, 1.0, k=np.int64(3)).k == 3
    bound = make_constraint(L1Ball(2.0), d)
    assert bound.n_features == d and bound.radius == 2.0
    assert gaussian_width(L1Ball(2.0), d) == pytest.approx(gaussian_width("l1", d, 2.0))


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("l1", 5, 0.0), {}, "radius"),
        (("l1", 5, -1.0), {}, "radius"),
        (("l2", 5, np.nan), {}, "radius"),
        (("l2", 5, np.inf), {}, "radius"),
        (("lp", 5, 1.0), {"p": 1.0}, "p must"),
        (("lp", 5, 1.0), {"p": 0.5}, "p must"),
        (("lp", 5, 1.0), {"p": np.inf}, "p must"),
        (("lp", 5, 1.0), {}, "p is required"),
        (("l1", 5, 1.0), {"p": 1.5}, "'p'"),
        (("k_sparse", 5, 1.0), {"k": 6}, "k=6"),
        (("k_sparse", 5, 1.0), {"k": 0}, "k must"),
        (("k_sparse", 5, 1.0), {"k": 2.5}, "k must"),
        (("k_sparse", 5, 1.0), {}, "k is required"),
        (("group_l1", 5, 1.0), {"groups": [0, 0, 1]}, "groups has length 3"),
        (("group_l1", 5, 1.0), {"groups": [[0, 1, 2, 3, 4]]}, "groups must"),
        (("group_l1", 5, 1.0), {}, "groups is required"),
        (("box", 2, 1.0), {"lower": [0.0, 1.0], "upper": [1.0, 0.5]}, "lower <= upper"),
        (("box", 2, 1.0), {"lower": [0.0, 1.0]}, "both lower and upper"),
        (("box", 3, 1.0), {"lower": [0.0, 0.0], "upper": [1.0, 1.0]}, "length 2"),
        (("l3", 5, 1.0), {}, "constraint must be one of"),
        (("l1", 0, 1.0), {}, "n_features"),
    ],
)
def test_bad_parameters_raise_clear_errors(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_constraint(*args, **kwargs)


def test_bad_parameters_on_classes_and_helpers():
    with pytest.raises(ValueError, match="radius"):
        L2Ball(0.0)
    with pytest.raises(ValueError, match="p must"):
        LpBall(1.0, p=1)
    with pytest.raises(ValueError, match="k=4"):
        KSparsePolytope(1.0, 4).gaussian_width(3)
    with pytest.raises(ValueError, match="n_features"):
        L1Ball(1.0).gaussian_width()
    with pytest.raises(ValueError, match="bound to n_features=3"):
        make_constraint(L1Ball(1.0, n_features=3), 4)
    with pytest.raises(ValueError, match="ConstraintSet"):
        make_constraint(L1Ball(1.0), 4, k=2)
    with pytest.raises(ValueError, match="radius"):
        gaussian_width(L1Ball(1.0), 4, radius=2.0)
    with pytest.raises(ValueError, match="shape"):
        GroupL12Ball(1.0, [0, 1, 1]).project(np.ones(5))


def test_k_sparse_and_group_projection_large_vector():
    rng = np.random.default_rng(2)
    d = 10**5
    v = rng.standard_t(3, size=d)
    c = KSparsePolytope(0.5, 200)
    x = c.project(v)
    assert c.violation(x) == 0.0
    assert np.abs(x).sum() == pytest.approx(100.0, rel=1e-12)
    # One threshold: |x_i| = clip(|v_i| - theta, 0, tau) with a common theta.
    saturated = np.abs(x) > 0.5 - 1e-9
    mid = (np.abs(x) > 0) & ~saturated
    assert saturated.sum() > 0 and mid.sum() > 0
    theta = np.abs(v[mid]) - np.abs(x[mid])
    np.testing.assert_allclose(theta, theta[0], atol=1e-10)
    assert np.all(np.abs(v[x == 0]) <= theta[0] + 1e-10)
    assert np.all(np.abs(v[saturated]) >= theta[0] + 0.5 - 1e-10)
    g = GroupL12Ball(3.0, np.arange(d) // 7)
    y = g.project(v)
    assert g.group_norms(y).sum() == pytest.approx(3.0, rel=1e-12)
