"""Private selection with a random number of repetitions: its privacy accounting.

A base mechanism ``Q`` (one run of a hyperparameter search: pick a configuration at
random, fit it privately, score it privately) is run ``K`` times, ``K`` drawn from a
distribution that does not depend on the data, and only the best run's output (by its
private score) is released; ``K`` and the other runs stay hidden. The privacy of the
whole is a small multiple of one run's, not ``K`` times it.

The distribution of ``K`` is the truncated negative binomial ``D_{eta, gamma}`` of
Papernot & Steinke (2022, Definition 1), for ``k = 1, 2, ...``::

    P[K = k] = (1 - gamma)^k / (gamma^(-eta) - 1) * prod_{l=0}^{k-1} (l + eta) / (l + 1)
                                                                          (eta > 0)
    P[K = k] = (1 - gamma)^k / (k log(1 / gamma))                         (eta = 0)

with mean ``E[K] = eta (1 - gamma) / (gamma (1 - gamma^eta))`` (``eta > 0``) and
``(1 / gamma - 1) / log(1 / gamma)`` (``eta = 0``). ``eta = 1`` is the geometric
distribution ``P[K = k] = gamma (1 - gamma)^(k - 1)``: Liu & Talwar's (2019) random
stopping, where after every run a ``gamma``-biased coin decides whether to stop.

Accounting (the theorems used, exactly as stated):

* Papernot & Steinke (2022), **Theorem 2**: if ``Q`` is ``(lambda, eps)``-RDP and
  ``(lambda_hat, eps_hat)``-RDP with ``lambda > 1``, ``lambda_hat >= 1``, then ``A``
  (best of ``K ~ D_{eta, gamma}`` runs) is ``(lambda, eps')``-RDP with::

      eps' = eps + (1 + eta) (1 - 1 / lambda_hat) eps_hat
                 + (1 + eta) log(1 / gamma) / lambda_hat + log(E[K]) / (lambda - 1).

  :func:`rdp_repeat_and_select` applies it to an RDP curve given on a grid of orders
  (``lambda_hat`` ranging over the grid); :func:`zcdp_repeat_and_select_rdp` applies it
  to a ``rho``-zCDP run (``eps = lambda rho`` at every order), minimising over every
  real ``lambda_hat >= 1`` in closed form.
* Papernot & Steinke (2022), **Corollary 3** (pure DP): if ``Q`` is ``eps``-DP then
  ``A`` is ``(2 + eta) eps``-DP; with ``eta = 1`` this is Liu & Talwar's (2019)
  ``3 eps`` for geometric random stopping. It is the limit of Theorem 2 at large
  orders; the search accounts its runs in zCDP, so only Theorem 2 is implemented.

Only ``eta >= 0`` is supported: Definition 1 also allows ``eta in (-1, 0)``, but the
two reference implementations we cross-check with (Google's ``dp_accounting``,
``RepeatAndSelectDpEvent``; OpenDP's ``make_select_private_candidate``) both restrict
the shape to ``eta >= 0``, and we take the conservative reading.

References
----------
.. [1] Liu, J. and Talwar, K. (2019). Private selection from private candidates.
   STOC. arXiv:1811.07971. Random stopping (their Algorithm 2): ``3 eps``.
.. [2] Papernot, N. and Steinke, T. (2022). Hyperparameter tuning with Renyi
   differential privacy. ICLR. arXiv:2110.03620v2. Definition 1, Theorem 2,
   Corollary 3.
"""

import functools
import math

import numpy as np

from ..utils._validation import check_real
from ._accounting import DEFAULT_RDP_ORDERS, _record_rdp, rdp_to_approx_dp
from ._records import MechanismRecord

__all__ = [
    "SELECTION_ORDERS",
    "RUN_RDP_ORDERS",
    "calibrate_selection_rho",
    "replace_one_rdp",
    "rdp_repeat_and_select",
    "selection_epsilon",
    "selection_record",
    "tnb_gamma",
    "tnb_mean",
    "tnb_pmf",
    "zcdp_repeat_and_select_rdp",
]

