"""HeavyTailedDPRidge and HeavyTailedDPLogistic.

The estimators validate, pick the loss and the mean oracle for ``algorithm``, and hand
them to the solver; the math lives in :mod:`skdpsco._mean_estimation`,
:mod:`skdpsco._solvers` and :mod:`skdpsco.privacy`.
"""

import functools
import math
from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp

from .._dask_design import DaskLinearDesign, dask_standardised_design
from .._design import LinearDesign, standardised_design
from .._losses import get_loss
from .._mean_estimation import (
    AveragedClipBatchOracle,
    AxisTruncatedMeanOracle,
    CatoniMeanOracle,
    ClippedMeanOracle,
    PerExampleClipBatchOracle,
    SmoothSensitivityTrimmedMeanOracle,
    TruncatedMeanOracle,
)
from .._mean_estimation._schedules import (
    axis_convex_schedule,
    axis_strongly_convex_schedule,
    convex_schedule,
    strongly_convex_schedule,
)
from .._solvers import noisy_gradient_descent, noisy_sgd
from .._solvers._sample_aggregate import sample_and_aggregate
from ..privacy._mechanisms import GaussianMechanism, LaplaceMechanism
from ..privacy._params import PositiveFinite, PublicBound
from ..utils._compat import Interval, StrOptions, _fit_context
from ..utils._optional import import_dask, is_dask_collection
from ..utils._validation import canonical_sparse, refuse_sparse
from ._algorithm import Algorithm, registry
from ._base import (
    SCALING_PARAM_DOC,
    DPClassifierMixin,
    DPLinearModel,
    DPRegressorMixin,
    checked_penalty,
)

__all__ = ["HeavyTailedDPLogistic", "HeavyTailedDPRidge"]

#: Curvature budget behind ``learning_rate="auto"``: the step is
#: ``1 / (2 * loss.smoothness + lambda)``, the inverse of a smoothness bound that holds
#: when the features are standardised and weakly correlated
#: (lambda_max(E x~ x~^T) <= 2). It is a public choice; it reads no data.
_AUTO_CURVATURE = 2.0


@dataclass(frozen=True)
class _Plan:
    """Everything the solver needs, computed from public values only."""

    oracle: object
    max_iter: int
    learning_rate: float
    averaging: str
    radius: float | None = None


@dataclass(frozen=True)
class _SGDPlan:
    """A Poisson-batch SGD run, from public values only."""

    make_oracle: object
    sampling_rate: float
    n_epochs: int
    learning_rate: float
    averaging: str
    n_stages: int
    radius: float | None = None


#: Stages of R-AClipped-dpSGD: the clip level halves in squared norm and the batch
#: rate doubles per stage (Jin et al. 2024, Algorithm 2; the stage radii of the
#: proof of Theorem 6 shrink by ``sqrt(2)`` per stage).
_RESTART_STAGES = 3


def _batch_rate(est, n_samples):
    """Poisson rate ``q = m / n``; ``batch_size="auto"`` is ``ceil(sqrt(n))``."""
    m = math.ceil(math.sqrt(n_samples)) if est.batch_size == "auto" else est.batch_size
    return min(1.0, m / n_samples)


#: AClipped-dpSGD's step: ``1 / (c_gamma L0 ln(4 / beta))`` with ``c_gamma = 24``
#: and ``beta = 0.01`` (the paper leaves ``c_gamma`` unspecified; these are the
#: values in the authors' public demo code), ``L0`` the public curvature bound behind
#: ``learning_rate="auto"``. The clipped *average* carries noise of std
#: ``2 lambda z`` per step, so a small step is what keeps the iterates from diffusing.
_ACLIP_STEP_DIVISOR = 24.0 * math.log(4.0 / 0.01)


def _make_sgd_planner(oracle_class, averaging, n_stages, step_divisor=1.0):
    def plan(est, loss, l2_penalty, n_samples, shape, rho):
        def make_oracle(stage):
            # R-AClipped (Algorithm 2): lambda_k = lambda / 2^(k/2), as the radius.
            clip = 1.0 if est.clip_norm == "auto" else est.clip_norm
            return oracle_class(clip / 2.0 ** (stage / 2.0))

        return _SGDPlan(
            make_oracle,
            _batch_rate(est, n_samples),
            30 if est.max_iter is None else est.max_iter,
            _auto_step(est, loss, l2_penalty)
            / (step_divisor if est.learning_rate == "auto" else 1.0),
            averaging,
            n_stages,
            est.radius,
        )

    return plan


def _auto_step(est, loss, l2_penalty):
    if est.learning_rate != "auto":
        return est.learning_rate
    return 1.0 / (_AUTO_CURVATURE * loss.smoothness + l2_penalty)


