"""Regularised output perturbation (Ghazi et al., Algorithm 6): numbers.

Noise scales equal their formulas, the certificate is required before release, the
sensitivity bound holds under adversarial neighbours, the noise has the stated
distribution, and the l-infinity projection is the soft-threshold rule (Algorithm 6
breaks its ties "arbitrarily").
"""

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import optimize, stats

from skdpsco._design import LinearDesign
from skdpsco._estimators._sparse_gradient import (
    INTERCEPT_COLUMN_RATIO,
    SparseGradientDPClassifier,
    SparseGradientDPRegressor,
)
from skdpsco._losses import get_loss
from skdpsco._solvers._output_perturbation import (
    auto_l2_penalty,
    certified_erm,
    certified_iteration_budget,
    linf_project_l2_ball,
    output_perturbation,
    plan_output_perturbation,
)
from skdpsco.exceptions import CertificationError
from skdpsco.privacy import calibrate_analytic_gaussian
from skdpsco.privacy._budget import AlgorithmBudget
from skdpsco.privacy._params import _non_private_testing_mode

#: The implicit intercept column at row_norm_bound = 1: the solver's coefficient
#: of the column is intercept_ / A.
A = 1.0 / INTERCEPT_COLUMN_RATIO


def _plan(**kw):
    params = dict(
        n_samples=1000,
        n_params=51,
        lipschitz=1.5,
        smoothness=2.0,
        l2_penalty=0.1,
        sparsity=6,
        epsilon=1.0,
        delta=1e-6,
        tol=1e-3,
    )
    params.update(kw)
    budget = AlgorithmBudget(
        params.pop("epsilon"), params.pop("delta"), params.pop("n_samples")
    )
    return plan_output_perturbation(budget=budget, **params)


# ------------------------------------------------------------ noise formulas


def test_gaussian_noise_is_the_analytic_calibration_of_the_certified_sensitivity():
    plan = _plan()
    exact = 2 * 1.5 / (0.1 * 1000)
    assert plan.tol_w == pytest.approx(1e-3 * exact, rel=1e-15)
    assert plan.sensitivity == pytest.approx(exact * (1 + 2e-3), rel=1e-15)
    sigma = calibrate_analytic_gaussian(1.0, 1e-6, plan.sensitivity)
    assert plan.noise == "gaussian"
    assert plan.noise_scale == pytest.approx(sigma, rel=1e-8)
    assert plan.noise_scale >= sigma * (1 - 1e-12)  # never below the calibration


def test_laplace_scale_is_the_printed_l1_bound_plus_the_sqrt_p_tolerance_term():
    plan = _plan(delta=0.0, epsilon=0.5)
    n, lam, L, H, s, p = 1000, 0.1, 1.5, 2.0, 6, 51
    tol_w = 1e-3 * 2 * L / (lam * n)
    b1 = (2 * math.sqrt(2 * s) * L / (lam * n)) * (2 * H / lam + 1)
    assert plan.noise == "laplace"
    assert plan.sensitivity == pytest.approx(b1 + 2 * math.sqrt(p) * tol_w, rel=1e-14)
    assert plan.noise_scale == pytest.approx(plan.sensitivity / 0.5, rel=1e-14)


def test_auto_penalty_formulas():
    kw = dict(
        lipschitz=2.0,
        smoothness=4.0,
        coef_norm_bound=0.5,
        n_samples=10_000,
        n_params=1001,
        sparsity=11,
        confidence=0.05,
    )
    lam = auto_l2_penalty(epsilon=1.0, delta=1e-6, **kw)
    stat = math.log(1e4) * math.log(20) / 1e4
    priv = math.sqrt(11 * math.log(1e6) * math.log(1001 / 0.05)) / 1e4
    assert lam == pytest.approx(4.0 * math.sqrt(stat + priv), rel=1e-14)
    lam0 = auto_l2_penalty(epsilon=1.0, delta=0.0, **kw)
    pure = (4.0 * 4.0 / 0.25 * 11 * math.log(1001 / 0.05) / 1e4) ** (1 / 3)
    assert lam0 == pytest.approx(max(4.0 * math.sqrt(stat), pure), rel=1e-14)
    # epsilon -> inf keeps lambda > 0 (the statistical term).
    assert auto_l2_penalty(epsilon=math.inf, delta=0.0, **kw) > 0


