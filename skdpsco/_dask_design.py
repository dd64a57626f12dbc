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

import sys

import numpy as np

from ._design import (
    DEFAULT_CHUNK_ROWS,
    LinearDesign,
    StandardisedDesign,
    _block_predictions,
    _folded_head,
    block_row_l1_norms,
    block_row_norms,
    exact_assembled,
    exact_fold,
    exact_grids,
    fold_is_accurate,
    fused_exact_sum,
    standardised_norms,
    standardised_rows,
)
from ._exact_sum import BLOCK_ROWS, block_aligned, exact_weighted_sum
from .utils._optional import import_dask

__all__ = [
    "DaskLinearDesign",
    "block_aligned",
    "dask_exact_weighted_sum",
    "dask_standardised_design",
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


def _fused_chunk(
    X,
    y,
    norms,
    weight,
    W,
    coefficients,
    grids,
    intercept,
    scaled,
    extended=False,
    block_info=None,
):
    start = block_info[0]["array-location"][0][0]
    weight = None if weight is None else weight[:, 0]
    # A per-row statistic of one column travels as (rows, 1), of several as is.
    norms = norms[:, 0] if norms.shape[1] == 1 else norms
    fold = None
    if scaled is not None:
        fold = exact_fold(*scaled, *intercept, grids[0].block_bound)
        X = X if fold is not None else standardised_rows(X, *scaled)
    head, total = fused_exact_sum(
        X,
        y[:, 0],
        W,
        coefficients,
        grids,
        intercept,
        start,
        weight,
        norms,
        fold,
        extended,
    )
    return np.concatenate([head.ravel(), total.ravel()])[None, :]


def _chunk_predictions(X, W, intercept, block_rows, scaled, extended=False):
    fold = None if scaled is None else exact_fold(*scaled, *intercept)
    if scaled is not None and fold is None:
        X = standardised_rows(X, *scaled)
    head, offset = _folded_head(W, X.shape[1], intercept, fold)
    return _block_predictions(
        np.ascontiguousarray(X), head, offset, block_rows, extended
    )


def _chunk_norms(X, intercept, block_rows, scaled):
    if scaled is None:
        return block_row_norms(X, *intercept, block_rows)
    return standardised_norms(X, *scaled, intercept, block_rows)


def _chunk_l1_norms(X, intercept, block_rows, scaled):
    if scaled is not None:
        X = standardised_rows(X, *scaled)
    return block_row_l1_norms(np.ascontiguousarray(X), *intercept, block_rows)


def dask_standardised_design(X, fit_intercept, scaling=None):
    """The dask design of ``X`` standardised by a released column ``scaling``:
    the counterpart of :func:`~skdpsco._design.standardised_design`, with the same
    public rule, so that every row is read as the in-memory design reads it
    (centring folded into the raw rows' sums, rows standardised chunk by chunk,
    or a lazily transformed ``X``)."""
    if scaling is None:
        return DaskLinearDesign(X, None, fit_intercept)
    n, d = X.shape
    if fit_intercept and fold_is_accurate(n, d, scaling.center, scaling.weight):
        return DaskLinearDesign(
            X, None, fit_intercept, scaled=(scaling.center, scaling.weight)
        )
    return DaskLinearDesign(
        X.map_blocks(scaling.transform, dtype=float), None, fit_intercept
    )


class DaskLinearDesign:
    """The design ``X~ = [X, a]`` of a dask array ``X``, for full-batch clipped
    gradient methods: each aggregate is one map over the row chunks and one
    integer reduce on the client, exact (:mod:`skdpsco._exact_sum`).

    Implements what clipped gradient descent asks of a
    :class:`~skdpsco._design.LinearDesign` (``n_samples``, ``n_features``,
    ``dim``, ``fit_intercept``, ``predict``, ``parameter_shape``,
    ``penalty_mask`` and :meth:`exact_fused_sum`, which takes the public bound
    ``L`` on every row's contribution (it fixes the integer grid) and a
    picklable coefficient map that gets each chunk's targets and row norms:
    nothing of length ``n`` lives on the client). The row norms are computed
    once and kept on the workers. For the Poisson-batch methods,
    :meth:`batches` serves the rows of batches drawn on the client.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        The rows as the fit sees them (standardised).
    y : dask.array.Array of shape (n_samples,) or None
        The default targets of :meth:`fused_weighted_sum`.
    fit_intercept : bool
    intercept_column : float, default=1.0
    block_rows : int, default=BLOCK_ROWS
    client : distributed.Client, optional
    scaled : tuple of two ndarray of shape (n_features,), optional
        ``(center, weight)`` of a released scaling: the fit sees the rows
        ``(x_i - c) w`` of the raw ``X``, read as a
        :class:`~skdpsco._design.StandardisedDesign` reads them.
    """

    predictions_exact = True
    exact_sums = True
    #: Entries of ``X`` (rows x columns) one gather of batch rows brings to the
    #: client at most (32 MiB), unless one batch alone is larger (:meth:`batches`).
    gather_entries = 2**22

    def __init__(
        self,
        X,
        y,
        fit_intercept,
        intercept_column=1.0,
        block_rows=BLOCK_ROWS,
        client=None,
        scaled=None,
    ):
        self.block_rows = int(block_rows)
        self.client = client
        self.scaled = scaled
        # Rechunked once and kept on the workers: iterations read it there.
        self.X = self._persist(block_aligned(X.astype(float), self.block_rows))
        self.y = None if y is None else self.aligned(y)
        self.fit_intercept = bool(fit_intercept)
        self.intercept_column = float(intercept_column)
        self.n_samples, self.n_features = self.X.shape
        self.dim = self.n_features + int(self.fit_intercept)
        self._norms = None

    def row_mapped(self, row_map):
        """The design of the rows mapped by ``row_map`` (a picklable function of
        each row only), mapped chunk by chunk on the workers and kept there: each
        row's bits are those of :meth:`LinearDesign.row_mapped` in memory."""
        X = self.X
        if self.scaled is not None:
            X = X.map_blocks(standardised_rows, *self.scaled, dtype=float)
        return DaskLinearDesign(
            X.map_blocks(row_map, dtype=float),
            None,
            self.fit_intercept,
            intercept_column=self.intercept_column,
            block_rows=self.block_rows,
            client=self.client,
        )

    parameter_shape = LinearDesign.parameter_shape
    penalty_mask = LinearDesign.penalty_mask

    def aligned(self, v):
        """A per-row dask array ``v`` in the row chunks of ``X``."""
        return v.rechunk({0: self.X.chunks[0]})

    def _compute(self, collection):
        if self.client is None:
            return collection.compute()
        return self.client.compute(collection).result()

    def _persist(self, collection):
        if self.client is None:
            return collection.persist()
        return self.client.persist(collection)

    def predict(self, W, extended=False):
        """Lazy ``X~ W`` (a dask array), clipped as in :meth:`LinearDesign.predict`
        (as :class:`~skdpsco._design.StandardisedDesign` computes it where the
        design is ``scaled``; accumulated in ``np.longdouble`` where
        ``extended``)."""
        W = np.asarray(W, dtype=float)
        chunks = (self.X.chunks[0],) + ((W.shape[1],) if W.ndim == 2 else ())
        return self.X.map_blocks(
            _chunk_predictions,
            W,
            (self.fit_intercept, self.intercept_column),
            self.block_rows,
            self.scaled,
            bool(extended),
            dtype=float,
            chunks=chunks,
            drop_axis=None if W.ndim == 2 else 1,
        )

    def grids(self, bound):
        """The public grids of the head and of ``sum C`` (:func:`exact_grids`)."""
        intercept = (self.fit_intercept, self.intercept_column)
        return exact_grids(bound, self.n_samples, intercept, self.block_rows)

    def row_norms(self):
        """Lazy ``||x~_i||`` (:func:`block_row_norms`), kept on the workers."""
        if self._norms is None:
            norms = self.X.map_blocks(
                _chunk_norms,
                (self.fit_intercept, self.intercept_column),
                self.block_rows,
                self.scaled,
                dtype=float,
                drop_axis=1,
            )
            self._norms = self._persist(norms)
        return self._norms

    def row_l1_norms(self):
        """Lazy ``||x~_i||_1`` (:func:`block_row_l1_norms`), kept on the workers."""
        if getattr(self, "_l1_norms", None) is None:
            norms = self.X.map_blocks(
                _chunk_l1_norms,
                (self.fit_intercept, self.intercept_column),
                self.block_rows,
                self.scaled,
                dtype=float,
                drop_axis=1,
            )
            self._l1_norms = self._persist(norms)
        return self._l1_norms

    def _row_statistic(self, coefficients):
        """As :meth:`LinearDesign._row_statistic`, kept on the workers: shape
        (n,) or (n, k), the trailing shape read from the map on public
        stand-in norms."""
        da = import_dask("array")
        prepare = getattr(coefficients, "row_statistic", None)
        if prepare is None:
            return self.row_norms()
        cached = getattr(self, "_statistic", None)
        if cached is None or cached[0] != coefficients.statistic_key:
            orders = getattr(coefficients, "row_norm_orders", (2,))
            parts = (self.row_norms(), self.row_l1_norms())[: len(orders)]
            tail = np.shape(prepare(*(np.ones(1) for _ in parts)))[1:]
            statistic = da.map_blocks(
                prepare,
                *parts,
                dtype=float,
                chunks=(self.X.chunks[0],) + tuple((k,) for k in tail),
                new_axis=list(range(1, 1 + len(tail))) or None,
            )
            self._statistic = (coefficients.statistic_key, self._persist(statistic))
        return self._statistic[1]

    def fused_weighted_sum(self, W, coefficients, bound):
        """:meth:`exact_fused_sum` with the design's targets."""
        return self.exact_fused_sum(W, coefficients, bound, self.y)

    def exact_fused_sum(
        self, W, coefficients, bound, y, sample_weight=None, extended=False
    ):
        """``X~^T C`` with ``C = coefficients(X~ W, y, ||x~||)``, exactly summed.

        Parameters
        ----------
        W : ndarray of shape (dim,) or (dim, K)
        coefficients : callable
            See :func:`~skdpsco._design.fused_exact_sum`.
        bound : float
            Public ``L >= ||C_i x~_i||`` for every row.
        y : dask.array.Array of shape (n_samples,)
        sample_weight : dask.array.Array of shape (n_samples,), optional
            Weights in ``[0, 1]``, applied after the map.
        extended : bool, default=False
            Predictions accumulated in ``np.longdouble`` on the workers, as
            :meth:`LinearDesign.exact_fused_sum` computes them (the
            certificate's gradient: the same public error bound for both).

        Returns
        -------
        ndarray of the shape of ``W``
            The same bits for every chunking of ``X`` and ``y``, and as
            :meth:`LinearDesign.exact_fused_sum` on the rows in memory.
        """
        da = import_dask("array")
        W = np.asarray(W, dtype=float)
        grids = self.grids(bound)
        outputs = W.shape[1:]
        head_size = self.n_features * int(np.prod(outputs, dtype=int))
        width = head_size + int(np.prod(outputs, dtype=int))
        weight = None if sample_weight is None else self.aligned(sample_weight)[:, None]
        parts = da.map_blocks(
            _fused_chunk,
            self.X,
            self.aligned(y)[:, None],
            _as_columns(self._row_statistic(coefficients)),
            weight,
            W,
            coefficients,
            grids,
            (self.fit_intercept, self.intercept_column),
            self.scaled,
            bool(extended),
            dtype=np.int64,
            chunks=((1,) * len(self.X.chunks[0]), (width,)),
        )
        # Integer additions: exact, whatever the order of the chunks.
        flat = np.asarray(self._compute(parts), dtype=np.int64).sum(axis=0)
        head = flat[:head_size].reshape((self.n_features,) + outputs)
        intercept = (self.fit_intercept, self.intercept_column)
        return exact_assembled(
            grids, head, flat[head_size:].reshape(outputs), intercept
        )

    def _submit(self, *collections):
        """Start computing ``collections`` on the client's cluster (the current
        ``distributed`` client where the design has none); a callable that waits
        for their values. Without a cluster client they are computed now."""
        client = self.client
        if client is None and "distributed" in sys.modules:
            try:
                client = sys.modules["distributed"].default_client()
            except ValueError:  # no client: the default scheduler
                client = None
        if client is None:
            values = import_dask("array").compute(*collections)
            return lambda: values
        futures = client.compute(list(collections))
        return lambda: client.gather(futures)

    def _gather(self, rows, vectors):
        """Start gathering the rows ``rows`` (sorted, unique) of ``X`` and of the
        per-row ``vectors``; ``(rows, wait)``."""
        parts = [self.X[rows]] + [self.aligned(v)[rows] for v in vectors]
        return rows, self._submit(*parts)

    def _batch_design(self, rows):
        """The in-memory design of gathered rows, the class and parameters that
        :meth:`LinearDesign.subset` of the in-memory fit's design gives."""
        if self.scaled is None:
            return LinearDesign(
                rows, self.fit_intercept, DEFAULT_CHUNK_ROWS, self.intercept_column
            )
        return StandardisedDesign(
            rows,
            self.fit_intercept,
            *self.scaled,
            DEFAULT_CHUNK_ROWS,
            self.intercept_column,
        )

    def batches(self, schedule, y, sample_weight=None):
        """The design, targets and weights of each batch of ``schedule``, read
        from rows gathered from the workers several steps at a time.

        The batches are drawn on the client, as in memory; the cluster only
        serves their rows. The rows of the next steps (``schedule.upcoming``)
        are gathered in blocks, the union of their batches in one compute of at
        most :attr:`gather_entries` entries of ``X`` (or one batch, where larger),
        the next block while the steps of the current one run; a step reads its
        rows from the block that holds them, or, where none does, from a block
        gathered then from its own batch on. Nothing of length ``n`` comes to the
        client: at most two blocks are held.

        Parameters
        ----------
        schedule : PoissonSchedule
            Iterator of sorted index arrays, with ``upcoming(max_rows, restart)``.
        y : dask.array.Array of shape (n_samples,) or (n_samples, K)
        sample_weight : dask.array.Array of shape (n_samples,) or None

        Yields
        ------
        batch : LinearDesign
            Equal, row for row and bit for bit, to :meth:`LinearDesign.subset`
            of the rows in memory (the same floats, copied in the same order).
        targets : ndarray
        weights : ndarray or None
        """
        limit = max(1, self.gather_entries // max(self.n_features, 1))
        vectors = [v for v in (y, sample_weight) if v is not None]
        held, values, pending = np.zeros(0, dtype=np.intp), None, None
        for rows in schedule:
            if values is None or not _holds(held, rows):
                if pending is not None and _holds(pending[0], rows):
                    held, values = pending[0], pending[1]()
                else:
                    ahead = schedule.upcoming(limit - rows.size, restart=True)
                    held = np.unique(np.concatenate([rows, *ahead]))
                    values = self._gather(held, vectors)[1]()
                pending = None
                ahead = schedule.upcoming(limit)
                if ahead:
                    pending = self._gather(np.unique(np.concatenate(ahead)), vectors)
            pos = np.searchsorted(held, rows)
            X_rows, *picked = (v[pos] for v in values)
            weights = None if sample_weight is None else picked[1]
            yield self._batch_design(X_rows), picked[0], weights


def _as_columns(statistic):
    """A per-row statistic as a (n, k) array (a vector as one column)."""
    return statistic[:, None] if statistic.ndim == 1 else statistic


def _holds(held, rows):
    """Whether the sorted unique ``held`` contains every entry of the sorted
    ``rows``."""
    pos = np.searchsorted(held, rows)
    return rows.size == 0 or (pos[-1] < held.size and np.all(held[pos] == rows))
