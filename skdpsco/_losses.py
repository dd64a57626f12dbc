"""Losses of linear models as functions of the linear prediction ``z = x~ . w~``.

For a linear model the per-sample gradient is ``dloss/dz (z_i, y_i)`` times the row
``x~_i`` (an outer product for the multinomial loss), so solvers only ever need the
per-sample derivative with respect to ``z``: an ``(n,)`` or ``(n, K)`` array, never an
``(n, d)`` one. The constants below bound that derivative and its derivative; they
are properties of the loss, not of the data.
"""

import numpy as np
from scipy import special

from .utils._validation import check_real

__all__ = ["HuberLoss", "LogisticLoss", "MultinomialLoss", "SquaredLoss", "get_loss"]


class SquaredLoss:
    """``l(z, y) = (z - y)^2 / 2``; derivative ``z - y`` (unbounded), curvature 1."""

    name = "squared"
    is_classifier = False
    lipschitz = np.inf
    smoothness = 1.0

    def n_outputs(self, n_classes=None):
        return 1

    def value(self, z, y):
        with np.errstate(over="ignore"):
            return 0.5 * (z - y) ** 2

    def derivative(self, z, y):
        # |z|, |y| can each be near the float limit; the overflow to +-inf is then
        # clipped to norm C by the oracle (clip_coefficients), never used raw.
        with np.errstate(over="ignore"):
            return z - y


class HuberLoss:
    """Huber loss with threshold ``epsilon_huber``: derivative ``clip(z - y, -c, c)``.

    The derivative is bounded by ``c`` and its curvature by 1.
    """

    name = "huber"
    is_classifier = False
    smoothness = 1.0

    def __init__(self, threshold=1.35):
        self.threshold = check_real(
            threshold, "Huber threshold", low=0.0, low_open=True, allow_inf=True
        )
        self.lipschitz = self.threshold

    def n_outputs(self, n_classes=None):
        return 1

    def value(self, z, y):
        c = self.threshold
        # |z - y| of an extreme record may pass the float range (inf, on the linear
        # branch). np.where evaluates both branches, so the quadratic one squares
        # min(r, c) (r**2 overflowed for r > 1e154, warning on that neighbour only).
        with np.errstate(over="ignore"):
            r = np.abs(z - y)
            return np.where(r <= c, 0.5 * np.minimum(r, c) ** 2, c * r - 0.5 * c**2)

    def derivative(self, z, y):
        with np.errstate(over="ignore"):
            return np.clip(z - y, -self.threshold, self.threshold)


class LogisticLoss:
    """Binary logistic loss with labels ``y`` in {0, 1}: ``log(1 + e^z) - y z``.

    Derivative ``sigmoid(z) - y``, bounded by 1 in absolute value; curvature <= 1/4.
    """

    name = "logistic"
    is_classifier = True
    lipschitz = 1.0
    smoothness = 0.25

    def n_outputs(self, n_classes=2):
        return 1

    def value(self, z, y):
        # log(1 + e^z) - y z = -log_expit(z) + (1 - y) z, stable for large |z|.
        return -special.log_expit(z) + (1.0 - y) * z

    def derivative(self, z, y):
        return special.expit(z) - y


class MultinomialLoss:
    """Multinomial (softmax cross-entropy) loss, ``y`` in {0, ..., K-1}.

    ``z`` has shape ``(n, K)``; the derivative is ``softmax(z) - onehot(y)``, whose
    l2 norm is at most sqrt(2); the Hessian's largest eigenvalue is at most 1/2.
    """

    name = "multinomial"
    is_classifier = True
    lipschitz = np.sqrt(2.0)
    smoothness = 0.5

    def n_outputs(self, n_classes=2):
        return int(n_classes)

    def value(self, z, y):
        y = np.asarray(y, dtype=np.intp)
        # exp of a class score far below the top one underflows to 0: exact
        # enough, and not to be reported for one record only.
        with np.errstate(under="ignore"):
            return special.logsumexp(z, axis=1) - z[np.arange(z.shape[0]), y]

    def derivative(self, z, y):
        y = np.asarray(y, dtype=np.intp)
        with np.errstate(under="ignore"):  # as in value()
            p = special.softmax(z, axis=1)
        p[np.arange(z.shape[0]), y] -= 1.0
        return p


def get_loss(name, **params):
    """Loss by name: ``"squared"``, ``"huber"``, ``"logistic"``, ``"multinomial"``."""
    losses = {
        "squared": SquaredLoss,
        "huber": HuberLoss,
        "logistic": LogisticLoss,
        "multinomial": MultinomialLoss,
    }
    if name not in losses:
        raise ValueError(f"Unknown loss {name!r}; choose from {sorted(losses)}.")
    return losses[name](**params)
