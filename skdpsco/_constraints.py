"""Public convex constraint sets: exact projections, linear minimisation oracles and
Gaussian widths.

Every set ``C`` here offers

- ``project(w)``: the exact Euclidean projection ``argmin_{u in C} ||u - w||_2``;
- ``lmo(g)``: a linear minimisation oracle ``argmin_{u in C} <g, u>``;
- ``support(g)``: the support function ``h_C(g) = max_{u in C} <g, u> = <g, lmo(-g)>``;
- ``radius_l2`` (``R_max = max_{u in C} ||u||_2``), and ``diameter`` (l2);
- ``contains(w, tol)`` / ``violation(w)``;
- ``gaussian_width(n_features)``: ``G_C = E_{g ~ N(0, I_d)} h_C(g)`` (Su, Zhao, Wang,
  Definition 12), returned as a :class:`GaussianWidth` (a ``float`` that also carries
  how it was computed and an error bound).

A matrix argument (``(d, K)`` coefficients of a multinomial model) is treated as its
C-order flattened vector unless a class says otherwise (:class:`Box` broadcasts
per-feature bounds over the columns, :class:`GroupL12Ball` accepts one group id per
row), and results keep the input's shape.

Everything here is a deterministic function of public inputs (the set's parameters
and the point handed in); nothing reads private data and nothing here is a privacy
mechanism. ``R_max`` bounds the Lipschitz constant of the squared loss, so it is
privacy-relevant for the callers: every value here is exact or an overestimate.
The Gaussian width only enters utility (the accuracy ``alpha_opt`` of Algorithm 1),
so a Monte-Carlo estimate of it never affects privacy.

References
----------
.. [SZW] Su, J., Zhao, C. and Wang, D. "Differentially Private Stochastic Convex
   Optimization in (Non)-Euclidean Space Revisited", Definition 12 (Gaussian width),
   Algorithms 1-2 (where ``G_C`` enters).
.. [DSSC08] Duchi, J., Shalev-Shwartz, S., Singer, Y. and Chandra, T. (2008).
   "Efficient projections onto the l1-ball for learning in high dimensions", ICML,
   Figure 1 (simplex and l1 ball).
.. [Con16] Condat, L. (2016). "Fast projection onto the simplex and the l1 ball",
   Mathematical Programming 158, 575-585.
.. [Jag13] Jaggi, M. (2013). "Revisiting Frank-Wolfe: projection-free sparse convex
   optimization", ICML, Section 4 (linear minimisation oracles of these sets).
.. [BLM13] Boucheron, S., Lugosi, G. and Massart, P. (2013). "Concentration
   Inequalities", Theorem 5.6 (Gaussian concentration of Lipschitz functions), used
   for the Monte-Carlo error bound.
"""

import abc
import dataclasses
import functools
import itertools
import math
from numbers import Real

import numpy as np
from scipy import integrate, optimize, special

from .utils._validation import check_int, check_real

__all__ = [
    "Box",
    "ConstraintSet",
    "GaussianWidth",
    "GroupL12Ball",
    "KSparsePolytope",
    "L1Ball",
    "L2Ball",
    "LpBall",
    "ProbabilitySimplex",
    "gaussian_width",
    "make_constraint",
    "monte_carlo_gaussian_width",
    "project_l1_ball",
    "project_l2_ball",
    "project_simplex",
]

_EPS = np.finfo(float).eps
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
#: Absolute/relative tolerance asked of the width quadratures.
_QUAD_TOL = 1e-12
#: Monte-Carlo error bounds are this many ``R_max / sqrt(m)``: by Gaussian
#: concentration the bound fails with probability at most ``2 exp(-8) < 7e-4``.
_MC_BOUND_SE = 4.0
#: Default Monte-Carlo sample count and the cap on ``m * d`` normal draws.
_MC_SAMPLES = 4000
_MC_WORK = 2 * 10**7


# --------------------------------------------------------------------------------------
# Plain projections (used directly by solvers).
# --------------------------------------------------------------------------------------


def project_l2_ball(W, radius):
    """Euclidean projection onto ``{W : ||W||_F <= radius}``.

    Parameters
    ----------
    W : ndarray
        A vector, or a ``(d, K)`` matrix (projected onto the Frobenius ball).
    radius : float or None
        ``None`` means no constraint: ``W`` is returned unchanged.

    Returns
    -------
    ndarray
        ``W * min(1, radius / ||W||_F)``; ``W`` itself when it is already inside.
    """
    if radius is None:
        return W
    norm = np.linalg.norm(W)
    if norm > radius:
        W = W * (radius / norm)
    return W


def project_l1_ball(v, radius):
    """Exact Euclidean projection onto ``{w : ||w||_1 <= radius}``.

    Sort-based soft thresholding (Duchi et al. 2008, Figure 1), ``O(d log d)`` and
    fully vectorised: with ``u = sort(|v|)`` decreasing and
    ``rho = max{j : u_j > (sum_{i<=j} u_i - radius) / j}``, the projection is
    ``sign(v) * max(|v| - theta, 0)`` with ``theta = (sum_{i<=rho} u_i - radius) / rho``
    (the KKT multiplier of the l1 constraint).

    Parameters
    ----------
    v : ndarray
        A vector. A matrix is projected as its flattened vector (the entrywise l1
        ball ``sum_{jk} |W_jk| <= radius``), and the result has the input's shape.
    radius : float or None
        ``radius >= 0``; ``None`` means no constraint (identity).

    Returns
    -------
    ndarray
        The projection; ``v`` itself (not a copy) when ``||v||_1 <= radius``.

    References
    ----------
    .. [1] Duchi, J., Shalev-Shwartz, S., Singer, Y. and Chandra, T. (2008).
       "Efficient projections onto the l1-ball for learning in high dimensions",
       ICML, Figure 1 / Algorithm of Section 4.
    .. [2] Condat, L. (2016). "Fast projection onto the simplex and the l1 ball",
       Mathematical Programming 158, 575-585 (the same threshold, found in expected
       linear time; the sort is simpler and fast enough for d = 10^6).
    """
    if radius is None:
        return v
    radius = float(radius)
    if not np.isfinite(radius) or radius < 0:
        raise ValueError(f"radius must be a finite number >= 0, got {radius!r}.")
    v = np.asarray(v, dtype=float)
    a = np.abs(v).ravel()
    if a.sum() <= radius:
        return v
    if radius == 0.0:
        return np.zeros_like(v)
    theta = _simplex_threshold(a, radius)
    del a
    # sign(v) max(|v| - theta, 0), in place (one length-d buffer).
    w = np.abs(v)
    w -= theta
    np.maximum(w, 0.0, out=w)
    np.copysign(w, v, out=w)
    return _shrink_to_l1_cap(w, radius)


def _shrink_to_l1_cap(w, cap):
    """Undo a rounding overshoot of ``||w||_1`` over ``cap`` (~1e-13 relative at
    ``d = 10^6``) so that the output is feasible; moves ``w`` by that much only."""
    total = np.abs(w).sum()
    if total > cap:
        w = w * (cap / total)
    return w


