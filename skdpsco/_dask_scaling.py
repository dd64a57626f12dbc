"""The column-scaling statistics of :mod:`skdpsco._column_scaling` on dask arrays.

The clipped window moments read every record: each row chunk computes exact
integer block sums (:mod:`skdpsco._exact_sum`) of the clipped values and their
squares, and the client adds the chunks' integers, so the totals are the same
integers for every chunking and for the in-memory array
(:func:`window_moment_integers` is the kernel of both). The histograms that locate
each column's bulk read a public random subset of the records, chosen on the
client by global row index before any data are read; it is gathered to the
client (at most :func:`~skdpsco._column_scaling.scaling_rows` records, a public
number bounded by the budget) and processed as in memory, bit for bit. dask is
imported lazily (:func:`~skdpsco.utils._optional.import_dask`).
"""

import math

import numpy as np
import scipy.sparse as sp

from ._exact_sum import BLOCK_ROWS, SumGrid, block_aligned
from .utils._optional import import_dask

__all__ = [
    "as_dense_dask",
    "dask_window_moment_integers",
    "gather_rows",
    "moment_grid",
    "moment_sum_slack",
    "window_moment_integers",
]

#: Unit roundoff of float64.
_U = 2.0**-53


def moment_grid(n_samples, block_rows=BLOCK_ROWS):
    """The public grid of the exact sums of clipped values in ``[-1, 1]`` (each
    column summed on its own: bound 1 per entry)."""
    return SumGrid(1.0, n_samples, block_rows)


def moment_sum_slack(grid):
    """Public bound on how much more than the exact move of one record the
    released column sum of :func:`window_moment_integers` (then divided by ``n``)
    can move under replace-one, in units of the sum.

    The changed record lies in one block; every other block's integer is the same
    (:mod:`skdpsco._exact_sum`). The changed block's float sum of ``B`` entries in
    ``[-1, 1]`` errs by at most ``gamma_B B`` on each dataset (Higham 2002, eq.
    3.5 / 4.4), its rounding to the grid by ``g / 2``; the conversion of the
    integer total (at most ``2 n`` in magnitude, with the saturation margin) to a
    float errs by ``2 n u`` and the division by ``n`` by ``u`` times a mean of at
    most 2, i.e. ``2 n u`` in units of the sum, on each dataset. Together at most
    ``2 gamma_B B + g + 8 n u``, about ``5e-9`` at ``n = 10^6``.
    """
    B = grid.block_rows
    gamma = B * _U / (1.0 - B * _U)
    return 2.0 * gamma * B + grid.grid + 8.0 * _U * max(grid.n_samples, 1)


