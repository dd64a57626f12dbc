"""Private means of sparse vectors: the projection mechanism and Gaussian l1-recovery.

Setting (Ghazi et al., §2-3): every per-example vector ``g_i`` (a per-sample gradient
``u_i (outer) x~_i`` of a linear model) has at most ``s`` non-zeros and l2 norm at
most ``L``; the mean can then be estimated with an error that depends on
``s polylog(d)`` instead of ``d``.

Nothing here *assumes* sparsity. Every per-example vector is first mapped, on its own
and with public constants only, into ``{g : ||g||_2 <= L, ||g||_1 <= L sqrt(s)}``
(scaling by ``min(1, L / ||g||_2, L sqrt(s) / ||g||_1)``): an s-sparse vector of norm
``<= L`` is left untouched because ``||g||_1 <= sqrt(s) ||g||_2`` (Remark 2.1), and a
denser or larger one is shrunk. Every sensitivity below holds for that set, whatever
the data (Ghazi et al., Remark 2.1: the paper's bounds hold on this set).

Neighbouring relation: replace-one record, ``n`` (the number of rows averaged) public.

References
----------
.. [1] Ghazi, B., Guzman, C., Kamath, P., Kumar, R. and Manurangsi, P.
   "Differentially Private Optimization with Sparse Gradients". Algorithm 1
   (projection mechanism, Lemma 3.1, Theorems 3.2-3.3), Algorithm 2 (Gaussian
   l1-recovery, Theorem 3.4), Remark 2.1 (l1 relaxation of sparsity).
"""

import math

import numpy as np
import scipy.sparse as sp
from scipy import linalg, optimize

from .._constraints import project_l1_ball
from .._exact_sum import exact_mean_sensitivity, exact_sum_slack, float_sum_error
from ..privacy._accounting import calibrate_analytic_gaussian
from ..privacy._mechanisms import GaussianMechanism, LaplaceMechanism
from ..privacy._params import _NON_PRIVATE
from ..utils._validation import check_int, check_real
from ._clipped import clip_coefficients, shrink_coefficients, shrink_to_caps
from ._oracle import GradientMeanOracle, LossDerivative, SingleMechanismOracle

__all__ = [
    "MAX_MEASUREMENT_ENTRIES",
    "L1RecoveryMeanOracle",
    "ProjectionMeanOracle",
    "SparseClippedCoefficients",
    "basis_pursuit",
    "projection_mean",
    "sparse_clip_coefficients",
]

#: Largest ``m * d`` (entries of the dense Gaussian measurement matrix of Algorithm 2)
#: accepted: 2e8 float64 entries are 1.6 GB. Larger problems are refused before any
#: data is touched (the sizes are public).
MAX_MEASUREMENT_ENTRIES = 200_000_000

#: Problems with at most this many matrix entries are decoded exactly by linear
#: programming (HiGHS); larger ones by Douglas-Rachford splitting.
_LP_MAX_ENTRIES = 1_000_000


# ----------------------------------------------------------------- clipping


def _check_bounds(norm_bound, sparsity):
    return (
        check_real(norm_bound, "norm_bound", low=0, low_open=True),
        check_int(sparsity, "sparsity", low=1),
    )


def _check_budget(epsilon, delta):
    """``epsilon > 0`` (``inf`` only in the hidden testing mode), ``0 <= delta < 1``."""
    return (
        check_real(
            epsilon, "epsilon", low=0, low_open=True, allow_inf=_NON_PRIVATE.get()
        ),
        check_real(delta, "delta", low=0, high=1, high_open=True),
    )


def sparse_clip_coefficients(U, row_l2, row_l1, norm_bound, sparsity):
    """Per-sample coefficients ``c_i`` putting ``c_i (outer) x_i`` in the sparse set.

    The per-sample gradient ``u_i (outer) x_i`` has l2 norm ``||u_i||_2 ||x_i||_2``
    and l1 norm ``||u_i||_1 ||x_i||_1``. The returned ``c_i = t_i u_i`` with
    ``t_i = min(1, L / (||u_i||_2 ||x_i||_2), L sqrt(s) / (||u_i||_1 ||x_i||_1))``
    makes ``||c_i (outer) x_i||_2 <= L`` and ``||c_i (outer) x_i||_1 <= L sqrt(s)``
    for every input (Remark 2.1 says the upper bounds of the paper hold on this
    set). Gradients that are s-sparse with l2 norm ``<= L`` are
    untouched. Infinite norms give 0, NaN coefficients become 0.

    Parameters
    ----------
    U : ndarray of shape (n,) or (n, K)
    row_l2, row_l1 : ndarray of shape (n,)
        ``||x_i||_2`` and ``||x_i||_1`` (may be ``inf``).
    norm_bound : float
        ``L``.
    sparsity : int
        ``s``, the declared number of non-zeros of a per-sample gradient.

    Returns
    -------
    ndarray of the shape of ``U``

    References
    ----------
    .. [1] Ghazi et al., "Differentially Private Optimization with Sparse
       Gradients", Remark 2.1.
    """
    L, s = _check_bounds(norm_bound, sparsity)
    C = clip_coefficients(U, row_l2, L)  # l2 part, overflow-safe
    # l1 part: ||c_i||_1 ||x_i||_1 brought down to L sqrt(s).
    return shrink_coefficients(
        C, row_l1, L * math.sqrt(s), lambda unit: np.sum(np.abs(unit), axis=1)
    )


