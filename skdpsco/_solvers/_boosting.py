"""Boosting bias-reduced sparse SGD by private selection with random stopping.

Ghazi et al. (sparse gradients), Algorithm 5: one run of Algorithm 4 succeeds only
with constant probability (its gradient estimates are heavy-tailed), so independent
runs are repeated, each scored privately, and the best noisy score is released, with
the number of runs chosen by a public coin (Liu & Talwar 2019, Theorem 3.4).

Privacy (Theorem 6.1; replace-one, ``n`` public). Each run gets
``(epsilon/12, (delta/(4K))^2)`` and its score a Laplace mechanism at ``epsilon/12``,
so each (candidate, score) pair is ``(epsilon_1, delta_1)``-DP with
``epsilon_1 <= epsilon/6`` by basic composition. After each run a ``gamma``-coin (not
noise, but part of the mechanism: data-independent) decides whether to stop, with at
most ``K = ceil(ln(2/delta)/gamma)`` runs; Liu–Talwar then gives
``(3 epsilon_1 + 3 sqrt(2 delta_1), sqrt(2 delta_1) K + delta/2) <= (epsilon, delta)``
when ``delta <= epsilon/10``. Only the selected candidate (and its own public step
count) is released, never the number of runs: releasing it would void Theorem 3.4.

Scores, with sensitivities (Algorithm 5; the paper's bounded range, Item (A.4),
bounds ``f(x, z) - f(y, z)`` over ``x`` at a fixed record, not the change over records
at a fixed ``x`` that the convex score needs, hence the loss clipped to ``[0, B]``):

* convex: ``F_S(x) = (1/n) sum_i min(max(f(x, z_i), 0), B) + (lambda/2)||w||^2``;
  one clipped summand changes, so the sensitivity is ``B/n`` (the public penalty
  cancels). Laplace scale ``12 B / (n epsilon)``.
* nonconvex: ``||(1/n) sum_i clip(g_i) + lambda w||_2`` with the run's clipping
  (``||clip(g_i)||_2 <= L``), sensitivity ``2L/n`` by the triangle inequality.
  Laplace scale ``24 L / (n epsilon)``.

References
----------
.. [GGKKM] Ghazi, B., Guzman, C., Kamath, P., Kumar, R. and Manurangsi, P.
   "Differentially Private Optimization with Sparse Gradients". Algorithm 5,
   Theorem 6.1.
.. [LT19] Liu, J. and Talwar, K. (2019). Private selection from private candidates.
   STOC. Theorem 3.4.
"""

import math

import numpy as np
import scipy.sparse as sp

from .._mean_estimation._sparse_mean import (
    _row_norms_l2_l1,
    projection_mean,
    sparse_clip_coefficients,
)
from ..privacy._budget import AlgorithmBudget
from ..privacy._discrete import bernoulli
from ..privacy._filter import boosting_budget, private_selection_record
from ..privacy._mechanisms import LaplaceMechanism
from ._bias_reduced_sgd import bias_reduced_sgd
from ._progress import NO_PROGRESS
from ._result import SolverResult

__all__ = ["boosted_bias_reduced_sgd", "clipped_loss_score", "gradient_norm_score"]


def clipped_loss_score(design, y, loss, W, *, loss_bound, l2_penalty=0.0):
    """``(1/n) sum_i clip(f_i, 0, B) + (lambda/2)||w||^2``; sensitivity ``B/n``."""
    with np.errstate(over="ignore", invalid="ignore"):
        vals = loss.value(design.predict(W), y)
    vals = np.clip(np.nan_to_num(vals, nan=loss_bound), 0.0, loss_bound)
    penalty = 0.5 * l2_penalty * np.sum((design.penalty_mask(W.shape) * W) ** 2)
    return float(vals.mean() + penalty)


def _row_l2_l1(design):
    """``||x~_i||_2, ||x~_i||_1`` of every row, one row chunk at a time."""
    l2 = np.empty(design.n_samples)
    l1 = np.empty(design.n_samples)
    for rows in design._chunks():
        X = sp.csr_matrix(design.X[rows], dtype=float)
        if design.fit_intercept:
            X = sp.hstack(
                [X, np.full((X.shape[0], 1), design.intercept_column)], format="csr"
            )
        l2[rows], l1[rows] = _row_norms_l2_l1(X)
    return l2, l1


def gradient_norm_score(design, y, loss, W, *, norm_bound, sparsity, l2_penalty=0.0):
    """``||(1/n) sum_i clip(g_i) + lambda w||_2`` with the run's clipping: sensitivity
    ``2L/n`` (each clipped gradient has l2 norm ``<= L``)."""
    U = loss.derivative(design.predict(W), y)
    row_l2, row_l1 = _row_l2_l1(design)
    C = sparse_clip_coefficients(U, row_l2, row_l1, norm_bound, sparsity)
    grad = design.weighted_sum(C) / design.n_samples
    grad = grad + l2_penalty * design.penalty_mask(W.shape) * W
    return float(np.linalg.norm(grad))


