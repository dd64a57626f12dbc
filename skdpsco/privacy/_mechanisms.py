"""Noise mechanisms: the only place in skdpsco where noise is drawn.

Every function takes an explicit :class:`numpy.random.Generator`. A mechanism object
pairs a noise draw with the ledger record that the accountant composes, so that what
was released and what was accounted can never drift apart.

The Gaussian and Laplace mechanisms release values on a public grid (Mironov 2012;
Canonne, Kamath & Steinke 2020): the noise-free value is rounded to a power-of-two
step ``gamma`` fixed by the sensitivity and the dimension before the data are read,
and integer noise from :mod:`skdpsco.privacy._discrete` is added, so the set of
values a release can take is the same grid whatever the data. Rounding moves each
of the ``m`` coordinates by at most ``gamma / 2``, which grows the l2-sensitivity
to at most ``Delta + sqrt(m) gamma <= Delta (1 + 2^-10)`` (l1: ``Delta_1 + m gamma
<= Delta_1 (1 + 2^-10)``); the noise is scaled up by the same factor, so the
ratio of sensitivity to noise, hence every privacy statement, is the one recorded.
"""

import dataclasses
import math
from fractions import Fraction

import numpy as np

from ..exceptions import PrivacyBudgetError
from ..utils._validation import check_real
from ._accounting import calibrate_analytic_gaussian
from ._discrete import (
    COUPLING_SIGMA,
    MAX_LAPLACE_SCALE,
    bernoulli_exp,
    discrete_gaussian,
    discrete_gaussian_levels,
    discrete_laplace,
    uniform_permutation,
)
from ._discrete import (
    truncated_negative_binomial as _exact_truncated_negative_binomial,
)
from ._params import _NON_PRIVATE
from ._records import MechanismRecord

#: Relative growth of the sensitivity from rounding to the grid, paid by noise
#: larger by the same factor.
GRID_SLACK = 2.0**-10
#: Noise-free values are clamped to +-2^52 grid steps before rounding (a
#: 1-Lipschitz map: the sensitivity does not grow), so grid values stay exact.
_MAX_STEPS = 2.0**52


def grid_step(scale, n_coordinates, norm="l2"):
    """Public power-of-two grid step for a release of ``n_coordinates`` values
    of scale ``scale`` (the smaller of the sensitivity and the noise scale): the largest
    ``gamma`` with ``sqrt(m) gamma`` (l2) or ``m gamma`` (l1) at most
    ``2^-10 scale``."""
    m = max(int(n_coordinates), 1)
    spread = math.sqrt(m) if norm == "l2" else float(m)
    target = scale * GRID_SLACK
    # The largest power of two at most target / spread, exactly (frexp, not a
    # rounded log2), then checked against the product as computed.
    _, exponent = math.frexp(target / spread)
    gamma = math.ldexp(1.0, exponent - 1)
    while spread * gamma > target:
        gamma /= 2.0
    return gamma


