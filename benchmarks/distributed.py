"""Fitting on a dask cluster: skdpsco against dask-ml on data stored on disk.

``n`` rows of ``d = 20`` standard normal features with logistic labels are written
to a temporary directory as a stack of ``.npy`` files (one per chunk of
``--chunk-rows`` rows, a multiple of the exact sums' block size
``skdpsco._exact_sum.BLOCK_ROWS`` so that no rechunking is needed) and read
lazily by the workers: the client never holds the data. On a
``distributed.LocalCluster`` of 1 and then 2 worker processes (one thread each)
this measures, per fit: wall-clock time, the client's peak resident memory above
its level before the fit, and each worker's peak resident memory (a sampler thread
in every process, every 5 ms), for

(a) ``HeavyTailedDPLogistic()`` (default ``clipped_gd``, epsilon = 1) on the dask
    arrays;
(b) dask-ml's non-private ``LogisticRegression(solver="lbfgs")`` on the same arrays
    and cluster (its passes over the data counted);
(c) ``HeavyTailedDPLogistic()`` in memory on the first ``--subsample`` rows (numpy;
    tracemalloc peak). When the subsample is all rows (``--quick``), the dask fit
    must give the same ``coef_`` bit for bit.

The issue's targets (issue 19): client memory below 5% of the data size, fit time
within 1.5x dask-ml's. The figure (``--figure``) shows fit time against the number
of workers, measured at 1 and 2, with the per-iteration cost model for more:
every iteration is one map over the ``m`` chunks and one reduce of ``d + 1``
numbers per chunk, so ``T(w) = passes * (ceil(m / w) t_chunk + t_lat)``, with
``t_lat`` the measured time of an empty map/reduce over ``m`` tasks and
``t_chunk`` one chunk's pass derived from the 1-worker fit.

``python benchmarks/distributed.py [--quick] [--n N] [--chunk-rows R]
[--subsample S] [--workers 1 2] [--figure PATH] [--json PATH]``.
"""

import argparse
import importlib
import json
import math
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# The script's directory comes first on sys.path, where benchmarks/sparse.py would
# shadow the pydata ``sparse`` package that dask.array probes for (and the worker
# processes inherit the path).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
D = 20
SEED = 0
SAMPLE_S = 0.005
#: Below 1 / n at the full size (n = 2e7), as the estimators advise.
DELTA = 1e-8


class PeakRSS:
    """Peak resident memory of this process, sampled by a thread."""

    def __init__(self):
        import psutil

        self._process = psutil.Process()
        self.base = self.peak = self._process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(SAMPLE_S):
            self.peak = max(self.peak, self._process.memory_info().rss)

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._process.memory_info().rss)
        return self.base, self.peak


def _start_worker_sampler(dask_worker):
    dask_worker.skdpsco_bench_sampler = PeakRSS()


def _stop_worker_sampler(dask_worker):
    return dask_worker.skdpsco_bench_sampler.stop()


def _chunk(index, rows, seed=SEED):
    """Rows of chunk ``index``: a function of the seed and index only."""
    rng = np.random.default_rng([seed, index])
    X = rng.standard_normal((rows, D))
    w = np.linspace(-1.0, 1.0, D)
    y = (rng.uniform(size=rows) < 1.0 / (1.0 + np.exp(-(X @ w)))).astype(np.float64)
    return X, y


def write_stack(root, n, chunk_rows):
    """Write ``X_i.npy`` / ``y_i.npy`` per chunk; return the chunk sizes."""
    sizes = [min(chunk_rows, n - start) for start in range(0, n, chunk_rows)]
    for i, rows in enumerate(sizes):
        X, y = _chunk(i, rows)
        np.save(root / f"X_{i}.npy", X)
        np.save(root / f"y_{i}.npy", y)
    return sizes


def lazy_stack(root, sizes):
    """Dask arrays that read the stack's files on the workers."""
    import dask
    import dask.array as da

    def column(name, shape):
        return da.concatenate(
            [
                da.from_delayed(
                    dask.delayed(np.load)(str(root / f"{name}_{i}.npy")),
                    shape(rows),
                    dtype=np.float64,
                )
                for i, rows in enumerate(sizes)
            ]
        )

    return column("X", lambda r: (r, D)), column("y", lambda r: (r,))


def _measure(client, fit):
    """Wall-clock time and client / worker peak memory of ``fit()``."""
    client.run(_start_worker_sampler)
    sampler = PeakRSS()
    start = time.perf_counter()
    result = fit()
    seconds = time.perf_counter() - start
    base, peak = sampler.stop()
    workers = client.run(_stop_worker_sampler)
    return {
        "seconds": seconds,
        "client_extra": peak - base,
        "client_peak": peak,
        "worker_peaks": [peak for _, peak in workers.values()],
        "result": result,
    }


