"""Benchmarks of the heavy-tailed family: speed, memory and utility.

Run ``python benchmarks/heavy_tailed.py [--quick]`` (or ``make bench``). Every number
is a ratio against a reference measured in the same run, on the same machine:

* speed: fit time relative to scikit-learn's ``Ridge`` / ``LogisticRegression`` on
  the same data, and time per iteration relative to one ``X @ w`` + ``X.T @ r``
  pass (the floor for any full-batch gradient method);
* memory: peak traced allocation during ``fit`` relative to the size of X;
* utility: the synthetic setup of Wang et al. (2020) — n = 1e5, d = 10, lognormal
  noise for ridge, log-logistic noise and Student-t features for logistic — excess
  test risk of each algorithm over the non-private scikit-learn model, median over
  seeds, at several epsilons.
"""

import argparse
import time
import tracemalloc
import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import log_loss

from skdpsco import HeavyTailedDPLogistic, HeavyTailedDPRidge
from skdpsco.datasets import (
    make_heavy_tailed_classification,
    make_heavy_tailed_regression,
)
from skdpsco.exceptions import PrivacyBudgetError

ALGORITHMS = sorted(HeavyTailedDPRidge._parameter_constraints["algorithm"][0].options)


def _timed(fn, repeat=1):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _peak_memory(fn):
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def speed_table(n, d, quick=False):
    X, y, _ = make_heavy_tailed_regression(
        n, d, feature_distribution="student_t", df=3.0, random_state=0
    )
    Xc, yc, _ = make_heavy_tailed_classification(n, d, random_state=0)
    w, r = np.ones(d), np.ones(n)
    one_pass = _timed(lambda: (X @ w, X.T @ r), repeat=5)
    rows = []
    for Est, ref, data in [
        (HeavyTailedDPRidge, Ridge(), (X, y)),
        (HeavyTailedDPLogistic, LogisticRegression(), (Xc, yc)),
    ]:
        t_ref = _timed(lambda ref=ref, data=data: ref.fit(*data))
        for algorithm in ALGORITHMS:
            est = Est(algorithm=algorithm, random_state=0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t_fit = _timed(lambda est=est, data=data: est.fit(*data))
                peak = _peak_memory(lambda est=est, data=data: est.fit(*data))
            rows.append(
                (
                    Est.__name__,
                    algorithm,
                    est.n_iter_,
                    t_fit,
                    t_fit / t_ref,
                    t_fit / est.n_iter_ / one_pass,
                    peak / X.nbytes,
                )
            )
    print(f"\n### Speed and memory (n = {n:,}, d = {d}, heavy-tailed features)\n")
    print(f"One X @ w + X.T @ r pass: {one_pass * 1e3:.2f} ms.\n")
    print(
        "| estimator | algorithm | iterations | fit s | fit / sklearn fit "
        "| per-iteration / one pass | peak memory / X |"
    )
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row[0]} | {row[1]} | {row[2]} | {row[3]:.2f} | {row[4]:.1f}x "
            f"| {row[5]:.1f}x | {row[6]:.2f}x |"
        )


def _ridge_risk(model, X, y):
    return 0.5 * np.mean((model.predict(X) - y) ** 2)


def utility_table(n, d, epsilons, seeds):
    print(f"\n### Utility (Wang et al. 2020 setup: n = {n:,}, d = {d})\n")
    print(
        "Excess test risk over the non-private scikit-learn model (ridge: half mean "
        "squared error; logistic: log-loss), median over "
        f"{len(seeds)} seeds; delta = 1e-5. Lower is better.\n"
    )
    header = "| task | algorithm | " + " | ".join(f"eps={e}" for e in epsilons) + " |"
    print(header)
    print("|---" * (2 + len(epsilons)) + "|")
    tasks = {
        "ridge (lognormal noise)": (HeavyTailedDPRidge, Ridge(), _ridge_risk),
        "logistic (log-logistic noise)": (
            HeavyTailedDPLogistic,
            LogisticRegression(),
            lambda m, X, y: log_loss(y, m.predict_proba(X)),
        ),
    }
    for task, (Est, ref, risk) in tasks.items():
        results = {a: {e: [] for e in epsilons} for a in ALGORITHMS}
        for seed in seeds:
            if Est is HeavyTailedDPRidge:
                X, y, _ = make_heavy_tailed_regression(2 * n, d, random_state=seed)
            else:
                X, y, _ = make_heavy_tailed_classification(2 * n, d, random_state=seed)
            X_tr, y_tr, X_te, y_te = X[:n], y[:n], X[n:], y[n:]
            base = risk(ref.fit(X_tr, y_tr), X_te, y_te)
            for algorithm in ALGORITHMS:
                for eps in epsilons:
                    est = Est(epsilon=eps, algorithm=algorithm, random_state=seed)
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        try:
                            est.fit(X_tr, y_tr)
                        except PrivacyBudgetError:  # sample-and-aggregate: n too small
                            results[algorithm][eps].append(np.nan)
                            continue
                    results[algorithm][eps].append(risk(est, X_te, y_te) - base)
        for algorithm in ALGORITHMS:
            cells = " | ".join(
                "refused (n)"
                if np.isnan(results[algorithm][e]).any()
                else f"{np.median(results[algorithm][e]):.4f}"
                for e in epsilons
            )
            print(f"| {task} | {algorithm} | {cells} |")


