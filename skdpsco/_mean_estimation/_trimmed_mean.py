"""Bun–Steinke trimmed mean + arsinh-normal noise (Wang et al. 2020, Algorithms 2–3).

Every coordinate ``j`` of the gradient mean is estimated from the ``n`` values
``z_i = g_ij`` (one per record) by

    mu_j = clamp( (z_(m+1) + ... + z_(n-m)) / (n - 2m), a, b )
    out_j = mu_j + (S_j / s_AN) sinh(Y_j),        Y_j ~ N(0, 1) i.i.d.,

where ``z_(1) <= ... <= z_(n)`` are the sorted values, ``m`` the public trim count,
``[a, b]`` the public range of the true mean, and ``S_j`` the ``t_SS``-smooth upper
bound on the local sensitivity built from Bun & Steinke's order statistics (the
scale ``max{(z_(n) - z_(1)) / (n - 2m), e^{-mt} (b - a)}`` printed in the paper's
Algorithm 2, line 1, bounds the smooth sensitivity but is NOT itself t-smooth: one
outlier moves it arbitrarily, so it is not used):

    S = max( e^{-m t} (b - a),
             max_{k=0..m-1} e^{-k t} min{ b - a,
                 max_{l=0..k+1} (z_(n-m+1+k-l) - z_(m+1-l)) / (n - 2m) } ).

Privacy (replace-one, ``n`` public; the documentation's privacy page). Per call the
oracle releases ``p = prod(shape)`` such coordinates, each with
``eps0 = sqrt(2 rho / p)``, ``t_SS = eps0^2 / 16``, ``s_AN = eps0 / 4``: by Bun &
Steinke (2019), arsinh-normal mechanism (Wang et al. 2020, Theorem 3, citing Bun &
Steinke's Theorem 7 and Prop. 5; stated for ``0 < eps0 <= 1``, which
:meth:`calibrate` enforces), each coordinate is ``eps0^2 / 2 = rho / p``-zCDP, and
the ``p`` coordinates compose to ``rho``-zCDP (Bun & Steinke 2016, Lemma 2.3). ``S``
is data-dependent; it is used only as the noise scale and never stored or returned.
"""

import math
import numbers
import warnings

import numpy as np

from ..privacy._ledger import MechanismRecord
from ..privacy._mechanisms import arsinh_normal_noise

__all__ = [
    "SmoothSensitivityTrimmedMeanOracle",
    "default_trim_count",
    "trimmed_mean",
    "trimmed_mean_smooth_sensitivity",
]

#: Gradient entries are sanitised to ``[-VALUE_MAX, VALUE_MAX]`` (NaN -> 0) before
#: sorting; with it every difference of two entries and every trimmed sum is finite.
VALUE_MAX = 1e300

#: At most this many gradient entries (rows x coordinates) are held at once: the
#: sort needs whole columns, so ``max(1, 2**22 // n)`` columns (32 MiB) per block.
MAX_BLOCK_ENTRIES = 2**22

#: Conservative floor on the noise scale, see ``_noise_floor``: ``S >= (b - a)
#: e^{-30}`` and ``S / s_AN >= 2**20`` ulps of ``max(|a|, |b|)``.
_FLOOR_LOG = 30.0
_FLOOR_ULPS = 2.0**20

#: ``(b - a) / s_AN`` times this must be finite (``|sinh(Y)|`` stays far below).
_NOISE_HEADROOM = 1e20

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


def _prepare(values, trim_count):
    # Sanitise, sort, divide by the public n - 2m (monotone: the order survives).
    z = np.sort(_sanitise(np.array(values, dtype=float, ndmin=1)), axis=-1)
    n = z.shape[-1]
    _check_window(n, trim_count)
    z /= n - 2 * trim_count
    return z, n


