"""Exact block sums: the same integers (hence bits) for every block-aligned chunking,
a total within the grid's rounding of the exact sum, no overflow, and a
neighbour-sensitivity of ``2 L + 2 gamma_B B L + g sqrt(d)`` whatever the records."""

import math

import numpy as np
import pytest

from skdpsco._design import LinearDesign
from skdpsco._exact_sum import (
    BLOCK_ROWS,
    ExactAccumulator,
    SumGrid,
    block_boundaries,
    block_sums,
    exact_weighted_sum,
)
from skdpsco._mean_estimation._clipped import clip_coefficients

B = 256  # small blocks keep the tests fast; BLOCK_ROWS behaves the same


def _clipped_data(n, d, bound, seed=0, K=None):
    """Heavy-tailed rows and coefficients clipped so that ||C_i x_i|| <= bound."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * np.exp(2 * rng.standard_normal((n, 1)))
    U = rng.standard_normal(n if K is None else (n, K)) * 10
    norms = LinearDesign(X, fit_intercept=False).row_norms()
    return X, clip_coefficients(U, norms, bound)


def _chunked_total(X, C, grids, cuts):
    """Integer totals over the chunks ``[cuts[k], cuts[k+1])``, added in turn."""
    head, total = 0, 0
    for start, stop in zip(cuts[:-1], cuts[1:], strict=True):
        h, t = exact_weighted_sum(X[start:stop], C[start:stop], *grids, start=start)
        head, total = head + h, total + t
    return head, total


def _random_cuts(n, rng):
    bounds = block_boundaries(n, B)
    inner = bounds[1:-1]
    chosen = np.sort(rng.choice(inner, size=rng.integers(1, len(inner)), replace=False))
    return [0, *chosen.tolist(), n]


@pytest.mark.parametrize("K", [None, 3])
def test_every_aligned_chunking_gives_the_same_bits(K):
    n, d, bound = 20 * B + 77, 7, 1.5
    X, C = _clipped_data(n, d, bound, K=K)
    grids = SumGrid(bound, n, B), SumGrid(bound, n, B)
    reference = _chunked_total(X, C, grids, [0, n])
    rng = np.random.default_rng(1)
    for _ in range(5):
        head, total = _chunked_total(X, C, grids, _random_cuts(n, rng))
        np.testing.assert_array_equal(head, reference[0])
        np.testing.assert_array_equal(total, reference[1])
    # Blocks accumulated in reverse order, from Fortran-ordered and misaligned copies.
    acc = ExactAccumulator(grids[0], (d,) if K is None else (d, K))
    bounds = block_boundaries(n, B)
    for start, stop in zip(bounds[-2::-1], bounds[:0:-1], strict=True):
        Xb = np.asfortranarray(X[start:stop])
        acc.add_block_sums(block_sums(Xb, C[start:stop], B)[0])
    np.testing.assert_array_equal(acc.integers, reference[0])
    # The float totals differ from a plain BLAS sum (which is not exact), but not
    # by more than its rounding.
    np.testing.assert_allclose(acc.total(), X.T @ C, rtol=1e-10, atol=1e-9)


def test_a_misaligned_chunk_is_refused():
    X, C = _clipped_data(3 * B, 2, 1.0)
    grid = SumGrid(1.0, 3 * B, B)
    with pytest.raises(ValueError, match="rechunk to multiples of 256"):
        exact_weighted_sum(X[5 : 2 * B], C[5 : 2 * B], grid, grid, start=5)
    with pytest.raises(ValueError, match="whole blocks"):
        exact_weighted_sum(X[: B + 3], C[: B + 3], grid, grid, start=0)


def test_total_is_within_the_grid_rounding_of_the_exact_sum():
    n, d, bound = 10 * B + 5, 4, 2.0
    X, C = _clipped_data(n, d, bound, seed=3)
    grid = SumGrid(bound, n, B)
    head, _ = exact_weighted_sum(X, C, grid, grid)
    floats = block_sums(X, C, B)[0]
    n_blocks = floats.shape[0]
    assert n_blocks == 11 == grid.n_blocks
    total = grid.to_float(head)
    for j in range(d):
        # Against the exact sum of the float block sums: the grid rounding only.
        exact_blocks = math.fsum(floats[:, j])
        assert abs(total[j] - exact_blocks) <= n_blocks * grid.grid / 2 + 2**-52 * abs(
            exact_blocks
        )
        # Against the exact sum of the products: plus each block's BLAS rounding.
        products = C * X[:, j]
        blas = B * 2.0**-53 / (1 - B * 2.0**-53) * np.abs(products).sum()
        assert abs(total[j] - math.fsum(products)) <= n_blocks * grid.grid + blas
    # The grid is the finest power of two that keeps the integers in range.
    assert grid.grid == 2.0**grid.exponent
    assert n_blocks * (grid.block_bound / grid.grid + 0.5) <= 2**62
    assert n_blocks * (grid.block_bound / (grid.grid / 2) + 0.5) > 2**62 / 2


def test_rows_at_the_bound_do_not_overflow_for_n_up_to_1e10():
    d, bound = 3, 1.0
    n = 10**10
    grid = SumGrid(bound, n, BLOCK_ROWS)
    # Every block at the saturation bound in every coordinate, positive: the worst
    # case of the range argument; 2.4 million blocks, summed as integers.
    worst = np.full((grid.n_blocks, d), grid.block_bound * 2)
    ints = grid.to_integers(worst)
    assert ints.max() == round(grid.block_bound / grid.grid)
    acc = ExactAccumulator(grid, (d,))
    acc.add_integers(ints.sum(axis=0), grid.n_blocks)
    expected = grid.n_blocks * round(grid.block_bound / grid.grid)
    assert [int(v) for v in acc.integers] == [expected] * d
    assert expected < 2**62
    np.testing.assert_array_equal(acc.total(), float(expected) * grid.grid)
    with pytest.raises(ValueError, match="blocks added to a grid of"):
        acc.add_integers(ints[0], 1)


def test_unrepresentable_bounds_are_refused():
    with pytest.raises(ValueError, match="exceed the float range"):
        SumGrid(1e300, 10**12, BLOCK_ROWS)
    with pytest.raises(ValueError, match="bound must be finite"):
        SumGrid(np.inf, 10, BLOCK_ROWS)
    # Finite block sums saturate at the bound; subnormals round to 0.
    grid = SumGrid(1.0, 10, 4)
    ints = grid.to_integers([1e300, -1e300, 5e-324, grid.block_bound])
    top = round(grid.block_bound / grid.grid)
    assert ints.tolist() == [top, -top, 0, top]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_block_sums_are_refused_with_public_values_only(bad):
    """A NaN or infinite block sum breaks the bounded-contribution invariant: it is
    refused, not mapped to 0 or to the bound, and the message names the public grid
    only (never the offending value or its position)."""
    grid = SumGrid(1.0, 10, 4)
    sums = np.array([[0.25, 1.5], [bad, 2.0]])
    with pytest.raises(FloatingPointError) as info:
        grid.to_integers(sums)
    message = str(info.value)
    assert message == (
        "A non-finite block sum reached the exact-sum grid of 10 rows in blocks of "
        f"4 (block bound {grid.block_bound!r}): the contributions broke their "
        "public bound (an internal error, please report it)."
    )
    assert grid.block_bound == 4.0 * (1.0 + 2.0**-20)
    with pytest.raises(FloatingPointError):
        ExactAccumulator(grid, (2,)).add_block_sums(sums)


@pytest.mark.parametrize(
    "record",
    [
        np.full(6, 1e300),
        np.array([1e300, -1e300, 1e-300, 5e-324, 0.0, 3.0]),
        np.full(6, 5e-324),
        np.array([np.finfo(float).max, 0, 0, 0, 0, 0]),
    ],
    ids=["huge", "mixed", "subnormal", "max"],
)
def test_replacing_one_record_moves_the_total_by_at_most_2L_plus_rounding(record):
    n, d, bound = 8 * B, 6, 1.0
    rng = np.random.default_rng(4)
    X = rng.standard_normal((n, d)) * np.exp(3 * rng.standard_normal((n, 1)))
    U = rng.standard_normal(n) * 1e6
    grid = SumGrid(bound, n, B)
    totals = []
    for row in (0, 3 * B + 17, n - 1):
        for replaced in (X[row], record, -record):
            Xn = X.copy()
            Xn[row] = replaced
            C = clip_coefficients(U, LinearDesign(Xn, False).row_norms(), bound)
            totals.append(grid.to_float(exact_weighted_sum(Xn, C, grid, grid)[0]))
    gamma = B * 2.0**-53 / (1 - B * 2.0**-53)
    allowed = 2 * bound + 2 * gamma * B * bound + grid.grid * math.sqrt(d)
    for k in range(0, len(totals), 3):
        for other in totals[k + 1 : k + 3]:
            assert np.linalg.norm(totals[k] - other) <= allowed
    # The records do move it (the test can fail): by about 2L for the huge ones.
    moves = [np.linalg.norm(totals[k] - totals[k + 1]) for k in range(0, 9, 3)]
    assert max(moves) > 0.1
