"""Default estimators on raw real data: every bundled dataset that fits a linear model.

Run ``python benchmarks/real_data.py [--quick] [--epsilons E ...] [--n-splits K]
[--family F ...]``. Each family's default estimators (``--family``:
``heavy_tailed``, ``HeavyTailedDPLogistic()`` / ``HeavyTailedDPRidge()``, the main
table; ``gaussian_width`` and ``sparse_gradient``, the other two pairs; all three
by default) are fitted with their default parameters (only ``epsilon``,
``random_state`` and, where the default would be too large for ``n_train``,
``delta`` are set) on the raw columns in their natural units: no StandardScaler,
no declared bounds. Every number is measured in the same run,
on the same splits, against

* scikit-learn's ``LogisticRegression(max_iter=5000)`` / ``Ridge()`` (non-private,
  same raw columns);
* a trivial baseline: ``DummyClassifier(strategy="prior")`` / ``DummyRegressor()``;
* diffprivlib's ``LogisticRegression`` / ``LinearRegression`` at epsilon = 1 when
  ``import diffprivlib`` works (otherwise the cell says why, as in
  ``benchmarks/heavy_tailed.py``).

Score: test accuracy (classification) or test R^2 (regression), median over
``--n-splits`` splits ``train_test_split(test_size=0.3, random_state=seed)``
(stratified for classification), seeds 0, 1, ... The tables are printed as Markdown
and written to ``benchmarks/results/real_data.md`` (``real_data_<family>.md`` for
the other two families).

Datasets (24). scikit-learn: breast_cancer, digits, iris, wine (classification),
diabetes (regression, ``scaled=False``: the raw units, not scikit-learn's
standardised copy). statsmodels (``sm.datasets.<name>.load_pandas()``):

* classification: anes96 (``vote`` from every other column), china_smoking (the
  8 cities x 2 x 2 count table expanded to one row per person: ``cancer`` from
  ``smoking`` and the city), fair (``affairs > 0``; the occupation codes one-hot),
  modechoice (``choice``, one row per traveller x mode, the mode one-hot, the
  traveller id dropped), spector (``GRADE``);
* regression: cancer (``cancer`` from ``population``), ccard (``AVGEXP``),
  committee (``BILLS104``), copper (``WORLDCONSUMPTION``), cpunish
  (``EXECUTIONS``), engel (``foodexp`` from ``income``), grunfeld (``invest``; the
  firm one-hot, the year kept raw), longley (``TOTEMP``), randhie (``mdvis``),
  scotland (``YES``), stackloss (``STACKLOSS``), star98 (the proportion of pupils
  above the national median, ``NABOVE / (NABOVE + NBELOW)``, from the 20 exog
  columns), statecrime (``murder`` from statsmodels' exog: urban, poverty, hs_grad,
  single; ``violent`` would contain the target), strikes (``duration``).

Rejected: scikit-learn's linnerud (20 rows, three targets: multi-output, not one
model; its fetch_* datasets are downloads, not bundled); statsmodels' heart (the
target, survival time, is right-censored: a linear fit of it is the wrong model),
and the time series co2, danish_data, elnino, fertility, interest_inflation,
macrodata, nile and sunspots (no natural single target from tabular features;
a random split of a series leaks the future).

Binary codes (sex in diabetes, PSI, OWNRENT, SOUTH, ...) and ordinal codes (anes96's
PID / educ / income bins, ratings) are kept as numbers; nominal codes with more
than two levels (grunfeld's firm, fair's occupations, modechoice's mode,
china_smoking's city) are one-hot encoded with the category list of the whole
dataset, which is treated as public metadata. Rows with a NaN are dropped.
"""

import argparse
import datetime
import platform
import re
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
import sklearn
from _peers import diffprivlib_failure, load_diffprivlib
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import train_test_split
from threadpoolctl import threadpool_limits

import skdpsco
from skdpsco import (
    GaussianWidthDPClassifier,
    GaussianWidthDPRegressor,
    HeavyTailedDPLogistic,
    HeavyTailedDPRidge,
    SparseGradientDPClassifier,
    SparseGradientDPRegressor,
)
from skdpsco.exceptions import PrivacyBudgetError

