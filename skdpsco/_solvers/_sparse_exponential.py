"""The sparse exponential mechanism (pure DP), by brute force for tiny dimensions.

Ghazi et al. (sparse gradients), Algorithm 7: the exponential mechanism over a
``tau``-net of the ``k``-sparse points of the feasible set, ``k = D^2 / tau^2``. Its
excess empirical risk is nearly dimension-independent (Theorem 7.5), but the net has
about ``(d / tau)^k`` points and no efficient sampler is known, so this module
enumerates the net and refuses any problem whose net exceeds :data:`MAX_CANDIDATES`
points or whose dimension exceeds :data:`MAX_DIM` (a reference implementation for
tiny ``d`` only).

Privacy (replace-one, ``n`` public): the score of a candidate ``x`` is
``u(x, S) = sum_i min(max(f(x, z_i), 0), B)``; replacing one record changes one
clipped summand, by at most ``B``, so the exponential mechanism
``P[x] ~ exp(-epsilon u(x, S) / (2B)) = exp(-epsilon n F_S(x) / (2B))`` is
``epsilon``-DP (McSherry & Talwar 2007). The paper prints the exponent
``-(B / (epsilon n)) F_S``, which is not private at the claimed level; the
exponent here is the one the sensitivity ``B`` gives. The selection is sampled by
permute-and-flip with the same exponent (coins ``exp(-epsilon (u(x, S) - min u) /
(2B))``; McKenna & Sheldon 2020), exactly, on integer codes of the scores: it is
``epsilon``-DP and at least as good as the exponential mechanism in expectation
and in the tail bound Theorem 7.5 uses (``skdpsco.privacy._mechanisms``).
Clipping the per-record loss to ``[0, B]`` makes the range assumption (A.4) hold
whatever the data. The net depends only on public numbers.

References
----------
.. [GGKKM] Ghazi, B., Guzman, C., Kamath, P., Kumar, R. and Manurangsi, P.
   "Differentially Private Optimization with Sparse Gradients". Algorithm 7,
   Lemma 7.3, Theorem 7.5.
.. [MT07] McSherry, F. and Talwar, K. (2007). Mechanism design via differential
   privacy. FOCS.
.. [MS20] McKenna, R. and Sheldon, D. (2020). Permute-and-flip: a new mechanism
   for differentially private selection. NeurIPS.
"""

import itertools
import math

import numpy as np

from ..privacy._mechanisms import ExponentialMechanism
from ..utils._validation import check_real
from ._result import SolverResult

__all__ = [
    "MAX_CANDIDATES",
    "MAX_DIM",
    "net_parameters",
    "sparse_exponential_mechanism",
    "sparse_net",
]

#: Largest parameter dimension (``n_features + fit_intercept``, times ``K`` for the
#: multinomial loss) the brute-force sampler accepts.
MAX_DIM = 10

#: Largest number of net points the brute-force sampler enumerates.
MAX_CANDIDATES = 200_000


def net_parameters(
    n_samples, epsilon, *, loss_bound, norm_bound, sparsity, radius, dim, confidence
):
    """Net scale ``tau`` and sparsity ``k`` of Algorithm 7 from public numbers.

    ``tau`` solves ``tau^3 / ln(d / (tau beta)) = B D^2 / (L sqrt(s) epsilon n)``
    (Algorithm 7 prints the right side inverted, ``L sqrt(s) epsilon n / B``, and
    with ``D = 1``; the balance of Theorem 7.5's proof gives this form), found by
    bisection (the left side increases in ``tau``); then
    ``k = min(d, floor(D^2 / tau^2))`` (Lemma 7.3 takes ``||x*|| <= 1``, hence its
    ``1 / tau^2``; a diameter ``D`` gives ``D^2 / tau^2``).

    Returns
    -------
    tau : float
    k : int
    """
    if math.isinf(epsilon):
        raise ValueError(
            "The automatic net of Algorithm 7 is infinitely fine at epsilon=inf; "
            "pass net_sparsity and net_resolution."
        )
    c = (
        loss_bound
        * radius**2
        / (norm_bound * math.sqrt(sparsity) * epsilon * n_samples)
    )
    lo, hi = 0.0, dim / confidence
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid**3 - c * math.log(dim / (mid * confidence)) < 0:
            lo = mid
        else:
            hi = mid
    tau = hi
    k = min(dim, math.floor(radius**2 / tau**2))
    return tau, k


