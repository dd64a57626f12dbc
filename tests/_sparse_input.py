"""Shared test helper: a fit must never write into the caller's sparse matrix.

Estimators use a canonical (duplicate-free, sorted) sparse ``X`` as given, without
a copy, so every code path downstream must leave its arrays untouched.
"""

import warnings

import numpy as np


def assert_fit_leaves_matrix_unchanged(estimator, X, y):
    """Fit ``estimator`` on the canonical sparse ``X`` and check that its data,
    indices and index pointers are bit-for-bit what they were."""
    assert X.has_canonical_format
    before = X.data.copy(), X.indices.copy(), X.indptr.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.fit(X, y)
    for now, then in zip((X.data, X.indices, X.indptr), before, strict=True):
        np.testing.assert_array_equal(now, then)
