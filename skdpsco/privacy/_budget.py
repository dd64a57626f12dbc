"""The budget of one fit, and how it is shared between the scaling and the algorithm.

A fit's target ``(epsilon, delta)`` is a :class:`PrivacyBudget`. The private
scaling statistics take a public share of it; what is left goes to the algorithm as
one :class:`AlgorithmBudget`, in the units its mechanisms are calibrated in. This
module is the only place where the budget changes units: every solver takes an
``AlgorithmBudget`` and reads the field its mechanisms need.

How the share is composed with the algorithm depends on the algorithm's mechanisms
(its *accountant*):

``"gdp"``, ``"zcdp"``
    Every mechanism is Gaussian (``"gdp"``: exact Gaussian composition, Dong, Roth &
    Su 2022, Cor 3.3) or zCDP (``"zcdp"``, Bun & Steinke 2016, Lemma 2.3). The
    target's zCDP budget ``rho`` is split: the scaling takes ``share rho``, the
    algorithm ``(1 - share) rho``; zCDP adds up.
``"gdp-epsilon"``
    Every mechanism is Gaussian, calibrated to the ``(epsilon, delta)`` it is handed:
    it gets the ``epsilon`` at which a Gaussian mechanism has the GDP parameter the
    scaling leaves, ``mu = sqrt(mu_total^2 - mu_scaling^2)`` (exact composition of
    GDP mechanisms, Dong, Roth & Su 2022, Cor 3.3).
``None``
    Anything else (pure DP, smooth sensitivity, subsampling, selection): basic
    composition (Dwork & Roth 2014, Thm 3.16) of the scaling's ``(share epsilon,
    share delta)`` with the algorithm's ``((1 - share) epsilon, (1 - share) delta)``.
"""

import dataclasses
import math
from dataclasses import dataclass, field

from ._accounting import approx_dp_to_gdp, gaussian_rho_budget, gdp_to_approx_dp
from ._records import MechanismRecord

__all__ = ["ACCOUNTANTS", "AlgorithmBudget", "BudgetSplit", "PrivacyBudget"]

#: How an algorithm's mechanisms compose with the scaling's (see the module notes).
ACCOUNTANTS = ("gdp", "zcdp", "gdp-epsilon", None)


@dataclass(frozen=True)
class PrivacyBudget:
    """A validated target budget for one fit.

    Attributes
    ----------
    epsilon : float
    delta : float
    n_samples : int
        Public number of records (replace-one neighbours keep it fixed).
    """

    epsilon: float
    delta: float
    n_samples: int

    @property
    def is_private(self):
        """False only in the hidden non-private testing mode (``epsilon = inf``)."""
        return math.isfinite(self.epsilon)

    def split(self, share):
        """Basic composition: ``(rest, epsilon_s, delta_s)`` with the scaling's
        ``(share epsilon, share delta)`` and the rest's ``(1 - share)`` of both
        (a relative margin keeps the sum below the target in floating point)."""
        eps_s = self.epsilon * share * (1.0 - 1e-9)
        delta_s = self.delta * share * (1.0 - 1e-9)
        rest = PrivacyBudget(
            self.epsilon * (1.0 - share), self.delta * (1.0 - share), self.n_samples
        )
        return rest, eps_s, delta_s

    def zcdp(self, accountant):
        """The target's zCDP budget for ``accountant`` in ``("gdp", "zcdp")``
        (``inf`` in the testing mode; NaN for pure DP, which has none)."""
        if not self.is_private:
            return math.inf
        if self.delta == 0:
            return math.nan
        return gaussian_rho_budget(self.epsilon, self.delta, accountant)

    def for_algorithm(self, accountant):
        """The whole budget to the algorithm (no scaling statistics released)."""
        return self.split_with_scaling(accountant, 0.0).algorithm

    def split_with_scaling(self, accountant, share):
        """Share the budget between the scaling statistics and the algorithm.

        Parameters
        ----------
        accountant : {"gdp", "zcdp", "gdp-epsilon", None}
            How the algorithm's mechanisms compose (see the module notes).
        share : float in [0, 1)
            The scaling's public share.

        Returns
        -------
        BudgetSplit
        """
        if accountant not in ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {ACCOUNTANTS}.")
        n = self.n_samples
        if not self.is_private:
            # The testing mode: noise-free mechanisms in every unit.
            algorithm = AlgorithmBudget(self.epsilon, self.delta, n, math.inf)
            return BudgetSplit({"rho": math.inf}, algorithm)
        if accountant in ("gdp", "zcdp"):
            rho = self.zcdp(accountant)
            algorithm = AlgorithmBudget(
                self.epsilon, self.delta, n, rho * (1.0 - share)
            )
            return BudgetSplit({"rho": rho * share}, algorithm)
        if accountant == "gdp-epsilon":
            if share == 0:
                return BudgetSplit({"rho": 0.0}, AlgorithmBudget(*self._values()))
            rho = self.zcdp("gdp")
            mu_left = math.sqrt(2.0 * rho * (1.0 - share))
            algorithm = AlgorithmBudget(
                gdp_to_approx_dp(mu_left, self.delta), self.delta, n
            )
            return BudgetSplit({"rho": rho * share}, algorithm)
        if share == 0:
            return BudgetSplit({"epsilon": 0.0}, AlgorithmBudget(*self._values()))
        rest, eps_s, delta_s = self.split(share)
        spend = (
            {"rho": gaussian_rho_budget(eps_s, delta_s, "gdp")}
            if delta_s > 0
            else {"epsilon": eps_s}
        )
        # The scaling's mechanisms are accounted as one (eps_s, delta_s) mechanism.
        # Its zCDP is kept on the record (not used by the basic composition): a
        # search accounts its runs in RDP (skdpsco.privacy._selection).
        record = MechanismRecord(
            "private scaling",
            "approx_dp",
            rho=spend.get("rho"),
            epsilon=eps_s,
            delta=delta_s,
        )
        return BudgetSplit(spend, AlgorithmBudget(*rest._values()), record)

    def _values(self):
        return self.epsilon, self.delta, self.n_samples


