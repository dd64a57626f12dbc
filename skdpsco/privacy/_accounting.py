"""Privacy accounting: conversions between DP notions, composition, subsampling.

Every budget in skdpsco goes through this module: an estimator asks for the zCDP
budget that a target ``(epsilon, delta)`` allows, its solver splits that budget over
its mechanisms, and at the end of the fit the mechanisms that actually ran are
composed here into the ``(epsilon, delta)`` the fit spent.

Neighbouring relation: replace-one record, ``n`` public (the user guide's
"Neighbouring datasets"). Every conversion below is valid for any neighbouring
relation under which the composed mechanisms are individually private; the relation
only enters the sensitivities.

Notions and the facts used
--------------------------
* Gaussian mechanism with l2-sensitivity ``Delta`` and noise ``N(0, sigma^2 I)``:
  ``mu``-GDP with ``mu = Delta / sigma`` (Dong, Roth & Su 2022, Thm 2.7), hence
  ``rho``-zCDP with ``rho = mu^2 / 2`` (Bun & Steinke 2016, Prop 1.6), hence RDP
  ``alpha * rho`` at every order ``alpha > 1``.
* Adaptive composition of Gaussian mechanisms is ``sqrt(sum mu_i^2)``-GDP exactly
  (Dong, Roth & Su 2022, Cor 3.3); zCDP budgets add (Bun & Steinke 2016, Lemma 2.3);
  RDP adds order-wise (Mironov 2017, Prop 1).
* ``mu``-GDP is ``(epsilon, delta(epsilon))``-DP for every epsilon with
  ``delta(epsilon) = Phi(-epsilon/mu + mu/2) - e^epsilon Phi(-epsilon/mu - mu/2)``
  (Balle & Wang 2018, Thm 8; Dong, Roth & Su 2022, Cor 2.13). This is exact, hence
  the tightest conversion for compositions of Gaussians.
* ``rho``-zCDP is ``(rho + 2 sqrt(rho log(1/delta)), delta)``-DP
  (Bun & Steinke 2016, Prop 1.3). Used for zCDP mechanisms that are not Gaussian.
* RDP to ``(epsilon, delta)``: the classic bound ``min_alpha rdp(alpha) +
  log(1/delta)/(alpha-1)`` (Mironov 2017, Prop 3) and the improved bound of
  Balle et al. 2020 (Thm 21) / Canonne, Kamath & Steinke 2020 (Prop 12).
* RDP of the Poisson-subsampled Gaussian at integer orders (Mironov, Talwar & Zhang
  2019, Thm 5 / §3.3).

Every numerical inversion below rounds in the private direction: a calibrated noise
scale is never smaller, and a reported epsilon never smaller, than the exact value.
"""

import functools
import math
from collections.abc import Iterable, Sequence
from fractions import Fraction

import numpy as np
from scipy import special

from ..exceptions import PrivacyBudgetError
from ..utils._validation import check_real

__all__ = [
    "DEFAULT_RDP_ORDERS",
    "approx_dp_to_gdp",
    "approx_dp_to_zcdp",
    "calibrate_analytic_gaussian",
    "compose_rdp",
    "compose_zcdp",
    "gaussian_delta",
    "gaussian_rho_budget",
    "gdp_to_approx_dp",
    "rdp_gaussian",
    "rdp_poisson_subsampled_gaussian",
    "rdp_to_approx_dp",
    "zcdp_to_approx_dp",
]

#: Integer Renyi orders used by default. Integer orders make the subsampled-Gaussian
#: bound exact (Mironov, Talwar & Zhang 2019); the grid reaches orders large enough
#: for epsilon down to about 0.05 at delta = 1e-10.
DEFAULT_RDP_ORDERS = tuple(range(2, 129)) + (
    144,
    160,
    192,
    224,
    256,
    320,
    384,
    448,
    512,
    768,
    1024,
)

_MARGIN = 1e-10
#: Largest GDP parameter whose square stays finite with room to spare (2^1000).
_MU_MAX = 2.0**500


def _check_delta(delta, *, allow_zero=False):
    return check_real(
        delta, "delta", low=0.0, high=1.0, low_open=not allow_zero, high_open=True
    )


def _check_nonneg(value, name, *, allow_inf=True):
    return check_real(value, name, low=0.0, allow_inf=allow_inf)


def _check_level(value, name, delta):
    """A privacy level ``>= 0`` (``inf`` allowed) and its ``delta`` in ``(0, 1)``."""
    return _check_nonneg(value, name), _check_delta(delta)


# --------------------------------------------------------------------------- zCDP


