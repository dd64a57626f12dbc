"""Gaussian-width benchmark: constrained DP regression whose error tracks the width.

Issue 7 §4 (Su, Zhao & Wang). Sparse ground truth ``w*`` (5 non-zeros,
``||w*||_1 = 0.9``) inside the unit l1 ball; ``n = 10,000`` rows, ``d`` in
{1000, 3000, 10000}: 10 dense features (the support of ``w*`` and 5 distractors,
90% of the expected squared row norm) and 20 random non-zeros per row among the
other ``d - 10`` (bag-of-words style, scipy.sparse CSR, 10%), rows of l2 norm
about 1 (clipped to 1 by every method), ``y = x . w* + 0.05 N(0, 1)``. The data
are on a public scale by construction, as in the papers, so every fit runs with
``scaling="none"``: the l1 ball of radius 1 is then the one in the units of ``X``
that holds ``w*`` (with the default private scaling it would hold the
coefficients of the standardised columns instead).

For every ``epsilon`` in {0.5, 1, 4} and every algorithm of
:class:`~skdpsco.GaussianWidthDPRegressor` (l1-ball constraint, radius 1) the table
reports the estimation error ``||w - w*||_2`` (mean over seeds), against

* an unconstrained DP-GD baseline at the same ``(epsilon, delta)``: clipped
  full-batch gradient descent with Gaussian noise (the ``"clipped_gd"`` algorithm
  of :class:`~skdpsco.HeavyTailedDPRidge`, run on the same sparse design through
  the same solver), and
* the non-private constrained solution: accelerated projected gradient on the same
  clipped data, solved to a gradient-mapping norm of 1e-10.

The width of the unit l1 ball grows like ``sqrt(2 ln d)`` (3.44, 3.78, 4.02 for the
three ``d``) and ``sqrt(d)`` grows 3.16x from d = 1000 to 10000; the last table puts
the growth of each method's error next to both. Fit times are relative to the
non-private projected-gradient solve. ``--quick``: d in {300, 1000}, n = 3000,
one seed.

Usage: ``python benchmarks/gaussian_width.py [--quick] [--seeds K]``.
"""

import argparse
import math
import time
import warnings

import numpy as np
import scipy.sparse as sp

from skdpsco._constraints import gaussian_width, project_l1_ball
from skdpsco._design import LinearDesign
from skdpsco._estimators._gaussian_width import (
    GaussianWidthDPClassifier,
    GaussianWidthDPRegressor,
)
from skdpsco._losses import get_loss
from skdpsco._mean_estimation import ClippedMeanOracle
from skdpsco._solvers import noisy_gradient_descent
from skdpsco.privacy._accounting import gaussian_rho_budget
from skdpsco.privacy._budget import AlgorithmBudget

ALGORITHMS = [
    "objective_perturbation",
    "mirror_descent",
    "phased_sgd",
    "shuffled_mirror_descent",
]
DELTA = 1e-5
N_SIGNAL = 10
NNZ_NOISE = 20
#: Share of the expected squared row norm carried by the informative features.
SIGNAL_SHARE = 0.9
W_SUPPORT = np.array([0.35, -0.25, 0.15, -0.10, 0.05])


def make_data(n, d, seed):
    """Sparse-truth regression with a CSR design (see the module docstring)."""
    rng = np.random.default_rng(seed)
    dense = rng.normal(scale=math.sqrt(SIGNAL_SHARE / N_SIGNAL), size=(n, N_SIGNAL))
    cols = np.stack(
        [rng.choice(d - N_SIGNAL, NNZ_NOISE, replace=False) for _ in range(n)]
    )
    vals = rng.normal(
        scale=math.sqrt((1.0 - SIGNAL_SHARE) / NNZ_NOISE), size=(n, NNZ_NOISE)
    )
    rows = np.repeat(np.arange(n), N_SIGNAL + NNZ_NOISE)
    all_cols = np.hstack([np.tile(np.arange(N_SIGNAL), (n, 1)), cols + N_SIGNAL])
    X = sp.csr_matrix(
        (np.hstack([dense, vals]).ravel(), (rows, all_cols.ravel())), shape=(n, d)
    )
    w_star = np.zeros(d)
    w_star[: W_SUPPORT.size] = W_SUPPORT
    y = X @ w_star + 0.05 * rng.standard_normal(n)
    return X, y, w_star


def clip_rows(X, bound=1.0):
    """Rows rescaled to l2 norm <= bound (what every private method does)."""
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    scale = np.minimum(1.0, bound / np.maximum(norms, 1e-300))
    return sp.diags(scale) @ X


