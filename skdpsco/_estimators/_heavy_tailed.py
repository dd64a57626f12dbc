"""HeavyTailedDPRidge and HeavyTailedDPLogistic.

The estimators validate, pick the loss and the mean oracle for ``algorithm``, and hand
them to the solver; the math lives in :mod:`skdpsco._mean_estimation`,
:mod:`skdpsco._solvers` and :mod:`skdpsco.privacy`.
"""

from numbers import Real

import numpy as np

from .._losses import get_loss
from .._mean_estimation import ClippedMeanOracle
from .._solvers import LinearDesign, noisy_gradient_descent
from ..privacy._params import PositiveFinite
from ..utils._compat import Interval, StrOptions
from ._base import DPClassifierMixin, DPLinearModel, DPRegressorMixin

__all__ = ["HeavyTailedDPLogistic", "HeavyTailedDPRidge"]

#: algorithm name -> (oracle factory from the estimator's public parameters,
#: averaging of the iterates). Every entry is audited in tests/audit.
_ALGORITHMS = {
    "clipped_gd": (lambda est: ClippedMeanOracle(est.clip_norm), "suffix"),
}

#: Curvature budget behind ``learning_rate="auto"``: the step is
#: ``1 / (2 * loss.smoothness + lambda)``, the inverse of a smoothness bound that holds
#: when the features are standardised and weakly correlated
#: (lambda_max(E x~ x~^T) <= 2). It is a public choice; it reads no data.
_AUTO_CURVATURE = 2.0


class _HeavyTailedBase(DPLinearModel):
    _parameter_constraints: dict = {
        **DPLinearModel._parameter_constraints,
        "algorithm": [StrOptions(set(_ALGORITHMS))],
        "learning_rate": [StrOptions({"auto"}), PositiveFinite()],
        "clip_norm": [PositiveFinite()],
        "radius": [None, PositiveFinite()],
        "verbose": ["verbose"],
    }

    def _sample_weight(self, target):
        return None

    def _run_algorithm(self, X, target, n_outputs, budget, rng):
        loss = self._loss(n_outputs)
        make_oracle, averaging = _ALGORITHMS[self.algorithm]
        oracle = make_oracle(self)
        sample_weight = self._sample_weight(target)
        l2_penalty = self._l2_penalty(budget.n_samples)
        if sample_weight is not None:
            # Weights w_i enter as w_i / max(w) <= 1 after clipping (sensitivity
            # unchanged); dividing the penalty by max(w) too keeps the minimiser of
            # (1/n) sum w_i loss_i + (lambda/2)||w||^2.
            top = sample_weight.max()
            sample_weight, l2_penalty = sample_weight / top, l2_penalty / top
        if self.learning_rate == "auto":
            learning_rate = 1.0 / (_AUTO_CURVATURE * loss.smoothness + l2_penalty)
        else:
            learning_rate = self.learning_rate
        return noisy_gradient_descent(
            LinearDesign(X, self.fit_intercept),
            target,
            loss,
            oracle,
            n_outputs=n_outputs,
            rho=self._gaussian_budget(budget, oracle.all_gaussian),
            max_iter=self.max_iter,
            learning_rate=learning_rate,
            l2_penalty=l2_penalty,
            radius=self.radius,
            averaging=averaging,
            sample_weight=sample_weight,
            verbose=self.verbose,
            rng=rng,
        )


