"""Public parameter schedules of DP-SCO with the truncated-mean oracle.

Kamath, Liu & Zhang (2021), Algorithm 4 with Theorems 4.7 (convex) and 4.8 (strongly
convex, smooth), and Appendix B (axis-aligned moments). Where the paper leaves a
choice open (a constant, a clamp, a cap), the choice made here is stated with the
formula. Every function here is a pure function of public numbers: ``N``, ``p``, the
total zCDP budget ``rho`` and the user's public bounds. Nothing reads data, so nothing
here needs privacy accounting.

Conventions: ``n`` is the size of the mean stage's sample (the paper writes ``n``
both for the total and for each half of Algorithm 3), ``n = |Z| = N - floor(N/2)``
for ``sample_split="data"``; for ``"budget"`` the mean stage sees ``n = N`` records
at half the per-call budget, so the "effective privacy sample size"
``X = n sqrt(rho) / p`` is evaluated with ``(n, rho) = (N, rho/2)`` (the paper has no
such variant; this choice keeps ``X`` equal to the ratio that sets the mean stage's
noise, ``sigma ~ tau sqrt(p) / (n sqrt(rho_mean))``). Work is in normalised units
(``R~ = R / s``: the paper's gradients have a k-th moment bound of 1, Definition
2.11); the step size uses the original ``M`` and ``R``.
"""

import math
from dataclasses import dataclass

from ..utils._validation import check_int, check_real
from ._truncated_mean import (
    MIN_TRUNCATION,
    _check_moment_order,
    default_gradient_bound,
    mean_stage_size,
)

__all__ = [
    "TruncatedGDSchedule",
    "axis_convex_schedule",
    "axis_strongly_convex_schedule",
    "convex_schedule",
    "default_gradient_bound",
    "strongly_convex_schedule",
]

#: Default cap on ``T`` (the paper sets none; a smaller ``T`` is privacy-safe).
DEFAULT_MAX_ITER = 1000


@dataclass(frozen=True)
class TruncatedGDSchedule:
    """Public hyperparameters of one DP-SCO fit.

    Attributes
    ----------
    n_iter : int
        ``T`` (after the clamp to ``[1, max_iter]``).
    learning_rate : float
        ``eta``, computed with the final ``T``.
    truncation : float
        ``tau`` after the clamp at 60.
    averaging : {"uniform", "last"}
        Released iterate: mean of ``w_1..w_T`` (convex) or ``w_T`` (strongly convex).
    rho_per_iter : float
        ``rho / T``, the budget of one oracle call.
    truncation_formula : float
        The unclamped ``tau`` formula (public, so it may be exposed).
    """

    n_iter: int
    learning_rate: float
    truncation: float
    averaging: str
    rho_per_iter: float
    truncation_formula: float


# ------------------------------------------------------------------ validation


def _common(
    n_samples, rho, dim, gradient_scale, gradient_bound, sample_split, max_iter
):
    N = check_int(n_samples, "n_samples", low=1)
    rho = check_real(rho, "rho", low=0, low_open=True, allow_inf=True)
    p = check_int(dim, "dim", low=1)
    s = check_real(gradient_scale, "gradient_scale", low=0, low_open=True)
    R = (
        default_gradient_bound(s, p)
        if gradient_bound is None
        else check_real(gradient_bound, "gradient_bound", low=0, low_open=True)
    )
    max_iter = check_int(max_iter, "max_iter", low=1)
    n = mean_stage_size(N, sample_split)
    rho_mean = rho if sample_split == "data" else rho / 2.0
    return n, rho, rho_mean, p, s, R, max_iter


def _schedule(T, learning_rate, tau_formula, averaging, rho):
    # tau clamped at 60, Theorem 4.1's precondition, which the formulas can miss;
    # rho_t = rho / T with the final T.
    return TruncatedGDSchedule(
        n_iter=T,
        learning_rate=learning_rate,
        truncation=max(MIN_TRUNCATION, tau_formula),
        averaging=averaging,
        rho_per_iter=rho / T,
        truncation_formula=tau_formula,
    )


def _clamp_iter(T, max_iter):
    # T in [1, max_iter] (the paper sets no cap); a smaller T is privacy-safe when eta
    # and rho_t are recomputed with it. floor(inf) is the cap.
    if not T >= 1:
        return 1
    return int(min(max_iter, math.floor(T))) if math.isfinite(T) else max_iter


def _strong_convexity(strong_convexity, smoothness):
    a = check_real(strong_convexity, "strong_convexity", low=0, low_open=True)
    b = check_real(smoothness, "smoothness", low=0, low_open=True)
    if a > b:
        raise ValueError(f"strong_convexity ({a!r}) cannot exceed smoothness ({b!r}).")
    return a, b


