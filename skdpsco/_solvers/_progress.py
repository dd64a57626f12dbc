"""Progress lines of a long fit, in one format for every iterative solver.

A solver asks ``progress.due(done, total)`` after each iteration and, when it is
due, hands :meth:`Progress.report` the ledger records of what has run so far.
The line is::

    [Name] algorithm='x': iteration t/T; epsilon spent a of b; about S s left

Public numbers only: ``T`` is the planned iteration count (a function of the
public parameters), ``a`` the accountant's ``epsilon`` at the fit's ``delta`` for
the records composed so far (the private scaling's and the algorithm's first
``t`` iterations), and ``S`` an extrapolation of the elapsed wall time, which the
caller observes anyway. No loss, gradient or iterate is ever printed: those
are data-dependent and outside the accountant.

The default is :data:`NO_PROGRESS`, whose ``due`` is always False: a silent fit
computes nothing extra and draws nothing from the fit's generator.
"""

import math
import time

from ..privacy._accounting import account_records

__all__ = ["NO_PROGRESS", "NoProgress", "Progress"]


class NoProgress:
    """The silent reporter (``verbose=0``): nothing is ever due."""

    active = False

    def due(self, done, total, step=1):
        """Never: a silent fit reports nothing.

        Parameters
        ----------
        done, total, step : int

        Returns
        -------
        bool
        """
        return False

    def report(self, done, total, records):
        """Nothing to print.

        Parameters
        ----------
        done, total : int
        records : iterable of MechanismRecord
        """

    def completed(self, records):
        """A run of the algorithm ended with ``records`` (several targets fitted
        one after the other): later lines count them as spent."""


#: The reporter of a silent fit.
NO_PROGRESS = NoProgress()


class Progress(NoProgress):
    """Prints the progress lines of one fit (``verbose >= 1``).

    Parameters
    ----------
    who : str
        The estimator's class name.
    algorithm : str
        The algorithm that runs (``"auto"`` resolved).
    epsilon, delta : float
        The fit's target budget, in the user's units.
    records : list of MechanismRecord
        What the fit composed before the algorithm ran (the private scaling).
    verbose : int
        1: a line about every 10% of the iterations; 2 or more: every iteration.
    clock : callable, default=time.perf_counter
    """

    active = True

    def __init__(
        self, who, algorithm, epsilon, delta, records, verbose, clock=time.perf_counter
    ):
        self.who = who
        self.algorithm = algorithm
        self.epsilon = epsilon
        self.delta = delta
        self.records = list(records)
        self.verbose = verbose
        self.clock = clock
        self.started = clock()

    def due(self, done, total, step=1):
        """Whether iteration ``done`` of ``total`` gets a line: every report at
        ``verbose >= 2``, else the one crossing each tenth of ``total`` and the
        last one.

        Parameters
        ----------
        done, total : int
            Iterations run and planned (public).
        step : int, default=1
            Iterations since the previous call (a solver that reports per phase).

        Returns
        -------
        bool
        """
        every = max(1, total // 10)
        return (
            self.verbose > 1 or done >= total or done // every != (done - step) // every
        )

    def report(self, done, total, records):
        """Print the line of iteration ``done`` of ``total``.

        Parameters
        ----------
        done, total : int
            Iterations run and planned (public).
        records : iterable of MechanismRecord
            The algorithm's ledger records of the ``done`` iterations run (or of
            the whole run, where its guarantee does not decompose per iteration:
            the report then states the whole run's cost from the start).
        """
        spent = (
            account_records([*self.records, *records], self.delta)[0]
            if math.isfinite(self.epsilon)
            else 0.0
        )
        elapsed = self.clock() - self.started
        left = elapsed * max(total - done, 0) / max(done, 1)
        left = f"{left:.0f}" if left >= 10 else f"{left:.2g}"
        print(
            f"[{self.who}] algorithm={self.algorithm!r}: iteration {done}/{total}; "
            f"epsilon spent {spent:.4g} of {self.epsilon:.4g}; about {left} s left"
        )

    def completed(self, records):
        # The next target's lines start from what the previous runs spent (the
        # printed epsilon never goes down) and time their own run.
        self.records.extend(records)
        self.started = self.clock()