def _count_passes():
    """Count dask-ml's lbfgs passes (one ``compute`` of loss and gradient each)."""
    import dask_glm.algorithms as algorithms

    original = algorithms.compute
    counter = {"passes": 0}

    def counting(*args, **kwargs):
        counter["passes"] += 1
        return original(*args, **kwargs)

    algorithms.compute = counting
    return counter


def latency(client, m, repeat=5):
    """Median time of an empty map/reduce of ``d + 1`` numbers over ``m`` tasks."""
    import dask.array as da

    times = []
    for seed in range(repeat):
        parts = da.random.default_rng(seed).random((m, D + 1), chunks=(1, D + 1))
        start = time.perf_counter()
        parts.sum(axis=0).compute()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def fits_on_cluster(workers, X, y, m):
    """(a) and (b) on a fresh LocalCluster of ``workers`` processes."""
    import distributed
    from dask_ml.linear_model import LogisticRegression

    from skdpsco import HeavyTailedDPLogistic

    with (
        distributed.LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # any free port: other clusters may run
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        for module in ("skdpsco", "dask_ml.linear_model", "psutil"):
            client.run(importlib.import_module, module)
        out = {"workers": workers, "latency": latency(client, m)}
        try:
            est = HeavyTailedDPLogistic(delta=DELTA, random_state=0)
            run = _measure(client, lambda: est.fit(X, y))
            run["passes"] = int(np.max(est.n_iter_))
            run["coef"] = np.concatenate([est.coef_.ravel(), est.intercept_])
            out["skdpsco"] = run
        except Exception as exc:  # the dask path is not wired into this version
            out["skdpsco"] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
        counter = _count_passes()
        for key, persist in (("dask_ml", False), ("dask_ml_persisted", True)):
            counter["passes"] = 0
            peer = LogisticRegression(solver="lbfgs")

            def fit(peer=peer, persist=persist):
                # persisted: X and y read once into the workers' memory, as
                # skdpsco keeps its design; otherwise every pass reads the disk.
                Xp, yp = client.persist([X, y]) if persist else (X, y)
                return peer.fit(Xp, yp)

            run = _measure(client, fit)
            run["passes"] = counter["passes"]
            run["coef"] = np.append(peer.coef_, peer.intercept_)
            out[key] = run
    return out


def in_memory_fit(root, sizes, rows):
    """(c): the first ``rows`` rows in memory, with the tracemalloc peak."""
    from skdpsco import HeavyTailedDPLogistic

    parts = []
    for i in range(len(sizes)):
        if sum(len(p[1]) for p in parts) >= rows:
            break
        parts.append((np.load(root / f"X_{i}.npy"), np.load(root / f"y_{i}.npy")))
    X = np.concatenate([p[0] for p in parts])[:rows]
    y = np.concatenate([p[1] for p in parts])[:rows]
    est = HeavyTailedDPLogistic(delta=DELTA, random_state=0)
    tracemalloc.start()
    start = time.perf_counter()
    est.fit(X, y)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    coef = np.concatenate([est.coef_.ravel(), est.intercept_])
    return {"rows": rows, "seconds": seconds, "traced_peak": peak, "coef": coef}


def accuracy(coef, n_test=200_000):
    X, y = _chunk(10**6, n_test, seed=SEED + 1)
    return float(np.mean((X @ coef[:-1] + coef[-1] > 0) == (y > 0.5)))


def model(runs, m, key, workers):
    """Fit time at ``workers`` by the per-iteration cost model (module docstring)."""
    one = next(r for r in runs if r["workers"] == 1)
    fit = one[key]
    per_pass = fit["seconds"] / fit["passes"]
    # Through the measured 1-worker point; the other counts check the model.
    lat = min(one["latency"], per_pass)
    t_chunk = (per_pass - lat) / m
    return [fit["passes"] * (math.ceil(m / w) * t_chunk + lat) for w in workers]


#: The empty cells of a table row with fewer numbers.
DASHES = "| - " * 6 + "|"


def _mib(value):
    return f"{value / 2**20:,.0f}"


def report(runs, memory_fit, n, sizes, data_bytes):
    m = len(sizes)
    print(
        f"n = {n:,} rows, d = {D}, {m} chunks of up to {max(sizes):,} rows on disk "
        f"(.npy stack, read lazily): X is {_mib(data_bytes)} MiB; LocalCluster, "
        "1 thread per worker process. Client memory: peak resident memory above "
        "its level before the fit; worker memory: peak resident memory of each "
        "worker process.\n"
    )
    print(
        "| workers | fit | time s | passes | s / pass | client MiB (% of X) "
        "| worker peak MiB | test accuracy | time / dask-ml (persisted) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        peer = run["dask_ml"]["seconds"]
        persisted = run["dask_ml_persisted"]["seconds"]
        for key, label in (
            ("skdpsco", "HeavyTailedDPLogistic"),
            ("dask_ml", "dask-ml lbfgs"),
            ("dask_ml_persisted", "dask-ml lbfgs, X persisted"),
        ):
            fit = run[key]
            if "error" in fit:
                print(f"| {run['workers']} | {label} | {fit['error']} {DASHES}")
                continue
            print(
                f"| {run['workers']} | {label} | {fit['seconds']:.1f} "
                f"| {fit['passes']} | {fit['seconds'] / fit['passes']:.2f} "
                f"| {_mib(fit['client_extra'])} "
                f"({100 * fit['client_extra'] / data_bytes:.1f}%) "
                f"| {', '.join(_mib(p) for p in fit['worker_peaks'])} "
                f"| {accuracy(fit['coef']):.4f} | {fit['seconds'] / peer:.2f} "
                f"({fit['seconds'] / persisted:.2f}) |"
            )
        print(
            f"| {run['workers']} | empty map/reduce over {m} tasks | "
            f"{run['latency']:.3f} {DASHES}"
        )
    print(
        f"\nIn memory (numpy, {memory_fit['rows']:,} rows): "
        f"HeavyTailedDPLogistic {memory_fit['seconds']:.2f} s, traced peak "
        f"{_mib(memory_fit['traced_peak'])} MiB, test accuracy "
        f"{accuracy(memory_fit['coef']):.4f}."
    )
    if memory_fit["rows"] == n:
        same = all(
            "error" not in r["skdpsco"]
            and np.array_equal(r["skdpsco"]["coef"], memory_fit["coef"])
            for r in runs
        )
        print(
            "Dask fits' coef_ and intercept_ equal the in-memory fit's bit for bit: "
            f"{same}."
        )


def figure(runs, m, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workers = [1, 2, 4, 8, 16, 20, 32, 64]
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label, color in (
        ("skdpsco", "HeavyTailedDPLogistic (private)", "C0"),
        ("dask_ml", "dask-ml lbfgs (non-private)", "C1"),
        ("dask_ml_persisted", "dask-ml lbfgs, X persisted", "C2"),
    ):
        measured = [
            (r["workers"], r[key]["seconds"]) for r in runs if "error" not in r[key]
        ]
        if not measured:
            continue
        ax.plot(
            *zip(*measured, strict=True), "o", color=color, label=f"{label}, measured"
        )
        if any(w == 1 for w, _ in measured):
            ax.plot(
                workers,
                model(runs, m, key, workers),
                "--",
                color=color,
                label="cost model",
            )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("workers (one process, one thread each)")
    ax.set_ylabel("fit time (s)")
    ax.set_title(f"{m} chunks: speed-up stops at {m} workers (one chunk each)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 2^18 smoke test")
    parser.add_argument("--n", type=int, help="rows (default 2e7, --quick 2^18)")
    parser.add_argument("--chunk-rows", type=int, help="rows per file (default 2^20)")
    parser.add_argument("--subsample", type=int, help="rows of the in-memory fit")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    results = HERE / "results"
    parser.add_argument("--figure", default=str(results / "distributed_scaling.png"))
    parser.add_argument("--json", default=str(results / "distributed.json"))
    args = parser.parse_args()
    n = args.n or (2**18 if args.quick else 20_000_000)
    chunk_rows = args.chunk_rows or (2**15 if args.quick else 2**20)
    subsample = min(n, args.subsample or (n if args.quick else 1_000_000))
    print("### Fitting on a dask LocalCluster against dask-ml\n")
    with tempfile.TemporaryDirectory(prefix="skdpsco_distributed_") as tmp:
        root = Path(tmp)
        sizes = write_stack(root, n, chunk_rows)
        X, y = lazy_stack(root, sizes)
        runs = [fits_on_cluster(w, X, y, len(sizes)) for w in sorted(args.workers)]
        memory_fit = in_memory_fit(root, sizes, subsample)
    report(runs, memory_fit, n, sizes, n * D * 8)
    Path(args.figure).parent.mkdir(parents=True, exist_ok=True)
    figure(runs, len(sizes), args.figure)
    raw = {
        "n": n,
        "d": D,
        "chunk_rows": chunk_rows,
        "runs": [
            {
                "workers": r["workers"],
                "latency": r["latency"],
                **{
                    key: {
                        k: v for k, v in r[key].items() if k not in ("result", "coef")
                    }
                    for key in ("skdpsco", "dask_ml", "dask_ml_persisted")
                },
            }
            for r in runs
        ],
        "in_memory": {k: v for k, v in memory_fit.items() if k != "coef"},
    }
    Path(args.json).write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