def _row_norms_l2_l1(G):
    """``(||g_i||_2, ||g_i||_1)`` of the rows of a dense or sparse matrix.

    Rows are scaled by their largest entry first, so a norm is finite whenever it is
    representable; a row with a non-finite entry gets norms ``inf`` (it is zeroed by
    the clipping). Duplicate sparse entries are summed first (the matrix products
    downstream sum them too).
    """
    if sp.issparse(G):
        G = sp.csr_matrix(G, copy=True)
        G.sum_duplicates()
        bad = ~np.isfinite(G.data)
        absd = np.abs(np.where(bad, 0.0, G.data))
        row_of = np.repeat(np.arange(G.shape[0]), np.diff(G.indptr))
        nonfinite = np.zeros(G.shape[0], bool)
        nonfinite[row_of[bad]] = True
        scale = np.zeros(G.shape[0])
        np.maximum.at(scale, row_of, absd)
        safe = np.where(scale > 0, scale, 1.0)
        scaled = absd / safe[row_of]
        sq = np.bincount(row_of, scaled * scaled, minlength=G.shape[0])
        ab = np.bincount(row_of, scaled, minlength=G.shape[0])
    else:
        G = np.asarray(G, dtype=float)
        finite = np.isfinite(G)
        nonfinite = ~finite.all(axis=1)
        A = np.abs(np.where(finite, G, 0.0))
        scale = A.max(axis=1) if G.shape[1] else np.zeros(G.shape[0])
        safe = np.where(scale > 0, scale, 1.0)
        scaled = A / safe[:, None]
        sq = np.einsum("ij,ij->i", scaled, scaled)
        ab = scaled.sum(axis=1)
    with np.errstate(over="ignore"):
        l2 = np.where(scale > 0, safe * np.sqrt(sq), 0.0)
        l1 = np.where(scale > 0, safe * ab, 0.0)
    l2[nonfinite] = np.inf
    l1[nonfinite] = np.inf
    return l2, l1


def _clipped_row_mean(G, norm_bound, sparsity):
    """``(1/m) sum_i t_i g_i`` with every ``t_i g_i`` in the sparse set (see above)."""
    l2, l1 = _row_norms_l2_l1(G)
    t = sparse_clip_coefficients(np.ones(G.shape[0]), l2, l1, norm_bound, sparsity)
    if sp.issparse(G):
        G = sp.csr_matrix(G)
        Gf = G.copy()
        Gf.data = np.where(np.isfinite(Gf.data), Gf.data, 0.0)
        total = np.asarray(Gf.T @ t, dtype=float).ravel()
    else:
        G = np.asarray(G, dtype=float)
        total = np.where(np.isfinite(G), G, 0.0).T @ t
    return total / G.shape[0], t


# ------------------------------------------------------ Algorithm 1 (projection)


def _projection_mechanism(noise, sensitivity, budget, name):
    """The Laplace (pure, ``budget = epsilon``) or Gaussian (``budget = sigma``)
    mechanism of Algorithm 1."""
    if noise == "laplace":
        return LaplaceMechanism.from_epsilon(sensitivity, budget, name=name)
    return GaussianMechanism(sensitivity, budget, name=name)


def _release_projected(mean, mechanism, radius, rng):
    """``(Pi_{B_1(radius)}(mean + xi), mean + xi)``: Algorithm 1's noisy step and its
    post-processing, with the pre-projection value returned for tests (Lemma 3.1)."""
    noisy = mechanism.release(mean, rng)
    return project_l1_ball(noisy, radius), noisy


