"""Privacy filter, amplification by subsampling and private selection arithmetic.

The randomly stopped algorithms of Ghazi et al. (bias-reduced sparse SGD, Algorithm 4,
and its boosted version, Algorithm 5) do not run a fixed number of mechanisms: each
step's privacy cost depends on a public, data-independent random level ``N_t``, and
the run stops when a *privacy filter* says the next step would exceed the budget. This
module holds the arithmetic those algorithms need, all of it a function of public
numbers only:

* the cost of one step of Algorithm 4 (Lemma 5.3): three mean-estimator calls on a
  uniformly random batch of size ``2^(N+1)`` drawn without replacement and one call on
  a uniformly random single record, each amplified by subsampling;
* the ``(epsilon, delta)``-DP filter of Whitehouse et al. (2023), Theorem A.4 of the
  paper;
* private selection with random stopping (Liu & Talwar 2019, Theorem 3.4) and the
  budget split of Algorithm 5 (Theorem 6.1).

Neighbouring relation: replace-one record, ``n`` public (the user guide's
"Neighbouring datasets").

References
----------
.. [GGKKM] Ghazi, B., Guzman, C., Kamath, P., Kumar, R. and Manurangsi, P.
   "Differentially Private Optimization with Sparse Gradients". Lemma 5.3,
   Theorem 6.1, Theorem A.4.
.. [BBG18] Balle, B., Barthe, G. and Gaboardi, M. (2018). Privacy amplification by
   subsampling: tight analyses via couplings and divergences. NeurIPS. Table 1
   (sampling without replacement, substitution relation).
.. [WRRW23] Whitehouse, J., Ramdas, A., Rogers, R. and Wu, Z. S. (2023). Fully-adaptive
   composition in differential privacy. ICML.
.. [LT19] Liu, J. and Talwar, K. (2019). Private selection from private candidates.
   STOC. Theorem 3.4.
"""

import math

from ..utils._validation import check_real
from ._records import MechanismRecord

__all__ = [
    "PrivacyFilter",
    "amplified_delta",
    "amplified_epsilon",
    "boosting_budget",
    "closed_form_step_cost",
    "filter_epsilon",
    "filtered_run_record",
    "private_selection_cost",
    "private_selection_record",
    "step_cost",
]


def _check_rate(q):
    return check_real(q, "sampling_rate", low=0.0, high=1.0)


def _check_fraction(value, name, *, allow_zero=False):
    """``value`` in ``(0, 1)`` (``[0, 1)`` where ``allow_zero``): a delta or a
    probability."""
    return check_real(
        value, name, low=0.0, high=1.0, low_open=not allow_zero, high_open=True
    )


def amplified_epsilon(epsilon, sampling_rate):
    """Epsilon of an ``epsilon``-DP mechanism run on a uniform subsample.

    ``ln(1 + q (e^epsilon - 1))`` for a subset of fixed size ``m = q n`` drawn
    uniformly without replacement, under replace-one neighbours (Balle, Barthe &
    Gaboardi 2018, Table 1; used in Lemma 5.3 of Ghazi et al.). Evaluated without
    overflow for large ``epsilon``: ``epsilon + ln(q + (1 - q) e^-epsilon)``.

    Parameters
    ----------
    epsilon : float
        Epsilon of the mechanism on the subsample, ``>= 0`` (``inf`` gives ``inf``).
    sampling_rate : float
        ``q = m / n`` in ``[0, 1]``.

    Returns
    -------
    float

    Examples
    --------
    >>> from skdpsco.privacy._filter import amplified_epsilon
    >>> round(amplified_epsilon(1.0, 0.01), 6)
    0.017037
    """
    q = _check_rate(sampling_rate)
    epsilon = check_real(epsilon, "epsilon", low=0.0, allow_inf=True)
    if q == 0 or epsilon == 0:
        return 0.0
    if math.isinf(epsilon):
        return math.inf
    if epsilon < 1.0:
        return math.log1p(q * math.expm1(epsilon))
    return epsilon + math.log(q + (1.0 - q) * math.exp(-epsilon))


