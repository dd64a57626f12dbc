"""The dask design on a real LocalCluster: a clipped gradient step's aggregate is
the same, bit for bit, for three chunkings and for the rows in memory."""

import numpy as np
import pytest

from skdpsco._dask_design import DaskLinearDesign, fused_exact_sum
from skdpsco._design import LinearDesign
from skdpsco._losses import LogisticLoss

da = pytest.importorskip("dask.array")

B = 512
CLIP = 0.5


class ClippedLogistic:
    """Clipped logistic derivatives, ``sign(u) min(|u|, L / ||x~||)`` (a
    module-level class: the workers unpickle it by reference)."""

    def __call__(self, Z, y, norms):
        U = LogisticLoss().derivative(Z, y)
        with np.errstate(divide="ignore"):
            cap = np.where(norms > 0, CLIP / norms, np.inf)
        return np.clip(U, -cap, cap)


def _data(n=7 * B + 300, d=6, seed=11):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * np.exp(rng.standard_normal((n, 1)))
    X[5] = 1e300  # an extreme record: its norm is inf, its coefficient 0
    y = (X[:, 0] + rng.standard_normal(n) > 0).astype(float)
    return X, y


def _in_memory(X, y, W, design):
    grids = design.grids(CLIP)
    head, total = fused_exact_sum(
        X, y, W, ClippedLogistic(), grids, (True, design.intercept_column)
    )
    tail = design.intercept_column * grids[1].to_float(total)
    return np.append(grids[0].to_float(head), tail)


def _designs(X, y, client):
    for rows in (1000, 2 * B, 3 * B + 1):
        # Held in the workers' memory: iterations do not ship the rows again.
        Xd, yd = client.persist(
            [da.from_array(X, chunks=(rows, 3)), da.from_array(y, chunks=rows)]
        )
        yield DaskLinearDesign(
            Xd,
            yd,
            fit_intercept=True,
            intercept_column=2.0,
            block_rows=B,
            client=client,
        )


def test_gradient_descent_steps_are_bit_identical_across_chunkings(dask_client):
    X, y = _data()
    n = len(y)
    paths = {}
    for k, design in enumerate(_designs(X, y, dask_client)):
        W, Wm = np.zeros(design.dim), np.zeros(design.dim)
        for _ in range(3):
            grad = design.fused_weighted_sum(W, ClippedLogistic(), CLIP) / n
            in_memory = _in_memory(X, y, Wm, design) / n
            W, Wm = W - 2.0 * grad, Wm - 2.0 * in_memory
        paths[k] = W
        np.testing.assert_array_equal(W, Wm)
    np.testing.assert_array_equal(paths[0], paths[1])
    np.testing.assert_array_equal(paths[0], paths[2])
    assert np.abs(paths[0]).min() > 0  # the steps moved every coordinate


def test_the_exact_aggregate_matches_todays_float_design(dask_client):
    X, y = _data(seed=12)
    design = next(_designs(X, y, dask_client))
    W = np.linspace(-0.3, 0.3, design.dim)
    memory = LinearDesign(X, True, intercept_column=2.0)
    norms = memory.row_norms()

    def coefficients(Z, rows):
        return ClippedLogistic()(Z, y[rows], norms[rows])

    np.testing.assert_allclose(
        design.fused_weighted_sum(W, ClippedLogistic(), CLIP),
        memory.fused_weighted_sum(W, coefficients),
        rtol=1e-12,
        atol=1e-12,
    )
    # Predictions: lazy, bit-identical across chunkings, and today's to rounding.
    lazy = [d.predict(W) for d in _designs(X, y, dask_client)]
    assert isinstance(lazy[0], da.Array)
    values = [dask_client.compute(z).result() for z in lazy]
    np.testing.assert_array_equal(values[0], values[1])
    np.testing.assert_array_equal(values[0], values[2])
    np.testing.assert_allclose(values[0], memory.predict(W), rtol=1e-12)
