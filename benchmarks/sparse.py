"""Benchmarks of the sparse-gradient family: speed, memory and utility at d = 10^6.

Run ``python benchmarks/sparse.py [--quick]`` (or ``make bench``). Data: one-hot rows
with F = 20 fields (vocabulary d / F each, Zipf-distributed category frequencies),
each row scaled by ``1 / sqrt(F)`` (a public constant, so ``||x|| = 1``), as a CSR
matrix with 20 non-zeros per row; ``y = x . w* + N(0, 0.5^2)`` with ``w*`` standard
normal on the 50 most frequent values of each field and 0 elsewhere. Every DP
method gets the same public prior ``coef_norm_bound = 30`` (about ``||w*||``).
Every number is measured in the same run, on the same machine:

* speed: fit time relative to scikit-learn's ``Ridge(solver="sparse_cg")`` and
  ``SGDRegressor(loss="huber")`` on the same CSR data;
* memory: peak traced allocation (tracemalloc) during ``fit`` relative to the size
  of X (data + indices + indptr); target below 3;
* utility: test mean squared error at epsilon in {0.5, 1, 4} of the sparse methods
  (output perturbation, Algorithm 6, and DP-GD with the projection mechanism,
  Algorithm 1) against the dense-noise DP baselines: DP-GD whose clipped gradient
  mean gets Gaussian noise on all d coordinates (no sparsity used), and output
  perturbation with its penalty chosen without the sparsity (``sparsity=None``).
  The same delta, loss (Huber) and row bounds everywhere.
"""

import argparse
import math
import time
import tracemalloc
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import Ridge, SGDRegressor

from skdpsco._design import LinearDesign
from skdpsco._estimators._sparse_gradient import SparseGradientDPRegressor
from skdpsco._losses import get_loss
from skdpsco._mean_estimation import ClippedMeanOracle
from skdpsco._solvers import noisy_gradient_descent
from skdpsco.privacy._accounting import gaussian_rho_budget
from skdpsco.privacy._budget import AlgorithmBudget

N_FIELDS = 20
HEAD = 50
DELTA = 1e-6
#: Public prior on ||w*|| given to every DP method (``coef_norm_bound``): the norm
#: of the generating model, sqrt(N_FIELDS * HEAD) ~ 32, rounded.
COEF_NORM_BOUND = 30.0


def make_one_hot(n, d, *, seed=0, noise=0.5, zipf=1.1):
    """One-hot CSR rows (N_FIELDS fields, Zipf category frequencies), unit norm."""
    rng = np.random.default_rng(seed)
    vocab = d // N_FIELDS
    p = 1.0 / (np.arange(vocab) + 10.0) ** zipf
    p /= p.sum()
    cols = np.empty((n, N_FIELDS), dtype=np.int32)
    for f in range(N_FIELDS):
        perm = np.random.default_rng(1000 + f).permutation(vocab)
        cols[:, f] = f * vocab + perm[rng.choice(vocab, size=n, p=p)]
    X = sp.csr_matrix(
        (
            np.full(n * N_FIELDS, 1.0 / math.sqrt(N_FIELDS)),
            cols.ravel(),
            np.arange(0, n * N_FIELDS + 1, N_FIELDS),
        ),
        shape=(n, d),
    )
    # The signal sits on the HEAD categories of each field (the ones a model can
    # learn from n rows): w*_j ~ N(0, 1) on the HEAD most frequent values, 0 else.
    w_star = np.zeros(d)
    for f in range(N_FIELDS):
        perm = np.random.default_rng(1000 + f).permutation(vocab)
        head = f * vocab + perm[:HEAD]
        w_star[head] = np.random.default_rng(2024 + f).normal(size=HEAD)
    y = np.asarray(X @ w_star).ravel() + noise * rng.normal(size=n)
    return X, y


def _nbytes(X):
    return X.data.nbytes + X.indices.nbytes + X.indptr.nbytes


