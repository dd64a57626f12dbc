"""Clipped mean + Gaussian noise: the baseline DP gradient-mean oracle."""

import numpy as np

from ..privacy._mechanisms import GaussianMechanism
from ..utils._validation import check_real
from ._oracle import GradientMeanOracle, SingleMechanismOracle

__all__ = ["ClippedMeanOracle", "clip_coefficients", "shrink_coefficients"]


def clip_coefficients(U, row_norms, clip_norm):
    """Per-sample coefficients ``c_i`` with ``||c_i (outer) x~_i|| <= clip_norm``.

    The per-sample gradient ``u_i (outer) x~_i`` has l2 (Frobenius) norm
    ``||u_i|| ||x~_i||``; clipping it to ``clip_norm`` multiplies ``u_i`` by
    ``min(1, clip_norm / (||u_i|| ||x~_i||))``. For scalar ``u_i`` this is evaluated as
    ``sign(u_i) min(|u_i|, clip_norm / ||x~_i||)``, which stays finite for infinite
    ``u_i`` or ``||x~_i||`` (an extreme record contributes a gradient of norm exactly
    ``clip_norm``, never NaN). NaN coefficients become 0.

    Parameters
    ----------
    U : ndarray of shape (n,) or (n, K)
    row_norms : ndarray of shape (n,)
    clip_norm : float

    Returns
    -------
    ndarray of the shape of ``U``
    """
    U = np.nan_to_num(np.asarray(U, dtype=float), nan=0.0)
    return shrink_coefficients(
        U, row_norms, clip_norm, lambda unit: np.linalg.norm(unit, axis=1)
    )


def shrink_coefficients(U, row_norms, bound, unit_norms):
    """``u_i min(1, bound / (||u_i|| r_i))``, ``r_i = row_norms[i]``, for NaN-free
    ``U``: the product of the two norms brought down to ``bound``, overflow-safe.

    ``unit_norms(V)`` gives the row norms of ``V = U / max_k |u_ik|`` (entries in
    ``[-1, 1]``, so no overflow); scaled back by the row maxima they are the
    ``||u_i||`` (l2 for the clipped mean, l1 for the sparse set). Scalar ``u_i``
    is clipped to ``[-bound / r_i, bound / r_i]``; a zero ``r_i`` leaves ``u_i``,
    an infinite one gives 0.
    """
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        cap = np.where(row_norms > 0, bound / row_norms, np.inf)
        if U.ndim == 1:
            return np.sign(U) * np.minimum(np.abs(U), cap)
        scale = np.max(np.abs(U), axis=1)
        safe = np.where(scale > 0, scale, 1.0)
        unorm = safe * unit_norms(U / safe[:, None])  # ||u_i||, overflow-safe
        factor = np.where(unorm > cap, cap / np.where(unorm > 0, unorm, 1.0), 1.0)
        return U * factor[:, None]


class ClippedMeanOracle(SingleMechanismOracle, GradientMeanOracle):
    """Per-sample l2 clipping to ``clip_norm``, mean over public ``n``, Gaussian noise.

    Sensitivity (replace-one, ``n`` public): the clipped mean is
    ``(1/n) sum_i clip(g_i)`` with every ``||clip(g_i)|| <= C``; replacing one record
    changes one summand, so the l2-sensitivity is ``2 C / n`` (the two clipped
    gradients lie in the same C-ball). This holds whatever the data: no bound is
    assumed, the clipping enforces it.

    Parameters
    ----------
    clip_norm : float
        ``C``, the public l2 bound on a per-sample gradient.

    References
    ----------
    .. [1] Abadi, M. et al. (2016). Deep learning with differential privacy. CCS.
    .. [2] Kamath, G., Liu, X. and Zhang, H. (2021). Improved rates for DP-SCO with
       heavy-tailed data. arXiv:2106.01336 (DP-GD with fixed-norm clipping is their
       baseline; Algorithm 1 is the SCOF framework this oracle plugs into).
    """

    #: Every mechanism is Gaussian: exact GDP composition applies.
    all_gaussian = True

    def __init__(self, clip_norm=1.0):
        self.clip_norm = check_real(clip_norm, "clip_norm", low=0, low_open=True)

    def calibrate(self, n_samples, rho, shape=None):
        """Fix the noise from public values.

        Parameters
        ----------
        n_samples : int
            Public ``n``.
        rho : float
            zCDP budget of one call (``inf`` in the non-private testing mode).
        shape : tuple, optional
            Shape of the parameter (and of the estimate); unused here, since the
            clipped mean's noise does not depend on the dimension.
        """
        sensitivity = 2.0 * self.clip_norm / n_samples  # replace-one, see class doc
        self.mechanism_ = GaussianMechanism.from_zcdp(
            sensitivity, rho, name="clipped gradient mean"
        )
        self.n_samples_ = n_samples
        return self

    def estimate(self, design, U, rng, sample_weight=None):
        """Noisy clipped mean of the per-sample gradients ``u_i (outer) x~_i``.

        ``sample_weight`` (in ``[0, 1]``) multiplies each *clipped* gradient,
        so every summand still has norm ``<= C`` and the sensitivity is unchanged.
        """
        coeffs = self._coefficients(U, design.row_norms(), sample_weight)
        return self._release(design.weighted_sum(coeffs), rng)

    def estimate_at(self, design, W, derivative, rng, sample_weight=None):
        """:meth:`estimate` at the iterate ``W``, in one read of the data: the
        predictions, derivatives, clipping factors and weighted sum of each row
        chunk are computed together (:meth:`LinearDesign.fused_weighted_sum`)."""
        caps = self._caps(design)

        def coefficients(Z, rows):
            U = derivative(Z, rows)
            if U.ndim == 1:
                # sign(u) min(|u|, C / ||x~||) (clip_coefficients) is the clip of
                # u to [-cap, cap]; NaN (none arises from finite predictions)
                # would count as 0.
                cap = caps[rows]
                coeffs = np.where(U == U, U, 0.0)
                coeffs = np.minimum(
                    np.maximum(coeffs, -cap, out=coeffs), cap, out=coeffs
                )
                return coeffs if sample_weight is None else coeffs * sample_weight[rows]
            weight = None if sample_weight is None else sample_weight[rows]
            return self._coefficients(U, design.row_norms()[rows], weight)

        return self._release(design.fused_weighted_sum(W, coefficients), rng)

    def _caps(self, design):
        """``C / ||x~_i||`` (``inf`` for a zero row), once per design."""
        cached = getattr(self, "_caps_of", None)
        if cached is None or cached[0] is not design:
            norms = design.row_norms()
            with np.errstate(divide="ignore", over="ignore"):
                caps = np.where(norms > 0, self.clip_norm / norms, np.inf)
            self._caps_of = (design, caps)
        return self._caps_of[1]

    def _coefficients(self, U, row_norms, sample_weight):
        coeffs = clip_coefficients(U, row_norms, self.clip_norm)
        if sample_weight is not None:
            coeffs = coeffs * (
                sample_weight if coeffs.ndim == 1 else sample_weight[:, None]
            )
        return coeffs

    def _release(self, total, rng):
        return self.mechanism_.release(total / self.n_samples_, rng)
