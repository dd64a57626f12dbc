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

import numpy as np
import scipy.sparse as sp

from ..utils._sparse import fresh_view

__all__ = [
    "LinearDesign",
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

    def _chunks(self):
        if sp.issparse(self.X):
            # A sparse chunk's temporaries are as large as its non-zeros, not
            # rows x dim: bounding the rows by DEFAULT_CHUNK_ENTRIES / dim would
            # make d = 10^6 walk the rows two at a time. Bound the non-zeros of a
            # chunk instead (on average), so the copies stay a few MiB.
            per_row = max(1, self.X.nnz // max(self.n_samples, 1))
            step = max(1, min(self.chunk_rows, _SPARSE_CHUNK_NNZ // per_row))
        else:
            step = max(
                1, min(self.chunk_rows, DEFAULT_CHUNK_ENTRIES // max(self.dim, 1))
            )
        for start in range(0, self.n_samples, step):
            yield slice(start, min(start + step, self.n_samples))

    def predict(self, W):
        """Linear predictions ``X~ W``: shape (n,) for W (dim,), (n, K) for W (dim, K).

        Predictions are clipped to ``[-1e300, 1e300]`` (overflowing products keep
        their sign), NaN from ``inf - inf`` becomes 0: a deterministic function of one
        row and the public ``W``, so every sensitivity bound downstream still holds.
        """
        # Products with a subnormal entry underflow: harmless, and not to be
        # reported (a warning for one record only tells neighbours apart).
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            Z = self.X @ W[: self.n_features]
            if self.fit_intercept:
                Z = Z + self.intercept_column * W[self.n_features]
        Z = np.asarray(Z, dtype=float)
        Z = np.nan_to_num(Z, nan=0.0, posinf=_Z_MAX, neginf=-_Z_MAX, copy=False)
        return np.clip(Z, -_Z_MAX, _Z_MAX, out=Z)

    def row_norms(self):
        """l2 norms ``||x~_i||`` (cached), computed with per-row scaling.

        Rows with entries near 1e300 do not overflow while their norm is
        representable; a norm beyond the float range is ``inf``.
        """
        if self._row_norms is None:
            out = np.empty(self.n_samples)
            for rows in self._chunks():
                norms = row_l2_norms(self.X[rows])
                if self.fit_intercept:
                    norms = np.hypot(norms, self.intercept_column)
                out[rows] = norms
            self._row_norms = out
        return self._row_norms

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
                norms = row_lr_norms(self.X[rows], 1.0)
                out[rows] = norms + self.fit_intercept * self.intercept_column
            self._row_l1_norms = out
        return self._row_l1_norms

    def predict_chunks(self, W):
        """Yield ``(rows, X~[rows] @ W)`` for a ``(dim, k)`` matrix ``W``, row chunk
        by row chunk, each block holding at most ``DEFAULT_CHUNK_ENTRIES`` entries.

        For many public directions at once (e.g. the rows of a measurement matrix)
        where the full ``n x k`` product would not fit. Same clipping of the
        products as :meth:`predict`.
        """
        k = W.shape[1]
        step = max(1, min(self.chunk_rows, DEFAULT_CHUNK_ENTRIES // max(k, 1)))
        head = W[: self.n_features]
        for start in range(0, self.n_samples, step):
            rows = slice(start, min(start + step, self.n_samples))
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                Z = self.X[rows] @ head
                if self.fit_intercept:
                    Z = Z + self.intercept_column * W[self.n_features]
            Z = np.asarray(Z, dtype=float)
            Z = np.nan_to_num(Z, nan=0.0, posinf=_Z_MAX, neginf=-_Z_MAX, copy=False)
            yield rows, np.clip(Z, -_Z_MAX, _Z_MAX, out=Z)

    def weighted_sum(self, C):
        """``X~^T C``: shape (dim,) for C (n,), (dim, K) for C (n, K)."""
        C = np.asarray(C, dtype=float)
        # Products with a subnormal entry underflow harmlessly (no warning for one
        # record only); callers bound |C_i| ||x_i||, so nothing overflows.
        with np.errstate(under="ignore"):
            head = self.X.T @ C
        head = np.asarray(head, dtype=float)
        if not self.fit_intercept:
            return head
        tail = self.intercept_column * C.sum(axis=0)
        if C.ndim == 2:
            return np.vstack([head, tail])
        if head.flags.owndata and head.flags.c_contiguous and head.base is None:
            # Grow in place (realloc) rather than np.append: at d = 10^6 a second
            # length-d buffer would be a third of a sparse X's size.
            head.resize(self.dim, refcheck=False)
            head[self.n_features] = tail
            return head
        return np.append(head, tail)

    def gradient_chunk_sum(self, U, func):
        """``sum over row chunks of func(G_chunk, rows)`` for the per-sample gradients.

        ``G_chunk`` is the dense block of per-sample gradients ``u_i (outer) x~_i`` of
        the rows in the slice ``rows``: shape ``(rows, dim)`` for ``U`` of shape
        ``(n,)``, ``(rows, dim, K)`` for ``U`` of shape ``(n, K)``. Chunks hold at
        most ``DEFAULT_CHUNK_ENTRIES`` entries, so memory stays bounded whatever
        ``n``. ``func`` must return an array (or scalar) of a fixed shape; the
        results are summed.

        Parameters
        ----------
        U : ndarray of shape (n,) or (n, K)
            Per-sample derivatives of the loss with respect to the prediction.
        func : callable
            ``func(G_chunk, rows) -> ndarray``.
        """
        U = np.asarray(U, dtype=float)
        width = self.dim * (U.shape[1] if U.ndim == 2 else 1)
        step = max(1, min(self.chunk_rows, DEFAULT_CHUNK_ENTRIES // max(width, 1)))
        total = None
        for start in range(0, self.n_samples, step):
            rows = slice(start, min(start + step, self.n_samples))
            block = self.X[rows]
            block = block.toarray() if sp.issparse(block) else np.asarray(block)
            if self.fit_intercept:
                block = np.hstack(
                    [block, np.full((block.shape[0], 1), self.intercept_column)]
                )
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                if U.ndim == 1:
                    G = U[rows, None] * block
                else:
                    G = block[:, :, None] * U[rows, None, :]
            part = func(G, rows)
            total = part if total is None else total + part
        return total