def project_simplex(v, radius=1.0):
    """Exact Euclidean projection onto ``{w : w >= 0, sum(w) = radius}``.

    ``max(v - theta, 0)`` with the sort-based threshold ``theta`` of Duchi et al.
    (2008, Figure 1); ``O(d log d)``. A matrix is projected as its flattened vector.

    Parameters
    ----------
    v : ndarray
    radius : float
        ``radius > 0``.

    Returns
    -------
    ndarray of the shape of ``v``

    References
    ----------
    .. [1] Duchi, J., Shalev-Shwartz, S., Singer, Y. and Chandra, T. (2008), ICML,
       Figure 1.
    """
    v = np.asarray(v, dtype=float)
    return np.maximum(v - _simplex_threshold(v.ravel(), float(radius)), 0.0)


def _simplex_threshold(a, radius):
    """``theta`` with ``sum max(a - theta, 0) = radius`` (Duchi et al. 2008, Fig. 1).

    For the l1 ball ``a = |v|`` with ``sum(a) > radius``, so ``theta > 0``.

    Before the sort, Michelot's (1986) filter drops entries that cannot be in the
    support: for any set ``S`` containing the support, ``(sum_S a - radius) / |S|``
    is a lower bound on ``theta`` (``radius = sum_S max(a - theta, 0) >=
    sum_S (a - theta)``), and entries at or below a lower bound are outside the
    support. On the noisy mean of a sparse gradient at ``d = 10^6`` this leaves a
    small fraction to sort, which saves time and several length-``d`` buffers.
    """
    a = np.asarray(a, dtype=float).ravel()
    lower = (a.sum() - radius) / a.size
    for _ in range(8):
        keep = a[a > lower]
        if keep.size == 0 or keep.size == a.size:
            break
        a = keep
        new_lower = (a.sum() - radius) / a.size
        if not new_lower > lower:
            break
        lower = new_lower
    u = np.sort(a)[::-1]
    excess = np.cumsum(u) - radius
    j = np.arange(1, u.size + 1)
    # u_j > excess_j / j holds exactly for j <= rho (Duchi et al. 2008, Lemma 2),
    # so the last index where it holds is rho.
    rho = np.flatnonzero(u * j > excess)[-1] + 1
    return excess[rho - 1] / rho


def _stable_pnorm(a, p):
    """``||a||_p`` of a nonnegative flat array, scaled by its max (no overflow)."""
    if a.size == 0:
        return 0.0
    top = a.max()
    if top == 0.0 or not np.isfinite(top):
        return float(top)
    return float(top * np.sum((a / top) ** p) ** (1.0 / p))


# --------------------------------------------------------------------------------------
# Gaussian width values.
# --------------------------------------------------------------------------------------


class GaussianWidth(float):
    """A Gaussian width value: a ``float`` with its provenance.

    Attributes
    ----------
    method : str
        ``"closed form"``, ``"quadrature"`` or ``"monte carlo"``.
    error_bound : float
        Bound on ``|value - G_C|``: 0 for a closed form (up to rounding), the
        quadrature's error estimate plus the truncated tail, or for Monte Carlo
        ``4 R_max / sqrt(m)``, which holds except with probability
        ``2 exp(-8) < 7e-4`` over the seed (Gaussian concentration: the mean of ``m``
        values of the ``R_max``-Lipschitz ``h_C`` is ``R_max / sqrt(m)``-Lipschitz in
        the ``m d`` normals; Boucheron, Lugosi, Massart 2013, Theorem 5.6).
    standard_error : float
        Monte Carlo only: the empirical standard error (0 otherwise).
    n_samples : int
        Monte Carlo only: the number of samples ``m`` (0 otherwise).
    """

    def __new__(cls, value, method, error_bound=0.0, standard_error=0.0, n_samples=0):
        obj = super().__new__(cls, value)
        obj.method = method
        obj.error_bound = float(error_bound)
        obj.standard_error = float(standard_error)
        obj.n_samples = int(n_samples)
        return obj

    def __reduce__(self):
        return (
            GaussianWidth,
            (
                float(self),
                self.method,
                self.error_bound,
                self.standard_error,
                self.n_samples,
            ),
        )

    def __repr__(self):
        return (
            f"GaussianWidth({float(self)!r}, method={self.method!r}, "
            f"error_bound={self.error_bound:.3g})"
        )


def _expected_chi(d):
    """``E ||g||_2 = sqrt(2) Gamma((d+1)/2) / Gamma(d/2)``.

    ``poch(d/2, 1/2)`` evaluates the Gamma ratio directly; ``exp`` of a difference of
    two ``gammaln`` values loses ~1e-7 relative accuracy at ``d = 10^8``.
    """
    return math.sqrt(2.0) * float(special.poch(d / 2, 0.5))


def _quad(f, lo, hi, points):
    """``int_lo^hi f`` split at ``points`` (where the integrand changes fast)."""
    cuts = sorted({lo, hi, *(x for x in points if lo < x < hi)})
    value = err = 0.0
    for a, b in itertools.pairwise(cuts):
        v, e = integrate.quad(f, a, b, epsabs=_QUAD_TOL, epsrel=_QUAD_TOL, limit=500)
        value += v
        err += e
    return value, err


def _upper_order_limit(d):
    # Past t, P(max_i |g_i| > t) <= d erfc(t / sqrt 2) <= d exp(-t^2 / 2) < e^-60.
    return math.sqrt(2.0 * math.log(max(d, 1)) + 120.0)


@functools.lru_cache(maxsize=256)
def _expected_top_k_abs(d, k):
    """``E sum of the k largest |g_i|``, ``g ~ N(0, I_d)``, by exact quadrature.

    ``sum_{top k} |g_i| = int_0^inf min(k, N(t)) dt`` with
    ``N(t) = #{i : |g_i| > t} ~ Bin(d, erfc(t / sqrt 2))``, and for ``N ~ Bin(d, p)``
    ``E min(k, N) = k P(N >= k) + d p P(Bin(d - 1, p) <= k - 2)`` (since
    ``E[N; N <= k - 1] = d p P(Bin(d-1, p) <= k - 2)``). ``k = 1`` gives
    ``E max |g_i| = int_0^inf 1 - (2 Phi(t) - 1)^d dt``.
    """

    def integrand(t):
        p = special.erfc(t / math.sqrt(2.0))
        if k == 1:
            # 1 - (1 - p)^d without cancellation.
            return -math.expm1(d * math.log1p(-p)) if p < 1.0 else 1.0
        head = k * special.bdtrc(k - 1, d, p)
        return head + d * p * special.bdtr(k - 2, d - 1, p)

    hi = _upper_order_limit(d)
    centre = math.sqrt(2.0 * math.log(2.0 * d / k)) if 2 * d > k else 0.5
    value, err = _quad(integrand, 0.0, hi, [0.5 * centre, centre, 1.5 * centre])
    # Tail past hi: E min(k, N) <= d erfc(t/sqrt2) <= d exp(-t^2/2), integral < e^-60 d.
    return value, err + d * math.exp(-0.5 * hi * hi)


