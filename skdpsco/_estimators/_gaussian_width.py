"""GaussianWidthDPRegressor and GaussianWidthDPClassifier.

Constrained linear models whose privacy noise pays for the Gaussian width of the
feasible set rather than for the dimension (Su, Zhao & Wang). The estimators
validate, build the public constraint set (:mod:`skdpsco._constraints`), pick the
solver of the chosen ``algorithm`` (:mod:`skdpsco._solvers._objective_perturbation`,
:mod:`skdpsco._solvers._mirror_descent`) and store the released parameters; the
math and every sensitivity argument live in those modules.
"""

import math
from numbers import Integral, Real

import numpy as np

from .._constraints import make_constraint
from .._dask_design import DaskLinearDesign
from .._design import LinearDesign
from .._losses import get_loss
from .._solvers._mirror_descent import (
    noisy_mirror_descent,
    phased_dp_sgd,
    shuffled_mirror_descent,
)
from .._solvers._objective_perturbation import approximate_objective_perturbation
from ..privacy._params import PositiveFinite, PublicBound
from ..privacy._shuffling import shuffle_valid_local_epsilon
from ..utils._compat import Interval, StrOptions
from ..utils._optional import is_dask_collection
from ._algorithm import Algorithm, registry
from ._base import (
    SCALING_PARAM_DOC,
    DPClassifierMixin,
    DPLinearModel,
    DPRegressorMixin,
    checked_penalty,
)

__all__ = ["GaussianWidthDPClassifier", "GaussianWidthDPRegressor"]

#: What ``algorithm="auto"`` runs without a ridge, the squared loss or ``p < 2``
#: (the measurements are in the ``algorithm`` parameter's documentation).
_AUTO_ALGORITHM = "phased_sgd"

_CONSTRAINTS = {"l2", "l1", "lp", "box", "simplex", "group_l1", "k_sparse"}

#: Constraints whose natural geometry is l_1-like: the mirror-descent algorithms
#: default to ``p = 1 + 1 / ln(d)`` for them (the classic l_1 mirror map; its
#: regularity constant ``1/(p-1) = ln d`` is below ``2e ln d``, Case A of
#: :func:`~skdpsco._solvers._mirror_descent.lp_geometry`).
_L1_LIKE = {"l1", "simplex", "group_l1", "k_sparse"}


def _default_geometry(constraint, n_params):
    """Public ``p`` of the l_p geometry when ``p=None`` (mirror-descent algorithms)."""
    if constraint in _L1_LIKE:
        return 1.0 + 1.0 / max(math.log(n_params), 1.0)
    return 2.0


def _project_released(constraint, W, n_features, intercept_bound):
    """Released ``W`` mapped into ``C x [-B, B]`` (post-processing of a DP output).

    The unconstrained algorithms (3 and Theorem 8) release a point of ``R^d``; the
    estimator promises ``coef_`` in ``C``, so the release is projected onto the set
    (and the intercept row clipped to ``[-B, B]``). A function of the private output
    only, so it costs no privacy.
    """
    W = np.array(W, dtype=float, copy=True)
    W[:n_features] = constraint.project(W[:n_features])
    if W.shape[0] > n_features:
        W[n_features:] = np.clip(W[n_features:], -intercept_bound, intercept_bound)
    return W


def _run_objective_perturbation(
    est, design, target, loss, n_classes, budget, C, rng, progress
):
    # The multinomial loss (3+ classes) runs with its own constants (rank K - 1
    # Hessian, chi_2K tail of the Gaussian term): see the solver's module docstring.
    if loss.name not in ("squared", "logistic", "multinomial"):
        raise ValueError(
            f"{type(est).__name__}(algorithm='objective_perturbation') needs a "
            "twice-differentiable generalized linear loss (Su, Zhao & Wang, "
            f"Theorem 1): 'squared', 'logistic' or 'multinomial', got "
            f"{loss.name!r}; use loss='squared_error' or another algorithm."
        )
    return approximate_objective_perturbation(
        design,
        target,
        loss,
        C,
        budget=budget,
        row_norm_bound=est.row_norm_bound,
        target_bound=est._target_bound(),
        intercept_bound=est.intercept_bound,
        l2_penalty=est._l2_penalty(budget.n_samples),
        lam_obj="auto",
        opt_tol=est.tol,
        max_iter="auto" if est.max_iter is None else est.max_iter,
        n_classes=n_classes,
        rng=rng,
    )


def _run_mirror_descent(est, design, target, loss, n_classes, budget, C, rng, progress):
    p = est._geometry_p(design, loss, n_classes)
    if not 1.0 < p <= 2.0:
        raise ValueError(
            f"{type(est).__name__}(algorithm='mirror_descent') is Su, Zhao & Wang's "
            f"Algorithm 3 for l_p geometry with 1 < p <= 2; got p={p!r}. For p >= 2 "
            "use algorithm='phased_sgd'."
        )
    _check_no_ridge(est, "mirror_descent")
    result = noisy_mirror_descent(
        design,
        target,
        loss,
        p=p,
        budget=budget,
        row_norm_bound=est.row_norm_bound,
        n_classes=n_classes,
        n_iter="auto" if est.max_iter is None else est.max_iter,
        progress=progress,
        rng=rng,
    )
    result.coef = _project_released(
        C, result.coef, design.n_features, est.intercept_bound
    )
    return result


