"""The dask extra is optional: a clear install hint when it is missing, and the
in-memory path never imports it."""

import subprocess
import sys

import numpy as np
import pytest

from skdpsco.utils._optional import import_dask, is_dask_collection


def test_missing_dask_raises_an_install_hint(monkeypatch):
    # A None entry in sys.modules makes the import fail as if not installed.
    monkeypatch.setitem(sys.modules, "dask.array", None)
    with pytest.raises(ImportError, match=r"pip install 'skdpsco\[dask\]'"):
        import_dask("array")
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match="needs distributed"):
        import_dask("distributed")


def test_in_memory_objects_are_not_dask_collections():
    import pandas as pd
    import scipy.sparse as sp

    for obj in (np.ones((2, 2)), sp.eye(2), pd.DataFrame({"a": [1]}), [1, 2]):
        assert not is_dask_collection(obj)


def test_dask_arrays_are_dask_collections():
    da = pytest.importorskip("dask.array")
    assert is_dask_collection(da.ones((4, 2), chunks=2))
    assert is_dask_collection(da.ones((4, 2), chunks=2).sum())


def test_importing_skdpsco_and_fitting_in_memory_does_not_import_dask():
    # The fit, predict and score of both default estimators.
    code = (
        "import sys, numpy as np\n"
        "from skdpsco import HeavyTailedDPLogistic\n"
        "X = np.random.default_rng(0).standard_normal((200, 3))\n"
        "HeavyTailedDPLogistic(epsilon=1.0, random_state=0).fit(X, X[:, 0] > 0)\n"
        "from skdpsco import HeavyTailedDPRidge\n"
        "est = HeavyTailedDPRidge(random_state=0).fit(X, X[:, 1])\n"
        "est.score(X, X[:, 1])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('dask', 'distributed')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