def _measure(fit):
    """``(seconds, peak traced bytes, result)`` of one call."""
    tracemalloc.start()
    t0 = time.perf_counter()
    out = fit()
    seconds = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return seconds, peak, out


def _timed(fit):
    t0 = time.perf_counter()
    out = fit()
    return time.perf_counter() - t0, out


def dense_noise_gd(X, y, *, epsilon, alpha, max_iter=30, seed=0):
    """The dense-noise DP baseline: DP-GD, clipped gradient mean + N(0, s^2 I_d).

    Same loss (Huber, threshold 1), same unit-norm rows and the same penalty as the
    sparse methods; per-example gradients clipped to ``L = sqrt(2)`` (the Huber
    Lipschitz constant on rows of norm 1 plus the intercept), budget split evenly
    over the steps (exact GDP composition). Returns ``(coef, intercept)``.
    """
    design = LinearDesign(X, True)
    rho = gaussian_rho_budget(epsilon, DELTA)
    result = noisy_gradient_descent(
        design,
        y,
        get_loss("huber", threshold=1.0),
        ClippedMeanOracle(math.sqrt(2.0)),
        n_outputs=1,
        budget=AlgorithmBudget(epsilon, DELTA, X.shape[0], rho),
        max_iter=max_iter,
        learning_rate=1.0 / (2.0 + alpha),
        l2_penalty=alpha,
        averaging="suffix",
        rng=np.random.default_rng(seed),
    )
    return result.coef[:-1], result.coef[-1]


def _mse(pred, y):
    return float(np.mean((pred - y) ** 2))


def speed_table(X, y):
    n, d = X.shape
    xb = _nbytes(X)
    print(f"\n### Speed and memory (n = {n:,}, d = {d:,}, 20 non-zeros per row)\n")
    print(f"X (CSR, float64 values, int32 indices): {xb / 2**20:.1f} MiB.\n")
    ref = {}
    for name, make in [
        ("Ridge(sparse_cg)", lambda: Ridge(alpha=1.0, solver="sparse_cg")),
        ("SGDRegressor(huber)", lambda: SGDRegressor(loss="huber", random_state=0)),
    ]:
        seconds, _ = _timed(lambda make=make: make().fit(X, y))
        _, peak, _ = _measure(lambda make=make: make().fit(X, y))
        ref[name] = seconds
        print(
            f"- scikit-learn {name}: {seconds:.2f} s, peak memory {peak / xb:.2f} x X"
        )
    print()
    print(
        "| algorithm | fit s | / Ridge(sparse_cg) | / SGDRegressor | peak memory / X |"
    )
    print("|---|---|---|---|---|")
    for algorithm, params in [
        ("output_perturbation", {}),
        ("projection_gd", {}),
    ]:

        def fit(algorithm=algorithm, params=params):
            return SparseGradientDPRegressor(
                algorithm=algorithm,
                sparsity=N_FIELDS,
                delta=DELTA,
                coef_norm_bound=COEF_NORM_BOUND,
                random_state=0,
                **params,
            ).fit(X, y)

        seconds, _ = _timed(fit)
        _, peak, _ = _measure(fit)
        print(
            f"| {algorithm} | {seconds:.2f} | "
            f"{seconds / ref['Ridge(sparse_cg)']:.2f} | "
            f"{seconds / ref['SGDRegressor(huber)']:.2f} | {peak / xb:.2f} |"
        )
    seconds, _ = _timed(lambda: dense_noise_gd(X, y, epsilon=1.0, alpha=0.01))
    _, peak, _ = _measure(lambda: dense_noise_gd(X, y, epsilon=1.0, alpha=0.01))
    print(
        f"| dense-noise DP-GD (baseline) | {seconds:.2f} | "
        f"{seconds / ref['Ridge(sparse_cg)']:.2f} | "
        f"{seconds / ref['SGDRegressor(huber)']:.2f} | {peak / xb:.2f} |"
    )