def _clipped_gd_plan(est, n_samples, n_params, rho):
    """``(clip_norm, steps)`` of ``"clipped_gd"`` from public numbers only.

    With ``mu = sqrt(2 rho)`` the fit's GDP budget and ``p`` the number of
    parameters, the noise of a step relative to a clipped mean gradient is about
    ``nu = sqrt(20 p) / (n mu)`` at 20 steps. ``clip_norm="auto"`` is
    ``clip(0.05 / nu, 1, 3)``: where noise dominates (small ``n mu``, many
    parameters) the clip stays at 1, the best on the bundled real datasets; where
    it is negligible the clip grows to 3, which keeps standardised rows'
    gradients mostly unclipped, removes most of the clipping bias on heavy tails
    and lets each step travel further. The steps (``max_iter=None``) are
    ``n mu / 4`` within ``[20, 100 / C^1.1]``: few when data or budget are
    small (each step's noise grows like the square root of the number of
    steps), and fewer as the clip ``C`` grows, since a step then moves up to
    ``C`` times further (100 steps at ``C = 1``, 30 at ``C = 3``). Evidence:
    ``benchmarks/real_data.py``, ``benchmarks/heavy_tailed.py`` and the
    algorithm guide.
    """
    if math.isfinite(rho):
        mu_n = n_samples * math.sqrt(2.0 * rho)
        noise = math.sqrt(_MIN_CLIPPED_ITER * n_params) / mu_n
    else:
        mu_n, noise = math.inf, 0.0
    if est.clip_norm == "auto":
        clip = _MAX_AUTO_CLIP if noise == 0 else _AUTO_CLIP_NOISE / noise
        clip = min(_MAX_AUTO_CLIP, max(1.0, clip))
    else:
        clip = est.clip_norm
    cap = max(_MIN_CLIPPED_ITER, _MAX_CLIPPED_ITER / clip**_STEPS_PER_CLIP)
    steps = min(cap, max(_MIN_CLIPPED_ITER, mu_n / 4.0))
    # The cap is 30 at C = 3 up to rounding of the power.
    return clip, math.ceil(steps - 1e-9)


_MIN_CLIPPED_ITER, _MAX_CLIPPED_ITER = 20, 100
#: clip_norm="auto": ``0.05 / nu`` within [1, 3] (see _clipped_gd_plan).
_MAX_AUTO_CLIP, _AUTO_CLIP_NOISE = 3.0, 0.05
#: The steps' cap falls as ``C^-1.1``: from 100 at ``C = 1`` to 30 at ``C = 3``.
_STEPS_PER_CLIP = math.log(100.0 / 30.0) / math.log(3.0)


def _plan_clipped(est, loss, l2_penalty, n_samples, shape, rho):
    clip, steps = _clipped_gd_plan(est, n_samples, int(np.prod(shape)), rho)
    return _Plan(
        ClippedMeanOracle(clip),
        steps if est.max_iter is None else est.max_iter,
        _auto_step(est, loss, l2_penalty),
        "suffix",
        est.radius,
    )


def _plan_catoni(est, loss, l2_penalty, n_samples, shape, rho):
    oracle = CatoniMeanOracle(
        moment_bound=est.gradient_scale**2,
        scale=est.catoni_scale,
        failure_prob=est.failure_prob,
    )
    return _Plan(
        oracle,
        20 if est.max_iter is None else est.max_iter,
        _auto_step(est, loss, l2_penalty),
        "suffix",
        est.radius,
    )


def _plan_smooth_sensitivity(est, loss, l2_penalty, n_samples, shape, rho):
    # Wang et al. 2020, Algorithm 3 needs a known range [a, b] of the gradient mean:
    # [-s, s], since |E g_j| <= sqrt(E g_j^2) <= gradient_scale.
    oracle = SmoothSensitivityTrimmedMeanOracle(
        mean_bounds=(-est.gradient_scale, est.gradient_scale),
        gradient_scale=est.gradient_scale,
    )
    return _Plan(
        oracle,
        10 if est.max_iter is None else est.max_iter,
        _auto_step(est, loss, l2_penalty),
        "last",
        est.radius,
    )


#: Cap on the theorem's iteration count of the truncated-mean algorithms when
#: ``max_iter`` is None. The axis variant's ``T = sqrt(rho) n R~^2 / p^1.5``
#: (Appendix B) reaches it from n of about 2e4; capping it lower was measured
#: and lost: on the heavy-tailed benchmark (n = 1e5, d = 10, lognormal noise) the
#: ridge excess risk at epsilon 0.5 / 1 was 0.153 / 0.045 with 1000 iterations,
#: 0.217 / 0.066 with 400 and 0.197 / 0.066 with 200 (median of 3 seeds); on
#: Student-t data (n = 2e4 and 1e5, d = 10 and 50) and breast cancer / diabetes
#: no lower cap scored better beyond the seed-to-seed spread.
_TRUNCATED_MAX_ITER = 1000
_AXIS_TRUNCATED_MAX_ITER = 1000

#: Radius of the l2 ball the truncated-mean algorithms project onto when ``radius``
#: is None: their step size and iteration count need a bounded feasible set
#: (Kamath, Liu & Zhang 2021, Assumption 1.2). Public; contains the solution of
#: standardised problems with room to spare.
_DEFAULT_TRUNCATED_RADIUS = 10.0


def _truncated_schedule(est, loss, l2_penalty, n_samples, shape, rho, axis):
    """Kamath et al.'s Theorem 4.7 / 4.8 (App. B for ``axis``) parameters.

    The strongly convex schedule (last iterate) is used when the penalty makes the
    objective strongly convex enough for Theorem 4.8's bound to be informative
    (T > 1) *and* it needs fewer iterations than the convex one (more budget per
    iteration); with scikit-learn's scaling ``lambda = alpha / n`` is usually far
    too small. Both use public numbers only.
    """
    p = int(np.prod(shape))
    radius = _DEFAULT_TRUNCATED_RADIUS if est.radius is None else est.radius
    common = dict(
        diameter=2.0 * radius,
        gradient_scale=est.gradient_scale,
        max_iter=(
            (_AXIS_TRUNCATED_MAX_ITER if axis else _TRUNCATED_MAX_ITER)
            if est.max_iter is None
            else est.max_iter
        ),
        sample_split=est.sample_split,
    )
    if axis:
        convex = axis_convex_schedule(n_samples, rho, p, **common)
    else:
        convex = convex_schedule(
            n_samples, rho, p, moment_order=est.moment_order, **common
        )
    schedule = convex
    if l2_penalty > 0:
        curvature = l2_penalty + _AUTO_CURVATURE * loss.smoothness
        strong = (axis_strongly_convex_schedule if axis else strongly_convex_schedule)(
            n_samples,
            rho,
            p,
            strong_convexity=l2_penalty,
            smoothness=curvature,
            **({} if axis else {"moment_order": est.moment_order}),
            **common,
        )
        # T = 1 means the contraction bound q^T M <= (a+b) G / (ab) holds at once:
        # the strong convexity is too weak for the bound to say anything.
        if 1 < strong.n_iter < convex.n_iter:
            schedule = strong
    return schedule, radius