def amplified_delta(delta, sampling_rate):
    """Delta of a ``delta``-DP mechanism run on a uniform subsample: ``q delta``.

    Balle, Barthe & Gaboardi (2018), Table 1 (without replacement, substitution).
    """
    q = _check_rate(sampling_rate)
    return q * check_real(delta, "delta", low=0.0, high=1.0)


def _batch_rate(n_samples, level):
    n_samples = int(n_samples)
    level = int(level)
    if n_samples < 2:
        raise ValueError(f"n_samples must be >= 2, got {n_samples}.")
    if level < 0 or 2 ** (level + 1) > n_samples:
        raise ValueError(
            f"level must satisfy 0 <= level and 2**(level+1) <= n_samples={n_samples},"
            f" got {level}."
        )
    return 2 ** (level + 1) / n_samples


def step_cost(epsilon, delta, n_samples, level):
    """Exact ``(epsilon_t, delta_t)`` of one step of Algorithm 4 at level ``N = level``.

    Algorithm 4 calls Algorithm 3 with ``(epsilon/8, delta/4)``, which runs four mean
    estimators at ``(epsilon/32, delta/16)`` each (Ghazi et al., Lemma 5.3):

    * three on the batch ``B`` (``|B| = 2^(N+1)``) and its halves ``O``, ``E``:
      together ``(3 epsilon/32, 3 delta/16)``-DP with respect to ``B`` by basic
      composition (conservative: a replaced record lies in ``B`` and in only one
      half), amplified by the rate ``q = 2^(N+1)/n`` of the uniform fixed-size batch;
    * one on a uniform single record ``I``: ``(epsilon/32, delta/16)`` amplified by
      ``1/n``.

    ``B`` and ``I`` are drawn independently, so the two amplified costs add (basic
    composition). This is the exact amplified value behind Lemma 5.3, valid for
    every ``epsilon``; the paper's closed form (:func:`closed_form_step_cost`)
    bounds it only while ``e^x - 1 <= 2x`` at ``x = 3 epsilon/32``, i.e.
    ``epsilon <~ 13.4``.

    Parameters
    ----------
    epsilon, delta : float
        Budget of the whole run of Algorithm 4 (its per-call budgets derive from it).
    n_samples : int
        Public ``n >= 2``.
    level : int
        The step's truncated-geometric level ``N``, ``0 <= N <= floor(log2 n) - 1``.

    Returns
    -------
    epsilon_t, delta_t : float
    """
    q = _batch_rate(n_samples, level)
    eps_t = amplified_epsilon(3.0 * epsilon / 32.0, q) + amplified_epsilon(
        epsilon / 32.0, 1.0 / n_samples
    )
    delta_t = amplified_delta(3.0 * delta / 16.0, q) + amplified_delta(
        delta / 16.0, 1.0 / n_samples
    )
    return eps_t, delta_t


def closed_form_step_cost(epsilon, delta, n_samples, level):
    """Paper's closed form ``a(N) (epsilon, delta)``, ``a(N) = (3 2^(N+1)+1)/(16n)``.

    Ghazi et al., Lemma 5.3, which bounds :func:`step_cost` with ``e^x - 1 <= 2x``;
    that inequality holds only for ``x <= 1.2564``, so this is an upper bound on the
    exact cost only for ``epsilon <= 13.4``. The solvers charge the exact value;
    this is the paper's formula the tests compare :func:`step_cost` with.
    """
    _batch_rate(n_samples, level)
    a = (3.0 * 2 ** (level + 1) + 1.0) / (16.0 * n_samples)
    return a * epsilon, a * delta


def filter_epsilon(sum_sq_epsilon, delta_prime):
    """Filter value ``sqrt(2 ln(1/delta') S) + S/2`` with ``S = sum_t eps_t^2``.

    Ghazi et al., Theorem A.4 (Whitehouse et al. 2023). With ``epsilon_t = inf`` (the
    hidden non-private testing mode) the value is ``inf``.
    """
    sum_sq_epsilon = check_real(
        sum_sq_epsilon, "sum_sq_epsilon", low=0.0, allow_inf=True
    )
    delta_prime = _check_fraction(delta_prime, "delta_prime")
    if math.isinf(sum_sq_epsilon):
        return math.inf
    return (
        math.sqrt(2.0 * math.log(1.0 / delta_prime) * sum_sq_epsilon)
        + 0.5 * sum_sq_epsilon
    )