def _grid_steps(value, gamma):
    """``round(value / gamma)`` as integers, NaN to 0 and clamped to +-2^52
    (fixed maps of the noise-free value: no data-dependent error or warning)."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        steps = np.asarray(value, dtype=float) / gamma
    steps = np.nan_to_num(steps, nan=0.0, posinf=_MAX_STEPS, neginf=-_MAX_STEPS)
    return np.rint(np.clip(steps, -_MAX_STEPS, _MAX_STEPS)).astype(np.int64)


def _from_grid(steps, gamma):
    # An int64 below 2^63 times a power of two: a fixed map of the integer.
    with np.errstate(over="ignore"):
        return steps.astype(float) * gamma


#: Coordinates per chunk of a release: the samplers' integer temporaries stay
#: near a megabyte whatever the dimension.
_CHUNK = 2**16


def _release_in_chunks(value, gamma, noise):
    """``(round(value / gamma) + noise) gamma``, ``noise(k)`` drawing ``k``
    integers, in chunks of :data:`_CHUNK` coordinates."""
    flat = value.reshape(-1)
    out = np.empty(flat.size)
    for start in range(0, flat.size, _CHUNK):
        part = flat[start : start + _CHUNK]
        out[start : start + part.size] = _from_grid(
            _grid_steps(part, gamma) + noise(part.size), gamma
        )
    return out.reshape(value.shape)


__all__ = [
    "GRID_SLACK",
    "GaussianMechanism",
    "LaplaceMechanism",
    "gaussian_noise",
    "grid_gaussian_noise",
    "grid_gaussian_sigma",
    "laplace_noise",
    "sigma_for_zcdp",
]


def _check_noiseless(mechanism):
    """Refuse a noiseless release of a sensitive query outside the hidden testing
    mode (``epsilon=inf``, the only caller that may ask for zero noise): a zero
    scale reached any other way is a bug that would publish the value itself."""
    if mechanism.sensitivity > 0 and not _NON_PRIVATE.get():
        raise RuntimeError(
            f"{mechanism.name}: zero noise for a query of sensitivity "
            f"{mechanism.sensitivity:g} outside the non-private testing mode; "
            "nothing is released. This is a bug; please report it."
        )


def _check_rng(rng):
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"noise needs an explicit numpy.random.Generator, got {type(rng).__name__}."
        )


def gaussian_noise(rng, sigma, size=None):
    """Draw ``N(0, sigma^2)`` noise of the given size (``sigma = 0`` gives zeros)."""
    _check_rng(rng)
    if not (sigma >= 0 and math.isfinite(sigma)):
        raise ValueError(f"sigma must be finite and >= 0, got {sigma!r}.")
    if sigma == 0:
        return np.zeros(size) if size is not None else 0.0
    return rng.normal(0.0, sigma, size=size)


def laplace_noise(rng, scale, size=None):
    """Draw Laplace(0, ``scale``) noise of the given size (``scale=0`` gives zeros).

    Raw floating-point noise, part of the public API: added to a value it is not a
    safe release (its floating-point outputs leak, Mironov 2012), which is why
    :class:`LaplaceMechanism` releases on a grid with discrete noise instead.
    """
    _check_rng(rng)
    if not (scale >= 0 and math.isfinite(scale)):
        raise ValueError(f"scale must be finite and >= 0, got {scale!r}.")
    if scale == 0:
        return np.zeros(size) if size is not None else 0.0
    return rng.laplace(0.0, scale, size=size)


def grid_gaussian_noise(rng, sigma, step, size):
    """Gaussian noise of scale ``sigma`` on the public grid ``step Z``.

    ``step K`` with ``K`` a discrete Gaussian of variance ``(sigma / step)^2 + 6^2``
    (grid units). By Peikert's convolution theorem (the argument of
    :meth:`GaussianMechanism.release`), ``K`` is, within total variation
    ``2^-780`` per coordinate, ``Y + R``: ``Y`` a continuous Gaussian of standard
    deviation :func:`grid_gaussian_sigma` over ``step`` (at least ``sigma /
    step``), and ``R``, given ``Y``, a discrete Gaussian of parameter 6 on ``Z -
    Y``. For noise that is not released itself but enters a computation whose
    proof needs a continuous Gaussian (objective perturbation), the caller bounds
    what ``step R`` can change.

    Parameters
    ----------
    rng : numpy.random.Generator
    sigma : float
        ``> 0``.
    step : float
        A power of two, ``> 0`` (public).
    size : int or tuple of int

    Returns
    -------
    ndarray of multiples of ``step``
    """
    _check_rng(rng)
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"sigma must be finite and > 0, got {sigma!r}.")
    if not (step > 0 and math.frexp(step)[0] == 0.5):
        raise ValueError(f"step must be a positive power of two, got {step!r}.")
    variance = (sigma / step) ** 2 + COUPLING_SIGMA**2
    # |K| stays far below 2^53: step K is exact.
    return discrete_gaussian(rng, variance, size).astype(float) * step


def grid_gaussian_sigma(sigma, step):
    """Standard deviation of the continuous part of :func:`grid_gaussian_noise`:
    ``step sqrt(V' - 6^2)``, ``V' >= (sigma / step)^2 + 6^2`` the variance its
    sampler realises (a public number, at least ``sigma``)."""
    variance = (sigma / step) ** 2 + COUPLING_SIGMA**2
    realised = discrete_gaussian_levels(variance)[1]
    return step * math.sqrt(realised - COUPLING_SIGMA**2)


def sigma_for_zcdp(sensitivity, rho):
    """Gaussian std giving ``rho``-zCDP at l2-sensitivity ``sensitivity``.

    ``sigma = Delta / sqrt(2 rho)`` (Bun & Steinke 2016, Prop 1.6). ``rho = inf``
    (the hidden non-private testing mode) gives ``sigma = 0``.
    """
    if not (sensitivity >= 0 and math.isfinite(sensitivity)):
        raise ValueError(f"sensitivity must be finite and >= 0, got {sensitivity!r}.")
    if not rho > 0:
        raise ValueError(f"rho must be > 0, got {rho!r}.")
    if math.isinf(rho):
        return 0.0
    return sensitivity / math.sqrt(2.0 * rho)


class GaussianMechanism:
    """Release ``value + N(0, sigma^2 I)`` for a query of l2-sensitivity ``Delta``.

    Parameters
    ----------
    sensitivity : float
        l2-sensitivity of the query under replace-one neighbours; the caller states
        the argument (lemma) at the place it constructs the mechanism.
    sigma : float
        Noise standard deviation per coordinate.
    name : str
        Ledger label.
    integer : bool, default=False
        The query takes integer values by construction (counts): they are
        released without rounding (see :meth:`release`).

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco.privacy import GaussianMechanism
    >>> mech = GaussianMechanism.from_zcdp(sensitivity=2.0, rho=0.5, name="mean")
    >>> mech.sigma
    2.0
    >>> out = mech.release(np.zeros(3), np.random.default_rng(0))
    >>> out.shape
    (3,)
    """

    def __init__(self, sensitivity, sigma, name="gaussian", integer=False):
        if not (sensitivity >= 0 and math.isfinite(sensitivity)):
            raise ValueError(
                f"sensitivity must be finite and >= 0, got {sensitivity!r}."
            )
        if not (sigma >= 0 and math.isfinite(sigma)):
            raise ValueError(f"sigma must be finite and >= 0, got {sigma!r}.")
        self.sensitivity = float(sensitivity)
        self.sigma = float(sigma)
        self.name = name
        self.integer = bool(integer)

    @classmethod
    def from_zcdp(cls, sensitivity, rho, name="gaussian", integer=False):
        """The Gaussian mechanism that costs exactly ``rho`` zCDP."""
        return cls(sensitivity, sigma_for_zcdp(sensitivity, rho), name, integer)

    @property
    def rho(self):
        """zCDP cost of one release, ``Delta^2 / (2 sigma^2)``."""
        if self.sensitivity == 0:
            return 0.0
        return (
            math.inf if self.sigma == 0 else self.sensitivity**2 / (2 * self.sigma**2)
        )

    def release(self, value, rng):
        """Return ``value`` plus Gaussian noise of std ``sigma`` (same shape), on a
        public grid.

        The value is rounded to the grid step of :func:`grid_step` and discrete
        Gaussian noise of variance ``(sigma (1 + 2^-10) / gamma)^2 + 36`` (grid
        units) is added. A mechanism made with ``integer=True`` (its query takes
        integer values by construction, e.g. counts; a public property of the
        code, never read from the data) releases them without rounding: step
        ``min(1, 2^floor(log2(sigma / 2^7)))``, variance ``(sigma / gamma)^2 +
        36``. By Peikert's convolution theorem (2010, Thm 3.1, with a
        continuous first stage) that noise is, within total variation
        ``2^-780`` per coordinate, a continuous Gaussian of std ``sigma (1 +
        2^-10) / gamma`` followed by a data-independent randomised rounding (a
        discrete Gaussian of std 6 on the coset), so the release is a
        post-processing of the Gaussian mechanism with sensitivity ``Delta (1 +
        2^-10)`` and noise ``sigma (1 + 2^-10)``: the recorded ``(Delta,
        sigma)``, up to that total variation, which the accountant adds to
        delta.
        """
        _check_rng(rng)
        value = np.asarray(value, dtype=float)
        if self.sigma == 0:
            _check_noiseless(self)
            return value.copy()
        if self.integer:
            # Integer-valued queries (counts) already lie on the grid of any
            # step 2^-j <= 1: no rounding, no growth of the sensitivity. The step
            # keeps the noise at least 2^7 steps wide (the coupling part, 6
            # steps, then adds at most 0.2% to its variance).
            gamma = min(1.0, 2.0 ** math.floor(math.log2(self.sigma * 2.0**-7)))
            grid_sigma = self.sigma / gamma
        else:
            # The step is below 2^-10 of both the sensitivity and the noise, so
            # the noise spans at least 2^10 steps (the coupling part, 6 steps, is
            # then negligible and the noise vanishes with sigma).
            ref = (
                min(self.sensitivity, self.sigma)
                if self.sensitivity > 0
                else self.sigma
            )
            gamma = grid_step(ref, value.size)
            grid_sigma = self.sigma * (1.0 + GRID_SLACK) / gamma
        variance = grid_sigma**2 + COUPLING_SIGMA**2
        return _release_in_chunks(
            value, gamma, lambda k: discrete_gaussian(rng, variance, k)
        )

    def record(self, count=1):
        """Ledger record for ``count`` releases of this mechanism."""
        return MechanismRecord(
            self.name,
            "gaussian",
            count=count,
            sensitivity=self.sensitivity,
            scale=self.sigma,
        )


class LaplaceMechanism:
    """Release ``value + Laplace(0, b)`` per coordinate, l1-sensitivity ``sensitivity``.

    Pure ``epsilon``-DP with ``epsilon = sensitivity / b`` (Dwork et al. 2006).

    Examples
    --------
    >>> from skdpsco.privacy import LaplaceMechanism
    >>> LaplaceMechanism.from_epsilon(sensitivity=1.0, epsilon=0.5).scale
    2.0
    """

    def __init__(self, sensitivity, scale, name="laplace"):
        if not (sensitivity >= 0 and math.isfinite(sensitivity)):
            raise ValueError(
                f"sensitivity must be finite and >= 0, got {sensitivity!r}."
            )
        if not (scale >= 0 and math.isfinite(scale)):
            raise ValueError(f"scale must be finite and >= 0, got {scale!r}.")
        self.sensitivity = float(sensitivity)
        self.scale = float(scale)
        self.name = name

    @classmethod
    def from_epsilon(cls, sensitivity, epsilon, name="laplace"):
        """The Laplace mechanism that is ``epsilon``-DP: ``b = Delta / epsilon``,
        raised to the next float where the division rounds so that ``Delta /
        b`` (the epsilon the ledger reads) would exceed ``epsilon``."""
        if not epsilon > 0:
            raise ValueError(f"epsilon must be > 0, got {epsilon!r}.")
        if math.isinf(epsilon):
            return cls(sensitivity, 0.0, name)
        scale = sensitivity / epsilon
        # Delta / (Delta / epsilon) can round one ulp above epsilon, which the
        # release gate would refuse as an overspend of an exact budget; one ulp
        # more noise changes nothing measurable.
        while scale > 0 and sensitivity / scale > epsilon:
            scale = math.nextafter(scale, math.inf)
        return cls(sensitivity, scale, name)

    @property
    def epsilon(self):
        if self.sensitivity == 0:
            return 0.0
        return math.inf if self.scale == 0 else self.sensitivity / self.scale

    def release(self, value, rng):
        """Return ``value`` plus Laplace noise of scale ``b`` (same shape), on a
        public grid: the value rounded to the step ``gamma`` of
        :func:`grid_step` (l1), plus exact discrete Laplace noise
        ``P[z] ~ exp(-|z| / t)``, ``t = ceil(b (1 + 2^-10) / gamma)``: with the
        rounded query's l1-sensitivity at most ``Delta_1 (1 + 2^-10) / gamma``
        steps, it is ``Delta_1 / b``-DP (Canonne, Kamath & Steinke 2020, the
        discrete Laplace mechanism)."""
        _check_rng(rng)
        value = np.asarray(value, dtype=float)
        if self.scale == 0:
            _check_noiseless(self)
            return value.copy()
        ref = min(self.sensitivity, self.scale) if self.sensitivity > 0 else self.scale
        gamma = grid_step(ref, value.size, norm="l1")
        t = math.ceil(self.scale * (1.0 + GRID_SLACK) / gamma)
        if t > MAX_LAPLACE_SCALE:
            # Public numbers only (the size, the sensitivity and the scale).
            raise PrivacyBudgetError(
                f"{self.name}: a pure-DP release of {value.size} values at epsilon="
                f"{self.epsilon:.3g} needs a noise scale of {t:.3g} grid steps, above "
                "the exact discrete Laplace sampler's 2^48; use a larger epsilon, or "
                "delta > 0 (Gaussian noise)."
            )
        return _release_in_chunks(value, gamma, lambda k: discrete_laplace(rng, t, k))

    def record(self, count=1):
        return MechanismRecord(
            self.name,
            "laplace",
            count=count,
            sensitivity=self.sensitivity,
            scale=self.scale,
            epsilon=self.epsilon,
        )


#: Resolution of the integer scores of :func:`exponential_mechanism`: ``2^k``
#: units per unit of ``epsilon s / (2 Delta)``, with ``2^k epsilon >= 2^22``
#: (``k <= 48``, the exact Bernoulli sampler's limit), so the rounding costs a
#: relative ``eta <= 2^-19`` of ``epsilon``.
_SELECTION_BITS = 22
#: Candidates more than this many units of ``epsilon s / (2 Delta)`` from the best
#: are flipped with probability ``exp(-4096)``: their distance is capped there.
_SELECTION_CAP = 4096


def selection_codes(scores, epsilon, sensitivity):
    """Integer codes of the scores for :func:`exponential_mechanism` (public
    constants, exact integer arithmetic).

    Returns ``(codes, resolution)``: ``codes_i = ceil(2^k c s_i)`` with
    ``c = epsilon (1 - eta) / (2 Delta)`` rounded to a float, computed exactly
    from the floats' integer mantissas, and ``resolution = 2^k``. For neighbours,
    ``|s_i - s'_i| <= Delta`` gives ``|codes_i - codes'_i| <= 2^k c Delta + 1``, and
    ``eta`` is chosen so that ``2 (2^k c Delta + 1) / 2^k <= epsilon``: the integer
    codes have sensitivity ``Delta_T`` with ``2 Delta_T / 2^k <= epsilon``.
    """
    scores = np.asarray(scores)
    k = min(48, max(0, _SELECTION_BITS - math.floor(math.log2(epsilon))))
    resolution = 2**k
    # 2 (D c Delta + 1) / D <= epsilon needs epsilon eta >= 2 / D plus the float
    # rounding of c (relative 2^-51 at most): eta = 8 / (D epsilon), at least 2^-40.
    eta = max(8.0 / (resolution * epsilon), 2.0**-40)
    if eta >= 0.5:
        raise ValueError(
            f"epsilon={epsilon!r} is too small for the exact selection sampler "
            "(needs epsilon >= 2^-44)."
        )
    with np.errstate(over="ignore"):
        c = epsilon * (1.0 - eta) / (2.0 * sensitivity)
    if not math.isfinite(c):
        raise ValueError(
            f"epsilon / (2 sensitivity) = {epsilon!r} / (2 * {sensitivity!r}) is past "
            "the float range."
        )
    c_mant, c_exp = math.frexp(c)
    c_int, c_shift = int(c_mant * 2**53), c_exp - 53 + k
    if np.issubdtype(scores.dtype, np.integer):
        # Integer scores (fixed-point sums): s = m 2^0, exactly.
        mantissas, exps = scores.tolist(), [53] * scores.size
    else:
        mant, exps = np.frexp(scores.astype(np.float64))
        mantissas, exps = (mant * 2**53).astype(np.int64).tolist(), exps.tolist()
    codes = []
    for m, e in zip(mantissas, exps, strict=True):
        numerator, shift = m * c_int, e - 53 + c_shift
        # ceil(numerator * 2^shift), exactly.
        codes.append(numerator << shift if shift >= 0 else -((-numerator) >> -shift))
    return codes, resolution


def exponential_mechanism(rng, scores, epsilon, sensitivity):
    """Index of a candidate selected with ``epsilon``-DP for a *loss* ``score``
    (lower is better) over a finite, public candidate set.

    Permute-and-flip (McKenna & Sheldon 2020, Algorithm 1): visit the candidates
    in a uniformly random order and stop at the first ``i`` whose coin
    ``Bernoulli(exp(-epsilon (s_i - s_min) / (2 Delta)))`` comes up; the best
    candidate's coin always does. It is ``epsilon``-DP when every candidate's score
    changes by at most ``sensitivity`` between neighbouring datasets (their Thm 1),
    and its expected score is never worse than the exponential mechanism's
    (McKenna & Sheldon 2020, Thm 2); it is report-noisy-max with exponential noise
    (Ding et al. 2021), so ``P[s_out - s_min >= 2 Delta (ln N + t) / epsilon] <=
    e^-t`` as for the exponential mechanism of McSherry & Talwar (2007).

    Sampled exactly: the scores become integer codes (:func:`selection_codes`; the
    rounding enters the sensitivity, paid by a relative ``2^-19`` of ``epsilon``),
    each coin is an exact ``Bernoulli(exp(-a / b))`` with integers ``a, b``
    (Canonne, Kamath & Steinke 2020, Algorithm 1), and a coin is drawn for every
    candidate, so the work done does not depend on where the first success falls
    (the rounds of the exact coins do grow with the distances: a timing channel
    the documentation lists as not defended). The visiting order comes from the
    secure source (:func:`skdpsco.privacy._discrete.uniform_permutation`).
    Distances past 4096 (probability ``exp(-4096)``) are capped (the capped
    quality ``max(q_i, q* - cap)`` has the same sensitivity and the same maximum).
    ``epsilon = inf`` returns the first minimiser.

    Parameters
    ----------
    rng : numpy.random.Generator
    scores : array-like of shape (n_candidates,)
        Finite losses of the candidates: floats, or integers (exact fixed-point
        sums, whose sensitivity is then an integer number of units).
    epsilon : float
        ``> 0``.
    sensitivity : float
        ``> 0``, the largest change of one candidate's score between neighbours.

    Returns
    -------
    int

    References
    ----------
    .. [1] McSherry, F. and Talwar, K. (2007). Mechanism design via differential
       privacy. FOCS.
    .. [2] McKenna, R. and Sheldon, D. (2020). Permute-and-flip: a new mechanism
       for differentially private selection. NeurIPS. Algorithm 1, Thms 1-2.
    .. [3] Ding, Z., Kifer, D., Saghaleyni, S. M. E. N., Steinke, T. et al.
       (2021). The permute-and-flip mechanism is identical to report-noisy-max
       with exponential noise. arXiv:2105.07260.
    .. [4] Canonne, C. L., Kamath, G. and Steinke, T. (2020). The discrete
       Gaussian for differential privacy. NeurIPS. Algorithm 1.
    """
    _check_rng(rng)
    scores = np.asarray(scores)
    if not np.issubdtype(scores.dtype, np.integer):
        scores = scores.astype(np.float64)
    if scores.ndim != 1 or scores.size == 0 or not np.all(np.isfinite(scores)):
        raise ValueError("scores must be a non-empty 1-d array of finite values.")
    if not (sensitivity > 0 and math.isfinite(sensitivity)):
        raise ValueError(f"sensitivity must be finite and > 0, got {sensitivity!r}.")
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon!r}.")
    if math.isinf(epsilon):
        return int(np.argmin(scores))
    codes, resolution = selection_codes(scores, epsilon, sensitivity)
    best = min(codes)
    cap = _SELECTION_CAP * resolution
    distance = np.array([min(code - best, cap) for code in codes], dtype=np.uint64)
    # The order is part of the mechanism's randomness: from the secure source.
    order = uniform_permutation(rng, scores.size)
    coins = bernoulli_exp(
        rng, distance[order], np.full(scores.size, resolution, dtype=np.int64)
    )
    return int(order[int(np.argmax(coins))])


__all__ += ["exponential_mechanism"]


def truncated_negative_binomial(rng, eta, gamma):
    """Draw ``K >= 1`` from the truncated negative binomial ``D_{eta, gamma}``.

    The number of runs of a private selection (Papernot & Steinke 2022, Definition 1):
    ``P[K = k]`` proportional to ``(1 - gamma)^k prod_{l<k} (l + eta) / (l + 1)`` for
    ``k >= 1``. ``eta = 0`` is the logarithmic distribution; ``eta > 0`` is a
    negative binomial (failures before ``eta`` successes of probability ``gamma``)
    conditioned on ``K >= 1``; ``eta = 1`` is the geometric
    ``P[K = k] = gamma (1 - gamma)^(k - 1)`` of Liu & Talwar's (2019) random stopping.
    ``K`` must stay hidden: the selection theorems rely on it. Sampled exactly,
    from Bernoulli trials of rational probabilities decided by uniform integers
    (:func:`skdpsco.privacy._discrete.truncated_negative_binomial`), so the law is
    the theorems' law, not a floating-point approximation of it.

    Parameters
    ----------
    rng : numpy.random.Generator
    eta : float
        Shape, ``>= 0``.
    gamma : float
        In ``(0, 1)``.

    Returns
    -------
    int

    References
    ----------
    .. [1] Papernot, N. and Steinke, T. (2022). Hyperparameter tuning with Renyi
       differential privacy. ICLR. Definition 1.
    """
    _check_rng(rng)
    if not (math.isfinite(eta) and eta >= 0):
        raise ValueError(f"eta must be a finite real >= 0, got {eta!r}.")
    if not (0 < gamma < 1):
        raise ValueError(f"gamma must be in (0, 1), got {gamma!r}.")
    return _exact_truncated_negative_binomial(rng, float(eta), float(gamma))


__all__ += ["truncated_negative_binomial"]


class SubsampledGaussianMechanism:
    """The Gaussian mechanism on a Poisson batch: ``value + N(0, sigma^2 I)`` for a
    batch statistic of add/remove l2-sensitivity ``Delta``, each record in the
    batch independently with the public probability ``sampling_rate``.

    The noise is :meth:`GaussianMechanism.release`'s; the record is of kind
    ``"subsampled_gaussian"``, which the accountant composes in RDP (Mironov,
    Talwar & Zhang 2019) and converts to replace-one neighbours by group privacy
    (:func:`skdpsco.privacy.poisson_replace_one_epsilon`).

    Parameters
    ----------
    sensitivity : float
        Add/remove l2-sensitivity of the batch statistic; the caller states the
        argument where it constructs the mechanism.
    sigma : float
        Noise standard deviation per coordinate (``noise_multiplier *
        sensitivity``).
    sampling_rate : float
        ``q`` in ``[0, 1]``.
    name : str
        Ledger label.

    References
    ----------
    .. [1] Mironov, I., Talwar, K. and Zhang, L. (2019). Renyi differential privacy
       of the sampled Gaussian mechanism. arXiv:1908.10530.
    """

    def __init__(self, sensitivity, sigma, sampling_rate, name="subsampled gaussian"):
        self._gaussian = GaussianMechanism(sensitivity, sigma, name=name)
        self.sampling_rate = check_real(sampling_rate, "sampling_rate", low=0, high=1)

    @property
    def sensitivity(self):
        return self._gaussian.sensitivity

    @property
    def sigma(self):
        return self._gaussian.sigma

    @property
    def name(self):
        return self._gaussian.name

    def release(self, value, rng):
        """``value`` plus the noise of :meth:`GaussianMechanism.release`."""
        return self._gaussian.release(value, rng)

    def record(self, count=1):
        """Ledger record for ``count`` releases, each on its own Poisson batch:
        the Gaussian mechanism's, with the sampling rate."""
        return dataclasses.replace(
            self._gaussian.record(count),
            kind="subsampled_gaussian",
            sampling_rate=self.sampling_rate,
        )


