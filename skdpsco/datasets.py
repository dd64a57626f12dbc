"""Synthetic heavy-tailed data generators.

The generators in this module reproduce the synthetic designs used in the
experiments of the heavy-tailed DP-SCO literature ([1]_, [2]_): linear models
whose features and/or additive noise are drawn from heavy-tailed families
(Student-t, log-normal, Pareto, log-logistic), and one-hot encoded categorical
records as ``scipy.sparse`` CSR matrices (the sparse-gradient setting).  They are
used by the test suite, the examples and the benchmarks.

References
----------
.. [1] D. Wang, H. Xiao, S. Devadas and J. Xu, "On Differentially Private
   Stochastic Convex Optimization with Heavy-tailed Data", Proceedings of the
   37th International Conference on Machine Learning (ICML), 2020.
.. [2] G. Kamath, X. Liu and H. Zhang, "Improved Rates for Differentially
   Private Stochastic Convex Optimization with Heavy-Tailed Data",
   arXiv:2106.01336, 2021.
"""

import math
import numbers
from typing import NamedTuple

import numpy as np

from .utils._validation import check_int, check_real

__all__ = [
    "make_heavy_tailed_regression",
    "make_heavy_tailed_classification",
    "make_one_hot_classification",
]

_FEATURE_DISTRIBUTIONS = ("normal", "student_t", "lognormal", "pareto", "loglogistic")
_NOISE_DISTRIBUTIONS = _FEATURE_DISTRIBUTIONS + ("none",)


# ---------------------------------------------------------------------------
# Input validation helpers
# ---------------------------------------------------------------------------


def _check_generator(random_state):
    """Turn a ``check_random_state``-style seed into a ``numpy.random.Generator``.

    ``None`` gives a freshly (OS-entropy) seeded generator, an integer ``s``
    gives ``numpy.random.default_rng(s)``, a ``RandomState`` is used to draw an
    integer seed (so it is advanced, as sklearn would advance it) and a
    ``Generator`` is used as is.  The global ``numpy.random`` state is never
    touched.
    """
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        seed = random_state.randint(np.iinfo(np.int32).max, dtype=np.int64)
        return np.random.default_rng(int(seed))
    if isinstance(random_state, numbers.Integral) and not isinstance(
        random_state, bool
    ):
        if random_state < 0:
            raise ValueError(
                f"random_state must be a non-negative integer; got {random_state}."
            )
        return np.random.default_rng(int(random_state))
    raise ValueError(
        "random_state must be None, a non-negative int, a numpy.random.RandomState "
        f"or a numpy.random.Generator; got {random_state!r}."
    )


def _check_distribution(value, name, valid):
    if not isinstance(value, str) or value not in valid:
        raise ValueError(f"{name} must be one of {sorted(valid)}; got {value!r}.")
    return value


class _LinearModel(NamedTuple):
    """The validated parameters the two linear generators share."""

    n_samples: int
    n_features: int
    n_informative: int
    coef_norm: float
    noise_scale: float
    feature_distribution: str
    noise_distribution: str
    shape: dict


def _check_linear_model(
    n_samples,
    n_features,
    feature_distribution,
    noise_distribution,
    noise_scale,
    coef_norm,
    n_informative,
    df,
    sigma,
    alpha_pareto,
):
    """Validate the parameters of a linear model with heavy-tailed draws."""
    n_samples = check_int(n_samples, "n_samples", low=1)
    n_features = check_int(n_features, "n_features", low=1)
    feature_distribution = _check_distribution(
        feature_distribution, "feature_distribution", _FEATURE_DISTRIBUTIONS
    )
    noise_distribution = _check_distribution(
        noise_distribution, "noise_distribution", _NOISE_DISTRIBUTIONS
    )
    noise_scale = check_real(noise_scale, "noise_scale", low=0.0)
    coef_norm = check_real(coef_norm, "coef_norm", low=0.0)
    if n_informative is None:
        n_informative = n_features
    n_informative = check_int(n_informative, "n_informative", low=1, high=n_features)
    shape = {
        name: check_real(value, name, low=0.0, low_open=True)
        for name, value in (
            ("df", df),
            ("sigma", sigma),
            ("alpha_pareto", alpha_pareto),
        )
    }
    return _LinearModel(
        n_samples,
        n_features,
        n_informative,
        coef_norm,
        noise_scale,
        feature_distribution,
        noise_distribution,
        shape,
    )


