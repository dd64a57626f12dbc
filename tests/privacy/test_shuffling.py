"""FMT21 amplification by shuffling: closed form, inversion, delta bookkeeping."""

import math

import numpy as np
import pytest

from skdpsco.privacy._shuffling import (
    shuffle_delta,
    shuffle_epsilon,
    shuffle_local_epsilon,
    shuffle_valid_local_epsilon,
)


def _fmt_direct(eps0, n, delta):
    # Direct evaluation of the FMT21 closed form (as in the authors' reference
    # code ``closedformanalysis``), written independently of the module.
    a = 8 * (np.exp(eps0) * np.log(4 / delta)) ** 0.5 / n**0.5
    c = 8 * np.exp(eps0) / n
    e = np.log(1 + a + c)
    b = 1 - np.exp(-eps0)
    dd = 1 + np.exp(-eps0 - e)
    return np.log(1 + (b / dd) * (a + c))


@pytest.mark.parametrize(
    "eps0, n, delta_s",
    [
        (1.0, 100_000, 5e-6),
        (0.5, 10_000, 1e-6),
        (0.27, 10_000, 5e-6),
        (2.0, 10**6, 1e-8),
    ],
)
def test_matches_direct_evaluation(eps0, n, delta_s):
    assert shuffle_epsilon(eps0, n, delta_s) == pytest.approx(
        _fmt_direct(eps0, n, delta_s), rel=1e-12
    )


def test_vectors():
    # The FMT21 closed form and its inversion (delta_s = 5e-6, cap eps0 <= 1).
    assert shuffle_epsilon(1.0, 100_000, 5e-6) == pytest.approx(0.0712143, abs=1e-7)
    eps0, achieved = shuffle_local_epsilon(0.05, 10_000, 5e-6)
    assert eps0 == pytest.approx(0.27116, abs=1e-5) and achieved <= 0.05
    assert achieved == pytest.approx(0.05, rel=1e-9)
    eps0, achieved = shuffle_local_epsilon(0.05, 100_000, 5e-6)
    assert eps0 == pytest.approx(0.75734, abs=1e-5)
    # The cap binds: eps = 0.1 asked, only 0.0712 achieved.
    eps0, achieved = shuffle_local_epsilon(0.1, 100_000, 5e-6)
    assert eps0 == 1.0 and achieved == pytest.approx(0.0712143, abs=1e-7)


def test_inversion_is_the_largest_valid_eps0():
    for eps, n, ds in [(0.02, 5_000, 1e-6), (0.05, 30_000, 5e-6), (0.3, 10**6, 1e-7)]:
        eps0, achieved = shuffle_local_epsilon(eps, n, ds)
        assert 0 < eps0 <= 1 and eps0 <= shuffle_valid_local_epsilon(n, ds)
        assert achieved <= eps and shuffle_epsilon(eps0, n, ds) == achieved
        if eps0 < 1:
            assert shuffle_epsilon(min(eps0 * (1 + 1e-9), 1.0), n, ds) > eps * (
                1 - 1e-9
            )


def test_validity_range_and_small_n():
    n, ds = 10_000, 1e-6
    limit = math.log(n / (16 * math.log(4 / ds)))
    assert shuffle_valid_local_epsilon(n, ds) == pytest.approx(limit)
    with pytest.raises(ValueError, match="range"):
        shuffle_epsilon(limit + 0.01, n, ds)
    # n <= 16 ln(4/delta_s): no amplification is proven.
    assert shuffle_local_epsilon(0.5, 200, 1e-6) == (0.0, 0.0)


def test_delta_bookkeeping_stays_within_delta():
    # delta_s = delta/2, delta0 = delta/(3 n (e^eps + 1)) keeps the total <= delta.
    for eps, n, delta in [(0.05, 10_000, 1e-5), (1.0, 1000, 1e-6), (0.1, 10**5, 1e-8)]:
        delta0 = delta / (3 * n * (math.exp(eps) + 1))
        for eps0 in (0.01, 0.5, 1.0):
            total = shuffle_delta(eps, eps0, delta0, n, delta / 2)
            assert total <= delta
        assert shuffle_delta(eps, 0.0, delta0, n, delta / 2) == pytest.approx(
            delta / 2 + 1.5 * delta / 3
        )
