"""PrivateSearchCV: hyperparameter search with an end-to-end DP guarantee.

One *run* of the search is the base mechanism ``Q``: draw a configuration uniformly
at random from the grid, fit it with a fixed per-run zCDP budget on the training part
of the data, and score it on the held-out validation part with a Gaussian mechanism
of the same zCDP budget. The number of runs ``K`` is random (truncated negative
binomial, or geometric), and only the best run by its *noisy* score is released.
Papernot & Steinke (2022, Theorem 2) bound the whole; the per-run budget is the
largest one whose bound is the asked ``(epsilon, delta)``
(:mod:`skdpsco.privacy._selection`).
"""

import contextlib
import functools
import itertools
import logging
import math
import os
import warnings
from copy import deepcopy
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from scipy import sparse
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.model_selection import ParameterGrid
from sklearn.utils import check_array, column_or_1d, get_tags
from sklearn.utils.metaestimators import available_if

from .._column_scaling import private_column_scaling
from ..exceptions import PrivacyBudgetError
from ..privacy._accounting import gaussian_rho_budget, gdp_to_approx_dp
from ..privacy._discrete import _uniform_below, make_generator
from ..privacy._ledger import PrivacySpent, gate_release
from ..privacy._mechanisms import GaussianMechanism, truncated_negative_binomial
from ..privacy._params import (
    PRIVACY_PARAMETER_CONSTRAINTS,
    PUBLIC_BOUND_RANGE,
    PrivacyBudget,
    PublicBound,
    check_privacy_params,
)
from ..privacy._selection import (
    RUN_RDP_ORDERS,
    calibrate_selection_rho,
    replace_one_rdp,
    selection_record,
    tnb_gamma,
    tnb_mean,
)
from ..privacy._workflow import (
    _dp_prefixes,
    _has_budget,
    _sub_estimators,
    _sub_step,
)
from ..utils._compat import (
    HasMethods,
    Interval,
    StrOptions,
    _fit_context,
    check_is_fitted,
)

__all__ = ["PrivateSearchCV"]

#: Scores with their range ``R`` per record (``None``: the public ``score_clip``).
_SCORINGS = {
    "accuracy": 1.0,
    "neg_clipped_squared_error": None,
    "neg_clipped_absolute_error": None,
}

#: ``score_clip="auto"``: the clip as a function of the target's private scale
#: ``s`` (the released spread of ``y``). A constant prediction at the centre has
#: squared error about ``s^2`` per record; ``(2 s)^2`` keeps the errors of useful
#: and useless configurations apart, and ``2 s`` for the absolute error.
_AUTO_CLIP = {
    "neg_clipped_squared_error": lambda scale: (2.0 * scale) ** 2,
    "neg_clipped_absolute_error": lambda scale: 2.0 * scale,
}

#: Public share of the search's budget spent on the target's scale when
#: ``score_clip="auto"``: the zCDP of one Gaussian release at the asked
#: ``(epsilon, delta)`` times this share, composed with the selection.
_CLIP_SHARE = 0.05

#: Bisection steps of the ask of a step without a zCDP bound (the ask is then
#: within a factor 2^(2^-6) of the largest that fits).
_ASK_BISECTIONS = 6

#: Relative margin kept between the per-step target and the ask, so that the
#: floating-point round trip ask -> rho inside an estimator never exceeds the target.
_ASK_MARGIN = 1e-8


def _rows(X, idx):
    """Rows ``idx`` of X (numpy, scipy.sparse or pandas)."""
    if hasattr(X, "iloc"):
        return X.iloc[idx]
    if sparse.issparse(X):
        return X.tocsr()[idx]
    return np.asarray(X)[idx]


def _n_rows(X):
    if hasattr(X, "shape") and len(X.shape) >= 1:
        return int(X.shape[0])
    return len(X)


def _private_steps(estimator):
    """Parameter prefixes of the DP steps of ``estimator`` (composite or not).

    The introspection of :func:`~skdpsco.privacy.total_privacy_spent`
    (:func:`~skdpsco.privacy._workflow._dp_prefixes`): Pipelines, FeatureUnions
    and ColumnTransformers are walked, every branch included; a step that learns
    from the data without a privacy budget (scikit-learn's ``StandardScaler``, an
    encoder with ``categories="auto"``) would release exact statistics of the
    private training data through the model, and is refused. Stateless steps,
    encoders with public categories, ``None``, ``"passthrough"`` and ``"drop"``
    are allowed.
    """
    composite = _sub_estimators(estimator, fitted=False) is not None
    prefixes = _dp_prefixes(estimator) if composite or _has_budget(estimator) else []
    if not prefixes:
        raise TypeError(
            "PrivateSearchCV needs a differentially private estimator (with "
            "'epsilon' and 'delta' parameters, like every skdpsco estimator), or a "
            "Pipeline / ColumnTransformer with at least one such step; got "
            f"{type(estimator).__name__}."
        )
    return prefixes


def _random_state_params(estimator):
    """Every ``random_state`` parameter of ``estimator`` (deep), as set."""
    return {
        key: value
        for key, value in estimator.get_params(deep=True).items()
        if key == "random_state" or key.endswith("__random_state")
    }


def _set_random_states(estimator, rng):
    """Give every step with a ``random_state`` its own source of randomness.

    Parameters
    ----------
    estimator : estimator
        A configured (unfitted) clone; modified in place.
    rng : numpy.random.Generator or None
        The search's generator, when the search is seeded (an int, a
        ``RandomState`` or a ``Generator``): every step gets an int seed drawn from
        it, so that the search is reproducible. ``None`` when the search's own
        ``random_state`` is None: every step gets ``random_state=None`` and draws
        fresh OS entropy for its noise. A 31-bit seed drawn from the search's
        PCG64 stream would instead make the noise of every run one of ``2^31``
        reproducible streams, and bypass the estimators' production source of
        noise (the one they use for ``random_state=None``).

    Returns
    -------
    estimator : estimator
        ``estimator``, with its ``random_state`` parameters set.
    """
    params = estimator.get_params(deep=True)
    keys = [
        key
        for key in sorted(params)
        if key == "random_state" or key.endswith("__random_state")
    ]
    if rng is None:
        seeds = dict.fromkeys(keys)
    else:
        seeds = {key: int(rng.integers(0, 2**31 - 1)) for key in keys}
    if seeds:
        estimator.set_params(**seeds)
    return estimator


def _verbose_params(estimator):
    """Every truthy ``verbose`` parameter of ``estimator`` (deep), as set."""
    return {
        key: value
        for key, value in estimator.get_params(deep=True).items()
        if (key == "verbose" or key.endswith("__verbose")) and value
    }


def _mute(estimator):
    """Set every ``verbose`` parameter of ``estimator`` (deep) to off, in place.

    A hidden run must print nothing: its progress lines would count the runs
    ``K``, which the selection theorems need hidden (Liu & Talwar 2019; Papernot
    & Steinke 2022). Turning ``verbose`` off stops the printing at its source;
    :func:`_silenced` also catches what is printed through other channels.
    Booleans stay booleans (``Pipeline.verbose`` accepts only those).

    Returns
    -------
    shown : dict
        The ``verbose`` values that were switched off, to put back on the
        released model (it carries the user's settings).
    """
    shown = _verbose_params(estimator)
    if shown:
        estimator.set_params(
            **{
                key: False if isinstance(value, (bool, np.bool_)) else 0
                for key, value in shown.items()
            }
        )
    return shown


