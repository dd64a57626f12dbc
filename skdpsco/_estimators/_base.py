"""The fit skeleton shared by every skdpsco linear model.

``fit`` always goes: validate the data; encode the target; check the privacy
parameters against the public ``n``; draw a ``numpy.random.Generator``; let the
subclass assemble its (loss, oracle, solver) and run it; compose what ran into
``privacy_spent_`` and refuse to release if it exceeds the ask; store the fitted
attributes. Prediction is post-processing of the released parameters.
"""

import math
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from scipy import special
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets

from ..exceptions import PrivacyBudgetError
from ..privacy._accounting import gaussian_rho_budget
from ..privacy._ledger import PrivacySpent
from ..privacy._params import (
    COMMON_FIT_CONSTRAINTS,
    PRIVACY_PARAMETER_CONSTRAINTS,
    check_privacy_params,
)
from ..utils._compat import _fit_context, check_is_fitted, validate_data

__all__ = ["DPClassifierMixin", "DPLinearModel", "DPRegressorMixin", "make_generator"]


def make_generator(random_state):
    """``numpy.random.Generator`` from a scikit-learn style ``random_state``.

    ``None`` draws fresh OS entropy (the right choice in production: a fixed seed
    makes the noise reproducible by anyone who knows it); an int gives bit-for-bit
    reproducible fits; a ``RandomState`` seeds a Generator from its stream; a
    ``Generator`` is used as is.
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, Integral):
        return np.random.default_rng(int(random_state))
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1, size=4))
    raise ValueError(f"Cannot make a Generator from random_state={random_state!r}.")


class DPLinearModel(BaseEstimator):
    """Base class: the private fit skeleton of a linear model.

    Subclasses provide ``_encode_target(y)`` (returns the encoded target and the
    number of outputs), ``_run_algorithm(design, target, n_outputs, budget, rng)``
    (returns a ``SolverResult``) and ``_algorithm_requirements()``.
    """

    _parameter_constraints: dict = {
        **PRIVACY_PARAMETER_CONSTRAINTS,
        **COMMON_FIT_CONSTRAINTS,
    }

    #: Whether scipy.sparse X is supported end to end.
    _accept_sparse = False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self._accept_sparse
        return tags

    def _algorithm_requirements(self):
        """``(requires_delta, min_samples)`` of the chosen algorithm."""
        return True, 2

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
        result = self._run_algorithm(X, target, n_outputs, budget, rng)
        spent = PrivacySpent.from_records(result.records, budget.delta)
        if spent.epsilon > budget.epsilon:
            raise PrivacyBudgetError(
                f"{type(self).__name__}: the mechanisms that ran spend epsilon="
                f"{spent.epsilon:.6g} > epsilon={budget.epsilon:.6g}; nothing is "
                "released. This is a bug; please report it."
            )
        self._store_coef(np.asarray(result.coef, dtype=float))
        self.n_iter_ = int(result.n_iter)
        self.privacy_spent_ = spent
        return self

    def _gaussian_budget(self, budget, all_gaussian=True):
        """Total zCDP budget for the fit's mechanisms (``inf`` in the testing mode)."""
        if not budget.is_private:
            return math.inf
        return gaussian_rho_budget(
            budget.epsilon, budget.delta, "gdp" if all_gaussian else "zcdp"
        )

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


def refuse_fit_params(estimator, fit_params):
    """A clear error for ``fit(..., sample_weight=...)`` and other fit parameters.

    Per-record weights chosen by the caller change the sensitivity of every
    mechanism (one heavy record moves the statistic by its weight), so the
    estimators take none; :class:`~skdpsco.HeavyTailedDPLogistic` accepts
    ``class_weight``, a public per-class table whose effect is accounted.
    """
    if fit_params:
        raise TypeError(
            f"{type(estimator).__name__}.fit() does not accept "
            f"{', '.join(sorted(fit_params))}: per-record weights would change the "
            "sensitivity of its privacy mechanisms, so they are not supported "
            "(a classifier's public class_weight is, where available)."
        )


def refuse_sparse(estimator, X):
    """A clear error for scipy.sparse input to an estimator that needs dense X."""
    if not getattr(estimator, "_accept_sparse", False) and sp.issparse(X):
        raise TypeError(
            f"{type(estimator).__name__} does not support sparse input (densifying "
            "it could exhaust memory). SparseGradientDPRegressor / "
            "SparseGradientDPClassifier and the GaussianWidthDP estimators accept "
            "scipy.sparse matrices as they are."
        )


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
