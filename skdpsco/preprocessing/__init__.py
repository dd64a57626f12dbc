"""Differentially private preprocessing: transformers whose fitted statistics are DP.

Scaling features with statistics computed on the private data (scikit-learn's
``StandardScaler``, ``RobustScaler``) releases those statistics exactly.
:class:`DPStandardScaler` (a mean and a scale) and :class:`DPRobustScaler` (a median
and an interquartile range) release them through accounted DP mechanisms, with
``privacy_spent_`` like every skdpsco estimator, so that a ``Pipeline`` of one and a
DP model has a total spend (:func:`skdpsco.privacy.total_privacy_spent`).
"""

from ._data import DPRobustScaler, DPStandardScaler

__all__ = ["DPRobustScaler", "DPStandardScaler"]