@contextlib.contextmanager
def _silenced(*, warnings_too=True):
    """Drop everything printed, logged or (optionally) warned inside.

    Around the hidden runs of the search, anything they emit is a function of a
    run that may be dropped, and the number of lines, records or warnings
    counts the runs ``K``: ``K`` must stay hidden for the selection theorems
    (Liu & Talwar 2019, Papernot & Steinke 2022, Theorem 2). ``sys.stdout`` and
    ``sys.stderr`` go to ``os.devnull`` (a real file, for code that asks for a
    ``fileno``; a progress bar created inside, such as tqdm's, writes to it too),
    the ``logging`` module is disabled and, unless ``warnings_too`` is false,
    every warning is ignored. Everything is restored on exit, exceptions
    included.

    Python-level only: output written straight to the process's file
    descriptors (C extensions, subprocesses, joblib workers) is not caught, and
    the redirection and ``logging.disable`` are process-wide, so other threads
    are silenced (and may unsilence) while a search runs.
    """
    previous = logging.root.manager.disable
    with contextlib.ExitStack() as stack:
        sink = stack.enter_context(open(os.devnull, "w"))
        stack.enter_context(contextlib.redirect_stdout(sink))
        stack.enter_context(contextlib.redirect_stderr(sink))
        if warnings_too:
            stack.enter_context(warnings.catch_warnings())
            warnings.simplefilter("ignore")
        logging.disable(logging.CRITICAL)
        stack.callback(logging.disable, previous)
        yield


def _step(estimator, prefix):
    """The fitted step that ``prefix`` (``"a__b__"`` or ``""``) designates."""
    obj = estimator
    for name in [p for p in prefix.split("__") if p]:
        obj = _sub_step(obj, name, fitted=True)
    return obj


@functools.lru_cache(maxsize=256)
def _gaussian_ask(rho, delta):
    # A pure function of public numbers, cached: every search and grid point asks it.
    return gdp_to_approx_dp(math.sqrt(2.0 * rho), delta)


def _within(rho, rho_step):
    return rho is not None and rho <= rho_step * (1.0 + 1e-9)


def _spent_rho(step, orders=None):
    """zCDP a fitted step spent; with ``orders``, its bound on those orders only.

    A step without a zCDP bound (Poisson-subsampled DP-SGD: its replace-one
    guarantee comes from group privacy on an add/remove RDP curve) is bounded by
    ``max_lambda eps(lambda) / lambda`` over ``orders``
    (:func:`~skdpsco.privacy._selection.replace_one_rdp`): it is then
    ``(lambda, rho lambda)``-RDP at every order the selection accounts on.
    """
    spent = getattr(step, "privacy_spent_", None)
    if not isinstance(spent, PrivacySpent):
        return None
    if spent.rho is not None or orders is None:
        return spent.rho
    curve = replace_one_rdp(spent.mechanisms, orders)
    return None if curve is None else float(np.max(curve / np.asarray(orders)))


def _run_orders(rho_run, delta):
    """The orders a search with steps without a zCDP bound is accounted on.

    Those steps (Poisson-subsampled) lose their amplification at high orders,
    so the orders stop where a ``rho_run``-zCDP selection needs them: twice the
    order ``1 + sqrt(log(1 / delta) / rho)`` at which a ``rho``-zCDP bound
    converts best (Bun & Steinke 2016, Prop. 1.3), at least 16, at most those of
    :data:`~skdpsco.privacy._selection.RUN_RDP_ORDERS`. A function of public
    numbers; any set of orders gives a valid bound.
    """
    top = max(16.0, 2.0 * (1.0 + math.sqrt(math.log(1.0 / delta) / rho_run)))
    return tuple(o for o in RUN_RDP_ORDERS if o <= top)


def _lacks_zcdp(step):
    spent = getattr(step, "privacy_spent_", None)
    return isinstance(spent, PrivacySpent) and spent.rho is None


class _Plan(NamedTuple):
    """The public plan of one search (see :meth:`PrivateSearchCV._plan`)."""

    prefixes: list
    grid: list
    scoring: str
    score_range: float
    budget: PrivacyBudget
    n_train: int
    n_val: int
    eta: float
    gamma: float
    rho_run: float
    rho_step: float
    score_mech: GaussianMechanism
    classes: np.ndarray | None
    classes_param: tuple | None
    rho_clip: float = 0.0
    orders: tuple | None = None


def _check_data(X, y):
    """``(X, y)`` as the runs take them; refuses a ``y`` of the wrong length.

    Pandas frames and sparse matrices go to the estimator as they are (a Pipeline
    may select columns by name); anything else becomes a 2-d array.
    """
    if not (hasattr(X, "iloc") or sparse.issparse(X)):
        X = check_array(X, dtype=None, ensure_all_finite=False)
    n = _n_rows(X)
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        # The runs' own warnings are silenced (they would count the runs): this
        # one depends on the shape of y alone, so the search gives it itself.
        y = column_or_1d(y, warn=True)
    if y.shape[0] != n:
        raise ValueError(f"X has {n} rows but y has {y.shape[0]}.")
    return X, y


def _score_mechanism(rho_run, budget, mean, n_val, scoring, score_range):
    """The Gaussian mechanism of a run's validation score, or a refusal.

    One validation record moves the mean score by at most ``score_range / n_val``
    (accuracy: each record contributes 0 or 1; the clipped errors: each contributes
    at most ``score_clip``), and the noise is the Gaussian of zCDP ``rho_run`` for
    that sensitivity (Bun & Steinke 2016, Prop. 1.6). A noise std over half the
    score's range would make the search pick at random: refused, from public
    numbers only.
    """
    sensitivity = score_range / n_val
    if math.isinf(rho_run):
        score_mech = GaussianMechanism(sensitivity, 0.0, name="validation score")
    elif rho_run > 0:
        score_mech = GaussianMechanism.from_zcdp(
            sensitivity, rho_run, name="validation score"
        )
    if rho_run == 0 or score_mech.sigma > score_range / 2.0:
        eps_run = gdp_to_approx_dp(math.sqrt(2.0 * rho_run), budget.delta)
        raise PrivacyBudgetError(
            f"PrivateSearchCV: epsilon={budget.epsilon:g} is too small for "
            f"{mean:g} expected runs with {n_val} validation records: each run "
            f"would get rho={rho_run:.3g} (epsilon={eps_run:.3g} at "
            f"delta={budget.delta:g}) and its {scoring} score noise of std "
            f"{sensitivity / math.sqrt(2.0 * rho_run) if rho_run else math.inf:.3g}"
            f", more than half the score's range {score_range:g}: the search "
            "would pick at random. Use fewer expected_runs, a larger epsilon or "
            "more validation records."
        )
    return score_mech