def approx_dp_to_zcdp(epsilon, delta):
    """Largest zCDP ``rho`` whose Bun–Steinke conversion gives ``(epsilon, delta)``.

    Inverts ``epsilon = rho + 2 sqrt(rho log(1/delta))`` exactly:
    ``rho = (sqrt(log(1/delta) + epsilon) - sqrt(log(1/delta)))^2``, evaluated in the
    cancellation-free form ``(epsilon / (sqrt(log(1/delta) + epsilon) +
    sqrt(log(1/delta))))^2``. Wang et al. 2020, Algorithm 4, line 1 prints
    ``(sqrt(log(1/delta)) + epsilon - sqrt(log(1/delta)))^2``, which read literally
    collapses to ``epsilon^2``; its own noise formula confirms the value here.

    Parameters
    ----------
    epsilon : float
        Target epsilon, ``> 0`` (``inf`` returns ``inf``).
    delta : float
        Target delta in ``(0, 1)``.

    Returns
    -------
    rho : float
        The budget, rounded down so that
        ``zcdp_to_approx_dp(rho, delta) <= epsilon`` holds in floating point.

    References
    ----------
    .. [1] Bun, M. and Steinke, T. (2016). Concentrated differential privacy:
       simplifications, extensions, and lower bounds. TCC. Proposition 1.3.

    Examples
    --------
    >>> from skdpsco.privacy import approx_dp_to_zcdp
    >>> round(approx_dp_to_zcdp(1.0, 1e-5), 7)
    0.0208199
    """
    epsilon, delta = _check_level(epsilon, "epsilon", delta)
    if math.isinf(epsilon):
        return math.inf
    log_inv_delta = -math.log(delta)
    rho = (
        epsilon / (math.sqrt(log_inv_delta + epsilon) + math.sqrt(log_inv_delta))
    ) ** 2
    # Round in the private direction: the round trip must never overstate the budget
    # (halving first where it overflows, near epsilon = 1e307).
    while rho > 0 and math.isinf(zcdp_to_approx_dp(rho, delta)):
        rho /= 2.0
    while rho > 0 and zcdp_to_approx_dp(rho, delta) > epsilon:
        rho = math.nextafter(rho, 0.0)
    return rho


def zcdp_to_approx_dp(rho, delta):
    """Epsilon such that ``rho``-zCDP implies ``(epsilon, delta)``-DP.

    Uses ``epsilon = rho + 2 sqrt(rho log(1/delta))`` (Bun & Steinke 2016,
    Proposition 1.3): simple, conservative, and the exact inverse of
    :func:`approx_dp_to_zcdp`.

    Parameters
    ----------
    rho : float
        zCDP parameter, ``>= 0``.
    delta : float
        Delta in ``(0, 1)``.

    Returns
    -------
    epsilon : float

    References
    ----------
    .. [1] Bun, M. and Steinke, T. (2016). Concentrated differential privacy.
       TCC. Proposition 1.3.

    Examples
    --------
    >>> from skdpsco.privacy import zcdp_to_approx_dp
    >>> round(zcdp_to_approx_dp(0.5, 1e-5), 4)
    5.2985
    """
    rho, delta = _check_level(rho, "rho", delta)
    return rho + 2.0 * math.sqrt(rho * -math.log(delta))


def compose_zcdp(rhos: Iterable[float]) -> float:
    """Adaptive zCDP composition: budgets add (Bun & Steinke 2016, Lemma 2.3)."""
    total = 0.0
    for rho in rhos:
        total += _check_nonneg(rho, "rho")
    return total


# ---------------------------------------------------------------- Gaussian DP


def gaussian_delta(epsilon, mu):
    """Exact ``delta(epsilon)`` of a ``mu``-GDP mechanism (``mu = Delta / sigma``).

    ``delta = Phi(-epsilon/mu + mu/2) - e^epsilon Phi(-epsilon/mu - mu/2)``, evaluated
    with log-CDFs so that ``e^epsilon`` never overflows.

    References
    ----------
    .. [1] Balle, B. and Wang, Y.-X. (2018). Improving the Gaussian mechanism for
       differential privacy: analytical calibration and optimal denoising. ICML. Thm 8.
    """
    epsilon = _check_nonneg(epsilon, "epsilon")
    mu = _check_nonneg(mu, "mu")
    if mu == 0.0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    if math.isinf(epsilon):
        return 0.0
    a = special.log_ndtr(-epsilon / mu + mu / 2.0)
    b = epsilon + special.log_ndtr(-epsilon / mu - mu / 2.0)
    if b >= a:  # equality up to rounding: delta is 0 there
        return 0.0
    return float(math.exp(a) * -math.expm1(b - a))


