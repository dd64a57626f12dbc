"""Sparse matrices as the caller's arrays, with their format flag recomputed."""

__all__ = ["fresh_view"]


def fresh_view(X):
    """A new CSR/CSC object over the arrays of ``X`` (no copy).

    scipy caches ``has_canonical_format`` on the matrix object: a caller who wrote
    into ``X.indices`` after it was computed (or set it by hand) leaves it stale,
    and a stale True would let a record's duplicated entries count once each in a
    norm but summed in every product with ``X`` (a row past its bound). The new
    object computes the flag from the arrays when asked. It also keeps the
    caller's object out of reach: nothing is rebound on it.
    """
    return type(X)((X.data, X.indices, X.indptr), shape=X.shape, copy=False)
