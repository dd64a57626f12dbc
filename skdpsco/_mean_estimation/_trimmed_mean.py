"""Bun–Steinke trimmed mean (Wang et al. 2020, Algorithms 2–3), released by
propose-test-release on a public grid.

Every coordinate ``j`` of the gradient mean is estimated from the ``n`` values
``z_i = g_ij`` (one per record) by

    mu_j = clamp( (z_(m+1) + ... + z_(n-m)) / (n - 2m), a, b ),

where ``z_(1) <= ... <= z_(n)`` are the sorted values, ``m`` the public trim count
and ``[a, b]`` the public range of the true mean. ``S_j`` is the ``t``-smooth upper
bound on the local sensitivity of ``mu_j`` built from Bun & Steinke's order
statistics (the scale ``max{(z_(n) - z_(1)) / (n - 2m), e^{-mt} (b - a)}`` printed
in the paper's Algorithm 2, line 1, bounds the smooth sensitivity but is NOT itself
t-smooth: one outlier moves it arbitrarily, so it is not used):

    S = max( e^{-m t} (b - a),
             max_{k=0..m-1} e^{-k t} min{ b - a,
                 max_{l=0..k+1} (z_(n-m+1+k-l) - z_(m+1-l)) / (n - 2m) } ).

The paper adds arsinh-normal noise of scale ``S_j / s`` (Bun & Steinke 2019).
A noise scale that depends on the data cannot be followed by a public grid, and
noise drawn as floats on a data-dependent scale leaves the holes of Mironov (2012).
So the release here is propose-test-release (Dwork & Lei 2009), as in
:mod:`skdpsco._solvers._sample_aggregate`: the grid Gaussian mechanism releases
``ln S`` (its sensitivity is ``t`` per coordinate, by smoothness), a public margin
turns the released value into an upper bound ``S_hat >= S`` except with a small
probability, and the grid Gaussian mechanism releases ``mu / S_hat`` (sensitivity
1 per coordinate on that event). The proof is in
:class:`SmoothSensitivityTrimmedMeanOracle`. Each call is ``(epsilon_c,
delta_c)``-DP; the calls compose by basic composition.
"""

import math
import numbers
import warnings
from typing import NamedTuple

import numpy as np

from ..privacy._accounting import calibrate_analytic_gaussian, exact_split
from ..privacy._discrete import (
    COUPLING_SIGMA,
    GAUSSIAN_TV_PER_DRAW,
    discrete_gaussian_levels,
)
from ..privacy._mechanisms import (
    GRID_SLACK,
    GaussianMechanism,
    ProposeTestReleaseMechanism,
    grid_step,
)
from ..utils._validation import check_int, check_real
from ._oracle import GradientMeanOracle

__all__ = [
    "SmoothSensitivityTrimmedMeanOracle",
    "default_trim_count",
    "ptr_parameters",
    "trimmed_mean",
    "trimmed_mean_smooth_sensitivity",
]

#: Gradient entries are sanitised to ``[-VALUE_MAX, VALUE_MAX]`` (NaN -> 0) before
#: sorting; with it every difference of two entries and every trimmed sum is finite.
VALUE_MAX = 1e300

#: At most this many gradient entries (rows x coordinates) are held at once: the
#: sort needs whole columns, so ``max(1, 2**22 // n)`` columns (32 MiB) per block.
MAX_BLOCK_ENTRIES = 2**22

#: Public floor on the smooth bound, see ``_noise_floor``: ``S >= (b - a) e^{-30}``
#: and ``S >= 2**20`` ulps of ``max(|a|, |b|)``.
_FLOOR_LOG = 30.0
_FLOOR_ULPS = 2.0**20

#: Share of each call's epsilon spent on the bound ``ln S`` (the rest on the value).
_BOUND_EPSILON_SHARE = 0.25
#: The smoothness ``t`` is chosen so that the public margin on ``ln S`` is about
#: this (``S_hat`` about ``e`` times ``S``): a larger ``t`` needs less trimming but
#: a wider margin.
_TARGET_LOG_MARGIN = 1.0
#: Absolute slack on the computed ``ln S``: ``|fl(ln fl(S)) - ln S| <= 2^-42`` for
#: ``S`` in the float range (``|ln S| <= 745``), so neighbours' computed values
#: differ by at most ``t + 2^-40``, and a margin ``2^-40`` larger covers the
#: rounding of ``exp``.
_LOG_SLACK = 2.0**-40
#: Relative slack on the value's sensitivity: the computed ``mu / S_hat`` is within
#: ``2^-18`` of the exact quotient (``S_hat >= S_min >= 2^20`` ulps of the
#: values; the sum is correctly rounded), on each neighbour.
_VALUE_SLACK = 2.0**-16

#: Points per level of the exact branch-and-bound search over ``k``.
_GRID = 32


# ------------------------------------------------------------- public numbers


