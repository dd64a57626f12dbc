"""The scale-out seam: row-chunked aggregates of a linear model's design matrix.

A solver never loops over rows itself. For a linear model the per-sample gradient is
``u_i (outer) x~_i`` with ``x~_i = [x_i, a]`` (a public ``a``, 1 unless stated)
when an intercept is fitted, so all a
solver needs per iteration is: the linear predictions ``X~ W``, the row norms
``||x~_i||``, and weighted row sums ``X~^T C`` for an ``(n,)`` or ``(n, K)`` array of
per-sample coefficients ``C``; oracles that transform every gradient entry
(coordinate-wise robust means, histograms) get the per-sample gradients one row
chunk at a time through :meth:`LinearDesign.gradient_chunk_sum`. None of these
materialises an ``n x d`` array beyond one row chunk. Today the chunks are numpy /
scipy.sparse row blocks; a dask-backed design would implement the same methods
(map over chunks, sum on the driver).
"""

import math

import numpy as np
import scipy.sparse as sp

from ._exact_sum import (
    BLOCK_ROWS,
    FOLD_LIMIT,
    SumGrid,
    block_integers,
    block_sums,
    check_chunk,
    exact_sum_error,
    exact_sum_slack,
    float_sum_error,
    n_blocks,
)
from .utils._sparse import fresh_view

__all__ = [
    "LinearDesign",
    "block_row_l1_norms",
    "block_row_norms",
    "exact_assembled",
    "exact_fold",
    "exact_grids",
    "extended_predictions",
    "fused_block_sums",
    "fused_exact_sum",
    "standardised_norms",
    "standardised_rows",
    "StandardisedDesign",
    "summation_error",
    "summation_slack",
    "standardised_design",
    "RowClip",
    "row_clip_scales",
    "row_l2_norms",
    "row_lr_norms",
    "row_norm_parts",
]

#: Largest finite float64.
_FMAX = np.finfo(np.float64).max


def _summed_csr(X):
    """CSR form of a sparse block whose entries are the matrix's values.

    Stored duplicates are summed (every product with ``X`` sums them, so a norm
    must too); a sum past the float range saturates at the largest float rather
    than becoming ``inf`` (each stored value is finite, and a record must not turn
    into ``inf`` or NaN downstream). A copy only when duplicates may exist.
    """
    X = fresh_view(sp.csr_matrix(X))
    if not X.has_canonical_format:
        X = X.copy()
        with np.errstate(over="ignore", invalid="ignore"):
            X.sum_duplicates()
        np.clip(X.data, -_FMAX, _FMAX, out=X.data)
    return X


def row_norm_parts(X, r=2.0):
    """Overflow-free pieces of the l_r norms of the rows of a dense or sparse block.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
        Finite values (sparse duplicates are summed first, saturating).
    r : float, default=2.0
        Norm index, ``1 <= r < inf``.

    Returns
    -------
    top : ndarray of shape (n,)
        ``max_j |x_ij|`` (0 for a zero row).
    unit : ndarray of shape (n,)
        ``||x_i / top_i||_r``, in ``[1, d^(1/r)]`` for a nonzero row, 0 otherwise;
        ``||x_i||_r = top_i * unit_i``.

    Notes
    -----
    Each row is divided by its largest absolute entry (no entry exceeds it, so
    nothing overflows, and no ``1 / top`` is formed: it overflows for a subnormal
    maximum). No floating-point warning is raised for any finite input: a warning
    raised by one record only would tell neighbouring datasets apart.
    """
    r = float(r)
    if sp.issparse(X):
        X = _summed_csr(X)
        n = X.shape[0]
        counts = np.diff(X.indptr)
        rows = np.repeat(np.arange(n), counts)
        a = np.abs(X.data)
        top = np.zeros(n)
        nonempty = counts > 0
        if a.size:
            top[nonempty] = np.maximum.reduceat(a, X.indptr[:-1][nonempty])
        safe = np.where(top > 0, top, 1.0)
        # Entries far below their row's largest underflow to 0: harmless, they
        # count for less than one rounding of the norm.
        with np.errstate(under="ignore"):
            unit = a / safe[rows]
            weights = unit * unit if r == 2.0 else unit**r
        sums = np.bincount(rows, weights=weights, minlength=n)
    else:
        X = np.asarray(X, dtype=float)
        a = np.abs(X)
        top = a.max(axis=1) if X.shape[1] else np.zeros(X.shape[0])
        safe = np.where(top > 0, top, 1.0)
        with np.errstate(under="ignore"):
            unit = a / safe[:, None]
            if r == 2.0:
                sums = np.einsum("ij,ij->i", unit, unit)
            else:
                sums = np.sum(unit**r, axis=1)
    unit_norms = np.sqrt(sums) if r == 2.0 else sums ** (1.0 / r)
    return top, np.where(top > 0, unit_norms, 0.0)


def row_lr_norms(X, r=2.0):
    """l_r norms of the rows of a dense or scipy.sparse block.

    Computed from :func:`row_norm_parts` (no overflow, underflow or division
    warning for any finite input); a norm beyond the float range is ``inf``.
    Sparse duplicates are summed first, as every product with ``X`` sums them.
    """
    top, unit = row_norm_parts(X, r)
    # Past the float range the norm is inf: callers compare it to a bound.
    with np.errstate(over="ignore", under="ignore"):
        return top * unit


def row_l2_norms(X):
    """l2 norms of the rows of a dense or scipy.sparse block (:func:`row_lr_norms`).

    Each row is divided by its largest absolute entry first (no entry exceeds it,
    so nothing overflows or underflows, and no ``1 / max`` is formed: it overflows
    for a subnormal maximum); a norm beyond the float range is ``inf``. No
    floating-point warning is raised for any finite input (a warning raised by one
    record only would tell neighbouring datasets apart).
    """
    return row_lr_norms(X, 2.0)


def row_clip_scales(X, r, bound):
    """Per-row factors ``s_i = min(1, bound / ||x_i||_r)``, overflow-free.

    ``s_i x_i`` has ``||.||_r <= bound`` for every finite row, including rows
    whose norm is past the float range: their factor is formed as
    ``(bound / top_i) / unit_i`` (:func:`row_norm_parts`) instead of
    ``bound / inf = 0``. A subnormal factor is rounded down by two units in the
    last place, so that its coarse rounding cannot push the clipped row over the
    bound. Rows within the bound get exactly 1. No floating-point warning for any
    finite input. A function of one row and the public ``bound`` only.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
    r : float
        Norm index, ``1 <= r < inf``.
    bound : float
        Public bound, ``> 0``.

    Returns
    -------
    ndarray of shape (n,)
    """
    top, unit = row_norm_parts(X, r)
    # Overflow (inf: above any bound) and underflow (a subnormal row, or factor)
    # are both expected and handled below.
    with np.errstate(over="ignore", under="ignore"):
        norms = top * unit
        above = norms > bound
        huge = np.isinf(norms)
        # Only the rows above the bound are divided: a subnormal norm must not
        # overflow (a warning on one neighbour only would be a side channel).
        direct = bound / np.where(above & ~huge, norms, 1.0)
        split = (bound / np.where(huge, top, 1.0)) / np.where(huge, unit, 1.0)
        scales = np.where(huge, split, direct)
        # A subnormal factor carries fewer digits (1e-8 relative error and
        # worse): rounded down by two units, the clipped row exceeds the bound by
        # no more than the norm's own rounding, as for a normal factor.
        tiny = scales < np.finfo(np.float64).tiny
        down = np.nextafter(np.nextafter(scales, 0.0), 0.0)
    return np.where(above, np.where(tiny, down, scales), 1.0)


