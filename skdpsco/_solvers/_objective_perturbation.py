"""Approximate objective perturbation over a bounded convex set (Su, Zhao & Wang,
Algorithms 1 and 2), with a certified inner solver.

Release ``theta^ = Proj_C(theta_2 + H)`` where ``theta_2`` approximately minimises

    J(theta) = L^(theta) + <G, theta> / n + c_tot ||theta||_2^2   over C,

``G ~ N(0, sigma_1^2 I)`` (drawn on a public grid, a coupling away from that law:
:func:`objective_noise_grid`) and ``H ~ N(0, sigma_2^2 I)`` (the grid Gaussian
mechanism). The budget is split in two
halves (the ``ln(2.5/delta) = ln(1.25/(delta/2))`` of Algorithm 1): the
objective-perturbation release of the exact minimiser ``theta*`` costs
``(eps/2, delta/2)`` (Theorem 1; the Jacobian term ``<= eps/4`` by
the floor ``c_tot >= r beta / (eps n)``, the Gaussian term ``<= eps/4`` except with
probability ``delta/2``), and the Gaussian output perturbation hiding
``theta_2 - theta*`` costs ``(eps/2, delta/2)``: it needs ``||theta_2 - theta*|| <=
gamma`` *always*, which the certified solver of :mod:`._certified` guarantees or
raises. Neighbours: replace-one, ``n`` public. Generalized linear losses only: their
per-record Hessian has rank ``k = 1`` and ``r = 2k = 2`` for every ``d``. Algorithm 1
prints ``r = min{d, 2 rank}``; with the cap at ``d`` the Jacobian term can exceed the
``eps / 4`` the noise scales leave for it (a GLM with ``d = 1``), so it is not
applied, and the rank is the maximum over every possible record (the paper: over
``x ~ P``).

Multinomial loss (``K >= 3`` classes, parameter matrix ``W`` of shape ``(dim, K)``,
``x~ = [x, 1]`` with an intercept). Every constant below is re-derived for it:

- gradient ``(p - e_y) (outer) x~`` (``p = softmax(W^T x~)``) has Frobenius norm
  ``||p - e_y||_2 ||x~||_2 <= sqrt(2) ||x~||`` (``||p - e_y||^2 = (1 - p_y)^2 +
  sum_{k != y} p_k^2 <= 2 (1 - p_y)^2``), so ``L = sqrt(2) R~`` with
  ``R~ = sqrt(R_z^2 + 1)`` under an intercept, as for one output;
- Hessian ``(diag(p) - p p^T) (kron) x~ x~^T``: ``diag(p) - p p^T`` annihilates the
  all-ones vector, so the rank is ``<= K - 1``, and ``v^T (diag(p) - p p^T) v =
  Var_p(v) <= (max v - min v)^2 / 4 <= 1/2`` for ``||v|| = 1``, so the spectral norm
  is ``<= ||x~||^2 / 2 = beta``. Theorem 1's ``r = 2k`` with ``k = K - 1``
  (Theorem 1's Jacobian term: in ``n J`` the base curvature is ``>= 2 n c_tot``, one
  record's rank-``k`` Hessian of norm ``<= beta`` moves ``log |det|`` of the
  Jacobian of ``W* -> G`` by ``<= k beta / (2 n c_tot) <= eps / 4`` when
  ``c_tot >= 2 k beta / (eps n)``);
- the replaced record's gradient change at ``W*`` lies in the fixed subspace
  ``span{e_k (outer) x~, e_k (outer) x~' : k}`` of dimension ``m <= 2K`` (``2(K - 1)``
  in fact, the columns sum to zero; ``2K`` is used, conservatively), whatever
  ``W*(G)`` is: the Gaussian term of Theorem 1 is controlled by the ``m``-dimensional
  projection of ``G`` (``chi_m`` tail, :func:`objective_perturbation_constants`).

The feasible set for ``W`` is "``W[:d]`` in ``C``" in the matrix convention of
:mod:`skdpsco._constraints` (l2: Frobenius ball; l1, l_p, simplex, k-sparse: the
C-order flattened matrix; box: the bounds broadcast over the columns; group l1,2:
one group of rows per id), times ``[-B, B]^K`` for the intercept row.
"""

import dataclasses
import math
from typing import NamedTuple

import numpy as np
from scipy import stats

from .._constraints import Box, GroupL12Ball
from .._design import RowClip, summation_error
from ..privacy._accounting import calibrate_analytic_gaussian
from ..privacy._discrete import COUPLING_SIGMA
from ..privacy._mechanisms import (
    GRID_SLACK,
    GaussianMechanism,
    PerturbationNoise,
    grid_gaussian_sigma,
)
from ..utils._validation import check_real
from ._certified import (
    _ROUNDING_FACTOR,
    certified_minimize_fixed,
    derivative_error,
    prediction_error,
)
from ._mirror_descent import (
    RowDerivative,
    gradient_sum,
    rounding_slack,
)
from ._result import SolverResult

__all__ = [
    "approximate_objective_perturbation",
    "objective_perturbation_constants",
    "objective_perturbation_iterations",
]

#: Losses whose per-record Hessian is ``phi''(<theta, z>) z z^T`` (rank 1) and which
#: are twice differentiable: the proof of Theorem 1 needs both (Huber is not C^2).
#: The multinomial loss (``K`` outputs) has rank ``K - 1`` (module docstring).
_GLM_LOSSES = {"squared", "logistic", "multinomial"}