# ---------------------------------------------------------------------------
# Samplers
# ---------------------------------------------------------------------------


def _sample(rng, distribution, size, *, df, sigma, alpha_pareto, standardize):
    """Draw centred (and optionally unit-variance) samples.

    Every family is centred by its exact population mean when that mean is
    finite.  When ``standardize`` is true the draws are also divided by the
    exact population standard deviation when the variance is finite.  Families
    with an infinite mean (Pareto with ``alpha_pareto <= 1``, log-logistic with
    ``sigma >= 1``) are returned raw; Student-t with ``df <= 1`` has no mean
    but is symmetric about zero.
    """
    if distribution == "normal":
        return rng.standard_normal(size)

    if distribution == "student_t":
        z = rng.standard_t(df, size)
        if standardize and df > 2.0:
            z /= math.sqrt(df / (df - 2.0))
        return z

    if distribution == "lognormal":
        g = sigma * rng.standard_normal(size)
        # mean = exp(sigma^2 / 2), var = (exp(sigma^2) - 1) exp(sigma^2); work
        # in log space so that large sigma does not overflow the constants.
        log_mean = 0.5 * sigma**2
        if standardize:
            log_std = sigma**2 + 0.5 * math.log(-math.expm1(-(sigma**2)))
            return np.exp(g - log_std) - math.exp(log_mean - log_std)
        return np.exp(g) - math.exp(log_mean)

    if distribution == "pareto":
        a = alpha_pareto
        z = rng.pareto(a, size) + 1.0  # classical Pareto(a) with x_m = 1
        if a > 1.0:
            z -= a / (a - 1.0)
            if standardize and a > 2.0:
                z /= math.sqrt(a / ((a - 1.0) ** 2 * (a - 2.0)))
        return z

    if distribution == "loglogistic":
        s = sigma
        z = np.exp(rng.logistic(0.0, s, size))
        if s < 1.0:
            mean = math.pi * s / math.sin(math.pi * s)
            z -= mean
            if standardize and s < 0.5:
                second = 2.0 * math.pi * s / math.sin(2.0 * math.pi * s)
                z /= math.sqrt(second - mean**2)
        return z

    raise AssertionError(f"unreachable: {distribution!r}")  # pragma: no cover


def _draw_coef(rng, n_features, n_informative, coef_norm):
    """Draw N(0, I) on the first ``n_informative`` coordinates, rescaled."""
    coef = np.zeros(n_features)
    w = rng.standard_normal(n_informative)
    norm = np.linalg.norm(w)
    if norm == 0.0:  # pragma: no cover - probability zero
        w[0], norm = 1.0, 1.0
    coef[:n_informative] = coef_norm * w / norm
    return coef


def _draw_linear_model(rng, model, n_outputs, noise_shape):
    """``coef`` (one row per output), ``X`` and the centred noise of ``noise_shape``
    (None for ``"none"``), drawn in this order: ``X`` and ``coef`` do not depend on
    the noise settings."""
    coef = np.stack(
        [
            _draw_coef(rng, model.n_features, model.n_informative, model.coef_norm)
            for _ in range(n_outputs)
        ]
    )
    X = _sample(
        rng,
        model.feature_distribution,
        (model.n_samples, model.n_features),
        standardize=True,
        **model.shape,
    )
    if model.noise_distribution == "none":
        return coef, X, None
    noise = _sample(
        rng, model.noise_distribution, noise_shape, standardize=False, **model.shape
    )
    return coef, X, noise


def _outlier_count(fraction, n_samples):
    """``floor(fraction * n_samples)``, robust to floating-point round-off."""
    x = fraction * n_samples
    k = math.floor(x)
    if math.isclose(x, k + 1, rel_tol=1e-12, abs_tol=0.0):
        k += 1
    return min(int(k), n_samples)