def _make_truncated_planner(oracle_class, axis):
    def plan(est, loss, l2_penalty, n_samples, shape, rho):
        schedule, radius = _truncated_schedule(
            est, loss, l2_penalty, n_samples, shape, rho, axis
        )
        truncation = schedule.truncation if est.truncation == "auto" else est.truncation
        oracle = oracle_class(
            gradient_scale=est.gradient_scale,
            truncation=truncation,
            moment_order=2.0 if axis else est.moment_order,
            sample_split=est.sample_split,
        )
        step = (
            schedule.learning_rate if est.learning_rate == "auto" else est.learning_rate
        )
        return _Plan(oracle, schedule.n_iter, step, schedule.averaging, radius)

    return plan


@dataclass(frozen=True)
class _Inputs:
    """The public inputs every heavy-tailed solver shares."""

    loss: object
    design: LinearDesign
    shape: tuple
    l2_penalty: float
    sample_weight: np.ndarray | None


def _inputs(problem):
    """Loss, design, parameter shape, penalty and public record weights."""
    est = problem.estimator
    X = problem.X
    design = (
        X
        if isinstance(X, (LinearDesign, DaskLinearDesign))
        else LinearDesign(X, est.fit_intercept)
    )
    n_outputs = problem.n_outputs
    shape = (design.dim,) if n_outputs == 1 else (design.dim, n_outputs)
    l2_penalty = est._l2_penalty(problem.budget.n_samples)
    # The caller's weights, already in [0, 1]: they multiply each record's
    # clipped contribution, so every sensitivity is the unweighted one.
    sample_weight = problem.sample_weight
    weighting = est._sample_weight(problem.target)
    if weighting is not None:
        # Weights w_i enter as w_i / W <= 1 after clipping (sensitivity
        # unchanged); dividing the penalty by W too keeps the minimiser of
        # (1/n) sum w_i loss_i + (lambda/2)||w||^2. W is the largest weight of
        # the public table over classes_, never the largest over the records:
        # that one depends on which labels occur in the private y, and would
        # rescale every record's contribution, the penalty and the step size
        # between neighbours (tested).
        class_weight, top = weighting
        class_weight, l2_penalty = class_weight / top, l2_penalty / top
        sample_weight = (
            class_weight if sample_weight is None else class_weight * sample_weight
        )
    return _Inputs(est._loss(n_outputs), design, shape, l2_penalty, sample_weight)


def _gradient_descent(build_plan):
    """Runner of a full-batch algorithm: its plan, then noisy gradient descent
    (Kamath, Liu & Zhang 2021, Algorithm 1) with the plan's mean oracle."""

    def run(problem):
        est, budget, inputs = problem.estimator, problem.budget, _inputs(problem)
        plan = build_plan(
            est,
            inputs.loss,
            inputs.l2_penalty,
            budget.n_samples,
            inputs.shape,
            budget.rho,
        )
        return noisy_gradient_descent(
            inputs.design,
            problem.target,
            inputs.loss,
            plan.oracle,
            n_outputs=problem.n_outputs,
            budget=budget,
            max_iter=plan.max_iter,
            learning_rate=plan.learning_rate,
            l2_penalty=inputs.l2_penalty,
            radius=plan.radius,
            averaging=plan.averaging,
            sample_weight=inputs.sample_weight,
            progress=problem.progress,
            rng=problem.rng,
        )

    return run


def _sgd(build_plan):
    """Runner of a Poisson-batch algorithm: its plan, then noisy SGD."""

    def run(problem):
        est, budget, inputs = problem.estimator, problem.budget, _inputs(problem)
        plan = build_plan(
            est, inputs.loss, inputs.l2_penalty, budget.n_samples, inputs.shape, None
        )
        return noisy_sgd(
            inputs.design,
            problem.target,
            inputs.loss,
            plan.make_oracle,
            n_outputs=problem.n_outputs,
            budget=budget,
            sampling_rate=plan.sampling_rate,
            n_epochs=plan.n_epochs,
            learning_rate=plan.learning_rate,
            l2_penalty=inputs.l2_penalty,
            radius=plan.radius,
            averaging=plan.averaging,
            n_stages=plan.n_stages,
            sample_weight=inputs.sample_weight,
            progress=problem.progress,
            rng=problem.rng,
        )

    return run


def _run_sample_aggregate(problem):
    """Sample and aggregate (Wang et al. 2020, Algorithm 2) over the public
    ball of radius ``radius``."""
    est, budget, inputs = problem.estimator, problem.budget, _inputs(problem)
    radius = _DEFAULT_TRUNCATED_RADIUS if est.radius is None else est.radius
    return sample_and_aggregate(
        inputs.design.matrix(),
        problem.target,
        inputs.loss,
        budget=budget,
        radius=radius,
        fit_intercept=est.fit_intercept,
        l2_penalty=inputs.l2_penalty,
        n_outputs=problem.n_outputs,
        rng=problem.rng,
    )


