"""Shared data and chunkings of the dask tests (a real LocalCluster reads them)."""

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

_SCALES = np.array([1.0, 10.0, 100.0, 0.1, 3.0])
_OFFSETS = np.array([0.0, 5.0, -50.0, 1.0, 2.0])


def raw_data(n, seed, coef):
    """Raw-unit columns (offsets and scales far from standardised, the first
    heavy-tailed) and three targets: ``"reg"`` (near 150, t(3) noise),
    ``"binary"`` and ``"three"`` classes; ``len(coef)`` (at most 5) features."""
    d = len(coef)
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, d))
    X = Z * _SCALES[:d] + _OFFSETS[:d]
    X[:, 0] *= np.exp(rng.standard_normal(n))
    signal = Z @ np.asarray(coef, dtype=float)
    targets = {
        "reg": 150.0 + 30.0 * signal + 10.0 * rng.standard_t(3, n),
        "binary": (signal + 0.5 * rng.standard_normal(n) > 0).astype(int),
        "three": np.digitize(signal + 0.5 * rng.standard_normal(n), [-0.5, 0.5]),
    }
    return X, targets


def chunkings(X, y, aligned_rows=8192):
    """Aligned to the 4096-row blocks, ragged (crossing the blocks, split across
    columns), and a dask DataFrame with a Series target."""
    d = X.shape[1]
    yield (
        "aligned",
        da.from_array(X, chunks=(aligned_rows, d)),
        da.from_array(y, chunks=8192),
    )
    yield "ragged", da.from_array(X, chunks=(3001, 3)), da.from_array(y, chunks=5003)
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(d)])
    yield (
        "dataframe",
        dd.from_pandas(frame, npartitions=3),
        dd.from_pandas(pd.Series(y, name="y"), npartitions=3),
    )
