"""Regularised output perturbation with a certified ERM solve (Ghazi et al., Alg. 6).

Release ``Pi(w_hat + xi)`` where ``w_hat`` approximates the minimiser ``w*`` of the
lambda-strongly convex objective

    F(w) = (1/n) sum_i loss(x~_i . w, y_i) + (lambda / 2) ||w||^2

(the intercept coordinate *inside* the penalty: the 2L/(lambda n) sensitivity needs the
whole objective to be lambda-strongly convex; an unpenalised intercept would void
it), ``xi`` is Gaussian (``delta > 0``) or Laplace (``delta = 0``) noise on every
coordinate and ``Pi`` is the l-infinity projection onto the feasible set (identity on
R^d).

Privacy (replace-one neighbours, ``n`` public). For the exact minimisers of two
neighbouring objectives, summing the two lambda-strong-convexity inequalities gives
``lambda ||w* - w*'||^2 <= (2L/n) ||w* - w*'||``, i.e. l2-sensitivity ``2L/(lambda n)``
(Ghazi et al., proof of Thm 7.1; the text's 4L/(lambda n) is conservative). The solve
is approximate, so :func:`~skdpsco._solvers._certified.certified_minimize_fixed`
must certify ``||w_hat - w*|| <= tol_w`` for a ``tol_w`` fixed from public quantities
*before* the solve (never the achieved value, which depends on the data); by the
triangle inequality through ``w*(S)`` and ``w*(S')`` the released point then has
l2-sensitivity ``2L/(lambda n) + 2 tol_w``. No certificate, no release: the solver
raises :class:`~skdpsco.exceptions.CertificationError`.

The solve runs a public number of iterations, :func:`certified_iteration_budget`
(or the caller's ``max_iter``), always in full, and checks the certificate once at
the end (:func:`~skdpsco._solvers._certified.certified_minimize_fixed`). Stopping
as soon as the certificate holds would make the number of iterations, hence the fit
time, a function of the private data (two neighbouring datasets can need very
different counts, and the fit's time would tell them apart).

For ``delta = 0`` (smooth loss, unconstrained) the l1-sensitivity of ``w*`` is bounded
by ``(2 sqrt(2 s) L / (lambda n)) (2H/lambda + 1)`` (Thm 7.1, kept as printed: it was
derived from the conservative 4L/(lambda n)); the optimisation error adds
``2 sqrt(p) tol_w`` (l1 <= sqrt(p) l2 on ``p`` parameters).
"""

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg import blas

from .._design import summation_error
from ..privacy._accounting import gaussian_rho_budget
from ..privacy._mechanisms import GaussianMechanism, LaplaceMechanism
from ..utils._validation import check_real
from ._certified import certified_minimize_fixed, derivative_error, prediction_error
from ._result import SolverResult

__all__ = [
    "AUTO_PREDICTION_NOISE",
    "OutputPerturbationPlan",
    "auto_coef_norm_bound",
    "auto_l2_penalty",
    "certified_iteration_budget",
    "gradient_error_bound",
    "linf_project_l2_ball",
    "output_perturbation",
    "plan_output_perturbation",
]


def auto_l2_penalty(
    *,
    lipschitz,
    smoothness,
    coef_norm_bound,
    n_samples,
    n_params,
    sparsity,
    epsilon,
    delta,
    confidence=0.05,
):
    """The regularisation strength ``lambda`` of Algorithm 6 for SCO (Thm 7.6).

    ``delta > 0``: ``(L / D) sqrt(A + B)`` with ``A = ln(n) ln(1/beta) / n`` and
    ``B = sqrt(s ln(1/delta) ln(p/beta)) / (epsilon n)``.

    ``delta = 0``: the larger of the statistical term ``(L/D) sqrt(ln(n) ln(1/beta)/n)``
    and Thm 7.1/7.6's ``((L^2 H / D^2) s ln(p/beta) / (epsilon n))^(1/3)``
    (the maximum keeps ``lambda > 0`` as ``epsilon -> inf``).

    The paper's constants are unspecified ("<~"); constant 1 is used.
    Every input is public, so ``lambda`` costs no privacy.

    Parameters
    ----------
    lipschitz, smoothness : float
        ``L`` and ``H`` of the per-example loss on the enforced rows.
    coef_norm_bound : float
        ``D``, the assumed norm of the population minimiser.
    n_samples, n_params : int
        ``n`` and the number of parameters ``p``.
    sparsity : int
        ``s``: non-zeros of a per-example gradient.
    epsilon, delta : float
    confidence : float
        ``beta``.

    Returns
    -------
    float
    """
    L, H, D = float(lipschitz), float(smoothness), float(coef_norm_bound)
    n, p, s, beta = int(n_samples), int(n_params), int(sparsity), float(confidence)
    statistical = math.log(max(n, 2)) * math.log(1.0 / beta) / n
    log_p = math.log(max(p, 2) / beta)
    if delta > 0:
        privacy = math.sqrt(s * math.log(1.0 / delta) * log_p) / (epsilon * n)
        return (L / D) * math.sqrt(statistical + privacy)
    privacy = (L * L * H / (D * D)) * s * log_p / (epsilon * n)
    return max((L / D) * math.sqrt(statistical), privacy ** (1.0 / 3.0))