# ---------------------------------------------------------------------------
# Public generators
# ---------------------------------------------------------------------------


def make_heavy_tailed_regression(
    n_samples=1000,
    n_features=10,
    *,
    feature_distribution="normal",
    noise_distribution="lognormal",
    noise_scale=1.0,
    coef_norm=1.0,
    n_informative=None,
    bias=0.0,
    df=3.0,
    sigma=1.0,
    alpha_pareto=2.5,
    outlier_fraction=0.0,
    outlier_magnitude=1e4,
    random_state=None,
):
    r"""Generate a linear regression problem with heavy-tailed features or noise.

    The targets follow :math:`y = \langle w^*, x \rangle + b + \text{noise}`.
    With the default parameters this is the ridge-regression experiment of
    Wang et al. [1]_: standard normal features and
    :math:`e = \Delta - \mathbb{E}[\Delta]` with
    :math:`\Delta \sim \mathrm{LogNormal}(0, 1)`, centred by its exact mean
    :math:`\exp(\sigma^2 / 2)`.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of samples (rows), at least 1.

    n_features : int, default=10
        Number of features (columns), at least 1.

    feature_distribution : str, default="normal"
        One of ``"normal"``, ``"student_t"``, ``"lognormal"``, ``"pareto"``,
        ``"loglogistic"``: the distribution of the i.i.d. entries of ``X``.
        Every family is centred by its exact population mean and rescaled to
        unit variance whenever these moments are finite:

        - ``"normal"``: standard normal.
        - ``"student_t"``: Student-t with ``df`` degrees of freedom divided by
          :math:`\sqrt{df / (df - 2)}` when ``df > 2``.
        - ``"lognormal"``: :math:`\exp(\sigma Z)` minus
          :math:`e^{\sigma^2/2}`, divided by
          :math:`\sqrt{(e^{\sigma^2} - 1) e^{\sigma^2}}`.
        - ``"pareto"``: classical Pareto with scale 1 and shape
          :math:`a` = ``alpha_pareto`` (mean :math:`a/(a-1)` for
          :math:`a > 1`, variance :math:`a / ((a-1)^2 (a-2))` for
          :math:`a > 2`).
        - ``"loglogistic"``: :math:`\exp(L)` with :math:`L` logistic with
          location 0 and scale :math:`s` = ``sigma`` (mean
          :math:`\pi s / \sin(\pi s)` for :math:`s < 1`, second moment
          :math:`2 \pi s / \sin(2 \pi s)` for :math:`s < 1/2`).

        When the variance is infinite (Student-t with ``df <= 2``, Pareto with
        ``alpha_pareto <= 2``, log-logistic with ``sigma >= 1/2``) the draws
        are only centred, not rescaled; when the mean is infinite as well
        (Pareto with ``alpha_pareto <= 1``, log-logistic with ``sigma >= 1``)
        they are returned uncentred.  Student-t with ``df <= 1`` has no mean
        but is symmetric about zero.

    noise_distribution : str, default="lognormal"
        One of ``"normal"``, ``"student_t"``, ``"lognormal"``, ``"pareto"``,
        ``"loglogistic"``, ``"none"``: the distribution of the additive noise.
        The noise is centred by the exact population mean (where finite) but,
        unlike the features, *not* rescaled to unit variance, so that the
        defaults match [1]_.
        ``"none"`` gives noiseless targets.

    noise_scale : float, default=1.0
        Non-negative multiplier applied to the centred noise.

    coef_norm : float, default=1.0
        Euclidean norm of the true coefficient vector ``coef``.

    n_informative : int or None, default=None
        Number of informative features, between 1 and ``n_features``.  The
        coefficients of the first ``n_informative`` features are drawn from
        :math:`N(0, I)` and rescaled to norm ``coef_norm``; the others are
        zero.  ``None`` means all features are informative.

    bias : float, default=0.0
        Intercept added to every target.

    df : float, default=3.0
        Degrees of freedom of the Student-t family (> 0).

    sigma : float, default=1.0
        Shape of the log-normal family (standard deviation of the underlying
        normal) and scale of the logistic variable in the log-logistic family
        (> 0).  Very large values overflow the log-logistic family.

    alpha_pareto : float, default=2.5
        Shape (tail index) of the Pareto family (> 0).

    outlier_fraction : float, default=0.0
        Fraction in ``[0, 1)`` of rows, chosen uniformly at random without
        replacement, whose target gets ``outlier_magnitude`` added.  The
        number of such rows is ``floor(outlier_fraction * n_samples)``.

    outlier_magnitude : float, default=1e4
        Value added to the targets of the outlier rows.

    random_state : None, int, RandomState or Generator, default=None
        Source of randomness.  An int ``s`` is equivalent to
        ``numpy.random.default_rng(s)``; a ``RandomState`` is used to draw an
        integer seed for a new ``Generator``; a ``Generator`` is used (and
        advanced) in place.  The global NumPy random state is never used.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        Feature matrix (float64).

    y : ndarray of shape (n_samples,)
        Targets (float64).

    coef : ndarray of shape (n_features,)
        True coefficient vector, with ``np.linalg.norm(coef) == coef_norm``.

    See Also
    --------
    make_heavy_tailed_classification : Heavy-tailed classification problems.

    Notes
    -----
    For a fixed ``random_state``, the draws happen in the order ``coef``,
    ``X``, noise, outlier rows, so ``X`` and ``coef`` do not depend on the
    noise or outlier settings.

    References
    ----------
    .. [1] D. Wang, H. Xiao, S. Devadas and J. Xu, "On Differentially Private
       Stochastic Convex Optimization with Heavy-tailed Data", ICML 2020.
    .. [2] G. Kamath, X. Liu and H. Zhang, "Improved Rates for Differentially
       Private Stochastic Convex Optimization with Heavy-Tailed Data",
       arXiv:2106.01336, 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco.datasets import make_heavy_tailed_regression
    >>> X, y, coef = make_heavy_tailed_regression(
    ...     n_samples=500, n_features=5, random_state=0
    ... )
    >>> X.shape, y.shape, coef.shape
    ((500, 5), (500,), (5,))
    >>> float(np.round(np.linalg.norm(coef), 12))
    1.0
    >>> X, y, coef = make_heavy_tailed_regression(
    ...     n_samples=100, n_features=3, noise_distribution="none", bias=2.0,
    ...     random_state=0,
    ... )
    >>> bool(np.allclose(y, X @ coef + 2.0))
    True
    """
    model = _check_linear_model(
        n_samples,
        n_features,
        feature_distribution,
        noise_distribution,
        noise_scale,
        coef_norm,
        n_informative,
        df,
        sigma,
        alpha_pareto,
    )
    bias = check_real(bias, "bias")
    outlier_fraction = check_real(
        outlier_fraction, "outlier_fraction", low=0.0, high=1.0, high_open=True
    )
    outlier_magnitude = check_real(outlier_magnitude, "outlier_magnitude")
    rng = _check_generator(random_state)

    n_samples = model.n_samples
    coef, X, noise = _draw_linear_model(rng, model, 1, n_samples)
    coef = coef[0]
    y = X @ coef + bias
    if noise is not None:
        y += model.noise_scale * noise

    n_outliers = _outlier_count(outlier_fraction, n_samples)
    if n_outliers > 0:
        rows = rng.choice(n_samples, size=n_outliers, replace=False)
        y[rows] += outlier_magnitude
    return X, y, coef


