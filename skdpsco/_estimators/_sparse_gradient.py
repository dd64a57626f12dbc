"""SparseGradientDPRegressor and SparseGradientDPClassifier.

The estimators validate, enforce the declared per-row bounds
(:mod:`skdpsco._sparse_rows`), compute the public constants (``L``, ``H``,
``s``, ``lambda``) and hand a loss and a design to the algorithm chosen by
``algorithm``; the math lives in :mod:`skdpsco._solvers`,
:mod:`skdpsco._mean_estimation` and :mod:`skdpsco.privacy`.
"""

import functools
import math
from dataclasses import dataclass, replace
from numbers import Integral, Real

import numpy as np

from .._column_scaling import ColumnScaling
from .._dask_design import DaskLinearDesign
from .._design import LinearDesign
from .._losses import get_loss
from .._mean_estimation._sparse_mean import (
    L1RecoveryMeanOracle,
    ProjectionMeanOracle,
)
from .._solvers import noisy_gradient_descent
from .._solvers._bias_reduced_sgd import bias_reduced_sgd
from .._solvers._boosting import boosted_bias_reduced_sgd
from .._solvers._output_perturbation import (
    auto_coef_norm_bound,
    auto_l2_penalty,
    gradient_error_bound,
    output_perturbation,
    plan_output_perturbation,
)
from .._solvers._sparse_exponential import sparse_exponential_mechanism
from .._sparse_rows import ROW_BOUND_SLACK, enforce_row_bounds
from ..privacy._params import PositiveFinite, PublicBound
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

__all__ = ["SparseGradientDPClassifier", "SparseGradientDPRegressor"]


@dataclass(frozen=True)
class _Problem:
    """The public constants of one fit; nothing here reads the data.

    Attributes
    ----------
    design : LinearDesign
        The enforced rows (``||x~_i||_2 <= row_bound``).
    target : ndarray
        Targets (clipped to ``target_bound`` for the squared loss) or class codes.
    loss : loss object
    n_outputs : int
    n_params : int
        ``p = dim * n_outputs``.
    row_bound : float
        ``C = sqrt(C_x^2 + [fit_intercept] a^2)``, ``a`` the intercept column.
    sparsity : int
        ``s`` of a per-example gradient: ``(s_x + [fit_intercept]) * n_outputs``.
    lipschitz : float
        ``L``: l2 bound of a per-example gradient on the feasible set.
    smoothness : float
        ``H``: smoothness of a per-example loss.
    radius : float or None
        l2 ball constraint (squared loss only).
    coef_norm_bound : float
        ``D``: the declared or automatic bound on the coefficients' l2 norm.
    budget : AlgorithmBudget
    rng : numpy.random.Generator
    progress : Progress or NoProgress
        The fit's public progress reporter.
    """

    design: LinearDesign
    target: np.ndarray
    loss: object
    n_outputs: int
    n_params: int
    row_bound: float
    sparsity: int
    lipschitz: float
    smoothness: float
    radius: float | None
    coef_norm_bound: float
    budget: object
    rng: object
    progress: object


def _fit_output_perturbation(est, problem, l2_penalty, budget, rng):
    """Algorithm 6 (regularised output perturbation, certified solve)."""
    gradient_bound = est._gradient_bound(problem)
    plan = plan_output_perturbation(
        budget=budget,
        n_params=problem.n_params,
        lipschitz=problem.lipschitz,
        smoothness=problem.smoothness,
        l2_penalty=l2_penalty,
        sparsity=problem.sparsity,
        tol=est.tol,
        max_iter=est.max_iter,
        gradient_error=gradient_error_bound(
            problem.design, gradient_bound, problem.n_params, problem.n_outputs
        ),
    )
    result = output_perturbation(
        problem.design,
        problem.target,
        problem.loss,
        n_outputs=problem.n_outputs,
        plan=plan,
        radius=problem.radius,
        rng=rng,
        gradient_bound=gradient_bound,
    )
    return result, plan.noise_scale


#: Noisy gradient steps of the ``*_gd`` algorithms when ``max_iter`` is None.
_DEFAULT_GD_ITER = 30


def _gd_step(est, problem, l2_penalty):
    if est.learning_rate != "auto":
        return float(est.learning_rate)
    # 1 / (H + lambda): a true smoothness bound, since the rows are enforced.
    return 1.0 / (problem.smoothness + l2_penalty)


def _run_gd(est, problem, oracle, budget, l2_penalty, rng):
    n_iter = _DEFAULT_GD_ITER if est.max_iter is None else est.max_iter
    result = noisy_gradient_descent(
        problem.design,
        problem.target,
        problem.loss,
        oracle,
        n_outputs=problem.n_outputs,
        budget=budget,
        max_iter=n_iter,
        learning_rate=_gd_step(est, problem, l2_penalty),
        l2_penalty=l2_penalty,
        radius=problem.radius,
        averaging="suffix",
        progress=problem.progress,
        rng=rng,
    )
    return result, oracle.noise_scale


def _fit_projection_gd(est, problem, l2_penalty, budget, rng):
    """DP-GD whose gradient mean is the projection mechanism (Algorithm 1)."""
    noise = "gaussian" if budget.delta > 0 else "laplace"
    oracle = ProjectionMeanOracle(
        problem.lipschitz, problem.sparsity, noise, problem.design.exact_sums
    )
    return _run_gd(est, problem, oracle, budget, l2_penalty, rng)