@functools.lru_cache(maxsize=256)
def _expected_max_normal(d):
    """``E max_i g_i = int_0^inf (1 - Phi^d) - int_-inf^0 Phi^d``, by quadrature."""

    def upper(t):
        return -math.expm1(d * special.log_ndtr(t))

    def lower(t):
        return math.exp(d * special.log_ndtr(t))

    hi = _upper_order_limit(d)
    centre = math.sqrt(2.0 * math.log(d)) if d > 1 else 0.5
    up, e1 = _quad(upper, 0.0, hi, [0.5 * centre, centre, 1.5 * centre])
    # Phi(t)^d <= Phi(t) <= exp(-t^2/2) / (|t| sqrt(2 pi)): below -12 it is < 1e-33.
    low, e2 = _quad(lower, -12.0, 0.0, [-2.0, -1.0])
    return up - low, e1 + e2 + 1e-32


@functools.lru_cache(maxsize=256)
def _expected_max_chi(sizes_counts):
    """``E max_j ||g_{G_j}||_2`` over disjoint groups; ``sizes_counts = ((k, m_k),)``.

    The group norms are independent ``chi_{k_j}``, so
    ``P(max <= t) = prod_k F_{chi_k}(t)^{m_k}`` with
    ``F_{chi_k}(t) = P(chi^2_k <= t^2) = gammainc(k/2, t^2/2)``, and
    ``E max = int_0^inf 1 - prod_k F_{chi_k}(t)^{m_k} dt`` (exact quadrature).
    """

    def integrand(t):
        x = 0.5 * t * t
        log_cdf = 0.0
        for k, m in sizes_counts:
            lower = special.gammainc(0.5 * k, x)
            if lower == 0.0:
                return 1.0
            if lower < 0.5:
                log_cdf += m * math.log(lower)
            else:
                log_cdf += m * math.log1p(-special.gammaincc(0.5 * k, x))
        return -math.expm1(log_cdf)

    k_max = max(k for k, _ in sizes_counts)
    m = sum(c for _, c in sizes_counts)
    # chi_k - sqrt(k) is sub-Gaussian with variance proxy 1 (1-Lipschitz norm):
    # past hi every group exceeds its tail with total probability < e^-60.
    spread = math.sqrt(2.0 * math.log(m) + 120.0)
    hi = math.sqrt(k_max) + spread
    centre = (
        math.sqrt(k_max) + math.sqrt(2.0 * math.log(m)) if m > 1 else math.sqrt(k_max)
    )
    value, err = _quad(integrand, 0.0, hi, [0.5 * centre, centre, 1.5 * centre])
    return value, err + 1e-20


