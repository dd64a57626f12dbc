"""Subsampling and stopping randomness from the secure source.

Amplification by subsampling (Poisson batches of the SGD algorithms, the batches of
bias-reduced SGD, the subsets of sample-and-aggregate) and the random stopping of
private selection need their coins secret: for ``random_state=None`` they come
from the operating system's source, exactly, never from a seeded generator whose
state another party could hold.
"""

import math

import numpy as np
import pytest
from scipy import stats

from skdpsco.privacy import _discrete
from skdpsco.privacy._discrete import (
    SecureGenerator,
    bernoulli,
    poisson_subsample,
    uniform_sample,
)


def _secure():
    return SecureGenerator(np.random.PCG64(0))


def test_poisson_subsample_includes_each_index_at_the_rate():
    rng = _secure()
    n, q, reps = 200, 0.05, 3000
    counts = np.zeros(n)
    sizes = []
    for _ in range(reps):
        idx = poisson_subsample(rng, n, q)
        assert np.all(np.diff(idx) > 0) and (idx.size == 0 or idx[-1] < n)
        counts[idx] += 1
        sizes.append(idx.size)
    # Each index: Binomial(reps, q); all 200 within 5 standard deviations.
    sd = math.sqrt(reps * q * (1 - q))
    assert np.all(np.abs(counts - reps * q) < 5 * sd)
    # The batch size is Binomial(n, q): its mean and variance (chi-square band).
    assert abs(np.mean(sizes) - n * q) < 5 * math.sqrt(n * q * (1 - q) / reps)
    var_ratio = np.var(sizes, ddof=1) / (n * q * (1 - q))
    lo, hi = stats.chi2.ppf([1e-4, 1 - 1e-4], reps - 1) / (reps - 1)
    assert lo < var_ratio < hi
    # Independent inclusions: two fixed indices co-occur at rate q^2.
    both = sum(
        np.isin([3, 150], poisson_subsample(rng, n, q)).all() for _ in range(20_000)
    )
    assert abs(both - 20_000 * q * q) < 5 * math.sqrt(20_000 * q * q)


def test_poisson_subsample_rate_is_at_most_the_accounted_one():
    for rate in (1e-6, 0.001, 0.3, 0.9, 1.0 - 2**-20):
        s = math.floor(
            -math.log1p(-rate) * _discrete._RATE_DENOMINATOR * (1.0 - 2.0**-30)
        )
        q = 1.0 - math.exp(-s / _discrete._RATE_DENOMINATOR)
        assert q <= rate and q >= rate * (1 - 2**-29) - 2**-48
    rng = _secure()
    assert poisson_subsample(rng, 10, 1.0).tolist() == list(range(10))
    assert poisson_subsample(rng, 0, 0.5).size == 0


def test_secure_coins_never_touch_the_generator_state():
    rng = _secure()
    before = rng.bit_generator.state
    poisson_subsample(rng, 1000, 0.1)
    uniform_sample(rng, 1000, 10)
    uniform_sample(rng, 10, 8)
    bernoulli(rng, 0.3)
    assert rng.bit_generator.state == before


def test_seeded_generators_keep_their_reproducible_draws():
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    k = b.binomial(100, 0.2)
    np.testing.assert_array_equal(
        poisson_subsample(a, 100, 0.2), np.sort(b.choice(100, size=k, replace=False))
    )
    np.testing.assert_array_equal(
        uniform_sample(a, 50, 5), b.choice(50, size=5, replace=False)
    )


@pytest.mark.parametrize("n, m", [(10, 3), (6, 5)])
def test_uniform_sample_is_a_uniform_ordered_sample(n, m):
    rng = _secure()
    reps = 6000
    first = np.zeros(n)
    for _ in range(reps):
        draw = uniform_sample(rng, n, m)
        assert len(set(draw.tolist())) == m and draw.min() >= 0 and draw.max() < n
        first[draw[0]] += 1
    assert stats.chisquare(first).pvalue > 1e-4


def test_bernoulli_is_exact_at_its_rate():
    rng = _secure()
    hits = sum(bernoulli(rng, 0.125) for _ in range(20_000))
    assert abs(hits - 2500) < 5 * math.sqrt(20_000 * 0.125 * 0.875)
    assert bernoulli(rng, 1.0) and not bernoulli(rng, 0.0)


def test_poisson_batches_drawn_in_blocks_are_independent_batches():
    # The secure path cuts one Bernoulli process into stretches of n positions:
    # every batch has the rate of one, and consecutive batches are independent.
    rng = _secure()
    n, q, count = 50, 0.1, 4000
    batches = list(_discrete.poisson_batches(rng, n, q, count))
    assert len(batches) == count
    counts = np.zeros(n)
    for b in batches:
        assert np.all(np.diff(b) > 0) and (b.size == 0 or (b[0] >= 0 and b[-1] < n))
        counts[b] += 1
    sd = math.sqrt(count * q * (1 - q))
    assert np.all(np.abs(counts - count * q) < 5 * sd)
    sizes = np.array([b.size for b in batches], dtype=float)
    r = np.corrcoef(sizes[:-1], sizes[1:])[0, 1]
    assert abs(r) < 5 / math.sqrt(count)