def gdp_to_approx_dp(mu, delta):
    """Smallest epsilon such that ``mu``-GDP implies ``(epsilon, delta)``-DP.

    Parameters
    ----------
    mu : float
        GDP parameter, ``>= 0`` (``Delta / sigma`` for one Gaussian mechanism,
        ``sqrt(sum_i mu_i^2)`` for a composition).
    delta : float
        Delta in ``(0, 1)``.

    Returns
    -------
    epsilon : float
        Rounded up (bisection keeps the upper end of the bracket).

    References
    ----------
    .. [1] Dong, J., Roth, A. and Su, W. (2022). Gaussian differential privacy.
       JRSS-B. Corollary 2.13.
    """
    mu, delta = _check_level(mu, "mu", delta)
    if math.isinf(mu) or mu > _MU_MAX:
        # mu^2 would overflow the bracket below; infinity is an upper bound.
        return math.inf
    if gaussian_delta(0.0, mu) <= delta:
        return 0.0
    hi = max(1.0, mu * mu / 2.0 + mu * math.sqrt(2.0 * -math.log(delta)) + 1.0)
    while gaussian_delta(hi, mu) > delta:
        hi *= 2.0
    lo = 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if gaussian_delta(mid, mu) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-14 * max(1.0, hi):
            break
    return hi


def approx_dp_to_gdp(epsilon, delta):
    """Largest ``mu`` such that ``mu``-GDP implies ``(epsilon, delta)``-DP.

    A composition of Gaussian mechanisms whose ``sqrt(sum (Delta_i / sigma_i)^2)``
    does not exceed this ``mu`` is ``(epsilon, delta)``-DP (Dong, Roth & Su 2022,
    Cor 3.3 and 2.13). Rounded down.
    """
    epsilon, delta = _check_level(epsilon, "epsilon", delta)
    if math.isinf(epsilon):
        return math.inf
    return _approx_dp_to_gdp_cached(float(epsilon), float(delta))


@functools.lru_cache(maxsize=4096)
def _approx_dp_to_gdp_cached(epsilon, delta):
    # A pure function of two floats, inverted by bisection (~60 profile evaluations);
    # stochastic solvers calibrate the same (epsilon, delta) thousands of times.
    lo, hi = 0.0, 1.0
    while gaussian_delta(epsilon, hi) <= delta:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if gaussian_delta(epsilon, mid) <= delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    # gaussian_delta loses ~1e-10 relative accuracy to cancellation at tiny delta,
    # and its absolute error ~1e-16 delta becomes a relative error ~1e-16 / epsilon
    # in epsilon (d delta / d epsilon ~ -delta): a step down of 1e-9 + 1e-14 /
    # epsilon (100x that) keeps the result on the private side at every epsilon
    # (at epsilon = 3e-8 a step of 1e-9 alone left it 5e-9 over).
    return lo * max(0.5, 1.0 - 1e-9 - 1e-14 / epsilon)


def calibrate_analytic_gaussian(epsilon, delta, sensitivity=1.0):
    """Smallest Gaussian noise std that makes a query ``(epsilon, delta)``-DP.

    The analytic Gaussian mechanism of Balle & Wang (2018, Algorithm 1), computed by
    inverting the exact privacy profile of the Gaussian mechanism (see
    :func:`gaussian_delta`). Unlike the classical ``sqrt(2 log(1.25/delta)) / epsilon``
    it is valid for every ``epsilon > 0``.

    Parameters
    ----------
    epsilon : float
        Target epsilon, ``> 0``.
    delta : float
        Target delta in ``(0, 1)``.
    sensitivity : float, default=1.0
        l2-sensitivity of the query.

    Returns
    -------
    sigma : float
        Noise standard deviation (rounded up).

    References
    ----------
    .. [1] Balle, B. and Wang, Y.-X. (2018). Improving the Gaussian mechanism for
       differential privacy: analytical calibration and optimal denoising. ICML.

    Examples
    --------
    >>> from skdpsco.privacy import calibrate_analytic_gaussian
    >>> round(calibrate_analytic_gaussian(1.0, 1e-5), 4)
    3.7306
    """
    epsilon = _check_nonneg(epsilon, "epsilon")
    if epsilon == 0:
        raise ValueError("epsilon must be > 0 to calibrate a Gaussian mechanism.")
    sensitivity = _check_nonneg(sensitivity, "sensitivity", allow_inf=False)
    if math.isinf(epsilon) or sensitivity == 0.0:
        return 0.0
    mu = approx_dp_to_gdp(epsilon, delta)
    return sensitivity / mu


