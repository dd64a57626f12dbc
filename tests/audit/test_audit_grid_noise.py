"""The audit catches the floating-point reachable-output attack, and the grid closes it.

Float noise added to a double leaves holes: the set of outputs ``value + noise``
can take depends on the low-order bits of ``value`` (Mironov 2012; Jin et al.
2022). An attacker who knows the library, the build and both neighbouring
noise-free values ``v`` (from ``D``) and ``v'`` (from ``D'``) decides, for each
output, whether it is *reachable* from ``v`` and from ``v'``; an output reachable
from one only names its dataset with certainty. Here that attacker is handed to
the auditor (:func:`tests.audit.auditor.audit`) as statistics of each release:

* float noise (what the mechanisms did before the grid): numpy's samplers are
  inverted exactly. ``Generator.laplace`` is ``+-b log(2 U)`` with ``U = k 2^-53``
  (as in ``tests/privacy/test_secure_noise.py``); ``Generator.normal`` is
  ``sigma x`` with ``x = +-r w_i`` on the fast and wedge paths of numpy's
  ziggurat (``i`` the low 8 bits of a 64-bit word, ``r`` the next 52), whose
  layer widths ``w_i`` the attacker reads off the installed numpy by drawing from
  seeds it knows. An output is reachable from ``v`` when some admissible noise
  ``n`` gives ``v + n == out`` exactly in every coordinate (the Gaussian tail
  beyond ``|x| > 3.5`` is declared reachable: an over-approximation, which only
  costs the attacker power and keeps the test honest);
* the grid: an output is reachable from ``v`` when it is a multiple of the public
  step ``gamma`` (the integer noise reaches every grid point), whatever ``v``.

Each release is a vector of ``M`` noisy column sums, so a float release is
reachable from the wrong neighbour only if all ``M`` coordinates happen to be.
Two pairs of neighbours: the canary moves every sum by 1e-9 and the first one by
0.98 of the sensitivity as well (``"full"``), or every sum by 1e-9 only
(``"low_bits"``, the attack's favourite). The claimed budget is ``epsilon = 1``
(``delta = 1e-5`` for the Gaussian, pure for the Laplace), checked on the ledger
record. The auditor also sees the first coordinate and the mean (the ordinary
shift tests).

* Power: the broken variants (float noise on the exact value, the honest ledger
  record) are bounded above 3 (the most 1000 runs can certify is about 4.6).
* The library's ``GaussianMechanism.release`` / ``LaplaceMechanism.release`` stay
  below the claim, and on the ``low_bits`` pair (both values round to the same
  grid point: identical output laws) near 0.
"""

import collections
import math

import numpy as np
import pytest
from _float_noise import numpy_laplace_reachable

from skdpsco.privacy import GaussianMechanism, LaplaceMechanism, PrivacySpent
from skdpsco.privacy._accounting import calibrate_analytic_gaussian
from skdpsco.privacy._mechanisms import gaussian_noise, grid_step, laplace_noise

from .auditor import audit

CLAIMED_EPSILON = 1.0
DELTA = 1e-5
N_RUNS = 1000
#: Coordinates of one release.
M = 16
SENSITIVITY = 1.0
N_RECORDS = 10


# ------------------------------------------------------------- the mechanisms


def _gaussian():
    sigma = calibrate_analytic_gaussian(CLAIMED_EPSILON, DELTA, SENSITIVITY)
    return GaussianMechanism(SENSITIVITY, sigma, name="column sum")


def _laplace():
    return LaplaceMechanism.from_epsilon(SENSITIVITY, CLAIMED_EPSILON, "column sum")


class _FloatGaussian(GaussianMechanism):
    """Float Gaussian noise on the exact value, no grid (the ledger is honest)."""

    def release(self, value, rng):
        value = np.asarray(value, dtype=float)
        return value + gaussian_noise(rng, self.sigma, value.shape)


class _FloatLaplace(LaplaceMechanism):
    """Float Laplace noise on the exact value, no grid (the ledger is honest)."""

    def release(self, value, rng):
        value = np.asarray(value, dtype=float)
        return value + laplace_noise(rng, self.scale, value.shape)


def _mechanism(kind, variant):
    if kind == "gaussian":
        mech = _gaussian()
        broken = _FloatGaussian(mech.sensitivity, mech.sigma, mech.name)
    else:
        mech = _laplace()
        broken = _FloatLaplace(mech.sensitivity, mech.scale, mech.name)
    return broken if variant == "float" else mech


class _ReleaseModel:
    """``fit(X, _)`` releases the column sums of ``X`` through ``mechanism``."""

    def __init__(self, mechanism, random_state):
        self.mechanism, self.random_state = mechanism, random_state

    def fit(self, X, y=None):
        rng = np.random.default_rng(self.random_state)
        self.out_ = self.mechanism.release(_query(X), rng)
        return self


def _query(X):
    return X.sum(axis=0)


def _neighbours(pair):
    """``D`` and ``D'``: one record of ``N_RECORDS`` replaced. ``"full"``: the
    first column sum moves by 0.98 Delta and every other one by 1e-9 (l1 and l2
    below the sensitivity); ``"low_bits"``: every column sum moves by 1e-9."""
    X = np.full((N_RECORDS, M), 0.03)
    X_prime = X.copy()
    X_prime[0] += 1e-9
    if pair == "full":
        X_prime[0, 0] += 0.98 * SENSITIVITY
    move = _query(X_prime) - _query(X)
    assert 0 < np.linalg.norm(move) <= np.abs(move).sum() <= SENSITIVITY
    return X, X_prime


# -------------------------------------------------- the reachable-output attacker