#: ``tau`` of :func:`auto_coef_norm_bound`: the standard deviation of the released
#: point's noise on the prediction of a row at the public bound, in units of the
#: loss's argument (logits, or the standardised target). Measured
#: (``benchmarks/sparse_defaults.py``, one-hot data, n = 5e3-1e5, epsilon =
#: 0.5-4): the best penalty put this noise between about 0.08 and 0.8.
AUTO_PREDICTION_NOISE = 0.25


def auto_coef_norm_bound(
    *,
    lipschitz,
    smoothness,
    row_bound,
    budget,
    n_params,
    sparsity,
    tol,
    confidence=0.05,
    prediction_noise=AUTO_PREDICTION_NOISE,
):
    """The ``D`` whose Thm 7.6 penalty gives prediction noise ``tau`` (a public rule).

    :func:`auto_l2_penalty` balances the penalty's bias ``lambda D^2 / 2`` against
    the stability and noise terms of Thm 7.6 for a *given* ``D``; the released
    point's noise per coordinate is ``z (2 L / (lambda n) + 2 tol_w)`` (``z`` the
    noise per unit of l2-sensitivity of ``(epsilon, delta)``; the sensitivity
    ``2 L / (lambda n)`` of Thm 7.1) and perturbs the prediction of a row of norm
    ``C`` (``row_bound``) by a Gaussian of standard deviation ``C`` times it. This
    rule returns the largest ``D`` (the least biased penalty) for which that
    prediction noise is at most ``tau = prediction_noise``. With ``delta > 0``,
    ``lambda = (L / D) sqrt(A + B)`` and ``L`` cancels: ``D ~ tau n sqrt(A + B) /
    (2 z C (1 + 2 tol))``, about ``sqrt(n)`` growth. With ``delta = 0`` the
    Laplace noise (standard deviation ``sqrt(2)`` times its scale) is used.

    Every input is public (sizes, the budget, the declared or privately
    released sparsity, the loss's constants): the value is the same for every
    dataset with the same public values, so it costs no privacy. Found by
    bisection on ``log D`` (the noise grows with ``D``).

    Parameters
    ----------
    lipschitz, smoothness : float
        ``L`` and ``H`` of the per-example loss on the enforced rows.
    row_bound : float
        ``C``, the l2 bound of an enforced row (intercept included).
    budget : AlgorithmBudget
        The budget of the output perturbation (``n`` and ``(epsilon, delta)``).
        ``epsilon = inf`` (no noise) returns 1.0.
    n_params : int
        The number of parameters ``p``.
    sparsity : int
        ``s``: non-zeros of a per-example gradient.
    tol : float
        Relative certificate of the solve (the noise grows by ``1 + 2 tol``).
    confidence : float
        ``beta`` of :func:`auto_l2_penalty`.
    prediction_noise : float
        ``tau``.

    Returns
    -------
    float
    """
    if not budget.is_private:
        return 1.0
    common = dict(
        lipschitz=lipschitz, smoothness=smoothness, n_params=n_params, sparsity=sparsity
    )

    def excess(log_d):
        lam = auto_l2_penalty(
            coef_norm_bound=math.exp(log_d),
            n_samples=budget.n_samples,
            epsilon=budget.epsilon,
            delta=budget.delta,
            confidence=confidence,
            **common,
        )
        plan = plan_output_perturbation(
            budget=budget, l2_penalty=lam, tol=tol, max_iter=1, **common
        )
        std = plan.noise_scale * (1.0 if plan.noise == "gaussian" else math.sqrt(2.0))
        return std * float(row_bound) - float(prediction_noise)

    lo, hi = math.log(1e-3), math.log(1e9)
    if excess(lo) >= 0:
        return math.exp(lo)
    if excess(hi) <= 0:
        return math.exp(hi)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if excess(mid) <= 0:
            lo = mid
        else:
            hi = mid
    return math.exp(lo)


