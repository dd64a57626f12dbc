"""
===============================================
Decision boundaries at different privacy levels
===============================================

A two-feature binary problem lets us look at what the privacy noise does to a
logistic regression: :class:`~skdpsco.HeavyTailedDPLogistic` is fitted at
``epsilon`` = 0.1, 0.5, 2 and 8 and its decision boundary (and predicted
probabilities) drawn next to scikit-learn's non-private
:class:`~sklearn.linear_model.LogisticRegression`. The noise is random, so each
panel draws the boundaries of five fits with different noise seeds. With 300
training records, small budgets tilt and shift the boundary at random, sometimes
to a useless one; from ``epsilon`` of a few units the private boundaries gather
around the non-private one.
"""

# %%
# Data
# ----
#
# Two Gaussian blobs, generated on a known scale (features of order 1), which is
# declared with ``scaling="none"``: the whole budget then goes to the fit. On
# real data in unknown units, leave ``scaling`` at its default: the estimator
# releases a private centre and scale of every feature from a public share of its
# budget. A scaler fitted on the private training records would instead release
# their means and variances outside any privacy budget.
#
# ``random_state`` is fixed for a reproducible page; in production leave it at
# ``None`` (anyone who knows the seed can subtract the noise).

try:
    import matplotlib.pyplot as plt
except ImportError:  # the optional examples extra
    raise SystemExit(
        "This example draws with matplotlib: pip install 'skdpsco[examples]'"
    ) from None
import numpy as np
from sklearn.datasets import make_blobs
from sklearn.linear_model import LogisticRegression

from skdpsco import HeavyTailedDPLogistic

centers = [(-1.0, -0.5), (1.0, 1.0)]
X, y = make_blobs(n_samples=1_300, centers=centers, cluster_std=1.0, random_state=0)
X_train, X_test, y_train, y_test = X[:300], X[300:], y[:300], y[300:]

# %%
# Fits
# ----
#
# ``classes=[0, 1]`` declares the label set as public, so that it is not read
# from the private ``y``; ``delta = 1e-5`` is well below ``1 / n``. Each budget
# is fitted with five noise seeds.

EPSILONS = (0.1, 0.5, 2.0, 8.0)
SEEDS = range(5)
reference = LogisticRegression().fit(X_train, y_train)
private = {
    eps: [
        HeavyTailedDPLogistic(
            epsilon=eps,
            delta=1e-5,
            classes=[0, 1],
            scaling="none",
            random_state=seed,
        ).fit(X_train, y_train)
        for seed in SEEDS
    ]
    for eps in EPSILONS
}

ref_accuracy = reference.score(X_test, y_test)
print(f"LogisticRegression (non-private): test accuracy {ref_accuracy:.3f}")
for eps, fits in private.items():
    acc = [m.score(X_test, y_test) for m in fits]
    print(f"epsilon={eps:4.1f}: test accuracy of the 5 fits {np.round(acc, 3)}")

# %%
# Plot
# ----
#
# The background is the predicted probability of class 1 of the first fit
# (seed 0), the black line its decision boundary (probability 0.5), the grey
# lines the boundaries of the four other seeds, the dots the test records.
#
# At small budgets the private probabilities switch from 0 to 1 over a shorter
# distance than the non-private ones: the noise inflates the coefficients, and the
# models are over-confident. At ``epsilon = 8`` the coefficients' norm is within
# 5% of scikit-learn's (the default ``clip_norm="auto"`` is 3 there: few
# per-sample gradients are clipped).

xx, yy = np.meshgrid(np.linspace(-4, 4, 200), np.linspace(-4, 4, 200))
grid = np.c_[xx.ravel(), yy.ravel()]
panels = [("LogisticRegression\n(non-private)", [reference])] + [
    (f"HeavyTailedDPLogistic\nepsilon={eps:g}", fits) for eps, fits in private.items()
]

fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels), 4.2))
for ax, (title, fits) in zip(axes, panels, strict=True):
    for i, model in enumerate(fits):
        proba = model.predict_proba(grid)[:, 1].reshape(xx.shape)
        if i == 0:
            ax.contourf(
                xx, yy, proba, levels=np.linspace(0, 1, 11), cmap="RdBu_r", alpha=0.6
            )
        ax.contour(
            xx,
            yy,
            proba,
            levels=[0.5],
            colors="k" if i == 0 else "0.35",
            linewidths=2 if i == 0 else 1,
        )
    ax.scatter(
        X_test[:, 0],
        X_test[:, 1],
        c=y_test,
        cmap="RdBu_r",
        edgecolors="k",
        linewidths=0.3,
        s=8,
    )
    acc = np.median([m.score(X_test, y_test) for m in fits])
    label = "accuracy" if len(fits) == 1 else "median accuracy"
    ax.set_title(f"{title}\n{label} {acc:.3f}", fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])
fig.tight_layout()
plt.show()
