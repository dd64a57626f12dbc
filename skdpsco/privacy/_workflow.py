"""Budgets of whole workflows: what a Pipeline, a search or a cross-validation spent.

:func:`total_privacy_spent` walks fitted scikit-learn objects (pipelines, column
transformers, searches, ``cross_validate`` results), collects the
:class:`~skdpsco.privacy._ledger.PrivacySpent` of every private step and composes
them; a step that learns from the data without a budget is a leak it warns about.

:func:`warn_workflow_leaks` is the fit-time side: a DP estimator's ``fit`` reads
the call stack (code, never data) and warns when it runs after a step that
learns without a budget or inside scikit-learn's search / cross-validation
machinery, whose fits compose.
"""

import math
import sys
import warnings
from collections.abc import Iterable

from ..exceptions import PrivacyLeakWarning
from ._ledger import PrivacySpent
from ._records import MechanismRecord

__all__ = ["total_privacy_spent", "warn_workflow_leaks"]


_INDEX_SPLITTERS = frozenset(
    {
        "KFold",
        "RepeatedKFold",
        "ShuffleSplit",
        "LeaveOneOut",
        "LeavePOut",
        "PredefinedSplit",
        "TimeSeriesSplit",
    }
)


def _is_skipped_step(step):
    return step is None or isinstance(step, str)  # None, "passthrough", "drop"


def _sub_estimators(obj, *, fitted):
    """``[(name, estimator)]`` of a Pipeline / FeatureUnion / ColumnTransformer.

    All of them fit every sub-estimator once on the same records (a
    ColumnTransformer on some columns of the same rows). None for other objects.
    """
    steps = getattr(obj, "steps", None)
    if steps is not None and not isinstance(obj, dict):
        return [(name, step) for name, step in steps]
    transformer_list = getattr(obj, "transformer_list", None)
    if transformer_list is not None:
        return [(name, step) for name, step in transformer_list]
    if hasattr(obj, "transformers") and hasattr(obj, "remainder"):
        if fitted:
            if not hasattr(obj, "transformers_"):
                raise TypeError(
                    f"{type(obj).__name__} is not fitted: fit it before totalling "
                    "its privacy spend."
                )
            return [(name, step) for name, step, _ in obj.transformers_]
        subs = [(name, step) for name, step, _ in obj.transformers]
        return subs + [("remainder", obj.remainder)]
    return None


def _learns_without_budget(step):
    """A fitted step that learns from the data outside any DP mechanism.

    Such a step (scikit-learn's ``StandardScaler``, ``PCA``, an encoder) stores
    exact statistics of the records, released with the model, and makes every
    transformed row depend on every record, which voids the guarantee of the DP
    steps after it.
    """
    return _learning_reason(step) is not None


#: The transformers scikit-learn ships whose ``fit`` learns nothing from the
#: records (it only checks the input): matched by exact type, since a subclass may
#: learn. scikit-learn's ``requires_fit`` tag is not enough: a
#: ``GaussianProcessRegressor`` has it false yet stores every training row.
_STATELESS = ("Normalizer", "Binarizer", "FeatureHasher", "HashingVectorizer")


def _stateless_problem(step):
    """None if ``step`` is not one of the stateless transformers; ``""`` if it
    is and releases nothing; else why it is refused.

    ``FunctionTransformer`` applies a public function; with an ``inverse_func``
    and ``check_inverse=True`` its ``fit`` warns or not depending on a sample of
    the records (a warning on one neighbouring dataset only is a release).
    """
    import sklearn.feature_extraction as fx
    import sklearn.feature_extraction.text as text
    import sklearn.preprocessing as pre

    name = type(step).__name__
    if type(step) is pre.FunctionTransformer:
        if step.inverse_func is not None and step.check_inverse:
            return (
                "FunctionTransformer(inverse_func=..., check_inverse=True) warns "
                "or not depending on the records when the inverse is inexact: "
                "pass check_inverse=False"
            )
        return ""
    classes = {"FeatureHasher": fx.FeatureHasher, "HashingVectorizer": None}
    classes["HashingVectorizer"] = text.HashingVectorizer
    classes.update(Normalizer=pre.Normalizer, Binarizer=pre.Binarizer)
    if name in _STATELESS and type(step) is classes[name]:
        return ""
    return None


