"""Private-range truncated mean: the heavy-tailed gradient-mean oracle of Kamath et al.

Two stages on disjoint halves of the records (Kamath, Liu & Zhang 2021, Section 4.1):

1. **CDPRE** (Algorithm 2): on half ``Y``, one noisy histogram per coordinate over a
   data-independent bucket grid; the midpoint of the noisy argmax bucket is a coarse
   centre ``c``.
2. **CDPHDME** (Algorithm 3): on half ``Z``, records whose gradient lies farther than
   ``tau sqrt(p) s`` from ``c`` are *dropped*, the rest are averaged with the
   denominator floored at ``3n/4``, and Gaussian noise is added.

Units (a library addition): the paper normalises the gradients to a k-th moment bound
of 1 (Definition 2.11), so its constants (bucket half-width 10, truncation 60) are in
units of the gradient's scale. With the public ``gradient_scale`` ``s`` the
algorithms run on ``g / s`` and the output is multiplied back by ``s``; equivalently the
bucket width is ``2 tau_RE s``, the ball radius ``tau sqrt(p) s`` and the noise std
``sigma s``, which is how it is computed here. Dividing by a public constant changes
no privacy argument.

Neighbouring relation: replace-one record, ``N`` public (the paper's Definition 2.1;
the documentation's privacy page). Every sensitivity is stated where its noise is
drawn.
"""

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ..privacy._mechanisms import (
    GaussianMechanism,
    parallel_gaussian_record,
    sigma_for_zcdp,
)
from ..utils._validation import check_int, check_real
from ._oracle import GradientMeanOracle

__all__ = [
    "AxisTruncatedMeanOracle",
    "BucketGrid",
    "TruncatedMeanOracle",
    "axis_truncated_mean",
    "bucket_counts",
    "default_gradient_bound",
    "mean_stage_size",
    "private_range_centre",
    "range_histogram_mechanism",
    "truncated_mean",
]

#: Minimum truncation of Kamath, Liu & Zhang (2021), Thm 4.1 (``6 tau_RE``).
MIN_TRUNCATION = 60.0
#: Bucket half-width the paper fixes inside the mean estimator (Thm 4.2 needs >= 10).
MIN_BUCKET_HALFWIDTH = 10.0
#: Refuse grids with more histogram cells than this (memory of the count array).
_MAX_HISTOGRAM_CELLS = 2**26
#: Entries per sub-block of a gradient chunk in the histogram stage.
_BLOCK_ENTRIES = 2**16

_SAMPLE_SPLITS = ("data", "budget")
_FLOAT_MAX = float(np.finfo(float).max)


# ----------------------------------------------------------------- public numbers


def _check_moment_order(moment_order):
    """``k >= 2``, finite (Definition 2.11's moment order)."""
    return check_real(moment_order, "moment_order", low=2.0)


def _check_sample_split(sample_split):
    if sample_split not in _SAMPLE_SPLITS:
        raise ValueError(
            f"sample_split must be one of {_SAMPLE_SPLITS}, got {sample_split!r}."
        )
    return sample_split


def default_gradient_bound(gradient_scale, dim):
    """Default public bound ``R`` on ``||E grad||``: ``s * max(sqrt(p), e)``.

    A library heuristic (the paper takes ``R`` as given): under standardised features
    the logistic gradient mean has norm of order ``sqrt(p) s`` and the ridge one of
    order ``s``; the floor ``e`` keeps ``ln(R / s) >= 1``, the ``log R`` in the
    denominator of Theorem 4.7's ``T``. A function of public numbers only.

    Parameters
    ----------
    gradient_scale : float
        ``s > 0``.
    dim : int
        ``p``, the number of gradient coordinates (intercept and ``x K`` included).

    Returns
    -------
    float

    Examples
    --------
    >>> round(default_gradient_bound(2.0, 100), 6)
    20.0
    >>> round(default_gradient_bound(1.0, 4), 6)
    2.718282
    """
    s = check_real(gradient_scale, "gradient_scale", low=0, low_open=True)
    p = check_int(dim, "dim", low=1)
    return s * max(math.sqrt(p), math.e)


def mean_stage_size(n_samples, sample_split="data"):
    """``n``, the number of records the truncated mean averages over.

    ``"data"`` (Algorithm 3): ``n = |Z| = N - floor(N/2)``, the half that is not used
    by the histograms; it is the count in the mean stage's sensitivity (the paper writes
    ``n`` both for the total and for each half). ``"budget"`` (a variant not in the
    paper): every record is used by both stages, ``n = N``. ``N`` is public under
    replace-one.

    Examples
    --------
    >>> mean_stage_size(101), mean_stage_size(101, "budget")
    (51, 101)
    """
    N = check_int(n_samples, "n_samples", low=1)
    _check_sample_split(sample_split)
    return N - N // 2 if sample_split == "data" else N


# -------------------------------------------------------------- CDPRE (Algorithm 2)


@dataclass(frozen=True)
class BucketGrid:
    """The data-independent bucket grid of the range estimator (Algorithm 2).

    In normalised units the buckets have width ``w = 2 tau_RE`` and edges ``w j`` for
    ``j = -(J+1) .. J+1`` with ``J = ceil(R / w)``: the paper's partition of
    ``[-R' - w, R' + w]`` with ``R`` rounded up to the multiple ``R' = J w`` of
    ``2 tau_RE`` (the paper's partition is only well formed for such ``R``; rounding
    up adds at most two buckets), i.e. ``2J + 2 = R'/tau_RE + 2`` buckets, the last
    one closed on the right. It depends only on the public ``R`` and ``tau_RE``.

    Attributes
    ----------
    half_count : int
        ``J``.
    width : float
        ``w = 2 tau_RE`` (normalised units).

    Examples
    --------
    >>> grid = BucketGrid.from_bound(20.0, 10.0)
    >>> grid.edges.tolist(), grid.n_buckets
    ([-40.0, -20.0, 0.0, 20.0, 40.0], 4)
    >>> BucketGrid.from_bound(25.0, 10.0).n_buckets
    6
    """

    half_count: int
    width: float

    @classmethod
    def from_bound(cls, bound, bucket_halfwidth):
        """Grid for the (normalised) range bound ``R`` and half-width ``tau_RE``."""
        R = check_real(bound, "bound", low=0, low_open=True)
        tau_re = check_real(bucket_halfwidth, "bucket_halfwidth", low=0, low_open=True)
        width = 2.0 * tau_re
        J = math.ceil(R / width)
        if not J < _MAX_HISTOGRAM_CELLS:
            raise ValueError(
                f"gradient_bound / bucket_halfwidth = {R / tau_re:.3g} gives too many "
                "histogram buckets; raise bucket_halfwidth or lower gradient_bound."
            )
        return cls(half_count=int(J), width=width)

    @property
    def n_buckets(self):
        return 2 * self.half_count + 2

    @property
    def edges(self):
        """The paper's bucket edges; the tests hold the bucket index to them."""
        J = self.half_count
        return self.width * np.arange(-(J + 1), J + 2, dtype=float)

    @property
    def midpoints(self):
        return self.width * (np.arange(self.n_buckets) - self.half_count - 0.5)