def _fit_l1_recovery_gd(est, problem, l2_penalty, budget, rng):
    """DP-GD whose gradient mean is Gaussian l1-recovery (Algorithm 2)."""
    oracle = L1RecoveryMeanOracle(
        problem.lipschitz, problem.sparsity, exact_sums=problem.design.exact_sums
    )
    if isinstance(problem.design, DaskLinearDesign):
        # The branch is public (n, the parameter size, the per-step budget):
        # the compressed-sensing one measures every row against an m x d
        # matrix, which the exact row sums of a dask design do not carry.
        n_iter = _DEFAULT_GD_ITER if est.max_iter is None else est.max_iter
        shape = problem.design.parameter_shape(problem.n_outputs)
        oracle.calibrate(problem.design.n_samples, budget.rho / n_iter, shape)
        if oracle.branch_ == "cs":
            raise TypeError(
                f"{type(est).__name__}: algorithm='l1_recovery_gd' takes its "
                f"compressed-sensing branch here ({oracle.m_} measurements of "
                f"{int(np.prod(shape))} parameters, from n, the number of "
                "parameters and the budget per step), which does not fit dask "
                "input; use algorithm='projection_gd', or pass the data in memory."
            )
    return _run_gd(est, problem, oracle, budget, l2_penalty, rng)


def _sgd_params(est, problem, l2_penalty, budget):
    return dict(
        budget=budget,
        norm_bound=problem.lipschitz,
        sparsity=problem.sparsity,
        n_outputs=problem.n_outputs,
        learning_rate=est.learning_rate,
        coef_norm_bound=problem.coef_norm_bound,
        radius=problem.radius,
        l2_penalty=l2_penalty,
        convex=True,
    )


def _fit_bias_reduced_sgd(est, problem, l2_penalty, budget, rng):
    """Subsampled bias-reduced sparse SGD (Algorithms 3-4) with Algorithm 1 inside."""
    result = bias_reduced_sgd(
        problem.design,
        problem.target,
        problem.loss,
        progress=problem.progress,
        rng=rng,
        **_sgd_params(est, problem, l2_penalty, budget),
    )
    return result, None


def _fit_boosted_sgd(est, problem, l2_penalty, budget, rng):
    """Algorithm 5: private selection over runs of Algorithm 4 (clipped-loss score)."""
    result = boosted_bias_reduced_sgd(
        problem.design,
        problem.target,
        problem.loss,
        loss_bound=est.loss_bound,
        confidence=est.failure_prob,
        progress=problem.progress,
        rng=rng,
        **_sgd_params(est, problem, l2_penalty, budget),
    )
    return result, None


def _fit_sparse_exponential(est, problem, l2_penalty, budget, rng):
    """Algorithm 7: exponential mechanism over a net of sparse points (tiny d)."""
    result = sparse_exponential_mechanism(
        problem.design,
        problem.target,
        problem.loss,
        budget=budget,
        loss_bound=est.loss_bound,
        norm_bound=problem.lipschitz,
        sparsity=problem.sparsity,
        radius=problem.coef_norm_bound if problem.radius is None else problem.radius,
        confidence=est.failure_prob,
        n_outputs=problem.n_outputs,
        rng=rng,
    )
    return result, None


def _runner(fit):
    """Runner of a sparse-gradient algorithm: the public constants of the fit
    (bounds enforced per row, ``L``, ``H``, ``s``, ``D``, ``lambda``), then
    ``fit``; the intercept is released as its column's value times its
    coefficient (post-processing)."""

    def run(fit_problem):
        est = fit_problem.estimator
        sparsity = est._fitted_sparsity(fit_problem.released_row_nnz)
        problem = est._problem(fit_problem, sparsity)
        l2_penalty = est._l2_penalty(problem)
        result, noise_scale = fit(est, problem, l2_penalty, problem.budget, problem.rng)
        coef = np.array(result.coef, dtype=float)
        if est.fit_intercept:
            coef[fit_problem.n_features] *= est._intercept_column()
        attributes = {
            "sparsity_": sparsity,
            "coef_norm_bound_": problem.coef_norm_bound,
            # In Ridge's units, as the alpha parameter.
            "alpha_": float(l2_penalty) * problem.budget.n_samples,
            "noise_scale_": None if noise_scale is None else float(noise_scale),
        }
        return replace(result, coef=coef, attributes=attributes)

    return run


#: The algorithms (every entry is audited in tests/audit). With delta > 0 the
#: gradient descents take a zCDP budget ("gdp": Gaussian throughout) and output
#: perturbation one Gaussian calibrated to (epsilon, delta) ("gdp-epsilon"): the
#: scaling's Gaussians compose with them exactly.
_ALGORITHMS = registry(
    Algorithm(
        "output_perturbation",
        _runner(_fit_output_perturbation),
        "gdp-epsilon",
        requires_delta=False,
        supports=frozenset({"dask", "max_iter"}),
    ),
    Algorithm(
        "projection_gd",
        _runner(_fit_projection_gd),
        "gdp",
        requires_delta=False,
        supports=frozenset({"dask", "max_iter"}),
    ),
    Algorithm(
        "l1_recovery_gd",
        _runner(_fit_l1_recovery_gd),
        "gdp",
        supports=frozenset({"dask", "max_iter"}),
    ),
    Algorithm("bias_reduced_sgd", _runner(_fit_bias_reduced_sgd)),
    Algorithm("boosted_sgd", _runner(_fit_boosted_sgd)),
    Algorithm(
        "sparse_exponential", _runner(_fit_sparse_exponential), requires_delta=False
    ),
)


