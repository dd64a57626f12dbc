"""Catoni/Holland mean oracle (Wang et al. 2020, Algorithm 4): psi, sensitivity, noise.

Reference values of psi at beta = 2 ln(100) (40-digit quadrature) and of the
correction term C(a, b) of eq. (9); worked numbers of Algorithm 4's calibration
(n = 1e5, d = 10, T = 10, eps = 1, delta = 1e-5); the sensitivity (s / n) 2 CAP
behind eq. (12); the noise law and the non-private limit.
"""

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import integrate, stats
from scipy.special import ndtr

from skdpsco._design import LinearDesign
from skdpsco._mean_estimation._catoni import (
    CAP,
    CatoniMeanOracle,
    CatoniPsiTable,
    _catoni_correction,
    catoni_psi,
)
from skdpsco.privacy import PrivacySpent, approx_dp_to_zcdp

BETA_REF = 2.0 * math.log(100.0)


def phi(u):
    """Soft truncation of Catoni & Giulini, written independently of the module."""
    u = np.asarray(u, dtype=float)
    return np.where(
        np.abs(u) <= math.sqrt(2.0), u - u**3 / 6.0, np.sign(u) * 2 * math.sqrt(2) / 3
    )


def psi_reference(a, beta):
    """E phi(X), X ~ N(a, a^2/beta), by adaptive quadrature (independent code)."""
    b = abs(a) / math.sqrt(beta)
    if b == 0:
        return a - a**3 / 6
    r2 = math.sqrt(2.0)
    tails = CAP * (ndtr((a - r2) / b) - ndtr((-r2 - a) / b))
    # In standard units z = (x - a) / b, the Gaussian is never too narrow for quad.
    lo, hi = max((-r2 - a) / b, -40.0), min((r2 - a) / b, 40.0)
    if lo >= hi:
        return tails

    def integrand(z):
        x = a + b * z
        return (x - x**3 / 6) * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)

    with warnings.catch_warnings():  # roundoff notices near the 1e-15 target
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        inner, _ = integrate.quad(
            integrand, lo, hi, epsabs=1e-15, epsrel=1e-13, limit=200
        )
    return tails + inner


# -- psi ---------------------------------------------------------------------------


def test_psi_matches_reference_table():
    a = np.array([0.5, 1.0, 2.0, 10.0, 1e3, 1e6])
    expected = [
        0.4723808154,
        0.7825301704,
        0.9190612164,
        0.9401023612,
        0.9405401112,
        0.9405401533,
    ]
    np.testing.assert_allclose(catoni_psi(a, BETA_REF), expected, rtol=0, atol=1e-9)
    # The saturation level as |a| -> inf: sign(a) CAP (1 - 2 Phi(-sqrt(beta))).
    for beta, level in [(BETA_REF, 0.9405), (math.log(100), 0.9128)]:
        limit = CAP * (1 - 2 * ndtr(-math.sqrt(beta)))
        assert limit == pytest.approx(level, abs=5e-5)
        assert catoni_psi(1e8, beta) == pytest.approx(limit, abs=1e-8)
        assert catoni_psi(-np.inf, beta) == pytest.approx(-limit, abs=1e-8)


def test_correction_term_matches_reference_values():
    np.testing.assert_allclose(
        _catoni_correction([1.0, -1.5, 2.5], [0.7, 1.1, 0.5]),
        [0.074515, -0.687563, 1.358932],
        rtol=0,
        atol=1e-6,
    )


@pytest.mark.parametrize("beta", [1.0, math.log(100), BETA_REF, 100.0, 1e4])
def test_psi_equals_literal_closed_form_where_it_is_accurate(beta):
    # Literal eq. (9), a (1 - b^2/2) - a^3/6 + C(a, b), for |a| <= 50, beta >= 1:
    # psi's regrouped evaluation and the quadrature branch agree with it.
    a = np.concatenate([np.geomspace(1e-6, 50, 200), [1.41421356, 1.5, 49.999]])
    b = a / math.sqrt(beta)
    literal = a * (1 - b**2 / 2) - a**3 / 6 + _catoni_correction(a, b)
    np.testing.assert_allclose(catoni_psi(a, beta), literal, rtol=0, atol=1e-10)


