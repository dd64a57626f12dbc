"""Model selection on private data: hyperparameter search with a DP guarantee.

:class:`PrivateSearchCV` tunes any skdpsco estimator (or a ``Pipeline`` of them) so
that the whole search, fits, scores and the choice of the best included, is
``(epsilon, delta)``-DP (Liu & Talwar 2019; Papernot & Steinke 2022).
"""

from ._search import PrivateSearchCV

__all__ = ["PrivateSearchCV"]