def _accountant(oracle_class):
    # Exact GDP composition applies where every mechanism is Gaussian.
    return "gdp" if oracle_class.all_gaussian else "zcdp"


#: The algorithms (every entry is audited in tests/audit). "class_weight" and
#: "sample_weight": per-record weights in [0, 1] keep the oracle's sensitivity
#: (they multiply a clipped gradient, or a bounded Catoni influence, of norm at
#: most the unweighted bound: doc/proofs.rst, "Sample weights");
#: "max_iter": the number of passes is the user's to set (sample and aggregate
#: makes one pass over each of its subsets); "sparse": scipy.sparse X is read
#: through the row-chunked design only (products with X, row norms, per-sample
#: gradients densified a row chunk at a time). Each oracle's sensitivity
#: argument bounds one record's gradient u_i x~_i from its row alone (e.g. the
#: clip to ||.|| <= C of Abadi et al. 2016, Algorithm 1), whatever the storage,
#: so sparse and dense X get the same noise. Sample and aggregate solves each
#: subset on its dense rows (k x d, whatever the sparsity), so it keeps
#: refusing sparse input. "dask": dask X is read through the dask design, whose
#: exact sums equal the in-memory ones bit for bit (skdpsco._exact_sum; the
#: sensitivity is that of the in-memory fit); for the Poisson-batch algorithms the
#: batches are drawn on the client as in memory and the cluster serves their rows
#: (DaskLinearDesign.batches), so every batch design is the in-memory one.
_SGD_SUPPORTS = frozenset(
    {"class_weight", "dask", "max_iter", "sample_weight", "sparse"}
)
_ALGORITHMS = registry(
    Algorithm(
        "clipped_gd",
        _gradient_descent(_plan_clipped),
        _accountant(ClippedMeanOracle),
        supports=frozenset(
            {"class_weight", "dask", "max_iter", "sample_weight", "sparse"}
        ),
    ),
    Algorithm(
        "catoni_gd",
        _gradient_descent(_plan_catoni),
        _accountant(CatoniMeanOracle),
        supports=frozenset({"class_weight", "max_iter", "sample_weight", "sparse"}),
    ),
    Algorithm(
        "truncated_mean_gd",
        _gradient_descent(_make_truncated_planner(TruncatedMeanOracle, axis=False)),
        _accountant(TruncatedMeanOracle),
        supports=frozenset({"max_iter", "sparse"}),
    ),
    Algorithm(
        "axis_truncated_mean_gd",
        _gradient_descent(_make_truncated_planner(AxisTruncatedMeanOracle, axis=True)),
        _accountant(AxisTruncatedMeanOracle),
        supports=frozenset({"max_iter", "sparse"}),
    ),
    Algorithm(
        "smooth_sensitivity_gd",
        _gradient_descent(_plan_smooth_sensitivity),
        supports=frozenset({"max_iter", "sparse"}),
    ),
    Algorithm("sample_aggregate", _run_sample_aggregate),
    Algorithm(
        "dp_sgd",
        _sgd(_make_sgd_planner(PerExampleClipBatchOracle, "suffix", 1)),
        supports=_SGD_SUPPORTS,
    ),
    Algorithm(
        "aclipped_sgd",
        _sgd(
            _make_sgd_planner(
                AveragedClipBatchOracle, "uniform", 1, _ACLIP_STEP_DIVISOR
            )
        ),
        supports=_SGD_SUPPORTS,
    ),
    Algorithm(
        "r_aclipped_sgd",
        _sgd(
            _make_sgd_planner(
                AveragedClipBatchOracle,
                "uniform",
                _RESTART_STAGES,
                _ACLIP_STEP_DIVISOR,
            )
        ),
        supports=_SGD_SUPPORTS,
    ),
)


def _sparse_algorithms():
    """The algorithms that fit on scipy.sparse X, in the registry's order."""
    return [name for name, a in _ALGORITHMS.items() if "sparse" in a.supports]


