"""Shared test helper: watch the hidden number of runs of ``PrivateSearchCV``."""

from skdpsco.model_selection import _search as _search_module


def spy_on_runs(monkeypatch):
    """Record K, the hidden number of runs, as the sampler returns it."""
    drawn = []
    sampler = _search_module.truncated_negative_binomial

    def spy(*args, **kwargs):
        drawn.append(sampler(*args, **kwargs))
        return drawn[-1]

    monkeypatch.setattr(_search_module, "truncated_negative_binomial", spy)
    return drawn
