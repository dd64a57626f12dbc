"""Privacy amplification by shuffling (Feldman, McMillan & Talwar 2021).

Setting: the ``n`` records are put in a uniformly random (secret) order and then
processed one at a time by local randomizers ``R_i``; ``R_i`` sees one record and
the outputs of ``R_1 .. R_{i-1}`` (adaptivity is allowed), and each ``R_i(.)`` is an
``(epsilon0, delta0)``-DP function of its record. Then the whole transcript is
``(epsilon, delta_s + (e^epsilon + 1)(1 + e^{-epsilon0} / 2) n delta0)``-DP under
replace-one neighbours, with the closed form

    epsilon = ln(1 + (1 - e^{-eps0}) / (1 + e^{-eps0 - e1}) (a + c)),
    a = 8 sqrt(e^{eps0} ln(4 / delta_s) / n),   c = 8 e^{eps0} / n,
    e1 = ln(1 + a + c),

valid for ``eps0 <= ln(n / (16 ln(4 / delta_s)))`` (FMT21, Theorem 3.1 in the
journal/arXiv form, the same expression as the authors' reference code
``closedformanalysis`` in apple/ml-shuffling-amplification; Theorem 3.8 for the
``delta0`` term). Outside that range nothing is proven and the functions here refuse
(or, when inverting, stay inside it).
"""

import math

from ..utils._validation import check_real
from ._accounting import calibrate_analytic_gaussian
from ._mechanisms import GaussianMechanism
from ._records import MechanismRecord

__all__ = [
    "ShuffledGaussianRandomizers",
    "shuffle_delta",
    "shuffle_epsilon",
    "shuffle_local_epsilon",
    "shuffle_valid_local_epsilon",
]


def _check(n, delta_s):
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}.")
    check_real(delta_s, "delta_s", low=0.0, high=1.0, low_open=True, high_open=True)


def shuffle_valid_local_epsilon(n, delta_s):
    """Largest local ``epsilon0`` the FMT21 closed form covers.

    That is ``ln(n / (16 ln(4/delta_s)))``.

    Returns ``-inf`` when ``n <= 16 ln(4 / delta_s)`` (no amplification is proven).
    """
    _check(n, delta_s)
    ratio = n / (16.0 * math.log(4.0 / delta_s))
    return math.log(ratio) if ratio > 0 else -math.inf


def shuffle_epsilon(epsilon0, n, delta_s):
    """Central ``epsilon`` of ``n`` shuffled ``epsilon0``-DP local randomizers.

    The FMT21 closed form (module docstring) at ``delta_s``.

    Parameters
    ----------
    epsilon0 : float
        Local privacy parameter, ``0 <= epsilon0 <= ln(n / (16 ln(4/delta_s)))``.
    n : int
        Number of shuffled records.
    delta_s : float
        The shuffling part of delta.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        If ``epsilon0`` is outside the range where the bound is proven.

    References
    ----------
    .. [1] Feldman, V., McMillan, A. and Talwar, K. (2021). Hiding among the clones:
       a simple and nearly optimal analysis of privacy amplification by shuffling.
       FOCS 2021 (arXiv:2012.12803), Theorem 3.1.

    Examples
    --------
    >>> round(shuffle_epsilon(1.0, 100_000, 5e-6), 4)
    0.0712
    """
    _check(n, delta_s)
    if not (epsilon0 >= 0 and math.isfinite(epsilon0)):
        raise ValueError(f"epsilon0 must be finite and >= 0, got {epsilon0!r}.")
    if epsilon0 > shuffle_valid_local_epsilon(n, delta_s):
        raise ValueError(
            f"epsilon0={epsilon0:.4g} exceeds the range ln(n / (16 ln(4/delta_s))) = "
            f"{shuffle_valid_local_epsilon(n, delta_s):.4g} of the FMT21 bound."
        )
    if epsilon0 == 0:
        return 0.0
    a = 8.0 * math.sqrt(math.exp(epsilon0) * math.log(4.0 / delta_s) / n)
    c = 8.0 * math.exp(epsilon0) / n
    e1 = math.log1p(a + c)
    factor = -math.expm1(-epsilon0) / (1.0 + math.exp(-epsilon0 - e1))
    return math.log1p(factor * (a + c))


def shuffle_delta(epsilon, epsilon0, delta0, n, delta_s):
    """Total delta of the shuffled transcript (FMT21, Theorem 3.8).

    ``delta_s + (e^eps + 1)(1 + e^{-eps0}/2) n delta0``.
    """
    return (
        delta_s
        + (math.exp(epsilon) + 1.0) * (1.0 + math.exp(-epsilon0) / 2.0) * n * delta0
    )