class _HeavyTailedBase(DPLinearModel):
    _ALGORITHMS = _ALGORITHMS
    #: scipy.sparse X is predicted on by every algorithm and fitted on by those
    #: whose registry entry supports "sparse" (the others refuse it at fit).
    _accept_sparse = True

    _parameter_constraints: dict = {
        **DPLinearModel._parameter_constraints,
        "algorithm": [StrOptions(set(_ALGORITHMS))],
        "max_iter": [None, Interval(Integral, 1, None, closed="left")],
        "learning_rate": [StrOptions({"auto"}), PositiveFinite()],
        "clip_norm": [StrOptions({"auto"}), PublicBound()],
        "gradient_scale": [PublicBound()],
        "catoni_scale": [StrOptions({"rms", "paper"}), PositiveFinite()],
        "failure_prob": [Interval(Real, 0, 1, closed="neither")],
        "moment_order": [Interval(Real, 2, None, closed="left")],
        "truncation": [StrOptions({"auto"}), PublicBound()],
        "sample_split": [StrOptions({"data", "budget"})],
        "batch_size": [
            StrOptions({"auto"}),
            Interval(Integral, 1, None, closed="left"),
        ],
        "radius": [None, PublicBound()],
    }

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Fit the model with the stated ``(epsilon, delta)`` guarantee.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data. No bound on its values is assumed or read.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets (several columns for the regressor: one model per column,
            the budget split over them by composition).
        sample_weight : array-like of shape (n_samples,) or None, default=None
            Per-record weights in ``[0, 1]``, multiplying each record's loss as
            in scikit-learn (``"clipped_gd"``, ``"catoni_gd"`` and the ``*_sgd``
            algorithms; the others refuse them). Each record's clipped gradient
            is multiplied by its weight, so the sensitivity, the noise and
            ``privacy_spent_`` are those of the unweighted fit. Larger weights
            are refused: divide them by a public bound on their maximum (the
            largest weight given is itself private). The private scaling
            ignores the weights (it releases unweighted statistics).

        Returns
        -------
        self : object
            Fitted estimator, with ``privacy_spent_`` recording what the fit spent.
            If the fit raises, the estimator is left exactly as it was.
        """
        return self._guarded_fit(X, y, sample_weight)

    def _sample_weight(self, target):
        """``None``, or per-record weights and their public normaliser.

        The normaliser must be a public constant (for classifiers, the largest
        weight of the ``class_weight`` table over ``classes_``), not a statistic of
        the records.
        """
        return None

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self.algorithm in _sparse_algorithms()
        return tags

    def _validate_training_data(self, X, y):
        if self.algorithm not in _sparse_algorithms():
            refuse_sparse(
                self,
                X,
                label=f"{type(self).__name__}(algorithm={self.algorithm!r})",
                accepted=f"its algorithms {_sparse_algorithms()} do",
            )
        X, y = super()._validate_training_data(X, y)
        if sp.issparse(X) and X.format != "csr":
            # Every access of the design is by rows: one CSR copy up front
            # (CSC row slices cost a pass over all the non-zeros each).
            X = canonical_sparse(X.tocsr(), type(self).__name__)
        return X, y

    def _standardise(self, X, x_scaling):
        if is_dask_collection(X):
            return dask_standardised_design(X, self.fit_intercept, x_scaling)
        # The solvers read the data through a design: the released scaling is
        # folded into its products where that is accurate (no standardised copy).
        return standardised_design(X, self.fit_intercept, x_scaling)


_SHARED_PARAMS_DOC = """
    epsilon : float, default=1.0
        Privacy loss bound of the whole fit, in ``(0, 1e6]``. Smaller is more
        private and noisier.
    delta : float, default=1e-5
        Probability with which the epsilon bound may fail, in ``[0, 1)``. Gaussian
        algorithms need ``delta > 0``; keep it well below ``1 / n_samples`` (a
        :class:`~skdpsco.exceptions.PrivacyLeakWarning` is raised otherwise).
    algorithm : {"clipped_gd", "catoni_gd", "truncated_mean_gd", \
"axis_truncated_mean_gd", "smooth_sensitivity_gd", "sample_aggregate", "dp_sgd", \
"aclipped_sgd", "r_aclipped_sgd"}, default="clipped_gd"
        The private solver. The ``*_gd`` ones run full-batch gradient descent in
        which the mean of the per-sample gradients is replaced by a private,
        outlier-proof estimate (the SCOF framework, Kamath, Liu & Zhang 2021,
        Algorithm 1), the budget split evenly over the iterations; the ``*_sgd``
        ones run stochastic gradient descent on Poisson batches (each record in a
        batch independently with probability ``batch_size / n``), with one noise
        multiplier calibrated for all steps by the RDP accountant of the subsampled
        Gaussian (add/remove neighbours, turned into replace-one by group privacy).

        Which to use (``benchmarks/heavy_tailed.py``; numbers in the README): the
        default ``"clipped_gd"`` scored best or near best on every real dataset
        bundled with scikit-learn at every epsilon tried (small n, up to 650
        parameters) and is the fastest; ``"catoni_gd"`` had the lowest excess
        risk on heavy-tailed, low-dimensional, large-n data (Wang et al.'s setup,
        n = 1e5, d = 10: logistic log-loss 0.001 above non-private vs 0.024 for
        clipping, and no intercept bias under skewed noise), where its noise, which
        grows with the square root of the number of parameters, is small.

        - ``"clipped_gd"``: clip every per-sample gradient to l2 norm
          ``clip_norm``, average, add Gaussian noise (the DP-GD baseline).
        - ``"catoni_gd"``: coordinate-wise Catoni/Holland soft-truncated mean with
          Gaussian noise (Wang, Xiao, Devadas & Xu 2020, Algorithm 4); needs only a
          bound on the second moment of a gradient coordinate (``gradient_scale``).
        - ``"truncated_mean_gd"``: private coarse centre from noisy per-coordinate
          histograms on one half of the data, then the mean of the other half's
          gradients within a ball around it, plus Gaussian noise (Kamath, Liu &
          Zhang 2021, Algorithms 2-4); assumes bounded ``moment_order``-th moments
          of the gradients in every direction. Iterations, step and truncation follow
          their Theorems 4.7/4.8; iterates stay in the ball of radius ``radius``
          (10 if None).
        - ``"axis_truncated_mean_gd"``: the same with coordinate-wise truncation,
          for moments bounded along the axes only (their Appendix B, k = 2).
        - ``"smooth_sensitivity_gd"`` (experimental: it measures poorly, as the
          paper's own experiments found): coordinate-wise trimmed means (Wang
          et al. 2020, Algorithms 2-3, with the exact t-smooth bound on their
          local sensitivity: the paper's simplified bound is not smooth and would
          leak), released on a public grid by propose-test-release (a private
          upper bound on the smooth bound, then Gaussian noise scaled to it) in
          place of the paper's arsinh-normal noise, whose data-dependent scale no
          public grid can follow; each step is ``(epsilon, delta) / max_iter``-DP
          (basic composition). The target mean of each coordinate is assumed in
          ``[-gradient_scale, gradient_scale]``. Last iterate.
        - ``"sample_aggregate"``: solve the regularised problem non-privately on
          many small random subsets, release the most central solution on a
          public grid with Gaussian noise scaled to a privately released upper
          bound on a smooth bound of its sensitivity (Wang et al. 2020, Algorithm
          1, Nissim, Raskhodnikova & Smith 2007, with the corrected smooth bound;
          propose-test-release, Dwork & Lei 2009). Needs very large ``n`` (about
          1e6 at epsilon = 1, d = 10) and refuses smaller data with an error
          naming the minimum; solutions lie in the ball of radius ``radius`` (10
          if None). The only one that refuses scipy.sparse ``X``: it solves
          every subset on its dense rows.
        - ``"dp_sgd"``: per-example clipping to ``clip_norm`` (Abadi et al. 2016),
          the stochastic baseline practitioners know from Opacus.
        - ``"aclipped_sgd"``: AClipped-dpSGD (Jin et al. 2024, Algorithm 1): average
          the batch's gradients, clip the average once to ``clip_norm``, add noise
          calibrated to its true sensitivity ``2 * clip_norm`` (the paper's own
          calibration under-noises by a factor ``2 * batch_size``); average of the
          iterates.
        - ``"r_aclipped_sgd"``: R-AClipped-dpSGD (their Algorithm 2): 3 restarted
          AClipped stages, each from the previous average, with the clip level
          divided by sqrt(2) and the batch doubled per stage.
    fit_intercept : bool, default=True
        Fit an intercept as one more (unpenalised) coordinate. The data are never
        centred: centring would read the private mean.
    max_iter : int or None, default=None
        Number of gradient steps, always run in full (stopping early on a private
        loss would leak); more steps mean more noise per step. ``None`` picks the
        algorithm's default: for ``"clipped_gd"`` ``n_samples * mu / 4`` within
        [20, 100 / C^1.1] (``mu`` the Gaussian-DP parameter of the fit's budget,
        ``C`` the clip norm: few steps when data or budget are small, and fewer
        as the clip grows, since each step then travels further; 100 at ``C =
        1``, 30 at ``C = 3``), 20 for ``"catoni_gd"``, 10
        for ``"smooth_sensitivity_gd"`` (``"sample_aggregate"`` refuses a value
        other than None: one pass over each subset); for
        the truncated-mean algorithms the theorem's iteration count, capped at
        ``max_iter`` (1000 if None: fewer measured worse for both). For the
        ``*_sgd`` algorithms it is the number of epochs (30 if None), as in
        :class:`~sklearn.linear_model.SGDRegressor`.
    learning_rate : "auto" or float, default="auto"
        Step size. ``"auto"`` is ``1 / (2 * curvature_of_the_loss + penalty)``, a
        safe step for standardised features; for the AClipped algorithms it is
        further divided by ``24 ln(400)`` (Jin et al.'s tuning: their per-step noise
        is large). Scale features with public constants or a differentially
        private scaler, never with a scaler fitted on the private
        data.
    clip_norm : "auto" or float, default="auto"
        Public bound ``C`` on the l2 norm of every per-sample gradient. Larger
        gradients (outliers, heavy tails) are scaled down to norm ``C``; this is
        what makes the guarantee hold without any bound on the data. Noise grows
        linearly with ``C``. ``"auto"``: for ``"clipped_gd"`` a public function of
        ``n_samples``, the number of parameters ``p`` and the budget, ``0.05 n mu /
        sqrt(20 p)`` within [1, 3] (``mu`` the Gaussian-DP parameter of the fit's
        budget): 1 where the noise dominates (small data, many parameters), up
        to 3 where it is negligible, which removes most of the clipping bias on
        heavy tails and lets fewer steps converge; 1 for the ``*_sgd``
        algorithms.
    gradient_scale : float, default=1.0
        Public scale of one coordinate of a per-sample gradient: the algorithms
        other than ``"clipped_gd"`` assume ``E[g_j^2] <= gradient_scale^2``. A wrong
        value costs accuracy, never privacy. For standardised features, about the
        noise standard deviation of y (regression) or 1 (classification).
    catoni_scale : {"rms", "paper"} or float, default="rms"
        Truncation scale ``s`` of ``"catoni_gd"``: ``"rms"`` is
        ``2 * gradient_scale``; ``"paper"`` is Wang et al.'s
        ``sqrt(n * gradient_scale^2 / (2 log(1 / failure_prob)))`` (less bias, more
        noise); a float is used as is. Noise grows linearly with ``s``.
    failure_prob : float, default=0.01
        ``delta'`` of ``"catoni_gd"``: the failure probability its smoothing is
        tuned for (an accuracy parameter, not a privacy one).
    moment_order : float, default=2.0
        ``k >= 2``: the truncated-mean algorithms assume the k-th central moment of
        the gradients is at most ``gradient_scale^k``; larger ``k`` (lighter tails)
        allows less truncation. Accuracy only, never privacy.
    truncation : "auto" or float, default="auto"
        Truncation radius ``tau`` (in units of ``gradient_scale``) of the
        truncated-mean algorithms; ``"auto"`` follows Kamath et al. (at least 60).
    sample_split : {"data", "budget"}, default="data"
        How the truncated-mean algorithms keep their two stages (coarse centre, then
        truncated mean) within one iteration's budget: ``"data"`` runs them on two
        disjoint random halves of the records (the paper); ``"budget"`` runs both
        on all records with half the budget each.
    batch_size : "auto" or int, default="auto"
        Expected batch size ``m`` of the ``*_sgd`` algorithms (Poisson rate
        ``m / n``); ``"auto"`` is ``ceil(sqrt(n))``.
    radius : float or None, default=None
        If given, the iterates are projected onto the l2 ball of this radius
        (intercept included).
    verbose : int, default=0
        If > 0, print progress: the algorithm, iteration counts where its solver
        reports them, and the privacy budget spent. Private losses are never
        printed (they would leak).
    random_state : int, RandomState instance, numpy.random.Generator or None, \