def trimmed_mean(values, trim_count, low, high):
    """``clamp(mean of z_(m+1) .. z_(n-m), low, high)`` along the last axis.

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
    z, n = _prepare(values, trim_count)
    return np.clip(_accurate_sum(z[..., trim_count : n - trim_count]), low, high)


def trimmed_mean_smooth_sensitivity(values, trim_count, width, smoothness):
    """The ``t``-smooth upper bound on the clamped trimmed mean's local sensitivity.

    ``S = max(e^{-mt} w, max_{k<m} e^{-kt} min(w, A^(k)))`` with ``w = b - a`` and
    ``A^(k) = max_{l=0..k+1} (z_(n-m+1+k-l) - z_(m+1-l)) / (n - 2m)`` (1-based
    order statistics); ``S = w`` when ``m = 0``. Derived in
    :class:`SmoothSensitivityTrimmedMeanOracle` (step 2); computed exactly (see
    ``_smooth_sensitivity_scaled``).

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


def _check_real(value, name, *, positive=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r}.")
    value = float(value)
    if not math.isfinite(value) or (positive and not value > 0):
        bound = "finite and > 0" if positive else "finite"
        raise ValueError(f"{name} must be {bound}, got {value!r}.")
    return value


# --------------------------------------------------------------------- oracle


