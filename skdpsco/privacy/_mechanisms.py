"""Noise mechanisms: the only place in skdpsco where noise is drawn (design.md §4.4).

Every function takes an explicit :class:`numpy.random.Generator`. A mechanism object
pairs a noise draw with the ledger record that the accountant composes, so that what
was released and what was accounted can never drift apart.
"""

import math

import numpy as np

from ._ledger import MechanismRecord

__all__ = [
    "GaussianMechanism",
    "LaplaceMechanism",
    "arsinh_normal_noise",
    "gaussian_noise",
    "laplace_noise",
    "sigma_for_zcdp",
]


def _check_rng(rng):
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"noise needs an explicit numpy.random.Generator, got {type(rng).__name__}."
        )


def gaussian_noise(rng, sigma, size=None):
    """Draw ``N(0, sigma^2)`` noise of the given size (``sigma = 0`` gives zeros)."""
    _check_rng(rng)
    if not (sigma >= 0 and math.isfinite(sigma)):
        raise ValueError(f"sigma must be finite and >= 0, got {sigma!r}.")
    if sigma == 0:
        return np.zeros(size) if size is not None else 0.0
    return rng.normal(0.0, sigma, size=size)


def laplace_noise(rng, scale, size=None):
    """Draw Laplace(0, ``scale``) noise of the given size (``scale=0`` gives zeros)."""
    _check_rng(rng)
    if not (scale >= 0 and math.isfinite(scale)):
        raise ValueError(f"scale must be finite and >= 0, got {scale!r}.")
    if scale == 0:
        return np.zeros(size) if size is not None else 0.0
    return rng.laplace(0.0, scale, size=size)


def arsinh_normal_noise(rng, size=None):
    """Draw arsinh-normal noise ``Z = sinh(Y)``, ``Y ~ N(0, 1)`` i.i.d.

    The noise distribution of Bun & Steinke's (2019) arsinh-normal mechanism (with
    their shape parameter ``sigma = 1``): released with a ``t``-smooth upper bound
    ``S`` on the local sensitivity as ``f(x) + (S(x) / s) Z``. ``Z`` is symmetric,
    ``E Z = 0`` and ``Var Z = (e^2 - 1) / 2`` (std ``~1.787``); its tails are
    log-normal, heavier than Gaussian, which is what tolerates the multiplicative
    change ``e^t`` of the scale between neighbours. The privacy statement belongs
    to the caller (it depends on ``t``, ``s`` and ``S``).

    Parameters
    ----------
    rng : numpy.random.Generator
    size : int or tuple of int, optional

    Returns
    -------
    float or ndarray

    References
    ----------
    .. [1] Bun, M. and Steinke, T. (2019). Average-case averages: private
       algorithms for smooth sensitivity and mean estimation. NeurIPS.
    """
    _check_rng(rng)
    return np.sinh(rng.standard_normal(size))


def sigma_for_zcdp(sensitivity, rho):
    """Gaussian std giving ``rho``-zCDP at l2-sensitivity ``sensitivity``.

    ``sigma = Delta / sqrt(2 rho)`` (Bun & Steinke 2016, Prop 1.6). ``rho = inf``
    (the hidden non-private testing mode) gives ``sigma = 0``.
    """
    if not (sensitivity >= 0 and math.isfinite(sensitivity)):
        raise ValueError(f"sensitivity must be finite and >= 0, got {sensitivity!r}.")
    if not rho > 0:
        raise ValueError(f"rho must be > 0, got {rho!r}.")
    if math.isinf(rho):
        return 0.0
    return sensitivity / math.sqrt(2.0 * rho)


class GaussianMechanism:
    """Release ``value + N(0, sigma^2 I)`` for a query of l2-sensitivity ``Delta``.

    Parameters
    ----------
    sensitivity : float
        l2-sensitivity of the query under replace-one neighbours; the caller states
        the argument (lemma) at the place it constructs the mechanism.
    sigma : float
        Noise standard deviation per coordinate.
    name : str
        Ledger label.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco.privacy import GaussianMechanism
    >>> mech = GaussianMechanism.from_zcdp(sensitivity=2.0, rho=0.5, name="mean")
    >>> mech.sigma
    2.0
    >>> out = mech.release(np.zeros(3), np.random.default_rng(0))
    >>> out.shape
    (3,)
    """

    def __init__(self, sensitivity, sigma, name="gaussian"):
        if not (sensitivity >= 0 and math.isfinite(sensitivity)):
            raise ValueError(
                f"sensitivity must be finite and >= 0, got {sensitivity!r}."
            )
        if not (sigma >= 0 and math.isfinite(sigma)):
            raise ValueError(f"sigma must be finite and >= 0, got {sigma!r}.")
        self.sensitivity = float(sensitivity)
        self.sigma = float(sigma)
        self.name = name

    @classmethod
    def from_zcdp(cls, sensitivity, rho, name="gaussian"):
        """The Gaussian mechanism that costs exactly ``rho`` zCDP."""
        return cls(sensitivity, sigma_for_zcdp(sensitivity, rho), name)

    @property
    def rho(self):
        """zCDP cost of one release, ``Delta^2 / (2 sigma^2)``."""
        if self.sensitivity == 0:
            return 0.0
        return (
            math.inf if self.sigma == 0 else self.sensitivity**2 / (2 * self.sigma**2)
        )

    def release(self, value, rng):
        """Return ``value`` plus Gaussian noise of std ``sigma`` (same shape)."""
        value = np.asarray(value, dtype=float)
        return value + gaussian_noise(rng, self.sigma, value.shape)

    def record(self, count=1):
        """Ledger record for ``count`` releases of this mechanism."""
        return MechanismRecord(
            self.name,
            "gaussian",
            count=count,
            sensitivity=self.sensitivity,
            scale=self.sigma,
        )


class LaplaceMechanism:
    """Release ``value + Laplace(0, b)`` per coordinate, l1-sensitivity ``sensitivity``.

    Pure ``epsilon``-DP with ``epsilon = sensitivity / b`` (Dwork et al. 2006).

    Examples
    --------
    >>> from skdpsco.privacy import LaplaceMechanism
    >>> LaplaceMechanism.from_epsilon(sensitivity=1.0, epsilon=0.5).scale
    2.0
    """

    def __init__(self, sensitivity, scale, name="laplace"):
        if not (sensitivity >= 0 and math.isfinite(sensitivity)):
            raise ValueError(
                f"sensitivity must be finite and >= 0, got {sensitivity!r}."
            )
        if not (scale >= 0 and math.isfinite(scale)):
            raise ValueError(f"scale must be finite and >= 0, got {scale!r}.")
        self.sensitivity = float(sensitivity)
        self.scale = float(scale)
        self.name = name

    @classmethod
    def from_epsilon(cls, sensitivity, epsilon, name="laplace"):
        """The Laplace mechanism that is exactly ``epsilon``-DP."""
        if not epsilon > 0:
            raise ValueError(f"epsilon must be > 0, got {epsilon!r}.")
        scale = 0.0 if math.isinf(epsilon) else sensitivity / epsilon
        return cls(sensitivity, scale, name)

    @property
    def epsilon(self):
        if self.sensitivity == 0:
            return 0.0
        return math.inf if self.scale == 0 else self.sensitivity / self.scale

    def release(self, value, rng):
        value = np.asarray(value, dtype=float)
        return value + laplace_noise(rng, self.scale, value.shape)

    def record(self, count=1):
        return MechanismRecord(
            self.name,
            "laplace",
            count=count,
            sensitivity=self.sensitivity,
            scale=self.scale,
            epsilon=self.epsilon,
        )
