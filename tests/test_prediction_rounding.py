"""The certificates' gradient error bound covers the rounding of the predictions.

A computed gradient reads ``phi'`` at ``fl(<x~_i, w>)``, a dot product of ``dim``
terms whose worst-case float64 rounding ``gamma_dim ||x~|| ||w||`` (Higham 2002,
eq. 3.5) outgrows the certificate's relative ``64 eps`` margin past ``dim ~
128``. The certificate's one gradient accumulates its predictions in
``np.longdouble``: the bound :func:`~skdpsco._solvers._certified.prediction_error`,
``(2u + gamma^ld_dim)(1 + 2u) H W`` with the platform's extended unit, is added
to the public gradient error of every certified solve.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

import skdpsco._design as design_module
from skdpsco._constraints import L2Ball
from skdpsco._design import LinearDesign, _block_predictions
from skdpsco._exact_sum import BLOCK_ROWS
from skdpsco._losses import get_loss
from skdpsco._solvers import _objective_perturbation as objp
from skdpsco._solvers import _output_perturbation as outp
from skdpsco._solvers._certified import (
    EXTENDED_UNIT,
    derivative_error,
    prediction_error,
)
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


def _extended_dz(k):
    """``(2u + gamma^ld_k)(1 + 2u)``: the relative prediction error in the
    certificate's gradient (:func:`prediction_error`)."""
    gamma = k * EXTENDED_UNIT / (1.0 - k * EXTENDED_UNIT)
    return (2.0 * U + gamma) * (1.0 + 2.0 * U)


def _worst_prediction_rounding(d, n=3, extended=False):
    """The largest measured ``|fl(<x, w>) - <x, w>| / (||x|| ||w||)`` of the
    prediction paths over equal-term products ``x_j w_j = 2^-5 b``, ``b`` just
    below half an ulp above 1 at partial sums of ``2^8``-``2^14`` (every float64
    addition then rounds the same way), with ``||x||^2 = d / 2^10`` exactly;
    ``extended``: the certificate's paths (``np.longdouble`` sums, dense and
    CSR rows)."""
    X = np.full((n, d), 2.0**-5)
    norm_x = math.sqrt(d / 1024.0)
    worst = 0.0
    for e in range(-50, -36):
        for f in (0.45, 0.7, 0.99):
            b = 1.0 + f * 2.0**e
            w = np.full(d, b)
            exact = Fraction(b) * d / 32
            paths = (
                _block_predictions(X, w, 0.0, BLOCK_ROWS, extended),
                LinearDesign(X, False).predict(w, extended=extended),
            )
            if extended:
                paths += (LinearDesign(sp.csr_matrix(X), False).predict(w, True),)
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
        assert relative <= _gamma(d)
        worst = max(worst, relative)
    assert worst > 64.0 * EPS  # measured 245 u on OpenBLAS, > 128 u


def test_certificate_predictions_are_extended_and_within_the_bound():
    # The same worst-case rows through the certificate's paths: each sum in
    # np.longdouble, then one rounding to float64, within (2u + gamma^ld_d)
    # (1 + 2u) ||x|| ||w||; where longdouble is wider than float64 the
    # measured error is within 2u (x86-64: 0.51 u at d = 2000, 1.42 u at
    # d = 8000, the final rounding's u plus the extended sums'), against the
    # float64 sums' 245 u.
    for d in (2000, 8000):
        relative = _worst_prediction_rounding(d, extended=True)
        H, W = d / 1024.0, 1.0
        assert relative <= _extended_dz(d)
        assert relative * H * W <= prediction_error(d, H, W)
        if EXTENDED_UNIT < U:
            assert relative <= 2.0 * U
            assert _worst_prediction_rounding(d) > 100.0 * relative


def test_prediction_error_uses_the_platform_extended_unit():
    assert EXTENDED_UNIT == float(np.finfo(np.longdouble).eps) / 2.0
    assert EXTENDED_UNIT <= U
    assert prediction_error(5001, 1.0, 1.0) == pytest.approx(
        _extended_dz(5001), rel=1e-6
    )
    assert prediction_error(10, 2.0, 3.0) == pytest.approx(
        6.0 * _extended_dz(10), rel=1e-6
    )
    if np.finfo(np.longdouble).nmant == 63:  # x86-64's 80-bit format
        # 10^6 terms: 5.4e-14 against the float64 sums' gamma = 1.1e-10.
        assert prediction_error(10**6, 1.0, 1.0) == pytest.approx(5.44e-14, rel=1e-2)
        assert prediction_error(10**6, 1.0, 1.0) < _gamma(10**6) / 2000.0
    assert prediction_error(10**6, 1.0, 1.0) >= 2.0 * U + 10**6 * EXTENDED_UNIT
    assert prediction_error(int(0.5 / EXTENDED_UNIT), 1.0, 1.0) == math.inf


