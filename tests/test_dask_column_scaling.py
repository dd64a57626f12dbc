"""The private column scaling of a dask array on a real cluster: the same release,
bit for bit, for every row chunking and for the same values in memory."""

import math

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsco._column_scaling import (
    private_column_quantiles,
    private_column_scaling,
    scaling_rows,
    window_moments,
)
from skdpsco._dask_scaling import (
    moment_grid,
    moment_sum_slack,
    window_moment_integers,
)

da = pytest.importorskip("dask.array")

N = 20_000
#: Three chunkings: one not aligned to the 4,096-row blocks, one aligned, one
#: ragged.
CHUNKINGS = (5000, 8192, (3000, 9001, 7999))


def _raw_columns(n=N, seed=0):
    """Raw units: a year near 2005, an amount near 1e6, a heavy-tailed column, a
    count, and one record at 1e300."""
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [
            rng.normal(2005.0, 3.0, n),
            rng.normal(1e6, 1e4, n),
            rng.standard_t(2, n) * 50.0,
            rng.poisson(4.0, n).astype(float),
        ]
    )
    X[123, 1] = 1e300
    return X


def _target(n=N, seed=1):
    rng = np.random.default_rng(seed)
    return (150.0 + 30.0 * rng.standard_normal(n))[:, None]


def _assert_same(a, b):
    np.testing.assert_array_equal(a.center, b.center)
    np.testing.assert_array_equal(a.scale, b.scale)
    np.testing.assert_array_equal(a.located, b.located)
    assert a.records == b.records


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("rho", [0.5, 0.005])
def test_every_chunking_releases_the_in_memory_scaling(dask_client, center, rho):
    # rho = 0.5 reads a public subset of 2^14 records for the histograms, rho =
    # 0.005 all of them (scaling_rows); the moments read every record.
    assert (scaling_rows(N, rho=rho) < N) == (rho == 0.5)
    X = _raw_columns()
    expected = private_column_scaling(
        X, np.random.default_rng(7), rho=rho, center=center
    )
    for chunks in CHUNKINGS:
        Xd = da.from_array(X, chunks=(chunks, -1))
        got = private_column_scaling(
            Xd, np.random.default_rng(7), rho=rho, center=center
        )
        _assert_same(expected, got)
    assert expected.located.all()
    if center:
        # The year and the amount at their true centres (the 1e300 is one record).
        assert abs(expected.center[0] - 2005.0) < 0.5
        assert abs(expected.center[1] / 1e6 - 1.0) < 1e-3
        assert 1.0 < expected.scale[0] < 10.0
    else:
        # The second moment about 0: the year's root mean square.
        assert abs(expected.scale[0] / 2005.0 - 1.0) < 0.1


def test_a_regression_target_column_releases_the_same_scaling(dask_client):
    y = _target()
    expected = private_column_scaling(
        y, np.random.default_rng(3), rho=0.2, name="target"
    )
    for chunks in CHUNKINGS:
        got = private_column_scaling(
            da.from_array(y, chunks=(chunks, 1)),
            np.random.default_rng(3),
            rho=0.2,
            name="target",
        )
        _assert_same(expected, got)
    assert abs(expected.center[0] - 150.0) < 2.0
    assert 20.0 < expected.scale[0] < 45.0


def test_float32_and_column_chunks_are_taken_as_float64_rows(dask_client):
    X = _raw_columns(seed=2)[:, [0, 2, 3]].astype(np.float32)
    expected = private_column_scaling(
        X.astype(np.float64), np.random.default_rng(5), rho=0.5
    )
    got = private_column_scaling(
        da.from_array(X, chunks=(6000, 2)), np.random.default_rng(5), rho=0.5
    )
    _assert_same(expected, got)


def test_window_moments_are_exact_block_sums_independent_of_the_layout():
    X = _raw_columns(seed=3)
    mid = np.array([2005.0, 1e6, 0.0, 4.0])
    half = np.array([10.0, 3e4, 100.0, 8.0])
    m, s = window_moments(X, mid, half)
    # Close to the float sums of the same clipped values ...
    Z = np.clip((X - mid) / half, -1.0, 1.0)
    np.testing.assert_allclose(m, Z.mean(axis=0), rtol=0, atol=1e-13)
    np.testing.assert_allclose(s, (Z * Z).mean(axis=0), rtol=0, atol=1e-13)
    # ... and the same integers from any split at block boundaries, in any order.
    grid = moment_grid(N)
    whole = window_moment_integers(X, mid, half, grid)
    parts = [(0, 4096), (4096, 16384), (16384, N)]
    split = sum(window_moment_integers(X[a:b], mid, half, grid, a) for a, b in parts)
    np.testing.assert_array_equal(whole, split)
    with pytest.raises(ValueError, match="whole blocks"):
        window_moment_integers(X[100:5000], mid, half, grid, 100)


def test_degenerate_public_windows_standardise_to_zero():
    """A window of half-width 0 (a column of one subnormal value) or of infinite
    half-width standardises every value to 0: 0 / 0 and inf / inf are resolved
    from the public window, never handed to the exact sums as NaN (refused there)."""
    X = np.array([[5e-324, 1e308, 1.0], [5e-324, -1e308, 3.0]])
    mid = np.array([5e-324, -1e308, 2.0])
    half = np.array([0.0, np.inf, 2.0])
    grid = moment_grid(2)
    totals = window_moment_integers(X, mid, half, grid)
    np.testing.assert_array_equal(
        grid.to_float(totals), [[0.0, 0.0, 0.0], [0.0, 0.0, 0.5]]
    )


def test_the_moments_sensitivity_pays_the_summation_error():
    n = 10**6
    t = moment_sum_slack(moment_grid(n))
    # 2 gamma_B B + g + 8 n u at B = 4096: about 4.6e-9.
    assert 4e-9 < t < 6e-9
    X = np.random.default_rng(4).normal(size=(n // 100, 3))
    result = private_column_scaling(X, np.random.default_rng(0), rho=1.0)
    t = moment_sum_slack(moment_grid(n // 100))
    mean = next(r for r in result.records if r.name == "column window mean")
    assert mean.sensitivity == pytest.approx(
        (2.0 + t) * math.sqrt(3) / (n // 100), rel=1e-15
    )
    assert mean.sensitivity > 2.0 * math.sqrt(3) / (n // 100)


def test_sparse_dask_chunks_and_dask_quantiles_are_refused(dask_client):
    X = da.from_array(_raw_columns(n=5000), chunks=(2000, -1))
    with pytest.raises(TypeError, match="sparse chunks"):
        private_column_scaling(
            X.map_blocks(sp.csr_matrix), np.random.default_rng(0), rho=0.5
        )
    with pytest.raises(TypeError, match="in-memory arrays only"):
        private_column_quantiles(X, np.random.default_rng(0), [0.5], rho=0.5)
