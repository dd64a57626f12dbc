"""Private mirror descent in l_p geometry (Su, Zhao & Wang, Algorithms 3 and 4,
Theorem 8).

* :func:`noisy_mirror_descent` — noisy regularized mirror descent for unconstrained
  l_p, ``1 < p < 2`` (Algorithm 3), with Gaussian noise on the public grid
  (:func:`mirror_descent_noise_scale`).
* :func:`phased_dp_sgd` — the ``p >= 2`` reduction of Theorem 8: Euclidean phased
  DP-SGD (Feldman, Koren & Talwar 2020) without projection.
* :func:`shuffled_mirror_descent` — shuffled truncated DP mirror descent for
  heavy-tailed gradients over a bounded set (Algorithm 4), private by amplification
  by shuffling (:mod:`skdpsco.privacy._shuffling`), or its batched variant.

Neighbours: replace-one record, ``n`` public. Every constant below is computed from
public inputs (``n``, ``d``, ``epsilon``, ``delta``, the public bounds and the set)
before any row is read; rows only enter through :class:`LinearDesign` aggregates.

Noise. The paper's Algorithms 3 and 4 add generalized Gaussian noise, density
``~ exp(-||z||_{q+}^2 / (2 sigma^2))`` (its Lemma 3). No sampler of it on a public
grid is known (a float draw leaves the holes of Mironov 2012), so every release
here is the Gaussian mechanism on the grid of
:class:`~skdpsco.privacy.GaussianMechanism`, with the l2-sensitivity that Hölder's
inequality gives, ``||v||_2 <= d^{1/2 - 1/q} ||v||_q`` for ``q >= 2``
(:func:`l2_sensitivity_factor`), calibrated exactly (Balle & Wang 2018; Dong,
Roth & Su 2022 for the ``T`` steps of Algorithm 3). It injects no more noise than
the GG mechanism in the norm the analysis reads: ``E ||z||_{q+}^2 <= d^{2 / q+}
(E|g|^{q+})^{2 / q+} sigma^2`` (:func:`gaussian_dual_moment`), about ``(q+ / e)
d sigma_G^2`` against the GG's ``d sigma^2`` at a ``sigma^2`` that carries the
factor ``kappa >= q+ - 1``.
"""

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._design import (
    RowClip,
    row_clip_scales,
    row_lr_norms,
    summation_slack,
)
from ..privacy._accounting import approx_dp_to_gdp
from ..privacy._discrete import uniform_permutation
from ..privacy._mechanisms import (
    AnalyticGaussianMechanism,
    GaussianMechanism,
    ParallelGaussianMechanism,
)
from ..privacy._shuffling import ShuffledGaussianRandomizers
from ..utils._validation import check_real
from ._progress import NO_PROGRESS
from ._result import SolverResult

__all__ = [
    "LpGeometry",
    "lp_geometry",
    "noisy_mirror_descent",
    "phased_dp_sgd",
    "shuffled_mirror_descent",
]

#: Largest number of noise coordinates Algorithm 4 draws (one d-vector per
#: record); larger problems are refused rather than run for hours.
MAX_LOCAL_NOISE_ENTRIES = 2 * 10**9


# ----------------------------------------------------------------- l_p geometry


def _norm(a, r):
    """``||a||_r`` of the flattened array, scaled by its max to avoid overflow."""
    a = np.abs(np.asarray(a, dtype=float)).reshape(1, -1)
    m = a.max() if a.size else 0.0
    if m == 0 or not math.isfinite(m):
        return float(m)
    return float(row_lr_norms(a, r)[0])


@dataclass(frozen=True)
class LpGeometry:
    """The l_p geometry of Su–Zhao–Wang, Definition 3 (mirror map, noise norm).

    Attributes
    ----------
    p, q : float
        Primal norm index and its dual ``q = p / (p - 1)``.
    dim : int
    kappa : float
        Regularity constant (multiplies the paper's GG privacy noise).
    kappa_plus : float
        Smoothness of the smooth dual norm ``||.||_{q_plus}``.
    q_plus, p_plus : float
        Norm index in which the noise is measured, and of the mirror map
        ``Phi(w) = (kappa / 2) ||w||_{p_plus}^2`` (1-strongly convex w.r.t. l_p).
    """

    p: float
    q: float
    dim: int
    kappa: float
    kappa_plus: float
    q_plus: float
    p_plus: float

    def phi(self, w):
        return 0.5 * self.kappa * _norm(w, self.p_plus) ** 2

    def grad_phi(self, w):
        # Powers of the normalised vector: no overflow for q_plus ~ 20.
        n = _norm(w, self.p_plus)
        if n == 0:
            return np.zeros_like(w)
        return self.kappa * n * np.sign(w) * (np.abs(w) / n) ** (self.p_plus - 1.0)

    def grad_phi_star(self, y):
        n = _norm(y, self.q_plus)
        if n == 0:
            return np.zeros_like(y)
        return (n / self.kappa) * np.sign(y) * (np.abs(y) / n) ** (self.q_plus - 1.0)


def lp_geometry(p, dim):
    """Mirror map and noise norm for l_p^dim, ``1 < p <= 2`` (Definition 3).

    Case A (``1/(p-1) <= 2e ln d`` or ``d = 1``): ``q_plus = q``,
    ``kappa = kappa_plus = 1/(p-1)``. Case B: ``q_plus = 2 ln d + 1``,
    ``kappa_plus = 2 ln d``, ``kappa = 2e ln d`` (the paper's Algorithms 3/4 print
    ``2 log d``; the regularity constant of Juditsky–Nemirovski is ``2e ln d``, and
    underestimating it under-noises). ``p_plus = 1 + 1/kappa_plus`` (the paper's
    index ``kappa/(kappa-1)`` is not 1-strongly convex w.r.t. l_p as ``p -> 2``).
    """
    if not (1.0 < p <= 2.0):
        raise ValueError(f"p must satisfy 1 < p <= 2, got {p!r}.")
    dim = int(dim)
    q = p / (p - 1.0)
    if dim == 1 or 1.0 / (p - 1.0) <= 2.0 * math.e * math.log(dim):
        kappa = kappa_plus = 1.0 / (p - 1.0)
        q_plus = q
    else:
        kappa_plus = 2.0 * math.log(dim)
        kappa = math.e * kappa_plus
        q_plus = 2.0 * math.log(dim) + 1.0
    p_plus = 1.0 + 1.0 / kappa_plus
    return LpGeometry(p, q, dim, kappa, kappa_plus, q_plus, p_plus)