def certificate_floor(lipschitz, smoothness, l2_penalty, gradient_error=0.0):
    """Public lower bound on ``tol_w`` above the certificate's rounding margin.

    The residual certificate adds ``64 eps_mach (||g|| + ||g+|| + H (||w|| +
    ||w+||)) / lambda`` for floating-point rounding (:mod:`._certified`). From
    ``w = 0`` the V-FISTA iterates satisfy ``||x_k - w*||^2 <= 2 (F(0) - F* +
    lambda ||w*||^2 / 2) / lambda <= 2 L^2 / lambda^2`` (Beck 2017, Thm 10.42) with
    ``||w*|| <= L / lambda``; an extrapolated point ``x_k + m (x_k - x_{k-1})``,
    ``m < 1``, is within ``3 sqrt(2) L / lambda`` of ``w*``. So every point the
    solver evaluates has ``||w|| <= 6L / lambda`` and ``||grad F(w)|| <= 7L``: the
    margin is at most ``64 eps (14 L + 12 (H + lambda) L / lambda) / lambda``,
    public. A ``tol_w`` below it could never be certified, and whether the actual
    margin (which grows with the data-dependent ``||w*||``) exceeds ``tol_w`` would
    decide between a release and an exception: a one-bit data-dependent release.
    ``tol_w`` is floored at 16 times
    the bound; the noise is calibrated to the floored ``tol_w``, so privacy holds
    for any ``tol``. The certificate also adds ``E / lambda``, ``E`` the public
    bound on a computed gradient's absolute error (``gradient_error``: the
    summation's, :func:`gradient_error_bound`, and the predictions',
    :func:`~._certified.prediction_error`, both added by
    :func:`plan_output_perturbation`), in the same floor.
    """
    L, H, lam = float(lipschitz), float(smoothness), float(l2_penalty)
    eps = np.finfo(float).eps
    relative = 64.0 * eps * (14.0 * L + 12.0 * (H + lam) * L / lam)
    return 16.0 * (relative + float(gradient_error)) / lam


def gradient_error_bound(design, gradient_bound, n_params, n_outputs=1):
    """Public bound ``E`` on ``||computed grad F(w) - grad F(w)||_2``
    (:mod:`._certified`): the data term's summation error for rows with
    ``||phi' x~_i||_2 <= G`` (:func:`~skdpsco._design.summation_error`: every
    block's rounding and grid rounding of exact sums, or ``gamma_n G`` for float
    sums), the evaluation of the ``n_outputs`` coefficients from the predictions
    (:func:`~._certified.derivative_error`) and the addition of the penalty's
    gradient (``2.01 u G``; its own share is in the relative margin). The
    predictions' rounding is added by :func:`plan_output_perturbation`."""
    G = float(gradient_bound)
    return (
        summation_error(design, G, n_params)
        + derivative_error(G, n_outputs)
        + 2.01 * 2.0**-53 * G
    )