def _net_size(dim, k, n_grid):
    return math.comb(dim, k) * (2 * n_grid + 1) ** k


def sparse_net(dim, k, radius, resolution):
    """A ``resolution``-net (l2) of ``{x : ||x||_0 <= k, ||x||_2 <= radius}``.

    On every support of size ``k`` (smaller supports are contained in them), the
    grid of multiples of ``h = resolution / sqrt(k)`` inside the ball. Any point of
    the set rounds coordinate-wise toward zero to a grid point at l2 distance
    ``< h sqrt(k) = resolution`` that is still in the ball.

    Returns
    -------
    ndarray of shape (n_points, dim)
        Distinct points (lexicographically sorted).
    """
    if k <= 0:
        return np.zeros((1, dim))
    h = resolution / math.sqrt(k)
    n_grid = math.floor(radius / h)
    size = _net_size(dim, k, n_grid)
    if size > MAX_CANDIDATES:
        raise ValueError(
            f"The sparse exponential mechanism (Algorithm 7) enumerates its net by "
            f"brute force: {size} points here (d={dim}, k={k}), above the limit "
            f"MAX_CANDIDATES={MAX_CANDIDATES}. Algorithm 7 has no efficient sampler; "
            "use a smaller problem or another algorithm."
        )
    grid = h * np.arange(-n_grid, n_grid + 1)
    block = np.array(list(itertools.product(grid, repeat=k)))
    block = block[np.einsum("ij,ij->i", block, block) <= radius**2 * (1 + 1e-12)]
    points = [np.zeros((1, dim))]
    for support in itertools.combinations(range(dim), k):
        P = np.zeros((block.shape[0], dim))
        P[:, list(support)] = block
        points.append(P)
    return np.unique(np.vstack(points), axis=0)


#: Fixed-point resolution of the scores: a clipped loss in ``[0, B]`` counts
#: ``floor(2^30 loss / B)`` units, and the sums are exact integers (a float sum's
#: rounding would let one record move a score by more than ``B``).
SCORE_UNITS = 2**30


def _fixed_point(vals, loss_bound):
    """``floor(2^30 clip(v, 0, B) / B)`` in ``[0, 2^30]``, as int64 (NaN counts
    as ``B``): one record moves one summand by at most ``2^30`` units."""
    vals = np.clip(np.nan_to_num(vals, nan=loss_bound), 0.0, loss_bound)
    units = np.floor(vals * (SCORE_UNITS / loss_bound))
    return np.minimum(units, SCORE_UNITS).astype(np.int64)