#: Renyi orders for the final conversion to ``(epsilon, delta)``: the library's
#: integer orders plus orders close to 1 (large budgets) and up to 1e6 (the selection
#: term ``log(E[K]) / (lambda - 1)`` favours large orders at small budgets).
SELECTION_ORDERS = tuple(
    np.unique(
        np.concatenate(
            [
                1.0 + np.geomspace(1e-3, 0.95, 40),
                np.asarray(DEFAULT_RDP_ORDERS, dtype=float),
                np.geomspace(1100.0, 1e6, 40),
            ]
        )
    ).tolist()
)


#: Orders on which a run that is not zCDP (Poisson-subsampled steps) is bounded by
#: ``rho * lambda``: from 2 (the group-privacy step of :func:`replace_one_rdp`
#: halves the order of an add/remove curve that needs orders >= 4) to 256 (the
#: selection's ``lambda_hat`` and the conversion's order stay below it for
#: per-run budgets above about 1e-4).
RUN_RDP_ORDERS = tuple(o for o in SELECTION_ORDERS if 2.0 <= o <= 256.0)


def replace_one_rdp(records, orders):
    """Replace-one RDP curve of a fit's ledger at ``orders`` (all ``>= 2``), or None.

    Gaussian, Laplace and zCDP records have replace-one curves (their
    sensitivities are replace-one; :func:`~skdpsco.privacy._accounting._record_rdp`),
    and an ``"approx_dp"`` record summarising mechanisms of zCDP ``rho`` (a
    private scaling) has ``rho * lambda``; a pure ``epsilon``-DP one has
    ``min(epsilon, lambda epsilon^2 / 2)`` (Mironov 2017, Prop. 3; Bun & Steinke
    2016, Prop. 1.4). Poisson-subsampled Gaussian records are add/remove: their
    curves add at the orders ``2 lambda``, and a replace-one pair is at add/remove
    distance 2, so the replace-one curve is ``3 eps_ar(2 lambda)`` (Mironov 2017,
    Prop. 2, with ``c = 1``, which needs ``2 lambda >= 4``). Any other record
    (``"approx_dp"`` with ``delta > 0`` and no ``rho``) has no curve: None.
    """
    orders = np.asarray(orders, dtype=float)
    if np.any(orders < 2.0):
        raise ValueError("replace_one_rdp needs orders >= 2 (group privacy).")
    total = np.zeros_like(orders)
    add_remove = np.zeros_like(orders)
    for rec in records:
        if rec.kind == "subsampled_gaussian":
            add_remove = add_remove + _record_rdp(rec, 2.0 * orders)
        elif rec.kind == "approx_dp" and rec.rho is not None:
            total = total + rec.count * rec.rho * orders
        elif rec.kind == "approx_dp" and rec.delta == 0:
            eps = rec.epsilon
            total = total + rec.count * np.minimum(eps, orders * eps**2 / 2.0)
        else:
            curve = _record_rdp(rec, orders)
            if curve is None:
                return None
            total = total + curve
    return total + 3.0 * add_remove


def _check_eta(eta):
    """The shape ``eta >= 0`` (finite) of ``D_{eta, gamma}``, as a float."""
    return check_real(eta, "eta", low=0.0)


def _check_eta_gamma(eta, gamma):
    """``(eta, gamma)`` of ``D_{eta, gamma}``, as floats: ``eta >= 0``, ``gamma`` in
    ``(0, 1)``."""
    eta = _check_eta(eta)
    gamma = check_real(gamma, "gamma", low=0.0, high=1.0, low_open=True, high_open=True)
    return eta, gamma


def tnb_mean(eta, gamma):
    """Mean ``E[K]`` of the truncated negative binomial ``D_{eta, gamma}``.

    Papernot & Steinke (2022), Definition 1: ``eta (1 - gamma) / (gamma (1 -
    gamma^eta))`` for ``eta > 0`` (``1 / gamma`` at ``eta = 1``), and the logarithmic
    distribution's ``(1 / gamma - 1) / log(1 / gamma)`` for ``eta = 0``.
    """
    eta, gamma = _check_eta_gamma(eta, gamma)
    if eta == 0:
        return (1.0 / gamma - 1.0) / -math.log(gamma)
    if eta == 1:
        return 1.0 / gamma
    # 1 - gamma^eta = -expm1(eta log gamma), without cancellation for small eta.
    return eta * (1.0 - gamma) / (gamma * -math.expm1(eta * math.log(gamma)))