def parallel_gaussian_record(name, mechanisms, count=1):
    """One Gaussian record for Gaussian mechanisms run on disjoint parts of the data.

    Under replace-one a record lies in one part only, so one use of all of them
    together is a post-processing of one mechanism, the others' outputs having the
    same law on both neighbours (parallel composition, McSherry 2009, Thm 4): the
    whole is ``mu``-GDP with ``mu`` the largest ``Delta / sigma`` of the parts
    (Dong, Roth & Su 2022, Def 2.6), and the record is that part's ``(Delta,
    sigma)`` (the last such part on ties).

    Parameters
    ----------
    name : str
        Ledger label.
    mechanisms : sequence of GaussianMechanism
        Their ``sensitivity`` and ``sigma`` as drawn (non-empty).
    count : int, default=1
        Number of uses.

    Returns
    -------
    MechanismRecord
        Of kind ``"gaussian"``.

    References
    ----------
    .. [1] McSherry, F. (2009). Privacy integrated queries. SIGMOD. Theorem 4.
    .. [2] Dong, J., Roth, A. and Su, W. (2022). Gaussian differential privacy.
       JRSS B.
    """

    def mu(mech):
        return math.inf if mech.sigma == 0 else mech.sensitivity / mech.sigma

    worst = mechanisms[0]
    for mech in mechanisms[1:]:
        if mu(mech) >= mu(worst):
            worst = mech
    return MechanismRecord(
        name,
        "gaussian",
        count=count,
        sensitivity=worst.sensitivity,
        scale=worst.sigma,
    )


