"""Private per-column centre and scale, with no bounds from the user.

Every estimator standardises its inputs with statistics released here, so that data
come in their natural units (a year near 2005, an income near 4e4, a target near
150) and no bound is declared by the user or read from the data.

The release, for the columns of ``X`` (and, separately, the target of a
regressor), in accounted mechanisms (Gaussian; Laplace for pure DP), each a
histogram or a clipped mean whose every column moves by one count down and one up
(l2-sensitivity ``sqrt(2)`` per column, ``sqrt(2 d)`` jointly, l1 ``2 d``) or by
``2 / n`` and ``1 / n`` under replace-one (``n`` public):

1. **Magnitude histogram** over a public grid that spans the whole float64 range:
   bin 0 holds the zeros, bin ``k`` the values with ``|x|`` in ``[2^(e-1), 2^e)``,
   ``e = k - 1074`` the ``frexp`` exponent (exact for subnormals and for values near
   ``1.8e308``): 2,099 bins (the coarse range of Karwa & Vadhan 2018 over a
   geometric grid). Post-processing: the run of 3 or 7 adjacent bins (also 1 for a
   lone column: a regressor's target, a single feature) whose noisy sum clears a
   public threshold by the most (4 noise standard deviations of the sum inside the
   usual magnitudes ``2^-30`` to ``2^50``, 6 outside, raised past 64 columns;
   Laplace thresholds at the same tail probabilities) locates the bulk; the window is
   ``[-hi, hi]``, ``hi`` 1.25 times the upper edge of the run, extended up over the
   adjacent bins that clear the threshold on their own. When centring, the
   histogram is signed (negative values and the others in two halves, each value
   still one count): a run of one sign, where the other sign is rare over its
   magnitudes, gives the window ``[lo, hi]`` (or ``[-hi, -lo]``) on its side of
   0, as most raw columns (counts, amounts, ages) are one-signed: the end bins of
   the run that hold at most 10% of its noisy mass (the zeros counting below it;
   each count less 1.5 noise standard deviations) are dropped at each end, and
   ``lo`` is the remaining lower edge over 1.25 (0 where the zeros are not rare),
   so that a column at an offset (a blood pressure of 60 to 130) gets the window
   of its bulk; runs of the folded histogram (both halves summed, twice the noise
   variance) compete for the others. A record far
   out (``1e300``) changes its own count only.
2. **Pair differences and zoom** (centring, where ``n`` allows it: a public rule of
   ``n``, ``d`` and the budget): the magnitude histogram of ``x_a - x_b`` over a
   public random pairing of the records gives the spread whatever the location;
   three linear histograms of 4,096 bins over the current window each narrow it
   around the bulk, so a column at ``1e6`` with spread ``1e-4`` is found like one
   at 0 with spread 1. A column whose spread is not found keeps its first window
   (a zoom may have narrowed onto an atom, such as the zeros of a rare indicator).
3. **Clipped moments**: the mean and the second moment of
   ``clip((x - c) / h, -1, 1)`` in the final window ``[c - h, c + h]`` (the window
   is a released value: adaptive composition, accounted by the ledger). The
   centre is ``c + h * mean``, the scale ``h * sqrt(variance)`` with the variance
   floored at the noise standard deviation of its second moment (public). Where
   that noise would bury every located column's variance (a public rule of ``n``,
   ``d`` and the budget), the second moment is not released and the scale is
   ``0.3 h``.

A column whose bulk is not found (too few records for this budget, or all zeros)
falls back on one shared scale, the magnitude of the rows' l2 norms (one
histogram, at 5% of the budget, or up to 25% where ``n`` is too small for 5% to
locate it: a public rule), with its centre from the clipped mean of step 3 in the
window ``[-s, s]`` of that shared scale ``s``, or on the public default centre 0,
scale 1. Where the located columns' window scales mostly agree with ``s`` (the
columns share one unit: :data:`_ONE_UNIT_FACTOR`), every column is treated so.
Everything after the noisy releases is post-processing. Without centring
(``fit_intercept=False``, sparse input) one release gives the second moment
about 0, and sparse input keeps its sparsity. With more than
:data:`MAX_PER_COLUMN` columns (or when asked), one scale is shared by all
columns, with no centring.

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
from scipy.special import ndtr, ndtri

from ._dask_scaling import (
    as_dense_dask,
    dask_window_moment_integers,
    gather_rows,
    moment_grid,
    moment_sum_slack,
    window_moment_integers,
)
from ._design import LinearDesign
from .privacy._mechanisms import GaussianMechanism, LaplaceMechanism
from .utils._optional import is_dask_collection
from .utils._sparse import fresh_view

__all__ = [
    "ColumnQuantiles",
    "ColumnScaling",
    "MAX_PER_COLUMN",
    "MIN_TARGET_SHARE",
    "scaling_is_underpowered",
    "magnitude_bins",
    "magnitude_histogram",
    "private_column_quantiles",
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
#: usual magnitudes (2^-30 to 2^50, ~80 sums: a pure-noise sum clears 4 sigma
#: with probability 3.2e-5 each) ...
_THRESHOLD_SIGMAS = 4.0
_USUAL_EXPONENTS = (-30, 50)
#: ... and outside them (~2000 sums: the largest pure-noise one clears 6 sigma with
#: probability ~2e-6). A spurious detection only matters for a column whose bulk
#: is not detected (the bulk's margin wins the argmax otherwise).
_FAR_THRESHOLD_SIGMAS = 6.0
#: Both hold for up to this many columns released together. Past it they rise so
#: that the expected number of spurious detections over all the columns stays
#: what it is at this many (:func:`_threshold_shrink`): at 4 sigma, 1,000 columns
#: of one-hot or bag-of-words counts had 1 to 7 spurious bulks per fit (measured,
#: ``n = 10^4``, ``epsilon`` 1 and 4), scales of 1e-9 that blew their column up by
#: 1e9 or of 1e12 that erased it. 64 is the widest bundled real dataset (digits),
#: whose thresholds do not move.
_THRESHOLD_COLUMNS = 64
#: Widths (in magnitude bins, factors of 2) of the runs searched for a column's
#: bulk: 3 for concentrated columns, 7 for heavy-tailed ones ...
_WIDTHS = (3, 7)
#: ... and, for a lone column (a regressor's target, a single feature), runs of one
#: bin too, whose threshold is sqrt(3) times lower than a run of three: a target
#: concentrated in one magnitude bin is then located at budgets where no run of
#: three clears. Measured (``benchmarks/real_data.py``, 25 splits): engel R^2
#: -3.544 / 0.791 / 0.839 -> -0.138 / 0.839 / 0.862 at epsilon 0.5 / 1 / 2, star98
#: -3.520 -> -2.955 and cancer deaths -0.196 -> -0.166 at epsilon 0.5, nothing
#: else moved beyond the datasets of fewer than 50 records at epsilon 8. For every
#: column of a multi-column X, runs of one bin lost (breast cancer 0.895 -> 0.848
#: at epsilon 0.5, wine 0.611 -> 0.426 at epsilon 1): the more columns, the more
#: noise spikes one bin wide.
_LONE_COLUMN_WIDTHS = (1, 3, 7)
#: The window extends over adjacent bins holding at least this fraction of the
#: detected sum (far tails do not widen it).
_RELATIVE_THRESHOLD = 0.05
#: Half-width, in shared fallback scales, of the window in which a column whose
#: own bulk was not found gets its clipped mean (its centre). Measured
#: (``benchmarks/real_data.py``, epsilon = 0.5 / 1): 1 beat 2 and 3 on breast
#: cancer, digits and diabetes; against no centre for such columns, breast cancer
#: 0.825 -> 0.895 at epsilon 0.5, digits 0.789 -> 0.809 at epsilon 1.
_FALLBACK_WINDOW = 1.0
#: Columns in one unit: where no second moment is released (each scale would be
#: 0.3 times its window's half-width) and, of at least 5 located columns, three
#: quarters have such a scale within a factor 4 of the shared fallback scale,
#: every column takes the shared scale and its centre from the fallback window
#: (post-processing of released values, before the clipped means). Pixels, counts
#: of one kind and already standardised columns share one unit, and there one
#: scale beats per-column ones even when both are public (digits at epsilon 1:
#: the true means with one scale 0.872, with the true standard deviations 0.832):
#: a scale fitted to a rarely lit pixel magnifies its rare values. On the bundled
#: datasets the share within a factor 4 was 0.73 to 1 on digits (11 to 34 located
#: columns) and at most 0.67 elsewhere, but for 1 or 2 located columns (iris,
#: grunfeld, star98), hence the 5. Measured (``benchmarks/real_data.py``, 25
#: splits): digits 0.574 / 0.793 / 0.883 -> 0.624 / 0.846 / 0.907 at epsilon
#: 0.5 / 1 / 2, no other dataset moved; with every column's window on the side
#: of 0 of most located columns (:func:`_shared_side`), 0.637 / 0.848 / 0.909.
#: (With the zoom levels, where the second moment is released, a window is four
#: spreads wide and 0.3 of it says little: randhie's 0/1 columns looked like its
#: shared scale of 5.3.)
_ONE_UNIT_FACTOR, _ONE_UNIT_SHARE, _ONE_UNIT_MIN_COLUMNS = 4.0, 0.75, 5
#: Shares of the scaling budget the shared fallback scale may take (the smallest
#: that locates it, :func:`_fallback_share`).
_FALLBACK_SHARES = (0.05, 0.1, 0.15, 0.2, 0.25)
#: The first window is this many times the top of the magnitude bulk, so that a
#: located bulk has a clipped second moment of at most 0.64 in window units ...
_WINDOW_MARGIN = 1.25
#: ... and one above this sits at the window's edge: the window is below the bulk.
_SATURATED = 0.8
#: Variance floor, in units of the window's squared half-width.
_VARIANCE_FLOOR = 2.0**-20
#: Above this many columns, one shared scale. Measured (``benchmarks/
#: shared_scale.py``, n = 20,000, epsilon = 1): on columns in natural units the
#: per-column scaling beats one shared scale at every size tried (accuracy 0.84
#: vs 0.51 at d = 250, 0.62 vs 0.50 at d = 3,000); the shared scale wins only on
#: columns already standardised (0.66 vs 0.50 at d = 3,000), where
#: ``scaling="none"`` is the right call. The limit is set by cost: the signed
#: histograms hold 2 x 2,099 counts per column (67 MB at d = 2,000) and the
#: per-column fit took 1.4-1.7x the CPU time of the shared one.
MAX_PER_COLUMN = 2000
#: Standardised values are clipped to +-this public bound: an extreme but finite
#: record then stays finite after standardisation (its gradient is clipped anyway).
_STANDARDISED_BOUND = 1e100
#: Largest finite float64.
_FMAX = np.finfo(np.float64).max
#: Smallest released scale (public): its inverse, 2^1000, is a finite weight.
_MIN_SCALE = 2.0**-1000
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


def magnitude_histogram(X, center=None, signed=False):
    """Counts of every column of ``X`` over the magnitude grid, shape (d, N_BINS).

    Dense ``X`` is processed in row chunks; for scipy.sparse ``X`` the implicit
    zeros are counted in bin 0 without being materialised (duplicate entries are
    summed first: the histogram is of the matrix's values). With ``center`` (dense
    only), the histogram is of the residuals ``x - center``, a difference past the
    float range counting in the top bin. With ``signed``, shape (d, 2 N_BINS): the
    negative values' magnitudes, then the others' (zeros in bin ``N_BINS``); each
    value still moves one count.
    """
    n, d = X.shape
    width = 2 * N_BINS if signed else N_BINS
    counts = np.zeros(d * width, dtype=np.int64)
    if sp.issparse(X):
        X = sp.csc_matrix(X, copy=True)
        X.sum_duplicates()
        cols = np.repeat(np.arange(d), np.diff(X.indptr))
        bins = magnitude_bins(X.data)
        if signed:
            bins = bins + N_BINS * (X.data >= 0)
        counts += np.bincount(cols * width + bins, minlength=d * width)
        counts = counts.reshape(d, width)
        counts[:, width - N_BINS] += n - np.diff(X.indptr)
        return counts
    offsets = np.arange(d, dtype=np.int64) * width
    # Chunks of 2^16 entries: the bins' temporaries stay a few hundred KiB.
    step = max(1, 2**16 // max(d, 1))
    for start in range(0, n, step):
        block = X[start : start + step]
        if center is not None:
            with np.errstate(over="ignore"):
                block = np.clip(block - center, -_FMAX, _FMAX)
        idx = magnitude_bins(block) + offsets
        if signed:
            idx += N_BINS * (block >= 0)
        counts += np.bincount(idx.ravel(), minlength=d * width)
    return counts.reshape(d, width)


def _thresholds(mech, width, n_columns=1):
    """Public detection threshold of a sum of ``width`` noisy bins, per bin, for a
    histogram of ``n_columns`` columns."""
    exponent = np.arange(N_BINS) + _EXP_OFFSET
    usual = (exponent >= _USUAL_EXPONENTS[0]) & (exponent <= _USUAL_EXPONENTS[1])
    near, far = _threshold_levels(mech, width, n_columns)
    return np.maximum(np.where(usual, near, far), 0.5)


def _threshold_shrink(n_columns):
    """Factor on the probability that one pure-noise sum clears a threshold: 1 up
    to :data:`_THRESHOLD_COLUMNS` columns, then ``_THRESHOLD_COLUMNS / n_columns``
    (a public number)."""
    return min(1.0, _THRESHOLD_COLUMNS / max(int(n_columns), 1))


def _threshold_levels(mech, width, n_columns=1):
    """The two detection thresholds of a sum of ``width`` noisy bins: inside the
    usual magnitudes and outside them (raised past :data:`_THRESHOLD_COLUMNS`
    columns, :func:`_threshold_shrink`)."""
    shrink = _threshold_shrink(n_columns)
    if isinstance(mech, GaussianMechanism):
        sd = mech.sigma * math.sqrt(width)
        near, far = _THRESHOLD_SIGMAS, _FAR_THRESHOLD_SIGMAS
        if shrink < 1.0:
            near = -float(ndtri(ndtr(-near) * shrink))
            far = -float(ndtri(ndtr(-far) * shrink))
        near, far = near * sd, far * sd
    else:
        # Laplace(b) bins; a sum's tail is bounded by the union of its bins' tails
        # (P[Lap > t] = exp(-t / b) / 2) at the Gaussian thresholds' probabilities.
        b = mech.scale
        near = width * b * math.log(width / (2.0 * 3.2e-5 * shrink))
        far = width * b * math.log(width / (2.0 * 1e-9 * shrink))
    return near, far


def _window_sums(body, width):
    """Sums of ``width`` adjacent bins (odd), centred on each bin (zero-padded)."""
    half = width // 2
    padded = np.pad(body, ((0, 0), (half, half)))
    cumulative = np.pad(np.cumsum(padded, axis=1), ((0, 0), (1, 0)))
    return cumulative[:, width:] - cumulative[:, :-width]


def _best_runs(body, mech, bins_per_sum=1, widths=_WIDTHS):
    """The run of each column whose noisy sum clears its public threshold by the
    most: ``(score, anchor, reach, run_sum)``, ``score >= 0`` where one clears.

    Runs of ``w`` adjacent bins, ``w`` in ``widths`` (narrow for concentrated
    columns, wide for heavy tails), scored in units of their threshold; each
    position of ``body`` is a sum of ``bins_per_sum`` noisy bins (2 for the
    folded signed histogram).
    """
    d = body.shape[0]
    best = np.full(d, -np.inf)
    anchor = np.zeros(d, dtype=np.int64)
    reach = np.zeros(d, dtype=np.int64)
    best_sum = np.zeros(d)
    rows = np.arange(d)
    for width in widths:
        sums = _window_sums(body, width)
        threshold = _thresholds(mech, width * bins_per_sum, d)[1:]
        score = (sums - threshold) / threshold
        idx = np.argmax(score, axis=1)
        top = score[rows, idx]
        better = top > best
        best = np.where(better, top, best)
        anchor = np.where(better, idx, anchor)
        reach = np.where(better, width // 2, reach)
        best_sum = np.where(better, sums[rows, idx], best_sum)
    return best, anchor, reach, best_sum


def _extended_top(body, mech, j, anchor, reach, run_sum, bins_per_sum=1):
    """Upper edge of column ``j``'s run, extended up over the adjacent bins that
    clear the single-bin threshold and hold a fair fraction of the run (far
    tails do not widen it)."""
    return bin_upper_edge(
        _extended_top_bin(body, mech, j, anchor, reach, run_sum, bins_per_sum) + 1
    )


def _extended_top_bin(body, mech, j, anchor, reach, run_sum, bins_per_sum=1):
    """Index in ``body`` of the top bin of :func:`_extended_top`."""
    t1 = _thresholds(mech, bins_per_sum, body.shape[0])[1:]
    last = body.shape[1] - 1
    top = min(int(anchor + reach), last)
    floor = max(_RELATIVE_THRESHOLD * run_sum, 0.0)
    while top < last and body[j, top + 1] >= max(t1[top + 1], floor):
        top += 1
    return top


#: A one-signed window drops the end bins of its run that together hold at most
#: this fraction of the run's noisy mass (the zeros' count is mass below the run),
#: at each end. Measured (``benchmarks/real_data.py``, 25 splits, epsilon = 1):
#: diabetes R^2 0.243 (no trimming) / 0.301 (0.05) / 0.307 (0.1), cancer 0.112 /
#: 0.271 / 0.646, engel 0.729 / 0.734 / 0.764; digits 0.809 / 0.806 / 0.800,
#: anes96 0.894 / 0.891 / 0.887; 0.02 at the bottom alone gave diabetes 0.279.
_TRIM_FRACTION = 0.1
#: Before trimming, each noisy count is lowered by this many noise standard
#: deviations (floored at 0), so that an empty end bin lifted by its noise (at
#: small n one standard deviation is 10% of the records) does not hold the window
#: open. Measured (``benchmarks/real_data.py``, 25 splits, with the one-unit rule)
#: against 1 at epsilon 0.5 / 1 / 2: diabetes R^2 -0.074 / 0.299 / 0.390 ->
#: -0.074 / 0.315 / 0.406, engel 0.763 / 0.816 at epsilon 1 / 2 -> 0.791 / 0.839,
#: breast cancer 0.889 / 0.936 / 0.953 -> 0.895 / 0.936 / 0.959; anes96 0.873 ->
#: 0.863 at epsilon 0.5. 2 lost breast cancer at epsilon 1 (0.918). Against no
#: lowering (before the one-unit rule), 1 had moved breast cancer 0.924 -> 0.936
#: and cancer deaths 0.646 -> 0.764 at epsilon 1.
_TRIM_NOISE_SIGMAS = 1.5


def _trimmed_edges(row, zeros, low, top, noise):
    """``(bottom, top_edge)`` of the magnitudes of a one-signed run over the bins
    ``low..top`` of ``row`` (noisy counts of noise standard deviation ``noise``,
    post-processing): end bins holding at most :data:`_TRIM_FRACTION` of the mass
    (each count less :data:`_TRIM_NOISE_SIGMAS` noise standard deviations) are
    dropped, so that a column at an offset (a blood pressure of 60 to 130) gets the
    window of its bulk, not one from 0. ``bottom`` is 0 where the zeros are not
    rare."""
    floor = _TRIM_NOISE_SIGMAS * noise
    mass = np.maximum(row[low : top + 1] - floor, 0.0)
    zeros = max(float(zeros) - floor, 0.0)
    cut = _TRIM_FRACTION * (mass.sum() + zeros)
    i, below = low, zeros
    if below <= cut:
        while i < top and below + mass[i - low] <= cut:
            below += mass[i - low]
            i += 1
        bottom = bin_upper_edge(i + 1) / 2.0
    else:
        bottom = 0.0
    j, above = top, 0.0
    while j > i and above + mass[j - low] <= cut:
        above += mass[j - low]
        j -= 1
    return bottom, bin_upper_edge(j + 1)


def _window_tops(noisy, mech, extend=True, widths=_WIDTHS):
    """Post-processing: each column's window top ``hi`` (NaN where none is found).

    The bulk is the best run of :func:`_best_runs`; ``hi`` is its upper edge
    extended as in :func:`_extended_top`, or with ``extend=False`` the upper edge
    of the run's largest bin (the bulk's magnitude).
    """
    body = noisy[:, 1:]  # bins 1..N_BINS-1: the nonzero magnitudes
    best, anchor, reach, run_sum = _best_runs(body, mech, widths=widths)
    tops = np.full(noisy.shape[0], np.nan)
    for j in np.flatnonzero(best >= 0):
        if extend:
            tops[j] = _extended_top(body, mech, j, anchor[j], reach[j], run_sum[j])
            continue
        # The bulk's magnitude: the largest noisy bin of the run (the runs around
        # a narrow bulk tie, so their centres do not say where it is).
        low = max(int(anchor[j] - reach[j]), 0)
        mode = low + int(np.argmax(body[j, low : int(anchor[j] + reach[j]) + 1]))
        tops[j] = bin_upper_edge(mode + 1)
    return tops


#: A one-signed run is taken only where the other sign holds less than this
#: fraction of its count over the same magnitudes (noisy counts).
_OTHER_SIGN = 0.25


def _signed_windows(noisy, mech, widths=_WIDTHS):
    """Post-processing of the signed magnitude histogram: each column's window
    top ``hi`` (NaN where none is found) and side: ``+1`` (the bulk is
    nonnegative: window ``[lo, hi]``), ``-1`` (``[-hi, -lo]``) or ``0``
    (``[-hi, hi]``), and the bottom magnitude ``lo`` of a one-signed run (0 for the
    others) from :func:`_trimmed_edges`, before the margin.

    The best runs of the negative magnitudes, of the nonnegative ones and of
    their sum (the folded histogram, twice the noise variance) compete by score;
    a one-signed run wins only where the other sign is rare over its magnitudes.
    Raw columns (counts, amounts, ages) are mostly one-signed, and a one-signed
    window is at most half as wide: the clipped mean's noise shrinks with it.
    """
    d = noisy.shape[0]
    neg, pos = noisy[:, 1:N_BINS], noisy[:, N_BINS + 1 :]
    folded = neg + pos
    runs = [
        _best_runs(b, mech, k, widths) for b, k in ((neg, 1), (pos, 1), (folded, 2))
    ]
    scores = np.stack([r[0] for r in runs])
    rows = np.arange(d)
    for side, other in enumerate((pos, neg)):
        _, anchor, reach, run_sum = runs[side]
        for j in rows:
            lo = max(int(anchor[j] - reach[j]), 0)
            rest = other[j, lo : int(anchor[j] + reach[j]) + 1].sum()
            if rest >= _OTHER_SIGN * run_sum[j]:
                scores[side, j] = -np.inf
    choice = np.argmax(scores, axis=0)
    tops = np.full(d, np.nan)
    bottoms = np.zeros(d)
    sides = np.zeros(d, dtype=np.int64)
    bodies = (neg, pos, folded)
    zeros = noisy[:, N_BINS]
    noise = _noise_std(mech.record())
    for j in np.flatnonzero(scores[choice, rows] >= 0):
        c = int(choice[j])
        _, anchor, reach, run_sum = runs[c]
        top = _extended_top_bin(
            bodies[c], mech, j, anchor[j], reach[j], run_sum[j], 2 if c == 2 else 1
        )
        tops[j] = bin_upper_edge(top + 1)
        if c < 2:
            low = max(int(anchor[j] - reach[j]), 0)
            bottoms[j], tops[j] = _trimmed_edges(
                bodies[c][j], zeros[j], low, top, noise
            )
        sides[j] = (-1, 1, 0)[c]
    return tops, sides, bottoms


def _row_norms(X):
    """l2 norms of the rows of ``X`` (duplicate sparse entries summed), finite: a
    norm past the float range is the largest float. In row chunks: the
    temporaries stay a few MiB whatever the size of ``X``."""
    return np.minimum(LinearDesign(_by_rows(X), False).row_norms(), _FMAX)


def _by_rows(X):
    """``X`` itself, or CSR for CSC input (slicing CSC rows scans every entry)."""
    return X.tocsr() if sp.issparse(X) and X.format != "csr" else X


def _row_nonzeros(X):
    """Number of non-zero values of each row (duplicate sparse entries summed; an
    explicitly stored 0 is not a non-zero), in row chunks."""
    if not sp.issparse(X):
        return np.count_nonzero(X, axis=1).astype(float)
    X = _by_rows(X)
    design = LinearDesign(X, False)
    counts = np.empty(X.shape[0])
    for rows in design._chunks():
        block = fresh_view(sp.csr_matrix(X[rows]))
        if not block.has_canonical_format:
            block = block.copy()
            with np.errstate(over="ignore", invalid="ignore"):
                block.sum_duplicates()
        nonzero = np.concatenate(([0], np.cumsum(block.data != 0)))
        counts[rows] = nonzero[block.indptr[1:]] - nonzero[block.indptr[:-1]]
    return counts


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
    row_nnz : int or None
        Released typical number of non-zeros per row (shared row scaling only).
    """

    center: np.ndarray
    scale: np.ndarray
    located: np.ndarray
    records: list = field(default_factory=list)
    row_nnz: int | None = None

    @property
    def weight(self):
        """``1 / scale`` for the located columns, 0 for the others: a column whose
        magnitude could not be found is left out of the fit (its coefficient stays
        0) rather than used in unknown units."""
        return np.where(self.located, 1.0 / self.scale, 0.0)

    def rescaled(self, factor):
        """The same centres with every scale multiplied by ``factor`` (public)."""
        return ColumnScaling(
            self.center, self.scale * factor, self.located, self.records, self.row_nnz
        )

    def transform(self, X):
        """Standardised copy of ``X`` (sparse stays sparse and is not centred)."""
        if sp.issparse(X):
            Z = sp.csr_matrix(X, dtype=np.float64, copy=True)
            weight = self.weight
            step = 2**18  # entries per chunk: the gathered weights stay small
            for start in range(0, Z.data.size, step):
                part = Z.data[start : start + step]
                with np.errstate(over="ignore"):
                    part *= weight[Z.indices[start : start + step]]
                np.clip(part, -_STANDARDISED_BOUND, _STANDARDISED_BOUND, out=part)
            return Z
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
            # Histograms (the count move) take integer values: released unrounded.
            return GaussianMechanism.from_zcdp(
                l2 * math.sqrt(d),
                self.rho * share,
                name=name,
                integer=per_column is _COUNT_MOVE,
            )
        return LaplaceMechanism.from_epsilon(l1 * d, self.epsilon * share, name=name)