class _SparseGradientBase(DPLinearModel):
    _ALGORITHMS = _ALGORITHMS

    _accept_sparse = True
    _shared_scale = True

    _parameter_constraints: dict = {
        **DPLinearModel._parameter_constraints,
        "algorithm": [StrOptions(set(_ALGORITHMS))],
        "max_iter": [None, Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, 1, closed="neither")],
        "sparsity": [None, Interval(Integral, 1, None, closed="left")],
        "sparsity_enforcement": [StrOptions({"clip_l1", "truncate"})],
        "row_norm_bound": [PublicBound()],
        "coef_norm_bound": [StrOptions({"auto"}), PublicBound()],
        "failure_prob": [Interval(Real, 0, 1, closed="neither")],
        "learning_rate": [StrOptions({"auto"}), PositiveFinite()],
        "loss_bound": [PublicBound()],
    }

    def fit(self, X, y, **fit_params):
        """Fit the model with the stated ``(epsilon, delta)`` guarantee.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; CSR and CSC matrices are used as they are, never
            densified. Each row is mapped into the declared bounds
            (``sparsity``, ``row_norm_bound``) by ``sparsity_enforcement``.
        y : array-like of shape (n_samples,)
            Targets.
        **fit_params : dict
            Not supported (``sample_weight`` included): a clear error says why.

        Returns
        -------
        self : object
            Fitted estimator, with ``privacy_spent_`` recording what the fit spent.
            If the fit raises, the estimator is left exactly as it was.
        """
        return super().fit(X, y, **fit_params)

    def _fitted_sparsity(self, released_row_nnz):
        """The sparsity the fit (and predict) use: the declared ``sparsity``, else
        the typical number of non-zeros per row released by the private scaling
        of sparse input (public from then on), else None (``n_features``)."""
        return self.sparsity if self.sparsity is not None else released_row_nnz

    def _row_map(self, sparsity):
        """The per-row map into the declared bounds (picklable: on dask input it
        runs on the workers)."""
        return functools.partial(
            enforce_row_bounds,
            sparsity=sparsity,
            row_norm_bound=self.row_norm_bound,
            method=self.sparsity_enforcement,
        )

    def _enforce(self, X, sparsity):
        return self._row_map(sparsity)(X)

    def _standardise(self, X, x_scaling):
        if is_dask_collection(X):
            # Lazily, chunk by chunk: the same map of each value as in memory.
            return X.rechunk({1: -1}).map_blocks(x_scaling.transform, dtype=float)
        return super()._standardise(X, x_scaling)

    def _enforced_design(self, X, sparsity):
        """The design of the rows mapped into the declared bounds; for a dask
        design the per-row map runs chunk by chunk on the workers (each row's
        bits depend on that row only, as in memory)."""
        column = self._intercept_column()
        if not isinstance(X, DaskLinearDesign):
            return LinearDesign(
                self._enforce(X, sparsity), self.fit_intercept, intercept_column=column
            )
        return DaskLinearDesign(
            X.X.map_blocks(self._row_map(sparsity), dtype=float),
            None,
            self.fit_intercept,
            intercept_column=column,
            client=X.client,
        )

    def _gradient_bound(self, problem):
        """Public ``G >= |phi'(x~_i . w, y_i)| ||x~_i||`` at every point the
        certified solve evaluates (the grid of its exact gradient sums): ``L``,
        where the loss's derivative is bounded everywhere."""
        return problem.lipschitz

    def _check_supported(self, algorithm):
        """Checks on public values only (the sizes, the parameters)."""
        super()._check_supported(algorithm)
        n_features = self.n_features_in_
        name = type(self).__name__
        if self.sparsity is not None and self.sparsity > n_features:
            raise ValueError(
                f"{name}: sparsity={self.sparsity} exceeds n_features={n_features}; "
                "the declared number of non-zeros per row must be in "
                f"[1, {n_features}] (None means n_features)."
            )

    def _intercept_column(self):
        """``a``: the public value of the implicit intercept column."""
        if self.algorithm == "output_perturbation":
            return self.row_norm_bound / INTERCEPT_COLUMN_RATIO
        return 1.0

    def _public_constants(self, n_features, n_outputs, sparsity):
        """``(C, s, p)``: row bound, gradient sparsity, number of parameters."""
        # The enforced rows satisfy ||x|| <= C_x (1 + slack) (see enforce_row_bounds);
        # the intercept column adds a to the row (l1: ||x||_1 + a <= C sqrt(s + 1)
        # by Cauchy-Schwarz, as with a = 1).
        c_x = self.row_norm_bound * (1.0 + ROW_BOUND_SLACK)
        row_bound = math.hypot(c_x, self.fit_intercept * self._intercept_column())
        s_x = n_features if sparsity is None else sparsity
        sparsity = (s_x + int(self.fit_intercept)) * n_outputs
        n_params = (n_features + int(self.fit_intercept)) * n_outputs
        return row_bound, sparsity, n_params

    def _coef_norm_bound(self, n_features, n_outputs, budget, sparsity):
        """``D``: the declared ``coef_norm_bound``, or the public rule of
        :func:`auto_coef_norm_bound` (``"output_perturbation"``; 1.0 for the other
        algorithms). Reads the sizes, the budget and the released sparsity only."""
        if self.coef_norm_bound != "auto":
            return float(self.coef_norm_bound)
        if self.algorithm != "output_perturbation":
            return 1.0
        # A provisional D = 1 for the squared loss's L (the Gaussian rule does not
        # depend on L: it cancels between the penalty and the sensitivity).
        row_bound, sparsity, n_params = self._public_constants(
            n_features, n_outputs, sparsity
        )
        loss, _, _ = self._loss(n_outputs, np.zeros(0), 1.0)
        lipschitz, smoothness = self._lipschitz_smoothness(loss, row_bound, 1.0)
        return auto_coef_norm_bound(
            lipschitz=lipschitz,
            smoothness=smoothness,
            row_bound=row_bound,
            budget=budget,
            n_params=n_params,
            sparsity=sparsity,
            tol=self.tol,
            confidence=self.failure_prob,
        )

    def _problem(self, fit_problem, sparsity):
        """The fit's public constants (:class:`_Problem`); reads no data but
        through the enforced design."""
        n_features, n_outputs = fit_problem.n_features, fit_problem.n_outputs
        budget = fit_problem.budget
        coef_norm_bound = self._coef_norm_bound(n_features, n_outputs, budget, sparsity)
        design = self._enforced_design(fit_problem.X, sparsity)
        loss, radius, target = self._loss(
            n_outputs, fit_problem.target, coef_norm_bound
        )
        row_bound, sparsity, n_params = self._public_constants(
            n_features, n_outputs, sparsity
        )
        lipschitz, smoothness = self._lipschitz_smoothness(
            loss, row_bound, coef_norm_bound
        )
        return _Problem(
            design=design,
            target=target,
            loss=loss,
            n_outputs=n_outputs,
            n_params=n_params,
            row_bound=row_bound,
            sparsity=sparsity,
            lipschitz=lipschitz,
            smoothness=smoothness,
            radius=radius,
            coef_norm_bound=coef_norm_bound,
            budget=budget,
            rng=fit_problem.rng,
            progress=fit_problem.progress,
        )

    def _auto_l2_penalty(self, problem):
        budget = problem.budget
        return auto_l2_penalty(
            lipschitz=problem.lipschitz,
            smoothness=problem.smoothness,
            coef_norm_bound=problem.coef_norm_bound,
            n_samples=budget.n_samples,
            n_params=problem.n_params,
            sparsity=problem.sparsity,
            epsilon=budget.epsilon,
            delta=budget.delta,
            confidence=self.failure_prob,
        )

    def _decision(self, X):
        # The same per-row map as in fit: a post-processing of the input.
        X, dtype = self._prediction_input(X, accept_sparse=True)
        return self._enforced_decision(X).astype(dtype, copy=False)

    def _enforced_decision(self, X):
        if self.feature_scale_ is None:
            enforced = self._enforce(X, self.sparsity_)
            return np.asarray(enforced @ self._dense_coef().T + self.intercept_)
        # The per-row map acts on the standardised rows, as in fit; with coef_ in
        # the original units, enforce((x - c) / s) . (coef_ s) + intercept_ +
        # coef_ . c is the fitted model's prediction (post-processing).
        scaling = ColumnScaling(
            self.feature_center_, self.feature_scale_, self.feature_located_
        )
        center, scale = scaling.center, scaling.scale
        Xs = scaling.transform(X)
        coef = np.atleast_2d(self._dense_coef())
        Z = self._enforce(Xs, self.sparsity_) @ (coef * scale).T + (
            coef @ center + self.intercept_
        )
        return np.asarray(Z).reshape(-1) if np.ndim(self.coef_) == 1 else np.asarray(Z)