def _run_phased_sgd(est, design, target, loss, n_classes, budget, C, rng, progress):
    p = est._geometry_p(design, loss, n_classes, euclidean_default=True)
    if not p >= 2.0:
        raise ValueError(
            f"{type(est).__name__}(algorithm='phased_sgd') is the p >= 2 reduction "
            f"of Su, Zhao & Wang's Theorem 8; got p={p!r}. For 1 < p < 2 use "
            "algorithm='mirror_descent'."
        )
    _check_no_ridge(est, "phased_sgd")
    result = phased_dp_sgd(
        design,
        target,
        loss,
        budget=budget,
        row_norm_bound=est.row_norm_bound,
        # D0 >= ||theta*||_2 sets the step size only: every point of C has l2 norm
        # at most R_max (public).
        norm_bound=float(C.radius_l2),
        p=p,
        n_classes=n_classes,
        progress=progress,
        rng=rng,
    )
    result.coef = _project_released(
        C, result.coef, design.n_features, est.intercept_bound
    )
    return result


def _run_shuffled_mirror_descent(
    est, design, target, loss, n_classes, budget, C, rng, progress
):
    if design.fit_intercept:
        raise ValueError(
            f"{type(est).__name__}(algorithm='shuffled_mirror_descent') supports "
            "fit_intercept=False only (pass it): its Bregman step over the set is "
            "not separable in an intercept coordinate."
        )
    _check_no_ridge(est, "shuffled_mirror_descent")
    p = est._geometry_p(design, loss, n_classes)
    if not 1.0 < p <= 2.0:
        raise ValueError(
            f"{type(est).__name__}(algorithm='shuffled_mirror_descent') is Su, Zhao "
            f"& Wang's Algorithm 4 for 1 < p <= 2 (p >= 2 reduces to p = 2); "
            f"got p={p!r}."
        )
    R = est.row_norm_bound
    # Amplification by shuffling is proven only for n > 16 ln(4 / delta_s) (FMT21;
    # delta_s = delta / 2 as in the solver); below that the batched variant (parallel
    # composition) runs instead. A function of the public n and delta only.
    amplifies = shuffle_valid_local_epsilon(budget.n_samples, budget.delta / 2.0) > 0
    return shuffled_mirror_descent(
        design,
        target,
        loss,
        C,
        p=p,
        budget=budget,
        grad_std_bound=est.gradient_scale,
        # Utility only (it sets the truncation threshold): the smoothness of the
        # loss for rows of norm row_norm_bound.
        smoothness=loss.smoothness * R**2,
        # In units of the gradient's public scale, as in the heavy-tailed family.
        truncation_threshold=(
            "auto" if est.truncation == "auto" else est.truncation * est.gradient_scale
        ),
        variant="shuffled" if amplifies else "batched",
        n_classes=n_classes,
        progress=progress,
        rng=rng,
    )


def _check_no_ridge(est, algorithm):
    if est._has_ridge():
        what = est._ridge_parameter
        raise ValueError(
            f"{type(est).__name__}(algorithm={algorithm!r}) takes no ridge penalty "
            f"(only 'objective_perturbation' does, as Su, Zhao & Wang's Algorithm "
            f"2); leave {what} at its default."
        )


def _runner(name, solve):
    """Runner of ``name``: the public loss, constraint set and design of the
    family, then ``solve``."""

    def run(problem):
        est = problem.estimator
        n_outputs = problem.n_outputs
        design = problem.X
        if not isinstance(design, DaskLinearDesign):
            design = LinearDesign(design, est.fit_intercept)
        return solve(
            est,
            design,
            problem.target,
            est._loss(n_outputs, name),
            n_outputs if n_outputs > 1 else 2,
            problem.budget,
            est._make_constraint(problem.n_features),
            problem.rng,
            problem.progress,
        )

    return run


#: The algorithms (every entry is audited in tests/audit). Phased SGD's and mirror
#: descent's mechanisms are Gaussians calibrated to (epsilon, delta): the scaling's
#: Gaussians compose with them exactly ("gdp-epsilon"); the others split
#: (epsilon, delta) with the scaling by basic composition. ``"auto"`` resolves,
#: from public facts (the task and the number of classes), to the algorithm that
#: measured best in benchmarks/gaussian_width.py. The full-batch algorithms fit
#: dask input ("dask": their gradients are exact block sums of the clipped rows);
#: the one-record-per-step ones read the records in a sequence, not as sums.
_ALGORITHMS = registry(
    Algorithm(
        "objective_perturbation",
        _runner("objective_perturbation", _run_objective_perturbation),
        supports=frozenset({"dask", "max_iter"}),
    ),
    Algorithm(
        "mirror_descent",
        _runner("mirror_descent", _run_mirror_descent),
        "gdp-epsilon",
        supports=frozenset({"dask", "max_iter"}),
    ),
    Algorithm(
        "phased_sgd",
        _runner("phased_sgd", _run_phased_sgd),
        "gdp-epsilon",
    ),
    Algorithm(
        "shuffled_mirror_descent",
        _runner("shuffled_mirror_descent", _run_shuffled_mirror_descent),
    ),
)