def window_moment_integers(X, mid, half, grid, start=0):
    """Exact integer column sums of ``z = clip((x - mid) / half, -1, 1)`` and of
    ``z^2`` over the rows of ``X``, on the grid of :func:`moment_grid`.

    Parameters
    ----------
    X : ndarray of shape (rows, d)
        Dense rows that start at the global row ``start``, a multiple of the block
        size; fewer than a multiple of it only where they end at ``n_samples``.
    mid, half : ndarray of shape (d,)
        The public window ``[mid - half, mid + half]``.
    grid : SumGrid
    start : int, default=0

    Returns
    -------
    ndarray of int64 of shape (2, d)
        The integers of the sums of ``z`` and of ``z^2``: any split of the rows at
        block boundaries gives integers that add to the same totals.
    """
    B = grid.block_rows
    rows, d = X.shape
    if start % B or (rows % B and start + rows != grid.n_samples):
        raise ValueError(
            f"A chunk of {rows} rows at row {start} does not consist of whole "
            f"blocks of {B} rows: rechunk to multiples of {B}."
        )
    totals = np.zeros((2, d), dtype=np.int64)
    # Passes of whole blocks, about 2^16 entries each, in reused buffers (a fresh
    # megabyte-sized temporary per pass costs more than the arithmetic).
    step = max(1, 2**16 // max(d * B, 1)) * B
    size = min(step, max(rows, 1))
    Z, Z2 = np.empty((size, d)), np.empty((size, d))
    ones = np.ones((1, B))
    with np.errstate(over="ignore", under="ignore"):
        low, high = mid - half, mid + half  # +-inf past the float range: no clip
    for first in range(0, rows, step):
        chunk = X[first : first + step]
        z, z2 = Z[: chunk.shape[0]], Z2[: chunk.shape[0]]
        np.minimum(np.maximum(chunk, low, out=z), high, out=z)
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            z -= mid
            z /= half
        # NaN only from 0 / 0 (half = 0: the window is the point mid, every
        # clipped value is mid) or inf / inf (half = inf: every finite x - mid
        # over it is 0): z = 0 in both, a function of the public window.
        np.copyto(z, 0.0, where=np.isnan(z))
        np.clip(z, -1.0, 1.0, out=z)
        with np.errstate(under="ignore"):
            np.multiply(z, z, out=z2)
        for i, values in enumerate((z, z2)):
            totals[i] += grid.to_integers(_block_column_sums(values, ones)).sum(axis=0)
    return totals


def _block_column_sums(values, ones):
    """Column sums of every block of ``B`` rows of ``values`` (C-contiguous; a
    shorter last block on its own), shape ``(n_blocks, d)``: one BLAS product
    ``1^T Z_b`` per block (numpy's matmul over a stack calls BLAS once per
    block), so a block's bits depend on its contents only, not on the pass or the
    chunk that holds it."""
    B = ones.shape[1]
    full = (values.shape[0] // B) * B
    head = values[:full].reshape(full // B, B, values.shape[1])
    sums = [np.matmul(ones, head)[:, 0, :]]
    if full < values.shape[0]:
        sums.append(ones[:, : values.shape[0] - full] @ values[full:])
    return np.concatenate(sums)


def as_dense_dask(X):
    """``X`` (a dask array of shape (n, d) with known chunks) as float64 with all
    columns in one chunk; sparse chunks are refused."""
    if sp.issparse(getattr(X, "_meta", None)):
        raise TypeError(
            "The private column scaling of a dask array with sparse chunks is not "
            "supported: pass dense chunks, or a scipy.sparse matrix in memory."
        )
    if X.ndim != 2 or any(math.isnan(size) for size in X.shape):
        raise ValueError(
            "A dask array of shape (n_samples, n_features) with known chunk sizes "
            "is needed (call compute_chunk_sizes() first)."
        )
    return X.astype(np.float64).rechunk({1: -1})


def gather_rows(X, rows=None):
    """The rows ``rows`` (sorted global indices, public) of the dask array ``X``
    in memory, or all of them with ``rows=None``."""
    return np.ascontiguousarray((X if rows is None else X[rows]).compute())


def _moment_chunk(X, mid, half, grid, block_info=None):
    start = block_info[0]["array-location"][0][0]
    return window_moment_integers(X, mid, half, grid, start).reshape(1, -1)


def dask_window_moment_integers(X, mid, half, grid):
    """:func:`window_moment_integers` of every row of the dask array ``X``: one map
    over the row chunks (aligned to the blocks) and one integer sum on the client,
    ``2 d`` integers per chunk. The same integers as in memory, for any chunking.
    """
    da = import_dask("array")
    X = block_aligned(X, grid.block_rows)
    d = X.shape[1]
    parts = da.map_blocks(
        _moment_chunk,
        X,
        np.asarray(mid, dtype=float),
        np.asarray(half, dtype=float),
        grid,
        dtype=np.int64,
        chunks=((1,) * len(X.chunks[0]), (2 * d,)),
    )
    # Integer additions: exact, whatever the order of the chunks.
    return np.asarray(parts.compute(), dtype=np.int64).sum(axis=0).reshape(2, d)
