"""Row-chunked aggregates of a dask array, exact and independent of the chunking.

The dask counterpart of :mod:`skdpsco._design`: every aggregate is one map over the
row chunks (each chunk computes its rows' contributions and their exact block sums,
:mod:`skdpsco._exact_sum`) and one reduce of the chunks' integers on the client.
Integers add exactly in any order, so the result is the same, bit for bit, for
every chunking whose boundaries are multiples of the block size, and equal to the
in-memory exact sum of the same rows. Only ``d + 1`` integers per chunk travel back
per aggregate; the rows stay on the workers. dask is imported lazily
(:func:`~skdpsco.utils._optional.import_dask`).
"""

import numpy as np

from ._design import _finite_predictions, dense_row_l2_norms
from ._exact_sum import BLOCK_ROWS, SumGrid, block_aligned, exact_weighted_sum
from .utils._optional import import_dask

__all__ = [
    "DaskLinearDesign",
    "block_aligned",
    "dask_exact_weighted_sum",
    "fused_exact_sum",
]


def _chunk_integers(X, C, head_grid, total_grid, vector, block_info=None):
    """One chunk's exact integer totals, flattened into one ``(1, m)`` row."""
    start = block_info[0]["array-location"][0][0]
    C = C[:, 0] if vector else C
    head, total = exact_weighted_sum(X, C, head_grid, total_grid, start=start)
    return np.concatenate([head.ravel(), total.ravel()])[None, :]


def dask_exact_weighted_sum(X, C, head_grid, total_grid, client=None):
    """Integer totals of ``X^T C`` and ``sum C`` for dask arrays ``X`` and ``C``.

    Parameters
    ----------
    X : dask.array.Array of shape (n, d)
    C : dask.array.Array of shape (n,) or (n, K)
        Rechunked to ``X``'s rows here (after :func:`block_aligned`).
    head_grid, total_grid : SumGrid
        As in :func:`~skdpsco._exact_sum.exact_weighted_sum`.
    client : distributed.Client, optional
        Compute there; the default scheduler otherwise.

    Returns
    -------
    head : ndarray of int64 of shape (d,) or (d, K)
    total : ndarray of int64 of shape () or (K,)
        Equal to :func:`~skdpsco._exact_sum.exact_weighted_sum` of the same rows
        in memory, for any chunking aligned to the blocks.
    """
    da = import_dask("array")
    X = block_aligned(X, head_grid.block_rows)
    outputs = C.shape[1:]
    C2 = (C if C.ndim == 2 else C[:, None]).rechunk({0: X.chunks[0], 1: -1})
    head_size = X.shape[1] * C2.shape[1]
    parts = da.map_blocks(
        _chunk_integers,
        X,
        C2,
        head_grid,
        total_grid,
        C.ndim == 1,
        dtype=np.int64,
        chunks=((1,) * len(X.chunks[0]), (head_size + C2.shape[1],)),
    )
    rows = parts.compute() if client is None else client.compute(parts).result()
    # Integer additions: exact, whatever the order of the chunks.
    flat = np.asarray(rows, dtype=np.int64).sum(axis=0)
    return (
        flat[:head_size].reshape((X.shape[1],) + outputs),
        flat[head_size:].reshape(outputs),
    )


def _block_slices(rows, block_rows):
    return [slice(s, min(s + block_rows, rows)) for s in range(0, rows, block_rows)]


def _block_predictions(X, head, offset, block_rows):
    """``X @ head + offset`` clipped as in :meth:`LinearDesign.predict`, one BLAS
    product per block: a row's bits depend on its block only, not on the chunk
    around it (a product over many rows may round a row by its position)."""
    Z = np.empty((X.shape[0],) + head.shape[1:])
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        for rows in _block_slices(X.shape[0], block_rows):
            Z[rows] = X[rows] @ head + offset
    return _finite_predictions(Z)


def _block_row_norms(X, fit_intercept, intercept_column, block_rows):
    """``||x~_i||`` as :meth:`LinearDesign.row_norms` computes them, block by block."""
    norms = np.empty(X.shape[0])
    for rows in _block_slices(X.shape[0], block_rows):
        norms[rows] = dense_row_l2_norms(X[rows])
    return np.hypot(norms, intercept_column) if fit_intercept else norms


def fused_exact_sum(X, y, W, coefficients, grids, intercept, start=0):
    """Exact integer totals of ``X^T C`` and ``sum C`` with ``C`` the coefficients
    at ``W`` of the rows of one chunk: predictions, row norms, coefficients and
    block sums in one pass, block by block.

    The kernel of :meth:`DaskLinearDesign.fused_weighted_sum`, run on every chunk;
    on a whole numpy array it is the in-memory path that gives the same bits.

    Parameters
    ----------
    X : ndarray of shape (rows, d)
        Rows of a chunk that starts at the multiple ``start`` of the block size.
    y : ndarray of shape (rows,)
    W : ndarray of shape (dim,) or (dim, K)
    coefficients : callable
        ``coefficients(Z, y, row_norms) -> C``, a row-wise map with
        ``||C_i x~_i|| <= L`` (``L`` the bound of ``grids[0]``); picklable, it runs
        on the workers.
    grids : tuple of SumGrid
        Grids of the head ``X^T C`` and of ``sum C``.
    intercept : tuple of (bool, float)
        ``(fit_intercept, intercept_column)``.
    start : int, default=0

    Returns
    -------
    head : ndarray of int64 of shape (d,) or (d, K)
    total : ndarray of int64 of shape () or (K,)
    """
    fit_intercept, column = intercept
    block_rows = grids[0].block_rows
    X = np.ascontiguousarray(X, dtype=float)
    d = X.shape[1]
    offset = column * W[d] if fit_intercept else 0.0
    Z = _block_predictions(X, W[:d], offset, block_rows)
    norms = _block_row_norms(X, fit_intercept, column, block_rows)
    C = np.asarray(coefficients(Z, np.asarray(y), norms), dtype=float)
    return exact_weighted_sum(X, C, grids[0], grids[1], start=start)