def gaussian_rho_budget(epsilon, delta, accountant="gdp"):
    """zCDP budget ``rho`` available to a composition of Gaussian mechanisms.

    Any adaptive composition of Gaussian mechanisms with
    ``sum_i Delta_i^2 / (2 sigma_i^2) <= rho`` is ``(epsilon, delta)``-DP.

    Parameters
    ----------
    epsilon, delta : float
        Target. ``delta`` in ``(0, 1)``.
    accountant : {"gdp", "zcdp"}, default="gdp"
        ``"gdp"``: exact Gaussian composition, ``rho = mu^2 / 2`` with
        ``mu = approx_dp_to_gdp(epsilon, delta)`` (valid only when every mechanism is
        Gaussian; tightest). ``"zcdp"``: ``approx_dp_to_zcdp(epsilon, delta)`` (valid
        for any zCDP mechanism; what the papers use).

    Returns
    -------
    rho : float
    """
    # The 1e-10 relative margin absorbs the floating-point round trip budget ->
    # sigma -> ledger -> epsilon, so that the epsilon reported for the mechanisms that
    # ran never exceeds the target, not even in the last digit.
    if accountant == "gdp":
        mu = approx_dp_to_gdp(epsilon, delta)
        if math.isinf(mu):
            return math.inf
        # Capped below the overflow of mu^2 (epsilon near 1e308): a smaller budget.
        mu = min(mu, _MU_MAX)
        return (mu * mu / 2.0) * (1.0 - _MARGIN)
    if accountant == "zcdp":
        return approx_dp_to_zcdp(epsilon, delta) * (1.0 - _MARGIN)
    raise ValueError(f"accountant must be 'gdp' or 'zcdp', got {accountant!r}.")


# ------------------------------------------------------------------------ RDP


def _as_orders(orders):
    orders = np.asarray(DEFAULT_RDP_ORDERS if orders is None else orders, dtype=float)
    if orders.ndim != 1 or orders.size == 0 or np.any(~(orders > 1)):
        raise ValueError("RDP orders must be a non-empty 1-d sequence of reals > 1.")
    return orders


def rdp_gaussian(noise_multiplier, orders=None):
    """RDP of the Gaussian mechanism, ``alpha / (2 z^2)`` with ``z = sigma / Delta``."""
    orders = _as_orders(orders)
    z = _check_nonneg(noise_multiplier, "noise_multiplier")
    if z == 0:
        return np.full_like(orders, np.inf)
    return orders / (2.0 * z * z)


def _log_a_integer(q, z, alpha):
    # log E_{P}[(Q/P)^alpha] for the mixture (1-q) N(0, z^2) + q N(1, z^2) against
    # N(0, z^2): sum_k C(alpha,k) (1-q)^(alpha-k) q^k exp((k^2 - k) / (2 z^2)).
    k = np.arange(alpha + 1, dtype=float)
    log_binom = (
        special.gammaln(alpha + 1)
        - special.gammaln(k + 1)
        - special.gammaln(alpha - k + 1)
    )
    terms = log_binom + (alpha - k) * math.log1p(-q) + k * math.log(q)
    terms += (k * k - k) / (2.0 * z * z)
    return float(special.logsumexp(terms))


def rdp_poisson_subsampled_gaussian(sampling_rate, noise_multiplier, orders=None):
    """RDP of one step of the Poisson-subsampled Gaussian mechanism.

    Each record enters the batch independently with probability ``sampling_rate``;
    the batch's query has l2-sensitivity ``Delta`` under add/remove-one and Gaussian
    noise of std ``noise_multiplier * Delta`` is added. At integer orders ``alpha``
    the bound ``log(A_alpha) / (alpha - 1)`` with
    ``A_alpha = sum_k C(alpha,k) (1-q)^(alpha-k) q^k exp((k^2-k)/(2 z^2))`` is exact
    (Mironov, Talwar & Zhang 2019, §3.3). Non-integer orders are rounded up to the
    next integer, which is conservative because RDP is non-decreasing in the order.

    Parameters
    ----------
    sampling_rate : float
        ``q`` in ``[0, 1]``.
    noise_multiplier : float
        ``z = sigma / Delta``, ``>= 0``.
    orders : sequence of float, default=DEFAULT_RDP_ORDERS

    Returns
    -------
    rdp : ndarray of shape (len(orders),)

    References
    ----------
    .. [1] Mironov, I., Talwar, K. and Zhang, L. (2019). Renyi differential privacy
       of the sampled Gaussian mechanism. arXiv:1908.10530.
    """
    orders = _as_orders(orders)
    q = check_real(sampling_rate, "sampling_rate", low=0.0, high=1.0)
    z = _check_nonneg(noise_multiplier, "noise_multiplier")
    if q == 0:
        return np.zeros_like(orders)
    if z == 0:
        return np.full_like(orders, np.inf)
    if math.isinf(z):
        return np.zeros_like(orders)
    if q == 1:
        return rdp_gaussian(z, orders)
    return np.array(_rdp_subsampled_cached(q, z, tuple(orders.tolist())))