def projection_mean(G, *, norm_bound, sparsity, epsilon, delta, rng):
    """Private mean of per-example sparse vectors by the projection mechanism.

    Algorithm 1 of Ghazi et al.: every row ``g_i`` of ``G`` is first mapped into
    ``{g : ||g||_2 <= L, ||g||_1 <= L sqrt(s)}`` (scaling by
    ``min(1, L/||g_i||_2, L sqrt(s)/||g_i||_1)``, a no-op on s-sparse rows of norm
    ``<= L``); the mean over the ``m`` rows gets dense noise and is projected onto the
    l1 ball of radius ``L sqrt(s)``, which contains the clipped mean (so the projection
    only removes noise).

    Privacy (replace-one, ``m`` public): two clipped rows differ by at most ``2L`` in
    l2 and ``2 L sqrt(s)`` in l1, so the mean has l2-sensitivity ``2L/m`` and
    l1-sensitivity ``2 L sqrt(s) / m`` (Fact 2.3, Algorithm 1).

    * ``delta == 0``: Laplace noise of scale ``2 L sqrt(s) / (m epsilon)`` on every
      coordinate, ``epsilon``-DP.
    * ``delta > 0``: Gaussian noise, ``sigma`` from the analytic Gaussian calibration
      (Balle & Wang 2018) of l2-sensitivity ``2L/m`` at ``(epsilon, delta)``; valid for
      every ``epsilon`` (the paper's classical ``sigma`` needs ``epsilon < 1``).

    The projection is post-processing. Error (Lemma 3.1, every noise draw):
    ``||out - mean||_2 <= sqrt(2 L sqrt(s) ||xi||_inf)``.

    Parameters
    ----------
    G : ndarray or scipy.sparse matrix of shape (m, d)
        Per-example vectors, one per row (e.g. ``diag(u) X_B`` for the gradients of
        a batch ``B``). Rows with a non-finite entry count as the zero vector.
    norm_bound : float
        ``L``, public l2 bound on a per-example vector.
    sparsity : int
        ``s``, public bound on the number of non-zeros of a per-example vector.
    epsilon : float
        ``> 0``; ``inf`` only inside the hidden non-private testing mode, where the
        exact clipped mean is returned.
    delta : float
        ``0`` for pure DP (Laplace), ``(0, 1)`` for approximate DP (Gaussian).
    rng : numpy.random.Generator

    Returns
    -------
    estimate : ndarray of shape (d,)
        Lies in the l1 ball of radius ``L sqrt(s)``.
    record : MechanismRecord
        One ledger record (kind ``"laplace"`` or ``"gaussian"``) for the accountant.

    References
    ----------
    .. [1] Ghazi et al., "Differentially Private Optimization with Sparse
       Gradients", Algorithm 1, Lemma 3.1, Theorems 3.2 and 3.3.
    .. [2] Balle, B. and Wang, Y.-X. (2018). Improving the Gaussian mechanism for
       differential privacy. ICML.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> G = sp.random(100, 10_000, density=5e-4, format="csr", random_state=0)
    >>> est, rec = projection_mean(G, norm_bound=1.0, sparsity=5, epsilon=1.0,
    ...                            delta=1e-6, rng=np.random.default_rng(0))
    >>> est.shape, rec.kind, bool(np.abs(est).sum() <= np.sqrt(5) + 1e-9)
    ((10000,), 'gaussian', True)
    """
    L, s = _check_bounds(norm_bound, sparsity)
    epsilon, delta = _check_budget(epsilon, delta)
    m = G.shape[0]
    if m < 1:
        raise ValueError("projection_mean needs at least one row.")
    mean, _ = _clipped_row_mean(G, L, s)
    if delta == 0:
        # l1: ||t_i g_i - t'_i g'_i||_1 <= 2 L sqrt(s) (both in the l1 ball), / m.
        mech = _projection_mechanism(
            "laplace", 2.0 * L * math.sqrt(s) / m, epsilon, "projection sparse mean"
        )
    else:
        # l2: ||t_i g_i - t'_i g'_i||_2 <= 2L (both in the l2 ball), / m.
        sensitivity = 2.0 * L / m
        sigma = calibrate_analytic_gaussian(epsilon, delta, sensitivity)
        mech = _projection_mechanism(
            "gaussian", sensitivity, sigma, "projection sparse mean"
        )
    estimate, _ = _release_projected(mean, mech, L * math.sqrt(s), rng)
    return estimate, mech.record()


# --------------------------------------------------- Algorithm 2 (l1-recovery)