def _learning_reason(step):
    """Why ``step`` (without a budget) would leak the records; None if it does not.

    The one test of "public step" that both :func:`total_privacy_spent` and
    :class:`~skdpsco.model_selection.PrivateSearchCV` apply: a DP estimator, an
    object without ``fit``, an encoder with public categories
    (:func:`_encoder_problem`) and scikit-learn's stateless transformers
    (:func:`_stateless_problem`) learn nothing; every other step is taken to
    learn (an allow-list: a step the library cannot vouch for is refused).
    """
    if _has_budget(step) or not hasattr(step, "fit"):
        return None
    for check in (_encoder_problem, _stateless_problem):
        problem = check(step)
        if problem is not None:
            return problem or None
    return (
        "learns from the data without a privacy budget: its fitted state (e.g. "
        "exact means and variances, or the training rows themselves) would be "
        "released with the model; only DP steps, encoders with public categories "
        "and stateless transformers (FunctionTransformer, "
        + ", ".join(_STATELESS)
        + ") are public"
    )


def _may_emit_sparse(step):
    """Whether a ``ColumnTransformer`` branch can output a sparse matrix (a
    public fact of its configuration; unknown steps are assumed to)."""
    if step == "drop" or _has_budget(step):
        return False
    params = step.get_params(deep=False) if hasattr(step, "get_params") else {}
    if "categories" in params:
        return bool(params.get("sparse_output", False))
    return True


def _always_sparse(branches):
    """A ``OneHotEncoder`` branch with sparse output, no dropped level and a
    feature of at least two public categories leaves a zero in every row: the
    stacked output's density is below 1 whatever the records."""
    for step in branches:
        params = step.get_params(deep=False) if hasattr(step, "get_params") else {}
        categories = params.get("categories")
        if (
            params.get("sparse_output") is True
            and params.get("drop") is None
            and not isinstance(categories, str)
            and any(len(levels) >= 2 for levels in categories or ())
        ):
            return True
    return False


def _container_problem(obj):
    """Why a ``ColumnTransformer``'s own choice would depend on the records;
    None if it does not.

    With a ``sparse_threshold`` strictly between 0 and 1, the stacked output is
    sparse or dense depending on its density, which one record can tip: the
    estimator after it then takes another code path (or refuses sparse input) on
    one neighbouring dataset only, and ``sparse_output_`` is released with the
    model. Public choices: ``sparse_threshold=0`` (always dense), no branch able
    to emit sparse output, or ``sparse_threshold >= 1`` with a sparse one-hot
    branch (always sparse, :func:`_always_sparse`).
    """
    threshold = getattr(obj, "sparse_threshold", None)
    if threshold is None or not hasattr(obj, "transformers") or threshold == 0:
        return None
    branches = [step for _, step, _ in obj.transformers] + [obj.remainder]
    if not any(_may_emit_sparse(step) for step in branches):
        return None
    if threshold >= 1 and _always_sparse(branches):
        return None
    return (
        f"ColumnTransformer(sparse_threshold={threshold!r}) chooses sparse or dense "
        "output from the density of the transformed records, which one record can "
        "change: pass sparse_threshold=0 (always dense), or 1.0 with a "
        "OneHotEncoder(sparse_output=True) branch (always sparse)"
    )


#: ``handle_unknown`` values under which an encoder with given categories never
#: raises on a record (``infrequent_if_exist`` has no infrequent category when
#: ``min_frequency`` and ``max_categories`` are None, so it acts as ``ignore``).
_SILENT_UNKNOWN = frozenset({"ignore", "infrequent_if_exist", "use_encoded_value"})