def _fused_chunk(X, y, W, coefficients, grids, intercept, block_info=None):
    start = block_info[0]["array-location"][0][0]
    head, total = fused_exact_sum(X, y[:, 0], W, coefficients, grids, intercept, start)
    return np.concatenate([head.ravel(), total.ravel()])[None, :]


class DaskLinearDesign:
    """The design ``X~ = [X, a]`` of a dask array ``X``, for full-batch clipped
    gradient methods: each aggregate is one map over the row chunks and one
    integer reduce on the client, exact (:mod:`skdpsco._exact_sum`).

    Implements what clipped gradient descent asks of a
    :class:`~skdpsco._design.LinearDesign` (``n_samples``, ``n_features``,
    ``dim``, ``fit_intercept``, ``predict``, a fused weighted sum), with two
    differences: the weighted sum takes the public bound ``L`` on every row's
    contribution (it fixes the integer grid) and a picklable coefficient map that
    gets each chunk's targets and row norms (nothing of length ``n`` lives on the
    client).

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
    y : dask.array.Array of shape (n_samples,)
    fit_intercept : bool
    intercept_column : float, default=1.0
    block_rows : int, default=BLOCK_ROWS
    client : distributed.Client, optional
    """

    predictions_exact = True

    def __init__(
        self,
        X,
        y,
        fit_intercept,
        intercept_column=1.0,
        block_rows=BLOCK_ROWS,
        client=None,
    ):
        self.block_rows = int(block_rows)
        self.X = block_aligned(X.astype(float), self.block_rows)
        self.y = y.rechunk({0: self.X.chunks[0]})
        self.fit_intercept = bool(fit_intercept)
        self.intercept_column = float(intercept_column)
        self.client = client
        self.n_samples, self.n_features = self.X.shape
        self.dim = self.n_features + int(self.fit_intercept)

    def _compute(self, collection):
        if self.client is None:
            return collection.compute()
        return self.client.compute(collection).result()

    def predict(self, W):
        """Lazy ``X~ W`` (a dask array), clipped as in :meth:`LinearDesign.predict`."""
        W = np.asarray(W, dtype=float)
        d = self.n_features
        offset = self.intercept_column * W[d] if self.fit_intercept else 0.0
        chunks = (self.X.chunks[0],) + ((W.shape[1],) if W.ndim == 2 else ())
        return self.X.map_blocks(
            _block_predictions,
            W[:d],
            offset,
            self.block_rows,
            dtype=float,
            chunks=chunks,
            drop_axis=None if W.ndim == 2 else 1,
        )

    def grids(self, bound):
        """The public grids of the head (``||C_i x~_i|| <= L``) and of ``sum C``
        (``|C_i| a <= L`` with an intercept column ``a``)."""
        tail = bound / self.intercept_column if self.fit_intercept else bound
        return (
            SumGrid(bound, self.n_samples, self.block_rows),
            SumGrid(tail, self.n_samples, self.block_rows),
        )

    def fused_weighted_sum(self, W, coefficients, bound):
        """``X~^T C`` with ``C = coefficients(X~ W, y, ||x~||)``, exactly summed.

        Parameters
        ----------
        W : ndarray of shape (dim,) or (dim, K)
        coefficients : callable
            See :func:`fused_exact_sum`.
        bound : float
            Public ``L >= ||C_i x~_i||`` for every row.

        Returns
        -------
        ndarray of the shape of ``W``
            The same bits for every chunking of ``X`` and ``y``, and as
            :func:`fused_exact_sum` on the rows in memory.
        """
        da = import_dask("array")
        W = np.asarray(W, dtype=float)
        grids = self.grids(bound)
        outputs = W.shape[1:]
        head_size = self.n_features * int(np.prod(outputs, dtype=int))
        width = head_size + int(np.prod(outputs, dtype=int))
        parts = da.map_blocks(
            _fused_chunk,
            self.X,
            self.y[:, None],
            W,
            coefficients,
            grids,
            (self.fit_intercept, self.intercept_column),
            dtype=np.int64,
            chunks=((1,) * len(self.X.chunks[0]), (width,)),
        )
        # Integer additions: exact, whatever the order of the chunks.
        flat = np.asarray(self._compute(parts), dtype=np.int64).sum(axis=0)
        head = grids[0].to_float(flat[:head_size].reshape((self.n_features,) + outputs))
        if not self.fit_intercept:
            return head
        tail = self.intercept_column * grids[1].to_float(flat[head_size:])
        return np.concatenate([head, tail.reshape((1,) + outputs)])
