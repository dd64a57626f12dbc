"""DPStandardScaler and DPRobustScaler: per-feature statistics released with DP.

A ``StandardScaler`` fitted on private data releases exact means and variances. Here
both are estimates from accounted DP mechanisms, and :meth:`DPStandardScaler.transform`
is pure post-processing of the released ``mean_`` and ``scale_``.

Neighbouring relation: replace-one record, ``n`` public (the user guide's
"Neighbouring datasets"); every sensitivity is proved where its mechanism is built.
"""

import math
import warnings

import numpy as np
from scipy.special import ndtri
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin

from .._column_scaling import (
    _MIN_SCALE,
    MAX_PER_COLUMN,
    private_column_quantiles,
    private_column_scaling,
    window_moments,
)
from .._dask_scaling import moment_grid, moment_sum_slack
from .._design import LinearDesign
from .._mean_estimation import AxisTruncatedMeanOracle
from .._mean_estimation._truncated_mean import default_gradient_bound
from ..privacy._accounting import gaussian_rho_budget
from ..privacy._discrete import make_generator
from ..privacy._ledger import PrivacySpent, spent_within
from ..privacy._mechanisms import GaussianMechanism
from ..privacy._params import (
    PRIVACY_PARAMETER_CONSTRAINTS,
    PublicBound,
    check_privacy_params,
)
from ..utils._compat import StrOptions, _fit_context, check_is_fitted, validate_data
from ..utils._validation import refuse_fit_params, refuse_sparse

__all__ = [
    "MEAN_BUDGET_FRACTION",
    "ROBUST_TRUNCATION",
    "SCALE_FLOOR",
    "DPRobustScaler",
    "DPStandardScaler",
]

#: Share of the zCDP budget spent on the mean when the scale is estimated too; the
#: second moment gets the rest. An even split: the mean error enters ``mean_`` and,
#: squared, ``var_``; the second-moment error enters ``var_`` only.
MEAN_BUDGET_FRACTION = 0.5

#: Public floor of ``scale_``, relative to the public width of each feature
#: (``(upper - lower) / 2`` for ``"clipped"``, ``scale`` for ``"robust"``): a noisy
#: variance can be <= 0, and ``transform`` divides by ``scale_``. The variance is
#: also floored at the standard deviation of its own noise (public: it depends on
#: n, d, epsilon, delta and the bounds only): a variance estimate below its noise
#: level says nothing, and flooring it at 1e-3 alone multiplied such a feature by
#: 100 after scaling (default box, n = 1000, epsilon = 1: 30% of features, and a
#: downstream DP logistic fell from 0.79 to 0.65 accuracy). Post-processing.
SCALE_FLOOR = 1e-3

#: The public box of ``"clipped"`` and ``"robust"`` when ``bounds`` is None.
_DEFAULT_BOUNDS = (-10.0, 10.0)

#: Truncation ``tau`` of the robust method: Kamath, Liu & Zhang (2021), Thm 4.1 need
#: ``tau >= max(60, 6 tau_RE)`` with the bucket half-width ``tau_RE = 10``.
ROBUST_TRUNCATION = 60.0


def _check_bounds(bounds, n_features):
    lower_upper = np.asarray(bounds, dtype=float)
    if lower_upper.ndim == 1 and lower_upper.shape == (2,):
        lower_upper = np.repeat(lower_upper[:, None], n_features, axis=1)
    if lower_upper.shape != (2, n_features):
        raise ValueError(
            "bounds must be a pair (lower, upper) of floats or of arrays of shape "
            f"(n_features,) = ({n_features},); got an array of shape "
            f"{np.shape(bounds)}."
        )
    lower, upper = lower_upper
    if not (np.all(np.isfinite(lower_upper)) and np.all(lower < upper)):
        raise ValueError(
            "bounds must be finite with lower < upper for every feature; got "
            f"{bounds!r}."
        )
    return lower, upper