@pytest.mark.parametrize("beta", [1e-6, 1e-3, 0.1, math.log(100), 1e3, 1e12])
def test_psi_matches_adaptive_quadrature(beta):
    a = [1e-7, 1e-3, 0.02, 0.3, 1.2, 1.5, 3.0, 20.0, 49.0, 51.0, 300.0, 1e5, 1e8]
    expected = [psi_reference(v, beta) for v in a]
    np.testing.assert_allclose(catoni_psi(a, beta), expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize("beta", [math.log(100), BETA_REF])
def test_psi_matches_monte_carlo_of_multiplicative_noise(beta):
    # psi(a) = E phi(a (1 + zeta)), zeta ~ N(0, 1/beta) (Holland 2019; eq. (9)).
    zeta = np.random.default_rng(0).normal(0.0, 1.0 / math.sqrt(beta), 10**6)
    for a in [-3.0, -1.0, 0.2, 0.7, 1.3, 2.0, 8.0, 100.0]:
        mc = phi(a * (1 + zeta)).mean()
        assert abs(catoni_psi(a, beta) - mc) < 3e-3


def test_psi_small_argument_expansion_and_non_private_limit():
    # psi(a) = a - a^3 (1/6 + 1/(2 beta)) + O(a^5) (eq. (9) with b^2 = a^2 / beta;
    # C(a, b) is exponentially small there).
    for beta in [1e-2, math.log(100), 1e6]:
        a = np.array([1e-9, 1e-6, -1e-4, 1e-3])
        approx = a - a**3 * (1 / 6 + 1 / (2 * beta))
        np.testing.assert_allclose(catoni_psi(a, beta), approx, rtol=1e-12)


def test_psi_is_odd_and_monotone():
    rng = np.random.default_rng(1)
    a = np.concatenate(
        [rng.standard_cauchy(20000), np.geomspace(1e-12, 1e12, 500), [0.0]]
    )
    for beta in [1e-6, math.log(100), 1e12]:
        np.testing.assert_array_equal(catoni_psi(-a, beta), -catoni_psi(a, beta))
        grid = np.linspace(0, 60, 6001)
        assert np.all(np.diff(catoni_psi(grid, beta)) >= -1e-12)


EXTREMES = [0.0, 1e-300, -1e-300, 1e5, -1e5, 1e6, -1e6, 1e12, -1e12]
EXTREMES += [1e300, -1e300, np.inf, -np.inf, np.nan, 5e-324, 1.7e308]


@pytest.mark.parametrize("beta", [1e-6, 1e-3, math.log(100), 1e6, 1e12])
def test_psi_is_bounded_and_never_nan(beta):
    out = catoni_psi(EXTREMES, beta)
    assert np.all(np.isfinite(out))
    assert np.all(np.abs(out) <= CAP)
    assert out[EXTREMES.index(0.0)] == 0.0
    assert np.isnan(EXTREMES[13]) and out[13] == 0.0  # NaN input -> 0 (sanitised)
    # Heavy-tailed bulk input: bounded everywhere, and the shape is kept.
    z = np.random.default_rng(2).standard_cauchy((300, 7)) ** 3
    out = catoni_psi(z, beta)
    assert out.shape == (300, 7) and np.all(np.abs(out) <= CAP)


def test_psi_sanitises_inputs_to_a_big():
    # Step 1 of catoni_psi's recipe: +-inf and everything beyond 1e8 are evaluated as
    # +-1e8 (psi has saturated there), so they give bit-identical values.
    for beta in [1e-6, math.log(100), 1e12]:
        big = catoni_psi([1e8, 1.5e8, 1e300, np.inf, 1.7e308], beta)
        assert np.all(big == big[0])
        assert catoni_psi(-np.inf, beta) == -big[0]


@pytest.mark.parametrize("branch", ["_psi_closed", "_psi_quadrature"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 7.0])
def test_psi_final_guard_maps_nan_and_clips(monkeypatch, branch, bad):
    # Step 5 of catoni_psi, the privacy guard (the sensitivity needs |psi| <= CAP):
    # whatever a branch returns, the output is finite and in [-CAP, CAP]; NaN becomes
    # 0 before the clip (np.clip passes NaN through).
    from skdpsco._mean_estimation import _catoni

    monkeypatch.setattr(_catoni, branch, lambda a, beta: np.full(a.shape, bad))
    out = catoni_psi([-1e9, -60.0, -0.5, 0.0, 0.5, 60.0, 1e9], math.log(100))
    assert np.all(np.isfinite(out)) and np.all(np.abs(out) <= CAP)
    if np.isnan(bad):  # the entries of the NaN branch (and a = 0) became 0
        assert np.sum(out == 0) == (3 if branch == "_psi_closed" else 5)


@pytest.mark.parametrize(
    "beta", [0.0, -1.0, 9.9e-7, 1.01e12, np.inf, np.nan, 1e-300, True, "1", None]
)
def test_psi_rejects_beta_outside_finite_range(beta):
    with pytest.raises(ValueError, match="beta"):
        catoni_psi([1.0], beta)


def test_psi_accepts_range_ends_and_scalars():
    assert np.ndim(catoni_psi(0.5, 1e-6)) == 0
    assert catoni_psi(0.5, 1e12) == pytest.approx(0.5 - 0.5**3 / 6, abs=1e-12)
    # beta -> 0: the smoothing is so wide that psi is ~0 away from the origin.
    assert abs(catoni_psi(10.0, 1e-6)) < 1e-3


# -- psi lookup table (what the oracle evaluates) ----------------------------------

TABLE_BETAS = [1e-6, 1e-3, 0.1, 1.0, math.log(100), BETA_REF, 100.0, 1e4, 1e12]
#: The table's documented accuracy against catoni_psi, for every beta.
TABLE_ERROR = 4.4e-9


def table_grid():
    tails = np.geomspace(1e-12, 1e12, 20001)
    extremes = [0.0, -0.0, 5e-324, 2.2e-308, 1e-300, 1e8, 1.5e8, 1e300, 1.7e308]
    pos = np.concatenate([tails, extremes])
    return np.concatenate([np.linspace(-60, 60, 240001), pos, -pos])


@pytest.mark.parametrize("beta", TABLE_BETAS)
def test_table_matches_catoni_psi_on_dense_grid(beta):
    a = table_grid()
    table = CatoniPsiTable(beta)
    err = np.abs(table(a) - catoni_psi(a, beta))
    assert err.max() <= TABLE_ERROR
    # The error is that of an interpolation, not a rounding: it is not 0.
    assert err.max() > 1e-13
    # Through the scale (folded into the table's constants): psi(G / s).
    for s in [0.37, 2.0, 1e5]:
        b = a[np.abs(a) <= 1e12]
        err = np.abs(table(b * s, s) - catoni_psi(b, beta))
        assert err.max() <= TABLE_ERROR


@pytest.mark.parametrize("beta", [1e-6, math.log(100), 1e12])
def test_table_keeps_relative_accuracy_near_zero(beta):
    # psi(a) ~ a: the table stores psi(a) / g and multiplies by g, so small
    # gradients are not swamped by the absolute error.
    a = np.geomspace(1e-300, 1e-4, 2001)
    np.testing.assert_allclose(CatoniPsiTable(beta)(a), catoni_psi(a, beta), rtol=2e-9)


@pytest.mark.parametrize("beta", [1e-6, math.log(100), 1e12])
def test_table_is_bounded_odd_and_maps_non_finite_inputs(beta):
    table = CatoniPsiTable(beta)
    out = table(EXTREMES)
    assert np.all(np.isfinite(out)) and np.all(np.abs(out) <= CAP)
    assert out[EXTREMES.index(0.0)] == 0.0
    assert np.isnan(EXTREMES[13]) and out[13] == 0.0  # NaN -> 0, as catoni_psi
    # +-inf and everything beyond 1e8 are evaluated at +-1e8: bit-identical.
    big = table([1e8, 1.5e8, 1e300, np.inf, 1.7e308])
    assert np.all(big == big[0]) and table(-np.inf) == -big[0]
    assert big[0] == pytest.approx(catoni_psi(np.inf, beta), abs=TABLE_ERROR)
    # Odd exactly (the sign bit is copied back), on heavy-tailed input.
    rng = np.random.default_rng(12)
    a = np.concatenate(
        [rng.standard_cauchy(20000) ** 3, np.geomspace(1e-12, 1e12, 500)]
    )
    np.testing.assert_array_equal(table(-a), -table(a))
    assert np.all(np.abs(table(a)) <= CAP)
    assert np.all(np.isfinite(table.table))


@pytest.mark.parametrize("scale", [1e-300, 1e-5, 1.0, 1e250, 1e300])
def test_table_scale_is_applied_whether_or_not_it_folds(scale):
    # 1e-300 and 1e300 are outside the range where the scale folds into the
    # constants (|G| / s is formed first); the others fold.
    beta = math.log(100)
    a = np.concatenate([np.linspace(-5, 5, 2001), [1e6, -1e7, 1e-6]])
    with np.errstate(under="ignore"):
        G = a * scale
    out = CatoniPsiTable(beta)(G, scale)
    np.testing.assert_allclose(out, catoni_psi(a, beta), rtol=0, atol=TABLE_ERROR)
    # A gradient entry that overflows the scale saturates, it does not wrap.
    assert CatoniPsiTable(beta)(1.7e308, scale) == pytest.approx(
        catoni_psi(1e8, beta), abs=TABLE_ERROR
    )


@pytest.mark.parametrize("block", [64, 2**15])
def test_table_column_sums_equal_pointwise_sums(monkeypatch, block):
    # Row blocks (a partial last one, padding to whole lanes) and the weighted
    # matrix-vector sum give the sums of the pointwise values.
    from skdpsco._mean_estimation import _catoni

    monkeypatch.setattr(_catoni, "_TABLE_BLOCK", block)
    rng = np.random.default_rng(13)
    G = rng.standard_cauchy((517, 7, 3)) * 2
    G[0, 0, 0], G[1, 2, 1], G[2, 3, 2], G[3, 1, 0] = np.nan, np.inf, -np.inf, -0.0
    table = CatoniPsiTable(3.0)
    w = rng.uniform(0, 1, 517)
    values = table(G, 0.7)
    np.testing.assert_allclose(
        table.column_sums(G, 0.7), values.sum(axis=0), rtol=1e-13, atol=1e-13
    )
    np.testing.assert_allclose(
        table.column_sums(G, 0.7, w),
        np.einsum("i,ijk->jk", w, values),
        rtol=1e-13,
        atol=1e-13,
    )
    assert table.column_sums(G[:0], 0.7).shape == (7, 3)
    assert np.all(table.column_sums(G[:0], 0.7) == 0)


def test_table_final_clip_is_the_privacy_guard():
    # Whatever the table held, every value is in [-CAP, CAP]: the sensitivity
    # (s / n) 2 CAP does not rest on the interpolation being right.
    a = np.array([-1e9, -60.0, -1.3, -0.5, 0.0, 0.5, 1.3, 60.0, 1e9, np.nan])
    for bad in [1e300, -1e300, 7.0]:
        table = CatoniPsiTable(math.log(100))
        table.table = np.full_like(table.table, bad)
        out = table(a)
        assert np.all(np.isfinite(out)) and np.all(np.abs(out) <= CAP)
        assert np.any(np.abs(out) == CAP) == (bad > 0)


def test_table_validation_and_equality():
    t = CatoniPsiTable(math.log(100))
    assert t == CatoniPsiTable(math.log(100)) and hash(t) == hash(
        CatoniPsiTable(math.log(100))
    )
    assert t != CatoniPsiTable(3.0) and t != CatoniPsiTable(math.log(100), size=2**10)
    assert not t.table.flags.writeable
    assert t.table.shape == (2**15 + 1, 2)
    for size in [3, 2**25, 2**3, 1.5, True, 1000]:
        with pytest.raises(ValueError, match="size"):
            CatoniPsiTable(1.0, size=size)
    for beta in [0.0, 1e13, np.nan, "1"]:
        with pytest.raises(ValueError, match="beta"):
            CatoniPsiTable(beta)
    for scale in [0.0, -1.0, np.inf, np.nan]:
        with pytest.raises(ValueError, match="scale"):
            t([1.0], scale)
    # A coarser table is less accurate: the default size is what the accuracy needs.
    a = table_grid()
    coarse = CatoniPsiTable(1e12, size=2**14)
    assert np.abs(coarse(a) - catoni_psi(a, 1e12)).max() > 1.5e-8


# -- oracle: calibration ---------------------------------------------------------


def test_worked_numbers_of_algorithm_4():
    n, d, T, eps, delta = 100_000, 10, 10, 1.0, 1e-5
    rho = approx_dp_to_zcdp(eps, delta)
    assert rho == pytest.approx(0.02081994, rel=1e-6)
    oracle = CatoniMeanOracle(moment_bound=1.0, scale="paper", failure_prob=0.01)
    oracle.calibrate(n, rho / T, (d,))
    assert oracle.scale_ == pytest.approx(104.198666, rel=1e-8)
    assert oracle.smoothing_ == pytest.approx(4.605170, rel=1e-6)
    assert oracle.sensitivity_ == pytest.approx(0.00196479, rel=1e-5)
    assert oracle.sensitivity_ == pytest.approx(4 * math.sqrt(2) * oracle.scale_ / 3e5)
    s = oracle.scale_
    algorithm_4_sigma = (4 * s / (3 * n)) * math.sqrt(d * T / rho)
    assert oracle.noise_std_ == pytest.approx(algorithm_4_sigma, rel=1e-12)
    assert oracle.noise_std_ == pytest.approx(0.0962856, rel=1e-6)
    assert oracle.noise_scale == oracle.noise_std_
    # The paper's own formula, Algorithm 4's sigma^2 = 8 v d T / (9 n rho ln(1/delta')),
    # with the default s.
    paper_var = 8 * 1.0 * d * T / (9 * n * rho * math.log(100))
    assert oracle.noise_std_**2 == pytest.approx(paper_var, rel=1e-12)
    # The ledger composes T calls back to the total rho.
    spent = PrivacySpent.from_records(oracle.records(T), delta)
    assert spent.rho == pytest.approx(rho, rel=1e-12)
    assert spent.epsilon <= eps * (1 + 1e-9)


def test_scale_and_smoothing_resolution():
    o = CatoniMeanOracle(moment_bound=9.0).calibrate(1000, 0.1, (3,))
    assert o.scale_ == 6.0  # "rms": 2 sqrt(v)
    assert o.smoothing_ == pytest.approx(math.log(100))  # ln(1/delta')
    o = CatoniMeanOracle(scale=2.5, smoothing=7.0, failure_prob=0.2).calibrate(
        1000, 0.1, (3, 2)
    )
    assert (o.scale_, o.smoothing_) == (2.5, 7.0)
    # Noise is linear in s (Delta = 4 sqrt(2) s / (3 n)) and uses sqrt(p) Delta with
    # p = prod(shape).
    o2 = CatoniMeanOracle(scale=5.0, smoothing=7.0).calibrate(1000, 0.1, (3, 2))
    assert o2.noise_std_ == pytest.approx(2 * o.noise_std_, rel=1e-14)
    delta = 4 * math.sqrt(2) * 2.5 / (3 * 1000)
    assert o.noise_std_ == pytest.approx(math.sqrt(6) * delta / math.sqrt(0.2))
    (rec,) = o.records(7)
    assert rec.kind == "gaussian" and rec.count == 7
    assert rec.sensitivity == pytest.approx(math.sqrt(6) * delta)
    assert rec.scale == o.noise_std_
    # rho = inf: the hidden non-private mode, sigma = 0.
    assert CatoniMeanOracle().calibrate(10, math.inf, (2,)).noise_std_ == 0.0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"moment_bound": 0.0},
        {"moment_bound": -1.0},
        {"moment_bound": np.inf},
        {"moment_bound": np.nan},
        {"moment_bound": "1"},
        {"scale": "auto"},
        {"scale": 0.0},
        {"scale": -2.0},
        {"scale": np.inf},
        {"scale": np.nan},
        {"scale": None},
        {"smoothing": 0.0},
        {"smoothing": 1e-7},
        {"smoothing": 1e13},
        {"smoothing": np.nan},
        {"failure_prob": 0.0},
        {"failure_prob": 1.0},
        {"failure_prob": -0.1},
        {"failure_prob": np.nan},
        {"failure_prob": 1 - 1e-9},  # default smoothing ln(1/delta') < 1e-6
    ],
)
def test_oracle_parameter_validation(kwargs):
    with pytest.raises(ValueError):
        CatoniMeanOracle(**kwargs)