@pytest.fixture(scope="module")
def ziggurat_widths():
    """``w_i`` of numpy's ziggurat (``x = +-r w_i``), read off the installed numpy:
    for each seed, the first 64-bit word of PCG64 gives ``i`` and ``r``, the first
    standard normal gives ``x``; ``w_i`` is the double with ``r w_i == |x|``
    found most often (wedge rejections and the tail give stray candidates)."""
    found = collections.defaultdict(collections.Counter)
    for seed in range(6000):
        word = int(np.random.PCG64(seed).random_raw())
        x = abs(float(np.random.Generator(np.random.PCG64(seed)).standard_normal()))
        i, r = word & 0xFF, (word >> 9) & (2**52 - 1)
        if r == 0:
            continue
        w = x / r
        for _ in range(3):
            w = math.nextafter(w, 0.0)
        for _ in range(7):
            if float(np.float64(r) * w) == x:
                found[i][w] += 1
            w = math.nextafter(w, math.inf)
    if len(found) < 256:
        pytest.skip("numpy's normal sampler is not the ziggurat this attack knows")
    widths = np.array([found[i].most_common(1)[0][0] for i in range(256)])
    # The attacker checks its model: every draw of the float variant is reachable
    # from its own value (up to the tail, declared reachable).
    rng = np.random.default_rng(123)
    value = np.full(M, 0.3)
    for _ in range(50):
        out = value + gaussian_noise(rng, 3.0, M)
        if not _gaussian_reachable(out, value, 3.0, widths):
            pytest.skip("numpy's normal sampler is not the ziggurat this attack knows")
    return widths


def _gaussian_reachable(out, value, sigma, widths):
    """Whether ``out == value + sigma x`` for ``x = +-r w_i`` in every coordinate."""
    x = np.abs(out - value) / sigma
    r0 = np.rint(x[:, None] / widths[None, :])
    r = r0[:, :, None] + np.arange(-2.0, 3.0)
    admissible = (r >= 0) & (r < 2.0**52)
    magnitude = r * widths[None, :, None]
    hit = np.zeros(out.shape, dtype=bool)
    for sign in (1.0, -1.0):
        noise = sigma * (sign * magnitude)
        same = (value[:, None, None] + noise) == out[:, None, None]
        hit |= np.any(admissible & same, axis=(1, 2))
    return bool(np.all(hit | (x > 3.5)))


def _laplace_reachable(out, value, b):
    return all(
        numpy_laplace_reachable(float(x), float(v), b)
        for x, v in zip(out, value, strict=True)
    )


def _attack_statistic(kind, v, v_prime, widths):
    """The attacker's view of a release: reachability from each neighbour's
    noise-free value, for float noise and for the grid; the first coordinate
    and the mean (the ordinary shift tests)."""
    mech = _mechanism(kind, "grid")
    if kind == "gaussian":
        sigma = mech.sigma
        gamma = grid_step(min(mech.sensitivity, sigma), M)

        def float_reachable(out, value):
            return _gaussian_reachable(out, value, sigma, widths)

    else:
        gamma = grid_step(min(mech.sensitivity, mech.scale), M, norm="l1")

        def float_reachable(out, value):
            return _laplace_reachable(out, value, mech.scale)

    def statistic(model):
        out = model.out_
        steps = out / gamma
        on_grid = float(np.array_equal(steps, np.rint(steps)))
        return {
            "float-reachable from D": float(float_reachable(out, v)),
            "float-reachable from D'": float(float_reachable(out, v_prime)),
            "grid-reachable from D": on_grid,
            "grid-reachable from D'": on_grid,
            "first": float(out[0]),
            "mean": float(out.mean()),
        }

    return statistic


def _run(kind, variant, pair, widths, seed=5):
    mech = _mechanism(kind, variant)
    delta = DELTA if kind == "gaussian" else 0.0
    # The ledger claims the budget, broken or not: the bug is invisible to it.
    assert PrivacySpent.from_records([mech.record()], delta).epsilon <= (
        CLAIMED_EPSILON * (1 + 1e-9)
    )
    X, X_prime = _neighbours(pair)
    statistic = _attack_statistic(kind, _query(X), _query(X_prime), widths)
    return audit(
        lambda s: _ReleaseModel(mech, s),
        (X, None),
        (X_prime, None),
        statistic=statistic,
        n_runs=N_RUNS,
        delta=delta,
        seed=seed,
    )


# --------------------------------------------------------------------- the tests


def _widths(kind, request):
    # Only the Gaussian attacker needs numpy's ziggurat (the Laplace tests run
    # even where it is not recognised).
    return request.getfixturevalue("ziggurat_widths") if kind == "gaussian" else None


@pytest.mark.parametrize("pair", ["full", "low_bits"])
@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
def test_reachable_output_attack_flags_float_noise(kind, pair, request):
    result = _run(kind, "float", pair, _widths(kind, request))
    print(result.summary())
    assert result.epsilon_lb > 3 * CLAIMED_EPSILON, result.summary()
    # It is the attack that wins, not the shift of the mean.
    assert result.tests[0].feature.startswith("float-reachable"), result.summary()


@pytest.mark.parametrize("pair", ["full", "low_bits"])
@pytest.mark.parametrize("kind", ["gaussian", "laplace"])
def test_grid_releases_resist_the_reachable_output_attack(kind, pair, request):
    result = _run(kind, "grid", pair, _widths(kind, request))
    print(result.summary())
    assert result.epsilon_lb < CLAIMED_EPSILON, result.summary()
    if pair == "low_bits":
        # Both neighbours round to the same grid point: the same output law.
        assert result.epsilon_lb <= 0.5, result.summary()
