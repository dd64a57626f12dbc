"""Exact cross-checks of the accounting of the grid mechanisms.

``GaussianMechanism.release`` and ``LaplaceMechanism.release`` round the noise-free
value to a public grid of step ``gamma`` and add integer noise, so what they output
is ``(round(value / gamma) + Z) gamma`` with ``Z`` an integer of known law. For two
neighbouring noise-free values the two output laws are that law shifted by two
integers, and their privacy curve (the hockey-stick divergence
``delta(eps) = sum_z max(0, P(z) - e^eps Q(z))``) is a finite sum: it is computed
here exactly, in float64, over the grid, and compared with what the accountant
claims from the mechanism's ledger record (continuous-Gaussian GDP / zCDP / RDP,
plus the samplers' total variation).

* The model of the release is checked against the release itself: the step, the
  sampler's parameter and the rounding are read off a spied call, and the output
  must be ``(rint(value / gamma) + Z) gamma`` bit for bit.
* The law of ``Z``: for the Gaussian, the exact law of the sampler's plan
  ``Z_0 + 2^k_0 (Z_1 + ...)`` (a convolution of discrete Gaussians, each level
  truncated at 12 standard deviations: the mass left out, below 1e-30, cannot move
  a delta of 1e-10); for the Laplace, ``P[z] ~ exp(-|z| / t)`` in closed form. The
  alias tables' rounding (``2^-832``) and truncation (45 standard deviations) are
  below float64 resolution; the accountant covers them by its total-variation slack
  ``(1 + e^eps) SAMPLER_TOTAL_VARIATION``, added to every bound below.
* The worst case over where the neighbours sit relative to the grid: values on a
  grid point, at half steps, just below and above half steps, at quarter steps,
  with the neighbour at ``+-Delta``: rounding with ties to even moves the shift to
  ``floor(Delta / gamma) + 1`` steps at most (the documented ``Delta + gamma``).
  Integer queries (``integer=True``) are not rounded: the shift is ``Delta /
  gamma`` exactly, and the noise carries no ``2^-10`` slack.
* Sound: the true delta never exceeds the claim. Tight: the claim is not loose by
  more than :data:`EPS_RTOL` in epsilon (the menu of sampler variances adds up to
  0.55% to the variance, the grid slack 2^-10 to the noise), nor by more than a
  factor :data:`DELTA_FACTOR` in delta at the claimed epsilon. Either a too
  generous or a too stingy accountant fails here.
* The Renyi divergence of the discrete Gaussian (Canonne, Kamath & Steinke 2020,
  Prop 5 / Thm 4): ``alpha Delta^2 / (2 sigma^2)`` exactly at integer shifts when
  ``(alpha - 1) Delta`` is an integer, strictly less otherwise. (Only the ideal,
  untruncated discrete Gaussian has a finite Renyi divergence: the sampler's tables
  stop at 45 standard deviations, so for the grid releases the library certifies
  ``(epsilon, delta)`` only, as ``doc/privacy.rst`` says.)
"""

import functools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import special

from skdpsco.privacy import GaussianMechanism, LaplaceMechanism, PrivacySpent
from skdpsco.privacy import _mechanisms as mechanisms_module
from skdpsco.privacy._accounting import (
    SAMPLER_TOTAL_VARIATION,
    gaussian_delta,
    rdp_gaussian,
)
from skdpsco.privacy._discrete import COUPLING_SIGMA, discrete_gaussian_levels
from skdpsco.privacy._mechanisms import GRID_SLACK, grid_step