def tnb_gamma(eta, mean):
    """The ``gamma`` of ``D_{eta, gamma}`` whose mean is ``mean`` (``> 1``).

    The mean decreases in ``gamma`` (from ``inf`` at 0 to 1 at 1); bisection on
    ``log gamma``. The accountant and the sampler both use the returned ``gamma``, and
    the accountant uses ``tnb_mean(eta, gamma)`` (not ``mean``), so the rounding of the
    bisection never makes the stated guarantee wrong.
    """
    mean = check_real(mean, "the expected number of runs", low=1.0, low_open=True)
    eta = _check_eta(eta)
    if eta == 1:
        return 1.0 / mean
    lo, hi = -1.0, 0.0  # log gamma; mean(exp(hi)) = 1 < mean
    while tnb_mean(eta, math.exp(lo)) < mean:
        lo *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if tnb_mean(eta, math.exp(mid)) < mean:
            hi = mid
        else:
            lo = mid
        if hi - lo <= 1e-15 * abs(lo):
            break
    return math.exp(lo)


def tnb_pmf(k, eta, gamma):
    """``P[K = k]`` under ``D_{eta, gamma}`` (Papernot & Steinke 2022, Def. 1).

    The reference the tests hold the search's sampler
    (:func:`~skdpsco.privacy._mechanisms.truncated_negative_binomial`) and
    :func:`tnb_mean` to.

    Parameters
    ----------
    k : int or array-like of int
        Values ``>= 1`` (0 elsewhere).
    eta, gamma : float

    Returns
    -------
    ndarray of float
    """
    eta, gamma = _check_eta_gamma(eta, gamma)
    from scipy import special

    k = np.asarray(k, dtype=float)
    valid = k >= 1
    kk = np.where(valid, k, 1.0)
    log_q = math.log1p(-gamma)
    if eta == 0:
        log_p = kk * log_q - np.log(kk) - math.log(-math.log(gamma))
    else:
        # prod_{l<k} (l + eta)/(l + 1) = Gamma(k + eta) / (Gamma(eta) Gamma(k + 1)),
        # and gamma^(-eta) - 1 = expm1(eta log(1/gamma)).
        log_p = (
            kk * log_q
            + special.gammaln(kk + eta)
            - special.gammaln(eta)
            - special.gammaln(kk + 1.0)
            - math.log(math.expm1(eta * -math.log(gamma)))
        )
    return np.where(valid, np.exp(log_p), 0.0)


def rdp_repeat_and_select(orders, rdp, eta, gamma, *, kl=None):
    """RDP of the best of ``K ~ D_{eta, gamma}`` runs, from one run's RDP curve.

    Papernot & Steinke (2022), Theorem 2, at every order ``lambda`` of ``orders``, with
    ``lambda_hat`` minimised over ``orders`` (and over ``lambda_hat = 1`` when the
    run's KL divergence bound ``kl`` is given)::

        eps'(lambda) = rdp(lambda) + log(E[K]) / (lambda - 1)
                       + (1 + eta) min_{lambda_hat} [(1 - 1/lambda_hat) rdp(lambda_hat)
                                                      + log(1 / gamma) / lambda_hat].

    Parameters
    ----------
    orders : sequence of float
        Renyi orders ``> 1``.
    rdp : sequence of float
        One run's RDP at those orders.
    eta : float
        Shape ``>= 0`` (``1``: geometric; ``0``: logarithmic).
    gamma : float
        In ``(0, 1)``.
    kl : float, optional
        One run's RDP at order 1 (KL divergence); adds ``lambda_hat = 1``.

    Returns
    -------
    ndarray
        RDP of the selection at ``orders``.

    Notes
    -----
    The search accounts through the closed form of :func:`zcdp_repeat_and_select_rdp`;
    this grid form is the reference the tests hold it to (and cross-check with
    Google's ``dp_accounting``).
    """
    eta, gamma = _check_eta_gamma(eta, gamma)
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    if orders.shape != rdp.shape or orders.ndim != 1 or np.any(~(orders > 1)):
        raise ValueError("orders (all > 1) and rdp must be 1-d of the same length.")
    log_inv_gamma = -math.log(gamma)
    inner = (1.0 - 1.0 / orders) * rdp + log_inv_gamma / orders
    best_inner = float(np.min(inner))
    if kl is not None:
        best_inner = min(best_inner, log_inv_gamma)  # (1 - 1/1) * kl = 0
    log_mean = math.log(tnb_mean(eta, gamma))
    return rdp + (1.0 + eta) * best_inner + log_mean / (orders - 1.0)


