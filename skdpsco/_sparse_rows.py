"""Per-row enforcement of a declared sparsity ``s`` and row-norm bound ``C_x``.

The sparse-gradient algorithms need every per-example gradient of a linear model,
``phi'(x . w, y) x``, to be s-sparse (or, by Remark 2.1 of Ghazi et al., to have
``||.||_1 <= L sqrt(s)``) with ``||.||_2 <= L``. Reading ``s`` or ``C_x`` from the data
would release a statistic of one record (card §4 item 4), so both are declared and
*enforced* by one deterministic map applied to every row independently, with no
cross-row statistic: a per-record transformation, so it costs no privacy and every
sensitivity downstream holds whatever the data. The same map is applied in
``predict`` so that the model sees the same geometry at fit and prediction time.

Two maps (card §7.3):

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

__all__ = ["enforce_row_bounds", "row_l1_l2_norms"]

_METHODS = ("clip_l1", "truncate")

_MARGIN = 1e-14

#: Dense rows per chunk: bounds the temporaries of the dense code path.
_DENSE_CHUNK_ENTRIES = 2**22


def _canonical(X):
    """CSR/CSC without duplicate entries (a copy only when duplicates may exist)."""
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return X


def _segment_reduce(values, indptr, ufunc):
    """``ufunc.reduceat`` over CSR row segments, 0 for empty rows."""
    n = indptr.size - 1
    out = np.zeros(n)
    lengths = np.diff(indptr)
    nonempty = lengths > 0
    if values.size:
        out[nonempty] = ufunc.reduceat(values, indptr[:-1][nonempty])
    return out


def _sparse_row_stats(X):
    """Row max ``m``, and ``||x/m||_2``, ``||x/m||_1`` for CSR or CSC ``X``.

    Returns ``(m, r2, r1, row_of_entry)``: ``row_of_entry`` maps every stored entry
    to its row (CSC: ``indices``; CSR: repeated row numbers).
    """
    n = X.shape[0]
    absdata = np.abs(X.data)
    if X.format == "csr":
        row_of_entry = np.repeat(np.arange(n), np.diff(X.indptr))
        m = _segment_reduce(absdata, X.indptr, np.maximum)
    else:  # csc: indices are row numbers
        row_of_entry = X.indices
        m = np.zeros(n)
        np.maximum.at(m, row_of_entry, absdata)
    safe = np.where(m > 0, m, 1.0)
    unit = absdata / safe[row_of_entry]
    r2 = np.sqrt(np.bincount(row_of_entry, weights=unit * unit, minlength=n))
    r1 = np.bincount(row_of_entry, weights=unit, minlength=n)
    return m, r2, r1, row_of_entry


def _dense_row_stats(X):
    m = np.max(np.abs(X), axis=1) if X.shape[1] else np.zeros(X.shape[0])
    safe = np.where(m > 0, m, 1.0)
    unit = np.abs(X) / safe[:, None]
    r2 = np.sqrt(np.einsum("ij,ij->i", unit, unit))
    r1 = unit.sum(axis=1)
    return m, r2, r1


def _unit_factor(m, r2, r1, row_norm_bound, l1_bound):
    """Factor ``f`` with ``x_new = (x / m) f``, or ``NaN`` where the row is kept.

    A row is kept when ``m r2 <= C_x`` and ``m r1 <= l1_bound`` (products may
    overflow to inf, which correctly counts as a violation). Otherwise the scaled
    row ``(x / m) min(C_x / r2, l1_bound / r1)`` has norms exactly at the bounds.
    """
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        keep = (m * r2 <= row_norm_bound) & (m * r1 <= l1_bound)
        factor = np.minimum(
            row_norm_bound / np.where(r2 > 0, r2, 1.0),
            l1_bound / np.where(r1 > 0, r1, 1.0),
        )
    # The 1e-14 relative margin absorbs the rounding of the rescaling, so that the
    # released rows satisfy the bounds the sensitivities use, not only up to an ulp.
    return np.where(keep | (m == 0), np.nan, factor * (1.0 - _MARGIN))


def _scale_sparse(X, m, factor, row_of_entry):
    """New CSR/CSC with the rows of ``X`` rescaled (structure arrays shared)."""
    data = X.data.copy()
    fe = factor[row_of_entry]
    changed = ~np.isnan(fe)
    data[changed] = (X.data[changed] / m[row_of_entry][changed]) * fe[changed]
    cls = sp.csr_matrix if X.format == "csr" else sp.csc_matrix
    out = cls((data, X.indices, X.indptr), shape=X.shape, copy=False)
    out.has_sorted_indices = X.has_sorted_indices
    return out


def _truncate_csr(X, s):
    """Keep the ``s`` largest |entries| of each CSR row; ties -> smaller column."""
    counts = np.diff(X.indptr)
    if counts.size == 0 or counts.max(initial=0) <= s:
        return X
    n = X.shape[0]
    row_of_entry = np.repeat(np.arange(n), counts)
    # Order entries by (row, -|value|, column); the rank within the row decides.
    order = np.lexsort((X.indices, -np.abs(X.data), row_of_entry))
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size) - X.indptr[row_of_entry[order]]
    keep = (rank < s) & (X.data != 0)
    new_counts = np.bincount(row_of_entry[keep], minlength=n)
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
    """Apply the per-row sparsity / norm map of card §7.3 to every row of ``X``.

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
        Every row has ``||x||_2 <= C_x`` and ``||x||_1 <= C_x sqrt(s)``
        (``"clip_l1"``), or ``nnz(x) <= s`` and ``||x||_2 <= C_x`` (``"truncate"``),
        up to float rounding. It may be ``X`` itself when no row needs a change.

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
    if not (row_norm_bound > 0 and math.isfinite(row_norm_bound)):
        raise ValueError(
            f"row_norm_bound must be finite and > 0, got {row_norm_bound}."
        )
    if method == "truncate":
        # nnz <= s and ||x||_2 <= C_x imply ||x||_1 <= C_x sqrt(s): no l1 clip needed.
        l1_bound = math.inf
    else:
        l1_bound = row_norm_bound * math.sqrt(max(s, 1))

    if sp.issparse(X):
        X = _canonical(X)
        if method == "truncate":
            X = _truncate_csr(_canonical(X.tocsr()), s)
        m, r2, r1, row_of_entry = _sparse_row_stats(X)
        factor = _unit_factor(m, r2, r1, row_norm_bound, l1_bound)
        if np.all(np.isnan(factor)):
            return X
        return _scale_sparse(X, m, factor, row_of_entry)

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


def row_l1_l2_norms(X):
    """``(||x_i||_1, ||x_i||_2)`` of every row, overflow-safe (inf if not finite).

    For tests and diagnostics on *public* or already-enforced data.
    """
    if sp.issparse(X):
        X = _canonical(X)
        if X.format not in ("csr", "csc"):
            X = X.tocsr()
        m, r2, r1, _ = _sparse_row_stats(X)
    else:
        m, r2, r1 = _dense_row_stats(np.asarray(X, dtype=float))
    with np.errstate(over="ignore"):
        return m * r1, m * r2