def bucket_counts(values, grid, scale=1.0, mask=None):
    """Exact bucket counts of every coordinate: ``counts[j, b]``.

    A value ``v`` (in original units) falls in bucket ``b`` iff
    ``edges[b] <= v / s < edges[b+1]`` (the last bucket also holds its right edge);
    values outside ``[-R' - w, R' + w]``, NaN and +-inf fall in no bucket (NaN fails
    both comparisons). Which bucket a record lands in is a deterministic function of
    that record alone, so replacing one record moves at most one unit of count per
    coordinate from one bucket to another (or to / from "no bucket").

    Parameters
    ----------
    values : ndarray of shape (m,) or (m, p)
        ``m`` samples of ``p`` coordinates (original units).
    grid : BucketGrid
    scale : float, default=1.0
        ``s``: the grid is in units of ``s``.
    mask : ndarray of bool of shape (m,), optional
        Count only these rows (the half ``Y`` of a gradient chunk).

    Returns
    -------
    counts : ndarray of shape (p, n_buckets), int64
        ``p = 1`` for 1-d ``values``.
    """
    V = np.asarray(values, dtype=float)
    if V.ndim == 1:
        V = V[:, None]
    if V.ndim != 2:
        raise ValueError(f"values must be 1-d or 2-d, got shape {V.shape}.")
    p, nb = V.shape[1], grid.n_buckets
    flat = np.zeros(p * nb + 1, dtype=np.int64)
    for block in _row_blocks(V, mask):
        idx = _bucket_index(block, grid, scale)
        flat += np.bincount(idx.ravel(), minlength=p * nb + 1)
    return flat[: p * nb].reshape(p, nb)