def certified_iteration_budget(*, lipschitz, smoothness, l2_penalty, tol_w):
    """Public number of iterations after which the certificate provably holds.

    The certified solve runs exactly this many V-FISTA iterations (a count read
    off the data would be revealed by the fit time), so it must certify for every
    dataset; it is the smallest ``N`` for which the argument below does.

    Write ``mu = lambda``, ``H_F = H + lambda`` (``F`` is ``mu``-strongly convex and
    ``H_F``-smooth), ``kappa = H_F / mu`` and ``q = 1 - 1/sqrt(kappa)``.

    1. Rate. From ``x_0 = 0``, V-FISTA's projected iterates satisfy ``F(x_N) - F*
       <= q^N (F(0) - F* + mu ||w*||^2 / 2)`` (Beck 2017, Thm 10.42). Strong
       convexity between ``0`` and ``w*`` bounds the bracket by ``-<grad F(0), w*>
       <= L ||w*||`` and ``||w*|| <= L / mu`` (``||grad F(0)|| <= L``: ``0`` is
       feasible and the penalty's gradient vanishes there); so ``F(x_N) - F* <=
       q^N L^2 / mu``.
    2. Gradient mapping. The certificate at ``x_N`` uses ``w+ = P(x_N - grad F(x_N)
       / H_F)``; the sufficient-decrease lemma (Beck 2017, Lemma 10.4) gives
       ``||x_N - w+||^2 <= 2 (F(x_N) - F*) / H_F``.
    3. Residual. ``v = h(x_N) - h(w+)`` with ``h = H_F Id - grad F``; ``F - mu/2
       ||.||^2`` is convex and ``(H_F - mu)``-smooth, so by co-coercivity (Beck 2017,
       Thm 5.8) ``h`` is ``(H_F - mu)``-Lipschitz and the certified distance
       ``||v|| / mu`` is at most ``(kappa - 1) ||x_N - w+||``.

    Together: ``||v|| / mu <= sqrt(2 / kappa) (kappa - 1) (L / mu) q^(N/2)``. The
    count asks for ``tol_w / 2``; the other half covers the certificate's rounding
    margin (at most ``tol_w / 16`` by :func:`certificate_floor`) and the rounding of
    the iterates, which the exact-arithmetic rate ignores:

        N = ceil(2 ln(2 sqrt(2) (kappa - 1) L / (sqrt(kappa) lambda tol_w)) / -ln(q))

    about ``2 sqrt(kappa) ln(...)``, the accelerated rate. Every input is public.
    The restarted solver that stopped at the certificate typically needed several
    times fewer iterations, but how many depended on the data: the public count
    pays for the worst case over datasets. (Plain gradient descent would need
    ``~ 2 kappa ln(...)``, a factor ``sqrt(kappa)`` more.)
    """
    L, H, lam = float(lipschitz), float(smoothness), float(l2_penalty)
    kappa = (H + lam) / lam
    if kappa <= 1.0:  # H = 0: F is a quadratic that one step minimises exactly
        return 1
    rate = -math.log1p(-1.0 / math.sqrt(kappa))
    gain = 2.0 * math.sqrt(2.0) * (kappa - 1.0) / math.sqrt(kappa)
    ratio = gain * L / (lam * float(tol_w))
    return max(1, int(math.ceil(2.0 * math.log(max(ratio, 1.0)) / rate)))


def linf_project_l2_ball(w, radius):
    """``argmin_{||u||_2 <= R} ||u - w||_inf``, the soft-threshold ``soft(w, t*)``.

    ``t* = min{t >= 0 : ||soft(w, t)||_2 <= R}``, a unique choice where
    Algorithm 6 breaks ties "arbitrarily": soft thresholding gives the
    coordinate-wise smallest point of the box ``{u : ||u - w||_inf <= t}``. With
    ``|w|`` sorted decreasingly and ``S1_k``, ``S2_k`` the sum and sum of squares of
    the top ``k`` entries, ``||soft(w, t)||^2 = S2_k - 2 t S1_k + k t^2`` on the
    piece with ``k`` active coordinates, whose root is
    ``t = S1_k/k - sqrt(S1_k^2/k^2 - (S2_k - R^2)/k)``.
    ``O(p log p)``. Post-processing of a private point, so it costs no privacy.

    Parameters
    ----------
    w : ndarray
        Any shape (projected as a flat vector).
    radius : float or None
        ``None`` means no constraint (identity).

    Returns
    -------
    ndarray of the shape of ``w``
    """
    if radius is None:
        return w
    w = np.asarray(w, dtype=float)
    if np.linalg.norm(w) <= radius:
        return w
    u = np.sort(np.abs(w).ravel())[::-1]
    k = np.arange(1, u.size + 1)
    S1 = np.cumsum(u)
    S2 = np.cumsum(u * u)
    disc = np.maximum((S1 / k) ** 2 - (S2 - radius**2) / k, 0.0)
    t = S1 / k - np.sqrt(disc)
    # The piece with k active coordinates is valid when u_{k+1} <= t <= u_k.
    nxt = np.append(u[1:], 0.0)
    valid = (t <= u * (1 + 1e-12)) & (t >= nxt * (1 - 1e-12))
    t_star = float(t[np.argmax(valid)]) if valid.any() else float(u[0])
    out = np.sign(w) * np.maximum(np.abs(w) - t_star, 0.0)
    norm = np.linalg.norm(out)
    if norm > radius:  # rounding: shrink by at most a few ulps
        out = out * (radius / norm)
    return out