def default_trim_count(n_samples, smoothness):
    """Default trim count ``m = min(ceil(ln(n) / t_SS), floor((n - 1) / 4))``.

    Wang et al. (2020), Algorithm 2, only asks for ``m = O(1)``, but the noise floor
    of :func:`trimmed_mean_smooth_sensitivity` is ``e^{-m t} (b - a)`` with a tiny
    ``t``; ``m >= ln(n) / t`` pushes it below ``(b - a) / n``.

    Parameters
    ----------
    n_samples : int
        Public ``n``.
    smoothness : float
        ``t_SS > 0`` (``inf``, the non-private testing mode, gives ``m = 0``).

    Returns
    -------
    m : int
    capped : bool
        Whether the cap ``floor((n - 1) / 4)`` was binding.
    """
    cap = (int(n_samples) - 1) // 4
    wanted = math.log(n_samples) / smoothness
    if wanted > cap:
        return cap, True
    return math.ceil(wanted), False


def _sanitise(values):
    # A deterministic map of each entry alone (NaN -> 0, +-inf and beyond ->
    # +-VALUE_MAX), so replace-one neighbours stay replace-one neighbours.
    # In place: callers pass an array they own.
    np.nan_to_num(values, copy=False, nan=0.0, posinf=VALUE_MAX, neginf=-VALUE_MAX)
    return np.clip(values, -VALUE_MAX, VALUE_MAX, out=values)


def _check_window(n, m):
    if not 0 <= m or n - 2 * m < 1:
        raise ValueError(
            f"trim_count must satisfy 0 <= m and n - 2m >= 1, got m = {m}, n = {n}."
        )


def _sort_and_scale(z, trim_count):
    """Sort the sanitised values ``z`` in place along the last axis and divide them
    by the public ``n - 2m`` (monotone: the order survives, and every trimmed sum
    stays finite). The oracle's blocks and the public functions both go through
    here."""
    n = z.shape[-1]
    _check_window(n, trim_count)
    z.sort(axis=-1)
    z /= n - 2 * trim_count
    return z


def _prepare(values, trim_count):
    z = _sort_and_scale(_sanitise(np.array(values, dtype=float, ndmin=1)), trim_count)
    return z, z.shape[-1]


def _clamped_trimmed_mean(z, trim_count, low, high):
    """``clamp(sum of z_(m+1) .. z_(n-m), low, high)`` of sorted, scaled ``z``."""
    n = z.shape[-1]
    return np.clip(_accurate_sum(z[..., trim_count : n - trim_count]), low, high)


def trimmed_mean(values, trim_count, low, high):
    """``clamp(mean of z_(m+1) .. z_(n-m), low, high)`` along the last axis.

    The oracle's statistic on a plain array, through the internals the oracle runs
    blockwise; the tests check the smooth-sensitivity bound against it.

    Parameters
    ----------
    values : array_like of shape (..., n)
        Any floats (sanitised like the oracle's and sorted here).
    trim_count : int
        ``m``, removed from each end; ``n - 2m >= 1``.
    low, high : float
        The output clamp ``[a, b]``.

    Returns
    -------
    ndarray of shape (...)
    """
    z, _ = _prepare(values, trim_count)
    return _clamped_trimmed_mean(z, trim_count, low, high)


def trimmed_mean_smooth_sensitivity(values, trim_count, width, smoothness):
    """The ``t``-smooth upper bound on the clamped trimmed mean's local sensitivity.

    ``S = max(e^{-mt} w, max_{k<m} e^{-kt} min(w, A^(k)))`` with ``w = b - a`` and
    ``A^(k) = max_{l=0..k+1} (z_(n-m+1+k-l) - z_(m+1-l)) / (n - 2m)`` (1-based
    order statistics); ``S = w`` when ``m = 0``. Derived in
    :class:`SmoothSensitivityTrimmedMeanOracle` (step 2); computed exactly (see
    ``_smooth_sensitivity_scaled``). The oracle's bound on a plain array, through
    the internals the oracle runs blockwise: the tests check Definition 2.1 of Nissim,
    Raskhodnikova & Smith (2007) (above the local sensitivity, ``e^t``-smooth) on it.

    Parameters
    ----------
    values : array_like of shape (..., n)
        Any floats (sanitised like the oracle's and sorted here).
    trim_count : int
        ``m``, with ``n - 2m >= 1``.
    width : float
        ``b - a > 0``.
    smoothness : float
        ``t > 0``.

    Returns
    -------
    ndarray of shape (...)
    """
    z, n = _prepare(values, trim_count)
    lead = z.shape[:-1]
    flat = z.reshape(-1, n)
    return _smooth_sensitivity_scaled(flat, trim_count, width, smoothness).reshape(lead)


# ------------------------------------------------------------------ internals