try:  # the bench extra: statsmodels' bundled datasets, read as pandas frames
    import pandas as pd
    import statsmodels.api as sm
except ImportError:
    raise SystemExit(
        "benchmarks/real_data.py reads statsmodels' datasets: "
        "pip install 'skdpsco[bench]'"
    ) from None

HERE = Path(__file__).resolve().parent
DEFAULT_EPSILONS = (0.5, 1.0, 2.0, 8.0)
#: The default (classifier, regressor) of each family.
FAMILIES = {
    "heavy_tailed": (HeavyTailedDPLogistic, HeavyTailedDPRidge),
    "gaussian_width": (GaussianWidthDPClassifier, GaussianWidthDPRegressor),
    "sparse_gradient": (SparseGradientDPClassifier, SparseGradientDPRegressor),
}
QUICK_EPSILONS = (1.0, 8.0)
DIFFPRIVLIB_EPSILON = 1.0
#: The estimators' default delta; replaced by min(DEFAULT_DELTA, 1 / (10 n_train))
#: when n_train * DEFAULT_DELTA >= 1.
DEFAULT_DELTA = 1e-5
#: Gap to the trivial baseline, at epsilon = 1, that the summary line reports.
SUMMARY_MIN_N = 200
SUMMARY_GAP = {"clf": 0.02, "reg": 0.05}
#: UserWarnings whose message matches this are the "noise dominates" warnings the
#: library gives when public numbers say the fit cannot beat a trivial model.
NOISE_WARNING = re.compile(r"noise|trivial", re.IGNORECASE)
DIFFPRIVLIB_NOTE = (
    "diffprivlib: pure epsilon-DP (delta = 0), one-vs-rest for multiclass, at "
    f"epsilon = {DIFFPRIVLIB_EPSILON:g}; its data bounds (per-column min / max, "
    "largest row norm, target range) are read from the whole dataset and passed "
    "as if public, which favours it."
)


# --------------------------------------------------------------------------- data


def _one_hot(frame, columns):
    """One-hot ``columns`` of the WHOLE dataset (before any split): the category
    list is treated as public metadata, so no split sees a category list read
    from its own rows only."""
    return pd.get_dummies(frame, columns=list(columns), dtype=float)