class PrivacyFilter:
    """``(epsilon, delta' + delta'')``-DP filter (Ghazi et al., Thm A.4).

    Mechanisms run adaptively, step ``t`` being ``(epsilon_t, delta_t)``-DP with
    parameters fixed before it runs (predictable). The filter admits step ``t`` only if
    ``filter_epsilon(sum_{s<=t} epsilon_s^2, delta') <= epsilon`` and
    ``sum_{s<=t} delta_s <= delta''`` (the stopping time of Thm A.4: it stops before
    the step that would cross). The transcript of all admitted steps is then
    ``(epsilon, delta' + delta'')``-DP, however the ``(epsilon_t, delta_t)`` were
    chosen, provided they never depend on the data beyond the transcript.

    Parameters
    ----------
    epsilon : float
        Target epsilon (``inf`` in the hidden non-private testing mode: only the delta
        condition can then stop the run).
    delta_prime : float
        The ``delta'`` inside the logarithm, in ``(0, 1)``.
    delta_double_prime : float
        The additive budget ``delta''`` for the ``delta_t``, ``>= 0``.

    Examples
    --------
    >>> from skdpsco.privacy._filter import PrivacyFilter
    >>> f = PrivacyFilter(1.0, 1e-6, 1e-6)
    >>> f.try_charge(0.1, 1e-7), f.n_steps
    (True, 1)
    """

    def __init__(self, epsilon, delta_prime, delta_double_prime):
        self.epsilon = check_real(
            epsilon, "epsilon", low=0.0, low_open=True, allow_inf=True
        )
        self.delta_prime = _check_fraction(delta_prime, "delta_prime")
        self.delta_double_prime = _check_fraction(
            delta_double_prime, "delta_double_prime", allow_zero=True
        )
        self.sum_sq_epsilon = 0.0
        self.sum_delta = 0.0
        self.n_steps = 0

    @property
    def delta(self):
        """The filter's total delta, ``delta' + delta''``."""
        return self.delta_prime + self.delta_double_prime

    def fits(self, epsilon_t, delta_t):
        """Whether a step costing ``(epsilon_t, delta_t)`` stays within the target."""
        eps_ok = (
            filter_epsilon(self.sum_sq_epsilon + epsilon_t**2, self.delta_prime)
            <= self.epsilon
        )
        return eps_ok and self.sum_delta + delta_t <= self.delta_double_prime

    def try_charge(self, epsilon_t, delta_t):
        """Charge the step and return True if it fits; otherwise return False."""
        if not self.fits(epsilon_t, delta_t):
            return False
        self._add(epsilon_t, delta_t)
        return True

    def _add(self, epsilon_t, delta_t):
        self.sum_sq_epsilon += epsilon_t**2
        self.sum_delta += delta_t
        self.n_steps += 1


def filtered_run_record(name, epsilon, delta):
    """The ledger record of a run stopped by a privacy filter.

    The filter's guarantee (Thm A.4, plus basic composition of the steps run past
    its check, Dwork & Roth 2014, Thm 3.16) holds for the run as a whole: it does
    not decompose into per-step records (each step's mechanisms hold for a batch
    and become a guarantee for the dataset only through amplification and the
    filter). The run is one ``"approx_dp"`` mechanism at its certified total.

    Parameters
    ----------
    name : str
    epsilon, delta : float
        The run's certified total (public: a function of the budget and ``n``).

    Returns
    -------
    MechanismRecord
    """
    return MechanismRecord(name, "approx_dp", epsilon=epsilon, delta=delta)


