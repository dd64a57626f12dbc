"""Accelerated projected gradient with a certified distance to the minimiser.

Objective and output perturbation release a function of the exact minimiser ``w*`` of
a private strongly convex objective; a solver only reaches an approximation ``w``.
Their privacy proof then needs a *deterministic* bound ``||w - w*||_2 <= gamma`` with
``gamma`` fixed from public quantities before the solve: the noise is calibrated to
``gamma``. This module returns such a bound or raises
:class:`~skdpsco.exceptions.CertificationError` and releases nothing.

The certificate: a residual certificate, which gives the optimiser of Su, Zhao &
Wang's Algorithm 1 the deterministic accuracy its privacy proof assumes. Let ``F``
be differentiable and ``mu``-strongly convex on the closed convex set ``C``, ``w`` any
point, ``H > 0`` any step parameter, ``g = grad F(w)`` and

    w+ = P_C(w - g / H),      G = H (w - w+)        (the gradient mapping),
    v  = G + grad F(w+) - grad F(w).

The projection's optimality condition, ``<w - g/H - w+, u - w+> <= 0`` for all
``u`` in ``C``, rewrites as ``<grad F(w+) - v, u - w+> >= 0``: ``v`` lies in
``grad F(w+) + N_C(w+)``, the subdifferential of ``F + I_C`` at ``w+``. That
function is ``mu``-strongly convex, so its subdifferential is ``mu``-strongly
monotone; with ``0`` in the subdifferential at ``w*``,

    mu ||w+ - w*||^2 <= <v - 0, w+ - w*> <= ||v|| ||w+ - w*||,

hence ``||w+ - w*|| <= ||v|| / mu`` and, from the strong-convexity lower bound at
``w+``, ``F(w+) - F(w*) <= ||v||^2 / (2 mu)`` (Rockafellar & Wets 1998, Ex. 12.59;
Beck 2017, Thm 5.24 and Lemma 10.4 for the projection inequality). Only strong
convexity and the exactness of the projection are used: the bound stays valid when
``H`` underestimates the true smoothness (then the method may fail to converge and
raises, but never returns a false certificate). The looser ``2||v|| / mu`` is often
quoted; the argument above gives the factor 1, and the returned bound adds a
floating-point margin on top.

Floating point. ``g`` may be any vector (the step's optimality condition holds for
the ``g`` the step used), but ``grad F(w+)`` must be the true gradient: the
computed one differs from it by the summation error of the data term, an
*absolute* error that no multiple of the magnitudes above bounds (at the optimum
those can be near 0 while one row's contribution is ``L``). The caller passes a
public bound ``E`` on it (``gradient_error``: for exact block sums
:func:`~skdpsco._exact_sum.exact_sum_error`, about ``gamma_B L ~ 4.5e-13 L`` for
blocks of ``B = 4096`` rows plus the grid rounding; for float sums of ``n`` rows
:func:`~skdpsco._exact_sum.float_sum_error`, ``gamma_n L``), and the residual
is ``||v|| + E + 64 eps_mach (||g|| + ||g+|| + H (||w|| + ||w+||))``: the last
term is for the roundings relative to those magnitudes (the step, the
projection, the forming of ``v``). Without ``E``, ``64 eps`` fell short of the
worst-case block rounding (``1.4e-14 (||g|| + ...)`` against ``4.5e-13 L``).

Rounded predictions. A linear model's gradient reads ``phi'(z_i, y_i)`` at the
computed prediction ``z_i = fl(<x~_i, w>)``, a dot product of ``k`` terms
(``k = dim``: the row's entries and the intercept column). In any order of the
additions, BLAS's blocking and fused multiply-adds included, ``|fl(<x~, w>) -
<x~, w>| <= gamma_k sum_j |x~_j w_j| <= gamma_k ||x~|| ||w||`` (Higham 2002,
eq. 3.5 and Lemma 3.1; Cauchy-Schwarz), ``gamma_k = k u / (1 - k u)``, ``u =
2^-53``. ``phi'`` is ``h``-Lipschitz in ``z`` (``h = sup |phi''|``; for ``K``
outputs ``z`` is a vector, the Jacobian of ``p - e_y`` has spectral norm ``<=
1/2 = h``, and ``||dz||_2 <= gamma_k ||x~|| ||W||_F`` column by column), so one
row's contribution ``phi' x~`` moves by at most ``h gamma_k ||x~||^2 ||w|| <=
gamma_k H_row ||w||``, ``H_row = h R^2`` the public per-example smoothness, and
so does the mean. At the certified point that error enters ``grad F(w+)``
exactly as the summation error does: :func:`prediction_error` bounds it for a
public bound ``W >= ||w+||``, and the caller adds it to ``E``. The relative
``64 eps`` margin alone covered it only while ``gamma_k <= 64 eps``, about ``k
<= 128`` (measured on OpenBLAS: ``245 u ||x~|| ||w||`` at ``k = 2000``, above
the margin's ``128 u H ||w+||`` share at ``w+``).

Only ``grad F(w+)`` needs the bound, and it is computed once per solve: its
predictions are accumulated in ``np.longdouble`` and rounded once to float64
(``certificate_gradient`` of :func:`certified_minimize_fixed`), so ``gamma_k``
above becomes ``2u + gamma^ld_k``, ``gamma^ld_k`` with the platform's
extended unit ``u_ld`` (``2^-64`` on x86-64, 2048 times below ``u``; ``u``
itself where ``longdouble`` is float64), plus ``u`` for the final rounding and
``u`` for the intercept's float64 product. At ``k = 10^6`` that is ``5.4e-14``
instead of ``1.1e-10``: the floor the term puts under the certified distance
stays that of the summation. The final step's ``g = grad F(w)`` is read the
same way: any ``g`` keeps the bound valid, but ``v`` holds ``g`` as it holds
``grad F(w+)``, so a public iteration count certifies only while both are within
``E``. The iterations' gradients keep float64 BLAS products.
"""