_SHARED_PARAMS_DOC = """
    epsilon : float, default=1.0
        Privacy loss bound of the whole fit, in ``(0, 1e6]``.
    delta : float, default=1e-5
        Probability with which the epsilon bound may fail, in ``[0, 1)``; the
        library-wide default. As everywhere in skdpsco, keep it well below
        ``1 / n_samples``. ``delta=0`` asks for pure DP: ``"output_perturbation"``
        then adds Laplace noise calibrated to an l1 bound that grows with
        ``sparsity`` (its loss must be smooth and unconstrained); algorithms that
        need Gaussian noise refuse it.
    algorithm : {"output_perturbation", "projection_gd", "l1_recovery_gd", \
"bias_reduced_sgd", "boosted_sgd", "sparse_exponential"}, \
default="output_perturbation"
        The private solver, each an algorithm of Ghazi et al. [1]_.

        Which to use (``benchmarks/sparse.py``: one-hot data, n = 1e5,
        d = 1e6, 20 non-zeros per row, Huber loss, delta = 1e-6): the default
        ``"output_perturbation"`` had the lowest test MSE at every epsilon
        (0.491 / 0.467 / 0.435 at epsilon = 0.5 / 1 / 4; predicting 0 scores
        0.568), where DP gradient descent with dense Gaussian noise scored 0.565
        and ``"projection_gd"`` 0.567; it is also the only one whose noise
        does not grow with the number of steps. It is the slowest to fit
        (one certified solve; 33 s there, where ``Ridge(solver="sparse_cg")``
        took 0.5 s).

        - ``"output_perturbation"`` (Algorithm 6, the default; see
          ``benchmarks/sparse.py``): solve the L2-regularised problem, certify
          ``||w - w*|| <= tol_w`` before release (no certificate, no release:
          :class:`~skdpsco.exceptions.CertificationError`), add Gaussian noise
          (``delta > 0``) of l2-sensitivity ``2 L / alpha_ + 2 tol_w`` or
          Laplace noise (``delta = 0``) on every coordinate. Its prediction error
          depends on ``sparsity`` and ``log(n_features)``, not on ``n_features``
          (Thms 7.1, 7.6). Cost: one regularised GLM solve, ``O(nnz)`` per
          iteration, plus ``O(n_features)`` noise.
        - ``"projection_gd"`` (Algorithm 1 inside DP gradient descent): each of
          ``max_iter`` full-batch steps releases the mean of the per-example
          gradients (clipped to l2 norm ``L`` and l1 norm ``L sqrt(s)``) plus
          Gaussian noise (Laplace when ``delta = 0``), projected onto the l1 ball of
          radius ``L sqrt(s)`` (Lemma 3.1: error ``~ (s log d)^(1/4)``); the
          budget is split evenly over the steps.
        - ``"l1_recovery_gd"`` (Algorithm 2 inside DP gradient descent): the
          gradient mean is measured by a public ``m x p`` Gaussian matrix, the
          per-example measurements clipped to ``1.5 L`` (privacy without the
          unverifiable RIP event), noised and decoded by basis pursuit. Needs
          ``delta > 0``; refuses problems whose matrix exceeds 2e8 entries
          (``MAX_MEASUREMENT_ENTRIES``); falls back to the dense Gaussian mean where
          compressed sensing cannot help.
        - ``"bias_reduced_sgd"`` (Algorithms 3-4): subsampled bias-reduced sparse
          SGD, randomly stopped by a privacy filter; needs ``delta > 0``.
          Research-grade: heavy-tailed gradient estimates, about ``n / log n``
          steps of ``O(p)`` each.
        - ``"boosted_sgd"`` (Algorithm 5): private selection (Liu & Talwar) over
          randomly many runs of Algorithm 4, scored by the loss clipped to
          ``[0, loss_bound]``; needs ``delta <= epsilon / 10``. Expensive.
        - ``"sparse_exponential"`` (Algorithm 7): pure-DP exponential mechanism over
          a net of sparse points of the ball of radius ``coef_norm_bound``, the
          per-record loss clipped to ``[0, loss_bound]``; brute force, refused above
          10 parameters or 200,000 net points. The net's resolution follows
          ``n * epsilon`` (public), so it fits only small problems: with the
          defaults, a few features and modest ``n * epsilon``.

        The ``*_gd`` and ``*_sgd`` algorithms leave the intercept unpenalised (the
        strong convexity of the whole objective only matters for output
        perturbation).
    fit_intercept : bool, default=True
        Fit an intercept as a constant feature (``row_norm_bound / 2`` with output
        perturbation, 1 otherwise; see Notes). Unlike scikit-learn the
        intercept is *penalised* like the coefficients (as
        ``LogisticRegression(solver="liblinear")`` does): the sensitivity of the
        regularised minimiser needs the whole objective to be strongly convex. It
        adds 1 to the declared sparsity and its square to the squared row norm. The data
        are never centred (centring would read the private mean).
    sparsity : int or None, default=None
        Declared number ``s`` of non-zero features per row, e.g. the number of
        fields of a one-hot encoding. Rows denser than this are mapped into the
        bound by ``sparsity_enforcement``. None: with ``scaling="private"`` on
        sparse input, a private estimate of the typical number of non-zeros per
        row (just below a power of two above it, released from the scaling's
        budget and stored in ``sparsity_``); otherwise ``n_features``, always
        valid, but the automatic penalty then assumes dense gradients. A declared
        value is never read from the data.
    sparsity_enforcement : {"clip_l1", "truncate"}, default="clip_l1"
        The per-row map applied in ``fit`` *and* ``predict``:
        ``"clip_l1"`` scales a row by ``min(1, C_x / ||x||_2, C_x sqrt(s) /
        ||x||_1)`` (keeps every feature; Remark 2.1 makes the l1 bound suffice);
        ``"truncate"`` keeps the ``s`` largest-magnitude entries (ties: smaller
        column first), then scales to ``||x||_2 <= C_x``.
    row_norm_bound : float, default=1.0
        ``C_x``, the public l2 bound of a feature row (without the intercept).
        Scale features with public constants (e.g. divide one-hot rows by the
        square root of the number of fields) so that typical rows are not shrunk.
    coef_norm_bound : "auto" or float, default="auto"
        ``D``, the assumed l2 norm of the best model (in the units of the scaled
        rows), used by the automatic penalty; for ``loss="squared_error"`` also the
        radius of the l2 ball the model is constrained to (intercept included). A
        number is used as given. ``"auto"`` (``"output_perturbation"``) takes the
        largest ``D`` whose Thm 7.6 penalty keeps the released point's noise on
        the prediction of a row at the bound ``C`` at a standard deviation of at
        most 0.25 (logits, or standardised target units): the noise per
        coordinate is proportional to the sensitivity ``2 L / alpha_`` of
        Thm 7.1, so ``D`` grows about as ``sqrt(n)`` and with ``epsilon``. A
        public function of ``n``, ``n_features``, the budget left to the
        algorithm, ``delta``, ``sparsity_`` (declared or privately released),
        ``tol``, ``failure_prob`` and the loss's constants: it reads nothing else of
        the data and costs no privacy (see
        :func:`~skdpsco._solvers._output_perturbation.auto_coef_norm_bound`). The
        fixed prior 1.0 it replaces over-regularised one-hot problems into
        predicting the majority class (``benchmarks/sparse_defaults.py``). The
        other algorithms take 1.0 for ``"auto"``; the value used is
        ``coef_norm_bound_``.
    max_iter : int or None, default=None
        ``"output_perturbation"``: the number of iterations of the certified
        solve, always run in full (so the fit time does not depend on the data);
        None computes, from public constants only, a count under which the
        certificate cannot fail. A smaller count may make the fit raise
        :class:`~skdpsco.exceptions.CertificationError`; that outcome depends on
        the data (it reveals one bit), so do not retry with other settings on the
        same data. ``*_gd``: the number of noisy gradient steps, always run in full
        (30 if None). The other algorithms refuse a value other than None (the
        SGD's number of steps is drawn by its privacy filter, independently of the
        data).
    tol : float, default=1e-3
        Relative accuracy of the certified solve, in ``(0, 1)``: the certified
        distance is ``tol_w = tol * 2 L / alpha_``, fixed before the solve, and
        the noise grows by the factor ``1 + 2 tol``. ``tol_w`` is floored at a
        public bound above floating-point rounding (tiny ``tol`` at large ``n``),
        so the certificate can never fail on some data and not on other data.
    confidence : float, default=0.05
        ``beta`` of the automatic penalty formula, of the SGD's and the net's
        parameters and of boosting (an accuracy parameter, never a privacy one).
    learning_rate : "auto" or float, default="auto"
        Step size of the ``*_gd`` algorithms (``"auto"``: ``1 / (H + alpha_ / n)``, the
        inverse of the enforced rows' smoothness bound) and of the ``*_sgd`` ones
        (``"auto"``: Theorem 5.7's ``D / (nu sqrt(tau))`` from public bounds).
    loss_bound : float, default=1.0
        ``B``: the per-record loss is clipped to ``[0, B]`` in the score of
        ``"boosted_sgd"`` and of ``"sparse_exponential"`` (the score's sensitivity).
    verbose : int, default=0
        If > 0, print progress: the algorithm, iteration counts where its solver
        reports them, and the privacy budget spent. Private losses are never
        printed (they would leak).
    random_state : int, RandomState instance, numpy.random.Generator or None, \
default=None
        Source of the privacy noise. None (the default, and the right choice in
        production) takes the noise from the operating system's cryptographic
        source; an int makes fits reproducible, for tests only: anyone who knows
        the seed can subtract the noise (a ``Generator`` or ``RandomState`` is
        copied, never advanced: like an int, it gives every fit the same noise).
        Every noisy value lies on a public grid (see the privacy page)."""
