"""Differentially private preprocessing: transformers whose fitted statistics are DP.

Scaling features with statistics computed on the private data (scikit-learn's
``StandardScaler``) releases those statistics exactly. :class:`DPStandardScaler`
releases them through accounted DP mechanisms, with ``privacy_spent_`` like every
skdpsco estimator, so that a ``Pipeline`` of it and a DP model has a total spend
(:func:`skdpsco.privacy.total_privacy_spent`).
"""

from ._data import DPStandardScaler

__all__ = ["DPStandardScaler"]
