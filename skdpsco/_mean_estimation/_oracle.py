"""The contract of the full-batch gradient-mean oracles."""

from ..privacy._mechanisms import LaplaceMechanism

__all__ = ["GradientMeanOracle", "LossDerivative", "SingleMechanismOracle"]


class LossDerivative:
    """``derivative(Z, rows) = loss.derivative(Z, y[rows])``, the derivative a
    solver hands its oracle, with its ``loss`` and targets ``y`` readable: an
    oracle that sums exactly chunk by chunk (a dask design) builds a picklable
    row-wise map from them instead of closing over ``n``-long arrays.

    Parameters
    ----------
    loss : loss object from :mod:`skdpsco._losses`
    y : ndarray or dask array of shape (n,)
    """

    def __init__(self, loss, y):
        self.loss = loss
        self.y = y

    def __call__(self, Z, rows):
        return self.loss.derivative(Z, self.y[rows])


class GradientMeanOracle:
    """Base of the oracles that gradient descent calls once per iteration.

    Subclasses implement ``estimate(design, U, rng[, sample_weight])`` from the
    per-sample derivatives ``U``; :meth:`estimate_at` is what the solver calls.
    An oracle that can fuse the predictions with its aggregate (one read of the
    data per iteration) overrides :meth:`estimate_at`.
    """

    def estimate_at(self, design, W, derivative, rng, sample_weight=None):
        """Private estimate of the gradient mean of the data term at ``W``.

        Parameters
        ----------
        design : LinearDesign
        W : ndarray of shape (dim,) or (dim, K)
            The current (public) iterate.
        derivative : callable
            ``derivative(Z, rows) -> U``: the loss derivatives of the rows
            ``rows`` (a slice) at their predictions ``Z``, row-wise.
        rng : numpy.random.Generator
        sample_weight : ndarray of shape (n,) or None
            Per-record weights in ``[0, 1]`` (see the solver).
        """
        U = derivative(design.predict(W), slice(None))
        if sample_weight is None:
            return self.estimate(design, U, rng)
        return self.estimate(design, U, rng, sample_weight=sample_weight)


class SingleMechanismOracle:
    """Mixin of the oracles whose every call is one release of the mechanism
    ``mechanism_`` that :meth:`calibrate` fixes: its record is the call's ledger
    entry, and its scale the call's noise."""

    @property
    def noise_scale(self):
        """Public noise scale of one call, per coordinate of the statistic the
        mechanism releases: the Gaussian standard deviation, or the Laplace scale.
        Fixed by :meth:`calibrate` from public numbers."""
        mech = self.mechanism_
        return mech.scale if isinstance(mech, LaplaceMechanism) else mech.sigma

    def records(self, count):
        """Ledger records for ``count`` calls."""
        return [self.mechanism_.record(count)]
