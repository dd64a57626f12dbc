"""Subsampled bias-reduced sparse SGD, randomly stopped by a privacy filter.

Ghazi et al. (sparse gradients), Algorithms 3 and 4. Every step draws a public level
``N ~ TGeom(M)``, estimates the gradient with four calls of a private sparse mean
estimator on random batches of sizes ``2^(N+1)``, ``2^N``, ``2^N`` and 1, combines them
into a telescoping (Blanchet–Glynn) estimator whose bias is that of the full-batch
private mean, and takes a projected step. The run stops when the privacy filter of
Whitehouse et al. (Thm A.4) says the budget is spent.

What is public and what is not:

* The levels ``N_t``, the batches ``B, O, E, I`` and the stopping time ``T`` are drawn
  from the caller's Generator, independently of the data. They are *not* noise: the
  levels and ``T`` are public (``T`` is released as ``n_iter``); the batches are never
  released (their secrecy is what amplification by subsampling, Lemma 5.3, needs).
* Each step's privacy cost ``(epsilon_t, delta_t)`` is a function of ``N_t`` and public
  numbers only (Lemma 5.3, exact amplified values from
  :func:`skdpsco.privacy._filter.step_cost`), fixed before the step runs.
* The step size and the horizon ``tau`` used to choose it come from public numbers
  (a data-free simulation of the stopping rule, and an explicit second-moment bound).
* All noise is drawn by the mean estimator (``skdpsco._mean_estimation._sparse_mean``)
  through :mod:`skdpsco.privacy._mechanisms`.

Neighbouring relation: replace-one record, ``n`` public.

References
----------
.. [GGKKM] Ghazi, B., Guzman, C., Kamath, P., Kumar, R. and Manurangsi, P.
   "Differentially Private Optimization with Sparse Gradients". Definition 5.1
   (TGeom), Algorithm 3, Algorithm 4, Lemma 5.3 (privacy), Lemma 5.4 (bias and second
   moment), Lemma 5.5 (stopping time), Theorems 5.7 and 5.8 (step sizes).
.. [WRRW23] Whitehouse, J., Ramdas, A., Rogers, R. and Wu, Z. S. (2023). Fully-adaptive
   composition in differential privacy. ICML.
"""

import functools
import math

import numpy as np
import scipy.sparse as sp

from .._constraints import project_l2_ball
from .._mean_estimation._sparse_mean import (
    _row_norms_l2_l1,
    projection_mean,
    sparse_clip_coefficients,
)
from ..privacy._accounting import account_records, calibrate_analytic_gaussian
from ..privacy._discrete import _uniform_below, uniform_sample
from ..privacy._filter import PrivacyFilter, filtered_run_record, step_cost
from ..utils._validation import check_int, check_real
from ._progress import NO_PROGRESS
from ._result import SolverResult

__all__ = [
    "bias_reduced_gradient",
    "bias_reduced_sgd",
    "bias_reduced_sgd_budget",
    "per_example_gradient_matrix",
    "sample_tgeom",
    "second_moment_bound",
    "stopping_time_quantile",
    "tgeom_max_level",
    "tgeom_pmf",
]


# ------------------------------------------------------------------ TGeom(M)


def tgeom_max_level(n_samples):
    """``M = floor(log2 n) - 1``: the largest batch ``2^(M+1)`` is ``<= n`` (n >= 2)."""
    n_samples = int(n_samples)
    if n_samples < 2:
        raise ValueError(
            f"Bias-reduced SGD needs n_samples >= 2 (TGeom(M) with M = floor(log2 n)"
            f" - 1 >= 0), got n_samples={n_samples}."
        )
    return n_samples.bit_length() - 2


def tgeom_pmf(max_level):
    """``p_k = C_M 2^-k`` on ``{0, ..., M}``, ``C_M = 1 / (2 (1 - 2^-(M+1)))``.

    Ghazi et al., Definition 5.1 (eq. 4); ``1/2 <= C_M <= 1`` (Remark 5.2).
    """
    max_level = check_int(max_level, "max_level", low=0)
    c_m = 1.0 / (2.0 * (1.0 - 2.0 ** -(max_level + 1)))
    return c_m * 2.0 ** -np.arange(max_level + 1, dtype=float)