def shuffle_local_epsilon(epsilon, n, delta_s, cap=1.0, rtol=1e-12):
    """Largest local ``epsilon0 <= cap`` whose shuffled ``epsilon`` is ``<= epsilon``.

    Inverts :func:`shuffle_epsilon` (increasing in ``epsilon0``) by bisection,
    within its validity range, and caps the result at ``cap``: every theorem of
    Su, Zhao & Wang's paper assumes ``epsilon < 1``, so the local randomizers are
    only calibrated at ``epsilon0 <= 1``.
    When the cap or the validity range binds, the achieved central epsilon is below
    the request; it is returned so that the caller reports what was actually spent.

    Parameters
    ----------
    epsilon : float
        Target central epsilon, ``> 0``.
    n : int
    delta_s : float
    cap : float, default=1.0
    rtol : float

    Returns
    -------
    epsilon0 : float
        ``0`` when no positive local epsilon is covered (``n`` too small).
    achieved : float
        ``shuffle_epsilon(epsilon0, n, delta_s) <= epsilon``.

    Examples
    --------
    >>> eps0, achieved = shuffle_local_epsilon(0.1, 100_000, 5e-6)
    >>> eps0, round(achieved, 4)
    (1.0, 0.0712)
    """
    _check(n, delta_s)
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon!r}.")
    hi = min(cap, shuffle_valid_local_epsilon(n, delta_s))
    if hi <= 0:
        return 0.0, 0.0
    if shuffle_epsilon(hi, n, delta_s) <= epsilon:
        return hi, shuffle_epsilon(hi, n, delta_s)
    lo = 0.0
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        if shuffle_epsilon(mid, n, delta_s) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo, shuffle_epsilon(lo, n, delta_s)


class ShuffledGaussianRandomizers:
    """Gaussian local randomizers, one per record, run in a secret uniform order.

    Each record's message is the grid :class:`GaussianMechanism` of l2-sensitivity
    ``Delta`` calibrated to ``(eps0, delta0)``-DP (Balle & Wang 2018, Thm 8), with
    ``delta_s = delta / 2``, ``delta0 = delta / (3 n (e^eps + 1))`` and ``eps0``
    the largest local epsilon ``<= 1`` whose amplified epsilon is at most ``eps``
    (:func:`shuffle_local_epsilon`). Amplification by shuffling (FMT21, Thms 3.1
    and 3.8) makes the transcript ``(eps', shuffle_delta(eps', eps0, delta0, n,
    delta_s))``-DP, ``eps' <= eps`` the achieved epsilon: that is the record.

    Parameters
    ----------
    sensitivity : float
        ``Delta``, the l2 distance between two records' noise-free messages.
    epsilon, delta : float
        The central budget (``epsilon = inf``: the testing mode, no noise).
    n_samples : int
        Public number of records (one message each).
    name : str
        Ledger label.

    Attributes
    ----------
    epsilon0, delta0 : float
        The local randomizers' guarantee (``epsilon0 = 0``: ``n`` too small for
        any amplification, see :attr:`amplifies`).
    sigma : float or None
        Noise std per coordinate (None when nothing amplifies).
    """

    def __init__(
        self, sensitivity, epsilon, delta, n_samples, name="shuffled gaussian"
    ):
        n = int(n_samples)
        eps_t = 1.0 if math.isinf(epsilon) else epsilon
        self.sensitivity = float(sensitivity)
        self.n_samples = n
        self.delta = delta
        self.delta_s = delta / 2.0
        self.delta0 = delta / (3.0 * n * (math.exp(eps_t) + 1.0))
        if math.isinf(epsilon):
            self.epsilon0, self.achieved = math.inf, math.inf
        else:
            self.epsilon0, self.achieved = shuffle_local_epsilon(
                epsilon, n, self.delta_s
            )
        if not self.amplifies:
            self.sigma = None
        elif math.isinf(self.epsilon0):
            self.sigma = 0.0
        else:
            self.sigma = calibrate_analytic_gaussian(
                self.epsilon0, self.delta0, self.sensitivity
            )
        self.name = name

    @property
    def amplifies(self):
        """Whether FMT21 covers any positive local epsilon at this ``n``."""
        return self.epsilon0 > 0

    def release(self, values, rng):
        """Every row of ``values`` (one message per record) plus its own noise."""
        if not self.amplifies:
            raise ValueError(f"{self.name}: n is too small for any amplification.")
        mechanism = GaussianMechanism(self.sensitivity, self.sigma, self.name)
        return mechanism.release(values, rng)

    def record(self):
        """The ``approx_dp`` record of the shuffled transcript."""
        eps = self.achieved
        delta = (
            shuffle_delta(eps, self.epsilon0, self.delta0, self.n_samples, self.delta_s)
            if math.isfinite(eps)
            else self.delta
        )
        return MechanismRecord(
            self.name, "approx_dp", count=1, epsilon=float(eps), delta=float(delta)
        )