def private_column_scaling(
    X, rng, *, rho=None, epsilon=None, center=True, shared=False, name="column"
):
    """Release a centre and a scale for every column of ``X``.

    Parameters
    ----------
    X : ndarray, scipy.sparse matrix or dask array of shape (n, d)
        Finite values; no bound on them is assumed or read. A dask array (dense
        chunks, any row chunking) gives the same release, bit for bit, as the
        same values in memory (:mod:`skdpsco._dask_scaling`).
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
    if is_dask_collection(X):
        X = as_dense_dask(X)
    n, d = X.shape
    center = center and not sp.issparse(X)
    # The histograms only locate each column's bulk: a public subset of the
    # records does that as well as all of them (see scaling_rows); the moments
    # that give the centre and scale read every record.
    X_locate = _public_row_subset(X, budget, rng)
    if shared or d > MAX_PER_COLUMN:
        return _shared_scaling(X_locate, budget, 1.0, rng, name, unit_rows=shared)
    records = []
    # Columns whose magnitude is not found fall back on one shared scale (the row
    # norms' magnitude: one cheap histogram), not on raw units.
    fallback, levels, second, unit = _release_plan(budget, n, d, center)
    if fallback:
        shared_scaling = _shared_scaling(
            X_locate, budget, fallback, rng, name, unit_rows=False
        )
        records += shared_scaling.records
    c, half, sides, found, located_records = _located_windows(
        X_locate, budget, unit, center, levels, rng, name
    )
    records += located_records
    borrowed = np.zeros(d, dtype=bool)
    if center and fallback and shared_scaling.located[0]:
        shared_scale = shared_scaling.scale[0]
        if not second and _one_unit(half[found], shared_scale):
            # Every column in the shared unit: the fallback window for all, on
            # the side of 0 of a located one-signed column ([0, 2K s]; the
            # others' sides are 0), or of every column where the located ones
            # are mostly of one sign and none of the other.
            sides = _shared_side(sides, found)
            found = np.zeros(d, dtype=bool)
        # A column whose own bulk was not found takes the window +-K times the
        # shared fallback scale (a released value): its centre then comes from
        # the same clipped-mean release below, at no extra cost.
        borrowed = ~found
        half = np.where(borrowed, _FALLBACK_WINDOW * shared_scale, half)
        c = np.where(borrowed, sides * half, c)
    # 4. The clipped mean and second moment in the final window.
    mean, moment, recs = _moments_release(
        X, c, half, budget, _W_MOMENT * unit, center, second, rng, f"{name} window"
    )
    records += recs
    c = c + half * mean
    # A window below the bulk (a spurious detection at small n) shows in the
    # released moments as values piled at its far edge(s): not located. (A
    # one-signed window's edge at 0 may hold a column's zeros.)
    if second:
        piled = np.where(sides != 0, (moment + sides * mean) / 2.0, moment)
        floor = max(_noise_std(records[-1]), _VARIANCE_FLOOR)
        scale = half * np.sqrt(np.clip(moment - mean**2, floor, 1.0))
    else:
        piled = np.where(sides != 0, sides * mean, np.abs(mean))
        scale = _WINDOW_SCALE * half
    found &= piled < _SATURATED
    # A borrowed window's clipped mean moves the centre toward the bulk even when
    # it piles at the window's edge (the bulk beyond it): better than 0.
    center_out = np.where(found | borrowed, c, 0.0)
    # Public floor: a column narrower than 2^-1000 (a constant, subnormal values)
    # keeps a finite weight 1 / scale and finite coefficients.
    scale_out = np.where(found, np.maximum(scale, _MIN_SCALE), 1.0)
    located = found.copy()
    if fallback and shared_scaling.located[0]:
        scale_out = np.where(found, scale_out, shared_scaling.scale[0])
        located[:] = True
    return ColumnScaling(center_out, scale_out, located, records)


#: The release reads at most ``max(_MIN_ROWS, _ROWS_PER_MU / mu)`` records, ``mu``
#: the Gaussian-DP parameter of its budget (``epsilon`` for a pure-DP budget).
_MIN_ROWS = 2**14
_ROWS_PER_MU = 2.0**11


def scaling_rows(n_samples, rho=None, epsilon=None):
    """How many records the histograms that locate each column's bulk read: all
    up to a public number that grows as the budget shrinks (``max(2^14, 2^11 /
    mu)``). Their counts' noise is fixed, so beyond that many records the bulk's
    bins clear the detection thresholds by a wide margin already, and reading
    more would only cost time (at ``n = 2e5``, ``d = 50`` the histograms of all
    records took several times as long as a fit of scikit-learn's
    ``LogisticRegression``). The centre and scale themselves come from clipped
    moments of all the records, whose noise falls like ``1 / n``."""
    if rho is not None:
        mu = math.sqrt(2.0 * rho) if rho > 0 else 0.0
    else:
        mu = epsilon
    if not math.isfinite(mu):
        return n_samples
    limit = _MIN_ROWS if mu <= 0 else max(_MIN_ROWS, math.ceil(_ROWS_PER_MU / mu))
    return min(n_samples, limit)


def _public_row_subset(X, budget, rng):
    """``X``, or the rows of a public uniformly random subset of
    :func:`scaling_rows` records (drawn from ``rng``, reading no data).

    Every statistic is then computed on the subset as if it were the data:
    replacing one record of ``X`` replaces at most one record of the subset, so
    each mechanism's sensitivity, stated for one replaced record of the data it
    reads, holds (no amplification by subsampling is claimed). The rows are
    chosen by global index, so a dask array's subset (gathered in memory) is the
    same rows whatever its chunking.
    """
    n = X.shape[0]
    m = scaling_rows(n, budget.rho, budget.epsilon)
    rows = None if m >= n else np.sort(rng.choice(n, size=m, replace=False))
    if is_dask_collection(X):
        return gather_rows(X, rows)
    return X if rows is None else _by_rows(X)[rows]


def _one_unit(located_halves, shared_scale):
    """Whether the columns share one unit (:data:`_ONE_UNIT_FACTOR`): a public rule
    applied to released values (the located windows' half-widths and the shared
    fallback scale)."""
    if located_halves.size < _ONE_UNIT_MIN_COLUMNS:
        return False
    # Released values only; a ratio past the float range is inf (not close).
    with np.errstate(over="ignore", under="ignore"):
        ratio = _WINDOW_SCALE * located_halves / shared_scale
    close = (ratio <= _ONE_UNIT_FACTOR) & (ratio >= 1.0 / _ONE_UNIT_FACTOR)
    return bool(np.mean(close) >= _ONE_UNIT_SHARE)


def _shared_side(sides, found):
    """Sides of the windows of columns in one unit: every column's on the side of
    0 where at least :data:`_ONE_UNIT_SHARE` of the located columns are
    one-signed on it and none on the other (pixels, counts), else each located
    column's own (0 for the others). Post-processing of released values."""
    located = sides[found]
    for side in (1, -1):
        if np.mean(located == side) >= _ONE_UNIT_SHARE and not np.any(located == -side):
            return np.full(sides.shape, side)
    return sides


