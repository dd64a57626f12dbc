"""Exact integer samplers for the noise of the secure mechanisms.

Every released value of skdpsco lies on a public grid: the noise-free value is
rounded to the grid and integer noise is added (see
:class:`skdpsco.privacy.GaussianMechanism`). The integer noise comes from here:

* :func:`bernoulli_exp`: ``Bernoulli(exp(-num / den))`` for non-negative integers,
  exactly, from uniform integers only (Canonne, Kamath & Steinke 2020, Algorithm 1
  and its extension to ``num > den``).
* :func:`discrete_laplace`: ``P[x] ~ exp(-|x| / t)`` on the integers, integer
  ``t``, exactly (their Algorithm 2).
* :func:`truncated_negative_binomial`: the hidden number of runs of a private
  selection (Papernot & Steinke 2022), exactly, from Bernoulli trials of rational
  probabilities.
* :func:`poisson_subsample`, :func:`uniform_sample`, :func:`bernoulli`: the
  randomness of subsampling and stopping (whose secrecy the amplification
  arguments need), exactly, in time proportional to the sample.
* :func:`discrete_gaussian`: ``P[x] ~ exp(-x^2 / (2 sigma^2))`` on the integers.
  Up to a variance of ``2^17``, one draw from an alias table (Walker 1977; Vose
  1991) whose probabilities are rounded by at most ``2^-832`` (built once per
  variance of a public menu, from 300-digit decimals); above, as a sum
  ``Z_fine + 2^k Z_coarse`` of independent table draws, which Peikert's
  convolution theorem (2010, Thm 3.1) puts within total variation ``8 eps`` of the
  discrete Gaussian of the summed variance when the fine part's width exceeds the
  smoothing parameter of ``2^k Z`` at ``eps = 2^-800`` (Micciancio & Regev 2007,
  Lemma 3.3: ``eta_eps(Z) <= sqrt(ln(2 + 2 / eps) / pi)`` in the width
  ``s = sqrt(2 pi) sigma``). :data:`GAUSSIAN_TV_PER_DRAW` bounds the distance of
  one draw from its ideal law; the accountant adds ``(1 + e^epsilon)`` times the
  total to delta.

No sampler reads a floating-point number: the rejection loops branch on uniform
integers only, so their running time depends on the random draws and their
parameters. The noise samplers' parameters are public; the coins of the
exponential mechanism (:func:`bernoulli_exp` of data-dependent distances) take a
number of rounds that depends on the distances, a timing channel the
documentation's threat model lists as not defended. The uniform integers come
from the generator, or, for a :class:`SecureGenerator` (``random_state=None``),
from the operating system's cryptographic source (:func:`os.urandom`).

References
----------
.. [1] Canonne, C. L., Kamath, G. and Steinke, T. (2020). The discrete Gaussian for
   differential privacy. NeurIPS. Algorithms 1-3, Theorem 14.
.. [2] Peikert, C. (2010). An efficient and parallel Gaussian sampler for lattices.
   CRYPTO. Theorem 3.1.
.. [3] Micciancio, D. and Regev, O. (2007). Worst-case to average-case reductions
   based on Gaussian measures. SIAM J. Computing. Lemma 3.3.
.. [4] Mironov, I. (2012). On significance of the least significant bits for
   differential privacy. CCS.
.. [5] Papernot, N. and Steinke, T. (2022). Hyperparameter tuning with Renyi
   differential privacy. ICLR. Definition 1.
.. [6] Walker, A. J. (1977). An efficient method for generating discrete random
   variables with general distributions. ACM TOMS. Vose, M. D. (1991). A linear
   algorithm for generating random numbers with a given distribution. IEEE TSE.
"""

import copy
import math
import os
from decimal import Context, Decimal, localcontext
from fractions import Fraction
from functools import lru_cache
from numbers import Integral

import numpy as np

from ..utils._validation import check_real

__all__ = [
    "COUPLING_SIGMA",
    "GAUSSIAN_TV_PER_DRAW",
    "SecureGenerator",
    "bernoulli",
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_gaussian_levels",
    "discrete_laplace",
    "make_generator",
    "poisson_batches",
    "poisson_subsample",
    "truncated_negative_binomial",
    "uniform_permutation",
    "uniform_sample",
]