def utility_table(X, y, X_te, y_te, epsilons, quick):
    n, d = X.shape
    print(
        f"\n### Utility: test MSE (n = {n:,} train, {X_te.shape[0]:,} test, "
        f"d = {d:,}, delta = {DELTA:g})\n"
    )
    base_zero = _mse(np.zeros_like(y_te), y_te)
    sgd = SGDRegressor(loss="huber", random_state=0).fit(X, y)
    ridge = Ridge(alpha=1.0, solver="sparse_cg").fit(X, y)
    print(f"- predict 0: {base_zero:.4f}")
    print(f"- non-private SGDRegressor(huber): {_mse(sgd.predict(X_te), y_te):.4f}")
    print(f"- non-private Ridge(alpha=1): {_mse(ridge.predict(X_te), y_te):.4f}\n")
    print("| method | noise | " + " | ".join(f"eps={e}" for e in epsilons) + " |")
    print("|---|---|" + "---|" * len(epsilons))
    rows = [
        ("output_perturbation, sparsity=20", "sparse", "output_perturbation", 20),
        ("projection_gd, sparsity=20", "sparse", "projection_gd", 20),
        ("output_perturbation, sparsity=None", "dense", "output_perturbation", None),
    ]
    if quick:
        rows.append(("bias_reduced_sgd, sparsity=20", "sparse", "bias_reduced_sgd", 20))
    alphas = {}
    for label, kind, algorithm, sparsity in rows:
        cells = []
        for eps in epsilons:
            est = SparseGradientDPRegressor(
                algorithm=algorithm,
                sparsity=sparsity,
                epsilon=eps,
                delta=DELTA,
                coef_norm_bound=COEF_NORM_BOUND,
                random_state=0,
            )
            try:
                est.fit(X, y)
            except ValueError as exc:  # a public refusal (sizes)
                cells.append(f"refused: {str(exc)[:40]}")
                continue
            if algorithm == "output_perturbation" and sparsity == N_FIELDS:
                # alpha_ is Ridge's alpha; the baseline takes the mean-scaled lambda.
                alphas[eps] = est.alpha_ / X.shape[0]
            cells.append(f"{_mse(est.predict(X_te), y_te):.4f}")
        print(f"| {label} | {kind} | " + " | ".join(cells) + " |")
    cells = []
    for eps in epsilons:
        coef, b = dense_noise_gd(X, y, epsilon=eps, alpha=alphas[eps])
        cells.append(f"{_mse(X_te @ coef + b, y_te):.4f}")
    print("| DP-GD, clipped mean + N(0, s^2 I_d) | dense | " + " | ".join(cells) + " |")
    l1 = SparseGradientDPRegressor(
        algorithm="l1_recovery_gd",
        sparsity=N_FIELDS,
        delta=DELTA,
        coef_norm_bound=COEF_NORM_BOUND,
        random_state=0,
    )
    try:
        l1.fit(X, y)
        print(f"\nl1_recovery_gd at eps=1: {_mse(l1.predict(X_te), y_te):.4f}")
    except ValueError as exc:
        print(f"\nl1_recovery_gd: refused at this size ({exc})")
    if not quick:
        print(
            "\nbias_reduced_sgd / boosted_sgd are not run at this size: about "
            "n / log n steps of four O(d) mean estimates each (hours in NumPy); "
            "see the --quick table."
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.quick:
        n, d = 10_000, 100_000
    else:
        n, d = 100_000, 1_000_000
    X_all, y_all = make_one_hot(n + n // 5, d)
    X, y = X_all[:n], y_all[:n]
    X_te, y_te = X_all[n:], y_all[n:]
    print("## Sparse-gradient family (Ghazi et al.)")
    speed_table(X, y)
    utility_table(X, y, X_te, y_te, [0.5, 1.0, 4.0], args.quick)


if __name__ == "__main__":
    main()