def private_selection_record(name, pair_records, max_runs, delta_2):
    """The ledger record of Liu–Talwar private selection with random stopping.

    One (candidate, noisy score) pair is ``(epsilon_1, delta_1)``-DP by basic
    composition of ``pair_records`` (Dwork & Roth 2014, Thm 3.16);
    :func:`private_selection_cost` gives the total over at most ``max_runs`` runs
    (Liu & Talwar 2019, Thm 3.4), accounted as one ``"approx_dp"`` mechanism.

    Parameters
    ----------
    name : str
    pair_records : list of MechanismRecord
        The records of one run and of its score (``"approx_dp"`` or
        ``"laplace"``: each states its epsilon). Every run's records must be the
        same public numbers, fixed before the first run.
    max_runs : int
        The cap ``K``.
    delta_2 : float
        The delta of the random-stopping cap.

    Returns
    -------
    MechanismRecord
    """
    epsilon_1 = sum(r.count * r.epsilon for r in pair_records)
    delta_1 = sum(r.count * (r.delta or 0.0) for r in pair_records)
    epsilon, delta = private_selection_cost(epsilon_1, delta_1, max_runs, delta_2)
    return MechanismRecord(name, "approx_dp", epsilon=epsilon, delta=delta)


def private_selection_cost(epsilon_1, delta_1, max_runs, delta_2):
    """Liu–Talwar private selection with random stopping (their Theorem 3.4).

    Independent runs of an ``(epsilon_1, delta_1)``-DP algorithm that outputs a
    candidate and a score; after each run stop with probability ``gamma``, at most
    ``max_runs = ceil(ln(1/delta_2) / gamma)`` runs; release the best candidate. The
    result is ``(3 epsilon_1 + 3 sqrt(2 delta_1), sqrt(2 delta_1) K + delta_2)``-DP
    with ``K = max_runs``.

    Parameters
    ----------
    epsilon_1, delta_1 : float
        Privacy of one (run, noisy score) pair.
    max_runs : int
        The cap ``K``.
    delta_2 : float
        The delta of the random-stopping cap, ``K >= ln(1/delta_2)/gamma``.

    Returns
    -------
    epsilon, delta : float
    """
    root = math.sqrt(2.0 * delta_1)
    return 3.0 * epsilon_1 + 3.0 * root, root * int(max_runs) + delta_2


def boosting_budget(epsilon, delta, confidence):
    """Budget split of Algorithm 5 (Ghazi et al., Theorem 6.1).

    ``gamma = min(1/2, 3 beta/4)``, ``K = ceil(ln(2/delta)/gamma)``; each run of
    Algorithm 4 gets ``(epsilon/12, (delta/(4K))^2)`` and each noisy score
    ``epsilon/12``. Liu–Talwar with ``delta_2 = delta/2`` then gives
    ``(epsilon/2 + 3 sqrt(2) delta/(4K), (sqrt(2)/4 + 1/2) delta)``, which is
    ``<= (epsilon, delta)`` when ``delta <= epsilon/10`` (the theorem's hypothesis,
    enforced here). Rounding ``K`` up only lowers ``delta_2``'s requirement.

    Parameters
    ----------
    epsilon : float
        Target epsilon, ``> 0``.
    delta : float
        Target delta in ``(0, 1)`` with ``delta <= epsilon / 10``.
    confidence : float
        ``beta`` in ``(0, 1)``: the failure probability of the utility guarantee.

    Returns
    -------
    dict
        ``gamma``, ``max_runs`` (K), ``epsilon_run``, ``delta_run``, ``epsilon_score``,
        ``delta_stop`` (``delta_2``).
    """
    epsilon = check_real(epsilon, "epsilon", low=0.0, low_open=True, allow_inf=True)
    delta = _check_fraction(delta, "delta")
    if not delta <= epsilon / 10.0:
        raise ValueError(
            f"Boosting (Algorithm 5, Theorem 6.1) needs delta <= epsilon/10; got "
            f"epsilon={epsilon!r}, delta={delta!r}."
        )
    confidence = _check_fraction(confidence, "confidence")
    gamma = min(0.5, 0.75 * confidence)
    max_runs = math.ceil(math.log(2.0 / delta) / gamma)
    return {
        "gamma": gamma,
        "max_runs": max_runs,
        "epsilon_run": epsilon / 12.0,
        "delta_run": (delta / (4.0 * max_runs)) ** 2,
        "epsilon_score": epsilon / 12.0,
        "delta_stop": delta / 2.0,
    }