def _encoder_problem(step):
    """None for a non-encoder; ``""`` for an encoder whose state is public; else why.

    ``OneHotEncoder`` / ``OrdinalEncoder`` learn nothing from the records when
    their ``categories`` are given (public), no category is grouped by its
    frequency in the records (``min_frequency``, ``max_categories``), and no
    record can make ``fit`` raise: with ``handle_unknown="error"``, a record
    outside the categories raises on one neighbouring dataset and not on the
    other, and the exception itself is a release that no accountant covers.
    A dropped level (``drop``) makes ``transform`` warn on a record outside
    the categories: refused too.
    """
    try:
        params = step.get_params(deep=False)
    except (AttributeError, TypeError):
        return None
    if "categories" not in params or "handle_unknown" not in params:
        return None
    name = type(step).__name__
    if isinstance(params["categories"], str):
        return (
            f"{name}(categories={params['categories']!r}) learns the categories "
            "from the records: pass the public categories, categories=[[...], ...]"
        )
    if (
        params.get("min_frequency") is not None
        or params.get("max_categories") is not None
    ):
        return (
            f"{name} groups categories by their frequency in the records "
            "(min_frequency / max_categories): leave both None"
        )
    if params["handle_unknown"] not in _SILENT_UNKNOWN:
        fix = (
            "handle_unknown='use_encoded_value'"
            if "unknown_value" in params
            else "handle_unknown='ignore'"
        )
        return (
            f"{name}(handle_unknown={params['handle_unknown']!r}) raises on a "
            "record outside the given categories, on one neighbouring dataset and "
            f"not the other (the exception is a release): use {fix}"
        )
    if params.get("drop") is not None:
        return (
            f"{name}(drop={params['drop']!r}) with handle_unknown="
            f"{params['handle_unknown']!r} warns on a record outside the given "
            "categories, on one neighbouring dataset and not the other: leave "
            "drop=None"
        )
    return ""


def _encoder_with_public_categories(step):
    """A scikit-learn encoder whose fitted state is its given categories only."""
    return _encoder_problem(step) == ""


def _sub_step(obj, name, *, fitted):
    """The sub-estimator ``name`` of a Pipeline / FeatureUnion / ColumnTransformer."""
    return dict(_sub_estimators(obj, fitted=fitted))[name]


def _dp_steps(estimator, prefix="", *, refuse_learners):
    """``[(prefix, step)]`` of every DP estimator of an unfitted configuration.

    Walks Pipelines, FeatureUnions and ColumnTransformers (every branch, the
    remainder included): all of them fit every sub-estimator once on (columns
    of) the same records, so the budgets found compose sequentially. The prefix
    is the step's parameter prefix (``"a__b__"``; ``""`` for ``estimator``).

    Raises
    ------
    TypeError
        A meta-estimator that hides a DP estimator in its parameters (how many
        fits it makes is unknown).
    ValueError
        With ``refuse_learners``, a step that would leak the records
        (:func:`_learning_reason`).
    """
    if _is_skipped_step(estimator):
        return []
    if _has_budget(estimator):
        return [(prefix, estimator)]
    subs = _sub_estimators(estimator, fitted=False)
    if subs is not None:
        found = [
            found
            for name, step in subs
            for found in _dp_steps(
                step, f"{prefix}{name}__", refuse_learners=refuse_learners
            )
        ]
        problem = _container_problem(estimator) if refuse_learners else None
        if problem is not None:
            raise ValueError(f"step {prefix.rstrip('_') or 'estimator'}: {problem}.")
        return found
    where = prefix.rstrip("_") or "estimator"
    if _has_nested_budget(estimator):
        raise TypeError(
            f"{where} ({type(estimator).__name__}) wraps a DP estimator in a way "
            "the privacy accounting cannot count (how many fits?); only Pipeline, "
            "FeatureUnion and ColumnTransformer are recognised."
        )
    reason = _learning_reason(estimator) if refuse_learners else None
    if reason is not None:
        raise ValueError(
            f"step {where} ({type(estimator).__name__}): {reason}. Use a DP "
            "transformer (skdpsco.preprocessing.DPStandardScaler or "
            "DPRobustScaler), public constants or a stateless transformer."
        )
    return []


def _dp_prefixes(estimator):
    """Parameter prefixes of the DP steps; refuses steps that would leak."""
    return [prefix for prefix, _ in _dp_steps(estimator, refuse_learners=True)]