def zcdp_repeat_and_select_rdp(rho, eta, gamma, orders=None):
    """RDP of the best of ``K ~ D_{eta, gamma}`` runs of a ``rho``-zCDP mechanism.

    Theorem 2 of Papernot & Steinke (2022) with ``eps = lambda rho`` and
    ``eps_hat = lambda_hat rho`` (a ``rho``-zCDP mechanism is ``(a, a rho)``-RDP at
    every order ``a >= 1``; Bun & Steinke 2016, Def. 1.1). The minimum over real
    ``lambda_hat >= 1`` of ``(lambda_hat - 1) rho + log(1/gamma) / lambda_hat`` is
    ``2 sqrt(rho log(1/gamma)) - rho`` at ``lambda_hat = sqrt(log(1/gamma) / rho)``
    when that is ``>= 1``, else ``log(1/gamma)`` at ``lambda_hat = 1``.

    Parameters
    ----------
    rho : float
        zCDP of one run, ``>= 0``.
    eta, gamma : float
    orders : sequence of float, optional
        Defaults to :data:`SELECTION_ORDERS`.

    Returns
    -------
    orders, rdp : ndarray
    """
    eta, gamma = _check_eta_gamma(eta, gamma)
    rho = check_real(rho, "rho", low=0.0, allow_inf=True)
    orders = np.asarray(SELECTION_ORDERS if orders is None else orders, dtype=float)
    log_inv_gamma = -math.log(gamma)
    if math.isinf(rho):
        return orders, np.full_like(orders, np.inf)
    if rho > 0 and math.sqrt(log_inv_gamma / rho) >= 1.0:
        inner = 2.0 * math.sqrt(rho * log_inv_gamma) - rho
    else:
        inner = log_inv_gamma
    log_mean = math.log(tnb_mean(eta, gamma))
    return orders, orders * rho + (1.0 + eta) * inner + log_mean / (orders - 1.0)


def selection_epsilon(
    rho, delta, eta, gamma, orders=None, rho_extra=0.0, *, on_grid=False
):
    """``(epsilon, delta)`` of the best of ``K ~ D_{eta, gamma}`` ``rho``-zCDP runs.

    :func:`zcdp_repeat_and_select_rdp` (Papernot & Steinke 2022, Theorem 2), then the
    RDP-to-DP conversion of :func:`skdpsco.privacy.rdp_to_approx_dp` (the minimum of
    Mironov's and Balle et al.'s, optimised over the orders). ``rho_extra`` is the
    zCDP of releases made once, outside the runs, on the same records (a search's
    public score scale): its RDP curve ``rho_extra * lambda`` adds to the
    selection's (sequential composition of RDP, Mironov 2017, Prop. 1).

    ``on_grid=True`` is for runs bounded by ``rho * lambda`` at ``orders`` only
    (:data:`RUN_RDP_ORDERS`): Theorem 2's ``lambda_hat`` then ranges over
    ``orders`` (:func:`rdp_repeat_and_select`) instead of every real ``>= 1``.

    Returns
    -------
    epsilon : float
    """
    if math.isinf(rho) or math.isinf(rho_extra):
        return math.inf
    if on_grid:
        orders = np.asarray(orders, dtype=float)
        rdp = rdp_repeat_and_select(orders, rho * orders, eta, gamma)
    else:
        orders, rdp = zcdp_repeat_and_select_rdp(rho, eta, gamma, orders)
    return rdp_to_approx_dp(orders, rdp + rho_extra * orders, delta)[0]


