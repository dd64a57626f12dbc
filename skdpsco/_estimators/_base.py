"""The fit skeleton shared by every skdpsco linear model.

``fit`` always goes: validate the data; encode the target; look up the chosen
algorithm's registry entry (:mod:`._algorithm`) and check the privacy parameters
against its requirements and the public ``n``; draw a ``numpy.random.Generator``;
release the scaling statistics and hand what is left of the budget
(:mod:`skdpsco.privacy._budget`) to the algorithm's runner in one
:class:`~._algorithm.FitProblem`; compose what ran into ``privacy_spent_`` and
refuse to release if it exceeds the ask; store the fitted attributes. Prediction
is post-processing of the released parameters.
"""

import dataclasses
import math
import warnings
from dataclasses import dataclass, field

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
from .._solvers._progress import NO_PROGRESS, Progress
from ..exceptions import PrivacyBudgetError
from ..privacy._budget import AlgorithmBudget
from ..privacy._discrete import make_generator
from ..privacy._ledger import spent_within
from ..privacy._params import (
    COMMON_FIT_CONSTRAINTS,
    PRIVACY_PARAMETER_CONSTRAINTS,
    check_privacy_params,
)
from ..privacy._workflow import warn_workflow_leaks
from ..utils._compat import StrOptions, _fit_context, check_is_fitted, validate_data
from ..utils._optional import import_dask, is_dask_collection
from ..utils._validation import (
    canonical_sparse,
    checked_sample_weight,
    refuse_fit_params,
    refuse_sparse,
)
from ._algorithm import FitProblem
from ._dask_fit import DaskInput, dask_class_codes, dask_score, lazy_rows

__all__ = [
    "DPClassifierMixin",
    "DPLinearModel",
    "DPRegressorMixin",
    "SCALING_PARAM_DOC",
    "checked_penalty",
]

#: The documentation site; an estimator's HTML repr links to its API page there
#: (``doc/api.rst`` generates one page per public estimator under ``generated/``).
DOCS_URL = "https://skdpsco.readthedocs.io/en/stable/"

#: Input dtypes kept in the release, as scikit-learn's linear models do: the fit
#: computes in float64 (the noise and its privacy analysis are float64), and
#: ``coef_``, ``intercept_`` and predictions are cast to float32 for float32
#: input (post-processing of the release).
_RELEASE_DTYPES = (np.float64, np.float32)


