"""The cost of noise on a public grid: secure draws and default fits.

Run ``python benchmarks/secure_noise.py [--quick]``. Two tables, CPU time (BLAS at
one thread via threadpoolctl), each cell the median of 3 interleaved repetitions,
every ratio measured in the same run:

1. One release of ``m`` values by ``GaussianMechanism`` / ``LaplaceMechanism``
   (rounding to the grid plus exact integer noise; with a seeded generator and
   with the OS source of ``random_state=None``) against numpy's float noise
   ``value + rng.normal(0, sigma, m)`` / ``rng.laplace``.
2. Default fits with the grid releases against the same fits with the float
   releases patched back in (the noise-free computation is identical: the ratio
   is what the secure noise costs a fit).
"""

import argparse
import statistics
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from skdpsco import (
    GaussianWidthDPRegressor,
    HeavyTailedDPLogistic,
    HeavyTailedDPRidge,
    SparseGradientDPRegressor,
)
from skdpsco.privacy import _mechanisms
from skdpsco.privacy._discrete import SecureGenerator

GRID_GAUSSIAN = _mechanisms.GaussianMechanism.release
GRID_LAPLACE = _mechanisms.LaplaceMechanism.release


def _float_gaussian(self, value, rng):
    value = np.asarray(value, dtype=float)
    return value + rng.normal(0.0, self.sigma, value.shape) if self.sigma else value


def _float_laplace(self, value, rng):
    value = np.asarray(value, dtype=float)
    return value + rng.laplace(0.0, self.scale, value.shape) if self.scale else value


def _cpu(fn):
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def _interleaved(fns, repeats=3):
    """Median CPU time of each callable, the callables interleaved."""
    times = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            times[i].append(_cpu(fn))
    return [statistics.median(t) for t in times]


def _noise_cells(m):
    value = np.linspace(-3.0, 3.0, m)
    gauss = _mechanisms.GaussianMechanism(1.0, 2.0)
    lap = _mechanisms.LaplaceMechanism(1.0, 2.0)
    seeded = np.random.default_rng(0)
    secure = SecureGenerator(np.random.PCG64())
    gauss.release(value[:10], seeded)  # tables built outside the timing
    return _interleaved(
        [
            lambda: value + seeded.normal(0.0, 2.0, m),
            lambda: gauss.release(value, seeded),
            lambda: gauss.release(value, secure),
            lambda: value + seeded.laplace(0.0, 2.0, m),
            lambda: lap.release(value, seeded),
        ]
    )


def noise_table(sizes):
    rows = []
    for m in sizes:
        t = _noise_cells(m)
        rows.append(
            f"| {m:,} | {1e3 * t[0]:.1f} | {t[1] / t[0]:.1f}x | {t[2] / t[0]:.1f}x | "
            f"{1e3 * t[3]:.1f} | {t[4] / t[3]:.1f}x |"
        )
    return (
        "| m | float Gaussian (ms) | grid Gaussian, seeded | grid Gaussian, OS "
        "source | float Laplace (ms) | grid Laplace, seeded |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(rows)
    )


def _fits(quick):
    rng = np.random.default_rng(0)
    n, d = (20_000, 20) if quick else (200_000, 50)
    X = rng.normal(size=(n, d)) * 3.0 + 10.0
    w = rng.normal(size=d)
    y_reg = X @ w + rng.normal(size=n)
    y_clf = (X @ w > np.median(X @ w)).astype(int)
    ns, ds = (20_000, 100_000) if quick else (100_000, 1_000_000)
    # 20 non-zeros per row, built directly (scipy's sparse.random enumerates
    # every position of an n x d matrix).
    cols = rng.integers(0, ds, size=(ns, 20))
    Xs = sp.csr_matrix(
        (np.ones(ns * 20), cols.ravel(), np.arange(0, ns * 20 + 1, 20)), shape=(ns, ds)
    )
    Xs.sum_duplicates()
    ys = Xs @ rng.normal(size=ds) + 0.1 * rng.normal(size=ns)
    Xg = rng.uniform(-1, 1, size=(n // 4, 200))
    yg = Xg @ np.r_[rng.normal(size=10), np.zeros(190)] + 0.1 * rng.normal(size=n // 4)
    return [
        (f"HeavyTailedDPLogistic() n={n:,} d={d}", HeavyTailedDPLogistic, X, y_clf),
        (f"HeavyTailedDPRidge() n={n:,} d={d}", HeavyTailedDPRidge, X, y_reg),
        (
            f"SparseGradientDPRegressor() CSR n={ns:,} d={ds:,}",
            SparseGradientDPRegressor,
            Xs,
            ys,
        ),
        (
            f"GaussianWidthDPRegressor() n={n // 4:,} d=200",
            GaussianWidthDPRegressor,
            Xg,
            yg,
        ),
    ]


def fit_table(quick):
    rows = []
    for name, Est, X, y in _fits(quick):

        def grid(Est=Est, X=X, y=y):
            _mechanisms.GaussianMechanism.release = GRID_GAUSSIAN
            _mechanisms.LaplaceMechanism.release = GRID_LAPLACE
            Est(random_state=0).fit(X, y)

        def flt(Est=Est, X=X, y=y):
            _mechanisms.GaussianMechanism.release = _float_gaussian
            _mechanisms.LaplaceMechanism.release = _float_laplace
            Est(random_state=0).fit(X, y)

        grid()  # tables built outside the timing
        t_float, t_grid = _interleaved([flt, grid])
        rows.append(
            f"| {name} | {t_float:.2f} | {t_grid:.2f} | {t_grid / t_float:.3f} |"
        )
    _mechanisms.GaussianMechanism.release = GRID_GAUSSIAN
    _mechanisms.LaplaceMechanism.release = GRID_LAPLACE
    return (
        "| fit (defaults, epsilon = 1) | float noise (s) | grid noise (s) | ratio |\n"
        "|---|---|---|---|\n" + "\n".join(rows)
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--fits-only", action="store_true", help="second table only")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    sizes = (10_000, 100_000) if args.quick else (1_000, 100_000, 1_000_000)
    with threadpool_limits(1):
        if not args.fits_only:
            print("### Secure noise: one release of m values\n")
            print(noise_table(sizes))
        print("\n### Secure noise: default fits\n")
        print(fit_table(args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