_SHARED_PARAMS_DOC = _SHARED_PARAMS_DOC.replace(
    "\n    random_state :", SCALING_PARAM_DOC.rstrip() + "\n    random_state :", 1
)


_SHARED_ATTRS_DOC = """
    sparsity_ : int or None
        The sparsity the fit and ``predict`` use: ``sparsity``, or the privately
        released typical number of non-zeros per row, or None (``n_features``).
    coef_norm_bound_ : float
        The ``D`` used: ``coef_norm_bound``, or the value of its public ``"auto"``
        rule.
    alpha_ : float
        The ridge strength actually used, in ``alpha``'s units (the mean-scaled
        objective's ``lambda`` is ``alpha_ / n``; public: computed from the
        parameters, ``n``, ``n_features`` and the released ``sparsity_`` only).
    noise_scale_ : float or None
        Per-coordinate noise: of the released point (``"output_perturbation"``) or
        of each gradient estimate (``*_gd``); the Gaussian standard deviation, or
        the Laplace scale when ``delta = 0``, in the units of the scaled rows and
        of the intercept column's coefficient (``intercept_`` carries ``a`` times
        it, see Notes). None for the other algorithms.
    n_iter_ : ndarray of shape (1,)
        As an array like ``LogisticRegression.n_iter_`` (one fit of all
        outputs). ``"output_perturbation"``: the public number of iterations of the
        certified solve (always run in full); ``*_gd``: the number of steps;
        ``*_sgd``: the number of steps of the (selected) run, drawn independently
        of the data; 1 for
        ``"sparse_exponential"``.
    privacy_spent_ : PrivacySpent
        What the fit spent: ``epsilon``, ``delta``, the neighbouring relation
        (replace-one, ``n`` public) and the mechanisms; never more than asked.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of the features, when X has string column names."""