def test_iteration_budget_is_public_and_grows_with_the_condition_number():
    a = certified_iteration_budget(
        lipschitz=1, smoothness=1, l2_penalty=0.1, tol_w=1e-6
    )
    b = certified_iteration_budget(
        lipschitz=1, smoothness=1, l2_penalty=0.01, tol_w=1e-6
    )
    # V-FISTA's count (Beck 2017, Thm 10.42 with Lemma 10.4): ~2 sqrt(kappa) log.
    kappa = 1.1 / 0.1
    ratio = 2 * math.sqrt(2) * (kappa - 1) / (math.sqrt(kappa) * 0.1 * 1e-6)
    assert a == math.ceil(2 * math.log(ratio) / -math.log(1 - 1 / math.sqrt(kappa)))
    assert b > 3 * a


# ---------------------------------------------------------------- certificate


def _huber_problem(n=200, d=30, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / math.sqrt(d)
    y = X @ rng.normal(size=d) + 0.3 * rng.standard_cauchy(n)
    return X, y


def test_early_stopped_solver_refuses_to_release():
    X, y = _huber_problem()
    est = SparseGradientDPRegressor(
        scaling="none", max_iter=1, alpha=0.01 * len(y), tol=1e-6, random_state=0
    )
    with pytest.raises(CertificationError, match="nothing is released"):
        est.fit(X, y)
    assert not hasattr(est, "coef_") and not hasattr(est, "privacy_spent_")
    # A fitted estimator keeps its release when a refit cannot certify.
    est.set_params(max_iter=None).fit(X, y)
    before = (est.coef_.copy(), est.intercept_, est.privacy_spent_)
    est.set_params(max_iter=1)
    with pytest.raises(CertificationError):
        est.fit(X + 1.0, y)
    np.testing.assert_array_equal(est.coef_, before[0])
    assert est.intercept_ == before[1] and est.privacy_spent_ is before[2]
    assert est.max_iter == 1


def test_solver_level_refusal_draws_no_noise():
    X, y = _huber_problem()
    design = LinearDesign(X, True)
    plan = _plan(n_samples=200, n_params=31, l2_penalty=0.01, max_iter=1)
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    with pytest.raises(CertificationError):
        output_perturbation(
            design, y, get_loss("huber"), n_outputs=1, plan=plan, rng=rng
        )
    assert rng.bit_generator.state == state  # nothing drawn, nothing released


def _penalised_gradient(X, y, loss, w, lam, fit_intercept, K=None):
    Xt = np.hstack([X, np.ones((X.shape[0], 1))]) if fit_intercept else X
    W = w if K is None else w.reshape(Xt.shape[1], K)
    U = loss.derivative(Xt @ W, y)
    return (Xt.T @ U / X.shape[0]).ravel() + lam * w.ravel()


@pytest.mark.parametrize("lam", [0.3, 0.01])
def test_certificate_bounds_the_true_distance(lam):
    X, y = _huber_problem()
    loss = get_loss("huber")
    plan = _plan(n_samples=200, n_params=31, l2_penalty=lam, lipschitz=1.0, tol=1e-3)
    w = certified_erm(LinearDesign(X, True), y, loss, shape=(31,), plan=plan)
    # The gradient-norm certificate ||grad F(w)|| / lambda <= tol_w (lambda-strong
    # convexity), recomputed densely.
    g = _penalised_gradient(X, y, loss, w, lam, True)
    assert np.linalg.norm(g) / lam <= plan.tol_w
    ref = optimize.minimize(
        lambda v: (
            np.mean(loss.value(np.hstack([X, np.ones((200, 1))]) @ v, y))
            + lam / 2 * v @ v
        ),
        np.zeros(31),
        jac=lambda v: _penalised_gradient(X, y, loss, v, lam, True),
        method="L-BFGS-B",
        options=dict(gtol=1e-13, ftol=1e-15, maxiter=10_000),
    ).x
    assert np.linalg.norm(w - ref) <= plan.tol_w + 1e-9


# ------------------------------------------------- sensitivity, adversarial


def _neighbours(kind, X, y, classification):
    Xp, yp = np.array(X, copy=True), np.array(y, copy=True)
    if kind == "dense":
        Xp[0] = 1e6  # dense canary: every feature huge
    elif kind == "huge":
        Xp[0] = 0.0
        Xp[0, 3] = 1e300  # one huge value
    elif kind == "label":
        Xp[0] = X[0] / np.linalg.norm(X[0])
    if classification:
        yp[0] = 1 - yp[0] if yp.max() == 1 else (yp[0] + 1) % (yp.max() + 1)
    else:
        yp[0] = -1e6 if kind != "huge" else 1e300
    return Xp, yp


def _non_private_coef(est, X, y):
    with _non_private_testing_mode():
        est.set_params(epsilon=np.inf).fit(X, y)
    coef = np.atleast_2d(est.coef_)
    return np.hstack([coef, np.atleast_1d(est.intercept_)[:, None] / A]).ravel()


@pytest.mark.parametrize("kind", ["dense", "huge", "label"])
@pytest.mark.parametrize("task", ["huber", "squared_error", "logistic", "multinomial"])
def test_sensitivity_bound_holds_under_adversarial_neighbours(task, kind):
    rng = np.random.default_rng(1)
    n, d = 60, 8
    X = rng.normal(size=(n, d)) / math.sqrt(d)
    lam = 0.05
    if task in ("huber", "squared_error"):
        y = X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)
        params = dict(alpha=lam * n, loss=task, target_bound=2.0, coef_norm_bound=3.0)
        est = SparseGradientDPRegressor(scaling="none", tol=1e-3, **params)
        classification = False
    else:
        K = 2 if task == "logistic" else 3
        y = rng.integers(0, K, size=n)
        y[:K] = np.arange(K)
        y[K] = 1  # keep every label after the swap of record 0
        est = SparseGradientDPClassifier(scaling="none", C=1 / (lam * n), tol=1e-3)
        classification = True
    Xp, yp = _neighbours(kind, X, y, classification)
    w = _non_private_coef(est, X, y)
    wp = _non_private_coef(est, Xp, yp)
    assert est.alpha_ == pytest.approx(lam * n)  # Ridge's units
    C = math.hypot(1.0 * (1 + 1e-12), A)
    if task == "huber":
        L = 1.0 * C
    elif task == "squared_error":
        L = (3.0 * C + 2.0) * C
    else:
        L = (1.0 if task == "logistic" else math.sqrt(2)) * C
    bound = 2 * L / (lam * n) * (1 + 2e-3)
    gap = np.linalg.norm(w - wp)
    assert gap <= bound
    # The neighbours are adversarial enough for the test to mean something (the
    # squared loss's L is a worst case over the whole ball, so it is looser).
    assert gap >= (0.02 if task == "squared_error" else 0.1) * bound