SGD_ALGORITHMS = [a for a in ALGORITHMS if a.endswith("_sgd")]


def sgd_speed_table(n, d, epochs=5):
    """Stochastic algorithms vs SGDRegressor / SGDClassifier, same epochs."""
    from sklearn.linear_model import SGDClassifier, SGDRegressor

    X, y, _ = make_heavy_tailed_regression(
        n, d, feature_distribution="student_t", df=3.0, random_state=0
    )
    Xc, yc, _ = make_heavy_tailed_classification(n, d, random_state=0)
    print(f"\n### Stochastic algorithms (n = {n:,}, d = {d}, {epochs} epochs)\n")
    print("| estimator | algorithm | fit s | fit / scikit-learn SGD, same epochs |")
    print("|---|---|---|---|")
    for Est, ref, data in [
        (HeavyTailedDPRidge, SGDRegressor, (X, y)),
        (HeavyTailedDPLogistic, SGDClassifier, (Xc, yc)),
    ]:
        sk = ref(max_iter=epochs, tol=None, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t_ref = _timed(lambda sk=sk, data=data: sk.fit(*data))
            for algorithm in SGD_ALGORITHMS:
                est = Est(algorithm=algorithm, max_iter=epochs, random_state=0)
                t_fit = _timed(lambda est=est, data=data: est.fit(*data))
                print(
                    f"| {Est.__name__} | {algorithm} | {t_fit:.2f} "
                    f"| {t_fit / t_ref:.1f}x |"
                )


def _public_split(X, y, seed):
    """Train / test, scaled with a separate public split (as in examples/showcase)."""
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X_rest, X_pub, y_rest, y_pub = train_test_split(
        X, y, test_size=0.15, random_state=seed
    )
    X_tr, X_te, y_tr, y_te = train_test_split(
        X_rest, y_rest, test_size=0.3, random_state=seed
    )
    scaler = StandardScaler().fit(X_pub)
    return scaler.transform(X_tr), scaler.transform(X_te), y_tr, y_te, y_pub


def real_data_table(epsilons, seeds):
    """Test score on scikit-learn's bundled datasets (small n, up to 650 params)."""
    from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits

    print("\n### Real data (small n): test accuracy or R^2, median over seeds\n")
    print(
        "Features scaled with a separate public split; delta = 1e-6. Higher is "
        "better; the first row of each dataset is the non-private model.\n"
    )
    print("| dataset | algorithm | " + " | ".join(f"eps={e}" for e in epsilons) + " |")
    print("|---" * (2 + len(epsilons)) + "|")
    data = [
        (
            "breast cancer",
            load_breast_cancer,
            HeavyTailedDPLogistic,
            LogisticRegression(max_iter=5000),
        ),
        (
            "digits",
            load_digits,
            HeavyTailedDPLogistic,
            LogisticRegression(max_iter=5000),
        ),
        ("diabetes", load_diabetes, HeavyTailedDPRidge, Ridge()),
    ]
    for name, loader, Est, ref in data:
        X, y = loader(return_X_y=True)
        splits = [_public_split(X, y, seed) for seed in seeds]
        if Est is HeavyTailedDPRidge:
            splits = [
                (a, b, (c - e.mean()) / e.std(), (d - e.mean()) / e.std(), e)
                for a, b, c, d, e in splits
            ]
        base = np.median([ref.fit(a, c).score(b, d) for a, b, c, d, _ in splits])
        print(
            f"| {name} | non-private | "
            + " | ".join(f"{base:.3f}" for _ in epsilons)
            + " |"
        )
        for algorithm in ALGORITHMS:
            cells = []
            for eps in epsilons:
                scores = []
                try:
                    for seed, (a, b, c, d, _) in zip(seeds, splits, strict=True):
                        est = Est(
                            epsilon=eps,
                            delta=1e-6,
                            algorithm=algorithm,
                            random_state=seed,
                        )
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            scores.append(est.fit(a, c).score(b, d))
                    cells.append(f"{np.median(scores):.3f}")
                except PrivacyBudgetError:
                    cells.append("refused (n)")
            print(f"| {name} | {algorithm} | " + " | ".join(cells) + " |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument(
        "--only", choices=["speed", "utility", "real", "sgd"], help="run one table only"
    )
    args = parser.parse_args(argv)
    if args.only == "sgd":
        sgd_speed_table(200_000, 50)
        return
    if args.only == "real":
        real_data_table((0.5, 1.0, 2.0, 8.0), seeds=(0, 1, 2))
        return
    if args.quick:
        speed_table(20_000, 50)
        utility_table(20_000, 10, (0.5, 1.0), seeds=(0, 1))
    else:
        speed_table(200_000, 50)
        sgd_speed_table(200_000, 50)
        utility_table(100_000, 10, (0.1, 0.5, 1.0), seeds=(0, 1, 2))
        real_data_table((0.5, 1.0, 2.0, 8.0), seeds=(0, 1, 2))


if __name__ == "__main__":
    main()