def basis_pursuit(A, b, *, solver="auto", max_iter=500):
    """Approximate ``argmin ||z||_1 subject to A z = b`` (basis pursuit).

    Decoding step of Algorithm 2. It only sees the public matrix ``A`` and the
    already-private measurement ``b``, so it is post-processing: any solver, any
    stopping rule and any accuracy keeps the privacy guarantee.

    Parameters
    ----------
    A : ndarray of shape (m, d)
        Measurement matrix, full row rank (Gaussian with ``m <= d``).
    b : ndarray of shape (m,)
    solver : {"auto", "linprog", "douglas_rachford"}, default="auto"
        ``"linprog"``: the exact linear program ``z = p - q``, ``p, q >= 0``,
        ``min sum(p + q)`` s.t. ``A (p - q) = b`` (HiGHS). ``"douglas_rachford"``:
        ``max_iter`` iterations of Douglas-Rachford splitting between
        ``gamma ||z||_1`` (soft-thresholding) and the affine set (projection via a
        Cholesky factor of ``A A^T``), with ``gamma`` one tenth of the largest entry
        of the least-norm solution. ``"auto"``: linprog up to 1e6 matrix entries.
    max_iter : int, default=500
        Douglas-Rachford iterations.

    Returns
    -------
    z : ndarray of shape (d,)
    """
    A = np.asarray(A, dtype=float)
    b = np.asarray(b, dtype=float)
    m, d = A.shape
    if solver == "auto":
        solver = "linprog" if m * d <= _LP_MAX_ENTRIES else "douglas_rachford"
    if solver == "linprog":
        res = optimize.linprog(
            np.ones(2 * d),
            A_eq=np.hstack([A, -A]),
            b_eq=b,
            bounds=(0, None),
            method="highs",
        )
        if res.status == 0:
            return res.x[:d] - res.x[d:]
        solver = "douglas_rachford"  # numerical trouble: fall back (post-processing)
    if solver != "douglas_rachford":
        raise ValueError(
            f"solver must be 'auto', 'linprog' or 'douglas_rachford', got {solver!r}."
        )
    chol = linalg.cho_factor(A @ A.T)

    def onto_affine(v):
        return v - A.T @ linalg.cho_solve(chol, A @ v - b)

    w = A.T @ linalg.cho_solve(chol, b)  # least-norm solution
    gamma = 0.1 * float(np.max(np.abs(w))) if d else 0.0
    if gamma == 0.0:
        return np.zeros(d)
    z = w
    for _ in range(int(max_iter)):
        z = onto_affine(w)
        x = 2.0 * z - w
        x = np.sign(x) * np.maximum(np.abs(x) - gamma, 0.0)
        w = w + x - z
    return z