class _GaussianWidthBase(DPLinearModel):
    _ALGORITHMS = _ALGORITHMS

    _parameter_constraints: dict = {
        **DPLinearModel._parameter_constraints,
        "algorithm": [StrOptions({"auto", *_ALGORITHMS})],
        "constraint": [StrOptions(_CONSTRAINTS)],
        "radius": [PublicBound()],
        "p": [None, PositiveFinite()],
        "groups": [None, "array-like"],
        "k": [None, Interval(Integral, 1, None, closed="left")],
        "intercept_bound": [PublicBound()],
        "row_norm_bound": [PublicBound()],
        "gradient_scale": [PublicBound()],
        "truncation": [StrOptions({"auto"}), PublicBound()],
        "max_iter": [None, Interval(Integral, 1, None, closed="left")],
        "tol": [StrOptions({"auto"}), PositiveFinite()],
    }

    #: scipy.sparse X works end to end (rows are only touched through LinearDesign).
    _accept_sparse = True
    # row_norm_bound = 1 is a bound on rows of norm about 1.
    _unit_rows = True

    def _resolved_algorithm(self, n_outputs):
        """``algorithm`` with ``"auto"`` resolved from public parameters only (the
        measurements are in the ``algorithm`` parameter's documentation)."""
        if self.algorithm != "auto":
            return self.algorithm
        return self._auto_choice()[0]

    def _auto_reason(self, n_outputs):
        return self._auto_choice()[1]

    def _auto_choice(self):
        """``(algorithm, why)`` of ``algorithm="auto"``: public facts only."""
        # Objective perturbation is the only one with a ridge (Algorithm 2) or the
        # squared loss on all of R^d; it runs for any number of classes
        # (multinomial constants in its solver). At epsilon > 1 phased SGD (its
        # noise calibrated exactly at any epsilon) measured better on raw real
        # data, 10 splits: breast cancer 0.889 against 0.746 at epsilon 4,
        # diabetes R^2 0.258 against -1.92, and it grows with epsilon where
        # objective perturbation's fell below its epsilon = 1 score.
        if self._needs_objective_perturbation():
            return "objective_perturbation", (
                "a ridge or the squared loss, which only objective perturbation "
                "supports"
            )
        if self.p is not None and self.p < 2:
            # Phased SGD is the p >= 2 reduction (Theorem 8); l_p geometry with
            # 1 < p < 2 is Algorithm 3's, stated for epsilon <= 1 (above it,
            # objective perturbation, which takes any set).
            if self.epsilon <= 1:
                return "mirror_descent", "l_p geometry with p < 2 (Algorithm 3)"
            return "objective_perturbation", (
                "l_p geometry with p < 2 at epsilon > 1, where Algorithm 3 is not "
                "stated"
            )
        return _AUTO_ALGORITHM, "the default, measured best on raw real data"

    def _constraint_unit(self, n_features):
        """Factor from the standardised units in which ``radius`` is stated to the
        fit's units. With ``scaling`` on, the fit sees every standardised column
        further divided by ``sqrt(d)`` (rows of norm about 1, the unit of
        ``row_norm_bound``), so coefficients there are ``sqrt(d)`` times the
        standardised ones; every set is a ball scaled by ``radius``. Public."""
        if isinstance(self.scaling, str) and self.scaling == "none":
            return 1.0
        return math.sqrt(n_features)

    def _fit_unit_squared(self):
        """Square of :meth:`_constraint_unit`: a penalty stated on standardised
        coefficients, in the fit's units."""
        if isinstance(self.scaling, str) and self.scaling == "none":
            return 1.0
        return float(self.n_features_in_)

    def _make_constraint(self, n_features):
        """The public set ``C`` for the coefficients (no intercept row), in the
        fit's units (:meth:`_constraint_unit`)."""
        try:
            return make_constraint(
                self.constraint,
                n_features,
                self.radius * self._constraint_unit(n_features),
                p=self.p if self.constraint == "lp" else None,
                groups=self.groups,
                k=self.k,
            )
        except ValueError as exc:
            # The set's own message names its parameter; say whose it is.
            raise ValueError(
                f"{type(self).__name__}(constraint={self.constraint!r}): {exc}"
            ) from exc

    def _geometry_p(self, design, loss, n_classes, euclidean_default=False):
        """The l_p geometry of the mirror-descent algorithms (public)."""
        if self.p is not None:
            return float(self.p)
        if euclidean_default:
            return 2.0
        n_params = design.dim * loss.n_outputs(n_classes)
        return _default_geometry(self.constraint, n_params)

    def _standardise(self, X, x_scaling):
        if is_dask_collection(X):
            # Lazily, chunk by chunk: the same map of each value as in memory.
            return X.rechunk({1: -1}).map_blocks(x_scaling.transform, dtype=float)
        return super()._standardise(X, x_scaling)

    def _check_supported(self, algorithm):
        super()._check_supported(algorithm)
        if self.p is not None and self.constraint != "lp":
            if algorithm.name == "objective_perturbation":
                raise ValueError(
                    f"{type(self).__name__}: p={self.p!r} applies to "
                    "constraint='lp' or to the l_p algorithms ('mirror_descent', "
                    "'shuffled_mirror_descent', 'phased_sgd'); "
                    "'objective_perturbation' is Euclidean."
                )
        if self.constraint == "lp" and self.p is None:
            raise ValueError(
                f"{type(self).__name__}: constraint='lp' needs p (1 < p < inf)."
            )
        if self.constraint == "lp" and not self.p > 1:
            raise ValueError(
                f"{type(self).__name__}: constraint='lp' needs 1 < p < inf, "
                f"got p={self.p!r}."
            )
        if self.groups is not None and self.constraint != "group_l1":
            raise ValueError(
                f"{type(self).__name__}: groups applies to constraint='group_l1' "
                f"only, got constraint={self.constraint!r}."
            )
        if self.k is not None and self.constraint != "k_sparse":
            raise ValueError(
                f"{type(self).__name__}: k applies to constraint='k_sparse' only, "
                f"got constraint={self.constraint!r}."
            )