def _row_blocks(G, mask=None):
    """Row blocks of ``G[mask]`` of about ``_BLOCK_ENTRIES`` entries each.

    Sub-blocking a gradient chunk keeps every temporary cache-sized: fresh
    chunk-sized temporaries cost more in page faults than in arithmetic.
    """
    step = max(1, _BLOCK_ENTRIES // max(G.shape[1], 1))
    for start in range(0, G.shape[0], step):
        block = G[start : start + step]
        # np.compress: a row gather about twice as fast as boolean indexing.
        yield (
            block if mask is None else np.compress(mask[start : start + step], block, 0)
        )


def _bucket_index(V, grid, scale):
    """Flat cell ``j * n_buckets + b`` of every entry; ``p * n_buckets`` = no bucket."""
    p, nb, J = V.shape[1], grid.n_buckets, grid.half_count
    # Division (correctly rounded) keeps exact multiples of the width on their edge.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        t = V / (grid.width * scale)
    valid = t >= -(J + 1)
    valid &= t <= J + 1  # NaN fails both comparisons
    np.copyto(t, 0.0, where=~valid)  # no NaN / inf is ever cast to an integer
    np.floor(t, out=t)
    idx = t.astype(np.intp)
    idx += J + 1
    np.minimum(idx, nb - 1, out=idx)  # the right edge R' + w: last bucket is closed
    idx += nb * np.arange(p, dtype=np.intp)
    np.copyto(idx, p * nb, where=~valid)  # a dump cell, dropped by the caller
    return idx


#: Rows of a boolean block counted in one uint64 sum: each byte lane of the sum
#: adds one byte of each of ``_LANE_GROUPS`` groups of 8 rows and must stay <= 255.
_LANE_GROUPS = 255
#: Largest number of public thresholds searched one float at a time before falling
#: back to the division of :func:`bucket_counts`.
_THRESHOLD_STEPS = 64


def _first_float(predicate, guess):
    """Smallest float ``v`` with ``predicate(v)``, for a predicate that is False
    below some float and True from it on; searched one float at a time from
    ``guess``. ``None`` if not found within ``_THRESHOLD_STEPS`` steps or not
    finite (the callers then use the exact division instead)."""
    v = float(guess)
    if not math.isfinite(v):
        return None
    for _ in range(_THRESHOLD_STEPS):
        below = math.nextafter(v, -math.inf)
        if predicate(below):
            v = below
        elif not predicate(v):
            v = math.nextafter(v, math.inf)
        else:
            return v if math.isfinite(v) else None
    return None


def _bucket_thresholds(grid, scale):
    """Public thresholds ``theta`` with ``v >= theta_k`` iff ``edge_k <= v / (w s)``.

    :func:`_bucket_index` places ``v`` by ``t = fl(v / (w s))``; a correctly rounded
    division by a positive number is non-decreasing in ``v``, so ``t >= e`` is
    ``v >= theta(e)`` for the smallest float ``theta(e)`` with
    ``fl(theta(e) / (w s)) >= e``: comparing ``v`` with ``theta`` gives the same
    buckets as the division, bit for bit, without dividing every entry. Returns
    ``theta`` for the left edges of the ``n_buckets`` buckets, then the smallest
    float with ``t > J + 1`` (the last bucket is closed on the right), or ``None``
    if a threshold is not a finite float near ``e w s`` (extreme scales).
    """
    denom = grid.width * scale
    if not (math.isfinite(denom) and denom > 0.0):
        return None
    J = grid.half_count
    out = [
        _first_float(lambda v, e=float(e): v / denom >= e, e * denom)
        for e in range(-(J + 1), J + 1)
    ]
    out.append(_first_float(lambda v: v / denom > J + 1, (J + 1) * denom))
    return None if any(v is None for v in out) else np.array(out)


class _ColumnCounter:
    """Per-column numbers of True entries of boolean blocks ``(T, m, p)``.

    Eight rows of ``p`` bytes are ``p`` uint64 words whose byte ``k`` belongs to
    column ``(8 q + k) mod p`` in every group of eight rows; summing the words of
    at most 255 groups adds every byte lane without a carry, so the bytes of the
    sum are per-column counts: one addition per 8 entries instead of one per entry.
    Each ``B[t]`` must have C-contiguous rows of ``p`` bytes and at most
    ``8 * _LANE_GROUPS`` rows; rows past a multiple of 8 are summed directly.
    """

    def __init__(self, n_blocks, p):
        self.p = p
        self.lanes = np.zeros((n_blocks, 8 * p), dtype=np.int64)
        self.rest = np.zeros((n_blocks, p), dtype=np.int64)

    def add(self, B):
        T, m, p = B.shape
        full = m - m % 8
        if full:
            words = B[:, :full].reshape(T, full // 8, 8 * p).view(np.uint64)
            lanes = words.sum(axis=1, dtype=np.uint64)
            self.lanes += lanes.view(np.uint8)
        if full < m:
            self.rest += B[:, full:].sum(axis=1, dtype=np.int64)

    def result(self):
        T, p = self.rest.shape
        return self.lanes.reshape(T, 8, p).sum(axis=1) + self.rest


def _block_rows(p):
    # Rows per sub-block: a multiple of 8 (whole uint64 words in _ColumnCounter),
    # about _BLOCK_ENTRIES entries (the temporaries stay in cache).
    return max(8, min(8 * _LANE_GROUPS, (_BLOCK_ENTRIES // max(p, 1)) // 8 * 8))


def _threshold_counts(G, thresholds):
    """``out[k, j]`` = number of rows with ``G[i, j] >= thresholds[k]`` (NaN: none)."""
    m, p = G.shape
    theta = np.asarray(thresholds, dtype=float)[:, None, None]
    counter = _ColumnCounter(theta.shape[0], p)
    step = _block_rows(p)
    buf = np.empty((theta.shape[0], min(step, m), p), dtype=bool)
    for start in range(0, m, step):
        block = G[start : start + step]
        B = buf[:, : block.shape[0]]
        np.greater_equal(block, theta, out=B)
        counter.add(B)
    return counter.result()


def _counts_from_thresholds(at_least):
    """Bucket counts ``(p, n_buckets)`` from :func:`_threshold_counts` with
    :func:`_bucket_thresholds`: bucket ``b`` is ``edge_b <= t < edge_(b+1)``, the
    last one ``edge <= t <= J + 1``."""
    return (at_least[:-1] - at_least[1:]).T


#: :meth:`LinearDesign.predict` clips predictions to this magnitude.
_PREDICTION_CLIP = 1e300


def _ball_widening(radius, largest_centre, p):
    """Public relative widening ``kappa`` of the matrix-vector ball test, or
    ``None`` where that test is not used (the chunks are).

    The test computes ``d2 = ||g - c||^2`` by an identity whose rounding error is
    below ``E = 4 (p + 10) 2^-53 (||g|| + ||c||)^2`` (see
    :meth:`TruncatedMeanOracle._ball_sum_products`); near the sphere
    ``||g|| <= r + ||c||``, so ``E <= kappa_0 r^2`` with the public
    ``kappa_0 = 4 (p + 10) 2^-53 (1 + 2 C / r)^2``, ``C`` the largest ``||c||``.
    ``kappa = kappa_0 + 2^-50`` also covers the rounding of the threshold
    ``r^2 (1 + kappa)``. Used only where ``kappa <= 10^-9`` and the squares stay
    in the normal range (not with ``tau = inf``, the testing mode).
    """
    r, C = float(radius), float(largest_centre)
    if not (1e-100 <= r <= 1e100 and C <= 1e100):
        return None
    kappa = 4.0 * (p + 10) * 2.0**-53 * (1.0 + 2.0 * C / r) ** 2 + 2.0**-50
    return kappa if kappa <= 1e-9 else None


def _axis_clipped_sum(G, centre, halfwidth):
    """:func:`_axis_truncated_sum` for NaN-free ``G``, without masking entries.

    Keep iff ``|fl(g_j - c_j)| <= h``, as there; the kept sum is recovered from
    the sum of ``clip(d, -h, h)`` over every entry, minus ``h`` per entry above
    and plus ``h`` per entry below (``np.where`` on a block costs ten times a
    comparison). ``+-inf`` are clipped and counted as dropped; a NaN would poison
    the sum: the caller keeps NaN out.
    """
    m, p = G.shape
    h = float(halfwidth)
    total = np.zeros(p)
    counter = _ColumnCounter(2, p)
    step = _block_rows(p)
    D_buf = np.empty((min(step, m), p))
    flags = np.empty((2, min(step, m), p), dtype=bool)
    # The centre repeated for 8 rows: the subtraction then runs over rows of 8 p
    # entries rather than p.
    centre8 = np.tile(centre, 8)
    for start in range(0, m, step):
        block = G[start : start + step]
        rows = block.shape[0]
        D = D_buf[:rows]
        with np.errstate(over="ignore", invalid="ignore"):
            if rows % 8 == 0:
                np.subtract(
                    block.reshape(rows // 8, 8 * p),
                    centre8,
                    out=D.reshape(rows // 8, 8 * p),
                )
            else:
                np.subtract(block, centre, out=D)
        F = flags[:, :rows]
        np.greater(D, h, out=F[0])
        np.less(D, -h, out=F[1])
        counter.add(F)
        np.clip(D, -h, h, out=D)
        total += np.ones(rows) @ D
    above, below = counter.result()
    total -= h * (above - below)
    return total, m - above - below


def range_histogram_mechanism(rho_p, n_coordinates=1, name="range histogram"):
    """Gaussian noise for ``n_coordinates`` histograms at ``rho_p``-zCDP each.

    Sensitivity (Algorithm 2 and Appendix C.3, KSU20 Thm 3.1): under replace-one the
    moved record leaves one bucket and enters another, so one histogram's count vector
    changes in at most two cells by 1: l2-sensitivity ``sqrt(2)`` (a move to or from
    "no bucket" changes one cell: 1). ``N(0, 1/rho_p)`` on every cell,
    ``sigma^2 = Delta^2 / (2 rho_p) = 1 / rho_p``, is ``rho_p``-zCDP. The same record
    moves in every coordinate's histogram, so ``q`` histograms together have
    l2-sensitivity ``sqrt(2 q)`` at the same per-cell ``sigma``: the returned
    mechanism carries that joint sensitivity (``mu = sqrt(2 q rho_p)``-GDP, i.e.
    ``q rho_p``-zCDP) and noises each cell with ``sigma = 1 / sqrt(rho_p)``.

    Parameters
    ----------
    rho_p : float
        zCDP budget of one coordinate's histogram (``inf``: no noise).
    n_coordinates : int, default=1
        ``q``, the number of histograms released together.
    name : str

    Returns
    -------
    GaussianMechanism
    """
    rho_p = check_real(rho_p, "rho_p", low=0, low_open=True, allow_inf=True)
    q = check_int(n_coordinates, "n_coordinates", low=1)
    sigma = sigma_for_zcdp(math.sqrt(2.0), rho_p)  # = 1 / sqrt(rho_p)
    return GaussianMechanism(math.sqrt(2.0 * q), sigma, name=name, integer=True)


def _noisy_argmax_midpoints(counts, grid, mechanism, rng):
    # Noise on EVERY cell, empty or not (noising only the non-empty cells would
    # reveal which are empty); argmax with the lowest-index tie rule (np.argmax), a
    # data-independent post-processing.
    noisy = mechanism.release(counts, rng)
    return grid.midpoints[np.argmax(noisy, axis=1)]


def private_range_centre(values, rho_p, bound, bucket_halfwidth, rng):
    """CDPRE: private coarse centre of each coordinate (Algorithm 2).

    For every coordinate, the counts of a data-independent bucket grid over
    ``[-R' - 2 tau_RE, R' + 2 tau_RE]`` (``R`` rounded up to a multiple of
    ``2 tau_RE``) get ``N(0, 1/rho_p)`` noise on every bucket; the midpoint of the
    noisy argmax bucket (lowest index on ties) is returned. NaN and +-inf fall in no
    bucket.

    Privacy: each coordinate's histogram has l2-sensitivity ``sqrt(2)`` under
    replace-one (see :func:`range_histogram_mechanism`), so each coordinate is
    ``rho_p``-zCDP and ``p`` coordinates compose to ``p rho_p``-zCDP; the argmax is
    post-processing.

    Accuracy (Thm 4.2): if ``|mu| <= R`` and the second moment about ``mu`` is
    ``<= 1``, the midpoint is within ``3 tau_RE`` of ``mu`` with probability
    ``>= 1 - 2 (R / tau_RE + 2) exp(-m^2 rho_p / 1024) - exp(-m / 50)``.

    Parameters
    ----------
    values : array-like of shape (m,) or (m, p)
        Samples (normalised units); columns are independent coordinates.
    rho_p : float
        zCDP budget of each coordinate (``inf``: exact counts, no noise).
    bound : float
        ``R``, public bound on ``|mu|``.
    bucket_halfwidth : float
        ``tau_RE`` (the paper uses 10).
    rng : numpy.random.Generator

    Returns
    -------
    float or ndarray of shape (p,)
        Midpoint(s); a float for 1-d ``values``.

    Notes
    -----
    The oracles' centre stage on a plain array (the oracles count through
    ``LinearDesign`` chunks and, where exact, precomputed thresholds): the reference
    the tests hold them to, and on which they check Thm 4.2.

    References
    ----------
    .. [1] Kamath, G., Liu, X. and Zhang, H. (2021). Improved rates for differentially
       private stochastic convex optimization with heavy-tailed data.
       arXiv:2106.01336, Algorithm 2 and Theorem 4.2.
    .. [2] Kamath, G., Singhal, V. and Ullman, J. (2020). Private mean estimation of
       heavy-tailed distributions. COLT.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> float(private_range_centre(rng.normal(33.0, 1.0, 500), 1.0, 50.0, 10.0, rng))
    30.0
    """
    values = np.asarray(values, dtype=float)
    grid = BucketGrid.from_bound(bound, bucket_halfwidth)
    counts = bucket_counts(values, grid)
    centre = _noisy_argmax_midpoints(
        counts, grid, range_histogram_mechanism(rho_p), rng
    )
    return float(centre[0]) if values.ndim == 1 else centre


# ---------------------------------------------------- truncated means (Algorithm 3)


def _truncated_sum(G, centre, radius, mask=None):
    """``(sum of kept (g - c), count kept)`` over ``G[mask]``, keep iff
    ``||g - c|| <= radius``."""
    total, kept = np.zeros(G.shape[1]), 0
    for block in _row_blocks(G, mask):
        with np.errstate(over="ignore", invalid="ignore"):
            D = block - centre
            dist = np.sqrt(np.einsum("ij,ij->i", D, D))
        # Privacy: the keep test must be `dist <= radius`: NaN (and +-inf or
        # an overflowing norm) compares False, so such a row is dropped. Never write
        # it as `not (dist > radius)`, which would keep NaN rows.
        keep = dist <= radius
        kept_rows = np.compress(keep, D, axis=0)  # finite, norm <= radius
        total += np.ones(kept_rows.shape[0]) @ kept_rows  # a BLAS column sum
        kept += kept_rows.shape[0]
    return total, kept


def _axis_truncated_sum(G, centre, halfwidth, mask=None):
    """Per coordinate of ``G[mask]``: ``(sum of kept g_j - c_j, count kept)``, keep
    iff ``|g_j - c_j| <= halfwidth`` (NaN compares False and is dropped)."""
    total, kept = np.zeros(G.shape[1]), np.zeros(G.shape[1], dtype=np.int64)
    for block in _row_blocks(G, mask):
        with np.errstate(over="ignore", invalid="ignore"):
            D = block - centre
            keep = np.abs(D) <= halfwidth
        total += np.ones(D.shape[0]) @ np.where(keep, D, 0.0)  # dropped -> 0
        kept += np.count_nonzero(keep, axis=0)
    return total, kept


def _floored_mean(centre, total, kept, n):
    """``c + total / max(kept, 3n/4)`` (Algorithm 3, l. 10), per coordinate where
    ``kept`` is an array: the last step of both truncated means, the oracles' and
    the reference functions'."""
    return centre + total / np.maximum(kept, 0.75 * n)


def truncated_mean(G, centre, radius, n):
    """``c + sum_{kept}(g - c) / max(|kept|, 3n/4)`` without noise (Alg. 3, l. 6-10).

    A row is kept iff ``||g - c|| <= radius`` (NaN, +-inf and overflowing norms are
    dropped). This is the noiseless query of :class:`TruncatedMeanOracle` on a plain
    array: the reference the tests hold the oracle's chunked and matrix-vector mean
    stages to, and on which they check the sensitivity below by brute force.

    Sensitivity (replace-one inside ``Z``, ``c`` fixed, ``r`` = ``radius``; the paper
    omits the proof (Appendix C.4 defers to KSU20), so it is derived here in the style
    of KSU20 Lemma 3.3). Write
    ``f = S / max(m, 3n/4)`` with ``S`` the kept sum, ``m`` the kept count, ``u`` the
    replaced record's kept vector (``||u|| <= r``) and ``S'`` the sum over the other
    kept rows (``||S'|| <= (m - 1) r``):

    * both versions kept: the denominator is unchanged and ``>= 3n/4``, so
      ``||f - f'|| <= 2r / (3n/4) = 8r / (3n)``; both dropped: 0;
    * kept in one, dropped in the other (counts ``m`` and ``m - 1``):

      - ``m <= 3n/4``: ``||u|| / (3n/4) <= 4r / (3n)``;
      - ``m - 1 >= 3n/4``: ``f - f' = (u - S'/(m-1)) / m``, norm ``<= 2r/m < 8r/(3n)``;
      - floor crossing ``m - 1 < 3n/4 < m``: ``f - f' = u/m + S'(1/m - 4/(3n))``, norm
        ``<= r/m + r (m-1)(m - 3n/4) / (m 3n/4) < 2r/m < 8r/(3n)``.

    Hence ``Delta = 8 r / (3n)``; with ``r = tau sqrt(p) s`` this is
    ``8 tau sqrt(p) s / (3n)``, the sensitivity behind Algorithm 3's noise variance
    ``32 tau^2 d / (9 n^2 rho)`` (normalised units), and it is tight (two boundary
    points on opposite sides, ``|kept| <= 3n/4``).

    Parameters
    ----------
    G : ndarray of shape (m_rows, p)
    centre : ndarray of shape (p,)
    radius : float
    n : int
        Public ``n`` of the floor (``|Z|``, or ``N`` with ``sample_split="budget"``).

    Returns
    -------
    ndarray of shape (p,)
    """
    G = np.asarray(G, dtype=float)
    centre = np.asarray(centre, dtype=float)
    total, kept = _truncated_sum(G, centre, radius)
    return _floored_mean(centre, total, kept, n)


def axis_truncated_mean(G, centre, halfwidth, n):
    """Coordinate-wise truncated mean (Appendix B): Algorithm 3, l. 6-10, per axis.

    Coordinate ``j`` keeps the rows with ``|g_j - c_j| <= halfwidth`` and divides by
    ``max(count_j, 3n/4)``. By the 1-d case of :func:`truncated_mean` each coordinate
    has sensitivity ``8 halfwidth / (3n)``, so the ``p`` coordinates together have
    l2-sensitivity ``8 halfwidth sqrt(p) / (3n)``. The reference the tests hold
    :class:`AxisTruncatedMeanOracle`'s clipped and masked mean stages to.
    """
    G = np.asarray(G, dtype=float)
    centre = np.asarray(centre, dtype=float)
    total, kept = _axis_truncated_sum(G, centre, halfwidth)
    return _floored_mean(centre, total, kept, n)


# ------------------------------------------------------------------------ oracles


class TruncatedMeanOracle(GradientMeanOracle):
    """Private heavy-tailed gradient mean, rotation-invariant moments (CDPHDME).

    One call on the per-sample gradients ``g_i = u_i (outer) x~_i`` (``p`` coordinates,
    ``p = prod(shape)``):

    1. *Split* (once per fit, by index, from the fit's RNG, independent of the data):
       ``Y`` = a uniformly random subset of ``floor(N/2)`` rows, ``Z`` = the rest,
       ``n = |Z|``.
    2. *Centre* on ``Y``: per coordinate, a histogram over the public grid of
       :class:`BucketGrid` (``R`` = ``gradient_bound / s``, width ``2 tau_RE``), noise
       ``N(0, p / rho)`` on every cell (l2-sensitivity ``sqrt(2)`` per histogram,
       budget ``rho / p`` each, ``rho`` in all); ``c`` = midpoints of the noisy
       argmax buckets, times ``s``.
    3. *Truncate* ``Z``: keep ``g`` iff ``||g - c|| <= tau sqrt(p) s`` (NaN dropped).
    4. *Mean*: ``c + sum_kept (g - c) / max(|kept|, 3n/4) + N(0, sigma^2 I)`` with
       l2-sensitivity ``Delta = 8 tau sqrt(p) s / (3n)`` (case analysis in
       :func:`truncated_mean`) and ``sigma^2 = Delta^2 / (2 rho) =
       32 tau^2 p s^2 / (9 n^2 rho)``.

    Privacy of one call (parallel composition over the halves): a replaced record is in
    ``Y`` or in ``Z``. In ``Y``, ``Z`` is unchanged and the output is a
    post-processing of the histograms, which are ``sqrt(2 p) / sqrt(p / rho) =
    sqrt(2 rho)``-GDP; in ``Z``, ``c`` has the same law on both sides and, for every
    ``c``, the mean is ``Delta / sigma = sqrt(2 rho)``-GDP. So a call is
    ``sqrt(2 rho)``-GDP, i.e. ``rho``-zCDP, not ``2 rho``: :meth:`records` emits ONE
    Gaussian record with ``mu = sqrt(2 rho)``. GDP composition over calls (Dong, Roth &
    Su 2022, Cor 3.3) holds for any GDP mechanisms, so ``all_gaussian = True`` (exact
    GDP accounting) is valid. This needs the split to be by index and data-independent.

    With ``sample_split="budget"`` (a sound variant not in the paper) both stages use
    all ``N`` rows: histograms at ``rho / (2p)`` per coordinate, the mean at ``rho/2``
    with ``n = N`` in ``Delta`` and in the floor; the two stages compose sequentially
    (two records, ``sqrt(rho)``-GDP each, ``rho``-zCDP together).

    Parameters
    ----------
    gradient_scale : float, default=1.0
        ``s``: public bound with ``E|<g - E g, v>|^k <= s^k`` for unit ``v`` (the
        paper's Definition 2.11 with ``gamma = s^k``; see the module docstring).
    truncation : "auto" or float, default="auto"
        ``tau`` (ball radius ``tau sqrt(p) s``). ``"auto"``: the caller supplies it
        from :mod:`skdpsco._mean_estimation._schedules` (the convex ``tau`` depends on the
        *total* budget, which the oracle does not see) with
        ``calibrate(..., truncation=tau)``. ``inf`` (what
        the schedules give at ``rho = inf``) is accepted only in the non-private
        testing mode ``rho = inf``: every finite gradient is kept.
    gradient_bound : float or None, default=None
        ``R``, public bound on ``||E g||`` over the feasible set; ``None``:
        ``s max(sqrt(p), e)`` (:func:`default_gradient_bound`).
    bucket_halfwidth : float, default=10.0
        ``tau_RE`` (normalised units).
    moment_order : float, default=2.0
        ``k >= 2``; public, used by the schedules (``tau``, ``T``), not by the oracle.
    sample_split : {"data", "budget"}, default="data"

    Attributes
    ----------
    n_ : int
        ``n`` of the mean stage (``|Z|`` or ``N``).
    dim_ : int
        ``p``.
    truncation_ : float
    gradient_bound_ : float
    grid_ : BucketGrid
    histogram_mechanism_, mean_mechanism_ : GaussianMechanism
        Noise of the two stages (the histogram one with the joint ``p``-histogram
        sensitivity ``sqrt(2p)``).
    in_y_ : ndarray of bool of shape (N,) or None
        The data-independent split (``None`` until the first call, and with
        ``sample_split="budget"``).
    widening_ : float or None
        ``kappa``: the mean stage keeps the rows within ``r`` of ``c`` by
        matrix-vector products, at the price of a sensitivity computed for the
        radius ``r sqrt(1 + 4 kappa)`` (about ``1e-13`` relatively at the
        defaults); ``None`` where it uses the gradient chunks (always for
        :class:`AxisTruncatedMeanOracle`). Public.

    References
    ----------
    .. [1] Kamath, G., Liu, X. and Zhang, H. (2021). Improved rates for differentially
       private stochastic convex optimization with heavy-tailed data.
       arXiv:2106.01336, Algorithms 2–3, Theorem 4.1 and Appendix B.
    .. [2] Kamath, G., Singhal, V. and Ullman, J. (2020). Private mean estimation of
       heavy-tailed distributions. COLT.
    .. [3] Dong, J., Roth, A. and Su, W. (2022). Gaussian differential privacy. JRSS B.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco._design import LinearDesign
    >>> oracle = TruncatedMeanOracle(truncation=60.0).calibrate(100_000, 2.669e-4, (10,))
    >>> round(oracle.mean_mechanism_.sigma, 3), round(oracle.histogram_mechanism_.sigma, 1)
    (0.438, 193.6)
    >>> design = LinearDesign(np.ones((6, 2)), fit_intercept=True)
    >>> oracle.calibrate(6, 1.0, (3,)).estimate(design, np.ones(6), np.random.default_rng(0)).shape
    (3,)
    """  # noqa: E501

    #: Histograms and the mean are Gaussian mechanisms (exact GDP composition).
    all_gaussian = True

    def __init__(
        self,
        gradient_scale=1.0,
        truncation="auto",
        gradient_bound=None,
        bucket_halfwidth=10.0,
        moment_order=2.0,
        sample_split="data",
    ):
        self.gradient_scale = check_real(
            gradient_scale, "gradient_scale", low=0, low_open=True
        )
        if isinstance(truncation, str):
            if truncation != "auto":
                raise ValueError(
                    f"truncation must be 'auto' or a float > 0, got {truncation!r}."
                )
        else:
            truncation = check_real(
                truncation, "truncation", low=0, low_open=True, allow_inf=True
            )
        self.truncation = truncation
        self.gradient_bound = (
            None
            if gradient_bound is None
            else check_real(gradient_bound, "gradient_bound", low=0, low_open=True)
        )
        self.bucket_halfwidth = check_real(
            bucket_halfwidth, "bucket_halfwidth", low=0, low_open=True
        )
        self.moment_order = _check_moment_order(moment_order)
        self.sample_split = _check_sample_split(sample_split)

    # ----------------------------------------------------------------- set-up

    def _resolve_truncation(self, truncation):
        if truncation is not None:
            return check_real(
                truncation, "truncation", low=0, low_open=True, allow_inf=True
            )
        if self.truncation == "auto":
            raise ValueError(
                "truncation='auto' needs tau from the solver schedule "
                "(skdpsco._mean_estimation._schedules): call "
                "calibrate(..., truncation=tau)."
            )
        return self.truncation

    def _mean_sensitivity(self):
        """l2-sensitivity of the noiseless mean stage (both oracles: see docs)."""
        # 8 r / (3n) with r = tau sqrt(p) s: the case analysis of truncated_mean for
        # the ball; for the axis variant sqrt(p) times the 1-d bound 8 tau s / (3n).
        # tau = inf (testing mode only, rho = inf and no noise): capped at the largest
        # float so that the mechanism and its record stay well defined.
        delta = (
            8.0
            * self.truncation_
            * math.sqrt(self.dim_)
            * self.gradient_scale
            / (3.0 * self.n_)
        )
        if self.widening_ is not None:
            # The matrix-vector ball test keeps rows within r sqrt(1 + 4 kappa)
            # (_ball_sum_products): the sensitivity of that radius.
            delta *= math.sqrt(1.0 + 4.0 * self.widening_)
        return min(delta, _FLOAT_MAX)

    def calibrate(self, n_samples, rho, shape, truncation=None):
        """Fix every scale from public values and forget the previous split.

        Parameters
        ----------
        n_samples : int
            Public ``N`` (all records).
        rho : float
            zCDP budget of ONE call (``inf``: the hidden non-private testing mode,
            no noise and an argmax on exact counts).
        shape : tuple of int
            Parameter shape ``(dim,)`` or ``(dim, K)``; ``p = prod(shape)``.
        truncation : float or None
            ``tau`` for this fit; ``None`` falls back to the constructor's
            value.

        Returns
        -------
        self
        """
        N = check_int(n_samples, "n_samples", low=1)
        rho = check_real(rho, "rho", low=0, low_open=True, allow_inf=True)
        if not isinstance(shape, tuple | list) or len(shape) not in (1, 2):
            raise ValueError(f"shape must be (dim,) or (dim, K), got {shape!r}.")
        shape = tuple(check_int(s, "shape entries", low=1) for s in shape)
        tau = self._resolve_truncation(truncation)
        p = math.prod(shape)
        s = self.gradient_scale
        self.n_samples_ = N
        self.shape_ = shape
        self.dim_ = p
        self.n_ = mean_stage_size(N, self.sample_split)
        self.truncation_ = tau
        bound = self.gradient_bound
        self.gradient_bound_ = default_gradient_bound(s, p) if bound is None else bound
        self.grid_ = BucketGrid.from_bound(
            self.gradient_bound_ / s, self.bucket_halfwidth
        )
        if p * self.grid_.n_buckets > _MAX_HISTOGRAM_CELLS:
            raise ValueError(
                f"{p} coordinates x {self.grid_.n_buckets} buckets is too many "
                "histogram cells; raise bucket_halfwidth or lower gradient_bound."
            )
        if not math.isfinite(tau * math.sqrt(p) * s) and not math.isinf(rho):
            raise ValueError(
                f"truncation={tau!r} gives an infinite ball radius (and noise); it is "
                "only allowed in the non-private testing mode rho = inf."
            )
        # tau = inf (testing mode): every row with a finite distance is kept, NaN and
        # +-inf rows are still dropped by `dist <= radius`.
        self.radius_ = min(tau * math.sqrt(p) * s, _FLOAT_MAX)
        # Public: whether the mean stage runs by matrix-vector products (and by
        # how much that widens the ball), see _ball_sum_products.
        self.widening_ = self._ball_widening()
        # Budget of each stage: with disjoint halves both stages get the whole rho
        # (parallel composition); with one sample they split it (sequential).
        stage_rho = rho if self.sample_split == "data" else rho / 2.0
        # Histograms: rho_stage / p per coordinate, sigma = 1/sqrt(rho_stage/p) per
        # cell; joint l2-sensitivity sqrt(2p) (range_histogram_mechanism).
        self.histogram_mechanism_ = range_histogram_mechanism(
            stage_rho / p,
            n_coordinates=p,
            name=f"range histograms ({p} coordinates)",
        )
        # Mean: Delta = 8 tau sqrt(p) s / (3n) (truncated_mean), so
        # sigma^2 = Delta^2 / (2 rho_stage) = 32 tau^2 p s^2 / (9 n^2 rho_stage).
        self.mean_mechanism_ = GaussianMechanism.from_zcdp(
            self._mean_sensitivity(), stage_rho, name="truncated gradient mean"
        )
        self.in_y_ = None
        self._warn_accuracy_preconditions()
        return self

    def _warn_accuracy_preconditions(self):
        # Accuracy (not privacy) preconditions of Thm 4.1 / 4.2.
        tau, tau_re = self.truncation_, self.bucket_halfwidth
        if tau_re < MIN_BUCKET_HALFWIDTH:
            warnings.warn(
                f"bucket_halfwidth={tau_re:g} < 10: the range estimator's guarantee "
                "(Kamath et al. 2021, Thm 4.2) needs tau_RE >= 10.",
                UserWarning,
                stacklevel=3,
            )
        if tau < MIN_TRUNCATION or tau < 6.0 * tau_re:
            warnings.warn(
                f"truncation={tau:g} is below max(60, 6 * bucket_halfwidth): the "
                "ball may miss the data when the coarse centre is off by 3 tau_RE "
                "per coordinate (Kamath et al. 2021, Thm 4.1). Privacy is unaffected.",
                UserWarning,
                stacklevel=3,
            )

    # -------------------------------------------------------------- one call

    def _draw_split(self, rng):
        # By index only, from the fit's RNG, before any data is read: the same seed
        # gives the same Y/Z whatever the values, which the parallel composition of
        # the two stages needs.
        if self.sample_split != "data":
            return None
        N = self.n_samples_
        in_y = np.zeros(N, dtype=bool)
        in_y[rng.permutation(N)[: N // 2]] = True
        return in_y

    def _rows(self, half):
        """Row mask of the half ``"Y"`` or ``"Z"``; ``None`` (every row) with
        ``sample_split="budget"``. Each stage builds the gradients of its own half
        only."""
        if self.in_y_ is None:
            return None
        return self.in_y_ if half == "Y" else ~self.in_y_

    def _centre(self, design, U, rng):
        grid, s = self.grid_, self.gradient_scale
        thresholds = _bucket_thresholds(grid, s)

        def counts(G, rows):
            G = G.reshape(G.shape[0], -1)
            if thresholds is None:
                return bucket_counts(G, grid, s)
            return _threshold_counts(G, thresholds)

        exact = design.gradient_chunk_sum(U, counts, rows=self._rows("Y"))
        if thresholds is not None:
            exact = _counts_from_thresholds(exact)
        return s * _noisy_argmax_midpoints(exact, grid, self.histogram_mechanism_, rng)

    def _mean_query(self, design, U, centre):
        # The products' test needs predictions accurate to the standard dot
        # product bound, which a design that folds its centring into them does
        # not promise (LinearDesign.predictions_exact).
        if self.widening_ is None or not design.predictions_exact:
            total, kept = self._ball_sum_chunks(design, U, centre)
        else:
            total, kept = self._ball_sum_products(design, U, centre)
            if not np.all(np.isfinite(total)):
                # Only a non-finite entry of X~ (0 * inf in X~^T C) gets here:
                # LinearDesign holds finite data (the estimators validate it), so
                # an estimator never takes this branch; a direct caller with
                # non-finite rows gets the chunked test, which drops them.
                total, kept = self._ball_sum_chunks(design, U, centre)
        return _floored_mean(centre, total, kept, self.n_)

    def _ball_widening(self):
        # ||c|| <= s w (J + 1/2) sqrt(p): every coordinate is a bucket midpoint.
        grid = self.grid_
        largest_centre = (
            self.gradient_scale
            * grid.width
            * (grid.half_count + 0.5)
            * math.sqrt(self.dim_)
        )
        return _ball_widening(self.radius_, largest_centre, self.dim_)

    def _ball_sum_chunks(self, design, U, centre):
        """``(sum of kept g - c, count)`` over ``Z`` from the gradient chunks."""
        radius = self.radius_

        def partial(G, rows):
            total, kept = _truncated_sum(G.reshape(G.shape[0], -1), centre, radius)
            return np.append(total, kept)

        out = design.gradient_chunk_sum(U, partial, rows=self._rows("Z"))
        return out[:-1], out[-1]

    def _ball_sum_products(self, design, U, centre):
        """``(sum of kept g - c, count)`` over ``Z`` by two matrix-vector products.

        With ``g_i = u_i (outer) x~_i``, ``||g_i - c||^2 = ||u_i||^2 ||x~_i||^2 -
        2 <u_i, X~_i c> + ||c||^2`` needs only ``X~ c`` (``design.predict``) and the
        cached row norms, and the kept sum is ``X~^T (keep * U) - |kept| c``
        (``design.weighted_sum``): no gradient is formed.

        Privacy: the sensitivity ``8 r / (3n)`` of :func:`truncated_mean` needs
        every kept ``g_i`` within ``r`` of ``c``. The identity cancels when ``g_i``
        is near ``c`` or ``||g_i|| ~ ||c||``, so the computed ``d2`` is trusted
        only up to a bound on its rounding error, ``E_i = 4 (p + 10) 2^-53
        (||u_i|| ||x~_i|| + ||c||)^2``: twice the sum of the products' standard
        bounds (Higham 2002, Sec. 3.1): ``X~_i c`` (BLAS, ``d + 1`` terms) within
        ``(d + 2) 2^-53 ||x~_i|| ||c||``, the scaled row norm
        (:func:`~skdpsco._design.row_l2_norms`) within ``(d/2 + 5)
        2^-53`` relatively, ``||u_i||`` and ``||c||^2`` within ``K + 2`` and ``p``
        units, and the two additions. A row is kept iff ``d2 <= r^2 (1 +
        kappa)`` (:func:`_ball_widening`, ``kappa ~ 1e-13`` at the defaults):
        every row in the ball is kept (as by the chunked test, ties on the
        sphere included), and every kept row has ``||g_i - c||^2 <= d2 + E_i``,
        hence ``||g_i - c|| <= r sqrt(1 + 4 kappa)`` in exact arithmetic for
        ``kappa <= 1/4``; :meth:`calibrate` computes the sensitivity with that
        radius. A prediction the design clipped at ``1e300`` is not a product:
        its row is dropped. Rows with a non-finite or overflowing distance (NaN,
        +-inf) fail the comparison and are dropped, as in :func:`truncated_mean`.
        """
        rows = self._rows("Z")
        A = design.predict(centre.reshape(self.shape_))
        # Silent for finite rows; a non-finite row (outside LinearDesign's
        # contract, see _mean_query) must not warn either.
        with np.errstate(all="ignore"):
            norms = design.row_norms()
        if rows is not None:
            index = np.flatnonzero(rows)
            U, A, norms = U[index], A[index], norms[index]
        cc = float(centre @ centre)
        limit = (self.radius_ * self.radius_) * (1.0 + self.widening_)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            if U.ndim == 1:
                T = np.abs(U)
                cross = U * A
                zero = U == 0.0
                exact = np.abs(A) < _PREDICTION_CLIP
            else:
                T = np.sqrt(np.einsum("ik,ik->i", U, U))
                cross = np.einsum("ik,ik->i", U, A)
                zero = ~np.any(U != 0.0, axis=1)
                exact = np.all(np.abs(A) < _PREDICTION_CLIP, axis=1)
            T *= norms
            # u = 0: g = 0 whatever the row (an overflowing row norm times 0
            # would be NaN).
            T[zero] = 0.0
            d2 = np.multiply(T, T, out=T)
            cross *= 2.0
            d2 -= cross
            d2 += cc
            keep = d2 <= limit
        exact |= zero
        keep &= exact
        kept_rows = np.flatnonzero(keep)
        if rows is not None:
            kept_rows = index[kept_rows]
        coeff = np.zeros(U.shape[:0] + (self.n_samples_,) + U.shape[1:])
        coeff[kept_rows] = U[keep]
        with np.errstate(invalid="ignore"):  # 0 * inf: see _mean_query
            total = design.weighted_sum(coeff).reshape(-1) - kept_rows.size * centre
        return total, kept_rows.size

    def estimate(self, design, U, rng):
        """Noisy truncated mean of the per-sample gradients ``u_i (outer) x~_i``.

        The histograms read the gradient chunks of the rows of ``Y`` only; the
        truncated sum reads those of ``Z`` (axis variant) or, for the ball, two
        matrix-vector products (:meth:`_ball_sum_products`); no array larger
        than one chunk is formed.

        Parameters
        ----------
        design : LinearDesign
            Read through ``gradient_chunk_sum`` (rows of ``Y``; rows of ``Z`` for
            the axis variant) and, for the ball, ``predict`` and
            ``weighted_sum``.
        U : ndarray of shape (N,) or (N, K)
            The loss derivatives of all ``N`` rows at the current iterate.
        rng : numpy.random.Generator
            The fit's generator: the split (first call only) and all noise.

        Returns
        -------
        ndarray of shape ``shape``
        """
        if not hasattr(self, "mean_mechanism_"):
            raise RuntimeError("calibrate() must be called before estimate().")
        if not isinstance(rng, np.random.Generator):
            raise TypeError(
                f"estimate needs an explicit numpy.random.Generator, got "
                f"{type(rng).__name__}."
            )
        if design.n_samples != self.n_samples_:
            raise ValueError(
                f"design has {design.n_samples} rows, the oracle was calibrated "
                f"for {self.n_samples_}."
            )
        if self.in_y_ is None:
            self.in_y_ = self._draw_split(rng)
        centre = self._centre(design, U, rng)
        mean = self._mean_query(design, U, centre)
        return self.mean_mechanism_.release(mean, rng).reshape(self.shape_)

    @property
    def noise_scale(self):
        """Public noise scale of one call: the standard deviation of the mean
        stage's Gaussian noise (the histograms' noise is on counts)."""
        return self.mean_mechanism_.sigma

    def records(self, count):
        """Ledger records of ``count`` calls; they compose to ``count * rho``.

        ``"data"``: ONE Gaussian record per call with ``mu = sensitivity / scale =
        sqrt(2 rho)``, the larger of the two stages' GDP parameters (equal up to
        rounding), because the stages run on disjoint halves (parallel
        composition). ``"budget"``: two records (histograms, mean), each
        ``sqrt(rho)``-GDP, composed sequentially.
        """
        hist, mean = self.histogram_mechanism_, self.mean_mechanism_
        if self.sample_split == "budget":
            return [hist.record(count), mean.record(count)]
        return [
            parallel_gaussian_record(
                "range histograms on half Y || truncated mean on half Z "
                "(parallel composition)",
                [hist, mean],
                count,
            )
        ]


class AxisTruncatedMeanOracle(TruncatedMeanOracle):
    """Private heavy-tailed gradient mean, axis-aligned moments (Appendix B).

    ``p`` independent one-dimensional CDPHDME calls, each at ``rho / p``: coordinate
    ``j`` gets its own range histogram on ``Y`` (budget ``rho/p``, noise
    ``N(0, p/rho)`` per cell, sensitivity ``sqrt(2)``), keeps the rows of ``Z`` with
    ``|g_j - c_j| <= tau s`` (an l-infinity box, each coordinate on its own), divides
    by ``max(count_j, 3n/4)`` and adds ``N(0, 32 tau^2 p s^2 / (9 n^2 rho))``: the
    1-d sensitivity ``8 tau s / (3n)`` of :func:`truncated_mean` at budget ``rho/p``.
    Over all coordinates the histograms are ``sqrt(2 rho)``-GDP on ``Y`` and the means
    (joint sensitivity ``8 tau sqrt(p) s / (3n)``) ``sqrt(2 rho)``-GDP on ``Z``, so the
    call costs ``rho`` exactly as :class:`TruncatedMeanOracle` (same noise scales, same
    records); only the truncation differs. Parameters and attributes are those of
    :class:`TruncatedMeanOracle` (``radius_`` is the per-coordinate ``tau s``).
    The paper states this variant for ``k = 2`` only.

    References
    ----------
    .. [1] Kamath, G., Liu, X. and Zhang, H. (2021). arXiv:2106.01336, Appendix B.
    .. [2] Kamath, G., Singhal, V. and Ullman, J. (2020). Private mean estimation of
       heavy-tailed distributions. COLT.
    """

    def calibrate(self, n_samples, rho, shape, truncation=None):
        super().calibrate(n_samples, rho, shape, truncation)
        self.radius_ = min(self.truncation_ * self.gradient_scale, _FLOAT_MAX)
        return self

    def _ball_widening(self):
        # Coordinate-wise truncation: no matrix-vector path, the ball is not used.
        return None

    def _mean_query(self, design, U, centre):
        halfwidth, p = self.radius_, self.dim_
        rows = self._rows("Z")
        # Public: the clipped sum needs NaN-free gradients (1-d U, below) and a
        # correction h * count that cannot overflow.
        clip = U.ndim == 1 and halfwidth * self.n_samples_ < 1e300
        if clip:
            # A row with a non-finite u has every entry +-inf or NaN, all dropped:
            # leaving it out keeps NaN from the clipped sum and changes nothing.
            finite = np.isfinite(U)
            rows = finite if rows is None else rows & finite

        def clipped(G, rows):
            total, kept = _axis_clipped_sum(
                G.reshape(G.shape[0], -1), centre, halfwidth
            )
            return np.concatenate([total, kept])

        def masked(G, rows):
            total, kept = _axis_truncated_sum(
                G.reshape(G.shape[0], -1), centre, halfwidth
            )
            return np.concatenate([total, kept])

        out = design.gradient_chunk_sum(U, clipped if clip else masked, rows=rows)
        if clip and not np.all(np.isfinite(out)):
            # Only a non-finite entry of X~ (a NaN gradient) gets here:
            # LinearDesign holds finite data (the estimators validate it), see
            # TruncatedMeanOracle._mean_query.
            out = design.gradient_chunk_sum(U, masked, rows=rows)
        total, kept = out[:p], out[p:]
        return _floored_mean(centre, total, kept, self.n_)
