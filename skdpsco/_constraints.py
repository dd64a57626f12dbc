"""Public convex constraint sets: exact projections, linear minimisation oracles and
Gaussian widths.

Everything here is a deterministic function of public inputs (the set's parameters
and the point handed in); nothing reads data and nothing here is a privacy mechanism.

References
----------
.. [SZW] Su, J., Zhao, Z. and Wang, D. "Differentially Private Stochastic Convex
   Optimization in (Non)-Euclidean Space Revisited", Section 4 (Gaussian width of the
   constraint set).
.. [DSSC08] Duchi, J., Shalev-Shwartz, S., Singer, Y. and Chandra, T. (2008).
   "Efficient projections onto the l1-ball for learning in high dimensions", ICML,
   Figure 1.
"""

import numpy as np

__all__ = ["project_l1_ball", "project_l2_ball"]


def project_l2_ball(W, radius):
    """Euclidean projection onto ``{W : ||W||_F <= radius}``.

    Parameters
    ----------
    W : ndarray
        A vector, or a ``(d, K)`` matrix (projected onto the Frobenius ball).
    radius : float or None
        ``None`` means no constraint: ``W`` is returned unchanged.

    Returns
    -------
    ndarray
        ``W * min(1, radius / ||W||_F)``; ``W`` itself when it is already inside.
    """
    if radius is None:
        return W
    norm = np.linalg.norm(W)
    if norm > radius:
        W = W * (radius / norm)
    return W


def project_l1_ball(v, radius):
    """Exact Euclidean projection onto ``{w : ||w||_1 <= radius}``.

    Sort-based soft thresholding (Duchi et al. 2008, Figure 1), ``O(d log d)`` and
    fully vectorised: with ``u = sort(|v|)`` decreasing and
    ``rho = max{j : u_j > (sum_{i<=j} u_i - radius) / j}``, the projection is
    ``sign(v) * max(|v| - theta, 0)`` with ``theta = (sum_{i<=rho} u_i - radius) / rho``
    (the KKT multiplier of the l1 constraint).

    Parameters
    ----------
    v : ndarray
        A vector. A matrix is projected as its flattened vector (the entrywise l1
        ball ``sum_{jk} |W_jk| <= radius``), and the result has the input's shape.
    radius : float or None
        ``radius >= 0``; ``None`` means no constraint (identity).

    Returns
    -------
    ndarray
        The projection; ``v`` itself (not a copy) when ``||v||_1 <= radius``.

    References
    ----------
    .. [1] Duchi, J., Shalev-Shwartz, S., Singer, Y. and Chandra, T. (2008).
       "Efficient projections onto the l1-ball for learning in high dimensions",
       ICML, Figure 1 / Algorithm of Section 4.
    .. [2] Condat, L. (2016). "Fast projection onto the simplex and the l1 ball",
       Mathematical Programming 158, 575-585 (the same threshold, found in expected
       linear time; the sort is simpler and fast enough for d = 10^6).
    """
    if radius is None:
        return v
    radius = float(radius)
    if not np.isfinite(radius) or radius < 0:
        raise ValueError(f"radius must be a finite number >= 0, got {radius!r}.")
    v = np.asarray(v, dtype=float)
    a = np.abs(v).ravel()
    if a.sum() <= radius:
        return v
    if radius == 0.0:
        return np.zeros_like(v)
    theta = _l1_threshold(a, radius)
    return np.sign(v) * np.maximum(np.abs(v) - theta, 0.0)


def _l1_threshold(a, radius):
    """Threshold ``theta > 0`` with ``sum max(a - theta, 0) = radius`` for ``a >= 0``
    and ``sum(a) > radius > 0`` (Duchi et al. 2008, Figure 1)."""
    u = np.sort(a)[::-1]
    excess = np.cumsum(u) - radius
    j = np.arange(1, u.size + 1)
    # The condition u_j > excess_j / j holds exactly for j <= rho (Duchi et al.
    # 2008, Lemma 2), so the last index where it holds is rho.
    rho = np.flatnonzero(u * j > excess)[-1] + 1
    return max(excess[rho - 1] / rho, 0.0)