_ALGORITHM_DOC = """
    algorithm : {"auto", "objective_perturbation", "mirror_descent", "phased_sgd", \
"shuffled_mirror_descent"}, default="auto"
        The private solver, each one of Su, Zhao & Wang's algorithms. ``"auto"``
        (the default) runs ``"phased_sgd"`` (at any epsilon: the choice that
        measured best, see below), ``"objective_perturbation"`` when a ridge
        penalty or ``loss="squared_error"`` is asked for (only it supports them), and
        ``"mirror_descent"`` when ``p < 2`` (l_p geometry of Algorithm 3; at
        ``epsilon > 1``, which it refuses, ``"objective_perturbation"``); it
        depends on public parameters only.

        - ``"objective_perturbation"``: approximate objective perturbation
          (Algorithm 1; when the ridge penalty is positive, Algorithm 2 in ridge
          form, the ridge folded into Algorithm 1's regulariser): minimise the
          loss plus a random linear term ``<G, w> / n`` and ``c ||w||^2`` over
          ``C`` with a solver whose accuracy is *certified* (accelerated
          projected gradient with a residual certificate), then add Gaussian
          noise and project onto ``C``. The projection turns d-dimensional noise into an
          error of the size of the Gaussian width of ``C`` (``~ sqrt(log d)`` for the l1
          ball). The solver runs a public number of iterations in full (the accelerated
          rate's count for public bounds on the curvature and the start's gap; Beck
          2017, Thm 10.42), then checks its certificate once; if it does not hold the
          fit raises :class:`~skdpsco.exceptions.CertificationError` and releases
          nothing.
          Twice-differentiable GLM losses only (squared, logistic, and the
          multinomial loss for three or more classes, whose noise is calibrated
          to its rank ``K - 1`` Hessian and ``2K``-dimensional gradient change);
          any ``epsilon > 0``.
        - ``"mirror_descent"``: noisy regularized mirror descent in l_p geometry,
          ``1 < p <= 2`` (Algorithm 3), Gaussian noise on the public grid on every
          full-batch gradient (the paper's generalized Gaussian noise has no
          known grid sampler; the Gaussian's l2-sensitivity comes from Hölder's
          inequality, and the ``T`` steps compose exactly in Gaussian DP). The
          algorithm is unconstrained; its release is projected onto ``C``
          (post-processing). Needs a loss Lipschitz on all of ``R^d`` (Huber,
          logistic) and ``epsilon <= 1``.
        - ``"phased_sgd"``: the ``p >= 2`` reduction of Theorem 8, phased DP-SGD
          (Feldman, Koren & Talwar 2020) in l_2, unconstrained, released
          projected onto ``C``. Same loss requirement; any ``epsilon > 0`` (its
          Gaussian noise is calibrated exactly at any budget; Theorem 8's rate
          is stated for ``epsilon <= 1``).
        - ``"shuffled_mirror_descent"``: shuffled truncated DP mirror descent for
          heavy-tailed gradients (Algorithm 4): one pass over a secret random
          permutation, per-sample gradients with ``||.||_q > truncation`` zeroed,
          one Gaussian noise vector per record on the public grid (for the
          paper's generalized Gaussian, as in ``"mirror_descent"``), privacy by
          amplification by shuffling (Feldman, McMillan & Talwar 2021). When ``n
          <= 16 ln(8 / delta)`` no amplification is proven and the batched variant
          the paper sketches after Theorem 10 (one noise draw per disjoint
          batch, parallel composition) runs instead; the choice depends on the
          public ``n`` and ``delta`` only.
          Rows are *not* clipped (truncation makes it private for any data).
          When the local-epsilon cap binds, the achieved epsilon is below the
          request and ``privacy_spent_`` says so.
          Sets: ``"l1"``, ``"lp"`` (same ``p``) and ``"l2"`` (``p = 2``);
          ``fit_intercept=False``; ``epsilon <= 1``.

        Which to use. On raw bundled data with the defaults (10 splits, test
        score), phased SGD grows with epsilon: breast cancer 0.75 / 0.86 / 0.89
        and diabetes R^2 0.07 / 0.13 / 0.26 at epsilon 1 / 2 / 4, where objective
        perturbation scored 0.63 (the majority class) / 0.63 / 0.75 and
        -0.66 / -3.9 / -1.9. On ``benchmarks/gaussian_width.py`` (5-sparse
        truth, l1 ball of radius 1, n = 10,000, d = 1,000 to 10,000, 2 seeds,
        the papers' setting without an intercept, data on a public scale and
        ``scaling="none"``) phased SGD's estimation error is 0.34 to 0.41 at
        epsilon = 1 and 0.19 to 0.27 at epsilon = 4 (0.47 for the zero model),
        objective perturbation's 0.60 to 0.73 and 0.24 to 0.28; from d = 1,000
        to 10,000 their errors grow 0.95 to 1.45x (the l1-ball width grows 1.17x)
        while an unconstrained DP-GD baseline's grows like ``sqrt(d)`` (3.2x);
        the mirror-descent algorithms stay at the zero model at this n. With
        three classes (d = 1,000, l1 radius 5) phased SGD reached 0.84 and
        objective perturbation 0.80 at epsilon = 1. Use them for large ``n`` or
        ``epsilon``."""

