"""Per-row enforcement of a declared sparsity ``s`` and row-norm bound ``C_x``.

The sparse-gradient algorithms need every per-example gradient of a linear model,
``phi'(x . w, y) x``, to be s-sparse (or, by Remark 2.1 of Ghazi et al., to have
``||.||_1 <= L sqrt(s)``) with ``||.||_2 <= L``. Reading ``s`` or ``C_x`` from the data
would release a statistic of one record (a maximum), so both are declared and
*enforced* by one deterministic map applied to every row independently, with no
cross-row statistic: a per-record transformation, so it costs no privacy and every
sensitivity downstream holds whatever the data. The same map is applied in
``predict`` so that the model sees the same geometry at fit and prediction time.

Two maps:

``"clip_l1"``
    scale the row by ``min(1, C_x / ||x||_2, C_x sqrt(s) / ||x||_1)``: keeps every
    feature; gives ``||x||_2 <= C_x`` and ``||x||_1 <= C_x sqrt(s)``.
``"truncate"``
    keep the ``s`` largest-magnitude entries (ties: the smaller column index wins),
    then scale to ``||x||_2 <= C_x``; gives ``nnz(x) <= s`` as well.

Both work on dense arrays, CSR and CSC without densifying, and never modify their
input. Norms are computed after dividing each row by its largest magnitude, so rows
with entries near the float64 limit are clipped to norm ``C_x`` rather than to 0.
"""

import math

import numpy as np
import scipy.sparse as sp

from .utils._sparse import fresh_view
from .utils._validation import check_real

__all__ = ["ROW_BOUND_SLACK", "enforce_row_bounds"]

_METHODS = ("clip_l1", "truncate")

#: Rows within this relative slack of a bound are kept unchanged (so that a row
#: at the bound up to rounding, e.g. a one-hot row divided by sqrt(#fields), is not
#: copied); rows beyond it are scaled to ``(1 - 1e-14)`` times the bound. Callers
#: must compute their sensitivities with the bounds times ``1 + ROW_BOUND_SLACK``.
ROW_BOUND_SLACK = 1e-12

_SHRINK = 1.0 - 1e-14

#: Stored entries per chunk: bounds every temporary of the sparse code path to a
#: few MiB, whatever nnz (peak memory stays a small multiple of X).
_CHUNK_ENTRIES = 2**19

#: Entries per chunk of the dense code path.
_DENSE_CHUNK_ENTRIES = 2**20


def _canonical(X):
    """CSR/CSC without duplicate entries (a copy only when duplicates may exist;
    the format flag computed afresh, :func:`~skdpsco.utils._sparse.fresh_view`)."""
    X = fresh_view(X)
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return X