def checked_penalty(penalty, estimator, parameter):
    """The mean-scaled ridge ``penalty`` that ``parameter`` of ``estimator`` gives,
    refused outside the normal float range.

    ``alpha / n`` or ``1 / (C n)`` can overflow to ``inf`` or fall below the
    smallest normal float for extreme but valid values; the solvers would then
    divide by zero, overflow or release NaN coefficients. Public numbers only
    (the parameter, ``n``, ``d``): every neighbour gets the same error.
    """
    if penalty == 0 or np.finfo(float).tiny <= penalty < math.inf:
        return penalty
    value = getattr(estimator, parameter)
    raise ValueError(
        f"{type(estimator).__name__}: {parameter}={value!r} gives the mean-scaled "
        f"ridge penalty {penalty:.3g}, outside the normal float range; choose a "
        f"less extreme {parameter}."
    )


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
        of shape ``(n_features,)`` (or scalars) used for the features (a nonzero
        ``center`` needs dense ``X``: sparse input is never centred); the target
        of a regressor is still scaled privately."""


@dataclass(frozen=True)
class _Scalings:
    """The feature scaling in the fit's units and as released, and the target's
    released ``(center, scale)`` (regressors)."""

    fit: object
    released: object
    target: tuple | None = None


@dataclass(frozen=True)
class _Scaled:
    """What :meth:`DPLinearModel._scale` hands on: the data in the fit's units,
    the algorithm's budget, the scalings and the scaling's records. ``shared``
    says whether the scaling took a share of the budget."""

    X: object
    target: np.ndarray
    budget: AlgorithmBudget
    scalings: _Scalings | None = None
    records: list = field(default_factory=list)
    shared: bool = False


class DPLinearModel(BaseEstimator):
    """Base class: the private fit skeleton of a linear model.

    ``fit`` is the only place that validates, scales, runs the algorithm, gates
    the release and stores the result. A family provides ``_ALGORITHMS`` (its
    registry of :class:`~._algorithm.Algorithm` entries, whose ``run(problem)``
    returns a ``SolverResult``), the mixins
    ``_encode_target(y)`` (the encoded target and the number of outputs) and
    ``_store_coef(W)``; hooks: ``_resolved_algorithm(n_outputs)``,
    ``_check_supported(algorithm)`` and ``_standardise(X, scaling)``.
    """

    _parameter_constraints: dict = {
        **PRIVACY_PARAMETER_CONSTRAINTS,
        **COMMON_FIT_CONSTRAINTS,
        "scaling": [StrOptions({"private", "none"}), tuple],
        "verbose": ["verbose"],
    }

    #: The family's algorithm registry, ``{name: Algorithm}`` (:mod:`._algorithm`).
    _ALGORITHMS: dict = {}
    #: Classifiers encode labels; regressors scale their target.
    _is_dp_classifier = False
    #: Whether scipy.sparse X is supported end to end.
    _accept_sparse = False
    #: Whether ``scaling="private"`` releases one scale for all features of sparse
    #: input (rows of norm about 1, as row-norm bounds expect).
    _shared_scale = False
    #: Whether the standardised columns are further divided by sqrt(d), so that
    #: rows have l2 norm about 1 (for a public row-norm bound of order 1).
    _unit_rows = False

    # The HTML repr (scikit-learn >= 1.3) links to the estimator's API page.
    _doc_link_module = "skdpsco"
    _doc_link_template = DOCS_URL + "generated/{estimator_module}.{estimator_name}.html"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self._accept_sparse
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, **fit_params):
        """Fit the model with the stated ``(epsilon, delta)`` guarantee.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data. No bound on its values is assumed or read.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets (several columns for a regressor: one model per column).
        **fit_params : dict
            Not supported (``sample_weight`` included): a clear error says why.

        Returns
        -------
        self : object
            Fitted estimator, with ``privacy_spent_`` recording what the fit spent.
            If the fit raises, the estimator is left exactly as it was (a refit
            that fails does not half-overwrite a previous release).

        Warns
        -----
        PrivacyLeakWarning
            When the call stack shows a leak the estimator's budget does not
            cover: a scikit-learn ``Pipeline`` step before it that learns from the
            data without a budget, or scikit-learn's search / cross-validation,
            whose fits compose (see the "Budgets of whole workflows" page).
        """
        refuse_fit_params(self, fit_params)
        return self._guarded_fit(X, y, None)

    def _guarded_fit(self, X, y, sample_weight):
        """:meth:`_fit` under a fixed floating-point error state, restoring the
        estimator if it raises."""
        # From the call stack only (code and public configuration): the same
        # warnings for every pair of neighbouring datasets.
        warn_workflow_leaks(self)
        state = dict(self.__dict__)
        try:
            # Floating-point events (an underflow on a subnormal record, an
            # overflow near the float range) must not depend on the data through
            # the caller's numpy error state: a warning or an exception on one
            # neighbour and not the other would be a release. Every bound and
            # finiteness check of the fit is explicit.
            with np.errstate(all="ignore"):
                return self._fit(X, y, sample_weight)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(state)
            raise

    def _fit(self, X, y, sample_weight=None):
        # dask collections: the same steps, nothing of length n on the client.
        dask = (
            DaskInput(self) if is_dask_collection(X) or is_dask_collection(y) else None
        )
        if dask is None:
            X, y = self._validate_training_data(X, y)
        else:
            X, y = dask.validate(X, y)
        dtype = X.dtype
        X = X.astype(np.float64, copy=False)
        if sample_weight is not None and dask is not None:
            sample_weight = dask.sample_weight(sample_weight, X.shape[0])
        elif sample_weight is not None:
            sample_weight = checked_sample_weight(sample_weight, X, self)
        target, n_outputs = self._encode_target(y)
        algorithm = self._algorithm(n_outputs)
        if dask is not None:
            dask.check_supported(algorithm)
        if self.verbose and self.algorithm != algorithm.name:
            print(
                f"[{type(self).__name__}] algorithm={self.algorithm!r} runs "
                f"{algorithm.name!r}: {self._auto_reason(n_outputs)}"
            )
        self._check_supported(algorithm)
        if sample_weight is not None:
            self._check_sample_weight_supported(algorithm)
        budget = check_privacy_params(
            self,
            X.shape[0],
            requires_delta=algorithm.requires_delta,
            min_samples=algorithm.min_samples,
            method=self.algorithm,
        )
        rng = make_generator(self.random_state)
        accountant = algorithm.accountant_for(budget.delta)
        scaled = self._scale(X, target, budget, accountant, rng)
        if dask is not None:
            scaled, sample_weight = dask.placed(scaled, sample_weight)
        scalings = scaled.scalings
        problem = FitProblem(
            self,
            scaled.X,
            scaled.target,
            n_outputs,
            scaled.budget,
            rng,
            # A released row statistic the algorithm may use as a public bound.
            released_row_nnz=None if scalings is None else scalings.fit.row_nnz,
            sample_weight=sample_weight,
            progress=self._progress(algorithm, budget, scaled.records),
        )
        try:
            result = self._run(algorithm, problem, accountant)
        except PrivacyBudgetError as exc:
            if not scaled.shared:
                raise
            raise PrivacyBudgetError(
                f"{exc} The algorithm gets what the private scaling leaves of "
                f"epsilon={budget.epsilon:g}; scaling='none' (data already on a "
                "public scale) leaves it all to the algorithm."
            ) from exc
        records = [*scaled.records, *result.records]
        spent = spent_within(records, budget, type(self).__name__)
        self._store(result, scalings, spent, dtype)
        if self.verbose:
            # Public numbers only: the calibration, never a data-dependent value.
            print(
                f"[{type(self).__name__}] algorithm={algorithm.name!r}: released "
                f"after {int(np.max(result.n_iter))} iterations; epsilon spent "
                f"{spent.epsilon:.4g} of {budget.epsilon:.4g}"
            )
        return self

    @staticmethod
    def _run(algorithm, problem, accountant):
        """Run ``algorithm`` on ``problem``: once, or for a 2-D target (a
        multi-output regression) once per column, composed.

        The columns' runs are ``k`` separate mechanisms on the same records,
        each with the share of the algorithm's budget whose ``k``-fold
        composition is the whole (:meth:`AlgorithmBudget.per_output`: zCDP
        ``rho / k`` each, Bun & Steinke 2016, Lemma 2.3; GDP ``mu / sqrt(k)``,
        Dong, Roth & Su 2022, Cor 3.3; ``(epsilon / k, delta / k)`` by basic
        composition, Dwork & Roth 2014, Thm 3.16). Every run's records go to
        the ledger, which composes them again and gates the release.
        """
        if problem.target.ndim == 1:
            return algorithm.run(problem)
        k = problem.target.shape[1]
        budget = problem.budget.per_output(accountant, k)
        results = []
        for j in range(k):
            run = dataclasses.replace(
                problem,
                target=_column(problem.target, j),
                budget=budget,
            )
            results.append(algorithm.run(run))
            problem.progress.completed(results[-1].records)
        records = [
            dataclasses.replace(record, name=f"output {j}: {record.name}")
            if k > 1
            else record
            for j, result in enumerate(results)
            for record in result.records
        ]
        return dataclasses.replace(
            results[0],
            coef=np.column_stack([np.asarray(r.coef, dtype=float) for r in results]),
            n_iter=tuple(int(r.n_iter) for r in results),
            records=records,
        )

    def _check_sample_weight_supported(self, algorithm):
        """Refuse ``sample_weight`` with an algorithm whose sensitivity
        analysis does not cover weighted records, naming those that do."""
        if "sample_weight" in algorithm.supports:
            return
        supported = [
            name
            for name, entry in self._ALGORITHMS.items()
            if "sample_weight" in entry.supports
        ]
        raise ValueError(
            f"{type(self).__name__}: sample_weight is not supported by "
            f"algorithm={algorithm.name!r} (its sensitivity analysis assumes "
            f"unweighted records); use one of {supported}."
        )

    def _progress(self, algorithm, budget, records):
        """The reporter of the iterative solvers: silent unless ``verbose``."""
        if not self.verbose:
            return NO_PROGRESS
        return Progress(
            type(self).__name__,
            algorithm.name,
            budget.epsilon,
            budget.delta,
            records,
            self.verbose,
        )

    def _validate_training_data(self, X, y):
        """``X`` as float64 or float32 (sparse: canonical CSR/CSC where
        supported) and ``y`` (2-D for a multi-output regressor), with the clear
        refusals of unsupported input."""
        refuse_sparse(self, X)
        X, y = validate_data(
            self,
            X,
            y,
            accept_sparse=("csr", "csc") if self._accept_sparse else False,
            dtype=_RELEASE_DTYPES,
            multi_output=not self._is_dp_classifier,
            y_numeric=not self._is_dp_classifier,
            ensure_min_samples=2,
        )
        if sp.issparse(X):
            X = canonical_sparse(X, type(self).__name__)
        return X, y

    def _algorithm(self, n_outputs):
        """The registry entry (:class:`~._algorithm.Algorithm`) of the chosen
        ``algorithm`` (``"auto"`` resolved from public facts only)."""
        return self._ALGORITHMS[self._resolved_algorithm(n_outputs)]

    def _resolved_algorithm(self, n_outputs):
        """The chosen algorithm's name (a family with ``"auto"`` resolves it)."""
        return self.algorithm

    def _auto_reason(self, n_outputs):
        """Why ``"auto"`` resolved as it did (a family with ``"auto"`` says)."""
        return "the family's default"

    def _check_supported(self, algorithm):
        """Refuse, before any data is used, parameters ``algorithm`` does not
        support."""
        if self.max_iter is not None and "max_iter" not in algorithm.supports:
            raise ValueError(
                f"{type(self).__name__}(algorithm={algorithm.name!r}) makes a "
                "number of passes over the data that its theorem fixes (public, "
                f"always run in full); leave max_iter=None, got {self.max_iter!r}."
            )

    def _store(self, result, scalings, spent, dtype=np.float64):
        """The released model and what it cost, as fitted attributes (every
        value is the noisy output or post-processing of it).

        ``coef_`` and ``intercept_`` take the input's ``dtype`` (float32 input
        gives a float32 model, as in scikit-learn); ``n_iter_`` is an array of
        shape (1,), as ``LogisticRegression``'s (one fit of all outputs), or
        ``(k,)`` for a regressor's ``k`` targets fitted one by one (as ``Ridge``'s)."""
        self._store_scaling(scalings)
        coef = np.asarray(result.coef, dtype=float)
        if scalings is not None:
            coef = self._unscaled(coef, scalings)
        self._store_coef(coef)
        if dtype == np.float32:
            self.coef_ = self.coef_.astype(np.float32)
            self.intercept_ = np.asarray(self.intercept_, dtype=np.float32)[()]
        for name, value in result.attributes.items():
            setattr(self, name, value)
        self.n_iter_ = np.atleast_1d(np.asarray(result.n_iter, dtype=np.int32))
        self.privacy_spent_ = spent

    def _unscaled(self, coef, scalings):
        """``coef`` in the original units (:func:`unscale_coef`, column by
        column for a multi-output regression, each with its target's scale)."""
        if (
            coef.ndim == 1
            or scalings.target is None
            or np.ndim(scalings.target[0]) == 0
        ):
            return unscale_coef(
                coef,
                scalings.fit,
                *(scalings.target or (0.0, 1.0)),
                fit_intercept=self.fit_intercept,
            )
        centers, scales = scalings.target
        return np.column_stack(
            [
                unscale_coef(
                    coef[:, j],
                    scalings.fit,
                    centers[j],
                    scales[j],
                    fit_intercept=self.fit_intercept,
                )
                for j in range(coef.shape[1])
            ]
        )

    def _scale(self, X, target, budget, accountant, rng):
        """Release the scaling statistics and standardise (see ``scaling``).

        Returns a :class:`_Scaled`: the standardised data (or a design folding
        the scaling in) and target, the :class:`AlgorithmBudget` left for the
        algorithm, the scalings and the scaling's ledger records. The shares
        spent are public functions of ``n``, ``d`` and the budget. A classifier
        that reads its label counts (``class_weight="balanced"``) releases them
        first, from their own public share, composed with the scaling's.
        """
        labels = self._label_count_share()
        if isinstance(self.scaling, str) and self.scaling == "none":
            if not labels:
                return _Scaled(X, target, budget.for_algorithm(accountant))
            split = budget.split_with_scaling(accountant, labels)
            records = self._release_label_counts(target, split.scaling, rng)
            return _Scaled(
                X,
                target,
                split.algorithm,
                records=self._composed(records, budget, split, "label counts"),
                shared=True,
            )
        n, d = X.shape
        regression = not self._is_dp_classifier
        public = not isinstance(self.scaling, str)
        if public:
            x_scaling = self._public_feature_scaling(d, sp.issparse(X))
            if not regression and not labels:
                fit_scaling = self._fit_units(x_scaling, d)
                return _Scaled(
                    self._standardise(X, fit_scaling),
                    target,
                    budget.for_algorithm(accountant),
                    _Scalings(fit_scaling, x_scaling),
                )
        if public and not regression:
            share, y_share = 0.0, 0.0
        else:
            share, y_share = self._scaling_shares(
                n, 0 if public else d, budget, accountant
            )
        split = budget.split_with_scaling(accountant, share + labels)
        spend, records = split.scaling, []
        if labels:
            # The label counts and the scaling split the scaling's spend in the
            # public ratio of their shares (zCDP and epsilon add up).
            ratio = labels / (share + labels)
            records += self._release_label_counts(
                target, {k: v * ratio for k, v in spend.items()}, rng
            )
            spend = {k: v * (1.0 - ratio) for k, v in spend.items()}
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
        fit_scaling = self._fit_units(x_scaling, d)
        y_stats = None
        if regression:
            target, y_stats, y_records = self._scale_target(
                target, rng, {k: v * y_share for k, v in spend.items()}
            )
            records += y_records
        return _Scaled(
            self._standardise(X, fit_scaling),
            target,
            split.algorithm,
            _Scalings(fit_scaling, x_scaling, y_stats),
            self._composed(records, budget, split),
            shared=True,
        )

    @staticmethod
    def _composed(records, budget, split, name="private scaling"):
        """The ledger records of what the scaling share released."""
        if not budget.is_private:
            # The hidden testing mode: noise-free statistics, nothing to account.
            return []
        if split.scaling_record is not None:
            # Basic composition: the scaling as one (eps_s, delta_s) mechanism.
            name = f"{name} ({len(records)} mechanisms)"
            return [dataclasses.replace(split.scaling_record, name=name)]
        return records

    def _label_count_share(self):
        """The public share of the budget spent on private label counts (0: the
        fit reads none)."""
        return 0.0

    def _release_label_counts(self, target, spend, rng):
        """Release the label counts with ``spend`` (``{"rho": ...}`` or
        ``{"epsilon": ...}``); returns their ledger records. Only estimators
        with a nonzero :meth:`_label_count_share` are asked: here, none."""
        return []

    def _scale_target(self, target, rng, budget):
        """The standardised target, its released ``(center, scale)`` (arrays of
        one entry per column for a 2-D target) and the release's records.

        Each of the ``k`` columns is scaled by its own release with ``1 / k`` of
        ``budget``: the composition of the ``k`` releases spends ``budget``
        (zCDP adds, Bun & Steinke 2016, Lemma 2.3; pure epsilon adds, Dwork &
        Roth 2014, Thm 3.16).
        """
        columns = target[:, None] if target.ndim == 1 else target
        k = columns.shape[1]
        share = {key: value / k for key, value in budget.items()}
        out = []
        centers, scales, records = [], [], []
        for j in range(k):
            y_scaling = private_column_scaling(
                columns[:, j : j + 1],
                rng,
                center=bool(self.fit_intercept),
                name="target" if k == 1 else f"target {j}",
                **share,
            )
            records += y_scaling.records
            centers.append(float(y_scaling.center[0]))
            scales.append(float(y_scaling.scale[0]))
            column = columns[:, j : j + 1]
            if is_dask_collection(column):
                # Lazily, chunk by chunk (the same map of each value).
                out.append(column.map_blocks(y_scaling.transform, dtype=float)[:, 0])
            else:
                out.append(y_scaling.transform(column)[:, 0])
        if target.ndim == 1:
            return out[0], (centers[0], scales[0]), records
        stack = import_dask("array").stack if is_dask_collection(target) else np.stack
        return stack(out, axis=1), (np.array(centers), np.array(scales)), records

    def _public_feature_scaling(self, n_features, sparse=False):
        """``scaling=(center, scale)``, checked (public arrays and the public
        input format ``sparse``, no data read)."""
        name = type(self).__name__
        if len(self.scaling) != 2:
            raise ValueError(
                f"{name}: scaling must be 'private', 'none' or a tuple "
                "(center, scale) of public arrays."
            )
        x_scaling = public_scaling(*self.scaling, n_features, name)
        if not self.fit_intercept and np.any(x_scaling.center != 0):
            # (x - c) w / s needs the intercept -c w / s, which a model
            # without one cannot release: its predictions would be off by it.
            raise ValueError(
                f"{name}: scaling=(center, scale) with a nonzero center needs "
                "fit_intercept=True (a centred model has an intercept); pass "
                "center=0 or fit_intercept=True."
            )
        if sparse and np.any(x_scaling.center != 0):
            # Sparse input is scaled, never centred (the zeros stay zeros): a
            # centre would be ignored by the fit yet shift the released
            # intercept by -c w . coef (unscale_coef), in every family.
            raise ValueError(
                f"{name}: scaling=(center, scale) with a nonzero center needs "
                "dense X (sparse input is scaled without centring); pass "
                "center=0 or dense X."
            )
        return x_scaling

    def _fit_units(self, x_scaling, n_features):
        """The scaling the fit uses: the released one, with every standardised
        column further divided by ``sqrt(d)`` in the families whose public row
        bound is of order 1 (rows of l2 norm about 1)."""
        if self._unit_rows:
            return x_scaling.rescaled(math.sqrt(n_features))
        return x_scaling

    def _scaling_shares(self, n, n_located, budget, accountant):
        """``(share, target_share)``: the scaling's public share of the budget
        and the target's part of it (:func:`scaling_share`), with a warning where
        the scaling cannot be expected to locate the data."""
        regression = not self._is_dp_classifier
        if not budget.is_private:
            return scaling_share(n, n_located, math.inf, regression)
        if budget.delta == 0:
            public = n_located == 0
            return MAX_SCALING_SHARE, 1.0 if public else 0.5 * regression
        # The shares follow the zCDP budget of (epsilon, delta): public numbers.
        rho = budget.zcdp("zcdp" if accountant == "zcdp" else "gdp")
        if scaling_is_underpowered(n, n_located, rho, regression):
            warnings.warn(
                f"{type(self).__name__}: at n_samples={n}, epsilon="
                f"{budget.epsilon:g} the private scaling cannot be expected to "
                "locate "
                + ("the target" if regression else "the features")
                + " (too few records for this budget: noise dominates), and "
                "the model may be worse than a trivial one (a constant). Use "
                "more data or a larger epsilon, or scaling=(center, scale) / "
                "'none' with public knowledge of the units.",
                UserWarning,
                stacklevel=6,
            )
        return scaling_share(n, n_located, rho, regression)

    def _standardise(self, X, x_scaling):
        """The standardised data handed to the runner: a copy of ``X``
        here; a family whose solvers take a design may fold the scaling into
        it instead (no copy)."""
        return x_scaling.transform(X)

    def _store_scaling(self, scalings):
        """Released scaling statistics as fitted attributes (post-processing)."""
        classifier = self._is_dp_classifier
        if scalings is None:
            self.feature_center_ = self.feature_scale_ = None
            self.feature_located_ = None
            if not classifier:
                self.target_center_ = self.target_scale_ = None
            return
        # The statistics as released (without the fit's internal unit-row factor).
        released = scalings.released
        self.feature_center_ = released.center
        self.feature_scale_ = released.scale
        self.feature_located_ = released.located
        if not classifier:
            self.target_center_, self.target_scale_ = scalings.target or (None, None)

    def _decision(self, X):
        X, dtype = self._prediction_input(X, self._accept_sparse)
        return np.asarray(X @ self._dense_coef().T + self.intercept_).astype(
            dtype, copy=False
        )

    def _prediction_input(self, X, accept_sparse):
        """``X`` validated, in float64, and the dtype of the predictions: that
        of ``X @ coef_`` as in scikit-learn (float32 only for float32 input to a
        float32 model); the products are computed in float64."""
        check_is_fitted(self)
        X = validate_data(
            self,
            X,
            accept_sparse=("csr", "csc") if accept_sparse else False,
            dtype=_RELEASE_DTYPES,
            reset=False,
        )
        return X.astype(np.float64, copy=False), np.result_type(
            X.dtype, self.coef_.dtype
        )

    def _dense_coef(self):
        """``coef_`` as a dense array (classifiers may hold it sparse, see
        ``sparsify``)."""
        return self.coef_.toarray() if sp.issparse(self.coef_) else self.coef_