def nonprivate_constrained(X, y, radius=1.0, tol=1e-10, max_iter=20000):
    """argmin over the l1 ball of (1/2n)||Xw - y||^2: FISTA with restarts.

    The step is 1 / ||X||_F^2 * n >= 1 / lambda_max(X^T X / n) (a valid smoothness
    bound for rows of norm <= 1). Stops when the gradient mapping is below ``tol``.
    """
    n, d = X.shape
    Xt = X.T.tocsr()
    H = float(X.multiply(X).sum()) / n
    x = np.zeros(d)
    z = x.copy()
    t = 1.0
    for _ in range(max_iter):
        g = Xt @ (X @ z - y) / n
        x_new = project_l1_ball(z - g / H, radius)
        if H * np.linalg.norm(z - x_new) < tol:
            return x_new
        if np.vdot(z - x_new, x_new - x) > 0:  # gradient restart
            t = 1.0
        t_new = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * t * t))
        z = x_new + (t - 1.0) / t_new * (x_new - x)
        x, t = x_new, t_new
    return x


def dp_gd_baseline(X, y, epsilon, seed, max_iter=100):
    """Unconstrained clipped DP-GD (HeavyTailedDPRidge's "clipped_gd"), same budget.

    The same solver and oracle as ``HeavyTailedDPRidge(algorithm="clipped_gd",
    alpha=0, fit_intercept=False)`` with its default step ``1 / (2 * 1)`` and 100
    iterations, called directly because that estimator takes dense X only.
    """
    design = LinearDesign(X, fit_intercept=False)
    rho = gaussian_rho_budget(epsilon, DELTA, "gdp")
    result = noisy_gradient_descent(
        design,
        y,
        get_loss("squared"),
        ClippedMeanOracle(1.0),
        n_outputs=1,
        budget=AlgorithmBudget(epsilon, DELTA, X.shape[0], rho),
        max_iter=max_iter,
        learning_rate=0.5,
        rng=np.random.default_rng(seed),
    )
    return result.coef


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def run(dims, n, epsilons, seeds):
    errors = {}  # (method, d, eps) -> list of errors
    risks = {}  # (method, d, eps) -> list of excess test risks
    times = {}  # (method, d) -> list of seconds
    refused = {}
    for d in dims:
        for seed in range(seeds):
            X, y, w_star = make_data(n, d, seed)
            Xc = clip_rows(X)
            X_test, y_test, _ = make_data(n, d, seed + 1000)
            X_test = clip_rows(X_test)

            def excess(w, X_test=X_test, y_test=y_test, w_star=w_star):
                r = X_test @ w - y_test
                r_star = X_test @ w_star - y_test
                return 0.5 * (np.mean(r**2) - np.mean(r_star**2))

            w_np, t_np = timed(lambda Xc=Xc, y=y: nonprivate_constrained(Xc, y))
            times.setdefault(("non-private PGD", d), []).append(t_np)
            for eps in epsilons:
                errors.setdefault(("non-private PGD", d, eps), []).append(
                    np.linalg.norm(w_np - w_star)
                )
                risks.setdefault(("non-private PGD", d, eps), []).append(excess(w_np))
                risks.setdefault(("zero predictor", d, eps), []).append(
                    excess(np.zeros(d))
                )
                errors.setdefault(("zero predictor", d, eps), []).append(
                    np.linalg.norm(w_star)
                )
                w_gd, t_gd = timed(
                    lambda X=X, y=y, eps=eps, seed=seed: dp_gd_baseline(X, y, eps, seed)
                )
                errors.setdefault(("DP-GD (unconstrained)", d, eps), []).append(
                    np.linalg.norm(w_gd - w_star)
                )
                risks.setdefault(("DP-GD (unconstrained)", d, eps), []).append(
                    excess(w_gd)
                )
                times.setdefault(("DP-GD (unconstrained)", d), []).append(t_gd)
                for alg in ALGORITHMS:
                    # The papers' setting: a model through the origin (the data
                    # are centred), as for the baselines.
                    est = GaussianWidthDPRegressor(
                        epsilon=eps,
                        delta=DELTA,
                        algorithm=alg,
                        fit_intercept=False,
                        scaling="none",
                        random_state=seed,
                    )
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            fitted, t = timed(lambda est=est, X=X, y=y: est.fit(X, y))
                    except ValueError as exc:
                        refused[(alg, d, eps)] = str(exc).split(";")[0][:60]
                        continue
                    errors.setdefault((alg, d, eps), []).append(
                        np.linalg.norm(fitted.coef_ - w_star)
                    )
                    risks.setdefault((alg, d, eps), []).append(excess(fitted.coef_))
                    times.setdefault((alg, d), []).append(t)
    return errors, risks, times, refused


def fmt(values, scale=1.0):
    return f"{scale * np.mean(values):.3f}" if values else "refused"


METHODS = ALGORITHMS + ["DP-GD (unconstrained)", "non-private PGD", "zero predictor"]