#: (sensitivity, sigma, integer): sigma / Delta in {0.5, 1, 4}, grid-aligned and
#: not; ``integer=True`` (counts, released without rounding) at 4 and 0.5.
GAUSSIAN_CASES = [
    (1.0, 0.5, False),
    (1.0, 1.0, False),
    (3.7, 3.7, False),
    (0.3, 1.2, False),
    (1.0, 4.0, True),
    (2.0, 1.0, True),
]
#: (sensitivity, Laplace scale b): epsilon = Delta / b in {4, 1, 0.5, 0.25}.
LAPLACE_CASES = [(1.0, 0.25), (1.0, 1.0), (1.0, 2.0), (0.3, 1.2)]
GAUSSIAN_DELTAS = (1e-2, 1e-3, 1e-5, 1e-8, 1e-10)
#: Epsilons at which the accountant's own GDP profile is compared.
GAUSSIAN_EPSILONS = (0.1, 0.5, 1.0, 2.0, 4.0, 8.0)
#: The claimed epsilon may exceed the exact one by at most this fraction.
EPS_RTOL = 0.01
#: At the claimed epsilon, the true delta is at least the claimed delta over this.
DELTA_FACTOR = 1.5
#: The Laplace record's RDP route (used where it beats Delta / b, at large delta)
#: is a conversion, not an exact curve: its epsilon may exceed the exact one by
#: this factor (observed: 1.47 at delta = 0.1, epsilon 0.25).
LAPLACE_RDP_FACTOR = 2.0
#: Offsets of the first noise-free value, in grid steps past a grid point.
OFFSETS = (0.0, 0.5, -0.5, 0.5 - 2.0**-20, 0.5 + 2.0**-20, 0.25, 1.5, 2.5, -1.5)
#: Each Gaussian level is summed over +-TRUNCATION standard deviations.
TRUNCATION = 12
#: Absolute resolution of the exact Gaussian curves: the mass cut by the
#: truncation (about e^-72 per level) can appear as delta where the claim is
#: below it (a claim of 1e-59 reads as 1e-42).
RESOLUTION = 1e-30


def _slack(eps):
    return (1.0 + math.exp(eps)) * SAMPLER_TOTAL_VARIATION


# ------------------------------------------------------- the law of a release


def _spied_release(mech, value, seed):
    """``mech.release(value)`` with the step, the sampler's parameter and the
    integer noise read off the call."""
    seen = {}
    real_chunks = mechanisms_module._release_in_chunks
    real_gaussian = mechanisms_module.discrete_gaussian
    real_laplace = mechanisms_module.discrete_laplace

    def chunks(value, gamma, noise):
        seen["gamma"] = gamma
        return real_chunks(value, gamma, noise)

    def gaussian(rng, variance, size):
        seen["param"] = variance
        seen["noise"] = real_gaussian(rng, variance, size)
        return seen["noise"].copy()

    def laplace(rng, t, size):
        seen["param"] = t
        seen["noise"] = real_laplace(rng, t, size)
        return seen["noise"].copy()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mechanisms_module, "_release_in_chunks", chunks)
        mp.setattr(mechanisms_module, "discrete_gaussian", gaussian)
        mp.setattr(mechanisms_module, "discrete_laplace", laplace)
        out = mech.release(np.array([value]), np.random.default_rng(seed))
    return out[0], seen["gamma"], seen["param"], int(seen["noise"][0])


def _neighbour(a, delta, sign):
    """``a + sign * delta`` in float64, moved towards ``a`` until the exact distance
    is at most ``delta`` (a valid neighbour at the full sensitivity)."""
    b = a + sign * delta
    while abs(Fraction(b) - Fraction(a)) > Fraction(delta):
        b = math.nextafter(b, a)
    return b