import math
from dataclasses import dataclass

import numpy as np

from ..exceptions import CertificationError
from ..utils._validation import check_int, check_real

__all__ = [
    "CertifiedResult",
    "certified_minimize",
    "certified_minimize_fixed",
    "derivative_error",
    "prediction_error",
]

#: Relative floating-point margin: the residual is inflated by this multiple of the
#: machine epsilon times the magnitudes that entered it (gradients and H * iterate),
#: to cover rounding in the gradient, the projection and the subtraction.
_ROUNDING_FACTOR = 64.0

#: Unit roundoff of the platform's ``np.longdouble``, in which the certificate's
#: predictions are accumulated (:func:`prediction_error`): public, a property of
#: the machine, ``2^-53`` where ``longdouble`` is float64.
EXTENDED_UNIT = float(np.finfo(np.longdouble).eps) / 2.0


def derivative_error(gradient_bound, n_outputs=1):
    """Public l2 bound on what evaluating the coefficients ``phi'(z_i, y_i)``
    from given predictions adds to a mean gradient ``(1/n) sum_i phi' x~_i``.

    The derivative is a subtraction (squared loss, Huber's clip cannot increase
    the error), ``expit`` (an ``exp`` within one unit, an addition and a
    division) or a softmax (``K`` exponentials, their sum, a division): a
    coefficient errs in l2 by at most ``(K + 8) u`` (``u = 2^-53``; Higham 2002,
    Lemma 3.1) times ``|phi'|`` for the subtraction (a clip is 1-Lipschitz) or
    times ``1`` for ``expit`` and the softmax, whose public per-example gradient
    bound is ``G = R >= ||x~_i||`` (``sqrt(2) R`` for ``K`` outputs). Either way a
    row's contribution errs by at most ``(K + 8) u G``, and so does their mean
    (triangle inequality). The
    predictions' own rounding is :func:`prediction_error`; the sum's, the exact
    or float summation error.

    Parameters
    ----------
    gradient_bound : float
        ``G``.
    n_outputs : int, default=1
        ``K``, the outputs of ``phi'``.

    Returns
    -------
    float
        ``(K + 8) u G (1 + 2^-40)``; the last factor covers its own evaluation.
    """
    u = 2.0**-53
    return (float(n_outputs) + 8.0) * u * float(gradient_bound) * (1.0 + 2.0**-40)