_SHARED_PARAMS_DOC = """
    epsilon : float, default=1.0
        Privacy loss bound of the whole fit, ``> 0``. Smaller is more private and
        noisier.
    delta : float, default=1e-5
        Probability with which the epsilon bound may fail, in ``[0, 1)``. Gaussian
        algorithms need ``delta > 0``; keep it well below ``1 / n_samples`` (a
        :class:`~skdpsco.exceptions.PrivacyLeakWarning` is raised otherwise).
    algorithm : {"clipped_gd"}, default="clipped_gd"
        The private solver.

        - ``"clipped_gd"``: full-batch gradient descent on the clipped mean of the
          per-sample gradients plus Gaussian noise (the DP-GD baseline of Kamath,
          Liu & Zhang 2021, run inside their SCOF framework, Algorithm 1). Each of
          the ``max_iter`` steps gets an equal share of the budget; the released
          coefficients are the average of the last half of the iterates.
    fit_intercept : bool, default=True
        Fit an intercept as one more (unpenalised) coordinate. The data are never
        centred: centring would read the private mean.
    max_iter : int, default=100
        Number of gradient steps. Always run in full: stopping early on a private
        loss would leak. More steps mean more noise per step.
    learning_rate : "auto" or float, default="auto"
        Step size. ``"auto"`` is ``1 / (2 * curvature_of_the_loss + penalty)``, a
        safe step for standardised features (scale your features with public
        constants, or with :mod:`skdpsco.preprocessing`, not with a scaler fitted on
        the private data).
    clip_norm : float, default=1.0
        Public bound ``C`` on the l2 norm of every per-sample gradient. Larger
        gradients (outliers, heavy tails) are scaled down to norm ``C``; this is
        what makes the guarantee hold without any bound on the data. Noise grows
        linearly with ``C``.
    radius : float or None, default=None
        If given, the iterates are projected onto the l2 ball of this radius
        (intercept included).
    verbose : int, default=0
        If > 0, print progress: iteration counts and the privacy budget spent so
        far. Private losses are never printed (they would leak).
    random_state : int, RandomState instance, numpy.random.Generator or None, \
default=None
        Source of the privacy noise. ``None`` (the default, and the right choice in
        production) draws fresh entropy; an int makes fits reproducible, which is
        for tests only: anyone who knows the seed can subtract the noise."""

_SHARED_ATTRS_DOC = """
    n_iter_ : int
        Number of iterations run (always ``max_iter``).
    privacy_spent_ : PrivacySpent
        What the fit spent: ``epsilon``, ``delta``, ``rho``, the neighbouring
        relation (replace-one, ``n`` public) and the mechanisms; never more than the
        ``epsilon`` asked for.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when X has string column names."""

_REFERENCES_DOC = """
    References
    ----------
    .. [1] Kamath, G., Liu, X. and Zhang, H. (2021). Improved rates for
       differentially private stochastic convex optimization with heavy-tailed data.
       arXiv:2106.01336. Algorithm 1 (SCOF).
    .. [2] Abadi, M. et al. (2016). Deep learning with differential privacy. CCS.
    .. [3] Wang, D., Xiao, H., Devadas, S. and Xu, J. (2020). On differentially
       private stochastic convex optimization with heavy-tailed data. ICML."""


class HeavyTailedDPRidge(DPRegressorMixin, _HeavyTailedBase):
    __doc__ = f"""Differentially private ridge regression that tolerates heavy tails.

    A drop-in for :class:`sklearn.linear_model.Ridge`: it minimises
    ``(1 / (2 n)) * (||y - X w - b||^2 + alpha ||w||^2)`` (the same minimiser as
    ``Ridge(alpha=alpha)``) with an ``(epsilon, delta)``-DP guarantee under
    replace-one neighbouring datasets, whatever the data look like: no bound on X
    or y is assumed or read from the data.

    Parameters
    ----------{_SHARED_PARAMS_DOC}
    alpha : float, default=1.0
        L2 penalty strength, as in :class:`~sklearn.linear_model.Ridge` (the
        intercept is not penalised).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
        Released coefficients.
    intercept_ : float
        Released intercept (0.0 when ``fit_intercept=False``).{_SHARED_ATTRS_DOC}

    See Also
    --------
    HeavyTailedDPLogistic : the classifier of the same family.
    sklearn.linear_model.Ridge : the non-private model.
{_REFERENCES_DOC}

    Examples
    --------
    >>> from skdpsco import HeavyTailedDPRidge
    >>> from skdpsco.datasets import make_heavy_tailed_regression
    >>> X, y, coef = make_heavy_tailed_regression(2000, 5, random_state=0)
    >>> model = HeavyTailedDPRidge(epsilon=1.0, random_state=0).fit(X, y)
    >>> model.coef_.shape
    (5,)
    >>> model.privacy_spent_.epsilon <= 1.0
    True
    """

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-5,
        alpha=1.0,
        algorithm="clipped_gd",
        fit_intercept=True,
        max_iter=100,
        learning_rate="auto",
        clip_norm=1.0,
        radius=None,
        verbose=0,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.algorithm = algorithm
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.clip_norm = clip_norm
        self.radius = radius
        self.verbose = verbose
        self.random_state = random_state

    _parameter_constraints: dict = {
        **_HeavyTailedBase._parameter_constraints,
        "alpha": [Interval(Real, 0, None, closed="left")],
    }

    def _loss(self, n_outputs):
        return get_loss("squared")

    def _l2_penalty(self, n_samples):
        # Ridge's sum-scaled alpha ||w||^2 over 2n, as a mean-scaled lambda.
        return self.alpha / n_samples


