"""Per-column or one shared scale: the evidence behind ``MAX_PER_COLUMN``.

Run ``python benchmarks/shared_scale.py [--quick]``. ``HeavyTailedDPLogistic()``
(defaults, epsilon = 1) on synthetic binary data, ``n`` training records and ``d``
columns, fitted twice on the same split: with the private scaling per column (the
rule below ``MAX_PER_COLUMN``) and with one shared scale (the rule above it),
forced by setting ``skdpsco._column_scaling.MAX_PER_COLUMN``. Two kinds of
columns: *raw* (each column multiplied by a scale log-uniform in ``[1e-3, 1e3]``
and shifted by up to 10 of its scales, as columns in natural units are) and
*standardised* (standard normal). Test accuracy on 5,000 held-out records and
process CPU time of the fit (BLAS at one thread), median of 3 seeds.
"""

import argparse
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

import skdpsco._column_scaling as column_scaling
from skdpsco import HeavyTailedDPLogistic

FULL = ((20_000, (250, 1000, 2000, 3000)),)
QUICK = ((5_000, (100, 500)),)


def make_data(n, d, seed, raw):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((n, d))
    w = rng.standard_normal(d) * 3.0 / np.sqrt(d)
    y = (Z @ w + 0.5 * rng.standard_normal(n) > 0).astype(int)
    if not raw:
        return Z, y
    scale = np.exp(rng.uniform(np.log(1e-3), np.log(1e3), d))
    shift = rng.uniform(-10.0, 10.0, d) * scale
    return Z * scale + shift, y


def fit(X_train, y_train, X_test, y_test, seed, per_column):
    saved = column_scaling.MAX_PER_COLUMN
    column_scaling.MAX_PER_COLUMN = 10**9 if per_column else 0
    try:
        start = time.process_time()
        model = HeavyTailedDPLogistic(epsilon=1.0, random_state=seed)
        model.fit(X_train, y_train)
        seconds = time.process_time() - start
    finally:
        column_scaling.MAX_PER_COLUMN = saved
    return model.score(X_test, y_test), seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    args = parser.parse_args(argv)
    print(
        "| n | d | columns | per-column accuracy | shared accuracy "
        "| per-column CPU s | shared CPU s |"
    )
    print("|---|---|---|---|---|---|---|")
    warnings.simplefilter("ignore")
    with threadpool_limits(1):
        for n, dims in QUICK if args.quick else FULL:
            for d in dims:
                for raw in (True, False):
                    cells = {True: [], False: []}
                    for seed in range(3):
                        X, y = make_data(n + 5000, d, seed, raw)
                        split = (X[:n], y[:n], X[n:], y[n:])
                        # Interleaved: the two fits of a seed run back to back.
                        for per_column in (True, False):
                            cells[per_column].append(fit(*split, seed, per_column))
                    acc = {k: np.median([c[0] for c in v]) for k, v in cells.items()}
                    cpu = {k: np.median([c[1] for c in v]) for k, v in cells.items()}
                    kind = "raw" if raw else "standardised"
                    print(
                        f"| {n} | {d} | {kind} | {acc[True]:.3f} | {acc[False]:.3f} "
                        f"| {cpu[True]:.1f} | {cpu[False]:.1f} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
