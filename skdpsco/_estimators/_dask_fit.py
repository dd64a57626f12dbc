"""Fitting on dask collections: validation, target encoding and placement.

The shared ``fit`` (:class:`~._base.DPLinearModel`) takes a dask array or dataframe
``X`` (and a dask ``y``) through the steps of the in-memory fit; this module holds
what differs. Nothing of length ``n`` comes to the client: the finite check and
the range of the weights are one reduction each, ``n`` and the layout come from the
chunk sizes (public), the classes of a classifier are the unique labels computed
on the cluster (released as in memory), and the rows, targets and weights are
rechunked once to whole blocks (:mod:`skdpsco._exact_sum`) and kept on the
workers. The algorithm then reads them through a
:class:`~skdpsco._dask_design.DaskLinearDesign`, whose sums are those of the
in-memory fit bit for bit. dask is imported lazily.
"""

import dataclasses
import functools

import numpy as np
import scipy.sparse as sp
from sklearn.utils.multiclass import check_classification_targets

from .._dask_design import DaskLinearDesign
from ..utils._optional import import_dask, is_dask_collection

__all__ = [
    "DaskInput",
    "dask_class_codes",
    "dask_score",
    "dask_supported",
    "lazy_rows",
]


def dask_supported(estimator):
    """The algorithms of ``estimator``'s family that fit dask input."""
    return [name for name, a in estimator._ALGORITHMS.items() if "dask" in a.supports]


def _as_array(v, name):
    """A dask array (a dataframe or series: with its chunk sizes, computed once
    on the cluster; they are the layout, not the data)."""
    da = import_dask("array")
    if hasattr(v, "to_dask_array"):
        return v.to_dask_array(lengths=True)
    if is_dask_collection(v):
        return v
    if name == "X":
        raise TypeError(
            "A dask y needs a dask X too (a dask.array.Array or a "
            "dask.dataframe.DataFrame)."
        )
    return da.from_array(np.asarray(v))


class DaskInput:
    """The dask side of one fit of ``estimator``.

    Parameters
    ----------
    estimator : DPLinearModel
    """

    def __init__(self, estimator):
        self.estimator = estimator
        self.name = type(estimator).__name__

    def validate(self, X, y):
        """``(X, y)`` as dask arrays, ``X`` of shape (n, d) with known chunks and
        finite values (one reduction), ``n_features_in_`` set."""
        est = self.estimator
        X, y = _as_array(X, "X"), _as_array(y, "y")
        if X.ndim != 2 or any(np.isnan(size) for size in X.shape):
            raise ValueError(
                f"{self.name}: a dask X of shape (n_samples, n_features) with known "
                "chunk sizes is needed (call compute_chunk_sizes() first)."
            )
        if not np.issubdtype(X.dtype, np.number) or X.dtype.kind == "c":
            raise ValueError(f"{self.name}: a dask X must hold real numbers.")
        if sp.issparse(getattr(X, "_meta", None)):
            # The exact sums read dense blocks of rows.
            raise TypeError(
                f"{self.name}: a dask array of sparse chunks is not supported; "
                "pass dense chunks, or a scipy.sparse matrix in memory."
            )
        if y.shape[0] != X.shape[0] or y.ndim > 1 + (not est._is_dp_classifier):
            raise ValueError(
                f"{self.name}: y of shape {y.shape} does not match X of shape "
                f"{X.shape}."
            )
        if X.shape[0] < 2:
            raise ValueError(f"{self.name}: at least 2 samples are needed.")
        da = import_dask("array")
        if not bool(self._compute(da.isfinite(X).all())):
            # As scikit-learn's validation refuses NaN / inf in memory.
            raise ValueError(f"{self.name}: Input X contains NaN or infinity.")
        if not est._is_dp_classifier:
            if not np.issubdtype(y.dtype, np.number) or y.dtype.kind == "c":
                raise ValueError(f"{self.name}: a dask y must hold real numbers.")
            # A NaN target would turn its whole block's exact sum into NaN (one
            # record moving 4096 records' contribution): refused, as in memory.
            if not bool(self._compute(da.isfinite(y).all())):
                raise ValueError(f"{self.name}: Input y contains NaN or infinity.")
        est.n_features_in_ = int(X.shape[1])
        for attribute in ("feature_names_in_",):
            est.__dict__.pop(attribute, None)
        dtype = X.dtype if X.dtype in (np.float64, np.float32) else np.float64
        return X.astype(dtype), y

    @staticmethod
    def _compute(collection):
        return collection.compute()

    def sample_weight(self, sample_weight, n_samples):
        """Weights in ``[0, 1]`` as a dask array (their range is one reduction;
        out of range, the error of the in-memory fit)."""
        da = import_dask("array")
        if not is_dask_collection(sample_weight):
            weights = np.asarray(sample_weight, dtype=float)
            sample_weight = da.from_array(
                np.full(n_samples, float(weights)) if weights.ndim == 0 else weights
            )
        weights = _as_array(sample_weight, "sample_weight").astype(float)
        if weights.ndim != 1 or weights.shape[0] != n_samples:
            raise ValueError(
                f"{self.name}: sample_weight must have shape ({n_samples},) (one "
                f"weight per sample), got {weights.shape}."
            )
        if not bool(self._compute(((weights >= 0) & (weights <= 1)).all())):
            raise ValueError(
                f"{self.name}: sample_weight must lie in [0, 1] (the public cap on "
                "a record's weight that keeps the sensitivity of the unweighted "
                "fit); divide the weights by a public bound on their maximum."
            )
        return weights

    def check_supported(self, algorithm):
        """Refuse an algorithm without a dask path, naming those with one."""
        if "dask" in algorithm.supports:
            return
        supported = dask_supported(self.estimator)
        choice = (
            f"use one of {supported}, or pass"
            if supported
            else "no algorithm of this estimator does: pass"
        )
        raise TypeError(
            f"{self.name}: algorithm={algorithm.name!r} does not fit dask input; "
            f"{choice} the data in memory (numpy, pandas)."
        )

    def placed(self, scaled, sample_weight):
        """``scaled`` (a :class:`~._base._Scaled`) with its data as a dask design
        and its target, like ``sample_weight``, in the design's row chunks, all
        kept on the workers; and those weights."""
        design = scaled.X
        if not isinstance(design, DaskLinearDesign):
            # scaling="none": the rows as they are.
            design = DaskLinearDesign(design, None, self.estimator.fit_intercept)
        target = design._persist(design.aligned(scaled.target))
        if sample_weight is not None:
            sample_weight = design._persist(design.aligned(sample_weight))
        return dataclasses.replace(scaled, X=design, target=target), sample_weight