#: With output perturbation the implicit intercept column holds
#: ``row_norm_bound / INTERCEPT_COLUMN_RATIO`` (scikit-learn's ``intercept_scaling``),
#: not 1: its noise follows the row bound ``C = sqrt(C_x^2 + a^2)``, and with
#: ``a = C_x`` the intercept alone took half of it; a smaller ``a`` makes the
#: penalty (which output perturbation needs on every coordinate) weigh more on the
#: intercept. Measured (median of 3 seeds, epsilon 1, defaults; ratio 1 / 2 / 4 /
#: 8): one-hot classifier n = 2e4, 8 x 50 fields 0.723 / 0.773 / 0.782 / 0.788,
#: one-hot regressor MSE 0.669 / 0.631 / 0.618 / 0.614; centred features with 12%
#: positives, log-loss 0.350 / 0.355 / 0.367 / 0.415; sparse counts with 25%
#: positives 0.615 / 0.610 / 0.610 / 0.616; dense regressor with an offset R^2
#: 0.648 / 0.623 / 0.610 / 0.605. The iterative algorithms keep a column of 1: they
#: leave the intercept unpenalised, and a column of ``a`` slows its steps ``1 /
#: a^2``-fold (``"projection_gd"``, noise-free, 30 steps: an intercept of 3 reached
#: 2.88 at ratio 2 and 1.33 at ratio 4) for no measured gain at the default scale.
INTERCEPT_COLUMN_RATIO = 2.0

_NOTES_DOC = """
    Notes
    -----
    Privacy model: replace-one neighbouring datasets with ``n`` public. The
    declared bounds ``sparsity`` and ``row_norm_bound`` are enforced on every row by
    a fixed per-row map, so the guarantee holds whatever the data look like; a
    wrong declaration costs accuracy, never privacy (except that with
    ``delta = 0`` a larger ``sparsity`` means more noise). Hyper-parameter searches
    (``GridSearchCV``) on private data compose: ``k`` fits cost about ``k``
    times the budget, and ``score`` on private data is not private.

    With ``algorithm="output_perturbation"`` the implicit intercept column holds
    ``a = row_norm_bound / 2`` rather than 1 (as scikit-learn's
    ``intercept_scaling``): the row bound ``C`` of the noise includes it, and a
    column of 1 next to rows of norm 1 took half of ``C^2``. The column's
    coefficient is ``intercept_ / a``, and it is that coefficient that counts toward
    ``coef_norm_bound`` and the penalty (so the penalty on ``intercept_`` itself is
    ``1 / a^2`` times that on a feature's coefficient). The other algorithms use a
    column of 1."""

_REFERENCES_DOC = """
    References
    ----------
    .. [1] Ghazi, B., Guzmán, C., Kamath, P., Kumar, R. and Manurangsi, P.
       Differentially private optimization with sparse gradients. Algorithms 1-7;
       Theorems 3.2-3.4, 5.7, 6.1, 7.1, 7.5, 7.6; Remark 2.1.
    .. [2] Chaudhuri, K., Monteleoni, C. and Sarwate, A. D. (2011). Differentially
       private empirical risk minimization. JMLR (output perturbation).
    .. [3] Liu, J. and Talwar, K. (2019). Private selection from private
       candidates. STOC (Algorithm 5's selection).
    .. [4] Whitehouse, J., Ramdas, A., Rogers, R. and Wu, Z. S. (2023).
       Fully-adaptive composition in differential privacy. ICML (Algorithm 4's
       privacy filter)."""


def _lipschitz_smoothness_glm(loss, row_bound):
    """``L = sup|phi'| C`` and ``H = sup phi'' C^2`` (a GLM gradient is ``phi' x``)."""
    return loss.lipschitz * row_bound, loss.smoothness * row_bound**2