def _scores(design, y, loss, candidates, n_outputs, loss_bound):
    """``u(x) = sum_i clip(f(x, z_i), 0, B)`` for every candidate (rows), in
    exact fixed-point units of ``B / 2^30`` (int64; sensitivity ``2^30``)."""
    out = np.empty(candidates.shape[0], dtype=np.int64)
    if n_outputs == 1:
        step = max(1, 2**22 // max(design.n_samples, 1))
        for start in range(0, candidates.shape[0], step):
            Wc = candidates[start : start + step].T  # (dim, c)
            with np.errstate(over="ignore", invalid="ignore"):
                vals = loss.value(design.predict(Wc), y[:, None])
            out[start : start + step] = _fixed_point(vals, loss_bound).sum(axis=0)
        return out
    for j, w in enumerate(candidates):
        with np.errstate(over="ignore", invalid="ignore"):
            vals = loss.value(design.predict(w.reshape(design.dim, n_outputs)), y)
        out[j] = _fixed_point(vals, loss_bound).sum()
    return out


def sparse_exponential_mechanism(
    design,
    y,
    loss,
    *,
    budget,
    loss_bound,
    norm_bound,
    sparsity,
    radius,
    confidence=0.05,
    n_outputs=1,
    net_sparsity=None,
    net_resolution=None,
    rng,
):
    """Pure ``epsilon``-DP ERM by the sparse exponential mechanism (Algorithm 7).

    Selects ``x`` from a net of the ``k``-sparse points of the l2 ball of radius
    ``D`` by permute-and-flip with coins ``exp(-epsilon n (F_S(x) - min F_S) /
    (2B))``, the per-record loss clipped to ``[0, B]`` (module docstring:
    sensitivity ``B`` of ``n F_S``). Brute force: refused above :data:`MAX_DIM`
    parameters or :data:`MAX_CANDIDATES` net points (a ``ValueError`` raised from
    public sizes, before any data is read).

    Parameters
    ----------
    design : LinearDesign
    y : ndarray of shape (n,)
    loss : loss object (``value(z, y) >= 0``)
    budget : AlgorithmBudget
        Its ``epsilon`` (pure DP; ``delta`` is not spent): ``> 0``; ``inf`` (hidden
        testing mode) returns a net minimiser and then needs ``net_sparsity`` and
        ``net_resolution``.
    loss_bound : float
        ``B``: the per-record loss is clipped to ``[0, B]``.
    norm_bound : float
        ``L``, the Lipschitz constant (only enters ``tau``).
    sparsity : int
        ``s``, the gradient sparsity (only enters ``tau``).
    radius : float
        ``D``: the feasible set is the l2 ball of radius ``D`` (sparsifiable).
    confidence : float, default=0.05
        ``beta`` in the equation for ``tau``.
    n_outputs : int, default=1
    net_sparsity, net_resolution : int and float, optional
        Override ``k`` and ``tau`` (public choices).
    rng : numpy.random.Generator

    Returns
    -------
    SolverResult
        One ledger record of kind ``"approx_dp"`` with ``(epsilon, 0)``.

    References
    ----------
    .. [1] Ghazi et al., "Differentially Private Optimization with Sparse
       Gradients", Algorithm 7, Lemma 7.3, Theorem 7.5 (the exponent, the ``tau``
       equation and the net sparsity corrected as in :func:`net_parameters` and
       the module docstring).
    """
    dim = design.dim * int(n_outputs)
    if dim > MAX_DIM:
        raise ValueError(
            f"The sparse exponential mechanism (Algorithm 7) is brute force and runs "
            f"only for at most MAX_DIM={MAX_DIM} parameters; got {dim} "
            "(n_features + fit_intercept, times the number of classes for "
            "multinomial). Choose another algorithm."
        )
    epsilon = check_real(
        budget.epsilon, "epsilon", low=0.0, low_open=True, allow_inf=True
    )
    check_real(loss_bound, "loss_bound", low=0.0, low_open=True)
    check_real(radius, "radius", low=0.0, low_open=True)
    if net_sparsity is None or net_resolution is None:
        tau, k = net_parameters(
            design.n_samples,
            epsilon,
            loss_bound=loss_bound,
            norm_bound=norm_bound,
            sparsity=sparsity,
            radius=radius,
            dim=dim,
            confidence=confidence,
        )
        k = k if net_sparsity is None else int(net_sparsity)
        tau = tau if net_resolution is None else float(net_resolution)
    else:
        k, tau = int(net_sparsity), float(net_resolution)
    candidates = sparse_net(dim, min(k, dim), radius, tau)
    scores = _scores(design, y, loss, candidates, n_outputs, loss_bound)
    # Sensitivity B of u(x, S): one clipped summand in [0, B] changes (replace-one),
    # SCORE_UNITS in the scores' fixed-point units.
    mechanism = ExponentialMechanism(
        SCORE_UNITS, epsilon, name="sparse exponential mechanism"
    )
    coef = candidates[mechanism.select(scores, rng)]
    if n_outputs != 1:
        coef = coef.reshape(design.dim, n_outputs)
    return SolverResult(coef=coef, n_iter=1, records=[mechanism.record()])