def _strongly_convex_iterations(n, rho_mean, p, k, s, a, b, diameter, max_iter):
    """Smallest ``T >= 1`` with ``q^T M <= (a + b) G(T) / (a b)`` (Thm 3.2, 4.8)."""
    q = (a * a + a * b + b * b) / (a + b) ** 2  # = 1 - ab / (a+b)^2
    M = diameter

    def G(T):
        # The unspecified O-constants set to 1: G(T) = s (sqrt(p/n) + (p sqrt(T) /
        # (n sqrt rho))^((k-1)/k)), the error bound of the oracle at budget rho/T
        # (Thm 4.1).
        privacy = (
            0.0
            if math.isinf(rho_mean)
            else p * math.sqrt(T) / (n * math.sqrt(rho_mean))
        )
        return s * (math.sqrt(p / n) + privacy ** ((k - 1.0) / k))

    # The left side decreases and the right side increases in T, so the first T that
    # satisfies the rule is well defined; q^T is evaluated in log space.
    log_q = math.log(q)
    for T in range(1, max_iter + 1):
        if T * log_q + math.log(M) <= math.log((a + b) * G(T) / (a * b)):
            return T
    return max_iter


# ------------------------------------------------------------------- schedules


def convex_schedule(
    n_samples,
    rho,
    dim,
    *,
    diameter,
    moment_order=2.0,
    gradient_scale=1.0,
    gradient_bound=None,
    sample_split="data",
    max_iter=DEFAULT_MAX_ITER,
):
    """Convex case: Algorithm 4 with Theorem 4.7.

    With ``X = n sqrt(rho) / p`` and ``L_R = max(1, ln(R / s))``:

    * ``T = clip(floor(X^((2k-2)/k) / (4 L_R)), 1, max_iter)``
      (Theorem 4.7: ``T = (n sqrt(rho)/d)^((2k-2)/k) / (4 log R)``; the floor
      ``L_R >= 1``, which keeps ``T`` positive and finite for ``R <= e``, and the cap
      are not in the paper);
    * ``tau = max(60, X^(1/k))`` (Theorem 4.7 — deliberately *without* ``T``: the
      paper's key improvement over KSU20, Remark 4.9; the clamp at 60 is Theorem
      4.1's precondition ``tau >= 60``, which the formula can miss);
    * ``eta = M / (R sqrt(T))`` and ``rho_t = rho / T``, both with the final ``T``;
    * averaging ``"uniform"`` (mean of ``w_1..w_T``).

    Parameters
    ----------
    n_samples : int
        Public ``N``.
    rho : float
        Total zCDP budget of the fit (``inf``: the non-private testing mode; then
        ``T = max_iter`` and ``tau = inf``, which the oracles accept only at
        ``rho = inf``: nothing is truncated).
    dim : int
        ``p``: gradient coordinates (intercept and ``x K`` included).
    diameter : float
        ``M``, diameter of the feasible set (``2 radius`` for a ball).
    moment_order : float, default=2.0
        ``k >= 2``.
    gradient_scale : float, default=1.0
        ``s``.
    gradient_bound : float or None
        ``R`` (original units); ``None``: :func:`default_gradient_bound`.
    sample_split : {"data", "budget"}, default="data"
    max_iter : int, default=1000

    Returns
    -------
    TruncatedGDSchedule

    References
    ----------
    .. [1] Kamath, G., Liu, X. and Zhang, H. (2021). arXiv:2106.01336, Algorithm 4,
       Theorem 4.7.

    Examples
    --------
    >>> sched = convex_schedule(100_000, 0.0208199, 10, diameter=10.0,
    ...                         gradient_bound=10.0)
    >>> sched.n_iter, sched.truncation, round(sched.learning_rate, 6)
    (78, 60.0, 0.113228)
    """
    n, rho, rho_mean, p, s, R, max_iter = _common(
        n_samples, rho, dim, gradient_scale, gradient_bound, sample_split, max_iter
    )
    M = check_real(diameter, "diameter", low=0, low_open=True)
    k = _check_moment_order(moment_order)
    X = n * math.sqrt(rho_mean) / p
    L_R = max(1.0, math.log(R / s))
    T = _clamp_iter(X ** ((2.0 * k - 2.0) / k) / (4.0 * L_R), max_iter)
    tau_formula = X ** (1.0 / k)
    return _schedule(T, M / (R * math.sqrt(T)), tau_formula, "uniform", rho)