#: Smoothing parameter ``eta_eps(Z)`` at ``eps = 2^-800``, in standard deviations:
#: ``sqrt(ln(2 + 2 / eps) / pi) / sqrt(2 pi)`` (Micciancio & Regev 2007, Lemma
#: 3.3, in the width ``s = sqrt(2 pi) sigma``), about 5.3.
_ETA = math.sqrt(801.0 * math.log(2.0) / math.pi) / math.sqrt(2.0 * math.pi)
#: Standard deviation of the part of a discrete Gaussian that couples it to a
#: continuous one (see :func:`discrete_gaussian`): at least :data:`_ETA`.
COUPLING_SIGMA = 6.0
#: Variance of the fine level of every split (a table built once), and the
#: menu of variances of the coarsest level: 257 values from 2^10 to 2^12 in
#: ratios of 2^(1/128) (the realised variance is at most 0.55% above the target).
_FINE_VARIANCE = 2.0**16
#: Variances of single tables: ``2^(j / 128)`` from ``2^-4`` to ``2^17`` (a
#: released variance is the smallest one at least the target: at most 0.55% more).
_MENU = tuple(2.0 ** (j / 128.0) for j in range(-4 * 128, 17 * 128 + 1))
_TOP_MENU = tuple(v for v in _MENU if 2.0**10 <= v <= 2.0**12)
#: Tables cover ``|x| <= 45 sigma``: the mass left out is below ``e^-1012``.
_TABLE_SIGMAS = 45
#: Words of the alias thresholds: each entry's probability is rounded by at most
#: ``2^-832`` (the words past the first are read with probability ``2^-64``).
_THRESHOLD_WORDS = 13
#: Total variation between one output of :func:`discrete_gaussian` (through the
#: coupling of the mechanisms, a post-processing of a continuous Gaussian) and
#: its ideal law: ``8 eps`` per split and for the coupling (``eps = 2^-800``),
#: ``2^19 2^-832`` per table for the rounded thresholds, ``e^-1012`` per table
#: for the truncation: below ``2^-796`` per level. A split divides the variance by
#: at least ``4^5``, so a variance ``V`` takes about ``log2(V) / 10`` levels, at
#: most about 100 for any float ``V``: well below ``2^-780``. The accountant adds
#: ``(1 + e^epsilon)`` times the total over all draws to delta.
GAUSSIAN_TV_PER_DRAW = 2.0**-780
#: Largest ``t`` of :func:`discrete_laplace` (``t K`` stays below ``2^63``).
MAX_LAPLACE_SCALE = 2**48


class SecureGenerator(np.random.Generator):
    """A :class:`numpy.random.Generator` whose privacy noise comes from the OS.

    What ``random_state=None`` gives: the integer samplers of the secure
    mechanisms draw their uniform integers from :func:`os.urandom` (the operating
    system's cryptographic source), not from the generator's PCG64 stream, which
    still serves the public, non-noise randomness (pairings, permutations of public
    indices, public random matrices) and is seeded from OS entropy.
    """

    secure = True

    def __deepcopy__(self, memo):
        # A copy must not fall back to the PCG64 stream (numpy copies and pickles
        # a Generator as a plain one): it is a fresh secure generator.
        return SecureGenerator(np.random.PCG64())

    def __copy__(self):
        return SecureGenerator(np.random.PCG64())

    def __reduce__(self):
        return (_fresh_secure_generator, ())


def _fresh_secure_generator():
    return SecureGenerator(np.random.PCG64())


def _uniform_below(rng, high, size):
    """Uniform integers in ``[0, high)`` (``high`` an int or an int64 array of
    shape ``size``, each in ``[1, 2^63)``), exactly."""
    if not getattr(rng, "secure", False):
        return rng.integers(0, high, size=size, dtype=np.int64)
    if np.ndim(high) == 0 and int(high) <= 2**32:
        return _lemire32(int(high), int(np.prod(size))).reshape(size)
    high = np.broadcast_to(np.asarray(high, dtype=np.uint64), size)
    # 2^64 mod high, computed in uint64 (wraps): the low values of [0, 2^64) that
    # would bias u mod high are rejected.
    rem = (np.uint64(0) - high) % high
    out = np.empty(size, dtype=np.uint64)
    todo = np.arange(int(np.prod(size)))
    flat_high, flat_rem = high.reshape(-1), rem.reshape(-1)
    flat = out.reshape(-1)
    while todo.size:
        u = np.frombuffer(os.urandom(8 * todo.size), dtype=np.uint64)
        ok = u >= flat_rem[todo]
        flat[todo[ok]] = u[ok] % flat_high[todo[ok]]
        todo = todo[~ok]
    return out.astype(np.int64)