def _warn_learned_steps(names):
    if names:
        warnings.warn(
            f"total_privacy_spent: step(s) {sorted(set(names))} are fitted on the "
            "data without a privacy budget. If they learn statistics of the records "
            "(means, components, categories), those are released exact, and they "
            "change every transformed row when one record changes: the total does "
            "not cover them, and the DP steps after them lose their guarantee. Use "
            "skdpsco.preprocessing.DPStandardScaler or DPRobustScaler, public "
            "constants (e.g. OneHotEncoder(categories=..., handle_unknown='ignore')) "
            "or a stateless "
            "transformer.",
            PrivacyLeakWarning,
            stacklevel=4,
        )


def _has_budget(obj):
    """``epsilon`` and ``delta`` parameters: a DP estimator (fitted or not)."""
    return hasattr(obj, "epsilon") and hasattr(obj, "delta")


def _has_nested_budget(obj):
    """A DP estimator hidden in the parameters of a meta-estimator."""
    get_params = getattr(obj, "get_params", None)
    if get_params is None:
        return False
    try:
        params = get_params(deep=True)
    except TypeError:  # an estimator class rather than an instance
        return False
    return any(
        key.endswith("__epsilon") and key[: -len("epsilon")] + "delta" in params
        for key in params
    )


def _is_search(obj):
    return hasattr(obj, "estimator") and (
        hasattr(obj, "param_grid") or hasattr(obj, "param_distributions")
    )


def _claimed_budgets(estimator, label):
    """``[(label, epsilon, delta)]`` of every DP estimator in an unfitted config.

    A skdpsco fit releases nothing when its mechanisms would spend more than its
    ``epsilon`` (it raises), and spends its ``delta``: its parameters are a valid
    upper bound on what it spent.
    """
    return [
        (
            "/".join([label] + prefix.split("__")[:-1]),
            float(step.epsilon),
            float(step.delta),
        )
        for prefix, step in _dp_steps(estimator, refuse_learners=False)
    ]


def _splitter_reads_data(search):
    cv = search.cv
    if cv is None or (isinstance(cv, int) and not isinstance(cv, bool)):
        # scikit-learn stratifies the folds of a classifier by its labels.
        from sklearn.base import is_classifier

        return is_classifier(search.estimator)
    if hasattr(cv, "split"):
        return type(cv).__name__ not in _INDEX_SPLITTERS
    return False  # explicit (train, test) index pairs, fixed by the user


def _search_spent(search, out):
    """Fold fits of every candidate (claimed budgets) and the refit (its record)."""
    from sklearn.base import clone

    if not hasattr(search, "cv_results_"):
        raise TypeError(
            f"{type(search).__name__} is not fitted: fit it before totalling its "
            "privacy spend."
        )
    n_splits = int(search.n_splits_)
    name = type(search).__name__
    records = []
    for i, params in enumerate(search.cv_results_["params"]):
        candidate = clone(search.estimator).set_params(**params)
        for label, epsilon, delta in _claimed_budgets(candidate, f"candidate {i}"):
            records.append(
                MechanismRecord(
                    f"{name} {label}: {n_splits} fold fits at the claimed budget",
                    "approx_dp",
                    count=n_splits,
                    epsilon=epsilon,
                    delta=delta,
                )
            )
    if records:
        out.append(
            PrivacySpent.from_records(
                records, math.fsum(r.count * r.delta for r in records)
            )
        )
    if getattr(search, "refit", False) and hasattr(search, "best_estimator_"):
        _collect_spent(search.best_estimator_, out)
    note = (
        f"{name}: total_privacy_spent composes the {n_splits} fold fits of every "
        "candidate and the refit, but best_params_, best_score_ and the scores in "
        "cv_results_ are computed without noise on the private validation folds "
        "and are not covered by any DP guarantee (use "
        "skdpsco.model_selection.PrivateSearchCV for an end-to-end guarantee)."
    )
    if _splitter_reads_data(search):
        note += (
            " The cross-validation splitter also reads the data (stratified or "
            "grouped folds): one changed label can move other records between "
            "folds, which the per-fit composition does not cover; use KFold or "
            "ShuffleSplit."
        )
    warnings.warn(note, PrivacyLeakWarning, stacklevel=4)