def _statsmodels(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(sm.datasets, name).load_pandas().data.copy()


def _frame(frame, target, *, drop=(), categorical=()):
    """``(X, y)`` as float arrays: drop NaN rows, one-hot ``categorical``."""
    frame = frame.drop(columns=list(drop)).dropna()
    y = frame.pop(target)
    X = _one_hot(frame, categorical) if categorical else frame
    return X.to_numpy(dtype=float), y.to_numpy(dtype=float)


def _sklearn(loader, **kwargs):
    def load():
        X, y = loader(return_X_y=True, **kwargs)
        keep = ~(np.isnan(X).any(axis=1) | np.isnan(y))
        return X[keep].astype(float), y[keep]

    return load


def _china_smoking():
    # 8 cities x (smoking, lung cancer) counts -> one row per person.
    counts = _statsmodels("china_smoking")
    rows = []
    for city, row in counts.iterrows():
        for smoking in ("yes", "no"):
            for cancer in ("yes", "no"):
                n = int(row[f"smoking_{smoking}_cancer_{cancer}"])
                rows += [(city, float(smoking == "yes"), float(cancer == "yes"))] * n
    frame = pd.DataFrame(rows, columns=["city", "smoking", "cancer"])
    return _frame(frame, "cancer", categorical=["city"])


def _star98():
    frame = _statsmodels("star98")
    frame["above"] = frame["NABOVE"] / (frame["NABOVE"] + frame["NBELOW"])
    return _frame(frame, "above", drop=["NABOVE", "NBELOW"])


def _fair():
    X, y = _frame(
        _statsmodels("fair"), "affairs", categorical=["occupation", "occupation_husb"]
    )
    return X, (y > 0).astype(float)


def _sm(name, target, **kwargs):
    return lambda: _frame(_statsmodels(name), target, **kwargs)


def _datasets():
    from sklearn import datasets as skd

    return {
        # name: (task, loader returning raw (X, y))
        "breast_cancer": ("clf", _sklearn(skd.load_breast_cancer)),
        "digits": ("clf", _sklearn(skd.load_digits)),
        "iris": ("clf", _sklearn(skd.load_iris)),
        "wine": ("clf", _sklearn(skd.load_wine)),
        "diabetes": ("reg", _sklearn(skd.load_diabetes, scaled=False)),
        "anes96": ("clf", _sm("anes96", "vote")),
        "china_smoking": ("clf", _china_smoking),
        "fair": ("clf", _fair),
        "modechoice": (
            "clf",
            _sm("modechoice", "choice", drop=["individual"], categorical=["mode"]),
        ),
        "spector": ("clf", _sm("spector", "GRADE")),
        "cancer": ("reg", _sm("cancer", "cancer")),
        "ccard": ("reg", _sm("ccard", "AVGEXP")),
        "committee": ("reg", _sm("committee", "BILLS104")),
        "copper": ("reg", _sm("copper", "WORLDCONSUMPTION")),
        "cpunish": ("reg", _sm("cpunish", "EXECUTIONS")),
        "engel": ("reg", _sm("engel", "foodexp")),
        "grunfeld": ("reg", _sm("grunfeld", "invest", categorical=["firm"])),
        "longley": ("reg", _sm("longley", "TOTEMP")),
        "randhie": ("reg", _sm("randhie", "mdvis")),
        "scotland": ("reg", _sm("scotland", "YES")),
        "stackloss": ("reg", _sm("stackloss", "STACKLOSS")),
        "star98": ("reg", _star98),
        "statecrime": ("reg", _sm("statecrime", "murder", drop=["violent", "white"])),
        "strikes": ("reg", _sm("strikes", "duration")),
    }


DATASETS = _datasets()


# ---------------------------------------------------------------- diffprivlib


def diffprivlib_scores(task, X, y, splits, epsilon):
    """diffprivlib's test score on each split, or the text saying why there is none.

    Bounds come from the whole dataset ``(X, y)`` (see DIFFPRIVLIB_NOTE)."""
    models, why = load_diffprivlib()
    if models is None:
        return why
    logistic, linear = models
    try:
        from diffprivlib.utils import PrivacyLeakWarning

        scores = []
        for seed, (a, b, c, d) in splits:
            if task == "clf":
                est = logistic(
                    epsilon=epsilon,
                    data_norm=float(np.linalg.norm(X, axis=1).max()),
                    random_state=seed,
                )
            else:
                est = linear(
                    epsilon=epsilon,
                    bounds_X=(X.min(axis=0), X.max(axis=0)),
                    bounds_y=(float(y.min()), float(y.max())),
                    random_state=seed,
                )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PrivacyLeakWarning)
                warnings.simplefilter("ignore", UserWarning)
                scores.append(est.fit(a, c).score(b, d))
        return scores
    except Exception as exc:  # report it in the table, don't crash
        return diffprivlib_failure(exc)


# ------------------------------------------------------------------- fitting


def dp_delta(n_train):
    """The default delta, unless it is at least 1 / n_train's tenth."""
    if n_train * DEFAULT_DELTA >= 1:
        return min(DEFAULT_DELTA, 1.0 / (10 * n_train))
    return None  # leave the estimator's default


def _fit_dp(Est, epsilon, seed, delta, a, b, c, d):
    """Test score and the noise / trivial warnings of one private fit."""
    kwargs = {"epsilon": epsilon, "random_state": seed}
    if delta is not None:
        kwargs["delta"] = delta
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = Est(**kwargs).fit(a, c)
    noisy = any(
        issubclass(w.category, UserWarning) and NOISE_WARNING.search(str(w.message))
        for w in caught
    )
    return est.score(b, d), noisy