def _os_words32(count):
    return np.frombuffer(os.urandom(4 * count), dtype=np.uint32).astype(np.uint64)


def _lemire32(high, count):
    """Uniform integers in ``[0, high)``, ``high <= 2^32``, from 32-bit OS words:
    ``floor(u high / 2^32)``, rejecting the ``2^32 mod high`` values of the low
    half that would bias it (Lemire 2019)."""
    out = np.empty(count, dtype=np.int64)
    todo = np.arange(count)
    reject_below = np.uint64((2**32 - high) % high)
    while todo.size:
        x = _os_words32(todo.size) * np.uint64(high)
        ok = (x & np.uint64(0xFFFFFFFF)) >= reject_below
        out[todo[ok]] = (x[ok] >> np.uint64(32)).astype(np.int64)
        todo = todo[~ok]
    return out


def _uniform_words32(rng, count):
    """Uniform 32-bit words (as uint64)."""
    if getattr(rng, "secure", False):
        return _os_words32(count)
    return rng.integers(0, 2**32, size=count, dtype=np.uint64)


def _bernoulli_exp_fraction(rng, num, den):
    """``Bernoulli(exp(-num / den))`` for an int64 array ``0 <= num <= den``,
    ``den`` an int or an int64 array below ``2^49`` (Canonne, Kamath & Steinke
    2020, Algorithm 1: count the successes ``K - 1`` of ``Bernoulli(gamma / K)``,
    ``K = 1, 2, ...``; the result is whether ``K`` is odd).

    The elements still running all share ``K``, so each round is one draw of
    uniform integers below ``den K`` (a scalar bound when ``den`` is one).
    """
    num = np.asarray(num, dtype=np.int64)
    scalar = np.ndim(den) == 0
    odd = np.empty(num.shape, dtype=bool)
    todo = np.arange(num.size)
    k = 1
    while todo.size:
        # Bernoulli(num / (den K)) from a uniform integer below den K.
        high = int(den) * k if scalar else den[todo] * k
        hit = _uniform_below(rng, high, todo.size) < num[todo]
        odd[todo[~hit]] = k % 2 == 1
        todo = todo[hit]
        k += 1
    return odd