@dataclass(frozen=True)
class OutputPerturbationPlan:
    """The public constants of one release (nothing here reads the data).

    Attributes
    ----------
    l2_penalty : float
        ``lambda``.
    smoothness : float
        ``H``, the public smoothness bound of a per-example loss (the solver's step
        is ``1 / (H + lambda)``).
    tol_w : float
        Certified distance the solve must reach, ``tol * 2L / (lambda n)``.
    sensitivity : float
        l2 (Gaussian) or l1 (Laplace) sensitivity of the released point.
    noise : {"gaussian", "laplace"}
    noise_scale : float
        Gaussian std or Laplace scale per coordinate (0 when ``epsilon = inf``).
    max_iter : int
        Number of iterations of the certified solve, always run in full (public).
    mechanism : GaussianMechanism or LaplaceMechanism
    gradient_error : float
        Public bound on a computed gradient's absolute error (summation and
        predictions), added to the certificate's residual.
    """

    l2_penalty: float
    smoothness: float
    tol_w: float
    sensitivity: float
    noise: str
    noise_scale: float
    max_iter: int
    mechanism: object
    gradient_error: float = 0.0


def plan_output_perturbation(
    *,
    budget,
    n_params,
    lipschitz,
    smoothness,
    l2_penalty,
    sparsity,
    tol,
    max_iter=None,
    gradient_error=0.0,
):
    """Noise and solver constants of Algorithm 6, from public values only.

    Parameters
    ----------
    budget : AlgorithmBudget
        Its public ``n_samples`` and ``(epsilon, delta)``: ``delta = 0``, pure DP
        with Laplace noise; ``delta > 0``, Gaussian noise calibrated exactly
        (analytic Gaussian, valid for every epsilon).
    n_params : int
        Number of released parameters ``p`` (``d + 1`` with an intercept, times
        ``K`` for the multinomial model).
    lipschitz : float
        ``L``: every per-example gradient has l2 norm ``<= L`` on the feasible set.
    smoothness : float
        ``H``: every per-example loss is H-smooth (used by the pure-DP bound and the
        iteration budget).
    l2_penalty : float
        ``lambda > 0``.
    sparsity : int
        ``s``: every per-example gradient has l1 norm ``<= L sqrt(s)`` (enforced by
        the row map, Remark 2.1). Used only by the pure-DP bound.
    tol : float
        Relative certificate: ``tol_w = tol * 2L / (lambda n)``, fixed before the
        solve and floored at :func:`certificate_floor` (public) so the certificate
        cannot fail.
    max_iter : int or None
        Number of solver iterations (always run in full); None uses
        :func:`certified_iteration_budget`, under which the certificate cannot
        fail. A smaller count may raise ``CertificationError`` (one revealed bit).
    gradient_error : float, default=0.0
        Public bound on a computed gradient's summation error
        (:func:`gradient_error_bound`), part of the certificate's margin; the
        plan adds the predictions' rounding (:func:`~._certified.prediction_error`
        with ``n_params >= dim`` terms, at a point of norm ``<= 6 L / lambda``:
        :func:`certificate_floor`).

    Returns
    -------
    OutputPerturbationPlan
    """
    n, L, H = int(budget.n_samples), float(lipschitz), float(smoothness)
    lam = check_real(l2_penalty, "l2_penalty", low=0.0, low_open=True)
    gradient_error = float(gradient_error) + prediction_error(
        n_params, H, 6.0 * L / lam
    )
    exact = 2.0 * L / (lam * n)  # Thm 7.1: l2-sensitivity of the exact minimiser
    tol_w = max(float(tol) * exact, certificate_floor(L, H, lam, gradient_error))
    if max_iter is None:
        max_iter = certified_iteration_budget(
            lipschitz=L, smoothness=H, l2_penalty=lam, tol_w=tol_w
        )
    if budget.delta > 0:
        sensitivity = exact + 2.0 * tol_w  # triangle inequality via w*(S), w*(S')
        rho = (
            gaussian_rho_budget(budget.epsilon, budget.delta)
            if budget.is_private
            else math.inf
        )
        mechanism = GaussianMechanism.from_zcdp(
            sensitivity, rho, name="output perturbation (Alg. 6)"
        )
        return OutputPerturbationPlan(
            lam,
            H,
            tol_w,
            sensitivity,
            "gaussian",
            mechanism.sigma,
            int(max_iter),
            mechanism,
            float(gradient_error),
        )
    # Thm 7.1, delta = 0, as printed (conservative), plus the l1 optimisation error.
    sensitivity = (2.0 * math.sqrt(2.0 * sparsity) * L / (lam * n)) * (
        2.0 * H / lam + 1.0
    ) + 2.0 * math.sqrt(n_params) * tol_w
    mechanism = LaplaceMechanism.from_epsilon(
        sensitivity, budget.epsilon, name="output perturbation (Alg. 6, pure)"
    )
    return OutputPerturbationPlan(
        lam,
        H,
        tol_w,
        sensitivity,
        "laplace",
        mechanism.scale,
        int(max_iter),
        mechanism,
        float(gradient_error),
    )