class ProposeTestReleaseMechanism:
    """Propose-test-release on a public grid: a noisy upper bound on a local
    scale ``S``, then the value divided by that bound (Dwork & Lei 2009).

    :meth:`release` draws ``L`` from ``bound_mechanism`` on ``ln S``, sets
    ``S_hat = clip(e^{L + mu}, low, high)`` (a function of ``L`` alone) and
    releases ``S_hat`` times ``value_mechanism`` applied to ``value / S_hat``.
    The caller proves that the pair, at its sensitivities and with the margin
    ``mu``, is ``(epsilon, delta)``-DP per use (for the trimmed mean:
    :class:`skdpsco._mean_estimation._trimmed_mean.SmoothSensitivityTrimmedMeanOracle`)
    and states that pair here; :meth:`record` reports it, so the record and the two
    draws come from the same object.

    Parameters
    ----------
    bound_mechanism, value_mechanism : GaussianMechanism
    log_margin : float
        ``mu``, public.
    epsilon, delta : float
        Cost of one use (``epsilon > 0``, ``0 <= delta < 1``).
    name : str
        Ledger label.

    References
    ----------
    .. [1] Dwork, C. and Lei, J. (2009). Differential privacy and robust
       statistics. STOC.
    """

    def __init__(
        self, bound_mechanism, log_margin, value_mechanism, epsilon, delta, name
    ):
        self.bound_mechanism = bound_mechanism
        self.log_margin = check_real(log_margin, "log_margin")
        self.value_mechanism = value_mechanism
        self.epsilon = check_real(
            epsilon, "epsilon", low=0, low_open=True, allow_inf=True
        )
        self.delta = check_real(delta, "delta", low=0, high=1, high_open=True)
        self.name = name

    @classmethod
    def noiseless(cls, name):
        """The hidden non-private testing mode: nothing is drawn, and the record
        says so (``epsilon = inf``)."""
        return cls(None, 0.0, None, math.inf, 0.0, name)

    def release(self, log_scale, value, rng, *, low, high):
        """``S_hat * (value / S_hat + noise)``, ``S_hat = clip(e^{L + mu}, low,
        high)`` with ``L`` the noisy ``log_scale``; the two draws in this order.
        A :meth:`noiseless` mechanism returns ``value`` (testing mode only)."""
        if self.value_mechanism is None:
            if not _NON_PRIVATE.get():
                raise RuntimeError(
                    f"{self.name}: a noiseless release outside the non-private "
                    "testing mode; nothing is released. This is a bug; please "
                    "report it."
                )
            return np.asarray(value, dtype=float).copy()
        L = self.bound_mechanism.release(log_scale, rng)
        with np.errstate(over="ignore"):
            s_hat = np.exp(L + self.log_margin)
        s_hat = np.clip(s_hat, low, high)
        return s_hat * self.value_mechanism.release(value / s_hat, rng)

    def record(self, count=1):
        """Ledger record for ``count`` uses: ``(epsilon, delta)``-DP each."""
        return MechanismRecord(
            self.name, "approx_dp", count=count, epsilon=self.epsilon, delta=self.delta
        )


