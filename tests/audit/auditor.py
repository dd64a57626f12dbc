"""A generic empirical privacy auditor for estimators (tests/audit/README.md).

Given an estimator factory and two neighbouring datasets ``D`` and ``D'`` (replace-one:
same ``n``, one record replaced by a canary), :func:`audit` fits the estimator many
times on each with fresh, distinct seeds, reduces every released model to a few scalar
statistics, and returns a statistically valid lower bound on the epsilon of the
mechanism ``M`` that maps a dataset to the released model.

The construction (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021)
-------------------------------------------------------------------
If ``M`` is ``(epsilon, delta)``-DP, then for every measurable set ``S`` of outputs and
both orders of the neighbours ``(P, Q) = (D', D)`` or ``(D, D')``::

    P[M(P) in S] <= exp(epsilon) * P[M(Q) in S] + delta,

so ``epsilon >= log((TPR - delta) / FPR)`` with ``TPR = P[M(P) in S]`` and
``FPR = P[M(Q) in S]``. A threshold test ``S = {T(model) >= t}`` (or ``<= t``) for a
fixed statistic ``T`` gives a set; replacing TPR by its Clopper–Pearson lower bound
and FPR by its upper bound (each one-sided at level ``alpha / 2``) gives a bound that
holds with probability at least ``1 - alpha``.

Validity of the selection: the statistic, the tail, the order of the neighbours and
the threshold are all chosen on the first half of the runs of each side (the
*selection* half) and evaluated only on the second half (the *evaluation* half), which
is independent of the first. The ``n_selected`` best tests of the selection half are
evaluated, each at level ``alpha / n_selected`` (Bonferroni), and the reported bound
is the largest of them, so that ``P[epsilon_lb > epsilon] <= alpha`` for the true
epsilon of ``M`` at ``delta``.

Candidate statistics (every one a fixed function of the released model once the
selection half has been seen):

* each raw scalar of ``statistic(model)`` (both tails): catches a shift of the model
  caused by the canary (too little noise, no clipping);
* a Fisher (LDA) projection of all scalars, its direction learnt on the selection
  half: the most powerful linear test for a shift of a Gaussian model;
* the absolute deviation of each of the above from its median over the selection
  half of ``D``: catches a data-dependent noise *scale* (the canary changes the spread
  of the model, not its centre).

A fit that raises is an output too (data-dependent exceptions leak; see the threat
model in doc/privacy.rst): its statistics are recorded as ``+inf``.
"""

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as sps

__all__ = [
    "AuditResult",
    "EstimatorFactory",
    "ThresholdTest",
    "audit",
    "canary_statistics",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "epsilon_lower_bound",
]


# ------------------------------------------------------------------ statistics


def clopper_pearson_lower(k, n, level):
    """One-sided Clopper–Pearson lower bound on a binomial proportion.

    ``P[p < bound] <= level`` for ``k`` successes out of ``n`` (vectorised in ``k``).
    """
    k = np.asarray(k, dtype=float)
    safe_k = np.maximum(k, 1.0)
    return np.where(k > 0, sps.beta.ppf(level, safe_k, n - k + 1.0), 0.0)


def clopper_pearson_upper(k, n, level):
    """One-sided Clopper–Pearson upper bound on a binomial proportion."""
    k = np.asarray(k, dtype=float)
    safe_rest = np.maximum(n - k, 1.0)
    return np.where(k < n, sps.beta.ppf(1.0 - level, k + 1.0, safe_rest), 1.0)


def epsilon_lower_bound(k_p, n_p, k_q, n_q, delta, alpha):
    """``log((TPR_low - delta) / FPR_high)`` at joint confidence ``1 - alpha``.

    ``k_p`` of ``n_p`` outputs on the numerator dataset fell in ``S`` (TPR), ``k_q``
    of ``n_q`` on the other one (FPR). Each Clopper–Pearson bound is one-sided at
    ``alpha / 2``. Returns ``-inf`` where ``TPR_low <= delta``.
    """
    tpr_low = clopper_pearson_lower(k_p, n_p, alpha / 2.0)
    fpr_high = clopper_pearson_upper(k_q, n_q, alpha / 2.0)
    gap = tpr_low - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(gap > 0, gap, 1.0) / fpr_high
        return np.where(gap > 0, np.log(ratio), -np.inf)


