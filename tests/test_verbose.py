"""``verbose``: one progress line format for every estimator and iterative solver.

Every line a fit prints is one of three: the line of ``algorithm="auto"``'s choice,
a progress line ``[Name] algorithm='x': iteration t/T; epsilon spent a of b; about
S s left`` (epsilon in the user's units: the accountant's epsilon at the fit's
delta for what has run so far) and the release line. Public numbers only.
"""

import math
import re

import numpy as np
import pytest
from _helpers import dense_data, public_estimators

from skdpsco import (
    GaussianWidthDPRegressor,
    HeavyTailedDPLogistic,
    HeavyTailedDPRidge,
    SparseGradientDPClassifier,
    SparseGradientDPRegressor,
)
from skdpsco.privacy._accounting import gaussian_rho_budget, gdp_to_approx_dp

NUMBER = r"[0-9.e+-]+"
PROGRESS_LINE = re.compile(
    rf"^\[(?P<name>\w+)\] algorithm='(?P<algorithm>\w+)': iteration "
    rf"(?P<t>\d+)/(?P<T>\d+); epsilon spent (?P<spent>{NUMBER}) of "
    rf"(?P<total>{NUMBER}); about (?P<left>{NUMBER}) s left$"
)
RELEASE_LINE = re.compile(
    rf"^\[(?P<name>\w+)\] algorithm='(?P<algorithm>\w+)': released after \d+ "
    rf"iterations; epsilon spent (?P<spent>{NUMBER}) of (?P<total>{NUMBER})$"
)
AUTO_LINE = re.compile(r"^\[(?P<name>\w+)\] algorithm='auto' runs '\w+': .+$")


def _fit_lines(capsys, Est, **params):
    X, y_reg, y_clf = dense_data(n=600)
    est = Est(random_state=0, **params).fit(
        X, y_clf if Est._is_dp_classifier else y_reg
    )
    return est, capsys.readouterr().out.strip().splitlines()


def _progress(lines):
    """The progress lines' matches, every line checked against the three formats."""
    found = []
    for line in lines:
        match = PROGRESS_LINE.match(line)
        assert match or RELEASE_LINE.match(line) or AUTO_LINE.match(line), line
        if match:
            found.append(match)
    return found


def _check_lines(est, lines, epsilon):
    progress = _progress(lines)
    release = RELEASE_LINE.match(lines[-1])
    assert release and release["name"] == type(est).__name__
    for match in progress:
        assert match["name"] == type(est).__name__
        assert match["algorithm"] == release["algorithm"]
        assert float(match["total"]) == epsilon
        assert 0 <= int(match["t"]) <= int(match["T"])
    spent = [float(m["spent"]) for m in progress]
    assert spent == sorted(spent)
    if progress:
        assert spent[-1] <= float(release["spent"])
    assert not any("loss" in line or "gradient" in line for line in lines)
    return progress, release


@pytest.mark.parametrize("Est", public_estimators(), ids=lambda E: E.__name__)
def test_every_line_of_every_estimator_has_the_one_format(Est, capsys):
    est, lines = _fit_lines(capsys, Est, epsilon=2.0, verbose=1)
    progress, _ = _check_lines(est, lines, 2.0)
    # The default of each family: clipped GD (68 iterations at n = 600, a line
    # every 6 and the last), output perturbation (not iterative), phased SGD (596
    # steps in halving phases: a line at each phase crossing a tenth).
    family = Est.__name__[:11]
    expected = {"HeavyTailed": 12, "SparseGradi": 0, "GaussianWid": 6}[family]
    assert len(progress) == expected
    if progress:
        assert progress[-1]["t"] == progress[-1]["T"]


ITERATIVE = [
    (HeavyTailedDPRidge, "clipped_gd", {}),
    (HeavyTailedDPRidge, "smooth_sensitivity_gd", {}),
    (HeavyTailedDPLogistic, "dp_sgd", {}),
    (HeavyTailedDPRidge, "r_aclipped_sgd", {}),
    (SparseGradientDPRegressor, "projection_gd", {}),
    (SparseGradientDPClassifier, "bias_reduced_sgd", {}),
    (GaussianWidthDPRegressor, "mirror_descent", {"p": 1.5, "epsilon": 1.0}),
    (GaussianWidthDPRegressor, "phased_sgd", {}),
    (
        GaussianWidthDPRegressor,
        "shuffled_mirror_descent",
        {"fit_intercept": False, "epsilon": 1.0},
    ),
]


