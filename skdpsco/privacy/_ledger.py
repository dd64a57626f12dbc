"""Privacy ledger: what a fit (or a set of fits) spent.

A fitted estimator's ``privacy_spent_`` is a frozen :class:`PrivacySpent`. It is
computed by the accountant from the mechanisms that actually ran (their records), not
from the budget that was asked for, and a fit checks that it never exceeds the ask.
"""

from dataclasses import dataclass, field

from ..exceptions import PrivacyBudgetError
from ._accounting import account_records

__all__ = ["PrivacySpent", "gate_release", "spent_within"]

#: The neighbouring relation every skdpsco guarantee is stated for (the user guide's
#: "Neighbouring datasets").
REPLACE_ONE = "replace-one record (n public)"


@dataclass(frozen=True)
class PrivacySpent:
    """What a fit (or a set of fits) spent: a frozen ``(epsilon, delta)`` record.

    Attributes
    ----------
    epsilon : float
        The smallest epsilon the accountant certifies for the mechanisms that ran,
        at ``delta``.
    delta : float
    rho : float or None
        The zCDP parameter of the composition, where every mechanism is zCDP.
    neighbouring : str
        The neighbouring relation of the guarantee.
    accountant : str
        Which composition gave ``epsilon`` (``"gdp"``, ``"zcdp"``, ``"rdp"``,
        ``"basic"``).
    mechanisms : tuple of MechanismRecord

    Examples
    --------
    >>> from skdpsco.privacy import MechanismRecord, PrivacySpent
    >>> mech = MechanismRecord("mean", "gaussian", count=4, sensitivity=1.0, scale=8.0)
    >>> spent = PrivacySpent.from_records([mech], delta=1e-5)
    >>> round(spent.rho, 6), spent.accountant
    (0.03125, 'gdp')
    """

    epsilon: float
    delta: float
    rho: float | None = None
    neighbouring: str = REPLACE_ONE
    accountant: str = "gdp"
    mechanisms: tuple = field(default_factory=tuple)

    @classmethod
    def from_records(cls, records, delta, neighbouring=REPLACE_ONE):
        """Compose ``records`` with the tightest valid accountant at ``delta``."""
        records = tuple(records)
        epsilon, rho, how = account_records(records, delta)
        return cls(
            epsilon=epsilon,
            delta=float(delta),
            rho=rho,
            neighbouring=neighbouring,
            accountant=how,
            mechanisms=records,
        )

    def __repr__(self):
        rho = "" if self.rho is None else f", rho={self.rho:.6g}"
        return (
            f"PrivacySpent(epsilon={self.epsilon:.6g}, delta={self.delta:.3g}{rho}, "
            f"accountant={self.accountant!r}, mechanisms={len(self.mechanisms)})"
        )


# ------------------------------------------------------------ composite objects
#
# What a composite spent is collected as a list of PrivacySpent records, every one
# on (a subset of) the same records, and composed sequentially by the accountant.
# Only the compositions listed here are recognised; a meta-estimator that hides a DP
# estimator in an unknown way (it could fit it any number of times) is refused
# rather than under-counted.

#: cross-validation splitters whose folds are a function of the row indices (and of
#: their own public parameters) only: the fold fits of two replace-one neighbours
#: then see replace-one neighbours (or identical data).


def gate_release(epsilon_spent, epsilon, who):
    """Refuse a release whose accounted ``epsilon_spent`` exceeds the target.

    Every fit ends here: the ledger's epsilon is computed from the mechanisms that
    ran (their records), independently of how the budget was split among them, so
    a mistake in a split shows up as a refusal rather than as a silent overspend.
    The comparison reads public numbers only (the calibration, not the data).
    """
    if epsilon_spent > epsilon:
        raise PrivacyBudgetError(
            f"{who}: the mechanisms that ran spend epsilon={epsilon_spent:.6g} > "
            f"epsilon={epsilon:.6g}; nothing is released. This is a bug; please "
            "report it."
        )


def spent_within(records, budget, who):
    """:class:`PrivacySpent` of ``records``, refused past ``budget.epsilon``
    (:func:`gate_release`)."""
    spent = PrivacySpent.from_records(records, budget.delta)
    gate_release(spent.epsilon, budget.epsilon, who)
    return spent
