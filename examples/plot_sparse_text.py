"""
=====================================================
Sparse, high-dimensional text: a private bag of words
=====================================================

Text classification with a bag-of-words representation has a huge vocabulary
(here 100,000 columns) but only a handful of words per document (here at most
20). :class:`~skdpsco.SparseGradientDPClassifier` is built for that shape: its
per-example gradients are as sparse as the rows, so the error its privacy noise
causes grows with the number of non-zeros per row and ``log(n_features)``, not
with the vocabulary size (Ghazi et al., output perturbation, Algorithm 6). It
takes a ``scipy.sparse`` CSR matrix and never densifies it: a dense copy of this
``X`` would take 16 GB.

The example fits it at several privacy budgets and compares accuracy and fit
time with scikit-learn's non-private :class:`~sklearn.linear_model.LogisticRegression`.
"""

# %%
# A synthetic corpus
# ------------------
#
# Each document has 20 tokens. Most come from a background vocabulary with
# Zipf-distributed word frequencies, shared by both classes; each token is, with
# probability 0.2, replaced by a word of its class's own topic vocabulary (3,000
# words per class). Rows are term counts scaled to unit l2 norm: a per-document
# transformation (like :class:`~sklearn.preprocessing.Normalizer`) that reads no
# other record, so it costs no privacy, unlike a scaler fitted on the corpus.
#
# ``random_state`` and the seeds are fixed for a reproducible page; in production
# leave ``random_state`` at ``None`` (anyone who knows the seed can subtract the
# noise).

import time
import tracemalloc

try:
    import matplotlib.pyplot as plt
except ImportError:  # the optional examples extra
    raise SystemExit(
        "This example draws with matplotlib: pip install 'skdpsco[examples]'"
    ) from None
import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from skdpsco import SparseGradientDPClassifier

N_FEATURES, TOKENS = 100_000, 20


def bag_of_words(n, topic_words=3_000, p_topic=0.2, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    zipf = 1.0 / np.arange(1, N_FEATURES + 1)
    background = rng.choice(N_FEATURES, size=(n, TOKENS), p=zipf / zipf.sum())
    topics = rng.permutation(N_FEATURES)[: 2 * topic_words].reshape(2, topic_words)
    zipf_topic = 1.0 / np.arange(1, topic_words + 1)
    topic_tokens = topics[
        y[:, None],
        rng.choice(topic_words, size=(n, TOKENS), p=zipf_topic / zipf_topic.sum()),
    ]
    words = np.where(rng.random((n, TOKENS)) < p_topic, topic_tokens, background)
    X = sp.csr_matrix(
        (np.ones(n * TOKENS), words.ravel(), np.arange(0, n * TOKENS + 1, TOKENS)),
        shape=(n, N_FEATURES),
    )
    X.sum_duplicates()  # repeated words become counts
    row_norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    return sp.diags(1.0 / row_norms) @ X, y


X, y = bag_of_words(25_000)
X_train, X_test, y_train, y_test = X[:20_000], X[20_000:], y[:20_000], y[20_000:]
csr_bytes = X_train.data.nbytes + X_train.indices.nbytes + X_train.indptr.nbytes
print(
    f"X_train: {X_train.shape[0]:,} x {X_train.shape[1]:,} CSR, "
    f"{X_train.nnz / X_train.shape[0]:.1f} non-zeros per row on average "
    f"(at most {X_train.getnnz(axis=1).max()}), {csr_bytes / 1e6:.1f} MB "
    f"(dense: {X_train.shape[0] * X_train.shape[1] * 8 / 1e9:.0f} GB)"
)

# %%
# Public parameters
# -----------------
#
# The estimator's noise is calibrated to two bounds that must be *declared*, not
# read from the data: ``sparsity`` (at most 20 distinct words per document, a
# property of how the documents were tokenised) and ``row_norm_bound`` (1, since
# every row was normalised). A row that broke them would be mapped into them by a
# fixed per-row rule (``sparsity_enforcement``), in ``fit`` and ``predict`` alike,
# so a wrong declaration costs accuracy, never privacy. ``coef_norm_bound`` is
# the assumed norm of a good model; it sets the automatic L2 penalty (a larger
# value means less bias, more noise and a longer solve).

private_params = dict(
    sparsity=TOKENS, row_norm_bound=1.0, coef_norm_bound=1.0, delta=1e-6
)

t0 = time.perf_counter()
reference = LogisticRegression(solver="liblinear").fit(X_train, y_train)
ref_time = time.perf_counter() - t0
ref_score = reference.score(X_test, y_test)
print(f"non-private LogisticRegression: accuracy {ref_score:.3f}, {ref_time:.2f} s")

EPSILONS = [0.5, 1.0, 2.0, 8.0]
scores, fit_times = [], []
for eps in EPSILONS:
    clf = SparseGradientDPClassifier(epsilon=eps, random_state=0, **private_params)
    t0 = time.perf_counter()
    clf.fit(X_train, y_train)
    fit_times.append(time.perf_counter() - t0)
    scores.append(clf.score(X_test, y_test))
    print(
        f"SparseGradientDPClassifier epsilon={eps:3.1f}: accuracy {scores[-1]:.3f}, "
        f"{fit_times[-1]:.2f} s, spent epsilon={clf.privacy_spent_.epsilon:.3f}, "
        f"noise std per coefficient {clf.noise_scale_:.2g}"
    )

# %%
# X stays sparse
# --------------
#
# One more fit under :mod:`tracemalloc` measures the peak memory that NumPy and
# SciPy allocate during ``fit``: a small multiple of the CSR matrix, nowhere near
# the 16 GB of a dense copy. (The released ``coef_`` is dense, 100,000 floats:
# every coordinate carries noise.)

tracemalloc.start()
SparseGradientDPClassifier(epsilon=1.0, random_state=0, **private_params).fit(
    X_train, y_train
)
peak = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(f"peak memory allocated in fit: {peak / 1e6:.1f} MB, {peak / csr_bytes:.1f}x X")

# %%
# Accuracy and fit time
# ---------------------
#
# Accuracy climbs with the budget toward the non-private model. The fit is a
# certified solve of the regularised problem followed by Gaussian noise on the
# solution; the timings are those of this run of the page.

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
ax1.plot(EPSILONS, scores, "o-", label="SparseGradientDPClassifier")
ax1.axhline(ref_score, color="k", linestyle="--", label="LogisticRegression")
ax1.axhline(0.5, color="gray", linestyle=":", label="chance")
ax1.set_xscale("log")
ax1.set_xticks(EPSILONS, labels=[f"{e:g}" for e in EPSILONS])
ax1.minorticks_off()
ax1.set_xlabel("epsilon (delta = 1e-6)")
ax1.set_ylabel("test accuracy")
ax1.set_title("Accuracy, 100,000-word vocabulary")
ax1.legend(loc="lower right")

labels = ["LogisticRegression\n(non-private)"] + [f"eps={e:g}" for e in EPSILONS]
ax2.bar(labels, [ref_time] + fit_times, color=["gray"] + ["C0"] * len(EPSILONS))
ax2.set_ylabel("fit time (s)")
ax2.set_title("Fit time")
fig.tight_layout()
plt.show()