def print_table(title, values, dims, epsilons, scale=1.0):
    print(title)
    header = "| method | " + " | ".join(
        f"d={d}, eps={e:g}" for e in epsilons for d in dims
    )
    print(header + " |")
    print("|" + "---|" * (1 + len(dims) * len(epsilons)))
    for m in METHODS:
        cells = [fmt(values.get((m, d, e), []), scale) for e in epsilons for d in dims]
        print(f"| {m} | " + " | ".join(cells) + " |")


def print_tables(errors, risks, times, refused, dims, epsilons, n, seeds):
    methods = METHODS
    setting = f"n = {n}, l1 ball R = 1, delta = {DELTA:g}, mean of {seeds} seed(s)"
    print_table(
        f"\n### Estimation error ||w - w*||_2 ({setting})\n", errors, dims, epsilons
    )
    print_table(
        f"\n### Excess test risk x 1000, (1/2) E[(x.w - y)^2] - same at w* "
        f"({setting})\n",
        risks,
        dims,
        epsilons,
        scale=1000.0,
    )
    if refused:
        print("\nRefused configurations (ValueError, nothing released):")
        for (alg, d, eps), msg in sorted(refused.items())[:6]:
            print(f"- {alg}, d={d}, eps={eps:g}: {msg}...")

    lo, hi = dims[0], dims[-1]
    w_lo = float(gaussian_width("l1", lo))
    w_hi = float(gaussian_width("l1", hi))
    print(f"\n### Growth of the error from d={lo} to d={hi}\n")
    print(
        f"Reference ratios: l1-ball width {w_hi / w_lo:.3f} "
        f"(G = {w_lo:.3f} -> {w_hi:.3f}), sqrt(d) {math.sqrt(hi / lo):.3f}.\n"
    )
    print("| method | " + " | ".join(f"eps={e:g}" for e in epsilons) + " |")
    print("|" + "---|" * (1 + len(epsilons)))
    for m in methods:
        cells = []
        for e in epsilons:
            a, b = errors.get((m, lo, e)), errors.get((m, hi, e))
            cells.append(f"{np.mean(b) / np.mean(a):.3f}" if a and b else "-")
        print(f"| {m} | " + " | ".join(cells) + " |")

    print("\n### Fit time relative to the non-private projected-gradient solve\n")
    print("| method | " + " | ".join(f"d={d}" for d in dims) + " |")
    print("|" + "---|" * (1 + len(dims)))
    for m in methods:
        if m == "zero predictor":
            continue
        cells = []
        for d in dims:
            ref = np.mean(times[("non-private PGD", d)])
            t = times.get((m, d))
            cells.append(f"{np.mean(t) / ref:.2f}x" if t else "-")
        print(f"| {m} | " + " | ".join(cells) + " |")
    print(
        "\nNon-private PGD seconds: "
        + ", ".join(
            f"d={d}: {np.mean(times[('non-private PGD', d)]):.3f}" for d in dims
        )
    )


def multiclass_table(n, d, epsilons, seeds):
    """Accuracy of every algorithm with three classes (multinomial loss)."""
    print(f"\n### Three classes, n = {n}, d = {d}, l1 ball R = 5: test accuracy\n")
    print("| algorithm | " + " | ".join(f"eps={e:g}" for e in epsilons) + " |")
    print("|" + "---|" * (1 + len(epsilons)))
    rows = {}
    for seed in range(seeds):
        X, _, _ = make_data(2 * n, d, seed + 100)
        Xd = clip_rows(X)
        B = np.zeros((d, 3))
        B[:3, 0], B[3:6, 1] = 3.0, 3.0
        rng = np.random.default_rng(seed)
        scores = Xd @ B + rng.gumbel(size=(2 * n, 3)) * 0.3
        y = scores.argmax(axis=1)
        Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
        for alg in ALGORITHMS:
            for e in epsilons:
                est = GaussianWidthDPClassifier(
                    epsilon=e,
                    algorithm=alg,
                    radius=5.0,
                    fit_intercept=False,
                    scaling="none",
                    random_state=seed,
                )
                try:
                    acc = est.fit(Xtr, ytr).score(Xte, yte)
                except ValueError:
                    acc = None
                rows.setdefault((alg, e), []).append(acc)
    for alg in ALGORITHMS:
        cells = []
        for e in epsilons:
            vals = rows[(alg, e)]
            cells.append("refused" if None in vals else f"{np.mean(vals):.3f}")
        print(f"| {alg} | " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seeds", type=int, default=None)
    args = parser.parse_args()
    epsilons = [0.5, 1.0, 4.0]
    if args.quick:
        dims, n, seeds = [300, 1000], 3000, args.seeds or 1
    else:
        dims, n, seeds = [1000, 3000, 10000], 10_000, args.seeds or 2
    errors, risks, times, refused = run(dims, n, epsilons, seeds)
    print_tables(errors, risks, times, refused, dims, epsilons, n, seeds)
    multiclass_table(n, dims[0], epsilons, max(1, seeds // 2 + 1))


if __name__ == "__main__":
    main()
