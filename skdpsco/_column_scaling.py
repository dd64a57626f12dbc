"""Private per-column centre and scale, with no bounds from the user.

Every estimator standardises its inputs with statistics released here, so that data
come in their natural units (a year near 2005, an income near 4e4, a target near
150) and no bound is declared by the user or read from the data.

The release, for the columns of ``X`` (and, separately, the target of a
regressor), in accounted mechanisms (Gaussian; Laplace for pure DP):

1. **Magnitude histogram** of every column over a public grid that spans the whole
   float64 range: bin 0 holds the zeros, bin ``k`` the values with ``|x|`` in
   ``[2^(e-1), 2^e)``, ``e = k - 1074`` the ``frexp`` exponent (exact for
   subnormals and for values near ``1.8e308``): 2099 bins. Replacing one record
   moves one count down and one up in each column, so the histogram of ``d``
   columns has l2-sensitivity ``sqrt(2 d)`` and l1-sensitivity ``2 d``
   (replace-one, ``n`` public; the coarse range of Karwa & Vadhan 2018 over a
   geometric grid). Post-processing: the three adjacent bins with the largest
   noisy sum that clears a public threshold (3.5 noise standard deviations of the
   sum inside the usual magnitudes ``2^-30`` to ``2^50``, 6 outside; Laplace
   thresholds at the same tail probabilities) locate the bulk; the window is
   ``[-hi, hi]``, ``hi`` the upper edge of those bins, extended up over the
   adjacent bins that clear the threshold on their own. A record far out
   (``1e300``) changes its own count only.
2. **Clipped moments** (two passes when centring, CoinPress-style): the mean and
   the second moment of ``clip((x - c) / h, -1, 1)`` in the window ``[c - h,
   c + h]``, with l2-sensitivities ``2 sqrt(d) / n`` and ``sqrt(d) / n`` (each
   clipped value lies in ``[-1, 1]``; the window is a released value, so this is
   adaptive composition, accounted by the ledger). Pass 1 uses the histogram's
   window; pass 2 the window ``centre +- 4 scale`` of pass 1 (within pass 1's). The
   centre is ``c + h * mean``, the scale ``h * sqrt(variance)`` with the variance
   floored at the noise standard deviation of its second moment (public) and at
   ``2^-20``.

A column whose histogram clears no threshold (too few records for this budget, or
all zeros) gets the public default: centre 0, scale 1. Everything after the noisy
releases is post-processing. Without centring (``fit_intercept=False``, sparse
input) one pass releases the second moment about 0 only, and sparse input keeps its
sparsity. With more than :data:`MAX_PER_COLUMN` columns (or when asked), one scale
is shared by all columns: the magnitude of the rows' l2 norms (one histogram,
l2-sensitivity ``sqrt(2)``), with no centring.

The derivations are collected in the documentation's privacy page.

References
----------
.. [1] Karwa, V. and Vadhan, S. (2018). Finite sample differentially private
   confidence intervals. ITCS. (Coarse private range by a histogram over a
   geometric grid, then estimation inside it.)
.. [2] Biswas, S., Dong, Y., Kamath, G. and Ullman, J. (2020). CoinPress: practical
   private mean and covariance estimation. NeurIPS. (Clipped means in shrinking
   private windows.)
.. [3] Dong, J., Roth, A. and Su, W. (2022). Gaussian differential privacy. JRSS B.
"""

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .privacy._mechanisms import GaussianMechanism, LaplaceMechanism

__all__ = [
    "ColumnScaling",
    "MAX_PER_COLUMN",
    "MIN_TARGET_SHARE",
    "scaling_is_underpowered",
    "magnitude_bins",
    "magnitude_histogram",
    "private_column_scaling",
    "scaling_share",
    "unscale_coef",
]

