"""The contract of the full-batch gradient-mean oracles."""

__all__ = ["GradientMeanOracle"]


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
            Public per-record weights in ``[0, 1]`` (see the solver).
        """
        U = derivative(design.predict(W), slice(None))
        if sample_weight is None:
            return self.estimate(design, U, rng)
        return self.estimate(design, U, rng, sample_weight=sample_weight)