default=None
        Source of the privacy noise. ``None`` (the default, and the right choice in
        production) takes the noise from the operating system's cryptographic
        source (every noisy value lies on a public grid: see the privacy page); an
        int makes fits reproducible, which is
        for tests only: anyone who knows the seed can subtract the noise. A
        ``Generator`` or ``RandomState`` is copied, never advanced: like an int, it
        gives every fit the same noise."""
_SPARSE_SCALING_DOC = """

        Sparse ``X`` (one-hot columns of ``OneHotEncoder``, mixed with numeric
        ones by a ``ColumnTransformer``) gets a private scale per column and no
        centre: the zeros stay zeros, a
        one-hot column needs no centre (the intercept absorbs its mean), and a
        numeric column is divided by its root mean square about 0. A numeric
        column far from 0 relative to its spread (a year, a price level) then
        varies little in the fit's units: centre it with public constants before
        it joins the sparse matrix, or keep the output dense
        (``OneHotEncoder(sparse_output=False)``,
        ``ColumnTransformer(sparse_threshold=0)``), which is centred privately.
        Sparse and dense ``X`` spend the same budget; with ``scaling="none"``, a
        public ``(0, scale)`` or ``fit_intercept=False`` they give the same model
        (to float rounding). A public nonzero ``center`` needs dense ``X``."""
_SHARED_PARAMS_DOC = _SHARED_PARAMS_DOC.replace(
    "\n    random_state :",
    SCALING_PARAM_DOC.rstrip() + _SPARSE_SCALING_DOC + "\n    random_state :",
    1,
)


_SHARED_ATTRS_DOC = """
    n_iter_ : ndarray of shape (1,)
        Number of iterations run, always in full (public), as an array like
        ``LogisticRegression.n_iter_`` (one fit of all outputs).
    privacy_spent_ : PrivacySpent
        What the fit spent: ``epsilon``, ``delta``, ``rho``, the neighbouring
        relation (replace-one, ``n`` public) and the mechanisms; never more than the
        ``epsilon`` asked for.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
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
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
        Released coefficients.
    intercept_ : float or ndarray of shape (n_targets,)
        Released intercept (0.0 when ``fit_intercept=False``). The shapes are
        ``Ridge``'s: a 2-D ``y`` of ``n_targets`` columns gets one model per
        column, the budget split over them by composition.{_SHARED_ATTRS_DOC}

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
        max_iter=None,
        learning_rate="auto",
        clip_norm="auto",
        gradient_scale=1.0,
        catoni_scale="rms",
        failure_prob=0.01,
        moment_order=2.0,
        truncation="auto",
        sample_split="data",
        batch_size="auto",
        radius=None,
        verbose=0,
        scaling="private",
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
        self.gradient_scale = gradient_scale
        self.catoni_scale = catoni_scale
        self.failure_prob = failure_prob
        self.moment_order = moment_order
        self.truncation = truncation
        self.sample_split = sample_split
        self.batch_size = batch_size
        self.radius = radius
        self.verbose = verbose
        self.scaling = scaling
        self.random_state = random_state

    _parameter_constraints: dict = {
        **_HeavyTailedBase._parameter_constraints,
        "alpha": [Interval(Real, 0, None, closed="left")],
    }

    def _loss(self, n_outputs):
        return get_loss("squared")

    def _l2_penalty(self, n_samples):
        # Ridge's sum-scaled alpha ||w||^2 over 2n, as a mean-scaled lambda.
        return checked_penalty(self.alpha / n_samples, self, "alpha")


