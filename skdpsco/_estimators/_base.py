"""The fit skeleton shared by every skdpsco linear model.

``fit`` always goes: validate the data; encode the target; check the privacy
parameters against the public ``n``; draw a ``numpy.random.Generator``; let the
subclass assemble its (loss, oracle, solver) and run it; compose what ran into
``privacy_spent_`` and refuse to release if it exceeds the ask; store the fitted
attributes. Prediction is post-processing of the released parameters.
"""

import math
import warnings

import numpy as np
import scipy.sparse as sp
from scipy import special
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets

from .._column_scaling import (
    MAX_SCALING_SHARE,
    private_column_scaling,
    public_scaling,
    scaling_is_underpowered,
    scaling_share,
    unscale_coef,
)
from ..exceptions import PrivacyBudgetError
from ..privacy._accounting import gaussian_rho_budget, gdp_to_approx_dp
from ..privacy._discrete import make_generator
from ..privacy._ledger import spent_within
from ..privacy._params import (
    COMMON_FIT_CONSTRAINTS,
    PRIVACY_PARAMETER_CONSTRAINTS,
    PrivacyBudget,
    check_privacy_params,
)
from ..privacy._records import MechanismRecord
from ..utils._compat import StrOptions, _fit_context, check_is_fitted, validate_data
from ..utils._validation import canonical_sparse, refuse_fit_params, refuse_sparse

__all__ = [
    "DPClassifierMixin",
    "DPLinearModel",
    "DPRegressorMixin",
    "SCALING_PARAM_DOC",
]

SCALING_PARAM_DOC = """
    scaling : {"private", "none"} or tuple of two arrays, default="private"
        How the data are put on a common scale before the fit. ``"private"``:
        ``fit`` spends a public share of ``(epsilon, delta)`` (10% to 50%, a
        function of ``n_samples``, the number of columns and the budget only) on a
        private centre and scale of every feature (and of the target, for
        regressors), standardises with them, fits, and maps ``coef_`` and
        ``intercept_`` back to the original units (post-processing): raw columns
        in any units need no bounds and no scaler. More than 2,000 features share
        one scale (the magnitude of the row norms); sparse input is scaled without
        centring, and so is everything when ``fit_intercept=False`` (a model
        without intercept cannot follow an offset of the data anyway). The released
        statistics are ``feature_center_`` and ``feature_scale_`` (and
        ``target_center_``, ``target_scale_``). The penalty and any constraint set
        then apply to the standardised coefficients, as in glmnet. ``"none"``: the
        data are used as given; you assert they are on a public scale (e.g.
        standardised with public constants). ``(center, scale)``: public arrays
        of shape ``(n_features,)`` (or scalars) used for the features; the target
        of a regressor is still scaled privately."""