def test_calibrate_and_estimate_validation():
    o = CatoniMeanOracle()
    for n in [0, -3, 2.5, True]:
        with pytest.raises(ValueError, match="n_samples"):
            o.calibrate(n, 0.1, (3,))
    for shape in [(0,), (2, 3, 4), ()]:
        with pytest.raises(ValueError, match="shape"):
            o.calibrate(10, 0.1, shape)
    with pytest.raises(ValueError, match="rho"):
        o.calibrate(10, 0.0, (3,))
    with pytest.raises(ValueError, match="resolved scale"):
        CatoniMeanOracle(moment_bound=1e308, scale="paper").calibrate(10**9, 1, (3,))
    o.calibrate(10, 0.1, (3,))
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="calibrated for n"):
        o.estimate(LinearDesign(np.ones((11, 2)), True), np.ones(11), rng)
    with pytest.raises(ValueError, match="shape"):
        o.estimate(LinearDesign(np.ones((10, 4)), True), np.ones(10), rng)
    with pytest.raises(ValueError, match="sample_weight"):
        design = LinearDesign(np.ones((10, 2)), True)
        o.estimate(design, np.ones(10), rng, sample_weight=np.full(10, 1.5))


# -- oracle: estimate ---------------------------------------------------------------


def dense_estimate(X, U, s, beta, fit_intercept=True, weight=None, psi=catoni_psi):
    Xt = np.hstack([X, np.ones((X.shape[0], 1))]) if fit_intercept else X
    G = U[:, None] * Xt if U.ndim == 1 else Xt[:, :, None] * U[:, None, :]
    contrib = psi(G / s, beta)
    if weight is not None:
        contrib = contrib * weight.reshape((-1,) + (1,) * (contrib.ndim - 1))
    return s / X.shape[0] * contrib.sum(axis=0)