def prediction_error(n_terms, smoothness, coef_norm):
    """Public l2 bound on the certificate gradient's error from its predictions.

    ``(2u + gamma^ld_k)(1 + 2u) H W`` (module docstring, "Rounded
    predictions"): the certificate's gradient reads predictions accumulated in
    ``np.longdouble`` (unit ``u_ld = np.finfo(np.longdouble).eps / 2``: ``2^-64``
    on x86-64 Linux, ``2^-113`` where it is IEEE quad as on aarch64 Linux, and
    ``2^-53`` where it is float64, as on macOS arm64, where the bound is the
    float64 one) and rounded once to float64. A dot product of ``k`` terms is
    within ``gamma^ld_k sum_j |x~_j w_j|`` of the exact one in any order of the
    additions (Higham 2002, eq. 3.5), ``gamma^ld_k = k u_ld / (1 - k u_ld)``;
    the intercept's float64 product ``a w_d`` adds ``u |a w_d|`` and the final
    rounding ``u |z|``, ``u = 2^-53``, so ``|dz| <= (2u + gamma^ld_k)(1 + 2u)
    ||x~_i|| ||w||`` (Cauchy-Schwarz). A per-example loss ``H``-smooth in ``w``
    (``H = sup |phi''| R^2``) turns that into the same multiple of ``H ||w||``
    on each row's gradient, hence on their mean. ``(1 + (k + 16) eps)^2``
    covers a stored row's norm above ``R`` by its clipping's rounding; a
    point's norm above ``W`` by its projection's rounding (a few ``u``
    relative) is inside the certificate's ``64 eps H ||w+||``.

    Parameters
    ----------
    n_terms : int
        ``k``, the number of products in one prediction (``dim``, the intercept
        column included; any larger count is a valid bound).
    smoothness : float
        ``H``, the public smoothness of one example's loss on the stored rows.
    coef_norm : float
        ``W``, a public bound on the norm of the point whose gradient the
        certificate reads.

    Returns
    -------
    float
        ``inf`` when ``k u_ld >= 1/2`` (no useful bound).
    """
    k = max(int(n_terms), 1)
    u = 2.0**-53
    if k * EXTENDED_UNIT >= 0.5:
        return math.inf
    gamma = k * EXTENDED_UNIT / (1.0 - k * EXTENDED_UNIT)
    dz = (2.0 * u + gamma) * (1.0 + 2.0 * u)
    rows = (1.0 + (k + 16.0) * np.finfo(float).eps) ** 2
    return dz * rows * float(smoothness) * float(coef_norm) * (1.0 + 2.0**-40)


@dataclass
class CertifiedResult:
    """Certified approximate minimiser.

    Attributes
    ----------
    w : ndarray
        The point ``w+ = P_C(...)``; it lies in ``C`` (up to the projection's
        rounding).
    distance_bound : float
        Certified upper bound on ``||w - w*||_2`` (Frobenius norm for matrices).
    value_gap_bound : float
        Certified upper bound on ``F(w) - min_C F``, ``(mu distance_bound)^2 / (2 mu)``.
    n_iter : int
        Gradient iterations used (never released by a private caller).
    converged : bool
        Whether ``distance_bound <= tol``. Always True unless the caller passed
        ``raise_on_failure=False``.
    """

    w: np.ndarray
    distance_bound: float
    value_gap_bound: float
    n_iter: int
    converged: bool


def _certified_result(w, bound, mu, n_iter, converged):
    """The result at ``w`` with certified distance ``bound``; the value gap
    ``(mu bound)^2 / (2 mu)`` follows from strong convexity (module docstring)."""
    return CertifiedResult(
        w=w,
        distance_bound=bound,
        value_gap_bound=mu * bound**2 / 2.0,
        n_iter=int(n_iter),
        converged=converged,
    )