def _fit_atomically(scaler, X):
    """``scaler._fit(X)`` under a fixed numpy error state, leaving the scaler
    exactly as it was if the fit raises (a refused refit does not half-overwrite a
    previous release, ``n_features_in_`` included)."""
    state = dict(scaler.__dict__)
    try:
        # Floating-point events must not depend on the data through the caller's
        # numpy error state (an underflow on a subnormal record raising on one
        # neighbour only); every finiteness check is explicit.
        with np.errstate(all="ignore"):
            return scaler._fit(X)
    except BaseException:
        scaler.__dict__.clear()
        scaler.__dict__.update(state)
        raise


class _DPScaler(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """What the DP scalers share: the atomic fit, the spend check and the
    post-processing ``(X - shift) / scale``. Subclasses define ``_fit(X)`` and
    ``_shift_and_scale()`` (released arrays, or None for a step that is off)."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        tags.input_tags.allow_nan = False
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, **fit_params):
        """Release the DP statistics of every feature (see the class docstring).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Private data; finite values (NaN / inf are refused before anything is
            computed). No bound on the values is read from it.
        y : None
            Ignored.
        **fit_params : dict
            Not supported (``sample_weight`` included): a clear error says why.

        Returns
        -------
        self : object
            If the fit raises, the scaler is left exactly as it was.
        """
        refuse_fit_params(self, fit_params)
        return _fit_atomically(self, X)

    def _start(self, X):
        """Validated ``X``, the budget, the noise source and the zCDP budget ``rho``
        of a fit."""
        refuse_sparse(self, X)
        X = validate_data(self, X, accept_sparse=False, dtype=np.float64)
        budget = check_privacy_params(
            self, X.shape[0], requires_delta=True, min_samples=1
        )
        rng = make_generator(self.random_state)
        # Every mechanism of the scalers is Gaussian: exact GDP composition.
        rho = (
            gaussian_rho_budget(budget.epsilon, budget.delta, "gdp")
            if budget.is_private
            else math.inf
        )
        return X, budget, rng, rho

    def _release_nothing(self, *names):
        """No step is on: the statistics ``names`` are None and nothing is spent."""
        for name in names:
            setattr(self, name, None)
        self.privacy_spent_ = PrivacySpent(0.0, 0.0, 0.0, accountant="basic")
        return self

    def _spent(self, records, budget):
        return spent_within(records, budget, type(self).__name__)

    def _warn_unlocated(self, located, consequence):
        # Reads only which features were located, a released value
        # (post-processing, no privacy cost).
        missing = np.flatnonzero(~located)
        warnings.warn(
            f"{type(self).__name__}: {missing.size} feature(s) (indices "
            f"{missing[:10].tolist()}{', ...' if missing.size > 10 else ''}) "
            "could not be located privately (too few records for this budget: "
            f"noise dominates); {consequence}. A larger epsilon or n would help.",
            UserWarning,
            stacklevel=4,
        )

    def _released(self, X):
        """A float copy of ``X`` (checked against the fit) and the released shift
        and scale."""
        check_is_fitted(self, "privacy_spent_")
        X = validate_data(self, X, accept_sparse=False, dtype=np.float64, reset=False)
        return np.array(X, dtype=float, copy=True), *self._shift_and_scale()

    def transform(self, X, copy=None):
        """Centre and scale ``X`` with the released statistics.

        Post-processing of the released statistics: no privacy cost.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        copy : bool, default=None
            Ignored (a new array is always returned); kept for compatibility.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        out, shift, scale = self._released(X)
        with np.errstate(over="ignore"):
            if shift is not None:
                out -= shift
            if scale is not None:
                out /= scale
        return out

    def inverse_transform(self, X, copy=None):
        """Map transformed data back: ``X * scale + shift``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        copy : bool, default=None
            Ignored (a new array is always returned).

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        out, shift, scale = self._released(X)
        with np.errstate(over="ignore"):
            if scale is not None:
                out *= scale
            if shift is not None:
                out += shift
        return out


class DPStandardScaler(_DPScaler):
    """Standardise features with a differentially private mean and scale.

    The drop-in for :class:`~sklearn.preprocessing.StandardScaler` on private data:
    ``mean_`` and ``scale_`` are released by accounted Gaussian mechanisms under an
    ``(epsilon, delta)`` budget, and ``transform`` computes
    ``(X - mean_) / scale_`` from them alone (post-processing: no further privacy
    cost, any number of calls). Use it as the first step of a
    :class:`~sklearn.pipeline.Pipeline`; :func:`skdpsco.privacy.total_privacy_spent`
    of the fitted Pipeline composes its spend with the later steps'.

    No bound is needed: by default the data come in their natural units (a year
    near 2005, an income near 4e4) and the release locates each feature itself
    (``method="auto"``, the same release every skdpsco estimator runs for its own
    ``scaling="private"``). With public ``bounds`` the moments of the clipped data
    are released instead.

    Budget: the total zCDP budget ``rho`` of ``(epsilon, delta)`` (exact Gaussian /
    GDP accounting). Without bounds it is shared by the release's histograms and
    moments (see :mod:`skdpsco._column_scaling`); with bounds, half goes to the
    per-feature mean and half to the per-feature second moment
    (:data:`MEAN_BUDGET_FRACTION`), all of it to the mean with
    ``with_std=False``. With neither ``with_mean`` nor ``with_std`` nothing is
    released and nothing is spent. The accountant composes the mechanisms that ran
    into ``privacy_spent_``.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy loss bound of the fit, in ``(0, 1e6]``.
    delta : float, default=1e-5
        In ``(0, 1)``; keep it well below ``1 / n_samples``.
    with_mean : bool, default=True
        Centre the data in ``transform``. ``mean_`` is still released when
        ``with_std=True`` (the variance needs it), as in scikit-learn.
    with_std : bool, default=True
        Scale the data to (approximately) unit variance.
    method : {"auto", "clipped", "robust"}, default="auto"
        ``"auto"``: with ``bounds=None`` (the default) the bound-free release every
        skdpsco estimator uses for its own scaling: per feature, a Gaussian noisy
        histogram of the binary exponents over the whole float range locates the
        bulk, zoom histograms narrow it at any offset, then the clipped mean and
        second moment in the found window give ``mean_`` and ``scale_`` (no bound
        is declared or read); with ``bounds``, ``"clipped"``. ``"clipped"``: every
        value is clipped into the public box ``bounds``, and the mean and second
        moment of the clipped data get Gaussian noise calibrated to the box (the
        estimates are those of the clipped data: bias where features leave the
        box). ``"robust"`` (heavy tails, unknown location): the private-range
        truncated mean of Kamath, Liu & Zhang (2021, Algorithms 2-3,
        coordinate-wise Appendix B) per feature, first of ``x`` then of
        ``(x - mean_)^2``. Its noise scales with ``scale``, not with the width of
        ``bounds``, and no value is clipped into a box: records farther than
        ``60 * scale`` from a private coarse centre are dropped from the mean.
    bounds : None or tuple of (float or array of shape (n_features,)), default=None
        Public ``(lower, upper)`` per feature, data-independent (never read them
        from the private data); None for the bound-free ``"auto"`` method
        (``"clipped"`` and ``"robust"`` then use ``(-10, 10)``). ``"clipped"``: the
        clipping box; the noise std of ``mean_`` is proportional to its width.
        ``"robust"``: only the feature *means* are assumed to lie inside (the
        coarse centre is searched on a grid over it, at a cost logarithmic in its
        width).
    scale : float, default=1.0
        ``"robust"`` only: public bound ``s`` on each feature's standard deviation
        (its second moment about the mean is assumed ``<= s^2``). Noise grows
        linearly with ``s``; a value too small biases the estimates, never the
        privacy.
    random_state : int, RandomState instance, numpy.random.Generator or None, \
default=None
        Source of the privacy noise; ``None`` (production) takes it from the
        operating system's cryptographic source. An
        int, ``Generator`` or ``RandomState`` (copied, never advanced) gives every
        fit the same noise: for tests only.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features,) or None
        DP mean of every feature (None when ``with_mean=False`` and
        ``with_std=False``).
    var_ : ndarray of shape (n_features,) or None
        DP variance, floored at the standard deviation of its own noise or at
        ``(SCALE_FLOOR * width)^2``, whichever is larger (and, for
        ``"clipped"``, capped at the largest variance of the box); None when
        ``with_std=False``.
    scale_ : ndarray of shape (n_features,) or None
        ``sqrt(var_)``: strictly positive and finite. None when ``with_std=False``.
    n_samples_seen_ : int
        ``n``, public under replace-one neighbours.
    privacy_spent_ : PrivacySpent
        What the fit spent (never more than ``epsilon``).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        When X has string column names.

    Notes
    -----
    Sensitivities (replace-one, ``n`` public), with ``h = (upper - lower) / 2``:
    ``"clipped"`` releases the moments in units of each feature's half-width,
    ``m_j / h_j`` (sensitivity ``2 sqrt(d) / n``) and ``s_j / h_j^2``
    (``sqrt(d) / n``), so every feature gets the same noise relative to its box
    whatever the other features' boxes (see
    :func:`skdpsco._column_scaling.window_moments`).
    ``"robust"``: ``8 tau s sqrt(d) / (3 n)`` for the mean and
    ``8 tau s^2 sqrt(d) / (3 n)`` for the second moment, ``tau = 60`` (Kamath et
    al., case analysis in
    :func:`skdpsco._mean_estimation._truncated_mean.truncated_mean`), plus the
    range histograms (l2-sensitivity ``sqrt(2)`` per feature); both stages use all
    records (``sample_split="budget"``), each at half its mechanism's budget.
    scipy.sparse input is refused: centring would densify it, and a sparse scale
    estimate would need its own mechanism.

    References
    ----------
    .. [1] Kamath, G., Liu, X. and Zhang, H. (2021). Improved rates for
       differentially private stochastic convex optimization with heavy-tailed data.
       arXiv:2106.01336. Algorithms 2-3, Theorem 4.1, Appendix B.
    .. [2] Dwork, C. and Roth, A. (2014). The algorithmic foundations of
       differential privacy. Foundations and Trends in TCS (Gaussian mechanism,
       clipped sums).
    .. [3] Dong, J., Roth, A. and Su, W. (2022). Gaussian differential privacy.
       JRSS B (exact composition of the Gaussian mechanisms).

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco.preprocessing import DPStandardScaler
    >>> rng = np.random.default_rng(0)
    >>> year, x = rng.normal(2005, 10, 10_000), rng.normal(3.0, 2.0, 10_000)
    >>> X = np.column_stack([year, x])
    >>> scaler = DPStandardScaler(epsilon=1.0, random_state=0).fit(X)  # no bounds
    >>> np.round(scaler.mean_), np.round(scaler.scale_)
    (array([2005.,    3.]), array([10.,  2.]))
    >>> round(scaler.privacy_spent_.epsilon, 6) <= 1.0
    True
    """

    _parameter_constraints: dict = {
        **PRIVACY_PARAMETER_CONSTRAINTS,
        "with_mean": ["boolean"],
        "with_std": ["boolean"],
        "method": [StrOptions({"auto", "clipped", "robust"})],
        "bounds": [None, "array-like"],
        "scale": [PublicBound()],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-5,
        with_mean=True,
        with_std=True,
        method="auto",
        bounds=None,
        scale=1.0,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.with_mean = with_mean
        self.with_std = with_std
        self.method = method
        self.bounds = bounds
        self.scale = scale
        self.random_state = random_state

    def _fit(self, X):
        X, budget, rng, rho = self._start(X)
        n, d = X.shape
        method = self.method
        if method == "auto":
            method = "free" if self.bounds is None else "clipped"
        bounds = _DEFAULT_BOUNDS if self.bounds is None else self.bounds
        lower, upper = _check_bounds(bounds, d)
        if not (self.with_mean or self.with_std):
            self.n_samples_seen_ = int(n)
            return self._release_nothing("mean_", "var_", "scale_")
        if self.with_std:
            rho_mean = rho * MEAN_BUDGET_FRACTION
            rho_second = rho * (1.0 - MEAN_BUDGET_FRACTION)  # rho = inf stays inf
        else:
            rho_mean, rho_second = rho, 0.0
        if method == "free":
            mean, var, records, floor = self._fit_free(X, rho, rng)
        elif method == "clipped":
            mean, var, records, floor = self._fit_clipped(
                X, lower, upper, rho_mean, rho_second, rng
            )
        else:
            mean, var, records, floor = self._fit_robust(
                X, lower, upper, rho_mean, rho_second, rng
            )
        spent = self._spent(records, budget)
        if var is not None:
            floored = np.flatnonzero(var <= floor * (1 + 1e-12))
            if floored.size:
                # Reads only the released var_ (post-processing, no privacy cost).
                warnings.warn(
                    f"DPStandardScaler: the noisy variance of {floored.size} of {d} "
                    f"feature(s) (indices {floored[:10].tolist()}"
                    f"{', ...' if floored.size > 10 else ''}) is below its noise "
                    "level; their var_ is that level (a public floor). A larger "
                    "epsilon or n, or tighter public bounds, would help.",
                    UserWarning,
                    stacklevel=3,
                )
        self.mean_ = mean
        self.var_ = var
        self.scale_ = None if var is None else np.sqrt(var)
        if var is not None and method == "free":
            self.scale_ = self.__dict__.pop("_free_scale")
        self.n_samples_seen_ = int(n)
        self.privacy_spent_ = spent
        return self

    def _fit_free(self, X, rho, rng):
        # The release of skdpsco._column_scaling (its sensitivities are argued
        # there): no bound, every mechanism Gaussian at a share of rho.
        result = private_column_scaling(X, rng, rho=rho, center=self.with_mean)
        records = result.records
        if not result.located.all():
            self._warn_unlocated(
                result.located, "they are left as they are (mean 0, scale 1)"
            )
        mean = result.center if self.with_mean else np.zeros(result.center.size)
        if not self.with_std:
            return mean, None, records, None
        # scale_ is the released scale itself (its square may pass the float range:
        # var_ is then the largest float).
        self._free_scale = result.scale
        with np.errstate(over="ignore"):
            var = np.minimum(result.scale**2, np.finfo(np.float64).max)
        return mean, var, records, np.zeros(result.scale.size)

    def _fit_clipped(self, X, lower, upper, rho_mean, rho_second, rng):
        n = X.shape[0]
        h = (upper - lower) / 2.0
        centre = (lower + upper) / 2.0
        # The moments are released in units of each feature's public half-width,
        # m_j / h_j and s_j / h_j^2, so that every feature gets the same noise
        # relative to its box and the release is equivariant to a change of units
        # of one feature (noise calibrated to ||h|| in absolute units would let
        # one wide box drown every narrow feature). window_moments: replace-one
        # moves m_j / h_j by <= 2 / n per feature, l2-sensitivity 2 sqrt(d) / n,
        # plus t sqrt(d) / n for the floating-point summation (X is dense)
        # (moment_sum_slack: Casacuberta et al. 2022, Section 4).
        m, s = window_moments(X, centre, h)
        d = h.shape[0]
        t = moment_sum_slack(moment_grid(n))
        mean_mech = GaussianMechanism.from_zcdp(
            (2.0 + t) * np.sqrt(d) / n, rho_mean, name="scaler clipped mean"
        )
        m_noisy = h * mean_mech.release(m, rng)
        records = [mean_mech.record()]
        # Clipping the released mean into the box is post-processing.
        mean = np.clip(centre + m_noisy, lower, upper)
        if not self.with_std:
            return mean, None, records, None
        # Summands z^2 / h^2 in [0, 1]: replace-one moves s_j / h_j^2 by <= 1 / n,
        # l2-sensitivity (1 + t) sqrt(d) / n with the summation slack.
        second_mech = GaussianMechanism.from_zcdp(
            (1.0 + t) * np.sqrt(d) / n, rho_second, name="scaler clipped second moment"
        )
        s_noisy = h * h * second_mech.release(s, rng)
        records.append(second_mech.record())
        # Var of the clipped data = s - m^2 (about the box centre), from the two
        # released values only; a variable in [-h, h] has variance <= h^2.
        # Floor: the noise std of s_noisy (h^2 sigma), or the absolute floor.
        floor = np.minimum(
            np.maximum((SCALE_FLOOR * h) ** 2, h * h * second_mech.sigma), h * h
        )
        var = np.clip(s_noisy - m_noisy**2, floor, h * h)
        return mean, var, records, floor

    def _robust_oracle(self, scale, bound, n, d, rho):
        # sample_split="budget": every record enters both the range histograms and
        # the truncated mean, each at rho / 2 (two Gaussian records). For a
        # one-dimensional-per-feature problem this beats the paper's disjoint halves
        # ("data"): the mean is averaged over n, not n / 2.
        oracle = AxisTruncatedMeanOracle(
            gradient_scale=scale,
            truncation=ROBUST_TRUNCATION,
            gradient_bound=bound,
            sample_split="budget",
        )
        return oracle.calibrate(n, rho, (d,))

    def _fit_robust(self, X, lower, upper, rho_mean, rho_second, rng):
        n, d = X.shape
        s = float(self.scale)
        h = (upper - lower) / 2.0
        centre = (lower + upper) / 2.0
        # The grid of the range histograms is symmetric about 0: shift every feature
        # by its public box centre, so that R = max_j h_j bounds |E x_j - centre_j|.
        oracle = self._robust_oracle(s, float(h.max()), n, d, rho_mean)
        ones = np.ones(n)
        mean = centre + oracle.estimate(LinearDesign(X - centre, False), ones, rng)
        records = list(oracle.records(1))
        if not self.with_std:
            return mean, None, records, None
        # The released mean_ is public: squared deviations about it are a function
        # of one record each, and the same truncated mean (adaptive composition,
        # accounted by the ledger) estimates their mean, the variance. Their grid
        # is in units of s^2 over [-e s^2, e s^2] rounded up (variances <= s^2 are
        # assumed; default_gradient_bound with one coordinate).
        oracle2 = self._robust_oracle(
            s * s, default_gradient_bound(s * s, 1), n, d, rho_second
        )
        with np.errstate(over="ignore"):
            sq_dev = np.square(X - mean)
        second = oracle2.estimate(LinearDesign(sq_dev, False), ones, rng)
        records += oracle2.records(1)
        # Floor: the noise std of the truncated mean of the squared deviations.
        noise = oracle2.mean_mechanism_.sigma
        floor = np.full(d, max((SCALE_FLOOR * s) ** 2, noise))
        var = np.maximum(second, floor)
        return mean, var, records, floor

    def _shift_and_scale(self):
        return (
            self.mean_ if self.with_mean else None,
            self.scale_ if self.with_std else None,
        )


class DPRobustScaler(_DPScaler):
    """Scale features with a differentially private median and interquartile range.

    The drop-in for :class:`~sklearn.preprocessing.RobustScaler` on private data:
    ``center_`` (the median) and ``scale_`` (the distance between the quantiles of
    ``quantile_range``) are read off one accounted Gaussian noisy histogram per
    feature, and ``transform`` computes ``(X - center_) / scale_`` from them alone
    (post-processing: no further privacy cost, any number of calls).

    No bound is needed: each feature's bulk is first located over the whole float
    range (the release every skdpsco estimator runs for ``scaling="private"``: a
    noisy histogram of the binary exponents, then, where ``n`` allows it, zoom
    histograms at any offset), then a histogram of 256 equal bins over the
    located window gives the quantiles from its noisy cumulative counts, made
    non-decreasing and interpolated inside a bin. A record far out (``1e300``)
    moves one count of an edge bin; outliers do not move the quantiles by more
    than their count, as in scikit-learn.

    Budget: the total zCDP budget ``rho`` of ``(epsilon, delta)`` (exact
    Gaussian / GDP accounting), shared by the histograms: the location ones
    (relative weight 3 each) and the quantile histogram (weight 4). The quantiles
    of a feature are resolved to one bin of its window (``resolution_``); at small
    ``n`` the window is coarse and the noise of the cumulative counts (the root of
    up to 256 noisy counts) can exceed the counts themselves: a feature whose
    quantiles are not found inside its window keeps centre 0 and scale 1, with a
    warning. At ``epsilon = 1`` a column at an offset of 200 spreads (a year) was
    located from about 2,000 records alone, 5,000 among 10 features and 20,000
    among 30; below that, prefer :class:`DPStandardScaler`.

    Parameters
    ----------
    epsilon : float, default=1.0
        Privacy loss bound of the fit, in ``(0, 1e6]``.
    delta : float, default=1e-5
        In ``(0, 1)``; keep it well below ``1 / n_samples``.
    with_centering : bool, default=True
        Subtract the median in ``transform``.
    with_scaling : bool, default=True
        Divide by the interquartile range (the range of ``quantile_range``).
    quantile_range : tuple (q_min, q_max), default=(25.0, 75.0)
        Percentiles, ``0 < q_min < q_max < 100``. Unlike scikit-learn, 0 and 100
        (the minimum and maximum, which one record moves arbitrarily far) are
        refused.
    unit_variance : bool, default=False
        Divide ``scale_`` further by the range of ``quantile_range`` of a standard
        normal, so that normally distributed features get a variance of about 1.
    random_state : int, RandomState instance, numpy.random.Generator or None, \