def _column(target, j):
    """Column ``j`` of a 2-D target: contiguous in memory, lazy for dask."""
    column = target[:, j]
    return column if is_dask_collection(column) else np.ascontiguousarray(column)


class _DaskScored:
    """``score`` of scikit-learn's mixins (R^2 for regressors, accuracy for
    classifiers), and on dask input the same score computed on the cluster."""

    def score(self, X, y, sample_weight=None):
        """The score of scikit-learn's ``Ridge`` (R^2) or ``LogisticRegression``
        (accuracy): a float, computed on the cluster for dask input.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        float
        """
        if is_dask_collection(X) or is_dask_collection(y):
            return dask_score(self, X, y, sample_weight)
        return super().score(X, y, sample_weight)


class DPRegressorMixin(_DaskScored, RegressorMixin):
    """Linear regression output, like ``Ridge``: ``coef_`` of shape (d,) and a
    scalar ``intercept_``, or for a 2-D target of ``k > 1`` columns ``coef_`` of
    shape (k, d) and ``intercept_`` of shape (k,)."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # DP noise makes scores on tiny datasets legitimately poor.
        tags.regressor_tags.poor_score = True
        tags.target_tags.multi_output = True
        return tags

    def _encode_target(self, y):
        # One run per column of a 2-D target (DPLinearModel._run).
        if is_dask_collection(y):
            return y.astype(float), 1
        return np.asarray(y, dtype=float), 1

    def _store_coef(self, W):
        # Ridge's shapes: a one-column 2-D target gives coef_ (d,) and
        # intercept_ (1,); without an intercept, intercept_ is 0.0 throughout.
        d = self.n_features_in_
        if not self.fit_intercept:
            self.intercept_ = 0.0
        else:
            self.intercept_ = float(W[d]) if W.ndim == 1 else W[d].copy()
        coef = W[:d]
        if W.ndim == 2:
            coef = coef[:, 0] if W.shape[1] == 1 else coef.T
        self.coef_ = coef.copy()

    def predict(self, X):
        """Predict with the released linear model (post-processing, no privacy cost).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_targets)
            A lazy dask array for dask ``X`` (mapped over its row chunks).
        """
        if is_dask_collection(X):
            outputs = None if np.ndim(self.coef_) == 1 else self.coef_.shape[0]
            return lazy_rows(self.predict, X, outputs)
        return self._decision(X)


class DPClassifierMixin(_DaskScored, ClassifierMixin):
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
        if is_dask_collection(y):
            return dask_class_codes(self, y)
        check_classification_targets(y)
        classes = self._fitted_classes(np.unique(y))
        codes = np.searchsorted(classes, y)
        if classes.size == 2:
            return codes.astype(float), 1
        return codes.astype(np.intp), int(classes.size)

    def _fitted_classes(self, labels):
        """Set and return ``classes_`` from the sorted unique ``labels`` of ``y``
        (the public ``classes`` where given)."""
        if self.classes is None:
            classes = labels
            if classes.dtype.kind == "f":
                # -0.0 and 0.0 are one label; which sign np.unique keeps depends
                # on the records' order (and on a dask chunking): release 0.0.
                classes = classes + 0.0
        else:
            classes = np.unique(np.asarray(self.classes))
            unknown = np.setdiff1d(labels, classes)
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
        return classes

    def _store_coef(self, W):
        d = self.n_features_in_
        if W.ndim == 1:
            W = W[:, None]
        self.coef_ = W[:d].T.copy()
        self.intercept_ = W[d].copy() if self.fit_intercept else np.zeros(W.shape[1])

    def sparsify(self):
        """Store ``coef_`` as a scipy.sparse CSR matrix, as scikit-learn's linear
        classifiers do (post-processing of the release: no privacy cost).

        Predictions are unchanged; with many zero coefficients (an l1 constraint,
        the sparse-gradient family) the model takes less memory.

        Returns
        -------
        self : object
        """
        check_is_fitted(self)
        self.coef_ = sp.csr_matrix(self._dense_coef())
        return self

    def densify(self):
        """Store ``coef_`` as a dense array again (undoes :meth:`sparsify`).

        Returns
        -------
        self : object
        """
        check_is_fitted(self)
        self.coef_ = np.asarray(self._dense_coef())
        return self

    def decision_function(self, X):
        """Confidence scores: the linear predictions of the released model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) for two classes, else (n_samples, n_classes)
            A lazy dask array for dask ``X`` (mapped over its row chunks).
        """
        if is_dask_collection(X):
            columns = None if self.classes_.size == 2 else self.classes_.size
            return lazy_rows(self.decision_function, X, columns)
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
            A lazy dask array for dask ``X``.
        """
        if is_dask_collection(X):
            return lazy_rows(self.predict, X, None, self.classes_.dtype)
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
            A lazy dask array for dask ``X``.
        """
        if is_dask_collection(X):
            return lazy_rows(self.predict_log_proba, X, self.classes_.size)
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
            Rows sum to 1; columns follow ``classes_``. A lazy dask array for
            dask ``X``.
        """
        if is_dask_collection(X):
            return lazy_rows(self.predict_proba, X, self.classes_.size)
        scores = self.decision_function(X)
        if scores.ndim == 1:
            p = special.expit(scores)
            return np.column_stack([1.0 - p, p])
        return special.softmax(scores, axis=1)