def _residual_certificate(
    grad, project, w, g, H, mu, gradient_error=0.0, certificate_grad=None
):
    """``(w+, grad F(w+), distance bound)`` of the residual certificate at ``w``;
    ``gradient_error`` is the public bound ``E`` on the absolute error of the
    computed ``grad F(w+)`` (by ``certificate_grad``, else ``grad``; module
    docstring). Any ``g`` gives a valid bound (the step used it); the iteration
    budgets' no-failure argument needs ``g`` within ``E`` too."""
    step = g / H
    np.subtract(w, step, out=step)
    w_plus = project(step)
    del step
    g_plus = (grad if certificate_grad is None else certificate_grad)(w_plus)
    # v = H (w - w+) + grad F(w+) - grad F(w), built in place (d may be 1e6).
    v = np.subtract(w, w_plus)
    v *= H
    v += g_plus
    v -= g
    eps = np.finfo(float).eps
    scale = (
        np.linalg.norm(g)
        + np.linalg.norm(g_plus)
        + H * (np.linalg.norm(w) + np.linalg.norm(w_plus))
    )
    residual = (
        float(np.linalg.norm(v))
        + float(gradient_error)
        + _ROUNDING_FACTOR * eps * float(scale)
    )
    if not math.isfinite(residual):
        residual = math.inf
    return w_plus, g_plus, residual / mu


def _accelerated_setup(value_and_grad, project, mu, smoothness, tol, count, name):
    """Checked arguments of the accelerated solvers: ``(project, grad, H,
    momentum)``, the momentum ``(1 - sqrt(mu / H)) / (1 + sqrt(mu / H))``."""
    mu = check_real(mu, "mu", low=0.0, low_open=True)
    smoothness = check_real(smoothness, "smoothness", low=mu)
    check_real(tol, "tol", low=0.0, low_open=True, allow_inf=True)
    check_int(count, name, low=1)
    if project is None:

        def project(w):
            return w

    def grad(w):
        return np.asarray(value_and_grad(w)[1], dtype=float)

    H = float(smoothness)
    root = math.sqrt(mu / H)
    return project, grad, H, (1.0 - root) / (1.0 + root)


