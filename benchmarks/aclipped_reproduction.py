"""Reproduction of the synthetic experiment of AClipped-dpSGD (Jin et al. 2024).

Run ``python benchmarks/aclipped_reproduction.py [--quick]``. Follows the
synthetic experiment of the paper (Section 5 and Appendix B; the synthetic rows of
Tables 2 and 4), with the library's correctly calibrated estimators:

* AClip = ``algorithm="aclipped_sgd"`` (Algorithm 1: batch mean clipped once to
  ``clip_norm``, the mean estimator of eq. (7), with noise calibrated to its true
  sensitivity 2 * clip_norm: every clipped mean lies in the ``clip_norm``-ball,
  whatever the batch size; Theorem 2 leaves the constant unspecified);
  this is the paper's "UC thm" variant (Theorem 4, no projection), so it is
  compared with the paper's UC column (and CC, the paper's best, is shown as well);
* DP-SGD = ``algorithm="dp_sgd"`` (per-example clipping), at the paper's clip
  level 0.74 and, as an extra row not in the paper, at sqrt(d) (the typical norm
  of a standardised row), which separates clipping bias from privacy noise.

Both use Poisson batches and the RDP accountant of the subsampled Gaussian, turned
into replace-one adjacency by group privacy; the paper's own code under-noises.

Choices the paper leaves open (the defaults used here):

* x ~ N(0, I_d), theta* ~ N(0, I_d / d), d = 20, no intercept, theta0 = 0;
* ridge (RR): y = <theta*, x> + zeta, squared loss 1/2 r^2, no penalty (alpha = 0);
* logistic (LR): y = sign(<theta*, x> + zeta), log-loss, no penalty (C = 1e12);
* noises: Student-t with 2 degrees of freedom (no transform: the paper's is lost),
  Laplace(0, 1), centred chi-square chi2(1) - 1;
* n = 100,000 training rows plus an independent 20,000-row held-out set (the
  paper's split is lost); delta = 1 / (10 n) (paper's delta lost; the 1/n of the
  authors' demo code is above what the library accepts without a warning);
* batch size 200 (paper); clip levels 0.87 for AClip (paper's lambda_UC) and 0.74
  for DP-SGD (paper); step sizes: the library's ``learning_rate="auto"`` (for AClip
  this is Jin et al.'s 1 / (24 L ln(400)) tuning with L = 1);
* epochs: 10 instead of the paper's 400 and 3 repetitions instead of 300, to fit
  a few minutes on a laptop (``--epochs``/``--reps`` change it); ``--quick`` uses
  n = 20,000, 5 epochs, 2 repetitions.

Metric ("estimation error", the paper's Tables 2 and 4: the error divided by the
initial error): held-out loss of the private model divided by the held-out loss at
w = 0 (1/2 mean y^2 for RR, ln 2 for LR).
"""

import argparse
import time
import warnings

import numpy as np

from skdpsco import HeavyTailedDPLogistic, HeavyTailedDPRidge

D = 20
EPSILONS = (0.5, 0.75, 1.0, 2.0)
NOISES = ("Student-t", "Laplace", "chi2")
METHODS = {
    # label: (algorithm, clip_norm)
    "AClip (UC)": ("aclipped_sgd", 0.87),
    "DP-SGD": ("dp_sgd", 0.74),
    # Not in the paper: per-example clipping at the typical row norm sqrt(d), a
    # public choice for standardised features, to separate clipping bias from noise.
    "DP-SGD (λ=√d)": ("dp_sgd", float(np.sqrt(D))),
}