def _major_chunks(indptr):
    """Slices of major indices (rows of CSR, columns of CSC), ~_CHUNK_ENTRIES each."""
    n_major = indptr.size - 1
    nnz = int(indptr[-1])
    if n_major == 0:
        return
    n_chunks = max(1, -(-nnz // _CHUNK_ENTRIES))
    cuts = np.searchsorted(indptr, np.linspace(0, nnz, n_chunks + 1)[1:-1], "right")
    bounds = np.unique(np.concatenate([[0], cuts, [n_major]]))
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        yield slice(int(lo), int(hi))


def _segment_reduce(ufunc, values, indptr):
    """``ufunc`` over each CSR row segment, 0 for empty rows."""
    out = np.zeros(indptr.size - 1)
    nonempty = np.diff(indptr) > 0
    if values.size:
        out[nonempty] = ufunc.reduceat(values, indptr[:-1][nonempty])
    return out


def _sparse_row_stats(X):
    """Row max ``m`` and ``||x / m||_2``, ``||x / m||_1`` of a CSR or CSC ``X``."""
    n = X.shape[0]
    m = np.zeros(n)
    r2 = np.zeros(n)
    r1 = np.zeros(n)
    if X.format == "csr":
        for rows in _major_chunks(X.indptr):
            lo, hi = X.indptr[rows.start], X.indptr[rows.stop]
            ptr = X.indptr[rows.start : rows.stop + 1] - lo
            a = np.abs(X.data[lo:hi])
            mm = _segment_reduce(np.maximum, a, ptr)
            safe = np.where(mm > 0, mm, 1.0)
            a /= np.repeat(safe, np.diff(ptr))
            m[rows] = mm
            r1[rows] = _segment_reduce(np.add, a, ptr)
            a *= a
            r2[rows] = _segment_reduce(np.add, a, ptr)
        return m, np.sqrt(r2), r1
    chunks = list(_major_chunks(X.indptr))
    for cols in chunks:  # csc: indices are row numbers
        lo, hi = X.indptr[cols.start], X.indptr[cols.stop]
        np.maximum.at(m, X.indices[lo:hi], np.abs(X.data[lo:hi]))
    safe = np.where(m > 0, m, 1.0)
    for cols in chunks:
        lo, hi = X.indptr[cols.start], X.indptr[cols.stop]
        rows = X.indices[lo:hi]
        a = np.abs(X.data[lo:hi]) / safe[rows]
        r1 += np.bincount(rows, weights=a, minlength=n)
        r2 += np.bincount(rows, weights=a * a, minlength=n)
    return m, np.sqrt(r2), r1


def _dense_row_stats(X):
    m = np.max(np.abs(X), axis=1) if X.shape[1] else np.zeros(X.shape[0])
    safe = np.where(m > 0, m, 1.0)
    unit = np.abs(X) / safe[:, None]
    r2 = np.sqrt(np.einsum("ij,ij->i", unit, unit))
    r1 = unit.sum(axis=1)
    return m, r2, r1


def _unit_factor(m, r2, r1, row_norm_bound, l1_bound):
    """Factor ``f`` with ``x_new = (x / m) f``, or ``NaN`` where the row is kept.

    A row is kept when ``m r2 <= C_x (1 + slack)`` and ``m r1 <= l1_bound (1 +
    slack)`` (products may overflow to inf, which correctly counts as a
    violation). Otherwise the scaled row ``(x / m) min(C_x / r2, l1_bound / r1)``
    has norms at the bounds (shrunk by 1e-14 against rounding).
    """
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        slack = 1.0 + ROW_BOUND_SLACK
        keep = (m * r2 <= row_norm_bound * slack) & (m * r1 <= l1_bound * slack)
        factor = np.minimum(
            row_norm_bound / np.where(r2 > 0, r2, 1.0),
            l1_bound / np.where(r1 > 0, r1, 1.0),
        )
    return np.where(keep | (m == 0), np.nan, factor * _SHRINK)


def _scale_sparse(X, m, factor):
    """New CSR/CSC with the rows of ``X`` rescaled (structure arrays shared)."""
    data = X.data.copy()
    for major in _major_chunks(X.indptr):
        lo, hi = X.indptr[major.start], X.indptr[major.stop]
        if X.format == "csr":
            rows = np.repeat(
                np.arange(major.start, major.stop),
                np.diff(X.indptr[major.start : major.stop + 1]),
            )
        else:
            rows = X.indices[lo:hi]
        fe = factor[rows]
        changed = ~np.isnan(fe)
        if changed.any():
            chunk = data[lo:hi]
            chunk[changed] = (chunk[changed] / m[rows[changed]]) * fe[changed]
    cls = sp.csr_matrix if X.format == "csr" else sp.csc_matrix
    out = cls((data, X.indices, X.indptr), shape=X.shape, copy=False)
    out.has_sorted_indices = X.has_sorted_indices
    return out


def _truncate_csr(X, s):
    """Keep the ``s`` largest |entries| of each CSR row; ties -> smaller column."""
    counts = np.diff(X.indptr)
    if counts.size == 0 or counts.max(initial=0) <= s:
        return X
    keep = np.ones(X.data.size, dtype=bool)
    for rows in _major_chunks(X.indptr):
        if counts[rows].max(initial=0) <= s:
            continue
        lo, hi = X.indptr[rows.start], X.indptr[rows.stop]
        ptr = X.indptr[rows.start : rows.stop + 1] - lo
        row_of = np.repeat(np.arange(rows.stop - rows.start), np.diff(ptr))
        # Order entries by (row, -|value|, column); the rank within the row decides.
        order = np.lexsort((X.indices[lo:hi], -np.abs(X.data[lo:hi]), row_of))
        rank = np.empty(order.size, dtype=np.int64)
        rank[order] = np.arange(order.size) - ptr[row_of[order]]
        keep[lo:hi] = (rank < s) & (X.data[lo:hi] != 0)
    row_of_all = np.repeat(np.arange(X.shape[0]), counts)
    new_counts = np.bincount(row_of_all[keep], minlength=X.shape[0])
    indptr = np.concatenate([[0], np.cumsum(new_counts)]).astype(X.indptr.dtype)
    out = sp.csr_matrix(
        (X.data[keep], X.indices[keep], indptr), shape=X.shape, copy=False
    )
    out.has_sorted_indices = X.has_sorted_indices
    return out


def _truncate_dense(X, s):
    if s >= X.shape[1]:
        return X
    out = np.zeros_like(X)
    step = max(1, _DENSE_CHUNK_ENTRIES // max(X.shape[1], 1))
    for start in range(0, X.shape[0], step):
        block = X[start : start + step]
        # Stable sort on -|x|: among equal magnitudes the smaller column comes first.
        top = np.argsort(-np.abs(block), axis=1, kind="stable")[:, :s]
        rows = np.arange(block.shape[0])[:, None]
        out[start : start + step][rows, top] = block[rows, top]
    return out


def enforce_row_bounds(X, *, sparsity, row_norm_bound, method="clip_l1"):
    """Apply the per-row sparsity / norm map (module docstring) to every row of ``X``.

    Parameters
    ----------
    X : ndarray or scipy.sparse CSR/CSC matrix of shape (n_samples, n_features)
        Finite values. Not modified.
    sparsity : int or None
        Declared ``s``, the number of non-zeros a row may have; None means
        ``n_features`` (always valid).
    row_norm_bound : float
        ``C_x``, the l2 bound of a row.
    method : {"clip_l1", "truncate"}, default="clip_l1"

    Returns
    -------
    ndarray or scipy.sparse matrix of the same shape (CSR for ``"truncate"`` on
    sparse input, else the input's format)
        Every row has ``||x||_2 <= C_x'`` and ``||x||_1 <= C_x' sqrt(s)``
        (``"clip_l1"``), or ``nnz(x) <= s`` and ``||x||_2 <= C_x'``
        (``"truncate"``), with ``C_x' = C_x (1 + ROW_BOUND_SLACK)``. It is ``X``
        itself when no row needs a change (no copy); otherwise only the values
        array is new (the index arrays are shared with ``X``).

    References
    ----------
    .. [1] Ghazi, B., Guzmán, C., Kamath, P., Kumar, R. and Manurangsi, P.
       Differentially private optimization with sparse gradients. Remark 2.1 (the l1
       relaxation ``||g||_1 <= L sqrt(s)`` that makes ``"clip_l1"`` sufficient).
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}.")
    n_features = X.shape[1]
    s = n_features if sparsity is None else int(min(sparsity, n_features))
    if s < 1 and n_features > 0:
        raise ValueError(f"sparsity must be >= 1, got {sparsity!r}.")
    check_real(row_norm_bound, "row_norm_bound", low=0.0, low_open=True)
    if method == "truncate":
        # nnz <= s and ||x||_2 <= C_x imply ||x||_1 <= C_x sqrt(s): no l1 clip needed.
        l1_bound = math.inf
    else:
        l1_bound = row_norm_bound * math.sqrt(max(s, 1))

    if sp.issparse(X):
        if X.format not in ("csr", "csc"):
            X = X.tocsr()
        X = _canonical(X)
        if method == "truncate":
            X = _truncate_csr(_canonical(X.tocsr()), s)
        m, r2, r1 = _sparse_row_stats(X)
        factor = _unit_factor(m, r2, r1, row_norm_bound, l1_bound)
        if np.all(np.isnan(factor)):
            return X
        return _scale_sparse(X, m, factor)

    X = np.asarray(X, dtype=float)
    if method == "truncate":
        X = _truncate_dense(X, s)
    m, r2, r1 = _dense_row_stats(X)
    factor = _unit_factor(m, r2, r1, row_norm_bound, l1_bound)
    changed = ~np.isnan(factor)
    if not changed.any():
        return X
    out = np.array(X, copy=True)
    out[changed] = (X[changed] / m[changed, None]) * factor[changed, None]
    return out
