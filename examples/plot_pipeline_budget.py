"""
=============================================
Pipelines, grid search and the privacy budget
=============================================

skdpsco estimators work inside scikit-learn's :class:`~sklearn.pipeline.Pipeline`
and :class:`~sklearn.model_selection.GridSearchCV`, but every fit on the private
records spends privacy, and the spending adds up. This example

1. puts a :class:`~skdpsco.preprocessing.DPStandardScaler` and a
   :class:`~skdpsco.HeavyTailedDPLogistic` in a Pipeline and tunes ``C`` with a
   plain ``GridSearchCV``,
2. totals what that search spent with :func:`skdpsco.privacy.total_privacy_spent`,
   which also warns about what no budget covers: the choice of the best ``C`` is
   made on noise-free validation scores of private records,
3. runs :class:`skdpsco.model_selection.PrivateSearchCV`, whose whole output (the
   chosen ``C``, the model and its validation score) is ``(epsilon, delta)``-DP,
   and compares the budgets.
"""

# %%
# Data in raw units, scaled privately
# -----------------------------------
#
# The features come in very different units (think of an age, an income and a
# count). A :class:`~sklearn.preprocessing.StandardScaler` fitted on the private
# records would release their exact means and variances; ``PrivateSearchCV``
# refuses it outright. :class:`~skdpsco.preprocessing.DPStandardScaler` releases a
# noisy mean and scale instead, computed from values clipped into a *public* box
# per feature: here the plausible range of each feature, as a data dictionary
# would give it, never read from the data.
#
# ``random_state`` is fixed everywhere for a reproducible page; in production
# leave it at ``None`` (anyone who knows the seed can subtract the noise).

import warnings

try:
    import matplotlib.pyplot as plt
except ImportError:  # the optional examples extra
    raise SystemExit(
        "This example draws with matplotlib: pip install 'skdpsco[examples]'"
    ) from None
import numpy as np
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline

from skdpsco import HeavyTailedDPLogistic
from skdpsco.datasets import make_heavy_tailed_classification
from skdpsco.model_selection import PrivateSearchCV
from skdpsco.preprocessing import DPStandardScaler
from skdpsco.privacy import total_privacy_spent

X, y, _ = make_heavy_tailed_classification(
    12_000, 4, feature_distribution="normal", coef_norm=3.0, random_state=0
)
units_scale = np.array([15.0, 5.0, 10.0, 20.0])
units_offset = np.array([45.0, 20.0, 70.0, 50.0])
X = X * units_scale + units_offset
X_train, X_test, y_train, y_test = X[:10_000], X[10_000:], y[:10_000], y[10_000:]

# Public ranges from the (hypothetical) data dictionary.
lower = np.array([0.0, 0.0, 0.0, 0.0])
upper = np.array([100.0, 50.0, 100.0, 100.0])

pipe = make_pipeline(
    DPStandardScaler(epsilon=0.5, delta=1e-7, bounds=(lower, upper), random_state=0),
    HeavyTailedDPLogistic(epsilon=0.5, delta=1e-7, classes=[0, 1], random_state=0),
)
pipe.fit(X_train, y_train)
single = total_privacy_spent(pipe)
print(
    f"one Pipeline fit: test accuracy {pipe.score(X_test, y_test):.3f}, "
    f"total epsilon {single.epsilon:.3f} (delta {single.delta:.0e})"
)

# %%
# The two steps were each given ``epsilon = 0.5``; both are Gaussian mechanisms,
# which the accountant composes exactly, so the Pipeline spent less than
# ``0.5 + 0.5``.
#
# GridSearchCV: what it spends, and what it does not cover
# --------------------------------------------------------
#
# Three values of ``C``, from a crippling penalty to almost none, and 5 folds
# make 15 Pipeline fits on overlapping subsets of the records, plus the refit of
# the best one on all of them: 16 fits that compose. The folds come from
# ``KFold``: a stratified splitter (the default for classifiers) reads the labels
# to build the folds, which no per-fit budget covers either.

