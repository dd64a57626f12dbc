"""Smoke run of the gallery: every ``examples/plot_*.py`` runs, cleanly.

Each example runs in its own interpreter (``sys.executable``), from an empty
temporary directory, with the non-interactive matplotlib backend, and with
``UserWarning`` (hence :class:`~skdpsco.exceptions.PrivacyLeakWarning`) and
``RuntimeWarning`` turned into errors: an example that means to show a warning
catches it itself. The 60 s per-example time budget is enforced by the
documentation build (``make docs``, run by ``.ci/run``), not here: timings belong
outside unit tests. The subprocess timeout only stops a hung run.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("plot_*.py"))

#: Hard stop for a hung example (seconds; each takes a few seconds).
TIMEOUT = 300.0


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
    proc = subprocess.run(
        cmd,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    output = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, f"{example.name} failed:\n{output}"
    assert list(tmp_path.iterdir()) == [], f"{example.name} wrote files"


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_without_matplotlib_ends_with_a_one_line_hint(example, tmp_path):
    # The examples extra missing: a one-line hint naming it, no traceback.
    block = (
        "import runpy, sys; sys.modules['matplotlib'] = None; "
        f"runpy.run_path({str(example)!r}, run_name='__main__')"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), env.get("PYTHONPATH")) if p
    )
    proc = subprocess.run(
        [sys.executable, "-c", block],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "This example draws with matplotlib: pip install 'skdpsco[examples]'"
    )
    assert proc.stdout == ""
