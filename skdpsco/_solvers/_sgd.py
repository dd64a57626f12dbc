"""Noisy stochastic gradient descent on Poisson batches.

Each step draws a Poisson batch (every record independently with the public rate
``q``; drawn as ``k ~ Binomial(n, q)`` then ``k`` indices without replacement, the
same distribution), asks a batch oracle for a private gradient estimate, adds the
public penalty's gradient and takes a projected step. The rate, the number of steps
and the step sizes are fixed from public values before any data is read; the noise
multiplier is calibrated by the accountant for all the steps together.

Restarts (R-AClipped-dpSGD, Jin et al. 2024, Algorithm 2): stage ``k`` starts from
the previous stage's averaged output, with the clip level divided by ``sqrt(2)`` and
the batch rate doubled (capped at 1) per stage; one RDP accountant covers every
stage with a common noise multiplier. RDP adds across steps with different rates, so
this is valid for any ``epsilon`` and tighter than the paper's Theorem 5, which makes
each stage ``(epsilon_0, delta_0)``-DP and uses advanced composition.
"""

import collections
import copy
import math

import numpy as np

from ..privacy._accounting import calibrate_poisson_noise_multiplier
from ..privacy._discrete import poisson_batches
from ._gradient_descent import project_l2_ball
from ._progress import NO_PROGRESS
from ._result import SolverResult

__all__ = ["PoissonSchedule", "noisy_sgd"]


class PoissonSchedule:
    """The Poisson batches of one stage (sorted index arrays, one per step), with a
    look-ahead for a design that fetches rows ahead of the steps.

    Iterating gives the batches :func:`~skdpsco.privacy._discrete.poisson_batches`
    draws, from the fit's generator, exactly as without a look-ahead.
    :meth:`upcoming` lists the batches of the next steps without changing what the
    fit draws, nor in which order for a seeded generator: its stream is replayed
    on a copy (each step draws its batch, then one release of the oracle, whose
    draws depend on the public shape only:
    :meth:`~skdpsco._mean_estimation._batch._PoissonBatchOracle.replay_noise`).
    A secure generator's batches are drawn ahead for real: its draws are fresh OS
    randomness, independent of the data and of one another, so drawing the
    batches before the noise of earlier steps leaves the joint law of batches and
    noise, hence the accounted mechanism, unchanged. The batches stay a function
    of the generator only, never of the data. A wrong look-ahead would cost only
    time: a design reads a step's rows from what it gathered only where that
    holds them.

    Parameters
    ----------
    rng : numpy.random.Generator
    n : int
    rate : float
    count : int
        Steps of the stage.
    oracle : batch oracle
        Calibrated; each step's estimate is one release of its mechanism.
    shape : tuple of int
        The parameter shape (the size of each release).
    """

    def __init__(self, rng, n, rate, count, oracle, shape):
        self._rng, self._n, self._rate = rng, int(n), rate
        self._count = int(count)
        self._batches = poisson_batches(rng, n, rate, count)
        self._oracle, self._shape = oracle, shape
        self._step = 0  # steps returned by next (the current one is the last)
        self._listed = 0  # the next step upcoming lists
        self._peeked = None  # its batch, where drawn but not listed
        self._ahead = collections.deque()  # secure: batches drawn ahead
        self._replay = None  # seeded: a copy of the generator and its batches

    def __iter__(self):
        return self

    def __next__(self):
        if self._step == self._count:
            raise StopIteration
        self._step += 1
        return self._ahead.popleft() if self._ahead else next(self._batches)

    def upcoming(self, max_rows, restart=False):
        """The batches of the next steps not listed yet (from the one after the
        current step, the last returned by ``next``), as many as fit in
        ``max_rows`` indices together; called between ``next`` and the step's
        estimate.

        Parameters
        ----------
        max_rows : int
        restart : bool, default=False
            List again from the step after the current one.

        Returns
        -------
        list of ndarray
        """
        if restart or self._listed < self._step:
            self._listed, self._peeked, self._replay = self._step, None, None
        ahead, total = [], 0
        while self._listed < self._count:
            if self._peeked is None:
                self._peeked = self._draw_ahead()
            if total + self._peeked.size > max_rows:
                break
            ahead.append(self._peeked)
            total += self._peeked.size
            self._listed += 1
            self._peeked = None
        return ahead

    def _draw_ahead(self):
        """The batch of step ``self._listed``."""
        if getattr(self._rng, "secure", False):
            while len(self._ahead) <= self._listed - self._step:
                self._ahead.append(next(self._batches))
            return self._ahead[self._listed - self._step]
        if self._replay is None:
            replay = copy.deepcopy(self._rng)
            if self._step:
                # The current step's noise, drawn after its batch.
                self._oracle.replay_noise(self._shape, replay)
            left = self._count - self._step
            self._replay = (replay, poisson_batches(replay, self._n, self._rate, left))
        replay, batches = self._replay
        rows = next(batches)
        self._oracle.replay_noise(self._shape, replay)
        return rows