def make_heavy_tailed_classification(
    n_samples=1000,
    n_features=10,
    *,
    n_classes=2,
    feature_distribution="student_t",
    noise_distribution="loglogistic",
    noise_scale=1.0,
    coef_norm=1.0,
    n_informative=None,
    df=3.0,
    sigma=0.4,
    alpha_pareto=2.5,
    label_names=None,
    random_state=None,
):
    r"""Generate a linear classification problem with heavy-tailed data.

    Binary problems (``n_classes=2``) follow the logistic-regression
    experiment of Wang et al. [1]_: :math:`y = 1` if
    :math:`\langle w^*, x \rangle + \text{noise} > 0` and :math:`y = 0`
    otherwise.  This is the usual sign convention, under which a linear
    classifier recovers the direction of :math:`w^*`; the formula printed in
    [1]_ has the opposite sign.  With the defaults the features are
    standardised Student-t with 3 degrees of freedom and the noise is a
    centred log-logistic variable with scale 0.4 (finite variance, infinite
    third moment).

    Multiclass problems (``n_classes >= 3``) use one coefficient vector per
    class and :math:`y = \arg\max_k (\langle w_k, x \rangle + \text{noise}_k)`
    with independent centred noise for each class.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of samples (rows), at least 1.

    n_features : int, default=10
        Number of features (columns), at least 1.

    n_classes : int, default=2
        Number of classes, at least 2.

    feature_distribution : str, default="student_t"
        One of ``"normal"``, ``"student_t"``, ``"lognormal"``, ``"pareto"``,
        ``"loglogistic"``: the distribution of the i.i.d. entries of ``X``,
        centred and rescaled to unit variance where these moments are finite;
        see :func:`make_heavy_tailed_regression` for the exact definitions.

    noise_distribution : str, default="loglogistic"
        One of ``"normal"``, ``"student_t"``, ``"lognormal"``, ``"pareto"``,
        ``"loglogistic"``, ``"none"``: the distribution of the additive latent
        noise, centred by its exact mean where finite but not rescaled.
        ``"none"`` gives noiseless labels.

    noise_scale : float, default=1.0
        Non-negative multiplier applied to the centred noise.

    coef_norm : float, default=1.0
        Euclidean norm of the coefficient vector (of each row of ``coef`` in
        the multiclass case).

    n_informative : int or None, default=None
        Number of informative features, between 1 and ``n_features``; only the
        first ``n_informative`` coefficients (of every class) are non-zero.
        ``None`` means all features are informative.

    df : float, default=3.0
        Degrees of freedom of the Student-t family (> 0).

    sigma : float, default=0.4
        Shape of the log-normal family and scale of the logistic variable in
        the log-logistic family (> 0).

    alpha_pareto : float, default=2.5
        Shape (tail index) of the Pareto family (> 0).

    label_names : sequence of length n_classes or None, default=None
        Distinct labels to use instead of ``0, ..., n_classes - 1``; class
        ``k`` is reported as ``label_names[k]`` (strings are allowed).

    random_state : None, int, RandomState or Generator, default=None
        Source of randomness; see :func:`make_heavy_tailed_regression`.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        Feature matrix (float64).

    y : ndarray of shape (n_samples,)
        Labels: int64 values in ``0, ..., n_classes - 1``, or elements of
        ``label_names`` when given.

    coef : ndarray of shape (n_features,) or (n_classes, n_features)
        True coefficients: a vector for binary problems, one row per class for
        multiclass problems.

    See Also
    --------
    make_heavy_tailed_regression : Heavy-tailed regression problems.

    References
    ----------
    .. [1] D. Wang, H. Xiao, S. Devadas and J. Xu, "On Differentially Private
       Stochastic Convex Optimization with Heavy-tailed Data", ICML 2020.
    .. [2] G. Kamath, X. Liu and H. Zhang, "Improved Rates for Differentially
       Private Stochastic Convex Optimization with Heavy-Tailed Data",
       arXiv:2106.01336, 2021.

    Examples
    --------
    >>> import numpy as np
    >>> from skdpsco.datasets import make_heavy_tailed_classification
    >>> X, y, coef = make_heavy_tailed_classification(
    ...     n_samples=200, n_features=4, random_state=0
    ... )
    >>> X.shape, y.shape, coef.shape
    ((200, 4), (200,), (4,))
    >>> sorted(np.unique(y).tolist())
    [0, 1]
    >>> X, y, coef = make_heavy_tailed_classification(
    ...     n_samples=200, n_features=4, n_classes=3,
    ...     label_names=["a", "b", "c"], random_state=0,
    ... )
    >>> coef.shape
    (3, 4)
    >>> sorted(np.unique(y).tolist())
    ['a', 'b', 'c']
    """
    model = _check_linear_model(
        n_samples,
        n_features,
        feature_distribution,
        noise_distribution,
        noise_scale,
        coef_norm,
        n_informative,
        df,
        sigma,
        alpha_pareto,
    )
    n_classes = check_int(n_classes, "n_classes", low=2)
    if label_names is not None:
        if isinstance(label_names, str):
            raise ValueError(
                "label_names must be a sequence of labels, not a string; "
                f"got {label_names!r}."
            )
        labels = np.asarray(label_names)
        if labels.ndim != 1 or labels.shape[0] != n_classes:
            raise ValueError(
                f"label_names must be a 1-d sequence of length n_classes="
                f"{n_classes}; got {label_names!r}."
            )
        if np.unique(labels).shape[0] != n_classes:
            raise ValueError(
                f"label_names must contain distinct labels; got {label_names!r}."
            )
    rng = _check_generator(random_state)

    n_outputs = 1 if n_classes == 2 else n_classes
    coef, X, noise = _draw_linear_model(
        rng, model, n_outputs, (model.n_samples, n_outputs)
    )
    scores = X @ coef.T
    if noise is not None:
        scores += model.noise_scale * noise

    if n_classes == 2:
        coef = coef[0]
        y = (scores[:, 0] > 0).astype(np.int64)
    else:
        y = np.argmax(scores, axis=1).astype(np.int64)
    if label_names is not None:
        y = labels[y]
    return X, y, coef