@functools.cache
def _grid_model(kind, sensitivity, scale, integer=False):
    """``(gamma, param, shifts)`` of the 1-D release: the step, the sampler's
    parameter (variance or ``t``) and the set of integer shifts between the
    rounded neighbours over :data:`OFFSETS`, all read off the release, whose
    output is checked to be ``(rint(value / gamma) + Z) gamma`` exactly."""
    if kind == "gaussian":
        mech = GaussianMechanism(sensitivity, scale, integer=integer)
    else:
        mech = LaplaceMechanism(sensitivity, scale)
    norm = "l2" if kind == "gaussian" else "l1"
    gamma = grid_step(min(sensitivity, scale), 1, norm)
    if integer:
        gamma = min(1.0, 2.0 ** math.floor(math.log2(scale * 2.0**-7)))
        param = (scale / gamma) ** 2 + COUPLING_SIGMA**2
    elif kind == "gaussian":
        param = (scale * (1.0 + GRID_SLACK) / gamma) ** 2 + COUPLING_SIGMA**2
    else:
        param = math.ceil(scale * (1.0 + GRID_SLACK) / gamma)
    shifts = set()
    for i, offset in enumerate(OFFSETS):
        # An integer query takes integer values (its neighbour too).
        a = float(round(1000 * offset)) if integer else (1000.0 + offset) * gamma
        steps = []
        for j, value in enumerate((a, _neighbour(a, sensitivity, 1))):
            out, seen_gamma, seen_param, noise = _spied_release(mech, value, 10 * i + j)
            assert seen_gamma == gamma and seen_param == param
            k = int(np.rint(value / gamma))
            assert out == (k + noise) * gamma  # bit for bit
            steps.append(k)
        shifts.add(abs(steps[1] - steps[0]))
        b = _neighbour(a, sensitivity, -1)
        shifts.add(abs(int(np.rint(b / gamma)) - steps[0]))
    # Rounding grows the sensitivity by one step at most (Delta + gamma).
    assert max(shifts) <= math.floor(sensitivity / gamma) + 1
    return gamma, param, tuple(sorted(shifts))


def _discrete_gaussian_pmf(variance):
    """Ideal discrete Gaussian on ``|z| <= TRUNCATION sigma``: ``(lo, pmf)``."""
    h = math.ceil(TRUNCATION * math.sqrt(variance))
    z = np.arange(-h, h + 1, dtype=float)
    log_w = -(z**2) / (2.0 * variance)
    return -h, np.exp(log_w - special.logsumexp(log_w))


@functools.cache
def _sampler_pmf(variance):
    """Exact law of ``discrete_gaussian(rng, variance)``: its plan's levels
    ``Z_0 + 2^k_0 (Z_1 + 2^k_1 (... + Z_L))`` convolved, innermost first."""
    plan, total = discrete_gaussian_levels(variance)
    lo, pmf = _discrete_gaussian_pmf(plan[-1][0])
    for level_variance, k in reversed(plan[:-1]):
        lo_f, fine = _discrete_gaussian_pmf(level_variance)
        step = 2**k
        out = np.zeros(fine.size + step * (pmf.size - 1))
        for j, p in enumerate(pmf):
            out[step * j : step * j + fine.size] += p * fine
        lo, pmf = lo_f + step * lo, out
    return lo, pmf / math.fsum(pmf), total


class _Curve:
    """Exact privacy curve of ``P`` against ``Q`` from their log-pmfs on a common
    window of the grid."""

    def __init__(self, log_p, log_q):
        with np.errstate(invalid="ignore"):
            loss = log_p - log_q
        keep = np.isfinite(log_p)  # points with P = 0 never count
        order = np.argsort(loss[keep], kind="stable")
        self.loss = loss[keep][order]
        p, q = np.exp(log_p[keep][order]), np.exp(log_q[keep][order])
        # Sums over the points of loss above a threshold: suffixes, summed from
        # the largest loss (the smallest masses) down.
        self.tail_p = np.append(np.cumsum(p[::-1])[::-1], 0.0)
        self.tail_q = np.append(np.cumsum(q[::-1])[::-1], 0.0)

    def delta(self, eps):
        """``sum_z max(0, P(z) - e^eps Q(z))``."""
        i = int(np.searchsorted(self.loss, eps, side="right"))
        if i == self.loss.size:
            return 0.0
        return max(0.0, self.tail_p[i] - math.exp(eps) * self.tail_q[i])

    def max_loss(self):
        return float(self.loss[-1])

    def epsilon(self, delta):
        """Smallest ``eps >= 0`` with ``delta(eps) <= delta`` (bisection)."""
        if self.delta(0.0) <= delta:
            return 0.0
        lo, hi = 0.0, 1.0
        while self.delta(hi) > delta:
            lo, hi = hi, 2.0 * hi
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if self.delta(mid) > delta else (lo, mid)
        return hi