_SHARED_PARAMS_DOC = """
    epsilon : float, default=1.0
        Privacy loss bound of the whole fit, in ``(0, 1e6]``. The mirror-descent
        algorithms (Algorithms 3 and 4, whose parameter rules and amplification
        are stated for ``epsilon < 1``) refuse larger values.
    delta : float, default=1e-5
        Probability with which the epsilon bound may fail, in ``(0, 1)``; keep it
        well below ``1 / n_samples``.{algorithm}
    constraint : {{"l1", "l2", "lp", "box", "simplex", "group_l1", "k_sparse"}}, \
default="l1"
        The public convex set ``C`` the coefficients are constrained to:
        ``||w||_1 <= radius`` (sparse models; the default, because its Gaussian
        width ``~ radius sqrt(2 ln d)`` is what makes high-dimensional private
        fits accurate), ``||w||_2 <= radius``, ``||w||_p <= radius``,
        ``|w_j| <= radius``, the simplex ``w >= 0, sum w = radius`` (mixture
        weights), the group l_{{1,2}} ball ``sum_g ||w_g||_2 <= radius`` (``groups``)
        or the k-sparse polytope ``{{||w||_inf <= radius, ||w||_1 <= k radius}}``.
        For several classes the set constrains the ``(n_features, n_classes)``
        coefficient matrix entrywise (``l2``: its Frobenius norm; ``group_l1``:
        one group of rows per id), and the intercepts lie in ``[-B, B]^K``.
        :func:`skdpsco.gaussian_width` gives the width of each set.
    radius : float, default=1.0
        Size of ``C`` (see ``constraint``), in standardised units as in glmnet:
        with ``scaling`` on (the default) the set holds for the coefficients of
        the standardised columns, ``coef_ * feature_scale_`` (divided by
        ``target_scale_`` for a regressor); with ``scaling="none"`` for ``coef_``
        in the units of ``X``. Public: never read it off the data.
    p : float or None, default=None
        Exponent of the ``"lp"`` ball (required there, ``1 < p < inf``) and the
        l_p geometry of the mirror-descent algorithms. ``None`` picks, for the
        mirror-descent algorithms, ``p = 1 + 1 / ln(d)`` (the l_1 mirror map) for
        the l_1-like sets and ``p = 2`` otherwise; ``"phased_sgd"`` needs
        ``p >= 2`` (``None``: 2). Not used by ``"objective_perturbation"``
        (Euclidean) unless ``constraint="lp"``.
    groups : array-like of shape (n_features,) or None, default=None
        Public group id of every feature, for ``constraint="group_l1"``.
    k : int or None, default=None
        Sparsity of the ``"k_sparse"`` polytope.
    fit_intercept : bool, default=True
        Fit an intercept, constrained to ``[-intercept_bound, intercept_bound]``
        (the set becomes ``C x [-B, B]`` and the rows ``[x, 1]``; the
        objective-perturbation proof needs a bounded set in every coordinate), in
        the units of the fit: with the default private scaling the columns and a
        regressor's target are centred on released centres, and the intercept
        in the original units follows from them. Without an intercept nothing is
        centred and the model runs through the origin in the original units (Su,
        Zhao & Wang's setting, which no data with an offset can fit: diabetes'
        target, mean 152, scored R^2 -4.0 at epsilon = 1, against 0.03 with
        it). ``"shuffled_mirror_descent"`` needs ``fit_intercept=False``.
    intercept_bound : float, default=1.0
        ``B``, the public bound on the intercept (used when ``fit_intercept``).
    row_norm_bound : float, default=1.0
        Public bound on the norm of a row of X: every row is rescaled to norm at
        most this before it is used, so the Lipschitz and smoothness constants
        behind the noise hold for every possible record. The norm is the l_2 norm
        for ``"objective_perturbation"`` and the dual l_q norm of the geometry
        (``q = p / (p - 1)``) for ``"mirror_descent"`` and ``"phased_sgd"``.
        ``"shuffled_mirror_descent"`` does not clip (its truncation makes it
        private for any data) and uses it only to guess the smoothness.
    gradient_scale : float, default=1.0
        ``sigma_g``: public bound on the standard deviation (in ``||.||_q``) of a
        per-sample gradient, Assumption 4 of ``"shuffled_mirror_descent"``. Sets
        its truncation threshold and step; accuracy only, never privacy.
    truncation : "auto" or float, default="auto"
        Truncation threshold ``tau`` of ``"shuffled_mirror_descent"``, in units of
        ``gradient_scale`` (as in the heavy-tailed estimators): per-sample
        gradients with ``||.||_q > tau * gradient_scale`` are zeroed. ``"auto"``
        is Algorithm 4's ``beta M + lambda_tr``, with Theorem 10's ``lambda_tr``
        (constant 1).
    max_iter : int or None, default=None
        ``"objective_perturbation"``: the certified solver's number of iterations,
        always run in full (``None``: the accelerated-rate count that certifies
        the target accuracy under the public constants; a smaller count that does
        not certify raises rather than releases). ``"mirror_descent"``:
        the number of noisy steps ``T`` (``None``: Theorem 7's count).
        ``"phased_sgd"`` (``ceil(log2 n)`` phases, one pass) and
        ``"shuffled_mirror_descent"`` (one pass, Theorem 10's batch count) refuse
        a value other than None. Every count is public and always run in full.
    tol : "auto" or float, default="auto"
        ``alpha_opt``, the accuracy (objective gap) that ``"objective_perturbation"``
        certifies before its output perturbation, which is calibrated to it.
        ``"auto"`` is a displacement rule (output noise no larger than the
        statistical error) in place of Theorem 2's choice; a float is clamped up
        to a numerical floor. Unused by the other algorithms (no data-dependent
        stopping anywhere).
    verbose : int, default=0
        If > 0, print progress: the algorithm, iteration counts where its solver
        reports them, and the privacy budget spent. Private losses are never
        printed (they would leak).
    random_state : int, RandomState instance, numpy.random.Generator or None, \
default=None
        Source of the privacy noise (and of the secret shuffle). ``None`` (the
        default, and the right choice in production) takes the noise from the
        operating system's cryptographic source and the shuffle from a stream
        seeded with fresh OS entropy; an int
        makes fits reproducible, which is for tests only: anyone who knows the
        seed can subtract the noise. A ``Generator`` or ``RandomState`` is copied,
        never advanced: like an int, it gives every fit the same noise."""

