"""Poisson-batch SGD on dask: the batches are drawn on the client as in memory and
the cluster serves their rows, so a seeded fit is the numpy fit bit for bit, in
any chunking; each gather of rows is bounded, never of length n."""

import warnings

import numpy as np
import pytest
from _dask_data import chunkings, raw_data

from skdpsco import HeavyTailedDPLogistic, HeavyTailedDPRidge
from skdpsco._dask_design import DaskLinearDesign
from skdpsco._mean_estimation import PerExampleClipBatchOracle
from skdpsco._solvers._sgd import PoissonSchedule
from skdpsco.privacy._discrete import SecureGenerator

da = pytest.importorskip("dask.array")

N, D = 9000, 5


def _data(n=N):
    return raw_data(n, 11, [1.0, -0.5, 0.25, 0.5, 0.0])


def _chunkings(X, y):
    return chunkings(X, y)


def _fit(Est, X, y, sample_weight=None, **params):
    est = Est(random_state=0, max_iter=2, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X, y, sample_weight=sample_weight)


def _assert_same(fitted, memory, name):
    np.testing.assert_array_equal(fitted.coef_, memory.coef_, err_msg=name)
    np.testing.assert_array_equal(fitted.intercept_, memory.intercept_, err_msg=name)
    assert fitted.privacy_spent_ == memory.privacy_spent_, name


#: Every algorithm on every task, each scaling twice (private: the centring
#: folded into the batch design; none: the raw rows).
CASES = [
    ("dp_sgd", HeavyTailedDPRidge, "reg", "private"),
    ("dp_sgd", HeavyTailedDPLogistic, "three", "none"),
    ("aclipped_sgd", HeavyTailedDPLogistic, "binary", "private"),
    ("aclipped_sgd", HeavyTailedDPRidge, "reg", "none"),
    ("r_aclipped_sgd", HeavyTailedDPLogistic, "three", "private"),
    ("r_aclipped_sgd", HeavyTailedDPLogistic, "binary", "none"),
]


@pytest.mark.parametrize(
    "algorithm, Est, target, scaling",
    CASES,
    ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in CASES],
)
def test_sgd_on_dask_is_the_numpy_fit_bit_for_bit(
    dask_client, algorithm, Est, target, scaling
):
    X, targets = _data()
    y = targets[target]
    params = {"algorithm": algorithm, "scaling": scaling}
    memory = _fit(Est, X, y, **params)
    assert np.all(memory.coef_ != 0)
    for name, Xd, yd in _chunkings(X, y):
        _assert_same(_fit(Est, Xd, yd, **params), memory, name)


def test_sgd_weights_balanced_classes_public_scaling_and_two_targets(dask_client):
    X, targets = _data()
    weight = np.random.default_rng(5).uniform(0, 1, N)
    scaling = (X.mean(axis=0).round(), X.std(axis=0).round(1))
    Y = np.column_stack([targets["reg"], -targets["reg"] + 10.0])
    runs = [
        ("dp_sgd", HeavyTailedDPLogistic, targets["three"], None, weight),
        ("aclipped_sgd", HeavyTailedDPLogistic, targets["binary"], scaling, weight),
        ("r_aclipped_sgd", HeavyTailedDPRidge, Y, None, weight),
        ("dp_sgd", HeavyTailedDPRidge, Y, "none", None),
    ]
    for algorithm, Est, y, scale, w in runs:
        params = {"algorithm": algorithm}
        if Est is HeavyTailedDPLogistic:
            params["class_weight"] = "balanced"
        if scale is not None:
            params["scaling"] = scale
        memory = _fit(Est, X, y, w, **params)
        Xd = da.from_array(X, chunks=(5000, D))
        yd = da.from_array(y, chunks=(7000,) + y.shape[1:])
        wd = None if w is None else da.from_array(w, chunks=6000)
        _assert_same(_fit(Est, Xd, yd, wd, **params), memory, algorithm)


def _spy_gathers(monkeypatch, entries):
    """Record the rows and the number of arrays of every gather, with at most
    ``entries`` entries each."""
    sizes = []
    gather = DaskLinearDesign._gather

    def recording(self, rows, vectors):
        sizes.append((rows.size, 1 + len(vectors)))
        return gather(self, rows, vectors)

    monkeypatch.setattr(DaskLinearDesign, "gather_entries", entries)
    monkeypatch.setattr(DaskLinearDesign, "_gather", recording)
    return sizes


