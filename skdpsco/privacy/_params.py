"""The shared privacy-parameter validation layer.

Every estimator merges :data:`PRIVACY_PARAMETER_CONSTRAINTS` into its
``_parameter_constraints`` (checked by scikit-learn's declarative validation before
``fit`` runs), and calls :func:`check_privacy_params` at the start of ``fit`` for the
checks that need the data size or the chosen algorithm.
"""

import contextlib
import contextvars
import math
import warnings
from numbers import Integral, Real

import numpy as np

from ..exceptions import PrivacyBudgetError, PrivacyLeakWarning
from ..utils._compat import Interval
from ._budget import PrivacyBudget

__all__ = [
    "PRIVACY_PARAMETER_CONSTRAINTS",
    "PrivacyBudget",
    "check_privacy_params",
]

_NON_PRIVATE = contextvars.ContextVar("skdpsco_non_private_testing", default=False)


@contextlib.contextmanager
def _non_private_testing_mode():
    """Hidden testing switch: inside this block ``epsilon=np.inf`` is accepted.

    With ``epsilon=inf`` every noise scale is 0 and ``privacy_spent_.epsilon`` is
    ``inf``; tests use it to check that each algorithm converges to the non-private
    scikit-learn solution. It is deliberately not public API.
    """
    token = _NON_PRIVATE.set(True)
    try:
        yield
    finally:
        _NON_PRIVATE.reset(token)


def _is_real(val):
    return (
        isinstance(val, Real | np.floating | np.integer)
        and not isinstance(val, bool | np.bool_)
        and not math.isnan(val)
    )


# The constraints below subclass scikit-learn's Interval because its declarative
# validation only accepts its own constraint classes; each narrows Interval to reject
# bools (which Python counts as ints) and, where a bound must be finite, infinity.


#: Largest epsilon accepted (public). Above it a fit protects nothing, and the
#: noise scales fall below what the grid samplers resolve and the accounting's
#: floating point holds (epsilon^2 and mu^2 overflow near 1e154): use the
#: non-private estimator instead.
MAX_EPSILON = 1e6


class _Epsilon(Interval):
    """A real epsilon in (0, MAX_EPSILON]: rejects NaN, inf, bools and strings."""

    def __init__(self):
        super().__init__(Real, 0, MAX_EPSILON, closed="right")

    def is_satisfied_by(self, val):
        if not _is_real(val) or not val > 0:
            return False
        return val <= MAX_EPSILON or (math.isinf(val) and _NON_PRIVATE.get())

    def __str__(self):
        return f"a real number in (0, {MAX_EPSILON:g}] (not a bool)"


class _Delta(Interval):
    """A real delta in [0, 1): rejects NaN, bools and strings."""

    def __init__(self):
        super().__init__(Real, 0, 1, closed="left")

    def is_satisfied_by(self, val):
        return _is_real(val) and 0 <= val < 1

    def __str__(self):
        return "a real number in [0, 1) (not a bool)"


#: Constraints shared by every skdpsco estimator (merged into _parameter_constraints).
PRIVACY_PARAMETER_CONSTRAINTS = {
    "epsilon": [_Epsilon()],
    "delta": [_Delta()],
    "random_state": ["random_state", np.random.Generator],
}

#: Constraints for the optimisation parameters every estimator shares.
COMMON_FIT_CONSTRAINTS = {
    "fit_intercept": ["boolean"],
    "max_iter": [Interval(Integral, 1, None, closed="left")],
}


