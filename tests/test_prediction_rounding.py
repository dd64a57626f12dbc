"""The certificates' gradient error bound covers the rounding of the predictions.

A computed gradient reads ``phi'`` at ``fl(<x~_i, w>)``, a dot product of ``dim``
terms whose worst-case rounding ``gamma_dim ||x~|| ||w||`` (Higham 2002, eq. 3.5)
outgrows the certificate's relative ``64 eps`` margin past ``dim ~ 128``: the
bound :func:`~skdpsco._solvers._certified.prediction_error` is added to the
public gradient error of every certified solve.
"""

import math
from fractions import Fraction

import numpy as np
import pytest

from skdpsco._constraints import L2Ball
from skdpsco._design import LinearDesign, _block_predictions
from skdpsco._exact_sum import BLOCK_ROWS
from skdpsco._losses import get_loss
from skdpsco._solvers import _objective_perturbation as objp
from skdpsco._solvers._certified import prediction_error
from skdpsco._solvers._output_perturbation import (
    certificate_floor,
    gradient_error_bound,
    plan_output_perturbation,
)
from skdpsco.privacy._budget import AlgorithmBudget

U = 2.0**-53
EPS = np.finfo(float).eps


def _gamma(k):
    return k * U / (1.0 - k * U)


def _worst_prediction_rounding(d, n=3):
    """The largest measured ``|fl(<x, w>) - <x, w>| / (||x|| ||w||)`` of the two
    prediction paths over equal-term products ``x_j w_j = 2^-5 b``, ``b`` just
    below half an ulp above 1 at partial sums of ``2^8``-``2^14`` (every addition
    then rounds the same way), with ``||x||^2 = d / 2^10`` exactly."""
    X = np.full((n, d), 2.0**-5)
    norm_x = math.sqrt(d / 1024.0)
    worst = 0.0
    for e in range(-50, -36):
        for f in (0.45, 0.7, 0.99):
            b = 1.0 + f * 2.0**e
            w = np.full(d, b)
            exact = Fraction(b) * d / 32
            paths = (
                _block_predictions(X, w, 0.0, BLOCK_ROWS),
                LinearDesign(X, False).predict(w),
            )
            for Z in paths:
                err = max(abs(Fraction(float(z)) - exact) for z in Z)
                worst = max(worst, float(err) / (norm_x * float(np.linalg.norm(w))))
    return worst


def test_prediction_rounding_past_the_old_margin_stays_within_the_new_bound():
    # Three rows of d = 2000 (and 8000, for kernels with more accumulators):
    # the squared loss's gradient error from the rounded predictions is |dz|
    # ||x|| (rows alike, phi' = z - y), against gamma_d H ||w|| (H = ||x||^2)
    # now, and 64 eps H ||w+|| before (the old relative margin's share at the
    # certified point, H (||w|| + ||w+||) with w ~ w+ split in two): the
    # measured share exceeds the old one.
    worst = 0.0
    for d in (2000, 8000):
        relative = _worst_prediction_rounding(d)  # |dz| / (||x|| ||w||)
        H, W = d / 1024.0, 1.0
        assert relative * H * W <= prediction_error(d, H, W)
        assert prediction_error(d, H, W) >= _gamma(d) * H * W
        worst = max(worst, relative)
    assert worst > 64.0 * EPS  # measured 245 u on OpenBLAS, > 128 u


def test_prediction_error_grows_with_dim_and_stays_finite():
    assert prediction_error(5001, 1.0, 1.0) == pytest.approx(_gamma(5001), rel=1e-6)
    assert prediction_error(5001, 1.0, 1.0) > 30.0 * 64.0 * EPS
    assert prediction_error(10, 2.0, 3.0) == pytest.approx(6.0 * _gamma(10), rel=1e-6)
    assert prediction_error(2**52, 1.0, 1.0) == math.inf


def test_output_perturbation_plan_covers_the_predictions_at_d_5000():
    # Logistic loss, rows of norm 1 (H = 1/4, L = 1), lambda = 1e-3: the
    # certified point has norm <= 6 L / lambda (certificate_floor).
    p, L, H, lam, n = 5001, 1.0, 0.25, 1e-3, 10**5
    design = LinearDesign(np.zeros((n, 1)), True)  # n, exact sums; p passed
    summed = gradient_error_bound(design, L, p)
    plan = plan_output_perturbation(
        budget=AlgorithmBudget(2.0, 1e-6, n),
        n_params=p,
        lipschitz=L,
        smoothness=H,
        l2_penalty=lam,
        sparsity=p,
        tol=1e-12,
    )
    assert plan.gradient_error == 0.0 + prediction_error(p, H, 6.0 * L / lam)
    plan = plan_output_perturbation(
        budget=AlgorithmBudget(2.0, 1e-6, n),
        n_params=p,
        lipschitz=L,
        smoothness=H,
        l2_penalty=lam,
        sparsity=p,
        tol=1e-12,
        gradient_error=summed,
    )
    predictions = _gamma(p) * H * 6.0 * L / lam
    assert plan.gradient_error >= summed + predictions
    # The floored tol_w keeps the certificate's whole margin below tol_w / 16,
    # the predictions' share included; the former floor did not.
    assert plan.tol_w == certificate_floor(L, H, lam, plan.gradient_error)
    assert plan.tol_w >= 16.0 * predictions / lam
    assert certificate_floor(L, H, lam, summed) < 16.0 * predictions / lam


def test_objective_perturbation_plan_covers_the_predictions_at_d_5000():
    # Squared loss on the unit ball with an intercept: R~ = sqrt(2), beta = 2,
    # R_max = sqrt(2); the certified point lies in C x [-1, 1].
    n, d = 50, 5000
    design = LinearDesign(np.zeros((n, d)), True)
    loss = get_loss("squared")
    C = L2Ball(1.0, n_features=d)
    plan = objp._public_plan(
        design, loss, C, 1, 1.0, 1e-5, (1.0, 1.0, 1.0, None), ("auto", 0.0, "auto")
    )
    beta, r_max = plan.smoothness, plan.r_max
    assert beta == pytest.approx(2.0) and r_max == pytest.approx(math.sqrt(2.0))
    predictions = _gamma(d + 1) * beta * r_max
    summed = objp._gradient_error(design, plan.row_gradient_bound, d + 1, 0.0, 0, 0)
    assert plan.gradient_error >= summed + predictions
    mu = plan.constants["mu_J"]
    # gamma / 2 (the certified distance) is at least the floor, 8 E / mu of it.
    assert plan.constants["certify_tol"] >= 8.0 * predictions / mu