#: ``frexp`` exponents of nonzero finite float64 values: ``-1073`` (the smallest
#: subnormal) to ``1024`` (values near ``1.8e308``). Bin ``k`` holds exponent
#: ``k + _EXP_OFFSET``; bin 0 the zeros.
_EXP_MIN, _EXP_MAX = -1073, 1024
_EXP_OFFSET = _EXP_MIN - 1
N_BINS = _EXP_MAX - _EXP_MIN + 2
#: Detection thresholds, in noise standard deviations of the tested sum: inside the
#: usual magnitudes (2^-30 to 2^50, ~80 sums: a pure-noise sum clears 3.5 sigma
#: with probability 2.3e-4 each) ...
_THRESHOLD_SIGMAS = 3.5
_USUAL_EXPONENTS = (-30, 50)
#: ... and outside them (~2000 sums: the largest pure-noise one clears 6 sigma with
#: probability ~2e-6). A spurious detection only matters for a column whose bulk
#: is not detected (the bulk's margin wins the argmax otherwise).
_FAR_THRESHOLD_SIGMAS = 6.0
#: Widths (in magnitude bins, factors of 2) of the runs searched for a column's
#: bulk: 3 for concentrated columns, 7 for heavy-tailed ones.
_WIDTHS = (3, 7)
#: The window extends over adjacent bins holding at least this fraction of the
#: detected sum (far tails do not widen it).
_RELATIVE_THRESHOLD = 0.05
#: Share of the scaling budget spent on the magnitude histogram; the moment passes
#: share the rest equally.
_HISTOGRAM_SHARE = 0.4
#: Share of the scaling budget spent on the shared fallback scale.
_FALLBACK_SHARE = 0.05
#: Half-width of pass 2's window, in pass-1 scales.
_PASS2_WIDTH = 4.0
#: Pass 1's released mean (centring) or second moment (not centring), in window
#: units, beyond which the column's values sit at the window's edge.
_SATURATED = 0.9
#: Variance floor, in units of the window's squared half-width.
_VARIANCE_FLOOR = 2.0**-20
#: Above this many columns, one shared scale (per-column statistics would need
#: ``d`` times the memory of a histogram and noise growing like ``sqrt(d)``).
MAX_PER_COLUMN = 2000
#: Standardised values are clipped to +-this public bound: an extreme but finite
#: record then stays finite after standardisation (its gradient is clipped anyway).
_STANDARDISED_BOUND = 1e100
#: Largest finite float64.
_FMAX = np.finfo(np.float64).max
#: How one column of a histogram moves under replace-one, (l2, l1): one count
#: down, one up.
_COUNT_MOVE = (math.sqrt(2.0), 2.0)


def magnitude_bins(values):
    """Bin of each value on the public grid: 0 for 0, else ``frexp``'s exponent
    ``e`` (``|x|`` in ``[2^(e-1), 2^e)``) minus ``_EXP_OFFSET``. Finite input."""
    _, exponent = np.frexp(np.asarray(values, dtype=np.float64))
    return np.where(values != 0, exponent.astype(np.int64) - _EXP_OFFSET, 0)


def bin_upper_edge(k):
    """Upper edge ``2^e`` of bin ``k >= 1`` (the top bin's is the largest float)."""
    return (
        min(math.ldexp(1.0, int(k) + _EXP_OFFSET), _FMAX) if k < N_BINS - 1 else _FMAX
    )