def check_privacy_params(
    estimator, n_samples, *, requires_delta=True, min_samples=1, method=None
):
    """Cross-parameter and data-size privacy checks at the start of ``fit``.

    Parameters
    ----------
    estimator : estimator
        Provides ``epsilon`` and ``delta`` (already validated by the constraints).
    n_samples : int
        Number of records, public under replace-one neighbours.
    requires_delta : bool, default=True
        The method adds Gaussian noise, so ``delta = 0`` is impossible.
    min_samples : int, default=1
        The smallest ``n_samples`` the method can run with at this budget; a smaller
        one raises :class:`~skdpsco.exceptions.PrivacyBudgetError`.
    method : str, optional
        Method name used in the messages.

    Returns
    -------
    PrivacyBudget

    Raises
    ------
    ValueError
        ``delta = 0`` for a method that needs ``delta > 0``.
    PrivacyBudgetError
        Too few samples for the method at this budget.

    Warns
    -----
    PrivacyLeakWarning
        ``delta >= 1 / n_samples``: a mechanism could then publish a whole record
        with probability ``delta`` and still meet the definition.
    """
    name = type(estimator).__name__
    what = f"{name}(algorithm={method!r})" if method else name
    epsilon = float(estimator.epsilon)
    delta = float(estimator.delta)
    if not _Epsilon().is_satisfied_by(epsilon):
        raise ValueError(
            f"{name}: epsilon must be a real number in (0, {MAX_EPSILON:g}], got "
            f"{epsilon!r} (above {MAX_EPSILON:g} nothing is protected: use the "
            "non-private estimator)."
        )
    if requires_delta and delta == 0 and math.isfinite(epsilon):
        raise ValueError(
            f"{what} adds Gaussian noise, which cannot give pure DP: the 'delta' "
            "parameter must be > 0 (for example 1e-5), got delta=0."
        )
    if n_samples < min_samples:
        raise PrivacyBudgetError(
            f"{what} needs at least {min_samples} samples at epsilon={epsilon:g}, "
            f"delta={delta:g}; got n_samples={n_samples}."
        )
    if delta > 0 and delta * n_samples >= 1:
        warnings.warn(
            f"{name}: delta={delta:g} >= 1/n_samples={1 / n_samples:.3g}. Such a "
            "delta allows publishing a whole record with probability delta; choose "
            f"delta well below 1/n_samples, e.g. delta={suggested_delta(n_samples):g}.",
            PrivacyLeakWarning,
            stacklevel=3,
        )
    return PrivacyBudget(epsilon, delta, int(n_samples))


def suggested_delta(n_samples):
    """The largest power of ten at most ``1 / (10 n)``: a public function of ``n``
    an order of magnitude below ``1 / n`` (a mechanism may then fail for one
    record with probability ``n delta <= 0.1`` in all)."""
    return 10.0 ** math.floor(math.log10(1.0 / (10.0 * n_samples)))


class PositiveFinite(Interval):
    """A finite real number > 0 (rejects NaN, inf, bools and strings).

    For public data bounds (clip norms, radii, moment bounds): an infinite bound
    would silently turn a mechanism into a non-private one.
    """

    def __init__(self):
        super().__init__(Real, 0, None, closed="neither")

    def is_satisfied_by(self, val):
        return _is_real(val) and val > 0 and math.isfinite(val)

    def __str__(self):
        return "a finite real number > 0"


#: Range of a public data bound (:class:`PublicBound`).
PUBLIC_BOUND_RANGE = (2.0**-256, 2.0**256)


class PublicBound(PositiveFinite):
    """A public data bound (a clip norm, a radius, a truncation, a moment or row
    bound) in ``[2^-256, 2^256]``.

    Sensitivities and noise scales are products and quotients of such bounds with
    ``n``, ``d`` and the budget; outside this range they can leave the normal
    floats, and a sensitivity that underflows to 0 calls for no noise (measured:
    a truncation of ``5e-324`` released exact batch means). In standardised units
    (the default private scaling) the useful bounds are near 1.
    """

    def is_satisfied_by(self, val):
        low, high = PUBLIC_BOUND_RANGE
        return _is_real(val) and low <= val <= high

    def __str__(self):
        return "a real number in [2^-256, 2^256] (a public data bound)"


__all__ += [
    "COMMON_FIT_CONSTRAINTS",
    "PUBLIC_BOUND_RANGE",
    "PositiveFinite",
    "PublicBound",
]