# --------------------------------------------------------- noise distribution


def _release_minus_solution(est, X, y, seeds):
    w = _non_private_coef(est, X, y)
    noises = []
    for seed in seeds:
        est.set_params(epsilon=1.0, random_state=seed).fit(X, y)
        noises.append(
            np.hstack(
                [np.atleast_2d(est.coef_), np.atleast_1d(est.intercept_)[:, None] / A]
            ).ravel()
            - w
        )
    return np.concatenate(noises), est.noise_scale_


def test_gaussian_noise_std_within_chi_square_band():
    rng = np.random.default_rng(2)
    X = sp.random(300, 3000, density=0.003, format="csr", random_state=3)
    y = np.asarray(X @ rng.normal(size=3000)).ravel()
    est = SparseGradientDPRegressor(
        scaling="none", alpha=0.2 * 300, sparsity=12, delta=1e-6
    )
    noise, sigma = _release_minus_solution(est, X, y, seeds=[0, 1])
    k = noise.size
    stat = np.sum(noise**2) / sigma**2
    lo, hi = stats.chi2.ppf([0.0005, 0.9995], k)
    assert lo <= stat <= hi
    # The calibration itself: analytic Gaussian of 2L/(lambda n)(1 + 2 tol).
    L = math.hypot(1 + 1e-12, A)
    delta2 = 2 * L / (0.2 * 300) * (1 + 2e-3)
    assert sigma == pytest.approx(calibrate_analytic_gaussian(1.0, 1e-6, delta2), 1e-8)
    assert stats.kstest(noise / sigma, "norm").pvalue > 1e-3


def test_laplace_noise_matches_its_scale():
    rng = np.random.default_rng(4)
    X = sp.random(300, 3000, density=0.003, format="csr", random_state=5)
    y = (np.asarray(X @ rng.normal(size=3000)).ravel() > 0).astype(int)
    est = SparseGradientDPClassifier(scaling="none", C=0.05, sparsity=12, delta=0.0)
    noise, b = _release_minus_solution(est, X, y, seeds=[0, 1])
    assert stats.kstest(noise / b, "laplace").pvalue > 1e-3
    # Mean absolute deviation of Laplace(b) is b: within 4 standard errors.
    assert abs(np.mean(np.abs(noise)) / b - 1) < 4 / math.sqrt(noise.size)