__all__ += [
    "ProposeTestReleaseMechanism",
    "SubsampledGaussianMechanism",
    "parallel_gaussian_record",
]


class ExponentialMechanism:
    """Select the candidate of least score with ``epsilon``-DP.

    Permute-and-flip over a finite, public candidate set
    (:func:`exponential_mechanism`): ``epsilon``-DP when every candidate's score
    changes by at most ``sensitivity`` between neighbouring datasets (McKenna &
    Sheldon 2020, Thm 1). The selection and its ledger record read the same
    ``epsilon`` and ``sensitivity``.

    Parameters
    ----------
    sensitivity : float
        ``> 0``, finite: the largest change of one score between neighbours.
    epsilon : float
        ``> 0`` (``inf``: the first minimiser, the hidden testing mode).
    name : str, default="exponential mechanism"

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco.privacy._mechanisms import ExponentialMechanism
    >>> mech = ExponentialMechanism(1.0, float("inf"))
    >>> mech.select([3.0, 1.0, 2.0], np.random.default_rng(0))
    1
    """

    def __init__(self, sensitivity, epsilon, name="exponential mechanism"):
        if not (sensitivity > 0 and math.isfinite(sensitivity)):
            raise ValueError(
                f"sensitivity must be finite and > 0, got {sensitivity!r}."
            )
        if not epsilon > 0:
            raise ValueError(f"epsilon must be > 0, got {epsilon!r}.")
        self.sensitivity = sensitivity
        self.epsilon = epsilon
        self.name = name

    def select(self, scores, rng):
        """Index of the selected candidate (lower scores are better)."""
        return exponential_mechanism(rng, scores, self.epsilon, self.sensitivity)

    def record(self, count=1):
        """Ledger record for ``count`` selections, each ``(epsilon, 0)``-DP."""
        return MechanismRecord(
            self.name, "approx_dp", count=count, epsilon=float(self.epsilon), delta=0.0
        )