_SHARED_PARAMS_DOC = _SHARED_PARAMS_DOC.format(algorithm=_ALGORITHM_DOC)

_SHARED_PARAMS_DOC = _SHARED_PARAMS_DOC.replace(
    "\n    random_state :", SCALING_PARAM_DOC.rstrip() + "\n    random_state :", 1
)

_SHARED_ATTRS_DOC = """
    n_iter_ : ndarray of shape (1,)
        Public iteration count of the algorithm, always run in full (for
        ``"objective_perturbation"`` the certified solver's count), as an array
        like ``LogisticRegression.n_iter_`` (one fit of all outputs).
    privacy_spent_ : PrivacySpent
        What the fit spent: ``epsilon``, ``delta``, the neighbouring relation
        (replace-one, ``n`` public) and the mechanisms; never more than asked. For
        ``"shuffled_mirror_descent"`` it is the epsilon actually achieved by the
        shuffling bound, which can be below the request.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the features, when X has string column names."""

_NOTES_DOC = """
    Notes
    -----
    Privacy model: replace-one neighbouring datasets, ``n`` and ``d`` public.
    Every bound the noise depends on (``radius``, ``row_norm_bound``,
    ``target_bound``, ``intercept_bound``, ``truncation``) is a parameter; rows and
    targets are clipped to them inside ``fit`` and nothing is read from the data.
    ``coef_`` always lies in ``C`` (and ``intercept_`` in ``[-B, B]``): the
    constrained algorithms end with a projection onto ``C``, the unconstrained ones
    (``"mirror_descent"``, ``"phased_sgd"``) have their release projected onto
    ``C``, which is post-processing. Dense and scipy.sparse ``X`` are accepted,
    and for ``"objective_perturbation"`` and ``"mirror_descent"`` a dask array or
    dataframe, which gives the in-memory model bit for bit (their gradients are
    exact block sums; "Fitting on a cluster" in the user guide).
    Every fit spends its budget, including each candidate and fold of a grid
    search."""

_REFERENCES_DOC = """
    References
    ----------
    .. [1] Su, J., Zhao, C. and Wang, D. Differentially private stochastic convex
       optimization in (non)-Euclidean space revisited. Algorithms 1-4,
       Theorems 1, 2, 4, 7, 8, 9 and 10.
    .. [2] Kifer, D., Smith, A. and Thakurta, A. (2012). Private convex empirical
       risk minimization and high-dimensional regression. COLT.
    .. [3] Feldman, V., Koren, T. and Talwar, K. (2020). Private stochastic convex
       optimization: optimal rates in linear time. STOC.
    .. [4] Feldman, V., McMillan, A. and Talwar, K. (2021). Hiding among the
       clones: a simple and nearly optimal analysis of privacy amplification by
       shuffling. FOCS."""