# The paper's Tables 2 (LR) and 4 (RR), synthetic rows: estimation error
# CC / UC / DP-SGD / DP-GD.
PAPER = {
    "logistic": {
        "Student-t": {
            0.5: (0.8517, 0.8672, 0.8796, 0.9058),
            0.75: (0.8443, 0.8526, 0.8765, 0.9055),
            1.0: (0.8428, 0.8505, 0.8754, 0.9053),
            2.0: (0.8420, 0.8496, 0.8752, 0.9049),
        },
        "Laplace": {
            0.5: (0.5767, 0.6128, 0.6980, 0.7742),
            0.75: (0.5709, 0.6098, 0.6965, 0.7720),
            1.0: (0.5702, 0.6056, 0.6960, 0.7715),
            2.0: (0.5679, 0.6042, 0.6957, 0.7711),
        },
        "chi2": {
            0.5: (0.6270, 0.6521, 0.7245, 0.7926),
            0.75: (0.6165, 0.6448, 0.7230, 0.7920),
            1.0: (0.6118, 0.6432, 0.7226, 0.7916),
            2.0: (0.6113, 0.6421, 0.7221, 0.7911),
        },
    },
    "ridge": {
        "Student-t": {
            0.5: (0.7998, 0.8059, 0.8101, 0.8153),
            0.75: (0.7971, 0.7990, 0.8018, 0.8141),
            1.0: (0.7967, 0.7985, 0.7974, 0.8139),
            2.0: (0.7963, 0.7991, 0.7968, 0.8142),
        },
        "Laplace": {
            0.5: (0.5141, 0.5286, 0.5371, 0.5568),
            0.75: (0.5113, 0.5234, 0.5290, 0.5565),
            1.0: (0.5102, 0.5206, 0.5285, 0.5560),
            2.0: (0.5100, 0.5201, 0.5274, 0.5558),
        },
        "chi2": {
            0.5: (0.5541, 0.5701, 0.5766, 0.5937),
            0.75: (0.5522, 0.5621, 0.5669, 0.5935),
            1.0: (0.5515, 0.5619, 0.5653, 0.5933),
            2.0: (0.5513, 0.5606, 0.5651, 0.5930),
        },
    },
}
PAPER_METHODS = ("CC", "UC", "DP-SGD", "DP-GD")


def _noise(rng, kind, size):
    if kind == "Student-t":
        return rng.standard_t(2, size)
    if kind == "Laplace":
        return rng.laplace(0.0, 1.0, size)
    return rng.chisquare(1, size) - 1.0


def make_data(task, noise, n_train, n_test, seed):
    """Return X_train, y_train, X_test, y_test for one repetition."""
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    X = rng.standard_normal((n, D))
    theta = rng.standard_normal(D) / np.sqrt(D)
    score = X @ theta + _noise(rng, noise, n)
    y = score if task == "ridge" else np.where(score >= 0, 1.0, -1.0)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def heldout_ratio(task, w, X, y):
    """Held-out loss at w over held-out loss at w = 0."""
    z = X @ w
    if task == "ridge":
        return np.mean((z - y) ** 2) / np.mean(y**2)
    return np.mean(np.logaddexp(0.0, -y * z)) / np.log(2.0)


def fit_one(task, algorithm, clip, eps, delta, epochs, X, y, seed):
    common = dict(
        epsilon=eps,
        delta=delta,
        algorithm=algorithm,
        clip_norm=clip,
        batch_size=200,
        max_iter=epochs,
        learning_rate="auto",
        fit_intercept=False,
        random_state=seed,
    )
    if task == "ridge":
        est = HeavyTailedDPRidge(alpha=0.0, **common)
    else:
        est = HeavyTailedDPLogistic(C=1e12, classes=np.array([-1.0, 1.0]), **common)
    est.fit(X, y)
    return np.ravel(est.coef_)


def run(task, n_train, n_test, epochs, reps):
    delta = 1.0 / (10 * n_train)
    res = {}  # (noise, method, eps) -> list of ratios
    for noise in NOISES:
        for r in range(reps):
            data_seed = 1000 * r + NOISES.index(noise) + (0 if task == "ridge" else 500)
            Xtr, ytr, Xte, yte = make_data(task, noise, n_train, n_test, data_seed)
            for label, (alg, clip) in METHODS.items():
                for eps in EPSILONS:
                    w = fit_one(task, alg, clip, eps, delta, epochs, Xtr, ytr, r)
                    ratio = heldout_ratio(task, w, Xte, yte)
                    res.setdefault((noise, label, eps), []).append(ratio)
    return res


def _mean(res, noise, label, eps):
    return float(np.mean(res[(noise, label, eps)]))


def summarize(task, res):
    """Facts for the written comparison, all computed from this run's results."""
    cells = [(noise, eps) for noise in NOISES for eps in EPSILONS]
    paper = PAPER[task]
    wins = [
        (noise, eps)
        for noise, eps in cells
        if _mean(res, noise, "AClip (UC)", eps) < _mean(res, noise, "DP-SGD", eps)
    ]

    def spread(label):
        # How much the error moves between the smallest and the largest epsilon.
        return max(
            _mean(res, n, label, EPSILONS[0]) - _mean(res, n, label, EPSILONS[-1])
            for n in NOISES
        )

    best = {
        (noise, eps): min(METHODS, key=lambda m: _mean(res, noise, m, eps))
        for noise, eps in cells
    }
    return {
        "total": len(cells),
        "wins": wins,
        "paper_wins": sum(paper[n][e][1] < paper[n][e][2] for n, e in cells),
        "aclip_spread": spread("AClip (UC)"),
        "dpsgd_spread": spread("DP-SGD"),
        "best": best,
    }