def certified_minimize(
    value_and_grad,
    project,
    *,
    w0,
    mu,
    smoothness,
    tol,
    max_iter,
    check_every=1,
    raise_on_failure=True,
):
    """Minimise a strongly convex smooth ``F`` over ``C`` with a certified distance.

    Accelerated projected gradient (FISTA) with the constant momentum
    ``(sqrt(H) - sqrt(mu)) / (sqrt(H) + sqrt(mu))`` of the strongly convex case,
    restarted whenever the gradient-mapping restart test of O'Donoghue & Candès
    (2015) fires (robust when ``mu`` is a loose lower bound). Every
    ``check_every`` iterations the residual certificate (module docstring) is
    evaluated at the current extrapolated point; the method stops as soon as the
    certified distance is ``<= tol``. Its iteration count depends on the data,
    so no private solve uses it (they run :func:`certified_minimize_fixed`); it
    is the reference minimiser of non-private checks.

    Everything except the objective must be public (data-independent): ``w0``,
    ``mu``, ``smoothness``, ``tol``, ``max_iter``, ``check_every`` and ``project``.
    The objective only decides *whether* the certificate is reached; a private
    caller must treat failure as "release nothing" (never retry with other
    constants: that would be a data-dependent choice).

    Parameters
    ----------
    value_and_grad : callable
        ``w -> (F(w), grad F(w))``; only the gradient is used by the method.
    project : callable or None
        Exact Euclidean projection onto ``C`` (``None``: ``C`` is the whole space).
    w0 : ndarray
        Public starting point.
    mu : float
        Strong-convexity modulus of ``F`` on ``C`` (ell_2), ``> 0``. The
        certificate's validity rests on it.
    smoothness : float
        Step parameter ``H``, ideally the smoothness of ``F``. Only speed depends
        on it being a true upper bound.
    tol : float
        Target certified distance ``||w - w*||_2 <= tol``.
    max_iter : int
        Iteration cap (public).
    check_every : int, default=1
        Certificate period; each check costs one extra gradient.
    raise_on_failure : bool, default=True
        Raise :class:`~skdpsco.exceptions.CertificationError` when the cap is hit
        before the certificate. ``False`` (reference solves in tests only) returns
        the last certified point with ``converged=False``.

    Returns
    -------
    CertifiedResult

    Raises
    ------
    CertificationError
        If ``distance_bound <= tol`` is not reached within ``max_iter`` iterations.

    References
    ----------
    .. [1] Beck, A. and Teboulle, M. (2009). A fast iterative shrinkage-thresholding
       algorithm for linear inverse problems. SIAM J. Imaging Sci.
    .. [2] O'Donoghue, B. and Candès, E. (2015). Adaptive restart for accelerated
       gradient schemes. Found. Comput. Math.
    .. [3] Nesterov, Y. (2013). Gradient methods for minimizing composite functions.
       Math. Program. 140 (gradient mapping).
    .. [4] Su, J., Zhao, C. and Wang, D. Differentially private stochastic convex
       optimization in (non)-Euclidean space revisited (Algorithm 1, step 4: the
       optimiser ``O(J, alpha)``; its accuracy must hold deterministically).
    """
    project, grad, H, momentum = _accelerated_setup(
        value_and_grad, project, mu, smoothness, tol, max_iter, "max_iter"
    )
    check_every = max(1, int(check_every))
    x = project(np.array(w0, dtype=float, copy=True))
    y = x.copy()
    g_y = grad(y)
    best = None
    for k in range(1, int(max_iter) + 1):
        # Temporaries are reused in place: at d = 1e6 every extra vector is 8 MB.
        step = g_y / H
        np.subtract(y, step, out=step)
        x_new = project(step)
        del step, g_y
        diff = np.subtract(x_new, x)
        # Gradient restart (O'Donoghue & Candès 2015, §3.2): momentum points uphill,
        # i.e. <y - x_new, x_new - x> > 0.
        if np.vdot(y, diff) - np.vdot(x_new, diff) > 0:
            y = x_new
        else:
            diff *= momentum
            diff += x_new
            y = diff
        del diff
        x = x_new
        g_y = grad(y)
        if k % check_every == 0 or k == max_iter:
            w_plus, _, bound = _residual_certificate(grad, project, y, g_y, H, mu)
            if not raise_on_failure and (best is None or bound < best[1]):
                best = (w_plus, bound)
            if bound <= tol:
                return _certified_result(w_plus, bound, mu, k, True)
    if raise_on_failure:
        raise CertificationError(
            f"the solver did not certify ||w - w*|| <= {tol:.3g} within "
            f"{int(max_iter)} iterations; nothing is released."
        )
    w_plus, bound = best
    return _certified_result(w_plus, bound, mu, max_iter, False)