def test_gathers_are_bounded_and_serve_several_steps(dask_client, monkeypatch):
    X, targets = _data()
    y = targets["binary"]
    weight = np.random.default_rng(5).uniform(0, 1, N)
    params = {"algorithm": "dp_sgd", "class_weight": "balanced"}
    memory = _fit(HeavyTailedDPLogistic, X, y, weight, **params)
    limit = 2**11 // D  # 409 rows per gather: about 4 steps of 95 rows
    sizes = _spy_gathers(monkeypatch, 2**11)
    Xd, yd = da.from_array(X, chunks=(3001, 3)), da.from_array(y, chunks=5003)
    wd = da.from_array(weight, chunks=2000)
    _assert_same(_fit(HeavyTailedDPLogistic, Xd, yd, wd, **params), memory, "spy")
    rows = np.array(sizes)
    # X, the target and the weights, each gather within the bound (the batches
    # of 95 rows on average stay far below it).
    assert np.all(rows[:, 1] == 3)
    assert rows[:, 0].max() <= limit < N
    # 2 epochs at q = 95 / 9000: 190 steps, about 18,000 row draws, served by
    # about 18,000 / 409 gathers (one per step would be 190).
    assert 40 <= len(sizes) <= 70
    assert rows[:, 0].sum() < 20_000


def test_secure_fits_gather_ahead_within_the_bound(dask_client, monkeypatch):
    X, targets = _data()
    sizes = _spy_gathers(monkeypatch, 2**12)
    Xd = da.from_array(X, chunks=(3001, 3))
    yd = da.from_array(targets["reg"], chunks=5003)
    est = HeavyTailedDPRidge(algorithm="r_aclipped_sgd", max_iter=2).fit(Xd, yd)
    assert np.all(np.isfinite(est.coef_))
    rows = np.array(sizes)[:, 0]
    assert rows.max() <= 2**12 // D
    # Stages of 2 / 3 epochs at rates q, 2q, 4q: 12,000 row draws in all, in
    # gathers of at most 819 rows, one per about 4 to 8 steps.
    assert 12 <= len(sizes) <= 30


def test_a_wrong_look_ahead_costs_gathers_not_bits(dask_client, monkeypatch):
    X, targets = _data()
    y = targets["reg"]
    params = {"algorithm": "aclipped_sgd", "batch_size": 900}
    memory = _fit(HeavyTailedDPRidge, X, y, **params)
    wrong, upcoming = np.random.default_rng(7), PoissonSchedule.upcoming

    def guessed(self, max_rows, restart=False):
        # Batches of the right sizes at the wrong places.
        listed = upcoming(self, max_rows, restart)
        return [np.sort(wrong.choice(N, rows.size, replace=False)) for rows in listed]

    monkeypatch.setattr(PoissonSchedule, "upcoming", guessed)
    sizes = _spy_gathers(monkeypatch, 2**22)
    Xd, yd = da.from_array(X, chunks=(3001, 3)), da.from_array(y, chunks=5003)
    _assert_same(_fit(HeavyTailedDPRidge, Xd, yd, **params), memory, "wrong")
    # Every step gathers its own batch again (20 steps at q = 0.1), besides the
    # blocks of wrong rows gathered ahead.
    assert len(sizes) >= 20


@pytest.mark.parametrize("secure", [False, True], ids=["seeded", "secure"])
def test_schedule_looks_ahead_without_changing_the_draws(secure):
    n, q, T, shape = 500, 0.05, 40, (3,)
    rng = SecureGenerator(np.random.PCG64(1)) if secure else np.random.default_rng(1)
    oracle = PerExampleClipBatchOracle(1.0).calibrate(n, q, 1.5)
    schedule = PoissonSchedule(rng, n, q, T, oracle, shape)
    drawn, predicted = [], {}
    for t, rows in enumerate(schedule):
        drawn.append(rows)
        if t % 9 == 0:
            # Two blocks: the second continues the first.
            step = t + 1
            for block in (schedule.upcoming(120, restart=True), schedule.upcoming(90)):
                assert sum(rows.size for rows in block) <= 120
                for rows in block:
                    predicted[step], step = rows, step + 1
        # The step's estimate: one release of the oracle's noise.
        oracle.mechanism_.release(np.zeros(shape), rng)
    assert len(drawn) == T and len(predicted) >= 25
    for t, rows in predicted.items():
        np.testing.assert_array_equal(rows, drawn[t])
    if not secure:
        # A seeded stream is the one of the in-memory fit, look-ahead or not.
        rng = np.random.default_rng(1)
        for rows in drawn:
            k = rng.binomial(n, q)
            np.testing.assert_array_equal(rows, np.sort(rng.choice(n, k, False)))
            oracle.mechanism_.release(np.zeros(shape), rng)