# ---------------------------------------------------- rows: norms and clipping


def _row_chunks(design):
    """Row slices of the design's matrix, at most ``2**21`` entries each."""
    n, d = design.X.shape
    step = max(1, min(65536, 2**21 // max(d, 1)))
    for start in range(0, n, step):
        yield slice(start, min(start + step, n))


def _row_feature_norms(design, r):
    """``||x_i||_r`` of the feature part of every row (the intercept excluded).

    Reads the rows in chunks of the design's matrix (a per-row aggregate like
    :meth:`LinearDesign.row_norms`, for the l_r norm the l_p algorithms need),
    with the overflow-free :func:`~skdpsco._design.row_lr_norms`: a norm
    past the float range is ``inf``, and no record raises a floating-point warning.
    """
    out = np.empty(design.n_samples)
    for rows in _row_chunks(design):
        out[rows] = row_lr_norms(design.X[rows], r)
    return out


def _clip_scales(design, r, bound):
    """Per-row factors ``min(1, bound / ||x_i||_r)`` that clip the features.

    Clipping each row to the public bound (before anything else touches it) is what
    makes the worst-case Lipschitz and smoothness constants hold for every possible
    record (Su, Zhao & Wang's bounded-feature assumption); it is a function of one
    row only. Overflow-free
    (:func:`~skdpsco._design.row_clip_scales`): a row whose norm is past
    the float range is clipped like any other, not dropped, and a subnormal row
    raises no warning (a warning on one neighbour only would be a side channel).
    """
    out = np.empty(design.n_samples)
    for rows in _row_chunks(design):
        out[rows] = row_clip_scales(design.X[rows], r, bound)
    return out


def _augmented_norm_bound(bound, r, fit_intercept):
    """``||[x, 1]||_r`` bound for ``||x||_r <= bound``."""
    if not fit_intercept:
        return float(bound)
    # Scaled by the larger term: no overflow for large r (p near 1).
    m = max(float(bound), 1.0)
    return m * float(((bound / m) ** r + (1.0 / m) ** r) ** (1.0 / r))


def _check_noise(epsilon, sensitivity, sigma, what):
    """Refuse, for a finite ``epsilon``, a noise scale or sensitivity that the
    public bounds made 0, subnormal or infinite: the grid mechanism would then
    release without noise (``sigma = 0`` is the testing mode) or not at all. Public
    numbers only, so every neighbour gets the same error."""
    if math.isinf(epsilon):
        return
    tiny = np.finfo(float).tiny
    if not (tiny <= sensitivity < math.inf and tiny <= sigma < math.inf):
        raise ValueError(
            f"{what}: the public bounds give a sensitivity of {sensitivity:.3g} and "
            f"a noise scale of {sigma:.3g}, outside the normal float range; use "
            "bounds (row_norm_bound, truncation) nearer 1."
        )


#: The clipping factors of extreme rows are tiny (subnormal for a row near the
#: float limit), so products with them may underflow: harmless, and a warning
#: raised for one record only would tell neighbouring datasets apart.
_UNDERFLOW_OK = {"under": "ignore"}


def _predict(design, W, scales):
    """Predictions of the row-clipped design: ``s_i <x_i, w> + b``."""
    if not design.fit_intercept:
        Z = design.predict(W)
        with np.errstate(**_UNDERFLOW_OK):
            return Z * (scales if Z.ndim == 1 else scales[:, None])
    W0 = W.copy()
    W0[design.n_features] = 0.0
    Z = design.predict(W0)
    with np.errstate(**_UNDERFLOW_OK):
        Z = Z * (scales if Z.ndim == 1 else scales[:, None])
    return Z + W[design.n_features]


def _weighted_sum(design, C, scales):
    """``sum_i C_i [s_i x_i, 1]`` of the row-clipped design."""
    C = np.asarray(C, dtype=float)
    with np.errstate(**_UNDERFLOW_OK):
        C_scaled = C * (scales if C.ndim == 1 else scales[:, None])
    out = design.weighted_sum(C_scaled)
    if design.fit_intercept:
        out[design.n_features] = C.sum(axis=0)
    return out


def rounding_slack(n_features):
    """``1 + (d + 16) eps``: a public factor on a row bound that covers the
    rounding of a clipped row's norm (a sum of ``d`` terms: ``gamma_d``, Higham
    2002, eq. 3.5; :func:`~skdpsco._design.row_clip_scales` keeps the clipped
    row within the bound up to that rounding) and of a loss derivative."""
    return 1.0 + (float(n_features) + 16.0) * np.finfo(float).eps


def clipped_row_l2_bound(row_norm_bound, q, n_features, fit_intercept):
    """Public bound on ``||[s_i x_i, 1]||_2`` for rows clipped to ``||s_i x_i||_q
    <= R`` (:class:`~skdpsco._design.RowClip`), ``q >= 2``: ``||v||_2 <= d^{1/2 -
    1/q} ||v||_q`` (Hölder), the intercept column adding 1 in quadrature; times
    :func:`rounding_slack`."""
    d = max(int(n_features), 1)
    bound = float(row_norm_bound) * d ** max(0.0, 0.5 - 1.0 / float(q))
    if fit_intercept:
        bound = math.hypot(bound, 1.0)
    return bound * rounding_slack(n_features)


class RowDerivative:
    """``C_i = phi'(z_i, y_i)``, the coefficients of a gradient's row sum, with
    the targets clipped to ``[-R_y, R_y]`` where a bound is given (a function of
    one record). Picklable: on dask input it runs on the workers."""

    def __init__(self, loss, target_bound=None):
        self.loss = loss
        self.target_bound = None if target_bound is None else float(target_bound)

    def __call__(self, Z, y, row_norms=None):
        if self.target_bound is not None:
            y = np.clip(y, -self.target_bound, self.target_bound)
        return self.loss.derivative(Z, y)


def gradient_sum(design, W, derivative, bound, y, extended=False):
    """``X~^T C`` with ``C = derivative(X~ W, y)`` for stored rows (clipped
    already): summed exactly (:mod:`skdpsco._exact_sum`) where the design can
    (dense rows in memory, dask rows: the same bits), with the public ``bound``
    ``>= ||C_i x~_i||_2`` fixing the grid; sparse rows in float. ``extended``:
    the predictions accumulated in ``np.longdouble`` (a certificate's gradient,
    :func:`~._certified.prediction_error`)."""
    if design.exact_sums:
        return design.exact_fused_sum(W, derivative, bound, y, extended=extended)
    return design.weighted_sum(derivative(design.predict(W, extended=extended), y))


#: Entries per dense block of rows walked by the one-record-at-a-time loops.
_DENSE_BLOCK_ENTRIES = 2**20


def _clipped_dense_rows(design, rows, scales, y):
    """Yield ``(s_i x_i, y_i)`` for ``rows`` as dense blocks of bounded size.

    Sequential (one record per step) methods read rows one at a time; a dense block
    avoids per-row sparse indexing and never holds more than ``2**20`` entries.
    """
    step = max(1, _DENSE_BLOCK_ENTRIES // max(design.n_features, 1))
    for start in range(0, len(rows), step):
        block = rows[start : start + step]
        X_block = design.subset(block).X
        if sp.issparse(X_block):
            X_block = X_block.toarray()
        with np.errstate(**_UNDERFLOW_OK):
            X_block = np.asarray(X_block, dtype=float) * scales[block][:, None]
        yield X_block, y[block]


def _local_gaussian_sum(design, U, mechanism, rng):
    """``sum_i R(u_i x_i)``: every record's vector released by ``mechanism`` (a
    local randomizer on the public grid), in dense blocks of bounded size."""
    rows = np.arange(design.n_samples)
    U2 = U if U.ndim == 2 else U[:, None]
    out = np.zeros(design.n_features * U2.shape[1])
    step = max(1, _DENSE_BLOCK_ENTRIES // max(out.size, 1))
    for start in range(0, rows.size, step):
        block = rows[start : start + step]
        X_block = design.subset(block).X
        if sp.issparse(X_block):
            X_block = X_block.toarray()
        with np.errstate(**_UNDERFLOW_OK):
            V = np.asarray(X_block, dtype=float)[:, :, None] * U2[block][:, None, :]
        out += mechanism.release(V.reshape(block.size, -1), rng).sum(axis=0)
    return out if U.ndim == 1 else out.reshape(design.n_features, U2.shape[1])


def _param_shape(design, loss, n_classes):
    K = loss.n_outputs(n_classes)
    return (design.dim,) if K == 1 else (design.dim, K)


def _check_budget(budget, what, any_epsilon=False):
    """``(epsilon, delta)`` of the algorithm's :class:`AlgorithmBudget`, checked."""
    epsilon = check_real(
        budget.epsilon, "epsilon", low=0.0, low_open=True, allow_inf=True
    )
    if not any_epsilon and math.isfinite(epsilon) and epsilon > 1:
        # The paper's theorems (the parameter rules of Theorems 7 and 10, the
        # amplification of Algorithm 4) are stated for epsilon < 1; refuse rather
        # than extrapolate.
        raise ValueError(f"{what} is proven for epsilon <= 1 only, got {epsilon!r}.")
    delta = check_real(
        budget.delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True
    )
    return epsilon, delta


# ------------------------------------------------------------- Algorithm 3


def l2_sensitivity_factor(geom):
    """``d^{1/2 - 1/q}``: ``||v||_2 <= d^{1/2 - 1/q} ||v||_q`` for ``q >= 2``
    (Hölder), so a query whose sensitivity is ``s`` in the dual norm ``||.||_q``
    has l2-sensitivity at most ``d^{1/2 - 1/q} s``."""
    return float(geom.dim) ** (0.5 - 1.0 / geom.q)


def gaussian_dual_moment(geom, sigma):
    """Upper bound on ``E ||z||_{q+}^2`` for ``z ~ N(0, sigma^2 I_d)``.

    Jensen (``q+ >= 2``): ``E ||z||_{q+}^2 <= (E ||z||_{q+}^{q+})^{2 / q+} = (d
    E|g|^{q+})^{2 / q+} sigma^2`` with ``E|g|^r = 2^{r/2} Gamma((r + 1) / 2) /
    sqrt(pi)``. A public number (the step sizes of Algorithm 4 read it).
    """
    r = geom.q_plus
    log_moment = (
        0.5 * r * math.log(2.0) + math.lgamma((r + 1.0) / 2.0) - 0.5 * math.log(math.pi)
    )
    return sigma**2 * math.exp((2.0 / r) * (math.log(geom.dim) + log_moment))


def mirror_descent_noise_scale(l2_sensitivity, n_iter, epsilon, delta):
    """Noise ``sigma`` of every step of Algorithm 3.

    ``T`` Gaussian mechanisms of l2-sensitivity ``Delta`` and noise ``sigma`` compose
    to ``sqrt(T) Delta / sigma``-GDP (Dong, Roth & Su 2022, Cor 3.3), which is
    ``(epsilon, delta)``-DP at ``sigma = sqrt(T) Delta / mu``, ``mu`` the largest
    GDP parameter that implies ``(epsilon, delta)`` (their Cor 2.13). (The paper
    calibrates its GG noise by advanced composition, Lemmas 1 and 3.)
    """
    if math.isinf(epsilon):
        return 0.0
    return math.sqrt(n_iter) * l2_sensitivity / approx_dp_to_gdp(epsilon, delta)


def noisy_mirror_descent(
    design,
    y,
    loss,
    *,
    p,
    budget,
    row_norm_bound,
    n_classes=2,
    n_iter="auto",
    alpha_reg="auto",
    progress=NO_PROGRESS,
    rng,
):
    """Noisy regularized mirror descent, unconstrained l_p, ``1 < p < 2`` (Alg. 3).

    From ``w_1 = 0``, in dual coordinates ``y_t = grad Phi(w_t)``:
    ``y_{t+1} = (beta y_t - grad L^(w_t) - g_t) / (beta + alpha_reg)``,
    ``w_{t+1} = grad Phi*(y_{t+1})``, with ``g_t`` Gaussian noise on the public grid
    (the paper's ``GG_{||.||_{q+}}(0, sigma_md^2)``, see the module docstring);
    the output is the average of ``w_2..w_{T+1}`` with weights ``rho^t``,
    ``rho = (2 beta + alpha_reg) / (2 beta)`` (computed in log space).

    Rows are clipped to ``||x_i||_q <= row_norm_bound`` (public), so every
    per-sample gradient has ``||.||_q <= L = loss.lipschitz * R~_q`` with
    ``R~_q = (R_q^q + 1)^{1/q}`` when an intercept is fitted, and the smoothness
    w.r.t. ``||.||_p`` is ``beta = loss.smoothness * R~_q^2``. The loss must be
    Lipschitz on all of ``R^d`` (logistic, multinomial, Huber; not squared).

    The clipped rows are stored (one copy of ``X``; on dask, mapped chunk by
    chunk on the workers) and every full-batch gradient is summed exactly
    (:mod:`skdpsco._exact_sum`; dense rows in memory and dask rows give the
    same bits), with the public l2 bound ``loss.lipschitz ||[s_i x_i, 1]||_2
    <= loss.lipschitz sqrt(d^{1 - 2/q} R_q^2 + 1)`` fixing the grid. The Gaussian
    noise's l2-sensitivity is Hölder's ``2 L d^{1/2 - 1/q} / n`` of the exact mean
    plus the summation's slack (:func:`summation_slack`: the changed block's
    rounding, the grid, the float steps; sparse rows summed in float pay twice
    the float sum's error bound instead).

    Parameters
    ----------
    design : LinearDesign or DaskLinearDesign
    y : ndarray of shape (n,) (a dask array for a dask design)
    loss : loss object with finite ``lipschitz`` (per unit row norm)
    p : float
        ``1 < p < 2``.
    budget : AlgorithmBudget
        Its ``(epsilon, delta)``: ``0 < epsilon <= 1`` (``inf`` only in the hidden
        non-private testing mode).
    row_norm_bound : float
        Public ``R_q``: rows are clipped to this l_q norm, ``q = p / (p - 1)``.
    n_classes : int
        Number of classes (multinomial loss).
    n_iter : int or "auto"
        ``T``; ``"auto"``: ``clip(ceil((n eps kappa / sqrt(d ln(1/delta)))^{2/5}),
        1, n // 2)`` (Theorem 7 with the ``O(.)`` constant 1).
    alpha_reg : float or "auto"
        ``"auto"``: ``(4 beta / T) log2(n / T)`` (Theorem 7).
    progress : Progress or NoProgress, default=NO_PROGRESS
        Public progress reporter (:mod:`._progress`): the iteration and the
        Gaussian releases made so far.
    rng : numpy.random.Generator

    Returns
    -------
    SolverResult
        One ``approx_dp`` record: the whole run, ``(epsilon, delta)`` by exact GDP
        composition (:func:`mirror_descent_noise_scale`).

    References
    ----------
    .. [1] Su, J., Zhao, C. and Wang, D. Differentially private stochastic convex
       optimization in (non)-Euclidean space revisited, Algorithm 3, Theorem 7,
       Lemmas 1 and 3.
    """
    epsilon, delta = _check_budget(budget, "Algorithm 3")
    if not math.isfinite(loss.lipschitz):
        raise ValueError(
            f"Algorithm 3 needs a loss that is Lipschitz on all of R^d; "
            f"{loss.name!r} is not."
        )
    n = design.n_samples
    shape = _param_shape(design, loss, n_classes)
    geom = lp_geometry(p, int(np.prod(shape)))
    R = _augmented_norm_bound(row_norm_bound, geom.q, design.fit_intercept)
    L = loss.lipschitz * R
    beta = loss.smoothness * R**2
    d = geom.dim
    d_x = design.n_features
    if n_iter == "auto":
        eps_t = 1.0 if math.isinf(epsilon) else epsilon
        base = n * eps_t * geom.kappa / math.sqrt(d * math.log(1.0 / delta))
        n_iter = int(min(max(math.ceil(base**0.4), 1), max(n // 2, 1)))
    n_iter = int(n_iter)
    if alpha_reg == "auto":
        alpha_reg = 4.0 * beta / n_iter * math.log2(max(n / n_iter, 1.0))
    alpha_reg = float(alpha_reg)
    # Rows clipped to ||x||_q <= R_q: a map of each row (before anything else
    # reads it), so the clipped rows are the dataset the argument is about.
    clipped = design.row_mapped(RowClip(geom.q, row_norm_bound))
    # Public l2 bound on every row's gradient ||phi' x~_i||_2 (the grid of the
    # exact sums): |phi'| (||phi'||_2 for several outputs) <= loss.lipschitz.
    bound = (
        loss.lipschitz
        * clipped_row_l2_bound(row_norm_bound, geom.q, d_x, design.fit_intercept)
        * rounding_slack(1)
    )
    # One record moves the exact mean gradient by <= 2L/n in ||.||_q: l2 by
    # Hölder; the summation's rounding moves the computed mean by at most the
    # slack more (triangle inequality; doc/privacy.rst, "Floating-point
    # summation").
    sensitivity = 2.0 * L / n * l2_sensitivity_factor(geom) + summation_slack(
        clipped, bound, d
    )
    sigma = mirror_descent_noise_scale(sensitivity, n_iter, epsilon, delta)
    _check_noise(epsilon, sensitivity, sigma, "Algorithm 3")
    derivative = RowDerivative(loss)

    y_dual = np.zeros(shape)
    w = np.zeros(shape)
    log_rho = math.log1p(alpha_reg / (2.0 * beta))
    log_weights = log_rho * np.arange(1, n_iter + 1)
    weights = np.exp(log_weights - log_weights.max())
    weights /= weights.sum()
    coef = np.zeros(shape)
    gradient = GaussianMechanism(
        sensitivity, sigma, name="Gaussian full-batch gradients (Alg. 3)"
    )
    for t in range(n_iter):
        grad = gradient_sum(clipped, w, derivative, bound, y) / n
        noisy = gradient.release(grad, rng)
        y_dual = (beta * y_dual - noisy) / (beta + alpha_reg)
        w = geom.grad_phi_star(y_dual)
        coef += weights[t] * w
        if progress.due(t + 1, n_iter):
            progress.report(t + 1, n_iter, [gradient.record(t + 1)])
    # T Gaussian mechanisms: the ledger composes them exactly (Gaussian DP), with
    # the scaling's Gaussians too.
    return SolverResult(coef=coef, n_iter=n_iter, records=[gradient.record(n_iter)])


# ------------------------------------------------------------- Theorem 8


def phased_dp_sgd(
    design,
    y,
    loss,
    *,
    budget,
    row_norm_bound,
    norm_bound=1.0,
    p=2.0,
    n_classes=2,
    progress=NO_PROGRESS,
    rng,
):
    """Unconstrained l_p, ``p >= 2``: phased DP-SGD in l_2 (Theorem 8 reduction).

    Since ``q <= 2``, ``||g||_2 <= ||g||_q`` and ``||w||_p <= ||w||_2``, so the
    l_p assumptions imply l_2 Lipschitzness and smoothness with the same constants
    and the Euclidean algorithm applies (Feldman, Koren & Talwar 2020, Phased SGD,
    without projection; Theorem 8 states no parameters, these are the library's).
    ``k = ceil(log2 n)`` phases; phase ``i`` runs one pass of SGD over
    ``n_i = floor(2^-i n)`` fresh records with step ``eta_i = 4^-i eta`` from
    ``w_{i-1}`` (the previous release), averages its iterates and releases the
    average's move from ``w_{i-1}`` plus ``N(0, sigma_i^2 I)`` on the grid,
    ``sigma_i = 2 L eta_i / mu``, ``mu`` the exact Gaussian-DP parameter of
    ``(epsilon, delta)`` (FKT20's ``4 L eta_i sqrt(ln(1/delta)) / eps`` is looser:
    it uses about half the budget).

    Sensitivity: for ``eta_i <= 2/beta`` a gradient step of a convex
    ``beta``-smooth loss is non-expansive, so replacing the one record of phase
    ``i`` moves every later iterate of the pass, and the average, by at most
    ``2 L eta_i`` (FKT20, Lemma 4.3). ``eta = min(2/beta, (D0/L) min(4/sqrt(n),
    eps/sqrt(d ln(1/delta))))``: the cap ``2/beta`` is privacy-critical.
    Every phase has the same noise-to-sensitivity ratio and the phases use disjoint
    records (parallel composition), so the ledger holds one Gaussian release of
    that ratio.

    Parameters
    ----------
    design, y, loss
    budget : AlgorithmBudget
        Its ``(epsilon, delta)``.
    row_norm_bound : float
        Public ``R_q`` (``q = p/(p-1) <= 2``); rows are clipped to it.
    norm_bound : float, default=1.0
        Public ``D0 >= ||theta*||_2`` (step size only).
    p : float, default=2.0
        ``p >= 2`` (``np.inf`` allowed).
    n_classes : int
    progress : Progress or NoProgress, default=NO_PROGRESS
        Public progress reporter (:mod:`._progress`), after each phase; the
        phases' parallel composition costs the whole run's record from the first
        phase on, which is what it reports.
    rng : numpy.random.Generator

    Returns
    -------
    SolverResult

    References
    ----------
    .. [1] Su, Zhao & Wang, Theorem 8.
    .. [2] Feldman, V., Koren, T. and Talwar, K. (2020). Private stochastic convex
       optimization: optimal rates in linear time. STOC, Algorithm 2 (Phased SGD).
    """
    # Any epsilon: the phases' Gaussian noise is calibrated exactly (Gaussian DP),
    # whatever the budget; only Theorem 8's rate is stated for epsilon <= 1.
    epsilon, delta = _check_budget(budget, "Phased DP-SGD", any_epsilon=True)
    if not p >= 2:
        raise ValueError(f"the Theorem 8 reduction is for p >= 2, got {p!r}.")
    if not math.isfinite(loss.lipschitz):
        raise ValueError(f"loss {loss.name!r} is not Lipschitz on R^d.")
    q = 1.0 if math.isinf(p) else p / (p - 1.0)
    n = design.n_samples
    shape = _param_shape(design, loss, n_classes)
    d = int(np.prod(shape))
    R = _augmented_norm_bound(row_norm_bound, q, design.fit_intercept)
    L = loss.lipschitz * R
    beta = loss.smoothness * R**2
    eps_t = 1.0 if math.isinf(epsilon) else epsilon
    eta = min(
        2.0 / beta,
        (norm_bound / L)
        * min(4.0 / math.sqrt(n), eps_t / math.sqrt(d * math.log(1.0 / delta))),
    )
    # Noise-to-sensitivity ratio 1 / mu with mu the exact Gaussian-DP parameter of
    # (epsilon, delta) (Balle & Wang 2018, Thm 8): the whole budget is spent. The
    # papers' 2 sqrt(ln(1/delta)) / epsilon is a looser calibration that spent
    # epsilon 0.26 of 0.5 and 0.545 of 1.
    ratio = 0.0 if math.isinf(epsilon) else 1.0 / approx_dp_to_gdp(epsilon, delta)
    # Phase i's average has sensitivity 2 L eta_i (docstring): the release of
    # factor eta_i. The phases read disjoint records: parallel composition.
    phases = ParallelGaussianMechanism(
        2.0 * L,
        ratio,
        name="phased SGD averages (Thm 8 / FKT20; disjoint phases, parallel "
        "composition)",
    )
    scales = _clip_scales(design, q, row_norm_bound)
    order = rng.permutation(n)  # utility only; privacy needs no shuffling here
    w = np.zeros(shape)
    d_x = design.n_features
    start = 0
    n_steps = 0
    n_phases = max(1, math.ceil(math.log2(n)))
    planned = sum(n >> i for i in range(1, n_phases + 1))
    for i in range(1, n_phases + 1):
        n_i = n >> i
        if n_i == 0:
            break
        eta_i = eta / 4.0**i
        rows = order[start : start + n_i]
        start += n_i
        w_sum = np.zeros(shape)
        released = w.copy()  # the previous release (public): the pass starts here
        w = w.copy()
        for X_chunk, y_chunk in _clipped_dense_rows(design, rows, scales, y):
            for x, y_j in zip(X_chunk, y_chunk, strict=True):
                # One SGD step on one (clipped) record: the gradient is u (outer) x~.
                with np.errstate(**_UNDERFLOW_OK):
                    z = x @ w[:d_x] + (w[d_x] if design.fit_intercept else 0.0)
                    U = loss.derivative(np.asarray(z)[None], np.asarray([y_j]))[0]
                    w[:d_x] -= eta_i * np.multiply.outer(x, U)
                if design.fit_intercept:
                    w[d_x] -= eta_i * U
                w_sum += w
        n_steps += n_i
        # Sensitivity 2 L eta_i (docstring), sigma_i = ratio 2 L eta_i, on the
        # public grid (privacy page). Released as the move from the previous
        # release (public, so the sensitivity is the same; never the pass's last
        # iterate, which is private): the grid step shrinks with eta_i like 4^-i,
        # and the average itself would pass the grid's 2^52 steps in the last
        # phases of a large n.
        w = released + phases.release(w_sum / n_i - released, rng, factor=eta_i)
        if progress.due(n_steps, planned, n_i):
            progress.report(n_steps, planned, [phases.record()])
    return SolverResult(coef=w, n_iter=n_steps, records=[phases.record()])


# ------------------------------------------------------------- Algorithm 4


def _bregman_step(geom, constraint, theta, gamma):
    """``argmin_{w in C} gamma Phi(w) - <theta, w>`` (post-processing).

    l_{p+} ball (an l_p ball in Case A, or the l_2 ball for p = 2): the
    unconstrained point ``grad Phi*(theta / gamma)`` rescaled radially. l_1 ball:
    ``grad Phi*(S_mu(theta) / gamma)`` with the soft threshold ``mu >= 0`` found by
    bisection so that the l_1 norm equals the radius.
    """
    u = geom.grad_phi_star(theta / gamma)
    name = getattr(constraint, "name", None)
    R = float(constraint.radius)
    if name == "l1":
        if np.abs(u).sum() <= R:
            return u
        lo, hi = 0.0, float(np.abs(theta).max())
        for _ in range(200):
            mu = 0.5 * (lo + hi)
            w = geom.grad_phi_star(
                np.sign(theta) * np.maximum(np.abs(theta) - mu, 0.0) / gamma
            )
            if np.abs(w).sum() > R:
                lo = mu
            else:
                hi = mu
            if hi - lo <= 1e-15 * max(hi, 1e-300):
                break
        return geom.grad_phi_star(
            np.sign(theta) * np.maximum(np.abs(theta) - hi, 0.0) / gamma
        )
    norm = _norm(u, geom.p_plus)
    return u if norm <= R else u * (R / norm)


def _check_alg4_set(constraint, geom):
    name = getattr(constraint, "name", None)
    if name == "l1":
        return 2.0 * constraint.radius  # l_p diameter of the l_1 ball, p > 1
    if name == "lp" and abs(constraint.p - geom.p_plus) < 1e-12:
        return 2.0 * constraint.radius
    if name == "l2" and geom.p_plus == 2.0:
        return 2.0 * constraint.radius
    raise ValueError(
        "Algorithm 4 supports the l1 ball, the l_p ball of the same p (in the "
        f"regime 1/(p-1) <= 2e ln d) and the l2 ball for p = 2; got {name!r}."
    )


def _alg4_plan(n, d, geom, epsilon, delta, tau, sigma_g, beta, M, variant):
    """Public parameters of Algorithm 4.

    The paper gives ``sigma_loc``, ``T`` and ``lambda_tr`` up to constants only
    (Algorithm 4, Theorem 10). The shuffled plan takes Theorem 10 with constant 1,
    ``lambda_tr = sigma_g sqrt(n eps) / (kappa^2 d ln(1/delta))^(1/4)`` and
    ``T = n eps kappa / sqrt(d ln(1/delta))`` (``M`` normalised to 1); the batched
    plan balances the rate Table 2 states for the non-shuffled variant. Each plan
    carries its noise as a ``mechanism`` (privacy argument in
    :func:`shuffled_mirror_descent`).
    """
    eps_t = 1.0 if math.isinf(epsilon) else epsilon
    lndelta = math.log(1.0 / delta)
    plans = {}
    # Shuffled: per-record Gaussian local randomizer; two truncated gradients
    # differ by <= 2 tau in ||.||_q, so by <= 2 tau h in l2 (h of Hölder).
    h = l2_sensitivity_factor(geom)
    T = int(min(max(math.ceil(n * eps_t * geom.kappa / math.sqrt(d * lndelta)), 1), n))
    lam_tr = sigma_g * math.sqrt(n * eps_t) / (geom.kappa**2 * d * lndelta) ** 0.25
    t_sh = beta * M + lam_tr if tau == "auto" else float(tau)
    local = ShuffledGaussianRandomizers(
        2.0 * t_sh * h,
        epsilon,
        delta,
        n,
        name="shuffled Gaussian local randomizers (Alg. 4; FMT21 amplification)",
    )
    if local.amplifies:
        b = n // T
        plans["shuffled"] = dict(
            T=T,
            tau=t_sh,
            b=b,
            var=geom.kappa_plus * gaussian_dual_moment(geom, local.sigma) / b,
            mechanism=local,
        )
    # Batched: one Gaussian release per batch mean, sensitivity 2 tau h / b in
    # l2; parallel composition over disjoint batches.
    T_b = (n * eps_t) ** (2 / 3) / (geom.kappa ** (1 / 3) * (d * lndelta) ** (1 / 3))
    T_b = int(min(max(math.ceil(T_b), 1), n))
    lam_b = (
        sigma_g
        * (n * eps_t) ** (1 / 3)
        / (geom.kappa ** (2 / 3) * (d * lndelta) ** (1 / 6))
    )
    t_b = beta * M + lam_b if tau == "auto" else float(tau)
    b_b = n // T_b
    batch = AnalyticGaussianMechanism(
        2.0 * t_b * h / b_b,
        epsilon,
        delta,
        name="Gaussian batch means (Alg. 4 batched; parallel composition)",
    )
    plans["batched"] = dict(
        T=T_b,
        tau=t_b,
        b=b_b,
        var=geom.kappa_plus * gaussian_dual_moment(geom, batch.sigma),
        mechanism=batch,
    )
    if variant == "auto":
        variant = min(plans, key=lambda k: plans[k]["var"])
    if variant not in plans:
        raise ValueError(
            "the shuffled variant needs n > 16 ln(4/delta_s) records for any "
            "amplification; use variant='batched'."
        )
    return variant, plans[variant]


def _alg4_setup(design, loss, constraint, p, budget, variant, n_classes, plan_args):
    """Checks and public plan of Algorithm 4: ``(epsilon, geom, variant, plan)``."""
    epsilon, delta = _check_budget(budget, "Algorithm 4")
    if design.fit_intercept:
        raise ValueError("Algorithm 4 supports fit_intercept=False only.")
    if variant not in ("shuffled", "batched", "auto"):
        raise ValueError(f"variant must be shuffled/batched/auto, got {variant!r}.")
    n = design.n_samples
    shape = _param_shape(design, loss, n_classes)
    d = int(np.prod(shape))
    geom = lp_geometry(p, d)
    M = _check_alg4_set(constraint, geom)
    tau, grad_std_bound, smoothness = plan_args
    variant, plan = _alg4_plan(
        n, d, geom, epsilon, delta, tau, grad_std_bound, smoothness, M, variant
    )
    mechanism = plan["mechanism"]
    if (
        variant == "shuffled"
        and mechanism.sigma > 0
        and n * d > MAX_LOCAL_NOISE_ENTRIES
    ):
        raise ValueError(
            f"the shuffled variant draws one {d}-dimensional noise vector per record "
            f"({n * d:.3g} entries > {MAX_LOCAL_NOISE_ENTRIES:.0e}); use "
            "variant='batched'."
        )
    _check_noise(epsilon, mechanism.sensitivity, mechanism.sigma, "Algorithm 4")
    Phi_max = 0.5 * geom.kappa * float(constraint.radius) ** 2
    G2 = grad_std_bound**2 + (smoothness * M) ** 2 + plan["var"]
    plan["gamma"] = math.sqrt(plan["T"] * G2 / (2.0 * Phi_max))
    plan["shape"] = shape
    return epsilon, geom, variant, plan


def _alg4_mean_gradient(batch, U, epsilon, variant, plan, geom, rng):
    """The released mean of the batch's truncated gradients ``u_i x_i``."""
    b_t = batch.n_samples
    ones = np.ones(b_t)
    if math.isinf(epsilon):  # the non-private testing mode (tau may be inf)
        return _weighted_sum(batch, U, ones) / b_t
    if variant == "shuffled":
        # Each record's local randomizer: the Gaussian mechanism of l2-sensitivity
        # 2 tau h, released on the public grid; the sum of the released vectors is
        # post-processing.
        return _local_gaussian_sum(batch, U, plan["mechanism"], rng) / b_t
    # Batch mean: l2-sensitivity 2 tau h / b_t <= 2 tau h / b, b = floor(n / T)
    # the smallest batch size, released on the public grid.
    sensitivity = 2.0 * plan["tau"] * l2_sensitivity_factor(geom) / b_t
    g_sum = _weighted_sum(batch, U, ones)
    return plan["mechanism"].release(g_sum / b_t, rng, sensitivity=sensitivity)


def _truncate(U, row_q, tau, q):
    """Zero the rows whose gradient ``u_i x_i`` has ``||.||_q > tau``."""
    # ||u_i x_i||_q = ||u_i||_q ||x_i||_q (entrywise norm of an outer product),
    # each factor overflow-free. Their product may pass the float range (inf:
    # correctly above tau, so zeroed), underflow (a subnormal row, kept) or be
    # inf * 0 = NaN (a zero gradient, which zeroing leaves zero): all are
    # handled, so none warns.
    mag = np.abs(U) if U.ndim == 1 else row_lr_norms(U, q)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        keep = mag * row_q <= tau
    # Select, not multiply by a 0/1 mask: the squared loss's derivative of an
    # extreme record can be +-inf, and inf * 0 is NaN (NaN coefficients on one
    # neighbour only).
    return np.where(keep if U.ndim == 1 else keep[:, None], U, 0.0)


def shuffled_mirror_descent(
    design,
    y,
    loss,
    constraint,
    *,
    p,
    budget,
    grad_std_bound=1.0,
    smoothness=1.0,
    truncation_threshold="auto",
    variant="shuffled",
    n_classes=2,
    progress=NO_PROGRESS,
    rng,
):
    """Shuffled truncated DP mirror descent for heavy-tailed data (Algorithm 4).

    One pass over a secret uniformly random permutation of the records, cut into
    ``T`` consecutive batches (sizes differ by at most one). At step ``t`` every
    record ``x`` of batch ``t`` sends ``m_x = g_x + Z_x`` with
    ``g_x = grad l(w_{t-1}, x)`` if ``||g_x||_q <= tau`` else ``0`` (zeroing, not
    rescaling) and its own Gaussian noise on the public grid (Remark 4's local
    randomizer, with the Gaussian for the paper's ``GG_{||.||_{q+}}``);
    then ``w_t = argmin_{w in C} gamma Phi(w) - <gamma grad Phi(w_{t-1}) -
    mean_x m_x, w>``. Output: the average of ``w_1..w_T``; ``w_0 = 0``.

    Privacy (shuffled): two truncated gradients differ by at most ``2 tau`` in
    ``||.||_q``, hence by ``2 tau d^{1/2 - 1/q}`` in l2, so each message is an
    ``(eps0, delta0)``-DP local randomizer with ``sigma_loc`` the analytic
    Gaussian calibration (Balle & Wang 2018) of that sensitivity (the paper's
    ``sigma_loc^2 = 8 kappa tau^2 ln(1/delta0) / eps0^2``, Lemma 3, is for its GG
    noise), adaptive in the earlier messages only; amplification by shuffling
    (FMT21, Thms 3.1/3.8) gives ``(eps, delta_s + (e^eps+1)(1+e^{-eps0}/2) n
    delta0)`` with ``delta_s = delta/2``, ``delta0 = delta / (3 n (e^eps + 1))``,
    and ``eps0`` the largest value ``<= 1`` with amplified epsilon ``<= eps``.
    When the cap ``eps0 <= 1`` binds (``eps`` above about ``n^{-1/2}``), the
    *achieved* epsilon is smaller than asked, and that is what the ledger records.

    Privacy (batched, ``variant="batched"``, any ``0 < eps <= 1``): one
    Gaussian release per batch mean, of l2-sensitivity ``2 tau d^{1/2 - 1/q} /
    b`` and analytic ``(eps, delta)`` calibration; every record is in one batch
    (parallel composition).
    ``variant="auto"`` picks, from public quantities, the smaller injected variance.

    Parameters
    ----------
    design : LinearDesign
        ``fit_intercept=False`` (the Bregman step is not separable).
    y : ndarray
    loss : loss object
    constraint : ConstraintSet
        ``L1Ball``, ``LpBall`` with the same ``p`` (Case A), or ``L2Ball`` with
        ``p = 2`` (heavy-tailed ``p >= 2``: reduced to the Euclidean case, as the
        paper suggests after Theorem 10, by running with ``p = 2``).
    p : float
        ``1 < p <= 2``.
    budget : AlgorithmBudget
        Its ``(epsilon, delta)``, ``0 < epsilon <= 1``.
    grad_std_bound : float, default=1.0
        ``sigma_g`` of Assumption 4 (utility only: sets ``tau`` and ``T``).
    smoothness : float, default=1.0
        ``beta`` w.r.t. ``||.||_p`` (utility only).
    truncation_threshold : float or "auto"
        Public ``tau``; ``"auto"``: ``beta M + lambda_tr`` (Algorithm 4, step 6).
    variant : {"shuffled", "batched", "auto"}
    n_classes : int
    progress : Progress or NoProgress, default=NO_PROGRESS
        Public progress reporter (:mod:`._progress`); the batches are disjoint,
        so the run's record holds from the first batch on, and is reported.
    rng : numpy.random.Generator
        Source of the permutation and of all noise.

    Returns
    -------
    SolverResult
        One ``approx_dp`` record with the achieved ``(epsilon, delta)``.

    References
    ----------
    .. [1] Su, Zhao & Wang, Algorithm 4, Theorems 9 and 10, Remark 4.
    .. [2] Feldman, V., McMillan, A. and Talwar, K. (2021). Hiding among the
       clones. FOCS.
    """
    epsilon, geom, variant, plan = _alg4_setup(
        design,
        loss,
        constraint,
        p,
        budget,
        variant,
        n_classes,
        (truncation_threshold, grad_std_bound, smoothness),
    )
    n = design.n_samples
    T, tau, gamma = plan["T"], plan["tau"], plan["gamma"]
    row_q = _row_feature_norms(design, geom.q)
    # The shuffle is part of the mechanism (shuffle model): from the secure source.
    order = uniform_permutation(rng, n)
    w = np.zeros(plan["shape"])
    coef = np.zeros(plan["shape"])
    for t, rows in enumerate(np.array_split(order, T)):
        batch = design.subset(rows)
        U = loss.derivative(_predict(batch, w, np.ones(rows.size)), y[rows])
        U = _truncate(U, row_q[rows], tau, geom.q)
        g_bar = _alg4_mean_gradient(batch, U, epsilon, variant, plan, geom, rng)
        theta = gamma * geom.grad_phi(w) - g_bar
        w = _bregman_step(geom, constraint, theta, gamma)
        coef += w / T
        if progress.due(t + 1, T):
            progress.report(t + 1, T, [plan["mechanism"].record()])
    return SolverResult(coef=coef, n_iter=T, records=[plan["mechanism"].record()])