def canary_statistics(direction):
    """Default statistic: the released model probed along the canary's direction.

    Returns a function ``model -> dict`` of named scalars: the model's decision
    (``decision_function`` for classifiers, ``predict`` for regressors; every column)
    at the unit vector ``u`` along ``direction``, the coefficients along ``u``, the
    intercept(s) and the norm of the coefficients. Any fixed function of the released
    model is a valid statistic; this one looks where the canary pushes.
    """
    u = np.asarray(direction, dtype=float).ravel()
    norm = np.linalg.norm(u)
    if not (norm > 0 and np.isfinite(norm)):
        raise ValueError("the canary direction must be a finite non-zero vector.")
    u = u / norm
    probe = u[None, :]

    def statistic(model):
        if hasattr(model, "decision_function"):
            decision = model.decision_function(probe)
        else:
            decision = model.predict(probe)
        coef = np.atleast_2d(np.asarray(model.coef_, dtype=float))
        values = {
            "decision": np.asarray(decision, dtype=float).ravel(),
            "coef.u": coef @ u,
            "intercept": np.atleast_1d(np.asarray(model.intercept_, float)).ravel(),
        }
        out = {}
        for name, vals in values.items():
            if vals.size == 1:
                out[name] = float(vals[0])
            else:
                out.update({f"{name}[{k}]": float(v) for k, v in enumerate(vals)})
        out["|coef|"] = float(np.linalg.norm(coef))
        return out

    return statistic


# --------------------------------------------------------------------- fitting


class EstimatorFactory:
    """``factory(seed)`` returns ``Est(**params, random_state=seed)`` (picklable)."""

    def __init__(self, estimator_class, params=None):
        self.estimator_class = estimator_class
        self.params = dict(params or {})

    def __call__(self, random_state):
        return self.estimator_class(**self.params, random_state=random_state)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(self.params.items()))
        return f"{self.estimator_class.__name__}({args})"


def _fit_runs(make_estimator, X, y, seeds, statistic):
    """Statistics of one fit per seed: ``(list of dicts or None, list of errors)``."""
    rows, errors = [], []
    for seed in seeds:
        try:
            model = make_estimator(int(seed)).fit(X, y)
            rows.append(statistic(model))
        except Exception as exc:  # a data-dependent exception is an output too
            rows.append(None)
            errors.append(exc)
    return rows, errors


def _collect(make_estimator, X, y, seeds, statistic, n_jobs):
    if n_jobs == 1:
        return _fit_runs(make_estimator, X, y, seeds, statistic)
    from joblib import Parallel, delayed

    chunks = [c for c in np.array_split(np.asarray(seeds), 4 * abs(n_jobs)) if c.size]
    parts = Parallel(n_jobs=n_jobs)(
        delayed(_fit_runs)(make_estimator, X, y, chunk, statistic) for chunk in chunks
    )
    rows = [r for part_rows, _ in parts for r in part_rows]
    errors = [e for _, part_errors in parts for e in part_errors]
    return rows, errors


def _to_matrix(rows, names):
    """Rows of named scalars as a float matrix; a failed fit or NaN becomes +inf."""
    out = np.full((len(rows), len(names)), np.inf)
    for i, row in enumerate(rows):
        if row is not None:
            out[i] = [row.get(name, np.inf) for name in names]
    return np.where(np.isnan(out), np.inf, out)


# --------------------------------------------------------------- the test family


def _sanitize(v):
    return np.where(np.isnan(v), np.inf, v)


@dataclass
class _Feature:
    """A scalar statistic of a run, fixed after the selection half was seen."""

    name: str
    columns: np.ndarray  # indices into the statistics matrix
    weights: np.ndarray | None = None  # LDA: standardised linear combination
    center: np.ndarray | None = None
    scale: np.ndarray | None = None
    median: float | None = None  # absolute deviation from this median

    def __call__(self, S):
        if self.weights is None:
            v = S[:, self.columns[0]]
        else:
            with np.errstate(all="ignore"):
                Z = (S[:, self.columns] - self.center) / self.scale
                v = Z @ self.weights
            v = np.where(np.isfinite(v), v, np.inf)
        v = _sanitize(v)
        if self.median is not None:
            with np.errstate(invalid="ignore"):
                v = _sanitize(np.abs(v - self.median))
        return v


def _lda_feature(A, B):
    """Fisher direction between the selection halves (None when degenerate)."""
    pooled = np.vstack([A, B])
    usable = np.flatnonzero(np.all(np.isfinite(pooled), axis=0))
    if usable.size < 2:
        return None
    with np.errstate(all="ignore"):  # huge statistics of a broken variant
        center = pooled[:, usable].mean(axis=0)
        scale = pooled[:, usable].std(axis=0)
    keep = (scale > 0) & np.isfinite(scale) & np.isfinite(center)
    usable, center, scale = usable[keep], center[keep], scale[keep]
    if usable.size < 2:
        return None
    ZA = (A[:, usable] - center) / scale
    ZB = (B[:, usable] - center) / scale
    with np.errstate(all="ignore"):
        cov = 0.5 * (np.cov(ZA, rowvar=False) + np.cov(ZB, rowvar=False))
        cov = np.atleast_2d(cov) + 1e-6 * np.eye(usable.size)
        if not np.all(np.isfinite(cov)):
            return None
        weights = np.linalg.solve(cov, ZB.mean(axis=0) - ZA.mean(axis=0))
    if not np.all(np.isfinite(weights)) or not np.any(weights):
        return None
    return _Feature("lda", usable, weights, center, scale)