@pytest.mark.parametrize("K", [None, 3])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.usefixtures("non_private_mode")
def test_estimate_equals_dense_computation(K, sparse):
    rng = np.random.default_rng(3)
    n, d = 61, 4
    X = rng.standard_t(2, size=(n, d))
    X[np.abs(X) < 0.4] = 0.0
    U = rng.standard_t(2, size=n if K is None else (n, K)) * 3
    shape = (d + 1,) if K is None else (d + 1, K)
    oracle = CatoniMeanOracle(scale=0.7, smoothing=3.0).calibrate(n, math.inf, shape)
    design = LinearDesign(sp.csr_matrix(X) if sparse else X, True, chunk_rows=7)
    out = oracle.estimate(design, U, rng)
    assert out.shape == shape

    # psi through the table (what the oracle evaluates), and within the table's
    # error 4.4e-9 times s of the reference catoni_psi.
    def table(a, beta):
        return CatoniPsiTable(beta)(a)

    np.testing.assert_allclose(
        out, dense_estimate(X, U, 0.7, 3.0, psi=table), rtol=1e-12
    )
    exact = dense_estimate(X, U, 0.7, 3.0)
    np.testing.assert_allclose(out, exact, rtol=0, atol=4.4e-9 * 0.7)
    assert np.max(np.abs(out - exact)) > 0  # the table is what was used
    # Public weights in [0, 1] multiply each psi term; the denominator stays n.
    w = rng.uniform(0, 1, n)
    out_w = oracle.estimate(design, U, rng, sample_weight=w)
    np.testing.assert_allclose(
        out_w, dense_estimate(X, U, 0.7, 3.0, weight=w, psi=table), rtol=1e-12
    )


