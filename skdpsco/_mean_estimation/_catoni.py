"""Catoni/Holland soft-truncated mean + Gaussian noise (Wang et al. 2020, Algorithm 4).

Every coordinate ``j`` of the gradient mean is estimated by

    g_j = (s / n) * sum_i psi_beta(G_ij / s) + N(0, sigma^2),

where ``psi_beta`` is the soft truncation ``phi`` of Catoni & Giulini smoothed by
multiplicative Gaussian noise and integrated in closed form (Holland 2019). Because
``|psi_beta| <= CAP = 2 sqrt(2) / 3`` whatever the record, replacing one record
moves each coordinate by at most ``(s / n) 2 CAP``: the sensitivity is enforced by
``psi``, not assumed, which is why the evaluation of ``psi`` below must stay inside
``[-CAP, CAP]`` for every float input: the plain closed form of eq. (9) cancels
catastrophically for large ``|a|`` (about 32 instead of 0.94 at ``a = 1e6``), and a
single outlier record is exactly what produces a large ``a``.

:func:`catoni_psi` is the reference evaluation (about 100 ns per entry); the oracle
evaluates ``psi`` through :class:`CatoniPsiTable`, a lookup table of it built once
per ``beta`` (a few ns per entry, within ``4.4e-9``), whose values are clipped to
``[-CAP, CAP]`` explicitly, so the sensitivity is the same.
"""

import functools
import math

import numpy as np
from scipy.special import ndtr

from ..privacy._mechanisms import GaussianMechanism
from ..utils._validation import check_int, check_real
from ._oracle import GradientMeanOracle, SingleMechanismOracle

__all__ = ["CAP", "CatoniMeanOracle", "CatoniPsiTable", "catoni_psi"]

#: Bound on the soft truncation ``phi`` (and on ``psi_beta``): ``2 sqrt(2) / 3``.
CAP = 2.0 * math.sqrt(2.0) / 3.0

#: Allowed range of the smoothing precision ``beta_N``: outside it the closed form
#: overflows to NaN for some inputs but not others.
BETA_RANGE = (1e-6, 1e12)

#: Inputs are sanitised to ``[-A_BIG, A_BIG]``; psi has saturated long before.
_A_BIG = 1e8
#: Below this ``|a|`` the smoothing is negligible and ``psi(a) = a - a^3 / 6``.
_A_SMALL = 1e-8
#: The closed form is used for ``|a| <= 50`` (step 3 of :func:`catoni_psi`), and
#: only while the smoothing width ``b = |a| / sqrt(beta)`` is at most 50: its terms
#: grow like ``|a| b^2`` and cancel (error ~1e-16 |a| b^2, e.g. 1e-3 at beta = 1e-6,
#: a = 50), whereas for b >= 50 the Gaussian is nearly flat on the interval and the
#: quadrature is exact to rounding. For beta >= 1 this is the plain ``|a| <= 50``.
_A_CLOSED = 50.0
_B_CLOSED = 50.0
#: Entries per block inside ``catoni_psi`` (keeps temporaries in cache / bounded).
_BLOCK = 1 << 16
#: Rows per block of the ``(rows, 64)`` quadrature matrix (fits in L2 cache).
_QUAD_BLOCK = 1 << 10

_SQRT2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gauss_legendre_nodes(order=64):
    # Nodes on [-sqrt(2), sqrt(2)]; the polynomial part of phi is folded into the
    # weights, since the integrand is (x - x^3/6) N(x; a, b^2).
    x, w = np.polynomial.legendre.leggauss(order)
    x = _SQRT2 * x
    w = _SQRT2 * w * (x - x**3 / 6.0)
    return x, w


_GL_X, _GL_W = _gauss_legendre_nodes()


def _check_beta(beta):
    return check_real(beta, "beta (smoothing)", low=BETA_RANGE[0], high=BETA_RANGE[1])