class _ProductSet:
    """``C x [-B, B]`` for the intercept coordinate (separable projection)."""

    def __init__(self, constraint, n_features, intercept_bound):
        self.constraint = constraint
        self.d = n_features
        self.B = intercept_bound

    def project(self, w):
        # ``w`` is a vector (one output) or a (dim, K) matrix whose first d rows
        # are projected onto C in the matrix convention of skdpsco._constraints.
        if self.B is None:
            return self.constraint.project(w)
        out = np.empty_like(w)
        out[: self.d] = self.constraint.project(w[: self.d])
        out[self.d] = np.clip(w[self.d], -self.B, self.B)
        return out


def _flattened_set(constraint, n_features, n_outputs):
    """The set of C-order flattened ``(d, K)`` matrices ``W`` with ``W`` in ``C``.

    Same projection as ``constraint.project`` on the matrix (the convention of
    :mod:`skdpsco._constraints`), expressed as a set of ``d K``-vectors so that its
    ``R_max``, diameter and Gaussian width are the ones of the ``d K`` parameters:
    a box's per-feature bounds and a group ball's per-row ids are repeated over the
    ``K`` columns; every other set acts on the flattened matrix already.
    """
    if n_outputs == 1:
        return constraint
    dK = n_features * n_outputs
    if isinstance(constraint, Box):
        lower, upper = (
            np.repeat(b, n_outputs) if np.ndim(b) == 1 else b
            for b in (constraint.lower, constraint.upper)
        )
        return Box(lower, upper, n_features=dK)
    if isinstance(constraint, GroupL12Ball):
        groups = np.asarray(constraint.groups)
        if groups.size == n_features:
            groups = np.repeat(groups, n_outputs)
        return GroupL12Ball(constraint.radius, groups, n_features=dK)
    if dataclasses.is_dataclass(constraint) and hasattr(constraint, "n_features"):
        return dataclasses.replace(constraint, n_features=dK)
    raise ValueError(
        f"{type(constraint).__name__} has no known (d, K) matrix convention; the "
        "multinomial objective perturbation supports the sets of "
        "skdpsco._constraints."
    )


def _set_quantities(constraint, n_features, intercept_bound, n_outputs=1):
    """``(R_max, l2 diameter, Gaussian width)`` of ``C`` or ``C x [-B, B]^K``
    (Frobenius geometry of the ``(dim, K)`` matrix when ``K > 1``)."""
    flat = _flattened_set(constraint, n_features, n_outputs)
    r_max = float(flat.radius_l2)
    diam = float(flat.diameter)
    width = float(flat.gaussian_width(n_features * n_outputs))
    if intercept_bound is not None:
        B = float(intercept_bound)
        # [-B, B]^K: R_max B sqrt(K), diameter 2 B sqrt(K), width K B sqrt(2/pi).
        r_max = math.hypot(r_max, B * math.sqrt(n_outputs))
        diam = math.hypot(diam, 2.0 * B * math.sqrt(n_outputs))
        width += n_outputs * B * math.sqrt(2.0 / math.pi)  # widths of a product add
    return r_max, diam, width


def _sigma1(lipschitz, epsilon, delta, span_dim):
    """Scale of ``G`` such that Theorem 1's Gaussian term is ``<= eps / 4`` except
    with probability ``delta / 2`` (see :func:`objective_perturbation_constants`)."""
    # The change Delta of n grad L^ at the exact minimiser is ||Delta|| <= 2L and lies
    # in a subspace S of dimension m = span_dim fixed by the two records (z, z' for a
    # GLM, m = 2; e_k (outer) x~, e_k (outer) x~' for the multinomial loss, m = 2K).
    # The Gaussian log-density ratio is |2 <G, Delta> + ||Delta||^2| / (2 sigma^2)
    # <= (2 ||P_S G|| 2L + 4L^2) / (2 sigma^2), and ||P_S G|| / sigma ~ chi_m exceeds
    # t = sqrt(chi2.isf(delta/2, m)) with probability delta/2 (for m = 2,
    # t = sqrt(2 ln(2/delta)) exactly). Solving (4 a t + 4) / (2 a^2) = eps/4 for
    # a = sigma / L gives a = (4 t + 4 sqrt(t^2 + eps/2)) / eps. The bound uses only
    # that S does not move with G: Delta itself may depend on W*(G).
    t = math.sqrt(float(stats.chi2.isf(delta / 2.0, span_dim)))
    derived = lipschitz * (4.0 * t + 4.0 * math.sqrt(t * t + epsilon / 2.0)) / epsilon
    if epsilon > 1:
        return derived
    # Theorem 1 verbatim: Gaussian mechanism of sensitivity 2L at (eps/4, delta/2).
    # Its dimension-free constant covers the chi_2 tail (m = 2, GLMs), where it is
    # the larger of the two. For m = 2K the chi_m tail
    # can exceed it (K = 3, delta = 1e-5: t = 5.9 > sqrt(2 ln(2.5/delta)) = 5.0), and
    # the paper's proof that would cover a moving direction is missing, so the
    # larger scale is used: more noise never costs privacy.
    paper = math.sqrt(128.0 * math.log(2.5 / delta)) * lipschitz / epsilon
    return max(paper, derived)