def test_multinomial_noise_and_shape():
    n, d, K, rho = 30, 400, 3, 0.05
    oracle = CatoniMeanOracle(scale="paper").calibrate(n, rho, (d, K))
    design = LinearDesign(np.zeros((n, d)), False)
    U = np.random.default_rng(4).normal(size=(n, K))
    out = oracle.estimate(design, U, np.random.default_rng(5))
    assert out.shape == (d, K)
    sigma = math.sqrt(d * K) * 4 * math.sqrt(2) * oracle.scale_ / (3 * n)
    sigma /= math.sqrt(2 * rho)
    assert oracle.noise_std_ == pytest.approx(sigma, rel=1e-12)
    lo, hi = stats.chi2.ppf([0.0005, 0.9995], d * K) / (d * K)
    assert lo * sigma**2 < np.mean(out**2) < hi * sigma**2


def test_noise_law_with_zero_gradients():
    # Noise law: X = 0 gives gradients 0 and psi(0) = 0, so the estimate is pure
    # noise of std sigma = sqrt(p) Delta / sqrt(2 rho) (rho of one call).
    n, d, rho = 64, 20_000, 0.02
    oracle = CatoniMeanOracle(scale="paper").calibrate(n, rho, (d,))
    design = LinearDesign(np.zeros((n, d)), False)
    U = np.random.default_rng(6).standard_cauchy(n)
    out = oracle.estimate(design, U, np.random.default_rng(7))
    delta = 4 * math.sqrt(2) * math.sqrt(n / (2 * math.log(100))) / (3 * n)
    sigma = math.sqrt(d) * delta / math.sqrt(2 * rho)
    lo, hi = stats.chi2.ppf([0.0005, 0.9995], d) / d
    assert lo * sigma**2 < np.mean(out**2) < hi * sigma**2
    assert abs(out.mean()) < 4 * sigma / math.sqrt(d)