def _cross_validate_spent(result, out):
    if "estimator" not in result:
        raise TypeError(
            "a cross_validate result without fitted estimators: call "
            "cross_validate(..., return_estimator=True)."
        )
    for estimator in result["estimator"]:
        _collect_spent(estimator, out)
    from sklearn.base import is_classifier

    if any(is_classifier(est) for est in result["estimator"]):
        warnings.warn(
            "cross_validate result of a classifier: if its folds depended on the "
            "labels (StratifiedKFold, scikit-learn's default for cv=int or None), "
            "one changed label can move other records between folds, which the "
            "per-fit composition does not cover. The result does not record the "
            "splitter: with cv=KFold(...) or ShuffleSplit(...) the total is valid "
            "and this warning can be filtered (message='cross_validate result of "
            "a classifier').",
            PrivacyLeakWarning,
            stacklevel=4,
        )
    if any(key.startswith(("test_", "train_")) for key in result):
        warnings.warn(
            "cross_validate result: total_privacy_spent composes the fold fits "
            "(their training sets overlap: sequential composition), but the scores "
            "in the result are computed without noise on private records and are "
            "not covered by any DP guarantee.",
            PrivacyLeakWarning,
            stacklevel=4,
        )


def _collect_spent(obj, out):
    spent = getattr(obj, "privacy_spent_", None)
    if isinstance(spent, PrivacySpent):
        out.append(spent)
        return
    if isinstance(obj, PrivacySpent):
        out.append(obj)
        return
    if _is_search(obj):
        _search_spent(obj, out)
        return
    if isinstance(obj, dict):
        _cross_validate_spent(obj, out)
        return
    subs = _sub_estimators(obj, fitted=True)
    if subs is not None:  # every step saw the same records
        _warn_container(_container_problem(obj), "total_privacy_spent")
        learned = []
        for _, step in subs:
            if _is_skipped_step(step):
                continue
            if (
                isinstance(getattr(step, "privacy_spent_", None), PrivacySpent)
                or _sub_estimators(step, fitted=True) is not None
                or _is_search(step)
            ):
                _collect_spent(step, out)
            elif _has_budget(step):
                # A DP estimator without a record has not been fitted: skipping it
                # could understate the total.
                raise TypeError(
                    f"Pipeline step {type(step).__name__} has a privacy budget but "
                    "no privacy_spent_: fit the Pipeline first."
                )
            elif _has_nested_budget(step):
                raise TypeError(
                    f"step {type(step).__name__} wraps a DP estimator in a way "
                    "total_privacy_spent cannot count; only Pipeline, FeatureUnion, "
                    "ColumnTransformer and search objects are recognised."
                )
            elif _learns_without_budget(step):
                learned.append(type(step).__name__)
            # Stateless steps spend no privacy and contribute nothing.
        _warn_learned_steps(learned)
        return
    if isinstance(obj, Iterable) and not isinstance(obj, str | bytes):
        for item in obj:
            _collect_spent(item, out)
        return
    raise TypeError(
        f"{type(obj).__name__} has no privacy_spent_: pass fitted skdpsco estimators, "
        "Pipelines of them, fitted GridSearchCV / RandomizedSearchCV objects, "
        "cross_validate(..., return_estimator=True) results, PrivacySpent records, "
        "or lists of these."
    )


def _compose(spents, delta):
    """Sequential composition of ``spents`` (same records) at ``delta``."""
    delta_sum = math.fsum(s.delta for s in spents)
    if delta is None:
        delta = delta_sum
    records = tuple(r for s in spents for r in s.mechanisms)
    if delta > 0:
        joint = PrivacySpent.from_records(records, delta)
    else:
        joint = None
    basic_eps = math.fsum(s.epsilon for s in spents)
    if delta >= delta_sum and (joint is None or basic_eps < joint.epsilon):
        rho = None
        if all(s.rho is not None for s in spents):
            rho = math.fsum(s.rho for s in spents)
        return PrivacySpent(
            basic_eps, float(delta), rho, accountant="basic", mechanisms=records
        )
    if joint is None:
        raise ValueError("delta=0 totals are only available by basic composition.")
    return joint