def objective_perturbation_constants(
    *,
    n,
    dim,
    epsilon,
    delta,
    lipschitz,
    smoothness,
    diameter,
    r_max,
    gaussian_width,
    hessian_rank=1,
    gradient_span_dim=2,
    lam_obj="auto",
    l2_penalty=0.0,
    opt_tol="auto",
    gradient_error=0.0,
):
    """All public constants of Algorithms 1/2, before any data.

    Parameters
    ----------
    n, dim : int
        Sample size and number of parameters (``dim K`` for a ``(dim, K)`` matrix).
    epsilon, delta : float
    lipschitz, smoothness : float
        ``L`` and ``beta`` of one record's loss (Frobenius norms for a matrix).
    diameter, r_max, gaussian_width : float
        Of the feasible set (utility and numerical floor only).
    hessian_rank : int, default=1
        ``k``, the maximal rank of one record's Hessian; ``r = 2k`` (Theorem 1,
        with no cap at ``d``: see the module docstring). 1 for GLMs, ``K - 1``
        for the multinomial loss.
    gradient_span_dim : int, default=2
        ``m``, the dimension of a subspace, fixed by the two records, that holds
        the replaced record's gradient change at every parameter: 2 for GLMs,
        ``2K`` for the multinomial loss (``chi_m`` tail of ``sigma1``).
    lam_obj, l2_penalty, opt_tol
        See :func:`approximate_objective_perturbation`.
    gradient_error : float, default=0.0
        Public bound ``E`` on the absolute error of a computed gradient of the
        data term (:func:`_gradient_error`): the certificate adds ``E / mu_J``
        (:mod:`._certified`), so ``gamma``'s floor, a multiple of the
        certificate's relative margin (``1e3 eps`` against ``64 eps``), holds
        ``8 E / mu_J`` more.

    Returns
    -------
    dict
        ``c_priv, c_tot, mu_J, sigma1, sigma2, opt_tol, gamma`` where ``gamma`` is
        the distance the certified solver must reach (the output perturbation is
        calibrated to sensitivity ``2 gamma``).
    """
    L, beta = float(lipschitz), float(smoothness)
    private = math.isfinite(epsilon)
    r = 2 * int(hessian_rank)  # r = 2k, never capped at d
    c_priv = r * beta / (epsilon * n) if private else 0.0
    if l2_penalty > 0:
        # Algorithm 2 in ridge form: the user's data-independent ridge counts
        # towards the privacy floor; nothing extra when it already suffices.
        c_tot = max(l2_penalty / 2.0, c_priv)
    elif lam_obj == "auto":
        c_tot = max(L / (math.sqrt(n) * diameter), c_priv)
    else:
        c_tot = max(float(lam_obj), c_priv)  # clamp up, never down (Theorem 1)
    mu_J = 2.0 * c_tot
    ln_term = math.log(2.5 / delta)
    sigma1 = _sigma1(L, epsilon, delta, int(gradient_span_dim)) if private else 0.0
    # Displacement rule: E||theta^ - theta_2||^2 <= sigma2 G_C <= rho^2 (theta_2 in C,
    # projection inequality). It replaces Theorem 2's alpha, whose printed n^(3/2)
    # Remark 1 and this bound make n^(5/2).
    rho = L / (mu_J * n)
    gamma_floor = (
        1e3
        * np.finfo(float).eps
        * (L + mu_J * r_max + 3.0 * sigma1 * math.sqrt(dim) / n + beta * r_max)
        + 8.0 * float(gradient_error)
    ) / mu_J
    if opt_tol == "auto":
        if private:
            # The paper's alpha grows as epsilon^2, so above epsilon = 1 the solve
            # gets looser as the budget grows and the output noise sigma2 stays at
            # ~rho^2: a fit at epsilon = 1e4 was worse than at 8. Privacy holds for
            # any alpha (sigma2 is calibrated to the certified gamma below), so the
            # accuracy is capped at its epsilon = 1 value and sigma2 then falls as
            # 1 / epsilon.
            eps_tol = min(epsilon, 1.0)
            alpha = c_tot * eps_tol**2 * rho**4 / (64.0 * ln_term * gaussian_width**2)
        else:
            alpha = 0.0
    else:
        alpha = float(opt_tol)
    # alpha is a J-gap in the paper; the output perturbation only needs the distance
    # sqrt(2 alpha / c_tot) (lambda_obj-strong convexity). We certify half of it
    # directly (a factor-2 rounding margin).
    gamma = max(math.sqrt(2.0 * alpha / c_tot), 2.0 * gamma_floor)
    alpha = c_tot * gamma**2 / 2.0
    if not private:
        sigma2 = 0.0
    elif epsilon <= 1:
        # sigma2^2 = 64 alpha ln(2.5/delta) / (c_tot eps^2): Gaussian mechanism at
        # (eps/2, delta/2) with l2 sensitivity 2 gamma, gamma = sqrt(2 alpha/c_tot).
        sigma2 = math.sqrt(64.0 * alpha * ln_term / c_tot) / epsilon
    else:
        sigma2 = calibrate_analytic_gaussian(epsilon / 2.0, delta / 2.0, 2.0 * gamma)
    return dict(
        c_priv=c_priv,
        c_tot=c_tot,
        mu_J=mu_J,
        sigma1=sigma1,
        sigma2=sigma2,
        opt_tol=alpha,
        gamma=gamma,
        certify_tol=gamma / 2.0,
    )


