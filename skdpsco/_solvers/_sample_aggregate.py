"""Sample-and-aggregate with smooth sensitivity (Wang et al. 2020, Algorithm 1).

Non-private ERM is solved on ``m_sub`` random subsets of the records, the "centre of
attention" ``g`` of the ``m_sub`` solutions is picked, and a smooth upper bound
``S`` on that choice's local sensitivity is computed (Nissim, Raskhodnikova & Smith
2007, "NRS07"). The smooth bound is not the one printed in step 5 of the paper's
Algorithm 1, which is not smooth (item 3). ``g`` is then released by
propose-test-release on the smooth bound (item 4; Dwork & Lei 2009; Dwork & Roth
2014, Ch. 7): a pure-DP noisy upper bound ``S_hat`` of ``S`` is released first, and
``g`` goes through the grid Gaussian mechanism of :mod:`skdpsco.privacy` calibrated
to ``S_hat``. NRS07's own release, ``g + (S / gamma) N(0, I)`` (as in Wang et al.),
is a continuous draw with a data-dependent scale: no public grid can follow it, so
it is open to the floating-point attacks of Mironov (2012). It is not used.

Privacy argument (replace-one neighbours, ``n`` public)
-------------------------------------------------------
1. *Subsets.* The index sets ``S_1..S_m`` are drawn from the generator alone (no data
   value is read) and kept only if every index lies in at most
   ``s_NRS = floor(sqrt(m_sub))`` of them. Replacing one record therefore changes at
   most ``s_NRS`` of the subset solutions ``z_i``.
2. *Solutions in W.* Each ``z_i`` is a deterministic function of its own subset
   only (no warm start, no state shared between subsets); a non-finite ``z_i`` is
   replaced by 0 and every ``z_i`` is projected onto the public l2 ball
   ``W = {||w|| <= radius}``, so every pairwise distance is at most
   ``Lambda = 2 radius``. The paper's ``f`` is an exact minimiser over ``W``; an
   approximate solver, or a non-finite output on heavy-tailed data, would break
   this bound silently, so it is enforced as per-subset post-processing.
3. *Smooth bound.* ``S = 2 max_k rho_k e^{-beta k}`` with the order-statistic
   ``rho_k`` of ``_aggregate`` (*not* the "mean of the ``K`` largest"
   of Algorithm 1, step 5, which is not smooth: see that function) and
   ``beta = eps / (4 (d + ln(2/delta)))`` (:func:`nrs_gaussian_parameters`). For
   ``z, z'`` differing in at most ``s_NRS`` entries,
   ``||g(z) - g(z')|| <= 2 rho_0(z) <= S(z)`` (and ``<= S(z')``), and
   ``|ln S(z) / S(z')| <= beta``: ``S`` is a ``beta``-smooth upper bound on the
   local sensitivity of ``g`` (NRS07 §2).
4. *Release (propose-test-release).* Public split (:func:`release_parameters`):
   ``eps1 = eps / 4``, ``eps2 = eps - eps1``, ``delta1 = delta / 2`` and
   ``delta2 = delta / 2 - (1 + e^eps) tau`` with ``tau = d 2^-780``.

   a. *Floor.* ``S <- max(S, S_min)``, ``S_min >= 2^-40 Lambda`` (public): the max
      with a constant keeps ``S`` an upper bound and ``beta``-smooth.
   b. *Bound.* ``L`` = :class:`~skdpsco.privacy.LaplaceMechanism` of sensitivity
      ``beta' = beta (1 + 2^-20)`` (the factor covers the rounding of the computed
      ``ln S``) and scale ``b = beta' / eps1`` applied to ``ln S``:
      ``L = gamma_l (round(ln S / gamma_l) + Z)``, ``Z`` discrete Laplace with
      ``P[Z = z] ~ e^{-|z| / t}``, ``t = ceil(b (1 + 2^-10) / gamma_l)`` and
      ``gamma_l`` the l1 grid step of ``min(beta', b)``. It is pure
      ``eps1``-DP (Canonne, Kamath & Steinke 2020): for every grid value ``l``,
      ``P_z[L = l] <= e^{eps1} P_z'[L = l]``.
   c. *Margin.* ``P[Z <= -k] = e^{-k/t} / (1 + e^{-1/t}) <= e^{-k/t}`` and
      ``L >= ln S - gamma_l / 2 + gamma_l Z``, so with ``x = mu / gamma_l - 1/2``
      ``P[L + mu < ln S] <= P[Z < -x] <= e^{-x/t} <= delta1`` as soon as
      ``mu >= gamma_l t ln(1/delta1) + gamma_l / 2``; since
      ``gamma_l t <= b (1 + 2^-10) + gamma_l``, the public margin
      ``mu = (b (1 + 2^-10) + gamma_l) ln(1/delta1) + gamma_l`` suffices (the
      extra ``gamma_l / 2`` absorbs the rounding of ``exp``).
   d. *Proposed bound.* ``S_hat = min(max(e^{L + mu}, S_min), Lambda)``, a function
      of ``L`` alone. On ``E(z) = {l : e^{l + mu} >= S(z)}``,
      ``S_hat >= min(S(z), Lambda) >= ||g(z) - g(z')||`` (both centres lie in
      ``W``); ``P_z[L not in E(z)] <= delta1`` by (c).
   e. *Value.* ``G`` = :class:`~skdpsco.privacy.GaussianMechanism` of sensitivity
      ``S_hat`` and ``sigma = calibrate_analytic_gaussian(eps2, delta2, S_hat)``
      (Balle & Wang 2018) applied to ``g``. For a fixed ``l`` in ``E(z)`` the
      ideal (continuous) Gaussian mechanism is ``(eps2, delta2)``-DP between
      ``z`` and ``z'``; the grid rounding grows the sensitivity and the noise by
      the same factor ``1 + 2^-10`` (see
      :meth:`~skdpsco.privacy.GaussianMechanism.release`). Its grid and ``sigma``
      are functions of ``S_hat``, hence of ``L``.
   f. *Cases on L.* For every output set ``O``,
      ``P_z[O] = sum_l P_z[L = l] P[G_{z,l} in O]
      <= delta1 + sum_{l in E(z)} P_z[L = l] (e^{eps2} P[G_{z',l} in O] + delta2)
      <= e^{eps1 + eps2} sum_l P_z'[L = l] P[G_{z',l} in O] + delta1 + delta2
      = e^eps P_z'[O] + delta1 + delta2``
      (only the bound at ``z`` is used, so the argument is symmetric). The
      discrete Laplace sampler is exact and the grid Gaussian's ``d`` integer
      draws are within total variation ``tau = d 2^-780`` of their ideal law
      (Peikert's convolution theorem, see
      :meth:`~skdpsco.privacy.GaussianMechanism.release`), which adds
      ``(1 + e^eps) tau`` to delta: the release is ``(eps, delta)``-DP with
      ``delta1 + delta2 + (1 + e^eps) tau <= delta``.

   Nothing here restricts epsilon (NRS07's Gaussian calibration was a
   small-epsilon result, certified only up to about ``eps = 15``); only
   ``(1 + e^eps) tau`` must stay below ``delta / 4``, about ``eps <= 500``.

The release is therefore one ``(eps, delta)``-DP mechanism: a single
``MechanismRecord(kind="approx_dp")``. ``S``, ``S_hat``, the ``z_i`` and ``i*``
never leave this module: ``S_hat`` is an ``eps1``-DP value already inside the
guarantee, but releasing ``S`` (or the ``z_i``) would be an unaccounted release.

Cost and memory
---------------
Pairwise distances are computed in row blocks of at most ``_CHUNK_ENTRIES`` (2**22
doubles, 32 MiB) and partially sorted in place; besides the block, the order
statistics table holds ``m_sub * (k* + 2)`` doubles with ``k* ~ sqrt(m_sub) / 2``
(about 45 MiB at the cap). Time is ``O(m_sub^2 d)``; ``m_sub`` above
:data:`MAX_N_SUBSETS` is refused. The subset solves gather at most
``_CHUNK_ENTRIES`` feature entries per batch of subsets.

References
----------
.. [1] Wang, D., Xiao, H., Devadas, S. and Xu, J. (2020). On differentially private
   stochastic convex optimization with heavy-tailed data. ICML. Algorithm 1.
.. [2] Nissim, K., Raskhodnikova, S. and Smith, A. (2007). Smooth sensitivity and
   sampling in private data analysis. STOC. §2 (smooth bounds, admissible noise),
   §3/§4 (sample and aggregate, Theorem 4.2).
.. [3] Dwork, C. and Lei, J. (2009). Differential privacy and robust statistics.
   STOC (propose-test-release).
.. [4] Dwork, C. and Roth, A. (2014). The algorithmic foundations of differential
   privacy. Foundations and Trends in TCS 9(3-4), Ch. 7 (propose-test-release).
.. [5] Canonne, C. L., Kamath, G. and Steinke, T. (2020). The discrete Gaussian
   for differential privacy. NeurIPS (discrete Laplace and Gaussian samplers).
.. [6] Balle, B. and Wang, Y.-X. (2018). Improving the Gaussian mechanism for
   differential privacy: analytical calibration and optimal denoising. ICML.
.. [7] Mironov, I. (2012). On significance of the least significant bits for
   differential privacy. CCS.
"""

