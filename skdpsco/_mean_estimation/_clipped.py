"""Clipped mean + Gaussian noise: the baseline DP gradient-mean oracle."""

import numpy as np

from .._exact_sum import exact_mean_sensitivity
from ..privacy._mechanisms import GaussianMechanism
from ..utils._validation import check_real
from ._oracle import GradientMeanOracle, LossDerivative, SingleMechanismOracle

__all__ = [
    "ClippedCoefficients",
    "ClippedMeanOracle",
    "clip_coefficients",
    "shrink_coefficients",
    "shrink_to_caps",
]


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
    return shrink_to_caps(U, cap, unit_norms)


def shrink_to_caps(U, cap, unit_norms):
    """``u_i min(1, cap_i / ||u_i||)`` for NaN-free ``U`` of shape (n, K) (see
    :func:`shrink_coefficients`, which gives ``cap = bound / r``)."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        scale = np.max(np.abs(U), axis=1)
        safe = np.where(scale > 0, scale, 1.0)
        unorm = safe * unit_norms(U / safe[:, None])  # ||u_i||, overflow-safe
        factor = np.where(unorm > cap, cap / np.where(unorm > 0, unorm, 1.0), 1.0)
        return U * factor[:, None]


class ClippedCoefficients:
    """The row-wise map ``(Z, y, caps) -> C`` of clipped loss derivatives,
    ``||C_i x~_i|| <= clip_norm``, with ``caps = clip_norm / ||x~_i||``
    (:meth:`row_statistic`, ``inf`` for a zero row): the clip of scalar
    derivatives to ``[-cap, cap]``, the shrinking of vector ones to norm ``cap``
    (:func:`clip_coefficients`).

    A function of each row and public values only, picklable: it runs on the
    workers of a dask design, chunk by chunk, and on blocks of rows in memory.

    Parameters
    ----------
    loss : loss object from :mod:`skdpsco._losses`
    clip_norm : float
    """

    def __init__(self, loss, clip_norm):
        self.loss = loss
        self.clip_norm = float(clip_norm)

    @property
    def statistic_key(self):
        """What :meth:`row_statistic` depends on besides the rows: a design
        keeps the statistic while the key is the same."""
        return ("clip caps", self.clip_norm)

    def row_statistic(self, row_norms):
        """``clip_norm / ||x~_i||`` (``inf`` for a zero row): once per design."""
        with np.errstate(divide="ignore", over="ignore"):
            return np.where(row_norms > 0, self.clip_norm / row_norms, np.inf)

    def __call__(self, Z, y, caps):
        U = self.loss.derivative(Z, y)
        # NaN (none arises from finite predictions) counts as 0.
        U = np.where(U == U, U, 0.0)
        if U.ndim > 1:
            return shrink_to_caps(U, caps, lambda unit: np.linalg.norm(unit, axis=1))
        # sign(u) min(|u|, cap) is the clip of u to [-cap, cap].
        return np.minimum(np.maximum(U, -caps, out=U), caps, out=U)


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
        # Replace-one, see the class doc: 2 C / n, plus the rounding of the
        # exact block sums and their conversion to a float mean
        # (skdpsco._exact_sum, exact_mean_sensitivity), which closes the
        # floating-point summation gap (Casacuberta et al. 2022, Section 4).
        parameters = 2**20 if shape is None else int(np.prod(shape))
        sensitivity = exact_mean_sensitivity(self.clip_norm, n_samples, parameters)
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
        chunk are computed together (:meth:`LinearDesign.fused_weighted_sum`).

        Dense rows (in memory or a dask design) are summed exactly
        (:meth:`LinearDesign.exact_fused_sum`): the same bits in any chunking."""
        if getattr(design, "exact_sums", False) and isinstance(
            derivative, LossDerivative
        ):
            coefficients = ClippedCoefficients(derivative.loss, self.clip_norm)
            total = design.exact_fused_sum(
                W, coefficients, self.clip_norm, derivative.y, sample_weight
            )
            return self._release(total, rng)
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