def _collect_nonempty(fitted):
    spents = []
    _collect_spent(fitted, spents)
    if not spents:
        raise ValueError("total_privacy_spent needs at least one fitted estimator.")
    return spents


def total_privacy_spent(fitted, delta=None, *, disjoint=False):
    """Total privacy spent by fits on the same records (sequential composition).

    Parameters
    ----------
    fitted : estimator, Pipeline, search, cross_validate result or list of these
        What to total:

        - a fitted skdpsco estimator (anything with a ``privacy_spent_`` record,
          including ``skdpsco.model_selection.PrivateSearchCV``, whose record
          already covers its whole search), or a PrivacySpent record;
        - a fitted ``Pipeline`` (also ``FeatureUnion``, ``ColumnTransformer``):
          every step that spent privacy; all steps saw the same records;
        - a fitted ``GridSearchCV`` / ``RandomizedSearchCV`` (any scikit-learn
          search with ``cv_results_`` and ``n_splits_``): every candidate of
          ``cv_results_["params"]`` was fitted ``n_splits_`` times on overlapping
          training folds, plus the refit of ``best_estimator_`` on all records.
          The search keeps no fold model, so each fold fit is counted at the
          ``(epsilon, delta)`` its candidate's parameters claim (a skdpsco fit
          refuses to release more, so this is an upper bound; records of kind
          ``"approx_dp"``, basic composition), and the refit at its exact
          ``privacy_spent_``. A :class:`~skdpsco.exceptions.PrivacyLeakWarning`
          says what is *not* covered: the selection of ``best_params_`` and the
          scores in ``cv_results_`` (noise-free scores on private records), and
          label-dependent (stratified) folds;
        - a ``cross_validate(..., return_estimator=True)`` result: its
          ``"estimator"`` list, composed sequentially (the training folds
          overlap); a PrivacyLeakWarning notes that its scores are not private;
        - a list (or any iterable) of the above, all on the same records.
    delta : float, optional
        The delta to report the total at. Defaults to the sum of the fits'
        deltas (with ``disjoint=True``, the largest part's).
    disjoint : bool, default=False
        Parallel composition: ``fitted`` is a list whose items were fitted on
        pairwise *disjoint* sets of records, the partition being fixed by the row
        indices (or other public information), never by the data values or
        labels. Under replace-one neighbours the changed record lies in one part
        only, so the total is the largest part's epsilon at the common delta (each
        item is first totalled sequentially). The caller asserts disjointness:
        it cannot be checked here. Training folds of cross-validation overlap and
        never qualify.

    Returns
    -------
    PrivacySpent
        Sequential: the minimum over valid compositions, the accountant over all
        mechanisms jointly at ``delta`` and basic composition (``sum epsilon_i`` at
        ``sum delta_i``) when ``delta`` is at least that sum. Parallel:
        ``accountant="parallel"``; its ``mechanisms`` are all parts' records (a
        later sequential total over them is conservative).

    Warns
    -----
    PrivacyLeakWarning
        For search objects and cross_validate results (see above).

    Examples
    --------
    >>> from skdpsco.privacy import MechanismRecord, PrivacySpent, total_privacy_spent
    >>> mech = MechanismRecord("mean", "gaussian", sensitivity=1.0, scale=5.0)
    >>> a = PrivacySpent.from_records([mech], delta=1e-6)
    >>> total = total_privacy_spent([a, a])
    >>> total.epsilon < 2 * a.epsilon
    True
    >>> parallel = total_privacy_spent([a, a], disjoint=True)
    >>> parallel.epsilon == a.epsilon, parallel.accountant
    (True, 'parallel')
    """
    if not disjoint:
        return _compose(_collect_nonempty(fitted), delta)
    if (
        isinstance(fitted, dict | PrivacySpent | str | bytes)
        or not isinstance(fitted, Iterable)
        or _is_search(fitted)
        or _sub_estimators(fitted, fitted=True) is not None
    ):
        raise TypeError(
            "disjoint=True needs a list of items fitted on disjoint record sets; "
            f"got {type(fitted).__name__} (a Pipeline, search or cross_validate "
            "result trains on overlapping records)."
        )
    parts = [_collect_nonempty(item) for item in fitted]
    if not parts:
        raise ValueError("total_privacy_spent needs at least one fitted estimator.")
    if delta is None:
        delta = max(math.fsum(s.delta for s in part) for part in parts)
    totals = [_compose(part, delta) for part in parts]
    rhos = [t.rho for t in totals]
    return PrivacySpent(
        max(t.epsilon for t in totals),
        float(delta),
        None if any(r is None for r in rhos) else max(rhos),
        accountant="parallel",
        mechanisms=tuple(r for t in totals for r in t.mechanisms),
    )


