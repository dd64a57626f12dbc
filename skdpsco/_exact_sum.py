"""Exact, layout-independent weighted row sums ``X^T C`` of bounded contributions.

A floating-point sum depends on the order of its additions, so the same rows summed
in another chunking (another dask partition, another number of chunks) give other
bits. Here rows are grouped into fixed public blocks of ``B`` rows by their global
index; each block's sum is computed with BLAS in float64 (one call per block, on
C-contiguous rows: the same inputs, hence the same bits, whichever chunk holds the
block), rounded to a public grid ``g = 2^e`` and converted to an ``int64``; the
blocks are then added as integers, which is associative. The result is the same
integer, hence the same float, for every chunking whose chunk boundaries are
multiples of ``B``.

Sensitivity (replace-one). Let every row's contribution have l2 norm at most ``L``
(``||C_i x_i|| <= L``: the clipped per-sample gradients). Replacing one record
changes the contents of one block only; every other block's float sum is computed
from the same inputs, so its integer is unchanged, and the integer addition loses
nothing. The changed block's exact sum moves by at most ``2 L`` in l2; its float
sum carries a rounding error of at most ``gamma_B sum_i |C_i x_ij|`` per coordinate
(Higham 2002, eq. 3.5 / 4.4, ``gamma_B = B u / (1 - B u)``, ``u = 2^-53``), at most
``gamma_B B L`` in l2 by Minkowski's inequality, on each of the two datasets; the
saturation at the public block bound is a projection onto a box (1-Lipschitz), and
rounding each coordinate to the grid moves it by at most ``g / 2``. The released
total therefore moves by at most

    ``2 L + 2 gamma_B B L + g sqrt(d)``   (l2; ``g d`` in l1)

for ``d`` summed coordinates, whatever ``n``. A float sum of all ``n`` rows has a
rounding error that grows with ``n`` and differs between neighbouring datasets, so
its true sensitivity is not ``2 L``: that is the floating-point summation gap of
Casacuberta, Shoemate, Vadhan and Wagaman (2022, "Widespread underestimation of
sensitivity in differentially private libraries and how to fix it", CCS, Section
4), which blocking with exact integer accumulation closes: the rounding that does
depend on the data is confined to the one block that changed. The conversion of
the integer total to a float (:meth:`SumGrid.to_float`) is a fixed function of that
integer; noise added on the integer grid before the conversion makes it
post-processing, noise added after it needs ``2^-53 n L`` more sensitivity.

Overflow. Each coordinate of a block's sum is at most ``B L`` in magnitude (the
saturation bound ``M`` adds a ``2^-20`` margin for rounding), so one block's
integer is at most ``M / g + 1/2``; the grid is the finest power of two for which
``n_blocks (M / g + 1/2) <= 2^62``, so the integer total of any set of blocks fits
in an ``int64``, whatever the values.
"""

import math

import numpy as np

__all__ = [
    "BLOCK_ROWS",
    "ExactAccumulator",
    "SumGrid",
    "block_aligned",
    "block_boundaries",
    "block_integers",
    "block_sums",
    "check_chunk",
    "FOLD_LIMIT",
    "exact_mean_sensitivity",
    "exact_sum_error",
    "exact_sum_slack",
    "float_sum_error",
    "folded_block_sums",
    "exact_weighted_sum",
]

#: Rows per summation block: a public constant, the unit of exactness. Chunks of
#: dask input are rechunked to multiples of it.
BLOCK_ROWS = 4096

#: Largest integer total allowed: ``2^62`` leaves a factor 2 of ``int64`` range free.
_INT_LIMIT = 2.0**62

#: Relative margin of the saturation bound over ``B L`` (a block sum's float
#: rounding is at most ``gamma_B < 2^-32`` of it for ``B <= 2^20``).
_MARGIN = 2.0**-20