#: ``class_weight="balanced"``: the public share of the budget spent on the private
#: label counts, and the largest weight ``n / (K count)`` a class can get (its noisy
#: count is clipped below at ``n / (K cap)``, so that a class whose count the noise
#: drives to zero or below is weighted like a rare class, not infinitely).
_BALANCED_SHARE = 0.1
_MAX_BALANCED_WEIGHT = 100.0


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
    class_weight : dict, "balanced" or None, default=None
        Public weights ``{{label: weight}}`` multiplying each record's loss, as in
        ``LogisticRegression`` (same minimiser in the non-private limit). Each
        record's *clipped* gradient is multiplied by ``weight / max(weights) <= 1``
        and the penalty is divided by ``max(weights)``, so the sensitivity and the
        noise are exactly those of the unweighted fit. ``"balanced"``: the weights
        ``n / (n_classes * count)`` of scikit-learn, from private class counts
        released first with a public 10% of ``(epsilon, delta)`` (a Gaussian
        histogram, Laplace when ``delta = 0``; each noisy count is clipped to
        ``[n / (100 n_classes), n]``, so no weight exceeds 100), composed into
        ``privacy_spent_``; the released weights are public from then on and
        enter as a table given as a dict does. Only the algorithms that support
        a dict support it.
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
        Released intercepts.
    class_weight_ : ndarray of shape (n_classes,)
        The weight of each class of ``classes_`` the fit used (ones for
        ``class_weight=None``; with ``"balanced"``, computed from the released
        noisy counts: post-processing).{_SHARED_ATTRS_DOC}

    See Also
    --------
    HeavyTailedDPRidge : the regressor of the same family.
    sklearn.linear_model.LogisticRegression : the non-private model.
{_REFERENCES_DOC}

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from skdpsco import HeavyTailedDPLogistic
    >>> X, y = load_digits(return_X_y=True)  # raw pixels, no scaler: private end to end
    >>> clf = HeavyTailedDPLogistic(epsilon=2.0, random_state=0).fit(X, y)
    >>> clf.coef_.shape
    (10, 64)
    >>> clf.predict_proba(X[:2]).sum(axis=1).round(6).tolist()
    [1.0, 1.0]
    >>> bool(clf.score(X, y) > 0.8)
    True
    """

    def __init__(
        self,
        *,
        epsilon=1.0,
        delta=1e-5,
        C=1.0,
        algorithm="clipped_gd",
        fit_intercept=True,
        max_iter=None,
        learning_rate="auto",
        clip_norm="auto",
        gradient_scale=1.0,
        catoni_scale="rms",
        failure_prob=0.01,
        moment_order=2.0,
        truncation="auto",
        sample_split="data",
        batch_size="auto",
        radius=None,
        classes=None,
        class_weight=None,
        verbose=0,
        scaling="private",
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
        self.gradient_scale = gradient_scale
        self.catoni_scale = catoni_scale
        self.failure_prob = failure_prob
        self.moment_order = moment_order
        self.truncation = truncation
        self.sample_split = sample_split
        self.batch_size = batch_size
        self.radius = radius
        self.classes = classes
        self.class_weight = class_weight
        self.verbose = verbose
        self.scaling = scaling
        self.random_state = random_state

    _parameter_constraints: dict = {
        **_HeavyTailedBase._parameter_constraints,
        "C": [Interval(Real, 0, None, closed="neither")],
        "classes": [None, "array-like"],
        "class_weight": [None, dict, StrOptions({"balanced"})],
    }

    def _loss(self, n_outputs):
        return get_loss("logistic" if n_outputs == 1 else "multinomial")

    def _check_supported(self, algorithm):
        super()._check_supported(algorithm)
        if self.class_weight is not None and "class_weight" not in algorithm.supports:
            supported = [
                name for name, a in _ALGORITHMS.items() if "class_weight" in a.supports
            ]
            raise ValueError(
                f"{type(self).__name__}: class_weight is not supported by "
                f"algorithm={self.algorithm!r} (its sensitivity analysis assumes "
                f"unweighted records); use one of {supported}."
            )

    def _encode_target(self, y):
        encoded = super()._encode_target(y)
        self.class_weight_ = self._public_class_weight()
        return encoded

    def _public_class_weight(self):
        """The weight of each class from ``class_weight`` (ones for None, and for
        ``"balanced"`` until the counts are released)."""
        weights = np.ones(self.classes_.size)
        if not isinstance(self.class_weight, dict):
            return weights
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
        return weights

    def _label_count_share(self):
        return _BALANCED_SHARE if self.class_weight == "balanced" else 0.0

    def _release_label_counts(self, target, spend, rng):
        """Release the class counts and set the balanced ``class_weight_``.

        Replacing one record moves it from one class to another: two counts
        change by 1, an l2-sensitivity of ``sqrt(2)`` (Gaussian mechanism of
        zCDP ``rho``, Bun & Steinke 2016, Prop 1.6) and an l1-sensitivity of 2
        (Laplace mechanism, Dwork et al. 2006, Prop 1). The weights are
        post-processing of the counts; the algorithm runs after their release
        with them as public constants (adaptive composition, Bun & Steinke 2016,
        Lemma 2.3; basic composition holds adaptively too).
        """
        k = self.classes_.size
        if is_dask_collection(target):
            # Exact integer counts, computed on the cluster.
            da = import_dask("array")
            counts = da.bincount(target.astype(np.intp), minlength=k).compute()
        else:
            counts = np.bincount(target.astype(np.intp), minlength=k)
        counts = counts.astype(float)
        if "rho" in spend:
            mechanism = GaussianMechanism.from_zcdp(
                math.sqrt(2.0), spend["rho"], name="label counts", integer=True
            )
        else:
            mechanism = LaplaceMechanism.from_epsilon(
                2.0, spend["epsilon"], name="label counts"
            )
        n = target.shape[0]
        noisy = np.clip(
            mechanism.release(counts, rng), n / (k * _MAX_BALANCED_WEIGHT), n
        )
        self.class_weight_ = n / (k * noisy)
        return [mechanism.record()]

    def _sample_weight(self, target):
        if self.class_weight is None:
            return None
        weights = self.class_weight_
        top = weights.max()
        if is_dask_collection(target):
            # A public table looked up chunk by chunk.
            lookup = functools.partial(np.take, weights)
            return target.astype(np.intp).map_blocks(lookup, dtype=float), top
        return weights[target.astype(np.intp)], top

    def _l2_penalty(self, n_samples):
        # LogisticRegression's C sum(loss) + ||w||^2/2, divided by C n.
        return checked_penalty(1.0 / (self.C * n_samples), self, "C")
