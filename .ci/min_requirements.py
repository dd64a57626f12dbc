"""The declared floors of pyproject.toml as pins, for the version-floor run.

``make test-min`` installs these in a second virtualenv and runs the suite there,
so a floor in ``[project] dependencies`` (and the test / examples / dask extras the
suite imports) is a version that is actually tested. ``name>=X.Y`` becomes
``name==X.Y.*``: the floor's release series, with its bug-fix releases.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The extras the suite itself imports (ruff is not run here: lint runs once).
EXTRAS = ("test", "examples", "dask")
SKIP = {"ruff"}


def _lists(text):
    """``{key: [quoted strings]}`` of the ``key = [...]`` lists in ``text`` (the
    dependency lists of pyproject.toml; tomllib is Python >= 3.11 only). A list
    ends at a ``]`` that ends its line: ``"dask[array]>=X"`` holds one too."""
    found = {}
    pattern = r"(?ms)^([A-Za-z_-]+)\s*=\s*\[(.*?)\]\s*$"
    for key, body in re.findall(pattern, text):
        found[key] = re.findall(r'"([^"]+)"', body)
    return found


def pins():
    text = (ROOT / "pyproject.toml").read_text()
    project = text.split("[project]", 1)[1].split("\n[tool.", 1)[0]
    main, extras = project.split("[project.optional-dependencies]", 1)
    specs = _lists(main)["dependencies"]
    for extra in EXTRAS:
        specs += _lists(extras)[extra]
    out = {}
    for spec in specs:
        match = re.fullmatch(
            r"([A-Za-z0-9_.-]+)(\[[A-Za-z0-9_,-]+\])?>=([0-9.]+)", spec.replace(" ", "")
        )
        if match is None:
            sys.exit(f"{spec!r}: every dependency needs a '>=' floor")
        name, extras, floor = match.groups()
        if name not in SKIP:
            out[name.lower()] = f"{name}{extras or ''}=={floor}.*"
    return sorted(out.values())


if __name__ == "__main__":
    print("\n".join(pins()))