def test_noise_law_at_the_worked_numbers():
    # The worked configuration (n = 1e5, d = 10, T = 10, eps = 1, delta = 1e-5): the
    # per-call sigma equals Algorithm 4's value (4 s/(3n)) sqrt(dT/rho).
    n, d, T = 100_000, 10, 10
    rho_total = approx_dp_to_zcdp(1.0, 1e-5)
    oracle = CatoniMeanOracle(scale="paper").calibrate(n, rho_total / T, (d,))
    design = LinearDesign(np.zeros((n, d)), False)
    U = np.random.default_rng(6).standard_cauchy(n)
    rng = np.random.default_rng(8)
    draws = np.array([oracle.estimate(design, U, rng) for _ in range(60)])
    sigma = (4 * oracle.scale_ / (3 * n)) * math.sqrt(d * T / rho_total)
    assert sigma == pytest.approx(0.0962856, rel=1e-6)
    m = draws.size
    lo, hi = stats.chi2.ppf([0.0005, 0.9995], m) / m
    assert lo * sigma**2 < np.mean(draws**2) < hi * sigma**2
    # The same seed reproduces the noise; another seed does not.
    a = oracle.estimate(design, U, np.random.default_rng(9))
    b = oracle.estimate(design, U, np.random.default_rng(9))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, draws[0])