# ------------------------------------------------------------ fit-time warnings
#
# What a DP estimator's fit can see of the workflow around it is the call stack:
# code and the public configuration of the objects running it, the same for
# every pair of neighbouring datasets, so a warning from it releases nothing.

_PIPELINE_MODULE = "sklearn.pipeline"
_VALIDATION_MODULE = "sklearn.model_selection._validation"
_SEARCH_MODULE = "sklearn.model_selection._search"
#: The fits of skdpsco's own searches are accounted by them.
_ACCOUNTED_MODULES = ("skdpsco.model_selection",)


def _learning_steps(steps):
    """Class names of the steps (nested ones included) that learn from the data
    without a budget."""
    names = []
    for _, step in steps:
        if _is_skipped_step(step):
            continue
        subs = _sub_estimators(step, fitted=False)
        if subs is not None:
            names += _learning_steps(subs)
        elif not _has_nested_budget(step) and _learns_without_budget(step):
            names.append(type(step).__name__)
    return names


def _container_problems(steps):
    """The :func:`_container_problem` reasons of the ``ColumnTransformer`` steps
    (nested ones included)."""
    problems = []
    for _, step in steps:
        if _is_skipped_step(step):
            continue
        subs = _sub_estimators(step, fitted=False)
        if subs is not None:
            problem = _container_problem(step)
            problems += [problem] if problem else []
            problems += _container_problems(subs)
    return problems


def _warn_container(problem, who, stacklevel=4):
    if problem:
        warnings.warn(
            f"{who}: {problem}. The output type is then a release no accountant "
            "covers.",
            PrivacyLeakWarning,
            stacklevel=stacklevel,
        )


def _search_size(frame):
    """``(n_candidates, n_splits)`` a search frame shows, ``None`` where unknown.

    ``_fit_and_score`` receives ``(index, total)`` pairs from a search
    (``BaseSearchCV.fit``); ``cross_validate`` holds its splitter as ``cv``.
    """
    local = frame.f_locals
    if frame.f_code.co_name == "_fit_and_score":
        splits, candidates = (
            local.get("split_progress"),
            local.get("candidate_progress"),
        )
        return (
            None if candidates is None else candidates[1],
            None if splits is None else splits[1],
        )
    if frame.f_code.co_name == "cross_validate":
        # The splitter's own public parameter: never its split of the data.
        n_splits = getattr(local.get("cv"), "n_splits", None)
        return 1, n_splits if isinstance(n_splits, int) else None
    results = local.get("results")
    search = local.get("self")
    known = isinstance(results, dict) and "params" in results
    n_candidates = len(results["params"]) if known else None
    # scikit-learn < 1.7 sets n_splits_ only after the refit: its fit's local.
    n_splits = getattr(search, "n_splits_", None)
    if not isinstance(n_splits, int):
        n_splits = local.get("n_splits")
    return n_candidates, n_splits if isinstance(n_splits, int) else None