def _probe_frame(Z, X):
    """``Z`` as a frame with ``X``'s columns; non-numeric ones hold ``""``.

    The column names and dtypes are the schema (public, like ``n`` and ``d``); no
    value of ``X`` is read. A categorical column gets the empty string, which
    every public encoder (``handle_unknown="ignore"`` or
    ``"use_encoded_value"``) maps to its unknown code.
    """
    import pandas as pd

    Z = pd.DataFrame(Z, columns=X.columns)
    for j, dtype in enumerate(X.dtypes):
        if not (
            pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)
        ):
            Z[Z.columns[j]] = np.full(len(Z), "", dtype=object)
    return Z


def _split(X, y, n_val, rng):
    """``(X_train, y_train, X_val, y_val)``: one split, by public randomness.

    The permutation does not depend on the data, so a replaced record lies in the
    training part or in the validation part, never both (the parallel composition
    that makes one run ``rho``-zCDP, not ``2 rho``).
    """
    perm = rng.permutation(_n_rows(X))
    val_idx, train_idx = np.sort(perm[:n_val]), np.sort(perm[n_val:])
    return _rows(X, train_idx), y[train_idx], _rows(X, val_idx), y[val_idx]


def _number_of_runs(rng, eta, gamma):
    """``K ~ D_{eta, gamma}`` empty slots, one per hidden run.

    The truncated negative binomial of Papernot & Steinke (2022, Definition 1),
    the geometric random stopping of Liu & Talwar (2019) at ``eta = 1``. ``K`` is
    drawn from the secure source and never bound to a name: only the iterator
    holds it.
    """
    return itertools.repeat(None, truncated_negative_binomial(rng, eta, gamma))


def _released_has(name):
    """Whether the released model (or, before ``fit``, the estimator) has ``name``."""

    def check(self):
        if hasattr(self, "best_estimator_"):
            return hasattr(self.best_estimator_, name)
        return hasattr(self.estimator, name)

    return check


def _delegate(name, doc):
    """Method ``name(X)`` of the search: the released model's (post-processing)."""

    def method(self, X):
        check_is_fitted(self)
        return getattr(self.best_estimator_, name)(X)

    method.__name__ = name
    method.__qualname__ = f"PrivateSearchCV.{name}"
    method.__doc__ = doc
    return available_if(_released_has(name))(method)