class HeavyTailedDPLogistic(DPClassifierMixin, _HeavyTailedBase):
    __doc__ = f"""Differentially private logistic regression (binary and multinomial).

    A drop-in for :class:`sklearn.linear_model.LogisticRegression`: it minimises
    ``C * sum_i loss_i + ||w||^2 / 2`` (logistic loss for two classes, one joint
    multinomial model for more) with an ``(epsilon, delta)``-DP guarantee under
    replace-one neighbouring datasets, whatever the features look like.

    Parameters
    ----------{_SHARED_PARAMS_DOC}
    C : float, default=1.0
        Inverse regularisation strength, as in
        :class:`~sklearn.linear_model.LogisticRegression`.
    class_weight : dict or None, default=None
        Public weights ``{{label: weight}}`` multiplying each record's loss, as in
        ``LogisticRegression`` (same minimiser in the non-private limit). Each
        record's *clipped* gradient is multiplied by ``weight / max(weights) <= 1``
        and the penalty is divided by ``max(weights)``, so the sensitivity and the
        noise are exactly those of the unweighted fit. ``"balanced"`` is refused: it
        reads the class frequencies of the private data.
    classes : array-like or None, default=None
        The public label set. If None, the labels present in ``y`` are used, and
        the label set is then released with the model (like ``n``); give it
        explicitly when which labels occur is itself sensitive.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Released coefficients (one row for two classes).
    intercept_ : ndarray of shape (1,) or (n_classes,)
        Released intercepts.{_SHARED_ATTRS_DOC}

    See Also
    --------
    HeavyTailedDPRidge : the regressor of the same family.
    sklearn.linear_model.LogisticRegression : the non-private model.
{_REFERENCES_DOC}

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.preprocessing import StandardScaler
    >>> from skdpsco import HeavyTailedDPLogistic
    >>> X, y = load_iris(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)  # for brevity: this scaler is not private
    >>> clf = HeavyTailedDPLogistic(epsilon=2.0, random_state=0).fit(X, y)
    >>> clf.coef_.shape
    (3, 4)
    >>> clf.predict_proba(X[:2]).sum(axis=1).round(6).tolist()
    [1.0, 1.0]
    """

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-5,
        C=1.0,
        algorithm="clipped_gd",
        fit_intercept=True,
        max_iter=100,
        learning_rate="auto",
        clip_norm=1.0,
        radius=None,
        classes=None,
        class_weight=None,
        verbose=0,
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.C = C
        self.algorithm = algorithm
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.clip_norm = clip_norm
        self.radius = radius
        self.classes = classes
        self.class_weight = class_weight
        self.verbose = verbose
        self.random_state = random_state

    _parameter_constraints: dict = {
        **_HeavyTailedBase._parameter_constraints,
        "C": [Interval(Real, 0, None, closed="neither")],
        "classes": [None, "array-like"],
        "class_weight": [None, dict, StrOptions({"balanced"})],
    }

    def _loss(self, n_outputs):
        return get_loss("logistic" if n_outputs == 1 else "multinomial")

    def _sample_weight(self, target):
        if self.class_weight is None:
            return None
        if self.class_weight == "balanced":
            raise ValueError(
                f"{type(self).__name__}: class_weight='balanced' computes weights from "
                "the class frequencies of the private y, an unaccounted release. Pass "
                "a dict of public weights instead (e.g. from known population rates)."
            )
        weights = np.ones(self.classes_.size)
        for label, weight in self.class_weight.items():
            matches = np.flatnonzero(self.classes_ == label)
            if matches.size == 0:
                raise ValueError(
                    f"{type(self).__name__}: class_weight has label {label!r}, which "
                    f"is not among the classes {self.classes_.tolist()}."
                )
            if not (isinstance(weight, Real) and 0 < weight < np.inf):
                raise ValueError(
                    f"{type(self).__name__}: class_weight[{label!r}] must be a finite "
                    f"number > 0, got {weight!r}."
                )
            weights[matches[0]] = float(weight)
        codes = target.astype(np.intp)
        return weights[codes]

    def _l2_penalty(self, n_samples):
        # LogisticRegression's C sum(loss) + ||w||^2/2, divided by C n.
        return 1.0 / (self.C * n_samples)