import math
from numbers import Integral
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy import stats
from scipy.spatial.distance import cdist

from .._losses import get_loss
from ..exceptions import PrivacyBudgetError
from ..privacy._accounting import calibrate_analytic_gaussian, exact_split
from ..privacy._discrete import GAUSSIAN_TV_PER_DRAW, _uniform_below, uniform_sample
from ..privacy._mechanisms import (
    GRID_SLACK,
    GaussianMechanism,
    LaplaceMechanism,
    grid_step,
    propose_test_release_record,
)
from ..utils._validation import check_int, check_real
from ._result import SolverResult

__all__ = [
    "MAX_N_SUBSETS",
    "ReleaseParameters",
    "centre_of_attention",
    "draw_subsets",
    "minimum_n_subsets",
    "minimum_samples",
    "nrs_gaussian_parameters",
    "project_rows_l2_ball",
    "release_parameters",
    "sample_and_aggregate",
]

#: Largest number of subsets accepted. The aggregation takes O(m_sub^2 d) time (exact
#: pairwise distances, then a sort of each row's upper half): for d = 11 on one core
#: about 2 s at m_sub = 10,000, 15 s at 30,000 and 45 s at the cap (linear in d).
#: Larger requests are refused with a ValueError.
MAX_N_SUBSETS = 50_000

#: Doubles per block of the pairwise-distance matrix and per batch of gathered
#: subset rows (32 MiB).
_CHUNK_ENTRIES = 2**22

#: Rounds of the subset rejection loop before giving up (the loop is only entered
#: when a public estimate says a round succeeds with probability >= 5%).
_MAX_SUBSET_ROUNDS = 500
_MIN_ACCEPT_PROBABILITY = 0.05

# ------------------------------------------------------------- public parameters


def _check_epsilon_delta(epsilon, delta, *, allow_inf=True):
    epsilon = check_real(
        epsilon, "epsilon", low=0.0, low_open=True, allow_inf=allow_inf
    )
    delta = check_real(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True)
    return epsilon, delta


def _check_dim(dim):
    return check_int(dim, "dim", low=1)


def nrs_gaussian_parameters(epsilon, delta, dim):
    """``(gamma, beta)`` of the Gaussian smooth-sensitivity mechanism.

    ``gamma = eps / (5 sqrt(2 ln(2/delta)))`` and ``beta = eps / (4 (d +
    ln(2/delta)))`` (Wang et al. 2020, Algorithm 1, line 1; NRS07 Gaussian example).
    ``d`` counts every released parameter (the intercept and all outputs).

    Only ``beta`` is used: it is the smoothness of the bound ``S`` (and, through
    :func:`minimum_n_subsets`, the paper's sample-size rule). ``gamma`` is the
    paper's noise ratio ``S / gamma`` of NRS07's continuous Gaussian release, which
    :func:`sample_and_aggregate` replaces by a grid release (see the module
    docstring); it is returned as the reference the new noise is compared with.

    Examples
    --------
    >>> gamma, beta = nrs_gaussian_parameters(1.0, 1e-5, 10)
    >>> round(gamma, 7), round(beta, 7)
    (0.0404787, 0.0112582)
    """
    epsilon, delta = _check_epsilon_delta(epsilon, delta)
    dim = _check_dim(dim)
    log_term = math.log(2.0 / delta)
    gamma = epsilon / (5.0 * math.sqrt(2.0 * log_term))
    beta = epsilon / (4.0 * (dim + log_term))
    return gamma, beta