class _LossDerivative:
    """``C_i = phi'(x~_i . w, y_i)``, the coefficients of the gradient's row sum
    (a picklable map: on dask input it runs on the workers)."""

    def __init__(self, loss):
        self.loss = loss

    def __call__(self, Z, y, row_norms):
        return self.loss.derivative(Z, y)


def _objective(design, y, loss, l2_penalty, shape, gradient_bound=None):
    """``w -> (F(w), grad F(w))`` with every coordinate (intercept too) penalised.

    With a public ``gradient_bound`` ``G >= ||phi'(x~_i . w, y_i) x~_i||`` at every
    point the solve evaluates, a design with exact sums (dense rows in memory, or
    a dask design) sums the gradient exactly (:mod:`skdpsco._exact_sum`): the same
    bits for every chunking of the rows. The value is then not computed (NaN): the
    solver reads only the gradient, and the value would cost a second pass over
    the rows. ``value_and_grad(w, extended=True)`` accumulates the predictions in
    ``np.longdouble`` (the certificate's gradient at the certified point, whose
    rounding :func:`~._certified.prediction_error` bounds).
    """
    n = design.n_samples
    exact = gradient_bound is not None and getattr(design, "exact_sums", False)
    derivative = _LossDerivative(loss)

    def value_and_grad(w, extended=False):
        W = w.reshape(shape)
        if exact:
            value = math.nan
            grad = design.exact_fused_sum(
                W, derivative, gradient_bound, y, extended=extended
            ).ravel()
        else:
            Z = design.predict(W, extended=extended)
            # The value is reported, never used by the solver: an extreme target
            # may overflow it (Huber with |y| ~ 1e300) while the gradient stays
            # bounded.
            with np.errstate(over="ignore", invalid="ignore"):
                value = float(np.mean(loss.value(Z, y))) + 0.5 * l2_penalty * float(
                    w @ w
                )
            grad = design.weighted_sum(loss.derivative(Z, y)).ravel()
        # In place: at d = 10^6 every temporary vector is a third of X's size.
        grad /= n
        return value, blas.daxpy(w, grad, a=l2_penalty)

    return value_and_grad


def _constant_work_l2_projection(radius):
    """Projection onto the l2 ball that does the same work inside and outside.

    ``project_l2_ball`` scales only when the point is outside; inside or not is a
    property of the private iterate, and the skipped multiplication would make
    each iteration's cost depend on it. Multiplying by 1.0 is exact, so the result
    is the exact projection either way (the certificate needs exactness).
    """

    def project(w):
        norm = np.linalg.norm(w)
        factor = radius / norm if norm > radius else 1.0
        return w * factor

    return project


