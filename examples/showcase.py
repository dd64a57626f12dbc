"""skdpsco showcase: private linear models next to their scikit-learn counterparts.

Run with ``make demo``. For each dataset and epsilon the table shows the test score of
the private model, what it spent (``privacy_spent_``) and its fit time, next to the
non-private scikit-learn model on the same split; each row is printed as soon as it
is measured. At the end the privacy-utility plot (score against epsilon, one panel
per dataset) is written to ``demo_output/privacy_utility.png``
(``python examples/showcase.py --output-dir DIR`` to write it elsewhere).

Data in their natural units: the three real datasets are fitted on their raw
columns (breast cancer areas near 650 next to ratios near 0.1, the diabetes target
near 150), with no scaler and no bounds. Every estimator releases a private centre
and scale of each feature (and of a regressor's target) from a public share of its
epsilon (``scaling="private"``, the default). A scaler fitted on the private
training data would instead release their means and variances, which no epsilon
accounts for. The synthetic datasets are generated on a known scale, declared with
``scaling="none"`` (and, for the sparse truth, which has no offset, with
``fit_intercept=False``, the papers' setting).
"""

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import train_test_split

import skdpsco
from skdpsco import (
    GaussianWidthDPClassifier,
    GaussianWidthDPRegressor,
    HeavyTailedDPLogistic,
    HeavyTailedDPRidge,
    SparseGradientDPClassifier,
)
from skdpsco.datasets import (
    make_heavy_tailed_classification,
    make_heavy_tailed_regression,
    make_one_hot_classification,
)

EPSILONS = (0.5, 1.0, 2.0, 8.0)
SEEDS = (0, 1, 2)
DEFAULT_OUTPUT_DIR = Path(__file__).resolve().parent.parent / "demo_output"
PLOT_NAME = "privacy_utility.png"


def _split(X, y, seed=0, stratify=False):
    """Train / test split of the raw columns: no scaler, no bounds."""
    return train_test_split(
        X, y, test_size=0.3, random_state=seed, stratify=y if stratify else None
    )


def _heavy_tailed_models(kind, heavy, **params):
    Est = HeavyTailedDPLogistic if kind == "clf" else HeavyTailedDPRidge
    # The default everywhere; the Catoni estimator where its regime is (heavy
    # tails, few parameters, large n): see the README's benchmark tables.
    algorithms = ["clipped_gd"] + (["catoni_gd"] if heavy else [])
    return [(Est, dict(algorithm=a, **params)) for a in algorithms]


def _one_hot_data():
    """Categorical records one-hot encoded as CSR: 8 non-zeros per row, a public
    schema fact, so ``sparsity=8`` and ``||x|| = sqrt(8)`` are declared, not read."""
    X, y, _ = make_one_hot_classification(40_000, 8, 50, random_state=0)
    return X[:30_000], X[30_000:], y[:30_000], y[30_000:]