#: Share of epsilon spent on the noisy bound ``L`` on ``ln S``.
_BOUND_EPSILON_SHARE = 0.25
#: Floor of the smooth bound relative to the diameter (``S_min >= 2^-40 Lambda``):
#: keeps ``ln S`` finite and the Gaussian's noise positive (see
#: :func:`_bound_floor`).
_RELATIVE_FLOOR = 2.0**-40
#: Relative allowance on ``beta`` for the rounding of the computed ``ln S``: the
#: smoothness holds in exact arithmetic; the computed logarithms differ from it
#: by a few units in the last place, far below ``2^-20 beta`` (``beta >= 1/224``
#: whenever ``m_sub <= MAX_N_SUBSETS``).
_LOG_SMOOTHNESS_SLACK = 2.0**-20


class ReleaseParameters(NamedTuple):
    """Public constants of the propose-test-release of :func:`sample_and_aggregate`.

    Attributes
    ----------
    beta : float
        Smoothness of ``S`` (:func:`nrs_gaussian_parameters`).
    epsilon_bound, delta_bound : float
        ``eps1 = eps / 4`` spent on ``L``, the noisy ``ln S``, and
        ``delta1 = delta / 2``, the probability that ``L + margin < ln S``.
    epsilon_value, delta_value : float
        ``(eps2, delta2)`` of the grid Gaussian release of ``g``:
        ``eps2 = eps - eps1``, ``delta2 = delta / 2 - (1 + e^eps) d 2^-780``.
    bound_mechanism : LaplaceMechanism
        Sensitivity ``beta (1 + 2^-20)``, scale ``b = beta (1 + 2^-20) / eps1``.
    log_margin : float
        ``mu = (b (1 + 2^-10) + gamma_l) ln(1 / delta1) + gamma_l``, with
        ``gamma_l`` the grid step of ``bound_mechanism``.
    sampler_delta : float
        ``2 (1 + e^eps) d 2^-780``, at least the ``(1 + e^eps) tau`` of the grid
        Gaussian's total variation.
    """

    beta: float
    epsilon_bound: float
    delta_bound: float
    epsilon_value: float
    delta_value: float
    bound_mechanism: LaplaceMechanism
    log_margin: float
    sampler_delta: float


def release_parameters(epsilon, delta, dim):
    """The public constants of the private release (module docstring, item 4).

    ``eps1 = eps / 4`` and ``delta1 = delta / 2`` release an upper bound on the
    smooth bound ``S``; ``eps2 = eps - eps1`` and ``delta2 = delta / 2 - (1 +
    e^eps) tau`` release the centre of attention, ``tau = d 2^-780`` being the
    total variation of the grid Gaussian's ``d`` draws from their ideal law
    (:meth:`~skdpsco.privacy.GaussianMechanism.release`). Valid for every finite
    ``epsilon`` with ``(1 + e^eps) tau <= delta / 4`` (about ``eps <= 500``).

    Parameters
    ----------
    epsilon : float
        Finite, ``> 0``.
    delta : float
        In ``(0, 1)``.
    dim : int
        Number of released parameters ``d``.

    Returns
    -------
    ReleaseParameters

    Raises
    ------
    ValueError
        Invalid arguments, or an epsilon so large that the grid Gaussian's total
        variation does not fit in delta (public values only).

    Examples
    --------
    >>> p = release_parameters(1.0, 1e-5, 10)
    >>> p.epsilon_bound, p.epsilon_value, p.delta_bound
    (0.25, 0.75, 5e-06)
    >>> round(p.bound_mechanism.scale, 5), round(p.log_margin, 4)
    (0.04503, 0.5503)
    """
    epsilon, delta = _check_epsilon_delta(epsilon, delta, allow_inf=False)
    dim = _check_dim(dim)
    _, beta = nrs_gaussian_parameters(epsilon, delta, dim)
    eps1 = epsilon * _BOUND_EPSILON_SHARE
    eps2 = exact_split(epsilon, eps1)
    delta1 = delta / 2.0
    # Twice (1 + e^eps) tau: an upper bound whatever the rounding of exp.
    tv_slack = 2.0 * (1.0 + math.exp(min(epsilon, 700.0))) * dim * GAUSSIAN_TV_PER_DRAW
    if not tv_slack <= delta / 4.0:
        raise ValueError(
            f"epsilon={epsilon:g} is too large for delta={delta:g}: the grid "
            "Gaussian's total variation slack (1 + e^epsilon) d 2^-780 does not fit "
            "in delta (such an epsilon promises nothing anyway)."
        )
    delta2 = exact_split(delta, delta1, tv_slack)
    sensitivity = beta * (1.0 + _LOG_SMOOTHNESS_SLACK)
    scale = sensitivity / eps1
    bound = LaplaceMechanism(sensitivity, scale, name="sample-and-aggregate ln S")
    # The grid step LaplaceMechanism.release uses for one value.
    step = grid_step(min(sensitivity, scale), 1, norm="l1")
    margin = (scale * (1.0 + GRID_SLACK) + step) * math.log(1.0 / delta1) + step
    return ReleaseParameters(beta, eps1, delta1, eps2, delta2, bound, margin, tv_slack)


def minimum_n_subsets(epsilon, delta, dim):
    """Smallest ``m_sub`` accepted by default.

    ``max(ceil(16 (d + ln(2/delta))^2 / eps^2), ceil(4 d^2 / eps^2) + 1)``: the
    paper's conditions ``ceil(s_NRS / beta) <= m_sub`` (Algorithm 1) and
    ``eps > 2 d / sqrt(m_sub)`` (Theorem 1). With the corrected smooth bound both
    are utility conditions, not privacy ones (see ``_aggregate``).

    Examples
    --------
    >>> minimum_n_subsets(1.0, 1e-5, 10)
    7890
    """
    epsilon, delta = _check_epsilon_delta(epsilon, delta)
    dim = _check_dim(dim)
    if math.isinf(epsilon):
        return 1
    log_term = math.log(2.0 / delta)
    paper = math.ceil(16.0 * (dim + log_term) ** 2 / epsilon**2)
    theorem = math.ceil(4.0 * dim**2 / epsilon**2) + 1
    return max(paper, theorem)