def _accurate_sum(x):
    """Sum along the last axis with a pairwise TwoSum tree (doubled precision).

    Every pairwise addition's rounding error is recovered exactly (Knuth's TwoSum;
    no overflow is possible since ``|sum| <= sum |x| <= VALUE_MAX``) and the errors
    are added back at the end, so the result is within a few ulps of the exact sum
    (plus ``O(n eps^2 sum |x|)``): the smooth-sensitivity argument, made in exact
    arithmetic, holds for the computed trimmed mean up to ulp-level terms, which the
    noise floor of ``_noise_floor`` dominates.
    """
    s = np.asarray(x, dtype=float)
    if s.shape[-1] == 0:
        return np.zeros(s.shape[:-1])
    err = np.zeros(s.shape[:-1])
    while s.shape[-1] > 1:
        if s.shape[-1] % 2:
            s = np.concatenate([s, np.zeros(s.shape[:-1] + (1,))], axis=-1)
        a, b = s[..., 0::2], s[..., 1::2]
        total = a + b
        bv = total - a
        err += np.sum((a - (total - bv)) + (b - bv), axis=-1)
        s = total
    return s[..., 0] + err


def _order_stat_range(hi, lo, k):
    # A^(k) * ... on scaled values: max_{l=0..k+1} hi[k+1-l] - lo[l], where
    # hi[i] = z_(n-m+i) and lo[l] = z_(m+1-l) (i, l = 0..m).
    return np.max(hi[..., k + 1 :: -1] - lo[..., : k + 2], axis=-1)


def _smooth_sensitivity_scaled(W, m, width, t):
    """The smooth bound ``S`` for every row of ``W`` (sorted, divided by n - 2m).

    Exact, not an approximation (an upper bound on a smooth bound need not itself be
    smooth, so only exact shortcuts are allowed): ``A^(k)`` is non-decreasing in ``k``
    (for a pair ``i + l = k + 1`` the pair ``(i + 1, l)`` has a larger ``hi``, and
    rounding is monotone, so this holds in floating point too) and ``e^{-kt}`` is
    non-increasing (enforced on the float array), so on an interval ``[k1, k2]``
    every term ``e^{-kt} min(w, A^(k))`` is at most ``e^{-k1 t} min(w, A^(k2))``.
    Intervals whose bound does not exceed the best term found are dropped (an exact
    early exit); the others are refined down to single
    ``k``. The result equals the brute-force ``O(m^2)`` maximum; each ``A^(k)`` costs
    ``O(k)`` and typically a few hundred are evaluated.
    """
    W = np.asarray(W, dtype=float)
    q, n = W.shape
    if m == 0:
        # No trimming: the clamped mean has LS <= b - a, a constant (the formula
        # above needs m >= 1).
        return np.full(q, float(width))
    decay = np.exp(-t * np.arange(m + 1, dtype=float))
    np.minimum.accumulate(decay, out=decay)
    hi = W[:, n - m - 1 :]  # hi[:, i] = z_(n-m+i), i = 0..m
    lo = W[:, m::-1]  # lo[:, l] = z_(m+1-l), l = 0..m
    best = np.full(q, decay[m] * width)  # the k >= m tail: LS <= b - a by the clamp
    ks = np.unique(np.linspace(0, m - 1, min(m, _GRID + 1)).round().astype(np.intp))
    A = np.stack([_order_stat_range(hi, lo, k) for k in ks])  # (len(ks), q)
    terms = decay[ks, None] * np.minimum(width, A)
    np.maximum(best, terms.max(axis=0), out=best)
    for c in range(q):
        # Intervals (ks[j], ks[j + 1]) with interior points, best bound first.
        bounds = decay[ks[:-1]] * np.minimum(width, A[1:, c])
        order = np.argsort(-bounds, kind="stable")
        for j in order:
            if ks[j + 1] - ks[j] > 1 and bounds[j] > best[c]:
                best[c] = _refine(
                    hi[c], lo[c], decay, width, ks[j], ks[j + 1], A[j + 1, c], best[c]
                )
    return best


def _refine(hi, lo, decay, width, k1, k2, a2, best):
    """Exact ``max(best, max_{k1 < k < k2} decay[k] min(width, A^(k)))``.

    ``a2 = A^(k2)``; branch and bound on the bound ``decay[k1] min(width, a2)``.
    """
    stack = [(int(k1), int(k2), float(a2))]
    while stack:
        k1, k2, a2 = stack.pop()
        if k2 - k1 < 2 or decay[k1] * min(width, a2) <= best:
            continue
        points = np.unique(np.linspace(k1, k2, _GRID + 1).round().astype(np.intp))
        inner = points[1:-1]
        values = [float(_order_stat_range(hi, lo, k)) for k in inner]
        for k, value in zip(inner, values, strict=True):
            best = max(best, float(decay[k] * min(width, value)))
        right = [*values, a2]
        children = [
            (
                decay[points[i]] * min(width, right[i]),
                points[i],
                points[i + 1],
                right[i],
            )
            for i in range(len(points) - 1)
            if points[i + 1] - points[i] > 1
        ]
        children.sort(key=lambda child: child[0])  # best bound popped first
        stack.extend((int(k), int(kk), a) for _, k, kk, a in children)
    return best


# --------------------------------------------------------------------- oracle


