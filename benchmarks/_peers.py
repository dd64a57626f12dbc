"""diffprivlib, the peer library of the benchmark tables: loading it, and the cell
text that says why it is missing or fails (it does not import with every
scikit-learn release)."""

import importlib.metadata
import re

import sklearn

__all__ = ["diffprivlib_failure", "load_diffprivlib"]


def _short_error(exc):
    """First line of an exception, without the file path ImportError appends."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    text = re.sub(r" \([^()]*[/\\][^()]*\)$", "", text)
    return f"{type(exc).__name__}: {text}"[:160]


def diffprivlib_failure(exc):
    """Table text for a diffprivlib that is installed but fails here."""
    try:
        version = importlib.metadata.version("diffprivlib")
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    return (
        f"diffprivlib {version} fails with scikit-learn {sklearn.__version__}: "
        f"{_short_error(exc)}"
    )


def load_diffprivlib():
    """``((LogisticRegression, LinearRegression), None)`` or ``(None, why)``."""
    try:
        from diffprivlib.models import LinearRegression, LogisticRegression
    except ModuleNotFoundError as exc:
        if (exc.name or "diffprivlib").split(".")[0] == "diffprivlib":
            return None, "not installed (pip install diffprivlib)"
        return None, diffprivlib_failure(exc)
    except Exception as exc:  # e.g. scikit-learn internals it imports were removed
        return None, diffprivlib_failure(exc)
    return (LogisticRegression, LinearRegression), None
