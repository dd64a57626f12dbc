"""The fused gradient pass and the folded standardisation of the design.

A fused pass (predictions, clipping and weighted sum per row chunk) and a design
that folds the released centre and scale into its products must compute what the
plain design of the standardised copy computes, to rounding; the clipped sum must
keep its sensitivity for extreme and adversarial rows.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from skdpsco._column_scaling import ColumnScaling, scaling_rows
from skdpsco._design import (
    LinearDesign,
    StandardisedDesign,
    dense_row_l2_norms,
    fold_is_accurate,
    standardised_design,
)
from skdpsco._estimators._heavy_tailed import _clipped_gd_plan
from skdpsco._losses import get_loss
from skdpsco._mean_estimation import ClippedMeanOracle

RNG = np.random.default_rng(7)


def _raw(n=3000, d=7, seed=0):
    rng = np.random.default_rng(seed)
    scale = rng.uniform(0.1, 50.0, d)
    offset = rng.uniform(-100.0, 100.0, d)
    X = rng.standard_normal((n, d)) * scale + offset
    return X, offset + rng.normal(0, 0.1, d), scale * rng.uniform(0.9, 1.1, d)


def _pair(X, center, scale, fit_intercept=True):
    weight = 1.0 / scale
    weight[1] = 0.0  # a column left out of the fit
    folded = StandardisedDesign(X, fit_intercept, center, weight)
    Z = (X - center) * weight
    return folded, LinearDesign(Z, fit_intercept)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_folded_design_matches_the_standardised_copy(fit_intercept):
    X, center, scale = _raw()
    folded, plain = _pair(X, center, scale, fit_intercept)
    dim = folded.dim
    for W in (RNG.standard_normal(dim), RNG.standard_normal((dim, 3))):
        np.testing.assert_allclose(
            folded.predict(W), plain.predict(W), rtol=1e-9, atol=1e-9
        )
        C = RNG.standard_normal((X.shape[0],) + W.shape[1:])
        np.testing.assert_allclose(
            folded.weighted_sum(C), plain.weighted_sum(C), rtol=1e-9, atol=1e-8
        )
    np.testing.assert_allclose(folded.row_norms(), plain.row_norms(), rtol=1e-12)
    U = RNG.standard_normal(X.shape[0])
    np.testing.assert_allclose(
        folded.gradient_chunk_sum(U, lambda G, rows: G.sum(axis=0)),
        plain.gradient_chunk_sum(U, lambda G, rows: G.sum(axis=0)),
        rtol=1e-10,
        atol=1e-9,
    )
    assert np.all(folded.matrix()[:, 1] == 0.0)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("n_outputs", [1, 3])
def test_fused_pass_equals_predict_then_weighted_sum(sparse, n_outputs):
    X = RNG.standard_normal((2500, 9))
    if sparse:
        X = sp.csr_matrix(np.where(np.abs(X) > 1.0, X, 0.0))
    design = LinearDesign(X, True)
    shape = (design.dim,) if n_outputs == 1 else (design.dim, n_outputs)
    W = RNG.standard_normal(shape)
    y = RNG.random((2500,) + shape[1:])

    def coefficients(Z, rows):
        return np.tanh(Z) - y[rows]

    expected = design.weighted_sum(coefficients(design.predict(W), slice(None)))
    np.testing.assert_allclose(
        design.fused_weighted_sum(W, coefficients), expected, rtol=1e-10, atol=1e-10
    )


@pytest.mark.parametrize("loss_name, n_outputs", [("logistic", 1), ("multinomial", 3)])
def test_fused_oracle_releases_what_the_two_pass_oracle_releases(loss_name, n_outputs):
    X, center, scale = _raw(n=2000, d=5)
    folded, _ = _pair(X, center, scale)
    loss = get_loss(loss_name)
    y = RNG.integers(0, 2 if n_outputs == 1 else n_outputs, 2000)
    y = y.astype(float) if n_outputs == 1 else y
    shape = (folded.dim,) if n_outputs == 1 else (folded.dim, n_outputs)
    W = RNG.standard_normal(shape) * 0.3
    oracle = ClippedMeanOracle(0.5).calibrate(2000, 0.5, shape)
    fused = oracle.estimate_at(
        folded, W, lambda Z, rows: loss.derivative(Z, y[rows]), np.random.default_rng(3)
    )
    two_pass = oracle.estimate(
        folded, loss.derivative(folded.predict(W), y), np.random.default_rng(3)
    )
    # Both are the same noisy value on the same public grid, to one grid step.
    step = 2.0**-10 * oracle.mechanism_.sensitivity
    assert np.max(np.abs(fused - two_pass)) <= step


def test_clipped_sum_keeps_its_sensitivity_for_extreme_rows():
    """Replace one record by an extreme one: the fused clipped sums of the two
    datasets differ by at most 2 C, with and without intercept, for records far
    outside the released scale (1e300), tiny ones (1e-200) and an offset column."""
    X, center, scale = _raw(n=500, d=4)
    y = RNG.random(500)
    loss = get_loss("squared")
    C = 1.5
    extremes = [
        np.array([1e300, -1e300, 1e300, 5.0]),
        np.array([1e-200, 1e-200, 0.0, -1e-200]),
        center + 1e-200,
        np.array([1.7e308, 1.7e308, -1.7e308, 1.7e308]),
    ]
    for fit_intercept in (True, False):
        for record in extremes:
            for target in (0.0, 1e300, -1e300):
                X2, y2 = X.copy(), y.copy()
                X2[0], y2[0] = record, target
                sums = []
                for data, t in ((X, y), (X2, y2)):
                    scaling = ColumnScaling(center, scale, np.ones(4, bool))
                    design = standardised_design(data, fit_intercept, scaling)
                    assert isinstance(design, StandardisedDesign) == fit_intercept
                    W = np.full(design.dim, 0.7)
                    norms = design.row_norms()
                    with np.errstate(divide="ignore"):
                        caps = np.where(norms > 0, C / norms, np.inf)

                    def coef(Z, rows, t=t, caps=caps):
                        return np.clip(
                            loss.derivative(Z, t[rows]), -caps[rows], caps[rows]
                        )

                    sums.append(design.fused_weighted_sum(W, coef))
                assert np.all(np.isfinite(sums[1]))
                assert np.linalg.norm(sums[0] - sums[1]) <= 2 * C * (1 + 1e-9)


def test_dense_row_norms_bound_the_norm_without_warnings():
    Z = np.array([[3.0, 4.0], [1e200, 1e200], [1e-200, 0.0], [0.0, 0.0]])
    with np.errstate(all="raise"):
        norms = dense_row_l2_norms(Z)
    assert norms[0] == 5.0 and norms[3] == 0.0
    assert np.sqrt(2) * 1e200 <= norms[1] <= 2e200
    assert norms[2] == 1e-200


def test_fold_rule_is_public_and_falls_back_on_a_copy():
    d = 5
    center, weight = np.full(d, 3.0), np.ones(d)
    assert fold_is_accurate(200_000, d, center, weight)
    # A year in seconds around 1.7e9 with a spread of 10: folding would cancel.
    assert not fold_is_accurate(200_000, d, np.full(d, 1.7e9), np.full(d, 0.1))
    assert fold_is_accurate(10, d, np.zeros(d), np.zeros(d))
    X = RNG.standard_normal((50, d)) + 1.7e9
    scaling = ColumnScaling(np.full(d, 1.7e9), np.full(d, 10.0), np.ones(d, bool))
    design = standardised_design(X, True, scaling)
    assert type(design) is LinearDesign
    np.testing.assert_allclose(design.X, scaling.transform(X))
    near = ColumnScaling(np.zeros(d), np.ones(d), np.ones(d, bool))
    assert type(standardised_design(X - 1.7e9, True, near)) is StandardisedDesign
    assert type(standardised_design(sp.csr_matrix(X), True, near)) is LinearDesign


def test_scaling_reads_a_public_number_of_rows_for_its_histograms():
    assert scaling_rows(10_000, rho=0.01) == 10_000
    assert scaling_rows(10**7, rho=0.5) == 2**14
    assert scaling_rows(10**7, rho=1e-6) == int(np.ceil(2**11 / np.sqrt(2e-6)))
    assert scaling_rows(10**7, epsilon=0.01) == 2**11 * 100
    assert scaling_rows(10**7, rho=np.inf) == 10**7


class _Est:
    def __init__(self, clip_norm="auto"):
        self.clip_norm = clip_norm


def test_clipped_gd_plan_follows_the_public_noise_level():
    # Small data: clip 1 and n mu / 4 steps (at least 20), as before.
    assert _clipped_gd_plan(_Est(), 400, 31, 0.02) == (1.0, 20)
    assert _clipped_gd_plan(_Est(), 1000, 31, 0.02) == (1.0, 50)
    # Large data: the noise is negligible, clip 3 and 30 steps.
    clip, steps = _clipped_gd_plan(_Est(), 200_000, 51, 0.02)
    assert clip == 3.0 and steps == 30
    # In between: clip 0.05 n mu / sqrt(20 p) and a cap 100 / C^1.1.
    clip, steps = _clipped_gd_plan(_Est(), 6000, 51, 0.02)
    mu_n = 6000 * np.sqrt(0.04)
    assert clip == pytest.approx(0.05 * mu_n / np.sqrt(20 * 51))
    assert 1 < clip < 3
    assert steps == int(np.ceil(100 / clip ** (np.log(100 / 30) / np.log(3))))
    # A user's clip norm is kept; the steps follow it.
    assert _clipped_gd_plan(_Est(1.0), 200_000, 51, 0.02) == (1.0, 100)
    # The testing mode (rho = inf): clip 3, 30 steps.
    assert _clipped_gd_plan(_Est(), 50, 3, np.inf) == (3.0, 30)


def test_folded_rows_past_the_float_range_add_nothing():
    """A standardised value past the float range is clipped in the block that gives
    the row norm but not in the folded products: its row must add nothing, or a
    record could move the clipped sum by ``w C`` instead of ``2 C``."""
    rng = np.random.default_rng(3)
    X = rng.normal(0.0, 0.01, size=(2000, 3))
    center, weight, C = np.zeros(3), np.full(3, 100.0), 1.0
    y = rng.random(2000)
    loss = get_loss("squared")
    sums = []
    for x in (0.0, 1e306, 1e307, np.finfo(float).max):
        data = X.copy()
        data[0] = [x, 0.0, 0.0]
        design = StandardisedDesign(data, True, center, weight)
        norms = design.row_norms()
        with np.errstate(divide="ignore"):
            caps = np.where(norms > 0, C / norms, np.inf)

        def coef(Z, rows, caps=caps):
            return np.clip(loss.derivative(Z, y[rows]), -caps[rows], caps[rows])

        sums.append(design.fused_weighted_sum(np.zeros(design.dim), coef))
    for other in sums[1:]:
        assert np.linalg.norm(other - sums[0]) <= 2 * C * (1 + 1e-9)
    assert np.isinf(StandardisedDesign(data, True, center, weight).row_norms()[0])


def test_exact_fold_is_refused_where_raw_block_sums_could_overflow():
    # |C_i x_ij| <= L / w_j + L |c_j| / a: the raw block sums of a fold stay in
    # the float range only while B L max_j (1 / w_j + |c_j| / a) <= 2^1000 (a
    # public rule); past it the rows are standardised before they are summed.
    from skdpsco._design import exact_fold
    from skdpsco._exact_sum import BLOCK_ROWS

    center, weight = np.zeros(1), np.array([1e-236])
    assert exact_fold(center, weight, True) is not None
    assert exact_fold(center, weight, True, 1.0, BLOCK_ROWS * 1e-170) is not None
    assert exact_fold(center, weight, True, 1.0, BLOCK_ROWS * 1e70) is None
