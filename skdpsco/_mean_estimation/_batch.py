"""Private gradient estimates from one Poisson batch (the stochastic oracles).

Both oracles release a noisy estimate of the mean gradient from the records of one
Poisson batch ``B`` (each record included independently with the public rate ``q``).
Their ledger records are of kind ``"subsampled_gaussian"``: the add/remove
sensitivity of the batch statistic and the noise std, which the accountant composes
in RDP (Mironov, Talwar & Zhang 2019) and converts to replace-one neighbours by group
privacy (:func:`skdpsco.privacy.poisson_replace_one_epsilon`).
"""

import numpy as np

from ..privacy._mechanisms import SubsampledGaussianMechanism
from ..utils._validation import check_real
from ._clipped import clip_coefficients
from ._oracle import SingleMechanismOracle

__all__ = ["AveragedClipBatchOracle", "PerExampleClipBatchOracle"]


class _PoissonBatchOracle(SingleMechanismOracle):
    """Shared calibration and ledger of the Poisson-batch oracles."""

    #: Ledger label of the batch statistic.
    statistic_name = "batch statistic"

    def __init__(self, clip_norm=1.0):
        self.clip_norm = check_real(clip_norm, "clip_norm", low=0, low_open=True)

    def calibrate(self, n_samples, sampling_rate, noise_multiplier):
        """Noise std ``z * sensitivity``; ``noise_multiplier = 0`` is noiseless."""
        self.mechanism_ = SubsampledGaussianMechanism(
            self.sensitivity,
            noise_multiplier * self.sensitivity,
            sampling_rate,
            name=f"{self.statistic_name} (Poisson)",
        )
        self.sampling_rate_ = self.mechanism_.sampling_rate
        self.expected_batch_ = float(sampling_rate) * n_samples
        return self

    def replay_noise(self, shape, rng):
        """Draw from ``rng`` what one :meth:`estimate` of a parameter of ``shape``
        draws (one release of the mechanism, whose draws depend on the public
        size only), and discard it: a look-ahead replays a copy of the fit's
        stream with it (:class:`~skdpsco._solvers._sgd.PoissonSchedule`)."""
        self.mechanism_.release(np.zeros(shape), rng)


class PerExampleClipBatchOracle(_PoissonBatchOracle):
    """DP-SGD's estimate: sum of per-example clipped gradients + noise, over ``q n``.

    Sensitivity (add/remove-one): adding or removing a record changes the clipped
    *sum* by one clipped gradient, of norm ``<= C``; Gaussian noise of std ``z C`` is
    added to the sum, and dividing by the public expected batch size ``q n`` is
    post-processing (Abadi et al. 2016, Algorithm 1).

    Parameters
    ----------
    clip_norm : float, default=1.0
        ``C``, the l2 bound on each per-example gradient.

    References
    ----------
    .. [1] Abadi, M. et al. (2016). Deep learning with differential privacy. CCS.
    .. [2] Mironov, I., Talwar, K. and Zhang, L. (2019). Renyi differential privacy
       of the sampled Gaussian mechanism. arXiv:1908.10530.
    """

    statistic_name = "per-example clipped batch sum"

    @property
    def sensitivity(self):
        """Add/remove l2-sensitivity of the batch statistic (the clipped sum)."""
        return self.clip_norm

    def estimate(self, batch, U, rng, sample_weight=None):
        """``(sum_{i in B} w_i clip(g_i) + noise) / (q n)`` (weights ``w_i <= 1``)."""
        coeffs = clip_coefficients(U, batch.row_norms(), self.clip_norm)
        if sample_weight is not None:
            w = sample_weight if coeffs.ndim == 1 else sample_weight[:, None]
            coeffs = coeffs * w
        total = batch.weighted_sum(coeffs)
        return self.mechanism_.release(total, rng) / self.expected_batch_


class AveragedClipBatchOracle(_PoissonBatchOracle):
    """AClip's estimate: the batch mean gradient, clipped *once* to ``lambda``, + noise.

    Sensitivity: the clipped mean lies in the ``lambda``-ball whatever the batch,
    so any two batches give outputs at distance ``<= 2 lambda``, independent of the
    batch size. (Theorem 2 of Jin et al. follows DP-SGD's moments-accountant proof
    up to an unspecified constant; DP-SGD's calibration, noise ``z lambda`` on a sum
    then divided by the batch size ``m``, is ``m`` times smaller and would under-noise
    the clipped mean ``2m``-fold.) Conditioning on the rest of the batch, each pair
    of outputs is a shift of norm ``<= 2 lambda``, and averaging over the rest of the
    batch cannot exceed the worst case (the Renyi divergence is jointly convex), so
    the Poisson-subsampled Gaussian bound applies with ``Delta = 2 lambda``. An empty
    batch or a non-finite mean gives 0, still in the ball; noise is always added.

    Parameters
    ----------
    clip_norm : float, default=1.0
        ``lambda``: the batch mean is clipped once, to this l2 radius (the
        per-example gradients are not clipped).

    References
    ----------
    .. [1] Jin, C. et al. (2024). Efficient private SCO for heavy-tailed data via
       averaged clipping. Machine Learning. arXiv:2206.13011. Algorithm 1.
    """

    statistic_name = "averaged-then-clipped batch mean"

    @property
    def sensitivity(self):
        return 2.0 * self.clip_norm

    def estimate(self, batch, U, rng, sample_weight=None):
        """``clip_lambda(mean_{i in B} w_i g_i) + N(0, (2 lambda z)^2)``."""
        size = batch.n_samples
        if size == 0:
            mean = np.zeros(batch.dim if U.ndim == 1 else (batch.dim, U.shape[1]))
        else:
            if sample_weight is not None:
                U = U * (sample_weight if U.ndim == 1 else sample_weight[:, None])
            with np.errstate(over="ignore", invalid="ignore"):
                mean = batch.weighted_sum(np.nan_to_num(U, nan=0.0)) / size
            if not np.all(np.isfinite(mean)):
                mean = np.zeros_like(mean)  # keeps the output in the ball (no NaN)
        top = np.max(np.abs(mean)) if mean.size else 0.0
        if top > 0:
            norm = top * np.linalg.norm(mean / top)  # no overflow for huge entries
            if norm > self.clip_norm:
                mean = (mean / top) * (self.clip_norm / (norm / top))
        return self.mechanism_.release(mean, rng)