__all__ += ["ExponentialMechanism"]


class ParallelGaussianMechanism:
    """Gaussian releases on disjoint sets of records at one noise-to-sensitivity
    ratio, accounted as one release.

    Release ``k`` is the grid :class:`GaussianMechanism` of l2-sensitivity
    ``f_k Delta`` and noise ``f_k ratio Delta`` (``f_k`` the release's public
    ``factor``). A record enters one release only, so by parallel composition
    (McSherry 2009, Thm 4) the releases are, for every record, one Gaussian
    mechanism whose privacy depends on the ratio alone: the record is one release
    of sensitivity 1 and noise ``ratio``. The caller states why its releases read
    disjoint records.

    Parameters
    ----------
    sensitivity : float
        ``Delta``, the l2-sensitivity of a release of factor 1.
    ratio : float
        Noise std per unit of sensitivity (``0`` only in the testing mode).
    name : str
        Ledger label.
    """

    def __init__(self, sensitivity, ratio, name="parallel gaussian"):
        self.sensitivity = float(sensitivity)
        self.ratio = float(ratio)
        self.sigma = self.ratio * self.sensitivity
        self.name = name

    def release(self, value, rng, factor=1.0):
        """``value`` plus grid Gaussian noise of std ``factor sigma``, for a
        query of l2-sensitivity ``factor Delta``."""
        mechanism = GaussianMechanism(
            self.sensitivity * factor, self.sigma * factor, self.name
        )
        return mechanism.release(value, rng)

    def record(self):
        """The one ledger record of all the releases (parallel composition)."""
        return MechanismRecord(
            self.name, "gaussian", count=1, sensitivity=1.0, scale=self.ratio
        )