def _catoni_correction(a, b):
    """Tail correction ``C(a, b)`` of the smoothed influence (Wang et al., eq. (9)).

    ``E phi(X)`` for ``X ~ N(a, b^2)`` equals ``a (1 - b^2/2) - a^3/6 + C(a, b)``:
    the polynomial is ``E[X - X^3/6]`` and ``C`` replaces it by ``+-CAP`` on the
    saturated tails ``|X| > sqrt(2)`` (derived from the truncated-normal moments
    ``E[Z^k 1{Z > V}]``, k = 0..3; the paper defers its explicit form to an
    appendix). Valid for
    ``b > 0``; cancels catastrophically for large ``|a|`` or ``b``, so
    :func:`catoni_psi` evaluates the same closed form regrouped (``_psi_closed``).
    Kept as the literal eq. (9) that the tests hold ``_psi_closed`` to.
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    v_plus = (_SQRT2 - a) / b
    v_minus = (_SQRT2 + a) / b
    f_plus = ndtr(-v_plus)  # P(X > sqrt 2)
    f_minus = ndtr(-v_minus)  # P(X < -sqrt 2)
    e_plus = np.exp(-0.5 * v_plus**2)
    e_minus = np.exp(-0.5 * v_minus**2)
    c = _INV_SQRT_2PI
    tails = f_plus + f_minus
    return (
        CAP * (f_plus - f_minus)
        - (a - a**3 / 6.0) * tails
        + c * b * (1.0 - a**2 / 2.0) * (e_minus - e_plus)
        + (a * b**2 / 2.0) * (tails + c * (v_plus * e_plus + v_minus * e_minus))
        + (c * b**3 / 6.0) * ((2.0 + v_plus**2) * e_plus - (2.0 + v_minus**2) * e_minus)
    )


def _psi_closed(a, beta):
    # The closed form of eq. (9), a (1 - b^2/2) - a^3/6 + C(a, b), regrouped by the tail
    # factors (substituting b V+ = sqrt2 - a, b V- = sqrt2 + a):
    #   psi = P (1 - F+ - F-) + CAP (F+ - F-)
    #         + (c b / 6) [(a^2 + sqrt2 a - 4 + 2 b^2) e+
    #                      + (4 + sqrt2 a - a^2 - 2 b^2) e-]
    # with P = a - a^3/6 - a b^2/2. Algebraically identical; the polynomial is never
    # added and then subtracted back on the saturated tails, and 1 - F+ - F- is taken
    # as Phi(V+) - F-, so it keeps its relative precision when it is tiny.
    a2 = a * a
    b = a * (1.0 / math.sqrt(beta))
    b2 = a2 * (1.0 / beta)
    inv_b = 1.0 / b
    v_plus = (_SQRT2 - a) * inv_b
    v_minus = (_SQRT2 + a) * inv_b
    inside_upper = ndtr(v_plus)  # 1 - F+
    f_minus = ndtr(-v_minus)
    e_plus = np.exp(-0.5 * v_plus * v_plus)
    e_minus = np.exp(-0.5 * v_minus * v_minus)
    poly = a * (1.0 - a2 / 6.0 - 0.5 * b2)
    sa = _SQRT2 * a
    return (
        poly * (inside_upper - f_minus)
        + CAP * ((1.0 - inside_upper) - f_minus)
        + (_INV_SQRT_2PI / 6.0)
        * b
        * ((a2 + sa - 4.0 + 2.0 * b2) * e_plus + (4.0 + sa - a2 - 2.0 * b2) * e_minus)
    )


def _psi_quadrature(a, beta):
    # Integral form (E phi(X) split at +-sqrt2):
    # psi = CAP (F+ - F-) + int_{-sqrt2}^{sqrt2} (x - x^3/6) N(x; a, b^2) dx, for
    # a > 0 with |a| > 50 or b > 50; the CAP term carries the saturated tails, so
    # nothing cancels, and the integrand is smooth.
    # With u = 1/a and b = a / sqrt(beta): (x - a) / b = sqrt(beta) (x u - 1).
    u = 1.0 / a
    root = math.sqrt(beta)
    h = math.sqrt(0.5 * beta)
    out = CAP * (ndtr(root * (1.0 - _SQRT2 * u)) - ndtr(-root * (1.0 + _SQRT2 * u)))
    nodes = _GL_X * h
    for start in range(0, a.shape[0], _QUAD_BLOCK):
        sl = slice(start, start + _QUAD_BLOCK)
        z = np.multiply.outer(u[sl], nodes)
        z -= h
        np.square(z, out=z)
        np.negative(z, out=z)
        np.exp(z, out=z)  # exp(-((x - a) / b)^2 / 2)
        out[sl] += (z @ _GL_W) * (u[sl] * (root * _INV_SQRT_2PI))
    return out


def catoni_psi(a, beta):
    """Smoothed soft-truncation influence ``psi_beta(a) = E phi(a + b xi)``.

    ``phi(u) = u - u^3/6`` on ``|u| <= sqrt(2)`` and ``sign(u) 2 sqrt(2)/3`` beyond
    (Catoni & Giulini 2017); ``b = |a| / sqrt(beta)`` and ``xi ~ N(0, 1)``: the
    sample ``a`` is multiplied by ``1 + zeta`` with ``zeta ~ N(0, 1/beta)`` and
    ``zeta`` is integrated out (Holland 2019). Evaluated with a numerically safe
    recipe (the plain closed form of eq. (9) cancels catastrophically for large
    ``|a|``):

    1. sanitise: NaN -> 0, +-inf -> +-1e8, clip to ``[-1e8, 1e8]``;
    2. ``|a| < 1e-8``: ``a - a^3/6``;
    3. ``|a| <= 50``: closed form ``a (1 - b^2/2) - a^3/6 + C(a, b)``,
       ``b = |a| / sqrt(beta)`` (evaluated regrouped; for ``beta < 1`` also only
       while ``b <= 50``, beyond which the closed form loses digits);
    4. otherwise: ``CAP (F+ - F-)`` plus a 64-point Gauss-Legendre integral of
       ``(x - x^3/6) N(x; a, b^2)`` over ``[-sqrt(2), sqrt(2)]``;
    5. NaN -> 0, then clip to ``[-CAP, CAP]``.

    ``psi`` is odd; it is evaluated at ``|a|`` and the sign restored, so oddness is
    exact in floating point. Step 5 is a no-op for correct values and the hard
    guarantee ``|psi| <= CAP`` that every sensitivity bound built on ``psi`` uses.

    Parameters
    ----------
    a : array_like
        Scaled samples ``x / s``; any float values, including ``+-inf`` and NaN.
    beta : float
        Smoothing precision ``beta_N`` in ``[1e-6, 1e12]``.

    Returns
    -------
    ndarray of float64, same shape as ``a``
        Values in ``[-CAP, CAP]``, never NaN.

    Raises
    ------
    ValueError
        If ``beta`` is not a real number in ``[1e-6, 1e12]``.

    References
    ----------
    .. [1] Wang, D., Xiao, H., Devadas, S. and Xu, J. (2020). On differentially
       private stochastic convex optimization with heavy-tailed data. ICML.
       Eq. (9)-(10) and Algorithm 4.
    .. [2] Holland, M. J. (2019). Robust descent using smoothed multiplicative
       noise. AISTATS.
    .. [3] Catoni, O. and Giulini, I. (2017). Dimension-free PAC-Bayesian bounds for
       matrices, vectors, and linear least squares regression. arXiv:1712.02747.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco._mean_estimation._catoni import catoni_psi
    >>> catoni_psi([0.0, 1.0, -1e300, np.nan], 2 * np.log(100)).round(6).tolist()
    [0.0, 0.78253, -0.94054, 0.0]
    """
    beta = _check_beta(beta)
    a = np.asarray(a, dtype=float)
    shape = a.shape
    flat = a.ravel()
    out = np.empty(flat.shape[0])
    # |a| <= a_closed  <=>  |a| <= 50 and b = |a| / sqrt(beta) <= 50.
    a_closed = min(_A_CLOSED, _B_CLOSED * math.sqrt(beta))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        for start in range(0, flat.shape[0], _BLOCK):
            block = flat[start : start + _BLOCK]
            sign = np.sign(block)
            # Step 1; NaN has sign NaN, hence the second nan_to_num on `sign`.
            x = np.nan_to_num(np.abs(block), nan=0.0, posinf=_A_BIG)
            np.minimum(x, _A_BIG, out=x)
            sign = np.nan_to_num(sign, nan=0.0)
            r = x - x * x * x / 6.0  # step 2, overwritten below where |a| >= 1e-8
            mid = (x >= _A_SMALL) & (x <= a_closed)
            if mid.any():
                r[mid] = _psi_closed(x[mid], beta)
            big = x > a_closed
            if big.any():
                r[big] = _psi_quadrature(x[big], beta)
            # Step 5: np.clip passes NaN through, so map it first (privacy: a NaN
            # for some records and not others would reveal them).
            r = np.clip(np.nan_to_num(r, nan=0.0), -CAP, CAP)
            out[start : start + _BLOCK] = sign * r
    return out.reshape(shape)


#: Intervals of :class:`CatoniPsiTable`: interpolation error <= 4.4e-9 for every
#: beta in ``BETA_RANGE`` (largest at beta >= 1e4 near ``|a| = sqrt(2)``, where
#: ``phi''`` jumps; half as many intervals give 1.8e-8); a power of two, so that
#: the node index is a rounding (``_blocks``).
_TABLE_SIZE = 2**15
#: Entries per block of the table kernel: its buffers (40 bytes an entry) stay in
#: the L2/L3 cache, and each numpy call does enough work to hide its overhead
#: (fastest of 2^13..2^16 measured).
_TABLE_BLOCK = 2**15
#: Length of the bound arrays of the kernel's fmin / fmax (see ``_blocks``).
_LANE = 256
_SIGN_BIT = np.uint64(1 << 63)
_ABS_BITS = np.uint64((1 << 63) - 1)


class CatoniPsiTable:
    """Lookup table of :func:`catoni_psi` for one ``beta``: bounded, odd, fast.

    ``psi_beta`` is tabulated in the variable ``t = |a| / (|a| + c)``, which maps
    ``[0, inf]`` onto ``[0, 1]``, at the nodes ``t = k / m``, ``k = 0..m``
    (``m`` = ``size``; ``c = sqrt(2) min(1, sqrt(beta))``, the scale on which
    ``psi_beta`` bends, so the nodes are dense where it curves, and ``|a| = inf``
    is the node ``t = 1``). Stored is ``Q(t) = psi_beta(|a|) / t``, so the
    evaluation ``psi = t Q(t)`` keeps its relative accuracy near ``a = 0``
    (``psi(a) ~ a``; relative error below ``1e-9`` there); ``Q`` is interpolated
    linearly around the nearest node (central differences, stored as intercept
    and slope). The nodes are :func:`catoni_psi` itself, which stays the
    reference: for every ``beta`` in ``[1e-6, 1e12]`` the two differ by at most
    ``4.4e-9`` (tested on dense grids and extreme inputs). Every value of the
    table's evaluation is:

    - clipped explicitly to ``[0, CAP]`` before the sign of ``a`` is restored, so
      ``|psi| <= CAP`` holds for every float input, whatever the rounding;
    - odd in floating point (evaluated at ``|a|``, the sign bit copied back);
    - 0 for NaN (as :func:`catoni_psi`), and ``psi_beta(1e8)`` for ``+-inf`` and
      every ``|a| >= 1e8`` up to ``4.4e-9`` (:func:`catoni_psi`'s saturation).

    Privacy: the table depends on the public ``beta`` only, and what the
    sensitivity of the Catoni mean needs is ``|psi| <= CAP`` for every record
    (Wang et al. 2020, the bound stated with eq. (12)); the explicit clip keeps
    it, so ``Delta = (s / n) 2 CAP`` is unchanged. The approximation only moves
    each summand by at most ``4.4e-9`` and so a coordinate of the estimate by at
    most ``4.4e-9 s``: a matter of utility, never of privacy.

    Parameters
    ----------
    beta : float
        Smoothing precision ``beta_N`` in ``[1e-6, 1e12]``.
    size : int, default=32768
        Number of intervals ``m``, a power of two in ``[2^4, 2^24]``; the
        accuracy above holds for the default.

    Attributes
    ----------
    beta : float
    size : int
    bend : float
        ``c``.
    table : ndarray of shape (size + 1, 2), read-only
        Row ``k``: intercept and slope of the linear ``Q(t)`` around node ``k``.

    References
    ----------
    .. [1] Wang, D., Xiao, H., Devadas, S. and Xu, J. (2020). On differentially
       private stochastic convex optimization with heavy-tailed data. ICML.
       Eq. (9)-(12).
    .. [2] Holland, M. J. (2019). Robust descent using smoothed multiplicative
       noise. AISTATS.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco._mean_estimation._catoni import CatoniPsiTable
    >>> table = CatoniPsiTable(2 * np.log(100))
    >>> table([0.0, 1.0, -1e300, np.nan]).round(6).tolist()
    [0.0, 0.78253, -0.94054, 0.0]
    """

    def __init__(self, beta, size=_TABLE_SIZE):
        beta = _check_beta(beta)
        m = check_int(size, "size", low=2**4, high=2**24)
        if m & (m - 1):
            raise ValueError(f"size must be a power of two, got {size!r}.")
        c = _SQRT2 * min(1.0, math.sqrt(beta))
        k = np.arange(m + 1, dtype=float)
        # Node k is t = k / m: |a| = c k / (m - k), and |a| = inf at k = m,
        # where catoni_psi saturates (its value at 1e8).
        x = np.full(m + 1, _A_BIG)
        x[:-1] = np.minimum(c * k[:-1] / (m - k[:-1]), _A_BIG)
        # In units of g = m t (whole numbers at the nodes); the powers of two m
        # and m^2 below convert exactly to units of t.
        q = np.empty(m + 1)
        q[1:] = catoni_psi(x[1:], beta) / k[1:]
        q[0] = c / m  # psi'(0) = 1 and d|a|/dg = c / m at g = 0
        slope = np.empty(m + 1)
        slope[1:-1] = 0.5 * (q[2:] - q[:-2])
        slope[0] = q[1] - q[0]  # t >= 0: only the right half of node 0
        slope[-1] = q[-1] - q[-2]  # t <= 1: only the left half of node m
        # Q(g) ~ q_k + (g - k) slope_k around the nearest node k, stored as
        # intercept and slope so that g - k is never formed.
        table = np.empty((m + 1, 2))
        table[:, 0] = (q - k * slope) * m
        table[:, 1] = slope * (float(m) * m)
        table.flags.writeable = False
        self.beta = beta
        self.size = m
        self.bend = c
        self.table = table

    def __eq__(self, other):
        # A deterministic function of (beta, size): equal tables are the same.
        if not isinstance(other, CatoniPsiTable):
            return NotImplemented
        return (self.beta, self.size) == (other.beta, other.size)

    def __hash__(self):
        return hash((CatoniPsiTable, self.beta, self.size))

    def __repr__(self):
        return f"CatoniPsiTable(beta={self.beta!r}, size={self.size!r})"

    def _blocks(self, G, scale, width):
        """Yield ``(rows, values)``: ``psi(G / scale)`` for blocks of whole rows.

        ``G`` is a C-contiguous float64 array of shape ``(n, width)``; ``values``
        is a scratch buffer of shape ``(len(rows), width)``, overwritten by the
        next block.
        """
        # t = |a| / (|a| + c) with a = G / scale: the scale folds into the
        # constants (|G| is clamped to 1e8 s and t = |G| / (|G| + c s)), unless
        # c s or 1e8 s leaves the normal float range; then |G| / scale is formed
        # first (it may overflow to inf, clamped to 1e8 like the rest).
        cs, top = self.bend * scale, _A_BIG * scale
        fold = 1e-290 < cs and top < 1e290
        if not fold:
            cs, top = self.bend, _A_BIG
        # t + 2^52 / m rounds t in [0, 1] to a multiple of 1 / m (the float's
        # last place there): its low bits are the nearest node k, no
        # float -> int cast needed.
        shift = 2.0**52 / self.size
        shift_bits = np.float64(shift).view(np.int64)
        n_rows = G.shape[0]
        step = max(1, _TABLE_BLOCK // max(width, 1))
        # Buffers padded to whole lanes: fmin / fmax take their bound as a short
        # array broadcast over (-1, _LANE) views (numpy's loops for a scalar bound
        # are several times slower, and a full-length bound would crowd the
        # cache). The padding holds finite leftovers and is never summed.
        cap = -(-min(step, n_rows) * width // _LANE) * _LANE
        x = np.zeros(cap)
        y = np.zeros(cap)
        index = np.zeros(cap, dtype=np.int64)
        pair = np.empty((cap, 2))
        zeros, tops = np.zeros(_LANE), np.full(_LANE, top)

        def views(size):
            # The views of one block, made once per block size (numpy's per-call
            # overhead is a tenth of the work at this block size).
            padded = -(-size // _LANE) * _LANE
            xs, ys, ks = x[:padded], y[:padded], index[:padded]
            out = ys[:size]
            return (
                xs,
                xs[:size].view(np.uint64),
                xs.reshape(-1, _LANE),
                ys,
                ys.view(np.int64),
                ks,
                pair[:padded],
                pair[:padded, 0],
                pair[:padded, 1],
                ks[:size].view(np.uint64),
                out.view(np.uint64),
                out.reshape(-1, width),
            )

        full = views(min(step, n_rows) * width)
        raw = G.reshape(n_rows, width).view(np.uint64)
        for start in range(0, n_rows, step):
            rows = slice(start, min(start + step, n_rows))
            bits = raw[rows].reshape(-1)
            xs, xbits, lanes, ys, ybits, ks, ps, intercept, slope, sign, obits, out = (
                full if bits.shape[0] == full[1].shape[0] else views(bits.shape[0])
            )
            np.bitwise_and(bits, _ABS_BITS, out=xbits)  # |G|
            if not fold:
                np.divide(xs, scale, out=xs)
            # Step 1 of catoni_psi: NaN -> 0 (fmax drops a NaN operand), then
            # inf and everything beyond -> 1e8.
            np.fmax(lanes, zeros, out=lanes)
            np.fmin(lanes, tops, out=lanes)
            np.add(xs, cs, out=ys)
            np.divide(xs, ys, out=xs)  # t in [0, 1], to relative precision
            np.add(xs, shift, out=ys)
            np.subtract(ybits, shift_bits, out=ks)  # k = round(m t)
            self.table.take(ks, axis=0, out=ps, mode="clip")
            np.multiply(xs, slope, out=ys)
            np.add(ys, intercept, out=ys)
            np.multiply(ys, xs, out=ys)  # t Q(t)
            # The privacy guard: |psi| <= CAP whatever the rounding above (every
            # term is finite here, so nothing is NaN).
            np.clip(ys, 0.0, CAP, out=ys)
            # Odd: the sign bit of a, copied exactly.
            np.bitwise_and(bits, _SIGN_BIT, out=sign)
            np.bitwise_or(obits, sign, out=obits)
            yield rows, out

    def __call__(self, a, scale=1.0):
        """``psi_beta(a / scale)`` elementwise.

        Parameters
        ----------
        a : array_like
            Any float values, including ``+-inf`` and NaN.
        scale : float, default=1.0
            Positive, finite ``s``.

        Returns
        -------
        ndarray of float64, same shape as ``a``
            Values in ``[-CAP, CAP]``, never NaN.
        """
        scale = _check_scale(scale)
        a = np.asarray(a, dtype=float)
        flat = np.ascontiguousarray(a.reshape(-1, 1))
        out = np.empty(flat.shape[0])
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            for rows, values in self._blocks(flat, scale, 1):
                out[rows] = values[:, 0]
        return out.reshape(a.shape)

    def column_sums(self, G, scale=1.0, weights=None):
        """``sum_i w_i psi_beta(G_ij / scale)`` for every column ``j``.

        Evaluated block by block of rows (no temporary as large as ``G``); the
        sum is a matrix-vector product.

        Parameters
        ----------
        G : ndarray of shape (n, ...)
            Float64; trailing axes are flattened (C order).
        scale : float, default=1.0
            Positive, finite ``s``.
        weights : ndarray of shape (n,), optional
            ``w_i`` (1 if None).

        Returns
        -------
        ndarray of shape ``G.shape[1:]``
        """
        scale = _check_scale(scale)
        G = np.ascontiguousarray(G, dtype=float)
        n_rows = G.shape[0]
        width = math.prod(G.shape[1:])
        total = np.zeros(width)
        if n_rows == 0 or width == 0:
            return total.reshape(G.shape[1:])
        ones = None
        if weights is None:
            ones = np.ones(min(n_rows, max(1, _TABLE_BLOCK // width)))
        else:
            weights = np.asarray(weights, dtype=float)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            for rows, values in self._blocks(G, scale, width):
                w = ones[: values.shape[0]] if weights is None else weights[rows]
                total += w @ values
        return total.reshape(G.shape[1:])


def _check_scale(scale):
    return check_real(scale, "scale", low=0, low_open=True)


class CatoniMeanOracle(SingleMechanismOracle, GradientMeanOracle):
    """Coordinate-wise Catoni/Holland mean of per-sample gradients + Gaussian noise.

    The mean oracle of Wang et al. (2020), Algorithm 4 (eq. (10)-(12)): every
    coordinate ``j`` of the per-sample gradients ``g_i = u_i (outer) x~_i`` is
    estimated by ``(s / n) sum_i psi_beta(g_ij / s)`` and the whole vector is
    released with Gaussian noise.

    Sensitivity (replace-one, ``n`` public; Wang et al., the bound stated with
    eq. (12), used in Theorem 6): ``|psi_beta| <= CAP = 2 sqrt(2)/3`` for every
    input (enforced by the final clip of :func:`catoni_psi` and of
    :class:`CatoniPsiTable`, which :meth:`estimate` uses), so replacing one record
    changes one summand of each coordinate by at most ``2 CAP`` and the coordinate
    by at most ``Delta = (s / n) 2 CAP = 4 sqrt(2) s / (3 n)``, whatever the data. The
    ``p = prod(shape)`` coordinates then have l2-sensitivity ``sqrt(p) Delta``, and
    one Gaussian mechanism of std ``sigma = sqrt(p) Delta / sqrt(2 rho)`` per call is
    ``rho``-zCDP. With ``rho = rho_total / T`` and ``p = d`` this is
    ``sigma = (4 s / (3 n)) sqrt(d T / rho_total)``, which for the paper's ``s`` is
    Algorithm 4's ``sigma^2 = 8 v d T / (9 ln(1/delta') n rho_total)``. There
    ``rho_total`` is the zCDP budget of ``(epsilon, delta)``,
    ``(sqrt(ln(1/delta) + epsilon) - sqrt(ln(1/delta)))^2``: Algorithm 4, line 1,
    prints ``(sqrt(log(1/delta)) + epsilon - sqrt(log(1/delta)))^2``, literally
    ``epsilon^2``, a typo that the paper's own noise formula rules out.

    Parameters
    ----------
    moment_bound : float, default=1.0
        ``v``, a public bound on every coordinate's raw second moment
        ``E g_j^2`` (Assumption A4). Only accuracy depends on it being right.
    scale : {"rms", "paper"} or float, default="rms"
        Truncation scale ``s``. ``"paper"``: ``sqrt(n v / (2 ln(1/delta')))``
        (Lemma 3; Algorithm 4, line 1, prints ``ln(1/(delta' T))``, but Theorem 7
        and the noise formula match ``ln(1/delta')``, used here); ``"rms"``:
        ``2 sqrt(v)`` (a library heuristic, not in the paper: the paper's ``s``
        grows with ``sqrt(n)`` and so does the noise); a positive float is used as
        is.
    smoothing : float or None, default=None
        ``beta_N``, precision of the multiplicative smoothing noise, in
        ``[1e-6, 1e12]``. None: ``ln(1/delta')`` (Algorithm 4, line 1; Lemma 3
        uses ``2 ln(1/delta')``).
    failure_prob : float, default=0.01
        ``delta'`` in ``(0, 1)``, the failure probability of the utility guarantee
        (never of privacy).

    Attributes
    ----------
    scale_ : float
        Resolved ``s``.
    smoothing_ : float
        Resolved ``beta_N``.
    sensitivity_ : float
        Per-coordinate sensitivity ``Delta = 4 sqrt(2) s / (3 n)``.
    psi_table_ : CatoniPsiTable
        The evaluation of ``psi_beta`` (a function of ``beta_N`` only).
    mechanism_ : GaussianMechanism
        The per-call mechanism, l2-sensitivity ``sqrt(p) Delta``.
    noise_std_ : float
        Its ``sigma``.

    Notes
    -----
    Everything stored is a function of public inputs (``n``, the shape, the
    budget and the parameters above); nothing computed from the data is kept.

    References
    ----------
    .. [1] Wang, D., Xiao, H., Devadas, S. and Xu, J. (2020). On differentially
       private stochastic convex optimization with heavy-tailed data. ICML.
       Algorithm 4, eq. (10)-(12), Lemma 3, Theorems 6-8.
    .. [2] Holland, M. J. (2019). Robust descent using smoothed multiplicative
       noise. AISTATS.
    .. [3] Catoni, O. and Giulini, I. (2017). Dimension-free PAC-Bayesian bounds for
       matrices, vectors, and linear least squares regression. arXiv:1712.02747.
    """

    #: Every mechanism is Gaussian: exact GDP composition applies.
    all_gaussian = True

    def __init__(
        self, moment_bound=1.0, scale="rms", smoothing=None, failure_prob=0.01
    ):
        self.moment_bound = check_real(
            moment_bound, "moment_bound", low=0, low_open=True
        )
        self.failure_prob = check_real(
            failure_prob, "failure_prob", low=0, high=1, low_open=True, high_open=True
        )
        if isinstance(scale, str):
            if scale not in ("paper", "rms"):
                raise ValueError(
                    f"scale must be 'paper', 'rms' or a positive float, got {scale!r}."
                )
        else:
            scale = _check_scale(scale)
        self.scale = scale
        self.smoothing = None if smoothing is None else _check_beta(smoothing)
        beta = self._resolve_smoothing()
        if not BETA_RANGE[0] <= beta <= BETA_RANGE[1]:
            raise ValueError(
                f"the default smoothing ln(1/failure_prob) = {beta!r} lies outside "
                f"[{BETA_RANGE[0]:g}, {BETA_RANGE[1]:g}]: choose a smaller "
                "failure_prob or pass smoothing."
            )

    def _resolve_smoothing(self):
        # Algorithm 4 line 1 uses ln(1/delta'); Lemma 3 has 2 ln(1/delta').
        # Either is privacy-neutral: Delta only uses |psi| <= CAP.
        if self.smoothing is None:
            return math.log(1.0 / self.failure_prob)
        return self.smoothing

    def _resolve_scale(self, n_samples):
        v = self.moment_bound
        if self.scale == "paper":
            # Lemma 3 with ln(1/delta') (Algorithm 4, line 1, prints ln(1/(delta' T));
            # Theorem 7 and the paper's sigma^2 match ln(1/delta')). sigma is derived
            # from this same s below, never from the paper's closed-form sigma^2:
            # a larger s with that sigma would be under-noised.
            s = math.sqrt(n_samples * v / (2.0 * math.log(1.0 / self.failure_prob)))
        elif self.scale == "rms":
            s = 2.0 * math.sqrt(v)
        else:
            s = self.scale
        if not (0 < s < math.inf):
            raise ValueError(f"the resolved scale s = {s!r} is not finite and > 0.")
        return s

    def calibrate(self, n_samples, rho, shape):
        """Fix ``s``, ``beta_N`` and the noise from public values.

        Parameters
        ----------
        n_samples : int
            Public ``n`` (replace-one neighbours).
        rho : float
            zCDP budget of one call; ``math.inf`` is the non-private testing mode
            (``sigma = 0``).
        shape : tuple of int
            Shape of the parameter and of the estimate, ``(dim,)`` or ``(dim, K)``.

        Returns
        -------
        self
        """
        n = check_int(n_samples, "n_samples", low=1)
        shape = tuple(int(k) for k in np.atleast_1d(shape))
        if len(shape) not in (1, 2) or min(shape) < 1:
            raise ValueError(f"shape must be (dim,) or (dim, K), got {shape!r}.")
        s = self._resolve_scale(n)
        beta = self._resolve_smoothing()
        # Replace-one changes one summand psi(g_ij / s) of each coordinate, both in
        # [-CAP, CAP] (catoni_psi's final clip): Delta = (s/n) 2 CAP = 4 sqrt(2) s/(3n)
        # per coordinate (Wang et al., with eq. (12)); sqrt(p) Delta in l2.
        sensitivity = (s / n) * 2.0 * CAP
        p = math.prod(shape)
        self.mechanism_ = GaussianMechanism.from_zcdp(
            math.sqrt(p) * sensitivity, rho, name="Catoni-Holland gradient mean"
        )
        self.n_samples_ = n
        self.shape_ = shape
        self.scale_ = s
        self.smoothing_ = beta
        self.sensitivity_ = sensitivity
        self.noise_std_ = self.mechanism_.sigma
        self.psi_table_ = _psi_table(beta)
        return self

    def estimate(self, design, U, rng, sample_weight=None):
        """Noisy coordinate-wise Catoni/Holland mean of ``g_i = u_i (outer) x~_i``.

        The per-sample gradients are only seen one row chunk at a time through
        ``design.gradient_chunk_sum``; ``psi`` is evaluated by the lookup table
        :class:`CatoniPsiTable` (within ``4.4e-9`` of :func:`catoni_psi`, and
        bounded by ``CAP`` for every input, so ``Delta`` is unchanged).
        Non-finite gradient entries are mapped per record (NaN to 0, ``+-inf`` to
        the saturation level), so the sensitivity is unchanged.

        Parameters
        ----------
        design : LinearDesign
        U : ndarray of shape (n,) or (n, K)
            Per-sample derivatives of the loss with respect to the prediction.
        rng : numpy.random.Generator
        sample_weight : ndarray of shape (n,), optional
            Public weights in ``[0, 1]`` multiplying each ``psi`` term; the
            denominator stays the public ``n``, so every summand is still in
            ``[-CAP, CAP]`` and ``Delta`` is unchanged (a denominator
            ``sum w_i`` would be data-dependent and break it).

        Returns
        -------
        ndarray of shape ``shape``
        """
        if design.n_samples != self.n_samples_:
            raise ValueError(
                f"the oracle was calibrated for n = {self.n_samples_}, got a design "
                f"with {design.n_samples} rows."
            )
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=float)
            if sample_weight.shape != (self.n_samples_,) or not np.all(
                (sample_weight >= 0) & (sample_weight <= 1)
            ):
                raise ValueError(
                    "sample_weight must be public weights in [0, 1] of shape (n,)."
                )
        table, s = self.psi_table_, self.scale_

        def chunk_sum(G, rows):
            weights = None if sample_weight is None else sample_weight[rows]
            return table.column_sums(G, s, weights)

        total = design.gradient_chunk_sum(U, chunk_sum)
        mean = (self.scale_ / self.n_samples_) * np.asarray(total, dtype=float)
        if mean.shape != self.shape_:
            raise ValueError(
                f"the estimate has shape {mean.shape}, but the oracle was calibrated "
                f"for {self.shape_}."
            )
        return self.mechanism_.release(mean, rng)


@functools.lru_cache(maxsize=4)
def _psi_table(beta):
    # A fit builds the table once (about 33k evaluations of catoni_psi); refits with
    # the same public beta reuse it (it is read-only).
    return CatoniPsiTable(beta)
