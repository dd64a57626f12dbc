"""Fixtures shared by the suites.

Helpers that take arguments or feed ``pytest.mark.parametrize`` at collection time
(estimator discovery, seeded data, noiseless fits) are plain functions in
``tests/_helpers.py``.
"""

import pytest

from skdpsco.privacy._params import _non_private_testing_mode


@pytest.fixture
def non_private_mode():
    """The hidden testing mode (``epsilon = inf``, zero noise) for a test that
    compares a noise-free run with a reference computation: outside it the
    mechanisms refuse to release a sensitive value without noise."""
    with _non_private_testing_mode():
        yield


@pytest.fixture(scope="session")
def dask_client():
    """A real ``dask.distributed`` cluster: 2 worker processes, 1 thread each,
    started once per test session and closed at its end. Skipped only where the
    dask extra is not installed (``make test`` installs it)."""
    pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # any free port (None still tries 8787)
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client