def _gaussian_curve(variance, shift):
    lo, pmf, _ = _sampler_pmf(variance)
    with np.errstate(divide="ignore"):
        log_pmf = np.log(pmf)
    pad = np.full(shift, -np.inf)
    return _Curve(np.concatenate([log_pmf, pad]), np.concatenate([pad, log_pmf]))


def _laplace_curve(t, shift):
    # Closed-form pmf on a window of +-40 t (the mass outside is below e^-40).
    z = np.arange(-40 * t, 40 * t + shift + 1, dtype=float)
    log_norm = math.log((1.0 + math.exp(-1.0 / t)) / -math.expm1(-1.0 / t))
    return _Curve(-np.abs(z) / t - log_norm, -np.abs(z - shift) / t - log_norm)


def _claimed_epsilon(mech, delta):
    return PrivacySpent.from_records([mech.record()], delta=delta).epsilon


# ------------------------------------------------------------------ the model


def _compare_at(mech, curves, worst, delta):
    """The accountant's epsilon at ``delta``, the true delta there (worst grid
    placement) and a report line with the true epsilon at ``delta``."""
    eps = _claimed_epsilon(mech, delta)
    true_delta = max(c.delta(eps) for c in curves)
    true_eps = worst.epsilon(delta)
    row = (
        f"delta {delta:g}: eps claimed {eps:.5f} true {true_eps:.5f}; "
        f"true delta at claimed eps {true_delta:.4g}"
    )
    return eps, true_delta, true_eps, row


@pytest.mark.parametrize("sensitivity, sigma, integer", GAUSSIAN_CASES)
def test_gaussian_release_law_and_worst_shift(sensitivity, sigma, integer):
    gamma, variance, shifts = _grid_model("gaussian", sensitivity, sigma, integer)
    ratio = sensitivity / gamma
    # The offsets reach the worst case of rounding with ties to even: one step
    # more than Delta / gamma, except for an even integer Delta / gamma; no
    # rounding for integer queries.
    even = ratio == int(ratio) and int(ratio) % 2 == 0
    if integer:
        assert shifts == (ratio,)
    else:
        assert max(shifts) == (int(ratio) if even else math.floor(ratio) + 1)
    # The sampler's plan is a discrete Gaussian of at least the variance asked.
    lo, pmf, total = _sampler_pmf(variance)
    z = np.arange(lo, lo + pmf.size, dtype=float)
    assert variance <= total <= 1.0055 * variance
    assert math.fsum(pmf * z) == pytest.approx(0.0, abs=1e-6)
    assert math.fsum(pmf * z**2) == pytest.approx(total, rel=1e-9)
    # ... and within float resolution of the ideal one of the summed variance.
    log_w = -(z**2) / (2.0 * total)
    ideal = np.exp(log_w - special.logsumexp(log_w))
    assert 0.5 * np.abs(pmf - ideal).sum() < 1e-12


@pytest.mark.parametrize("sensitivity, scale", LAPLACE_CASES)
def test_laplace_release_law_and_worst_shift(sensitivity, scale):
    gamma, t, shifts = _grid_model("laplace", sensitivity, scale)
    ratio = sensitivity / gamma
    even = ratio == int(ratio) and int(ratio) % 2 == 0
    assert max(shifts) == (int(ratio) if even else math.floor(ratio) + 1)
    assert t >= scale / gamma


# -------------------------------------------------- the curve against the claim