def sample_tgeom(max_level, rng, size=None):
    """Draw ``TGeom(M)`` by inverting its CDF.

    Non-private, data-independent randomness (not noise): the levels are public.

    Parameters
    ----------
    max_level : int
        ``M >= 0``.
    rng : numpy.random.Generator
    size : int, optional

    Returns
    -------
    int or ndarray of int
    """
    cdf = np.cumsum(tgeom_pmf(max_level))
    cdf[-1] = 1.0
    u = rng.random(size)
    out = np.searchsorted(cdf, u, side="right")
    out = np.minimum(out, max_level)
    return int(out) if size is None else out


# ------------------------------------------------- per-example gradient rows


def per_example_gradient_matrix(design, y, loss, W, rows, *, norm_bound, sparsity):
    """Sparse ``(m, p)`` matrix of the clipped per-example gradients of ``rows``.

    Row ``i`` is ``c_i (outer) x~_i`` flattened in C order (``p = dim`` for a vector
    ``W``, ``dim * K`` for a ``(dim, K)`` one), where ``c_i`` is the loss derivative
    scaled into ``{g : ||g||_2 <= L, ||g||_1 <= L sqrt(s)}`` (a safety net added to
    the paper, whose bounds hold on this set by Remark 2.1;
    :func:`~skdpsco._mean_estimation._sparse_mean.sparse_clip_coefficients`), so the
    rows are finite whatever the data. Only the ``m`` batch rows are touched, and
    the matrix has the sparsity of those rows: nothing of size ``n x d`` is built.

    Parameters
    ----------
    design : LinearDesign
    y : ndarray of shape (n,)
    loss : loss object
    W : ndarray of shape (dim,) or (dim, K)
    rows : array of int
        Batch indices (any order; the output rows follow it).
    norm_bound : float
        ``L``.
    sparsity : int
        ``s``, the declared sparsity of a per-example gradient.

    Returns
    -------
    scipy.sparse.csr_matrix of shape (len(rows), W.size)
    """
    rows = np.asarray(rows, dtype=np.intp)
    batch = design.subset(rows)
    U = loss.derivative(batch.predict(W), y[rows])
    X = sp.csr_matrix(batch.X, dtype=float)
    if batch.fit_intercept:
        X = sp.hstack(
            [X, np.full((X.shape[0], 1), batch.intercept_column)], format="csr"
        )
    X.sum_duplicates()
    # ||x~_i||_2 and ||x~_i||_1, overflow-safe (inf for a non-finite row).
    row_l2, row_l1 = _row_norms_l2_l1(X)
    C = sparse_clip_coefficients(U, row_l2, row_l1, norm_bound, sparsity)
    # A non-finite entry only meets a coefficient 0 (its row norms are inf); keep
    # the product finite instead of 0 * inf = NaN.
    X.data = np.where(np.isfinite(X.data), X.data, 0.0)
    row_of = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    if C.ndim == 1:
        data = X.data * C[row_of]
        return sp.csr_matrix((data, X.indices, X.indptr), shape=X.shape)
    K = C.shape[1]
    data = (X.data[:, None] * C[row_of, :]).ravel()
    indices = (X.indices[:, None] * K + np.arange(K)).ravel()
    return sp.csr_matrix(
        (data, indices, X.indptr * K), shape=(X.shape[0], X.shape[1] * K)
    )


# ------------------------------------------------------------- Algorithm 3


