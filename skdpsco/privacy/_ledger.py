"""Privacy ledger: what each fit spent, and totals over several fits.

A fitted estimator's ``privacy_spent_`` is a frozen :class:`PrivacySpent`. It is
computed by the accountant from the mechanisms that actually ran (their records), not
from the budget that was asked for, and a fit checks that it never exceeds the ask.
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from ._accounting import account_records

__all__ = ["MechanismRecord", "PrivacySpent", "total_privacy_spent"]

#: The neighbouring relation every skdpsco guarantee is stated for (design.md §4.2).
REPLACE_ONE = "replace-one record (n public)"


@dataclass(frozen=True)
class MechanismRecord:
    """One mechanism (or ``count`` identical uses of it) in a fit's privacy ledger.

    Attributes
    ----------
    name : str
        What was released, e.g. ``"clipped gradient mean"``.
    kind : {"gaussian", "laplace", "zcdp", "subsampled_gaussian", "approx_dp"}
        How the accountant composes it.
    count : int
        Number of identical uses (iterations).
    sensitivity : float or None
        l2 (Gaussian) or l1 (Laplace) sensitivity under replace-one.
    scale : float or None
        Noise std (Gaussian) or Laplace scale.
    rho : float or None
        zCDP cost of one use (``kind="zcdp"`` or derived).
    epsilon, delta : float or None
        Pure / approximate DP cost of one use (``kind="laplace"``/``"approx_dp"``).
    sampling_rate : float or None
        Poisson sampling rate (``kind="subsampled_gaussian"``); the noise multiplier
        is then ``scale / sensitivity``.
    """

    name: str
    kind: str
    count: int = 1
    sensitivity: float | None = None
    scale: float | None = None
    rho: float | None = None
    epsilon: float | None = None
    delta: float | None = None
    sampling_rate: float | None = None

    def __post_init__(self):
        kinds = {"gaussian", "laplace", "zcdp", "subsampled_gaussian", "approx_dp"}
        if self.kind not in kinds:
            raise ValueError(f"kind must be one of {sorted(kinds)}, got {self.kind!r}.")
        if (
            isinstance(self.count, bool)
            or int(self.count) != self.count
            or self.count < 0
        ):
            raise ValueError(
                f"count must be a non-negative integer, got {self.count!r}."
            )


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
    >>> rec = MechanismRecord("mean", "gaussian", count=4, sensitivity=1.0, scale=8.0)
    >>> spent = PrivacySpent.from_records([rec], delta=1e-5)
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


def _collect_spent(obj, out):
    spent = getattr(obj, "privacy_spent_", None)
    if isinstance(spent, PrivacySpent):
        out.append(spent)
        return
    steps = getattr(obj, "steps", None)
    if steps is not None:  # a fitted Pipeline: every step saw the same records
        for _, step in steps:
            if step is None or isinstance(step, str):  # None or "passthrough"
                continue
            if (
                isinstance(getattr(step, "privacy_spent_", None), PrivacySpent)
                or getattr(step, "steps", None) is not None
            ):
                _collect_spent(step, out)
            elif hasattr(step, "epsilon") and hasattr(step, "delta"):
                # A DP estimator without a record has not been fitted: skipping it
                # could understate the total.
                raise TypeError(
                    f"Pipeline step {type(step).__name__} has a privacy budget but "
                    "no privacy_spent_: fit the Pipeline first."
                )
            # Other steps (transformers that spend no privacy) contribute nothing.
        return
    if isinstance(obj, PrivacySpent):
        out.append(obj)
        return
    if isinstance(obj, Iterable) and not isinstance(obj, str | bytes):
        for item in obj:
            _collect_spent(item, out)
        return
    raise TypeError(
        f"{type(obj).__name__} has no privacy_spent_: pass fitted skdpsco estimators, "
        "Pipelines of them, PrivacySpent records, or lists of these."
    )


def total_privacy_spent(fitted, delta=None):
    """Total privacy spent by several fits on the same records (sequential composition).

    Parameters
    ----------
    fitted : estimator, Pipeline, PrivacySpent, or iterable of these
        Fitted skdpsco estimators (anything with a ``privacy_spent_`` record). A
        ``Pipeline`` contributes every step that spent privacy.
    delta : float, optional
        The delta to report the total at. Defaults to the sum of the fits' deltas.

    Returns
    -------
    PrivacySpent
        The minimum over valid compositions: the accountant over all mechanisms
        jointly at ``delta``, and basic composition (``sum epsilon_i`` at
        ``sum delta_i``) when ``delta`` is at least that sum.

    Examples
    --------
    >>> from skdpsco.privacy import MechanismRecord, PrivacySpent, total_privacy_spent
    >>> rec = MechanismRecord("mean", "gaussian", sensitivity=1.0, scale=5.0)
    >>> a = PrivacySpent.from_records([rec], delta=1e-6)
    >>> total = total_privacy_spent([a, a])
    >>> total.epsilon < 2 * a.epsilon
    True
    """
    spents = []
    _collect_spent(fitted, spents)
    if not spents:
        raise ValueError("total_privacy_spent needs at least one fitted estimator.")
    delta_sum = math.fsum(s.delta for s in spents)
    if delta is None:
        delta = delta_sum
    records = tuple(r for s in spents for r in s.mechanisms)
    if delta > 0:
        joint = PrivacySpent.from_records(records, delta)
    else:
        joint = None
    basic_eps = math.fsum(s.epsilon for s in spents)
    if delta >= delta_sum and (joint is None or basic_eps < joint.epsilon):
        rho = None
        if all(s.rho is not None for s in spents):
            rho = math.fsum(s.rho for s in spents)
        return PrivacySpent(
            basic_eps, float(delta), rho, accountant="basic", mechanisms=records
        )
    if joint is None:
        raise ValueError("delta=0 totals are only available by basic composition.")
    return joint