@pytest.mark.parametrize("sensitivity, sigma, integer", GAUSSIAN_CASES)
def test_gaussian_grid_curve_is_within_and_close_to_the_claim(
    sensitivity, sigma, integer
):
    mech = GaussianMechanism(sensitivity, sigma, integer=integer)
    _, variance, shifts = _grid_model("gaussian", sensitivity, sigma, integer)
    curves = [_gaussian_curve(variance, s) for s in shifts]
    worst = _gaussian_curve(variance, max(shifts))
    rows = []
    for delta in GAUSSIAN_DELTAS:
        eps, true_delta, true_eps, row = _compare_at(mech, curves, worst, delta)
        rows.append(row)
        # Sound: the accountant evaluated the ideal curve at delta - slack.
        assert true_delta <= delta, rows[-1]
        # Tight: in epsilon and in delta.
        assert true_eps >= (1.0 - EPS_RTOL) * eps, rows[-1]
        assert true_delta >= delta / DELTA_FACTOR, rows[-1]
    mu = sensitivity / sigma
    for eps in GAUSSIAN_EPSILONS:
        claim = gaussian_delta(eps, mu)
        true_delta = max(c.delta(eps) for c in curves)
        rows.append(f"eps {eps:g}: claimed delta {claim:.4g} true {true_delta:.4g}")
        assert true_delta <= claim + _slack(eps) + RESOLUTION, rows[-1]
        if claim > 1e-12:
            assert true_delta >= claim / DELTA_FACTOR, rows[-1]
    print("\n".join(rows))


@pytest.mark.parametrize("sensitivity, scale", LAPLACE_CASES)
def test_laplace_grid_curve_is_within_and_close_to_the_claim(sensitivity, scale):
    mech = LaplaceMechanism(sensitivity, scale)
    _, t, shifts = _grid_model("laplace", sensitivity, scale)
    curves = [_laplace_curve(t, s) for s in shifts]
    worst = _laplace_curve(t, max(shifts))
    # Pure DP: the largest privacy loss is shift / t, at most Delta / b.
    eps = _claimed_epsilon(mech, 0.0)
    assert eps == pytest.approx(sensitivity / scale, rel=1e-12)
    true_eps = max(c.max_loss() for c in curves)
    assert true_eps == pytest.approx(max(shifts) / t, rel=1e-9)
    assert true_eps <= eps * (1.0 + 1e-12)
    assert max(c.delta(eps) for c in curves) == 0.0
    assert true_eps >= (1.0 - EPS_RTOL) * eps
    rows = [f"pure: eps claimed {eps:.6f} true {true_eps:.6f}"]
    # Approximate DP: at large delta the accountant's RDP route claims less than
    # Delta / b; at small delta the claim is Delta / b, and the exact epsilon is
    # below it by about 2 delta only (Laplace: delta(eps) ~ 1 - e^((eps - eps0)/2)).
    for delta in (0.3, 0.1, 1e-3, 1e-5):
        eps, true_delta, true_eps, row = _compare_at(mech, curves, worst, delta)
        rows.append(row)
        assert true_delta <= delta + _slack(eps), rows[-1]
        if eps < sensitivity / scale:
            assert true_eps >= eps / LAPLACE_RDP_FACTOR, rows[-1]
        else:
            assert true_eps >= (1.0 - EPS_RTOL) * eps, rows[-1]
    print("\n".join(rows))


# ------------------------------------------------------ Renyi divergence (CKS)


def _discrete_gaussian_renyi(alpha, shift, variance):
    """``D_alpha(N_Z(0, s^2) || N_Z(shift, s^2))`` by summation, from its
    definition ``log sum_z P(z)^alpha Q(z)^(1 - alpha) / (alpha - 1)``."""
    sigma = math.sqrt(variance)
    # The summand peaks near z = -(alpha - 1) shift: cover it and the mass of P.
    lo = math.floor(min(-(alpha - 1) * shift, 0) - 40 * sigma) - 1
    hi = math.ceil(max(-(alpha - 1) * shift, shift) + 40 * sigma) + 1
    z = np.arange(lo, hi + 1, dtype=float)
    log_norm = special.logsumexp(-(z**2) / (2 * variance))
    log_p = -(z**2) / (2 * variance) - log_norm
    log_q = -((z - shift) ** 2) / (2 * variance) - log_norm
    return special.logsumexp(alpha * log_p + (1 - alpha) * log_q) / (alpha - 1)