@pytest.mark.parametrize("scale", ["paper", "rms", 0.05])
@pytest.mark.parametrize("smoothing", [None, 1e-6, 1e12])
@pytest.mark.usefixtures("non_private_mode")
def test_empirical_sensitivity_under_extreme_replacement(scale, smoothing):
    # The sensitivity behind eq. (12): no noise, fixed w; replacing one record moves
    # every coordinate by at most 4 sqrt(2) s / (3 n), while the plain mean gradient
    # moves without bound.
    rng = np.random.default_rng(9)
    n, d = 200, 5
    X = rng.standard_t(2, size=(n, d))
    y = X @ rng.normal(size=d) + rng.standard_t(2, size=n)
    w = rng.normal(size=d + 1)
    design = LinearDesign(X, True)
    U = design.predict(w) - y  # squared loss derivative at the fixed w
    oracle = CatoniMeanOracle(
        moment_bound=4.0, scale=scale, smoothing=smoothing
    ).calibrate(n, math.inf, (d + 1,))
    bound = 4 * math.sqrt(2) * oracle.scale_ / (3 * n)
    assert oracle.sensitivity_ == pytest.approx(bound, rel=1e-15)
    canaries = [
        (np.full(d, 1e8), -1e12),
        (np.full(d, 1e8), 1e12),
        (np.full(d, -1e8), 1e300),
        (np.zeros(d), np.nan),
        (np.full(d, 1e-300), np.inf),
        (-X[0] * 1e6, 1e9),
        (rng.normal(size=d), -U[0]),
    ]
    estimates, plain = [], []
    for x_c, u_c in canaries:
        X2, U2 = X.copy(), U.copy()
        X2[0], U2[0] = x_c, u_c
        d2 = LinearDesign(X2, True)
        estimates.append(oracle.estimate(d2, U2, rng))
        with np.errstate(over="ignore", invalid="ignore"):
            plain.append(d2.weighted_sum(np.nan_to_num(U2, nan=0.0)) / n)
    base = oracle.estimate(design, U, rng)
    worst = 0.0
    for est in [base, *estimates]:
        for other in estimates:
            worst = max(worst, np.max(np.abs(est - other)))
    assert np.all(np.isfinite(estimates))
    assert worst <= bound * (1 + 1e-9)
    if smoothing != 1e-6:  # beta = 1e-6 smooths psi almost to 0: far from tight
        assert worst > 0.9 * bound  # (x=1e8 1, u=+-1e12) nearly attains the bound
    # Negative control: the plain mean gradient moves by many orders more.
    plain_move = np.max(np.abs(plain[0] - design.weighted_sum(U) / n))
    assert plain_move > 1e15 * bound


