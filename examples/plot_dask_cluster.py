"""
===============================================
Beyond one machine: the same model on a cluster
===============================================

:class:`~skdpsco.HeavyTailedDPLogistic` and :class:`~skdpsco.HeavyTailedDPRidge`
fit dask arrays and dataframes on a ``dask.distributed`` cluster with their
default algorithm (``"clipped_gd"``). Each iteration is one map over the row
chunks (predictions, clipped gradients and their sum, in one pass) and one
reduce of ``d + 1`` integers per chunk; the noise is drawn on the client.

The per-iteration sums are exact: rows are summed in fixed blocks of 4096 by
their global index, each block's sum is rounded to a public grid, and the blocks
are added as integers. So the released model does not depend on how the data are
chunked, and it is the model of the in-memory fit, bit for bit, with the same
``privacy_spent_``. This page fits the same data in memory and in two chunkings
on a small local cluster and compares.

The trust model is the one of the in-memory fit (central differential privacy):
the workers and the client see the records and the exact sums; what leaves the
fit is the noisy model.
"""

# %%
# A local cluster and the data
# ----------------------------
#
# Two workers of one thread each, in this process (``processes=True`` runs them
# as separate processes, as on a real cluster; the result is the same). The
# data are 60,000 rows of 8 raw-unit features; on a cluster they would be read
# lazily from disk (``dask.array.from_zarr``, ``dask.dataframe.read_parquet``).
#
# ``random_state`` is fixed for a reproducible page; in production leave it at
# ``None`` (anyone who knows the seed can subtract the noise).

try:
    import matplotlib.pyplot as plt
except ImportError:  # the optional examples extra
    raise SystemExit(
        "This example draws with matplotlib: pip install 'skdpsco[examples]'"
    ) from None
try:
    import dask.array as da
    import dask.dataframe as dd
    from distributed import Client, LocalCluster
except ImportError:  # the optional dask extra
    raise SystemExit(
        "This example runs on a dask cluster: pip install 'skdpsco[dask]'"
    ) from None
import tempfile

import numpy as np
import pandas as pd

from skdpsco import HeavyTailedDPLogistic

rng = np.random.default_rng(0)
n, d = 60_000, 8
X = rng.standard_normal((n, d)) * rng.uniform(0.1, 50, d) + rng.uniform(-20, 20, d)
signal = (X - X.mean(axis=0)) / X.std(axis=0) @ rng.standard_normal(d)
y = (signal + rng.logistic(size=n) > 0).astype(int)

workspace = tempfile.TemporaryDirectory()
cluster = LocalCluster(
    n_workers=2,
    threads_per_worker=1,
    processes=False,
    dashboard_address=":0",
    local_directory=workspace.name,
)
client = Client(cluster)

# %%
# Three fits, one model
# ---------------------
#
# In memory (numpy), as a dask array in chunks of 10,000 rows, and as a dask
# dataframe in 7 partitions of uneven sizes.

params = dict(epsilon=1.0, delta=1e-6, random_state=0)
in_memory = HeavyTailedDPLogistic(**params).fit(X, y)
chunked = HeavyTailedDPLogistic(**params).fit(
    da.from_array(X, chunks=(10_000, d)), da.from_array(y, chunks=10_000)
)
frame = dd.from_pandas(pd.DataFrame(X, columns=[f"x{j}" for j in range(d)]), 7)
partitioned = HeavyTailedDPLogistic(**params).fit(
    frame, dd.from_pandas(pd.Series(y, name="y"), 7)
)
for name, est in (("dask array", chunked), ("dask dataframe", partitioned)):
    same = np.array_equal(est.coef_, in_memory.coef_) and np.array_equal(
        est.intercept_, in_memory.intercept_
    )
    print(f"{name}: coef_ and intercept_ equal the numpy fit bit for bit: {same}")
print(f"privacy spent: {in_memory.privacy_spent_.epsilon:.3f} (epsilon)")

# %%
# Predictions are lazy
# --------------------
#
# ``predict`` and ``predict_proba`` on dask input map over its chunks and return
# dask arrays; ``score`` is computed on the cluster.

Xd = da.from_array(X, chunks=(10_000, d))
proba = chunked.predict_proba(Xd)
print(type(proba).__name__, proba.shape)
print(f"accuracy on the cluster: {chunked.score(Xd, da.from_array(y, 10_000)):.3f}")

fig, ax = plt.subplots(figsize=(6, 3.5))
width = 0.4
ax.bar(np.arange(d) - width / 2, in_memory.coef_[0], width, label="numpy")
ax.bar(np.arange(d) + width / 2, chunked.coef_[0], width, label="dask (cluster)")
ax.set_xlabel("feature")
ax.set_ylabel("coefficient")
ax.set_title("The same private model in memory and on the cluster")
ax.legend()
fig.tight_layout()
plt.show()

client.close()
cluster.close()
workspace.cleanup()