def bias_reduced_gradient(
    design,
    y,
    loss,
    W,
    level,
    *,
    mean_estimator=projection_mean,
    epsilon,
    delta,
    norm_bound,
    sparsity,
    rng,
    return_records=False,
):
    """One bias-reduced gradient estimate (Ghazi et al., Algorithm 3).

    With ``B`` a uniform subset of size ``2^(N+1)`` (without replacement), ``O, E``
    a uniform split of ``B`` into halves and ``I`` a uniform index,

    ``G = (G^+_{N+1}(B) - (G^-_N(O) + G^-_N(E)) / 2) / p_N + G_0(I)``,

    each ``G`` a call of ``mean_estimator`` at ``(epsilon/4, delta/4)`` on the clipped
    per-example gradients of its batch. Given ``N ~ TGeom(M)`` this telescopes
    (Lemma 5.4): ``E[G | x] = E[mean_estimator on a batch of 2^(M+1)]``. Without noise
    the bracket is exactly 0 (a batch mean is the average of its halves' means), so
    the bracket only corrects the estimator's batch-size-dependent bias.

    Parameters
    ----------
    design : LinearDesign
    y : ndarray of shape (n,)
    loss : loss object
    W : ndarray of shape (dim,) or (dim, K)
        Current (private) iterate.
    level : int
        ``N`` in ``{0, ..., M}``, ``M = floor(log2 n) - 1``.
    mean_estimator : callable, default=projection_mean
        ``mean_estimator(G, *, norm_bound, sparsity, epsilon, delta, rng) ->
        (estimate, record)`` on an ``(m, p)`` matrix of per-example vectors
        (:func:`~skdpsco._mean_estimation._sparse_mean.projection_mean`, Algorithm
        1). It must be ``(epsilon, delta)``-DP with respect to replacing one of its
        ``m`` rows.
    epsilon, delta : float
        Budget of this estimator (Algorithm 4 passes ``(epsilon/8, delta/4)``).
    norm_bound : float
        ``L``, l2 bound of a per-example gradient (enforced by clipping).
    sparsity : int
        ``s``, declared sparsity of a per-example gradient (l1 bound ``L sqrt(s)``).
    rng : numpy.random.Generator
        Draws the batches (non-private randomness) and is handed to the estimator
        (noise).
    return_records : bool, default=False
        Also return the four calls' ledger records (each holds for its batch only).

    Returns
    -------
    G : ndarray of the shape of ``W``
    records : list of MechanismRecord
        Only with ``return_records=True``.

    References
    ----------
    .. [1] Ghazi et al., "Differentially Private Optimization with Sparse
       Gradients", Algorithm 3, Lemma 5.4.
    """
    n = design.n_samples
    max_level = tgeom_max_level(n)
    level = int(level)
    if not 0 <= level <= max_level:
        raise ValueError(f"level must lie in [0, {max_level}], got {level}.")
    p_level = tgeom_pmf(max_level)[level]
    m = 2 ** (level + 1)
    # Uniform fixed-size batch without replacement, in uniformly random order, so
    # that its two halves are a uniform split (never released: amplification by
    # subsampling, Lemma 5.3, needs the batches secret).
    batch = uniform_sample(rng, n, m)
    single = _uniform_below(rng, n, 1)
    kwargs = {
        "norm_bound": norm_bound,
        "sparsity": sparsity,
        "epsilon": epsilon / 4.0,
        "delta": delta / 4.0,
    }
    G_B = per_example_gradient_matrix(
        design, y, loss, W, batch, norm_bound=norm_bound, sparsity=sparsity
    )
    G_I = per_example_gradient_matrix(
        design, y, loss, W, single, norm_bound=norm_bound, sparsity=sparsity
    )
    half = m // 2
    calls = [
        mean_estimator(rows, rng=rng, **kwargs)
        for rows in (G_B, G_B[:half], G_B[half:], G_I)
    ]
    g_plus, g_odd, g_even, g_zero = (np.asarray(c[0], dtype=float) for c in calls)
    G = ((g_plus - 0.5 * (g_odd + g_even)) / p_level + g_zero).reshape(np.shape(W))
    if return_records:
        return G, [c[1] for c in calls]
    return G


def _check_call_records(records, epsilon, delta):
    """Each mean-estimator call must cost at most its ``(epsilon, delta)``.

    A guard against a plugged-in estimator that ignores its budget: the filter's
    arithmetic assumes it (Lemma 5.3). Checked with the accountant on public numbers.
    """
    for record in records:
        spent = account_records([record], delta)[0]
        if not spent <= epsilon * (1.0 + 1e-9):
            raise RuntimeError(
                f"mean_estimator spent epsilon={spent!r} > its per-call budget "
                f"{epsilon!r} at delta={delta!r}: its privacy breaks Lemma 5.3."
            )