@functools.lru_cache(maxsize=1024)
def _rdp_subsampled_cached(q, z, orders):
    # Pure function of public numbers; cached because every SGD fit composes the
    # same (q, z) curve again when it reports what it spent.
    out = []
    for alpha in orders:
        a = math.ceil(alpha)
        out.append(_log_a_integer(q, z, a) / (a - 1))
    return tuple(out)


def compose_rdp(rdps: Iterable[Sequence[float]]) -> np.ndarray:
    """Adaptive composition in RDP: curves add order-wise (Mironov 2017, Prop 1)."""
    total = None
    for rdp in rdps:
        rdp = np.asarray(rdp, dtype=float)
        total = rdp.copy() if total is None else total + rdp
    if total is None:
        raise ValueError("compose_rdp needs at least one RDP curve.")
    return total


def rdp_to_approx_dp(orders, rdp, delta, method="improved"):
    """Convert an RDP curve to ``(epsilon, delta)``-DP.

    Parameters
    ----------
    orders : sequence of float
        Renyi orders ``alpha > 1``.
    rdp : sequence of float
        RDP values at those orders.
    delta : float
        Target delta in ``(0, 1)``.
    method : {"improved", "classic"}, default="improved"
        ``"classic"``: ``min_alpha rdp + log(1/delta)/(alpha-1)`` (Mironov 2017,
        Prop 3). ``"improved"``: ``min_alpha rdp + log1p(-1/alpha) -
        (log(delta) + log(alpha))/(alpha-1)`` (Balle et al. 2020, Thm 21; Canonne,
        Kamath & Steinke 2020, Prop 12), never larger than the classic bound at the
        same order, so the minimum of both is taken.

    Returns
    -------
    epsilon : float
    order : float
        The optimal order.
    """
    orders = _as_orders(orders)
    rdp = np.asarray(rdp, dtype=float)
    if rdp.shape != orders.shape:
        raise ValueError("rdp and orders must have the same length.")
    delta = _check_delta(delta)
    log_delta = math.log(delta)
    classic = rdp - log_delta / (orders - 1)
    if method == "classic":
        eps = classic
    elif method == "improved":
        improved = (
            rdp + np.log1p(-1.0 / orders) - (log_delta + np.log(orders)) / (orders - 1)
        )
        eps = np.minimum(classic, improved)
    else:
        raise ValueError(f"method must be 'improved' or 'classic', got {method!r}.")
    eps = np.where(np.isnan(eps), np.inf, eps)
    i = int(np.argmin(eps))
    return max(float(eps[i]), 0.0), float(orders[i])


def noise_multiplier_for_rdp(
    epsilon, delta, sampling_rate, steps, orders=None, method="improved"
):
    """Smallest noise multiplier for which ``steps`` subsampled Gaussian steps are DP.

    Bisection on ``z`` (the composed epsilon is non-increasing in ``z``); the returned
    ``z`` certifies ``epsilon`` (upper end of the bracket). Public API, under
    add/remove-one neighbours; the estimators calibrate the replace-one statement
    with :func:`calibrate_poisson_noise_multiplier`.
    """
    orders = _as_orders(orders)

    def eps_of(z):
        rdp = steps * rdp_poisson_subsampled_gaussian(sampling_rate, z, orders)
        return rdp_to_approx_dp(orders, rdp, delta, method)[0]

    return _smallest_noise_multiplier(eps_of, epsilon)


def _smallest_noise_multiplier(eps_of, epsilon, z_max=1e8, rtol=1e-10):
    """Bisection for the smallest ``z`` with ``eps_of(z) <= epsilon``.

    ``eps_of`` must be non-increasing in ``z``. Invariant: ``eps_of(hi) <= epsilon``,
    so the returned upper end certifies the target.
    """
    lo, hi = 0.0, 1.0
    while eps_of(hi) > epsilon:
        lo, hi = hi, hi * 2.0
        if hi > z_max:
            raise PrivacyBudgetError(
                f"epsilon={epsilon:g} is too small for this number of noisy steps: "
                f"no noise multiplier below {z_max:g} reaches it. Increase epsilon "
                "or the number of samples, or run fewer epochs / iterations."
            )
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if mid > 0 and eps_of(mid) <= epsilon:
            hi = mid
        else:
            lo = mid
        if hi - lo <= rtol * hi:
            break
    return hi


