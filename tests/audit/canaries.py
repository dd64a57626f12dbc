"""Neighbouring datasets for the privacy audit: an ordinary ``D`` and ``D'`` = ``D``
with one record replaced by a canary (replace-one, ``n`` public).

Every dataset is a deterministic function of its arguments (seeded), so the audit sees
the same ``D`` and ``D'`` in every run; only the estimator's noise changes.

Canary kinds
------------
``"outlier"``
    ``x = 1e6 * e_0`` with an extreme label: ``-1e6`` for regression, the class the
    data would *not* predict along ``e_0`` for classification. Its per-sample gradient
    is as large as a gradient gets and points the same way at every iterate, so it
    saturates any clipping and pushes the model consistently along ``e_0``.
``"dense"``
    A dense row with every feature ``1e6`` (and the extreme label): for estimators
    that take scipy.sparse input, whose sensitivity arguments often count non-zeros.
``"label"``
    An ordinary feature vector ``e_0`` with an extreme label (regression: ``1e6``;
    classification: the wrong class): catches clipping that forgets the label.

Which kinds an estimator is audited with follows its tags (:func:`audit_cases`).
"""

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy import special

from .auditor import canary_statistics

__all__ = [
    "AuditCase",
    "CANARY_SCALE",
    "audit_cases",
    "base_dataset",
    "case_names",
    "make_case",
    "make_multiblock_case",
]

#: Magnitude of the canary's features and label: extreme, yet finite in float64 with
#: room to spare (squares and products of two stay below 1e300).
CANARY_SCALE = 1e6

_REG_COEF = np.array([0.5, -0.3, 0.2, 0.1, -0.1])


@dataclass(frozen=True)
class AuditCase:
    """``D = (X, y)``, ``D' = (X_prime, y_prime)`` and the canary's features."""

    name: str
    X: object
    y: np.ndarray
    X_prime: object
    y_prime: np.ndarray
    canary: np.ndarray
    index: int

    @property
    def dataset(self):
        return self.X, self.y

    @property
    def neighbour(self):
        return self.X_prime, self.y_prime

    @property
    def statistic(self):
        return canary_statistics(self.canary)


def _task_of(estimator, multiclass):
    tags = estimator.__sklearn_tags__()
    if tags.estimator_type == "classifier":
        return "multiclass" if multiclass else "binary"
    return "regression"


def _accepts_sparse(estimator):
    return bool(estimator.__sklearn_tags__().input_tags.sparse)


def base_dataset(task, *, n_samples=100, n_features=3, sparse=False, seed=0):
    """An ordinary seeded dataset: standard features (or a few ones per row).

    Returns ``(X, y, B)`` with ``B`` the ``(n_features, n_outputs)`` matrix behind
    the labels (classification scores or regression coefficients).
    """
    rng = np.random.default_rng(seed)
    if sparse:
        # Bag-of-words style: two non-zeros of size about 1 per row.
        cols = np.stack(
            [rng.choice(n_features, size=2, replace=False) for _ in range(n_samples)]
        )
        vals = rng.normal(1.0, 0.3, size=cols.shape)
        rows = np.repeat(np.arange(n_samples), 2)
        X = sp.csr_matrix(
            (vals.ravel(), (rows, cols.ravel())), shape=(n_samples, n_features)
        )
        dense = X.toarray()
    else:
        dense = rng.normal(size=(n_samples, n_features))
        X = dense
    if task == "regression":
        coef = np.resize(_REG_COEF, n_features)
        y = dense @ coef + 0.5 * rng.normal(size=n_samples)
        return X, y, coef[:, None]
    n_classes = 2 if task == "binary" else 3
    B = rng.normal(size=(n_features, n_classes))
    B[0] = np.linspace(1.5, -1.5, n_classes)  # class 0 likes +e_0, the last hates it
    scores = dense @ B + rng.gumbel(size=(n_samples, n_classes))
    y = scores.argmax(axis=1)
    missing = np.setdiff1d(np.arange(n_classes), y)
    y[: missing.size] = missing  # every class present
    return X, y, B


def _replace_row(X, index, row):
    if sp.issparse(X):
        X = sp.lil_matrix(X, copy=True)
        X[index] = row
        return sp.csr_matrix(X)
    X = np.array(X, copy=True)
    X[index] = row
    return X


def _extreme_label(task, B, x):
    """The label that disagrees most with the data's model at ``x``."""
    if task == "regression":
        return -CANARY_SCALE if (x @ B[:, 0]) >= 0 else CANARY_SCALE
    return int(np.argmin(x @ B))


def _clipped_gradients(task, X, y, B, clip_norm=1.0):
    """Per-sample gradients at the data's own model ``B``, clipped to ``clip_norm``."""
    X = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=float)
    X_tilde = np.hstack([X, np.ones((X.shape[0], 1))])
    if task == "regression":
        U = (X @ B[:, 0] - y)[:, None]
    elif task == "binary":
        U = (special.expit(X @ (B[:, 1] - B[:, 0])) - y)[:, None]
    else:
        U = special.softmax(X @ B, axis=1)
        U[np.arange(y.size), y] -= 1.0
    G = (U[:, :, None] * X_tilde[:, None, :]).reshape(y.size, -1)
    norms = np.linalg.norm(G, axis=1)
    return G * np.minimum(1.0, clip_norm / np.maximum(norms, 1e-300))[:, None]