def bernoulli_exp(rng, num, den):
    """``Bernoulli(exp(-num / den))`` per element, exactly.

    Parameters
    ----------
    rng : numpy.random.Generator
    num : array of non-negative integers (uint64)
    den : array of positive integers below ``2^49`` (int64), same shape

    Returns
    -------
    ndarray of bool
    """
    num = np.asarray(num, dtype=np.uint64)
    den = np.asarray(den, dtype=np.int64)
    whole = (num // den.astype(np.uint64)).astype(np.int64)
    frac = (num % den.astype(np.uint64)).astype(np.int64)
    ok = _bernoulli_exp_fraction(rng, frac, den)
    # exp(-q) as q independent Bernoulli(exp(-1)), stopping at the first failure.
    todo = np.flatnonzero(ok & (whole > 0))
    left = whole.copy()
    while todo.size:
        hit = _bernoulli_exp_fraction(rng, np.ones(todo.size, dtype=np.int64), 1)
        ok[todo[~hit]] = False
        left[todo] -= 1
        todo = todo[hit & (left[todo] > 0)]
    return ok


def _exp_candidates(rng, t, k):
    """``k`` candidates ``x = U + t V`` of Canonne, Kamath & Steinke's Algorithm 2
    and whether each is kept: ``U`` uniform below ``t``, kept with probability
    ``exp(-U / t)``; ``V`` the failures-before-success count of ``Bernoulli(exp(-1))``
    trials (``P[V = v] = (1 - e^-1) e^-v``). A kept ``x`` has
    ``P[x] ~ exp(-x / t)`` on ``x >= 0``."""
    u = _uniform_below(rng, t, k)
    keep = _bernoulli_exp_fraction(rng, u, t)
    one = np.ones(k, dtype=np.int64)
    v = np.zeros(k, dtype=np.int64)
    go = np.arange(k)
    while go.size:
        hit = _bernoulli_exp_fraction(rng, one[: go.size], 1)
        v[go[hit]] += 1
        go = go[hit]
    return u + t * v, keep


def discrete_laplace(rng, t, size):
    """Integers with ``P[x] ~ exp(-|x| / t)``, integer ``1 <= t <= 2^48``, exactly
    (Canonne, Kamath & Steinke 2020, Algorithm 2 with ``s = 1``).

    Returns
    -------
    ndarray of int64 of shape ``size``
    """
    t = int(t)
    if not 1 <= t <= MAX_LAPLACE_SCALE:
        raise ValueError(f"t must be an integer in [1, 2^48], got {t!r}.")
    m = int(np.prod(size))
    out = np.zeros(m, dtype=np.int64)
    todo = np.arange(m)
    while todo.size:
        k = todo.size
        x, keep = _exp_candidates(rng, t, k)
        negative = _uniform_below(rng, 2, k) == 1
        accept = keep & ~(negative & (x == 0))
        out[todo[accept]] = np.where(negative, -x, x)[accept]
        todo = todo[~accept]
    return out.reshape(size)


class _AliasTable:
    """Alias table (Walker 1977, Vose 1991) of the discrete Gaussian of variance
    ``variance`` (an exact float) on ``|x| <= 45 sigma``, built in exact integer
    arithmetic from probabilities computed to 300 significant digits: column ``j``
    keeps ``j`` with probability ``threshold_j / 2^832`` (exactly, comparing
    uniform words, most significant first), else returns ``alias_j``. Only the
    thresholds' first 32 bits are kept; the rest is recomputed in the rare event
    (probability ``2^-32`` per draw) that the uniform word ties with them."""

    def __init__(self, variance):
        self.variance = variance
        thresholds, alias, half = self._build(variance)
        n = len(thresholds)
        shift = 64 * _THRESHOLD_WORDS - 32
        # A full column (threshold 2^832) keeps itself: first 32 bits 2^32 - 1,
        # alias itself (a tie there is broken in its favour).
        self.first = np.array(
            [(1 << 32) - 1 if thr is None else thr >> shift for thr in thresholds],
            dtype=np.uint64,
        )
        self.alias = np.asarray(alias, dtype=np.int64)
        self.offset, self.n = half, n

    @staticmethod
    def _build(variance):
        with localcontext(Context(prec=300)):
            half = int(_TABLE_SIGMAS * math.sqrt(variance)) + 1
            q = (Decimal(-1) / (2 * Decimal(variance))).exp()
            # q^(x^2) by q^((x+1)^2) = q^(x^2) q^(2x+1).
            weights = [Decimal(1)]
            step, q2, cur = q, q * q, Decimal(1)
            for _ in range(half):
                cur *= step
                step *= q2
                weights.append(cur)
            pmf = weights[:0:-1] + weights  # x = -half .. half
            total = sum(pmf, Decimal(0))
            n = len(pmf)
            unit = 1 << (64 * _THRESHOLD_WORDS)
            # Integer weights summing to exactly n * unit (the floors, the deficit
            # of fewer than n units spread one each): each probability moves by
            # less than 2^-832.
            factor = Decimal(n * unit) / total
            scaled = [int(p * factor) for p in pmf]
        deficit = n * unit - sum(scaled)
        if not 0 <= deficit < n:
            raise RuntimeError("alias table: the rounded weights do not add up.")
        for i in range(deficit):
            scaled[i] += 1
        thresholds = [None] * n
        alias = list(range(n))
        small = [i for i in range(n) if scaled[i] < unit]
        large = [i for i in range(n) if scaled[i] > unit]
        while small and large:
            s_i, l_i = small.pop(), large.pop()
            thresholds[s_i] = scaled[s_i]
            alias[s_i] = l_i
            scaled[l_i] -= unit - scaled[s_i]
            if scaled[l_i] < unit:
                small.append(l_i)
            elif scaled[l_i] > unit:
                large.append(l_i)
        # Columns left (None) hold exactly ``unit``: they always keep themselves.
        return thresholds, alias, half

    def _tie_break(self, rng, columns):
        """Columns whose first uniform 32 bits tied with the threshold's: compare
        the remaining 800 bits (exact thresholds rebuilt for the occasion)."""
        thresholds, _, _ = self._build(self.variance)
        keep = np.ones(columns.size, dtype=bool)
        bits = 64 * _THRESHOLD_WORDS - 32
        for i, j in enumerate(columns):
            if thresholds[int(j)] is None:
                continue
            rest = thresholds[int(j)] & ((1 << bits) - 1)
            u = 0
            for w in _uniform_words32(rng, bits // 32):
                u = (u << 32) | int(w)
            keep[i] = u < rest
        return keep

    def sample(self, rng, size):
        m = int(np.prod(size))
        column = _uniform_below(rng, self.n, m)
        # The first 32 bits of a uniform 832-bit number against the threshold's;
        # a tie (probability 2^-32 per draw) reads the rest.
        u = _uniform_words32(rng, m)
        first = self.first[column]
        keep = u < first
        tie = np.flatnonzero(u == first)
        if tie.size:
            keep[tie] = self._tie_break(rng, column[tie])
        out = np.where(keep, column, self.alias[column]) - self.offset
        return out.reshape(size)


@lru_cache(maxsize=1024)
def _table(variance):
    return _AliasTable(variance)


def discrete_gaussian_levels(variance):
    """The public plan of :func:`discrete_gaussian`: ``[(V_0, k_0), ...,
    (V_L, None)]`` such that ``Z_0 + 2^k_0 (Z_1 + 2^k_1 (... Z_L))``, the ``Z_i``
    independent discrete Gaussians of variance parameters ``V_i``, is within total
    variation ``8 eps`` per split of the discrete Gaussian of variance parameter
    ``V_0 + 4^k_0 (V_1 + ...)`` >= ``variance`` (Peikert 2010, Thm 3.1: draw the
    coarse part on ``2^k Z``, add the fine part on ``Z``; it needs
    ``sqrt(1 / (1 / V_0 + 1 / (4^k V_rest))) >= eta_eps(2^k Z) = 2^k eta_eps(Z)``).
    Below ``2^17`` one level, the smallest of the menu variances ``2^(j/128)``
    at least ``variance``; above, fine levels of ``2^16`` and a last level from
    the menu's 257 variances in ``[2^10, 2^12]`` (tables built once each).

    Returns
    -------
    plan : list of (float, int or None)
    total : float
        The realised variance parameter (at least ``variance``).
    """
    check_real(variance, "variance", low=0.0, low_open=True)
    if variance < 2.0 * _FINE_VARIANCE:
        top = (
            next(v for v in _MENU if v >= variance) if variance > _MENU[0] else _MENU[0]
        )
        return [(top, None)], top
    return _split(variance)


def _split(variance):
    """Plan for ``variance >= 2^17``: a fine level of ``2^16`` plus ``2^k`` times
    the rest, the rest either a menu variance or (``>= 2^17``) split again."""
    fine = _FINE_VARIANCE
    coarse = variance - fine
    if fine + coarse < variance:  # rounding of the difference: round it up
        coarse = math.nextafter(coarse, math.inf)
    sigma3 = math.sqrt(fine * coarse / (fine + coarse))
    k_max = math.floor(math.log2(sigma3 / _ETA))
    k = 0
    while coarse / 4.0**k > _TOP_MENU[-1]:
        k += 1
    if k <= k_max:
        top = next(v for v in _TOP_MENU if v >= coarse / 4.0**k)
        return [(fine, k), (top, None)], fine + 4.0**k * top
    # coarse > 4^k_max 2^12 >= 2^22: some k <= k_max leaves a rest >= 2^17.
    k = k_max
    while coarse / 4.0**k < 2.0 * fine:
        k -= 1
    rest, rest_total = _split(coarse / 4.0**k)
    return [(fine, k), *rest], fine + 4.0**k * rest_total


def discrete_gaussian(rng, variance, size):
    """Integers with ``P[x] ~ exp(-x^2 / (2 sigma^2))``, ``sigma^2 >= variance``,
    within total variation :data:`GAUSSIAN_TV_PER_DRAW` per draw.

    Each level of :func:`discrete_gaussian_levels` is an alias-table draw: two
    uniform integers and a comparison, with no branch on anything but uniform
    words. The realised variance parameter is ``discrete_gaussian_levels(variance)
    [1]``.

    Returns
    -------
    ndarray of int64 of shape ``size``
    """
    plan, _ = discrete_gaussian_levels(variance)
    out = np.zeros(size, dtype=np.int64)
    factor = 1
    for level_variance, k in plan:
        out += factor * _table(level_variance).sample(rng, size)
        if k is not None:
            factor <<= k
    return out


# ------------------------------------------------- the number of runs of a selection


def uniform_permutation(rng, n):
    """A uniformly random permutation of ``range(n)`` whose randomness is part of a
    mechanism: for a :class:`SecureGenerator`, the order of distinct uniform
    64-bit keys from the OS source (keys drawn again while two tie, so the
    permutation is exactly uniform); otherwise the generator's own permutation
    (seeded test mode)."""
    if not getattr(rng, "secure", False):
        return rng.permutation(n)
    while True:
        keys = np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
        order = np.argsort(keys, kind="stable")
        if n < 2 or np.all(np.diff(keys[order]) > 0):
            return order


def _uniform_below_int(rng, high):
    """A uniform integer in ``[0, high)`` for a Python integer ``high >= 1`` of any
    size: ``bit_length(high)`` uniform bits, rejected while ``>= high`` (each try
    succeeds with probability above one half)."""
    bits = int(high).bit_length()
    words = -(-bits // 32)
    while True:
        raw = _uniform_words32(rng, words).astype("<u4").tobytes()
        u = int.from_bytes(raw, "little") & ((1 << bits) - 1)
        if u < high:
            return u


def _bernoulli_rational(rng, p):
    """``Bernoulli(p)`` for a :class:`fractions.Fraction` ``0 <= p <= 1``, exactly."""
    return _uniform_below_int(rng, p.denominator) < p.numerator


def _bernoulli_dyadic(rng, gamma, size):
    """``size`` independent ``Bernoulli(gamma)`` for a float ``gamma = m / 2^e``
    (a :class:`fractions.Fraction` with a power-of-two denominator), exactly:
    ``U < m`` for ``U`` uniform on ``e`` bits, i.e. its top ``e - 62`` bits all
    zero (drawn as 32-bit words) and its low 62 bits below ``m``."""
    m, e = gamma.numerator, gamma.denominator.bit_length() - 1
    if e <= 62:
        return _uniform_below(rng, 2**e, size) < m
    top = e - 62
    words = -(-top // 32)
    w = _uniform_words32(rng, size * words).reshape(size, words)
    w[:, -1] &= np.uint64((1 << (top - 32 * (words - 1))) - 1)
    return ~w.any(axis=1) & (_uniform_below(rng, 2**62, size) < m)


#: Most Bernoulli trials drawn at a time (those after the one needed are
#: dropped unread).
_MAX_TRIAL_BATCH = 2**16


def _trial_batch(gamma, successes=1):
    """Public batch size: about twice the expected trials to ``successes``."""
    expected = successes * gamma.denominator // max(gamma.numerator, 1)
    return int(min(_MAX_TRIAL_BATCH, max(64, 2 * expected)))


def _failures(rng, successes, gamma):
    """Failures before ``successes`` successes of ``Bernoulli(gamma)`` (a
    negative binomial of integer shape), exactly, trials drawn in batches."""
    batch = _trial_batch(gamma, successes)
    seen = failures = 0
    while True:
        trials = _bernoulli_dyadic(rng, gamma, batch)
        hits = np.flatnonzero(trials)
        if seen + hits.size >= successes:
            last = int(hits[successes - seen - 1])  # the trial of the last success
            return failures + last - (successes - seen - 1)
        seen += hits.size
        failures += batch - hits.size


def _geometric(rng, gamma):
    """Trials up to and including the first success of ``Bernoulli(gamma)``
    (``P[K = k] = gamma (1 - gamma)^(k - 1)``, ``k >= 1``), exactly."""
    return _failures(rng, 1, gamma) + 1


def truncated_negative_binomial(rng, eta, gamma):
    """Draw ``K >= 1`` with ``P[K = k] ~ (1 - gamma)^k prod_{l<k} (l + eta) / (l + 1)``,
    exactly (Papernot & Steinke 2022, Definition 1).

    ``eta`` and ``gamma`` are floats, hence exact rationals; every step is a
    Bernoulli trial of a rational probability decided by uniform integers:

    * ``eta <= 1``: a geometric ``k >= 1`` (``P ~ (1 - gamma)^(k - 1)``) accepted
      with probability ``prod_{1 <= l < k} (l + eta) / (l + 1) <= 1`` (one trial
      per factor, stopping at the first failure): the factor ``eta / 1`` of
      ``l = 0`` is the same for every ``k``. ``eta = 1`` is the geometric law
      itself, ``eta = 0`` the logarithmic law (acceptance ``1 / k``);
    * ``eta > 1``: ``k`` failures before ``r = ceil(eta)`` successes (the negative
      binomial of integer shape ``r``), accepted with probability
      ``prod_{l<k} (l + eta) / (l + r) <= 1``, and drawn again while ``k = 0``.

    The number of trials grows with ``K``, ``eta`` and ``1 / gamma`` (and the runs
    it counts take longer still); it reads nothing but public parameters and
    uniform integers.
    """
    g = Fraction(gamma)
    e = Fraction(eta)
    if e <= 1:
        while True:
            k = _geometric(rng, g)
            if e == 1 or all(
                _bernoulli_rational(rng, (l + e) / (l + 1)) for l in range(1, k)
            ):
                return k
    r = math.ceil(e)
    while True:
        k = _failures(rng, r, g)
        if k == 0:
            continue
        if all(_bernoulli_rational(rng, (l + e) / (l + r)) for l in range(k)):
            return k


# ------------------------------------------------ subsampling and stopping coins

#: Denominator ``t`` of the rational ``s / t`` that :func:`poisson_subsample` puts
#: at or below ``-ln(1 - rate)``.
_RATE_DENOMINATOR = 2**48


def _geometric_exp(rng, s, t, size):
    """``size`` draws of ``Y >= 0`` with ``P[Y = y] ~ exp(-y s / t)``, exactly:
    ``floor(X / s)`` of the one-sided ``X`` of :func:`_exp_candidates` sums ``s``
    consecutive masses of ``P[X = x] ~ exp(-x / t)``."""
    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:
        x, keep = _exp_candidates(rng, t, todo.size)
        out[todo[keep]] = (x // s)[keep]
        todo = todo[~keep]
    return out


def poisson_subsample(rng, n, rate):
    """Sorted indices of a Poisson subsample of ``range(n)`` (one draw of
    :func:`poisson_batches`)."""
    return next(poisson_batches(rng, n, rate, 1))


#: Expected kept indices per block of batches drawn at once by
#: :func:`poisson_batches` (one vectorised pass over the gaps of many batches).
_POISSON_BLOCK = 2**16


def poisson_batches(rng, n, rate, count):
    """``count`` independent Poisson subsamples of ``range(n)`` (sorted indices).

    For a :class:`SecureGenerator`, every index of every batch is kept
    independently with probability ``q = 1 - exp(-s / t) <= rate`` (``t = 2^48``,
    ``s`` the largest integer with ``s / t <= -ln(1 - rate) (1 - 2^-30)``, so
    ``q >= rate (1 - 2^-29) - 2^-48``). The batches of a block are consecutive
    stretches of ``n`` positions of one Bernoulli process whose gaps are
    independent with ``P[gap = g] = q (1 - q)^g``, drawn exactly by
    :func:`_geometric_exp` from OS uniform integers, in time proportional to the
    kept indices. Sampling at a rate at most the accounted one is covered by the
    accounting: a Poisson subsample at rate ``q`` is one at ``rate`` thinned
    independently at ``q / rate``, and thinning the input of a mechanism (a
    further subsampling) cannot weaken its privacy profile under add/remove, so
    the amplified mechanism the accountant analyses dominates the one run; the
    accountant's replace-one statement follows from the add/remove one by group
    privacy, as for the accounted rate. For a
    seeded generator (tests), each batch is a binomial count and a uniform subset
    of that size from the generator, drawn when asked for.
    """
    n, count = int(n), int(count)
    check_real(rate, "rate", low=0.0, high=1.0)
    if not getattr(rng, "secure", False):
        for _ in range(count):
            k = rng.binomial(n, rate)
            yield np.sort(rng.choice(n, size=k, replace=False))
        return
    if rate >= 1.0 or n == 0:
        for _ in range(count):
            yield np.arange(n)
        return
    s = math.floor(-math.log1p(-rate) * _RATE_DENOMINATOR * (1.0 - 2.0**-30))
    if s <= 0:
        for _ in range(count):
            yield np.zeros(0, dtype=np.intp)
        return
    per_block = max(1, _POISSON_BLOCK // max(1, math.ceil(n * rate)))
    done = 0
    while done < count:
        steps = min(per_block, count - done)
        span = steps * n
        batch = max(16, math.ceil(1.2 * span * rate) + 16)
        chunks, last = [], -1
        while True:
            gaps = _geometric_exp(rng, s, _RATE_DENOMINATOR, batch)
            kept = last + np.cumsum(gaps + 1)
            chunks.append(kept[kept < span])
            if kept[-1] >= span:
                break
            last = int(kept[-1])
        positions = np.concatenate(chunks)
        bounds = np.searchsorted(positions, np.arange(steps + 1) * n)
        for j in range(steps):
            yield (positions[bounds[j] : bounds[j + 1]] - j * n).astype(np.intp)
        done += steps


def uniform_sample(rng, n, m):
    """``m`` distinct indices of ``range(n)`` in uniformly random order (a uniform
    ordered sample without replacement), exactly: for a :class:`SecureGenerator`,
    uniform ``m``-tuples drawn again while two entries tie (each accepted with
    probability above ``1 / e`` when ``m (m - 1) <= 2 n``), else the first ``m`` of
    :func:`uniform_permutation`; a seeded generator's ``choice`` otherwise."""
    n, m = int(n), int(m)
    if not 0 <= m <= n:
        raise ValueError(f"cannot take {m} distinct indices of range({n}).")
    if not getattr(rng, "secure", False):
        return rng.choice(n, size=m, replace=False)
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    if m * (m - 1) > 2 * n:
        return uniform_permutation(rng, n)[:m]
    while True:
        draw = _uniform_below(rng, n, m)
        if np.unique(draw).size == m:
            return draw


def bernoulli(rng, p):
    """One ``Bernoulli(p)`` coin for a float ``0 <= p <= 1``: exactly ``p`` (a
    dyadic rational) from OS uniform integers for a :class:`SecureGenerator`,
    ``random() < p`` for a seeded generator."""
    if not getattr(rng, "secure", False):
        return bool(rng.random() < p)
    if p >= 1.0:
        return True
    if p <= 0.0:
        return False
    return bool(_bernoulli_dyadic(rng, Fraction(p), 1)[0])


def make_generator(random_state):
    """``numpy.random.Generator`` from a scikit-learn style ``random_state``.

    ``None`` gives a :class:`~skdpsco.privacy._discrete.SecureGenerator`: the
    privacy noise comes from the operating system's cryptographic source and the
    other randomness from a stream seeded with fresh OS entropy (the right choice
    in production: a fixed seed makes the noise reproducible by anyone who knows
    it); an int gives bit-for-bit
    reproducible fits; a ``RandomState`` seeds a Generator from (a copy of) its
    stream; a ``Generator`` is copied. Neither is advanced: whoever holds one (or
    the fitted estimator's ``random_state``) can regenerate the noise, so they
    are for tests only.
    """
    # A Generator or RandomState passed in is copied, never advanced: the fitted
    # estimator (and its pickle) must not hold the generator's post-fit state,
    # from which the noise could be regenerated (it still holds the pre-fit
    # state, which is why such a random_state is for tests only).
    if isinstance(random_state, SecureGenerator) or random_state is None:
        # Noise from the OS's cryptographic source (see SecureGenerator).
        return SecureGenerator(np.random.PCG64())
    if isinstance(random_state, np.random.Generator):
        return copy.deepcopy(random_state)
    if isinstance(random_state, Integral):
        return np.random.default_rng(int(random_state))
    if isinstance(random_state, np.random.RandomState):
        seed = copy.deepcopy(random_state).randint(0, 2**31 - 1, size=4)
        return np.random.default_rng(seed)
    raise ValueError(f"Cannot make a Generator from random_state={random_state!r}.")
