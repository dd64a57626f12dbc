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

from ._exact_sum import BLOCK_ROWS, exact_weighted_sum
from .utils._optional import import_dask

__all__ = ["block_aligned", "dask_exact_weighted_sum"]


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