class PTRParameters(NamedTuple):
    """Public parameters of one call (:func:`ptr_parameters`): the smoothness
    ``t``, the mechanism that draws both releases and states their cost, and
    ``delta_fail``."""

    smoothness: float
    mechanism: ProposeTestReleaseMechanism
    delta_fail: float


def _ptr_name(n_coordinates):
    return f"trimmed mean, propose-test-release ({n_coordinates} coordinates)"


def ptr_parameters(epsilon, delta, n_coordinates):
    """Public parameters of one ``(epsilon, delta)``-DP call on ``p`` coordinates.

    Split (the proof in :class:`SmoothSensitivityTrimmedMeanOracle`):
    ``eps1 = epsilon / 4`` for the bound, ``eps2 = epsilon - eps1`` for the value;
    ``delta_fail = delta / 2`` (the bound fails somewhere), ``delta1 = (delta / 4)
    e^{-eps2}`` (the bound's Gaussian mechanism), ``delta2 = delta / 4 - 2 (1 +
    e^epsilon) 2p 2^-780`` (the value's, less the samplers' total variation).

    The smoothness is ``t = 1 / (sqrt(p) c1 sqrt(2 ln(p / delta_fail)))`` with
    ``c1`` the analytic-Gaussian noise of ``(eps1, delta1)`` per unit of
    sensitivity: the margin on ``ln S`` is then about
    :data:`_TARGET_LOG_MARGIN`. The bound's mechanism has l2-sensitivity ``(t +
    2^-40) sqrt(p)``; its margin is ``mu = gamma (sqrt(2 V ln(p / delta_fail)) +
    1/2) + 2^-40``, ``gamma`` its grid step and ``V`` the variance its sampler
    realises. The value's mechanism has l2-sensitivity ``sqrt(p) (1 + 2^-16)``.

    Parameters
    ----------
    epsilon : float
        ``> 0``, finite.
    delta : float
        In ``(0, 1)``.
    n_coordinates : int
        ``p >= 1``.

    Returns
    -------
    PTRParameters

    Raises
    ------
    ValueError
        If ``delta`` cannot hold the samplers' total variation (public values).

    Examples
    --------
    >>> from skdpsco._mean_estimation._trimmed_mean import ptr_parameters
    >>> params = ptr_parameters(0.1, 1e-6, 3)
    >>> 0 < params.smoothness < 1e-3, 1.0 < params.mechanism.log_margin < 1.5
    (True, True)
    """
    epsilon = check_real(epsilon, "epsilon", low=0, low_open=True)
    delta = check_real(delta, "delta", low=0, high=1, low_open=True, high_open=True)
    p = int(n_coordinates)
    if epsilon > 700.0:
        raise ValueError(
            f"epsilon={epsilon:g} per call is too large for delta={delta:g}: the "
            "grid Gaussian's total variation slack does not fit in delta (such an "
            "epsilon promises nothing anyway)."
        )
    eps1 = epsilon * _BOUND_EPSILON_SHARE
    eps2 = exact_split(epsilon, eps1)
    delta_fail = delta / 2.0
    delta1 = delta / 4.0 * math.exp(-eps2) * (1.0 - 2.0**-20)
    tv = 2.0 * (1.0 + math.exp(min(epsilon, 700.0))) * 2 * p * GAUSSIAN_TV_PER_DRAW
    delta2 = exact_split(
        delta, delta_fail, delta1 * math.exp(eps2) * (1 + 2.0**-20), tv
    )
    if not delta2 > delta / 8.0:
        raise ValueError(
            f"epsilon={epsilon:g} is too large for delta={delta:g}: the grid "
            "Gaussian's total variation slack does not fit in delta."
        )
    log_tail = math.log(p / delta_fail)
    c1 = calibrate_analytic_gaussian(eps1, delta1, 1.0)
    t = _TARGET_LOG_MARGIN / (math.sqrt(p) * c1 * math.sqrt(2.0 * log_tail))
    bound_sensitivity = (t + _LOG_SLACK) * math.sqrt(p)
    bound = GaussianMechanism(
        bound_sensitivity,
        calibrate_analytic_gaussian(eps1, delta1, bound_sensitivity),
        name="trimmed mean ln S",
    )
    # The grid and the variance GaussianMechanism.release uses for p values.
    gamma = grid_step(min(bound.sensitivity, bound.sigma), p)
    variance = (bound.sigma * (1.0 + GRID_SLACK) / gamma) ** 2 + COUPLING_SIGMA**2
    realised = discrete_gaussian_levels(variance)[1]
    margin = gamma * (math.sqrt(2.0 * realised * log_tail) + 0.5) + _LOG_SLACK
    value_sensitivity = math.sqrt(p) * (1.0 + _VALUE_SLACK)
    value = GaussianMechanism(
        value_sensitivity,
        calibrate_analytic_gaussian(eps2, delta2, value_sensitivity),
        name="trimmed mean / S_hat",
    )
    # The record states (epsilon, delta): the split above, proof in the oracle's
    # class docstring (steps 3-6).
    mechanism = ProposeTestReleaseMechanism(
        bound, margin, value, epsilon, delta, _ptr_name(p)
    )
    return PTRParameters(t, mechanism, delta_fail)