def comparison_text(task, facts):
    """One paragraph per task, every claim read off ``facts``."""
    total, wins = facts["total"], facts["wins"]
    lines = [
        f"* {task}: AClip (UC) < DP-SGD (λ=0.74) in {len(wins)}/{total} cells here "
        f"({', '.join(f'{n} ε={e}' for n, e in wins) or 'none'}); "
        f"UC < DP-SGD in {facts['paper_wins']}/{total} cells in the paper.",
        f"  Error range over ε from {EPSILONS[0]} to {EPSILONS[-1]} (largest over "
        f"the noises): AClip {facts['aclip_spread']:.4f}, DP-SGD "
        f"{facts['dpsgd_spread']:.4f}.",
    ]
    counts = {}
    for label in facts["best"].values():
        counts[label] = counts.get(label, 0) + 1
    lines.append(
        "  Best of our rows per cell: "
        + ", ".join(f"{label} {c}/{total}" for label, c in counts.items())
        + "."
    )
    return "\n".join(lines)


COMPARISON = """\
Reading. Both methods here are calibrated by the same RDP accountant, AClip with
the batch mean's true sensitivity 2*lambda (any clipped mean lies in the
lambda-ball, whatever the batch size; the paper's Theorem 2 leaves the constant
unspecified); the paper's AClip noise is about 2m times too small (m = 200) and
its DP-SGD noise was hand-tuned far above the z*lambda/m that per-example
clipping needs, so its tables do not compare the methods at equal privacy. An
error range over epsilon close to 0 means privacy noise is not what limits a
method: at lambda = 0.74, far below the row norm sqrt(d) ~ 4.5, per-example
clipping caps the weight of the misclassified or large-residual rows, and DP-SGD
converges to a biased fixed point (for logistic regression an over-confident
one, which can score worse than w = 0); the sqrt(d) row shows how much of that
is the clip level, not the method. AClip's single clip has a smaller bias but
carries noise of std 2*lambda*z on the averaged gradient, so it gains most as
epsilon grows. Our absolute errors are not comparable with the paper's: 10
epochs instead of 400, a few repetitions instead of 300, a data model of our
choosing (the paper's distributions of x and theta* are lost), and the
library's default step sizes (the paper's DP-SGD step, T^(-5/6)*0.373, is an
implicit early stop)."""


def print_tables(task, res, reps):
    name = "Logistic regression (LR)" if task == "logistic" else "Ridge regression (RR)"
    table = "Table 2" if task == "logistic" else "Table 4"
    print(f"\n### {name}: ours (mean ± std over {reps} repetitions)\n")
    print("| noise | method | " + " | ".join(f"ε={e}" for e in EPSILONS) + " |")
    print("|---|---|" + "---|" * len(EPSILONS))
    for noise in NOISES:
        for label in METHODS:
            cells = []
            for eps in EPSILONS:
                v = np.asarray(res[(noise, label, eps)])
                cells.append(f"{v.mean():.4f} ± {v.std():.4f}")
            print(f"| {noise} | {label} | " + " | ".join(cells) + " |")
    print(f"\n### {name}: paper, {table} (300 runs, 400 epochs)\n")
    print("| noise | method | " + " | ".join(f"ε={e}" for e in EPSILONS) + " |")
    print("|---|---|" + "---|" * len(EPSILONS))
    for noise in NOISES:
        for k, label in enumerate(PAPER_METHODS):
            cells = [f"{PAPER[task][noise][eps][k]:.4f}" for eps in EPSILONS]
            print(f"| {noise} | {label} | " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller, faster run")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--reps", type=int, default=None)
    args = parser.parse_args()
    n_train, n_test = (20_000, 5_000) if args.quick else (100_000, 20_000)
    epochs = args.epochs or (5 if args.quick else 10)
    reps = args.reps or (2 if args.quick else 3)
    warnings.simplefilter("ignore")  # e.g. convergence/privacy notes from sklearn

    print("## AClipped-dpSGD synthetic reproduction (Jin et al. 2024, Section 5)\n")
    print(
        f"n_train={n_train}, n_test={n_test}, d={D}, batch=200, epochs={epochs}, "
        f"reps={reps}, delta=1/(10 n); paper: n=100,000, 400 epochs, 300 runs. "
        "Metric: held-out loss / held-out loss at w = 0 (lower is better)."
    )
    t0 = time.perf_counter()
    facts = {}
    for task in ("logistic", "ridge"):
        res = run(task, n_train, n_test, epochs, reps)
        print_tables(task, res, reps)
        facts[task] = summarize(task, res)
    print("\n### Comparison\n")
    for task, f in facts.items():
        print(comparison_text(task, f))
    print("\n" + COMPARISON)
    print(f"\nTotal wall time: {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