def magnitude_histogram(X):
    """Counts of every column of ``X`` over the magnitude grid, shape (d, N_BINS).

    Dense ``X`` is processed in row chunks; for scipy.sparse ``X`` the implicit
    zeros are counted in bin 0 without being materialised (duplicate entries are
    summed first: the histogram is of the matrix's values).
    """
    n, d = X.shape
    counts = np.zeros(d * N_BINS, dtype=np.int64)
    if sp.issparse(X):
        X = sp.csc_matrix(X, copy=True)
        X.sum_duplicates()
        cols = np.repeat(np.arange(d), np.diff(X.indptr))
        counts += np.bincount(
            cols * N_BINS + magnitude_bins(X.data), minlength=d * N_BINS
        )
        counts = counts.reshape(d, N_BINS)
        counts[:, 0] += n - np.diff(X.indptr)
        return counts
    offsets = np.arange(d, dtype=np.int64) * N_BINS
    step = max(1, 2**20 // max(d, 1))
    for start in range(0, n, step):
        idx = magnitude_bins(X[start : start + step]) + offsets
        counts += np.bincount(idx.ravel(), minlength=d * N_BINS)
    return counts.reshape(d, N_BINS)


def _thresholds(mech, width):
    """Public detection threshold of a sum of ``width`` noisy bins, per bin."""
    exponent = np.arange(N_BINS) + _EXP_OFFSET
    usual = (exponent >= _USUAL_EXPONENTS[0]) & (exponent <= _USUAL_EXPONENTS[1])
    if isinstance(mech, GaussianMechanism):
        sd = mech.sigma * math.sqrt(width)
        near, far = _THRESHOLD_SIGMAS * sd, _FAR_THRESHOLD_SIGMAS * sd
    else:
        # Laplace(b) bins; a sum's tail is bounded by the union of its bins' tails
        # (P[Lap > t] = exp(-t / b) / 2) at the Gaussian thresholds' probabilities.
        b = mech.scale
        near = width * b * math.log(width / (2.0 * 2.3e-4))
        far = width * b * math.log(width / (2.0 * 1e-9))
    return np.maximum(np.where(usual, near, far), 0.5)


def _window_sums(body, width):
    """Sums of ``width`` adjacent bins (odd), centred on each bin (zero-padded)."""
    half = width // 2
    padded = np.pad(body, ((0, 0), (half, half)))
    cumulative = np.pad(np.cumsum(padded, axis=1), ((0, 0), (1, 0)))
    return cumulative[:, width:] - cumulative[:, :-width]


def _window_tops(noisy, mech, extend=True):
    """Post-processing: each column's window top ``hi`` (NaN where none is found).

    The bulk is the run of ``w`` adjacent magnitude bins (``w`` in
    :data:`_WIDTHS`: narrow for concentrated columns, wide for heavy tails) whose
    noisy sum clears its public threshold by the most, in units of the sum's noise.
    ``hi`` is the upper edge of the run, extended up over the adjacent bins that
    clear the single-bin threshold; with ``extend=False`` the upper edge of the
    run's middle bin (the bulk's magnitude).
    """
    d = noisy.shape[0]
    body = noisy[:, 1:]  # bins 1..N_BINS-1: the nonzero magnitudes
    best = np.full(d, -np.inf)
    anchor = np.zeros(d, dtype=np.int64)
    reach = np.zeros(d, dtype=np.int64)
    best_sum = np.zeros(d)
    for width in _WIDTHS:
        sums = _window_sums(body, width)
        threshold = _thresholds(mech, width)[1:]
        score = (sums - threshold) / threshold  # >= 0: clears the threshold
        idx = np.argmax(score, axis=1)
        top = score[np.arange(d), idx]
        better = top > best
        best = np.where(better, top, best)
        anchor = np.where(better, idx, anchor)
        reach = np.where(better, width // 2, reach)
        best_sum = np.where(better, sums[np.arange(d), idx], best_sum)
    found = best >= 0
    t1 = _thresholds(mech, 1)[1:]
    tops = np.full(d, np.nan)
    last = body.shape[1] - 1
    for j in np.flatnonzero(found):
        if not extend:
            tops[j] = bin_upper_edge(int(anchor[j]) + 1)
            continue
        top = min(int(anchor[j] + reach[j]), last)
        floor = max(_RELATIVE_THRESHOLD * best_sum[j], 0.0)
        while top < last and body[j, top + 1] >= max(t1[top + 1], floor):
            top += 1
        tops[j] = bin_upper_edge(top + 1)
    return tops


def _row_norms(X):
    """Overflow-safe l2 norms of the rows (a 1e300 entry gives a finite norm)."""
    if sp.issparse(X):
        X = sp.csr_matrix(X, copy=True)
        X.sum_duplicates()
        top = np.asarray(abs(X).max(axis=1).todense()).ravel()
        safe = np.where(top > 0, top, 1.0)
        scaled = sp.diags(1.0 / safe) @ X
        return top * np.sqrt(np.asarray(scaled.multiply(scaled).sum(axis=1)).ravel())
    top = np.max(np.abs(X), axis=1)
    safe = np.where(top > 0, top, 1.0)
    return top * np.linalg.norm(X / safe[:, None], axis=1)


@dataclass(frozen=True)
class ColumnScaling:
    """Released per-column statistics: standardise with ``(x - center) / scale``.

    Attributes
    ----------
    center, scale : ndarray of shape (d,)
        ``scale > 0`` and finite everywhere; ``center`` is 0 where the data are not
        centred.
    located : ndarray of bool, shape (d,)
        Whether the column's magnitude was found. The others get the public
        default centre 0 and scale 1 and are left out of the fit (:attr:`weight`).
    records : list of MechanismRecord
        What the release cost.
    """

    center: np.ndarray
    scale: np.ndarray
    located: np.ndarray
    records: list = field(default_factory=list)

    @property
    def weight(self):
        """``1 / scale`` for the located columns, 0 for the others: a column whose
        magnitude could not be found is left out of the fit (its coefficient stays
        0) rather than used in unknown units."""
        return np.where(self.located, 1.0 / self.scale, 0.0)

    def transform(self, X):
        """Standardised copy of ``X`` (sparse stays sparse and is not centred)."""
        if sp.issparse(X):
            return sp.csr_matrix(X @ sp.diags(self.weight))
        with np.errstate(over="ignore", invalid="ignore"):
            Z = (np.asarray(X, dtype=np.float64) - self.center) * self.weight
        return np.clip(Z, -_STANDARDISED_BOUND, _STANDARDISED_BOUND, out=Z)


class _Budget:
    """Makes the release's mechanisms: Gaussian at zCDP ``rho``, or Laplace at
    pure ``epsilon`` (``delta = 0``), split by the shares asked for."""

    def __init__(self, rho=None, epsilon=None):
        if (rho is None) == (epsilon is None):
            raise ValueError("give exactly one of rho, epsilon.")
        self.rho, self.epsilon = rho, epsilon

    def mechanism(self, d, per_column, share, name):
        """A mechanism for a query each of whose ``d`` columns moves, under
        replace-one, by ``per_column = (l2, l1)`` (a histogram: one count down and
        one up, ``(sqrt(2), 2)``; a mean: one coordinate, ``(c, c)``)."""
        l2, l1 = per_column
        if self.rho is not None:
            return GaussianMechanism.from_zcdp(
                l2 * math.sqrt(d), self.rho * share, name=name
            )
        return LaplaceMechanism.from_epsilon(l1 * d, self.epsilon * share, name=name)


def private_column_scaling(
    X, rng, *, rho=None, epsilon=None, center=True, shared=False, name="column"
):
    """Release a centre and a scale for every column of ``X``.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
        Finite values; no bound on them is assumed or read.
    rng : numpy.random.Generator
    rho : float, optional
        zCDP budget of the whole release, Gaussian mechanisms (``inf`` in the
        non-private testing mode).
    epsilon : float, optional
        Pure-DP budget instead (Laplace mechanisms), for ``delta = 0``.
    center : bool, default=True
        Release a centre (ignored for sparse ``X``, which is never centred).
    shared : bool, default=False
        One scale for all columns, putting the typical row at norm about 1 (with
        more than ``MAX_PER_COLUMN`` columns one scale is shared too, putting the
        typical entry at about 1).
    name : str
        Prefix of the ledger records.

    Returns
    -------
    ColumnScaling
    """
    budget = _Budget(rho, epsilon)
    n, d = X.shape
    if shared or d > MAX_PER_COLUMN:
        return _shared_scaling(X, budget, 1.0, rng, name, unit_rows=shared)
    center = center and not sp.issparse(X)
    hist_mech = budget.mechanism(
        d, _COUNT_MOVE, _HISTOGRAM_SHARE, f"{name} magnitude histogram"
    )
    noisy = hist_mech.release(magnitude_histogram(X), rng)
    records = [hist_mech.record()]
    tops = _window_tops(noisy, hist_mech)
    found = np.isfinite(tops)
    # Columns whose magnitude is not found fall back on one shared scale (the row
    # norms' magnitude: one cheap histogram), not on raw units.
    fallback = _FALLBACK_SHARE if d > 1 else 0.0
    if fallback:
        shared_scaling = _shared_scaling(
            X, budget, fallback, rng, name, unit_rows=False
        )
        records += shared_scaling.records
    per_pass = 2 if center else 1
    rest = 1.0 - _HISTOGRAM_SHARE - fallback
    passes = _n_passes(budget, n, d, rest / per_pass) if center else 1
    share = rest / (passes * per_pass)
    half = np.where(found, tops, 1.0)
    mid = np.zeros(d)
    for step in range(passes):
        mean, var, recs = _moments_release(
            X, mid, half, budget, share, center, rng, f"{name} pass {step + 1}"
        )
        records += recs
        if step == 0:
            # A window below the bulk (a spurious detection at small n) shows in
            # the released moments as values piled at its edge: not located.
            found &= np.abs(mean) < _SATURATED if center else var < _SATURATED
        scale = half * np.sqrt(var)
        mid = mid + half * mean
        if step + 1 < passes:
            # The next window: within this one, centred at its released centre.
            with np.errstate(over="ignore"):
                low = np.maximum(mid - _PASS2_WIDTH * scale, -half)
                high = np.minimum(mid + _PASS2_WIDTH * scale, half)
            mid, half = low / 2.0 + high / 2.0, high / 2.0 - low / 2.0
    center_out = np.where(found, mid, 0.0)
    scale_out = np.where(found, scale, 1.0)
    located = found.copy()
    if fallback and shared_scaling.located[0]:
        scale_out = np.where(found, scale_out, shared_scaling.scale[0])
        located[:] = True
    return ColumnScaling(center_out, scale_out, located, records)


def _n_passes(budget, n, d, share):
    """Public rule: a second moment pass only if the first one's variance noise is
    small enough for its window to shrink at least twofold (``4 sqrt(noise) <=
    1/2``), judged at the budget of two passes."""
    mech = budget.mechanism(d, (1.0 / n, 1.0 / n), share / 2.0, "probe")
    noise = mech.sigma if isinstance(mech, GaussianMechanism) else mech.scale * 1.5
    return 2 if _PASS2_WIDTH * math.sqrt(noise) <= 0.5 else 1


def _moments_release(X, mid, half, budget, share, center, rng, name):
    """Noisy mean (when centring) and variance of ``clip((x - mid) / half, -1, 1)``.

    Each clipped value lies in ``[-1, 1]`` and its square in ``[0, 1]``, so
    replace-one moves a column's mean by ``<= 2 / n`` and its second moment by
    ``<= 1 / n``: l2-sensitivities ``2 sqrt(d) / n`` and ``sqrt(d) / n``, l1
    ``2 d / n`` and ``d / n``.
    """
    n, d = X.shape
    m, s = _clipped_moments(X, mid, half)
    records = []
    if center:
        mean_mech = budget.mechanism(d, (2.0 / n, 2.0 / n), share, f"{name} mean")
        m = np.clip(mean_mech.release(m, rng), -1.0, 1.0)
        records.append(mean_mech.record())
    else:
        m = np.zeros(d)
    second_mech = budget.mechanism(
        d, (1.0 / n, 1.0 / n), share, f"{name} second moment"
    )
    s = second_mech.release(s, rng)
    records.append(second_mech.record())
    noise = (
        second_mech.sigma
        if isinstance(second_mech, GaussianMechanism)
        else math.sqrt(2.0) * second_mech.scale
    )
    # Variance about the released centre from released values only, floored at the
    # noise level of the second moment (public).
    var = np.clip(s - m**2, max(noise, _VARIANCE_FLOOR), 1.0)
    return m, var, records


def _clipped_moments(X, mid, half):
    """Mean and second moment of ``clip((x - mid) / half, -1, 1)`` per column."""
    n, d = X.shape
    if sp.issparse(X):
        # mid = 0: implicit zeros contribute 0 to both moments.
        X = sp.csc_matrix(X, copy=True)
        X.sum_duplicates()
        cols = np.repeat(np.arange(d), np.diff(X.indptr))
        Z = np.clip(X.data / half[cols], -1.0, 1.0)
        m = np.bincount(cols, weights=Z, minlength=d) / n
        s = np.bincount(cols, weights=Z * Z, minlength=d) / n
        return m, s
    m = np.zeros(d)
    s = np.zeros(d)
    step = max(1, 2**20 // max(d, 1))
    with np.errstate(over="ignore"):
        low, high = mid - half, mid + half  # +-inf past the float range: no clip
    for start in range(0, n, step):
        Z = np.clip(X[start : start + step], low, high)
        with np.errstate(over="ignore", invalid="ignore"):
            Z = np.clip((Z - mid) / half, -1.0, 1.0)
        m += Z.sum(axis=0)
        s += np.einsum("ij,ij->j", Z, Z)
    return m / n, s / n


def _shared_scaling(X, budget, share, rng, name, unit_rows):
    """One scale for all columns from the magnitude ``r`` of the rows' l2 norms:
    ``r`` (rows of norm about 1, as the sparse-gradient estimators expect) or
    ``r / sqrt(d)`` (entries of size about 1, as standardised columns have)."""
    d = X.shape[1]
    # One count down, one up: l2-sensitivity sqrt(2), l1 2.
    mech = budget.mechanism(1, _COUNT_MOVE, share, f"{name} row-norm histogram")
    noisy = mech.release(magnitude_histogram(_row_norms(X)[:, None]), rng)
    top = _window_tops(noisy, mech, extend=False)[0]
    found = bool(np.isfinite(top))
    # The upper edge of the bulk's magnitude bin: a typical row has norm below it.
    scale = (float(top) if unit_rows else float(top) / math.sqrt(d)) if found else 1.0
    return ColumnScaling(
        np.zeros(d), np.full(d, scale), np.full(d, found), [mech.record()]
    )


# ------------------------------------------------------------ budget and units

#: Bounds of the share of the fit's budget spent on the scaling statistics. The
#: share is a public function of ``n``, ``d`` and the budget (:func:`scaling_share`).
MIN_SCALING_SHARE, MAX_SCALING_SHARE = 0.1, 0.5
#: Smallest share of the scaling budget spent on a regressor's target (the
#: features get the rest): one column, but every prediction depends on it.
MIN_TARGET_SHARE = 0.25
#: Share of a column's records its three modal magnitude bins are expected to
#: hold, and the margins (in noise standard deviations) over the detection
#: threshold the shares aim for: features, and a regressor's target (one column
#: that every prediction depends on).
_EXPECTED_BULK = 0.9
_FEATURE_MARGIN, _TARGET_MARGIN = 0.5, 2.0


def _histogram_rho(n_samples, n_columns, margin):
    """zCDP the magnitude histogram of ``n_columns`` columns needs for a bulk of
    ``0.9 n`` records in three bins to clear the threshold by ``margin`` standard
    deviations: its noise is ``sqrt(d / rho)`` per bin (l2-sensitivity
    ``sqrt(2 d)``), ``sqrt(3)`` times that for a sum of three."""
    sigmas = _THRESHOLD_SIGMAS + margin
    return 3.0 * n_columns * (sigmas / (_EXPECTED_BULK * n_samples)) ** 2


def scaling_share(n_samples, n_features, rho, regression=False):
    """Public shares of the zCDP budget ``rho`` spent on the scaling statistics.

    Returns ``(share, target_share)``: ``share`` of ``rho`` goes to the scaling,
    of which ``target_share`` to a regressor's target. ``share`` is the smallest in
    ``[MIN_SCALING_SHARE, MAX_SCALING_SHARE]`` with which every column whose three
    modal magnitude bins hold 90% of the records clears the detection threshold
    with a margin (2 noise standard deviations for the target, 0.5 for the
    features); the target gets what it needs for its margin (at least
    ``MIN_TARGET_SHARE``). A function of ``n``, ``d`` and ``rho`` only.
    """
    d = n_features if n_features <= MAX_PER_COLUMN else 1
    x_rho = _histogram_rho(n_samples, d, _FEATURE_MARGIN) if d else 0.0
    y_rho = _histogram_rho(n_samples, 1, _TARGET_MARGIN) if regression else 0.0
    target_share = 0.0
    if regression:
        target_share = max(MIN_TARGET_SHARE, y_rho / (x_rho + y_rho)) if d else 1.0
    if not math.isfinite(rho):
        return MIN_SCALING_SHARE, target_share
    share = (x_rho + y_rho) / _HISTOGRAM_SHARE / rho
    return min(MAX_SCALING_SHARE, max(MIN_SCALING_SHARE, share)), target_share


def scaling_is_underpowered(n_samples, n_features, rho, regression=False):
    """Whether, at the shares of :func:`scaling_share`, the scaling is expected to
    miss what the model cannot do without (public numbers only): a regressor's
    target, or, for a classifier, even the features' shared fallback scale (a
    bulk of 90% of the records in three magnitude bins staying below the
    detection threshold)."""
    share, target_share = scaling_share(n_samples, n_features, rho, regression)
    rho_s = share * rho
    if regression:
        return rho_s * target_share * _HISTOGRAM_SHARE < _histogram_rho(
            n_samples, 1, 0.0
        )
    if n_features <= 1 or n_features > MAX_PER_COLUMN:
        return rho_s * _HISTOGRAM_SHARE < _histogram_rho(n_samples, 1, 0.0)
    return rho_s * _FALLBACK_SHARE < _histogram_rho(n_samples, 1, 0.0)


def unscale_coef(W, x_scaling, y_center=0.0, y_scale=1.0, fit_intercept=True):
    """Map a model fitted on standardised data back to the original units.

    With ``x~ = (x - c) / s`` and ``y~ = (y - c_y) / s_y``, the model
    ``y~ = x~ w + b`` is ``y = x (s_y w / s) + s_y (b - sum_j w_j c_j / s_j) + c_y``
    (post-processing of released values). ``W`` has shape ``(dim,)`` or
    ``(dim, K)`` with the intercept last when ``fit_intercept``. Extreme scales
    give extreme but finite numbers.
    """
    W = np.asarray(W, dtype=np.float64)
    matrix = W.ndim == 2
    W2 = W if matrix else W[:, None]
    d = x_scaling.scale.shape[0]
    with np.errstate(over="ignore", invalid="ignore"):
        coef = W2[:d] * (y_scale * x_scaling.weight)[:, None]
        out = np.empty_like(W2)
        out[:d] = coef
        if fit_intercept:
            shift = (coef * (x_scaling.center / y_scale)[:, None]).sum(axis=0)
            out[d] = y_scale * (W2[d] - np.nan_to_num(shift)) + y_center
    out = np.nan_to_num(out, nan=0.0, posinf=_FMAX, neginf=-_FMAX)
    return out if matrix else out[:, 0]


def public_scaling(center, scale, n_features, name):
    """Validate user-given public ``(center, scale)`` arrays."""
    center = np.broadcast_to(np.asarray(center, dtype=np.float64), (n_features,))
    scale = np.broadcast_to(np.asarray(scale, dtype=np.float64), (n_features,))
    if not (np.all(np.isfinite(center)) and np.all(np.isfinite(scale))):
        raise ValueError(f"{name}: the public scaling arrays must be finite.")
    if not np.all(scale > 0):
        raise ValueError(f"{name}: every public scale must be > 0.")
    return ColumnScaling(center.copy(), scale.copy(), np.ones(n_features, bool), [])
