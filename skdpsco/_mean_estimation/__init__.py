"""DP estimators of the mean of per-sample gradients ("mean oracles").

An oracle is calibrated once from public quantities (``n``, the parameter shape, a
per-call zCDP budget) and then called once per iteration with the design and the
per-sample derivatives ``u_i`` of the loss at the current iterate; the per-sample
gradient is ``u_i (outer) x~_i``.
"""

from ._batch import AveragedClipBatchOracle, PerExampleClipBatchOracle
from ._catoni import CatoniMeanOracle
from ._clipped import ClippedMeanOracle
from ._sparse_mean import (
    L1RecoveryMeanOracle,
    ProjectionMeanOracle,
    projection_mean,
)
from ._trimmed_mean import SmoothSensitivityTrimmedMeanOracle
from ._truncated_mean import AxisTruncatedMeanOracle, TruncatedMeanOracle

__all__ = [
    "AveragedClipBatchOracle",
    "AxisTruncatedMeanOracle",
    "CatoniMeanOracle",
    "ClippedMeanOracle",
    "L1RecoveryMeanOracle",
    "PerExampleClipBatchOracle",
    "ProjectionMeanOracle",
    "SmoothSensitivityTrimmedMeanOracle",
    "TruncatedMeanOracle",
    "projection_mean",
]