__all__ += ["noise_multiplier_for_rdp"]


# ------------------------------------------------ Poisson subsampling, replace-one


def poisson_replace_one_epsilon(records, delta, orders=None):
    """Replace-one epsilon of Poisson-subsampled Gaussian records at ``delta``.

    Each record is ``count`` steps of a Poisson-subsampled Gaussian mechanism whose
    batch statistic has l2-sensitivity ``sensitivity`` under *add/remove-one* and
    noise std ``scale``. Their RDP curves (Mironov, Talwar & Zhang 2019) add, and
    convert to an add/remove ``(epsilon_ar, delta_ar)`` guarantee. A replace-one
    neighbour is a removal followed by an addition with the sampling rate held
    fixed (it is public), so group privacy of size 2 gives
    ``(2 epsilon_ar, (1 + e^epsilon_ar) delta_ar)`` (Dwork & Roth 2014, Thm 2.2
    extended to approximate DP).
    ``delta_ar`` is found by the fixed point ``delta_ar = delta / (1 + e^eps_ar)``,
    which decreases monotonically to a feasible split; the returned epsilon
    certifies ``delta``.

    Parameters
    ----------
    records : sequence of MechanismRecord of kind "subsampled_gaussian"
    delta : float
        Replace-one delta in ``(0, 1)``.

    Returns
    -------
    epsilon : float
    """
    delta = _check_delta(delta)
    orders = _as_orders(orders)
    curves = []
    for rec in records:
        if rec.kind != "subsampled_gaussian":
            raise ValueError(f"expected subsampled_gaussian records, got {rec.kind!r}.")
        curves.append(_record_rdp(rec, orders))
    total = compose_rdp(curves)
    delta_ar = delta / 2.0
    for _ in range(100):
        eps_ar = rdp_to_approx_dp(orders, total, delta_ar)[0]
        if math.isinf(eps_ar) or eps_ar > 700.0:  # e^eps_ar overflows: no useful DP
            return math.inf
        if (1.0 + math.exp(eps_ar)) * delta_ar <= delta:
            return 2.0 * eps_ar
        # A relative margin below the fixed point: at it exactly, the check above
        # can fail by one rounding forever (inf was returned at scattered deltas).
        delta_ar = delta / (1.0 + math.exp(eps_ar)) * (1.0 - 1e-9)
    return math.inf  # pragma: no cover - the fixed point converges in a few steps


def calibrate_poisson_noise_multiplier(epsilon, delta, stages):
    """Smallest common noise multiplier ``z`` making Poisson-subsampled steps DP.

    Parameters
    ----------
    epsilon, delta : float
        Replace-one target.
    stages : sequence of (sampling_rate, steps)
        Every stage's steps add ``sigma = z * sensitivity`` noise to a statistic of
        a Poisson batch drawn at that rate.

    Returns
    -------
    z : float
        The upper end of a bisection on the composed epsilon (which decreases in
        ``z``), so it certifies the target.
    """
    # A pure function of public numbers, so its value may be cached across fits.
    return _calibrate_poisson_cached(
        float(epsilon), float(delta), tuple((float(q), int(t)) for q, t in stages)
    )


@functools.lru_cache(maxsize=256)
def _calibrate_poisson_cached(epsilon, delta, stages):
    from ._records import MechanismRecord

    def eps_of(z):
        recs = [
            MechanismRecord(
                "step",
                "subsampled_gaussian",
                count=int(t),
                sensitivity=1.0,
                scale=z,
                sampling_rate=q,
            )
            for q, t in stages
        ]
        return poisson_replace_one_epsilon(recs, delta)

    return _smallest_noise_multiplier(eps_of, epsilon, z_max=1e7, rtol=1e-9)


__all__ += ["calibrate_poisson_noise_multiplier", "poisson_replace_one_epsilon"]


# ------------------------------------------------------------ ledger accounting


def _laplace_rdp(eps, orders):
    # Exact RDP of the Laplace mechanism with epsilon = Delta_1 / b (Mironov 2017,
    # Prop 6), computed in log space.
    a = orders
    log_t1 = np.log(a) - np.log(2 * a - 1) + (a - 1) * eps
    log_t2 = np.log(a - 1) - np.log(2 * a - 1) - a * eps
    return np.minimum(np.logaddexp(log_t1, log_t2) / (a - 1), eps)