@pytest.mark.parametrize("variance", [0.25, 0.5, 2.0, 1e6])
@pytest.mark.parametrize("shift", [1, 3])
def test_discrete_gaussian_renyi_divergence_matches_the_zcdp_closed_form(
    variance, shift
):
    sigma = math.sqrt(variance)
    # (alpha - 1) shift an integer: the shifted theta sum equals the unshifted
    # one and the divergence is exactly alpha shift^2 / (2 sigma^2), which is
    # the library's continuous-Gaussian RDP at noise multiplier sigma / shift.
    integer_orders = np.array([2.0, 3.0, 10.0, 33.0])
    closed = rdp_gaussian(sigma / shift, integer_orders)
    summed = [_discrete_gaussian_renyi(a, shift, variance) for a in integer_orders]
    # (float64 exponents of size alpha z^2 / (2 sigma^2) leave ~1e-13 absolute.)
    np.testing.assert_allclose(summed, closed, rtol=1e-11, atol=1e-12)
    # Otherwise strictly below: by about e^(-2 pi^2 sigma^2) (Poisson summation),
    # visible at sigma^2 <= 1/2, beyond float64 resolution above.
    other_orders = np.array([1.25, 1.5, 2.7, 7.3])
    closed = rdp_gaussian(sigma / shift, other_orders)
    summed = np.array(
        [_discrete_gaussian_renyi(a, shift, variance) for a in other_orders]
    )
    assert np.all(summed <= closed + 1e-12), (summed, closed)
    if variance <= 0.5:
        assert np.all(closed - summed > 1e-6), (summed, closed)
    else:
        np.testing.assert_allclose(summed, closed, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("sensitivity, sigma, integer", GAUSSIAN_CASES)
def test_ideal_grid_gaussian_renyi_is_within_the_recorded_rho(
    sensitivity, sigma, integer
):
    """The discrete Gaussian of the release (ideal, untruncated) at the worst shift
    against the record's zCDP: ``D_alpha <= alpha rho`` and close to it."""
    mech = GaussianMechanism(sensitivity, sigma, integer=integer)
    rho = PrivacySpent.from_records([mech.record()], delta=1e-5).rho
    assert rho == pytest.approx(sensitivity**2 / (2 * sigma**2), rel=1e-12)
    _, variance, shifts = _grid_model("gaussian", sensitivity, sigma, integer)
    total = discrete_gaussian_levels(variance)[1]
    for alpha in (1.5, 2.0, 8.0, 32.0):
        d = _discrete_gaussian_renyi(alpha, max(shifts), total)
        assert d <= alpha * rho
        assert d >= (1.0 - 2 * EPS_RTOL) * alpha * rho


# ------------------------------------------------ an independent implementation


@pytest.mark.parametrize(
    "sensitivity, sigma, integer",
    [c for c in GAUSSIAN_CASES if not c[2]] + [GAUSSIAN_CASES[-1]],
)
def test_exact_curves_agree_with_dp_accounting(sensitivity, sigma, integer):
    """Google's dp_accounting computes the same hockey-stick divergences for the
    ideal discrete Gaussian / Laplace (CKS 2020) at the worst shift."""
    pld = pytest.importorskip("dp_accounting.pld.privacy_loss_mechanism")
    _, variance, shifts = _grid_model("gaussian", sensitivity, sigma, integer)
    total = discrete_gaussian_levels(variance)[1]
    theirs = pld.DiscreteGaussianPrivacyLoss(
        math.sqrt(total), sensitivity=int(max(shifts))
    )
    ours = _gaussian_curve(variance, max(shifts))
    mech = GaussianMechanism(sensitivity, sigma, integer=integer)
    for delta in GAUSSIAN_DELTAS:
        eps = _claimed_epsilon(mech, delta)
        assert ours.delta(eps) == pytest.approx(
            theirs.get_delta_for_epsilon(eps), rel=1e-6
        )
    # The Laplace case with the same ratio of sensitivity to scale.
    _, t, shifts = _grid_model("laplace", sensitivity, sigma)
    theirs = pld.DiscreteLaplacePrivacyLoss(1.0 / t, sensitivity=int(max(shifts)))
    ours = _laplace_curve(t, max(shifts))
    for eps in (0.0, 0.1, 0.5 * max(shifts) / t, 0.99 * max(shifts) / t):
        assert ours.delta(eps) == pytest.approx(
            theirs.get_delta_for_epsilon(eps), rel=1e-6, abs=1e-15
        )