def run_dataset(name, task, X, y, epsilons, seeds, family="heavy_tailed"):
    """One row of the family's table (a dict)."""
    splits = []
    for seed in seeds:
        a, b, c, d = train_test_split(
            X,
            y,
            test_size=0.3,
            random_state=seed,
            stratify=y if task == "clf" else None,
        )
        splits.append((seed, (a, b, c, d)))
    n_train = splits[0][1][0].shape[0]
    delta = dp_delta(n_train)
    classifier, regressor = FAMILIES[family]
    if task == "clf":
        Est, ref, dummy = (
            classifier,
            LogisticRegression(max_iter=5000),
            DummyClassifier(strategy="prior"),
        )
    else:
        Est, ref, dummy = regressor, Ridge(), DummyRegressor()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning on raw columns
        trivial = [dummy.fit(a, c).score(b, d) for _, (a, b, c, d) in splits]
        sk = [ref.fit(a, c).score(b, d) for _, (a, b, c, d) in splits]
    dp, warned = {}, []
    for eps in epsilons:
        scores, noisy = [], False
        try:
            for seed, (a, b, c, d) in splits:
                score, flag = _fit_dp(Est, eps, seed, delta, a, b, c, d)
                scores.append(score)
                noisy |= flag
            dp[eps] = float(np.median(scores))
        except PrivacyBudgetError:
            dp[eps] = "refused"
        except Exception as exc:  # a crash inside skdpsco: report, keep going
            print(
                f"[real_data] {name}, epsilon={eps:g}: {Est.__name__}.fit raised\n"
                + traceback.format_exc(),
                file=sys.stderr,
            )
            dp[eps] = f"error: {type(exc).__name__}"
        if noisy:
            warned.append(f"{eps:g}")
    dpl = (
        diffprivlib_scores(task, X, y, splits, DIFFPRIVLIB_EPSILON)
        if family == "heavy_tailed"
        else "see the heavy_tailed table"
    )
    return {
        "dataset": name,
        "task": task,
        "n_train": n_train,
        "d": X.shape[1],
        "delta": DEFAULT_DELTA if delta is None else delta,
        "trivial": float(np.median(trivial)),
        "sklearn": float(np.median(sk)),
        "dp": dp,
        "diffprivlib": dpl if isinstance(dpl, str) else float(np.median(dpl)),
        "warned": warned,
    }


# -------------------------------------------------------------------- output


def _fmt(value):
    if isinstance(value, str):
        return value
    return f"{value:.3f}" if abs(value) < 1000 else f"{value:.3g}"


def _gap(row):
    value = row["dp"].get(1.0)
    if not isinstance(value, float):
        return None
    return value - row["trivial"]