class GaussianWidthDPRegressor(DPRegressorMixin, _GaussianWidthBase):
    __doc__ = f"""Differentially private constrained linear regression (Gaussian width).

    Minimises ``(1/n) sum_i loss(x_i . w + b, y_i) + alpha / (2 n) ||(w, b)||^2``
    (:class:`~sklearn.linear_model.Ridge`'s penalty, on the standardised
    coefficients) over ``w`` in a public convex set ``C`` (an l1 ball by default,
    like the constrained form of the Lasso) with an ``(epsilon, delta)``-DP
    guarantee under replace-one neighbouring datasets, whatever the data look
    like: rows and targets are clipped to public bounds. The error that privacy
    adds grows with the Gaussian width of ``C`` (``~ sqrt(log d)`` for the l1
    ball) instead of ``sqrt(d)`` (Theorem 2 for objective perturbation;
    measured for every algorithm in ``benchmarks/gaussian_width.py``).

    Parameters
    ----------{_SHARED_PARAMS_DOC}
    loss : {{"auto", "squared_error", "huber"}}, default="auto"
        ``"squared_error"``: ``(x . w + b - y)^2 / 2``; ``"huber"``: the Huber loss with
        threshold ``huber_threshold`` (Lipschitz on all of ``R^d``, which
        ``"mirror_descent"`` and ``"phased_sgd"`` need; not twice differentiable,
        which ``"objective_perturbation"`` needs). ``"auto"``: ``"huber"`` for
        ``"mirror_descent"`` and ``"phased_sgd"`` (also when ``algorithm="auto"``
        resolves to it), ``"squared_error"`` otherwise.
    huber_threshold : float, default=1.0
        Threshold ``c`` of the Huber loss (residuals beyond ``c`` count linearly).
    target_bound : float, default=1.0
        Public bound ``R_y``: targets are clipped to ``[-R_y, R_y]`` for the squared
        loss (``"objective_perturbation"``). Scale ``y`` with public constants.
    alpha : float, default=0.0
        Ridge strength, as :class:`~sklearn.linear_model.Ridge`'s ``alpha``
        (``||y - X w - b||^2 + alpha ||w||^2``, the same value means the same
        penalty in every skdpsco regressor) on the standardised coefficients
        (the original ones with ``scaling="none"``). Unlike ``Ridge`` the
        intercept is penalised too: objective perturbation's privacy calibration
        needs the objective strongly convex in every direction. ``alpha > 0``
        selects Algorithm 2 (strongly convex objective
        perturbation, ridge form); only ``"objective_perturbation"`` accepts it.
        With ``alpha = 0`` the set ``C`` is the only regulariser and Algorithm 1
        adds its own ``L / (sqrt(n) diam(C)) ||w||^2`` (Theorem 2).

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
        Released coefficients; ``coef_ * feature_scale_ / target_scale_`` lie in
        ``C`` (``coef_`` itself with ``scaling="none"``), but for the
        coefficients of columns the scaling could not locate, which are 0 (a
        simplex's sum can then fall below ``radius``).
    intercept_ : float or ndarray of shape (n_targets,)
        Released intercept (0.0 when ``fit_intercept=False``). The shapes are
        ``Ridge``'s: a 2-D ``y`` of ``n_targets`` columns gets one model per
        column, the budget split over them by composition.{_SHARED_ATTRS_DOC}

    See Also
    --------
    GaussianWidthDPClassifier : the classifier of the same family.
    HeavyTailedDPRidge : unconstrained DP ridge regression.
    sklearn.linear_model.Lasso : the non-private penalised analogue.
{_NOTES_DOC}
{_REFERENCES_DOC}

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco import GaussianWidthDPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(5000, 200)) / np.sqrt(200)
    >>> w_true = np.zeros(200)
    >>> w_true[:3] = [0.5, -0.3, 0.2]
    >>> y = X @ w_true * 20 + 0.1 * rng.standard_normal(5000)
    >>> model = GaussianWidthDPRegressor(epsilon=1.0, random_state=0).fit(X, y)
    >>> # The constraint holds in the standardised units of the private scaling:
    >>> w = model.coef_ * model.feature_scale_ / model.target_scale_
    >>> bool(np.abs(w).sum() <= 1.0 + 1e-9)
    True
    >>> model.privacy_spent_.epsilon <= 1.0
    True
    """

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-5,
        algorithm="auto",
        constraint="l1",
        radius=1.0,
        p=None,
        groups=None,
        k=None,
        loss="auto",
        huber_threshold=1.0,
        alpha=0.0,
        fit_intercept=True,
        intercept_bound=1.0,
        row_norm_bound=1.0,
        target_bound=1.0,
        gradient_scale=1.0,
        truncation="auto",
        max_iter=None,
        tol="auto",
        verbose=0,
        scaling="private",
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.algorithm = algorithm
        self.constraint = constraint
        self.radius = radius
        self.p = p
        self.groups = groups
        self.k = k
        self.loss = loss
        self.huber_threshold = huber_threshold
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.intercept_bound = intercept_bound
        self.row_norm_bound = row_norm_bound
        self.target_bound = target_bound
        self.gradient_scale = gradient_scale
        self.truncation = truncation
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.scaling = scaling
        self.random_state = random_state

    _parameter_constraints: dict = {
        **_GaussianWidthBase._parameter_constraints,
        "loss": [StrOptions({"auto", "squared_error", "huber"})],
        "huber_threshold": [PublicBound()],
        "target_bound": [PublicBound()],
        "alpha": [Interval(Real, 0, None, closed="left")],
    }

    def _loss(self, n_outputs, algorithm):
        loss = self.loss
        if loss == "auto":
            lipschitz_needed = algorithm in ("mirror_descent", "phased_sgd")
            loss = "huber" if lipschitz_needed else "squared_error"
        if loss == "huber":
            return get_loss("huber", threshold=self.huber_threshold)
        return get_loss("squared")

    _ridge_parameter = "alpha"

    def _has_ridge(self):
        return self.alpha > 0

    def _needs_objective_perturbation(self):
        # Only objective perturbation has a ridge (Algorithm 2) or the squared
        # loss on all of R^d.
        return self._has_ridge() or self.loss == "squared_error"

    def _target_bound(self):
        return self.target_bound

    def _l2_penalty(self, n_samples):
        # Ridge's alpha ||w||^2 on the standardised coefficients, as a
        # mean-scaled lambda in the fit's units.
        penalty = float(self.alpha) / (n_samples * self._fit_unit_squared())
        return checked_penalty(penalty, self, "alpha")


