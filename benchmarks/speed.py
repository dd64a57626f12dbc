"""Speed and memory of every algorithm, as ratios against scikit-learn.

Run ``python benchmarks/speed.py [--quick]`` (or ``make bench``). The measurement
rules (a shared 2-core machine's wall-clock varies 10x from run to run):

* CPU time (``time.process_time``) with BLAS limited to one thread
  (``threadpoolctl``);
* every fit interleaved with its scikit-learn reference in the same process, the
  median of 3 rounds reported (the first round also warms the caches that a
  process builds once, e.g. the noise samplers' tables);
* "passes": the physical limit of a full-batch gradient method is one read of X
  per iteration; ``one pass`` is the CPU time of ``X @ w`` plus ``X.T @ r``, and
  ``per iteration`` divides a fit's time by its iterations (epochs for the
  ``*_sgd`` algorithms) and by one pass;
* peak memory: the largest allocation traced by ``tracemalloc`` during a fit, over
  the size of X (data, indices and pointers for a sparse X).

Data: standard normal features (the favourable case for scikit-learn's solvers),
logistic labels / a linear target plus noise; the sparse rows are the one-hot
design of ``benchmarks/sparse.py``. Targets (README): the default
``HeavyTailedDPLogistic`` at most 1.0x ``LogisticRegression()`` and the default
``HeavyTailedDPRidge`` at most 1.5x ``Ridge()`` at n = 2e5, d = 50 and n = 1e6,
d = 20, with peak memory at most 0.5x X and at most 1.3 passes per iteration.
"""

import argparse
import time
import tracemalloc
import warnings
from functools import partial

import numpy as np
from sklearn.linear_model import LogisticRegression, Ridge
from threadpoolctl import threadpool_limits

from skdpsco import (
    GaussianWidthDPClassifier,
    GaussianWidthDPRegressor,
    HeavyTailedDPLogistic,
    HeavyTailedDPRidge,
    SparseGradientDPRegressor,
)
from skdpsco.exceptions import PrivacyBudgetError

ROUNDS = 3


def _cpu(fn):
    start = time.process_time()
    fn()
    return time.process_time() - start


def _peak(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _quiet(fn):
    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()

    return run


def interleaved(fits, rounds=ROUNDS):
    """Median CPU time of each callable in ``fits`` (a dict), run in turn."""
    times = {name: [] for name in fits}
    for _ in range(rounds):
        for name, fn in fits.items():
            times[name].append(_cpu(_quiet(fn)))
    return {name: float(np.median(t)) for name, t in times.items()}


def dense_data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d) / np.sqrt(d)
    signal = X @ w
    y_class = (signal + 0.5 * rng.standard_normal(n) > 0).astype(int)
    y_reg = signal + rng.standard_normal(n)
    return X, y_class, y_reg


def one_pass(X, rounds=5):
    w, r = np.ones(X.shape[1]), np.ones(X.shape[0])
    return float(np.median([_cpu(lambda: (X @ w, X.T @ r)) for _ in range(rounds)]))


def _nbytes(X):
    if hasattr(X, "indptr"):
        return X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    return X.nbytes


def compare(make_est, make_ref, X, y):
    """``(fitted estimator, its median CPU s, the reference's, peak bytes)``."""
    est = make_est()
    times = interleaved(
        {"ref": lambda: make_ref().fit(X, y), "est": lambda: est.fit(X, y)}
    )
    peak = _peak(_quiet(lambda: make_est().fit(X, y)))
    return est, times["est"], times["ref"], peak


def _row(label, est, ref_name, t_est, t_ref, t_pass, peak, nbytes):
    iters = getattr(est, "n_iter_", None)
    iters = None if iters is None else int(np.max(iters))
    per_iter = f"{t_est / iters / t_pass:.2f}" if iters else "-"
    return (
        f"| {label} | {iters if iters else '-'} | {t_est:.3f} | {t_ref:.3f} "
        f"({ref_name}) | **{t_est / t_ref:.2f}x** | {per_iter} | "
        f"{peak / nbytes:.2f}x |"
    )


HEADER = (
    "| fit | iterations | CPU s | reference CPU s | ratio | per iteration "
    "(passes) | peak memory / X |\n|---|---|---|---|---|---|---|"
)


def defaults_table(sizes):
    print("\n### The defaults against scikit-learn\n")
    print(
        "The last column is the marginal CPU time of one iteration (fits of 2T "
        "and T iterations, the difference over T) in passes: the fixed costs "
        "(private scaling, row norms) are in the ratio, not there.\n"
    )
    head, rule = HEADER.splitlines()
    print(f"{head} marginal iteration (passes) |\n{rule}---|")
    for n, d in sizes:
        X, yc, yr = dense_data(n, d)
        t_pass = one_pass(X)
        for Est, Ref, y in (
            (HeavyTailedDPLogistic, LogisticRegression, yc),
            (HeavyTailedDPRidge, Ridge, yr),
        ):
            est, t_est, t_ref, peak = compare(partial(Est, random_state=0), Ref, X, y)
            label = f"`{Est.__name__}()` n={n:.0e}, d={d}"
            ref_name = f"`{Ref.__name__}()`"
            row = _row(label, est, ref_name, t_est, t_ref, t_pass, peak, X.nbytes)
            marginal = marginal_iteration(
                partial(Est, random_state=0), X, y, int(est.n_iter_[0])
            )
            print(f"{row} {marginal / t_pass:.2f} |")
        print(f"\nOne pass at n={n:.0e}, d={d}: {t_pass * 1e3:.2f} ms.\n")