def _record_rdp(rec, orders):
    """RDP curve of ``count`` uses of a record, or None if it has none."""
    if rec.kind in ("gaussian", "subsampled_gaussian"):
        if rec.sensitivity == 0:
            return np.zeros_like(orders)
        if not rec.scale:
            return np.full_like(orders, np.inf)
        z = rec.scale / rec.sensitivity
        if rec.kind == "gaussian":
            return rec.count * rdp_gaussian(z, orders)
        return rec.count * rdp_poisson_subsampled_gaussian(rec.sampling_rate, z, orders)
    if rec.kind == "zcdp":
        return rec.count * rec.rho * orders
    if rec.kind == "laplace":
        return rec.count * _laplace_rdp(_laplace_epsilon(rec), orders)
    return None


def _laplace_epsilon(rec):
    if rec.epsilon is not None:
        return rec.epsilon
    if rec.sensitivity == 0:
        return 0.0
    return math.inf if not rec.scale else rec.sensitivity / rec.scale


def _record_rho(rec):
    if rec.kind == "gaussian":
        if rec.sensitivity == 0:
            return 0.0
        return (
            math.inf
            if not rec.scale
            else rec.count * rec.sensitivity**2 / (2.0 * rec.scale**2)
        )
    if rec.kind == "zcdp":
        return rec.count * rec.rho
    if rec.kind == "laplace":  # eps-DP implies eps^2/2-zCDP (Bun & Steinke, Prop 1.4)
        return rec.count * _laplace_epsilon(rec) ** 2 / 2.0
    return None


#: Total variation between all the Gaussian-mechanism draws one accounting can
#: cover (at most 2^64 draws of ``GAUSSIAN_TV_PER_DRAW = 2^-780`` each) and their
#: ideal laws (see :mod:`skdpsco.privacy._discrete`).
SAMPLER_TOTAL_VARIATION = 2.0**-716


def exact_split(total, *parts):
    """``total - sum(parts)`` in floating point, lowered until ``sum(parts) + rest
    <= total`` holds exactly (rational arithmetic): a budget split that never
    spends more than ``total``."""
    used = sum(Fraction(x) for x in parts)
    rest = float(Fraction(total) - used)
    while rest > 0 and used + Fraction(rest) > Fraction(total):
        rest = math.nextafter(rest, 0.0)
    return rest


def account_records(records, delta):
    """Compose ledger records into the smallest certified ``(epsilon, delta)``.

    With Gaussian mechanisms, their samplers' total variation ``tau`` from the
    ideal noise (:data:`SAMPLER_TOTAL_VARIATION`) turns an ``(epsilon,
    delta')``-DP ideal into ``(epsilon, delta' + (1 + e^epsilon) tau)``-DP: the
    composition is evaluated at ``delta' = delta - (1 + e^epsilon_1) tau``, with
    ``epsilon_1`` its value at ``delta (1 - 2^-20)`` (an upper bound on the
    result). For any practical delta this changes nothing in floating point.
    """
    records = tuple(records)
    delta = _check_delta(delta, allow_zero=True)
    # Every record may hold grid Gaussian draws (composite records of kind
    # "approx_dp" summarise some), so the slack is taken whenever delta > 0.
    spent = math.fsum(r.count * r.delta for r in records if r.kind == "approx_dp")
    if delta > spent:
        # (Composite records that exhaust delta themselves leave no room: their
        # share of the slack, below 2^-700, is not taken.)
        probe = delta - (delta - spent) * 2.0**-20
        eps_hi = _account_ideal(records, probe)[0]
        if math.isinf(eps_hi):  # no finite guarantee to protect
            return _account_ideal(records, delta)
        slack = (1.0 + math.exp(min(eps_hi, 700.0))) * SAMPLER_TOTAL_VARIATION
        if not slack <= delta - probe:
            raise ValueError(
                f"epsilon={eps_hi:.6g} is too large (or delta={delta:g} too "
                "small) for the samplers' total variation slack: the secure "
                "Gaussian samplers certify epsilon up to about 470 at delta = "
                "1e-5 (such an epsilon promises nothing anyway)."
            )
        return _account_ideal(records, delta - slack)
    return _account_ideal(records, delta)