param_grid = {"heavytaileddplogistic__C": [1e-5, 1e-3, 1.0]}
grid = GridSearchCV(
    pipe, param_grid, cv=KFold(5, shuffle=True, random_state=0), n_jobs=1
)

# Every fit of the estimator inside the search says so (a PrivacyLeakWarning
# read from the call stack, never from the data), and so does the total.
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("default")
    grid.fit(X_train, y_train)
    grid_spent = total_privacy_spent(grid)
for message in dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught):
    print(message, end="\n\n")
print(
    f"GridSearchCV: best C {grid.best_params_['heavytaileddplogistic__C']}, "
    f"test accuracy {grid.score(X_test, y_test):.3f}, "
    f"total epsilon {grid_spent.epsilon:.2f} (delta {grid_spent.delta:.1e}), "
    "plus the selection, which is not covered"
)

# %%
# The private alternative: PrivateSearchCV
# ----------------------------------------
#
# ``PrivateSearchCV`` is given the budget of the *whole* search
# (``epsilon = 1``). It holds out a validation part, makes a random number of
# runs, each fitting a random grid point and scoring it with Gaussian noise, and
# releases only the best run: the Papernot & Steinke (2022) bound covers the
# fits, the scores and the selection. It overrides the ``epsilon`` and ``delta``
# of every DP step of the Pipeline with its per-run share, so the 0.5's above do
# not matter here. There is no refit: the released model is the best run's.

search = PrivateSearchCV(pipe, param_grid, epsilon=1.0, delta=1e-7, random_state=0)
search.fit(X_train, y_train)
spent = search.privacy_spent_
print(
    f"PrivateSearchCV: best C {search.best_params_['heavytaileddplogistic__C']}, "
    f"noisy validation accuracy {search.best_score_:.3f}, "
    f"test accuracy {search.score(X_test, y_test):.3f}, "
    f"epsilon {spent.epsilon:.3f} (delta {spent.delta:.0e}), "
    f"per-run zCDP budget {search.run_rho_:.4f}"
)
step_eps = search.best_estimator_[-1].epsilon
print(
    f"  each run fits both steps at epsilon {step_eps:.3f} on {search.n_train_:,} "
    f"records and scores on {search.n_validation_:,}"
)

# %%
# Budgets side by side
# --------------------
#
# The plain grid search spends many times the budget of one fit (each fold fit
# is counted at the budget its parameters claim, 0.5 + 0.5 composed basically,
# since the search keeps no fold model to read a record from), and its selection
# is still outside any guarantee. The private search spends what it was given,
# for everything it releases. Its runs are a little noisier than the single
# Pipeline fit (each step at ``epsilon = 0.45`` instead of 0.5, on 80% of the
# records). To give the grid search the same total of 1, each of its 16 fits
# would get at most a sixteenth of the zCDP budget, even composed exactly: four
# times the noise.

labels = [
    "one Pipeline fit",
    "GridSearchCV\n(16 fits; selection\nnot covered)",
    "PrivateSearchCV\n(everything covered)",
]
epsilons = [single.epsilon, grid_spent.epsilon, spent.epsilon]
accuracies = [
    pipe.score(X_test, y_test),
    grid.score(X_test, y_test),
    search.score(X_test, y_test),
]

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
bars = ax1.bar(labels, epsilons, color=["C0", "C3", "C2"])
ax1.bar_label(bars, fmt="%.2f")
ax1.set_ylabel("total epsilon")
ax1.set_title("Privacy spent on the training records")
bars = ax2.bar(labels, accuracies, color=["C0", "C3", "C2"])
ax2.bar_label(bars, fmt="%.3f")
ax2.set_ylim(0.5, 1.0)
ax2.set_ylabel("test accuracy")
ax2.set_title("Test accuracy of the released model")
for ax in (ax1, ax2):
    ax.tick_params(axis="x", labelsize=8)
fig.tight_layout()
plt.show()