def test_the_certificate_alone_reads_extended_predictions(monkeypatch):
    # A certified output-perturbation solve on dense rows (exact sums) and on
    # CSR rows (float sums): extended predictions are computed twice per solve,
    # for the final step and the certificate's gradient; the iterations' are float64.
    calls = []
    original = design_module.extended_predictions

    def spy(X, head, offset, chunk_rows=design_module.DEFAULT_CHUNK_ROWS):
        calls.append(X.shape[0])
        return original(X, head, offset, chunk_rows)

    monkeypatch.setattr(design_module, "extended_predictions", spy)
    rng = np.random.default_rng(0)
    n, d = 300, 40
    X = rng.standard_normal((n, d)) / math.sqrt(2.0 * d)
    y = np.clip(X @ rng.standard_normal(d), -1.0, 1.0)
    plan = plan_output_perturbation(
        budget=AlgorithmBudget(1.0, 1e-6, n),
        n_params=d + 1,
        lipschitz=2.0,
        smoothness=1.0,
        l2_penalty=0.1,
        sparsity=d + 1,
        tol=1e-3,
    )
    loss = get_loss("squared")
    for rows, bound in ((X, 2.0), (sp.csr_matrix(X), None)):
        calls.clear()
        w = outp.certified_erm(
            LinearDesign(rows, True),
            y,
            loss,
            shape=(d + 1,),
            plan=plan,
            radius=1.0,
            gradient_bound=bound,
        )
        assert sum(calls) == 2 * n and plan.max_iter > 10
        assert np.all(np.isfinite(w)) and np.linalg.norm(w) <= 1.0 + 1e-12


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
    assert plan.gradient_error >= _extended_dz(p) * H * 6.0 * L / lam
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
    predictions = _extended_dz(p) * H * 6.0 * L / lam
    assert plan.gradient_error >= summed + predictions
    # The floored tol_w keeps the certificate's whole margin below tol_w / 16,
    # the predictions' share included; with extended predictions that share is
    # below the float64 products' gamma_p share, which the floor would
    # otherwise have had to hold.
    assert plan.tol_w == certificate_floor(L, H, lam, plan.gradient_error)
    assert plan.tol_w >= 16.0 * predictions / lam
    if EXTENDED_UNIT < U:
        float_share = _gamma(p) * H * 6.0 * L / lam
        assert predictions < float_share / 10.0
        assert plan.tol_w < certificate_floor(L, H, lam, summed + float_share)


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
    predictions = _extended_dz(d + 1) * beta * r_max
    summed = objp._gradient_error(design, plan.row_gradient_bound, d + 1, 0.0, 0, 0)
    assert plan.gradient_error >= summed + predictions
    mu = plan.constants["mu_J"]
    # gamma / 2 (the certified distance) is at least the floor, 8 E / mu of it.
    assert plan.constants["certify_tol"] >= 8.0 * predictions / mu


def _exact_softmax_minus_onehot(z, y):
    from decimal import Decimal, localcontext

    with localcontext() as ctx:
        ctx.prec = 60
        e = [Decimal(float(v)).exp() for v in z]
        total = sum(e)
        p = [v / total for v in e]
        p[y] -= 1
        return np.array([float(v) for v in p])


@pytest.mark.parametrize("K", [1, 3, 7])
def test_derivative_error_covers_the_coefficients_evaluation(K):
    """The coefficients ``expit(z) - y`` / ``softmax(z) - e_y`` computed from
    given predictions err by at most ``(K + 8) u`` in l2 (the multiple of ``G =
    R`` the certificate adds per row, :func:`derivative_error`), measured
    against 60-digit decimals on scores that make the subtraction and the
    normalisation round."""
    rng = np.random.default_rng(K)
    n = 400
    scores = np.concatenate(
        [rng.normal(scale=s, size=(n // 4, max(K, 2))) for s in (0.1, 1, 10, 40)]
    )
    loss = get_loss("multinomial" if K > 1 else "logistic")
    if K == 1:
        z, y = scores[:, 0], rng.integers(0, 2, size=scores.shape[0]).astype(float)
        computed = loss.derivative(z, y)[:, None]
        exact = np.array(
            [
                _exact_softmax_minus_onehot([0.0, v], int(t))[1:]
                for v, t in zip(z, y, strict=True)
            ]
        )
        # expit(z) - y is the second entry of softmax([0, z]) - e_y: the same.
    else:
        y = rng.integers(0, K, size=scores.shape[0])
        computed = loss.derivative(scores, y)
        exact = np.array(
            [_exact_softmax_minus_onehot(s, t) for s, t in zip(scores, y, strict=True)]
        )
    worst = float(np.max(np.linalg.norm(computed - exact, axis=1)))
    bound = derivative_error(1.0, K)
    assert bound == (K + 8) * U * (1.0 + 2.0**-40)
    assert 0.0 < worst <= bound


def test_plans_add_the_derivative_error():
    """Both certified plans carry ``(K + 8) u G``: removing it fails here."""
    n, d = 50, 3
    design = LinearDesign(np.zeros((n, d)), True)
    for K in (1, 3):
        G = 2.0
        base = objp._gradient_error(design, G, (d + 1) * K, 0.0, 0.0, 0.0)
        summed = objp.summation_error(design, G, (d + 1) * K)
        rest = base - summed - 2.01 * U * G - prediction_error(d + 1, 0.0, 0.0)
        assert rest == pytest.approx(derivative_error(G, K), rel=1e-9)
        out = gradient_error_bound(design, G, (d + 1) * K, K)
        assert out - outp.summation_error(design, G, (d + 1) * K) - 2.01 * U * G == (
            pytest.approx(derivative_error(G, K), rel=1e-9)
        )