class RowClip:
    """The per-row map ``x_i -> s_i x_i``, ``s_i = min(1, bound / ||x_i||_r)``.

    Clipping a row to the public bound is a function of that row only
    (:func:`row_clip_scales`), so the clipped rows are a dataset of their own,
    neighbouring whenever the raw ones are. Picklable: on dask input it runs
    chunk by chunk on the workers. Each chunk is read C-contiguous first, so
    that a row's norm (a reduction along the row) is summed in the same order
    whatever the layout or the chunk around it: the same bits in memory and on
    every chunking.

    Parameters
    ----------
    r : float
        Norm index, ``1 <= r < inf``.
    bound : float
        Public bound, ``> 0``.
    """

    def __init__(self, r, bound):
        self.r = float(r)
        self.bound = float(bound)

    def __call__(self, X):
        if sp.issparse(X):
            X = sp.csr_matrix(X)
            scales = row_clip_scales(X, self.r, self.bound)
            # A subnormal product underflows harmlessly (no warning for one
            # record only).
            with np.errstate(under="ignore"):
                return sp.csr_matrix(X.multiply(scales[:, None]))
        X = np.ascontiguousarray(X, dtype=float)
        scales = row_clip_scales(X, self.r, self.bound)
        with np.errstate(under="ignore"):
            return X * scales[:, None]


#: Sums of squares in this range lost no digit to underflow and did not overflow:
#: their square root is the norm to rounding.
_EXACT_SUMS = (2.0**-1000, 2.0**1000)


def dense_row_l2_norms(Z, work=None):
    """l2 norms of the rows of a dense block, or an upper bound for extreme rows.

    The sum of squares is computed directly; a row whose sum lies outside
    ``[2^-1000, 2^1000]`` (entries near the float range, where squares overflow,
    or all below about ``2^-500``, where they underflow) gets its l1 norm
    ``>= ||z_i||_2`` instead (sums of absolute values neither overflow early nor
    underflow). An upper bound only ever clips a gradient more, so every bound
    ``||c_i x~_i|| <= C`` built on these norms holds. Both are computed for every
    row (no data-dependent branch or timing), with no floating-point warning; a
    norm past the float range is ``inf``. ``work``, if given, is a buffer of
    ``Z``'s shape for the absolute values (a fresh megabyte-sized temporary per
    chunk costs more than the arithmetic).
    """
    Z = np.asarray(Z, dtype=float)
    with np.errstate(over="ignore", under="ignore"):
        sums = np.einsum("ij,ij->i", Z, Z)
        l1 = np.abs(Z, out=work) @ np.ones(Z.shape[1])
        exact = (sums >= _EXACT_SUMS[0]) & (sums <= _EXACT_SUMS[1])
        return np.where(exact, np.sqrt(sums), l1)


#: Entries (rows x columns) per row chunk of the fused gradient pass: 2 MiB of
#: float64, so the chunk read for the predictions is still in cache for the sum.
FUSED_CHUNK_ENTRIES = 2**18

#: Entries per chunk of whole blocks in the exact sums (8 MiB): each chunk costs
#: some twenty numpy calls besides its arithmetic, which at 2^18 entries (one
#: block of 64 columns) took a third of an exact gradient's time at d = 20;
#: a chunk's blocks are summed one by one whatever its size (the same bits).
_EXACT_CHUNK_ENTRIES = 2**20

#: Rows per chunk for the aggregates that need a temporary as large as the chunk.
DEFAULT_CHUNK_ROWS = 65536

#: Entries (rows x parameters) per chunk of materialised per-sample gradients:
#: 2**21 doubles = 16 MiB, whatever n.
DEFAULT_CHUNK_ENTRIES = 2**21

#: Non-zeros (on average) per row chunk of a scipy.sparse design in the row-norm
#: aggregates: 2**18 entries, about 3 MiB per chunk copy.
_SPARSE_CHUNK_NNZ = 2**18

#: Linear predictions are clipped to this magnitude so that an overflowing row never
#: turns into NaN downstream (inf - inf in a softmax).
_Z_MAX = 1e300


def _rows_of(X, rows, out=None):
    """Dense rows ``rows`` (a slice: a view where ``X`` is dense; an index array:
    gathered into the head of ``out`` if given) of a dense or sparse ``X``."""
    if sp.issparse(X):
        return X[rows].toarray()
    if isinstance(rows, slice) or out is None:
        return np.asarray(X[rows])
    # A row gather into a reused contiguous buffer (fancy indexing would copy
    # into a fresh temporary).
    return np.take(X, rows, axis=0, out=out[: len(rows)], mode="clip")


def _finite_predictions(Z):
    """Predictions clipped to ``[-1e300, 1e300]``, NaN (``inf - inf``) to 0: a
    fixed map of each value, the same work whatever the values."""
    Z = np.where(Z == Z, Z, 0.0)
    return np.clip(Z, -_Z_MAX, _Z_MAX, out=Z)


# Exact sums (:mod:`skdpsco._exact_sum`): the kernel shared by the in-memory
# design and the dask one, run block by block so that every row's bits depend on
# its block of BLOCK_ROWS rows (by global index) only, whatever chunk holds it.


def _block_slices(rows, block_rows):
    return [slice(s, min(s + block_rows, rows)) for s in range(0, rows, block_rows)]


def _extended_products(X, head, offset):
    """``fl64(X @ head + offset)`` accumulated in ``np.longdouble`` (unit
    ``u_ld = np.finfo(np.longdouble).eps / 2``), clipped as in
    :meth:`LinearDesign.predict`: within ``(2u + gamma^ld_k)(1 + 2u) ||x~||
    ||w||`` of the exact prediction (Higham 2002, eq. 3.5, with ``u_ld``; ``u``
    for the intercept's float64 product and ``u`` for the final rounding;
    :func:`~skdpsco._solvers._certified.prediction_error`). ``X`` is one chunk
    (dense or CSR): only its rows are widened, never the whole matrix."""
    head = np.asarray(head, dtype=np.longdouble)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if sp.issparse(X):
            Z = np.asarray(X.astype(np.longdouble) @ head)
        else:
            Z = np.matmul(np.asarray(X, dtype=np.longdouble), head)
        Z += np.asarray(offset, dtype=np.longdouble)
        # One rounding of each extended sum to the nearest float64 (u |z|).
        Z = Z.astype(np.float64)
    return _finite_predictions(Z)