def _noise_norm_bound(sigma1, n_params, epsilon, delta):
    """Public ``t`` with ``P(||G||_2 > t) <= eta``, ``(1 + e^eps) eta <= 2^-64 delta``.

    ``G ~ N(0, sigma1^2 I_p)``: ``||.||_2`` is 1-Lipschitz and ``E||G|| <= sigma1
    sqrt(p)`` (Jensen), so Gaussian concentration (Boucheron, Lugosi & Massart
    2013, Thm 5.6) gives ``P(||G|| > sigma1 (sqrt(p) + s)) <= exp(-s^2 / 2)``. With
    ``s^2 / 2 = ln(2 / delta) + eps + 64 ln 2`` the failure probability ``eta``
    satisfies ``(1 + e^eps) eta <= 2 e^eps eta = 2^-64 delta``.
    """
    if sigma1 == 0.0:
        return 0.0
    s = math.sqrt(2.0 * (math.log(2.0 / delta) + epsilon + 64.0 * math.log(2.0)))
    return sigma1 * (math.sqrt(n_params) + s)


class ObjectiveNoiseGrid(NamedTuple):
    """Public plan of the grid draw of ``G`` (:func:`objective_noise_grid`)."""

    step: float
    sigma: float
    residual_bound: float


def objective_noise_grid(sigma1, n_params, n, mu, gamma, epsilon, delta):
    """Public plan of the objective's noise ``N(0, sigma1^2 I)`` drawn on the grid
    ``step Z^p`` (:func:`~skdpsco.privacy._mechanisms.grid_gaussian_noise`).

    Theorem 1's change of variables needs ``G`` to have a density, which no float
    draw has. The draw is on the grid ``step Z^p`` instead, and the proof runs on a
    coupling. By Peikert's convolution theorem (2010, Thm 3.1; the argument of
    :meth:`~skdpsco.privacy.GaussianMechanism.release`) ``K`` is, within total
    variation ``2^-780`` per coordinate, ``Y + R`` with ``Y ~ N(0, (V' - 6^2) I)``
    continuous (``V' >= variance`` the variance the sampler realises) and ``R``
    given ``Y`` a discrete Gaussian of parameter 6 on ``Z^p - Y``. So ``G = G_c +
    step R`` with ``G_c = step Y ~ N(0, sigma^2 I)``, ``sigma = step sqrt(V' - 36)
    >= sigma1``: Theorem 1 holds for ``G_c`` (more noise only lowers its Gaussian
    term). ``R`` is sub-Gaussian with parameter 6 (Micciancio & Peikert 2012,
    Lemma 2.8, 6 above the smoothing parameter of ``Z``), so ``||step R||_2 <=
    residual_bound = step sqrt(p) t`` except with probability ``2 p e^{-t^2 / 72}
    (1 + 2^-700) <= eta``, ``(1 + e^eps) eta <= 2^-64 delta``. The minimiser of the
    objective with ``G`` and the one with ``G_c`` then differ by at most
    ``residual_bound / (n mu) <= gamma / 2`` (``J`` is ``mu``-strongly convex and
    ``G`` enters its gradient as ``G / n``), which fixes ``step``: with the
    certified ``||theta_2 - theta*(G)|| <= gamma / 2``, ``theta_2`` lies within
    ``gamma`` of the minimiser for ``G_c``, and the output perturbation's
    sensitivity ``2 gamma`` covers it (the coupling of its proof is made with
    ``G_c``). The step is also at most ``2^-10 sigma1 / sqrt(p)``.
    """
    # ln(1 / eta), eta = 2^-65 delta e^-eps, in log space (no underflow).
    log_inv_eta = 65.0 * math.log(2.0) - math.log(delta) + min(epsilon, 700.0)
    t = math.sqrt(
        2.0
        * COUPLING_SIGMA**2
        * (math.log(2.0 * (1.0 + 2.0**-20) * n_params) + log_inv_eta)
    )
    reach = min(
        GRID_SLACK * sigma1 / math.sqrt(n_params),
        n * mu * gamma / (2.0 * math.sqrt(n_params) * t),
    )
    if not 0.0 < reach < math.inf:
        raise ValueError(
            "objective perturbation: the public constants leave no grid for its "
            f"noise (step bound {reach!r}); use bounds nearer 1."
        )
    _, exponent = math.frexp(reach)
    step = math.ldexp(1.0, exponent - 1)  # the largest power of two <= reach
    sigma = grid_gaussian_sigma(sigma1, step)
    return ObjectiveNoiseGrid(step, sigma, step * math.sqrt(n_params) * t)