class SparseGradientDPRegressor(DPRegressorMixin, _SparseGradientBase):
    __doc__ = f"""Differentially private linear regression for sparse features.

    For one-hot, bag-of-words or embedding-style features given as a
    ``scipy.sparse`` matrix with up to millions of columns and a few non-zeros per
    row: every per-example gradient of a linear model is then ``s``-sparse, and the
    error of these algorithms depends on ``s`` and ``log(n_features)`` instead of
    ``n_features``. It minimises the mean-scaled objective

        (1 / n) sum_i loss(y_i, x_i . w + b) + (alpha / 2) (||w||^2 + b^2)

    (the convention of :class:`~sklearn.linear_model.SGDRegressor` with
    ``penalty="l2"``, the intercept penalised) with an ``(epsilon, delta)``-DP
    guarantee under replace-one neighbouring datasets. X is never densified.

    Parameters
    ----------{_SHARED_PARAMS_DOC}
    alpha : "auto" or float, default="auto"
        Ridge strength, as :class:`~sklearn.linear_model.Ridge`'s ``alpha``
        (``||y - X w - b||^2 + alpha ||w||^2``: the mean-scaled objective's
        ``lambda = alpha / n``; the same value means the same penalty in every
        skdpsco regressor), on the scaled coefficients; unlike ``Ridge`` the
        intercept column is penalised too, as output perturbation's sensitivity
        needs strong convexity in every direction. ``"auto"`` is the
        SCO choice of Thm 7.6 with constant 1 (the paper leaves it unspecified):
        ``(L / D) sqrt(ln(n) ln(1/beta) / n + sqrt(s ln(1/delta) ln(p / beta)) /
        (epsilon n))`` (``p`` parameters), from public values only. Output
        perturbation's noise is inversely proportional to ``alpha``.
    loss : {{"huber", "squared_error"}}, default="huber"
        ``"huber"``: Lipschitz whatever the target (no clipping of y needed),
        ``L = huber_threshold * C``. ``"squared_error"``: needs ``target_bound`` (y is
        clipped to it) and constrains ``||(w, b)||_2 <= coef_norm_bound``;
        ``L = (coef_norm_bound * C + target_bound) * C``; needs ``delta > 0``.
        Here ``C = sqrt(row_norm_bound^2 + fit_intercept a^2)`` with the
        intercept column ``a = row_norm_bound / 2`` for output perturbation, 1
        otherwise (see Notes).
    huber_threshold : float, default=1.0
        Threshold of the Huber loss, in target units (``epsilon`` of
        :class:`~sklearn.linear_model.HuberRegressor`, without its scale estimate).
    target_bound : float or None, default=None
        Public bound ``C_y`` on ``|y|`` for ``loss="squared_error"``; targets are
        clipped to ``[-C_y, C_y]``.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
        Released coefficients (dense: every coordinate carries noise).
    intercept_ : float or ndarray of shape (n_targets,)
        Released intercept (0.0 when ``fit_intercept=False``). The shapes are
        ``Ridge``'s: a 2-D ``y`` of ``n_targets`` columns gets one model per
        column, the budget split over them by composition.{_SHARED_ATTRS_DOC}

    See Also
    --------
    SparseGradientDPClassifier : the classifier of the same family.
    sklearn.linear_model.SGDRegressor : the non-private model with the same
        objective convention.
{_NOTES_DOC}
{_REFERENCES_DOC}

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from skdpsco import SparseGradientDPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = sp.random(2000, 10_000, density=5e-4, format="csr", random_state=0)
    >>> y = X @ rng.normal(size=10_000) + 0.1 * rng.normal(size=2000)
    >>> model = SparseGradientDPRegressor(epsilon=1.0, sparsity=5, random_state=0)
    >>> model = model.fit(X, y)
    >>> model.coef_.shape
    (10000,)
    >>> model.privacy_spent_.epsilon <= 1.0
    True
    """

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-5,
        alpha="auto",
        loss="huber",
        algorithm="output_perturbation",
        fit_intercept=True,
        sparsity=None,
        sparsity_enforcement="clip_l1",
        row_norm_bound=1.0,
        huber_threshold=1.0,
        target_bound=None,
        coef_norm_bound="auto",
        max_iter=None,
        tol=1e-3,
        failure_prob=0.05,
        learning_rate="auto",
        loss_bound=1.0,
        verbose=0,
        scaling="private",
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.loss = loss
        self.algorithm = algorithm
        self.fit_intercept = fit_intercept
        self.sparsity = sparsity
        self.sparsity_enforcement = sparsity_enforcement
        self.row_norm_bound = row_norm_bound
        self.huber_threshold = huber_threshold
        self.target_bound = target_bound
        self.coef_norm_bound = coef_norm_bound
        self.max_iter = max_iter
        self.tol = tol
        self.failure_prob = failure_prob
        self.learning_rate = learning_rate
        self.loss_bound = loss_bound
        self.verbose = verbose
        self.scaling = scaling
        self.random_state = random_state

    _parameter_constraints: dict = {
        **_SparseGradientBase._parameter_constraints,
        "alpha": [StrOptions({"auto"}), PositiveFinite()],
        "loss": [StrOptions({"huber", "squared_error"})],
        "huber_threshold": [PublicBound()],
        "target_bound": [None, PublicBound()],
    }

    def _check_supported(self, algorithm):
        super()._check_supported(algorithm)
        name = type(self).__name__
        if self.loss == "squared_error":
            if self.target_bound is None:
                raise ValueError(
                    f"{name}: loss='squared_error' is Lipschitz only for bounded "
                    "targets; set the public target_bound (targets are clipped to "
                    "[-target_bound, target_bound]) or use loss='huber'."
                )
            if self.delta == 0 and algorithm.name == "output_perturbation":
                raise ValueError(
                    f"{name}: loss='squared_error' with delta=0 is not supported by "
                    "algorithm='output_perturbation': pure-DP output perturbation "
                    "needs an unconstrained smooth Lipschitz loss (Thm 7.1); use "
                    "loss='huber' or delta > 0."
                )

    def _loss(self, n_outputs, target, coef_norm_bound):
        if self.loss == "huber":
            return get_loss("huber", threshold=self.huber_threshold), None, target
        # Per-record clipping of the target: costs no privacy.
        clipped = np.clip(target, -self.target_bound, self.target_bound)
        return get_loss("squared"), coef_norm_bound, clipped

    def _lipschitz_smoothness(self, loss, row_bound, coef_norm_bound):
        if self.loss == "huber":
            return _lipschitz_smoothness_glm(loss, row_bound)
        # |phi'(z, y)| = |z - y| <= R C + C_y on the ball ||w~|| <= R.
        sup_derivative = coef_norm_bound * row_bound + self.target_bound
        return sup_derivative * row_bound, row_bound**2

    def _gradient_bound(self, problem):
        if self.loss == "huber":
            return problem.lipschitz
        # The solve also evaluates extrapolated points y = x_k + m (x_k - x_{k-1})
        # of iterates in the ball, m < 1 (Beck 2017, Section 10.7.7): ||y|| < 3R.
        C = problem.row_bound
        return (3.0 * problem.radius * C + self.target_bound) * C

    def _l2_penalty(self, problem):
        if self.alpha == "auto":
            return self._auto_l2_penalty(problem)
        # Ridge's alpha ||w||^2 as a mean-scaled lambda.
        penalty = float(self.alpha) / problem.budget.n_samples
        return checked_penalty(penalty, self, "alpha")


