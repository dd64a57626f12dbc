"""Smoke run of the gallery: every ``examples/plot_*.py`` runs, cleanly and in time.

Each example runs in its own interpreter (``sys.executable``), from an empty
temporary directory, with the non-interactive matplotlib backend, and with
``UserWarning`` (hence :class:`~skdpsco.exceptions.PrivacyLeakWarning`) and
``RuntimeWarning`` turned into errors: an example that means to show a warning
catches it itself. The examples are small by design; the 60 s budget is the one the
documentation build enforces per example (``doc/conf.py``), and the subprocess
timeout only stops a hung run.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("plot_*.py"))

#: Wall-clock budget of one example (seconds), as in the documentation build.
TIME_BUDGET = 60.0
#: Hard stop for a hung example.
TIMEOUT = 120.0


def test_examples_are_found():
    assert EXAMPLES, "no examples/plot_*.py found"


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(example, tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), env.get("PYTHONPATH")) if p
    )
    cmd = [
        sys.executable,
        "-W",
        "error::UserWarning",
        "-W",
        "error::RuntimeWarning",
        str(example),
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    seconds = time.perf_counter() - t0
    output = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, f"{example.name} failed:\n{output}"
    assert seconds < TIME_BUDGET, (
        f"{example.name} took {seconds:.1f} s, over the {TIME_BUDGET:.0f} s budget"
    )
    assert list(tmp_path.iterdir()) == [], f"{example.name} wrote files"