# ------------------------------------------------------------- Algorithm 4


def bias_reduced_sgd_budget(epsilon, delta, n_samples, stopping="lagged"):
    """The filter and the certified total of one run of Algorithm 4.

    * ``"lagged"`` (the paper's Algorithm 4): filter at ``(epsilon/2, delta' =
      delta/4, delta'' = delta/4)``, checked on the steps before the last one, so at
      most two steps run past it. The filter-stopped transcript is
      ``(epsilon/2, delta/2)``-DP (Thm A.4) and each extra step costs at most the
      top-level cost ``(epsilon_max, delta_max)`` (level ``M``), so the run is
      ``(epsilon/2 + 2 epsilon_max, delta/2 + 2 delta_max)``-DP by basic
      composition, ``<= (3 epsilon/4, 15 delta/16)`` for every ``n >= 2``
      (``epsilon_max <= epsilon/8``: amplification never increases a cost;
      ``delta_max <= (3/16 + 1/(16 n)) delta``).
    * ``"precheck"`` (a variant, not the paper's): every step is checked before it
      runs, so nothing overshoots and the filter runs at the full ``(epsilon,
      delta/2, delta/2)`` (Thm A.4's stopping rule); the run is
      ``(epsilon, delta)``-DP. About twice as many steps, but the top level is then
      excluded near the end of the run (the telescoping of Lemma 5.4 is then
      incomplete there, the reason the paper lags its check).

    Returns
    -------
    dict
        ``filter_epsilon``, ``delta_prime``, ``delta_double_prime``, ``lag`` (0 or 2
        unchecked steps) and the certified ``epsilon`` / ``delta`` of the run.
    """
    n_samples = int(n_samples)
    M = tgeom_max_level(n_samples)
    if stopping == "lagged":
        eps_max, delta_max = step_cost(epsilon, delta, n_samples, M)
        return {
            "filter_epsilon": epsilon / 2.0,
            "delta_prime": delta / 4.0,
            "delta_double_prime": delta / 4.0,
            "lag": 2,
            "epsilon": epsilon / 2.0 + 2.0 * eps_max,
            "delta": delta / 2.0 + 2.0 * delta_max,
        }
    if stopping == "precheck":
        return {
            "filter_epsilon": float(epsilon),
            "delta_prime": delta / 2.0,
            "delta_double_prime": delta / 2.0,
            "lag": 0,
            "epsilon": float(epsilon),
            "delta": float(delta),
        }
    raise ValueError(f"stopping must be 'lagged' or 'precheck', got {stopping!r}.")


def _step_costs(epsilon, delta, n_samples):
    M = tgeom_max_level(n_samples)
    costs = [step_cost(epsilon, delta, n_samples, k) for k in range(M + 1)]
    return np.array([c[0] for c in costs]), np.array([c[1] for c in costs])


def _simulated_stop(levels, eps_lv, del_lv, budget):
    """Number of steps run for a given sequence of levels (vectorised filter)."""
    sq = np.cumsum(eps_lv[levels] ** 2)
    dl = np.cumsum(del_lv[levels])
    with np.errstate(invalid="ignore"):
        if math.isinf(budget["filter_epsilon"]):
            eps_ok = np.ones(len(levels), bool)
        else:
            dp = budget["delta_prime"]
            val = np.sqrt(2.0 * math.log(1.0 / dp) * sq) + 0.5 * sq
            eps_ok = val <= budget["filter_epsilon"]
    ok = eps_ok & (dl <= budget["delta_double_prime"])
    bad = np.flatnonzero(~ok)
    if bad.size == 0:
        return None
    return int(bad[0]) + budget["lag"]  # fitting prefix length + unchecked steps