default=None
        Source of the privacy noise; ``None`` (production) takes it from the
        operating system's cryptographic source. An int, ``Generator`` or
        ``RandomState`` (copied, never advanced) gives every fit the same noise:
        for tests only.

    Attributes
    ----------
    center_ : ndarray of shape (n_features,) or None
        DP median of every feature (0 where not located); None when
        ``with_centering=False``.
    scale_ : ndarray of shape (n_features,) or None
        DP interquartile range, strictly positive and finite: 1 where not located
        or where the range is below two bins of the release (a constant, a rare
        indicator: scikit-learn's rule for a zero range). None when
        ``with_scaling=False``.
    resolution_ : ndarray of shape (n_features,) or None
        Width of one bin of the quantile histogram of every feature (released);
        None when nothing was released.
    privacy_spent_ : PrivacySpent
        What the fit spent (never more than ``epsilon``).
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        When X has string column names.

    Notes
    -----
    Sensitivities (replace-one, ``n`` public): every histogram puts each record in
    exactly one bin of each feature, so replacing a record moves one count down
    and one up per feature: l2-sensitivity ``sqrt(2 d)`` jointly. The windows of
    the later histograms are released values (adaptive composition, accounted by
    the ledger); the quantiles, the median and the range are post-processing. The
    derivation is in the documentation's privacy page. scipy.sparse input is
    refused: centring would densify it; so are more than 2,000 features (the
    release holds about 4,200 counts per feature).

    References
    ----------
    .. [1] Karwa, V. and Vadhan, S. (2018). Finite sample differentially private
       confidence intervals. ITCS. (A coarse private range over a geometric grid,
       then a fine histogram inside it.)
    .. [2] Dong, J., Roth, A. and Su, W. (2022). Gaussian differential privacy.
       JRSS B (exact composition of the Gaussian mechanisms).

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco.preprocessing import DPRobustScaler
    >>> rng = np.random.default_rng(0)
    >>> year, income = rng.normal(2005, 10, 20_000), rng.lognormal(10, 1, 20_000)
    >>> X = np.column_stack([year, income])
    >>> scaler = DPRobustScaler(epsilon=1.0, random_state=0).fit(X)  # no bounds
    >>> bool(abs(scaler.center_[0] - np.median(year)) < 1)
    True
    >>> round(scaler.privacy_spent_.epsilon, 6) <= 1.0
    True
    """

    _parameter_constraints: dict = {
        **PRIVACY_PARAMETER_CONSTRAINTS,
        "with_centering": ["boolean"],
        "with_scaling": ["boolean"],
        "quantile_range": [tuple],
        "unit_variance": ["boolean"],
    }

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-5,
        with_centering=True,
        with_scaling=True,
        quantile_range=(25.0, 75.0),
        unit_variance=False,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.with_centering = with_centering
        self.with_scaling = with_scaling
        self.quantile_range = quantile_range
        self.unit_variance = unit_variance
        self.random_state = random_state

    def _check_quantile_range(self):
        q = self.quantile_range
        ok = len(q) == 2 and all(
            isinstance(v, (int, float, np.integer, np.floating))
            and not isinstance(v, bool)
            and math.isfinite(v)
            for v in q
        )
        if not ok or not 0 <= q[0] < q[1] <= 100:
            raise ValueError(
                f"DPRobustScaler: quantile_range must be (q_min, q_max) with "
                f"0 < q_min < q_max < 100, got {q!r}."
            )
        if q[0] == 0 or q[1] == 100:
            raise ValueError(
                f"DPRobustScaler: quantile_range={q!r} asks for the minimum or the "
                "maximum, which one record moves arbitrarily far: no DP release "
                "can estimate them. Use interior percentiles, e.g. (1.0, 99.0)."
            )
        return float(q[0]), float(q[1])

    def _fit(self, X):
        q_min, q_max = self._check_quantile_range()
        X, budget, rng, rho = self._start(X)
        d = X.shape[1]
        if d > MAX_PER_COLUMN:
            raise ValueError(
                f"DPRobustScaler: {d} features; the release holds about 4,200 noisy "
                f"counts per feature and is limited to {MAX_PER_COLUMN} features "
                "(the noise also grows like the root of their number). Use "
                "DPStandardScaler (one shared scale above that size) or select "
                "features with public knowledge first."
            )
        if not (self.with_centering or self.with_scaling):
            return self._release_nothing("center_", "scale_", "resolution_")
        # Every level asked for comes from the same histogram: one release.
        levels = [0.5, q_min / 100.0, q_max / 100.0]
        result = private_column_quantiles(X, rng, levels, rho=rho, name="feature")
        spent = self._spent(result.records, budget)
        # Everything below reads released values only (post-processing).
        located = result.located
        median, low, high = result.values
        if not located.all():
            self._warn_unlocated(located, "they keep centre 0 and scale 1")
        self.center_ = np.where(located, median, 0.0) if self.with_centering else None
        self.scale_ = None
        if self.with_scaling:
            with np.errstate(over="ignore", invalid="ignore"):
                iqr = high - low
            resolved = located & np.isfinite(iqr) & (iqr >= 2.0 * result.resolution)
            scale = np.where(resolved, iqr, 1.0)
            if self.unit_variance:
                normal_range = float(ndtri(q_max / 100.0) - ndtri(q_min / 100.0))
                scale = np.where(resolved, scale / normal_range, scale)
            self.scale_ = np.clip(scale, _MIN_SCALE, np.finfo(np.float64).max)
        self.resolution_ = result.resolution
        self.privacy_spent_ = spent
        return self

    def _shift_and_scale(self):
        return self.center_, self.scale_