def certified_minimize_fixed(
    value_and_grad,
    project,
    *,
    w0,
    mu,
    smoothness,
    tol,
    n_iter,
    raise_on_failure=True,
    gradient_error=0.0,
    certificate_gradient=None,
):
    """Run exactly ``n_iter`` V-FISTA iterations, then certify the distance once.

    :func:`certified_minimize` stops as soon as the certificate holds, so its
    number of iterations (and hence its running time) is a function of the data:
    timing a fit reveals it even when the count is not returned. Here the count
    is the public ``n_iter`` and nothing in the loop branches on the data:

    * V-FISTA (Beck 2017, §10.7.7): ``x_k = P(y_{k-1} - grad F(y_{k-1}) / H)``,
      ``y_k = x_k + m (x_k - x_{k-1})`` with the constant momentum
      ``m = (sqrt(H) - sqrt(mu)) / (sqrt(H) + sqrt(mu))``, no restart test (its
      outcome is data-dependent, and no rate is proved for the restarted method),
      no line search (the step ``1 / H`` is public);
    * one gradient and one projection per iteration, then the residual
      certificate (module docstring) at ``x_n``: ``n_iter + 2`` gradients in all,
      whatever the data.

    The certificate is checked once, at the end; the caller picks ``n_iter`` from
    public constants so that the a-priori rate (Beck 2017, Thm 10.42) guarantees it.
    What still varies from one dataset to another is the cost of a single
    arithmetic operation on particular values (subnormals, overflow paths in
    ``exp``), not the number or the size of the operations.

    Parameters
    ----------
    value_and_grad : callable
        ``w -> (F(w), grad F(w))``; only the gradient is used by the method.
    project : callable or None
        Exact Euclidean projection onto ``C`` (``None``: ``C`` is the whole space).
        A private caller should use one whose work does not depend on whether its
        argument is inside ``C``.
    w0 : ndarray
        Public starting point.
    mu : float
        Strong-convexity modulus of ``F`` on ``C`` (ell_2), ``> 0``.
    smoothness : float
        ``H >= mu``, a smoothness bound of ``F`` (the step is ``1 / H``; the rate
        of Thm 10.42 needs a true bound, the certificate's validity does not).
    tol : float
        Target certified distance ``||w - w*||_2 <= tol``.
    n_iter : int
        Public number of iterations, always run in full.
    raise_on_failure : bool, default=True
        Raise :class:`~skdpsco.exceptions.CertificationError` when the final
        certificate exceeds ``tol``; ``False`` (reference solves in tests only)
        returns the point with ``converged=False``.
    gradient_error : float, default=0.0
        Public bound on ``||computed grad F(w+) - grad F(w+)||_2`` at the point
        the certificate reads (module docstring); added to the residual.
    certificate_gradient : callable, optional
        ``w -> grad F(w)`` for that one gradient, the ``gradient_error`` is
        for (e.g. its predictions in extended precision, :func:`prediction_error`),
        also read at the last iterate for the final step; the iterations keep
        ``value_and_grad``. Default: ``value_and_grad``'s.

    Returns
    -------
    CertifiedResult
        ``n_iter`` is the public ``n_iter``.

    Raises
    ------
    CertificationError
        If the certified distance after ``n_iter`` iterations exceeds ``tol``.

    References
    ----------
    .. [1] Beck, A. (2017). First-Order Methods in Optimization. SIAM. §10.7.7
       (V-FISTA) and Theorem 10.42.
    """
    project, grad, H, momentum = _accelerated_setup(
        value_and_grad, project, mu, smoothness, tol, n_iter, "n_iter"
    )
    x = project(np.array(w0, dtype=float, copy=True))
    y = x
    for _ in range(int(n_iter)):
        # Temporaries are reused in place: at d = 1e6 every extra vector is 8 MB.
        step = grad(y) / H
        np.subtract(y, step, out=step)
        x_new = project(step)
        del step
        y = np.subtract(x_new, x)
        y *= momentum
        y += x_new
        x = x_new
    certificate_grad = None
    if certificate_gradient is not None:

        def certificate_grad(w):
            return np.asarray(certificate_gradient(w), dtype=float)

    # The step's g is read like grad F(w+): v holds g + grad F(w+), and the
    # iteration budget's rate argument lets each err by at most E, not by the
    # float64 products' gamma_dim H W (prediction_error).
    g = (grad if certificate_grad is None else certificate_grad)(x)
    w_plus, _, bound = _residual_certificate(
        grad, project, x, g, H, mu, gradient_error, certificate_grad
    )
    converged = bool(bound <= tol)
    if raise_on_failure and not converged:
        raise CertificationError(
            f"the solver did not certify ||w - w*|| <= {tol:.3g} after its "
            f"{int(n_iter)} iterations; nothing is released."
        )
    return _certified_result(w_plus, bound, mu, n_iter, converged)