def _default_subset_size_min(dim):
    return max(10 * dim, dim + 1)


def minimum_samples(epsilon, delta, dim, subset_size_min=None, n_subsets=None):
    """Smallest ``n`` for which :func:`sample_and_aggregate` runs.

    ``n_min = m_sub * subset_size_min`` with ``m_sub`` = ``n_subsets`` or
    :func:`minimum_n_subsets` and ``subset_size_min`` defaulting to
    ``max(10 d, d + 1)`` (a default of this library: each subset needs enough rows
    for its ERM to be strongly convex, the ``n >= n_alpha`` of Wang et al. 2020,
    Lemma 1). ``d`` counts every released parameter.

    Examples
    --------
    >>> minimum_samples(1.0, 1e-5, 10)
    789000
    """
    dim = _check_dim(dim)
    m_sub = minimum_n_subsets(epsilon, delta, dim) if n_subsets is None else n_subsets
    if subset_size_min is None:
        subset_size_min = _default_subset_size_min(dim)
    if (
        isinstance(subset_size_min, bool)
        or not isinstance(subset_size_min, Integral)
        or subset_size_min < 1
    ):
        raise ValueError(
            f"subset_size_min must be an integer >= 1, got {subset_size_min!r}."
        )
    return int(m_sub) * int(subset_size_min)


# ------------------------------------------------------------ smooth sensitivity


def _first_rank(m_sub, s_nrs):
    """``t0 = ceil((m + s) / 2) + 1`` (Algorithm 1, step 4); ``2 t0 - s > m``."""
    return (m_sub + s_nrs + 1) // 2 + 1