class DPLinearModel(BaseEstimator):
    """Base class: the private fit skeleton of a linear model.

    Subclasses provide ``_encode_target(y)`` (returns the encoded target and the
    number of outputs), ``_run_algorithm(design, target, n_outputs, budget, rng)``
    (returns a ``SolverResult``) and ``_algorithm_requirements()``.
    """

    _parameter_constraints: dict = {
        **PRIVACY_PARAMETER_CONSTRAINTS,
        **COMMON_FIT_CONSTRAINTS,
        "scaling": [StrOptions({"private", "none"}), tuple],
    }

    #: Whether scipy.sparse X is supported end to end.
    _accept_sparse = False
    #: Whether ``scaling="private"`` releases one scale for all features of sparse
    #: input (rows of norm about 1, as row-norm bounds expect).
    _shared_scale = False
    #: Whether the standardised columns are further divided by sqrt(d), so that
    #: rows have l2 norm about 1 (for a public row-norm bound of order 1).
    _unit_rows = False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self._accept_sparse
        return tags

    def _algorithm_requirements(self):
        """``(requires_delta, min_samples)`` of the chosen algorithm."""
        return True, 2

    def _budget_accountant(self):
        """How the chosen algorithm spends its budget.

        ``"gdp"`` (every mechanism Gaussian) or ``"zcdp"``: it takes its zCDP budget
        from :meth:`_gaussian_budget`, and the scaling statistics take their share
        of the same ``rho`` (composed exactly by the ledger). ``"gdp-epsilon"``:
        every mechanism is Gaussian, calibrated to the ``(epsilon, delta)`` it is
        handed; it gets the ``epsilon`` at which a Gaussian mechanism has the GDP
        parameter the scaling leaves, ``sqrt(mu^2 - mu_scaling^2)`` (exact
        composition, Dong, Roth & Su 2022, Cor 3.3). None: it reads ``(epsilon,
        delta)``, and the scaling takes a share of both (basic composition).
        """
        return None

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, **fit_params):
        """Fit the model with the stated ``(epsilon, delta)`` guarantee.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data. No bound on its values is assumed or read.
        y : array-like of shape (n_samples,)
            Targets.
        **fit_params : dict
            Not supported (``sample_weight`` included): a clear error says why.

        Returns
        -------
        self : object
            Fitted estimator, with ``privacy_spent_`` recording what the fit spent.
            If the fit raises, the estimator is left exactly as it was (a refit
            that fails does not half-overwrite a previous release).
        """
        refuse_fit_params(self, fit_params)
        state = dict(self.__dict__)
        try:
            # Floating-point events (an underflow on a subnormal record, an
            # overflow near the float range) must not depend on the data through
            # the caller's numpy error state: a warning or an exception on one
            # neighbour and not the other would be a release. Every bound and
            # finiteness check of the fit is explicit.
            with np.errstate(all="ignore"):
                return self._fit(X, y)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(state)
            raise

    def _fit(self, X, y):
        refuse_sparse(self, X)
        X, y = validate_data(
            self,
            X,
            y,
            accept_sparse=("csr", "csc") if self._accept_sparse else False,
            dtype=np.float64,
            y_numeric=not getattr(self, "_is_dp_classifier", False),
            ensure_min_samples=2,
        )
        if sp.issparse(X):
            X = canonical_sparse(X, type(self).__name__)
        target, n_outputs = self._encode_target(y)
        requires_delta, min_samples = self._algorithm_requirements()
        budget = check_privacy_params(
            self,
            X.shape[0],
            requires_delta=requires_delta,
            min_samples=min_samples,
            method=getattr(self, "algorithm", None),
        )
        rng = make_generator(self.random_state)
        X_fit, target_fit, budget_fit, scaling, records = self._scale(
            X, target, budget, rng
        )
        # A released row statistic the algorithm may use as a public bound.
        self._released_row_nnz = None if scaling is None else scaling[0].row_nnz
        try:
            result = self._run_algorithm(X_fit, target_fit, n_outputs, budget_fit, rng)
        except PrivacyBudgetError as exc:
            if budget_fit is budget:
                raise
            raise PrivacyBudgetError(
                f"{exc} The algorithm gets what the private scaling leaves of "
                f"epsilon={budget.epsilon:g}; scaling='none' (data already on a "
                "public scale) leaves it all to the algorithm."
            ) from exc
        spent = spent_within([*records, *result.records], budget, type(self).__name__)
        self._store_scaling(scaling)
        coef = np.asarray(result.coef, dtype=float)
        if scaling is not None:
            coef = unscale_coef(
                coef,
                scaling[0],
                *(scaling[1] or (0.0, 1.0)),
                fit_intercept=self.fit_intercept,
            )
        self._store_coef(coef)
        self.n_iter_ = int(result.n_iter)
        self.privacy_spent_ = spent
        return self

    def _gaussian_budget(self, budget, all_gaussian=True):
        """zCDP budget of the algorithm's mechanisms (``inf`` in the testing mode):
        what ``(epsilon, delta)`` allows, less the share the scaling spent."""
        if not budget.is_private:
            return math.inf
        rho = gaussian_rho_budget(
            budget.epsilon, budget.delta, "gdp" if all_gaussian else "zcdp"
        )
        return rho * (1.0 - budget.scaling_share)

    def _scale(self, X, target, budget, rng):
        """Release the scaling statistics and standardise (see ``scaling``).

        Returns the standardised ``X`` and target, the budget left for the
        algorithm, ``(x_scaling, (y_center, y_scale) or None, released)`` (None
        when ``scaling="none"``; ``released`` is ``x_scaling`` without the
        family's unit-row factor) and the scaling's ledger records. The shares spent are
        public functions of ``n``, ``d`` and the budget.
        """
        if isinstance(self.scaling, str) and self.scaling == "none":
            return X, target, budget, None, []
        name = type(self).__name__
        n, d = X.shape
        regression = not getattr(self, "_is_dp_classifier", False)
        public = not isinstance(self.scaling, str)
        if public:
            if len(self.scaling) != 2:
                raise ValueError(
                    f"{name}: scaling must be 'private', 'none' or a tuple "
                    "(center, scale) of public arrays."
                )
            x_scaling = public_scaling(*self.scaling, d, name)
            if not self.fit_intercept and np.any(x_scaling.center != 0):
                # (x - c) w / s needs the intercept -c w / s, which a model
                # without one cannot release: its predictions would be off by it.
                raise ValueError(
                    f"{name}: scaling=(center, scale) with a nonzero center needs "
                    "fit_intercept=True (a centred model has an intercept); pass "
                    "center=0 or fit_intercept=True."
                )
            if not regression:
                released = x_scaling
                if self._unit_rows:
                    x_scaling = x_scaling.rescaled(math.sqrt(d))
                scaling = (x_scaling, None, released)
                return self._standardise(X, x_scaling), target, budget, scaling, []
        accountant = self._budget_accountant()
        if not budget.is_private:
            share, y_share = scaling_share(n, 0 if public else d, math.inf, regression)
            spend, budget_fit = {"rho": math.inf}, budget
        else:
            # The shares follow the zCDP budget of (epsilon, delta): public numbers.
            rho = math.nan
            if budget.delta > 0:
                kind = "zcdp" if accountant == "zcdp" else "gdp"
                rho = gaussian_rho_budget(budget.epsilon, budget.delta, kind)
            share, y_share = (
                scaling_share(n, 0 if public else d, rho, regression)
                if budget.delta > 0
                else (MAX_SCALING_SHARE, 1.0 if public else 0.5 * regression)
            )
            if budget.delta > 0 and scaling_is_underpowered(
                n, 0 if public else d, rho, regression
            ):
                warnings.warn(
                    f"{name}: at n_samples={n}, epsilon={budget.epsilon:g} the private "
                    "scaling cannot be expected to locate "
                    + ("the target" if regression else "the features")
                    + " (too few records for this budget: noise dominates), and "
                    "the model may be worse than a trivial one (a constant). Use "
                    "more data or a larger epsilon, or scaling=(center, scale) / "
                    "'none' with public knowledge of the units.",
                    UserWarning,
                    stacklevel=5,
                )
            if accountant == "gdp-epsilon":
                spend = {"rho": rho * share}
                mu_left = math.sqrt(2.0 * rho * (1.0 - share))
                budget_fit = PrivacyBudget(
                    gdp_to_approx_dp(mu_left, budget.delta), budget.delta, n
                )
            elif accountant is not None:
                spend = {"rho": rho * share}
                budget_fit = budget.with_scaling_share(share)
            else:
                budget_fit, eps_s, delta_s = budget.split(share)
                spend = (
                    {"rho": gaussian_rho_budget(eps_s, delta_s, "gdp")}
                    if delta_s > 0
                    else {"epsilon": eps_s}
                )
        records = []
        if not public:
            x_scaling = private_column_scaling(
                X,
                rng,
                center=bool(self.fit_intercept),
                shared=self._shared_scale and sp.issparse(X),
                name="feature",
                **{k: v * (1.0 - y_share) for k, v in spend.items()},
            )
            records += x_scaling.records
        released = x_scaling
        if self._unit_rows:
            # Rows of l2 norm about 1 (the unit of the family's public row bound):
            # each standardised column further divided by sqrt(d) inside the fit
            # (the constraint set follows, see _constraint_unit).
            x_scaling = x_scaling.rescaled(math.sqrt(d))
        y_stats = None
        if regression:
            y_scaling = private_column_scaling(
                target[:, None],
                rng,
                center=bool(self.fit_intercept),
                name="target",
                **{k: v * y_share for k, v in spend.items()},
            )
            records += y_scaling.records
            y_stats = (float(y_scaling.center[0]), float(y_scaling.scale[0]))
            target = y_scaling.transform(target[:, None])[:, 0]
        if not budget.is_private:
            # The hidden testing mode: noise-free statistics, nothing to account.
            records = []
        elif accountant is None:
            # Basic composition: the scaling as one (eps_s, delta_s) mechanism.
            records = [
                MechanismRecord(
                    f"private scaling ({len(records)} mechanisms)",
                    "approx_dp",
                    epsilon=eps_s,
                    delta=delta_s,
                )
            ]
        scaling = (x_scaling, y_stats, released)
        return self._standardise(X, x_scaling), target, budget_fit, scaling, records

    def _standardise(self, X, x_scaling):
        """The standardised data handed to ``_run_algorithm``: a copy of ``X``
        here; a family whose solvers take a design may fold the scaling into
        it instead (no copy)."""
        return x_scaling.transform(X)

    def _store_scaling(self, scaling):
        """Released scaling statistics as fitted attributes (post-processing)."""
        if scaling is None:
            self.feature_center_ = self.feature_scale_ = None
            self.feature_located_ = None
            if not getattr(self, "_is_dp_classifier", False):
                self.target_center_ = self.target_scale_ = None
            return
        # The statistics as released (without the fit's internal unit-row factor).
        _, y_stats, x_scaling = scaling
        self.feature_center_ = x_scaling.center
        self.feature_scale_ = x_scaling.scale
        self.feature_located_ = x_scaling.located
        if not getattr(self, "_is_dp_classifier", False):
            self.target_center_, self.target_scale_ = y_stats or (None, None)

    def _decision(self, X):
        check_is_fitted(self)
        X = validate_data(
            self,
            X,
            accept_sparse=("csr", "csc") if self._accept_sparse else False,
            dtype=np.float64,
            reset=False,
        )
        return np.asarray(X @ self.coef_.T + self.intercept_)