def _sparse_truth_data(n=20_000, d=50, seed=0):
    """Rows of norm about 1, a 4-sparse truth with l1 norm 3.5 (inside the l1 ball
    of radius 4 declared to the Gaussian-width estimators)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) / np.sqrt(d)
    w = np.zeros(d)
    w[:4] = np.array([0.4, -0.3, 0.2, -0.1]) * np.sqrt(d) / 2
    y = X @ w + 0.1 * rng.normal(size=n)
    return X[:15_000], X[15_000:], y[:15_000], y[15_000:]


def _datasets():
    """``(name, kind, X_train, X_test, y_train, y_test, private models)``."""
    X, y = load_breast_cancer(return_X_y=True)
    yield (
        "breast cancer, raw (binary)",
        "clf",
        *_split(X, y, stratify=True),
        _heavy_tailed_models("clf", False),
    )
    X, y = load_digits(return_X_y=True)
    yield (
        "digits, raw (10 classes)",
        "clf",
        *_split(X, y, stratify=True),
        _heavy_tailed_models("clf", False),
    )
    X, y = load_diabetes(return_X_y=True, scaled=False)
    yield (
        "diabetes, raw (regression)",
        "reg",
        *_split(X, y),
        _heavy_tailed_models("reg", False),
    )
    X, y, _ = make_heavy_tailed_regression(
        20_000, 10, feature_distribution="student_t", random_state=0
    )
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=0)
    yield (
        "heavy-tailed synthetic regression",
        "reg",
        X_tr,
        X_te,
        y_tr,
        y_te,
        _heavy_tailed_models("reg", True, scaling="none"),
    )
    X, y, _ = make_heavy_tailed_classification(20_000, 10, random_state=0)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=0)
    yield (
        "heavy-tailed synthetic classification",
        "clf",
        X_tr,
        X_te,
        y_tr,
        y_te,
        _heavy_tailed_models("clf", True, scaling="none"),
    )
    sparse_params = dict(
        sparsity=8, row_norm_bound=np.sqrt(8), coef_norm_bound=10.0, scaling="none"
    )
    yield (
        "one-hot CSR, 400 columns (binary)",
        "clf",
        *_one_hot_data(),
        [(SparseGradientDPClassifier, sparse_params)],
    )
    X_tr, X_te, y_tr, y_te = _sparse_truth_data()
    yield (
        "sparse truth, l1 ball (regression)",
        "reg",
        X_tr,
        X_te,
        y_tr,
        y_te,
        [
            (
                GaussianWidthDPRegressor,
                dict(radius=4.0, scaling="none", fit_intercept=False),
            )
        ],
    )
    yield (
        "sparse truth, l1 ball (binary)",
        "clf",
        X_tr,
        X_te,
        (y_tr > 0).astype(int),
        (y_te > 0).astype(int),
        [
            (
                GaussianWidthDPClassifier,
                dict(radius=4.0, scaling="none", fit_intercept=False),
            )
        ],
    )


def plot_privacy_utility(results, path, dpi=90):
    """Write the privacy-utility plot of ``results`` to ``path`` (a PNG).

    ``results`` is a list of dicts with keys ``dataset``, ``metric`` (axis label,
    e.g. ``"accuracy"`` or ``"R^2"``), ``model``, ``epsilon`` and ``score``; rows with
    ``epsilon = inf`` are the non-private reference, drawn as a dashed horizontal
    line. One panel per dataset, one line per private model. Regression scores far
    below the reference (R^2 of -8 at a small epsilon, say) are drawn at the
    panel's lower edge with their value written next to them.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    datasets = list(dict.fromkeys(row["dataset"] for row in results))
    ncols = min(4, len(datasets))
    nrows = math.ceil(len(datasets) / ncols)
    fig = Figure(figsize=(3.6 * ncols, 3.0 * nrows + 0.4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax in axes[len(datasets) :]:
        ax.set_visible(False)
    for ax, name in zip(axes, datasets, strict=False):
        rows = [row for row in results if row["dataset"] == name]
        metric = rows[0]["metric"]
        private = [row for row in rows if math.isfinite(row["epsilon"])]
        scores = [row["score"] for row in rows]
        refs = [row for row in rows if not math.isfinite(row["epsilon"])]
        top = max(scores)
        floor = min(scores)
        if metric != "accuracy":  # R^2 is unbounded below: keep the panel readable
            floor = max(floor, min(0.0, top - 1.0) - 0.5)
        pad = 0.06 * max(top - floor, 0.05)
        for row in refs:
            ax.axhline(
                row["score"],
                color="black",
                linestyle="--",
                linewidth=1.2,
                label=row["model"],
            )
        for model in dict.fromkeys(row["model"] for row in private):
            pts = sorted(
                (row["epsilon"], row["score"])
                for row in private
                if row["model"] == model
            )
            eps = [e for e, _ in pts]
            shown = [max(v, floor) for _, v in pts]
            (line,) = ax.plot(eps, shown, marker="o", markersize=4, label=model)
            for e, v in pts:
                if v < floor:  # off the panel: a down arrow at the edge, and the value
                    ax.plot(e, floor, marker="v", color=line.get_color(), markersize=7)
                    ax.annotate(
                        f"{v:.3g}",
                        (e, floor),
                        textcoords="offset points",
                        xytext=(5, 3),
                        fontsize=7,
                        color=line.get_color(),
                    )
        ax.set_xscale("log")
        ticks = sorted({row["epsilon"] for row in private})
        ax.set_xticks(ticks, [f"{e:g}" for e in ticks])
        ax.minorticks_off()
        ax.set_ylim(floor - pad, top + pad)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("epsilon", fontsize=8)
        ax.set_ylabel("test " + ("$R^2$" if metric == "R^2" else metric), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="best")
    fig.suptitle(
        f"skdpsco: test score against epsilon (delta = 1e-6, median of {len(SEEDS)} "
        "seeds); dashed: the non-private scikit-learn model",
        fontsize=10,
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=DEFAULT_OUTPUT_DIR,
        help=f"where {PLOT_NAME} is written (default: demo_output/ in the repository)",
    )
    args = parser.parse_args(argv)
    t_start = time.perf_counter()
    plotting = _matplotlib_available()
    if not plotting:
        # Say it before the tables are computed, not after.
        print(
            "matplotlib is not installed: the tables only, no plot "
            "(pip install 'skdpsco[examples]')."
        )
    print(f"skdpsco {skdpsco.__version__}: private models vs scikit-learn")
    print("scores: accuracy (classification) or R^2 (regression) on a held-out split;")
    print(f"private rows are medians over seeds {SEEDS}; delta = 1e-6.\n")
    header = (
        f"{'dataset':38s} {'model':50s} {'epsilon':>8s} {'score':>7s} "
        f"{'spent':>16s} {'fit s':>7s}"
    )
    print(header)
    print("-" * len(header), flush=True)
    results = []
    for name, kind, X_tr, X_te, y_tr, y_te, models in _datasets():
        metric = "accuracy" if kind == "clf" else "R^2"
        ref = LogisticRegression(max_iter=5000) if kind == "clf" else Ridge()
        t0 = time.perf_counter()
        ref.fit(X_tr, y_tr)
        dt = time.perf_counter() - t0
        ref_label = type(ref).__name__ + " (non-private)"
        score = ref.score(X_te, y_te)
        results.append(
            dict(
                dataset=name,
                metric=metric,
                model=ref_label,
                epsilon=math.inf,
                score=score,
            )
        )
        print(
            f"{name:38s} {ref_label:50s} {'inf':>8s} {score:7.3f} {'-':>16s} {dt:7.3f}",
            flush=True,
        )
        for (Est, params), eps in [(m, e) for m in models for e in EPSILONS]:
            scores, times, warned = [], [], False
            for seed in SEEDS:
                est = Est(epsilon=eps, delta=1e-6, random_state=seed, **params)
                t0 = time.perf_counter()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    est.fit(X_tr, y_tr)
                times.append(time.perf_counter() - t0)
                scores.append(est.score(X_te, y_te))
                for w in caught:
                    # The library's own public-number warning (noise dominates at
                    # this n and epsilon) is marked in the row; anything else is a
                    # bug of the demo.
                    if "noise dominates" not in str(w.message):
                        raise RuntimeError(f"unexpected warning: {w.message}")
                    warned = True
            spent = est.privacy_spent_
            spent_txt = f"({spent.epsilon:.3g}, {spent.delta:.0e})"
            label = f"{Est.__name__} [{est.algorithm}]"
            score = float(np.median(scores))
            results.append(
                dict(dataset=name, metric=metric, model=label, epsilon=eps, score=score)
            )
            print(
                f"{'':38s} {label:50s} {eps:8.2f} "
                f"{score:7.3f} {spent_txt:>16s} {np.median(times):7.3f}"
                + ("  (warned: noise dominates)" if warned else ""),
                flush=True,
            )
        print(flush=True)
    print(f"Done in {time.perf_counter() - t_start:.0f} s.")
    if plotting:
        path = plot_privacy_utility(results, args.output_dir / PLOT_NAME)
        print(f"Privacy-utility plot written to {path}")
    return 0


def _matplotlib_available():
    """Whether the optional plotting dependency (the ``examples`` extra) imports."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