def _located_windows(X, budget, unit, center, levels, rng, name):
    """Stages 1-3 of the release (the module docstring): per column, the window
    ``[c - half, c + half]`` around the bulk, ``sides`` (+1 / -1 for a one-signed
    window from 0, 0 otherwise), whether the bulk was found, and the records of
    the histograms released on the way (each of relative weight ``_W_HISTOGRAM``
    times ``unit`` of the budget)."""
    d = X.shape[1]
    records = []
    widths = _LONE_COLUMN_WIDTHS if d == 1 else _WIDTHS
    # 1. Where the bulk of each column lies: the magnitude histogram of x, signed
    # when centring (a one-signed bulk gets a window from 0, half as wide).
    hist_mech = budget.mechanism(
        d, _COUNT_MOVE, _W_HISTOGRAM * unit, f"{name} magnitude histogram"
    )
    noisy = hist_mech.release(magnitude_histogram(X, signed=center), rng)
    records.append(hist_mech.record())
    if center:
        tops, sides, bottoms = _signed_windows(noisy, hist_mech, widths)
    else:
        tops = _window_tops(noisy, hist_mech, widths=widths)
        sides = np.zeros(d, dtype=np.int64)
        bottoms = np.zeros(d)
    found = np.isfinite(tops)
    reach = np.where(found, np.minimum(_WINDOW_MARGIN * tops, _FMAX), 1.0)
    # A one-signed window runs from its bulk's lower edge (over the margin) to
    # ``reach``: ``[low, reach]`` on its side of 0.
    low = np.where(found & (sides != 0), bottoms / _WINDOW_MARGIN, 0.0)
    half = np.where(sides != 0, (reach - low) / 2.0, reach)
    c = sides * (low + half)
    spread = np.full(d, np.nan)
    if levels:
        # 2. The spread, whatever the location: the magnitude histogram of the
        # differences of disjoint pairs of records (a public random pairing).
        diff_mech = budget.mechanism(
            d, _COUNT_MOVE, _W_HISTOGRAM * unit, f"{name} pair-difference histogram"
        )
        noisy = diff_mech.release(magnitude_histogram(_pair_differences(X, rng)), rng)
        spread = _window_tops(noisy, diff_mech, extend=False, widths=widths)
        records.append(diff_mech.record())
    # 3. Zoom: linear histograms over the window, each locating the bulk among
    # _ZOOM_BINS bins and narrowing the window around it (Karwa & Vadhan's fine
    # stage inside the coarse range, repeated).
    c0, half0 = c, half
    for level in range(levels):
        zoom_mech = budget.mechanism(
            d, _COUNT_MOVE, _W_HISTOGRAM * unit, f"{name} zoom {level + 1} histogram"
        )
        counts = linear_histogram(X, c - half, c + half)
        c, half = _zoom(zoom_mech.release(counts, rng), zoom_mech, c, half)
        records.append(zoom_mech.record())
    # The final window: the zoomed one, or four spreads around its centre. A
    # column without a located spread keeps its first window: a zoom may have
    # narrowed onto an atom (the zeros of a rare indicator), whose width says
    # nothing about the column's spread.
    if levels:
        zoomed = np.isfinite(spread)
        c = np.where(zoomed, c, c0)
        half = np.where(zoomed, np.maximum(half, 4.0 * spread), half0)
        sides = np.where(zoomed, 0, sides)  # a zoomed window is around the bulk
    half = np.minimum(half, _FMAX)
    return c, half, sides, found, records


