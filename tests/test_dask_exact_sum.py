"""Exact sums of dask arrays on a real LocalCluster: the same integers, hence the
same bits, for every block-aligned chunking, and equal to the numpy path."""

import numpy as np
import pytest

from skdpsco._dask_design import block_aligned, dask_exact_weighted_sum
from skdpsco._exact_sum import SumGrid, exact_weighted_sum

da = pytest.importorskip("dask.array")

B = 512


@pytest.mark.parametrize("K", [None, 3])
def test_three_chunkings_on_the_cluster_match_numpy(dask_client, K):
    n, d, bound = 9 * B + 100, 5, 1.0
    rng = np.random.default_rng(7)
    X = rng.standard_normal((n, d)) * np.exp(2 * rng.standard_normal((n, 1)))
    U = rng.uniform(-1, 1, n if K is None else (n, K))
    scale = bound / np.linalg.norm(X, axis=1)
    C = U * (scale if K is None else scale[:, None] / np.sqrt(K))
    grid = SumGrid(bound, n, B)
    expected = exact_weighted_sum(X, C, grid, grid)
    results = []
    # Misaligned source chunkings, rechunked to whole blocks by the sum itself.
    for rows in (1000, 2 * B, 3 * B + 7):
        Xd = da.from_array(X, chunks=(rows, 2))
        Cd = da.from_array(C, chunks=rows if K is None else (rows, K))
        assert all(c % B == 0 for c in block_aligned(Xd, B).chunks[0][:-1])
        results.append(dask_exact_weighted_sum(Xd, Cd, grid, grid, dask_client))
    for head, total in results:
        np.testing.assert_array_equal(head, expected[0])
        np.testing.assert_array_equal(total, expected[1])
    # The float released from the integers: bit-identical, and close to BLAS.
    np.testing.assert_array_equal(
        grid.to_float(results[0][0]), grid.to_float(expected[0])
    )
    np.testing.assert_allclose(
        grid.to_float(expected[0]), X.T @ C, rtol=1e-9, atol=1e-9
    )
    # The computation ran on the worker processes.
    assert len(dask_client.scheduler_info()["workers"]) == 2