def extended_predictions(X, head, offset, chunk_rows=DEFAULT_CHUNK_ROWS):
    """:func:`_extended_products` of ``X`` (dense or sparse) in row chunks of at
    most ``chunk_rows`` rows and about :data:`FUSED_CHUNK_ENTRIES` entries (stored
    non-zeros for sparse rows), so the widened copy is one chunk's. Each row's
    sum runs in the row's own order, so its bits do not depend on the chunk."""
    n = X.shape[0]
    Z = np.empty((n,) + np.shape(head)[1:])
    entries = X.nnz / max(n, 1) if sp.issparse(X) else X.shape[1]
    step = max(1, min(int(chunk_rows), int(FUSED_CHUNK_ENTRIES // max(entries, 1))))
    for start in range(0, n, step):
        rows = slice(start, min(start + step, n))
        Z[rows] = _extended_products(X[rows], head, offset)
    return Z


def _block_predictions(X, head, offset, block_rows, extended=False):
    """``X @ head + offset`` clipped as in :meth:`LinearDesign.predict`, one BLAS
    product per block: a row's bits depend on its block only, not on the chunk
    around it (a product over many rows may round a row by its position).
    ``extended``: accumulated in ``np.longdouble`` instead, then rounded to
    float64 (:func:`_extended_products`), for the certificate's gradient."""
    if extended:
        return extended_predictions(X, head, offset, block_rows)
    n = X.shape[0]
    full = (n // block_rows) * block_rows
    Z = np.empty((n,) + head.shape[1:])
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if full:
            # One BLAS call per block of the stack, with the block's own shape:
            # the bits of a loop over the blocks, in one numpy call.
            stack = (full // block_rows, block_rows)
            np.matmul(
                X[:full].reshape(stack + X.shape[1:]),
                head,
                out=Z[:full].reshape(stack + head.shape[1:]),
            )
        if full < n:
            np.matmul(X[full:], head, out=Z[full:])
        Z += offset
    return _finite_predictions(Z)


def block_row_norms(X, fit_intercept, intercept_column, block_rows=BLOCK_ROWS):
    """``||x~_i||`` as :meth:`LinearDesign.row_norms` computes them, block by
    block (C-contiguous rows of a chunk that starts on a block boundary)."""
    norms = np.empty(X.shape[0])
    for rows in _block_slices(X.shape[0], block_rows):
        norms[rows] = dense_row_l2_norms(X[rows])
    return np.hypot(norms, intercept_column) if fit_intercept else norms


def block_row_l1_norms(X, fit_intercept, intercept_column, block_rows=BLOCK_ROWS):
    """``||x~_i||_1`` as :meth:`LinearDesign.row_l1_norms` computes them, block by
    block (C-contiguous rows of a chunk that starts on a block boundary, as the
    fit sees them): a row's bits depend on its block only, in any chunking."""
    norms = np.empty(X.shape[0])
    for rows in _block_slices(X.shape[0], block_rows):
        norms[rows] = row_lr_norms(X[rows], 1.0)
    return norms + fit_intercept * intercept_column


def exact_grids(bound, n_samples, intercept, block_rows=BLOCK_ROWS):
    """The public grids of the exact head ``X^T C`` (``||C_i x~_i|| <= L``) and of
    ``sum C`` (``|C_i| a <= L`` with an intercept column ``a``).

    Parameters
    ----------
    bound : float
        ``L``.
    n_samples : int
    intercept : tuple of (bool, float)
        ``(fit_intercept, intercept_column)``.
    block_rows : int, default=BLOCK_ROWS
    """
    fit_intercept, column = intercept
    tail = bound / column if fit_intercept else bound
    return (
        SumGrid(bound, n_samples, block_rows),
        SumGrid(tail, n_samples, block_rows),
    )


def exact_assembled(grids, head, total, intercept):
    """``X~^T C`` as float64 from the integer totals of ``X^T C`` and ``sum C``
    (a fixed function of the integers: post-processing of the exact sum)."""
    fit_intercept, column = intercept
    head = grids[0].to_float(head)
    if not fit_intercept:
        return head
    tail = column * grids[1].to_float(total)
    return np.concatenate([head, np.reshape(tail, (1,) + head.shape[1:])])


def fused_exact_sum(
    X,
    y,
    W,
    coefficients,
    grids,
    intercept,
    start=0,
    weight=None,
    norms=None,
    fold=None,
    extended=False,
):
    """Exact integer totals of ``X^T C`` and ``sum C`` with ``C`` the coefficients
    at ``W`` of the rows of one chunk: predictions, row norms, coefficients and
    block sums in one pass, block by block.

    The kernel of the in-memory exact sums (:meth:`LinearDesign.exact_fused_sum`)
    and of the dask design's, run on every chunk: the same rows give the same
    integers in any chunking aligned to the blocks.

    Parameters
    ----------
    X : ndarray of shape (rows, d)
        Rows of a chunk that starts at the multiple ``start`` of the block size,
        as the fit sees them (standardised).
    y : ndarray of shape (rows,)
    W : ndarray of shape (dim,) or (dim, K)
    coefficients : callable
        ``coefficients(Z, y, row_norms) -> C``, a row-wise map with
        ``||C_i x~_i|| <= L`` (``L`` the bound of ``grids[0]``); picklable, it runs
        on the workers. A map with a ``row_statistic(row_norms)`` method gets
        that statistic of the norms instead (the caller passes it as
        ``norms``).
    grids : tuple of SumGrid
        Grids of the head ``X^T C`` and of ``sum C`` (:func:`exact_grids`).
    intercept : tuple of (bool, float)
        ``(fit_intercept, intercept_column)``.
    start : int, default=0
    weight : ndarray of shape (rows,), optional
        Per-record weights in ``[0, 1]``, multiplying each row's coefficient
        after the map (the bound ``L`` still holds).
    norms : ndarray of shape (rows,), optional
        :func:`block_row_norms` of ``X``, if already known; required with
        ``fold`` (the norms of the standardised rows, :func:`standardised_norms`).
    fold : tuple of two ndarray of shape (d,), optional
        ``(center, weight)``: ``X`` holds raw rows, the fit sees ``(x_i - c) w``;
        predictions and block sums fold the centring in (as
        :class:`StandardisedDesign` does; :func:`folded_block_sums`).
    extended : bool, default=False
        Accumulate the predictions in ``np.longdouble`` (:func:`_block_predictions`),
        as the certificate's gradient does.

    Returns
    -------
    head : ndarray of int64 of shape (d,) or (d, K)
    total : ndarray of int64 of shape () or (K,)
    """
    check_chunk(np.shape(X)[0], start, grids[0])
    head, total = fused_block_sums(
        X,
        y,
        W,
        coefficients,
        intercept,
        grids[0].block_rows,
        weight,
        norms,
        fold,
        extended,
    )
    return block_integers(head, total, grids[0], grids[1], fold)


def fused_block_sums(
    X,
    y,
    W,
    coefficients,
    intercept,
    block_rows,
    weight=None,
    norms=None,
    fold=None,
    extended=False,
):
    """The float block sums (:func:`~skdpsco._exact_sum.block_sums`) of the
    coefficients of :func:`fused_exact_sum`, before their rounding to the grid
    (raw rows' sums where ``fold`` is given; predictions in ``np.longdouble``
    where ``extended``)."""
    fit_intercept, column = intercept
    X = np.ascontiguousarray(X, dtype=float)
    head, offset = _folded_head(W, X.shape[1], intercept, fold)
    Z = _block_predictions(X, head, offset, block_rows, extended)
    if norms is None:
        norms = block_row_norms(X, fit_intercept, column, block_rows)
    C = np.asarray(coefficients(Z, np.asarray(y), norms), dtype=float)
    if weight is not None:
        C = C * (weight if C.ndim == 1 else weight[:, None])
    return block_sums(X, C, block_rows)


def _folded_head(W, d, intercept, fold=None):
    """``(V, b)`` with ``X~ W = X V + b`` for rows ``X~`` read as ``X`` (or as
    ``(X - c) w`` folded: ``V = w W``, ``b = a W_d - c . V``, as in
    :meth:`StandardisedDesign._head`)."""
    fit_intercept, column = intercept
    head = W[:d]
    offset = column * W[d] if fit_intercept else 0.0
    if fold is None:
        return head, offset
    center, weight = fold
    head = (weight if W.ndim == 1 else weight[:, None]) * head
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        return head, offset - center @ head


def exact_fold(center, weight, fit_intercept, intercept_column=1.0, block_bound=None):
    """``(center, weight)`` where exact sums of the standardised rows fold the
    centring into the raw rows' block sums, else None (the rows are standardised
    before they are summed): folding keeps the sums' rounding within the bound
    of :func:`~skdpsco._exact_sum.exact_mean_sensitivity` while
    ``||c w|| / a <= FOLD_LIMIT`` (public numbers).

    With ``block_bound`` (``B L``, :attr:`~skdpsco._exact_sum.SumGrid.block_bound`
    of the head's grid), the raw block sums must also stay in the float range:
    ``|C_i x_ij| <= L / w_j + L |c_j| / a`` for coefficients with
    ``|C_i| ||x~_i|| <= L`` (``||x~_i|| >= a``), so a block's raw sum is at most
    ``B L max_j (1 / w_j + |c_j| / a)``; past ``2^1000`` a raw sum could overflow
    and the fold's rounding bound would not hold (public numbers again).
    """
    used = weight != 0
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        ratio = np.linalg.norm(center[used] * weight[used])
        raw = (
            block_bound is not None
            and np.any(used)
            and float(block_bound)
            * float(
                np.max(1.0 / weight[used] + np.abs(center[used]) / intercept_column)
            )
        )
    if raw is not False and not raw <= 2.0**1000:
        return None
    if fit_intercept and ratio <= FOLD_LIMIT * intercept_column:
        return center, weight
    return None


def standardised_norms(X, center, weight, intercept, block_rows=BLOCK_ROWS):
    """:func:`block_row_norms` of ``standardised_rows(X, center, weight)``, with
    a norm at or past the largest float set to ``inf``: a standardised value
    clipped to the float range is not clipped in the folded products, which read
    the raw row, and the coefficient ``L / inf = 0`` keeps such a row out."""
    norms = block_row_norms(
        standardised_rows(X, center, weight), *intercept, block_rows
    )
    return np.where(norms >= _FMAX, np.inf, norms)


class LinearDesign:
    """The design matrix ``X~ = [X, a]`` (intercept column implicit).

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n_samples, n_features)
        Validated, finite, float64.
    fit_intercept : bool
        Append an implicit constant column.
    chunk_rows : int, default=65536
    intercept_column : float, default=1.0
        ``a > 0``, the public value of the implicit column (scikit-learn's
        ``intercept_scaling``): the intercept is ``a`` times its coefficient, and
        a row's norms include ``a``.
    """

    #: Whether :meth:`predict` is ``X~ W`` to the rounding of a dot product of the
    #: rows as the fit sees them (``(dim + 1) 2^-53 ||x~|| ||W||``).
    predictions_exact = True

    def __init__(
        self, X, fit_intercept, chunk_rows=DEFAULT_CHUNK_ROWS, intercept_column=1.0
    ):
        self.X = X
        self.fit_intercept = bool(fit_intercept)
        self.intercept_column = float(intercept_column)
        self.chunk_rows = int(chunk_rows)
        self.n_samples, self.n_features = X.shape
        self.dim = self.n_features + int(self.fit_intercept)
        self._row_norms = None
        self._row_l1_norms = None

    def subset(self, rows):
        """The design of the rows ``rows`` (a batch); copies only those rows."""
        return LinearDesign(
            self.X[rows], self.fit_intercept, self.chunk_rows, self.intercept_column
        )

    def batches(self, schedule, y, sample_weight=None):
        """The design, targets and weights of each batch of ``schedule`` (an
        iterator of index arrays), one batch at a time.

        Parameters
        ----------
        schedule : iterator of ndarray of int
        y : ndarray of shape (n_samples,) or (n_samples, K)
        sample_weight : ndarray of shape (n_samples,) or None

        Yields
        ------
        batch : LinearDesign
            :meth:`subset` of the rows.
        targets : ndarray
        weights : ndarray or None
        """
        for rows in schedule:
            weights = None if sample_weight is None else sample_weight[rows]
            yield self.subset(rows), y[rows], weights

    def row_mapped(self, row_map):
        """The design of the rows mapped by ``row_map`` (a function of each row
        only, e.g. :class:`RowClip`), as plain stored rows: dense rows are
        mapped chunk by chunk into one new array, sparse ones at once."""
        if sp.issparse(self.X):
            X = row_map(self.matrix())
        else:
            X = np.empty((self.n_samples, self.n_features))
            for rows in self._chunks(FUSED_CHUNK_ENTRIES):
                X[rows] = row_map(self.block(rows))
        return LinearDesign(
            X, self.fit_intercept, self.chunk_rows, self.intercept_column
        )

    def parameter_shape(self, n_outputs):
        """``(dim,)`` for one output (vector parameters), ``(dim, K)`` for ``K``."""
        return (self.dim,) if n_outputs == 1 else (self.dim, n_outputs)

    def penalty_mask(self, shape):
        """Ones of ``shape`` with the intercept row 0: the public L2 penalty
        ``(lambda / 2) ||w||^2`` leaves the intercept unpenalised."""
        mask = np.ones(shape)
        if self.fit_intercept:
            mask[self.n_features] = 0.0
        return mask

    def _chunks(self, entries=DEFAULT_CHUNK_ENTRIES):
        if sp.issparse(self.X):
            # A sparse chunk's temporaries are as large as its non-zeros, not
            # rows x dim: bounding the rows by DEFAULT_CHUNK_ENTRIES / dim would
            # make d = 10^6 walk the rows two at a time. Bound the non-zeros of a
            # chunk instead (on average), so the copies stay a few MiB.
            per_row = max(1, self.X.nnz // max(self.n_samples, 1))
            step = max(1, min(self.chunk_rows, _SPARSE_CHUNK_NNZ // per_row))
        else:
            step = max(1, min(self.chunk_rows, entries // max(self.dim, 1)))
        for start in range(0, self.n_samples, step):
            yield slice(start, min(start + step, self.n_samples))

    def _head(self, W):
        """``(V, b)`` with ``X~ W = X V + b``: the products read ``X`` as stored."""
        head = W[: self.n_features]
        offset = (
            self.intercept_column * W[self.n_features] if self.fit_intercept else 0.0
        )
        return head, offset

    def _assemble(self, head_sum, total):
        """``X~^T C`` from ``X^T C`` and ``sum_i C_i`` (see :meth:`_head`)."""
        head = np.asarray(head_sum, dtype=float)
        if not self.fit_intercept:
            return head
        tail = self.intercept_column * total
        if head.ndim == 2:
            return np.vstack([head, tail])
        if head.flags.owndata and head.flags.c_contiguous and head.base is None:
            # Grow in place (realloc) rather than np.append: at d = 10^6 a second
            # length-d buffer would be a third of a sparse X's size.
            head.resize(self.dim, refcheck=False)
            head[self.n_features] = tail
            return head
        return np.append(head, tail)

    def matrix(self):
        """``X`` as the fit sees it (without the intercept column)."""
        return self.X

    def block(self, rows, out=None):
        """The dense rows ``rows`` (a slice or an index array) of ``X`` as the fit
        sees them (without the intercept column); ``out``, if given, a buffer of
        at least as many rows that the result may be written into."""
        return _rows_of(self.X, rows, out)

    def predict(self, W, extended=False):
        """Linear predictions ``X~ W``: shape (n,) for W (dim,), (n, K) for W (dim, K).

        Predictions are clipped to ``[-1e300, 1e300]`` (overflowing products keep
        their sign), NaN from ``inf - inf`` becomes 0: a deterministic function of one
        row and the public ``W``, so every sensitivity bound downstream still holds.
        ``extended``: each prediction is accumulated in ``np.longdouble``, chunk
        by chunk, and rounded to float64 once (:func:`extended_predictions`), as
        the certificates' final gradient reads them.
        """
        head, offset = self._head(W)
        if extended:
            return extended_predictions(self.X, head, offset, self.chunk_rows)
        # Products with a subnormal entry underflow: harmless, and not to be
        # reported (a warning for one record only tells neighbours apart).
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            Z = self.X @ head
            Z = Z + offset
        return _finite_predictions(Z)

    def fused_weighted_sum(self, W, coefficients):
        """``X~^T C`` with ``C = coefficients(X~ W, rows)``, in one read of ``X``.

        Row chunk by row chunk (:data:`FUSED_CHUNK_ENTRIES` entries each), the
        chunk's predictions (clipped as in :meth:`predict`), its per-row
        coefficients and its weighted sum are computed while the chunk is in
        cache, so an iteration of a gradient method reads ``X`` from memory
        once, and no temporary is larger than a chunk.

        Parameters
        ----------
        W : ndarray of shape (dim,) or (dim, K)
        coefficients : callable
            ``coefficients(Z_chunk, rows) -> C_chunk``, a row-wise map of the
            predictions of the rows ``rows`` (a slice) to their coefficients, of
            the shape of ``Z_chunk``.

        Returns
        -------
        ndarray of the shape of ``W``
        """
        head, offset = self._head(W)
        if sp.issparse(self.X):
            # Sparse products cost their non-zeros and leave only (n,) or (n, K)
            # temporaries, while every row slice copies its rows: one pass over
            # all rows (a public rule, whatever the non-zeros).
            step = max(1, self.n_samples)
        else:
            step = max(1, min(self.chunk_rows, FUSED_CHUNK_ENTRIES // max(self.dim, 1)))
        head_sum = np.zeros(head.shape)
        total = np.zeros(W.shape[1:])
        for start in range(0, self.n_samples, step):
            rows = slice(start, min(start + step, self.n_samples))
            # A slice of a sparse matrix is a copy, even of all its rows.
            chunk = self.X if step >= self.n_samples else self.X[rows]
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                Z = chunk @ head
                Z = Z + offset
            C = np.asarray(coefficients(_finite_predictions(Z), rows), dtype=float)
            # Callers bound |C_i| ||x~_i||, so nothing overflows; subnormal
            # products underflow harmlessly (no warning for one record only).
            with np.errstate(under="ignore"):
                head_sum += np.asarray(chunk.T @ C)
            total += C.sum(axis=0)
        return self._assemble(head_sum, total)

    #: Whether :meth:`exact_fused_sum` reads these rows (dense ones; sparse rows
    #: keep the float path of :meth:`fused_weighted_sum`).
    @property
    def exact_sums(self):
        return not sp.issparse(self.X)

    def exact_fused_sum(
        self, W, coefficients, bound, y, sample_weight=None, extended=False
    ):
        """``X~^T C`` with ``C = coefficients(X~ W, y, ||x~||)``, summed exactly.

        The rows are read in chunks of whole blocks (:mod:`skdpsco._exact_sum`);
        each chunk's predictions, coefficients and block sums are computed while
        it is in cache (:func:`fused_exact_sum`), and the blocks' integers are
        added. The result is a fixed function of the integer totals, the same,
        bit for bit, as the dask design's for any chunking of the same rows.

        Parameters
        ----------
        W : ndarray of shape (dim,) or (dim, K)
        coefficients : callable
            ``coefficients(Z, y, row_norms) -> C``, a row-wise map with
            ``||C_i x~_i|| <= bound``.
        bound : float
            Public ``L``: it fixes the grid of the integer sums.
        y : ndarray of shape (n_samples,)
        sample_weight : ndarray of shape (n_samples,), optional
            Weights in ``[0, 1]``, applied after the map.
        extended : bool, default=False
            Predictions accumulated in ``np.longdouble`` (:func:`fused_exact_sum`).

        Returns
        -------
        ndarray of the shape of ``W``
        """
        W = np.asarray(W, dtype=float)
        intercept = (self.fit_intercept, self.intercept_column)
        grids = exact_grids(bound, self.n_samples, intercept)
        norms = self._row_statistic(coefficients)
        fold = self._exact_fold(grids[0].block_bound)
        B = BLOCK_ROWS
        heads = np.empty((n_blocks(self.n_samples, B), self.n_features) + W.shape[1:])
        totals = np.empty(heads.shape[:1] + W.shape[1:])
        for rows, block in self._exact_chunks(fold is None):
            blocks = slice(rows.start // B, -(-rows.stop // B))
            heads[blocks], totals[blocks] = fused_block_sums(
                block,
                y[rows],
                W,
                coefficients,
                intercept,
                B,
                weight=None if sample_weight is None else sample_weight[rows],
                norms=norms[rows],
                fold=fold,
                extended=extended,
            )
        # Every block rounded on its own, then added as integers (one
        # conversion per call): the integers of fused_exact_sum in any chunking.
        head, total = block_integers(heads, totals, *grids, fold)
        return exact_assembled(grids, head, total, intercept)

    def _exact_fold(self, block_bound):
        """``(center, weight)`` where the exact sums fold a standardisation into
        the raw rows' block sums, else None (the rows are read as they are)."""
        return None

    def _exact_chunks(self, standardised=True):
        """``(rows, block)``: C-contiguous rows (as the fit sees them, or raw),
        in chunks of whole blocks of about :data:`FUSED_CHUNK_ENTRIES` entries."""
        blocks = max(1, _EXACT_CHUNK_ENTRIES // (BLOCK_ROWS * max(self.n_features, 1)))
        step = blocks * BLOCK_ROWS
        buffer = np.empty((min(step, self.n_samples), self.n_features))
        for start in range(0, self.n_samples, step):
            rows = slice(start, min(start + step, self.n_samples))
            chunk = self.X[rows]
            if not chunk.flags.c_contiguous:
                chunk = buffer[: chunk.shape[0]]
                chunk[...] = self.X[rows]
            yield rows, self._exact_rows(chunk) if standardised else chunk

    def _exact_rows(self, chunk):
        """A chunk of raw rows as the fit sees them."""
        return chunk

    def _exact_norms(self):
        """:func:`block_row_norms` of the rows as the fit sees them (cached)."""
        if getattr(self, "_block_norms_cache", None) is None:
            norms = np.empty(self.n_samples)
            intercept = (self.fit_intercept, self.intercept_column)
            for rows, block in self._exact_chunks(standardised=False):
                norms[rows] = self._exact_row_norms(block, intercept)
            self._block_norms_cache = norms
        return self._block_norms_cache

    def _exact_row_norms(self, chunk, intercept):
        return block_row_norms(chunk, *intercept)

    def _exact_l1_norms(self):
        """:func:`block_row_l1_norms` of the rows as the fit sees them (cached)."""
        if getattr(self, "_block_l1_cache", None) is None:
            norms = np.empty(self.n_samples)
            intercept = (self.fit_intercept, self.intercept_column)
            for rows, block in self._exact_chunks():
                norms[rows] = block_row_l1_norms(block, *intercept)
            self._block_l1_cache = norms
        return self._block_l1_cache

    def _row_statistic(self, coefficients):
        """What ``coefficients`` reads per row: the row norms, or the
        statistic its ``row_statistic`` makes of them, kept while its
        ``statistic_key`` is the same (e.g. clipping caps: no division per
        iteration). A map whose ``row_norm_orders`` is ``(2, 1)`` gets the
        l1 norms next to the l2 ones."""
        norms = self._exact_norms()
        prepare = getattr(coefficients, "row_statistic", None)
        if prepare is None:
            return norms
        cached = getattr(self, "_statistic_cache", None)
        if cached is None or cached[0] != coefficients.statistic_key:
            orders = getattr(coefficients, "row_norm_orders", (2,))
            parts = (norms, self._exact_l1_norms())[: len(orders)]
            self._statistic_cache = (coefficients.statistic_key, prepare(*parts))
        return self._statistic_cache[1]

    def row_norms(self):
        """l2 norms ``||x~_i||`` (cached), computed with per-row scaling.

        Rows with entries near 1e300 do not overflow while their norm is
        representable; a norm beyond the float range is ``inf``.
        """
        if self._row_norms is None:
            out = np.empty(self.n_samples)
            buffers = None
            if not sp.issparse(self.X):
                rows = max(1, FUSED_CHUNK_ENTRIES // max(self.dim, 1))
                buffers = np.empty((2, min(rows, self.n_samples), self.n_features))
            for rows in self._chunks(FUSED_CHUNK_ENTRIES):
                norms = self._block_norms(rows, buffers)
                if self.fit_intercept:
                    norms = np.hypot(norms, self.intercept_column)
                out[rows] = norms
            self._row_norms = out
        return self._row_norms

    def _block_norms(self, rows, buffers=None):
        if sp.issparse(self.X):
            return row_l2_norms(self.X[rows])
        Z = self.block(rows, out=buffers[0])
        return dense_row_l2_norms(Z, work=buffers[1][: Z.shape[0]])

    def row_l1_norms(self):
        """l1 norms ``||x~_i||_1`` (cached), computed with per-row scaling.

        Sparse duplicates are summed first, as the matrix products sum them (see
        :func:`row_lr_norms`); a norm past the float range is ``inf``. Used
        by the sparse-gradient oracles, whose l1 bound ``||u_i x~_i||_1 <= L sqrt(s)``
        gives the Laplace sensitivity (Ghazi et al., Remark 2.1, Algorithm 1).
        """
        if getattr(self, "_row_l1_norms", None) is None:
            out = np.empty(self.n_samples)
            for rows in self._chunks():
                # Shared with row_norms: no 1 / max|x_i| (it overflowed for a row
                # whose largest entry is subnormal, on that neighbour only).
                norms = row_lr_norms(self._l1_block(rows), 1.0)
                out[rows] = norms + self.fit_intercept * self.intercept_column
            self._row_l1_norms = out
        return self._row_l1_norms

    def _l1_block(self, rows):
        return self.X[rows]

    def predict_chunks(self, W):
        """Yield ``(rows, X~[rows] @ W)`` for a ``(dim, k)`` matrix ``W``, row chunk
        by row chunk, each block holding at most ``DEFAULT_CHUNK_ENTRIES`` entries.

        For many public directions at once (e.g. the rows of a measurement matrix)
        where the full ``n x k`` product would not fit. Same clipping of the
        products as :meth:`predict`.
        """
        k = W.shape[1]
        step = max(1, min(self.chunk_rows, DEFAULT_CHUNK_ENTRIES // max(k, 1)))
        head, offset = self._head(W)
        for start in range(0, self.n_samples, step):
            rows = slice(start, min(start + step, self.n_samples))
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                Z = self.X[rows] @ head
                Z = Z + offset
            yield rows, _finite_predictions(Z)

    def weighted_sum(self, C):
        """``X~^T C``: shape (dim,) for C (n,), (dim, K) for C (n, K)."""
        C = np.asarray(C, dtype=float)
        # Products with a subnormal entry underflow harmlessly (no warning for one
        # record only); callers bound |C_i| ||x_i||, so nothing overflows.
        with np.errstate(under="ignore"):
            head = self.X.T @ C
        return self._assemble(head, C.sum(axis=0))

    def gradient_chunk_sum(self, U, func, rows=None):
        """``sum over row chunks of func(G_chunk, rows)`` for the per-sample gradients.

        ``G_chunk`` is the dense block of per-sample gradients ``u_i (outer) x~_i`` of
        the rows ``rows`` of the chunk (a slice, or an index array when ``rows`` is
        given): shape ``(rows, dim)`` for ``U`` of shape ``(n,)``, ``(rows, dim, K)``
        for ``U`` of shape ``(n, K)``. Chunks hold at most ``FUSED_CHUNK_ENTRIES``
        entries, so memory stays bounded whatever ``n``, and are written into one
        reused buffer: ``func`` must not keep ``G_chunk`` after it returns. It
        returns an array (or scalar) of a fixed shape; the results are summed.

        Parameters
        ----------
        U : ndarray of shape (n,) or (n, K)
            Per-sample derivatives of the loss with respect to the prediction.
        func : callable
            ``func(G_chunk, rows) -> ndarray``.
        rows : ndarray of bool of shape (n,), optional
            Build the gradients of these rows only (e.g. one half of a sample
            split), in increasing order; ``func`` then gets their indices.
        """
        U = np.asarray(U, dtype=float)
        outputs = U.shape[1:]
        width = self.dim * (U.shape[1] if U.ndim == 2 else 1)
        step = max(1, min(self.chunk_rows, FUSED_CHUNK_ENTRIES // max(width, 1)))
        if rows is None:
            chunks = (
                slice(start, min(start + step, self.n_samples))
                for start in range(0, self.n_samples, step)
            )
        else:
            index = np.flatnonzero(np.asarray(rows, dtype=bool))
            chunks = (
                index[start : start + step] for start in range(0, index.size, step)
            )
        # One buffer for the chunk's gradients (and one for its rows, gathered or
        # standardised), written once per chunk: fresh megabyte-sized temporaries
        # cost more than the arithmetic.
        size = min(step, max(self.n_samples, 1))
        gradients = np.empty((size, self.dim) + outputs)
        rows_buffer = None if sp.issparse(self.X) else np.empty((size, self.n_features))
        total = None
        for chunk in chunks:
            block = self.block(chunk, out=rows_buffer)
            G = gradients[: block.shape[0]]
            u = U[chunk]
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                if U.ndim == 1:
                    np.multiply(u[:, None], block, out=G[:, : self.n_features])
                else:
                    np.multiply(
                        block[:, :, None], u[:, None, :], out=G[:, : self.n_features]
                    )
                if self.fit_intercept:
                    np.multiply(u, self.intercept_column, out=G[:, self.n_features])
            part = func(G, chunk)
            if total is None:
                # The buffer is rewritten for the next chunk: keep a copy.
                total = np.array(part, dtype=float, copy=True)
            else:
                total = total + part
        return total


def standardised_rows(chunk, center, weight, out=None):
    """``(chunk - center) * weight``, an unused column (weight 0) 0, a value past
    the float range the largest float: a per-record map of the public (released)
    centre and scale, the same bits for a row in any chunk.

    Parameters
    ----------
    chunk : ndarray of shape (rows, d)
    center : ndarray of shape (d,) or float
    weight : ndarray of shape (d,)
    out : ndarray, optional
        A buffer of at least ``rows`` rows for the result.

    Returns
    -------
    ndarray of shape (rows, d)
    """
    weight = np.asarray(weight, dtype=float)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        Z = None if out is None else out[: chunk.shape[0]]
        Z = np.subtract(chunk, center, out=Z, dtype=float)
        Z *= weight
    unused = weight == 0
    if np.any(unused):
        Z[:, unused] = 0.0
    # np.clip with scalar bounds: one fast pass (np.maximum / np.minimum with a
    # scalar took three times as long).
    return np.clip(Z, -_FMAX, _FMAX, out=Z)


class StandardisedDesign(LinearDesign):
    """The design of ``(X - center) * weight`` without a standardised copy of ``X``.

    Rows are ``x~_i = [(x_i - c) * w, a]`` for public (released) ``c`` and ``w``
    (``w_j = 0`` for a column left out of the fit). Predictions are
    ``X (w V) + (b - c . (w V))`` (a map of each row and public values) and the
    fused gradient pass sums ``w (X^T C - c sum_i C_i)``, so an iteration reads
    ``X`` as stored; :meth:`weighted_sum` (arbitrary coefficients), chunks of
    per-sample gradients and row norms standardise one chunk at a time. Use
    :func:`standardised_design`, which falls back on a standardised copy where
    folding would not be accurate.

    The folded sum is accurate only for coefficients with ``|C_i| ||x~_i|| <= B``
    (clipped gradients) and rows of norm at least 1 (the intercept column
    ``a = 1``): then ``|C_i| <= B`` and the terms that cancel are at most ``B
    |c_j|`` (:func:`fold_is_accurate`). A row of norm 0 without an intercept
    would allow any ``C_i``, and ``C_i c_j`` would cancel catastrophically, which
    is why :func:`standardised_design` folds only with an intercept.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    fit_intercept : bool
    center, weight : ndarray of shape (n_features,)
        Public, finite.
    chunk_rows : int, default=65536
    intercept_column : float, default=1.0
    """

    #: Predictions fold the centring in: each is a fixed function of its row and
    #: public values, but may round by ``2^-53 |c . w V|`` more than a dot product
    #: of the standardised row.
    predictions_exact = False

    def __init__(
        self,
        X,
        fit_intercept,
        center,
        weight,
        chunk_rows=DEFAULT_CHUNK_ROWS,
        intercept_column=1.0,
    ):
        super().__init__(X, fit_intercept, chunk_rows, intercept_column)
        self.center = np.asarray(center, dtype=float)
        self.weight = np.asarray(weight, dtype=float)
        self._used = self.weight != 0

    def subset(self, rows):
        return StandardisedDesign(
            self.X[rows],
            self.fit_intercept,
            self.center,
            self.weight,
            self.chunk_rows,
            self.intercept_column,
        )

    def block(self, rows, out=None):
        # A per-record map of public constants (the released centre and scale);
        # an unused column (weight 0) is 0, a value past the float range the
        # largest float.
        if isinstance(rows, slice) or out is None:
            return standardised_rows(self.X[rows], self.center, self.weight, out)
        Z = _rows_of(self.X, rows, out)
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            Z -= self.center
        return standardised_rows(Z, 0.0, self.weight, Z)

    def _exact_fold(self, block_bound):
        return exact_fold(
            self.center,
            self.weight,
            self.fit_intercept,
            self.intercept_column,
            block_bound,
        )

    def _exact_rows(self, chunk):
        return standardised_rows(chunk, self.center, self.weight, chunk.copy())

    def _exact_row_norms(self, chunk, intercept):
        return standardised_norms(chunk, self.center, self.weight, intercept)

    def _l1_block(self, rows):
        return self.block(rows)

    def matrix(self):
        return self.block(slice(None))

    def _block_norms(self, rows, buffers=None):
        norms = super()._block_norms(rows, buffers)
        # A standardised value past the float range is clipped in the block but
        # not in the folded products, which read the raw row: a coefficient
        # capped by the clipped row's norm would let w_j x_ij through unbounded.
        # Such rows (norm at or past the largest float) get norm inf, hence a
        # clipped coefficient of 0: a fixed map of the row, and the gradient sum
        # keeps its sensitivity.
        return np.where(norms >= _FMAX, np.inf, norms)

    def weighted_sum(self, C):
        # Arbitrary coefficients: summed over standardised chunks (no fold).
        C = np.asarray(C, dtype=float)
        step = max(1, min(self.n_samples, FUSED_CHUNK_ENTRIES // max(self.dim, 1)))
        buffer = np.empty((step, self.n_features))
        head = np.zeros((self.n_features,) + C.shape[1:])
        for start in range(0, self.n_samples, step):
            rows = slice(start, min(start + step, self.n_samples))
            with np.errstate(under="ignore", over="ignore", invalid="ignore"):
                head += self.block(rows, out=buffer).T @ C[rows]
        return LinearDesign._assemble(self, head, C.sum(axis=0))

    def _head(self, W):
        weight = self.weight if W.ndim == 1 else self.weight[:, None]
        head = weight * W[: self.n_features]
        offset = (
            self.intercept_column * W[self.n_features] if self.fit_intercept else 0.0
        )
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            offset = offset - self.center @ head
        return head, offset

    def _assemble(self, head_sum, total):
        head_sum = np.asarray(head_sum, dtype=float)
        center = self.center if head_sum.ndim == 1 else self.center[:, None]
        weight = self.weight if head_sum.ndim == 1 else self.weight[:, None]
        used = self._used if head_sum.ndim == 1 else self._used[:, None]
        # The centring is folded into the sums: w (X^T C - c sum C); its
        # rounding is bounded in standardised_design, which only folds where
        # that bound is negligible.
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            head = np.where(used, (head_sum - center * total) * weight, 0.0)
        return super()._assemble(head, total)


#: Worst-case rounding of a folded weighted sum (relative to the largest clipped
#: per-sample gradient ``C``) allowed before the standardised copy is used instead.
_FOLD_ROUNDING = 2.0**-14


def fold_is_accurate(n_samples, n_columns, center, weight):
    """Whether folding the centring into the products (:class:`StandardisedDesign`)
    keeps the rounding of a weighted sum negligible: a public rule of ``n``, the
    chunk size and the released ``center`` and ``weight``.

    For coefficients with ``|C_i| ||x~_i|| <= C`` (the clipped gradients), each
    term of ``X^T C`` is at most ``C (s_j + |c_j|)`` and each of ``c_j sum C`` at
    most ``C |c_j|`` in standardised units ``s_j = 1 / w_j``, so summing chunks of
    ``m`` rows and then the ``n / m`` chunk sums rounds by at most
    ``(m + n / m) u n C (1 + 2 r)`` with ``r = max_j |c_j| w_j`` and ``u = 2^-53``
    (Higham 2002, eq. 4.4), ``1 + 2 r`` times the bound of the same sums on a
    standardised copy. Folding is used while that is at most ``2^-14 C``.
    """
    used = weight != 0
    if not np.any(used):
        return True
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        ratio = float(np.max(np.abs(center[used]) * weight[used]))
        # The sums themselves stay far below the float range (clip norms up
        # to 2^100): sum_i |C_i x_ij| <= n B (s_j + |c_j|).
        magnitude = n_samples * float(np.max(1.0 / weight[used] + np.abs(center[used])))
    if not (math.isfinite(ratio) and magnitude <= 2.0**800):
        return False
    m = max(1, FUSED_CHUNK_ENTRIES // max(n_columns + 1, 1))
    bound = (m + n_samples / m) * 2.0**-53 * n_samples * (1.0 + 2.0 * ratio)
    return bound <= _FOLD_ROUNDING


def standardised_design(X, fit_intercept, scaling=None):
    """The design of ``X`` standardised by a released column ``scaling``.

    ``scaling`` (a :class:`~skdpsco._column_scaling.ColumnScaling`, or None for
    ``X`` as it is) gives public ``center`` and ``weight``. Dense ``X`` with an
    intercept gets a :class:`StandardisedDesign` (no copy) where
    :func:`fold_is_accurate`, anything else a :class:`LinearDesign` of
    ``scaling.transform(X)`` (a copy of ``X``'s size).
    """
    if scaling is None:
        return LinearDesign(X, fit_intercept)
    n, d = X.shape
    fold = fit_intercept and not sp.issparse(X)
    if fold and fold_is_accurate(n, d, scaling.center, scaling.weight):
        return StandardisedDesign(X, fit_intercept, scaling.center, scaling.weight)
    return LinearDesign(scaling.transform(X), fit_intercept)


def summation_error(design, bound, n_coordinates):
    """Public l2 bound on the error of a computed mean ``X~^T C / n`` of the
    design's rows (``||C_i x~_i||_2 <= bound``), ``n_coordinates`` summed
    coordinates
    (:func:`~skdpsco._exact_sum.exact_sum_error` for exact sums,
    :func:`~skdpsco._exact_sum.float_sum_error` for float ones)."""
    if design.exact_sums:
        return exact_sum_error(bound, design.n_samples, n_coordinates)
    return float_sum_error(bound, design.n_samples)


def summation_slack(design, bound, n_coordinates):
    """What the summation adds to a gradient mean's l2 sensitivity: the exact
    sums' :func:`~skdpsco._exact_sum.exact_sum_slack` (the one changed block's
    rounding, its grid rounding, the float steps after the integer sum), or for
    float sums the error of each of the two neighbouring means,
    ``2`` :func:`~skdpsco._exact_sum.float_sum_error` (Casacuberta et al. 2022,
    Section 4: a float sum's rounding differs between neighbours)."""
    if design.exact_sums:
        return exact_sum_slack(bound, design.n_samples, n_coordinates)
    return 2.0 * float_sum_error(bound, design.n_samples)