def selection_record(rho, delta, eta, gamma, rho_extra=0.0, orders=None):
    """Ledger record of the best of ``K ~ D_{eta, gamma}`` runs of a ``rho``-zCDP run.

    One ``"approx_dp"`` record whose epsilon is :func:`selection_epsilon` (Papernot &
    Steinke 2022, Theorem 2, converted at ``delta``), so that the accountant composes
    a search with other fits without seeing ``K`` or the runs.

    Parameters
    ----------
    rho : float
        zCDP of one run (its fit and, on the disjoint validation part, its score).
    delta : float
        The ``delta`` of the conversion.
    eta, gamma : float
        The distribution ``D_{eta, gamma}`` of ``K`` (``eta = 1``: geometric).
    rho_extra : float, default=0.0
        zCDP of releases made once besides the runs (see
        :func:`selection_epsilon`).
    orders : sequence of float, optional
        The orders on which the run is bounded by ``rho * lambda`` when it is not
        zCDP at every order (``on_grid`` of :func:`selection_epsilon`).

    Returns
    -------
    MechanismRecord
    """
    how = "geometric" if eta == 1 else f"truncated negative binomial eta={eta:g}"
    extra = f", with a rho={rho_extra:.6g}-zCDP release" if rho_extra else ""
    if orders is not None:
        extra += f", on orders {min(orders):g} to {max(orders):g}"
    return MechanismRecord(
        f"private selection, best of K runs ({how}, E[K]="
        f"{tnb_mean(eta, gamma):.4g}) of a rho={rho:.6g}-zCDP run{extra}; "
        "Papernot & Steinke 2022, Thm 2",
        "approx_dp",
        epsilon=selection_epsilon(
            rho, delta, eta, gamma, orders, rho_extra, on_grid=orders is not None
        ),
        delta=delta,
    )


def calibrate_selection_rho(
    epsilon, delta, eta, gamma, orders=None, rho_extra=0.0, *, on_grid=False
):
    """Largest per-run zCDP ``rho`` whose selection is ``(epsilon, delta)``-DP.

    With ``rho_extra``, the selection composed with a ``rho_extra``-zCDP release
    (:func:`selection_epsilon`) is; with ``on_grid``, the run is bounded on
    ``orders`` only.

    Bisection on ``log rho`` (:func:`selection_epsilon` increases with ``rho``); the
    lower end of the bracket is returned, so it certifies the target. ``epsilon = inf``
    (the hidden non-private testing mode) returns ``inf``.

    Returns
    -------
    rho : float
        ``0.0`` when even a vanishing per-run budget cannot reach ``epsilon``.
    """
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_open=True, allow_inf=True)
    if math.isinf(epsilon):
        return math.inf
    if orders is None:
        # A pure function of public numbers: cached, since every search asks it.
        return _calibrate_cached(
            float(epsilon), float(delta), float(eta), float(gamma), float(rho_extra)
        )
    return _calibrate(epsilon, delta, eta, gamma, orders, rho_extra, on_grid)


@functools.lru_cache(maxsize=256)
def _calibrate_cached(epsilon, delta, eta, gamma, rho_extra):
    return _calibrate(epsilon, delta, eta, gamma, None, rho_extra)


def _calibrate(epsilon, delta, eta, gamma, orders, rho_extra=0.0, on_grid=False):
    def eps_of(log_rho):
        return selection_epsilon(
            math.exp(log_rho), delta, eta, gamma, orders, rho_extra, on_grid=on_grid
        )

    lo, hi = math.log(epsilon) - 30.0, math.log(epsilon) + 5.0
    if eps_of(lo) > epsilon:
        return 0.0
    while eps_of(hi) <= epsilon:
        lo, hi = hi, hi + 5.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if eps_of(mid) <= epsilon:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12:
            break
    return math.exp(lo)