def _tail_index(m_sub, s_nrs, t0):
    """``k*``: the smallest ``k >= 0`` with ``t0 + (k + 1) s > m`` (rho_k = Lambda)."""
    return max(0, (m_sub - t0) // s_nrs)


def _check_points(Z):
    Z = np.asarray(Z, dtype=float)
    if Z.ndim != 2 or Z.shape[0] < 1:
        raise ValueError(f"Z must be a non-empty 2-D array, got shape {Z.shape}.")
    if not np.all(np.isfinite(Z)):
        raise ValueError("Z must be finite (sanitise and project the solutions first).")
    return Z


def _distance_order_statistics(Z, ranks, fill, chunk_entries=_CHUNK_ENTRIES):
    """``r_i(t)`` for every row ``i`` of ``Z`` and every rank ``t`` in ``ranks``.

    ``r_i(t)`` is the ``t``-th smallest of ``{||z_i - z_j|| : j = 1..m}`` (``j = i``
    counts, at distance 0; ranks are 1-based) and ``fill`` once ``t > m``. Distances
    are computed directly (``scipy.spatial.distance.cdist``, no Gram-matrix
    cancellation), ``max(1, chunk_entries // m)`` rows at a time, and partially
    sorted in place: peak memory is one block plus the ``(m, len(ranks))`` result.
    """
    m = Z.shape[0]
    ranks = np.asarray(ranks, dtype=np.intp)
    out = np.full((m, ranks.size), float(fill))
    inside = np.flatnonzero(ranks <= m)
    if inside.size == 0:
        return out
    cols = ranks[inside] - 1
    low = int(cols.min())
    rows = max(1, int(chunk_entries) // m)
    for start in range(0, m, rows):
        stop = min(m, start + rows)
        block = cdist(Z[start:stop], Z)
        # Every requested rank is >= the smallest one: select it, then sort the
        # tail in place (faster than a many-kth partition, same result).
        block.partition(low, axis=1)
        if cols.size > 1:
            block[:, low:].sort(axis=1)
        out[start:stop, inside] = block[:, cols]
    return out


def _smooth_bound_from_table(R, s_nrs, beta, diameter):
    """``S`` from the table ``R[:, k] = r_i(t0 + (k + 1) s)``, ``k = 0..k*-1``."""
    k_star = R.shape[1]
    S_half = diameter * math.exp(-beta * k_star)  # rho_{k*} = Lambda
    if k_star:
        # rho_k = the ((k + 1) s + 1)-th smallest of column k (1-based), capped at
        # Lambda: a distance between points of W never exceeds it in exact
        # arithmetic, so the cap only removes rounding.
        ordered = np.sort(np.minimum(R, diameter), axis=0)
        k = np.arange(k_star)
        rho = ordered[(k + 1) * s_nrs, k]
        S_half = max(S_half, float(np.max(rho * np.exp(-beta * k))))
    return 2.0 * S_half


def centre_of_attention(Z, t0, *, chunk_entries=_CHUNK_ENTRIES):
    """The solution ``z_{i*}`` with ``i* = argmin_i r_i(t0)`` (first on ties).

    ``r_i(t0)`` is the distance from ``z_i`` to its ``t0``-th nearest solution
    (itself included). Returns a copy of the row, never the index.
    """
    Z = _check_points(Z)
    if isinstance(t0, bool) or not isinstance(t0, Integral) or t0 < 1:
        raise ValueError(f"t0 must be an integer >= 1, got {t0!r}.")
    r = _distance_order_statistics(Z, [t0], np.inf, chunk_entries)[:, 0]
    return Z[int(np.argmin(r))].copy()


def _aggregate(Z, s_nrs, beta, diameter):
    """``(g, S)``: the centre of attention and the corrected beta-smooth bound.

    One pass over the pairwise distances gives both ``g = z_{i*}``,
    ``i* = argmin_i r_i(t0)`` (as :func:`centre_of_attention`), and
    ``S = 2 max_{k >= 0} rho_k e^{-beta k}``, where ``rho_k`` is the
    ``((k + 1) s + 1)``-th smallest of ``{r_1(t), ..., r_m(t)}`` at
    ``t = t0 + (k + 1) s``, ``t0 = ceil((m + s) / 2) + 1``, and ``rho_k = Lambda``
    (``diameter``) once ``t > m``; the max stops at that first ``k = k*``.

    Why ``S`` is a beta-smooth upper bound on the local sensitivity of ``g`` (NRS07
    §2): for ``z'`` differing from ``z`` in at most ``s`` entries, with ``U`` the
    unchanged indices (``|U| >= m - s``), the ``t0``-balls of both centres share a
    point (``2 t0 - s > m``) and ``r'_c(t0) <= r_c(t0 + s)`` for ``c`` in ``U``, so
    ``||g(z) - g(z')|| <= 2 min_{c in U} r_c(t0 + s) <= 2 rho_0(z)``; iterating
    bounds the local sensitivity at distance ``k`` by ``2 rho_k``, and
    ``rho_k(z) <= rho_{k+1}(z')`` makes ``S`` beta-smooth. The paper's "mean of the
    ``ceil(s / beta)`` largest ``r_i(t)``" printed in Algorithm 1, step 5, is *not*
    smooth: with ``m - s`` solutions at 0 and ``s`` at distance ``R``, which one
    record moves to 0, ``S(z) / S(z')`` is far above ``e^beta`` once ``m`` is large
    (a test checks this counterexample).

    ``Z`` must lie in a ball of diameter ``diameter`` (:func:`_release_solutions`
    projects it first); ``s_nrs`` is the number of entries one record can change.
    """
    m = Z.shape[0]
    t0 = _first_rank(m, s_nrs)
    k_star = _tail_index(m, s_nrs, t0)
    ranks = np.concatenate([[t0], t0 + (np.arange(k_star) + 1) * s_nrs])
    R = _distance_order_statistics(Z, ranks, diameter)
    g = Z[int(np.argmin(R[:, 0]))].copy()
    return g, _smooth_bound_from_table(R[:, 1:], s_nrs, beta, diameter)


# ------------------------------------------------------------------------ subsets


def _draw_subsets_once(n, m, k, rng):
    """``m`` independent uniform ``k``-subsets of ``range(n)``, rows sorted."""
    if k == n:
        return np.tile(np.arange(n), (m, 1))
    if k * (k - 1) <= 2 * n:
        # Uniform ordered k-tuples, a row redrawn while it has a repeat: conditioned
        # on distinct entries each row is a uniform k-subset. At most one repeated
        # pair is expected per row, so a row is accepted with probability >~ 1/e.
        idx = np.sort(_uniform_below(rng, n, (m, k)), axis=1)
        bad = np.flatnonzero(np.any(idx[:, 1:] == idx[:, :-1], axis=1))
        while bad.size:
            redo = np.sort(_uniform_below(rng, n, (bad.size, k)), axis=1)
            idx[bad] = redo
            bad = bad[np.any(redo[:, 1:] == redo[:, :-1], axis=1)]
        return idx
    return np.stack([np.sort(uniform_sample(rng, n, k)) for _ in range(m)])


def draw_subsets(n, m, k, s_nrs, rng):
    """Algorithm 1's subsampling: ``m`` random ``k``-subsets, multiplicity ``<= s``.

    The rejection loop of step 2: draw all ``m`` subsets (independent, uniform,
    without replacement) and start again unless every index is in at most ``s_nrs``
    of them.
    Only indices are drawn, never data, so the loop (and any error it raises) is
    data-independent. A round is accepted with probability at most
    ``(1 - P(Bin(m, k/n) > s))^n`` (the counts are negatively associated); if that
    public bound is below 5% the loop is refused up front.

    Returns
    -------
    ndarray of shape (m, k), dtype intp
    """
    if m * k > n * s_nrs:
        raise ValueError(
            f"{m} subsets of {k} rows cannot fit {n} records at most {s_nrs} times."
        )
    p_exceed = float(stats.binom.sf(s_nrs, m, k / n))
    log_accept = n * math.log1p(-p_exceed) if p_exceed < 1 else -math.inf
    if log_accept < math.log(_MIN_ACCEPT_PROBABILITY):
        raise ValueError(
            f"Sample-and-aggregate: {m} random subsets of {k} of {n} rows almost never "
            f"have every row in at most s_NRS={s_nrs} subsets (acceptance probability "
            f"<= {math.exp(log_accept):.2g}); use more subsets (n_subsets >= 100 keeps "
            "it near 1)."
        )
    for _ in range(_MAX_SUBSET_ROUNDS):
        idx = _draw_subsets_once(n, m, k, rng)
        if np.bincount(idx.ravel(), minlength=n).max() <= s_nrs:
            return idx
    # Reached with probability below 1e-11 once the check above passed.
    raise ValueError(  # pragma: no cover
        "Sample-and-aggregate: no admissible subset draw in "
        f"{_MAX_SUBSET_ROUNDS} rounds."
    )


# ------------------------------------------------------------- per-subset solver


def project_rows_l2_ball(Z, radius):
    """Replace non-finite rows by 0, then project every row onto the l2 ball.

    Per-row post-processing (``Lambda = 2 radius`` needs it): after it every row has
    norm ``<= radius``, even for entries near the float limit (the norm is computed
    on the row scaled by its largest entry).
    """
    Z = np.array(Z, dtype=float)
    Z[~np.all(np.isfinite(Z), axis=1)] = 0.0
    scale = np.max(np.abs(Z), axis=1) if Z.shape[1] else np.zeros(Z.shape[0])
    safe = np.where(scale > 0, scale, 1.0)
    unit = Z / safe[:, None]  # entries in [-1, 1]: its norm cannot overflow
    unit_norm = np.linalg.norm(unit, axis=1)
    outside = safe * unit_norm > radius
    if np.any(outside):
        Z[outside] = unit[outside] * (radius / unit_norm[outside])[:, None]
        # Rounding can leave a projected row an ulp outside: shrink it once more.
        again = np.linalg.norm(Z, axis=1) > radius
        Z[again] *= 1.0 - 2.0**-50
    return Z


def _largest_eigenvalues(G):
    """Largest eigenvalue of each symmetric ``G[b]`` (entries in [-1, 1]).

    If LAPACK fails on the batch, each matrix is retried alone and a failed one
    falls back to its trace (an upper bound for PSD matrices): the value of subset
    ``b`` always depends on ``G[b]`` only.
    """
    try:
        return np.linalg.eigvalsh(G)[:, -1]
    except np.linalg.LinAlgError:
        out = np.empty(G.shape[0])
        for b in range(G.shape[0]):
            try:
                out[b] = np.linalg.eigvalsh(G[b])[-1]
            except np.linalg.LinAlgError:
                out[b] = np.trace(G[b])
        return out


def _fista_batch(Xb, yb, loss, *, l2_penalty, radius, n_outputs, fit_intercept, n_iter):
    """Projected FISTA on each subset's penalised ERM, ``n_iter`` iterations.

    ``Xb`` (B, k, p) holds the subsets' rows with the intercept column, ``yb``
    (B, k) their targets. Subset ``b`` minimises ``(1/k) sum loss + (lambda/2)
    ||W_pen||^2`` over ``{||W||_F <= radius}`` from ``W = 0`` with step ``1/L_b``,
    ``L_b = loss.smoothness * lambda_max(X_b^T X_b / k) + lambda``. ``L_b`` reads
    subset ``b``'s data, which is fine: privacy needs ``f`` deterministic and
    subset-local, not data-independent. Every operation is per subset (batched
    linear algebra), so subset ``b``'s result never depends on another subset.
    """
    B, k, p = Xb.shape
    K = n_outputs
    with np.errstate(all="ignore"):
        scale = np.max(np.abs(Xb), axis=(1, 2))
        ok = np.isfinite(scale)
        safe = np.where(ok & (scale > 0), scale, 1.0)
        Xs = np.where(ok[:, None, None], Xb / safe[:, None, None], 0.0)
        Gs = np.matmul(Xs.transpose(0, 2, 1), Xs) / k  # entries in [-1, 1]
        L = loss.smoothness * _largest_eigenvalues(Gs) * safe**2 + l2_penalty
        step = np.where(
            ok & np.isfinite(L) & (L > 0), 1.0 / np.where(L > 0, L, 1.0), 0.0
        )
        pen = np.ones((p, 1))
        if fit_intercept:
            pen[p - 1] = 0.0
        pen = l2_penalty * pen

        if loss.name == "squared":
            G = Gs * (safe**2)[:, None, None]
            c = np.matmul(Xb.transpose(0, 2, 1), yb[:, :, None]) / k

            def grad(W):
                return np.matmul(G, W) - c + pen * W

        else:
            y_flat = yb.reshape(-1)

            def grad(W):
                Zp = np.matmul(Xb, W)  # (B, k, K)
                Zp = np.nan_to_num(Zp, nan=0.0, posinf=1e300, neginf=-1e300)
                z = Zp.reshape(-1) if K == 1 else Zp.reshape(-1, K)
                U = np.asarray(loss.derivative(z, y_flat), dtype=float)
                U = U.reshape(B, k, K)
                return np.matmul(Xb.transpose(0, 2, 1), U) / k + pen * W

        def project(W):
            norm = np.sqrt(np.sum(W * W, axis=(1, 2)))
            factor = np.where(
                norm > radius, radius / np.where(norm > 0, norm, 1.0), 1.0
            )
            return W * factor[:, None, None]

        W = np.zeros((B, p, K))
        V = W
        t = 1.0
        step3 = step[:, None, None]
        for _ in range(n_iter):
            W_new = project(V - step3 * grad(V))
            t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
            V = W_new + ((t - 1.0) / t_new) * (W_new - W)
            W, t = W_new, t_new
        W[~ok] = 0.0
    return W.reshape(B, p * K)


def _resolve_solver(loss_or_solver):
    """``("loss", loss_object)`` or ``("callable", solver)``."""
    if isinstance(loss_or_solver, str):
        return "loss", get_loss(loss_or_solver)
    if hasattr(loss_or_solver, "derivative") and hasattr(loss_or_solver, "smoothness"):
        return "loss", loss_or_solver
    if callable(loss_or_solver):
        return "callable", loss_or_solver
    raise TypeError(
        "loss must be a loss name, a loss object from skdpsco._losses or a callable "
        f"subset solver, got {type(loss_or_solver).__name__}."
    )


def _solve_subsets(
    X, y, subsets, kind, solver, *, fit_intercept, n_outputs, l2_penalty, radius, n_iter
):
    """The ``(m, d)`` matrix of subset solutions ``z_i`` (not yet sanitised)."""
    m, k = subsets.shape
    n_features = X.shape[1]
    p = n_features + int(fit_intercept)
    d = p * n_outputs
    Z = np.empty((m, d))
    if kind == "callable":
        for i in range(m):
            rows = subsets[i]
            try:
                w = np.asarray(solver(X[rows], y[rows]), dtype=float)
            except (ArithmeticError, ValueError):
                # A subset whose solver fails gets the fixed point 0: a per-subset,
                # deterministic outcome, never an error that would reveal the data.
                Z[i] = 0.0
                continue
            if w.size != d:
                raise ValueError(
                    f"The subset solver must return {d} parameters "
                    f"(shape ({p},) or ({p}, {n_outputs})), got shape {w.shape}."
                )
            Z[i] = w.reshape(-1)
        return Z
    batch = max(1, _CHUNK_ENTRIES // max(1, k * p))
    for start in range(0, m, batch):
        stop = min(m, start + batch)
        rows = subsets[start:stop].reshape(-1)
        block = X[rows]
        block = (
            block.toarray() if sp.issparse(block) else np.asarray(block, dtype=float)
        )
        if fit_intercept:
            block = np.hstack([block, np.ones((block.shape[0], 1))])
        Xb = block.reshape(stop - start, k, p)
        yb = np.asarray(y)[rows].reshape(stop - start, k)
        Z[start:stop] = _fista_batch(
            Xb,
            yb,
            solver,
            l2_penalty=l2_penalty,
            radius=radius,
            n_outputs=n_outputs,
            fit_intercept=fit_intercept,
            n_iter=n_iter,
        )
    return Z


# ------------------------------------------------------------------------- solver


def _bound_floor(params, diameter, dim):
    """Public floor ``S_min`` of the smooth bound: ``2^-40 Lambda``, raised to
    ``2^-40 Lambda sqrt(d) / min(1, c)`` (``c = sigma / S_hat`` of the value
    release, public) so that the grid of the release, whose step is about
    ``2^-10 min(S_hat, sigma) / sqrt(d)``, spans the ball within its ``2^52``
    steps (a smaller floor clamped large coordinates toward 0 at large epsilon).
    Any public floor keeps ``max(S, S_min)`` a ``beta``-smooth upper bound."""
    c = calibrate_analytic_gaussian(params.epsilon_value, params.delta_value, 1.0)
    scale = max(1.0, math.sqrt(dim) / min(1.0, c))
    return min(_RELATIVE_FLOOR * diameter * scale, diameter)


def _release_bound(S, params, diameter, rng, dim=1):
    """``S_hat``: a private upper bound on the smooth bound ``S`` (module docstring,
    items 4a-4d).

    Floors ``S`` at ``S_min`` (:func:`_bound_floor`), releases ``L`` = ``ln S`` plus
    discrete Laplace noise on its grid (``params.bound_mechanism``, pure
    ``eps1``-DP) and returns ``min(max(e^{L + mu}, S_min), diameter)`` with the
    public margin ``mu = params.log_margin``: ``S_hat < min(S, diameter)`` with
    probability at most ``delta1``. Computed in log space: no overflow, no
    data-dependent error.
    """
    floor = _bound_floor(params, diameter, dim)
    log_S = math.log(max(float(S), floor))
    L = float(params.bound_mechanism.release(np.array([log_S]), rng)[0])
    log_hat = L + params.log_margin
    if log_hat >= math.log(diameter):
        return diameter
    if log_hat <= math.log(floor):
        return floor
    return min(max(math.exp(log_hat), floor), diameter)


def _release_centre(g, S, params, diameter, rng):
    """``(noisy, S_hat, sigma)``: the grid Gaussian release of ``g`` at the privately
    released sensitivity ``S_hat`` (module docstring, items 4d-4e).

    ``noisy`` lies on the public grid of
    :meth:`~skdpsco.privacy.GaussianMechanism.release` for ``(S_hat, sigma)``,
    ``sigma = calibrate_analytic_gaussian(eps2, delta2, S_hat)``. Only ``noisy``
    may leave :func:`nrs_release`; ``S_hat`` and ``sigma`` are returned for tests.
    """
    g = np.asarray(g, dtype=float)
    S_hat = _release_bound(S, params, diameter, rng, dim=g.size)
    sigma = calibrate_analytic_gaussian(params.epsilon_value, params.delta_value, S_hat)
    mechanism = GaussianMechanism(S_hat, sigma, name="sample-and-aggregate centre")
    return mechanism.release(np.asarray(g, dtype=float), rng), S_hat, sigma


def nrs_release(Z, s_nrs, epsilon, delta, radius, rng):
    """The private aggregation of the subset solutions ``Z`` (one row each).

    Projects every solution into the ball of ``radius`` (non-finite ones become 0:
    ``Lambda = 2 radius`` must bound every distance), picks the centre of attention
    ``g``, computes the corrected ``beta``-smooth bound ``S``
    (``_aggregate``), releases ``g`` by propose-test-release on ``S``
    (a pure-DP upper bound ``S_hat``, then the grid Gaussian mechanism at
    sensitivity ``S_hat``; module docstring, item 4) and projects the release
    (post-processing). A record can change at most ``s_nrs`` rows of ``Z``; the
    guarantee is ``(epsilon, delta)``-DP under that relation whatever ``len(Z)``
    (the subset count only matters for accuracy). ``epsilon = inf`` releases ``g``.

    :func:`sample_and_aggregate` runs the same ``_release_solutions`` with the
    parameters that also build its record; this entry point is the release on its
    own, which the privacy audits run at the mechanism level.
    """
    dim = Z.shape[1]
    params = None if math.isinf(epsilon) else release_parameters(epsilon, delta, dim)
    return _release_solutions(Z, s_nrs, params, radius, rng)


def _release_solutions(Z, s_nrs, params, radius, rng):
    """:func:`nrs_release` with its public parameters (``None``: the testing
    mode, ``g`` itself)."""
    t0 = _first_rank(Z.shape[0], s_nrs)
    Z = project_rows_l2_ball(Z, radius)  # non-finite -> 0, then into W
    if params is None:
        noisy = centre_of_attention(Z, t0)
    else:
        g, S = _aggregate(Z, s_nrs, params.beta, 2.0 * radius)
        noisy = _release_centre(g, S, params, 2.0 * radius, rng)[0]
        del g, S
    return project_rows_l2_ball(noisy[None, :], radius)[0]


def _release_record(epsilon, delta, params):
    """The release's one ``approx_dp`` record, from the stages of ``params``
    (module docstring, item 4f)."""
    stages = {}
    if params is not None:
        stages = dict(
            bound=(params.epsilon_bound, params.delta_bound),
            value=(params.epsilon_value, params.delta_value),
            sampler_delta=params.sampler_delta,
        )
    return propose_test_release_record(
        "sample-and-aggregate (smooth sensitivity, propose-test-release)",
        epsilon,
        delta,
        **stages,
    )


def _check_arguments(radius, l2_penalty, n_outputs, subset_max_iter, rng):
    """The public scalars of :func:`sample_and_aggregate`, checked."""
    if radius is None:
        raise ValueError(
            "sample-and-aggregate needs a public 'radius': the smooth bound uses the "
            "diameter 2 * radius of the parameter ball, which must be finite."
        )
    radius = check_real(radius, "radius", low=0.0, low_open=True)
    l2_penalty = check_real(l2_penalty, "l2_penalty", low=0.0)
    n_outputs = check_int(n_outputs, "n_outputs", low=1)
    subset_max_iter = check_int(subset_max_iter, "subset_max_iter", low=1)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator, got {type(rng).__name__}."
        )
    return radius, l2_penalty, n_outputs, subset_max_iter


def _subset_count(epsilon, delta, dim, n_subsets, n_samples, subset_size_min):
    """``(m_sub, k)``: the number of subsets and their size, from public values
    only; refuses a budget or a sample too small for the method."""
    m_min = minimum_n_subsets(epsilon, delta, dim)
    if n_subsets is None:
        m_sub = m_min
    else:
        m_sub = check_int(n_subsets, "n_subsets")
        if m_sub < m_min:
            raise ValueError(
                f"n_subsets={m_sub} is below the minimum {m_min} for epsilon="
                f"{epsilon:g}, delta={delta:g}, d={dim} (Wang et al. 2020, Alg. 1: "
                "ceil(s/beta) <= m and eps > 2d/sqrt(m))."
            )
    if m_sub > MAX_N_SUBSETS:
        # The minimum itself beyond the cap is a budget too small for the method;
        # an explicit n_subsets beyond it is a bad parameter.
        raise (PrivacyBudgetError if n_subsets is None else ValueError)(
            f"Sample-and-aggregate needs m_sub={m_sub} subsets at epsilon={epsilon:g}, "
            f"delta={delta:g}, d={dim}; more than {MAX_N_SUBSETS} is refused (the "
            "aggregation costs O(m_sub^2 d)). Use a larger epsilon, fewer parameters "
            "or another algorithm."
        )
    if subset_size_min is None:
        subset_size_min = _default_subset_size_min(dim)
    n_min = minimum_samples(
        epsilon, delta, dim, subset_size_min=subset_size_min, n_subsets=m_sub
    )
    if n_samples < n_min:
        raise PrivacyBudgetError(
            f"Sample-and-aggregate needs at least n_samples={n_min} at epsilon="
            f"{epsilon:g}, delta={delta:g}, d={dim} ({m_sub} subsets of at least "
            f"{subset_size_min} rows); got n_samples={n_samples}."
        )
    return m_sub, n_samples // m_sub


def sample_and_aggregate(
    X,
    y,
    loss,
    *,
    budget,
    radius,
    n_subsets=None,
    fit_intercept=True,
    l2_penalty=0.0,
    n_outputs=1,
    subset_max_iter=200,
    subset_size_min=None,
    rng,
):
    """Sample-and-aggregate with smooth sensitivity (Wang et al. 2020, Algorithm 1).

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
        Finite training features (validated by the caller).
    y : ndarray of shape (n_samples,)
        Targets: real (``"squared"``, ``"huber"``), {0, 1} (``"logistic"``) or class
        codes ``0..K-1`` (``"multinomial"``).
    loss : str, loss object or callable
        A loss name or object from :mod:`skdpsco._losses`: each subset is solved by
        ``subset_max_iter`` iterations of projected FISTA on
        ``(1/k) sum loss + (l2_penalty / 2) ||w||^2`` (intercept unpenalised) over
        the ball of ``radius``. Or a callable ``solver(X_sub, y_sub)`` returning the
        ``(dim,)`` or ``(dim, n_outputs)`` parameters of one subset (intercept last);
        it must be deterministic and keep no state between calls (no warm starts).
        An ``ArithmeticError``/``ValueError`` it raises gives that subset the
        solution 0.
    budget : AlgorithmBudget
        Its ``(epsilon, delta)``: epsilon ``> 0``, ``inf`` in the non-private
        testing mode (no noise). Any finite value is private (see
        :func:`release_parameters`; only an epsilon near 500, where
        ``e^epsilon`` outgrows the samplers' total variation allowance, is
        refused). Delta in ``(0, 1)``.
    radius : float
        Public radius ``R`` of the l2 ball ``W``: mandatory (``Lambda = 2 R`` must
        be finite). Every subset solution and the release are projected onto it.
    n_subsets : int, optional
        ``m_sub``; default and minimum :func:`minimum_n_subsets`; at most
        :data:`MAX_N_SUBSETS`.
    fit_intercept : bool, default=True
        Append a constant-1 column (its parameter is the last row of ``coef``).
    l2_penalty : float, default=0.0
        Mean-scaled ridge penalty ``lambda`` of each subset ERM (public).
    n_outputs : int, default=1
        1 (vector parameters) or K (multinomial).
    subset_max_iter : int, default=200
        Fixed FISTA iterations per subset (public; no data-dependent stopping).
    subset_size_min : int, optional
        Minimum rows per subset, default ``max(10 d, d + 1)``.
    rng : numpy.random.Generator
        Draws the subsets, then the noise.

    Returns
    -------
    SolverResult
        ``coef`` of shape ``(dim,)`` (``(dim, K)`` if ``n_outputs > 1``): the
        centre of attention released on a public grid by propose-test-release,
        projected onto the ball (post-processing);
        ``n_iter = 1`` (one aggregation and one release; the per-subset solver
        always runs ``subset_max_iter`` iterations); ``records``: one
        ``MechanismRecord(kind="approx_dp", epsilon, delta)``. Nothing else is
        returned: ``S``, ``S_hat``, the ``z_i`` and ``i*`` stay inside.

    Raises
    ------
    ValueError
        ``radius`` missing, ``n_subsets`` below the minimum or above the cap, an
        epsilon past the samplers' allowance (about 500), or a subset draw that
        cannot meet the multiplicity cap. All depend only on public values.
    PrivacyBudgetError
        ``n_samples < minimum_samples(...)``; the message names that minimum.

    References
    ----------
    .. [1] Wang, Xiao, Devadas & Xu (2020), ICML, Algorithm 1 and Theorem 1.
    .. [2] Nissim, Raskhodnikova & Smith (2007), STOC, §2 and Theorem 4.2.
    .. [3] Dwork & Lei (2009), STOC; Dwork & Roth (2014), Ch. 7
       (propose-test-release).
    """
    epsilon, delta = _check_epsilon_delta(budget.epsilon, budget.delta)
    radius, l2_penalty, n_outputs, subset_max_iter = _check_arguments(
        radius, l2_penalty, n_outputs, subset_max_iter, rng
    )
    kind, solver = _resolve_solver(loss)
    if kind == "loss" and n_outputs != solver.n_outputs(n_outputs):
        raise ValueError(f"loss {solver.name!r} does not give {n_outputs} outputs.")

    n_samples, n_features = X.shape
    p = n_features + int(bool(fit_intercept))
    dim = p * n_outputs  # d of Algorithm 1: every released parameter
    # Refuses an epsilon past ~500 before anything else.
    params = None if math.isinf(epsilon) else release_parameters(epsilon, delta, dim)
    m_sub, k = _subset_count(epsilon, delta, dim, n_subsets, n_samples, subset_size_min)
    s_nrs = math.isqrt(m_sub)
    t0 = _first_rank(m_sub, s_nrs)
    assert 2 * t0 - s_nrs > m_sub  # the overlap the privacy proof needs

    if sp.issparse(X):
        X = sp.csr_matrix(X)
    y = np.asarray(y)
    subsets = draw_subsets(n_samples, m_sub, k, s_nrs, rng)
    Z = _solve_subsets(
        X,
        y,
        subsets,
        kind,
        solver,
        fit_intercept=bool(fit_intercept),
        n_outputs=n_outputs,
        l2_penalty=l2_penalty,
        radius=radius,
        n_iter=subset_max_iter,
    )
    del subsets
    coef = _release_solutions(Z, s_nrs, params, radius, rng)
    del Z
    if n_outputs > 1:
        coef = coef.reshape(p, n_outputs)
    record = _release_record(epsilon, delta, params)
    return SolverResult(coef=coef, n_iter=1, records=[record])