def markdown_table(rows, epsilons):
    header = (
        ["dataset", "task", "n_train", "d", "trivial", "sklearn"]
        + [f"eps={e:g}" for e in epsilons]
        + [f"diffprivlib eps={DIFFPRIVLIB_EPSILON:g}", "warned", "eps=1 minus trivial"]
    )
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for row in rows:
        dpl = row["diffprivlib"]
        dpl = f"n/a: {dpl}" if isinstance(dpl, str) else _fmt(dpl)
        gap = _gap(row)
        cells = (
            [
                row["dataset"],
                "accuracy" if row["task"] == "clf" else "R^2",
                str(row["n_train"]),
                str(row["d"]),
                _fmt(row["trivial"]),
                _fmt(row["sklearn"]),
            ]
            + [_fmt(row["dp"][e]) for e in epsilons]
            + [
                dpl,
                ", ".join(row["warned"]) if row["warned"] else "no",
                "-" if gap is None else f"{gap:+.3f}",
            ]
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary_line(rows):
    below = []
    for row in rows:
        gap = _gap(row)
        if row["n_train"] < SUMMARY_MIN_N:
            continue
        if gap is None:
            below.append(f"{row['dataset']} ({row['dp'].get(1.0, 'not run')})")
        elif gap < -SUMMARY_GAP[row["task"]]:
            below.append(f"{row['dataset']} ({gap:+.3f})")
    return (
        f"At epsilon = 1, datasets with n_train >= {SUMMARY_MIN_N} more than "
        f"{SUMMARY_GAP['reg']} R^2 / {SUMMARY_GAP['clf']} accuracy below trivial: "
        + (", ".join(below) if below else "none")
        + "."
    )


def delta_line(rows):
    reduced = [r for r in rows if r["delta"] != DEFAULT_DELTA]
    if not reduced:
        return (
            f"delta = {DEFAULT_DELTA:g} (the default) on every dataset: "
            "n_train * 1e-5 < 1 everywhere."
        )
    return (
        f"delta = {DEFAULT_DELTA:g} (the default) except "
        + ", ".join(f"{r['dataset']}: {r['delta']:.3g}" for r in reduced)
        + " (min(1e-5, 1 / (10 n_train)) where n_train * 1e-5 >= 1)."
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="2 splits and epsilons 1 and 8 (unless given explicitly)",
    )
    parser.add_argument(
        "--epsilons",
        nargs="+",
        type=float,
        help="privacy budgets (default 0.5 1 2 8); 1 is always added: the last "
        "column and the summary are at epsilon = 1",
    )
    parser.add_argument("--n-splits", type=int, help="train/test splits (default 25)")
    parser.add_argument(
        "--only", nargs="+", choices=sorted(DATASETS), help="datasets to run"
    )
    parser.add_argument(
        "--family",
        nargs="+",
        choices=sorted(FAMILIES),
        help="estimator families (default: all three, heavy_tailed first)",
    )
    parser.add_argument(
        "--output",
        default=str(HERE / "results" / "real_data.md"),
        help="where to write the heavy_tailed table (the others get the suffix "
        "_<family>)",
    )
    args = parser.parse_args(argv)
    epsilons = args.epsilons or (QUICK_EPSILONS if args.quick else DEFAULT_EPSILONS)
    epsilons = sorted(set(epsilons) | {1.0})
    # Below ~500 training rows one split's score moves by 0.1-0.5 with the noise
    # draw: 25 splits make the median stable to about 0.02.
    n_splits = args.n_splits or (2 if args.quick else 25)
    seeds = list(range(n_splits))
    names = args.only or list(DATASETS)

    families = args.family or list(FAMILIES)
    for family in families:
        out = Path(args.output)
        if family != "heavy_tailed":
            out = out.with_name(f"{out.stem}_{family}{out.suffix}")
        run_family(family, names, epsilons, seeds, out, args.quick)


def run_family(family, names, epsilons, seeds, out, quick):
    """Fit ``family``'s default estimators on every dataset; write its table."""
    classifier, regressor = FAMILIES[family]
    t_start = time.perf_counter()
    rows = []
    with threadpool_limits(limits=1):
        for name in names:
            task, load = DATASETS[name]
            t0 = time.perf_counter()
            X, y = load()
            rows.append(run_dataset(name, task, X, y, epsilons, seeds, family))
            print(
                f"[real_data] {family}, {name}: {time.perf_counter() - t0:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    seconds = time.perf_counter() - t_start

    table = markdown_table(rows, epsilons)
    intro = (
        f"### Real data, raw columns, default {classifier.__name__} / "
        f"{regressor.__name__} ({len(rows)} datasets)\n\n"
        "Test accuracy (classification) or R^2 (regression), median over "
        f"{len(seeds)} splits (test_size = 0.3, seeds {seeds[0]}..{seeds[-1]}). "
        f"eps=...: {classifier.__name__}() / {regressor.__name__}() with default "
        "parameters on the raw columns (no scaler and no bounds: the estimators "
        "scale privately); sklearn: "
        "LogisticRegression(max_iter=5000) / Ridge(); trivial: "
        'DummyClassifier(strategy="prior") / DummyRegressor(). warned: the '
        "epsilons at which some split's fit gave a UserWarning mentioning "
        "'noise' or 'trivial'. Higher is better.\n"
    )
    footer = [summary_line(rows), delta_line(rows)]
    if family == "heavy_tailed":
        footer.append(DIFFPRIVLIB_NOTE)
    footer.append(f"Runtime {seconds:.0f} s (BLAS limited to 1 thread).")
    report = intro + "\n" + table + "\n\n" + "\n\n".join(footer) + "\n"
    print("\n" + report)

    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        f"<!-- {datetime.datetime.now():%Y-%m-%d %H:%M}; {platform.machine()}; "
        f"python {platform.python_version()}, scikit-learn {sklearn.__version__}, "
        f"skdpsco {skdpsco.__version__}; "
        f"{'--quick' if quick else 'full run'} -->\n\n" + report
    )
    print(f"[real_data] table written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
