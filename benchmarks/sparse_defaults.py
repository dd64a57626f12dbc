"""Default parameters of the sparse-gradient estimators on one-hot data.

Run ``python benchmarks/sparse_defaults.py [--quick]``. Compares, at epsilon in
{0.5, 1, 4}, the estimators with *every parameter left at its default* (private
scaling, released sparsity, ``algorithm="output_perturbation"``) under the old
default ``coef_norm_bound=1.0`` and the new ``coef_norm_bound="auto"`` (the public
rule of :func:`skdpsco._solvers._output_perturbation.auto_coef_norm_bound`),
against scikit-learn and a trivial baseline. Every cell is the median over
``SEEDS`` seeds (data and noise both seeded; the seed is for reproducibility only).

* classifier: :func:`skdpsco.datasets.make_one_hot_classification` (``F`` fields of
  ``levels`` values), test accuracy; baselines ``LogisticRegression()`` and the
  majority class of the training labels;
* regressor: the one-hot data of ``benchmarks/sparse.py`` (20 Zipf fields, the
  signal on the 50 most frequent values of each), test MSE; baselines
  ``Ridge(alpha=1)`` and the training mean. The last column is the configuration of
  ``benchmarks/sparse.py`` (declared ``sparsity=20``, ``coef_norm_bound=30``),
  which the rule must not beat by much to be a sensible default.
"""

import argparse
import os
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from sklearn.linear_model import LogisticRegression, Ridge

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sparse import make_one_hot  # noqa: E402

from skdpsco import SparseGradientDPClassifier, SparseGradientDPRegressor  # noqa: E402
from skdpsco.datasets import make_one_hot_classification  # noqa: E402

EPSILONS = (0.5, 1.0, 4.0)
SEEDS = 5
N_TEST = 5000


def _classifier_cell(args):
    n, fields, levels, eps, seed = args
    warnings.simplefilter("ignore")
    X, y, _ = make_one_hot_classification(n + N_TEST, fields, levels, random_state=seed)
    Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]
    majority = float(np.mean(yte == np.bincount(ytr).argmax()))
    sk = LogisticRegression(max_iter=1000).fit(Xtr, ytr).score(Xte, yte)
    out = {"majority": majority, "sklearn": sk}
    for name, params in (("old", {"coef_norm_bound": 1.0}), ("new", {})):
        t0 = time.perf_counter()
        est = SparseGradientDPClassifier(epsilon=eps, random_state=seed, **params)
        est.fit(Xtr, ytr)
        out[name] = est.score(Xte, yte)
        out[name + "_s"] = time.perf_counter() - t0
        out[name + "_D"] = est.coef_norm_bound_
    return out


def _regressor_cell(args):
    n, d, eps, seed = args
    warnings.simplefilter("ignore")
    X, y = make_one_hot(n + N_TEST, d, seed=seed)
    Xtr, ytr, Xte, yte = X[:n], y[:n], X[n:], y[n:]

    def mse(pred):
        return float(np.mean((pred - yte) ** 2))

    out = {
        "majority": mse(np.full_like(yte, ytr.mean())),
        "sklearn": mse(Ridge(alpha=1.0, solver="sparse_cg").fit(Xtr, ytr).predict(Xte)),
    }
    configs = (
        ("old", {"coef_norm_bound": 1.0}),
        ("new", {}),
        ("declared", {"coef_norm_bound": 30.0, "sparsity": 20, "delta": 1e-6}),
    )
    for name, params in configs:
        t0 = time.perf_counter()
        est = SparseGradientDPRegressor(epsilon=eps, random_state=seed, **params)
        est.fit(Xtr, ytr)
        out[name] = mse(est.predict(Xte))
        out[name + "_s"] = time.perf_counter() - t0
        out[name + "_D"] = est.coef_norm_bound_
    return out


def _median(cells, key):
    return float(np.median([c[key] for c in cells]))


def _run(pool, fn, settings, seeds):
    jobs = [(s, seed) for s in settings for seed in range(seeds)]
    results = list(pool.map(fn, [s + (seed,) for s, seed in jobs]))
    by = {}
    for (s, _), r in zip(jobs, results, strict=True):
        by.setdefault(s, []).append(r)
    return by


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    args = parser.parse_args(argv)
    if args.quick:
        cls_shapes = [(20_000, 8, 50), (5_000, 4, 20)]
        reg_shapes = [(20_000, 20_000)]
    else:
        cls_shapes = [
            (5_000, 8, 50),
            (20_000, 8, 50),
            (100_000, 8, 50),
            (20_000, 4, 20),
            (100_000, 20, 500),
        ]
        reg_shapes = [(20_000, 20_000), (100_000, 100_000)]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        cls = _run(
            pool,
            _classifier_cell,
            [s + (e,) for s in cls_shapes for e in EPSILONS],
            SEEDS,
        )
        reg = _run(
            pool,
            _regressor_cell,
            [s + (e,) for s in reg_shapes for e in EPSILONS],
            SEEDS,
        )
    print(f"## Sparse-gradient defaults (median over {SEEDS} seeds)\n")
    print("### SparseGradientDPClassifier(): test accuracy, delta = 1e-5\n")
    print(
        "| n | fields x levels | epsilon | majority | old default (D=1) "
        "| new default (D auto) | D auto | LogisticRegression |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (n, f, lev, eps), cells in cls.items():
        print(
            f"| {n:,} | {f} x {lev} | {eps:g} | {_median(cells, 'majority'):.3f} "
            f"| {_median(cells, 'old'):.3f} | **{_median(cells, 'new'):.3f}** "
            f"| {_median(cells, 'new_D'):.1f} | {_median(cells, 'sklearn'):.3f} |"
        )
    print("\n### SparseGradientDPRegressor(): test MSE (lower is better)\n")
    print(
        "| n | d | epsilon | training mean | old default (D=1) "
        "| new default (D auto) | D auto | declared (s=20, D=30, delta=1e-6) "
        "| Ridge(alpha=1) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for (n, d, eps), cells in reg.items():
        print(
            f"| {n:,} | {d:,} | {eps:g} | {_median(cells, 'majority'):.4f} "
            f"| {_median(cells, 'old'):.4f} | **{_median(cells, 'new'):.4f}** "
            f"| {_median(cells, 'new_D'):.1f} | {_median(cells, 'declared'):.4f} "
            f"| {_median(cells, 'sklearn'):.4f} |"
        )
    fit_s = [c[k] for cs in cls.values() for c in cs for k in ("old_s", "new_s")]
    print(
        f"\nClassifier fit time (median): old {np.median(fit_s[0::2]):.2f} s, "
        f"new {np.median(fit_s[1::2]):.2f} s. Total {time.perf_counter() - t0:.0f} s."
    )


if __name__ == "__main__":
    main()