@functools.lru_cache(maxsize=128)
def _stopping_times(epsilon, delta, n_samples, stopping, n_sims, seed):
    budget = bias_reduced_sgd_budget(epsilon, delta, n_samples, stopping)
    eps_lv, del_lv = _step_costs(epsilon, delta, n_samples)
    M = len(eps_lv) - 1
    # Public simulation with its own fixed seed: a deterministic function of
    # (epsilon, delta, n), never of the data or of the fit's Generator.
    sim_rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_sims):
        block = 1024
        levels = np.empty(0, dtype=np.intp)
        while True:
            levels = np.concatenate([levels, sample_tgeom(M, sim_rng, block)])
            T = _simulated_stop(levels, eps_lv, del_lv, budget)
            if T is not None:
                out.append(T)
                break
            block *= 2
    return tuple(out)


def stopping_time_quantile(
    epsilon, delta, n_samples, stopping="lagged", quantile=0.25, n_sims=200, seed=0
):
    """A quantile of the stopping time ``T`` of Algorithm 4 by data-free simulation.

    ``T`` depends only on the levels ``N_t`` (Lemma 5.5), so its law is public. The
    default 25% quantile mirrors ``P[T <= tau] <= 1/4`` in Lemma 5.5 and is the
    horizon ``tau`` of the step size (Theorems 5.7 and 5.8 take
    ``tau = C' n / ln(2/delta)`` with an unspecified constant ``C'``).

    Returns
    -------
    int
        At least 1.
    """
    times = _stopping_times(
        float(epsilon), float(delta), int(n_samples), stopping, int(n_sims), int(seed)
    )
    return max(1, int(np.quantile(np.asarray(times), quantile, method="lower")))


def second_moment_bound(epsilon, delta, n_samples, norm_bound, sparsity, dim):
    """Explicit bound ``nu^2`` on ``E||G||^2`` of Algorithm 3 with Algorithm 1 inside.

    ``nu^2 = 2 (2 L^2 + 2 E_1) + 4 sum_{k=0}^{M} (E_{2^(k+1)} + E_{2^k}) / p_k`` with
    ``E_m = min(L^2 (1 + sqrt(s))^2, 2 L sqrt(s) sigma_m sqrt(2 ln(2 p)))``, where
    ``sigma_m`` is the analytic Gaussian scale of l2-sensitivity ``2L/m`` at the
    per-call budget ``(epsilon/32, delta/16)`` (following the proof of Lemma 5.4
    with Lemma 3.1). A function of public numbers only; used for the step
    size, never for privacy.
    """
    L = float(norm_bound)
    s = int(sparsity)
    M = tgeom_max_level(n_samples)
    pmf = tgeom_pmf(M)

    def err(m):
        trivial = L * L * (1.0 + math.sqrt(s)) ** 2
        if math.isinf(epsilon):
            return 0.0
        sigma = calibrate_analytic_gaussian(epsilon / 32.0, delta / 16.0, 2.0 * L / m)
        return min(
            trivial, 2.0 * L * math.sqrt(s) * sigma * math.sqrt(2 * math.log(2 * dim))
        )

    total = 2.0 * (2.0 * L * L + 2.0 * err(1))
    for k in range(M + 1):
        total += 4.0 * (err(2 ** (k + 1)) + err(2**k)) / pmf[k]
    return total


