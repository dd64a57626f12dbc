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
"""

import math
import numbers

import numpy as np
from scipy.special import ndtr

from ..privacy._mechanisms import GaussianMechanism
from ._oracle import GradientMeanOracle

__all__ = ["CAP", "CatoniMeanOracle", "catoni_psi"]

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
    if isinstance(beta, bool) or not isinstance(beta, numbers.Real):
        raise ValueError(f"beta must be a real number, got {beta!r}.")
    beta = float(beta)
    if not (BETA_RANGE[0] <= beta <= BETA_RANGE[1]):
        raise ValueError(
            f"beta (smoothing) must lie in [{BETA_RANGE[0]:g}, {BETA_RANGE[1]:g}], "
            f"got {beta!r}."
        )
    return beta


def _catoni_correction(a, b):
    """Tail correction ``C(a, b)`` of the smoothed influence (Wang et al., eq. (9)).

    ``E phi(X)`` for ``X ~ N(a, b^2)`` equals ``a (1 - b^2/2) - a^3/6 + C(a, b)``:
    the polynomial is ``E[X - X^3/6]`` and ``C`` replaces it by ``+-CAP`` on the
    saturated tails ``|X| > sqrt(2)`` (derived from the truncated-normal moments
    ``E[Z^k 1{Z > V}]``, k = 0..3; the paper defers its explicit form to an
    appendix). Valid for
    ``b > 0``; cancels catastrophically for large ``|a|`` or ``b``, so
    :func:`catoni_psi` evaluates the same closed form regrouped (``_psi_closed``).
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


class CatoniMeanOracle(GradientMeanOracle):
    """Coordinate-wise Catoni/Holland mean of per-sample gradients + Gaussian noise.

    The mean oracle of Wang et al. (2020), Algorithm 4 (eq. (10)-(12)): every
    coordinate ``j`` of the per-sample gradients ``g_i = u_i (outer) x~_i`` is
    estimated by ``(s / n) sum_i psi_beta(g_ij / s)`` and the whole vector is
    released with Gaussian noise.

    Sensitivity (replace-one, ``n`` public; Wang et al., the bound stated with
    eq. (12), used in Theorem 6): ``|psi_beta| <= CAP = 2 sqrt(2)/3`` for every
    input (enforced by :func:`catoni_psi`), so replacing one record changes one
    summand of each coordinate by at most ``2 CAP`` and the coordinate by at most
    ``Delta = (s / n) 2 CAP = 4 sqrt(2) s / (3 n)``, whatever the data. The
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
        if not (_is_real(moment_bound) and 0 < moment_bound < math.inf):
            raise ValueError(
                f"moment_bound must be finite and > 0, got {moment_bound!r}."
            )
        if not (_is_real(failure_prob) and 0 < failure_prob < 1):
            raise ValueError(f"failure_prob must lie in (0, 1), got {failure_prob!r}.")
        if isinstance(scale, str):
            if scale not in ("paper", "rms"):
                raise ValueError(
                    f"scale must be 'paper', 'rms' or a positive float, got {scale!r}."
                )
        elif not (_is_real(scale) and 0 < scale < math.inf):
            raise ValueError(
                f"scale must be 'paper', 'rms' or a finite float > 0, got {scale!r}."
            )
        self.moment_bound = float(moment_bound)
        self.scale = scale if isinstance(scale, str) else float(scale)
        self.failure_prob = float(failure_prob)
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
        if (
            isinstance(n_samples, bool)
            or not isinstance(n_samples, numbers.Integral)
            or n_samples < 1
        ):
            raise ValueError(f"n_samples must be an integer >= 1, got {n_samples!r}.")
        shape = tuple(int(k) for k in np.atleast_1d(shape))
        if len(shape) not in (1, 2) or min(shape) < 1:
            raise ValueError(f"shape must be (dim,) or (dim, K), got {shape!r}.")
        n = int(n_samples)
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
        return self

    def estimate(self, design, U, rng, sample_weight=None):
        """Noisy coordinate-wise Catoni/Holland mean of ``g_i = u_i (outer) x~_i``.

        The per-sample gradients are only seen one row chunk at a time through
        ``design.gradient_chunk_sum``. Non-finite gradient entries are mapped by
        :func:`catoni_psi` (per record, so the sensitivity is unchanged).

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
        inv_s = 1.0 / self.scale_
        beta = self.smoothing_

        def chunk_sum(G, rows):
            with np.errstate(over="ignore", invalid="ignore"):
                influence = catoni_psi(G * inv_s, beta)
            if sample_weight is not None:
                w = sample_weight[rows]
                influence *= w.reshape(w.shape + (1,) * (influence.ndim - 1))
            return influence.sum(axis=0)

        total = design.gradient_chunk_sum(U, chunk_sum)
        mean = (self.scale_ / self.n_samples_) * np.asarray(total, dtype=float)
        if mean.shape != self.shape_:
            raise ValueError(
                f"the estimate has shape {mean.shape}, but the oracle was calibrated "
                f"for {self.shape_}."
            )
        return self.mechanism_.release(mean, rng)

    def records(self, count):
        """Ledger records for ``count`` calls."""
        return [self.mechanism_.record(count)]


def _is_real(value):
    return (
        not isinstance(value, bool)
        and isinstance(value, numbers.Real)
        and not math.isnan(value)
    )