#: Bins of the quantile histogram over each column's final window: the released
#: quantiles resolve the window's width over this many bins, and a cumulative
#: count sums at most this many noisy counts (its noise grows like the root).
_QUANTILE_BINS = 256


@dataclass(frozen=True)
class ColumnQuantiles:
    """Released per-column quantiles.

    Attributes
    ----------
    values : ndarray of shape (n_quantiles, d)
        The quantiles asked for, non-decreasing down each column.
    located : ndarray of bool, shape (d,)
        Whether the column's bulk was found and every quantile fell inside its
        window (False: the values are meaningless and must not be used).
    resolution : ndarray of shape (d,)
        Width of one bin of the quantile histogram (released: post-processing).
    records : list of MechanismRecord
    """

    values: np.ndarray
    located: np.ndarray
    resolution: np.ndarray
    records: list = field(default_factory=list)


def private_column_quantiles(
    X, rng, quantiles, *, rho=None, epsilon=None, name="column"
):
    """Release the given quantiles of every column of ``X``, with no bounds.

    Stages 1-3 of :func:`private_column_scaling` locate each column's window
    (the magnitude histogram over the float range, then, where ``n`` allows it,
    the pair differences and the zoom histograms); a last linear histogram of
    :data:`_QUANTILE_BINS` bins over the window (one record in exactly one bin of
    each column: l2-sensitivity ``sqrt(2)`` per column under replace-one) gives,
    by post-processing of its noisy cumulative counts made non-decreasing, every
    quantile at once, interpolated linearly inside its bin. A record far out
    (``1e300``) moves one count to an edge bin.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Finite values; no bound on them is assumed or read.
    rng : numpy.random.Generator
    quantiles : sequence of float
        Levels in ``[0, 1]``, non-decreasing.
    rho, epsilon : float, optional
        zCDP budget (Gaussian mechanisms) or pure-DP budget (Laplace); exactly one.
    name : str
        Prefix of the ledger records.

    Returns
    -------
    ColumnQuantiles
    """
    if is_dask_collection(X):
        raise TypeError(
            "private_column_quantiles takes in-memory arrays only, not dask arrays."
        )
    budget = _Budget(rho, epsilon)
    levels_q = np.asarray(quantiles, dtype=np.float64)
    n, d = X.shape
    levels = _n_zoom_levels(budget, n, d, 1.0)
    unit = 1.0 / (_release_weights(levels, True, False) - _W_MOMENT + _W_QUANTILE)
    c, half, _, found, records = _located_windows(
        X, budget, unit, True, levels, rng, name
    )
    with np.errstate(over="ignore"):
        low = np.maximum(c - half, -_FMAX)
        high = np.minimum(c + half, _FMAX)
        width = (high / 2.0 - low / 2.0) * (2.0 / _QUANTILE_BINS)
    mech = budget.mechanism(
        d, _COUNT_MOVE, _W_QUANTILE * unit, f"{name} quantile histogram"
    )
    noisy = mech.release(linear_histogram(X, low, high, _QUANTILE_BINS), rng)
    records.append(mech.record())
    cumulative = np.maximum.accumulate(np.cumsum(noisy, axis=1), axis=1)
    last = _QUANTILE_BINS + 1
    rows = np.arange(d)
    values = np.empty((levels_q.size, d))
    inside = np.ones(d, dtype=bool)
    for i, level in enumerate(levels_q):
        target = level * n
        reached = cumulative >= target
        k = np.where(reached.any(axis=1), np.argmax(reached, axis=1), last)
        before = np.where(k > 0, cumulative[rows, np.maximum(k - 1, 0)], 0.0)
        mass = cumulative[rows, k] - before
        frac = np.clip((target - before) / np.where(mass > 0, mass, 1.0), 0.0, 1.0)
        with np.errstate(over="ignore", invalid="ignore"):
            value = low + (k - 1 + frac) * width
        values[i] = np.clip(np.nan_to_num(value, nan=0.0), low, high)
        inside &= (k >= 1) & (k <= _QUANTILE_BINS)
    located = found & inside
    return ColumnQuantiles(values, located, width, records)