def bias_reduced_sgd(
    design,
    y,
    loss,
    *,
    budget,
    norm_bound,
    sparsity,
    mean_estimator=projection_mean,
    n_outputs=1,
    learning_rate="auto",
    coef_norm_bound=1.0,
    radius=None,
    l2_penalty=0.0,
    convex=True,
    smoothness=None,
    initial_gap=None,
    stopping="lagged",
    progress=NO_PROGRESS,
    rng,
):
    """Subsampled bias-reduced sparse SGD, randomly stopped (Ghazi et al., Algorithm 4).

    Each step draws the public level ``N_t ~ TGeom(M)``, fixes its cost
    ``(epsilon_t, delta_t)`` (exact amplified values of Lemma 5.3,
    :func:`skdpsco.privacy._filter.step_cost`), asks the privacy filter whether it may
    run, computes the bias-reduced gradient (Algorithm 3, per-call budget
    ``(epsilon/32, delta/16)``), adds the public penalty's gradient ``lambda w``
    (after privatisation, so that the dense penalty term never enters the clipped
    per-example gradients) and takes a projected step. The released
    point is the average of ``x_0, ..., x_T`` (convex) or a uniformly random iterate
    (nonconvex).

    Privacy: ``(epsilon, delta)``-DP (Lemma 5.3 with Thm A.4). The whole run is
    returned as *one* ledger record of kind ``"approx_dp"`` carrying the certified
    total of :func:`bias_reduced_sgd_budget` (the filter's guarantee does not
    decompose into the per-call Gaussian records, which hold for a batch and only
    become a guarantee for the dataset through amplification and the filter); the
    accountant composes it by basic composition.

    Parameters
    ----------
    design : LinearDesign
    y : ndarray of shape (n,)
    loss : loss object from :mod:`skdpsco._losses`
    budget : AlgorithmBudget
        Its ``(epsilon, delta)``: ``epsilon > 0`` (``inf`` only in the hidden
        non-private testing mode, where only the delta condition of the filter
        stops the run: ``T ~ 4n/(3 log2 n + 1)`` single-sample steps) and ``delta``
        in ``(0, 1)`` (the filter and the Gaussian mean estimators need ``delta >
        0``).
    norm_bound : float
        ``L``: every per-example gradient is clipped to l2 norm ``L`` (and l1 norm
        ``L sqrt(s)``). For a GLM ``L = sup|loss'| * ||x~||``.
    sparsity : int
        ``s``: declared number of non-zeros of a per-example gradient (``nnz(x) + 1``
        with an intercept, times ``K`` for the multinomial loss).
    mean_estimator : callable, default=projection_mean
        See :func:`bias_reduced_gradient`.
    n_outputs : int, default=1
    learning_rate : float or "auto", default="auto"
        ``"auto"``: convex ``eta = D / (nu sqrt(tau))`` (Theorem 5.7) with ``D`` the
        ``radius`` (or ``coef_norm_bound``), ``nu^2`` from
        :func:`second_moment_bound` and ``tau`` the 25% quantile of the simulated
        stopping time; nonconvex ``eta = min(sqrt(Gamma / (H tau nu^2)), 1/(2H))``
        (Theorem 5.8, Prop. B.2), which needs ``smoothness`` and ``initial_gap``.
    coef_norm_bound : float, default=1.0
        ``D`` when ``radius`` is None.
    radius : float or None, default=None
        Public l2 ball the iterates are projected onto (``None``: unconstrained).
    l2_penalty : float, default=0.0
        ``lambda`` of the public penalty ``(lambda/2)||w||^2`` (intercept unpenalised).
    convex : bool, default=True
    smoothness, initial_gap : float, optional
        ``H`` and ``Gamma >= F(x0) - min F`` (public), nonconvex ``"auto"`` rate only.
    stopping : {"lagged", "precheck"}, default="lagged"
        See :func:`bias_reduced_sgd_budget`. ``"lagged"`` is the paper's.
    progress : Progress or NoProgress, default=NO_PROGRESS
        Public progress reporter (:mod:`._progress`). The number of steps is
        random (public levels only), so the planned count it reports is the
        largest of the data-free simulated stopping times
        (:func:`stopping_time_quantile`); a run that goes past it reports no
        more (the release line follows). The filter's guarantee holds for the
        run as a whole (Thm A.4), so the reported epsilon is the run's
        certified total from the first step on.
    rng : numpy.random.Generator

    Returns
    -------
    SolverResult
        ``n_iter`` is the number of steps ``T`` (public: a function of the levels
        only).

    References
    ----------
    .. [1] Ghazi et al., "Differentially Private Optimization with Sparse
       Gradients", Algorithms 3-4, Lemmas 5.3-5.5, Theorems 5.7-5.8, Thm A.4.
    """
    n = design.n_samples
    tgeom_max_level(n)  # refuses n < 2 before the budget is read
    epsilon, delta = _checked_budget(budget)
    shape = design.parameter_shape(n_outputs)
    plan = bias_reduced_sgd_budget(epsilon, delta, n, stopping)
    eta = _learning_rate(
        learning_rate,
        epsilon=epsilon,
        delta=delta,
        n=n,
        norm_bound=norm_bound,
        sparsity=sparsity,
        dim=int(np.prod(shape)),
        stopping=stopping,
        D=radius if radius is not None else coef_norm_bound,
        convex=convex,
        smoothness=smoothness,
        initial_gap=initial_gap,
    )
    filt = PrivacyFilter(
        plan["filter_epsilon"], plan["delta_prime"], plan["delta_double_prime"]
    )
    record = filtered_run_record(
        "bias-reduced sparse SGD (privacy filter)", plan["epsilon"], plan["delta"]
    )
    planned = (
        stopping_time_quantile(epsilon, delta, n, stopping, quantile=1.0)
        if progress.active
        else 1
    )
    penalised = design.penalty_mask(shape)
    W = np.zeros(shape)
    W_sum = W.copy()  # running sum of x_0..x_t (convex output)
    W_pick = W.copy()  # reservoir-sampled uniform iterate (nonconvex output)
    t = 0
    for level in _admitted_levels(filt, plan, epsilon, delta, n, rng):
        G, call_records = bias_reduced_gradient(
            design,
            y,
            loss,
            W,
            level,
            mean_estimator=mean_estimator,
            epsilon=epsilon / 8.0,
            delta=delta / 4.0,
            norm_bound=norm_bound,
            sparsity=sparsity,
            rng=rng,
            return_records=True,
        )
        if t == 0:
            _check_call_records(call_records, epsilon / 32.0, delta / 16.0)
        W = project_l2_ball(W - eta * (G + l2_penalty * penalised * W), radius)
        t += 1
        W_sum += W
        if not convex and rng.random() * (t + 1) < 1.0:
            W_pick = W  # reservoir sampling: x_t kept with probability 1/(t+1)
        if t <= planned and progress.due(t, planned):
            progress.report(t, planned, [record])
    coef = W_sum / (t + 1) if convex else W_pick
    return SolverResult(coef=coef, n_iter=t, records=[record])