class SparseGradientDPClassifier(DPClassifierMixin, _SparseGradientBase):
    __doc__ = f"""Differentially private logistic regression for sparse features.

    Binary logistic regression, or one joint multinomial model for more than two
    classes, for ``scipy.sparse`` features with up to millions of columns and a few
    non-zeros per row. It minimises ``C sum_i loss_i + (||W||^2 + ||b||^2) / 2``
    (the objective of :class:`~sklearn.linear_model.LogisticRegression`, with the
    intercept penalised as in its ``"liblinear"`` solver) with an
    ``(epsilon, delta)``-DP guarantee under replace-one neighbouring datasets. X is
    never densified.

    Parameters
    ----------{_SHARED_PARAMS_DOC}
    C : "auto" or float, default="auto"
        Inverse regularisation strength, as in
        :class:`~sklearn.linear_model.LogisticRegression`: the mean-scaled
        penalty is ``1 / (C n)`` (``alpha_ = 1 / C``). ``"auto"`` uses the SCO
        choice of Thm 7.6 with constant 1 (see ``SparseGradientDPRegressor``'s
        ``alpha``); output perturbation needs much stronger regularisation than
        the usual ``C = 1`` (its noise is ``2 L C`` per coordinate), so prefer
        ``"auto"``.
    classes : array-like or None, default=None
        The public label set. If None, the labels present in ``y`` are used and the
        label set is then released with the model (like ``n``).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        Released coefficients.
    intercept_ : ndarray of shape (1,) or (n_classes,)
        Released intercepts.{_SHARED_ATTRS_DOC}

    See Also
    --------
    SparseGradientDPRegressor : the regressor of the same family.
    sklearn.linear_model.LogisticRegression : the non-private model.
{_NOTES_DOC}
    The logistic loss has ``L = C_row`` and ``H = C_row^2 / 4``; the multinomial
    loss ``L = sqrt(2) C_row`` and ``H = C_row^2 / 2`` (``||p - e_y|| <= sqrt(2)``
    and the softmax Hessian has spectral norm ``<= 1/2``; the binary constants would
    under-noise by ``sqrt(2)``), with
    ``C_row = sqrt(row_norm_bound^2 + fit_intercept a^2)``, ``a`` the value of the
    implicit intercept column (``row_norm_bound / 2`` for output perturbation, 1
    otherwise; see the Notes above).
{_REFERENCES_DOC}

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from skdpsco import SparseGradientDPClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = sp.random(2000, 10_000, density=5e-4, format="csr", random_state=0)
    >>> y = (X @ rng.normal(size=10_000) > 0).astype(int)
    >>> clf = SparseGradientDPClassifier(epsilon=1.0, sparsity=5, random_state=0)
    >>> clf = clf.fit(X, y)
    >>> clf.coef_.shape
    (1, 10000)
    >>> clf.predict_proba(X[:2]).sum(axis=1).round(6).tolist()
    [1.0, 1.0]
    """

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-5,
        C="auto",
        algorithm="output_perturbation",
        fit_intercept=True,
        sparsity=None,
        sparsity_enforcement="clip_l1",
        row_norm_bound=1.0,
        coef_norm_bound="auto",
        max_iter=None,
        tol=1e-3,
        failure_prob=0.05,
        learning_rate="auto",
        loss_bound=1.0,
        classes=None,
        verbose=0,
        scaling="private",
        random_state=None,
    ):
        self.epsilon = epsilon
        self.delta = delta
        self.C = C
        self.algorithm = algorithm
        self.fit_intercept = fit_intercept
        self.sparsity = sparsity
        self.sparsity_enforcement = sparsity_enforcement
        self.row_norm_bound = row_norm_bound
        self.coef_norm_bound = coef_norm_bound
        self.max_iter = max_iter
        self.tol = tol
        self.failure_prob = failure_prob
        self.learning_rate = learning_rate
        self.loss_bound = loss_bound
        self.classes = classes
        self.verbose = verbose
        self.scaling = scaling
        self.random_state = random_state

    _parameter_constraints: dict = {
        **_SparseGradientBase._parameter_constraints,
        "C": [StrOptions({"auto"}), PositiveFinite()],
        "classes": [None, "array-like"],
    }

    def _loss(self, n_outputs, target, coef_norm_bound):
        return get_loss("logistic" if n_outputs == 1 else "multinomial"), None, target

    def _lipschitz_smoothness(self, loss, row_bound, coef_norm_bound):
        # MultinomialLoss: ||softmax - e_y|| <= sqrt(2), Hessian <= 1/2.
        return _lipschitz_smoothness_glm(loss, row_bound)

    def _l2_penalty(self, problem):
        if self.C == "auto":
            return self._auto_l2_penalty(problem)
        # LogisticRegression's C sum(loss) + ||w||^2 / 2, divided by C n.
        penalty = 1.0 / (float(self.C) * problem.budget.n_samples)
        return checked_penalty(penalty, self, "C")