def n_blocks(n_samples, block_rows=BLOCK_ROWS):
    """Number of blocks of ``block_rows`` rows covering ``n_samples`` rows."""
    return -(-int(n_samples) // int(block_rows))


def block_boundaries(n_samples, block_rows=BLOCK_ROWS):
    """Global row indices where blocks start, followed by ``n_samples``.

    Parameters
    ----------
    n_samples : int
    block_rows : int, default=BLOCK_ROWS

    Returns
    -------
    ndarray of int64 of shape (n_blocks + 1,)
        ``[0, B, 2B, ..., n_samples]``: block ``b`` is rows
        ``bounds[b]:bounds[b + 1]``; the last block may be shorter.
    """
    n_samples, block_rows = int(n_samples), int(block_rows)
    return np.append(np.arange(0, n_samples, block_rows, dtype=np.int64), n_samples)


def block_aligned(X, block_rows=BLOCK_ROWS):
    """``X`` (a dask array) rechunked to whole blocks of rows, all columns in one.

    Each row chunk keeps about its size, rounded to a multiple of ``block_rows``
    (at least one block): the layout is public, and only the alignment matters
    for the sums. A chunking already aligned is kept as it is.
    """
    rows = X.chunks[0]
    aligned = all(size % block_rows == 0 for size in rows[:-1])
    if aligned and (X.ndim == 1 or len(X.chunks[1]) == 1):
        return X
    size = max(1, int(np.median(rows)) // block_rows) * block_rows
    return X.rechunk({0: size, 1: -1} if X.ndim == 2 else {0: size})


class SumGrid:
    """The public grid and saturation bound of the exact sums of one quantity.

    Parameters
    ----------
    bound : float
        ``L``, a public bound on the l2 norm of every row's contribution.
    n_samples : int
        Public number of rows summed.
    block_rows : int, default=BLOCK_ROWS

    Attributes
    ----------
    exponent : int
        ``e``, the grid is ``g = 2^e``.
    grid : float
    block_bound : float
        ``M = B L (1 + 2^-20)``: block sums are saturated at ``[-M, M]``.
    n_blocks : int
    """

    def __init__(self, bound, n_samples, block_rows=BLOCK_ROWS):
        bound = float(bound)
        self.block_rows = int(block_rows)
        self.n_samples = int(n_samples)
        if not 1 <= self.block_rows <= 2**20:
            raise ValueError(f"block_rows must be in [1, 2^20], got {block_rows!r}.")
        if self.n_samples < 0:
            raise ValueError(f"n_samples must be >= 0, got {n_samples!r}.")
        if not (bound > 0 and math.isfinite(bound)):
            raise ValueError(f"bound must be finite and > 0, got {bound!r}.")
        self.n_blocks = n_blocks(self.n_samples, self.block_rows)
        block_bound = self.block_rows * bound * (1.0 + _MARGIN)
        total = max(self.n_blocks, 1) * block_bound
        if not math.isfinite(total) or self.n_blocks >= 2.0**60:
            raise ValueError(
                f"Exact sums of {n_samples} rows of norm up to {bound!r} exceed "
                "the float range: scale the data or the bound down."
            )
        self.block_bound = block_bound
        # frexp: total / (2^62 - blocks) = m 2^e with m in [0.5, 1), so 2^e is above
        # it and n_blocks (M / 2^e + 1/2) <= 2^62.
        self.exponent = math.frexp(total / (_INT_LIMIT - max(self.n_blocks, 1)))[1]
        self.grid = math.ldexp(1.0, self.exponent)

    def to_integers(self, sums):
        """Block sums on the grid: saturated at ``M``, rounded half to even, as int64.

        A fixed map of each finite value. A NaN or infinite block sum is refused:
        contributions bounded by ``L`` sum to at most ``B L`` per block, and the
        callers keep every intermediate in the float range from public numbers
        alone (:func:`~skdpsco._design.exact_fold`), so a non-finite sum is a
        broken invariant, outside the sensitivity argument above (whose rounding
        bound assumes no overflow); it must not be mapped to a value silently.

        Raises
        ------
        FloatingPointError
            If a block sum is NaN or infinite; the message holds only the public
            grid (``n_samples``, ``B``, ``M``).
        """
        sums = np.asarray(sums, dtype=float)
        if not np.all(np.isfinite(sums)):
            raise FloatingPointError(
                f"A non-finite block sum reached the exact-sum grid of "
                f"{self.n_samples} rows in blocks of {self.block_rows} (block "
                f"bound {self.block_bound!r}): the contributions broke their "
                "public bound (an internal error, please report it)."
            )
        sums = np.clip(sums, -self.block_bound, self.block_bound)
        # Scaling by a power of two is exact (below 2^62 nothing overflows; a value
        # that underflows rounds to 0 either way), so rint rounds the exact ratio.
        with np.errstate(under="ignore"):
            return np.rint(np.ldexp(sums, -self.exponent)).astype(np.int64)

    def to_float(self, integers):
        """``integers * g`` as float64 (rounded to 53 bits: a fixed function of the
        exact integer)."""
        return np.ldexp(
            np.asarray(integers, dtype=np.int64).astype(float), self.exponent
        )


def _blocks_of(A, block_rows):
    """``A`` (C-contiguous rows) as ``(full blocks, tail)``: the full blocks as an
    ``(nb, B, ...)`` view, the tail (fewer than ``B`` rows) as a ``(1, r, ...)``
    view or None."""
    full = (A.shape[0] // block_rows) * block_rows
    head = A[:full].reshape((full // block_rows, block_rows) + A.shape[1:])
    tail = A[full:]
    return head, (tail[None] if tail.shape[0] else None)


_ONES = {}


def _ones_row(length):
    """A read-only ``(1, length)`` row of ones, kept per length: a fresh one per
    call cost a sixth of an exact sum's time."""
    ones = _ONES.get(length)
    if ones is None:
        if len(_ONES) >= 8:  # tails of many sizes: keep the cache small
            _ONES.clear()
        ones = np.ones((1, length))
        ones.flags.writeable = False
        _ONES[length] = ones
    return ones


def _stacked_products(X3, C3):
    """Per-block ``(X_b^T C_b, sum C_b)``: one BLAS product per block.

    numpy's matmul over a stack calls BLAS once per block with the block's own
    shape and strides, so a block's result depends on its contents only, not on
    the other blocks of its chunk.
    """
    ones = _ones_row(X3.shape[1])
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        if C3.ndim == 2:
            C3 = C3[:, None, :]
            return np.matmul(C3, X3)[:, 0, :], np.matmul(C3, ones.T)[:, 0, 0]
        return (
            np.matmul(X3.transpose(0, 2, 1), C3),
            np.matmul(ones, C3)[:, 0, :],
        )


def block_sums(X, C, block_rows=BLOCK_ROWS):
    """Float sums ``X_b^T C_b`` and ``sum C_b`` of every block of a chunk.

    Parameters
    ----------
    X : ndarray of shape (rows, d)
        Dense rows of a chunk that starts at a multiple of ``block_rows``.
    C : ndarray of shape (rows,) or (rows, K)
    block_rows : int, default=BLOCK_ROWS

    Returns
    -------
    head : ndarray of shape (n_blocks, d) or (n_blocks, d, K)
    total : ndarray of shape (n_blocks,) or (n_blocks, K)
    """
    # One memory layout for every block (a Fortran-ordered chunk would take
    # another BLAS path, with other roundings).
    X = np.ascontiguousarray(X, dtype=float)
    C = np.ascontiguousarray(C, dtype=float)
    heads, totals = [], []
    for X3, C3 in zip(
        _blocks_of(X, block_rows), _blocks_of(C, block_rows), strict=True
    ):
        if X3 is not None:
            head, total = _stacked_products(X3, C3)
            heads.append(head)
            totals.append(total)
    return np.concatenate(heads), np.concatenate(totals)


def folded_block_sums(head, total, center, weight):
    """Block sums of standardised rows ``(x_i - c) w`` from those of raw rows:
    ``w (X_b^T C_b - c sum C_b)``, an unused column (``w_j = 0``) 0.

    A fixed function of one block's float sums and public ``c``, ``w``; its
    rounding, with that of the raw block sums, is bounded in
    :func:`exact_mean_sensitivity` for ``||c w|| <= FOLD_LIMIT a`` (the rule
    under which a design folds).
    """
    shape = (1, -1) + (1,) * (head.ndim - 2)
    center = np.reshape(center, shape)
    weight = np.reshape(weight, shape)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        folded = (head - center * total[:, None]) * weight
    return np.where(weight != 0, folded, 0.0)


def exact_weighted_sum(X, C, head_grid, total_grid, start=0, fold=None):
    """Integer totals of ``X^T C`` and ``sum C`` over the blocks of a chunk.

    Parameters
    ----------
    X : ndarray of shape (rows, d)
    C : ndarray of shape (rows,) or (rows, K)
    head_grid, total_grid : SumGrid
        Grids of ``X^T C`` (bound ``L`` on ``||C_i x_i||``) and of ``sum C``
        (bound on ``||C_i||``); the same ``block_rows`` and ``n_samples``.
    start : int, default=0
        Global index of the chunk's first row: a multiple of ``block_rows``; a
        chunk shorter than a multiple of ``block_rows`` must end at ``n_samples``.
    fold : tuple of two ndarray of shape (d,), optional
        ``(center, weight)``: sum the standardised rows ``(x_i - c) w`` of the
        raw ``X``, each block's sums folded (:func:`folded_block_sums`) before
        they are rounded to the grid.

    Returns
    -------
    head : ndarray of int64 of shape (d,) or (d, K)
    total : ndarray of int64 of shape () or (K,)
        Exact: any chunking of the rows gives integers that add to the same
        totals.
    """
    check_chunk(np.shape(X)[0], start, head_grid)
    head, total = block_sums(X, C, head_grid.block_rows)
    return block_integers(head, total, head_grid, total_grid, fold)


def check_chunk(rows, start, grid):
    """Refuse a chunk of ``rows`` rows at global row ``start`` that does not
    consist of whole blocks of ``grid`` (a layout error: public)."""
    B = grid.block_rows
    end = start + rows
    if start % B or end > grid.n_samples or (rows % B and end != grid.n_samples):
        raise ValueError(
            f"A chunk of {rows} rows at row {start} does not consist of whole "
            f"blocks of {B} rows: rechunk to multiples of {B}."
        )


def block_integers(head, total, head_grid, total_grid, fold=None):
    """The integer totals of float block sums (:func:`block_sums`), folded
    first where ``fold = (center, weight)`` (:func:`folded_block_sums`).

    Each block is rounded on its own, so the blocks of a chunk may be
    converted together or one by one: the same integers.
    """
    if fold is not None:
        head = folded_block_sums(head, total, *fold)
    return (
        head_grid.to_integers(head).sum(axis=0),
        total_grid.to_integers(total).sum(axis=0),
    )


class ExactAccumulator:
    """Integer total of block sums on a public grid; order of additions immaterial.

    Parameters
    ----------
    grid : SumGrid
    shape : tuple of int
        Shape of one block's sum.
    """

    def __init__(self, grid, shape):
        self.grid = grid
        self.shape = tuple(shape)
        self.integers = np.zeros(self.shape, dtype=np.int64)
        self.count = 0

    def add_block_sums(self, sums):
        """Add float block sums of shape ``(k,) + shape`` (``k`` whole blocks)."""
        sums = np.asarray(sums, dtype=float).reshape((-1,) + self.shape)
        return self.add_integers(self.grid.to_integers(sums).sum(axis=0), len(sums))

    def add_integers(self, integers, count):
        """Add the integer total of ``count`` blocks (a worker's partial sum)."""
        self.count += int(count)
        if self.count > self.grid.n_blocks:
            # A layout error, not a data one: the public count of blocks bounds
            # the total's range.
            raise ValueError(
                f"{self.count} blocks added to a grid of {self.grid.n_blocks}."
            )
        self.integers = self.integers + np.asarray(integers, dtype=np.int64)
        return self

    def total(self):
        """The total as float64 (:meth:`SumGrid.to_float`)."""
        return self.grid.to_float(self.integers)


#: The largest ``||c w|| / a`` (released centre ``c``, weight ``w``, intercept
#: column ``a``) for which a design sums standardised rows by folding the
#: centring into each block's raw sums (:func:`folded_block_sums`); beyond it,
#: rows are standardised before they are summed.
FOLD_LIMIT = 2.0**10

#: Unit roundoff of float64.
_U = 2.0**-53


def exact_mean_sensitivity(bound, n_samples, n_coordinates, block_rows=BLOCK_ROWS):
    """l2 sensitivity (replace-one) of the float mean ``X~^T C / n`` of exact sums.

    The module's bound ``2 L (1 + gamma_B B) + g sqrt(p)`` on the integer total
    in output units (the head's grid and ``a`` times the intercept's: both at
    most ``4 g`` with ``g`` the grid of :class:`SumGrid` at ``L``), with the
    rounding of a folded block (:func:`folded_block_sums`) in place of
    ``gamma_B B L``: with ``|C_i| <= L / a`` (rows ``x~_i`` hold ``a``) and
    ``r = ||c w|| / a <= FOLD_LIMIT``, the raw sums' errors ``gamma_B sum_i
    |C_i| |w_j x_ij|`` and ``gamma_B |c_j w_j| sum_i |C_i|`` and the fold's
    three roundings add up to at most ``(2 gamma_B + 3.01 u) B L (1 + 2 r)`` in
    l2 (Higham 2002, eq. 3.5, Minkowski's inequality over the rows), plus the
    rounding of the three float steps that follow (the conversion, the
    intercept column's factor ``a``, the division by ``n``: ``3.001 u`` of each
    coordinate, ``u = 2^-53``) on each of the two neighbouring totals, whose l2
    norm is at most ``n L (1 + 2^-20)`` plus the grid rounding of every block.
    A public function of ``L``, ``n`` and the number of coordinates ``p``;
    ``1 + 2^-40`` covers its own evaluation in floating point.

    Parameters
    ----------
    bound : float
        ``L``, the public bound on every row's contribution.
    n_samples : int
    n_coordinates : int
        ``p``, the number of summed coordinates (all outputs, intercept included).
    block_rows : int, default=BLOCK_ROWS

    Returns
    -------
    float
    """
    grid = SumGrid(bound, n_samples, block_rows)
    B, n = grid.block_rows, max(grid.n_samples, 1)
    gamma = B * _U / (1.0 - B * _U)
    rounding = 4.0 * grid.grid * math.sqrt(n_coordinates)
    norm = n * bound * (1.0 + _MARGIN) + grid.n_blocks * rounding / 2.0
    block = (2.0 * gamma + 3.01 * _U) * B * (1.0 + 2.0 * FOLD_LIMIT)
    total = 2.0 * bound * (1.0 + block) + rounding + 2.0 * 3.001 * _U * norm
    return total / n * (1.0 + 2.0**-40)


def exact_sum_slack(bound, n_samples, n_coordinates, block_rows=BLOCK_ROWS):
    """What the floating-point summation adds to the sensitivity ``2 L / n``.

    :func:`exact_mean_sensitivity` less ``2 L / n``: the rounding of the one
    block a record changes, the grid rounding of that block, and the float
    steps after the integer sum. A mechanism whose exact-arithmetic argument
    bounds the mean's move by ``s <= 2 L / n`` in another way (Hölder's
    inequality from a dual norm, say) releases the exactly summed mean with
    sensitivity ``s + exact_sum_slack(L, n, p)``, by the triangle inequality
    (the exact sums' rows have ``||C_i x~_i||_2 <= L``).

    Parameters
    ----------
    bound : float
        ``L``, the public l2 bound on every row's contribution.
    n_samples : int
    n_coordinates : int
    block_rows : int, default=BLOCK_ROWS

    Returns
    -------
    float
        Positive: the ``1 + 2^-40`` of :func:`exact_mean_sensitivity` on ``2 L /
        n`` is part of it, and covers the rounding of ``s +`` this value.
    """
    n = max(int(n_samples), 1)
    exact = 2.0 * float(bound) / n
    return exact_mean_sensitivity(bound, n_samples, n_coordinates, block_rows) - exact


def exact_sum_error(bound, n_samples, n_coordinates, block_rows=BLOCK_ROWS):
    """l2 bound on the error of one exactly summed mean ``X~^T C / n``.

    For rows with ``||C_i x~_i||_2 <= L`` summed without a fold (the rows as
    they are stored), the float result differs from the exact real mean of the
    same float contributions by at most the float rounding of every block,
    ``gamma_B B L`` each in l2 (Higham 2002, eq. 3.5, Minkowski's inequality),
    ``gamma_B n L`` in all; the grid rounding of every block, ``g / 2`` per
    coordinate of the head and at most ``g`` for the intercept's (its grid
    times ``a`` is at most ``2 g``), below ``2 g sqrt(p)`` per block in l2;
    and ``3.001 u`` of each coordinate for the float steps after the integer
    sum (the conversion, the factor ``a``, the division by ``n``). The
    saturation never acts (a block's float sum stays below ``B L (1 + gamma_B)
    < M``). Unlike the sensitivity, every block's rounding counts here: this is
    the public accuracy of a gradient that a certificate needs
    (:mod:`skdpsco._solvers._certified`), about ``gamma_B L ~ 4.5e-13 L`` plus
    ``2 n_blocks g sqrt(p) / n ~ 2^-61 n_blocks sqrt(p) L``.

    Parameters
    ----------
    bound : float
        ``L``.
    n_samples : int
    n_coordinates : int
        ``p``, the number of summed coordinates (all outputs, intercept included).
    block_rows : int, default=BLOCK_ROWS

    Returns
    -------
    float
        A public function of ``L``, ``n`` and ``p``; ``1 + 2^-40`` covers its own
        evaluation in floating point.
    """
    grid = SumGrid(bound, n_samples, block_rows)
    B, n = grid.block_rows, max(grid.n_samples, 1)
    gamma = B * _U / (1.0 - B * _U)
    sums = gamma * n * bound + grid.n_blocks * 2.0 * grid.grid * math.sqrt(
        n_coordinates
    )
    norm = n * bound * (1.0 + _MARGIN) + sums
    return (sums + 3.001 * _U * norm) / n * (1.0 + 2.0**-40)


def float_sum_error(bound, n_samples):
    """l2 bound on the error of a float mean ``X~^T C / n`` summed row by row.

    A float sum of ``n`` terms errs by at most ``gamma_n sum_i |C_i x_ij|`` per
    coordinate in any order of the additions (Higham 2002, eq. 3.5), at most
    ``gamma_n n L`` in l2 for rows with ``||C_i x~_i||_2 <= L``; the division
    by ``n`` adds ``u`` of each coordinate. The public accuracy of the sums of
    sparse rows, which are not summed exactly.
    """
    n = max(int(n_samples), 1)
    gamma = n * _U / (1.0 - n * _U) if n * _U < 0.5 else math.inf
    return (gamma + 2.0 * _U) * float(bound) * (1.0 + 2.0**-40)