class PrivateSearchCV(MetaEstimatorMixin, BaseEstimator):
    """Differentially private hyperparameter search (random search, private selection).

    A drop-in for :class:`~sklearn.model_selection.GridSearchCV` on private data:
    the whole search (every fit, every score and the choice of the best) is
    ``(epsilon, delta)``-DP under replace-one neighbouring datasets (``n`` public),
    with ``epsilon`` and ``delta`` the search's own parameters.

    **How.** The data are split once at random (public randomness, independent of the
    data) into a training part and a validation part of ``round(validation_fraction *
    n)`` records. One *run* draws a configuration uniformly at random from
    ``param_grid``, fits it on the training part with a per-run zCDP budget ``rho``,
    and scores it on the validation part with a Gaussian mechanism of the same ``rho``.
    The search makes ``K`` runs, ``K`` drawn from a truncated negative binomial
    distribution (``selection="truncated_negative_binomial"``, shape ``eta``) or a
    geometric one (``selection="geometric"``, Liu & Talwar's random stopping) of mean
    ``expected_runs``, and releases the best run (its configuration, model and noisy
    score) only: ``K`` and the other runs stay hidden, which is what the guarantee
    needs.

    **Guarantee.** A replaced record lies either in the training part (then only the
    fits see it) or in the validation part (then only the scores do), so one run is
    ``rho``-zCDP, not ``2 rho``: parallel composition over the disjoint parts. The best
    of ``K`` runs is then bounded by Papernot & Steinke (2022, Theorem 2) as an RDP
    curve and converted to ``(epsilon, delta)``; ``rho`` is the largest per-run budget
    for which this gives the asked ``epsilon`` (:mod:`skdpsco.privacy._selection`).

    **The estimator's own budget is set by the search.** The ``epsilon`` and ``delta``
    of the base estimator (of every DP step of a ``Pipeline``) are overridden: each DP
    step gets ``rho / m`` of the run's budget (``m`` DP steps, composed sequentially on
    the training part), asked as the ``(epsilon_step, delta)`` whose Gaussian zCDP
    budget is ``rho / m``. A grid that varies ``epsilon`` or ``delta`` is refused. Every
    configuration is first fitted once on synthetic public data of the training part's
    shape (no private record is read) to check that it spends at most its share as
    zCDP; a configuration that does not (a step whose mechanisms have no RDP curve,
    or that spends more than asked) is refused before the search touches the data,
    and every real fit is checked again. A step without a zCDP bound (``dp_sgd``:
    Poisson subsampling, whose replace-one curve is ``3 eps(2 lambda)`` of its
    add/remove one, Mironov 2017, Prop. 2) is bounded by ``rho * lambda`` on the
    orders from 2 to about twice the order where ``rho_run`` converts best; the
    search then calibrates and accounts the selection on those orders only, and
    asks that step for the largest budget (bisection on public probe fits) whose
    curve stays within its share.

    **Scores.** A DP score needs a bounded per-record contribution. Classifiers use
    accuracy (each validation record contributes 0 or 1, so replacing one changes the
    mean by at most ``1 / n_val``). Regressors use the clipped squared (or absolute)
    error ``min(loss_i, score_clip)`` with the bound ``score_clip``; its mean
    moves by at most ``score_clip / n_val``, and the released score is its negation
    (larger is better). The Gaussian noise has std ``sensitivity / sqrt(2 rho)``.
    ``score_clip="auto"`` (the default) follows the target's units: the search
    first releases the scale ``s`` of ``y`` as the estimators do for their targets
    (Gaussian mechanisms within a public share, 5%, of the zCDP of one Gaussian
    release at ``(epsilon, delta)``; its RDP curve adds to the selection's), and
    clips at ``(2 s)^2`` (squared error) or ``2 s`` (absolute error). A fixed clip
    of 4 saturates on targets in natural units (every run scores about -4 and
    the selection is a coin flip).

    **Refit.** There is none (``refit=True`` is refused): ``best_estimator_`` is the
    best run's own model, fitted on the training part. Refitting on all the data
    would be one more fit, composed with the search (more epsilon for the same
    noise), for ``1 / (1 - validation_fraction)`` times more training records.

    **Parallel runs, progress.** ``n_jobs`` fits that many runs at a time in
    threads. Each run's configuration and seeds are drawn in the calling thread in
    order, and the scores' noise comes from its own stream in the same order, so a
    seeded search releases the same numbers for every ``n_jobs``. ``verbose``
    prints two public lines: before the runs, the grid size, the expected number
    of runs and a run's budget; after them, the released configuration, its noisy
    score and the total spent. Nothing about a hidden run is printed (see Notes).

    **Cost against plain GridSearchCV.** A 3x3 grid with 5 folds is 45 fits plus the
    refit: 46 fits on the same records. At a final ``epsilon = 1, delta = 1e-5``,
    sequential composition of 46 Gaussian fits leaves each a zCDP budget of
    ``0.0359 / 46 = 0.00078`` (0.0359 is what a single fit gets at that
    ``(epsilon, delta)``), i.e. noise ``6.8`` times that of one fit (``6.1`` times if
    only the 37 fits whose training folds contain a given record are counted); and
    its choice of the best, made on non-private validation scores, is not covered by
    any guarantee at all. This search with ``expected_runs=9`` (one run per
    configuration on average; logarithmic ``K``, ``eta=0``) gives every run
    ``rho = 0.0104``: noise ``1.86`` times that of one fit and ``13.3`` times more
    zCDP per fit than the composed grid search, with the selection accounted for.
    Conversely, 46 fits at this per-run budget compose to ``epsilon = 4.26``.
    (``tests/test_private_search.py::test_cost_against_grid_search`` recomputes these
    numbers.)

    Parameters
    ----------
    estimator : estimator
        A skdpsco estimator, or a ``Pipeline`` of skdpsco steps (and stateless
        transformers); it must have ``epsilon`` and ``delta`` parameters, which the
        search sets.
    param_grid : dict or list of dict
        The configurations, as for :class:`~sklearn.model_selection.GridSearchCV`;
        each run draws one uniformly at random. It must be finite and must not vary
        ``epsilon`` or ``delta``.
    epsilon : float, default=1.0
        Privacy loss bound of the whole search, in ``(0, 1e6]``.
    delta : float, default=1e-5
        Its failure probability, in ``(0, 1)`` (the Gaussian scores need
        ``delta > 0``); keep it well below ``1 / n_samples``.
    scoring : {"accuracy", "neg_clipped_squared_error", \
"neg_clipped_absolute_error"} or None, default=None
        The DP validation score. None: ``"accuracy"`` for classifiers,
        ``"neg_clipped_squared_error"`` for regressors.
    score_clip : float or "auto", default="auto"
        Bound on a regression record's loss in the score (ignored for accuracy).
        ``"auto"``: ``(2 s)^2`` for the squared error, ``2 s`` for the absolute
        error, ``s`` the target's scale released with 5% of the budget (see
        **Scores**); where the budget is too small to locate the scale, ``s = 1``.
        A public float spends nothing; a wrong value costs accuracy of the
        selection, never privacy.
    validation_fraction : float, default=0.2
        Fraction of the records held out for the scores, in ``(0, 1)``.
    cv : float or None, default=None
        The validation fraction, as scikit-learn's ``ShuffleSplit(test_size=cv)``
        with one split; overrides ``validation_fraction``. An int (k folds) or a
        splitter object is refused: with k folds a record lies in ``k - 1``
        training sets and one validation set, so a run would compose ``k - 1``
        fits and its score instead of costing the larger of the two (one split,
        parallel composition), and a splitter may read the data (stratified or
        grouped folds) to place the records.
    refit : bool, default=False
        ``True`` is refused (see **Refit**): the released model is the best run's.
    selection : {"truncated_negative_binomial", "geometric"}, \
default="truncated_negative_binomial"
        Distribution of the number of runs ``K``: Papernot & Steinke's truncated
        negative binomial of shape ``eta``, or the geometric distribution of Liu &
        Talwar's random stopping (the same family at ``eta = 1``).
    expected_runs : float or None, default=None
        ``E[K]``, ``> 1``. None: the number of configurations (at least 2). More runs
        try more configurations but leave each a smaller budget (the cost grows like
        ``log E[K]``).
    eta : float, default=0.0
        Shape of the truncated negative binomial, ``>= 0`` (ignored by
        ``"geometric"``). ``0`` (the logarithmic distribution) leaves the largest
        per-run budget for a given ``expected_runs`` among the supported shapes, but
        has the heaviest tail: at ``expected_runs=9`` the 99th percentile of ``K``
        is 71 runs (40 for the geometric, 31 for ``eta=2``);
        larger shapes concentrate ``K``.
    n_jobs : int or None, default=None
        Runs fitted at a time, in threads (joblib's threading backend; ``-1``: one
        per core). Threads, not processes: the silencing of the hidden runs is
        process-wide. The result does not depend on ``n_jobs``.
    verbose : int, default=0
        If > 0, print the two public lines of **Parallel runs, progress**. The
        estimators' own ``verbose`` stays off inside the runs.
    random_state : int, RandomState instance, numpy.random.Generator or None, \
default=None
        Source of the split, of ``K``, of the configurations drawn, of the score
        noise and, when seeded, of every fit's seed. None (for production) draws
        fresh entropy, and every fit is made with ``random_state=None`` (its own
        fresh entropy); an int makes the search reproducible (tests only).

    Attributes
    ----------
    best_params_ : dict
        The released configuration.
    best_index_ : int
        Its index in ``ParameterGrid(param_grid)``.
    best_score_ : float
        Its noisy validation score (the only score released).
    best_estimator_ : estimator
        The best run's model, fitted on the training part. Its ``privacy_spent_`` is
        replaced by the search's: being selected is part of its release.
    cv_results_ : dict
        Released quantities only: ``params``, ``mean_test_score`` (the noisy score),
        ``rank_test_score`` and ``candidate_index`` of the released run. The number of
        runs, the other runs and every non-private score are never stored: releasing
        them would void the selection theorem.
    privacy_spent_ : PrivacySpent
        What the whole search spent (``accountant="rdp-selection"``), never more than
        ``epsilon``; one ``"approx_dp"`` record, so that
        :func:`~skdpsco.privacy.total_privacy_spent` composes it with other fits.
    run_rho_ : float
        zCDP budget of one run (of its fit, and separately of its score).
    score_noise_std_ : float
        Standard deviation of the Gaussian noise on each validation score.
    n_candidates_ : int
        Number of configurations in the grid.
    selection_gamma_, selection_eta_, expected_runs_ : float
        Parameters of the distribution of ``K`` (public).
    n_train_, n_validation_ : int
        Sizes of the two parts.
    classes_ : ndarray
        Class labels (classifiers): the base estimator's public ``classes`` if given,
        else the labels present in ``y`` (released, like ``n``).
    n_features_in_ : int
        Number of features seen during fit.
    scorer_ : str
        The scoring used.
    score_clip_ : float
        The clip of the regression scores (released when ``score_clip="auto"``);
        1 for accuracy.

    Notes
    -----
    What the guarantee does not cover: the wall-clock time of ``fit`` grows with
    the hidden number of runs ``K``, so an adversary who times the search learns
    about ``K`` (a side channel outside the model of differential privacy, as for
    every DP library); release the fitted search, not its timing. The released
    ``best_estimator_`` carries the ``random_state`` values you set, never the seed
    its run was fitted with (that seed would let anyone regenerate its noise).

    The runs are silent: whatever they print (the estimators' ``verbose``
    progress, switched off for them), log or warn would count ``K``, so it is
    dropped, and ``best_estimator_`` gets your ``verbose`` values back. The
    silencing is Python-level (``sys.stdout``, ``sys.stderr``, ``logging``,
    ``warnings``): output that a compiled extension or a worker process writes
    straight to the process's file descriptors is not caught.

    See Also
    --------
    sklearn.model_selection.GridSearchCV : the non-private search.
    skdpsco.privacy.total_privacy_spent : totals over several fits.

    References
    ----------
    .. [1] Liu, J. and Talwar, K. (2019). Private selection from private candidates.
       STOC. arXiv:1811.07971. Random stopping (Algorithm 2).
    .. [2] Papernot, N. and Steinke, T. (2022). Hyperparameter tuning with Renyi
       differential privacy. ICLR. arXiv:2110.03620. Definition 1 (the truncated
       negative binomial), Theorem 2 (the RDP bound used here), Corollary 3 (pure
       DP: ``(2 + eta) epsilon``).

    Examples
    --------
    >>> from sklearn.datasets import make_classification
    >>> from skdpsco import HeavyTailedDPLogistic
    >>> from skdpsco.model_selection import PrivateSearchCV
    >>> X, y = make_classification(2000, 5, random_state=0)
    >>> search = PrivateSearchCV(
    ...     HeavyTailedDPLogistic(max_iter=20),
    ...     {"C": [0.01, 1.0], "clip_norm": [0.5, 2.0]},
    ...     epsilon=1.0,
    ...     random_state=0,
    ... ).fit(X, y)
    >>> sorted(search.best_params_)
    ['C', 'clip_norm']
    >>> search.privacy_spent_.epsilon <= 1.0
    True
    >>> search.predict(X[:3]).shape
    (3,)
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit", "get_params"])],
        "param_grid": [dict, list],
        "epsilon": PRIVACY_PARAMETER_CONSTRAINTS["epsilon"],
        "delta": PRIVACY_PARAMETER_CONSTRAINTS["delta"],
        "scoring": [None, StrOptions(set(_SCORINGS))],
        "score_clip": [PublicBound(), StrOptions({"auto"})],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        # Any cv reaches _check_search_options, which says why it is refused.
        "cv": "no_validation",
        "refit": ["boolean"],
        "n_jobs": [None, Integral],
        "verbose": ["verbose"],
        "selection": [StrOptions({"truncated_negative_binomial", "geometric"})],
        "expected_runs": [None, Interval(Real, 1, None, closed="neither")],
        "eta": [Interval(Real, 0, None, closed="left")],
        "random_state": PRIVACY_PARAMETER_CONSTRAINTS["random_state"],
    }

    def __init__(
        self,
        estimator,
        param_grid,
        *,
        epsilon=1.0,
        delta=1e-5,
        scoring=None,
        score_clip="auto",
        validation_fraction=0.2,
        cv=None,
        refit=False,
        selection="truncated_negative_binomial",
        expected_runs=None,
        eta=0.0,
        n_jobs=None,
        verbose=0,
        random_state=None,
    ):
        self.estimator = estimator
        self.param_grid = param_grid
        self.epsilon = epsilon
        self.delta = delta
        self.scoring = scoring
        self.score_clip = score_clip
        self.validation_fraction = validation_fraction
        self.cv = cv
        self.refit = refit
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.selection = selection
        self.expected_runs = expected_runs
        self.eta = eta
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        sub = get_tags(self.estimator)
        tags.estimator_type = sub.estimator_type
        tags.classifier_tags = deepcopy(sub.classifier_tags)
        tags.regressor_tags = deepcopy(sub.regressor_tags)
        tags.input_tags.sparse = sub.input_tags.sparse
        return tags

    # ------------------------------------------------------------------ checks

    def _candidates(self):
        grid = list(ParameterGrid(self.param_grid))
        if not grid:
            raise ValueError("param_grid has no configuration.")
        for params in grid:
            for key in params:
                if key.split("__")[-1] in ("epsilon", "delta"):
                    raise ValueError(
                        f"param_grid varies {key!r}: the search sets every DP step's "
                        "epsilon and delta from its own budget (see the docstring); "
                        "search over the other parameters only."
                    )
        return grid

    def _score_spec(self):
        classifier = is_classifier(self.estimator)
        scoring = self.scoring
        if scoring is None:
            scoring = "accuracy" if classifier else "neg_clipped_squared_error"
        if (scoring == "accuracy") != classifier:
            kind = "classifiers" if scoring == "accuracy" else "regressors"
            raise ValueError(
                f"scoring={scoring!r} is for {kind}; {type(self.estimator).__name__} "
                f"is {'a classifier' if classifier else 'not a classifier'}."
            )
        score_range = _SCORINGS[scoring]
        if score_range is None and self.score_clip != "auto":
            score_range = float(self.score_clip)
        return scoring, score_range

    def _asks(self, rho_step, delta, *, pure):
        """``(epsilon, delta)`` ask whose zCDP cost is ``rho_step``.

        Gaussian steps turn ``(epsilon, delta)`` into the zCDP budget of the exact
        Gaussian composition (``rho = mu^2 / 2``, ``mu`` the GDP of the ask), so the
        ask is ``gdp_to_approx_dp(sqrt(2 rho_step), delta)``. A pure ``epsilon``-DP
        step costs ``epsilon^2 / 2`` zCDP (Bun & Steinke 2016, Prop 1.4), so its ask is
        ``sqrt(2 rho_step)``.
        """
        if math.isinf(rho_step):
            return math.inf, delta
        if pure:
            return math.sqrt(2.0 * rho_step), delta
        return _gaussian_ask(float(rho_step), float(delta)), delta

    def _probe_data(self, X, n_train, classes, rng):
        """Synthetic public data of the training part's shape (no private value)."""
        d = X.shape[1]
        if sparse.issparse(X):
            cols = np.arange(n_train) % d
            Z = sparse.csr_matrix(
                (np.ones(n_train), (np.arange(n_train), cols)), shape=(n_train, d)
            )
        else:
            Z = rng.standard_normal((n_train, d))
            if hasattr(X, "columns"):
                Z = _probe_frame(Z, X)
        if classes is not None:
            y = classes[np.arange(n_train) % classes.size]
        else:
            y = rng.standard_normal(n_train)
        return Z, y

    def _configure(self, params, asks, classes_param):
        est = clone(self.estimator)
        # Estimator objects in the grid are cloned for every run, as GridSearchCV
        # does: shared, a losing run's fitted step (with its run seed) would stay in
        # the user's param_grid, and the released model could mix runs.
        settings = clone(dict(params), safe=False)
        for prefix, (eps, dlt) in asks.items():
            settings[f"{prefix}epsilon"] = eps
            settings[f"{prefix}delta"] = dlt
        if classes_param is not None:
            settings[classes_param[0]] = classes_param[1]
        return est.set_params(**settings)

    def _probe(self, params, ask, classes_param, Z, yz, rng):
        est = _set_random_states(self._configure(params, ask, classes_param), rng)
        # The probes are as many as the configurations (public) and see public
        # synthetic data only, but their progress output would read as the
        # search's own: they are as quiet as the hidden runs, except for warnings.
        _mute(est)
        with _silenced(warnings_too=False), warnings.catch_warnings():
            # Accuracy and numerical warnings on synthetic data are irrelevant: only
            # the ledger of the probe is read. Other warnings (e.g. a deprecated
            # parameter) are about the configuration, once per configuration.
            warnings.simplefilter("ignore", UserWarning)
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                return est.fit(Z, yz)
            except (PrivacyBudgetError, TypeError):
                # Refusals of the configuration or of the input's type (sparse,
                # dtype): about public properties, shown as the estimator says them.
                raise
            except Exception as exc:
                raise ValueError(
                    f"PrivateSearchCV: the configuration {params} failed on the "
                    "synthetic public probe data (standard normal features, labels "
                    "cycling through the classes) that every configuration is fitted "
                    "on first, to check its privacy ledger before any private fit: "
                    f"{type(exc).__name__}: {exc}. Steps that need a domain (e.g. "
                    "log of positive values) cannot be probed; move them out of the "
                    "searched pipeline (apply them to X first)."
                ) from exc

    def _check_run(self, est, prefixes, rho_step, where, orders=None):
        """zCDP spent by the DP steps of a fitted run (on ``orders``, if given);
        refuses more than asked."""
        total = 0.0
        for prefix in prefixes:
            step = _step(est, prefix)
            rho = _spent_rho(step, orders)
            if not _within(rho, rho_step):
                got = "no zCDP bound" if rho is None else f"rho={rho:.6g}"
                raise PrivacyBudgetError(
                    f"PrivateSearchCV: step {prefix.rstrip('_') or 'estimator'} "
                    f"({type(step).__name__}) {where} spent {got} for a per-run share "
                    f"of rho={rho_step:.6g}. The selection theorem needs every run to "
                    "be zCDP within its share (Gaussian or Laplace mechanisms); "
                    "nothing is released."
                )
            total += rho
        return total

    # ------------------------------------------------------------------- fit

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y):
        """Run the private search.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
            Private training data (no bound assumed or read).
        y : array-like of shape (n_samples,)
            Private targets.

        Returns
        -------
        self : object
        """
        # The numpy error state is fixed for the whole search (the hidden runs'
        # scores included): a floating-point event must not raise or warn on one
        # neighbour only.
        with np.errstate(all="ignore"):
            return self._fit(X, y)

    def _fit(self, X, y):
        X, y = _check_data(X, y)
        plan = self._plan(_n_rows(X), y)
        rng = make_generator(self.random_state)
        # The fits' own sources of randomness: seeds drawn from the search's
        # generator when it is seeded (reproducible, tests only), else None, so that
        # every fit draws fresh OS entropy for its noise (see _set_random_states).
        seed_rng = None if self.random_state is None else rng
        probe_rng = np.random.default_rng(rng.integers(0, 2**63 - 1))
        asks, rho_probed = self._probe_grid(X, plan, probe_rng, seed_rng)
        if asks is None:
            # A step without a zCDP bound: the runs are accounted on the orders
            # where their RDP curves are bounded (public: the probes decided).
            orders = _run_orders(plan.rho_run, plan.budget.delta)
            plan = self._plan(_n_rows(X), y, orders=orders)
            asks, rho_probed = self._probe_grid(X, plan, probe_rng, seed_rng)
        plan = self._release_clip(plan, y, rng)
        self._say(
            f"{len(plan.grid)} configurations, {tnb_mean(plan.eta, plan.gamma):.3g} "
            f"expected runs; each run fits within rho={plan.rho_run:.4g} (epsilon "
            f"{_gaussian_ask(plan.rho_run, plan.budget.delta):.4g} at delta="
            f"{plan.budget.delta:g}), score noise std {plan.score_mech.sigma:.4g}"
            f" ({plan.scoring} clipped at {plan.score_range:.4g})"
        )
        parts = _split(X, y, plan.n_val, rng)
        # The score noise has its own stream (the runs' configurations and seeds
        # are drawn from rng as they are dispatched): the same draws in the same
        # order whatever n_jobs.
        noise_rng = rng if seed_rng is None else make_generator(rng.integers(2**62))
        best, rho_fit = self._hidden_runs(plan, asks, parts, rng, noise_rng, seed_rng)
        # The run is max(fit, score)-zCDP: a replaced record is in one part only.
        rho_q = max(rho_probed, rho_fit, plan.score_mech.rho)
        record = selection_record(
            rho_q, plan.budget.delta, plan.eta, plan.gamma, plan.rho_clip, plan.orders
        )
        gate_release(record.epsilon, plan.budget.epsilon, "PrivateSearchCV")
        spent = PrivacySpent(
            epsilon=record.epsilon,
            delta=plan.budget.delta,
            rho=None,
            accountant="rdp-selection",
            mechanisms=(record,),
        )
        self._release(best, plan, spent)
        self._say(
            f"released {self.best_params_} (noisy {plan.scoring} "
            f"{self.best_score_:.4g}); spent epsilon={spent.epsilon:.4g}, "
            f"delta={spent.delta:g}"
        )
        return self

    def _say(self, line):
        """One public progress line (``verbose``); see the class notes."""
        if self.verbose:
            print(f"PrivateSearchCV: {line}", flush=True)

    def _plan(self, n, y, orders=None):
        """The search's public plan, fixed before any private record is read.

        The DP steps, the candidates, the score and its range, the budget, the
        split sizes, the distribution ``D_{eta, gamma}`` of the number of runs
        ``K`` (Papernot & Steinke 2022, Definition 1; ``eta = 1`` is Liu & Talwar's
        2019 geometric random stopping) and the per-run zCDP budget ``rho_run``
        whose best-of-``K`` selection (composed with the score scale's release,
        ``score_clip="auto"``) is the asked ``(epsilon, delta)`` (Papernot &
        Steinke 2022, Theorem 2). With ``orders``, the runs are bounded on those
        orders only (steps without a zCDP bound, :func:`_spent_rho`) and the
        selection is accounted on them. Every refusal here reads public numbers
        only.
        """
        fraction = self._check_search_options()
        prefixes = _private_steps(self.estimator)
        grid = self._candidates()
        scoring, score_range = self._score_spec()
        budget = check_privacy_params(self, n, requires_delta=True, min_samples=4)
        n_val = max(1, int(round(fraction * n)))
        if n - n_val < 2:
            raise PrivacyBudgetError(
                f"PrivateSearchCV: a validation fraction of {fraction} leaves "
                f"{n - n_val} training records out of n={n}."
            )
        eta = 1.0 if self.selection == "geometric" else float(self.eta)
        mean = (
            float(self.expected_runs)
            if self.expected_runs is not None
            else float(max(2, len(grid)))
        )
        gamma = tnb_gamma(eta, mean)
        rho_clip = 0.0
        if score_range is None:
            rho_clip = _CLIP_SHARE * gaussian_rho_budget(budget.epsilon, budget.delta)
        rho_run = calibrate_selection_rho(
            budget.epsilon,
            budget.delta,
            eta,
            gamma,
            orders,
            rho_clip,
            on_grid=orders is not None,
        )
        # With score_clip="auto" the range is released later; the refusal depends
        # on the noise relative to the range only, so a unit range decides it.
        score_mech = _score_mechanism(
            rho_run, budget, mean, n_val, scoring, score_range or 1.0
        )
        # Every DP step gets its share of the run: sequential composition on the
        # training part.
        rho_step = rho_run / len(prefixes) * (1.0 - _ASK_MARGIN)
        return _Plan(  # in the order of _Plan's fields
            prefixes,
            grid,
            scoring,
            score_range,
            budget,
            n - n_val,
            n_val,
            eta,
            gamma,
            rho_run,
            rho_step,
            score_mech,
            *self._public_classes(prefixes, y),
            rho_clip,
            orders,
        )

    def _check_search_options(self):
        """The validation fraction; refuses ``cv`` and ``refit`` it cannot honour.

        Returns
        -------
        fraction : float
            ``cv`` when it is a fraction, else ``validation_fraction``.
        """
        if self.refit:
            raise ValueError(
                "PrivateSearchCV(refit=True) is not supported: the released model "
                "is the best run's own, fitted on the training part. A refit on "
                "all the records would be one more fit, composed with the search "
                "(more epsilon, or more noise in every run for the same epsilon); "
                "leave refit=False, or refit the released best_params_ yourself "
                "with a budget of its own and total both with "
                "skdpsco.privacy.total_privacy_spent."
            )
        cv = self.cv
        if cv is None:
            return float(self.validation_fraction)
        if isinstance(cv, Real) and not isinstance(cv, Integral) and 0 < cv < 1:
            return float(cv)
        raise ValueError(
            f"PrivateSearchCV(cv={cv!r}) is not supported: cv is the validation "
            "fraction, a float in (0, 1). Each run trains on one random split and "
            "scores on the rest, so that a replaced record lies in one part only "
            "(parallel composition: a run costs max(fit, score), not their sum). "
            "With k folds a record is in k - 1 training sets and 1 validation set "
            "(a run would compose k - 1 fits and the score), and a splitter object "
            "may read the data (stratified or grouped folds) to place records."
        )

    def _release_clip(self, plan, y, rng):
        """The plan with ``score_clip="auto"`` resolved from the target's scale.

        The scale is the one the estimators release for their targets
        (:func:`~skdpsco._column_scaling.private_column_scaling`, Gaussian
        mechanisms within ``rho_clip`` zCDP, its public share
        :data:`_CLIP_SHARE`), read on every record and composed with the selection
        (:func:`~skdpsco.privacy._selection.selection_epsilon`). Accuracy, and a
        numeric ``score_clip``, read nothing.
        """
        if plan.score_range is not None:
            return plan
        # One column per target (a multi-output regressor's loss averages its
        # targets' clipped losses: the largest target scale bounds them all).
        y = np.asarray(y, dtype=float)
        target = y.reshape(y.shape[0], -1)
        if not np.all(np.isfinite(target)):
            raise ValueError("y contains NaN or infinity.")
        scaling = private_column_scaling(
            target, rng, rho=plan.rho_clip, center=True, name="target (score clip)"
        )
        clip = _AUTO_CLIP[plan.scoring](float(np.max(scaling.scale)))
        # A clip outside the public-bound range would make the score's
        # sensitivity leave the normal floats; the scale's grid keeps it inside.
        clip = float(np.clip(clip, *PUBLIC_BOUND_RANGE))
        score_mech = _score_mechanism(
            plan.rho_run,
            plan.budget,
            tnb_mean(plan.eta, plan.gamma),
            plan.n_val,
            plan.scoring,
            clip,
        )
        return plan._replace(score_range=clip, score_mech=score_mech)

    def _public_classes(self, prefixes, y):
        """The public label set (classifiers), and the parameter that fixes it.

        The estimator's own ``classes`` if given, else read from ``y`` and released,
        like ``n`` (the user guide's "What is public").

        Returns
        -------
        classes : ndarray or None
        classes_param : tuple of (str, ndarray) or None
            ``(parameter name, classes)`` when the final step has a ``classes``
            parameter, so that every run sees every label.
        """
        if not is_classifier(self.estimator):
            return None, None
        key = f"{prefixes[-1]}classes"
        given = self.estimator.get_params().get(key)
        classes = np.unique(np.asarray(given if given is not None else y))
        if key in self.estimator.get_params():
            return classes, (key, classes)
        return classes, None

    def _probe_grid(self, X, plan, rng, seed_rng):
        """Fit every candidate once on synthetic public data; refuse the overspenders.

        A configuration that cannot run within its per-step share ``rho_step`` as
        zCDP (the selection theorem, Papernot & Steinke 2022, Theorem 2, needs a
        bound on every run's RDP curve) is refused before any private record is
        read. A step over its share as a Gaussian ask is asked again as pure
        epsilon-DP (a Laplace step costs ``epsilon^2 / 2`` zCDP; Bun & Steinke
        2016, Prop. 1.4); a step without a zCDP bound (DP-SGD) gets the largest
        ask whose RDP curve is within ``rho_step * lambda`` on ``plan.orders``
        (:meth:`_shrunk_ask`).

        Returns
        -------
        asks : list of dict or None
            Per candidate, the ``(epsilon, delta)`` asked of every DP step; None
            when a step has no zCDP bound and ``plan.orders`` is None (the plan
            must be made on orders).
        rho_fit : float or None
            The largest zCDP a probe spent.
        """
        Z, yz = self._probe_data(X, plan.n_train, plan.classes, rng)
        delta, rho_step = plan.budget.delta, plan.rho_step
        asks, rho_fit = [], 0.0
        for params in plan.grid:

            def probe(ask, params=params):
                return self._probe(params, ask, plan.classes_param, Z, yz, seed_rng)

            ask = {p: self._asks(rho_step, delta, pure=False) for p in plan.prefixes}
            est = probe(ask)
            if plan.orders is None and any(
                _lacks_zcdp(_step(est, p)) for p in plan.prefixes
            ):
                return None, None
            over = [
                p
                for p in plan.prefixes
                if not _within(_spent_rho(_step(est, p), plan.orders), rho_step)
            ]
            for p in over:
                if _lacks_zcdp(_step(est, p)):
                    ask[p] = self._shrunk_ask(ask, p, plan, probe)
                else:
                    ask[p] = self._asks(rho_step, delta, pure=True)
            if over:
                est = probe(ask)
            rho_fit = max(
                rho_fit,
                self._check_run(
                    est, plan.prefixes, rho_step, f"of {params}", plan.orders
                ),
            )
            asks.append(ask)
        return asks, rho_fit

    @staticmethod
    def _shrunk_ask(ask, prefix, plan, probe):
        """The largest ask of step ``prefix`` whose RDP stays within its share.

        For a step without a zCDP bound, its curve on ``plan.orders``
        (:func:`_spent_rho`) grows with the ``epsilon`` it is asked; a bisection
        on ``log epsilon``, each point fitted on the public probe data, keeps the
        largest ask found within ``rho_step`` (the private fits are checked again
        with the same ledger). Public numbers only.
        """
        delta = plan.budget.delta

        def within(eps):
            est = probe({**ask, prefix: (eps, delta)})
            return _within(_spent_rho(_step(est, prefix), plan.orders), plan.rho_step)

        hi = lo = ask[prefix][0]
        for _ in range(30):
            lo /= 2.0
            if within(lo):
                break
        else:
            return ask[prefix]  # nothing fits: the check that follows refuses it
        for _ in range(_ASK_BISECTIONS):
            mid = math.sqrt(lo * hi)
            lo, hi = (mid, hi) if within(mid) else (lo, mid)
        return lo, delta

    def _hidden_runs(self, plan, asks, parts, rng, noise_rng, seed_rng):
        """The ``K`` hidden runs; only the best one (by its noisy score) comes out.

        ``K`` and the losing runs must stay hidden (Liu & Talwar 2019; Papernot &
        Steinke 2022, Theorem 2): whatever the runs (or the draw of ``K``, or the
        score noise, drawn ``K`` times) print, log or warn is a function of runs
        that may be dropped, and its amount counts ``K``. Everything from the draw
        of ``K`` to the choice of the best is silenced, whatever the estimators'
        verbose settings (also switched off at the source, :func:`_mute`). An
        exception inside a run propagates unchanged and ends the search with
        nothing released; no message names a run or its number, and neither ``K``
        nor the run's number is a local variable of any frame (tracebacks captured
        with their locals, e.g. by error trackers, would show it).

        The runs are drawn (configuration, seeds) in this thread, fitted
        ``n_jobs`` at a time in threads, and scored in the order they were drawn,
        the noise from ``noise_rng``: the same result for every ``n_jobs``.

        Returns
        -------
        best : tuple
            ``(noisy score, candidate index, fitted estimator, muted verbose
            settings)`` of the best run.
        rho_fit : float
            The largest zCDP a run's fit spent.
        """
        best, rho_fit = None, 0.0
        width = 1 if self.n_jobs is None else effective_n_jobs(self.n_jobs)
        # Threads, not processes: the silencing (sys.stdout, logging, warnings)
        # is process-wide, and worker processes would write past it.
        parallel = Parallel(n_jobs=width, backend="threading")
        with _silenced():
            runs = self._drawn_runs(plan, asks, rng, seed_rng)
            for chunk in iter(lambda: list(itertools.islice(runs, width)), []):
                fitted = parallel(
                    delayed(self._run)(plan, run[1], parts) for run in chunk
                )
                for (index, est, shown), (raw, rho) in zip(chunk, fitted, strict=True):
                    noisy = float(plan.score_mech.release(raw, noise_rng))
                    score = noisy if plan.scoring == "accuracy" else -noisy
                    rho_fit = max(rho_fit, rho)
                    if best is None or score > best[0]:
                        best = (score, index, est, shown)
        return best, rho_fit

    def _drawn_runs(self, plan, asks, rng, seed_rng):
        """The hidden runs, configured and seeded, one at a time (a generator).

        ``K`` is drawn on the first step and held by the iterator of
        :func:`_number_of_runs` only. Which configuration each run fits is part of
        the selection's randomness: from the secure source.
        """
        for _ in _number_of_runs(rng, plan.eta, plan.gamma):
            index = int(_uniform_below(rng, len(plan.grid), 1)[0])
            est = self._configure(plan.grid[index], asks[index], plan.classes_param)
            shown = _mute(est)
            yield index, _set_random_states(est, seed_rng), shown

    def _run(self, plan, est, parts):
        """One hidden run, the base mechanism ``Q`` of the selection, before noise.

        Fit ``est`` on the training part within its share of ``rho_run``; its
        validation score gets the Gaussian noise of :func:`_score_mechanism` in
        :meth:`_hidden_runs`. A replaced record lies in one part only, so the
        run is ``rho_run``-zCDP (parallel composition).

        Returns
        -------
        raw : float
            The exact validation score (never leaves ``fit``).
        rho : float
            The zCDP its fit spent.
        """
        X_train, y_train, X_val, y_val = parts
        # The error state is per thread: fixed here too (see fit).
        with np.errstate(all="ignore"):
            est.fit(X_train, y_train)
            rho = self._check_run(
                est, plan.prefixes, plan.rho_step, "in the search", plan.orders
            )
            raw = self._raw_score(est, X_val, y_val, plan.scoring, plan.score_range)
        return raw, rho

    def _release(self, best, plan, spent):
        """Store the best run and the search's public quantities; return ``self``.

        The number of runs ``K`` is not stored: the guarantee needs ``K`` hidden.
        """
        score, index, est, shown = best
        # The run's seeds were drawn from the search's generator and set as plain
        # ints on its steps: left on the released model, they would let anyone
        # regenerate its noise and subtract it. The released estimator carries the
        # user's own random_state values, and its verbose settings.
        est.set_params(**_random_state_params(self.estimator))
        if shown:
            est.set_params(**shown)
        # Every DP step of the released model carries the search's total, never
        # its per-run share: totalling one step alone must not understate.
        for prefix in plan.prefixes:
            _step(est, prefix).privacy_spent_ = spent
        est.privacy_spent_ = spent
        self.best_estimator_ = est
        self.best_index_ = index
        self.best_params_ = dict(plan.grid[index])
        self.best_score_ = score
        self.cv_results_ = {
            "params": [dict(plan.grid[index])],
            "mean_test_score": np.array([score]),
            "rank_test_score": np.array([1], dtype=np.int32),
            "candidate_index": np.array([index]),
        }
        self.privacy_spent_ = spent
        self.run_rho_ = plan.rho_run
        self.score_noise_std_ = plan.score_mech.sigma
        self.n_candidates_ = len(plan.grid)
        self.selection_eta_ = plan.eta
        self.selection_gamma_ = plan.gamma
        self.expected_runs_ = tnb_mean(plan.eta, plan.gamma)
        self.n_train_, self.n_validation_ = plan.n_train, plan.n_val
        self.scorer_ = plan.scoring
        self.score_clip_ = plan.score_range
        if plan.classes is not None:
            self.classes_ = plan.classes
        for name in ("n_features_in_", "feature_names_in_"):
            if hasattr(est, name):
                setattr(self, name, getattr(est, name))
        return self

    @staticmethod
    def _raw_score(est, X_val, y_val, scoring, clip):
        """Non-private validation score; only its noisy version leaves ``fit``."""
        pred = np.asarray(est.predict(X_val))
        if scoring == "accuracy":
            # Each record contributes 0 or 1: the mean has sensitivity 1 / n_val.
            return float(np.mean(pred == y_val))
        resid = np.asarray(y_val, dtype=float) - pred.astype(float)
        loss = resid**2 if scoring == "neg_clipped_squared_error" else np.abs(resid)
        # Each record contributes min(loss_i, score_clip) in [0, score_clip] (a NaN or
        # infinite prediction counts as the bound): sensitivity score_clip / n_val.
        return float(np.mean(np.where(np.isfinite(loss), np.minimum(loss, clip), clip)))

    # ---------------------------------------------------------- delegation

    predict = _delegate("predict", "Predict with the released model (post-processing).")
    predict_proba = _delegate(
        "predict_proba", "Class probabilities of the released model (post-processing)."
    )
    predict_log_proba = _delegate(
        "predict_log_proba",
        "Log class probabilities of the released model (post-processing).",
    )
    decision_function = _delegate(
        "decision_function",
        "Decision function of the released model (post-processing).",
    )
    transform = _delegate(
        "transform", "Transform with the released model (post-processing)."
    )

    @available_if(_released_has("score"))
    def score(self, X, y):
        """The released model's ``score`` on ``(X, y)``.

        Not private: scoring on private data releases that score exactly. Use it on
        public (test) data.
        """
        check_is_fitted(self)
        return self.best_estimator_.score(X, y)