def _most_opposed_record(task, X, y, B, canary, label):
    """The record whose replacement by the canary changes the clipped gradient most.

    A heuristic for power only (any fixed choice of the replaced record gives valid
    neighbours): at the data's own model, the replaced record's clipped gradient
    should point away from the canary's, so that the swap moves the gradient mean by
    close to the full sensitivity ``2 C / n`` rather than ``C / n``. For
    classification the replaced record's class must occur elsewhere too, so that the
    label set (public metadata) is the same in ``D`` and ``D'``.
    """
    G = _clipped_gradients(task, X, y, B)
    g = _clipped_gradients(task, canary[None, :], np.array([label]), B)[0]
    score = np.linalg.norm(G - g, axis=1)
    if task != "regression":
        counts = np.bincount(y)
        score[(counts[y] < 2) & (y != label)] = -np.inf
    return int(np.argmax(score))


def make_case(
    task, kind, *, sparse=False, n_samples=100, n_features=3, seed=0, index=None
):
    """The neighbouring pair for one canary ``kind`` on one ``task``."""
    X, y, B = base_dataset(
        task, n_samples=n_samples, n_features=n_features, sparse=sparse, seed=seed
    )
    e0 = np.zeros(n_features)
    e0[0] = 1.0
    if kind == "outlier":
        canary = CANARY_SCALE * e0
        label = _extreme_label(task, B, e0)
    elif kind == "dense":
        canary = np.full(n_features, CANARY_SCALE)
        label = _extreme_label(task, B, np.ones(n_features))
    elif kind == "label":
        canary = e0
        label = _extreme_label(task, B, e0)
    else:
        raise ValueError(f"unknown canary kind {kind!r}")
    if index is None:
        index = _most_opposed_record(task, X, y, B, canary, label)
    y_prime = np.array(y, copy=True)
    y_prime[index] = label
    X_prime = _replace_row(X, index, canary)
    name = f"{kind}-{task}" + ("-sparse" if sparse else "")
    if task != "regression":
        assert np.array_equal(np.unique(y), np.unique(y_prime))
    return AuditCase(name, X, y, X_prime, y_prime, canary, index)


def make_multiblock_case(task, kind, *, n_samples=9000, row=5000, base_samples=100):
    """:func:`make_case` spread over several exact-sum blocks of rows.

    The ``base_samples`` rows of ``make_case(task, kind)`` are repeated (cheap
    background rows: the audit is about the placement of one record, not about the
    data) up to ``n_samples`` rows, and the canary replaces the copy of the base
    case's replaced record nearest to ``row``. With the defaults the rows span the
    exact sums' blocks ``[0, 4096)``, ``[4096, 8192)`` and ``[8192, 9000)``, and
    the canary sits in the middle block, not the first. The result is a
    replace-one pair like :func:`make_case`'s (the same canary, label and
    statistic; ``index`` is the canary's row in the repeated data).
    """
    base = make_case(task, kind, n_samples=base_samples)
    m = base_samples
    reps = -(-n_samples // m)
    X = np.tile(base.X, (reps, 1))[:n_samples]
    y = np.tile(base.y, reps)[:n_samples]
    index = base.index + m * int(round((row - base.index) / m))
    if not 0 <= index < n_samples:
        raise ValueError(f"row {row} is outside the {n_samples} rows.")
    X_prime, y_prime = X.copy(), y.copy()
    X_prime[index] = base.X_prime[base.index]
    y_prime[index] = base.y_prime[base.index]
    name = f"{base.name}-{n_samples}rows-at{index}"
    return AuditCase(name, X, y, X_prime, y_prime, base.canary, index)


def case_names(estimator, *, extended=False, sparse=None):
    """Canary cases for an estimator, chosen by its tags.

    Default: the outlier canary, plus a second kind suited to the input type (a dense
    row for sparse-input estimators, an extreme label on an ordinary row otherwise)
    for regressors; classifiers get the outlier canary on binary and multiclass
    data. ``extended`` (the slow audit) adds every kind on every task. ``sparse``
    picks the input type where the estimator takes both (default: its tags).
    """
    if sparse is None:
        sparse = _accepts_sparse(estimator)
    second = "dense" if sparse else "label"
    tasks = [_task_of(estimator, False)]
    if tasks[0] == "binary":
        tasks.append("multiclass")
    if extended:
        kinds = ["outlier", "dense", "label"]
        return [(t, k, sparse) for t in tasks for k in kinds]
    names = [(tasks[0], "outlier", sparse)]
    if tasks[0] != "binary":  # classifiers: the multiclass outlier instead (CI time)
        names.append((tasks[0], second, sparse))
    names += [(t, "outlier", sparse) for t in tasks[1:]]
    return names


def audit_cases(estimator, *, extended=False):
    """:class:`AuditCase` objects for ``estimator`` (see :func:`case_names`)."""
    return [
        make_case(task, kind, sparse=sparse)
        for task, kind, sparse in case_names(estimator, extended=extended)
    ]