def marginal_iteration(make, X, y, steps):
    """CPU time of one more iteration: fits of ``2 steps`` and ``steps`` steps
    (the same fixed costs) interleaved, the difference over ``steps``."""
    times = interleaved(
        {
            "long": partial(make(max_iter=2 * steps).fit, X, y),
            "short": partial(make(max_iter=steps).fit, X, y),
        }
    )
    return (times["long"] - times["short"]) / steps


#: Iterations (epochs for the ``*_sgd``) of the shorter fit of the marginal cost.
MARGINAL_STEPS = {
    "clipped_gd": 20,
    "catoni_gd": 20,
    # Theorem 4.7's count (22 here) caps max_iter: 10 and 20 both run in full.
    "truncated_mean_gd": 10,
    "axis_truncated_mean_gd": 20,
    "smooth_sensitivity_gd": 10,
    "dp_sgd": 5,
    "aclipped_sgd": 5,
    "r_aclipped_sgd": 5,
}


def _algorithms(Est):
    return sorted(Est._parameter_constraints["algorithm"][0].options)


def algorithms_table(n, d, families):
    X, yc, yr = dense_data(n, d)
    t_pass = one_pass(X)
    print(f"\n### Every algorithm (n = {n:,}, d = {d}, epsilon = 1)\n")
    print(
        "Each algorithm at its defaults (the ``*_sgd`` ones count epochs as "
        "iterations; per iteration includes the fixed costs, the marginal "
        f"iteration does not). One pass: {t_pass * 1e3:.2f} ms.\n"
    )
    head, rule = HEADER.splitlines()
    print(f"{head} marginal iteration (passes) |\n{rule}---|")
    for Est, Ref, kind in families:
        y = yc if kind == "classifier" else yr
        for algorithm in _algorithms(Est):
            if algorithm == "auto":
                continue
            make = partial(Est, algorithm=algorithm, random_state=0)
            try:
                _quiet(partial(make().fit, X, y))()
            except (PrivacyBudgetError, ValueError) as exc:
                reason = str(exc).split(". ")[0]
                print(f"| `{Est.__name__}` {algorithm} | refused: {reason} |||||||")
                continue
            est, t_est, t_ref, peak = compare(make, Ref, X, y)
            label, ref_name = f"`{Est.__name__}` {algorithm}", f"`{Ref.__name__}()`"
            row = _row(label, est, ref_name, t_est, t_ref, t_pass, peak, X.nbytes)
            marginal = "-"
            if algorithm in MARGINAL_STEPS:
                steps = MARGINAL_STEPS[algorithm]
                marginal = f"{marginal_iteration(make, X, y, steps) / t_pass:.2f}"
            print(f"{row} {marginal} |")


def sparse_table(n, d):
    from sparse import make_one_hot

    X, y = make_one_hot(n, d, seed=0)
    w, r = np.ones(d), np.ones(n)
    t_pass = float(np.median([_cpu(lambda: (X @ w, X.T @ r)) for _ in range(5)]))
    print(f"\n### Sparse default (CSR n = {n:,}, d = {d:,}, 20 non-zeros per row)\n")
    print(HEADER)
    est, t_est, t_ref, peak = compare(
        partial(SparseGradientDPRegressor, random_state=0),
        partial(Ridge, solver="sparse_cg"),
        X,
        y,
    )
    label, ref_name = "`SparseGradientDPRegressor()`", '`Ridge(solver="sparse_cg")`'
    print(_row(label, est, ref_name, t_est, t_ref, t_pass, peak, _nbytes(X)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument(
        "--only", choices=["defaults", "algorithms", "sparse"], help="one table only"
    )
    args = parser.parse_args(argv)
    with threadpool_limits(1):
        if args.only in (None, "defaults"):
            sizes = [(20_000, 50)] if args.quick else [(200_000, 50), (1_000_000, 20)]
            defaults_table(sizes)
        if args.only in (None, "algorithms"):
            families = [
                (HeavyTailedDPLogistic, LogisticRegression, "classifier"),
                (HeavyTailedDPRidge, Ridge, "regressor"),
                (GaussianWidthDPClassifier, LogisticRegression, "classifier"),
                (GaussianWidthDPRegressor, Ridge, "regressor"),
            ]
            algorithms_table(20_000 if args.quick else 100_000, 50, families)
        if args.only in (None, "sparse"):
            sparse_table(*((10_000, 100_000) if args.quick else (100_000, 1_000_000)))


if __name__ == "__main__":
    main()