def make_one_hot_classification(
    n_samples=1000, n_fields=8, n_levels=50, *, noise_scale=0.5, random_state=None
):
    """Binary classification on one-hot encoded categorical records (CSR).

    Each record has ``n_fields`` categorical fields of ``n_levels`` values each,
    drawn uniformly and one-hot encoded: ``X`` has ``n_fields * n_levels`` columns
    and exactly ``n_fields`` ones per row, so every per-example gradient of a linear
    model is ``n_fields``-sparse and every row has norm ``sqrt(n_fields)``. Both
    are facts of the public schema, to be declared to
    :class:`~skdpsco.SparseGradientDPClassifier` (``sparsity``,
    ``row_norm_bound``), never read from the data. The label is
    ``1[x . w + noise_scale * e > 0]`` with ``w ~ N(0, I)`` and logistic ``e``.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of records.
    n_fields : int, default=8
        Number of categorical fields (non-zeros per row).
    n_levels : int, default=50
        Number of values of each field.
    noise_scale : float, default=0.5
        Scale of the logistic label noise (0 for noise-free labels).
    random_state : None, int, RandomState or Generator, default=None
        Seed or generator; ``None`` draws fresh entropy.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_fields * n_levels)
        The one-hot design (float64 ones).
    y : ndarray of shape (n_samples,)
        Labels in {0, 1}.
    coef : ndarray of shape (n_fields * n_levels,)
        The true coefficients ``w``.

    Examples
    --------
    >>> from skdpsco.datasets import make_one_hot_classification
    >>> X, y, coef = make_one_hot_classification(100, n_fields=3, n_levels=4,
    ...                                          random_state=0)
    >>> X.shape, X.nnz, sorted(set(y.tolist())), coef.shape
    ((100, 12), 300, [0, 1], (12,))
    """
    import scipy.sparse as sp

    n = check_int(n_samples, "n_samples", low=1)
    fields = check_int(n_fields, "n_fields", low=1)
    levels = check_int(n_levels, "n_levels", low=1)
    noise_scale = check_real(noise_scale, "noise_scale", low=0.0)
    rng = _check_generator(random_state)
    cols = rng.integers(0, levels, size=(n, fields)) + np.arange(fields) * levels
    X = sp.csr_matrix(
        (np.ones(n * fields), cols.ravel(), np.arange(0, n * fields + 1, fields)),
        shape=(n, fields * levels),
    )
    coef = rng.normal(size=fields * levels)
    y = (X @ coef + noise_scale * rng.logistic(size=n) > 0).astype(int)
    return X, y, coef