def objective_perturbation_iterations(
    *,
    start_gradient,
    start_distance,
    gradient_bound,
    r_max,
    mu,
    smoothness,
    tol,
    gradient_error=0.0,
):
    """Public number of V-FISTA iterations after which the certificate provably holds.

    The solve of :func:`approximate_objective_perturbation` runs exactly this many
    iterations of :func:`~._certified.certified_minimize_fixed` and certifies once:
    stopping at the certificate made the count, hence the fit time, a function of
    the data and of the secret ``G`` (1 against 50 iterations on two neighbouring
    datasets, 7 to 23 over three draws of ``G`` on one dataset:
    tests/test_certified_solver_timing.py). The count must therefore certify for
    every dataset; it is the smallest ``N`` for which the argument below does.
    Every input is public.

    Write ``J`` for the perturbed objective, ``mu``-strongly convex and ``H``-smooth
    (``H = smoothness``), ``kappa = H / mu``, ``q = 1 - 1 / sqrt(kappa)``, ``x_0 =
    P_C(0)`` the public start and ``x*`` the minimiser over ``C``.

    1. Rate. V-FISTA's projected iterates satisfy ``J(x_N) - J* <= q^N B_0``,
       ``B_0 = J(x_0) - J* + mu ||x_0 - x*||^2 / 2`` (Beck 2017, Thm 10.42).
       Strong convexity of ``J`` between ``x_0`` and ``x*`` gives ``B_0 <= -<grad
       J(x_0), x* - x_0> <= g_0 ||x* - x_0||`` with ``g_0 = start_gradient >=
       ||grad J(x_0)||``, and ``||x* - x_0|| <= min(start_distance, g_0 / mu)``
       (both points lie in ``C``; and ``J(x_0) - J* >= mu ||x_0 - x*||^2 / 2`` by
       the optimality of ``x*`` over ``C``).
    2. Gradient mapping. The certificate at ``x_N`` (in ``C``) uses ``w+ = P_C(x_N
       - grad J(x_N) / H)``; sufficient decrease (Beck 2017, Lemma 10.4) gives
       ``||x_N - w+||^2 <= 2 (J(x_N) - J*) / H``.
    3. Residual. ``v = h(x_N) - h(w+)`` with ``h = H Id - grad J``; ``J - mu/2
       ||.||^2`` is convex and ``(H - mu)``-smooth, so by co-coercivity (Beck 2017,
       Thm 5.8) ``h`` is ``(H - mu)``-Lipschitz and the certified distance ``||v||
       / mu`` is at most ``(kappa - 1) ||x_N - w+||``.

    Together ``||v|| / mu <= (kappa - 1) sqrt(2 B_0 / H) q^(N/2)``. The certificate
    adds a rounding margin (:mod:`._certified`) of at most ``m = 64 eps_mach (2
    gradient_bound + 2 H r_max) / mu`` (both of its points lie in ``C``); the count
    asks the rate for half of what is left, ``(tol - m) / 2``, the other half
    covering the rounding of the iterates, which the exact-arithmetic rate ignores:

        N = ceil(2 ln((kappa - 1) sqrt(2 B_0 / H) / ((tol - m) / 2)) / -ln(q))

    about ``sqrt(kappa) ln(8 kappa B_0 / (mu tol^2))`` or less (``-ln q > 1 /
    sqrt(kappa)``):
    less than half the former cap of the early-stopping solver (``2 sqrt(kappa)
    ln(...) + 50``), whose factor 2 and additive 50 were slack on the same rate.
    This is a bound, not a measurement: the early-stopping solver usually needed
    far fewer iterations, but how many depended on the data and on ``G``; the
    public count pays for the worst case (``kappa`` is the public worst case too:
    the data's own curvature is private).

    Parameters
    ----------
    start_gradient : float
        Bound on ``||grad J(x_0)||``.
    start_distance : float
        Bound on ``max_{u in C} ||u - x_0||`` (the diameter of ``C``).
    gradient_bound : float
        Bound on ``||grad J||`` over ``C`` (rounding margin only).
    r_max : float
        ``max_{u in C} ||u||``.
    mu, smoothness : float
        Strong convexity and smoothness of ``J`` (``0 < mu <= smoothness``).
    tol : float
        Distance the certificate must reach.
    gradient_error : float, default=0.0
        Public bound on the computed gradient's absolute error, part of the
        certificate's margin (:mod:`._certified`).

    Returns
    -------
    int
    """
    H, mu = float(smoothness), float(mu)
    kappa = H / mu
    if kappa <= 1.0:  # a multiple of ||.||^2 plus a linear term: one step is exact
        return 1
    eps = np.finfo(float).eps
    margin = (
        _ROUNDING_FACTOR * eps * 2.0 * (gradient_bound + H * r_max)
        + float(gradient_error)
    ) / mu
    # Even at gamma's floor (objective_perturbation_constants) the margin is a
    # fraction of tol; should it not be (extreme delta or epsilon), a quarter of
    # tol is still asked of the rate: the certificate may then fail, which
    # raises and releases nothing.
    rate_tol = max(tol - margin, tol / 2.0) / 2.0
    g0 = float(start_gradient)
    bracket = g0 * min(float(start_distance), g0 / mu)
    ratio = (kappa - 1.0) * math.sqrt(2.0 * bracket / H) / rate_tol
    rate = -math.log1p(-1.0 / math.sqrt(kappa))
    return max(1, math.ceil(2.0 * math.log(max(ratio, 1.0)) / rate))


@dataclasses.dataclass(frozen=True)
class _PublicPlan:
    """Every public constant of one run of Algorithms 1/2 (no data read)."""

    shape: object
    n_params: int
    R_z: float
    R_aug: float
    R_y: float | None
    lipschitz: float
    smoothness: float
    r_max: float
    diameter: float
    constants: dict
    feasible: _ProductSet
    grid: ObjectiveNoiseGrid | None
    row_gradient_bound: float
    gradient_error: float


def _row_gradient_bound(loss, R_aug, r_max, R_y, n_features):
    """Public ``G >= |phi'(x~_i . w, y_i)| ||x~_i||_2`` at every point the
    certified solve evaluates: the grid of its exact gradient sums.

    Logistic and multinomial: ``loss.lipschitz R_aug``, at every ``w``. Squared:
    ``|x~ . w - y| <= R_aug ||w|| + R_y``, and the solve evaluates the iterates
    (in ``C``, ``||x_k|| <= R_max``), the certificate's points (in ``C``) and the
    extrapolated points ``x_k + m (x_k - x_{k-1})``, ``m < 1`` (Beck 2017,
    §10.7.7), of norm below ``3 R_max``: ``G = R_aug (3 R_max R_aug + R_y)``.
    Times :func:`~._mirror_descent.rounding_slack` (the clipped row's norm, the
    projection's and the products' roundings).
    """
    slack = rounding_slack(n_features)
    if R_y is None:
        return loss.lipschitz * R_aug * slack**2
    return R_aug * (3.0 * r_max * R_aug + R_y) * slack**3


