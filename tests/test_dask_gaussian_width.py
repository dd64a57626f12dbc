"""GaussianWidthDP* on dask collections (LocalCluster): objective perturbation and
noisy mirror descent give the numpy fit bit for bit for three chunkings; the
sequential algorithms refuse; the exact sums' error bounds hold on adversarial
blocks."""

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from _dask_data import chunkings, raw_data

from skdpsco import GaussianWidthDPClassifier, GaussianWidthDPRegressor
from skdpsco._design import LinearDesign
from skdpsco._exact_sum import BLOCK_ROWS, exact_sum_error
from skdpsco._solvers._certified import certified_minimize_fixed

da = pytest.importorskip("dask.array")

#: Two full blocks and a tail: every chunking below crosses a block boundary.
N = 9000


def _data(n=N):
    return raw_data(n, 3, [1.0, -0.5, 0.25, 0.0, 0.3])


def _chunkings(X, y):
    return chunkings(X, y, aligned_rows=4096)


def _params(Est, algorithm, scaling):
    """A strong public ridge keeps the certified solve's count near 10; mirror
    descent runs 3 steps at epsilon 1."""
    if algorithm == "mirror_descent":
        return {"algorithm": algorithm, "epsilon": 1.0, "max_iter": 3}
    unit = 1.0 if scaling == "none" else 5.0  # the fit's unit: sqrt(d) squared
    if Est is GaussianWidthDPRegressor:
        return {"algorithm": algorithm, "alpha": 100.0 * N * unit}
    return {"algorithm": algorithm, "C": 0.04 / (N * unit)}


CASES = [
    (GaussianWidthDPRegressor, "reg"),
    (GaussianWidthDPClassifier, "binary"),
    (GaussianWidthDPClassifier, "three"),
]


@pytest.mark.parametrize("scaling", ["private", "none"])
@pytest.mark.parametrize("algorithm", ["objective_perturbation", "mirror_descent"])
@pytest.mark.parametrize(
    "Est, target", CASES, ids=[f"{c[0].__name__}-{c[1]}" for c in CASES]
)
def test_dask_fits_are_the_numpy_fit_bit_for_bit(
    dask_client, Est, target, algorithm, scaling
):
    X, targets = _data()
    y = targets[target]
    params = dict(_params(Est, algorithm, scaling), radius=5.0, scaling=scaling)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        memory = Est(random_state=0, **params).fit(X, y)
        if algorithm == "objective_perturbation":
            assert 3 <= memory.n_iter_[0] <= 20, memory.n_iter_
        assert np.count_nonzero(memory.coef_) >= 3
        for name, Xd, yd in _chunkings(X, y):
            fitted = Est(random_state=0, **params).fit(Xd, yd)
            np.testing.assert_array_equal(fitted.coef_, memory.coef_, err_msg=name)
            np.testing.assert_array_equal(
                fitted.intercept_, memory.intercept_, err_msg=name
            )
            assert fitted.privacy_spent_ == memory.privacy_spent_, name
            np.testing.assert_array_equal(fitted.n_iter_, memory.n_iter_)


def test_sequential_algorithms_refuse_dask_input_naming_the_supported(dask_client):
    X, targets = _data(5000)
    Xd = da.from_array(X, chunks=2000)
    supported = r"use one of \['objective_perturbation', 'mirror_descent'\]"
    for Est, target, params in (
        (GaussianWidthDPRegressor, "reg", {}),  # auto: phased_sgd
        (GaussianWidthDPClassifier, "binary", {"algorithm": "phased_sgd"}),
        (
            GaussianWidthDPRegressor,
            "reg",
            {"algorithm": "shuffled_mirror_descent", "fit_intercept": False},
        ),
    ):
        est = Est(random_state=0, **params)
        with pytest.raises(TypeError, match=supported):
            est.fit(Xd, da.from_array(targets[target], chunks=2000))
        assert not hasattr(est, "coef_")


def _cancelling_rows(tail):
    """A block of ``1 + delta_i`` (``delta_i`` just below half the spacing of
    floats near the partial sums BLAS keeps, so that most additions lose it), a
    block of ``-1`` and ``tail`` zero rows: the computed mean is nearly 0, the
    exact one ``sum delta_i / n``."""
    rng = np.random.default_rng(0)
    delta = 0.98 * 2.0**-46 * (1.0 + 0.01 * rng.random(BLOCK_ROWS))
    column = np.r_[1.0 + delta, np.full(BLOCK_ROWS, -1.0), np.zeros(tail)]
    return column[:, None]