class DPRegressorMixin(RegressorMixin):
    """Linear regression output: ``coef_`` of shape (d,), scalar ``intercept_``."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # DP noise makes scores on tiny datasets legitimately poor.
        tags.regressor_tags.poor_score = True
        return tags

    def _encode_target(self, y):
        return np.asarray(y, dtype=float), 1

    def _store_coef(self, W):
        d = self.n_features_in_
        self.coef_ = W[:d].copy()
        self.intercept_ = float(W[d]) if self.fit_intercept else 0.0

    def predict(self, X):
        """Predict with the released linear model (post-processing, no privacy cost).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._decision(X)


class DPClassifierMixin(ClassifierMixin):
    """Binary and multinomial linear classifier output, like ``LogisticRegression``.

    ``classes_`` holds the label set: the public ``classes`` parameter when given,
    otherwise the labels present in ``y`` (then the label set is released, like n).
    Two classes give ``coef_`` of shape (1, d) and one logistic model for
    ``classes_[1]``; K > 2 classes give ``coef_`` of shape (K, d) and one joint
    multinomial model.
    """

    _is_dp_classifier = True

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # DP noise makes scores on tiny datasets legitimately poor (e.g. the common
        # class_weight check fits 50 very noisy points with max_iter=1000, so each
        # step gets 1/1000 of the budget). Accuracy is tested on real sizes in
        # tests/test_heavy_tailed_estimators.py instead.
        tags.classifier_tags.poor_score = True
        return tags

    def _encode_target(self, y):
        check_classification_targets(y)
        if self.classes is None:
            classes = np.unique(y)
        else:
            classes = np.unique(np.asarray(self.classes))
            unknown = np.setdiff1d(np.unique(y), classes)
            if unknown.size:
                raise ValueError(
                    f"{type(self).__name__}: y contains labels {unknown.tolist()[:5]} "
                    f"that are not in the public 'classes' parameter "
                    f"{classes.tolist()}."
                )
        if classes.size < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes; the data "
                f"contain only one class: {classes.tolist()}."
            )
        self.classes_ = classes
        codes = np.searchsorted(classes, y)
        if classes.size == 2:
            return codes.astype(float), 1
        return codes.astype(np.intp), int(classes.size)

    def _store_coef(self, W):
        d = self.n_features_in_
        if W.ndim == 1:
            W = W[:, None]
        self.coef_ = W[:d].T.copy()
        self.intercept_ = W[d].copy() if self.fit_intercept else np.zeros(W.shape[1])

    def decision_function(self, X):
        """Confidence scores: the linear predictions of the released model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) for two classes, else (n_samples, n_classes)
        """
        scores = self._decision(X)
        return scores.ravel() if scores.shape[1] == 1 else scores

    def predict(self, X):
        """Predict class labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        scores = self.decision_function(X)
        idx = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(axis=1)
        return self.classes_[idx]

    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba`, computed stably.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return np.column_stack(
                [special.log_expit(-scores), special.log_expit(scores)]
            )
        return special.log_softmax(scores, axis=1)

    def predict_proba(self, X):
        """Class probabilities: sigmoid (two classes) or softmax (K classes).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Rows sum to 1; columns follow ``classes_``.
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            p = special.expit(scores)
            return np.column_stack([1.0 - p, p])
        return special.softmax(scores, axis=1)