def noisy_sgd(
    design,
    y,
    loss,
    make_oracle,
    *,
    n_outputs,
    budget,
    sampling_rate,
    n_epochs,
    learning_rate,
    l2_penalty=0.0,
    radius=None,
    averaging="uniform",
    n_stages=1,
    sample_weight=None,
    progress=NO_PROGRESS,
    rng,
):
    """Run private SGD; return the released parameters and the ledger records.

    Parameters
    ----------
    design : LinearDesign or DaskLinearDesign
        Its ``batches(schedule, y, sample_weight)`` gives each step's batch
        design, targets and weights (in memory: ``design.subset(rows)``,
        ``y[rows]``; on dask: the rows gathered from the workers).
    y : ndarray or dask array of shape (n,)
    loss : loss object
    make_oracle : callable
        ``make_oracle(stage) -> batch oracle`` (``stage`` = 0, 1, ...), so a restart
        schedule can shrink the clip level.
    n_outputs : int
    budget : AlgorithmBudget
        Its ``(epsilon, delta)`` is the replace-one target of the whole run, which
        the RDP accountant turns into one noise multiplier for every step
        (``epsilon = inf``: noiseless testing mode).
    sampling_rate : float
        Poisson rate ``q`` of the first stage (public, ``m / n``).
    n_epochs : int
        Each stage runs ``ceil(n_epochs / (n_stages * q_k))`` steps, i.e. the
        epochs are shared evenly between the stages.
    learning_rate : float
    l2_penalty : float
        Mean-scaled penalty, intercept unpenalised; its gradient is added after the
        noise (it depends only on the private iterate).
    radius : float or None
        Public l2 ball for projection.
    averaging : {"uniform", "suffix", "last"}
        Released iterate of each stage (post-processing).
    n_stages : int
        1 for plain SGD; > 1 for the restarted schedule.
    sample_weight : ndarray, dask array or None
        Per-record weights in ``[0, 1]`` handed to the oracle (see
        :func:`noisy_gradient_descent`).
    progress : Progress or NoProgress, default=NO_PROGRESS
        Public progress reporter (:mod:`._progress`): the step over all stages
        and the records of the steps run so far.
    rng : numpy.random.Generator

    Returns
    -------
    SolverResult
        ``n_iter`` is the number of epochs (scikit-learn's SGD convention).
    """
    n = design.n_samples
    shape = design.parameter_shape(n_outputs)
    rates = [min(1.0, sampling_rate * 2.0**k) for k in range(n_stages)]
    steps = [max(1, math.ceil(n_epochs / (n_stages * q))) for q in rates]
    if not budget.is_private:
        z = 0.0
    else:
        stages = list(zip(rates, steps, strict=True))
        z = calibrate_poisson_noise_multiplier(budget.epsilon, budget.delta, stages)
    penalised = design.penalty_mask(shape)
    W = np.zeros(shape)
    records = []
    total_steps = sum(steps)
    done = 0
    for stage, (q, T) in enumerate(zip(rates, steps, strict=True)):
        oracle = make_oracle(stage).calibrate(n, q, z)
        start = {"suffix": T // 2, "uniform": 0, "last": T - 1}[averaging]
        W_sum = np.zeros(shape)
        # Drawn ahead in blocks from the secure source (one vectorised pass),
        # step by step from a seeded generator; a design may read them ahead
        # (PoissonSchedule.upcoming) to fetch the rows of several steps at once.
        schedule = PoissonSchedule(rng, n, q, T, oracle, shape)
        batches = design.batches(schedule, y, sample_weight)
        for t in range(T):
            batch, targets, weights = next(batches)
            U = loss.derivative(batch.predict(W), targets)
            grad = oracle.estimate(batch, U, rng, sample_weight=weights)
            W = project_l2_ball(
                W - learning_rate * (grad + l2_penalty * penalised * W), radius
            )
            if t >= start:
                W_sum += W
            done += 1
            if progress.due(done, total_steps):
                progress.report(done, total_steps, [*records, *oracle.records(t + 1)])
        W = W_sum / (T - start)
        records.extend(oracle.records(T))
    return SolverResult(coef=W, n_iter=int(n_epochs), records=records)