def _release_plan(budget, n, d, center):
    """Public plan of the per-column release: the fallback's share, the number of
    zoom levels, whether the second moment is released, and the unit share of
    the releases' relative weights."""
    fallback = _fallback_share(budget, n) if d > 1 else 0.0
    levels = _n_zoom_levels(budget, n, d, 1.0 - fallback) if center else 0
    second = not center or _second_moment_pays(budget, n, d, 1.0 - fallback, levels)
    return (
        fallback,
        levels,
        second,
        (1.0 - fallback) / _release_weights(levels, center, second),
    )


def _fallback_share(budget, n):
    """Public share of the scaling budget spent on the shared fallback scale:
    the smallest of :data:`_FALLBACK_SHARES` at which a bulk of 90% of the ``n``
    row norms in three magnitude bins clears the detection threshold by half a
    noise standard deviation (at small ``n`` the per-column histograms miss most
    columns, and the fallback is then what scales them)."""
    for share in _FALLBACK_SHARES:
        mech = budget.mechanism(1, _COUNT_MOVE, share, "probe")
        threshold = _threshold_levels(mech, _WIDTHS[0])[0]
        if _EXPECTED_BULK * n >= threshold * (
            1.0 + _FEATURE_MARGIN / _THRESHOLD_SIGMAS
        ):
            return share
    return _FALLBACK_SHARES[-1]