class GaussianWidthDPClassifier(DPClassifierMixin, _GaussianWidthBase):
    __doc__ = f"""Differentially private constrained logistic regression.

    Minimises the mean logistic loss (two classes) or the mean multinomial loss (one
    joint model for more) plus an optional ridge ``||(W, b)||^2 / (2 C n)`` (on the
    standardised coefficients) over
    coefficients in a public convex set ``C`` (an l1 ball by default), with an
    ``(epsilon, delta)``-DP guarantee under replace-one neighbouring datasets,
    whatever the features look like (rows are clipped to ``row_norm_bound``).

    Parameters
    ----------{_SHARED_PARAMS_DOC}
    C : float or None, default=None
        Inverse ridge strength as in :class:`~sklearn.linear_model.LogisticRegression`
        (``C sum_i loss_i + ||W||^2 / 2`` on the standardised coefficients, the
        same value means the same penalty in every skdpsco classifier; the
        intercept is penalised too, as objective perturbation needs); only
        ``"objective_perturbation"`` accepts it (Algorithm 2, ridge form).
        ``None``: no ridge, the set ``C`` is the only regulariser.
    classes : array-like or None, default=None
        The public label set. If None, the labels present in ``y`` are used, and
        the label set is then released with the model (like ``n``); give it
        explicitly when which labels occur is itself sensitive.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Released coefficients (one row for two classes); ``coef_ *
        feature_scale_`` lies in ``C`` (``coef_`` itself with ``scaling="none"``),
        but for the coefficients of columns the scaling could not locate, which
        are 0 (a simplex's sum can then fall below ``radius``).
    intercept_ : ndarray of shape (1,) or (n_classes,)
        Released intercepts.{_SHARED_ATTRS_DOC}

    See Also
    --------
    GaussianWidthDPRegressor : the regressor of the same family.
    HeavyTailedDPLogistic : unconstrained DP logistic regression.
    sklearn.linear_model.LogisticRegression : the non-private model.
{_NOTES_DOC}
{_REFERENCES_DOC}

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco import GaussianWidthDPClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(4000, 50)) / np.sqrt(50)
    >>> y = (X[:, 0] - X[:, 1] > 0).astype(int)
    >>> clf = GaussianWidthDPClassifier(radius=5.0, random_state=0).fit(X, y)
    >>> clf.coef_.shape
    (1, 50)
    >>> # The constraint holds in the standardised units of the private scaling:
    >>> bool(np.abs(clf.coef_ * clf.feature_scale_).sum() <= 5.0 + 1e-9)
    True
    """

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-5,
        algorithm="auto",
        constraint="l1",
        radius=1.0,
        p=None,
        groups=None,
        k=None,
        C=None,
        fit_intercept=True,
        intercept_bound=1.0,
        row_norm_bound=1.0,
        gradient_scale=1.0,
        truncation="auto",
        max_iter=None,
        tol="auto",
        classes=None,
        verbose=0,
        scaling="private",
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.algorithm = algorithm
        self.constraint = constraint
        self.radius = radius
        self.p = p
        self.groups = groups
        self.k = k
        self.C = C
        self.fit_intercept = fit_intercept
        self.intercept_bound = intercept_bound
        self.row_norm_bound = row_norm_bound
        self.gradient_scale = gradient_scale
        self.truncation = truncation
        self.max_iter = max_iter
        self.tol = tol
        self.classes = classes
        self.verbose = verbose
        self.scaling = scaling
        self.random_state = random_state

    _parameter_constraints: dict = {
        **_GaussianWidthBase._parameter_constraints,
        "C": [None, PositiveFinite()],
        "classes": [None, "array-like"],
    }

    def _loss(self, n_outputs, algorithm):
        return get_loss("logistic" if n_outputs == 1 else "multinomial")

    _ridge_parameter = "C"

    def _has_ridge(self):
        return self.C is not None

    def _needs_objective_perturbation(self):
        return self._has_ridge()

    def _target_bound(self):
        # Class codes: the logistic losses read no target bound.
        return 1.0

    def _l2_penalty(self, n_samples):
        # LogisticRegression's C sum(loss) + ||w||^2 / 2 on the standardised
        # coefficients, divided by C n, in the fit's units.
        if self.C is None:
            return 0.0
        penalty = 1.0 / (self.C * n_samples * self._fit_unit_squared())
        return checked_penalty(penalty, self, "C")