class AnalyticGaussianMechanism:
    """The grid Gaussian mechanism calibrated to ``(epsilon, delta)``-DP.

    ``sigma`` is the analytic calibration of Balle & Wang (2018, Thm 8) for
    l2-sensitivity ``Delta`` (``0`` at ``epsilon = inf``, the testing mode); a
    release may read a query of smaller sensitivity (a larger batch), never a
    larger one. The record is ``approx_dp`` at ``(epsilon, delta)`` for each
    use.

    Parameters
    ----------
    sensitivity : float
        ``Delta``, the largest l2-sensitivity of a release.
    epsilon, delta : float
    name : str
        Ledger label.
    """

    def __init__(self, sensitivity, epsilon, delta, name="analytic gaussian"):
        self.sensitivity = float(sensitivity)
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.sigma = (
            0.0
            if math.isinf(epsilon)
            else calibrate_analytic_gaussian(epsilon, delta, sensitivity)
        )
        self.name = name

    def release(self, value, rng, sensitivity=None):
        """``value`` plus grid Gaussian noise of std ``sigma``; ``sensitivity``
        (default ``Delta``, at most ``Delta``) sets the grid of this release."""
        s = self.sensitivity if sensitivity is None else float(sensitivity)
        if not s <= self.sensitivity:
            raise ValueError(
                f"{self.name}: a release of sensitivity {s!r} exceeds the "
                f"calibrated {self.sensitivity!r}."
            )
        return GaussianMechanism(s, self.sigma, self.name).release(value, rng)

    def record(self, count=1):
        """``count`` uses composed by the accountant (``count=1`` for releases on
        disjoint records: parallel composition, McSherry 2009, Thm 4)."""
        return MechanismRecord(
            self.name, "approx_dp", count=count, epsilon=self.epsilon, delta=self.delta
        )