@pytest.mark.parametrize(
    "Est, algorithm, params", ITERATIVE, ids=lambda v: getattr(v, "__name__", v)
)
def test_iterative_solvers_report_progress(Est, algorithm, params, capsys):
    params = {"epsilon": 2.0, **params}
    est, lines = _fit_lines(capsys, Est, algorithm=algorithm, verbose=1, **params)
    progress, release = _check_lines(est, lines, params["epsilon"])
    assert 1 <= len(progress) <= 12
    if algorithm != "bias_reduced_sgd":  # a random (public) number of steps
        assert progress[-1]["t"] == progress[-1]["T"]
        # Everything planned has run: the release's epsilon, to the digits shown.
        assert progress[-1]["spent"] == release["spent"]


@pytest.mark.parametrize(
    "Est, algorithm, params", ITERATIVE[:3], ids=lambda v: getattr(v, "__name__", v)
)
def test_progress_changes_no_draw(Est, algorithm, params, capsys):
    quiet, _ = _fit_lines(capsys, Est, algorithm=algorithm, **params)
    loud, lines = _fit_lines(capsys, Est, algorithm=algorithm, verbose=2, **params)
    np.testing.assert_array_equal(quiet.coef_, loud.coef_)
    assert quiet.intercept_ == loud.intercept_
    assert len(lines) > 1


def test_epsilon_so_far_is_the_accountants_at_the_fits_delta(capsys):
    # No scaling, 10 Gaussian steps composed exactly (Gaussian DP): after t steps
    # mu_t = mu sqrt(t / T), reported as its epsilon at delta = 1e-5.
    _, lines = _fit_lines(
        capsys,
        HeavyTailedDPRidge,
        scaling="none",
        algorithm="clipped_gd",
        max_iter=10,
        epsilon=1.0,
        verbose=1,
    )
    progress = _progress(lines)
    assert [int(m["t"]) for m in progress] == list(range(1, 11))
    mu = math.sqrt(2.0 * gaussian_rho_budget(1.0, 1e-5, "gdp"))
    for m in progress:
        expected = gdp_to_approx_dp(mu * math.sqrt(int(m["t"]) / 10), 1e-5)
        assert float(m["spent"]) == pytest.approx(expected, rel=1e-3)
    assert float(progress[0]["spent"]) == pytest.approx(0.2845, abs=1e-4)
    assert progress[-1]["spent"] == "1"


def test_verbose_two_prints_every_iteration(capsys):
    _, lines = _fit_lines(
        capsys, HeavyTailedDPRidge, algorithm="catoni_gd", max_iter=30, verbose=2
    )
    progress = _progress(lines)
    assert [int(m["t"]) for m in progress] == list(range(1, 31))


@pytest.mark.parametrize(
    "Est, algorithm",
    [
        (SparseGradientDPRegressor, "output_perturbation"),
        (GaussianWidthDPRegressor, "objective_perturbation"),
    ],
)
def test_non_iterative_algorithms_print_the_release_line_only(Est, algorithm, capsys):
    est, lines = _fit_lines(capsys, Est, algorithm=algorithm, verbose=1)
    _check_lines(est, lines, 1.0)
    assert len(lines) == 1


@pytest.mark.parametrize("Est", public_estimators(), ids=lambda E: E.__name__)
def test_verbose_zero_prints_nothing(Est, capsys):
    _fit_lines(capsys, Est)
    assert capsys.readouterr().out == ""


def test_printed_epsilon_never_goes_down_over_several_targets(capsys):
    # The targets are fitted one after the other: each target's lines start from
    # what the previous ones spent, and the last line is the release's spend.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3))
    Y = X @ rng.normal(size=(3, 3)) + rng.normal(size=(500, 3))
    est = HeavyTailedDPRidge(epsilon=1.0, max_iter=10, verbose=1, random_state=0)
    est.fit(X, Y)
    spent = [
        float(m.group("spent"))
        for m in map(PROGRESS_LINE.match, capsys.readouterr().out.splitlines())
        if m
    ]
    assert len(spent) == 30
    assert all(b >= a for a, b in zip(spent, spent[1:], strict=False))
    assert spent[-1] == pytest.approx(est.privacy_spent_.epsilon, rel=1e-3)