def _lipschitz_mc(support, n_features, r_max, n_samples, seed, batch_support=None):
    """Monte-Carlo ``E h_C(g)`` with the concentration bound (see GaussianWidth)."""
    rng = np.random.default_rng(seed)
    values = np.empty(n_samples)
    chunk = max(1, min(n_samples, _MC_WORK // (10 * max(n_features, 1))))
    for start in range(0, n_samples, chunk):
        stop = min(n_samples, start + chunk)
        G = rng.standard_normal((stop - start, n_features))
        if batch_support is not None:
            values[start:stop] = batch_support(G)
        else:
            values[start:stop] = [support(g) for g in G]
    se = float(values.std(ddof=1) / math.sqrt(n_samples)) if n_samples > 1 else math.inf
    return GaussianWidth(
        float(values.mean()),
        "monte carlo",
        error_bound=_MC_BOUND_SE * r_max / math.sqrt(n_samples),
        standard_error=se,
        n_samples=n_samples,
    )


def _default_mc_samples(n_features, n_samples):
    if n_samples is not None:
        return check_int(n_samples, "n_samples", low=2)
    return max(16, min(_MC_SAMPLES, _MC_WORK // max(n_features, 1)))


# --------------------------------------------------------------------------------------
# Validation helpers.
# --------------------------------------------------------------------------------------


def _frozen_array(a):
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


def _as_float_array(w):
    return np.asarray(w, dtype=float)


# --------------------------------------------------------------------------------------
# Constraint sets.
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class ConstraintSet(abc.ABC):
    """Base class of a closed convex constraint set ``C`` (see the module docstring).

    Subclasses implement ``project``, ``lmo``, ``support``, ``violation``,
    ``radius_l2``, ``diameter`` and ``gaussian_width``. A set may be bound to a
    dimension (``n_features``); quantities that depend on it (``radius_l2`` of an l_p
    ball with p > 2, the Gaussian width, ...) need it.
    """

    #: Short name used by :func:`make_constraint`.
    name = "constraint"

    @abc.abstractmethod
    def project(self, w):
        """Exact Euclidean projection of ``w`` onto ``C``."""

    @abc.abstractmethod
    def lmo(self, g):
        """Linear minimisation oracle ``argmin_{u in C} <g, u>``."""

    def support(self, g):
        """Support function ``h_C(g) = max_{u in C} <g, u> = <g, lmo(-g)>``."""
        g = _as_float_array(g)
        return float(np.vdot(g, self.lmo(-g)))

    @abc.abstractmethod
    def violation(self, w):
        """Set-specific amount by which ``w`` lies outside ``C`` (``<= 0`` inside)."""

    def contains(self, w, tol=1e-10):
        """Whether ``w`` lies in ``C`` up to an absolute violation ``tol``.

        The violation is set-specific (e.g. ``||w||_1 - R`` for the l1 ball,
        ``max(lower - w, w - upper)`` for a box); see :meth:`violation`. The
        estimators never test membership (``project`` and ``lmo`` land in ``C`` by
        construction); this is the independent check the tests hold ``project``,
        ``lmo`` and the constrained solvers' outputs to.
        """
        return bool(self.violation(w) <= tol)

    def _dim(self, n_features, what):
        d = n_features if n_features is not None else self.n_features
        if d is None:
            raise ValueError(
                f"{type(self).__name__}.{what} depends on the dimension: pass "
                "n_features (or build the set with n_features=...)."
            )
        return check_int(d, "n_features", low=1)


@dataclasses.dataclass(frozen=True, eq=False)
class _RadiusSet(ConstraintSet):
    """A set scaled by one public ``radius > 0``: every set here but the box.

    ``R_max = radius`` unless a subclass says otherwise, and the widths computed by
    quadrature for the unit set scale with the radius (value and error bound).
    """

    radius: float = 1.0

    def __post_init__(self):
        object.__setattr__(
            self, "radius", check_real(self.radius, "radius", low=0.0, low_open=True)
        )

    @property
    def radius_l2(self):
        return self.radius

    def _quadrature_width(self, value, error):
        return GaussianWidth(self.radius * value, "quadrature", self.radius * error)


@dataclasses.dataclass(frozen=True, eq=False)
class _NormBall(_RadiusSet):
    """The ball ``{w : norm(w) <= radius}`` of a norm: the support function is
    ``radius`` times the dual norm, the violation ``norm(w) - radius``, and the
    set is symmetric, so its diameter is ``2 R_max``."""

    @abc.abstractmethod
    def norm(self, w):
        """The norm defining the ball."""

    @abc.abstractmethod
    def _dual_norm(self, g):
        """The dual norm, ``max_{norm(u) <= 1} <g, u>``."""

    def support(self, g):
        return self.radius * self._dual_norm(g)

    def violation(self, w):
        return max(self.norm(w) - self.radius, 0.0)

    @property
    def diameter(self):
        return 2.0 * self.radius_l2


@dataclasses.dataclass(frozen=True, eq=False)
class L2Ball(_NormBall):
    """The Euclidean ball ``{w : ||w||_2 <= radius}`` (Frobenius for matrices).

    Projection ``w min(1, R / ||w||)``; LMO ``-R g / ||g||``; support ``R ||g||_2``;
    ``R_max = R``, diameter ``2R``; Gaussian width in closed form,
    ``R E||g||_2 = R sqrt(2) Gamma((d+1)/2) / Gamma(d/2)`` (``scipy.special.poch``).

    Parameters
    ----------
    radius : float
        ``R > 0``.
    n_features : int or None
        Dimension the set is bound to (optional).

    References
    ----------
    .. [1] Su, Zhao, Wang, Definition 12 (Gaussian width).
    """

    n_features: int | None = None
    name = "l2"

    def norm(self, w):
        """``||w||_2`` (Frobenius for matrices)."""
        return float(np.linalg.norm(w))

    def _dual_norm(self, g):
        return float(np.linalg.norm(g))

    def project(self, w):
        return project_l2_ball(_as_float_array(w), self.radius)

    def lmo(self, g):
        g = _as_float_array(g)
        norm = np.linalg.norm(g)
        return np.zeros_like(g) if norm == 0 else -self.radius * g / norm

    def gaussian_width(self, n_features=None, *, n_samples=None, seed=0):
        d = self._dim(n_features, "gaussian_width")
        return GaussianWidth(self.radius * _expected_chi(d), "closed form")


@dataclasses.dataclass(frozen=True, eq=False)
class L1Ball(_NormBall):
    """The l1 ball ``{w : ||w||_1 <= radius}`` (entrywise for matrices).

    Projection: sort-based soft thresholding (:func:`project_l1_ball`, Duchi et al.
    2008). LMO: ``-R sign(g_i) e_i`` at ``i = argmax |g_i|``; support ``R ||g||_inf``.
    ``R_max = R``, diameter ``2R``. Gaussian width
    ``R E max_i |g_i| = R int_0^inf 1 - (2 Phi(t) - 1)^d dt`` by quadrature (absolute
    error ~1e-12 R); it lies between ``0.92 R sqrt(2 ln d)`` and ``R sqrt(2 ln 2d)``
    for ``d >= 100`` but is not close to either.

    Parameters
    ----------
    radius : float
        ``R > 0``.
    n_features : int or None

    References
    ----------
    .. [1] Duchi, J. et al. (2008), ICML, Figure 1.
    .. [2] Su, Zhao, Wang, Section 2 (G_C = O(sqrt(log d)) for the l1 ball).
    """

    n_features: int | None = None
    name = "l1"

    def norm(self, w):
        """``||w||_1`` (entrywise for matrices)."""
        return float(np.abs(w).sum())

    def _dual_norm(self, g):
        return float(np.max(np.abs(g), initial=0.0))

    def project(self, w):
        return project_l1_ball(_as_float_array(w), self.radius)

    def lmo(self, g):
        g = _as_float_array(g)
        u = np.zeros_like(g)
        flat = g.ravel()
        i = int(np.argmax(np.abs(flat)))
        if flat[i] != 0:
            u.flat[i] = -self.radius * np.sign(flat[i])
        return u

    def gaussian_width(self, n_features=None, *, n_samples=None, seed=0):
        d = self._dim(n_features, "gaussian_width")
        return self._quadrature_width(*_expected_top_k_abs(d, 1))


@dataclasses.dataclass(frozen=True, eq=False)
class LpBall(_NormBall):
    """The l_p ball ``{w : ||w||_p <= radius}``, ``1 < p < inf``.

    **Projection** (certified). For ``||v||_p > R`` the projection is
    ``x_i = sign(v_i) h_i`` where, for the KKT multiplier ``nu > 0``, ``h_i >= 0``
    solves ``h + nu p h^(p-1) = |v_i|`` and ``nu`` is set by ``sum h_i^p = R^p``.
    Each scalar root is found with ``h = |v_i| e^s``: the function
    ``G(s) = e^s + b_i e^((p-1)s) - 1`` (``b_i = nu p |v_i|^(p-2)``) is convex and
    increasing, so Newton's method started right of the root decreases monotonically
    to it, and ``s - s* <= G(s) / min(1, p - 1)``; iterations stop at the rounding
    floor ``G <= 32 eps (1 + |log b_i|)``, i.e. a relative error of each ``h_i`` below
    ``7e-15 (1 + |log b_i|) / min(1, p - 1)``. The outer
    equation ``log ||h(nu)||_p = log R`` (monotone in ``nu``) is solved by Brent's
    method in ``log nu`` to ``1e-15``. Any ``nu`` gives the exact projection onto the
    ball of radius ``||h(nu)||_p`` (Lagrangian duality), and the result is finally
    rescaled into the ball; a radius mismatch above ``1e-12`` raises ``RuntimeError``.
    ``p = 2`` uses the closed form. Cost: about 30 vectorised passes over ``d``
    per multiplier evaluation (~2.5 s at ``d = 10^6``).

    LMO ``-R sign(g) |g|^(q-1) / ||g||_q^(q-1)``, support ``R ||g||_q`` with
    ``q = p / (p - 1)``. ``R_max = R max(1, d^(1/2 - 1/p))``, diameter ``2 R_max``.

    **Gaussian width** ``R E ||g||_q``: closed form for ``p = 2``, otherwise Monte
    Carlo with a fixed seed, ``m = min(4000, 2e7 / d)`` (at least 16) samples by
    default; the returned :class:`GaussianWidth` carries the empirical standard error
    and the bound ``4 R_max / sqrt(m)`` (valid except with probability < 7e-4).

    Parameters
    ----------
    radius : float
        ``R > 0``.
    p : float
        ``1 < p < inf``.
    n_features : int or None

    References
    ----------
    .. [1] Su, Zhao, Wang, Section 3 (l_p^d geometry, Definition 3).
    .. [2] Boucheron, Lugosi, Massart (2013), Theorem 5.6 (Monte-Carlo bound).
    """

    p: float = 2.0
    n_features: int | None = None
    name = "lp"

    def __post_init__(self):
        super().__post_init__()
        p = self.p
        if (
            isinstance(p, bool)
            or not isinstance(p, Real)
            or not (1.0 < float(p) < np.inf)
        ):
            raise ValueError(
                f"p must satisfy 1 < p < inf for an l_p ball, got {p!r} (use 'l1' for "
                "p = 1 and 'box' / 'linf' for p = inf)."
            )
        object.__setattr__(self, "p", float(p))

    @property
    def q(self):
        """Dual exponent ``q = p / (p - 1)``."""
        return self.p / (self.p - 1.0)

    def norm(self, w):
        """``||w||_p`` (entrywise for matrices), computed without overflow."""
        return _stable_pnorm(np.abs(_as_float_array(w)).ravel(), self.p)

    def project(self, w):
        v = _as_float_array(w)
        if self.p == 2.0:
            return project_l2_ball(v, self.radius)
        norm = self.norm(v)
        if norm <= self.radius:
            return v
        if norm <= self.radius * (1.0 + 1e-13):
            # Within rounding of the sphere (e.g. re-projecting a projection): the
            # multiplier is ~0 and scaling is exact to O(1e-13 ||v||).
            return v * (self.radius / norm)
        a = np.abs(v).ravel() / self.radius
        h = np.zeros_like(a)
        nz = a > 0
        h[nz] = _lp_ball_magnitudes(a[nz], self.p)
        x = np.sign(v) * (self.radius * h).reshape(v.shape)
        r = self.norm(x)
        if abs(r / self.radius - 1.0) > 1e-12:
            raise RuntimeError(
                f"l_p projection not certified: radius {r!r} vs {self.radius!r}."
            )
        if r > self.radius:
            x *= self.radius / r
        return x

    def lmo(self, g):
        g = _as_float_array(g)
        a = np.abs(g)
        top = a.max(initial=0.0)
        if top == 0.0:
            return np.zeros_like(g)
        a = a / top
        a = a / _stable_pnorm(a.ravel(), self.q)
        return -self.radius * np.sign(g) * a ** (self.q - 1.0)

    def _dual_norm(self, g):
        return _stable_pnorm(np.abs(_as_float_array(g)).ravel(), self.q)

    @property
    def radius_l2(self):
        if self.p <= 2.0:
            return self.radius
        return self.radius * self._dim(None, "radius_l2") ** (0.5 - 1.0 / self.p)

    def gaussian_width(self, n_features=None, *, n_samples=None, seed=0):
        d = self._dim(n_features, "gaussian_width")
        if self.p == 2.0:
            return GaussianWidth(self.radius * _expected_chi(d), "closed form")
        m = _default_mc_samples(d, n_samples)
        r_max = self.radius * max(1.0, d ** (0.5 - 1.0 / self.p))
        q = self.q

        def batch_support(G):
            A = np.abs(G)
            top = A.max(axis=1, keepdims=True)
            return self.radius * top[:, 0] * np.sum((A / top) ** q, axis=1) ** (1.0 / q)

        return _lipschitz_mc(None, d, r_max, m, seed, batch_support)


def _lp_ball_magnitudes(a, p):
    """Magnitudes ``h`` of the projection of ``a > 0`` onto the unit l_p ball,
    ``||a||_p > 1`` (see :class:`LpBall`)."""
    log_a = np.log(a)

    def solve(log_nu):
        # log b_i = log(nu p) + (p - 2) log a_i; G(s) = e^s + b e^((p-1)s) - 1.
        log_b = log_nu + math.log(p) + (p - 2.0) * log_a
        # Start right of the root: both terms <= 1 there and one equals 1.
        s = np.minimum(0.0, -log_b / (p - 1.0))
        # Rounding floor of G: exp() of an argument x is computed to relative
        # accuracy ~eps (1 + |x|), and the argument of e2 sums terms of size |log b|.
        floor = 32 * _EPS * (1.0 + np.abs(log_b))
        for _ in range(200):
            e1 = np.exp(s)
            e2 = np.exp((p - 1.0) * s + log_b)
            G = e1 + e2 - 1.0
            if np.all(G <= floor):
                return s
            # Convex increasing G: Newton from the right never overshoots.
            s = s - np.maximum(G, 0.0) / (e1 + (p - 1.0) * e2)
        raise RuntimeError("l_p projection: the scalar Newton solve did not converge.")

    def log_radius(log_nu):
        log_h = solve(log_nu) + log_a
        return special.logsumexp(p * log_h) / p

    # nu p >= ||a||_q makes sum h^p <= 1 (h_i <= (a_i / (nu p))^(1/(p-1))).
    q = p / (p - 1.0)
    log_hi = math.log(_stable_pnorm(a, q) / p)
    log_lo = log_hi - 1.0
    while log_radius(log_lo) <= 0.0:
        log_lo -= 2.0 * (log_hi - log_lo)
        if log_lo < -1500:
            raise RuntimeError("l_p projection: no bracket for the multiplier.")
    log_nu = optimize.brentq(log_radius, log_lo, log_hi, xtol=1e-15, rtol=4 * _EPS)
    return np.exp(solve(log_nu) + log_a)


@dataclasses.dataclass(frozen=True, eq=False)
class Box(ConstraintSet):
    """The box ``{w : lower <= w <= upper}`` (scalar or per-coordinate bounds).

    Projection ``clip``; LMO ``lower`` where ``g > 0`` and ``upper`` elsewhere;
    support ``sum_i c_i g_i + r_i |g_i|`` with centre ``c = (lower + upper) / 2`` and
    half-width ``r = (upper - lower) / 2``. ``R_max = ||max(|lower|, |upper|)||_2``,
    diameter ``||upper - lower||_2``. Gaussian width in closed form,
    ``sum_i r_i sqrt(2 / pi)`` (the centre term has mean zero); for ``[-R, R]^d`` it
    is ``R d sqrt(2 / pi)``.

    Per-coordinate bounds of shape ``(d,)`` applied to a ``(d, K)`` matrix are
    broadcast over its columns.

    Parameters
    ----------
    lower, upper : float or array-like of shape (d,)
        Finite, ``lower <= upper``.
    n_features : int or None
        Needed for the scalar-bound ``radius_l2`` / ``diameter``.

    References
    ----------
    .. [1] Su, Zhao, Wang, Definition 12 (Gaussian width).
    """

    lower: object = -1.0
    upper: object = 1.0
    n_features: int | None = None
    name = "box"

    def __post_init__(self):
        lower = np.asarray(self.lower, dtype=float)
        upper = np.asarray(self.upper, dtype=float)
        for arr, nm in ((lower, "lower"), (upper, "upper")):
            if arr.ndim > 1 or not np.all(np.isfinite(arr)):
                raise ValueError(f"{nm} must be a finite scalar or 1-D array.")
        if lower.ndim == 1 and upper.ndim == 1 and lower.shape != upper.shape:
            raise ValueError("lower and upper must have the same length.")
        if np.any(lower > upper):
            raise ValueError("Box needs lower <= upper in every coordinate.")
        size = max(lower.size if lower.ndim else 0, upper.size if upper.ndim else 0)
        if size and self.n_features is not None and size != self.n_features:
            raise ValueError(
                f"Box bounds have length {size} but n_features={self.n_features}."
            )
        object.__setattr__(
            self, "lower", float(lower) if lower.ndim == 0 else _frozen_array(lower)
        )
        object.__setattr__(
            self, "upper", float(upper) if upper.ndim == 0 else _frozen_array(upper)
        )

    def _bounds(self, w):
        lower, upper = np.asarray(self.lower), np.asarray(self.upper)
        if w.ndim == 2 and (lower.ndim == 1 or upper.ndim == 1):
            lower = lower[:, None] if lower.ndim == 1 else lower
            upper = upper[:, None] if upper.ndim == 1 else upper
        return lower, upper

    def project(self, w):
        w = _as_float_array(w)
        lower, upper = self._bounds(w)
        return np.clip(w, lower, upper)

    def lmo(self, g):
        g = _as_float_array(g)
        lower, upper = self._bounds(g)
        return np.where(g > 0, lower, upper) + np.zeros_like(g)

    def support(self, g):
        g = _as_float_array(g)
        lower, upper = self._bounds(g)
        return float(np.sum(np.maximum(g * lower, g * upper)))

    def violation(self, w):
        w = _as_float_array(w)
        lower, upper = self._bounds(w)
        return max(float(np.max(np.maximum(lower - w, w - upper), initial=0.0)), 0.0)

    def _vector(self, values):
        return np.broadcast_to(np.asarray(values, dtype=float), (self._size(),))

    @property
    def radius_l2(self):
        corner = np.maximum(
            np.abs(self._vector(self.lower)), np.abs(self._vector(self.upper))
        )
        return float(np.linalg.norm(corner))

    @property
    def diameter(self):
        return float(
            np.linalg.norm(self._vector(self.upper) - self._vector(self.lower))
        )

    def _size(self, n_features=None):
        for b in (self.lower, self.upper):
            if np.ndim(b) == 1:
                return np.size(b)
        return self._dim(n_features, "dimension-dependent quantities")

    def gaussian_width(self, n_features=None, *, n_samples=None, seed=0):
        d = self._size(n_features)
        if n_features is not None and d != n_features:
            raise ValueError(f"Box bounds have length {d} but n_features={n_features}.")
        half = (np.asarray(self.upper) - np.asarray(self.lower)) / 2.0 * np.ones(d)
        return GaussianWidth(float(np.sum(half)) * _SQRT_2_OVER_PI, "closed form")


@dataclasses.dataclass(frozen=True, eq=False)
class ProbabilitySimplex(_RadiusSet):
    """The scaled probability simplex ``{w : w >= 0, sum(w) = radius}``.

    Projection: sort-based threshold (:func:`project_simplex`, Duchi et al. 2008).
    LMO ``R e_i`` at ``i = argmin g_i``; support ``R max_i g_i``. ``R_max = R``,
    diameter ``R sqrt(2)`` (``0`` if ``d = 1``).
    Gaussian width ``R E max_i g_i = R [int_0^inf 1 - Phi^d - int_-inf^0 Phi^d]`` by
    quadrature.

    Parameters
    ----------
    radius : float
        ``R > 0``.
    n_features : int or None

    References
    ----------
    .. [1] Duchi, J. et al. (2008), ICML, Figure 1.
    .. [2] Condat, L. (2016), Mathematical Programming 158.
    """

    n_features: int | None = None
    name = "simplex"

    def project(self, w):
        return project_simplex(w, self.radius)

    def lmo(self, g):
        g = _as_float_array(g)
        u = np.zeros_like(g)
        u.flat[int(np.argmin(g.ravel()))] = self.radius
        return u

    def support(self, g):
        return self.radius * float(np.max(g))

    def violation(self, w):
        w = _as_float_array(w)
        return max(float(-w.min()), abs(float(w.sum()) - self.radius), 0.0)

    @property
    def diameter(self):
        d = self.n_features
        return 0.0 if d == 1 else self.radius * math.sqrt(2.0)

    def gaussian_width(self, n_features=None, *, n_samples=None, seed=0):
        d = self._dim(n_features, "gaussian_width")
        return self._quadrature_width(*_expected_max_normal(d))


@dataclasses.dataclass(frozen=True, eq=False)
class GroupL12Ball(_NormBall):
    """The group l_{1,2} ball ``{w : sum_j ||w_{G_j}||_2 <= radius}``.

    ``groups`` gives one public group id per coordinate (disjoint groups ``G_j``,
    ``m`` of them). Projection: project the vector of group norms ``n_j`` onto the l1
    ball of radius R (:func:`project_l1_ball`) and rescale each group by
    ``n'_j / n_j``, which is exact because the problem separates into a radial
    problem per group. LMO: the group ``j* = argmax ||g_j||`` gets
    ``-R g_{j*} / ||g_{j*}||``; support ``R max_j ||g_j||_2``. ``R_max = R``,
    diameter ``2R``. Gaussian width
    ``R E max_j chi_{k_j} = R int_0^inf 1 - prod_j F_{chi_{k_j}}(t) dt`` by quadrature
    (exact for unequal group sizes).

    A ``(d, K)`` matrix with ``len(groups) == d`` is grouped by rows (group ``j``
    holds all columns of its rows); with ``len(groups) == d K`` the flattened matrix
    is grouped entrywise.

    Parameters
    ----------
    radius : float
        ``R > 0``.
    groups : array-like of shape (d,)
        Group id of each coordinate (any sortable labels).
    n_features : int or None
        If given, must equal ``len(groups)``.

    References
    ----------
    .. [1] Su, Zhao, Wang, Definition 12 (Gaussian width).
    .. [2] Duchi, J. et al. (2008), ICML, Figure 1 (the inner l1 projection).
    """

    groups: object = None
    n_features: int | None = None
    name = "group_l1"

    def __post_init__(self):
        super().__post_init__()
        if self.groups is None:
            raise ValueError("groups is required for a group l1,2 ball.")
        groups = np.asarray(self.groups)
        if groups.ndim != 1 or groups.size == 0:
            raise ValueError("groups must be a non-empty 1-D array of group ids.")
        if groups.dtype.kind == "f" and not np.all(np.isfinite(groups)):
            raise ValueError("groups must not contain NaN or infinite ids.")
        if self.n_features is not None and groups.size != self.n_features:
            raise ValueError(
                f"groups has length {groups.size} but n_features={self.n_features}."
            )
        _, index = np.unique(groups, return_inverse=True)
        index = index.ravel()
        index.setflags(write=False)
        groups = groups.copy()
        groups.setflags(write=False)
        object.__setattr__(self, "groups", groups)
        object.__setattr__(self, "_index", index)
        object.__setattr__(self, "_n_groups", int(index.max()) + 1)

    def _flat_index(self, w):
        d = self._index.size
        if w.size == d:
            return self._index
        if w.ndim == 2 and w.shape[0] == d:
            return np.repeat(self._index, w.shape[1])
        raise ValueError(
            f"groups has length {d}; got an array of shape {w.shape} (expected {d} "
            f"coordinates, or a ({d}, K) matrix grouped by rows)."
        )

    def group_norms(self, w):
        """``(||w_{G_j}||_2)_j`` for the ``m`` groups (sorted group ids)."""
        w = _as_float_array(w)
        idx = self._flat_index(w)
        flat = w.ravel()
        # Per-group scaling keeps the squares finite for huge entries.
        top = np.zeros(self._n_groups)
        np.maximum.at(top, idx, np.abs(flat))
        safe = np.where(top > 0, top, 1.0)
        sq = np.bincount(idx, weights=(flat / safe[idx]) ** 2, minlength=self._n_groups)
        return top * np.sqrt(sq)

    def project(self, w):
        w = _as_float_array(w)
        norms = self.group_norms(w)
        if norms.sum() <= self.radius:
            return w
        target = project_l1_ball(norms, self.radius)
        scale = np.divide(target, norms, out=np.zeros_like(norms), where=norms > 0)
        return (w.ravel() * scale[self._flat_index(w)]).reshape(w.shape)

    def lmo(self, g):
        g = _as_float_array(g)
        norms = self.group_norms(g)
        j = int(np.argmax(norms))
        u = np.zeros(g.size)
        if norms[j] > 0:
            sel = self._flat_index(g) == j
            u[sel] = -self.radius * g.ravel()[sel] / norms[j]
        return u.reshape(g.shape)

    def norm(self, w):
        """``sum_j ||w_{G_j}||_2``."""
        return float(self.group_norms(w).sum())

    def _dual_norm(self, g):
        return float(self.group_norms(g).max())

    def gaussian_width(self, n_features=None, *, n_samples=None, seed=0):
        d = self._index.size
        if n_features is not None and n_features != d:
            raise ValueError(f"groups has length {d} but n_features={n_features}.")
        sizes = np.bincount(self._index)
        ks, counts = np.unique(sizes, return_counts=True)
        return self._quadrature_width(
            *_expected_max_chi(tuple(zip(ks.tolist(), counts.tolist(), strict=True)))
        )


@dataclasses.dataclass(frozen=True, eq=False)
class KSparsePolytope(_RadiusSet):
    """The k-sparse polytope ``conv{x : ||x||_0 <= k, ||x||_inf <= tau}``
    ``= {x : ||x||_inf <= tau, ||x||_1 <= k tau}``.

    Projection ``sign(v) clip(|v| - theta, 0, tau)`` with ``theta = 0`` when that is
    feasible, otherwise the exact ``theta`` solving
    ``sum_i clip(|v_i| - theta, 0, tau) = k tau``: this function of ``theta`` is
    piecewise linear with breakpoints ``|v_i|`` and ``|v_i| - tau``; it is evaluated
    at every breakpoint with prefix sums over the sorted ``|v|`` (``O(d log d)``) and
    interpolated linearly on the crossing piece. LMO: the ``k`` largest ``|g_i|`` get
    ``-tau sign(g_i)``; support ``tau * (sum of the k largest |g_i|)``.
    ``R_max = tau sqrt(k)``, diameter ``2 tau sqrt(k)``. Gaussian width
    ``tau E sum_{top k} |g_i| = tau int_0^inf E min(k, N(t)) dt`` with
    ``N(t) ~ Bin(d, erfc(t / sqrt 2))``, by quadrature (exact).

    Parameters
    ----------
    radius : float
        ``tau > 0``.
    k : int
        ``1 <= k`` (``<= n_features`` when that is known).
    n_features : int or None

    References
    ----------
    .. [1] Su, Zhao, Wang, Section 2 (width O(sqrt(s log(d/s))) of sparse vectors).
    .. [2] Jaggi, M. (2013), ICML, Section 4.
    """

    k: int = 1
    n_features: int | None = None
    name = "k_sparse"

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "k", check_int(self.k, "k", low=1))
        if self.n_features is not None and self.k > self.n_features:
            raise ValueError(f"k={self.k} must be <= n_features={self.n_features}.")

    def project(self, w):
        v = _as_float_array(w)
        a = np.abs(v).ravel()
        tau, cap = self.radius, self.k * self.radius
        if np.minimum(a, tau).sum() <= cap:
            return np.sign(v) * np.minimum(np.abs(v), tau)
        theta = _capped_threshold(a, tau, cap)
        return _shrink_to_l1_cap(np.sign(v) * np.clip(np.abs(v) - theta, 0.0, tau), cap)

    def lmo(self, g):
        g = _as_float_array(g)
        flat = g.ravel()
        k = min(self.k, flat.size)
        top = np.argpartition(-np.abs(flat), k - 1)[:k]
        u = np.zeros(flat.size)
        u[top] = -self.radius * np.sign(flat[top])
        return u.reshape(g.shape)

    def support(self, g):
        a = np.abs(_as_float_array(g)).ravel()
        k = min(self.k, a.size)
        return self.radius * float(np.partition(a, a.size - k)[a.size - k :].sum())

    def violation(self, w):
        a = np.abs(_as_float_array(w))
        return max(
            float(a.max(initial=0.0)) - self.radius,
            float(a.sum()) - self.k * self.radius,
            0.0,
        )

    @property
    def radius_l2(self):
        return self.radius * math.sqrt(self.k)

    @property
    def diameter(self):
        return 2.0 * self.radius_l2

    def gaussian_width(self, n_features=None, *, n_samples=None, seed=0):
        d = self._dim(n_features, "gaussian_width")
        if self.k > d:
            raise ValueError(f"k={self.k} must be <= n_features={d}.")
        return self._quadrature_width(*_expected_top_k_abs(d, self.k))


def _capped_threshold(a, tau, cap):
    """Exact ``theta >= 0`` with ``phi(theta) = sum clip(a - theta, 0, tau) = cap``,
    given ``phi(0) > cap`` (``phi`` is continuous, decreasing, piecewise linear)."""
    s = np.sort(a)
    prefix = np.concatenate(([0.0], np.cumsum(s)))
    n = s.size

    def phi(theta):
        # i with a_i >= theta + tau contribute tau; theta < a_i < theta + tau
        # contribute a_i - theta.
        hi = np.searchsorted(s, theta + tau, side="left")
        lo = np.searchsorted(s, theta, side="right")
        middle = prefix[hi] - prefix[lo] - theta * (hi - lo)
        return (n - hi) * tau + middle

    breaks = np.unique(np.concatenate(([0.0], s, s - tau)))
    breaks = breaks[breaks >= 0.0]
    values = phi(breaks)
    # values decrease; the crossing piece is [breaks[j], breaks[j + 1]].
    j = np.flatnonzero(values > cap)[-1]
    if j + 1 >= breaks.size:
        return float(breaks[j])
    t0, t1, f0, f1 = breaks[j], breaks[j + 1], values[j], values[j + 1]
    return float(t0 + (f0 - cap) * (t1 - t0) / (f0 - f1))


# --------------------------------------------------------------------------------------
# Factory and public helpers.
# --------------------------------------------------------------------------------------

#: Constraint names understood by :func:`make_constraint` and their extra parameters.
_NAMES = {
    "l2": ("l2", ()),
    "l1": ("l1", ()),
    "lp": ("lp", ("p",)),
    "box": ("box", ("lower", "upper")),
    "linf": ("box", ("lower", "upper")),
    "simplex": ("simplex", ()),
    "group_l1": ("group_l1", ("groups",)),
    "group_l1_l2": ("group_l1", ("groups",)),
    "k_sparse": ("k_sparse", ("k",)),
}


def make_constraint(name, n_features, radius=1.0, **params):
    """Build a constraint set bound to ``n_features`` (used by the estimators).

    Parameters
    ----------
    name : str or ConstraintSet
        ``"l2"``, ``"l1"``, ``"lp"`` (needs ``p``), ``"box"`` / ``"linf"``,
        ``"simplex"``, ``"group_l1"`` / ``"group_l1_l2"`` (needs ``groups``) or
        ``"k_sparse"`` (needs ``k``); or a :class:`ConstraintSet`, which is checked
        against ``n_features`` and bound to it (``radius`` and ``params`` must then be
        left at their defaults / ``None``).
    n_features : int
        Dimension ``d`` of the parameter vector.
    radius : float
        ``R > 0``: the ball radius, the simplex total, the box half-width
        (``[-R, R]^d``), or ``tau`` of the k-sparse polytope. A box given by ``lower``
        and ``upper`` ignores ``radius``.
    **params
        ``p`` (``1 < p < inf``), ``groups`` (length ``n_features``), ``k``
        (``1 <= k <= n_features``), ``lower`` / ``upper`` (box bounds, both or
        neither). Parameters set to ``None`` are ignored; any other parameter that the
        set does not use raises ``ValueError``.

    Returns
    -------
    ConstraintSet
    """
    n_features = check_int(n_features, "n_features", low=1)
    given = {key: val for key, val in params.items() if val is not None}
    if isinstance(name, ConstraintSet):
        if given:
            raise ValueError(
                f"parameters {sorted(given)} cannot be combined with a ConstraintSet "
                "instance; set them on the instance."
            )
        return _bind(name, n_features)
    if not isinstance(name, str) or name not in _NAMES:
        raise ValueError(
            f"constraint must be one of {sorted(_NAMES)} or a ConstraintSet, "
            f"got {name!r}."
        )
    kind, allowed = _NAMES[name]
    unexpected = sorted(set(given) - set(allowed))
    if unexpected:
        raise ValueError(
            f"parameter(s) {unexpected} do not apply to constraint {name!r} "
            f"(it takes {list(allowed) or 'no extra parameters'})."
        )
    radius = check_real(radius, "radius", low=0.0, low_open=True)
    if kind == "l2":
        return L2Ball(radius, n_features=n_features)
    if kind == "l1":
        return L1Ball(radius, n_features=n_features)
    if kind == "simplex":
        return ProbabilitySimplex(radius, n_features=n_features)
    if kind == "lp":
        if "p" not in given:
            raise ValueError("p is required for constraint 'lp' (1 < p < inf).")
        return LpBall(radius, given["p"], n_features=n_features)
    if kind == "box":
        if ("lower" in given) != ("upper" in given):
            raise ValueError("box bounds: give both lower and upper, or neither.")
        if "lower" not in given:
            return Box(-radius, radius, n_features=n_features)
        return Box(given["lower"], given["upper"], n_features=n_features)
    if kind == "group_l1":
        if "groups" not in given:
            raise ValueError("groups is required for constraint 'group_l1'.")
        return GroupL12Ball(radius, given["groups"], n_features=n_features)
    if "k" not in given:
        raise ValueError("k is required for constraint 'k_sparse'.")
    return KSparsePolytope(radius, given["k"], n_features=n_features)


def _bind(constraint, n_features):
    """``constraint`` bound to ``n_features`` (validated)."""
    if constraint.n_features is not None and constraint.n_features != n_features:
        raise ValueError(
            f"constraint is bound to n_features={constraint.n_features}, "
            f"got n_features={n_features}."
        )
    return dataclasses.replace(constraint, n_features=n_features)


def gaussian_width(constraint, n_features, radius=1.0, **set_params):
    """Gaussian width ``G_C = E_{g ~ N(0, I_d)} sup_{w in C} <g, w>`` of a set.

    The error of a DP-SCO solution over ``C`` by approximate objective perturbation
    scales with ``G_C`` instead of ``sqrt(d)`` (Su, Zhao, Wang, Theorems 2 and 4), so
    this helps choose a set: e.g. for ``d = 1000``, the unit l2 ball has width 31.61,
    the unit l1 ball 3.435 and the unit simplex 3.241.

    Parameters
    ----------
    constraint : str or ConstraintSet
        A name understood by :func:`make_constraint` (``"l2"``, ``"l1"``, ``"lp"``,
        ``"box"``, ``"simplex"``, ``"group_l1"``, ``"k_sparse"``) or a set instance.
    n_features : int
        Dimension ``d``.
    radius : float
        Radius of a named set (see :func:`make_constraint`).
    **set_params
        ``p``, ``groups``, ``k``, ``lower``/``upper`` for named sets; ``n_samples``
        and ``seed`` are passed to Monte-Carlo widths (l_p balls, p != 2).

    Returns
    -------
    GaussianWidth
        A ``float``; ``.method`` says how it was computed (closed form, quadrature
        or Monte Carlo) and ``.error_bound`` bounds its error (for Monte Carlo,
        ``4 R_max / sqrt(m)``, valid except with probability < 7e-4).

    References
    ----------
    .. [1] Su, J., Zhao, C. and Wang, D. "Differentially Private Stochastic Convex
       Optimization in (Non)-Euclidean Space Revisited", Definition 12.
    """
    mc = {
        key: set_params.pop(key) for key in ("n_samples", "seed") if key in set_params
    }
    if isinstance(constraint, ConstraintSet) and radius != 1.0:
        raise ValueError("radius cannot be combined with a ConstraintSet instance.")
    c = make_constraint(constraint, n_features, radius, **set_params)
    return c.gaussian_width(n_features, **mc)


def monte_carlo_gaussian_width(
    constraint, n_features=None, n_samples=_MC_SAMPLES, seed=0
):
    """Monte-Carlo estimate ``(1/m) sum_j h_C(g_j)`` of any set's Gaussian width.

    ``h_C`` is ``R_max``-Lipschitz, so the estimate is within ``4 R_max / sqrt(m)`` of
    ``G_C`` except with probability ``2 exp(-8) < 7e-4`` (Gaussian concentration;
    Boucheron, Lugosi, Massart 2013, Theorem 5.6) and its variance is at most
    ``R_max^2 / m`` (Gaussian Poincare inequality). No set's width is computed
    here (:class:`LpBall` runs the same estimator with a batched support); the tests
    check the stated bound through it on the sets whose width is exact.

    Parameters
    ----------
    constraint : ConstraintSet
    n_features : int or None
        Defaults to the set's ``n_features``.
    n_samples : int
        ``m``.
    seed : int
        Seed of a dedicated generator (never the privacy noise stream).

    Returns
    -------
    GaussianWidth
    """
    d = constraint._dim(n_features, "monte_carlo_gaussian_width")
    m = check_int(n_samples, "n_samples", low=2)
    bound = constraint if constraint.n_features == d else _bind(constraint, d)
    return _lipschitz_mc(bound.support, d, bound.radius_l2, m, seed)