def _pair_differences(X, rng):
    """``x_a - x_b`` over disjoint pairs ``(a, b)`` of a public random pairing.

    Replacing one record changes one pair's difference: one count of its
    magnitude histogram moves down and one up (l2-sensitivity ``sqrt(2)`` per
    column). The pairing is drawn from ``rng`` and reads no data; a difference past
    the float range counts in the top bin.
    """
    n = X.shape[0]
    order = rng.permutation(n)
    a, b = order[0 : n - 1 : 2], order[1:n:2]
    with np.errstate(over="ignore", invalid="ignore"):
        return np.clip(X[a] - X[b], -_FMAX, _FMAX)


def linear_histogram(X, low, high, bins=None):
    """Counts over ``bins`` (default ``_ZOOM_BINS``) equal bins of each column's
    window ``[low_j, high_j]``, plus one bin below and one above it: shape
    ``(d, bins + 2)``. One record is in exactly one bin of each column."""
    n, d = X.shape
    bins = _ZOOM_BINS if bins is None else int(bins)
    counts = np.zeros(d * (bins + 2), dtype=np.int64)
    offsets = np.arange(d, dtype=np.int64) * (bins + 2)
    with np.errstate(over="ignore"):
        width = (high / 2.0 - low / 2.0) * (2.0 / bins)
    # Chunks of 2^16 entries in reused buffers (a fresh megabyte-sized temporary
    # per chunk costs more than the arithmetic).
    step = max(1, min(n, 2**16 // max(d, 1)))
    buffer = np.empty((step, d))
    index = np.empty((step, d), dtype=np.int64)
    half_low, half_width = low / 2.0, width / 2.0
    for start in range(0, n, step):
        block = X[start : start + step]
        rows = block.shape[0]
        pos, idx = buffer[:rows], index[:rows]
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            np.multiply(block, 0.5, out=pos)
            pos -= half_low
            pos /= half_width
            np.floor(pos, out=pos)
        # NaN (0 / 0) below the window; +-inf to the outer bins.
        np.copyto(pos, -1.0, where=pos != pos)
        np.clip(pos, -1.0, bins, out=pos)
        np.add(pos, 1.0, out=pos)
        idx[...] = pos
        idx += offsets
        counts += np.bincount(idx.ravel(), minlength=counts.size)
    return counts.reshape(d, bins + 2)


def _zoom(noisy, mech, center, half):
    """Post-processing of a zoom histogram: the run of adjacent bins (of the
    widths in :data:`_ZOOM_WIDTHS`) whose noisy sum clears its public threshold by
    the most, in units of that threshold, becomes the centre of the next window,
    three runs wide (one bin more on each side). A column with no such run keeps
    its window."""
    d = noisy.shape[0]
    body = noisy[:, 1:-1]
    with np.errstate(over="ignore"):
        width = (half / 2.0) * (4.0 / _ZOOM_BINS)
    low = center - half
    best = np.full(d, -np.inf)
    start = np.zeros(d)
    run = np.ones(d)
    sd = _noise_std(mech.record())
    cumulative = np.pad(np.cumsum(body, axis=1), ((0, 0), (1, 0)))
    for w in _ZOOM_WIDTHS:
        sums = cumulative[:, w:] - cumulative[:, :-w]
        threshold = max(_ZOOM_SIGMAS * sd * math.sqrt(w), 0.5)
        score = (sums - threshold) / threshold
        idx = np.argmax(score, axis=1)
        top = score[np.arange(d), idx]
        better = top > best
        best = np.where(better, top, best)
        start = np.where(better, idx, start)
        run = np.where(better, w, run)
    found = best >= 0
    with np.errstate(over="ignore", invalid="ignore"):
        new_center = low + (start + run / 2.0) * width
        new_half = (1.5 * run + 1.0) * width
    keep = ~found | ~np.isfinite(new_center) | ~(new_half < half)
    return np.where(keep, center, new_center), np.where(keep, half, new_half)


#: Relative budgets of the releases: each histogram (magnitude of x, of the pair
#: differences and each zoom level), the final clipped mean and second moment.
_W_HISTOGRAM, _W_MOMENT = 3.0, 2.0
#: Relative budget of the quantile histogram (that of the two clipped moments it
#: replaces).
_W_QUANTILE = 2.0 * _W_MOMENT
#: Zoom levels: up to this many, of this many bins each (each narrows a window
#: holding a narrow bulk about 1,000-fold); runs of these widths are searched.
_MAX_ZOOM, _ZOOM_BINS = 3, 4096
_ZOOM_WIDTHS = tuple(2**k - 1 for k in range(1, 13))
#: Detection threshold of a zoom run, in noise standard deviations of its sum: a
#: zoom tests ~12 x 4096 runs per column, and a broad bulk's best run clears only
#: ~5 standard deviations at moderate n, so the largest pure-noise run (a spike)
#: must stay below the threshold: P(N(0, 1) > 6) x 5e4 ~ 5e-5 per column and level.
_ZOOM_SIGMAS = 6.0
#: A zoom level is run only where a bulk of a quarter of the records is expected
#: to clear its threshold this many times over (public numbers).
_ZOOM_MARGIN = 1.5


def _release_weights(levels, center, second=True):
    """Total relative budget of the releases (see :data:`_W_HISTOGRAM`)."""
    if not center:
        return _W_HISTOGRAM + _W_MOMENT
    # The pair-difference histogram is released only with the zoom levels.
    return (1 + levels + (levels > 0)) * _W_HISTOGRAM + (1 + second) * _W_MOMENT


#: Largest noise standard deviation of the clipped second moment (in units of
#: the window's squared half-width) at which it is released: above it, the
#: variance of a located column (0.01 to 0.4 in these units) is lost under the
#: noise floor, and the scale is this fraction of the window's half-width instead
#: (public; a factor of 2 or 3 off at worst, which the clipped fits tolerate, and
#: the budget goes to the histogram and the mean: on the bundled real datasets at
#: epsilon = 1, 0.25 to 0.35 beat the floored second moment, 0.5 less so).
_SECOND_NOISE = 0.05
_WINDOW_SCALE = 0.3


def _second_moment_pays(budget, n, d, share, levels):
    """Public rule: the second moment is released with the zoom levels, or where
    its noise standard deviation would be at most :data:`_SECOND_NOISE`."""
    if levels:
        return True
    unit = share / _release_weights(0, True, True)
    mech = budget.mechanism(d, (1.0 / n, 1.0 / n), _W_MOMENT * unit, "probe")
    return _noise_std(mech.record()) <= _SECOND_NOISE


#: The first histogram's share of the features' scaling budget without zoom (what
#: the share rule of :func:`scaling_share` plans with; zoom levels are only added
#: at sizes where detection has a wide margin).
_FIRST_HISTOGRAM_SHARE = _W_HISTOGRAM / _release_weights(0, True)


def _n_zoom_levels(budget, n, d, share):
    """Public rule: ``_MAX_ZOOM`` zoom levels where a bulk of ``n / 4`` records in
    one run is expected to clear a zoom threshold ``_ZOOM_MARGIN`` times over at
    that budget, none otherwise."""
    unit = share / _release_weights(_MAX_ZOOM, True)
    mech = budget.mechanism(d, _COUNT_MOVE, _W_HISTOGRAM * unit, "probe")
    needed = _ZOOM_MARGIN * _ZOOM_SIGMAS * _noise_std(mech.record())
    return _MAX_ZOOM if n / 4.0 >= needed else 0


def _noise_std(record):
    """Noise standard deviation of a Gaussian or Laplace record."""
    if record.kind == "gaussian":
        return record.scale
    return math.sqrt(2.0) * record.scale


def _moments_release(X, mid, half, budget, share, center, second, rng, name):
    """Noisy mean (when centring) and second moment (when ``second``; else None)
    of ``clip((x - mid) / half, -1, 1)``, each at ``share`` of the budget.

    Each clipped value lies in ``[-1, 1]`` and its square in ``[0, 1]``, so
    replace-one moves a column's exact mean by ``<= 2 / n`` and its second moment
    by ``<= 1 / n``; the sums are exact block sums whose floating-point error
    adds at most ``t / n`` to either move (``t`` from
    :func:`~skdpsco._dask_scaling.moment_sum_slack`, about ``5e-9`` at ``n =
    10^6``: the summation gap of Casacuberta et al. 2022, Section 4, closed):
    l2-sensitivities ``(2 + t) sqrt(d) / n`` and ``(1 + t) sqrt(d) / n``, l1 ``(2 +
    t) d / n`` and ``(1 + t) d / n``.
    """
    n, d = X.shape
    m, s = window_moments(X, mid, half)
    t = 0.0 if sp.issparse(X) else moment_sum_slack(moment_grid(n))
    records = []
    if center:
        move = (2.0 + t) / n
        mean_mech = budget.mechanism(d, (move, move), share, f"{name} mean")
        m = np.clip(mean_mech.release(m, rng), -1.0, 1.0)
        records.append(mean_mech.record())
    else:
        m = np.zeros(d)
    if not second:
        return m, None, records
    move = (1.0 + t) / n
    second_mech = budget.mechanism(d, (move, move), share, f"{name} second moment")
    s = np.clip(second_mech.release(s, rng), 0.0, 1.0)
    records.append(second_mech.record())
    return m, s, records


def window_moments(X, mid, half):
    """Mean and second moment of ``clip((x - mid) / half, -1, 1)`` per column.

    Every clipped value lies in ``[-1, 1]`` whatever ``x``: replacing one record
    moves a column's mean by at most ``2 / n`` and its second moment by ``1 / n``
    (plus the summation error of :func:`~skdpsco._dask_scaling.moment_sum_slack`).
    Dense ``X`` (a dask array too) through exact block sums
    (:func:`~skdpsco._dask_scaling.window_moment_integers`): the same bits for any
    row chunking; sparse ``X`` (``mid = 0``) without densifying.
    """
    n, d = X.shape
    if sp.issparse(X):
        # mid = 0: implicit zeros contribute 0 to both moments.
        X = sp.csc_matrix(X, copy=True)
        X.sum_duplicates()
        cols = np.repeat(np.arange(d), np.diff(X.indptr))
        with np.errstate(over="ignore", under="ignore"):
            Z = np.clip(X.data / half[cols], -1.0, 1.0)
        m = np.bincount(cols, weights=Z, minlength=d) / n
        s = np.bincount(cols, weights=Z * Z, minlength=d) / n
        return m, s
    grid = moment_grid(n)
    if is_dask_collection(X):
        totals = dask_window_moment_integers(X, mid, half, grid)
    else:
        totals = window_moment_integers(np.asarray(X, dtype=float), mid, half, grid)
    m, s = grid.to_float(totals) / n
    return m, s


#: With unit rows the shared scale is the bulk bin's upper edge over this: its
#: lower edge. Rows of norm ``r`` in ``[2^(e-1), 2^e)`` get norm ``r / 2^(e-1)`` in
#: ``[1, 2)``, mapped to the bound 1 by the row map (one-hot rows all have the same
#: norm). Measured at epsilon 1 / 4 against the upper edge (``benchmarks/
#: sparse_defaults.py`` data, 5 seeds): one-hot classifier n = 2e4, 8 x 50 fields
#: 0.645 / 0.817 -> 0.723 / 0.858, n = 5e3, 4 x 20 0.610 / 0.630 -> 0.727 / 0.792;
#: one-hot regressor MSE 0.729 / 0.683 -> 0.670 / 0.540; bag-of-words counts with
#: row norms spread over a factor 30 0.596 / 0.628 -> 0.604 / 0.637 (the middle of
#: the bin, ``sqrt(2)``, was in between everywhere).
_ROW_EDGE_DIVISOR = 2.0


def _shared_scaling(X, budget, share, rng, name, unit_rows):
    """One scale for all columns from the magnitude bin ``[r / 2, r)`` of the
    rows' l2 norms: ``r / 2`` with ``unit_rows`` (typical rows at norm 1 to 2, the
    sparse-gradient estimators' row bound 1 and above, see
    :data:`_ROW_EDGE_DIVISOR`) or ``r / sqrt(d)`` (entries of size about 1, as
    standardised columns have).

    With ``unit_rows`` half of the share also releases the magnitude of the rows'
    numbers of non-zeros (``row_nnz``, just below a power of two at least the
    typical count): one number per record, one count moves, l2-sensitivity
    ``sqrt(2)``.
    """
    d = X.shape[1]
    records = []
    row_nnz = None
    if unit_rows:
        share = share / 2.0
        nnz_mech = budget.mechanism(1, _COUNT_MOVE, share, f"{name} row-nnz histogram")
        # Non-zeros of the matrix's values, not stored entries.
        counts = _row_nonzeros(X)
        noisy = nnz_mech.release(magnitude_histogram(counts[:, None]), rng)
        records.append(nnz_mech.record())
        top = _window_tops(noisy, nnz_mech, extend=False)[0]
        if np.isfinite(top):
            # Counts in [2^(e-1), 2^e) hold at most 2^e - 1 non-zeros.
            row_nnz = int(min(max(top - 1.0, 1.0), d))
    # One count down, one up: l2-sensitivity sqrt(2), l1 2.
    mech = budget.mechanism(1, _COUNT_MOVE, share, f"{name} row-norm histogram")
    noisy = mech.release(magnitude_histogram(_row_norms(X)[:, None]), rng)
    records.append(mech.record())
    top = _window_tops(noisy, mech, extend=False)[0]
    found = bool(np.isfinite(top))
    # Unit rows: the lower edge of the bulk's magnitude bin, so that a typical row
    # reaches the row bound (the estimators' row map takes the ones above into it,
    # in fit and predict alike). Entries about 1: the upper edge over sqrt(d).
    scale = (
        (float(top) / _ROW_EDGE_DIVISOR if unit_rows else float(top) / math.sqrt(d))
        if found
        else 1.0
    )
    scale = max(scale, _MIN_SCALE)
    return ColumnScaling(
        np.zeros(d), np.full(d, scale), np.full(d, found), records, row_nnz
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
    share = (x_rho + y_rho) / _FIRST_HISTOGRAM_SHARE / rho
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
        return rho_s * target_share * _FIRST_HISTOGRAM_SHARE < _histogram_rho(
            n_samples, 1, 0.0
        )
    if n_features <= 1 or n_features > MAX_PER_COLUMN:
        return rho_s * _FIRST_HISTOGRAM_SHARE < _histogram_rho(n_samples, 1, 0.0)
    per_column = rho_s * _FIRST_HISTOGRAM_SHARE >= _histogram_rho(
        n_samples, n_features, 0.0
    )
    return not per_column and rho_s * _FALLBACK_SHARES[-1] < _histogram_rho(
        n_samples, 1, 0.0
    )


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