def boosted_bias_reduced_sgd(
    design,
    y,
    loss,
    *,
    budget,
    norm_bound,
    sparsity,
    loss_bound=None,
    confidence=0.05,
    convex=True,
    mean_estimator=projection_mean,
    n_outputs=1,
    l2_penalty=0.0,
    progress=NO_PROGRESS,
    rng,
    **sgd_params,
):
    """Algorithm 5: private selection over randomly many runs of Algorithm 4.

    Parameters
    ----------
    design : LinearDesign
    y : ndarray of shape (n,)
    loss : loss object (``value >= 0``)
    budget : AlgorithmBudget
        Its ``(epsilon, delta)``: ``epsilon > 0`` (``inf`` in the hidden testing
        mode), ``delta`` in ``(0, 1)`` with ``delta <= epsilon / 10`` (Theorem 6.1).
    norm_bound : float
        ``L``, per-example gradient clip (also the nonconvex score's sensitivity).
    sparsity : int
        ``s``.
    loss_bound : float, optional
        ``B``: per-record loss clip of the convex score; required when ``convex``.
    confidence : float, default=0.05
        ``beta``: ``gamma = min(1/2, 3 beta/4)``; about ``1/gamma`` runs expected.
    convex : bool, default=True
    mean_estimator : callable, default=projection_mean
    n_outputs : int, default=1
    l2_penalty : float, default=0.0
    progress : Progress or NoProgress, default=NO_PROGRESS
        Public progress reporter (:mod:`._progress`), one iteration per run (the
        runs themselves are silent). The planned count is the expected number of
        runs ``ceil(1 / gamma)`` (the stopping coin is data-independent); a
        search that goes past it reports no more. The epsilon reported is the
        selection's certified total (Liu & Talwar 2019, Theorem 3.4), which
        holds for the search as a whole.
    rng : numpy.random.Generator
    **sgd_params
        Passed to :func:`~skdpsco._solvers._bias_reduced_sgd.bias_reduced_sgd`
        (``learning_rate``, ``coef_norm_bound``, ``radius``, ``stopping``, ...).

    Returns
    -------
    SolverResult
        ``n_iter`` is the selected run's step count (part of that candidate; the
        number of runs is not released). One ``"approx_dp"`` record with the
        Liu–Talwar total.

    References
    ----------
    .. [1] Ghazi et al., "Differentially Private Optimization with Sparse
       Gradients", Algorithm 5, Theorem 6.1.
    .. [2] Liu, J. and Talwar, K. (2019). Private selection from private
       candidates. STOC. Theorem 3.4.
    """
    if convex and not (loss_bound is not None and 0 < loss_bound < math.inf):
        raise ValueError(
            "Boosting a convex run scores it with the loss clipped to [0, loss_bound];"
            f" loss_bound must be finite and > 0, got {loss_bound!r}."
        )
    plan = boosting_budget(budget.epsilon, budget.delta, confidence)
    n = design.n_samples
    run_budget = AlgorithmBudget(plan["epsilon_run"], plan["delta_run"], n)
    if convex:
        # |F_S(x) - F_S'(x)| <= B/n: one summand clipped to [0, B] changes.
        score_mech = LaplaceMechanism.from_epsilon(
            loss_bound / n, plan["epsilon_score"], name="boosting score (clipped loss)"
        )
    else:
        # | ||a|| - ||a'|| | <= ||a - a'|| <= 2L/n for means of L-clipped gradients.
        score_mech = LaplaceMechanism.from_epsilon(
            2.0 * norm_bound / n, plan["epsilon_score"], name="boosting score (grad)"
        )
    best = None
    run_record = None
    planned = min(plan["max_runs"], math.ceil(1.0 / plan["gamma"]))
    for r in range(plan["max_runs"]):
        run = bias_reduced_sgd(
            design,
            y,
            loss,
            budget=run_budget,
            norm_bound=norm_bound,
            sparsity=sparsity,
            mean_estimator=mean_estimator,
            n_outputs=n_outputs,
            l2_penalty=l2_penalty,
            convex=convex,
            rng=rng,
            **sgd_params,
        )
        run_record = run.records[0]
        if convex:
            raw = clipped_loss_score(
                design, y, loss, run.coef, loss_bound=loss_bound, l2_penalty=l2_penalty
            )
        else:
            raw = gradient_norm_score(
                design,
                y,
                loss,
                run.coef,
                norm_bound=norm_bound,
                sparsity=sparsity,
                l2_penalty=l2_penalty,
            )
        score = float(score_mech.release(raw, rng))
        if best is None or score < best[0]:
            best = (score, run)
        if r < planned and progress.due(r + 1, planned):
            progress.report(
                r + 1, planned, [_selection_record(run_record, score_mech, plan)]
            )
        # Random stopping coin (Liu & Talwar): data-independent, never released.
        if bernoulli(rng, plan["gamma"]):
            break
    # Every run's certified cost is the same public number (a function of
    # epsilon_run, delta_run and n only), so epsilon_1 is fixed in advance.
    record = _selection_record(run_record, score_mech, plan)
    chosen = best[1]
    return SolverResult(coef=chosen.coef, n_iter=chosen.n_iter, records=[record])


def _selection_record(run_record, score_mech, plan):
    """The ledger record of the whole selection (Liu & Talwar 2019, Thm 3.4)."""
    return private_selection_record(
        "boosted bias-reduced sparse SGD (private selection)",
        [run_record, score_mech.record()],
        plan["max_runs"],
        plan["delta_stop"],
    )