def test_exact_sum_error_covers_a_measured_worst_block_rounding():
    X = _cancelling_rows(808)
    n = X.shape[0]
    design = LinearDesign(X, fit_intercept=False)
    L = float(np.max(np.abs(X)))

    def ones(Z, y, norms):
        return np.ones_like(Z)

    got = design.exact_fused_sum(np.zeros(1), ones, L, np.zeros(n))[0] / n
    exact = sum((Fraction(float(v)) for v in X[:, 0]), Fraction(0)) / n
    error = float(abs(Fraction(float(got)) - exact))
    assert 1e-15 * L < error <= exact_sum_error(L, n, 1)
    # The former margin, 64 eps times the gradient's computed norm (at w = 0 the
    # only term of the certificate's scale), missed it: an absolute error.
    assert error > 64 * np.finfo(float).eps * abs(got)


def test_certificate_adds_the_gradient_error():
    """The residual certificate's distance includes ``E / mu``: a gradient
    known only to within ``E`` cannot certify below it."""

    def value_and_grad(w):
        return None, 2.0 * (w - 1.0)

    kwargs = dict(w0=np.zeros(3), mu=2.0, smoothness=2.0, tol=1.0, n_iter=5)
    plain = certified_minimize_fixed(value_and_grad, None, **kwargs)
    shifted = certified_minimize_fixed(
        value_and_grad, None, gradient_error=1e-6, **kwargs
    )
    assert shifted.distance_bound == pytest.approx(
        plain.distance_bound + 1e-6 / 2.0, rel=1e-12, abs=0
    )
    assert math.isfinite(shifted.distance_bound)


#: Records an adversary may place (features, target): past the float range once
#: squared, subnormal, all zero, at the row bound exactly, huge targets.
EXTREME_RECORDS = {
    "huge": (np.full(5, 1e300), np.finfo(float).max),
    "subnormal": (np.full(5, 5e-324), -5e-324),
    "zero": (np.zeros(5), 0.0),
    "at_bound": (np.array([1.0, 0.0, 0.0, 0.0, 0.0]), -1e300),
    "mixed": (np.array([1e308, -1e308, 5e-324, 0.0, 1.0]), -np.finfo(float).max),
}


@pytest.mark.parametrize("algorithm", ["objective_perturbation", "mirror_descent"])
def test_extreme_records_stay_within_the_public_row_bound(algorithm, monkeypatch):
    """Replace-one neighbours with one extreme record (scaling="none", so it
    reaches the clip unchanged): every fit runs without an exception or a
    warning, the dask fit gives the in-memory bits, and every row's gradient
    contribution ``|phi'| ||x~_i||`` at every point the solve evaluates stays
    within the public bound that fixes the exact sums' grid (for mirror descent
    a row at the clip bound, its Huber derivative at the threshold, comes within
    0.3% of it)."""
    worst = []
    exact_fused_sum = LinearDesign.exact_fused_sum

    def checked(self, W, coefficients, bound, y, sample_weight=None, **kwargs):
        X = np.hstack([self.X, np.ones((self.n_samples, 1))])
        C = coefficients(X @ W, y)
        worst.append(float(np.max(np.abs(C) * np.linalg.norm(X, axis=1)) / bound))
        return exact_fused_sum(self, W, coefficients, bound, y, sample_weight, **kwargs)

    monkeypatch.setattr(LinearDesign, "exact_fused_sum", checked)
    rng = np.random.default_rng(8)
    X = rng.standard_normal((3000, 5))
    y = X @ np.array([3.0, -2.0, 1.0, 0.0, 0.5]) + rng.standard_normal(3000)
    params = {"algorithm": algorithm, "scaling": "none", "random_state": 0}
    if algorithm == "mirror_descent":
        params.update(epsilon=1.0, max_iter=3)
    else:  # a public ridge keeps the certified solve short (its count is public)
        params.update(epsilon=5.0, alpha=3e4)
    ratios = {}
    for name, (x, t) in EXTREME_RECORDS.items():
        X_prime, y_prime = X.copy(), y.copy()
        X_prime[1234], y_prime[1234] = x, t
        worst.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            memory = GaussianWidthDPRegressor(**params).fit(X_prime, y_prime)
            lazy = GaussianWidthDPRegressor(**params).fit(
                da.from_array(X_prime, chunks=(1001, 3)),
                da.from_array(y_prime, chunks=1400),
            )
        np.testing.assert_array_equal(lazy.coef_, memory.coef_)
        assert lazy.intercept_ == memory.intercept_
        ratios[name] = max(worst)
    assert max(ratios.values()) <= 1.0
    if algorithm == "mirror_descent":
        # e_0 with the intercept column against the Hölder bound of the q-norm
        # ball: 0.9974 of it.
        assert ratios["at_bound"] == pytest.approx(0.99737, abs=1e-5)