def _gradient_error(design, bound, n_params, noise_norm, smoothness, r_max):
    """Public bound ``E`` on ``||computed grad J - grad J||_2`` (:mod:`._certified`):
    the data term's summation error (:func:`~._mirror_descent.summation_error`:
    every block's rounding and grid rounding of the exact sums, or the float
    sum's error), its predictions' rounding at the certified point, which lies
    in ``C`` (:func:`~._certified.prediction_error`: ``gamma_dim beta R_max``,
    the stored rows clipped to ``R_z``), the coefficients' evaluation from
    those predictions (:func:`~._certified.derivative_error`, ``K = n_params /
    dim`` outputs) and the two additions of ``G / n`` and ``2 c w`` (``2.01 u``
    of ``G`` and of ``||G|| / n``; the penalty's share is in the relative
    margin).
    """
    u = 2.0**-53
    return (
        summation_error(design, bound, n_params)
        + prediction_error(design.dim, smoothness, r_max)
        + derivative_error(bound, max(1, n_params // design.dim))
        + 2.01 * u * (bound + noise_norm)
    )


def _public_plan(design, loss, constraint, K, epsilon, delta, bounds, options):
    """The public phase of :func:`approximate_objective_perturbation`.

    ``bounds = (row_norm_bound, target_bound, intercept_bound,
    gaussian_width)``, ``options = (lam_obj, l2_penalty, opt_tol)``.
    """
    row_norm_bound, target_bound, intercept_bound, gaussian_width = bounds
    lam_obj, l2_penalty, opt_tol = options
    n, d, dim = design.n_samples, design.n_features, design.dim
    B = float(intercept_bound) if design.fit_intercept else None
    r_max, diam, width = _set_quantities(constraint, d, B, K)
    if gaussian_width is not None:
        width = float(gaussian_width)
    R_z = float(row_norm_bound)
    R_aug = math.hypot(R_z, 1.0) if design.fit_intercept else R_z
    R_y = None
    if loss.name == "squared":
        R_y = float(target_bound)
        L = R_aug * (r_max * R_aug + R_y)
    else:
        L = loss.lipschitz * R_aug
    # Worst-case constants over every record with ||x~|| <= R_aug: ||grad||_F <=
    # loss.lipschitz * ||x~|| (|phi'| <= 1 for logistic; ||p - e_y|| <= sqrt(2) for
    # the multinomial loss) and ||Hessian||_2 <= loss.smoothness * ||x~||^2 (1/4;
    # 1/2): module docstring.
    beta = loss.smoothness * R_aug**2
    n_params = dim * K
    G_row = _row_gradient_bound(loss, R_aug, r_max, R_y, d)
    # The summation's and the predictions' share of the certificate's margin
    # (the noise's share is in gamma's floor already: 1e3 eps 3 sigma1 sqrt(p) / n).
    error = _gradient_error(design, G_row, n_params, 0.0, beta, r_max)
    k = objective_perturbation_constants(
        n=n,
        dim=n_params,
        epsilon=epsilon,
        delta=delta,
        lipschitz=L,
        smoothness=beta,
        diameter=diam,
        r_max=r_max,
        gaussian_width=width,
        # k = 1, m = 2 for GLMs (z z^T; span{z, z'}); k = K - 1, m = 2K for the
        # multinomial loss (module docstring).
        hessian_rank=1 if K == 1 else K - 1,
        gradient_span_dim=2 if K == 1 else 2 * K,
        lam_obj=lam_obj,
        l2_penalty=l2_penalty,
        opt_tol=opt_tol,
        gradient_error=error,
    )
    grid = (
        objective_noise_grid(
            k["sigma1"], n_params, n, k["mu_J"], k["gamma"], epsilon, delta
        )
        if k["sigma1"] > 0
        else None
    )
    return _PublicPlan(
        shape=dim if K == 1 else (dim, K),
        n_params=n_params,
        R_z=R_z,
        R_aug=R_aug,
        R_y=R_y,
        lipschitz=L,
        smoothness=beta,
        r_max=r_max,
        diameter=diam,
        constants=k,
        feasible=_ProductSet(constraint, d, B),
        grid=grid,
        row_gradient_bound=G_row,
        gradient_error=error,
    )


def _auto_iterations(plan, loss, w0, n, epsilon, delta):
    """The public count of :func:`objective_perturbation_iterations` for ``plan``.

    ``||grad J(x_0)|| <= ||grad L^(x_0)|| + ||G|| / n + mu_J ||x_0||``. The loss
    part is ``L``, or ``R_aug (R_aug ||x_0|| + R_y)`` for the squared loss
    (``|<x~, x_0> - y| <= R_aug ||x_0|| + R_y`` at ``x_0`` rather than over all of
    ``C``). ``||G||`` is bounded by a public ``t`` exceeded with probability
    ``eta``, ``(1 + e^eps) eta <= 2^-64 delta``, whatever the data
    (:func:`_noise_norm_bound`): the count certifies for every dataset unless
    ``||G|| > t``, so a failure (nothing released) adds at most ``2^-64 delta`` to
    the delta of the release, below its float rounding.
    """
    k, grid, L, R_aug = plan.constants, plan.grid, plan.lipschitz, plan.R_aug
    mu_J = k["mu_J"]
    x0_norm = float(np.linalg.norm(w0))
    # ||G|| <= ||G_c|| + ||step R|| (objective_noise_grid).
    noise = (
        0.0
        if grid is None
        else (
            _noise_norm_bound(grid.sigma, plan.n_params, epsilon, delta)
            + grid.residual_bound
        )
        / n
    )
    loss_at_x0 = R_aug * (R_aug * x0_norm + plan.R_y) if loss.name == "squared" else L
    return objective_perturbation_iterations(
        start_gradient=loss_at_x0 + noise + mu_J * x0_norm,
        start_distance=plan.diameter,
        gradient_bound=L + noise + mu_J * plan.r_max,
        r_max=plan.r_max,
        mu=mu_J,
        smoothness=plan.smoothness + mu_J,
        tol=k["certify_tol"],
        gradient_error=plan.gradient_error + 2.01 * 2.0**-53 * noise,
    )


def _clipped_targets(y, loss, K, R_y):
    """Targets clipped to ``[-R_y, R_y]`` (squared loss; a function of one record),
    or class codes checked against the public ``K``."""
    y = np.asarray(y, dtype=float)
    if loss.name == "squared":
        y = np.clip(y, -R_y, R_y)
    elif K > 1:
        y = np.asarray(y, dtype=np.intp)
        if y.size and (y.min() < 0 or y.max() >= K):
            raise ValueError(f"multinomial labels must be in {{0, ..., {K - 1}}}.")
    return y


def _certified_solve(design, y, derivative, G, plan, w0, n_iter):
    """``theta_2``: ``n_iter`` V-FISTA steps on ``J`` (``design``: the clipped
    rows; noise ``G``), certified within ``gamma / 2`` of the exact minimiser or
    raising.

    The data term's gradients are summed exactly where the design can
    (:func:`~._mirror_descent.gradient_sum`, with the public bound
    ``plan.row_gradient_bound``: the same bits for dense rows in memory and dask
    rows), and the certificate adds their public error bound
    (:func:`_gradient_error`) to its residual.

    The solve runs the public count in full and certifies once at the end:
    stopping at the certificate took a number of iterations, hence a running
    time, that depended on the data and on ``G`` (see
    :func:`objective_perturbation_iterations`, which proves the count sufficient
    for every dataset unless ``||G||`` exceeds its public bound). A failure raises
    and releases nothing, with a message naming only public numbers (tol, the
    count). Not covered: the work of one projection onto ``C`` can still depend on
    the iterate (an l1 ball's projection returns early inside the ball and sorts a
    data-dependent number of entries).
    """
    n = design.n_samples
    k = plan.constants
    c_tot, mu_J = k["c_tot"], k["mu_J"]
    bound = plan.row_gradient_bound
    noise = G / n

    def value_and_grad(w, extended=False):
        grad = gradient_sum(design, w, derivative, bound, y, extended) / n
        return None, grad + noise + 2.0 * c_tot * w

    def certificate_gradient(w):
        # The certified point's predictions in extended precision: the
        # prediction_error term of plan.gradient_error assumes them.
        return value_and_grad(w, extended=True)[1]

    return certified_minimize_fixed(
        value_and_grad,
        plan.feasible.project,
        certificate_gradient=certificate_gradient,
        w0=w0,
        mu=mu_J,
        smoothness=plan.smoothness + mu_J,
        tol=k["certify_tol"],
        n_iter=n_iter,
        gradient_error=plan.gradient_error
        + 2.01 * 2.0**-53 * float(np.linalg.norm(noise)),
    )


def approximate_objective_perturbation(
    design,
    y,
    loss,
    constraint,
    *,
    budget,
    row_norm_bound=1.0,
    target_bound=1.0,
    intercept_bound=1.0,
    l2_penalty=0.0,
    lam_obj="auto",
    opt_tol="auto",
    gaussian_width=None,
    max_iter="auto",
    n_classes=2,
    rng,
):
    """App-ObjP (Algorithm 1) and its strongly convex form (Algorithm 2, ridge mode).

    Public phase (no data): ``L, beta`` from the loss and the enforced bounds
    (squared ``l = (z - y)^2 / 2``: ``L = R_z (R_max R_z + R_y)``, ``beta = R_z^2``;
    logistic: ``L = R_z``, ``beta = R_z^2 / 4``; multinomial (``K`` classes, ``W``
    of shape ``(dim, K)``): ``L = sqrt(2) R_z``, ``beta = R_z^2 / 2``,
    ``r = 2 (K - 1)``; with an intercept ``R_z`` becomes ``sqrt(R_z^2 + 1)`` and
    ``C`` becomes ``C x [-B, B]`` (``[-B, B]^K`` for the intercept row of ``W``)),
    ``r = 2`` for one output, ``c_tot``,
    ``sigma_1``, ``sigma_2`` and the certified distance ``gamma``
    (:func:`objective_perturbation_constants`). Private phase: rows clipped to
    ``||x_i||_2 <= R_z`` and targets to ``[-R_y, R_y]`` (squared loss), so the
    constants hold for every record; ``G`` drawn; ``J`` minimised by
    :func:`~._certified.certified_minimize_fixed` for the public number of
    iterations :func:`objective_perturbation_iterations`, always run in full (raises
    :class:`~skdpsco.exceptions.CertificationError` and releases nothing if
    ``||theta_2 - theta*|| <= gamma / 2`` is not certified after them); ``H``
    drawn; the projection released.

    ``l2_penalty = mu > 0`` selects Algorithm 2 in ridge form (the ridge folded into
    Algorithm 1's regulariser, nothing added when it suffices): the user objective
    ``L^ + (mu/2)||theta||^2`` with ``c_tot = max(mu/2, r beta/(eps n))``.
    All coordinates (the intercept too) are regularised: the Jacobian argument needs
    strong convexity in every direction.

    Parameters
    ----------
    design : LinearDesign
    y : ndarray of shape (n,)
        Targets (squared), labels in {0, 1} (logistic) or in {0, ..., K-1}
        (multinomial).
    loss : SquaredLoss, LogisticLoss or MultinomialLoss
    constraint : ConstraintSet
        Public set with exact ``project``, ``radius_l2``, ``diameter`` and
        ``gaussian_width``. For the multinomial loss ``W[:d]`` (shape ``(d, K)``)
        must lie in it in the matrix convention of :mod:`skdpsco._constraints`
        (module docstring).
    budget : AlgorithmBudget
        Its ``(epsilon, delta)``: ``epsilon > 0``; for ``epsilon > 1`` the scales
        use the derivation in :func:`objective_perturbation_constants` and the
        analytic Gaussian.
    row_norm_bound : float, default=1.0
        ``R_z``.
    target_bound : float, default=1.0
        ``R_y`` (squared loss).
    intercept_bound : float, default=1.0
        ``B`` (used when ``design.fit_intercept``).
    l2_penalty : float, default=0.0
    lam_obj : float or "auto"
    opt_tol : float or "auto"
        ``alpha_opt``; clamped up to a numerical floor.
    gaussian_width : float or None
        ``None``: ``constraint.gaussian_width(n_features)`` (utility only).
    max_iter : int or "auto"
        Public number of solver iterations, always run in full. ``"auto"``: the
        count the accelerated rate proves sufficient for every dataset
        (:func:`objective_perturbation_iterations`); a smaller int may fail to
        certify (raises, releases nothing).
    n_classes : int, default=2
        Public number of classes ``K`` (multinomial loss only).
    rng : numpy.random.Generator

    Returns
    -------
    SolverResult
        ``coef`` in ``C`` (``C x [-B, B]``), shape ``(dim,)`` or ``(dim, K)``
        (multinomial); records: the objective-perturbation
        release ``(eps/2, delta/2)`` and the Gaussian output perturbation.

    References
    ----------
    .. [1] Su, J., Zhao, C. and Wang, D. Differentially private stochastic convex
       optimization in (non)-Euclidean space revisited, Algorithms 1-2, Theorems 1-4.
    .. [2] Kifer, D., Smith, A. and Thakurta, A. (2012). Private convex empirical
       risk minimization and high-dimensional regression. COLT.
    """
    if loss.name not in _GLM_LOSSES:
        raise ValueError(
            "approximate objective perturbation supports twice-differentiable GLM "
            f"losses ({sorted(_GLM_LOSSES)}), got {loss.name!r}."
        )
    K = int(loss.n_outputs(n_classes))
    epsilon = check_real(
        budget.epsilon, "epsilon", low=0.0, low_open=True, allow_inf=True
    )
    delta = check_real(
        budget.delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True
    )
    n = design.n_samples
    plan = _public_plan(
        design,
        loss,
        constraint,
        K,
        epsilon,
        delta,
        (row_norm_bound, target_bound, intercept_bound, gaussian_width),
        (lam_obj, l2_penalty, opt_tol),
    )
    k, feasible = plan.constants, plan.feasible
    # Public start x_0 = P_C(0) (0 itself unless C excludes it, e.g. the simplex).
    w0 = feasible.project(np.zeros(plan.shape))
    if max_iter == "auto":
        max_iter = _auto_iterations(plan, loss, w0, n, epsilon, delta)

    # ---- private phase ----
    # Rows clipped to ||x_i||_2 <= R_z and stored (a map of each row), targets
    # to [-R_y, R_y] in the derivative's row map (and here in memory).
    design = design.row_mapped(RowClip(2.0, plan.R_z))
    if isinstance(y, np.ndarray):
        y = _clipped_targets(y, loss, K, plan.R_y)
    derivative = RowDerivative(loss, plan.R_y)
    # Objective perturbation: replacing one record moves n grad L^(theta*) by at
    # most 2L, inside a fixed subspace of dimension m (Theorem 1; sigma_1 above):
    # the exact minimiser's release is (eps/2, delta/2)-DP. G is drawn on a public
    # grid, a coupling away from the continuous Gaussian the theorem needs
    # (objective_noise_grid).
    objective_noise = PerturbationNoise(
        k["sigma1"],
        None if plan.grid is None else plan.grid.step,
        epsilon / 2.0,
        delta / 2.0,
        name="objective perturbation of the exact minimiser (SZW Thm 1)",
    )
    G = objective_noise.draw(plan.shape, rng)
    result = _certified_solve(design, y, derivative, G, plan, w0, int(max_iter))
    # Output perturbation: ||theta_2 - theta*(D, G)|| <= gamma/2 is certified, and
    # coupling G' so that theta*(D', G') = theta*(D, G) gives ||theta_2 - theta_2'||
    # <= 2 gamma: Gaussian mechanism of sensitivity 2 gamma (Frobenius
    # norm for a matrix; the coupling argument is the same in R^(dim K)).
    output = GaussianMechanism(
        2.0 * k["gamma"],
        k["sigma2"],
        name="output perturbation of the certified approximation (SZW Alg. 1 step 5)",
    )
    coef = feasible.project(output.release(result.w, rng))
    records = [objective_noise.record(), output.record()]
    return SolverResult(coef=coef, n_iter=int(max_iter), records=records)
