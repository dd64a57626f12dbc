"""Fast checks of the showcase's plot and of the benchmark's diffprivlib rows.

Neither the demo nor a benchmark table is run here: the plot gets a tiny fake
results table, and diffprivlib's import is made to fail with monkeypatch.
"""

import builtins
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load(relpath, name):
    # A benchmark script imports its sibling modules, as when run from its folder:
    # the folder is on the path while it loads, last and only then, so that its
    # scripts (benchmarks/distributed.py, benchmarks/sparse.py) never shadow the
    # installed packages of the same name for the rest of the test session.
    folder = str((ROOT / relpath).parent)
    added = folder not in sys.path
    if added:
        sys.path.append(folder)
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / relpath)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        if added:
            sys.path.remove(folder)
    return module


@pytest.fixture(scope="module")
def showcase():
    return _load("examples/showcase.py", "_skdpsco_showcase")


@pytest.fixture(scope="module")
def heavy_tailed():
    return _load("benchmarks/heavy_tailed.py", "_skdpsco_bench_heavy_tailed")


def _fake_results():
    rows = [
        dict(dataset="toy clf", metric="accuracy", model="LogisticRegression",
             epsilon=math.inf, score=0.95),
        dict(dataset="toy reg", metric="R^2", model="Ridge", epsilon=math.inf,
             score=0.5),
    ]  # fmt: skip
    for eps, acc, r2 in [(0.5, 0.7, -8.0), (1.0, 0.8, 0.1), (8.0, 0.93, 0.48)]:
        rows.append(dict(dataset="toy clf", metric="accuracy", model="A [x]",
                         epsilon=eps, score=acc))  # fmt: skip
        rows.append(dict(dataset="toy clf", metric="accuracy", model="A [y]",
                         epsilon=eps, score=acc - 0.1))  # fmt: skip
        rows.append(dict(dataset="toy reg", metric="R^2", model="B [x]",
                         epsilon=eps, score=r2))  # fmt: skip
    return rows


def test_plot_privacy_utility_writes_png(showcase, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "nested" / "plot.png"
    path = showcase.plot_privacy_utility(_fake_results(), out, dpi=40)
    assert Path(path) == out
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 1000


def test_showcase_default_output_is_the_ignored_demo_output(showcase):
    assert showcase.DEFAULT_OUTPUT_DIR == ROOT / "demo_output"
    assert "demo_output/" in (ROOT / ".gitignore").read_text().split()


def _block(monkeypatch, package):
    for name in list(sys.modules):
        if name.split(".")[0] == package:
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, package, None)  # import -> ImportError


def _block_diffprivlib(monkeypatch):
    _block(monkeypatch, "diffprivlib")


def test_showcase_without_matplotlib_says_so_first_and_still_prints_the_tables(
    showcase, monkeypatch, capsys, tmp_path
):
    # The optional extra missing: one line up front, the tables, no traceback.
    _block(monkeypatch, "matplotlib")
    monkeypatch.setattr(showcase, "_datasets", lambda: iter(()))
    assert showcase.main(["--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "matplotlib is not installed: the tables only, no plot "
        "(pip install 'skdpsco[examples]')."
    )
    assert out[-1].startswith("Done in ")
    assert list(tmp_path.iterdir()) == []


def test_diffprivlib_rows_say_not_installed(heavy_tailed, monkeypatch):
    _block_diffprivlib(monkeypatch)
    models, why = heavy_tailed.load_diffprivlib()
    assert models is None
    assert why == "not installed (pip install diffprivlib)"

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 3)), rng.integers(0, 2, size=40)
    splits = [(X, X, y, y, y)]
    assert heavy_tailed.diffprivlib_scores("clf", splits, 1.0, (0,)) == why
    row = heavy_tailed._diffprivlib_speed_row(
        heavy_tailed.HeavyTailedDPLogistic, (X, y), 1.0, X.nbytes
    )
    assert row[0] == "diffprivlib LogisticRegression"
    assert why in row


def test_diffprivlib_rows_say_why_it_is_broken(heavy_tailed, monkeypatch):
    real_import = builtins.__import__

    def failing_import(name, *args, **kwargs):
        if name.split(".")[0] == "diffprivlib":
            raise ImportError(
                "cannot import name 'DOUBLE' from 'sklearn.tree._tree' "
                "(/site-packages/sklearn/tree/_tree.so)"
            )
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", failing_import)
    models, why = heavy_tailed.load_diffprivlib()
    assert models is None
    assert why.startswith("diffprivlib ")
    assert "fails with scikit-learn" in why
    assert why.endswith(
        "ImportError: cannot import name 'DOUBLE' from 'sklearn.tree._tree'"
    )