class SmoothSensitivityTrimmedMeanOracle:
    """Coordinate-wise Bun–Steinke trimmed mean with arsinh-normal noise.

    The mean oracle of Wang et al. (2020), Algorithm 3: every coordinate ``j`` of
    the per-sample gradients ``g_i = u_i (outer) x~_i`` is estimated by
    Algorithm 2, the clamped trimmed mean of the ``n`` values ``g_ij`` plus
    ``(S_j / s_AN) sinh(Y_j)`` with ``S_j`` the exact ``t_SS``-smooth bound derived
    below (never the bound printed in Algorithm 2, line 1, which is not smooth).

    Privacy (replace-one, ``n`` public). Per coordinate:

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
       public constant (the floor below) keeps both properties.
    3. With ``t = t_SS = eps0^2 / 16`` and ``s = s_AN = eps0 / 4``, releasing
       ``f(z) + (S(z) / s) sinh(Y)`` is ``eps0^2 / 2``-zCDP for ``0 < eps0 <= 1``
       (Bun & Steinke 2019, arsinh-normal mechanism; Wang et al. 2020, Theorem 3).
    4. ``eps0^2 / 2 = rho / p`` per coordinate; the ``p`` independent releases of
       one call compose to ``rho``-zCDP, which :meth:`records` reports.

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
        ``min(ceil(ln(n) / t_SS), floor((n - 1) / 4))`` (:func:`default_trim_count`; a
        ``UserWarning`` when the cap binds; ``0`` in the non-private testing mode
        and for ``n < 5``).
    clip_noisy_mean : bool, default=True
        Clamp the noisy output to ``[a, b]`` (free post-processing; False for
        paper-faithful runs).

    Attributes
    ----------
    n_samples_ : int
    shape_ : tuple of int
    rho_ : float
        zCDP budget of one call.
    epsilon0_ : float
        Per-coordinate ``eps0 = sqrt(2 rho / p)``.
    smoothness_ : float
        ``t_SS = eps0^2 / 16``.
    noise_divisor_ : float
        ``s_AN = eps0 / 4``.
    trim_count_ : int
    mean_bounds_ : tuple of float
    min_smooth_sensitivity_ : float
        The public floor on ``S`` (see Notes).
    block_columns_ : int
        Coordinates sorted per pass over the data (memory, see Notes).

    Notes
    -----
    Everything stored is a function of public inputs; ``S``, the un-noised means and
    the sorted values live only inside :meth:`estimate`.

    Floor on ``S`` (a conservative addition, not in the paper): the
    noise scale uses ``max(S, S_min)`` with ``S_min = max((b - a) e^{-30}, 2^20
    s_AN ulp(max(|a|, |b|)))``. A constant is 0-smooth and the max of ``t``-smooth
    upper bounds is one, so privacy is unchanged; it only matters when
    ``m t_SS > 30`` (a large user ``trim_count``), where ``e^{-m t} (b - a)`` could
    underflow or be absorbed by rounding ``mu + noise``: on constant data the
    output would then be deterministic, while a neighbour with an outlier gets
    noise, an infinite privacy loss in floating point.

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
       Algorithms 2 and 3, Theorems 3 and 4.
    .. [2] Bun, M. and Steinke, T. (2019). Average-case averages: private
       algorithms for smooth sensitivity and mean estimation. NeurIPS.
    .. [3] Nissim, K., Raskhodnikova, S. and Smith, A. (2007). Smooth sensitivity
       and sampling in private data analysis. STOC.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco._mean_estimation._trimmed_mean import (
    ...     SmoothSensitivityTrimmedMeanOracle)
    >>> from skdpsco._solvers import LinearDesign
    >>> oracle = SmoothSensitivityTrimmedMeanOracle(trim_count=2)
    >>> oracle = oracle.calibrate(20, 0.01, (2,))
    >>> round(oracle.epsilon0_, 4), round(oracle.noise_divisor_, 4)
    (0.1, 0.025)
    >>> X = np.linspace(-1.0, 1.0, 20)[:, None]
    >>> out = oracle.estimate(LinearDesign(X, True), np.full(20, 0.5),
    ...                       np.random.default_rng(0))
    >>> out.shape
    (2,)
    """

    #: The arsinh-normal mechanism is zCDP but not Gaussian: no exact GDP composition.
    all_gaussian = False

    def __init__(
        self,
        mean_bounds=None,
        gradient_scale=1.0,
        trim_count=None,
        clip_noisy_mean=True,
    ):
        self.gradient_scale = _check_real(
            gradient_scale, "gradient_scale", positive=True
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
            a = _check_real(a, "mean_bounds[0]")
            b = _check_real(b, "mean_bounds[1]")
            if not (a < b and math.isfinite(b - a)):
                raise ValueError(
                    f"mean_bounds must satisfy a < b with b - a finite, got {(a, b)!r}."
                )
            self.mean_bounds = (a, b)
        if trim_count is not None and (
            isinstance(trim_count, bool)
            or not isinstance(trim_count, numbers.Integral)
            or trim_count < 1
        ):
            raise ValueError(f"trim_count must be an integer >= 1, got {trim_count!r}.")
        self.trim_count = None if trim_count is None else int(trim_count)
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

    def calibrate(self, n_samples, rho, shape):
        """Fix ``eps0``, ``t_SS``, ``s_AN`` and ``m`` from public values.

        Parameters
        ----------
        n_samples : int
            Public ``n`` (replace-one neighbours).
        rho : float
            zCDP budget of ONE call; ``math.inf`` is the hidden non-private testing
            mode (no noise, ``S`` not computed).
        shape : tuple of int
            ``(dim,)`` or ``(dim, K)``; ``p = prod(shape)`` coordinates each get
            ``rho / p``.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            If ``eps0 = sqrt(2 rho / p) > 1`` for a finite ``rho``: Bun & Steinke's
            guarantee (Wang et al. Theorem 3) is stated only for ``eps0 <= 1``.
            Also for invalid ``n``, ``rho``, ``shape`` or a ``trim_count``
            with ``n - 2m < 1``.
        """
        if (
            isinstance(n_samples, bool)
            or not isinstance(n_samples, numbers.Integral)
            or n_samples < 1
        ):
            raise ValueError(f"n_samples must be an integer >= 1, got {n_samples!r}.")
        n = int(n_samples)
        if isinstance(rho, bool) or not isinstance(rho, numbers.Real) or not rho > 0:
            raise ValueError(f"rho must be > 0 (inf: no noise), got {rho!r}.")
        rho = float(rho)
        shape = tuple(int(k) for k in np.atleast_1d(shape))
        if len(shape) not in (1, 2) or min(shape) < 1:
            raise ValueError(f"shape must be (dim,) or (dim, K), got {shape!r}.")
        p = math.prod(shape)
        a, b = self._resolve_bounds()
        if math.isinf(rho):
            eps0 = t = s_an = math.inf
        else:
            eps0 = math.sqrt(2.0 * rho / p)
            if eps0 > 1.0:
                raise ValueError(
                    "The per-coordinate budget epsilon0 = sqrt(2 rho / p) = "
                    f"{eps0:.4g} (rho = {rho:.4g} per call, p = {p} coordinates) "
                    "exceeds 1, the range of the arsinh-normal guarantee "
                    "(Wang et al. 2020, Theorem 3). Use a smaller epsilon or more "
                    "iterations (max_iter)."
                )
            t = eps0 * eps0 / 16.0
            s_an = eps0 / 4.0
            if not (t > 0 and s_an > 0):
                raise ValueError(f"rho = {rho!r} per call is too small to calibrate.")
            if not math.isfinite((b - a) / s_an * _NOISE_HEADROOM):
                # Public check: otherwise (S / s_AN) sinh(Y) could overflow for some
                # data (S = b - a) and not for others.
                raise ValueError(
                    f"mean_bounds {(a, b)!r} are too wide for s_AN = {s_an:.3g}: the "
                    "noise scale (b - a) / s_AN would overflow."
                )
        if self.trim_count is None:
            m, capped = default_trim_count(n, t)
            if capped:
                warnings.warn(
                    f"The default trim_count ceil(ln(n) / t_SS) with t_SS = {t:.3g} "
                    f"exceeds (n - 1) / 4 at n = {n}; it is capped at m = {m}. The "
                    f"noise floor e^(-m t) (b - a) / s_AN is then "
                    f"{math.exp(-m * t):.3g} (b - a) / s_AN: Algorithm 3 is likely "
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
        self.rho_ = rho
        self.epsilon0_ = eps0
        self.smoothness_ = t
        self.noise_divisor_ = s_an
        self.trim_count_ = m
        self.mean_bounds_ = (a, b)
        self.min_smooth_sensitivity_ = self._noise_floor(a, b, s_an)
        self.block_columns_ = max(1, min(p, MAX_BLOCK_ENTRIES // n))
        return self

    @staticmethod
    def _noise_floor(a, b, s_an):
        if math.isinf(s_an):
            return 0.0
        ulp = float(np.spacing(max(abs(a), abs(b))))
        return max((b - a) * math.exp(-_FLOOR_LOG), _FLOOR_ULPS * s_an * ulp)

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
            Draws the ``p`` arsinh-normal variables (once per call, on the driver;
            none in the testing mode ``rho = inf``).
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
        private = math.isfinite(self.rho_)
        p = math.prod(self.shape_)
        means = np.empty(p)
        scales = np.empty(p)
        for start in range(0, p, self.block_columns_):
            cols = slice(start, min(start + self.block_columns_, p))
            Z = self._columns(design, U, cols)
            Z.sort(axis=1)
            Z /= n - 2 * m  # monotone: the order survives, every sum stays finite
            means[cols] = np.clip(_accurate_sum(Z[:, m : n - m]), a, b)
            if private:
                # S: the exact t-smooth bound (class docstring, step 2), with the
                # public floor (Notes); a local, never stored.
                S = _smooth_sensitivity_scaled(Z, m, b - a, self.smoothness_)
                scales[cols] = np.maximum(S, self.min_smooth_sensitivity_)
            del Z
        out = means
        if private:
            # Arsinh-normal mechanism (Bun & Steinke 2019; Wang et al. Theorem 3):
            # with t = eps0^2/16 and s = eps0/4, mu + (S/s) sinh(Y) is eps0^2/2-zCDP
            # per coordinate; independent Y_j, p coordinates -> rho (see records).
            out = means + (scales / self.noise_divisor_) * arsinh_normal_noise(rng, p)
        if self.clip_noisy_mean:
            out = np.clip(out, a, b)  # post-processing; E g_j lies in [a, b]
        return out.reshape(self.shape_)

    def records(self, count):
        """Ledger record for ``count`` calls: ONE zCDP record of ``rho`` per call.

        Each call is ``p`` arsinh-normal releases of ``eps0^2 / 2 = rho / p`` zCDP
        each, composing to ``rho`` (Bun & Steinke 2016, Lemma 2.3).
        """
        p = math.prod(self.shape_)
        return [
            MechanismRecord(
                f"smooth-sensitivity trimmed mean, arsinh-normal ({p} coordinates)",
                "zcdp",
                count=count,
                rho=self.rho_,
            )
        ]