class PerturbationNoise:
    """Gaussian noise on a public grid that enters a computation instead of being
    released (objective perturbation), with the ``(epsilon, delta)`` its theorem
    gives.

    The noise is :func:`grid_gaussian_noise` of scale ``sigma`` and step ``step``
    (zeros at ``sigma = 0``, the testing mode). What the noise buys is a property
    of the computation it enters, not of the noise alone: the caller calibrates
    ``sigma`` and names the theorem that gives ``(epsilon, delta)``, and the record
    carries exactly that pair, next to the draw.

    Parameters
    ----------
    sigma : float
        ``>= 0``.
    step : float or None
        Public power-of-two grid step (unused at ``sigma = 0``).
    epsilon, delta : float
        The cost of the computation the noise enters.
    name : str
        Ledger label.
    """

    def __init__(self, sigma, step, epsilon, delta, name="perturbation noise"):
        if not (sigma >= 0 and math.isfinite(sigma)):
            raise ValueError(f"sigma must be finite and >= 0, got {sigma!r}.")
        self.sigma = float(sigma)
        self.step = step
        self.epsilon = epsilon
        self.delta = delta
        self.name = name

    def draw(self, shape, rng):
        """Noise of the given shape, multiples of ``step``."""
        if self.sigma == 0:
            return np.zeros(shape)
        return grid_gaussian_noise(rng, self.sigma, self.step, shape)

    def record(self):
        return MechanismRecord(
            self.name, "approx_dp", count=1, epsilon=self.epsilon, delta=self.delta
        )


__all__ += [
    "AnalyticGaussianMechanism",
    "ParallelGaussianMechanism",
    "PerturbationNoise",
]


def propose_test_release_record(
    name, epsilon, delta, *, bound=None, value=None, sampler_delta=0.0
):
    """The one ``approx_dp`` record of a propose-test-release.

    A pure ``eps1``-DP release of a bound on the local sensitivity that fails to
    cover it with probability at most ``delta1`` (``bound = (eps1, delta1)``),
    then an ``(eps2, delta2)``-DP release of the value calibrated to that bound
    (``value = (eps2, delta2)``), whose samplers are within total variation
    ``sampler_delta / (1 + e^eps)`` of their ideal law: by cases on the bound
    (Dwork & Lei 2009; Dwork & Roth 2014, Ch. 7) the whole is
    ``(eps1 + eps2, delta1 + delta2 + sampler_delta)``-DP. The record states the
    target ``(epsilon, delta)`` after checking, in exact arithmetic, that the
    parts fit in it. At ``epsilon = inf`` (the testing mode, nothing drawn) there
    are no parts.

    Parameters
    ----------
    name : str
    epsilon, delta : float
        The target the parts were split from.
    bound, value : tuple of float, optional
        ``(epsilon, delta)`` of the two stages (required for a finite epsilon).
    sampler_delta : float
        ``(1 + e^eps)`` times the samplers' total variation.

    Returns
    -------
    MechanismRecord
    """
    if math.isinf(epsilon):
        return MechanismRecord(name, "approx_dp", epsilon=epsilon, delta=delta)
    eps_parts = Fraction(bound[0]) + Fraction(value[0])
    delta_parts = Fraction(bound[1]) + Fraction(value[1]) + Fraction(sampler_delta)
    if eps_parts > Fraction(epsilon) or delta_parts > Fraction(delta):
        raise RuntimeError(
            f"{name}: the stages spend ({float(eps_parts)!r}, {float(delta_parts)!r}), "
            f"more than the ({epsilon!r}, {delta!r}) recorded. This is a bug; "
            "please report it."
        )
    return MechanismRecord(name, "approx_dp", count=1, epsilon=epsilon, delta=delta)


__all__ += ["propose_test_release_record"]