@pytest.mark.usefixtures("non_private_mode")
def test_non_private_limit_is_the_plain_mean_gradient():
    # With rho = inf (sigma = 0) and a huge scale, psi(a) ~ a: the estimate is the
    # exact mean gradient X~^T u / n.
    rng = np.random.default_rng(10)
    n, d = 500, 6
    X = rng.normal(size=(n, d))
    U = rng.normal(size=n) * 2
    design = LinearDesign(X, True, chunk_rows=64)
    oracle = CatoniMeanOracle(scale=1e6).calibrate(n, math.inf, (d + 1,))
    out = oracle.estimate(design, U, np.random.default_rng(0))
    np.testing.assert_allclose(out, design.weighted_sum(U) / n, rtol=1e-9)
    UK = rng.normal(size=(n, 3))
    oracle.calibrate(n, math.inf, (d + 1, 3))
    out = oracle.estimate(design, UK, np.random.default_rng(0))
    np.testing.assert_allclose(out, design.weighted_sum(UK) / n, rtol=1e-9)


def test_oracle_stores_only_public_numbers():
    # Nothing data-dependent is kept: the state after estimate is the same for two
    # different datasets of the same public n and shape.
    rng = np.random.default_rng(11)
    n, d = 40, 3
    states = []
    for _ in range(2):
        oracle = CatoniMeanOracle(scale="paper").calibrate(n, 0.5, (d + 1,))
        X = rng.standard_cauchy((n, d))
        oracle.estimate(LinearDesign(X, True), rng.standard_cauchy(n), rng)
        state = dict(vars(oracle))
        mech = state.pop("mechanism_")
        states.append((state, vars(mech)))
    assert states[0] == states[1]