def dask_class_codes(estimator, y):
    """The class codes of a dask ``y`` and the number of outputs, as
    ``DPClassifierMixin._encode_target`` gives them in memory: ``classes_`` from
    the labels' unique values (computed on the cluster, as ``np.unique`` of
    ``y``), codes mapped over the chunks."""
    labels = np.asarray(import_dask("array").unique(y).compute())
    # The label set decides the task type (a public fact once released).
    check_classification_targets(labels)
    classes = estimator._fitted_classes(labels)
    codes = y.map_blocks(functools.partial(np.searchsorted, classes), dtype=np.intp)
    if classes.size == 2:
        return codes.astype(float), 1
    return codes, int(classes.size)


def lazy_rows(method, X, n_columns, dtype=float):
    """``method`` (a prediction method of a fitted estimator) mapped over the row
    chunks of the dask array or dataframe ``X``: a lazy dask array of shape
    ``(n,)`` (``n_columns=None``) or ``(n, n_columns)``.

    Prediction is post-processing of the released model; each chunk is handled
    by the in-memory method.
    """
    X = _as_array(X, "X").rechunk({1: -1})
    if n_columns is None:
        return X.map_blocks(method, dtype=dtype, drop_axis=1)
    return X.map_blocks(method, dtype=dtype, chunks=(X.chunks[0], (n_columns,)))


def dask_score(estimator, X, y, sample_weight=None):
    """``estimator.score`` on dask input: accuracy (classifiers) or R^2
    (regressors, averaged uniformly over targets as scikit-learn's default), from
    lazy predictions and one reduction on the cluster; a float.

    Scoring is post-processing of the released model: its privacy is that of
    the data it is evaluated on, as in memory.
    """
    da = import_dask("array")
    predictions = estimator.predict(X)
    y = _as_array(y, "y").rechunk({0: predictions.chunks[0]})
    weight = (
        da.ones(y.shape[0], chunks=predictions.chunks[0])
        if sample_weight is None
        else _as_array(sample_weight, "sample_weight").rechunk(
            {0: predictions.chunks[0]}
        )
    ).astype(float)
    if estimator._is_dp_classifier:
        hits = (predictions == y).astype(float)
        return float(((hits * weight).sum() / weight.sum()).compute())
    y = y.astype(float)
    y2, p2 = (y, predictions) if y.ndim == 2 else (y[:, None], predictions[:, None])
    w2 = weight[:, None]
    mean = (w2 * y2).sum(axis=0) / w2.sum()
    residual = (w2 * (y2 - p2) ** 2).sum(axis=0)
    total = (w2 * (y2 - mean) ** 2).sum(axis=0)
    residual, total = da.compute(residual, total)
    # scikit-learn's r2_score conventions for a constant target.
    scores = np.where(total > 0, 1.0 - residual / np.where(total > 0, total, 1.0), 0.0)
    scores = np.where((total == 0) & (residual == 0), 1.0, scores)
    return float(np.mean(scores))