def strongly_convex_schedule(
    n_samples,
    rho,
    dim,
    *,
    diameter,
    strong_convexity,
    smoothness,
    moment_order=2.0,
    gradient_scale=1.0,
    gradient_bound=None,
    sample_split="data",
    max_iter=DEFAULT_MAX_ITER,
):
    """Strongly convex and smooth case: Algorithm 4 with Theorem 4.8.

    With ``q = (a^2 + ab + b^2) / (a + b)^2`` and
    ``G(T) = s (sqrt(p/n) + (p sqrt(T) / (n sqrt(rho)))^((k-1)/k))``:

    * ``eta = 1 / (a + b)`` (Theorem 4.8);
    * ``T`` = the smallest integer ``>= 1`` with ``q^T M <= (a + b) G(T) / (a b)``,
      capped at ``max_iter`` (Theorem 4.8's ``T = ln((a+b)G/(ab)) / ln q`` is
      circular in ``G`` and omits ``M``; with ``M`` the rule balances the two terms
      of Theorem 3.2's ``E||w_T - w*|| <= q^T M + (a + b) G / (a b)``);
    * ``tau = max(60, (n sqrt(rho / T) / p)^(1/k))`` — here ``tau`` *does* include
      ``T`` (Theorem 4.8); the clamp at 60 is Theorem 4.1's precondition;
    * ``rho_t = rho / T``; averaging ``"last"`` (``w_T``).

    ``a`` and ``b`` must be public bounds, never estimated from the data. ``R`` does
    not enter (only the oracle's histogram range uses it).

    Parameters
    ----------
    n_samples, rho, dim, diameter, moment_order, gradient_scale, gradient_bound, \
sample_split, max_iter
        As in :func:`convex_schedule`.
    strong_convexity : float
        ``a > 0``.
    smoothness : float
        ``b >= a``.

    Returns
    -------
    TruncatedGDSchedule

    References
    ----------
    .. [1] Kamath, G., Liu, X. and Zhang, H. (2021). arXiv:2106.01336, Algorithm 4,
       Theorems 3.2 and 4.8.

    Examples
    --------
    >>> sched = strongly_convex_schedule(100_000, 0.0208199, 10, diameter=10.0,
    ...                                  strong_convexity=1.0, smoothness=2.0)
    >>> sched.n_iter, sched.truncation, sched.averaging
    (18, 60.0, 'last')
    >>> sched.learning_rate == 1.0 / 3.0
    True
    """
    a, b = _strong_convexity(strong_convexity, smoothness)
    n, rho, rho_mean, p, s, _, max_iter = _common(
        n_samples, rho, dim, gradient_scale, gradient_bound, sample_split, max_iter
    )
    M = check_real(diameter, "diameter", low=0, low_open=True)
    k = _check_moment_order(moment_order)
    T = _strongly_convex_iterations(n, rho_mean, p, k, s, a, b, M, max_iter)
    tau_formula = (n * math.sqrt(rho_mean / T) / p) ** (1.0 / k)
    return _schedule(T, 1.0 / (a + b), tau_formula, "last", rho)


def axis_convex_schedule(
    n_samples,
    rho,
    dim,
    *,
    diameter,
    gradient_scale=1.0,
    gradient_bound=None,
    sample_split="data",
    max_iter=DEFAULT_MAX_ITER,
):
    """Axis-aligned moments, convex case (Appendix B, ``k = 2``).

    * ``T = clip(floor(sqrt(rho) n R~^2 / p^(3/2)), 1, max_iter)`` with ``R~ = R / s``
      (Appendix B, in normalised units);
    * ``tau = max(60, (n^2 rho / p)^(1/4))`` (Appendix B; the clamp at 60 is Theorem
      4.1's precondition);
    * ``eta = M / (R sqrt(T))``, ``rho_t = rho / T`` with the final ``T``;
      averaging ``"uniform"``.

    Parameters are those of :func:`convex_schedule` (``k = 2`` is implied).

    References
    ----------
    .. [1] Kamath, G., Liu, X. and Zhang, H. (2021). arXiv:2106.01336, Appendix B.
    """
    n, rho, rho_mean, p, s, R, max_iter = _common(
        n_samples, rho, dim, gradient_scale, gradient_bound, sample_split, max_iter
    )
    M = check_real(diameter, "diameter", low=0, low_open=True)
    R_tilde = R / s
    T = _clamp_iter(math.sqrt(rho_mean) * n * R_tilde**2 / p**1.5, max_iter)
    tau_formula = (n * n * rho_mean / p) ** 0.25
    return _schedule(T, M / (R * math.sqrt(T)), tau_formula, "uniform", rho)


def axis_strongly_convex_schedule(
    n_samples,
    rho,
    dim,
    *,
    diameter,
    strong_convexity,
    smoothness,
    gradient_scale=1.0,
    gradient_bound=None,
    sample_split="data",
    max_iter=DEFAULT_MAX_ITER,
):
    """Axis-aligned moments, strongly convex case (Appendix B, ``k = 2``).

    ``T`` and ``eta = 1/(a+b)`` as in :func:`strongly_convex_schedule` with ``k = 2``
    (Appendix B applies Theorem 3.2 as Theorem 4.8 does);
    ``tau = max(60, (n^2 (rho / T) / p)^(1/4))`` (Appendix B writes
    ``(n^2 rho / d)^(1/4)`` without the per-step ``rho / T``; using it, as Theorem
    4.8 does, is the conservative KSU20 reading). Averaging ``"last"``.

    References
    ----------
    .. [1] Kamath, G., Liu, X. and Zhang, H. (2021). arXiv:2106.01336, Appendix B.
    """
    a, b = _strong_convexity(strong_convexity, smoothness)
    n, rho, rho_mean, p, s, _, max_iter = _common(
        n_samples, rho, dim, gradient_scale, gradient_bound, sample_split, max_iter
    )
    M = check_real(diameter, "diameter", low=0, low_open=True)
    T = _strongly_convex_iterations(n, rho_mean, p, 2.0, s, a, b, M, max_iter)
    tau_formula = (n * n * (rho_mean / T) / p) ** 0.25
    return _schedule(T, 1.0 / (a + b), tau_formula, "last", rho)