def _clip_rows_l2(M, bound):
    """Scale every row of ``M`` to l2 norm ``<= bound`` (overflow-safe; a row with a
    non-finite entry becomes 0)."""
    M = np.where(np.isfinite(M), M, 0.0)
    bad = ~np.isfinite(M).all(axis=1)
    scale = np.max(np.abs(M), axis=1) if M.shape[1] else np.zeros(M.shape[0])
    safe = np.where(scale > 0, scale, 1.0)
    norms = safe * np.linalg.norm(M / safe[:, None], axis=1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        factor = np.where(norms > bound, bound / norms, 1.0)
    factor[bad] = 0.0
    return M * factor[:, None]


def _l1_recovery_branch(n, d, s, scale, n_measurements, max_entries, what):
    """Public branch of Algorithm 2: ``("dense" | "zero" | "cs", m)``.

    ``scale`` is the paper's ``n epsilon / sqrt(ln(1/delta))`` (``inf`` in the testing
    mode). Everything here depends on public numbers only, so a refusal reveals
    nothing about the data.
    """
    if n_measurements is not None:
        m = int(n_measurements)
        if m < 1:
            raise ValueError(f"n_measurements must be >= 1, got {n_measurements!r}.")
    elif math.isinf(scale):
        return "dense", math.inf
    else:
        # m ~ n eps sqrt(s ln(d/s) / ln(1/delta)) (Algorithm 2; constant c_m folded
        # into ``scale``); guard m >= 1.
        m = max(1, math.ceil(scale * math.sqrt(s * math.log(max(d / s, 1.0)))))
    # Low-dimensional branch of Algorithm 2, also taken when s >= d/2, where
    # ln(d/s) <= ln 2 and compressed sensing cannot help.
    if 2 * s >= d or d < m * math.log(m) ** 2:
        return "dense", m
    if m < s * math.log(d / s):
        # nε < sqrt(s ln(d/s) ln(1/δ)): even the optimal rate is trivial; the
        # zero vector is as good and uses no data.
        return "zero", m
    if m * d > max_entries:
        raise ValueError(
            f"{what}: the Gaussian l1-recovery mechanism (Ghazi et al. Algorithm 2) "
            f"needs a dense {m} x {d} measurement matrix ({m * d:.3g} entries), above "
            f"the limit of {max_entries:.3g} entries (MAX_MEASUREMENT_ENTRIES = "
            f"{MAX_MEASUREMENT_ENTRIES:.3g}, 8 bytes each). Use the projection "
            "mechanism (Algorithm 1) instead, or a smaller problem."
        )
    return "cs", m


def _decode(A, b, norm_bound, solver, max_iter):
    """Basis pursuit, then Algorithm 2's last line: zero out if ``||z|| > 2L``."""
    z = basis_pursuit(A, b, solver=solver, max_iter=max_iter)
    return z if np.linalg.norm(z) <= 2.0 * norm_bound else np.zeros_like(z)


def _measurement_matrix(m, d, rng):
    # Public randomness, drawn independently of the data; entries N(0, 1/m) read
    # as variance 1/m (Algorithm 2's measurement matrix). Releasing A is harmless.
    from ..privacy._mechanisms import gaussian_noise

    return gaussian_noise(rng, 1.0 / math.sqrt(m), (m, d))


# ------------------------------------------------------------------- oracles


class SparseClippedCoefficients:
    """The row-wise map ``(Z, y, caps) -> C`` of loss derivatives clipped into
    the sparse set: ``||C_i x~_i||_2 <= L`` and ``||C_i x~_i||_1 <= L sqrt(s)``
    (:func:`sparse_clip_coefficients`, Ghazi et al., Remark 2.1).

    ``caps`` holds, per row, ``L / ||x~_i||_2`` and ``L sqrt(s) / ||x~_i||_1``
    (:meth:`row_statistic`, ``inf`` for a zero row), made once per design from
    both row norms (``row_norm_orders``). A scalar derivative is clipped to the
    smaller cap (the two successive clips of :func:`sparse_clip_coefficients`);
    a vector one is shrunk to l2 norm ``L / ||x~_i||_2``, then to l1 norm
    ``L sqrt(s) / ||x~_i||_1``. A function of each row and public values only,
    picklable: it runs on the workers of a dask design and on blocks of rows in
    memory.

    Parameters
    ----------
    loss : loss object from :mod:`skdpsco._losses`
    norm_bound : float
        ``L``.
    sparsity : int
        ``s``.
    """

    #: The statistic reads the l2 and the l1 norm of every row.
    row_norm_orders = (2, 1)

    def __init__(self, loss, norm_bound, sparsity):
        self.loss = loss
        self.norm_bound, self.sparsity = _check_bounds(norm_bound, sparsity)

    @property
    def statistic_key(self):
        """What :meth:`row_statistic` depends on besides the rows."""
        return ("sparse clip caps", self.norm_bound, self.sparsity)

    def row_statistic(self, row_l2, row_l1):
        """``[L / ||x~_i||_2, L sqrt(s) / ||x~_i||_1]`` per row, shape (n, 2)."""
        bounds = (self.norm_bound, self.norm_bound * math.sqrt(self.sparsity))
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            return np.stack(
                [
                    np.where(norm > 0, bound / norm, np.inf)
                    for bound, norm in zip(bounds, (row_l2, row_l1), strict=True)
                ],
                axis=1,
            )

    def __call__(self, Z, y, caps):
        U = self.loss.derivative(Z, y)
        # NaN (none arises from finite predictions) counts as 0.
        U = np.where(U == U, U, 0.0)
        if U.ndim > 1:
            U = shrink_to_caps(U, caps[:, 0], lambda v: np.linalg.norm(v, axis=1))
            return shrink_to_caps(U, caps[:, 1], lambda v: np.sum(np.abs(v), axis=1))
        cap = np.minimum(caps[:, 0], caps[:, 1])
        return np.minimum(np.maximum(U, -cap, out=U), cap, out=U)


def _exact_sparse_sum(design, W, derivative, oracle, sample_weight):
    """``X~^T C`` of the coefficients clipped into the sparse set, summed exactly
    (:meth:`LinearDesign.exact_fused_sum`), or None where the design's rows are
    summed in floating point (sparse rows) or the derivative is not a loss's."""
    if not (
        oracle.exact_sums
        and getattr(design, "exact_sums", False)
        and isinstance(derivative, LossDerivative)
    ):
        return None
    coefficients = SparseClippedCoefficients(
        derivative.loss, oracle.norm_bound, oracle.sparsity
    )
    return design.exact_fused_sum(
        W, coefficients, oracle.norm_bound, derivative.y, sample_weight
    )


def _summation_slack(exact_sums, norm_bound, n_samples, n_coordinates):
    """What the summation adds to the l2 sensitivity ``2 L / n`` of a mean of rows
    with ``||C_i x~_i||_2 <= L``: the exact sums' ``exact_sum_slack``, or twice a
    float sum's error bound ``float_sum_error`` (a float sum's rounding differs
    between neighbours; Casacuberta et al. 2022, Section 4)."""
    if exact_sums:
        return exact_sum_slack(norm_bound, n_samples, n_coordinates)
    return 2.0 * float_sum_error(norm_bound, n_samples)


def _mean_sensitivity(exact_sums, norm_bound, n_samples, n_coordinates):
    """l2 sensitivity of the computed mean: ``2 L / n`` and the summation's
    slack (:func:`_summation_slack`)."""
    if exact_sums:
        return exact_mean_sensitivity(norm_bound, n_samples, n_coordinates)
    slack = _summation_slack(False, norm_bound, n_samples, n_coordinates)
    return 2.0 * norm_bound / max(int(n_samples), 1) + slack


class _SparseOracleBase(SingleMechanismOracle, GradientMeanOracle):
    """Shared validation and per-sample clipping of the sparse-gradient oracles."""

    def __init__(self, norm_bound=1.0, sparsity=1, exact_sums=True):
        self.norm_bound, self.sparsity = _check_bounds(norm_bound, sparsity)
        self.exact_sums = bool(exact_sums)

    def _clipped_coefficients(self, design, U, sample_weight):
        # Every per-sample gradient c_i (outer) x~_i then has ||.||_2 <= L and
        # ||.||_1 <= L sqrt(s), whatever the rows (see sparse_clip_coefficients).
        # Public weights in [0, 1] applied after clipping can only shrink a summand.
        coeffs = sparse_clip_coefficients(
            U,
            design.row_norms(),
            design.row_l1_norms(),
            self.norm_bound,
            self.sparsity,
        )
        if sample_weight is not None:
            coeffs = coeffs * (
                sample_weight if coeffs.ndim == 1 else sample_weight[:, None]
            )
        return coeffs


class ProjectionMeanOracle(_SparseOracleBase):
    """Mean oracle of DP gradient descent: the projection mechanism (Algorithm 1).

    Each call releases the mean of the ``n`` per-sample gradients ``c_i (outer) x~_i``
    (coefficients clipped so that every gradient has l2 norm ``<= L`` and l1 norm
    ``<= L sqrt(s)``, see :func:`sparse_clip_coefficients`) plus dense noise, projected
    onto the l1 ball of radius ``L sqrt(s)``. Memory: the sum is ``X~^T c`` (a sparse
    product for scipy.sparse X), the noise one dense parameter-sized array.

    Sensitivities (replace-one, ``n`` public; the two differing clipped gradients lie
    in the same ball): l1 ``2 L sqrt(s) / n`` for the Laplace variant, l2 ``2L/n`` for
    the Gaussian variant (Algorithm 1, Fact 2.3), plus the rounding of the exact
    sums of dense rows (:func:`~skdpsco._exact_sum.exact_mean_sensitivity`; ``sqrt(p)``
    times its l2 slack in l1 for ``p`` coordinates). Neither assumes anything of the
    rows: sparsity is enforced by the l1 clip, never read from the data. Rows that
    *are* s-sparse (after the estimator's per-row map of the features) are not
    distorted by it. For a ``(dim, K)`` parameter ``s`` counts the non-zeros of the
    flattened gradient (``K nnz(x~_i)``).

    Parameters
    ----------
    norm_bound : float
        ``L``: public l2 bound of a per-sample gradient.
    sparsity : int
        ``s``: public number of non-zeros of a per-sample gradient (the intercept
        and the K outputs counted).
    noise : {"gaussian", "laplace"}, default="gaussian"
        ``"laplace"`` is pure DP: calibrate it with ``epsilon``.
    exact_sums : bool, default=True
        Whether the design's rows are summed exactly (dense rows,
        :meth:`LinearDesign.exact_fused_sum`) or in floating point (sparse
        rows): a public fact that fixes the summation's slack in the
        sensitivity.

    References
    ----------
    .. [1] Ghazi et al., "Differentially Private Optimization with Sparse
       Gradients", Algorithm 1, Lemma 3.1, Theorems 3.2-3.3.
    """

    def __init__(self, norm_bound=1.0, sparsity=1, noise="gaussian", exact_sums=True):
        super().__init__(norm_bound, sparsity, exact_sums)
        if noise not in ("gaussian", "laplace"):
            raise ValueError(f"noise must be 'gaussian' or 'laplace', got {noise!r}.")
        self.noise = noise
        #: Exact GDP composition applies only when every call is Gaussian.
        self.all_gaussian = noise == "gaussian"

    def calibrate(self, n_samples, rho, shape=None, *, epsilon=None):
        """Fix the noise from public values.

        Parameters
        ----------
        n_samples : int
            Public ``n``.
        rho : float or None
            zCDP budget of one call (``inf`` in the testing mode). The Laplace variant
            turns it into ``epsilon = sqrt(2 rho)``: ``epsilon``-DP is
            ``epsilon^2 / 2``-zCDP (Bun & Steinke 2016, Prop 1.4).
        shape : tuple, optional
            Shape of the parameter: its size is the number of summed coordinates
            of the exact sums' slack (``2^20`` where not given).
        epsilon : float, optional
            Pure-DP budget of one call (Laplace variant only), instead of ``rho``.
        """
        L, s, n = self.norm_bound, self.sparsity, int(n_samples)
        p = 2**20 if shape is None else int(np.prod(shape))
        name = f"projection sparse mean ({self.noise})"
        if (rho is None) == (epsilon is None):
            raise ValueError("calibrate needs exactly one of rho and epsilon.")
        if self.noise == "laplace":
            if epsilon is None:
                epsilon = math.inf if math.isinf(rho) else math.sqrt(2.0 * rho)
            # l1: two clipped gradients differ by <= 2 L sqrt(s); mean over n.
            # The summation's rounding (exact_sum_slack, or twice
            # float_sum_error) is bounded in l2, so by at most sqrt(p) times it
            # in l1 (Cauchy-Schwarz); its 1 + 2^-40 covers this sum's own
            # rounding (s <= p).
            slack = _summation_slack(self.exact_sums, L, n, p)
            sensitivity = 2.0 * L * math.sqrt(s) / n + math.sqrt(p) * slack
            self.mechanism_ = LaplaceMechanism.from_epsilon(
                sensitivity, epsilon, name=name
            )
        else:
            if epsilon is not None:
                raise ValueError(
                    "The Gaussian projection mechanism cannot be pure DP: calibrate "
                    "it with a zCDP budget rho (or use noise='laplace')."
                )
            # l2: two clipped gradients differ by <= 2L; mean over n; plus the
            # rounding of the sums (exact_mean_sensitivity for exact block sums,
            # skdpsco._exact_sum; Casacuberta et al. 2022, Section 4).
            self.mechanism_ = GaussianMechanism.from_zcdp(
                _mean_sensitivity(self.exact_sums, L, n, p), rho, name=name
            )
        self.radius_ = L * math.sqrt(s)  # B_1(0, L sqrt(s)) contains the clipped mean
        self.n_samples_ = n
        return self

    def estimate(self, design, U, rng, sample_weight=None):
        """Projected noisy mean of the clipped per-sample gradients."""
        coeffs = self._clipped_coefficients(design, U, sample_weight)
        return self._release(design.weighted_sum(coeffs), rng)

    def estimate_at(self, design, W, derivative, rng, sample_weight=None):
        """:meth:`estimate` at the iterate ``W``; dense rows (in memory or a dask
        design) are summed exactly in one read
        (:meth:`LinearDesign.exact_fused_sum`): the same bits in any chunking."""
        total = _exact_sparse_sum(design, W, derivative, self, sample_weight)
        if total is None:
            return super().estimate_at(design, W, derivative, rng, sample_weight)
        return self._release(total, rng)

    def _release(self, total, rng):
        mean = total / self.n_samples_
        estimate, _ = _release_projected(mean, self.mechanism_, self.radius_, rng)
        return estimate


class L1RecoveryMeanOracle(_SparseOracleBase):
    """Mean oracle of DP gradient descent: Gaussian l1-recovery (Algorithm 2).

    Per-sample gradients are clipped as in :class:`ProjectionMeanOracle`. The public
    branch is fixed in :meth:`calibrate`, from ``n``, the parameter size ``d`` and the
    per-call budget, with ``m = ceil(c_m 2 n sqrt(rho) sqrt(s ln(d/s)))``
    measurements: the paper's ``n epsilon / sqrt(ln(1/delta))`` written through the
    zCDP budget (from ``epsilon ~ 2 sqrt(rho ln(1/delta))``, Bun & Steinke 2016,
    Prop 1.3), a utility choice that does not touch privacy. The branches:

    * ``d < m ln(m)^2`` or ``s >= d/2``: plain Gaussian mechanism on the clipped mean
      (l2-sensitivity ``2L/n``, plus the exact sums' rounding on dense rows,
      :func:`~skdpsco._exact_sum.exact_mean_sensitivity`).
    * ``m < s ln(d/s)``: the zero vector (no data used, no privacy spent).
    * otherwise: compressed sensing, below; the decoded ``z`` is returned if
      ``||z|| <= 2L``, else 0.

    In the compressed-sensing branch the public ``m x d`` matrix ``A`` is drawn once,
    at the first call, and reused by every iteration; each call releases
    ``(1/n) sum_i clip_l2(A g_i, 1.5L) + N(0, sigma^2 I_m)`` (l2-sensitivity ``3L/n``
    for every ``A``) and decodes it by basis pursuit (post-processing). The per-sample
    measurements ``A g_i = c_i A x~_i`` are formed row chunk by row chunk
    (:meth:`LinearDesign.predict_chunks`), never as an ``n x m`` array.

    Privacy (replace-one, ``n`` public): the clipped measurements of two records
    differ by at most ``3L`` in l2, so the released sum has l2-sensitivity ``3L/n``
    for *every* matrix ``A``; no restricted-isometry event is needed (the paper's
    unclipped ``A zbar`` is private only on that unverifiable event), so no part of
    the budget is reserved for it. The per-example clipping of the measurements is
    not in the paper; it is what makes the privacy unconditional.

    Parameters
    ----------
    norm_bound : float
        ``L``.
    sparsity : int
        ``s`` (intercept and outputs counted).
    measurement_constant : float, default=1.0
        ``c_m``.
    n_measurements : int, optional
        Override ``m``.
    max_entries : int, default=MAX_MEASUREMENT_ENTRIES
        Largest ``m * d``; :meth:`calibrate` refuses larger problems.
    solver : {"auto", "linprog", "douglas_rachford"}, default="auto"
    max_iter : int, default=500
        Douglas-Rachford iterations per decoding.
    exact_sums : bool, default=True
        As in :class:`ProjectionMeanOracle` (the dense branch's slack).

    References
    ----------
    .. [1] Ghazi et al., "Differentially Private Optimization with Sparse
       Gradients", Algorithm 2, Theorem 3.4.
    """

    all_gaussian = True

    def __init__(
        self,
        norm_bound=1.0,
        sparsity=1,
        *,
        measurement_constant=1.0,
        n_measurements=None,
        max_entries=MAX_MEASUREMENT_ENTRIES,
        solver="auto",
        max_iter=500,
        exact_sums=True,
    ):
        super().__init__(norm_bound, sparsity, exact_sums)
        self.measurement_constant = check_real(
            measurement_constant, "measurement_constant", low=0, low_open=True
        )
        self.n_measurements = n_measurements
        self.max_entries = max_entries
        self.solver = solver
        self.max_iter = max_iter

    def calibrate(self, n_samples, rho, shape):
        """Fix the branch, ``m`` and the noise from public values.

        Raises ``ValueError`` (before any data is read) when ``m * d`` exceeds
        ``max_entries``.
        """
        n = int(n_samples)
        shape = tuple(shape)
        d = int(np.prod(shape))
        L, s = self.norm_bound, min(self.sparsity, d)
        scale = self.measurement_constant * 2.0 * n * math.sqrt(rho)
        self.branch_, self.m_ = _l1_recovery_branch(
            n, d, s, scale, self.n_measurements, self.max_entries, type(self).__name__
        )
        name = "l1-recovery sparse mean"
        if self.branch_ == "zero":
            self.mechanism_ = GaussianMechanism(0.0, 0.0, name=name + " (zero)")
        elif self.branch_ == "dense":
            # 2L / n plus the exact sums' rounding (exact_mean_sensitivity), as
            # in ProjectionMeanOracle.
            self.mechanism_ = GaussianMechanism.from_zcdp(
                _mean_sensitivity(self.exact_sums, L, n, d),
                rho,
                name=name + " (dense branch)",
            )
        else:  # ||clip(A g) - clip(A g')|| <= 3L for every A
            self.mechanism_ = GaussianMechanism.from_zcdp(3.0 * L / n, rho, name=name)
        self.shape_, self.n_samples_, self.A_ = shape, n, None
        return self

    def _measurements(self, design, coeffs):
        """``sum_i clip_l2(A vec(x~_i (outer) c_i), 1.5 L)`` in row chunks."""
        A, m = self.A_, self.A_.shape[0]
        K = 1 if coeffs.ndim == 1 else coeffs.shape[1]
        # vec of a (dim, K) C-ordered gradient: index j K + k, so A vec(x c^T) =
        # sum_k c_k (A[:, k::K] x); stack the K blocks as columns of W.
        W = np.hstack([A[:, k::K].T for k in range(K)])  # (dim, K m)
        total = np.zeros(m)
        for rows, P in design.predict_chunks(W):
            c = coeffs[rows].reshape(P.shape[0], K)
            with np.errstate(over="ignore", invalid="ignore"):
                M = np.einsum("rkm,rk->rm", P.reshape(P.shape[0], K, m), c)
            total += _clip_rows_l2(M, 1.5 * self.norm_bound).sum(axis=0)
        return total

    def estimate_at(self, design, W, derivative, rng, sample_weight=None):
        """:meth:`estimate` at the iterate ``W``: in the zero branch no data is
        read; in the dense one dense rows (in memory or a dask design) are
        summed exactly (:meth:`LinearDesign.exact_fused_sum`)."""
        if self.branch_ == "zero":
            return np.zeros(self.shape_)
        if self.branch_ == "dense":
            total = _exact_sparse_sum(design, W, derivative, self, sample_weight)
            if total is not None:
                return self.mechanism_.release(total / self.n_samples_, rng)
        return super().estimate_at(design, W, derivative, rng, sample_weight)

    def estimate(self, design, U, rng, sample_weight=None):
        """Noisy clipped-mean estimate of the per-sample gradients' mean."""
        if self.branch_ == "zero":
            return np.zeros(self.shape_)
        coeffs = self._clipped_coefficients(design, U, sample_weight)
        n = self.n_samples_
        if self.branch_ == "dense":
            return self.mechanism_.release(design.weighted_sum(coeffs) / n, rng)
        if self.A_ is None:
            self.A_ = _measurement_matrix(self.m_, int(np.prod(self.shape_)), rng)
        b = self.mechanism_.release(self._measurements(design, coeffs) / n, rng)
        z = _decode(self.A_, b, self.norm_bound, self.solver, self.max_iter)
        return z.reshape(self.shape_)
