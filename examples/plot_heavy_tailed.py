"""
===========================================
Heavy-tailed noise: clipping biases the fit
===========================================

The standard recipe for private gradient descent clips every per-sample gradient
to a public norm ``clip_norm`` and adds Gaussian noise (``algorithm="clipped_gd"``,
the default of :class:`~skdpsco.HeavyTailedDPRidge`). Clipping is what makes the
guarantee hold for any data, but under skewed, heavy-tailed noise it also moves
the answer: the long tail of large residuals is cut off, so the fit estimates
something closer to the *median* of the noise than its mean, and no amount of
privacy budget or data removes that bias.

This example reproduces the ridge experiment of Wang, Xiao, Devadas & Xu (2020):
standard normal features, log-normal noise centred to mean zero, ``d = 10``. It
compares clipping (at the default ``clip_norm="auto"``, at 1 and at 10) with
the two heavy-tailed mean estimators: the Catoni-type soft truncation
(``"catoni_gd"``) and the private-range truncated mean of Kamath, Liu & Zhang
(``"truncated_mean_gd"``), whose truncation radius is so wide that it is nearly
unbiased and only pays in noise.
"""

# %%
# Data
# ----
#
# ``make_heavy_tailed_regression`` draws :math:`y = \langle w^*, x \rangle + e`
# with :math:`e = \Delta - \mathbb{E}\Delta`, :math:`\Delta \sim
# \mathrm{LogNormal}(0, 1)`: mean 0, variance 4.67, but a median of
# :math:`1 - e^{1/2} = -0.65` and a long right tail. The true intercept is 0.
# The README's benchmark uses 100,000 training records; 50,000 keep this page
# fast, which hurts the truncated mean most (its noise shrinks with ``n``).
# Features are standard normal by construction, so no scaling is needed.
#
# ``random_state`` is fixed for a reproducible page; in production leave it at
# ``None`` (anyone who knows the seed can subtract the noise).

import math
import time

try:
    import matplotlib.pyplot as plt
except ImportError:  # the optional examples extra
    raise SystemExit(
        "This example draws with matplotlib: pip install 'skdpsco[examples]'"
    ) from None
import numpy as np
from sklearn.linear_model import Ridge

from skdpsco import HeavyTailedDPRidge
from skdpsco.datasets import make_heavy_tailed_regression

N_TRAIN, N_TEST, D = 50_000, 50_000, 10
X, y, coef = make_heavy_tailed_regression(
    N_TRAIN + N_TEST, D, noise_distribution="lognormal", random_state=0
)
X_tr, y_tr, X_te, y_te = X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]
noise_median = 1.0 - math.exp(0.5)


def risk(model):
    """Half the mean squared error on the test records (the README's risk)."""
    return 0.5 * np.mean((model.predict(X_te) - y_te) ** 2)


reference = Ridge().fit(X_tr, y_tr)
print(
    f"non-private Ridge: test risk {risk(reference):.4f}, "
    f"intercept {reference.intercept_:+.3f} (truth 0)"
)

# %%
# Private fits
# ------------
#
# ``delta = 1e-6`` is well below ``1 / n``. Each algorithm is fitted once per
# epsilon, with one seed to keep the page fast (the flat curves below are bias,
# which does not depend on the seed). The excess risk is the test risk minus
# that of the non-private model.

EPSILONS = np.array([0.1, 0.5, 2.0])
configs = {
    "clipped_gd (default, clip_norm='auto')": dict(algorithm="clipped_gd"),
    "clipped_gd, clip_norm=1": dict(algorithm="clipped_gd", clip_norm=1.0),
    "clipped_gd, clip_norm=10": dict(algorithm="clipped_gd", clip_norm=10.0),
    "catoni_gd": dict(algorithm="catoni_gd"),
    "truncated_mean_gd": dict(algorithm="truncated_mean_gd"),
}
excess = {name: [] for name in configs}
intercept = {name: [] for name in configs}
coef_error = {name: [] for name in configs}
for name, params in configs.items():
    t0 = time.perf_counter()
    for eps in EPSILONS:
        model = HeavyTailedDPRidge(
            epsilon=eps, delta=1e-6, random_state=0, **params
        ).fit(X_tr, y_tr)
        excess[name].append(risk(model) - risk(reference))
        intercept[name].append(model.intercept_)
        coef_error[name].append(np.linalg.norm(model.coef_ - coef))
    print(f"{name}  ({time.perf_counter() - t0:.1f} s for {len(EPSILONS)} fits)")
    for eps, r, b, e in zip(
        EPSILONS, excess[name], intercept[name], coef_error[name], strict=True
    ):
        print(
            f"  epsilon={eps:4.1f}: excess risk {r:8.4f}   intercept {b:+.3f}   "
            f"||coef - w*|| {e:.3f}"
        )

# %%
# What the plots show
# -------------------
#
# * Clipping at ``clip_norm=1`` has the same excess risk at every epsilon (about
#   0.16): the intercept settles near the noise median (-0.65), not at its mean
#   0. More budget does not help; it is bias, not noise.
# * The default ``clip_norm="auto"`` is 3 here (the noise is negligible at
#   50,000 records, so the clip grows to its cap) and cuts that bias to about
#   0.05, as flat.
# * ``catoni_gd`` at its default ``gradient_scale=1`` (smaller than the noise
#   standard deviation 2.2) is biased less (about 0.02) and is as flat: its
#   noise is already negligible at ``epsilon = 0.1``.
# * A larger clip (10) removes most of the bias on this problem (0.002 to 0.010),
#   at the price of ten times more noise, visible in the coefficient error at
#   ``epsilon = 0.1``. It is a fair competitor here, but a heavier tail needs a
#   larger clip still, and the right clip cannot be read off the private data.
# * ``truncated_mean_gd`` is the worst at small epsilon (its noise is calibrated
#   to a truncation radius of 60 gradient scales and lands on every coefficient,
#   right panel) and its intercept comes closest to 0 at ``epsilon = 2``.
#
# Clipping and Catoni estimate the slopes well (right panel): on this problem
# their damage is in the intercept.

fig, axes = plt.subplots(1, 3, figsize=(14, 4.6))
for i, name in enumerate(configs):
    style = dict(marker="o", color=f"C{i}", label=name)
    axes[0].plot(EPSILONS, excess[name], **style)
    axes[1].plot(EPSILONS, intercept[name], **style)
    axes[2].plot(EPSILONS, coef_error[name], **style)
axes[0].set_yscale("log")
axes[0].set_ylabel("excess test risk (half MSE)")
axes[0].set_title("Excess risk over non-private Ridge")
axes[1].axhline(0.0, color="k", linestyle="--", label="true intercept (noise mean)")
axes[1].axhline(noise_median, color="gray", linestyle=":", label="noise median")
axes[1].set_ylim(-0.75, 0.15)
axes[1].set_ylabel("fitted intercept")
axes[1].set_title("Intercept")
axes[2].set_yscale("log")
axes[2].set_ylabel(r"$\|w - w^*\|_2$")
axes[2].set_title("Coefficient error")
for ax in axes:
    ax.set_xscale("log")
    ax.set_xlabel("epsilon (delta = 1e-6)")
handles, labels = axes[1].get_legend_handles_labels()
fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=9)
fig.suptitle(f"Ridge with log-normal noise, n = {N_TRAIN:,}, d = {D}", fontsize=11)
fig.tight_layout(rect=(0, 0.12, 1, 1))
plt.show()