def _account_ideal(records, delta):
    """:func:`account_records` for ideal noise (see there).

    Each record describes ``count`` uses of one mechanism (see
    :class:`skdpsco.privacy.MechanismRecord`). Every composition theorem that applies
    to the whole list is tried, and the smallest epsilon is kept (each one is a valid
    bound, so their minimum is):

    * ``"gdp"``: all mechanisms Gaussian; exact composition (Dong, Roth & Su 2022).
    * ``"zcdp"``: all mechanisms zCDP; rho adds, Bun–Steinke conversion.
    * ``"rdp"``: all mechanisms have an RDP curve (Gaussian, subsampled Gaussian,
      zCDP, Laplace); curves add, improved conversion.
    * ``"basic"``: all mechanisms pure or approximate DP; epsilons and deltas add.
    * ``"rdp-group"``: Poisson-subsampled Gaussian records (add/remove RDP turned
      into replace-one by group privacy, :func:`poisson_replace_one_epsilon`);
      composed with the other records by basic composition.

    Records of kind ``"approx_dp"`` (an ``(epsilon_i, delta_i)`` mechanism) are
    composed with the rest by basic composition: they take ``sum delta_i`` out of
    ``delta`` and add ``sum epsilon_i``.

    Returns
    -------
    epsilon : float
    rho : float or None
        zCDP parameter of the composition, if every mechanism is zCDP. An
        ``"approx_dp"`` record with ``delta_i > 0`` is not zCDP, so its presence
        makes ``rho`` None; one with ``delta_i = 0`` is pure ``epsilon_i``-DP, hence
        ``epsilon_i^2 / 2``-zCDP (Bun & Steinke 2016, Prop 1.4), and adds that.
    accountant : str
    """
    delta = _check_delta(delta, allow_zero=True)
    records = tuple(records)
    approx = [r for r in records if r.kind == "approx_dp"]
    subsampled = [r for r in records if r.kind == "subsampled_gaussian"]
    rest = [r for r in records if r.kind not in ("approx_dp", "subsampled_gaussian")]
    eps_approx = math.fsum(r.count * r.epsilon for r in approx)
    delta_rest = delta - math.fsum(r.count * r.delta for r in approx)
    if delta_rest < 0:
        raise ValueError("delta is smaller than the deltas the mechanisms spent.")
    if subsampled:
        # Poisson-subsampled mechanisms are accounted under add/remove and converted
        # to replace-one by group privacy; they compose with everything else by basic
        # composition (half of the remaining delta each when both are present).
        if delta_rest == 0:
            raise ValueError("Poisson-subsampled Gaussian mechanisms need delta > 0.")
        delta_sub = delta_rest / 2.0 if rest else delta_rest
        eps_approx += poisson_replace_one_epsilon(subsampled, delta_sub)
        delta_rest -= delta_sub
        if not rest:
            return eps_approx, None, "rdp-group"
        approx = approx + subsampled
    # zCDP of the approx_dp records: pure ones are eps^2/2-zCDP (Bun & Steinke 2016,
    # Prop 1.4); one with delta_i > 0 is not zCDP at all, and then neither is the
    # composition, so no rho may be reported for it.
    rhos_approx = [
        r.count * r.epsilon**2 / 2.0 if r.delta == 0 or r.count == 0 else None
        for r in approx
    ]
    if not rest:
        rho = None if any(x is None for x in rhos_approx) else math.fsum(rhos_approx)
        return eps_approx, rho, "basic"

    candidates = []
    rhos = [_record_rho(r) for r in rest]
    rho = None if any(x is None for x in rhos) else math.fsum(rhos)
    if all(r.kind == "laplace" for r in rest):
        candidates.append(
            (math.fsum(r.count * _laplace_epsilon(r) for r in rest), "basic")
        )
    if delta_rest > 0:
        if all(r.kind == "gaussian" for r in rest) and rho is not None:
            mu = math.sqrt(2.0 * rho) if math.isfinite(rho) else math.inf
            candidates.append((gdp_to_approx_dp(mu, delta_rest), "gdp"))
        if rho is not None:
            eps = math.inf if math.isinf(rho) else zcdp_to_approx_dp(rho, delta_rest)
            candidates.append((eps, "zcdp"))
        curves = [_record_rdp(r, np.asarray(DEFAULT_RDP_ORDERS, float)) for r in rest]
        if all(c is not None for c in curves):
            total = compose_rdp(curves)
            eps = rdp_to_approx_dp(DEFAULT_RDP_ORDERS, total, delta_rest)[0]
            candidates.append((eps, "rdp"))
    if not candidates:
        raise ValueError(
            "No composition theorem applies to these mechanisms at delta=0 "
            "(Gaussian mechanisms need delta > 0)."
        )
    eps, how = min(candidates, key=lambda c: c[0])
    if approx:
        how = f"{how}+basic"
        if rho is not None:
            rho = (
                None
                if any(x is None for x in rhos_approx)
                else rho + math.fsum(rhos_approx)
            )
    return eps + eps_approx, rho, how


__all__ += ["account_records"]
