"""Cost of exact, layout-independent sums (``skdpsco._exact_sum``) against plain BLAS.

One iteration of clipped gradient descent sums ``X^T C`` over the rows. The exact
sum computes one BLAS product per block of ``B`` rows, rounds each block's sum to
an integer grid and adds the integers; this measures what that costs against one
BLAS call ``X.T @ C`` and against today's fused loop (row chunks of
``FUSED_CHUNK_ENTRIES`` entries, ``head += chunk.T @ C``), for several ``B``.

Measurement rules as in ``benchmarks/speed.py``: CPU time with BLAS at one thread
(``threadpoolctl``), the variants interleaved, the median of 3 rounds (each round
the median of a few repetitions). ``python benchmarks/exact_sum.py [--quick]``.
"""

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from skdpsco._design import FUSED_CHUNK_ENTRIES
from skdpsco._exact_sum import SumGrid, block_sums, exact_weighted_sum

ROUNDS = 3


def _cpu(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return float(np.median(times))


def _fused_today(X, C):
    step = max(1, FUSED_CHUNK_ENTRIES // (X.shape[1] + 1))
    head, total = np.zeros(X.shape[1]), 0.0
    for start in range(0, X.shape[0], step):
        head += X[start : start + step].T @ C[start : start + step]
        total += C[start : start + step].sum()
    return head, total


def _exact(X, C, block_rows, chunk_rows=None):
    n = X.shape[0]
    grid = SumGrid(1.0, n, block_rows)
    if chunk_rows is None:
        return exact_weighted_sum(X, C, grid, grid)
    head, total = 0, 0
    for start in range(0, n, chunk_rows):
        rows = slice(start, start + chunk_rows)
        h, t = exact_weighted_sum(X[rows], C[rows], grid, grid, start=start)
        head, total = head + h, total + t
    return head, total


def _exact_collected(X, C, block_rows, chunk_rows):
    """Chunks' float block sums collected, converted to integers once."""
    grid = SumGrid(1.0, X.shape[0], block_rows)
    heads, totals = [], []
    for start in range(0, X.shape[0], chunk_rows):
        rows = slice(start, start + chunk_rows)
        head, total = block_sums(X[rows], C[rows], block_rows)
        heads.append(head)
        totals.append(total)
    return (
        grid.to_integers(np.concatenate(heads)).sum(axis=0),
        grid.to_integers(np.concatenate(totals)).sum(axis=0),
    )


def variants(X, C):
    d = X.shape[1]
    out = {
        "X.T @ C (one BLAS call)": lambda: (X.T @ C, C.sum()),
        "fused chunks (today)": lambda: _fused_today(X, C),
    }
    for B in (1024, 4096, 16384):
        out[f"exact, B = {B}"] = lambda B=B: _exact(X, C, B)
        # The fused pass's cache-sized chunks, rounded to whole blocks.
        chunk = max(B, (FUSED_CHUNK_ENTRIES // (d + 1)) // B * B)
        out[f"exact, B = {B}, chunks of {chunk} rows"] = lambda B=B, c=chunk: _exact(
            X, C, B, c
        )
        out[f"exact, B = {B}, chunks of {chunk} rows, one conversion"] = (
            lambda B=B, c=chunk: _exact_collected(X, C, B, c)
        )
    return out


def table(sizes, repeat):
    print("| n | d | variant | CPU ms | ratio to one BLAS call | ratio to fused |")
    print("|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for n, d in sizes:
        X = rng.standard_normal((n, d))
        C = rng.uniform(-1, 1, n) / np.linalg.norm(X, axis=1)
        fits = variants(X, C)
        times = {name: [] for name in fits}
        with threadpool_limits(1):
            for _ in range(ROUNDS):
                for name, fn in fits.items():
                    times[name].append(_cpu(fn, repeat))
        med = {name: float(np.median(t)) for name, t in times.items()}
        base = med["X.T @ C (one BLAS call)"]
        fused = med["fused chunks (today)"]
        for name, t in med.items():
            print(
                f"| {n:.0e} | {d} | {name} | {1e3 * t:.1f} | {t / base:.2f} "
                f"| {t / fused:.2f} |"
            )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = (
        [(200_000, 20), (50_000, 200)]
        if args.quick
        else [
            (1_000_000, 20),
            (200_000, 200),
        ]
    )
    print("### Exact block sums against BLAS (CPU time, one thread)\n")
    table(sizes, repeat=3 if args.quick else 5)


if __name__ == "__main__":
    main()
