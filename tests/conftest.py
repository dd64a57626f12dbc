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
