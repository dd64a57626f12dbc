"""Input checks shared by every estimator: clear errors before any data is read."""

import math
import numbers

import numpy as np
import scipy.sparse as sp

from ._sparse import fresh_view

__all__ = [
    "canonical_sparse",
    "check_int",
    "checked_sample_weight",
    "check_real",
    "refuse_fit_params",
    "refuse_sparse",
]


def canonical_sparse(X, name):
    """Sparse ``X`` with duplicate entries summed, saturated to the float range: a
    copy where ``X`` may hold duplicates, otherwise a new object over ``X``'s own
    arrays (every stored value is finite, and nothing downstream writes into them)
    whose format flag is computed afresh (:func:`~skdpsco.utils._sparse.fresh_view`).

    A matrix's value at a position is the sum of its stored duplicates, so every
    bound and statistic is computed on the summed values. Each stored entry is
    finite (validated), so a sum can only overflow, never be NaN; it is clipped
    to the largest float rather than refused: a refusal would raise on a dataset
    holding such a record and not on its neighbour (one bit about the record).
    Every mechanism bounds a record's influence whatever its values.
    """
    X = fresh_view(X)
    if X.has_canonical_format:
        return X
    X = X.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        X.sum_duplicates()
    fmax = np.finfo(np.float64).max
    np.clip(X.data, -fmax, fmax, out=X.data)
    return X


def refuse_fit_params(estimator, fit_params):
    """A clear error for ``fit(..., sample_weight=...)`` and other fit parameters.

    Per-record weights of unbounded size change the sensitivity of every
    mechanism (one heavy record moves the statistic by its weight); the
    estimators whose ``fit`` names ``sample_weight`` take weights in ``[0, 1]``
    (:func:`checked_sample_weight`) and the others none;
    :class:`~skdpsco.HeavyTailedDPLogistic` also accepts ``class_weight``, a
    public per-class table whose effect is accounted.
    """
    if fit_params:
        raise TypeError(
            f"{type(estimator).__name__}.fit() does not accept "
            f"{', '.join(sorted(fit_params))}: per-record weights would change the "
            "sensitivity of its privacy mechanisms, so they are not supported "
            "(sample_weight in [0, 1] is, by HeavyTailedDPRidge and "
            "HeavyTailedDPLogistic; a classifier's public class_weight is, where "
            "available)."
        )


def checked_sample_weight(sample_weight, X, estimator):
    """``sample_weight`` as a float64 array of shape ``(n_samples,)`` in
    ``[0, 1]``, or a clear error.

    The cap 1 is the public bound on a record's weight that keeps every
    sensitivity of the unweighted fit: a weighted record's contribution to a
    clipped sum is its clipped contribution times ``w_i <= 1`` (the privacy
    proofs page, "Sample weights"). Weights outside ``[0, 1]`` (like non-finite values)
    are outside the input contract and refused before any data is used; the
    caller divides them by a public bound on their maximum (the maximum of the
    weights given is itself a statistic of the records).
    """
    name = type(estimator).__name__
    n = X.shape[0]
    weights = np.asarray(sample_weight)
    if weights.ndim == 0:
        weights = np.full(n, weights)
    if weights.ndim != 1 or weights.shape[0] != n:
        raise ValueError(
            f"{name}: sample_weight must have shape ({n},) (one weight per "
            f"sample), got {weights.shape}."
        )
    try:
        weights = weights.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: sample_weight must be numeric.") from exc
    if not np.all((weights >= 0) & (weights <= 1)):
        raise ValueError(
            f"{name}: sample_weight must lie in [0, 1] (the public cap on a "
            "record's weight that keeps the sensitivity of the unweighted fit); "
            "divide the weights by a public bound on their maximum (known "
            "before seeing the data: the largest weight given is itself private)."
        )
    return weights


def refuse_sparse(estimator, X, *, accepted=None, label=None):
    """A clear error for scipy.sparse input to an estimator that needs dense X.

    Parameters
    ----------
    estimator : object
        Refused when its ``_accept_sparse`` is false, or when ``accepted`` is
        given (a sparse-capable estimator whose chosen option is not).
    X : object
        The input; only its type is read (a public fact).
    accepted : str, optional
        What accepts sparse input instead (default: the estimator families that
        do).
    label : str, optional
        How the refused estimator is named (default: its class name).
    """
    if not sp.issparse(X):
        return
    if accepted is None and getattr(estimator, "_accept_sparse", False):
        return
    if accepted is None:
        accepted = (
            "the HeavyTailedDP*, SparseGradientDP* and GaussianWidthDP* "
            "estimators accept scipy.sparse matrices as they are"
        )
    label = type(estimator).__name__ if label is None else label
    raise TypeError(
        f"{label} does not support sparse input (densifying it could exhaust "
        f"memory); {accepted}. To keep an encoder's output dense, use "
        "OneHotEncoder(sparse_output=False) or ColumnTransformer(..., "
        "sparse_threshold=0)."
    )


def _interval(low, high, low_open, high_open):
    """``(0, 1]``-style text of an interval, ``> 0`` / ``<= 1`` when one-sided."""
    has_low, has_high = math.isfinite(low), math.isfinite(high)
    if has_low and has_high:
        return (
            f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        )
    if has_low:
        return f"{'>' if low_open else '>='} {low:g}"
    if has_high:
        return f"{'<' if high_open else '<='} {high:g}"
    return ""


def check_real(
    value,
    name,
    *,
    low=-math.inf,
    high=math.inf,
    low_open=False,
    high_open=False,
    allow_inf=False,
):
    """``value`` as a float, or a ``ValueError`` naming ``name`` and the range.

    Rejects bools, strings and NaN; infinities only where ``allow_inf`` (and the
    range contains them). Every public scalar of the internal layers (bounds,
    rates, sizes of the papers' algorithms) goes through here or :func:`check_int`.
    """
    ok = not isinstance(value, bool) and isinstance(value, numbers.Real)
    if ok:
        value = float(value)
        ok = not math.isnan(value) and (allow_inf or math.isfinite(value))
        ok = ok and (value > low if low_open else value >= low)
        ok = ok and (value < high if high_open else value <= high)
    if not ok:
        what = _interval(low, high, low_open, high_open)
        if not allow_inf and not (math.isfinite(low) and math.isfinite(high)):
            what = f"{what}, finite" if what else "(finite)"
        what = f" {what}" if what else ""
        raise ValueError(f"{name} must be a real number{what}, got {value!r}.")
    return value


def check_int(value, name, *, low=None, high=None):
    """``value`` as an int in ``[low, high]`` (either end optional), or a
    ``ValueError`` naming ``name``; bools and floats are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {value}.")
    return value