def _features(names, A, B):
    base = [_Feature(name, np.array([j])) for j, name in enumerate(names)]
    lda = _lda_feature(A, B)
    if lda is not None:
        base.append(lda)
    features = list(base)
    for f in base:
        median = float(np.median(f(A)))
        if np.isfinite(median):
            features.append(
                _Feature(
                    f"|{f.name} - med|",
                    f.columns,
                    f.weights,
                    f.center,
                    f.scale,
                    median,
                )
            )
    return features


def _hits(values, threshold, tail):
    """How many ``values`` fall in ``{v >= t}`` (tail 'upper') or ``{v <= t}``."""
    sorted_values = np.sort(values)
    if tail == "upper":
        return values.size - np.searchsorted(sorted_values, threshold, side="left")
    return np.searchsorted(sorted_values, threshold, side="right")


@dataclass
class ThresholdTest:
    """One selected test ``S = {feature >= t}`` or ``{feature <= t}``.

    ``numerator`` is the dataset whose hit rate is the TPR: ``"D'"`` (the canary is
    in) or ``"D"``. Counts and ``epsilon_lb`` refer to the evaluation half.
    """

    feature: str
    tail: str
    numerator: str
    threshold: float
    selection_score: float
    level: float = math.nan
    tpr_hits: int = 0
    fpr_hits: int = 0
    n_eval: int = 0
    epsilon_lb: float = -math.inf

    def describe(self):
        op = ">=" if self.tail == "upper" else "<="
        other = "D" if self.numerator == "D'" else "D'"
        return (
            f"S = {{{self.feature} {op} {self.threshold:.6g}}}: "
            f"{self.numerator} {self.tpr_hits}/{self.n_eval}, "
            f"{other} {self.fpr_hits}/{self.n_eval} -> eps_lb {self.epsilon_lb:.3f} "
            f"(selection score {self.selection_score:.3f})"
        )


@dataclass
class AuditResult:
    """Outcome of :func:`audit`.

    Attributes
    ----------
    epsilon_lb : float
        Lower bound on epsilon at ``delta``, valid with probability ``1 - alpha``
        (0 when no test beats chance).
    tests : list of ThresholdTest
        The tests evaluated on the evaluation half, best first.
    n_failed : tuple of int
        Fits that raised on ``D`` and on ``D'``.
    """

    epsilon_lb: float
    delta: float
    alpha: float
    n_runs: int
    tests: list = field(default_factory=list)
    n_failed: tuple = (0, 0)
    errors: list = field(default_factory=list)
    statistic_names: list = field(default_factory=list)

    def summary(self):
        lines = [
            f"epsilon_lb = {self.epsilon_lb:.4f} at delta={self.delta:g}, "
            f"confidence {1 - self.alpha:g}, {self.n_runs} runs per dataset "
            f"(failed fits: D {self.n_failed[0]}, D' {self.n_failed[1]})"
        ]
        lines += ["  " + t.describe() for t in self.tests]
        if self.errors:
            lines.append(f"  first error: {self.errors[0]!r}")
        return "\n".join(lines)


def _select(features, A, B, delta, level, n_selected):
    """The ``n_selected`` best (feature, tail, numerator, threshold) on selection."""
    candidates = []
    nA, nB = A.shape[0], B.shape[0]
    for feature in features:
        a, b = feature(A), feature(B)
        thresholds = np.unique(np.concatenate([a, b]))
        for tail in ("upper", "lower"):
            kA, kB = _hits(a, thresholds, tail), _hits(b, thresholds, tail)
            for numerator, scores in (
                ("D'", epsilon_lower_bound(kB, nB, kA, nA, delta, level)),
                ("D", epsilon_lower_bound(kA, nA, kB, nB, delta, level)),
            ):
                best = int(np.argmax(scores))
                candidates.append(
                    (
                        float(scores[best]),
                        feature,
                        ThresholdTest(
                            feature.name,
                            tail,
                            numerator,
                            float(thresholds[best]),
                            float(scores[best]),
                        ),
                    )
                )
    candidates.sort(key=lambda c: c[0], reverse=True)
    return [(feature, test) for _, feature, test in candidates[:n_selected]]


