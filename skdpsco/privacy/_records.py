"""The record of one mechanism: what ran, how often, at which sensitivity and noise.

Records are plain data with no imports from the rest of the package: every layer
(mechanisms, accountant, ledger) reads them, none of them is needed to write one.
"""

from dataclasses import dataclass

__all__ = ["MechanismRecord"]


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