class SmoothSensitivityTrimmedMeanOracle(GradientMeanOracle):
    """Coordinate-wise Bun–Steinke trimmed mean, released by propose-test-release.

    The mean oracle of Wang et al. (2020), Algorithm 3: every coordinate ``j`` of
    the per-sample gradients ``g_i = u_i (outer) x~_i`` is estimated by
    Algorithm 2's clamped trimmed mean of the ``n`` values ``g_ij``, with the exact
    ``t``-smooth bound ``S_j`` on its local sensitivity derived below (never the
    bound printed in Algorithm 2, line 1, which is not smooth). The paper's
    arsinh-normal noise of scale ``S_j / s`` is replaced by propose-test-release
    on a public grid (module docstring).

    Privacy (replace-one, ``n`` public). Per call, at ``(epsilon, delta)`` with
    the public parameters of :func:`ptr_parameters`:

    1. ``z_i = g_ij`` is a function of record ``i`` and the public iterate only; it
       is sanitised entry by entry (NaN -> 0, clipped to ``[-1e300, 1e300]``), a
       deterministic map of one record, so neighbours stay neighbours and no NaN
       can make the output's finiteness depend on a record.
    2. ``f(z) = clamp(trimmed mean, a, b)``. Replacing one value moves every order
       statistic by at most one rank, so ``LS_f(z) <= U_0`` with
       ``U_k = min(b - a, A^(k))``, ``A^(k) = max_{l=0..k+1} (z_(n-m+1+k-l) -
       z_(m+1-l)) / (n - 2m)`` (Bun & Steinke 2019), and ``U_k = b - a`` for
       ``k >= m`` (the clamp); ``U_k(z) <= U_{k+1}(z')`` for neighbours (proof:
       take ``l' = l + 1`` if the replaced value increased, else ``l' = l``). By
       the smooth-sensitivity construction of Nissim, Raskhodnikova & Smith
       (2007, §3), ``S = max_k e^{-k t} U_k`` is a ``t``-smooth upper bound on
       ``LS_f``: ``S >= LS_f`` and ``S(z) <= e^t S(z')``. Taking the max with a
       public constant ``S_min`` (Notes) keeps both properties.
    3. *Bound.* ``L`` = the grid Gaussian mechanism (``bound_mechanism``) applied
       to the vector ``(ln S_j)_j``: by smoothness each coordinate moves by at
       most ``t`` (``t + 2^-40`` as computed), l2-sensitivity ``(t + 2^-40)
       sqrt(p)``, ``(eps1, delta1)``-DP (Balle & Wang 2018, analytic calibration).
    4. *Margin.* ``L_j = gamma (round(ln S_j / gamma) + Z_j)``, ``Z_j`` a discrete
       Gaussian of variance parameter ``V`` (within total variation ``2^-780`` of
       it), whose moment generating function is at most that of ``N(0, V)``
       (Canonne, Kamath & Steinke 2020), so ``P[Z_j < -x] <= e^{-x^2 / (2V)}``.
       With ``mu = gamma (x + 1/2) + 2^-40`` and ``x = sqrt(2 V ln(p /
       delta_fail))``, ``P_z[L_j + mu < ln S_j] <= delta_fail / p`` and, over the
       ``p`` coordinates, ``P_z[L not in E(z)] <= delta_fail`` with ``E(z) = {l :
       e^{l_j + mu} >= S_j(z) for all j}``.
    5. *Value.* ``S_hat = clip(e^{L + mu}, S_min, b - a)``, a function of ``L``
       alone; on ``E(z)``, ``S_hat_j >= min(S_j(z), b - a) >= |f_j(z) - f_j(z')|``
       for every neighbour ``z'``, so ``f / S_hat`` moves by at most 1 per
       coordinate (``1 + 2^-16`` as computed): l2-sensitivity ``sqrt(p) (1 +
       2^-16)``. The grid Gaussian mechanism (``value_mechanism``) releases it,
       ``(eps2, delta2)``-DP for every fixed ``l`` in ``E(z)``; the output is
       ``S_hat`` times the release (post-processing).
    6. *Cases on L* (as in :mod:`skdpsco._solvers._sample_aggregate`): for every
       output set ``O``, ``P_z[O] <= delta_fail + sum_{l in E(z)} P_z[L = l]
       (e^{eps2} P[G_{z', l} in O] + delta2) <= e^{eps1 + eps2} P_z'[O] +
       delta_fail + e^{eps2} delta1 + delta2``, and the samplers' ``2p`` draws add
       their total variation ``(1 + e^epsilon) 2p 2^-780``: the call is
       ``(epsilon, delta)``-DP (:func:`ptr_parameters` splits ``delta``). Only
       ``S(z)`` at the actual data is used, so the argument is symmetric.
    7. The ``T`` calls of a fit compose by basic composition (Dwork & Roth 2014,
       Thm 3.16): ``(T epsilon, T delta)``, which :meth:`records` reports.

    Parameters
    ----------
    mean_bounds : tuple of float (a, b) or None, default=None
        Public range of every coordinate's true mean (Assumption A3), ``a < b``.
        None: ``(-gradient_scale, gradient_scale)`` (a library default: valid
        when ``E g_j^2 <= gradient_scale^2``, since ``|E Z| <= sqrt(E Z^2)``). Only
        accuracy depends on it being right.
    gradient_scale : float, default=1.0
        Public scale of the gradients (``sqrt(v)`` of Assumption A4); used only for
        the default ``mean_bounds``.
    trim_count : int or None, default=None
        ``m``, values trimmed from each end, ``1 <= m`` and ``n - 2m >= 1``. None:
        ``min(ceil(ln(n) / t), floor((n - 1) / 4))`` (:func:`default_trim_count`; a
        ``UserWarning`` when the cap binds; ``0`` in the non-private testing mode
        and for ``n < 5``).
    clip_noisy_mean : bool, default=True
        Clamp the noisy output to ``[a, b]`` (free post-processing; False for
        paper-faithful runs).

    Attributes
    ----------
    n_samples_ : int
    shape_ : tuple of int
    epsilon_, delta_ : float
        Budget of one call (``inf`` and 0 in the non-private testing mode).
    smoothness_ : float
        ``t`` (:func:`ptr_parameters`).
    log_margin_ : float
        ``mu``.
    trim_count_ : int
    mean_bounds_ : tuple of float
    min_smooth_sensitivity_ : float
        The public floor ``S_min`` on ``S`` (see Notes).
    block_columns_ : int
        Coordinates sorted per pass over the data (memory, see Notes).
    mechanism_ : ProposeTestReleaseMechanism
        Draws both releases of a call and gives its ledger record (a noiseless
        stand-in in the testing mode).

    Notes
    -----
    Everything stored is a function of public inputs; ``S``, ``S_hat``, the
    un-noised means and the sorted values live only inside :meth:`estimate`.

    Floor on ``S`` (a conservative addition, not in the paper): ``S_min = max((b -
    a) e^{-30}, 2^20 ulp(max(|a|, |b|)))``. A constant is 0-smooth and the max of
    ``t``-smooth upper bounds is one, so privacy is unchanged; it keeps the
    rounding of the computed trimmed mean (a few ulps of ``max(|a|, |b|)``) far
    below ``S_hat``, and ``ln S`` within the grid's range.

    Memory: the sort needs each coordinate's whole column of ``n`` values.
    Coordinates are processed in blocks of ``q = max(1, 2**22 // n)`` columns
    (at most 32 MiB, or one column of ``n`` floats when ``n > 2**22``), filled
    through ``design.gradient_chunk_sum`` (one pass over the rows per block, each
    chunk of per-sample gradients bounded by the design), so ``ceil(p / q)`` passes
    per call; the block is sanitised, sorted and scaled in place, and the trimmed
    sum and the smooth bound need at most one more block-sized temporary (peak
    about 64 MiB plus one design chunk, whatever ``n`` and ``p``, for
    ``n <= 2**22``). Time: ``O(n log n)`` per coordinate for the sort, plus the smooth
    bound (exact branch and bound, worst case ``O(m^2)``, typically a few hundred
    ``O(m)`` evaluations).

    References
    ----------
    .. [1] Wang, D., Xiao, H., Devadas, S. and Xu, J. (2020). On differentially
       private stochastic convex optimization with heavy-tailed data. ICML.
       Algorithms 2 and 3.
    .. [2] Bun, M. and Steinke, T. (2019). Average-case averages: private
       algorithms for smooth sensitivity and mean estimation. NeurIPS.
    .. [3] Nissim, K., Raskhodnikova, S. and Smith, A. (2007). Smooth sensitivity
       and sampling in private data analysis. STOC.
    .. [4] Dwork, C. and Lei, J. (2009). Differential privacy and robust
       statistics. STOC (propose-test-release).
    .. [5] Canonne, C. L., Kamath, G. and Steinke, T. (2020). The discrete
       Gaussian for differential privacy. NeurIPS.
    .. [6] Balle, B. and Wang, Y.-X. (2018). Improving the Gaussian mechanism for
       differential privacy: analytical calibration and optimal denoising. ICML.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco._mean_estimation._trimmed_mean import (
    ...     SmoothSensitivityTrimmedMeanOracle)
    >>> from skdpsco._design import LinearDesign
    >>> oracle = SmoothSensitivityTrimmedMeanOracle(trim_count=2)
    >>> oracle = oracle.calibrate(20, None, (2,), epsilon=0.5, delta=1e-6)
    >>> X = np.linspace(-1.0, 1.0, 20)[:, None]
    >>> out = oracle.estimate(LinearDesign(X, True), np.full(20, 0.5),
    ...                       np.random.default_rng(0))
    >>> out.shape
    (2,)
    """

    #: Not a Gaussian (nor zCDP) mechanism: each call is ``(epsilon, delta)``-DP.
    all_gaussian = False
    #: The gradient-descent driver hands it ``(epsilon, delta)`` per call.
    approximate_dp = True

    def __init__(
        self,
        mean_bounds=None,
        gradient_scale=1.0,
        trim_count=None,
        clip_noisy_mean=True,
    ):
        self.gradient_scale = check_real(
            gradient_scale, "gradient_scale", low=0, low_open=True
        )
        if mean_bounds is None:
            self.mean_bounds = None
        else:
            try:
                a, b = mean_bounds
            except (TypeError, ValueError):
                raise ValueError(
                    f"mean_bounds must be a pair (a, b), got {mean_bounds!r}."
                ) from None
            a = check_real(a, "mean_bounds[0]")
            b = check_real(b, "mean_bounds[1]")
            if not (a < b and math.isfinite(b - a)):
                raise ValueError(
                    f"mean_bounds must satisfy a < b with b - a finite, got {(a, b)!r}."
                )
            self.mean_bounds = (a, b)
        self.trim_count = (
            None if trim_count is None else check_int(trim_count, "trim_count", low=1)
        )
        if not isinstance(clip_noisy_mean, bool | np.bool_):
            raise ValueError(
                f"clip_noisy_mean must be a bool, got {clip_noisy_mean!r}."
            )
        self.clip_noisy_mean = bool(clip_noisy_mean)

    def _resolve_bounds(self):
        if self.mean_bounds is None:
            # Default range: |E g_j| <= sqrt(E g_j^2) <= gradient_scale (Assumption 4
            # with v = gradient_scale^2).
            return (-self.gradient_scale, self.gradient_scale)
        return self.mean_bounds

    def calibrate(self, n_samples, rho, shape, *, epsilon=None, delta=None):
        """Fix the smoothness, the trim count and the mechanisms from public values.

        Parameters
        ----------
        n_samples : int
            Public ``n`` (replace-one neighbours).
        rho : None or math.inf
            ``math.inf`` is the hidden non-private testing mode (no noise, ``S``
            not computed); otherwise None, and ``epsilon`` and ``delta`` are given.
        shape : tuple of int
            ``(dim,)`` or ``(dim, K)``: ``p = prod(shape)`` coordinates.
        epsilon, delta : float
            ``(epsilon, delta)`` of ONE call, ``epsilon > 0`` finite, ``0 < delta
            < 1``.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            For invalid ``n``, budget, ``shape``, a ``trim_count`` with ``n - 2m <
            1``, or ``mean_bounds`` whose logarithmic range does not fit the grid.
        """
        n = check_int(n_samples, "n_samples", low=1)
        testing = rho is not None
        if testing and not (isinstance(rho, numbers.Real) and rho == math.inf):
            raise ValueError(
                "SmoothSensitivityTrimmedMeanOracle is (epsilon, delta)-DP per call: "
                f"give epsilon= and delta= (rho=inf only for the testing mode), got "
                f"rho={rho!r}."
            )
        if not testing and (epsilon is None or delta is None):
            raise ValueError("calibrate needs epsilon= and delta= per call.")
        shape = tuple(int(k) for k in np.atleast_1d(shape))
        if len(shape) not in (1, 2) or min(shape) < 1:
            raise ValueError(f"shape must be (dim,) or (dim, K), got {shape!r}.")
        p = math.prod(shape)
        a, b = self._resolve_bounds()
        floor = self._noise_floor(a, b)
        if not testing and floor > b - a:
            # S_hat lies in [S_min, b - a]; the value's sensitivity slack needs
            # S_hat >= 2^20 ulps of the bounds (public numbers).
            raise ValueError(
                f"mean_bounds {(a, b)!r} are narrower than 2^20 ulps of their "
                "magnitude: the release cannot be computed to the precision its "
                "proof needs; use a wider range."
            )
        if testing:
            params = None
            mechanism = ProposeTestReleaseMechanism.noiseless(_ptr_name(p))
            t = math.inf
            epsilon, delta, margin = math.inf, 0.0, 0.0
        else:
            params = ptr_parameters(epsilon, delta, p)
            mechanism = params.mechanism
            t, margin = params.smoothness, mechanism.log_margin
            epsilon, delta = float(epsilon), float(delta)
            # ln S lies in [ln S_min, ln(b - a)]: far inside the +-2^52 steps of
            # the bound's grid, or the clamp there could break the margin
            # (public numbers).
            reach = max(abs(math.log(floor)), abs(math.log(b - a))) + margin
            mech = mechanism.bound_mechanism
            if not reach < 2.0**51 * grid_step(min(mech.sensitivity, mech.sigma), p):
                raise ValueError(
                    f"the grid of the released ln S cannot hold its range at "
                    f"epsilon={epsilon:g} per call with mean_bounds {(a, b)!r}: use "
                    "a larger epsilon, fewer iterations or narrower mean_bounds."
                )
        if self.trim_count is None:
            m, capped = default_trim_count(n, t)
            if capped:
                warnings.warn(
                    f"The default trim_count ceil(ln(n) / t) with t = {t:.3g} "
                    f"exceeds (n - 1) / 4 at n = {n}; it is capped at m = {m}. The "
                    f"noise floor e^(-m t) (b - a) is then "
                    f"{math.exp(-m * t):.3g} (b - a): Algorithm 3 is likely "
                    "dominated by noise. Privacy is unaffected.",
                    UserWarning,
                    stacklevel=2,
                )
        else:
            m = self.trim_count
        if n - 2 * m < 1:
            raise ValueError(
                f"trim_count = {m} leaves no values: it needs n - 2 m >= 1 (n = {n})."
            )
        self.n_samples_ = n
        self.shape_ = shape
        self.epsilon_ = epsilon
        self.delta_ = delta
        self.smoothness_ = t
        self.log_margin_ = margin
        self.trim_count_ = m
        self.mean_bounds_ = (a, b)
        self.min_smooth_sensitivity_ = floor
        self.block_columns_ = max(1, min(p, MAX_BLOCK_ENTRIES // n))
        self._params = params
        self.mechanism_ = mechanism
        return self

    @staticmethod
    def _noise_floor(a, b):
        ulp = float(np.spacing(max(abs(a), abs(b))))
        return max((b - a) * math.exp(-_FLOOR_LOG), _FLOOR_ULPS * ulp)

    def _columns(self, design, U, cols):
        """Sanitised gradient values of coordinates ``cols``: shape (len, n)."""
        p = math.prod(self.shape_)
        block = np.empty((cols.stop - cols.start, self.n_samples_))

        def collect(G, rows):
            flat = G.reshape(G.shape[0], -1)
            if flat.shape[1] != p:
                raise ValueError(
                    f"the per-sample gradients have {flat.shape[1]} coordinates, but "
                    f"the oracle was calibrated for shape {self.shape_}."
                )
            block[:, rows] = flat[:, cols].T
            return 0.0

        design.gradient_chunk_sum(U, collect)
        return _sanitise(block)

    def estimate(self, design, U, rng, sample_weight=None):
        """Noisy coordinate-wise trimmed mean of ``g_i = u_i (outer) x~_i``.

        Parameters
        ----------
        design : LinearDesign
            Anything with ``n_samples`` and ``gradient_chunk_sum(U, func)``.
        U : ndarray of shape (n,) or (n, K)
            Per-sample derivatives of the loss at the current iterate.
        rng : numpy.random.Generator
            Draws the grid noise of the two releases (none in the testing mode).
        sample_weight : None
            Not supported: a weighted trimmed mean is not covered by the analysis.

        Returns
        -------
        ndarray of shape ``shape``
        """
        if sample_weight is not None:
            raise ValueError(
                "SmoothSensitivityTrimmedMeanOracle does not support sample_weight: "
                "weighted trimmed means are not covered by the smooth-sensitivity "
                "analysis (Bun & Steinke 2019; Wang et al. 2020, Algorithm 2)."
            )
        if not hasattr(self, "trim_count_"):
            raise RuntimeError("calibrate() must be called before estimate().")
        if not isinstance(rng, np.random.Generator):
            raise TypeError(
                "estimate needs an explicit numpy.random.Generator, got "
                f"{type(rng).__name__}."
            )
        n, m = self.n_samples_, self.trim_count_
        if design.n_samples != n:
            raise ValueError(
                f"the oracle was calibrated for n = {n}, got a design with "
                f"{design.n_samples} rows."
            )
        a, b = self.mean_bounds_
        params = self._params
        p = math.prod(self.shape_)
        means = np.empty(p)
        smooth = np.empty(p)
        for start in range(0, p, self.block_columns_):
            cols = slice(start, min(start + self.block_columns_, p))
            Z = _sort_and_scale(self._columns(design, U, cols), m)
            means[cols] = _clamped_trimmed_mean(Z, m, a, b)
            if params is not None:
                # S: the exact t-smooth bound (class docstring, step 2), with the
                # public floor (Notes); a local, never stored.
                S = _smooth_sensitivity_scaled(Z, m, b - a, self.smoothness_)
                smooth[cols] = np.maximum(S, self.min_smooth_sensitivity_)
            del Z
        out = means
        if params is not None:
            # Steps 3-5: the bound, then the value at the released bound.
            out = self.mechanism_.release(
                np.log(smooth), means, rng, low=self.min_smooth_sensitivity_, high=b - a
            )
        if self.clip_noisy_mean:
            out = np.clip(out, a, b)  # post-processing; E g_j lies in [a, b]
        return out.reshape(self.shape_)

    def records(self, count):
        """Ledger record for ``count`` calls: one ``(epsilon, delta)``-DP record per
        call (class docstring, step 6), composed by basic composition (step 7).
        In the testing mode (``rho = inf``) no noise is added and the record says
        so (infinite epsilon)."""
        return [self.mechanism_.record(count)]
