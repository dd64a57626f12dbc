"""Projected full-batch gradient descent driven by a private mean oracle.

This is the SCOF framework of Kamath, Liu & Zhang (2021, Algorithm 1): at every
iteration the gradient of the data term is replaced by a private estimate of the mean
of the ``n`` per-sample gradients, the exact gradient of the public L2 penalty is
added (post-processing of the private iterate), and the step is projected onto a
public l2 ball. Step size, iteration count, radius and averaging are public inputs;
nothing here depends on the data except through the oracle, and the loop always runs
exactly ``max_iter`` iterations (no data-dependent stopping).
"""

import numpy as np

from .._constraints import project_l2_ball
from .._mean_estimation._oracle import LossDerivative
from ._progress import NO_PROGRESS
from ._result import SolverResult

__all__ = ["noisy_gradient_descent", "project_l2_ball"]


def noisy_gradient_descent(
    design,
    y,
    loss,
    oracle,
    *,
    n_outputs,
    budget,
    max_iter,
    learning_rate,
    l2_penalty=0.0,
    radius=None,
    averaging="suffix",
    sample_weight=None,
    progress=NO_PROGRESS,
    rng,
):
    """Run ``max_iter`` steps of projected DP gradient descent.

    Parameters
    ----------
    design : LinearDesign
    y : ndarray of shape (n,)
        Targets (regression) or class codes (classification).
    loss : loss object from :mod:`skdpsco._losses`
    oracle : mean oracle from :mod:`skdpsco._mean_estimation`
    n_outputs : int
        1 (vector parameters) or K (matrix parameters, multinomial).
    budget : AlgorithmBudget
        What the data term may spend, read in the unit the oracle is calibrated in:

        * an oracle with ``approximate_dp = True`` (and a private budget) gets
          ``(epsilon / max_iter, delta / max_iter)`` per call (less a 1e-10 relative
          margin on epsilon, 1e-9 on delta, for the floating-point round trip);
          basic composition of the ``max_iter`` calls gives ``(epsilon, delta)``
          (Dwork & Roth 2014, Thm 3.16);
        * otherwise, with ``budget.rho`` set (Gaussian / zCDP oracles; ``inf`` in
          the testing mode), each call gets ``rho / max_iter``; zCDP (and exact GDP)
          composition over the calls gives ``rho`` (Bun & Steinke 2016, Lemma 2.3);
        * otherwise (pure-DP oracles: Laplace noise, whose ``calibrate`` takes
          ``epsilon=``) each call gets ``epsilon / max_iter`` (less the 1e-10
          margin); basic composition gives ``epsilon``-DP (Dwork & Roth 2014,
          Thm 3.16).
    max_iter : int
    learning_rate : float
    l2_penalty : float
        Mean-scaled penalty ``lambda``: the objective is
        ``(1/n) sum_i loss_i + (lambda / 2) ||w||^2``, intercept unpenalised.
    radius : float or None
        Public radius of the l2 ball the iterates are projected onto.
    averaging : {"suffix", "uniform", "last"}
        Released iterate: mean of the last half (suffix averaging, Rakhlin et al.
        2012), mean of all ``w_1..w_T`` (Kamath et al. convex case), or ``w_T``
        (strongly convex case). All are post-processing.
    sample_weight : ndarray of shape (n,) or None
        Per-record weights in ``[0, 1]`` (the caller's ``sample_weight``, and/or a
        public ``class_weight`` divided by its maximum; part of each record, never
        read for a public decision), handed to the oracle, which applies them after
        clipping / robust transformation: a weight <= 1 can only shrink a record's
        contribution, so the oracle's sensitivity is unchanged.
    progress : Progress or NoProgress, default=NO_PROGRESS
        Public progress reporter (:mod:`._progress`): the iteration and the
        records of the calls made so far; never a loss or another data-dependent
        value.
    rng : numpy.random.Generator

    Returns
    -------
    SolverResult
    """
    shape = design.parameter_shape(n_outputs)
    _calibrate(oracle, budget, design.n_samples, shape, max_iter)
    penalised = design.penalty_mask(shape)
    W = np.zeros(shape)
    start = {"suffix": max_iter // 2, "uniform": 0, "last": max_iter - 1}[averaging]
    W_sum = np.zeros(shape)

    derivative = LossDerivative(loss, y)
    for t in range(max_iter):
        data_grad = oracle.estimate_at(design, W, derivative, rng, sample_weight)
        grad = data_grad + l2_penalty * penalised * W
        W = project_l2_ball(W - learning_rate * grad, radius)
        if t >= start:
            W_sum += W
        if progress.due(t + 1, max_iter):
            progress.report(t + 1, max_iter, oracle.records(t + 1))
    coef = W_sum / (max_iter - start)
    return SolverResult(coef=coef, n_iter=max_iter, records=oracle.records(max_iter))


def _calibrate(oracle, budget, n_samples, shape, max_iter):
    """Calibrate ``oracle`` for one of ``max_iter`` calls."""
    if getattr(oracle, "approximate_dp", False) and budget.is_private:
        # (epsilon, delta)-DP calls: basic composition of max_iter of them (Dwork
        # & Roth 2014, Thm 3.16), with the same floating-point margin.
        per_call = budget.epsilon / max_iter * (1.0 - 1e-10)
        # The accountant keeps a slack of 2^-20 of the delta left over for the
        # samplers' total variation: 1e-9 of delta leaves one that a double holds.
        per_delta = budget.delta / max_iter * (1.0 - 1e-9)
        oracle.calibrate(n_samples, None, shape, epsilon=per_call, delta=per_delta)
        return
    if budget.rho is not None:
        oracle.calibrate(n_samples, budget.rho / max_iter, shape)
        return
    # The margin keeps max_iter * (sensitivity / scale) <= epsilon in floating
    # point, so the accountant never reports more than was asked.
    per_call = budget.epsilon / max_iter * (1.0 - 1e-10)
    oracle.calibrate(n_samples, None, shape, epsilon=per_call)