@dataclass(frozen=True)
class AlgorithmBudget:
    """What the algorithm of a fit may spend, in the units it is calibrated in.

    Attributes
    ----------
    epsilon, delta : float
        The ``(epsilon, delta)`` the algorithm may spend (algorithms accounted in
        ``(epsilon, delta)``; ``epsilon = inf`` in the testing mode).
    n_samples : int
        Public number of records.
    rho : float or None
        The zCDP budget of algorithms whose mechanisms are Gaussian or zCDP
        (accountant ``"gdp"`` / ``"zcdp"``; ``inf`` in the testing mode); None
        for the others.
    """

    epsilon: float
    delta: float
    n_samples: int
    rho: float | None = None

    @property
    def is_private(self):
        """False only in the hidden non-private testing mode (``epsilon = inf``)."""
        return math.isfinite(self.epsilon)

    def per_output(self, accountant, n_outputs):
        """The budget of each of ``n_outputs`` runs whose composition spends no
        more than this one (one run per output of a multi-output regression).

        Parameters
        ----------
        accountant : {"gdp", "zcdp", "gdp-epsilon", None}
            How the algorithm's mechanisms compose (see the module notes).
        n_outputs : int

        Returns
        -------
        AlgorithmBudget
        """
        k = int(n_outputs)
        if k == 1 or not self.is_private:
            return self
        if accountant in ("gdp", "zcdp"):
            # zCDP adds over the runs (Bun & Steinke 2016, Lemma 2.3), and so
            # does the rho of Gaussian mechanisms (Dong, Roth & Su 2022, Cor 3.3).
            return dataclasses.replace(self, rho=self.rho / k)
        if accountant == "gdp-epsilon":
            # k Gaussian mechanisms of GDP parameter mu / sqrt(k) compose to mu
            # (Dong, Roth & Su 2022, Cor 3.3); the margin keeps the composition
            # below the whole in floating point.
            mu = approx_dp_to_gdp(self.epsilon, self.delta) / math.sqrt(k)
            epsilon = gdp_to_approx_dp(mu * (1.0 - 1e-9), self.delta)
            return dataclasses.replace(self, epsilon=epsilon)
        # Basic composition (Dwork & Roth 2014, Thm 3.16).
        return dataclasses.replace(
            self,
            epsilon=self.epsilon / k * (1.0 - 1e-9),
            delta=self.delta / k * (1.0 - 1e-9),
        )


@dataclass(frozen=True)
class BudgetSplit:
    """:meth:`PrivacyBudget.split_with_scaling`'s answer.

    Attributes
    ----------
    scaling : dict
        What the scaling statistics may spend: ``{"rho": ...}`` (Gaussian
        statistics) or ``{"epsilon": ...}`` (pure DP).
    algorithm : AlgorithmBudget
    scaling_record : MechanismRecord or None
        With basic composition, the single record that stands for all the scaling's
        mechanisms in the ledger (they are calibrated to its ``(epsilon, delta)``).
    """

    scaling: dict
    algorithm: AlgorithmBudget
    scaling_record: MechanismRecord | None = field(default=None)
