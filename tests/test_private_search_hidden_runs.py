"""The hidden runs of PrivateSearchCV: silent, and fitted with fresh entropy.

The number of runs ``K`` must stay hidden for the private selection theorems (Liu &
Talwar 2019; Papernot & Steinke 2022, Theorem 2): nothing the runs print, log or
warn may reach the user, whatever the ``verbose`` settings. And when the search is
not seeded, every run draws its own fresh OS entropy (``random_state=None``), not a
31-bit seed from the search's generator.
"""

import logging
import sys
import warnings

import numpy as np
import pytest
from _search_spy import spy_on_runs
from sklearn.datasets import make_classification
from sklearn.pipeline import Pipeline

from skdpsco import HeavyTailedDPLogistic
from skdpsco.model_selection import PrivateSearchCV
from skdpsco.preprocessing import DPStandardScaler

_LOGGER = logging.getLogger("skdpsco.tests.hidden_runs")


@pytest.fixture(scope="module")
def clf_data():
    X, y = make_classification(
        600, 4, n_informative=3, n_redundant=0, class_sep=2.0, random_state=0
    )
    return X / 5.0, y  # inside the scaler's public box


class _Chatty(HeavyTailedDPLogistic):
    """Talks through every channel at each fit, whatever its ``verbose``."""

    def fit(self, X, y, **fit_params):
        print(f"fit on {len(X)} records")
        print("progress 100%", end="\r", file=sys.stderr)  # a tqdm-like bar
        sys.stderr.write("raw stderr\n")
        _LOGGER.warning("fitting")
        warnings.warn("a run's warning", UserWarning, stacklevel=2)
        warnings.warn("a run's deprecation", DeprecationWarning, stacklevel=2)
        return super().fit(X, y, **fit_params)

    def predict(self, X):
        print("predicting")
        _LOGGER.warning("predicting")
        return super().predict(X)


def _searches():
    """Searches whose estimators all print progress (verbose 1 and 2)."""
    grid = {"C": [0.1, 1.0]}
    yield HeavyTailedDPLogistic(max_iter=10, verbose=1), grid
    yield HeavyTailedDPLogistic(max_iter=10, verbose=2), grid
    yield _Chatty(max_iter=5, verbose=2), grid
    pipe = Pipeline(
        [
            ("scale", DPStandardScaler(epsilon=0.5)),
            ("clf", _Chatty(max_iter=5, verbose=1)),
        ],
        verbose=True,  # "[Pipeline] ... (step 2 of 2) Processing clf ..."
    )
    yield pipe, {"clf__C": [0.1, 1.0]}


@pytest.mark.parametrize("case", range(4))
def test_hidden_runs_print_log_and_warn_nothing(clf_data, monkeypatch, capsys, case):
    # Before the fix, every run printed its progress: the line count was
    # 10 * (2 + K) for verbose=1, and K was read off stdout exactly.
    X, y = clf_data
    estimator, grid = list(_searches())[case]
    drawn = spy_on_runs(monkeypatch)
    seen = []
    for seed in range(10):
        records = []
        handler = logging.Handler(level=logging.DEBUG)
        handler.emit = records.append
        logging.getLogger().addHandler(handler)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                PrivateSearchCV(estimator, grid, random_state=seed).fit(X, y)
        finally:
            logging.getLogger().removeHandler(handler)
        out, err = capsys.readouterr()
        messages = [f"{w.category.__name__}: {w.message}" for w in caught]
        seen.append((out, err, tuple(messages), tuple(r.getMessage() for r in records)))
    assert len(set(drawn)) >= 2  # the searches above drew different K
    # The same for every K: nothing printed or logged, and only the warnings of
    # the probes, one per configuration (a public count) and not UserWarnings.
    assert len(set(seen)) == 1
    out, err, messages, logged = seen[0]
    assert (out, err, logged) == ("", "", ())
    chatty = case >= 2
    assert messages == ("DeprecationWarning: a run's deprecation",) * 2 * chatty
    # The user's objects keep their settings (runs mute clones only).
    assert estimator.get_params()["verbose"] in (1, 2, True)


@pytest.mark.filterwarnings("ignore:a run's deprecation:DeprecationWarning")
def test_silencing_is_undone_after_the_search(clf_data, capsys):
    X, y = clf_data
    before = (sys.stdout, sys.stderr, logging.root.manager.disable)
    filters = list(warnings.filters)
    PrivateSearchCV(_Chatty(max_iter=5, verbose=1), {"C": [0.1]}, random_state=0).fit(
        X, y
    )
    assert (sys.stdout, sys.stderr, logging.root.manager.disable) == before
    assert warnings.filters == filters
    print("after")
    assert capsys.readouterr().out == "after\n"


class _FailsOnPrivateData(HeavyTailedDPLogistic):
    """Passes the synthetic probe, fails on the private training part."""

    def fit(self, X, y, **fit_params):
        print("about to fail")
        _LOGGER.warning("about to fail")
        if np.max(np.abs(X)) > 50:  # the probe data are standard normal
            raise ValueError("private data out of range")
        return super().fit(X, y, **fit_params)