def test_multinomial_noise_is_sqrt2_times_binary():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(90, 5)) / 3
    y2 = np.arange(90) % 2
    y3 = np.arange(90) % 3
    b = SparseGradientDPClassifier(scaling="none", C=0.1, random_state=0).fit(X, y2)
    m = SparseGradientDPClassifier(scaling="none", C=0.1, random_state=0).fit(X, y3)
    assert m.noise_scale_ / b.noise_scale_ == pytest.approx(math.sqrt(2), rel=1e-9)
    assert rng is not None


# ----------------------------------------------------- l-infinity projection


def _soft(w, t):
    return np.sign(w) * np.maximum(np.abs(w) - t, 0.0)


@pytest.mark.parametrize("seed", range(5))
def test_linf_projection_onto_l2_ball(seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_cauchy(size=15)
    R = 0.7
    out = linf_project_l2_ball(w, R)
    assert np.linalg.norm(out) <= R * (1 + 1e-12)
    # Bisection on t for the minimal l-inf distance, and the soft-threshold form.
    lo, hi = 0.0, np.abs(w).max()
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if np.linalg.norm(_soft(w, mid)) <= R else (mid, hi)
    assert np.max(np.abs(out - w)) == pytest.approx(hi, rel=1e-9)
    np.testing.assert_allclose(out, _soft(w, hi), atol=1e-9)
    inside = w / np.linalg.norm(w) * 0.5 * R
    np.testing.assert_array_equal(linf_project_l2_ball(inside, R), inside)
    assert linf_project_l2_ball(w, None) is w


def test_constrained_release_lies_in_the_ball():
    X, y = _huber_problem()
    est = SparseGradientDPRegressor(
        scaling="none",
        loss="squared_error",
        target_bound=1.0,
        coef_norm_bound=0.5,
        epsilon=0.1,
    ).fit(X, y)
    assert np.linalg.norm(np.append(est.coef_, est.intercept_ / A)) <= 0.5 * (1 + 1e-9)


# ------------------------------------------------------------- attribute leak


def test_no_unnoised_solution_in_the_fitted_state():
    X, y = _huber_problem()
    alpha = 0.1 * len(y)  # lambda = 0.1
    w = _non_private_coef(SparseGradientDPRegressor(scaling="none", alpha=alpha), X, y)
    est = SparseGradientDPRegressor(scaling="none", alpha=alpha, random_state=0)
    est.fit(X, y)
    for name, value in vars(est).items():
        arr = np.asarray(value, dtype=object)
        if arr.dtype == object or arr.size < 2:
            continue
        arr = np.asarray(value, dtype=float).ravel()
        assert not np.allclose(arr[: w.size - 1], w[:-1], atol=1e-3), name
    assert est.n_iter_ == certified_iteration_budget(
        lipschitz=math.hypot(1 + 1e-12, A),
        smoothness=math.hypot(1 + 1e-12, A) ** 2,
        l2_penalty=0.1,
        tol_w=1e-3 * 2 * math.hypot(1 + 1e-12, A) / (0.1 * 200),
    )


def test_tiny_tol_is_floored_so_the_certificate_never_depends_on_the_data():
    # Neighbours differing in one target: without the public floor on tol_w, the
    # rounding margin of the certificate (which grows with ||w*||) exceeded
    # tol * 2L / (lambda n) on one side only, so one fit released and the other
    # raised CertificationError, whatever the seed.
    from skdpsco import SparseGradientDPRegressor
    from skdpsco._solvers._output_perturbation import certificate_floor

    rng = np.random.default_rng(0)
    n, d = 200, 5
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    full = rng.normal(size=n) * 10
    y_a = np.where(np.arange(n) < 72, full, 0.0)
    y_b = np.where(np.arange(n) < 73, full, 0.0)
    for y in (y_a, y_b):
        est = SparseGradientDPRegressor(
            scaling="none", alpha=1e-2 * n, tol=1e-12, random_state=0
        )
        est.fit(X, y)
        assert np.all(np.isfinite(est.coef_))
    assert certificate_floor(1.0, 1.0, 1e-2) > 1e-12 * 2.0 / (1e-2 * n)