def _workflow_frames(frame):
    """``(pipeline step lists, search frames)`` on the stack from ``frame`` up;
    None inside a search that accounts its fits."""
    pipelines, searches = [], []
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        name = frame.f_code.co_name
        if module.startswith(_ACCOUNTED_MODULES):
            return None
        if module == _PIPELINE_MODULE and name.startswith("fit"):
            steps = getattr(frame.f_locals.get("self"), "steps", None)
            if isinstance(steps, list):
                pipelines.append(steps[:-1])
        elif (
            module == _VALIDATION_MODULE
            and name in ("_fit_and_score", "cross_validate")
        ) or (module == _SEARCH_MODULE and name == "fit"):
            searches.append(frame)
        frame = frame.f_back
    return pipelines, searches


def _search_message(who, epsilon, delta, searches):
    """The warning of a fit run by scikit-learn's search / cross-validation."""
    n_candidates = n_splits = search = None
    for frame in searches:
        candidates, splits = _search_size(frame)
        n_candidates = n_candidates or candidates
        n_splits = n_splits or splits
        if frame.f_code.co_name == "fit":
            search = frame.f_locals.get("self")
    names = {frame.f_code.co_name for frame in searches}
    if search is not None:
        what = type(search).__name__
    elif "cross_validate" in names or n_candidates is None:
        what, n_candidates = "cross-validation", 1
    else:
        what = "search"
    refit = "" if search is None or not search.refit else " + 1 refit"
    if n_splits:
        fits = n_candidates * n_splits + bool(refit)
        grid = (
            ""
            if search is None and what != "search"
            else f"{n_candidates} candidate(s) x "
        )
        total = (
            f"{grid}{n_splits} folds{refit} = {fits} fits of it compose to "
            f"epsilon up to {fits * epsilon:.4g}, delta up to {fits * delta:.3g} "
            "(basic composition; a pipeline's other private steps add theirs)"
        )
    else:
        total = (
            "k folds x g candidates fits of it compose to k g times "
            f"epsilon={epsilon:g}"
        )
    where = "refitted by" if "_fit_and_score" not in names else "fitted by"
    return (
        f"{who} is {where} scikit-learn's {what}, which fits it again and again "
        f"on overlapping records: {total}, and its scores read the data "
        "without a budget. Use skdpsco.model_selection.PrivateSearchCV to tune "
        "within one budget, and total_privacy_spent(...) to see what a search or "
        "cross_validate(..., return_estimator=True) spent."
    )


def warn_workflow_leaks(estimator):
    """Warn, at fit time, of leaks around ``estimator`` visible on the call stack.

    Two cases, from the calling code and the public configuration of the
    objects running it (never from the data: the same warnings for every pair
    of neighbouring datasets): a scikit-learn ``Pipeline`` whose earlier steps
    learn from the data without a budget (``StandardScaler``, ``PCA``, ...),
    and scikit-learn's ``GridSearchCV`` / ``RandomizedSearchCV`` /
    ``cross_validate``, whose fits on overlapping folds compose. Nothing is
    said inside skdpsco's ``PrivateSearchCV``, which accounts its runs. A
    ``PrivacyLeakWarning``; in joblib worker processes (``n_jobs > 1``) it is
    emitted there.

    Parameters
    ----------
    estimator : DPLinearModel
        The estimator being fitted (its public ``epsilon`` and ``delta``).
    """
    found = _workflow_frames(sys._getframe(1))
    if found is None:
        return
    pipelines, searches = found
    who = type(estimator).__name__
    learned = sorted({name for steps in pipelines for name in _learning_steps(steps)})
    for problem in sorted(
        {p for steps in pipelines for p in _container_problems(steps)}
    ):
        _warn_container(problem, who, stacklevel=5)
    if learned:
        warnings.warn(
            f"{who} is fitted in a Pipeline after step(s) {learned}, fitted on the "
            "data without a privacy budget: their statistics are released exact "
            f"and every transformed row depends on every record, so {who}'s "
            "(epsilon, delta) does not cover the pipeline. Use "
            "skdpsco.preprocessing.DPStandardScaler or DPRobustScaler, public "
            "constants (e.g. OneHotEncoder(categories=...)) or a stateless "
            "transformer.",
            PrivacyLeakWarning,
            stacklevel=5,
        )
    if searches:
        warnings.warn(
            _search_message(who, estimator.epsilon, estimator.delta, searches),
            PrivacyLeakWarning,
            stacklevel=5,
        )