def _checked_budget(budget):
    """``(epsilon, delta)`` of the run: Algorithm 4's filter and Gaussian mean
    estimators need ``0 < delta < 1`` (``epsilon = inf`` only in the testing mode)."""
    delta = check_real(
        budget.delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True
    )
    epsilon = check_real(
        budget.epsilon, "epsilon", low=0.0, low_open=True, allow_inf=True
    )
    return epsilon, delta


def _admitted_levels(filt, plan, epsilon, delta, n_samples, rng):
    """The public levels ``N_t`` of the steps the privacy filter admits.

    Drawn lazily, each after the previous step ran (the draws keep their order in
    the Generator's stream). Each step's cost is fixed by its level before it runs
    (Lemma 5.3); with the lagged check, step ``t`` runs iff steps ``0..t-2`` fit
    (Algorithm 4's loop condition), otherwise iff step ``t`` itself fits.
    """
    max_level = tgeom_max_level(n_samples)
    pending = []  # costs of steps run but not yet checked (lagged filter)
    t = 0
    while True:
        if plan["lag"] and t >= plan["lag"]:
            if not filt.try_charge(*pending.pop(0)):
                return
        level = sample_tgeom(max_level, rng)
        cost = step_cost(epsilon, delta, n_samples, level)
        if plan["lag"]:
            pending.append(cost)
        elif not filt.try_charge(*cost):
            return
        yield level
        t += 1


def _learning_rate(
    learning_rate,
    *,
    epsilon,
    delta,
    n,
    norm_bound,
    sparsity,
    dim,
    stopping,
    D,
    convex,
    smoothness,
    initial_gap,
):
    if learning_rate != "auto":
        return check_real(learning_rate, "learning_rate", low=0.0, low_open=True)
    tau = stopping_time_quantile(epsilon, delta, n, stopping)
    nu2 = second_moment_bound(epsilon, delta, n, norm_bound, sparsity, dim)
    if convex:
        return D / math.sqrt(nu2 * tau)
    if smoothness is None or initial_gap is None:
        raise ValueError(
            "learning_rate='auto' for a nonconvex loss needs the public smoothness H "
            "and initial_gap Gamma (Theorem 5.8)."
        )
    return min(
        math.sqrt(initial_gap / (smoothness * tau * nu2)), 1.0 / (2.0 * smoothness)
    )