def test_an_exception_in_a_run_propagates_unchanged_and_silently(clf_data, capsys):
    # The exception of a run ends the search with nothing released; it is not
    # rewritten (no run number in it), what the run printed stays dropped,
    # and the streams, logging and warning filters are restored.
    X, y = clf_data
    X = X.copy()
    X[:, 0] *= 1000.0
    before = (sys.stdout, sys.stderr, logging.root.manager.disable)
    filters = list(warnings.filters)
    search = PrivateSearchCV(_FailsOnPrivateData(max_iter=5), {"C": [0.1, 1.0]})
    with pytest.raises(ValueError, match=r"^private data out of range$") as info:
        search.fit(X, y)
    assert capsys.readouterr() == ("", "")
    # Neither K nor the failing run's number is a local of the search's frames,
    # which error trackers capturing locals would show: the loop's frame holds
    # exactly these names, its loop variable None.
    frames = {
        entry.name: entry.frame.f_locals
        for entry in info.traceback
        if entry.frame.f_locals.get("self") is search
    }
    assert list(frames) == ["fit", "_fit", "_hidden_runs", "_run"]
    loop = frames["_hidden_runs"]
    assert sorted(loop) == sorted(
        ["self", "plan", "asks", "parts", "rng", "noise_rng", "seed_rng", "best"]
        + ["rho_fit", "width", "parallel", "runs", "chunk"]
    )
    # The runs are drawn by a generator whose loop variable is None; the chunk
    # dispatched holds n_jobs runs at most (here 1), whatever K.
    assert len(loop["chunk"]) == loop["width"] == 1
    drawing = loop["runs"].gi_frame.f_locals
    assert drawing["_"] is None and sorted(drawing) == sorted(
        ["self", "plan", "asks", "rng", "seed_rng", "_", "index", "est", "shown"]
    )
    assert (sys.stdout, sys.stderr, logging.root.manager.disable) == before
    assert warnings.filters == filters
    assert not hasattr(search, "best_estimator_")


class _Recorder(HeavyTailedDPLogistic):
    """Records the ``random_state`` it is fitted with."""

    seen = []

    def fit(self, X, y, **fit_params):
        type(self).seen.append(self.random_state)
        return super().fit(X, y, **fit_params)


class _RecordingScaler(DPStandardScaler):
    """Records the ``random_state`` it is fitted with."""

    seen = []

    def fit(self, X, y=None, **fit_params):
        type(self).seen.append(self.random_state)
        return super().fit(X, y, **fit_params)


def test_unseeded_search_fits_every_run_with_fresh_entropy(clf_data, monkeypatch):
    # An int seed drawn from the search's PCG64 stream would make each run's noise
    # one of 2^31 reproducible streams: with random_state=None, every fit (probes
    # and hidden runs) gets random_state=None and draws fresh OS entropy.
    X, y = clf_data
    drawn = spy_on_runs(monkeypatch)
    monkeypatch.setattr(_Recorder, "seen", [])
    monkeypatch.setattr(_RecordingScaler, "seen", [])
    pipe = Pipeline(
        [
            ("scale", _RecordingScaler(epsilon=0.5, random_state=3)),
            ("clf", _Recorder(max_iter=5, random_state=7)),
        ]
    )
    search = PrivateSearchCV(pipe, {"clf__C": [0.1, 1.0]}).fit(X, y)
    # Two probes (one per configuration), then the K hidden runs.
    assert len(_Recorder.seen) == len(_RecordingScaler.seen) == 2 + drawn[-1]
    assert _Recorder.seen == _RecordingScaler.seen == [None] * (2 + drawn[-1])
    # The released model carries the user's own values, as before.
    params = search.best_estimator_.get_params()
    assert (params["scale__random_state"], params["clf__random_state"]) == (3, 7)


def test_seeded_search_still_seeds_its_runs(clf_data, monkeypatch):
    X, y = clf_data
    drawn = spy_on_runs(monkeypatch)
    monkeypatch.setattr(_Recorder, "seen", [])
    search = PrivateSearchCV(_Recorder(max_iter=5), {"C": [0.1, 1.0]}, random_state=1)
    search.fit(X, y)
    seeds = _Recorder.seen
    assert len(seeds) == 2 + drawn[-1]
    assert all(isinstance(s, int) and 0 <= s < 2**31 - 1 for s in seeds)
    assert search.best_estimator_.random_state is None  # the user's value


@pytest.mark.parametrize("random_state", [0, "generator"])
def test_seeded_search_is_reproducible(clf_data, random_state):
    X, y = clf_data
    pipe = Pipeline(
        [
            ("scale", DPStandardScaler(epsilon=0.5)),
            ("clf", HeavyTailedDPLogistic(max_iter=10, verbose=1)),
        ],
        verbose=True,
    )
    fits = []
    for _ in range(2):
        seed = 0 if random_state == 0 else np.random.default_rng(0)
        search = PrivateSearchCV(
            pipe, {"clf__C": [0.01, 1.0]}, random_state=seed, epsilon=2.0
        ).fit(X, y)
        fits.append(search)
    a, b = fits
    assert a.best_params_ == b.best_params_
    assert a.best_score_ == b.best_score_
    np.testing.assert_array_equal(
        a.best_estimator_[-1].coef_, b.best_estimator_[-1].coef_
    )
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    # The runs were muted; the released model has the user's verbose settings.
    params = a.best_estimator_.get_params()
    assert params["verbose"] is True and params["clf__verbose"] == 1