def certified_erm(design, y, loss, *, shape, plan, radius=None, gradient_bound=None):
    """The certified solve: ``w_hat`` with ``||w_hat - w*|| <= plan.tol_w``.

    Runs exactly ``plan.max_iter`` iterations (``plan.max_iter + 2`` gradients),
    whatever the data, and certifies once at the end. Raises
    :class:`~skdpsco.exceptions.CertificationError` (and releases nothing) when the
    certificate does not hold then. ``gradient_bound`` (public) asks for exact
    gradient sums (:func:`_objective`).

    Exact sums leave the privacy argument as it is: the sensitivity
    ``2L/(lambda n) + 2 tol_w`` is that of the exact minimiser ``w*`` (Ghazi et
    al., proof of Thm 7.1) plus the certified distance, and the gradients enter
    only through the certificate. Summed in blocks of ``B`` rows rounded to the
    grid ``g`` (:mod:`skdpsco._exact_sum`), each coordinate of a gradient errs by
    at most ``gamma_B L + g n_blocks / (2 n)`` (Higham 2002, eq. 3.5, per block),
    below the ``gamma_n`` bound of the float sum over all ``n`` rows it replaces.
    """
    project = None if radius is None else _constant_work_l2_projection(radius)
    value_and_grad = _objective(design, y, loss, plan.l2_penalty, shape, gradient_bound)

    def certificate_gradient(w):
        # The certified point's predictions in extended precision: the
        # prediction_error term of plan.gradient_error assumes them.
        return value_and_grad(w, extended=True)[1]

    result = certified_minimize_fixed(
        value_and_grad,
        project,
        certificate_gradient=certificate_gradient,
        w0=np.zeros(int(np.prod(shape))),
        mu=plan.l2_penalty,
        smoothness=plan.smoothness + plan.l2_penalty,
        tol=plan.tol_w,
        n_iter=plan.max_iter,
        gradient_error=plan.gradient_error,
    )
    return result.w.reshape(shape)


def output_perturbation(
    design, y, loss, *, n_outputs, plan, radius=None, rng, gradient_bound=None
):
    """Algorithm 6: certified ERM solve, noise on every coordinate, l-inf projection.

    Parameters
    ----------
    design : LinearDesign
        Rows already mapped into the declared bounds (``||x~_i|| <= C``).
    y : ndarray of shape (n,)
        Targets (already clipped for the squared loss) or class codes.
    loss : loss object from :mod:`skdpsco._losses`
    n_outputs : int
        1, or ``K`` for the multinomial model (``W`` of shape ``(dim, K)``).
    plan : OutputPerturbationPlan
        From :func:`plan_output_perturbation` (public constants only).
    radius : float or None
        l2 ball constraint (the squared loss needs it to be Lipschitz); the release
        is then the l-infinity projection of the noisy point onto it.
    rng : numpy.random.Generator
    gradient_bound : float, optional
        Public bound on ``||phi'(x~_i . w, y_i) x~_i||`` at every point the
        solve evaluates: the gradients are then summed exactly where the design
        can (:func:`certified_erm`), the same bits for numpy and dask rows.

    Returns
    -------
    SolverResult
        ``n_iter`` is ``plan.max_iter``: public, and the number of iterations the
        solve actually ran (it never stops early: the fit time must not depend on
        the data).

    Raises
    ------
    CertificationError
        The certificate did not hold after ``plan.max_iter`` iterations; nothing
        is released.

    References
    ----------
    .. [1] Ghazi, B., Guzmán, C., Kamath, P., Kumar, R. and Manurangsi, P.
       Differentially private optimization with sparse gradients. Algorithm 6,
       Theorems 7.1 and 7.6.
    .. [2] Chaudhuri, K., Monteleoni, C. and Sarwate, A. D. (2011). Differentially
       private empirical risk minimization. JMLR (output perturbation).
    """
    shape = design.parameter_shape(n_outputs)
    w_hat = certified_erm(
        design,
        y,
        loss,
        shape=shape,
        plan=plan,
        radius=radius,
        gradient_bound=gradient_bound,
    )
    noisy = plan.mechanism.release(w_hat, rng)
    del w_hat  # never stored or returned
    coef = linf_project_l2_ball(noisy, radius)
    return SolverResult(
        coef=coef, n_iter=plan.max_iter, records=[plan.mechanism.record()]
    )