def audit(
    make_estimator,
    dataset,
    neighbour,
    *,
    statistic,
    n_runs=1000,
    delta=1e-5,
    alpha=0.05,
    n_selected=3,
    seed=0,
    n_jobs=1,
):
    """Empirical lower bound on the epsilon of ``make_estimator`` between neighbours.

    Parameters
    ----------
    make_estimator : callable
        ``make_estimator(seed)`` returns an unfitted estimator whose ``random_state``
        is the int ``seed``; every run gets a distinct seed.
    dataset, neighbour : tuple (X, y)
        ``D`` and ``D'``, fixed across runs (replace-one neighbours).
    statistic : callable
        ``statistic(fitted_model)`` returns a dict of named scalars (see
        :func:`canary_statistics`).
    n_runs : int, default=1000
        Fits per dataset; the first half selects the test, the second evaluates it.
    delta : float, default=1e-5
        The delta at which epsilon is bounded (the claimed delta).
    alpha : float, default=0.05
        The bound holds with probability at least ``1 - alpha``.
    n_selected : int, default=3
        Tests carried from the selection half to the evaluation half (Bonferroni).
    seed : int, default=0
        Base of the run seeds (the audit is deterministic for a given seed).
    n_jobs : int, default=1
        joblib workers for the fits. Process workers do not see monkeypatches made
        in the calling process: keep 1 when auditing a patched variant.

    Returns
    -------
    AuditResult
    """
    if not 4 <= n_runs <= 2**29:
        raise ValueError(f"n_runs must be in [4, 2**29], got {n_runs}.")
    # Distinct seeds for every run on both sides (D: even, D': odd), all below 2**32
    # as scikit-learn's random_state validation requires.
    base = int(seed) % 2**31
    seeds_d = base + 2 * np.arange(n_runs)
    seeds_dp = seeds_d + 1
    X, y = dataset
    Xp, yp = neighbour
    rows_d, errors_d = _collect(make_estimator, X, y, seeds_d, statistic, n_jobs)
    rows_dp, errors_dp = _collect(make_estimator, Xp, yp, seeds_dp, statistic, n_jobs)
    n_failed = (len(errors_d), len(errors_dp))
    if n_failed == (n_runs, n_runs):
        raise RuntimeError(
            f"every fit of {make_estimator!r} raised; first error: {errors_d[0]!r}"
        ) from errors_d[0]
    names = []
    for row in rows_d + rows_dp:
        if row is not None:
            names += [name for name in row if name not in names]
    S_d, S_dp = _to_matrix(rows_d, names), _to_matrix(rows_dp, names)

    half = n_runs // 2
    A, B = S_d[:half], S_dp[:half]  # selection half
    A_eval, B_eval = S_d[half:], S_dp[half:]  # evaluation half
    level = alpha / n_selected
    selected = _select(_features(names, A, B), A, B, delta, level, n_selected)

    tests = []
    for feature, test in selected:
        a, b = feature(A_eval), feature(B_eval)
        k_a = int(_hits(a, test.threshold, test.tail))
        k_b = int(_hits(b, test.threshold, test.tail))
        if test.numerator == "D'":
            test.tpr_hits, test.fpr_hits = k_b, k_a
        else:
            test.tpr_hits, test.fpr_hits = k_a, k_b
        test.n_eval = a.size
        test.level = level
        bound = epsilon_lower_bound(
            test.tpr_hits, b.size, test.fpr_hits, a.size, delta, level
        )
        test.epsilon_lb = float(bound)
        tests.append(test)
    tests.sort(key=lambda t: t.epsilon_lb, reverse=True)
    epsilon_lb = max([0.0] + [t.epsilon_lb for t in tests])
    return AuditResult(
        epsilon_lb=epsilon_lb,
        delta=delta,
        alpha=alpha,
        n_runs=n_runs,
        tests=tests,
        n_failed=n_failed,
        errors=errors_d + errors_dp,
        statistic_names=names,
    )


def audit_within_claim(
    estimator_class, params, dataset, neighbour, *, epsilon, delta, **audit_kwargs
):
    """:func:`audit` of ``estimator_class(epsilon=..., delta=..., **params)``, after
    checking that a fit on ``neighbour`` reports spending at most the claim."""
    factory = EstimatorFactory(
        estimator_class, {"epsilon": epsilon, "delta": delta, **params}
    )
    spent = factory(0).fit(*neighbour).privacy_spent_
    assert spent.epsilon <= epsilon * (1 + 1e-9)
    assert spent.delta <= delta
    return audit(factory, dataset, neighbour, delta=delta, **audit_kwargs)
